/* CUDA graphs: the pointer arguments of an executable graph's kernel nodes,
 * collected when it is instantiated, so that cuGraphLaunch can be observed
 * like the launches it stands for. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "vxhash.h"

#include "kernels.h"
#include "launch.h"
#include "observe.h"
#include "vx.h"

#define GRAPH_MAX_VALS OBS_GRAPH_VALS

/* Where one kernel node's values lie in vals: what
 * cuGraphExecKernelNodeSetParams and cuGraphExecUpdate replace. */
typedef struct gx_seg {
  CUgraphNode node, alt; /* the instantiated graph's node; alt: an update's */
  uint64_t kid;          /* its kernel id */
  int at, cnt;
} gx_seg_t;

typedef struct gx {
  CUgraphExec g;
  uint64_t kernel; /* combined id of its kernels, in node order */
  int n;
  int unseen; /* a node vx cannot read (see node_values) */
  int nseg, segcap;
  gx_seg_t *seg;
  UT_hash_handle hh;
  CUdeviceptr vals[];
} gx_t;

static pthread_mutex_t gx_lock = PTHREAD_MUTEX_INITIALIZER;
static gx_t *gx_tab;

/* Node types whose memory accesses vx does not learn: copies and sets
 * (their ranges are not collected), child and conditional graphs (their
 * kernels are not walked).  A graph holding one is unseen. */
static int opaque_type(CUgraphNodeType t) {
  return t == CU_GRAPH_NODE_TYPE_MEMCPY || t == CU_GRAPH_NODE_TYPE_MEMSET ||
         t == CU_GRAPH_NODE_TYPE_GRAPH || t == CU_GRAPH_NODE_TYPE_CONDITIONAL;
}

static uint64_t mix(uint64_t k, uint64_t kid) {
  return (k ^ kid) * 0x100000001b3ull;
}

/* A kernel node's values from its parameters, at most cap; its id in *kid.
 * A node captured from a CUkernel launch carries `kern` with `func` NULL
 * (cuda.h: kern "will only be referenced if func is NULL").  Returns how
 * many, or -1 when the parameters name no kernel or its layout is unknown. */
static int param_values(const CUDA_KERNEL_NODE_PARAMS *p, CUdeviceptr *vals, int cap,
                        uint64_t *kid) {
  CUfunction f = p->func;
  if (!f && p->kern) {
    kern_note(p->kern);
    f = (CUfunction)p->kern;
  }
  if (!f) return -1;
  *kid = obs_kernel_id(f);
  return obs_values(f, p->kernelParams, p->extra, vals, cap);
}

/* Node's values appended to x->vals, its kernel id mixed into x->kernel and
 * its place recorded in x's segments; x->unseen when vx cannot read it. */
static void node_values(CUgraphNode node, gx_t *x) {
  CUgraphNodeType t;
  CUDA_KERNEL_NODE_PARAMS p;
  uint64_t kid = 0;
  if (VX_CALL(cuGraphNodeGetType, node, &t) != CUDA_SUCCESS) {
    x->unseen = 1;
    return;
  }
  if (opaque_type(t)) x->unseen = 1;
  if (t != CU_GRAPH_NODE_TYPE_KERNEL) return;
  memset(&p, 0, sizeof p);
  int got = VX_CALL(cuGraphKernelNodeGetParams_v2, node, &p) == CUDA_SUCCESS
                ? param_values(&p, x->vals + x->n, GRAPH_MAX_VALS - x->n, &kid)
                : -1;
  if (got < 0) {
    x->unseen = 1;
    return;
  }
  x->kernel = mix(x->kernel, kid);
  if (x->nseg < x->segcap)
    x->seg[x->nseg++] = (gx_seg_t){.node = node, .kid = kid, .at = x->n, .cnt = got};
  x->n += got;
}

/* NULL when vx cannot read the graph at all (its launches are unseen). */
static gx_t *collect(CUgraphExec e, CUgraph g) {
  size_t nn = 0;
  if (VX_CALL(cuGraphGetNodes, g, NULL, &nn) != CUDA_SUCCESS) return NULL;
  CUgraphNode *nodes = calloc(nn ? nn : 1, sizeof *nodes);
  gx_t *x = calloc(1, sizeof *x + GRAPH_MAX_VALS * sizeof(CUdeviceptr));
  if (x) x->seg = calloc(nn ? nn : 1, sizeof *x->seg);
  if (nodes && x && x->seg && (!nn || VX_CALL(cuGraphGetNodes, g, nodes, &nn) == CUDA_SUCCESS)) {
    x->g = e;
    x->segcap = (int)nn;
    x->kernel = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < nn; i++) /* all: an unseen node may come late */
      node_values(nodes[i], x);
  } else {
    if (x) free(x->seg);
    free(x);
    x = NULL;
  }
  free(nodes);
  return x;
}

static void forget(CUgraphExec e) {
  gx_t *x;
  pthread_mutex_lock(&gx_lock);
  HASH_FIND_PTR(gx_tab, &e, x);
  if (x) HASH_DEL(gx_tab, x);
  pthread_mutex_unlock(&gx_lock);
  if (x) free(x->seg);
  free(x);
}

