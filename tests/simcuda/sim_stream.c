/* sim_stream.c: streams: one worker thread per stream runs its queue in order;
 * legacy default-stream semantics, per-thread default streams, sync/query. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_internal.h"

#define STREAM_MAGIC 0x5354524du

static unsigned long long next_stream_id = 100;

// ---- timelines ----

void sim_tl_init(sim_tl *tl, void (*release)(sim_tl *)) {
  pthread_mutex_init(&tl->mu, NULL);
  pthread_cond_init(&tl->cv, NULL);
  tl->refs = 1;
  tl->release = release;
}

void sim_tl_ref(sim_tl *tl) { __atomic_add_fetch(&tl->refs, 1, __ATOMIC_RELAXED); }

void sim_tl_unref(sim_tl *tl) {
  if (__atomic_sub_fetch(&tl->refs, 1, __ATOMIC_ACQ_REL) == 0) tl->release(tl);
}

uint64_t sim_tl_wait(sim_tl *tl, uint64_t seq) {
  if (seq == 0) return 0;
  pthread_mutex_lock(&tl->mu);
  while (tl->done < seq) pthread_cond_wait(&tl->cv, &tl->mu);
  uint64_t t = tl->done - seq < SIM_RING ? tl->ring[seq % SIM_RING] : tl->t;
  pthread_mutex_unlock(&tl->mu);
  return t;
}

/* Marks item seq of tl complete at virtual time t. */
static void tl_complete(sim_tl *tl, uint64_t seq, uint64_t t) {
  pthread_mutex_lock(&tl->mu);
  tl->ring[seq % SIM_RING] = t;
  if (seq > tl->done) tl->done = seq;
  if (t > tl->t) tl->t = t;
  pthread_cond_broadcast(&tl->cv);
  pthread_mutex_unlock(&tl->mu);
}

// ---- the op log (SIMCUDA_OPLOG=path: one line per stream operation) ----

static pthread_mutex_t oplog_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *oplog;
static int oplog_state; /* atomic: 0 unread, 1 on, -1 off */

/* "stream kind issue ready end [prefetch: dir bytes]" in virtual ns, in the
 * order the workers ran them: a debugging aid for where a run's virtual
 * time goes (which stream waited for what). */
static void oplog_write(const sim_stream *s, const sim_op *op, uint64_t ready, uint64_t end) {
  pthread_mutex_lock(&oplog_mu);
  if (!__atomic_load_n(&oplog_state, __ATOMIC_RELAXED)) {
    const char *path = getenv("SIMCUDA_OPLOG");
    oplog = path && *path ? fopen(path, "w") : NULL;
    __atomic_store_n(&oplog_state, oplog ? 1 : -1, __ATOMIC_RELAXED);
  }
  if (__atomic_load_n(&oplog_state, __ATOMIC_RELAXED) > 0) {
    fprintf(oplog, "%llu %d %llu %llu %llu", (unsigned long long)s->id, op->kind,
            (unsigned long long)op->issue_t, (unsigned long long)ready, (unsigned long long)end);
    if (op->kind == OP_PREFETCH)
      fprintf(oplog, " %s %zu", op->u.pf.loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? "up" : "down",
              op->u.pf.n);
    fputc('\n', oplog);
    fflush(oplog);
  }
  pthread_mutex_unlock(&oplog_mu);
}

// ---- the worker ----

static uint64_t wait_deps(sim_op *op, uint64_t ready) {
  for (int i = 0; i < op->ndeps; i++) {
    uint64_t t = sim_tl_wait(op->deps[i].tl, op->deps[i].seq);
    if (t > ready) ready = t;
    sim_tl_unref(op->deps[i].tl);
  }
  op->ndeps = 0;
  return ready;
}

/* SIMCUDA_JITTER_US: the worker's own random pause before an operation.
 * Virtual time is untouched; only the real-time order in which the
 * streams' workers run their operations (and so what is resident when)
 * changes, as a loaded host or a real GPU's engines change it. */
