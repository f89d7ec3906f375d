/* Setting up and tearing down the NVMe tier: options, the driver probe, the
 * swap file, the pinned bounce ring, counters and fork handling. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "move.h"
#include "spill.h"
#include "spill_int.h"
#include "vx.h"

/* VX_NVME_ENGINE's value is passed to nvme/ as its engine: the two lists
 * (choices.def, nvme.h) must stay in one order. */
_Static_assert(VX_NVME_ENGINE_AUTO == (int)NVME_ENGINE_AUTO &&
                   VX_NVME_ENGINE_URING == (int)NVME_ENGINE_URING &&
                   VX_NVME_ENGINE_POOL == (int)NVME_ENGINE_POOL,
               "choices.def NVME_ENGINE and nvme_engine_t differ");

static void nvme_say(void *arg, const char *msg) {
  (void)arg;
  vx_log(VX_LOG_WARN, "NVMe tier: %s", msg);
}

// ---- counters ----

#define SYNC_SUM(field, ctr)                                                                       \
  do {                                                                                             \
    if (st.field > spill_g.seen.field) ctr_add(dev, VX_CTR_##ctr, st.field - spill_g.seen.field);  \
  } while (0)

void spill_stats_sync_locked(int dev) {
  nvme_stats_t st;
  if (!spill_g.swap) return;
  nvme_stats_get(spill_g.swap, &st);
  SYNC_SUM(write_bytes, nvme_write_bytes);
  SYNC_SUM(read_bytes, nvme_read_bytes);
  SYNC_SUM(write_ns, nvme_write_ns);
  SYNC_SUM(read_ns, nvme_read_ns);
  SYNC_SUM(retries, nvme_retries);
  SYNC_SUM(fallbacks, nvme_fallbacks);
  SYNC_SUM(checksum_failures, nvme_checksum_failures);
  SYNC_SUM(write_failures, nvme_write_failures);
  SYNC_SUM(read_failures, nvme_read_failures);
  SYNC_SUM(enospc, nvme_enospc);
  spill_g.seen = st;
}

// ---- bounce buffers ----

void spill_bounce_ensure_locked(void) {
  if (spill_g.bounce_tried) return;
  spill_g.bounce_tried = 1;
  int n = 0;
  vx_capture_relax_t rx; /* pinned allocation: a potentially unsafe call */
  vx_capture_relax_begin(&rx);
  for (; n < SPILL_BOUNCE; n++)
    if (VX_CALL(cuMemAllocHost_v2, &spill_g.bounce[n], NVME_CHUNK_DEFAULT) != CUDA_SUCCESS) break;
  int rc =
      n >= 2 ? nvme_register_buffers(spill_g.swap, spill_g.bounce, n, NVME_CHUNK_DEFAULT) : -ENOMEM;
  if (rc == 0) {
    spill_g.nbounce = n;
    vx_capture_relax_end(&rx);
    return;
  }
  while (n > 0)
    VX_CALL(cuMemFreeHost, spill_g.bounce[--n]);
  vx_capture_relax_end(&rx);
  VX_LOG_ONCE(VX_LOG_INFO, "no pinned bounce buffers (%s): the NVMe tier uses pageable ones",
              strerror(-rc));
}

/* At exit the driver may already be going away: the pinned ring is only
 * taken back from nvme, not freed (it stays reachable from spill_g). */
static void bounce_forget_locked(void) {
  if (spill_g.nbounce) nvme_unregister_buffers(spill_g.swap);
}

// ---- per-thread pins ----

static pthread_key_t pin_key;
static pthread_once_t pin_once = PTHREAD_ONCE_INIT;
static int pin_key_ok;

static void pin_thread_exit(void *arg) {
  pthread_mutex_lock(&spill_g.mu);
  spill_unpin_all_locked(arg);
  pthread_mutex_unlock(&spill_g.mu);
  free(arg);
}

static void pin_key_make(void) {
  pin_key_ok = pthread_key_create(&pin_key, pin_thread_exit) == 0;
}

spill_pinset_t *spill_pinset(void) {
  pthread_once(&pin_once, pin_key_make);
  if (!pin_key_ok) return NULL;
  spill_pinset_t *ps = pthread_getspecific(pin_key);
  if (ps) return ps;
  ps = calloc(1, sizeof *ps);
  if (ps && pthread_setspecific(pin_key, ps)) {
    free(ps);
    ps = NULL;
  }
  return ps;
}

// ---- fork ----

static void atfork_prepare(void) {
  pthread_mutex_lock(&spill_g.mu);
}
static void atfork_parent(void) {
  pthread_mutex_unlock(&spill_g.mu);
}
/* The child shares the parent's swap file offsets but not its driver state:
 * the tier is off there (spilled contents stay the parent's). */
static void atfork_child(void) {
  pthread_mutex_init(&spill_g.mu, NULL);
  if (spill_g.swap) nvme_swap_abandon(spill_g.swap);
  spill_g.swap = NULL;
  __atomic_store_n(&spill_g.armed, 0, __ATOMIC_RELAXED);
}

// ---- init / fini ----

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
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  __atomic_store_n(&spill_g.armed, 1, __ATOMIC_RELEASE);
  return 0;
}

void spill_fini(void) {
  if (!spill_armed()) return;
  __atomic_store_n(&spill_g.armed, 0, __ATOMIC_RELEASE);
  pthread_mutex_lock(&spill_g.mu);
  spill_stats_sync_locked(0);
  spill_drop_all_locked();
  bounce_forget_locked();
  nvme_swap_close(spill_g.swap);
  spill_g.swap = NULL;
  pthread_mutex_unlock(&spill_g.mu);
}
