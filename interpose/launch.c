/* Launch hooks: count, hand the launch to the observer (the predictor's
 * hook point: vx_launch_predict), then launch.  No allocation or syscall
 * on this path; one registry read lock when nothing has to move. */
#include "launch.h"

#include "exec.h"
#include "observe.h"
#include "spill.h"
#include "spill_order.h"
#include "trace_rec.h"
#include "vx.h"

static vx_launch_observer_fn launch_observer;

void vx_set_launch_observer(vx_launch_observer_fn fn) {
  __atomic_store_n(&launch_observer, fn, __ATOMIC_RELEASE);
}

// ---- vx's observer ----

static CUstream launch_stream(const vx_launch_t *l) {
  int ptsz = l->hook == VX_ID_cuLaunchKernel_ptsz || l->hook == VX_ID_cuLaunchKernelEx_ptsz ||
             l->hook == VX_ID_cuLaunchCooperativeKernel_ptsz || l->hook == VX_ID_cuGraphLaunch_ptsz;
  return ptsz && !l->stream ? CU_STREAM_PER_THREAD : l->stream;
}

/* 1 capturing, 0 not, -1 the query failed (the legacy stream during
 * another stream's global capture, or a driver error).  Unknown is neither:
 * vx enqueues nothing of its own on the stream (it may capture), but what
 * the launch reads is still restored, in the capture-safe way (the spill
 * tier's copies use vx's own stream in relaxed mode), so it never runs on
 * discarded pages. */
