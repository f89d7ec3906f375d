/* Snapshot order: which streams and contexts used an allocation since its
 * last snapshot, and the wait for them before its chunks are copied out.
 *
 * A thread that makes ranges resident (spill.c touch_locked) notes their
 * records in a thread-local list; when its operation is enqueued
 * (spill_order_enqueued: the launch hooks with the stream, the copy hooks
 * without one) the records get the bit of a "user": a (context, stream)
 * pair with an event vx records on that stream after the operation, or a
 * (context, any stream) pair for operations whose stream vx was not told.
 * Until then the chunks are pinned (spill_pin.c), so no spill can come in
 * between.  A spill (spill_io.c) waits for every user of a victim's record:
 * an event of the spilling thread's own context is waited for, one of
 * another context (another thread, another device) is only queried, and
 * the chunk stays if its work is still in flight (it is not cold: a kernel
 * is using it); a whole context is synchronised, pushed if it is not the
 * current one, only while no capture is in progress.  Where vx cannot know
 * (the user table full, an event that could not be recorded) the record is
 * marked lost and never spilled, said once. */
#include <errno.h>
#include <string.h>

#include "capture.h"
#include "spill.h"
#include "spill_int.h"
#include "spill_order.h"
#include "driver.h"
#include "log.h"
#include "locks.h"

#define ORDER_PENDING 64 /* records one thread's operation can note */

typedef struct order_user {
  CUcontext ctx;
  CUstream s; /* unused when any */
  int any;    /* 1: every stream of ctx (a whole-context wait) */
  CUevent ev; /* recorded on s after each operation (any == 0) */
} order_user_t;

/* under spill_g.mu; events are never destroyed (a context's end takes its
 * own), so at most SPILL_ORDER_USERS are ever made */
static order_user_t users[SPILL_ORDER_USERS];
static int nusers;

typedef struct order_pend {
  int all; /* more than ORDER_PENDING: every record counts */
  CUdeviceptr base[ORDER_PENDING];
  uint64_t gen[ORDER_PENDING];
} order_pend_t;

/* The records the thread's current operation made resident.  The count is
 * the launch hooks' one load (initial-exec); the 1 KiB list is in the
 * default TLS model, which the static TLS block need not make room for. */
static __thread int pend_n __attribute__((tls_model("initial-exec")));
static __thread order_pend_t pend;

// ---- noting uses ----

void spill_order_touch_locked(const spill_rec_t *r) {
  for (int i = 0; i < pend_n; i++)
    if (pend.base[i] == r->base && pend.gen[i] == r->gen) return;
  if (pend_n == ORDER_PENDING) {
    pend.all = 1; /* pend_n stays nonzero */
    return;
  }
  pend.base[pend_n] = r->base;
  pend.gen[pend_n++] = r->gen;
}

static int user_find_locked(CUcontext ctx, CUstream s, int any) {
  for (int i = 0; i < nusers; i++)
    if (users[i].ctx == ctx && users[i].any == any && (any || users[i].s == s)) return i;
  return -1;
}

/* The user (ctx, s) or (ctx, any stream), made if new: its event (made
 * before the lock) is in *ev; -1 when the table is full.  An entry never
 * changes once in the table, so *ev may be used after the unlock. */
