/* sim_graph.c: minimal stream capture and CUDA graphs: captured work is
 * recorded as a linear list of nodes; an instantiated graph replays it. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static unsigned long long next_capture_id = 1;

sim_graph *sim_graph_new(void) {
  sim_graph *g = calloc(1, sizeof *g);
  if (g) sim_handle_add(SIM_H_GRAPH, g);
  return g;
}

int sim_graph_append(sim_graph *g, sim_op *op) {
  if (g->n == g->cap) {
    size_t nc = g->cap ? g->cap * 2 : 16;
    sim_node **nn = realloc(g->nodes, nc * sizeof *nn);
    if (!nn) return -1;
    g->nodes = nn;
    g->cap = nc;
  }
  sim_node *nd = calloc(1, sizeof *nd);
  if (!nd) return -1;
  nd->op = op;
  nd->g = g;
  if (op->kind == OP_KERNEL) {
    sim_func *f = op->u.k.f;
    nd->kparams = calloc(f->nparams ? f->nparams : 1, sizeof *nd->kparams);
    if (!nd->kparams) {
      free(nd);
      return -1;
    }
    for (size_t i = 0; i < f->nparams; i++) nd->kparams[i] = op->u.k.pbuf + f->off[i];
  }
  g->nodes[g->n++] = nd;
  sim_handle_add(SIM_H_NODE, nd);
  return 0;
}

void sim_graph_free(sim_graph *g) {
  for (size_t i = 0; i < g->n; i++) {
    sim_handle_del(SIM_H_NODE, g->nodes[i]);
    sim_op_free(g->nodes[i]->op);
    free(g->nodes[i]->kparams);
    free(g->nodes[i]);
  }
  sim_handle_del(SIM_H_GRAPH, g);
  free(g->nodes);
  free(g);
}

// ---- capture ----

/* Captures in progress, with the mode they began in and the thread that
 * began them: what the unsafe-call rule of cuThreadExchangeStreamCaptureMode
 * needs.  Few at a time: a small table under one lock. */
#define CAP_MAX 64

typedef struct cap_rec {
  sim_stream *s;
  int mode; /* CUstreamCaptureMode */
  pthread_t thr;
  int to_graph; /* cuStreamBeginCaptureToGraph: the graph is the caller's */
} cap_rec;

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static cap_rec caps[CAP_MAX];
static int ncaps;             /* under cap_mu; read relaxed as the fast path */
static __thread int tls_mode; /* this thread's interaction mode: GLOBAL (0) by default */

static void invalidate(sim_stream *s) {
  pthread_mutex_lock(&s->tl.mu);
  if (s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE)
    s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  pthread_mutex_unlock(&s->tl.mu);
}

static int cap_find_locked(const sim_stream *s) {
  for (int i = 0; i < ncaps; i++)
    if (caps[i].s == s) return i;
  return -1;
}

static void cap_del_locked(int i) {
  int n = ncaps - 1;
  caps[i] = caps[n];
  __atomic_store_n(&ncaps, n, __ATOMIC_RELAXED);
}

/* cuda.h: GLOBAL threads are prohibited while they have a capture of their
 * own not begun RELAXED, or while another thread has a GLOBAL one;
 * THREAD_LOCAL threads only for their own; RELAXED threads never. */
static int prohibits_locked(const cap_rec *c, int mode, pthread_t self) {
  if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) return 0;
  if (pthread_equal(c->thr, self)) return c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
  return mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

CUresult sim_capture_check_unsafe(void) {
  if (!__atomic_load_n(&ncaps, __ATOMIC_RELAXED)) return CUDA_SUCCESS;
  CUresult r = CUDA_SUCCESS;
  pthread_t self = pthread_self();
  pthread_mutex_lock(&cap_mu);
  for (int i = 0; i < ncaps; i++)
    if (prohibits_locked(&caps[i], tls_mode, self)) {
      invalidate(caps[i].s);
      r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  pthread_mutex_unlock(&cap_mu);
  return r;
}

CUresult sim_capture_check_ctx(sim_ctx *c) {
  if (!__atomic_load_n(&ncaps, __ATOMIC_RELAXED)) return CUDA_SUCCESS;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&cap_mu);
  for (int i = 0; i < ncaps; i++)
    if (caps[i].s->ctx == c) {
      invalidate(caps[i].s);
      r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  pthread_mutex_unlock(&cap_mu);
  return r != CUDA_SUCCESS ? r : sim_capture_check_unsafe();
}

CUresult sim_capture_check_legacy(sim_stream *s, int inval) {
  if (s->kind != ST_LEGACY || !__atomic_load_n(&ncaps, __ATOMIC_RELAXED)) return CUDA_SUCCESS;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&cap_mu);
  for (int i = 0; i < ncaps; i++)
    if (caps[i].s->ctx == s->ctx && !(caps[i].s->flags & CU_STREAM_NON_BLOCKING)) {
      if (inval) invalidate(caps[i].s);
      r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
  pthread_mutex_unlock(&cap_mu);
  return r;
}

void sim_capture_forget(sim_stream *s) {
  pthread_mutex_lock(&cap_mu);
  int i = cap_find_locked(s);
  if (i >= 0 && caps[i].to_graph) {
    pthread_mutex_lock(&s->tl.mu);
    s->cap_graph = NULL; /* the caller's graph outlives the stream */
    pthread_mutex_unlock(&s->tl.mu);
  }
  if (i >= 0) cap_del_locked(i);
  pthread_mutex_unlock(&cap_mu);
}

SIM_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  SIM_ENTER_INIT(cuThreadExchangeStreamCaptureMode);
  if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  int prev = tls_mode;
  tls_mode = (int)*mode;
  *mode = (CUstreamCaptureMode)prev;
  return CUDA_SUCCESS;
}