static int capturing(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (VX_CALL(cuStreamIsCapturing, s, &st) != CUDA_SUCCESS) {
    VX_LOG_ONCE(VX_LOG_INFO, "cuStreamIsCapturing failed: a launch is restored, not predicted");
    return -1;
  }
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static CUresult resident_set(const obs_set_t *s, CUstream st) {
  CUdeviceptr p[OBS_MAX_ALLOCS];
  size_t n[OBS_MAX_ALLOCS];
  int k = 0;
  for (int i = 0; i < s->n; i++) {
    if (s->a[i].tier == VX_TIER_NATIVE) continue;
    p[k] = s->a[i].base, n[k++] = SPILL_WHOLE;
  }
  /* One call: none of the launch's allocations is spilled to make room for
   * another of them. */
  return k ? spill_make_resident_many(p, n, k, st) : CUDA_SUCCESS;
}

/* The spill tier's contract: every allocation the launch reaches is whole
 * again before the launch is enqueued (the whole allocation, not only from
 * the pointer on: a kernel may index anywhere in its buffer).  When the
 * set overflowed, the values are resolved again a few at a time, so that
 * none is missed. */
static CUresult make_resident(const obs_set_t *s, const CUdeviceptr *vals, int n, CUstream st) {
  if (!s->overflow) return resident_set(s, st);
  for (int at = 0; at < n; at += 16) {
    obs_set_t part;
    part.n = part.nonnative = part.overflow = 0;
    obs_resolve(vals + at, n - at < 16 ? n - at : 16, &part);
    CUresult r = resident_set(&part, st);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

/* Chunk ranges for the policy and the trace: from the lowest pointer into
 * each allocation to the end of the objects the pointers name.  What lies
 * before a pointer is out (C semantics: the object a pointer argument
 * names starts there); where an object ends is learned (exec_extent: the
 * next pointer other launches pass into the same allocation), else the
 * allocation's end.  So the tensors of a caching allocator's segment do
 * not drag in the rest of it.  A miss is only a fault: managed memory
 * stays correct.  The spill tier, where a miss would be data loss, gets
 * whole allocations (make_resident above). */
static uint32_t ranges_of(const obs_set_t *s, const CUdeviceptr *vals, int nv, pol_range_t *r,
                          int nonnative_only, int *dev) {
  uint32_t n = 0;
  for (int i = 0; i < s->n; i++) {
    const vx_alloc_info_t *a = &s->a[i];
    if ((nonnative_only && a->tier == VX_TIER_NATIVE) || !a->id) continue;
    uint32_t first = (uint32_t)((s->lo[i] - a->base) >> VX_CHUNK_SHIFT);
    uint32_t count = (uint32_t)((a->size - 1) >> VX_CHUNK_SHIFT) - first + 1;
    if (a->tier != VX_TIER_NATIVE && a->size > (1ull << VX_CHUNK_SHIFT)) {
      /* Movable and more than a chunk: bounded by the objects' extents. */
      uint64_t offs[OBS_MAX_VALS];
      int k = 0;
      for (int v = 0; v < nv && k < OBS_MAX_VALS; v++)
        if (vals[v] >= a->base && vals[v] - a->base < a->size) offs[k++] = vals[v] - a->base;
      exec_extent(a->dev, a->id, a->size, offs, k, &first, &count);
    }
    r[n++] = (pol_range_t){
        .alloc_id = a->id, .first = first, .count = count, .mode = POL_ACCESS_UNKNOWN};
    if (*dev < 0) *dev = a->dev;
  }
  return n;
}

/* The launch reaches vals[0..nv) (kernel: 0 = not known yet). */
static CUresult predict_vals(const vx_launch_t *l, const CUdeviceptr *vals, int nv,
                             uint64_t kernel) {
  int tracing = trace_rec_on();
  if (!tracing && !obs_maybe_nonnative(vals, nv)) return CUDA_SUCCESS; /* all native */
  obs_set_t s;
  s.n = s.nonnative = s.overflow = 0;
  obs_resolve(vals, nv, &s);
  if (!s.nonnative && !tracing) return CUDA_SUCCESS; /* the hot path ends here */
  CUstream st = launch_stream(l);
  int cap = capturing(st);
  if (cap > 0) return CUDA_SUCCESS; /* recorded, not run: seen at cuGraphLaunch */
  if (s.nonnative && spill_armed()) {
    CUresult r = make_resident(&s, vals, nv, st);
    if (r != CUDA_SUCCESS || cap < 0) return r;
  }
  if (cap < 0) return CUDA_SUCCESS;
  if (!kernel) kernel = obs_kernel_id(l->f);
  pol_range_t r[OBS_MAX_ALLOCS];
  int dev = -1;
  if (tracing) {
    uint32_t n = ranges_of(&s, vals, nv, r, 0, &dev);
    if (n) trace_rec_launch(dev, kernel, (uint64_t)(uintptr_t)st, r, n);
  }
  dev = -1;
  uint32_t n = s.nonnative && exec_planning() ? ranges_of(&s, vals, nv, r, 1, &dev) : 0;
  return n ? exec_launch(dev, kernel, st, r, n) : CUDA_SUCCESS;
}

/* A launch whose pointer arguments vx cannot learn (obs_values or
 * graph_values said -1): no prediction, no trace record, and the spill
 * tier can no longer prove it sees every access.  The rule: the first such
 * launch while the tier is on restores every spilled chunk and stops all
 * spilling for good (spill_unseen_launch); simplest correct with threads,
 * since nothing can be spilled between the restore and this enqueue.  A
 * capturing stream only records it: the graph's launch decides then. */
static __attribute__((noinline)) CUresult launch_unseen(const vx_launch_t *l) {
  if (capturing(launch_stream(l)) > 0) return CUDA_SUCCESS; /* unknown: restore */
  ctr_add(vx_tls_dev, VX_CTR_launches_unseen, 1);
  VX_LOG_ONCE(VX_LOG_INFO,
              "a %s whose pointer arguments vx cannot learn: not predicted "
              "(counted in launches_unseen)",
              l->graph ? "graph launch" : "kernel launch");
  return spill_armed() ? spill_unseen_launch() : CUDA_SUCCESS;
}

static __attribute__((noinline)) CUresult predict_graph(const vx_launch_t *l) {
  CUdeviceptr vals[OBS_GRAPH_VALS];
  uint64_t kernel = 1;
  int nv = graph_values(l->graph, vals, OBS_GRAPH_VALS, &kernel);
  return nv < 0 ? launch_unseen(l) : predict_vals(l, vals, nv, kernel);
}

CUresult vx_launch_predict(const vx_launch_t *l) {
  if (!exec_planning() && !trace_rec_on() && !spill_armed())
    return CUDA_SUCCESS; /* demand, static */
  if (l->graph) return predict_graph(l);
  CUdeviceptr vals[OBS_MAX_VALS];
  int nv = obs_values(l->f, l->params, l->extra, vals, OBS_MAX_VALS);
  return nv < 0 ? launch_unseen(l) : predict_vals(l, vals, nv, 0);
}

/* After the real launch: a planned launch marks its end for the evictions
 * of later plans (exec_launched; one TLS load when nothing was planned),
 * and the allocations it made resident are marked used by its stream
 * (spill_order_enqueued; one TLS load when it made none resident). */
static inline CUresult launched(int on, int ptsz, CUstream s, CUresult r) {
  if (on) {
    exec_launched(r);
    spill_order_enqueued(ptsz && !s ? CU_STREAM_PER_THREAD : s,
                         r == CUDA_SUCCESS ? SPILL_ORDER_STREAM : SPILL_ORDER_NONE);
  }
  return r;
}
static inline int hook_ptsz(int id) {
  return id == VX_ID_cuLaunchKernel_ptsz || id == VX_ID_cuLaunchKernelEx_ptsz ||
         id == VX_ID_cuLaunchCooperativeKernel_ptsz || id == VX_ID_cuGraphLaunch_ptsz;
}
#define PTSZ(name) hook_ptsz(VX_ID_##name)

static inline CUresult observe(const vx_launch_t *l, int counter) {
  ctr_add(vx_tls_dev, counter, 1);
  vx_launch_observer_fn fn = __atomic_load_n(&launch_observer, __ATOMIC_ACQUIRE);
  return fn ? fn(l) : CUDA_SUCCESS;
}

#define VX_LAUNCH_HOOK(name)                                                                       \
  CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,  \
                unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,   \
                void **extra) {                                                                    \
    VX_ENTER(on);                                                                                  \
    if (on) {                                                                                      \
      vx_launch_t l = {                                                                            \
          .hook = VX_ID_##name, .f = f, .stream = s, .params = params, .extra = extra};            \
      CUresult r = observe(&l, VX_CTR_launches);                                                   \
      if (r != CUDA_SUCCESS) return r;                                                             \
    }                                                                                              \
    return launched(on, PTSZ(name), s,                                                             \
                    VX_CALL(name, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));            \
  }

VX_LAUNCH_HOOK(cuLaunchKernel)
VX_LAUNCH_HOOK(cuLaunchKernel_ptsz)

#define VX_LAUNCH_EX_HOOK(name)                                                                    \
  CUresult name(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {         \
    VX_ENTER(on);                                                                                  \
    if (on) {                                                                                      \
      vx_launch_t l = {.hook = VX_ID_##name,                                                       \
                       .f = f,                                                                     \
                       .stream = config ? config->hStream : NULL,                                  \
                       .params = params,                                                           \
                       .extra = extra,                                                             \
                       .config = config};                                                          \
      CUresult r = observe(&l, VX_CTR_launches);                                                   \
      if (r != CUDA_SUCCESS) return r;                                                             \
    }                                                                                              \
    return launched(on, PTSZ(name), config ? config->hStream : NULL,                               \
                    VX_CALL(name, config, f, params, extra));                                      \
  }

VX_LAUNCH_EX_HOOK(cuLaunchKernelEx)
VX_LAUNCH_EX_HOOK(cuLaunchKernelEx_ptsz)

#define VX_LAUNCH_COOP_HOOK(name)                                                                  \
  CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,  \
                unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params) { \
    VX_ENTER(on);                                                                                  \
    if (on) {                                                                                      \
      vx_launch_t l = {.hook = VX_ID_##name, .f = f, .stream = s, .params = params};               \
      CUresult r = observe(&l, VX_CTR_launches);                                                   \
      if (r != CUDA_SUCCESS) return r;                                                             \
    }                                                                                              \
    return launched(on, PTSZ(name), s,                                                             \
                    VX_CALL(name, f, gx, gy, gz, bx, by, bz, shmem, s, params));                   \
  }

VX_LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel)
VX_LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel_ptsz)

#define VX_GRAPH_HOOK(name)                                                                        \
  CUresult name(CUgraphExec g, CUstream s) {                                                       \
    VX_ENTER(on);                                                                                  \
    if (on) {                                                                                      \
      vx_launch_t l = {.hook = VX_ID_##name, .stream = s, .graph = g};                             \
      CUresult r = observe(&l, VX_CTR_graph_launches);                                             \
      if (r != CUDA_SUCCESS) return r;                                                             \
    }                                                                                              \
    return launched(on, PTSZ(name), s, VX_CALL(name, g, s));                                       \
  }

VX_GRAPH_HOOK(cuGraphLaunch)
VX_GRAPH_HOOK(cuGraphLaunch_ptsz)