static void jitter(unsigned *seed) {
  unsigned us = sim_g.jitter_us;
  if (!us) return;
  unsigned t = (unsigned)rand_r(seed) % (us + 1);
  struct timespec ts = {.tv_sec = t / 1000000, .tv_nsec = (long)(t % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void *worker(void *arg) {
  sim_stream *s = arg;
  unsigned seed = (unsigned)s->id * 2654435761u;
  pthread_mutex_lock(&s->tl.mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->tl.cv, &s->tl.mu);
    sim_op *op = s->head;
    if (!op) break;
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    uint64_t seq = s->tl.done + 1, last = s->tl.t;
    pthread_mutex_unlock(&s->tl.mu);
    uint64_t ready = op->issue_t > last ? op->issue_t : last;
    ready = wait_deps(op, ready);
    jitter(&seed);
    uint64_t end = sim_op_exec(op, s, ready);
    if (__atomic_load_n(&oplog_state, __ATOMIC_RELAXED) >= 0) oplog_write(s, op, ready, end);
    sim_op_free(op);
    tl_complete(&s->tl, seq, end);
    pthread_mutex_lock(&s->tl.mu);
  }
  pthread_mutex_unlock(&s->tl.mu);
  return NULL;
}

static void stream_release(sim_tl *tl) {
  sim_stream *s = (sim_stream *)tl;
  if (s->cap_graph) sim_graph_free(s->cap_graph);
  pthread_mutex_destroy(&s->tl.mu);
  pthread_cond_destroy(&s->tl.cv);
  free(s);
}

sim_stream *sim_stream_new(sim_ctx *c, unsigned flags, int kind, int prio) {
  sim_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  sim_tl_init(&s->tl, stream_release);
  s->magic = STREAM_MAGIC;
  s->ctx = c;
  s->flags = flags;
  s->kind = kind;
  s->priority = prio;
  s->id = __atomic_fetch_add(&next_stream_id, 1, __ATOMIC_RELAXED);
  if (pthread_create(&s->thr, NULL, worker, s) != 0) {
    free(s);
    return NULL;
  }
  pthread_mutex_lock(&c->mu);
  s->next_in_ctx = c->streams;
  c->streams = s;
  pthread_mutex_unlock(&c->mu);
  sim_handle_add(SIM_H_STREAM, s);
  return s;
}

/* Waits for the stream's work, stops its worker, drops the creator's ref. */
void sim_stream_destroy(sim_stream *s) {
  sim_handle_del(SIM_H_STREAM, s);
  sim_capture_forget(s);
  sim_ctx *c = s->ctx;
  pthread_mutex_lock(&c->mu);
  for (sim_stream **p = &c->streams; *p; p = &(*p)->next_in_ctx)
    if (*p == s) {
      *p = s->next_in_ctx;
      break;
    }
  pthread_mutex_unlock(&c->mu);
  pthread_mutex_lock(&s->tl.mu);
  s->stop = 1;
  pthread_cond_broadcast(&s->tl.cv);
  pthread_mutex_unlock(&s->tl.mu);
  pthread_join(s->thr, NULL);
  sim_tl_unref(&s->tl);
}

// ---- per-thread default streams ----

typedef struct pt_streams {
  sim_stream *s[SIM_MAXDEV * 4];
  int n;
} pt_streams;

static pthread_key_t pt_key;
static pthread_once_t pt_once = PTHREAD_ONCE_INIT;

static void pt_destroy(void *p) {
  pt_streams *pt = p;
  for (int i = 0; i < pt->n; i++)
    if (sim_handle_ok(SIM_H_STREAM, pt->s[i])) sim_stream_destroy(pt->s[i]);
  free(pt);
}

static void pt_init(void) { pthread_key_create(&pt_key, pt_destroy); }

static sim_stream *per_thread(sim_ctx *c) {
  pthread_once(&pt_once, pt_init);
  pt_streams *pt = pthread_getspecific(pt_key);
  if (!pt) {
    pt = calloc(1, sizeof *pt);
    if (!pt) return NULL;
    pthread_setspecific(pt_key, pt);
  }
  for (int i = 0; i < pt->n; i++)
    if (pt->s[i]->ctx == c && sim_handle_ok(SIM_H_STREAM, pt->s[i])) return pt->s[i];
  int slot = pt->n;
  for (int i = 0; i < pt->n; i++)
    if (!sim_handle_ok(SIM_H_STREAM, pt->s[i])) slot = i;
  if (slot == (int)(sizeof pt->s / sizeof pt->s[0])) return NULL;
  sim_stream *s = sim_stream_new(c, 0, ST_PERTHREAD, 0);
  if (!s) return NULL;
  pt->s[slot] = s;
  if (slot == pt->n) pt->n++;
  return s;
}

CUresult sim_stream_resolve(CUstream h, int ptds, sim_stream **out) {
  if (!h) h = ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    *out = h == CU_STREAM_LEGACY ? c->legacy : per_thread(c);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!sim_handle_ok(SIM_H_STREAM, h)) return CUDA_ERROR_INVALID_HANDLE;
  *out = (sim_stream *)h;
  return sim_ctx_check((*out)->ctx);
}

// ---- enqueue ----

static int add_dep(sim_op *op, sim_tl *tl, int *cap) {
  pthread_mutex_lock(&tl->mu);
  uint64_t seq = tl->enq, done = tl->done;
  pthread_mutex_unlock(&tl->mu);
  if (seq <= done) return 0;
  if (op->ndeps == *cap) {
    int nc = *cap ? *cap * 2 : 4;
    sim_dep *n = realloc(op->deps, (size_t)nc * sizeof *n);
    if (!n) return -1;
    op->deps = n;
    *cap = nc;
  }
  sim_tl_ref(tl);
  op->deps[op->ndeps++] = (sim_dep){tl, seq};
  return 0;
}

/* The legacy stream waits for prior work of every blocking stream, and a
 * blocking stream waits for prior work of the legacy stream. */
static int legacy_deps(sim_stream *s, sim_op *op) {
  int cap = op->ndeps;
  sim_ctx *c = s->ctx;
  if (s->flags & CU_STREAM_NON_BLOCKING) return 0;
  pthread_mutex_lock(&c->mu);
  int err = 0;
  if (s->kind == ST_LEGACY) {
    for (sim_stream *o = c->streams; o && !err; o = o->next_in_ctx)
      if (o != s && !(o->flags & CU_STREAM_NON_BLOCKING)) err = add_dep(op, &o->tl, &cap);
  } else {
    err = add_dep(op, &c->legacy->tl, &cap);
  }
  pthread_mutex_unlock(&c->mu);
  return err;
}

CUresult sim_enqueue(sim_stream *s, sim_op *op) {
  CUresult lr = sim_capture_check_legacy(s, 1);
  if (lr != CUDA_SUCCESS) {
    sim_op_free(op);
    return lr;
  }
  pthread_mutex_lock(&s->tl.mu);
  int st = s->cap_status;
  if (st == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    int err = sim_graph_append(s->cap_graph, op);
    pthread_mutex_unlock(&s->tl.mu);
    if (err) sim_op_free(op);
    return err ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&s->tl.mu);
  if (st == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
    sim_op_free(op);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  op->issue_t = sim_host_now(s->ctx->dev);
  if (legacy_deps(s, op) != 0) {
    sim_op_free(op);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&s->tl.mu);
  op->next = NULL;
  if (s->tail) s->tail->next = op; else s->head = op;
  s->tail = op;
  s->tl.enq++;
  pthread_cond_broadcast(&s->tl.cv);
  pthread_mutex_unlock(&s->tl.mu);
  return CUDA_SUCCESS;
}

/* Waits for all work issued so far; the host's clock moves to its end. */
CUresult sim_stream_sync(sim_stream *s) {
  pthread_mutex_lock(&s->tl.mu);
  uint64_t target = s->tl.enq;
  pthread_mutex_unlock(&s->tl.mu);
  uint64_t t = sim_tl_wait(&s->tl, target);
  sim_host_sync(s->ctx->dev, t);
  int st = __atomic_load_n(&s->ctx->sticky, __ATOMIC_ACQUIRE);
  return st ? (CUresult)st : CUDA_SUCCESS;
}

/* A capturing stream must not be synchronised or queried: the capture is
 * invalidated and the call refused.  Nor may the legacy stream while a
 * blocking stream captures; and the call is a potentially unsafe one. */
static CUresult refuse_if_capturing(sim_stream *s) {
  CUresult r = sim_capture_check_legacy(s, 1);
  if (r == CUDA_SUCCESS) r = sim_capture_check_unsafe(); /* stricter: see README */
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&s->tl.mu);
  if (s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  pthread_mutex_unlock(&s->tl.mu);
  return r;
}

// ---- entry points ----

static CUresult stream_create(CUstream *ph, unsigned flags, int prio) {
  if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  sim_stream *s = sim_stream_new(c, flags, ST_USER, prio);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  *ph = (CUstream)s;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamCreate(CUstream *ph, unsigned int Flags) {
  SIM_ENTER_INIT(cuStreamCreate);
  return stream_create(ph, Flags, 0);
}

SIM_API CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority) {
  SIM_ENTER_INIT(cuStreamCreateWithPriority);
  return stream_create(ph, flags, priority < -5 ? -5 : priority > 0 ? 0 : priority);
}

static CUresult stream_destroy(CUstream h) {
  if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD ||
      !sim_handle_ok(SIM_H_STREAM, h))
    return CUDA_ERROR_INVALID_HANDLE;
  sim_stream *s = (sim_stream *)h;
  if (s->kind != ST_USER) return CUDA_ERROR_INVALID_HANDLE;
  sim_stream_destroy(s);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamDestroy_v2(CUstream h) {
  SIM_ENTER_INIT(cuStreamDestroy_v2);
  return stream_destroy(h);
}

SIM_API CUresult cuStreamDestroy(CUstream h) {
  SIM_ENTER_INIT(cuStreamDestroy);
  return stream_destroy(h);
}

static CUresult stream_sync(CUstream h, int ptds) {
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  r = refuse_if_capturing(s);
  return r != CUDA_SUCCESS ? r : sim_stream_sync(s);
}

SIM_API CUresult cuStreamSynchronize(CUstream h) {
  SIM_ENTER_INIT(cuStreamSynchronize);
  return stream_sync(h, 0);
}

SIM_API CUresult cuStreamSynchronize_ptsz(CUstream h) {
  SIM_ENTER_INIT(cuStreamSynchronize_ptsz);
  return stream_sync(h, 1);
}

static CUresult stream_query(CUstream h, int ptds) {
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  r = refuse_if_capturing(s);
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&s->tl.mu);
  int idle = s->tl.done == s->tl.enq;
  uint64_t t = s->tl.t;
  pthread_mutex_unlock(&s->tl.mu);
  if (!idle) return CUDA_ERROR_NOT_READY;
  sim_host_sync(s->ctx->dev, t);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamQuery(CUstream h) {
  SIM_ENTER_INIT(cuStreamQuery);
  return stream_query(h, 0);
}

SIM_API CUresult cuStreamQuery_ptsz(CUstream h) {
  SIM_ENTER_INIT(cuStreamQuery_ptsz);
  return stream_query(h, 1);
}

static CUresult stream_flags(CUstream h, unsigned *flags, int ptds) {
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r == CUDA_SUCCESS) *flags = s->flags;
  return r;
}

SIM_API CUresult cuStreamGetFlags(CUstream h, unsigned int *flags) {
  SIM_ENTER_INIT(cuStreamGetFlags);
  return stream_flags(h, flags, 0);
}

SIM_API CUresult cuStreamGetFlags_ptsz(CUstream h, unsigned int *flags) {
  SIM_ENTER_INIT(cuStreamGetFlags_ptsz);
  return stream_flags(h, flags, 1);
}

static CUresult stream_ctx(CUstream h, CUcontext *pctx, int ptds) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r == CUDA_SUCCESS) *pctx = (CUcontext)s->ctx;
  return r;
}

