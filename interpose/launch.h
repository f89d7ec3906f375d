/* The launch observation point: every kernel and graph launch passes
 * through vx_launch_observe() before the real launch.  The predictor plugs
 * in here with vx_set_launch_observer(). */
#ifndef VX_INTERPOSE_LAUNCH_H
#define VX_INTERPOSE_LAUNCH_H

#include <cuda.h>

typedef struct vx_launch {
  int hook;                     /* VX_ID_cuLaunchKernel, VX_ID_cuGraphLaunch_ptsz, ... */
  CUfunction f;                 /* NULL for graph launches */
  CUstream stream;              /* as the application passed it */
  void **params, **extra;       /* kernelParams / extra (NULL when absent) */
  const CUlaunchConfig *config; /* cuLaunchKernelEx only */
  CUgraphExec graph;            /* cuGraphLaunch only */
} vx_launch_t;

/* Called on the application's thread before each launch, with no vx lock
 * held.  It must be cheap when nothing has to move (the hooks benchmark
 * budget is 100 ns per launch).  A result other than CUDA_SUCCESS fails the
 * launch with that error (for data that cannot be made readable). */
typedef CUresult (*vx_launch_observer_fn)(const vx_launch_t *launch);

/* Installs the observer (NULL = none).  Thread-safe. */
void vx_set_launch_observer(vx_launch_observer_fn fn);

#endif