/* into: the caller's graph (cuStreamBeginCaptureToGraph), or NULL for a new one. */
static CUresult begin_capture(CUstream h, int mode, int ptds, sim_graph *into) {
  if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  if (s->kind == ST_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  sim_graph *g = into ? into : sim_graph_new();
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&cap_mu);
  pthread_mutex_lock(&s->tl.mu);
  if (s->cap_status != CU_STREAM_CAPTURE_STATUS_NONE || ncaps == CAP_MAX) {
    r = s->cap_status != CU_STREAM_CAPTURE_STATUS_NONE ? CUDA_ERROR_ILLEGAL_STATE
                                                       : CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&s->tl.mu);
    pthread_mutex_unlock(&cap_mu);
    if (!into) sim_graph_free(g);
    return r;
  }
  s->cap_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  s->cap_graph = g;
  s->cap_id = __atomic_fetch_add(&next_capture_id, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&s->tl.mu);
  caps[ncaps] = (cap_rec){.s = s, .mode = mode, .thr = pthread_self(), .to_graph = into != NULL};
  __atomic_store_n(&ncaps, ncaps + 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&cap_mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  SIM_ENTER_INIT(cuStreamBeginCapture_v2);
  return begin_capture(h, (int)mode, 0, NULL);
}

SIM_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) {
  SIM_ENTER_INIT(cuStreamBeginCapture_v2_ptsz);
  return begin_capture(h, (int)mode, 1, NULL);
}

/* The CUDA 10.0 entry points have no mode: the strictest one. */
SIM_API CUresult cuStreamBeginCapture(CUstream h) {
  SIM_ENTER_INIT(cuStreamBeginCapture);
  return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 0, NULL);
}

SIM_API CUresult cuStreamBeginCapture_ptsz(CUstream h) {
  SIM_ENTER_INIT(cuStreamBeginCapture_ptsz);
  return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 1, NULL);
}

/* The graph is linear here: new nodes go after the existing ones, whatever
 * the dependencies named (each must be a node of the graph). */
static CUresult begin_to_graph(CUstream h, CUgraph hg, const CUgraphNode *deps, size_t n, int mode,
                               int ptds) {
  if (!hg || !sim_handle_ok(SIM_H_GRAPH, hg) || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; i++)
    if (!deps[i] || !sim_handle_ok(SIM_H_NODE, deps[i]) ||
        ((sim_node *)deps[i])->g != (sim_graph *)hg)
      return CUDA_ERROR_INVALID_VALUE;
  return begin_capture(h, mode, ptds, (sim_graph *)hg);
}

SIM_API CUresult cuStreamBeginCaptureToGraph(CUstream h, CUgraph hg, const CUgraphNode *deps,
                                             const CUgraphEdgeData *ed, size_t n,
                                             CUstreamCaptureMode mode) {
  SIM_ENTER_INIT(cuStreamBeginCaptureToGraph);
  (void)ed;
  return begin_to_graph(h, hg, deps, n, (int)mode, 0);
}

SIM_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream h, CUgraph hg, const CUgraphNode *deps,
                                                  const CUgraphEdgeData *ed, size_t n,
                                                  CUstreamCaptureMode mode) {
  SIM_ENTER_INIT(cuStreamBeginCaptureToGraph_ptsz);
  (void)ed;
  return begin_to_graph(h, hg, deps, n, (int)mode, 1);
}

