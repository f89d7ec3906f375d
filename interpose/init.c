/* Start-up: options, the real driver, fork handlers; any failure turns vx
 * into a pure pass-through and says why once. */
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <unistd.h>

#include "budget.h"
#include "capture.h"
#include "defer.h"
#include "exec.h"
#include "launch.h"
#include "locks.h"
#include "move.h"
#include "ptrref.h"
#include "registry.h"
#include "secure.h"
#include "spill.h"
#include "live.h"
#include "report.h"
#include "timeline.h"
#include "trace_rec.h"
#include "vx.h"

int vx_state;
__thread int vx_tls_busy __attribute__((tls_model("initial-exec")));

static pthread_once_t vx_once = PTHREAD_ONCE_INIT;

static const char *vx_getenv(const char *name) {
  return getenv(name);
}

/* The fork handlers, one row per lock (or lock family), in core/locks.h's
 * rank order; registered once, with one pthread_atfork.  Prepare takes the
 * locks top to bottom (so no other thread is half-way through an update;
 * with VX_LOCK_CHECK the rank check verifies this list's order at every
 * fork), the parent releases them bottom to top, and the child re-creates
 * them bottom to top (its only thread has a new id; what they guard stays
 * valid there).  Locks in no row: LOCKS.md, "Fork". */
static const struct fork_row {
  int rank; /* VX_RANK_* of the lock the row's handlers take */
  void (*prepare)(void), (*parent)(void), (*child)(void);
} fork_rows[] = {
    {VX_RANK_ORDER, exec_order_atfork_prepare, exec_order_atfork_parent, exec_order_atfork_child},
    {VX_RANK_CAP, capture_atfork_prepare, capture_atfork_parent, capture_atfork_child},
    {VX_RANK_SPILL, spill_atfork_prepare, spill_atfork_parent, spill_atfork_child},
    {VX_RANK_TIMELINE, timeline_atfork_prepare, timeline_atfork_parent, timeline_atfork_child},
    {VX_RANK_GRAPH, graph_atfork_prepare, graph_atfork_parent, graph_atfork_child},
    {VX_RANK_PTRREF, ptrref_atfork_prepare, ptrref_atfork_parent, ptrref_atfork_child},
    {VX_RANK_EXEC, exec_atfork_prepare, exec_atfork_parent, exec_atfork_child},
    {VX_RANK_TRACE, trace_rec_atfork_prepare, trace_rec_atfork_parent, trace_rec_atfork_child},
    {VX_RANK_BUDGET, budget_atfork_prepare, budget_atfork_parent, budget_atfork_child},
    {VX_RANK_VMM, vmm_atfork_prepare, vmm_atfork_parent, vmm_atfork_child},
    {VX_RANK_PINNED, pinned_atfork_prepare, pinned_atfork_parent, pinned_atfork_child},
    {VX_RANK_DEFER, defer_atfork_prepare, defer_atfork_parent, defer_atfork_child},
    {VX_RANK_REG, reg_atfork_prepare, reg_atfork_parent, reg_atfork_child},
    {VX_RANK_STREAMS, NULL, NULL, move_atfork_child}, /* child only: forgets vx's streams */
};
#define FORK_ROWS ((int)(sizeof fork_rows / sizeof *fork_rows))

static void atfork_prepare(void) {
  for (int i = 0; i < FORK_ROWS; i++)
    if (fork_rows[i].prepare) fork_rows[i].prepare();
}
static void atfork_parent(void) {
  for (int i = FORK_ROWS - 1; i >= 0; i--)
    if (fork_rows[i].parent) fork_rows[i].parent();
}
static void atfork_child(void) {
  for (int i = FORK_ROWS - 1; i >= 0; i--)
    if (fork_rows[i].child) fork_rows[i].child();
  vx_lock_forget_all(); /* the locks the prepare took are new ones here */
  vx_report_atfork_child();
}

/* The rows are in rank order (the prepare's order is the lock order). */
static void fork_rows_check(void) {
#ifdef VX_LOCK_CHECK
  for (int i = 1; i < FORK_ROWS; i++)
    if (fork_rows[i].rank <= fork_rows[i - 1].rank) {
      vx_log(VX_LOG_ERROR, "init.c's fork list is out of rank order at row %d", i);
      abort();
    }
#endif
}

