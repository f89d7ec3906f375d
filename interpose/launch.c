/* Launch hooks (every kernel and graph launch variant): count, plan
 * (tiers/launch_plan.c: what the launch reaches made ready, traced and
 * planned for), launch, then mark the launch enqueued.  A graph launch's
 * pointers are the ones graph.c collected for the executable graph. */
#include "launch.h"

#include <stdlib.h>

#include "exec.h"
#include "launch_plan.h"
#include "observe.h"
#include "spill.h"
#include "spill_order.h"
#include "trace_rec.h"
#include "vx.h"

/* A graph launch's values: on the stack up to OBS_GRAPH_VALS, else on the
 * heap, so that a graph of thousands of nodes is read whole. */
static __attribute__((noinline)) CUresult plan_graph(const vx_launch_t *l) {
  CUdeviceptr v0[OBS_GRAPH_VALS], *vals = v0;
  uint64_t kernel = 1;
  if (spill_armed()) graph_htod_note(l->graph); /* pointer arrays the graph copies in */
  int nv = graph_values(l->graph, vals, OBS_GRAPH_VALS, &kernel);
  while (nv > OBS_GRAPH_VALS) { /* room for all, and again (an update may add more) */
    int want = nv;
    CUdeviceptr *h = realloc(vals == v0 ? NULL : vals, (size_t)want * sizeof *h);
    if (!h) {
      if (vals != v0) free(vals);
      return launch_plan_unseen(l);
    }
    vals = h;
    if ((nv = graph_values(l->graph, vals, want, &kernel)) <= want) break;
  }
  CUresult r = nv < 0 ? launch_plan_unseen(l) : launch_plan_values(l, vals, nv, kernel);
  if (vals != v0) free(vals);
  return r;
}

/* After the real launch: a planned launch marks its end for the evictions
 * of later plans (exec_launched; one TLS load when nothing was planned),
 * the allocations it made resident are marked used by its stream
 * (spill_order_enqueued; one TLS load when it made none resident), and
 * the spill tier's pins on them lapse: the work is enqueued, so a later
 * spill's snapshot orders after it.  (Pins that outlived the launch kept
 * a hot allocation out of every spill, and the host limit unenforced.) */
static inline CUresult launched(int on, CUstream s, CUresult r) {
  if (on) {
    trace_rec_launched(s, r); /* the end of the launch's timing (VX_TRACE) */
    exec_launched(r);
    spill_order_enqueued(s, r == CUDA_SUCCESS ? SPILL_ORDER_STREAM : SPILL_ORDER_NONE);
    spill_pins_release();
  }
  return r;
}

static inline CUresult observe(const vx_launch_t *l, int counter) {
  ctr_add(vx_tls_dev, counter, 1);
  if (l->graph) return launch_plan_needed() ? plan_graph(l) : CUDA_SUCCESS;
  return launch_plan(l);
}

#define VX_LAUNCH_HOOK(name)                                                                       \
  CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,  \
                unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,   \
                void **extra) {                                                                    \
    VX_ENTER(on);                                                                                  \
    if (on) {                                                                                      \
      vx_launch_t l = {                                                                            \
          .f = f, .stream = VX_HOOK_STREAM(name, s), .params = params, .extra = extra};            \
      CUresult r = observe(&l, VX_CTR_launches);                                                   \
      if (r != CUDA_SUCCESS) return r;                                                             \
    }                                                                                              \
    return launched(on, VX_HOOK_STREAM(name, s),                                                   \
                    VX_CALL(name, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));            \
  }

VX_LAUNCH_HOOK(cuLaunchKernel)
VX_LAUNCH_HOOK(cuLaunchKernel_ptsz)

#define VX_LAUNCH_EX_HOOK(name)                                                                    \
  CUresult name(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {         \
    VX_ENTER(on);                                                                                  \
    if (on) {                                                                                      \
      vx_launch_t l = {.f = f,                                                                     \
                       .stream = VX_HOOK_STREAM(name, config ? config->hStream : NULL),            \
                       .params = params,                                                           \
                       .extra = extra};                                                            \
      CUresult r = observe(&l, VX_CTR_launches);                                                   \
      if (r != CUDA_SUCCESS) return r;                                                             \
    }                                                                                              \
    return launched(on, VX_HOOK_STREAM(name, config ? config->hStream : NULL),                     \
                    VX_CALL(name, config, f, params, extra));                                      \
  }

VX_LAUNCH_EX_HOOK(cuLaunchKernelEx)
VX_LAUNCH_EX_HOOK(cuLaunchKernelEx_ptsz)

#define VX_LAUNCH_COOP_HOOK(name)                                                                  \
  CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,  \
                unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params) { \
    VX_ENTER(on);                                                                                  \
    if (on) {                                                                                      \
      vx_launch_t l = {.f = f, .stream = VX_HOOK_STREAM(name, s), .params = params};               \
      CUresult r = observe(&l, VX_CTR_launches);                                                   \
      if (r != CUDA_SUCCESS) return r;                                                             \
    }                                                                                              \
    return launched(on, VX_HOOK_STREAM(name, s),                                                   \
                    VX_CALL(name, f, gx, gy, gz, bx, by, bz, shmem, s, params));                   \
  }

VX_LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel)
VX_LAUNCH_COOP_HOOK(cuLaunchCooperativeKernel_ptsz)

#define VX_GRAPH_HOOK(name)                                                                        \
  CUresult name(CUgraphExec g, CUstream s) {                                                       \
    VX_ENTER(on);                                                                                  \
    if (on) {                                                                                      \
      vx_launch_t l = {.stream = VX_HOOK_STREAM(name, s), .graph = g};                             \
      CUresult r = observe(&l, VX_CTR_graph_launches);                                             \
      if (r != CUDA_SUCCESS) return r;                                                             \
    }                                                                                              \
    return launched(on, VX_HOOK_STREAM(name, s), VX_CALL(name, g, s));                             \
  }

VX_GRAPH_HOOK(cuGraphLaunch)
VX_GRAPH_HOOK(cuGraphLaunch_ptsz)