static int user_get(CUcontext ctx, CUstream s, int any, CUevent *ev) {
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
  int u = user_find_locked(ctx, s, any);
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
  CUevent mine = NULL;
  if (u < 0 && !any && VX_CALL(cuEventCreate, &mine, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
    return -1;
  if (u < 0) {
    vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
    u = user_find_locked(ctx, s, any); /* another thread's may have come in */
    if (u < 0 && nusers < SPILL_ORDER_USERS) {
      users[nusers] = (order_user_t){.ctx = ctx, .s = s, .any = any, .ev = mine};
      u = nusers++;
      mine = NULL;
    }
    vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
  }
  if (mine) VX_CALL(cuEventDestroy_v2, mine);
  if (u >= 0) *ev = users[u].ev;
  return u;
}

/* 0 when an event recorded on s now would follow the operation just
 * enqueued there; 1 when the context as a whole must stand for it: a
 * per-thread default stream is one stream per thread, which one event
 * cannot follow; s captures (or may: the query failed), so the launch was
 * recorded, not run, and a record there would join the graph. */
static int whole_context(CUstream s) {
  if (s == CU_STREAM_PER_THREAD) return 1;
  if (!vx_capture_active()) return 0;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  return VX_CALL(cuStreamIsCapturing, s, &st) != CUDA_SUCCESS ||
         st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static void mark_locked(uint64_t bit) {
  spill_rec_t *r, *tmp;
  if (pend.all) {
    HASH_ITER(hh, spill_g.recs, r, tmp) r->users |= bit;
    return;
  }
  for (int i = 0; i < pend_n; i++) {
    r = spill_rec_find_locked(pend.base[i]);
    if (r && r->gen == pend.gen[i]) r->users |= bit;
  }
}

/* The event is recorded outside the spill lock: the records it covers are
 * pinned until they are marked (after the record), so no spill can choose
 * them in between; a concurrent record by another thread only makes a
 * wait cover more. */
void spill_order_enqueued(CUstream s, int how) {
  if (!pend_n) return;
  if (how == SPILL_ORDER_NONE || !spill_armed()) {
    pend_n = pend.all = 0;
    return;
  }
  CUcontext ctx = NULL;
  CUevent ev = NULL;
  int u = -1;
  if (VX_CALL(cuCtxGetCurrent, &ctx) == CUDA_SUCCESS && ctx) {
    int any = how != SPILL_ORDER_STREAM || whole_context(s);
    u = user_get(ctx, s, any, &ev);
    /* failed (a stream of another context: a CUkernel runs in the
     * stream's): the current context's wait would not cover it */
    if (u >= 0 && !any && VX_CALL(cuEventRecord, ev, s) != CUDA_SUCCESS) u = -1;
  }
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
  mark_locked(u >= 0 ? (uint64_t)1 << u : SPILL_ORDER_LOST);
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
  pend_n = pend.all = 0;
  if (u < 0)
    VX_LOG_ONCE(VX_LOG_WARN,
                "more than %d streams and contexts use vx's memory (or an event failed): their "
                "allocations stay out of the NVMe swap",
                SPILL_ORDER_USERS);
}

// ---- waiting for them ----

/* 0 when the work of u enqueued so far is done; -EBUSY: another context's
 * work is still in flight; -EAGAIN: a whole-context wait during a capture;
 * -EIO: the driver failed. */
static int user_wait_locked(const order_user_t *u, CUcontext cur) {
  if (u->any) {
    /* cuCtxSynchronize invalidates a capture in every mode */
    if (vx_capture_active()) return -EAGAIN;
    if (u->ctx != cur && VX_CALL(cuCtxPushCurrent_v2, u->ctx) != CUDA_SUCCESS) return -EIO;
    CUresult r = VX_CALL(cuCtxSynchronize);
    if (u->ctx != cur) {
      CUcontext was;
      VX_CALL(cuCtxPopCurrent_v2, &was);
    }
    return r == CUDA_SUCCESS ? 0 : -EIO;
  }
  CUresult r = VX_CALL(cuEventQuery, u->ev);
  if (r == CUDA_SUCCESS) return 0;
  if (r != CUDA_ERROR_NOT_READY) return -EIO;
  /* Another context's kernel may wait for this thread (a host function, a
   * stream wait): never block on it while holding the spill lock. */
  if (u->ctx != cur) return -EBUSY;
  return VX_CALL(cuEventSynchronize, u->ev) == CUDA_SUCCESS ? 0 : -EIO;
}

int spill_order_wait_locked(spill_rec_t *r) {
  if (!r->users) return 0;
  if (r->users & SPILL_ORDER_LOST) return -EBUSY;
  CUcontext cur = NULL;
  VX_CALL(cuCtxGetCurrent, &cur);
  int rc = 0;
  for (int i = 0; i < nusers; i++) {
    uint64_t bit = (uint64_t)1 << i;
    if (!(r->users & bit)) continue;
    int e = user_wait_locked(&users[i], cur);
    if (!e)
      r->users &= ~bit;
    else if (!rc || e == -EIO)
      rc = e;
  }
  if (rc == -EIO)
    VX_LOG_ONCE(VX_LOG_WARN, "waiting for the work on an allocation failed: it stays in host RAM");
  return rc;
}

void spill_order_fork_child(void) {
  nusers = 0; /* the parent's events mean nothing here */
  memset(users, 0, sizeof users);
}