/* Returns the new state: 1 active, 2 pass-through. */
/* VX_LOG=info: what vx will do, in words (each device's budget is said
 * when it settles, at first use: tiers/budget.c). */
static void say_active(void) {
  if (vx_log_level() < VX_LOG_INFO) return;
  char policy[32], report[32], hmax[VX_SIZE_TEXT], hlim[VX_SIZE_TEXT], nlim[VX_SIZE_TEXT];
  char nvme[VX_OPT_STRING_MAX + 128];
  vx_option_format(&vx_opt, vx_option_find("VX_POLICY"), policy, sizeof policy);
  vx_option_format(&vx_opt, vx_option_find("VX_REPORT_MEMORY"), report, sizeof report);
  uint64_t host_max = budget_host_max();
  if (!spill_armed())
    snprintf(nvme, sizeof nvme, "off");
  else if (!vx_opt.HOST_LIMIT.set)
    snprintf(nvme, sizeof nvme, "in %s, unused while VX_HOST_LIMIT is empty", vx_opt.NVME_DIR.s);
  else
    snprintf(nvme, sizeof nvme, "in %s, up to %s, past %s of host RAM", vx_opt.NVME_DIR.s,
             vx_size_text(vx_opt.NVME_LIMIT.bytes, nlim),
             vx_size_text(vx_size_resolve(&vx_opt.HOST_LIMIT, 0), hlim));
  vx_log(VX_LOG_INFO,
         "active: policy %s; past each device's budget, managed memory backed by host RAM "
         "(%s%s); NVMe swap %s; memory reported to the program: %s",
         policy, host_max ? "at most " : "no cap", host_max ? vx_size_text(host_max, hmax) : "",
         nvme, report);
}

static int start_locked(void) {
  char err[512];
  if (vx_secure_exec()) { /* setuid/setgid: stay passive; read no VX_*, write nothing */
    vx_real_init();
    return 2;
  }
  if (vx_options_load(&vx_opt, vx_getenv, err, sizeof err)) {
    if (vx_opt.STRICT) {
      vx_log(VX_LOG_ERROR, "%s; VX_STRICT=1, so the program stops here", err);
      _exit(1); /* the one exit in vx: the user asked for it with VX_STRICT=1 */
    }
    vx_log(VX_LOG_ERROR, "%s; vx is disabled (everything passes through)", err);
    vx_real_init();
    return 2;
  }
  vx_log_set_level(vx_opt.LOG);
  int rc = vx_real_init();
  if (vx_opt.DISABLE) {
    vx_log(VX_LOG_INFO, "VX_DISABLE=1: everything passes through");
    return 2;
  }
  if (rc) {
    if (vx_opt.STRICT) {
      vx_log(VX_LOG_ERROR, "cannot load libcuda.so.1; VX_STRICT=1, so the program stops here");
      _exit(1);
    }
    vx_log(VX_LOG_ERROR, "cannot load libcuda.so.1; vx is disabled (everything passes through)");
    return 2;
  }
  fork_rows_check();
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  move_probe();       /* what an older driver lacks, one line each */
  spill_init();       /* the NVMe tier; off (said why) or on, never fatal */
  budget_host_init(); /* VX_HOST_MAX from MemAvailable at start-up */
  exec_init();
  vx_report_init(); /* a path that cannot work is said now, not at exit */
  timeline_every(vx_report_refresh, (unsigned)vx_opt.REPORT_PERIOD);
  timeline_init(); /* VX_REPORT: the sampler thread, which also rewrites the report */
  if (vx_opt.STATS) obs_live_start();
  say_active();
  return 1;
}

static void start_once(void) {
  vx_tls_busy++;
  int s = start_locked();
  vx_tls_busy--;
  __atomic_store_n(&vx_state, s, __ATOMIC_RELEASE);
}

int vx_start(void) {
  if (vx_tls_busy) /* reached from inside start-up on this thread */
    return 0;
  pthread_once(&vx_once, start_once);
  return __atomic_load_n(&vx_state, __ATOMIC_ACQUIRE) == 1;
}

__attribute__((destructor)) static void vx_fini(void) {
  if (__atomic_load_n(&vx_state, __ATOMIC_ACQUIRE) != 1) return;
  exec_fini();
  timeline_fini();
  vx_report_write();
  spill_fini();
}