static CUresult end_capture(CUstream h, CUgraph *pg, int ptds) {
  if (!pg) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  *pg = NULL;
  pthread_mutex_lock(&cap_mu);
  int i = cap_find_locked(s);
  if (i >= 0 && caps[i].mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
      !pthread_equal(caps[i].thr, pthread_self())) {
    /* cuda.h: ended from the thread that began it.  Stricter than the
     * driver: the capture is invalidated as well. */
    invalidate(s);
    pthread_mutex_unlock(&cap_mu);
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  }
  int to_graph = i >= 0 && caps[i].to_graph;
  if (i >= 0) cap_del_locked(i);
  pthread_mutex_lock(&s->tl.mu);
  int st = s->cap_status;
  sim_graph *g = s->cap_graph;
  s->cap_status = CU_STREAM_CAPTURE_STATUS_NONE;
  s->cap_graph = NULL;
  pthread_mutex_unlock(&s->tl.mu);
  pthread_mutex_unlock(&cap_mu);
  if (st == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
  if (st == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
    if (!to_graph) sim_graph_free(g); /* the caller's graph stays the caller's */
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *pg = (CUgraph)g;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamEndCapture(CUstream h, CUgraph *phGraph) {
  SIM_ENTER_INIT(cuStreamEndCapture);
  return end_capture(h, phGraph, 0);
}

SIM_API CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *phGraph) {
  SIM_ENTER_INIT(cuStreamEndCapture_ptsz);
  return end_capture(h, phGraph, 1);
}

static CUresult capture_info(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                             CUgraph *g, const CUgraphNode **deps, const CUgraphEdgeData **ed,
                             size_t *nd, int ptds) {
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r == CUDA_SUCCESS) r = sim_capture_check_legacy(s, 0); /* not invalidated (cuda.h) */
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&s->tl.mu);
  *st = (CUstreamCaptureStatus)s->cap_status;
  if (id) *id = s->cap_id;
  if (g) *g = (CUgraph)s->cap_graph;
  pthread_mutex_unlock(&s->tl.mu);
  if (deps) *deps = NULL;
  if (ed) *ed = NULL;
  if (nd) *nd = 0;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st) {
  SIM_ENTER_INIT(cuStreamIsCapturing);
  return capture_info(h, st, NULL, NULL, NULL, NULL, NULL, 0);
}

SIM_API CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st) {
  SIM_ENTER_INIT(cuStreamIsCapturing_ptsz);
  return capture_info(h, st, NULL, NULL, NULL, NULL, NULL, 1);
}

SIM_API CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                                           CUgraph *g, const CUgraphNode **deps, size_t *nd) {
  SIM_ENTER_INIT(cuStreamGetCaptureInfo_v2);
  return capture_info(h, st, id, g, deps, NULL, nd, 0);
}

SIM_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus *st,
                                                cuuint64_t *id, CUgraph *g,
                                                const CUgraphNode **deps, size_t *nd) {
  SIM_ENTER_INIT(cuStreamGetCaptureInfo_v2_ptsz);
  return capture_info(h, st, id, g, deps, NULL, nd, 1);
}

SIM_API CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                                           CUgraph *g, const CUgraphNode **deps,
                                           const CUgraphEdgeData **ed, size_t *nd) {
  SIM_ENTER_INIT(cuStreamGetCaptureInfo_v3);
  return capture_info(h, st, id, g, deps, ed, nd, 0);
}

SIM_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus *st,
                                                cuuint64_t *id, CUgraph *g,
                                                const CUgraphNode **deps,
                                                const CUgraphEdgeData **ed, size_t *nd) {
  SIM_ENTER_INIT(cuStreamGetCaptureInfo_v3_ptsz);
  return capture_info(h, st, id, g, deps, ed, nd, 1);
}

// ---- graphs ----

