/* CUDA graphs: the device pointers an executable graph's nodes reach (the
 * kernel nodes' pointer arguments, the memset nodes' destinations, the
 * memcpy nodes' device sides), collected when it is instantiated, so that
 * cuGraphLaunch can be observed like the work it stands for. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "vxhash.h"

#include "kernels.h"
#include "launch.h"
#include "observe.h"
#include "ptrref.h"
#include "spill.h"
#include "vx.h"
#include "locks.h"

/* Where one node's values lie in vals: what cuGraphExec*NodeSetParams and
 * cuGraphExecUpdate replace. */
typedef struct gx_seg {
  CUgraphNode node, alt; /* the instantiated graph's node; alt: an update's */
  uint64_t kid;          /* a kernel node's kernel id; 0: a memset or memcpy node */
  int at, cnt;
} gx_seg_t;

typedef struct gx {
  CUgraphExec g;
  uint64_t kernel; /* combined id of its kernels, in node order */
  int n, cap;      /* values in vals, room */
  int unseen;      /* a node vx cannot read (see node_values) */
  int nseg, segcap;
  gx_seg_t *seg;
  CUdeviceptr *vals;
  int nh, hcap; /* host-to-device copy nodes into small allocations */
  struct gx_htod *htod;
  UT_hash_handle hh;
} gx_t;

/* A 1D host-to-device memcpy node into at most PTRREF_MAX_ALLOC bytes: its
 * source is read at each launch for stored pointers (ptrref_note), as the
 * copy hooks do for a copy made outside a graph. */
typedef struct gx_htod {
  CUgraphNode node;
  CUdeviceptr dst;
  const void *src;
  size_t n;
} gx_htod_t;

static pthread_mutex_t gx_lock = PTHREAD_MUTEX_INITIALIZER;
static gx_t *gx_tab;

static void gx_free(gx_t *x) {
  if (!x) return;
  free(x->seg);
  free(x->vals);
  free(x->htod);
  free(x);
}

/* The copy node's entry in x->htod (named node, or `other`, its alias
 * after an update): set (c a small 1D host-to-device copy) or removed (any
 * other copy).  Without memory x becomes unseen. */
static void htod_set(gx_t *x, CUgraphNode node, CUgraphNode other, const CUDA_MEMCPY3D *c) {
  int i = 0;
  while (i < x->nh && x->htod[i].node != node && (!other || x->htod[i].node != other))
    i++;
  int small =
      c->srcMemoryType == CU_MEMORYTYPE_HOST && c->srcHost &&
      (c->dstMemoryType == CU_MEMORYTYPE_DEVICE || c->dstMemoryType == CU_MEMORYTYPE_UNIFIED) &&
      c->Height == 1 && c->Depth == 1 && c->WidthInBytes && c->WidthInBytes <= PTRREF_MAX_ALLOC;
  if (!small) {
    if (i < x->nh) x->htod[i] = x->htod[--x->nh];
    return;
  }
  if (i == x->nh && x->nh == x->hcap) {
    int nc = x->hcap ? 2 * x->hcap : 4;
    gx_htod_t *nh = realloc(x->htod, (size_t)nc * sizeof *nh);
    if (!nh) {
      x->unseen = 1;
      return;
    }
    x->htod = nh, x->hcap = nc;
  }
  if (i == x->nh) x->nh++;
  x->htod[i] = (gx_htod_t){.node = node,
                           .dst = c->dstDevice + c->dstXInBytes,
                           .src = (const char *)c->srcHost + c->srcXInBytes,
                           .n = c->WidthInBytes};
}

static uint64_t mix(uint64_t k, uint64_t kid) {
  return (k ^ kid) * 0x100000001b3ull;
}

// ---- what one node reaches ----

/* A kernel node's values from its parameters, at most cap; its id in *kid.
 * A node captured from a CUkernel launch carries `kern` with `func` NULL
 * (cuda.h: kern "will only be referenced if func is NULL").  Returns how
 * many there are (more than cap: ask again with room), or -1 when the
 * parameters name no kernel or its layout is unknown. */
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