static void remember(CUgraphExec e, CUgraph g) {
  gx_t *x = collect(e, g);
  forget(e); /* a handle the driver reuses */
  if (!x) return;
  pthread_mutex_lock(&gx_lock);
  vxhash_oomed = 0;
  HASH_ADD_PTR(gx_tab, g, x);
  int oomed = vxhash_oomed;
  pthread_mutex_unlock(&gx_lock);
  if (oomed) { /* the graph's launches then go unobserved: managed memory stays correct */
    free(x->seg);
    free(x);
  }
}

int graph_values(CUgraphExec e, CUdeviceptr *vals, int cap, uint64_t *kernel) {
  gx_t *x;
  int n = -1; /* a graph vx did not see instantiated (or could not read) */
  pthread_mutex_lock(&gx_lock);
  HASH_FIND_PTR(gx_tab, &e, x);
  if (x && x->unseen) x = NULL;
  if (x) {
    n = x->n < cap ? x->n : cap;
    memcpy(vals, x->vals, (size_t)n * sizeof *vals);
    *kernel = x->kernel;
  }
  pthread_mutex_unlock(&gx_lock);
  return n;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g, unsigned long long flags) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGraphInstantiateWithFlags, pe, g, flags);
  if (on && r == CUDA_SUCCESS && pe) remember(*pe, g);
  return r;
}

CUresult cuGraphExecDestroy(CUgraphExec e) {
  VX_ENTER(on);
  if (on) forget(e);
  return VX_CALL(cuGraphExecDestroy, e);
}

void graph_atfork_prepare(void) {
  pthread_mutex_lock(&gx_lock);
}
void graph_atfork_parent(void) {
  pthread_mutex_unlock(&gx_lock);
}
void graph_atfork_child(void) {
  pthread_mutex_init(&gx_lock, NULL);
}

// ---- exec-graph changes: what vx collected follows ----

void graph_remember(CUgraphExec e, CUgraph g) {
  remember(e, g);
}

/* x's values with node's segment(s) replaced by nv[0..nn) (kernel kid), or
 * appended as a new segment when no segment is that node.  Under gx_lock. */
static void replace_node_locked(gx_t *x, CUgraphNode node, const CUdeviceptr *nv, int nn,
                                uint64_t kid, CUdeviceptr *tmp) {
  int n = 0, hit = 0;
  uint64_t k = 0xcbf29ce484222325ull;
  for (int i = 0; i < x->nseg; i++) {
    gx_seg_t *sg = &x->seg[i];
    int mine = sg->node == node || (sg->alt && sg->alt == node);
    const CUdeviceptr *src = mine ? nv : x->vals + sg->at;
    int cnt = mine ? nn : sg->cnt;
    if (cnt > GRAPH_MAX_VALS - n) cnt = GRAPH_MAX_VALS - n;
    memcpy(tmp + n, src, (size_t)cnt * sizeof *tmp);
    if (mine) sg->kid = kid, hit = 1;
    sg->at = n, sg->cnt = cnt, n += cnt;
    k = mix(k, sg->kid);
  }
  if (!hit) { /* a node vx did not see as a kernel node: its values count too */
    int cnt = nn < GRAPH_MAX_VALS - n ? nn : GRAPH_MAX_VALS - n;
    memcpy(tmp + n, nv, (size_t)cnt * sizeof *tmp);
    if (x->nseg < x->segcap) x->seg[x->nseg++] = (gx_seg_t){node, NULL, kid, n, cnt};
    n += cnt;
    k = mix(k, kid);
  }
  memcpy(x->vals, tmp, (size_t)n * sizeof *tmp);
  x->n = n;
  x->kernel = k;
}

void graph_exec_set_node(CUgraphExec e, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p) {
  CUdeviceptr *nv = malloc(2 * GRAPH_MAX_VALS * sizeof *nv);
  uint64_t kid = 0;
  int nn = nv && p ? param_values(p, nv, GRAPH_MAX_VALS, &kid) : -1;
  gx_t *x;
  pthread_mutex_lock(&gx_lock);
  HASH_FIND_PTR(gx_tab, &e, x);
  if (x && nn >= 0 && x->nseg == x->segcap) { /* room for one more segment */
    gx_seg_t *ns = realloc(x->seg, (size_t)(x->segcap + 1) * sizeof *ns);
    if (ns) x->seg = ns, x->segcap++;
  }
  if (x && nn >= 0) replace_node_locked(x, node, nv, nn, kid, nv + GRAPH_MAX_VALS);
  pthread_mutex_unlock(&gx_lock);
  if (x && nn < 0) forget(e); /* not knowable: the graph's launches go unobserved */
  free(nv);
}

void graph_exec_update(CUgraphExec e, CUgraph g) {
  gx_t *y = collect(e, g), *x;
  pthread_mutex_lock(&gx_lock);
  HASH_FIND_PTR(gx_tab, &e, x);
  if (x) HASH_DEL(gx_tab, x);
  /* The instantiated graph's nodes still name the exec's nodes: keep them,
   * with the update's as aliases (same topology, same order). */
  if (x && y && x->nseg == y->nseg)
    for (int i = 0; i < y->nseg; i++)
      y->seg[i].alt = y->seg[i].node, y->seg[i].node = x->seg[i].node;
  int oomed = 0;
  if (y) {
    vxhash_oomed = 0;
    HASH_ADD_PTR(gx_tab, g, y);
    oomed = vxhash_oomed;
  }
  pthread_mutex_unlock(&gx_lock);
  if (x) free(x->seg);
  free(x);
  if (y && oomed) {
    free(y->seg);
    free(y);
  }
}
