/* sim_event.c: events: record on a stream, wait from another stream,
 * synchronise, query, elapsed virtual time. */
#include <stdlib.h>

#include "sim_internal.h"

#define EVENT_MAGIC 0x45564e54u

static void event_release(sim_tl *tl) {
  sim_event *e = (sim_event *)tl;
  pthread_mutex_destroy(&e->tl.mu);
  pthread_cond_destroy(&e->tl.cv);
  free(e);
}

static CUresult event_get(CUevent h, sim_event **out) {
  if (!h || !sim_handle_ok(SIM_H_EVENT, h)) return CUDA_ERROR_INVALID_HANDLE;
  *out = (sim_event *)h;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuEventCreate(CUevent *ph, unsigned int Flags) {
  SIM_ENTER_INIT(cuEventCreate);
  if (!ph || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                  CU_EVENT_INTERPROCESS)))
    return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  sim_event *e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  sim_tl_init(&e->tl, event_release);
  e->magic = EVENT_MAGIC;
  e->flags = Flags;
  e->ctx = c;
  sim_handle_add(SIM_H_EVENT, e);
  *ph = (CUevent)e;
  return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent h) {
  sim_event *e;
  CUresult r = event_get(h, &e);
  if (r != CUDA_SUCCESS) return r;
  sim_handle_del(SIM_H_EVENT, e);
  sim_tl_unref(&e->tl);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuEventDestroy_v2(CUevent h) {
  SIM_ENTER_INIT(cuEventDestroy_v2);
  return event_destroy(h);
}

SIM_API CUresult cuEventDestroy(CUevent h) {
  SIM_ENTER_INIT(cuEventDestroy);
  return event_destroy(h);
}

static CUresult event_record(CUevent h, CUstream hs, int ptds) {
  sim_event *e;
  CUresult r = event_get(h, &e);
  if (r != CUDA_SUCCESS) return r;
  sim_stream *s;
  r = sim_stream_resolve(hs, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  if (s->ctx != e->ctx) return CUDA_ERROR_INVALID_HANDLE; /* cuda.h: "from the same context" */
  pthread_mutex_lock(&s->tl.mu);
  int capturing = s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  pthread_mutex_unlock(&s->tl.mu);
  if (capturing) { /* captured records only join streams */
    __atomic_store_n(&e->captured, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
  }
  sim_op *op = sim_op_new(OP_RECORD);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&e->tl.mu);
  __atomic_store_n(&e->captured, 0, __ATOMIC_RELAXED);
  uint64_t gen = ++e->gen;
  e->tl.enq = gen;
  pthread_mutex_unlock(&e->tl.mu);
  sim_tl_ref(&e->tl);
  op->u.rec.ev = e;
  op->u.rec.gen = gen;
  return sim_enqueue(s, op);
}

SIM_API CUresult cuEventRecord(CUevent h, CUstream hs) {
  SIM_ENTER_INIT(cuEventRecord);
  return event_record(h, hs, 0);
}

SIM_API CUresult cuEventRecord_ptsz(CUevent h, CUstream hs) {
  SIM_ENTER_INIT(cuEventRecord_ptsz);
  return event_record(h, hs, 1);
}

SIM_API CUresult cuEventRecordWithFlags(CUevent h, CUstream hs, unsigned int flags) {
  SIM_ENTER_INIT(cuEventRecordWithFlags);
  (void)flags;
  return event_record(h, hs, 0);
}

SIM_API CUresult cuEventRecordWithFlags_ptsz(CUevent h, CUstream hs, unsigned int flags) {
  SIM_ENTER_INIT(cuEventRecordWithFlags_ptsz);
  (void)flags;
  return event_record(h, hs, 1);
}

/* Completes record gen of e at virtual time t (worker side). */
void sim_event_complete(sim_event *e, uint64_t gen, uint64_t t) {
  pthread_mutex_lock(&e->tl.mu);
  e->tl.ring[gen % SIM_RING] = t;
  if (gen > e->tl.done) {
    e->tl.done = gen;
    e->tl.t = t;
  }
  pthread_cond_broadcast(&e->tl.cv);
  pthread_mutex_unlock(&e->tl.mu);
}

SIM_API CUresult cuEventSynchronize(CUevent h) {
  SIM_ENTER_INIT(cuEventSynchronize);
  SIM_CAPTURE_UNSAFE();
  sim_event *e;
  CUresult r = event_get(h, &e);
  if (r != CUDA_SUCCESS) return r;
  if (__atomic_load_n(&e->captured, __ATOMIC_RELAXED)) return CUDA_ERROR_CAPTURED_EVENT;
  pthread_mutex_lock(&e->tl.mu);
  uint64_t gen = e->gen;
  pthread_mutex_unlock(&e->tl.mu);
  uint64_t t = sim_tl_wait(&e->tl, gen);
  sim_host_sync(e->ctx->dev, t);
  return sim_ctx_check(e->ctx) == CUDA_ERROR_ILLEGAL_ADDRESS ? CUDA_ERROR_ILLEGAL_ADDRESS
                                                             : CUDA_SUCCESS;
}

SIM_API CUresult cuEventQuery(CUevent h) {
  SIM_ENTER_INIT(cuEventQuery);
  SIM_CAPTURE_UNSAFE();
  sim_event *e;
  CUresult r = event_get(h, &e);
  if (r != CUDA_SUCCESS) return r;
  if (__atomic_load_n(&e->captured, __ATOMIC_RELAXED)) return CUDA_ERROR_CAPTURED_EVENT;
  pthread_mutex_lock(&e->tl.mu);
  int done = e->tl.done >= e->gen;
  pthread_mutex_unlock(&e->tl.mu);
  return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b) {
  sim_event *s, *e;
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  if (event_get(a, &s) || event_get(b, &e)) return CUDA_ERROR_INVALID_HANDLE;
  if ((s->flags | e->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&s->tl.mu);
  uint64_t sg = s->gen, sd = s->tl.done, st = s->tl.t;
  pthread_mutex_unlock(&s->tl.mu);
  pthread_mutex_lock(&e->tl.mu);
  uint64_t eg = e->gen, ed = e->tl.done, et = e->tl.t;
  pthread_mutex_unlock(&e->tl.mu);
  if (sg == 0 || eg == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (sd < sg || ed < eg) return CUDA_ERROR_NOT_READY;
  *ms = (float)(((double)et - (double)st) / 1e6);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  SIM_ENTER_INIT(cuEventElapsedTime_v2);
  return elapsed(ms, a, b);
}

SIM_API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  SIM_ENTER_INIT(cuEventElapsedTime);
  return elapsed(ms, a, b);
}

/* Waits that cross a capture's boundary.  A capturing stream may not wait
 * for work outside its capture (CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
 * invalidating it) unless CU_EVENT_WAIT_EXTERNAL says so.  A non-capturing
 * stream waiting for a captured event would join the capture in the real
 * driver; cross-stream capture is not modelled, so that is refused. */
static CUresult capture_wait_check(sim_stream *s, sim_event *e, unsigned flags, uint64_t gen,
                                   int *joined) {
  int captured = __atomic_load_n(&e->captured, __ATOMIC_RELAXED);
  pthread_mutex_lock(&s->tl.mu);
  int st = s->cap_status;
  CUresult r = CUDA_SUCCESS;
  if (st == CU_STREAM_CAPTURE_STATUS_ACTIVE && !captured && gen &&
      !(flags & CU_EVENT_WAIT_EXTERNAL)) {
    s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  } else if (st == CU_STREAM_CAPTURE_STATUS_NONE && captured) {
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  *joined = st == CU_STREAM_CAPTURE_STATUS_ACTIVE && captured;
  pthread_mutex_unlock(&s->tl.mu);
  return r;
}

static CUresult wait_event(CUstream hs, CUevent h, unsigned flags, int ptds) {
  sim_event *e;
  CUresult r = event_get(h, &e);
  if (r != CUDA_SUCCESS) return r;
  sim_stream *s;
  r = sim_stream_resolve(hs, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&e->tl.mu);
  uint64_t gen = e->gen;
  pthread_mutex_unlock(&e->tl.mu);
  int joined = 0; /* a captured event: the (linear) capture is already ordered */
  r = capture_wait_check(s, e, flags, gen, &joined);
  if (r != CUDA_SUCCESS || joined) return r;
  if (gen == 0) return CUDA_SUCCESS; /* never recorded: nothing to wait for */
  sim_op *op = sim_op_new(OP_NOP);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->deps = malloc(sizeof *op->deps);
  if (!op->deps) {
    sim_op_free(op);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  sim_tl_ref(&e->tl);
  op->deps[0] = (sim_dep){&e->tl, gen};
  op->ndeps = 1;
  return sim_enqueue(s, op);
}

SIM_API CUresult cuStreamWaitEvent(CUstream hs, CUevent h, unsigned int Flags) {
  SIM_ENTER_INIT(cuStreamWaitEvent);
  return wait_event(hs, h, Flags, 0);
}

SIM_API CUresult cuStreamWaitEvent_ptsz(CUstream hs, CUevent h, unsigned int Flags) {
  SIM_ENTER_INIT(cuStreamWaitEvent_ptsz);
  return wait_event(hs, h, Flags, 1);
}