/* The kernel node's values in *out: v0 (room for OBS_MAX_VALS) or a heap
 * array the caller frees.  Returns how many, or -1. */
static int kernel_values(const CUDA_KERNEL_NODE_PARAMS *p, CUdeviceptr *v0, CUdeviceptr **out,
                         uint64_t *kid) {
  *out = v0;
  int n = param_values(p, v0, OBS_MAX_VALS, kid);
  if (n <= OBS_MAX_VALS) return n;
  if (!(*out = malloc((size_t)n * sizeof **out))) return -1;
  int m = param_values(p, *out, n, kid);
  return m > n ? -1 : m;
}

/* The first and the last byte of a memset node's rows. */
static int memset_values(const CUDA_MEMSET_NODE_PARAMS *m, CUdeviceptr *v) {
  if (!m->width || !m->height) return 0;
  v[0] = m->dst;
  v[1] = m->dst + (m->height - 1) * m->pitch + m->width * m->elementSize - 1;
  return 2;
}

static int device_side(CUmemorytype t) {
  return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED;
}

/* The first and last byte of a pitched 3D region (a copy's side). */
static int region(CUdeviceptr base, size_t x, size_t y, size_t z, size_t pitch, size_t rows,
                  const CUDA_MEMCPY3D *c, CUdeviceptr *v) {
  if (!c->WidthInBytes || !c->Height || !c->Depth) return 0;
  v[0] = base + (z * rows + y) * pitch + x;
  v[1] = v[0] + ((c->Depth - 1) * rows + (c->Height - 1)) * pitch + c->WidthInBytes - 1;
  return 2;
}

/* The device sides of a memcpy node (host and array sides are not vx's). */
static int memcpy_values(const CUDA_MEMCPY3D *c, CUdeviceptr *v) {
  int n = 0;
  if (device_side(c->srcMemoryType))
    n +=
        region(c->srcDevice, c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch, c->srcHeight, c, v + n);
  if (device_side(c->dstMemoryType))
    n +=
        region(c->dstDevice, c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight, c, v + n);
  return n;
}

/* Node types that reach no device memory vx tracks. */
static int inert_type(CUgraphNodeType t) {
  return t == CU_GRAPH_NODE_TYPE_EMPTY || t == CU_GRAPH_NODE_TYPE_HOST ||
         t == CU_GRAPH_NODE_TYPE_WAIT_EVENT || t == CU_GRAPH_NODE_TYPE_EVENT_RECORD ||
         t == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL || t == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT ||
         t == CU_GRAPH_NODE_TYPE_MEM_ALLOC || t == CU_GRAPH_NODE_TYPE_MEM_FREE;
}

// ---- a graph's values ----

/* Appends v[0..k) to x->vals; 0, or -1 without memory (x is then unseen). */
static int push(gx_t *x, const CUdeviceptr *v, int k) {
  if (k > x->cap - x->n) {
    int nc = x->cap ? x->cap : 256;
    while (nc - x->n < k)
      nc *= 2;
    CUdeviceptr *nv = realloc(x->vals, (size_t)nc * sizeof *nv);
    if (!nv) {
      x->unseen = 1;
      return -1;
    }
    x->vals = nv, x->cap = nc;
  }
  memcpy(x->vals + x->n, v, (size_t)k * sizeof *v);
  x->n += k;
  return 0;
}

static void add_segment(gx_t *x, CUgraphNode node, uint64_t kid, const CUdeviceptr *v, int k) {
  int at = x->n;
  if (push(x, v, k)) return;
  if (kid) x->kernel = mix(x->kernel, kid);
  if (x->nseg < x->segcap)
    x->seg[x->nseg++] = (gx_seg_t){.node = node, .kid = kid, .at = at, .cnt = k};
}

/* A graph holding a node vx does not read cannot be proven seen: its
 * launches restore everything (launch_unseen).  Said once. */
