/* Setting up and tearing down the NVMe tier: options, the driver probe, the
 * swap file and fork handling; the one state struct, spill_g, lives here. */
#include <errno.h>
#include <string.h>

#include "move.h"
#include "spill.h"
#include "spill_int.h"
#include "driver.h"
#include "log.h"
#include "options.h"
#include "locks.h"

/* VX_NVME_ENGINE's value is passed to nvme/ as its engine: the two lists
 * (choices.def, nvme.h) must stay in one order. */
_Static_assert(VX_NVME_ENGINE_AUTO == (int)NVME_ENGINE_AUTO &&
                   VX_NVME_ENGINE_URING == (int)NVME_ENGINE_URING &&
                   VX_NVME_ENGINE_POOL == (int)NVME_ENGINE_POOL,
               "choices.def NVME_ENGINE and nvme_engine_t differ");

struct spill_state spill_g = {.mu = PTHREAD_MUTEX_INITIALIZER, .pin_once = PTHREAD_ONCE_INIT};

static void nvme_say(void *arg, const char *msg) {
  (void)arg;
  vx_log(VX_LOG_WARN, "NVMe tier: %s", msg);
}

// ---- fork ----

void spill_atfork_prepare(void) {
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
}
void spill_atfork_parent(void) {
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
}
/* The child shares the parent's swap file offsets but not its driver state:
 * the tier is off there (spilled contents stay the parent's). */
void spill_atfork_child(void) {
  pthread_mutex_init(&spill_g.mu, NULL);
  if (spill_g.swap) nvme_swap_abandon(spill_g.swap);
  spill_g.swap = NULL;
  spill_order_fork_child();
  __atomic_store_n(&spill_g.armed, 0, __ATOMIC_RELAXED);
}

// ---- init / fini ----

/* VX_NVME_ENGINE's choices (choices.def) are nvme_engine_t's values, in
 * order: open_swap casts one into the other (test_options.c checks the
 * names too). */
_Static_assert((int)VX_NVME_ENGINE_AUTO == (int)NVME_ENGINE_AUTO &&
                   (int)VX_NVME_ENGINE_URING == (int)NVME_ENGINE_URING &&
                   (int)VX_NVME_ENGINE_POOL == (int)NVME_ENGINE_POOL,
               "choices.def's NVME_ENGINE list is nvme/nvme.h's engine enum");

static int open_swap(void) {
  nvme_config_t cfg = {.dir = vx_opt.NVME_DIR.s,
                       .limit = vx_size_resolve(&vx_opt.NVME_LIMIT, 0),
                       .qd = (int)vx_opt.NVME_QD,
                       .engine = (nvme_engine_t)vx_opt.NVME_ENGINE,
                       .chunk = NVME_CHUNK_DEFAULT,
                       .log = nvme_say};
  if (cfg.qd <= 0 || cfg.qd > NVME_QD_MAX) cfg.qd = NVME_QD_DEFAULT;
  return nvme_swap_open(&cfg, &spill_g.swap);
}

int spill_init(void) {
  spill_g.host_limit = vx_size_resolve(&vx_opt.HOST_LIMIT, 0);
  if (!vx_opt.NVME_DIR.s[0]) {
    if (spill_g.host_limit)
      vx_log(VX_LOG_INFO, "VX_HOST_LIMIT needs VX_NVME_DIR (somewhere to spill to): not enforced");
    return 0;
  }
  if (!VX_REAL_FN(cuMemDiscardBatchAsync)) {
    vx_log(VX_LOG_WARN, "driver %s lacks cuMemDiscardBatchAsync (13.0): NVMe tier off",
           move_driver());
    return -ENOSYS;
  }
  /* A launch vx cannot see could read a chunk in the swap (move_probe said
   * so once). */
  if (!move_layouts()) return -ENOSYS;
  int rc = open_swap();
  if (rc) {
    vx_log(VX_LOG_WARN, "cannot open a swap file in VX_NVME_DIR=%s (%s): NVMe tier off",
           vx_opt.NVME_DIR.s, strerror(-rc));
    return rc;
  }
  __atomic_store_n(&spill_g.armed, 1, __ATOMIC_RELEASE);
  return 0;
}

void spill_fini(void) {
  if (!spill_armed()) return;
  __atomic_store_n(&spill_g.armed, 0, __ATOMIC_RELEASE);
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
  spill_stats_sync_locked(0);
  spill_drop_all_locked();
  spill_bounce_forget_locked();
  nvme_swap_close(spill_g.swap);
  spill_g.swap = NULL;
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
}