SIM_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
  SIM_ENTER_INIT(cuGraphCreate);
  if (!phGraph || flags) return CUDA_ERROR_INVALID_VALUE;
  sim_graph *g = sim_graph_new();
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  *phGraph = (CUgraph)g;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphDestroy(CUgraph hGraph) {
  SIM_ENTER_INIT(cuGraphDestroy);
  if (!hGraph || !sim_handle_ok(SIM_H_GRAPH, hGraph)) return CUDA_ERROR_INVALID_VALUE;
  sim_graph_free((sim_graph *)hGraph);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes) {
  SIM_ENTER_INIT(cuGraphGetNodes);
  if (!numNodes || !hGraph || !sim_handle_ok(SIM_H_GRAPH, hGraph)) return CUDA_ERROR_INVALID_VALUE;
  sim_graph *g = (sim_graph *)hGraph;
  if (!nodes) {
    *numNodes = g->n;
    return CUDA_SUCCESS;
  }
  size_t k = *numNodes < g->n ? *numNodes : g->n;
  for (size_t i = 0; i < k; i++) nodes[i] = (CUgraphNode)g->nodes[i];
  for (size_t i = k; i < *numNodes; i++) nodes[i] = NULL;
  *numNodes = k;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type) {
  SIM_ENTER_INIT(cuGraphNodeGetType);
  if (!type || !hNode || !sim_handle_ok(SIM_H_NODE, hNode)) return CUDA_ERROR_INVALID_VALUE;
  switch (((sim_node *)hNode)->op->kind) {
  case OP_KERNEL: *type = CU_GRAPH_NODE_TYPE_KERNEL; break;
  case OP_COPY: *type = CU_GRAPH_NODE_TYPE_MEMCPY; break;
  case OP_SET: *type = CU_GRAPH_NODE_TYPE_MEMSET; break;
  case OP_HOSTFN: *type = CU_GRAPH_NODE_TYPE_HOST; break;
  default: *type = CU_GRAPH_NODE_TYPE_EMPTY; break;
  }
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p) {
  SIM_ENTER_INIT(cuGraphKernelNodeGetParams_v2);
  if (!p || !hNode || !sim_handle_ok(SIM_H_NODE, hNode)) return CUDA_ERROR_INVALID_VALUE;
  sim_node *nd = (sim_node *)hNode;
  if (nd->op->kind != OP_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  memset(p, 0, sizeof *p);
  /* A node captured from a CUkernel launch carries the kernel as cuda.h
   * documents it: `kern` set, `func` NULL ("kern ... will only be referenced
   * if func is NULL"); the strict reading, so clients must handle it. */
  if (nd->op->u.k.kern) p->kern = (CUkernel)nd->op->u.k.kern;
  else p->func = (CUfunction)nd->op->u.k.f;
  p->gridDimX = nd->op->u.k.grid[0];
  p->gridDimY = nd->op->u.k.grid[1];
  p->gridDimZ = nd->op->u.k.grid[2];
  p->blockDimX = nd->op->u.k.block[0];
  p->blockDimY = nd->op->u.k.block[1];
  p->blockDimZ = nd->op->u.k.block[2];
  p->kernelParams = nd->kparams;
  p->ctx = (CUcontext)nd->op->u.k.f->ctx;
  return CUDA_SUCCESS;
}

CUresult sim_graph_instantiate(CUgraphExec *pe, CUgraph hg) {
  if (!pe || !hg || !sim_handle_ok(SIM_H_GRAPH, hg)) return CUDA_ERROR_INVALID_VALUE;
  sim_graph *g = (sim_graph *)hg;
  sim_exec *e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->ops = calloc(g->n ? g->n : 1, sizeof *e->ops);
  e->src = calloc(g->n ? g->n : 1, sizeof *e->src);
  for (size_t i = 0; e->ops && e->src && i < g->n; i++, e->n++)
    if (!(e->ops[i] = sim_op_clone(g->nodes[i]->op))) break;
    else e->src[i] = g->nodes[i];
  if (!e->ops || !e->src || e->n != g->n) {
    for (size_t i = 0; i < e->n; i++) sim_op_free(e->ops[i]);
    free(e->ops);
    free(e->src);
    free(e);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  sim_handle_add(SIM_H_EXEC, e);
  *pe = (CUgraphExec)e;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g, unsigned long long fl) {
  SIM_ENTER_INIT(cuGraphInstantiateWithFlags);
  (void)fl;
  return sim_graph_instantiate(pe, g);
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec he) {
  SIM_ENTER_INIT(cuGraphExecDestroy);
  if (!he || !sim_handle_ok(SIM_H_EXEC, he)) return CUDA_ERROR_INVALID_VALUE;
  sim_exec *e = (sim_exec *)he;
  sim_handle_del(SIM_H_EXEC, e);
  for (size_t i = 0; i < e->n; i++) sim_op_free(e->ops[i]);
  free(e->ops);
  free(e->src);
  free(e);
  return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec he, CUstream h, int ptds) {
  if (!he || !sim_handle_ok(SIM_H_EXEC, he)) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  sim_exec *e = (sim_exec *)he;
  for (size_t i = 0; i < e->n && r == CUDA_SUCCESS; i++) {
    sim_op *op = sim_op_clone(e->ops[i]);
    r = op ? sim_enqueue(s, op) : CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

SIM_API CUresult cuGraphLaunch(CUgraphExec he, CUstream h) {
  SIM_ENTER_INIT(cuGraphLaunch);
  return graph_launch(he, h, 0);
}

SIM_API CUresult cuGraphLaunch_ptsz(CUgraphExec he, CUstream h) {
  SIM_ENTER_INIT(cuGraphLaunch_ptsz);
  return graph_launch(he, h, 1);
}