static void unseen_node(gx_t *x, CUgraphNodeType t, const char *why) {
  x->unseen = 1;
  VX_LOG_ONCE(VX_LOG_INFO,
              "a graph node of type %d vx cannot read (%s): launches of its graph "
              "are unseen (the NVMe tier restores everything, then spills no more)",
              (int)t, why);
}

/* node's values appended to x->vals, its kernel id mixed into x->kernel and
 * its place recorded in x's segments; x->unseen when vx cannot read it:
 * child and conditional graphs (their nodes are not walked: an exec update
 * of the child would escape), batched memory operations, kinds vx does not
 * know, and any node whose parameters the driver does not give. */
static void node_values(CUgraphNode node, gx_t *x) {
  CUgraphNodeType t;
  CUdeviceptr v[4];
  if (VX_CALL(cuGraphNodeGetType, node, &t) != CUDA_SUCCESS) {
    unseen_node(x, (CUgraphNodeType)-1, "no type");
    return;
  }
  if (inert_type(t)) return;
  if (t == CU_GRAPH_NODE_TYPE_MEMSET) {
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    if (VX_CALL(cuGraphMemsetNodeGetParams, node, &m) != CUDA_SUCCESS)
      unseen_node(x, t, "no memset parameters");
    else
      add_segment(x, node, 0, v, memset_values(&m, v));
    return;
  }
  if (t == CU_GRAPH_NODE_TYPE_MEMCPY) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    if (VX_CALL(cuGraphMemcpyNodeGetParams, node, &c) != CUDA_SUCCESS) {
      unseen_node(x, t, "no memcpy parameters");
      return;
    }
    add_segment(x, node, 0, v, memcpy_values(&c, v));
    htod_set(x, node, NULL, &c);
    return;
  }
  if (t != CU_GRAPH_NODE_TYPE_KERNEL) {
    unseen_node(x, t, "not walked");
    return;
  }
  CUDA_KERNEL_NODE_PARAMS p;
  CUdeviceptr kv0[OBS_MAX_VALS], *kv = kv0;
  uint64_t kid = 0;
  memset(&p, 0, sizeof p);
  int got = VX_CALL(cuGraphKernelNodeGetParams_v2, node, &p) == CUDA_SUCCESS
                ? kernel_values(&p, kv0, &kv, &kid)
                : -1;
  if (got < 0) {
    x->unseen = 1; /* a kernel without a layout: launch_unseen says so */
  } else {
    add_segment(x, node, kid, kv, got);
  }
  if (kv != kv0) free(kv);
}

/* NULL when vx cannot read the graph at all (its launches are unseen). */
static gx_t *collect(CUgraphExec e, CUgraph g) {
  size_t nn = 0;
  if (VX_CALL(cuGraphGetNodes, g, NULL, &nn) != CUDA_SUCCESS) return NULL;
  CUgraphNode *nodes = calloc(nn ? nn : 1, sizeof *nodes);
  gx_t *x = calloc(1, sizeof *x);
  if (x) x->seg = calloc(nn ? nn : 1, sizeof *x->seg);
  if (nodes && x && x->seg && (!nn || VX_CALL(cuGraphGetNodes, g, nodes, &nn) == CUDA_SUCCESS)) {
    x->g = e;
    x->segcap = (int)nn;
    x->kernel = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < nn; i++) /* all: an unseen node may come late */
      node_values(nodes[i], x);
  } else {
    gx_free(x);
    x = NULL;
  }
  free(nodes);
  return x;
}

static void forget(CUgraphExec e) {
  gx_t *x;
  vx_mutex_lock(&gx_lock, VX_RANK_GRAPH);
  HASH_FIND_PTR(gx_tab, &e, x);
  if (x) HASH_DEL(gx_tab, x);
  vx_mutex_unlock(&gx_lock, VX_RANK_GRAPH);
  gx_free(x);
}