SIM_API CUresult cuStreamGetCtx(CUstream h, CUcontext *pctx) {
  SIM_ENTER_INIT(cuStreamGetCtx);
  return stream_ctx(h, pctx, 0);
}

SIM_API CUresult cuStreamGetCtx_ptsz(CUstream h, CUcontext *pctx) {
  SIM_ENTER_INIT(cuStreamGetCtx_ptsz);
  return stream_ctx(h, pctx, 1);
}

static CUresult stream_id(CUstream h, unsigned long long *id, int ptds) {
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r == CUDA_SUCCESS) *id = s->id;
  return r;
}

SIM_API CUresult cuStreamGetId(CUstream h, unsigned long long *id) {
  SIM_ENTER_INIT(cuStreamGetId);
  return stream_id(h, id, 0);
}

SIM_API CUresult cuStreamGetId_ptsz(CUstream h, unsigned long long *id) {
  SIM_ENTER_INIT(cuStreamGetId_ptsz);
  return stream_id(h, id, 1);
}

static CUresult stream_prio(CUstream h, int *prio, int ptds) {
  if (!prio) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r == CUDA_SUCCESS) *prio = s->priority;
  return r;
}

SIM_API CUresult cuStreamGetPriority(CUstream h, int *priority) {
  SIM_ENTER_INIT(cuStreamGetPriority);
  return stream_prio(h, priority, 0);
}

