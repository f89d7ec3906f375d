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

typedef struct gx {
  CUgraphExec g;
  uint64_t kernel; /* combined id of its kernels, in node order */
  int n;
  int unseen; /* a node vx cannot read (see node_values) */
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

/* Kernel node i's values appended to x->vals; its id mixed into x->kernel.
 * A node captured from a CUkernel launch carries `kern` with `func` NULL
 * (cuda.h: kern "will only be referenced if func is NULL"). */
static void node_values(CUgraphNode node, gx_t *x) {
  CUgraphNodeType t;
  CUDA_KERNEL_NODE_PARAMS p;
  if (VX_CALL(cuGraphNodeGetType, node, &t) != CUDA_SUCCESS) {
    x->unseen = 1;
    return;
  }
  if (opaque_type(t)) x->unseen = 1;
  if (t != CU_GRAPH_NODE_TYPE_KERNEL) return;
  memset(&p, 0, sizeof p);
  CUfunction f = NULL;
  if (VX_CALL(cuGraphKernelNodeGetParams_v2, node, &p) == CUDA_SUCCESS) {
    f = p.func;
    if (!f && p.kern) {
      kern_note(p.kern);
      f = (CUfunction)p.kern;
    }
  }
  if (!f) {
    x->unseen = 1;
    return;
  }
  x->kernel = (x->kernel ^ obs_kernel_id(f)) * 0x100000001b3ull;
  int got = obs_values(f, p.kernelParams, p.extra, x->vals + x->n, GRAPH_MAX_VALS - x->n);
  if (got < 0)
    x->unseen = 1;
  else
    x->n += got;
}

/* NULL when vx cannot read the graph at all (its launches are unseen). */
static gx_t *collect(CUgraphExec e, CUgraph g) {
  size_t nn = 0;
  if (VX_CALL(cuGraphGetNodes, g, NULL, &nn) != CUDA_SUCCESS) return NULL;
  CUgraphNode *nodes = calloc(nn ? nn : 1, sizeof *nodes);
  gx_t *x = calloc(1, sizeof *x + GRAPH_MAX_VALS * sizeof(CUdeviceptr));
  if (nodes && x && (!nn || VX_CALL(cuGraphGetNodes, g, nodes, &nn) == CUDA_SUCCESS)) {
    x->g = e;
    x->kernel = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < nn; i++) /* all: an unseen node may come late */
      node_values(nodes[i], x);
  } else {
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
  if (oomed) free(x); /* the graph's launches then go unobserved: managed memory stays correct */
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