static void remember(CUgraphExec e, CUgraph g) {
  gx_t *x = collect(e, g);
  forget(e); /* a handle the driver reuses */
  if (!x) return;
  vx_mutex_lock(&gx_lock, VX_RANK_GRAPH);
  vxhash_oomed = 0;
  HASH_ADD_PTR(gx_tab, g, x);
  int oomed = vxhash_oomed;
  vx_mutex_unlock(&gx_lock, VX_RANK_GRAPH);
  if (oomed) gx_free(x); /* its launches are then unseen: restore-all */
}

int graph_values(CUgraphExec e, CUdeviceptr *vals, int cap, uint64_t *kernel) {
  gx_t *x;
  int n = -1; /* a graph vx did not see instantiated (or could not read) */
  vx_mutex_lock(&gx_lock, VX_RANK_GRAPH);
  HASH_FIND_PTR(gx_tab, &e, x);
  if (x && x->unseen) x = NULL;
  if (x) {
    n = x->n;
    memcpy(vals, x->vals, (size_t)(n < cap ? n : cap) * sizeof *vals);
    *kernel = x->kernel;
  }
  vx_mutex_unlock(&gx_lock, VX_RANK_GRAPH);
  return n;
}

CUresult graph_device_launch_check(unsigned long long flags) {
  if (!(flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) || !spill_armed()) return CUDA_SUCCESS;
  VX_LOG_ONCE(VX_LOG_WARN, "a graph instantiated for device launch: vx cannot see when a kernel "
                           "launches it");
  return spill_unseen_launch();
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g, unsigned long long flags) {
  VX_ENTER(on);
  CUresult r = on ? graph_device_launch_check(flags) : CUDA_SUCCESS;
  if (r != CUDA_SUCCESS) return r;
  r = VX_CALL(cuGraphInstantiateWithFlags, pe, g, flags);
  if (on && r == CUDA_SUCCESS && pe) remember(*pe, g);
  return r;
}

CUresult cuGraphExecDestroy(CUgraphExec e) {
  VX_ENTER(on);
  if (on) forget(e);
  return VX_CALL(cuGraphExecDestroy, e);
}

void graph_atfork_prepare(void) {
  vx_mutex_lock(&gx_lock, VX_RANK_GRAPH);
}
void graph_atfork_parent(void) {
  vx_mutex_unlock(&gx_lock, VX_RANK_GRAPH);
}
void graph_atfork_child(void) {
  pthread_mutex_init(&gx_lock, NULL);
}

// ---- exec-graph changes: what vx collected follows ----

void graph_remember(CUgraphExec e, CUgraph g) {
  remember(e, g);
}

/* x's values with node's segment(s) replaced by nv[0..nn) (kernel kid, or
 * 0 for a memset or memcpy node), or appended as a new segment when no
 * segment is that node.  Without memory x becomes unseen.  Under gx_lock. */
static void replace_node_locked(gx_t *x, CUgraphNode node, const CUdeviceptr *nv, int nn,
                                uint64_t kid) {
  size_t total = (size_t)nn;
  for (int i = 0; i < x->nseg; i++)
    total += (size_t)x->seg[i].cnt;
  CUdeviceptr *tmp = malloc((total ? total : 1) * sizeof *tmp);
  if (!tmp || total > (size_t)(1 << 30)) {
    free(tmp);
    x->unseen = 1;
    return;
  }
  int n = 0, hit = 0;
  uint64_t k = 0xcbf29ce484222325ull;
  for (int i = 0; i < x->nseg; i++) {
    gx_seg_t *sg = &x->seg[i];
    int mine = sg->node == node || (sg->alt && sg->alt == node);
    const CUdeviceptr *src = mine ? nv : x->vals + sg->at;
    int cnt = mine ? nn : sg->cnt;
    memcpy(tmp + n, src, (size_t)cnt * sizeof *tmp);
    if (mine) sg->kid = kid, hit = 1;
    sg->at = n, sg->cnt = cnt, n += cnt;
    if (sg->kid) k = mix(k, sg->kid);
  }
  if (!hit) { /* a node vx did not record: its values count too */
    memcpy(tmp + n, nv, (size_t)nn * sizeof *tmp);
    if (x->nseg < x->segcap) x->seg[x->nseg++] = (gx_seg_t){node, NULL, kid, n, nn};
    n += nn;
    if (kid) k = mix(k, kid);
  }
  free(x->vals);
  x->vals = tmp;
  x->n = x->cap = n;
  x->kernel = k;
}