SIM_API CUresult cuStreamGetPriority_ptsz(CUstream h, int *priority) {
  SIM_ENTER_INIT(cuStreamGetPriority_ptsz);
  return stream_prio(h, priority, 1);
}

SIM_API CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  SIM_ENTER_INIT(cuCtxGetStreamPriorityRange);
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}

static CUresult host_func(CUstream h, CUhostFn fn, void *ud, int ptds) {
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  sim_op *op = sim_op_new(OP_HOSTFN);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.fn.fn = fn;
  op->u.fn.ud = ud;
  return sim_enqueue(s, op);
}

SIM_API CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *userData) {
  SIM_ENTER_INIT(cuLaunchHostFunc);
  return host_func(h, fn, userData, 0);
}

SIM_API CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void *userData) {
  SIM_ENTER_INIT(cuLaunchHostFunc_ptsz);
  return host_func(h, fn, userData, 1);
}

static CUresult add_callback(CUstream h, CUstreamCallback cb, void *ud, unsigned flags, int ptds) {
  if (!cb || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  sim_op *op = sim_op_new(OP_HOSTFN);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.fn.cb = cb;
  op->u.fn.ud = ud;
  op->u.fn.h = h;
  return sim_enqueue(s, op);
}

SIM_API CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void *ud, unsigned int flags) {
  SIM_ENTER_INIT(cuStreamAddCallback);
  return add_callback(h, cb, ud, flags, 0);
}

SIM_API CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void *ud,
                                          unsigned int flags) {
  SIM_ENTER_INIT(cuStreamAddCallback_ptsz);
  return add_callback(h, cb, ud, flags, 1);
}
