/* Launch hooks: count, hand the launch to the observer (the predictor's
 * hook point), then launch.  No lock, allocation or syscall on this path. */
#include "launch.h"
#include "vx.h"

static vx_launch_observer_fn launch_observer;

void vx_set_launch_observer(vx_launch_observer_fn fn) {
  __atomic_store_n(&launch_observer, fn, __ATOMIC_RELEASE);
}

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
    return VX_CALL(name, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);                      \
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
    return VX_CALL(name, config, f, params, extra);                                                \
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
    return VX_CALL(name, f, gx, gy, gz, bx, by, bz, shmem, s, params);                             \
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
    return VX_CALL(name, g, s);                                                                    \
  }

VX_GRAPH_HOOK(cuGraphLaunch)
VX_GRAPH_HOOK(cuGraphLaunch_ptsz)