/* Exec e's node now reaches nv[0..nn) (nn < 0: unknown, e is forgotten
 * and its launches are unseen). */
static void set_node(CUgraphExec e, CUgraphNode node, const CUdeviceptr *nv, int nn, uint64_t kid) {
  gx_t *x;
  vx_mutex_lock(&gx_lock, VX_RANK_GRAPH);
  HASH_FIND_PTR(gx_tab, &e, x);
  if (x && nn >= 0 && x->nseg == x->segcap) { /* room for one more segment */
    gx_seg_t *ns = realloc(x->seg, (size_t)(x->segcap + 1) * sizeof *ns);
    if (ns) x->seg = ns, x->segcap++;
  }
  if (x && nn >= 0) replace_node_locked(x, node, nv, nn, kid);
  vx_mutex_unlock(&gx_lock, VX_RANK_GRAPH);
  if (x && nn < 0) forget(e); /* not knowable: the graph's launches are unseen */
}

void graph_exec_set_node(CUgraphExec e, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p) {
  CUdeviceptr v0[OBS_MAX_VALS], *nv = v0;
  uint64_t kid = 0;
  int nn = p ? kernel_values(p, v0, &nv, &kid) : -1;
  set_node(e, node, nn >= 0 ? nv : NULL, nn, kid);
  if (nv != v0) free(nv);
}

void graph_exec_set_memset(CUgraphExec e, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p) {
  CUdeviceptr v[2];
  set_node(e, node, v, p ? memset_values(p, v) : -1, 0);
}

void graph_exec_set_memcpy(CUgraphExec e, CUgraphNode node, const CUDA_MEMCPY3D *p) {
  CUdeviceptr v[4];
  set_node(e, node, v, p ? memcpy_values(p, v) : -1, 0);
  gx_t *x;
  vx_mutex_lock(&gx_lock, VX_RANK_GRAPH);
  HASH_FIND_PTR(gx_tab, &e, x);
  if (x && p) { /* the node by either of its names (an update's alias too) */
    CUgraphNode other = NULL;
    for (int i = 0; i < x->nseg; i++)
      if (x->seg[i].node == node)
        other = x->seg[i].alt;
      else if (x->seg[i].alt == node)
        other = x->seg[i].node;
    htod_set(x, node, other, p);
  }
  vx_mutex_unlock(&gx_lock, VX_RANK_GRAPH);
}

void graph_htod_note(CUgraphExec e) {
  gx_htod_t h0[8], *h = h0;
  int n = 0;
  gx_t *x;
  vx_mutex_lock(&gx_lock, VX_RANK_GRAPH);
  HASH_FIND_PTR(gx_tab, &e, x);
  if (x && x->nh) {
    if (x->nh > 8) h = malloc((size_t)x->nh * sizeof *h);
    if (h)
      memcpy(h, x->htod, (size_t)x->nh * sizeof *h), n = x->nh;
    else
      x->unseen = 1; /* no memory to read them: restore-all */
  }
  vx_mutex_unlock(&gx_lock, VX_RANK_GRAPH);
  for (int i = 0; i < n; i++)
    ptrref_note(h[i].dst, h[i].src, h[i].n);
  if (h != h0) free(h);
}

void graph_exec_update(CUgraphExec e, CUgraph g) {
  gx_t *y = collect(e, g), *x;
  vx_mutex_lock(&gx_lock, VX_RANK_GRAPH);
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
  vx_mutex_unlock(&gx_lock, VX_RANK_GRAPH);
  gx_free(x);
  if (y && oomed) gx_free(y);
}
