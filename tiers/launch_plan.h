/* The launch path's planning, called by the launch hooks before each real
 * launch on the application's thread, with no vx lock held: the launch's
 * allocations (spilled ones made resident first: an error there fails the
 * launch), the trace record (VX_TRACE) and the predictor's plan.  When
 * every allocation reached is native and no trace is recorded it returns
 * after the registry lookup (the hooks benchmark: tens of ns a launch). */
#ifndef VX_TIERS_LAUNCH_PLAN_H
#define VX_TIERS_LAUNCH_PLAN_H

#include <cuda.h>
#include <stdint.h>

typedef struct vx_launch {
  CUfunction f;           /* NULL for graph launches */
  CUstream stream;        /* CU_STREAM_PER_THREAD for a per-thread default stream */
  void **params, **extra; /* kernelParams / extra (NULL when absent) */
  CUgraphExec graph;      /* cuGraphLaunch only */
} vx_launch_t;

/* 1 when a launch needs planning at all (the predictor plans, a trace is
 * recorded, or the NVMe tier may have spilled): else the hooks skip it. */
int launch_plan_needed(void);
/* A kernel launch: its parameter values are read through the kernel's
 * layout (observe.c).  CUDA_SUCCESS, or the error that fails the launch. */
CUresult launch_plan(const vx_launch_t *l);
/* A launch that reaches vals[0..nv) (a graph launch: the values graph.c
 * collected; kernel: the graph's combined id, 0 = from l->f), and what
 * pointers stored in device memory among them reach (ptrref_expand). */
CUresult launch_plan_values(const vx_launch_t *l, const CUdeviceptr *vals, int nv, uint64_t kernel);
/* A launch whose pointer arguments vx cannot learn: no prediction, no
 * trace record, and the spill tier can no longer prove it sees every
 * access (spill_unseen_launch restores everything and stops spilling). */
CUresult launch_plan_unseen(const vx_launch_t *l);

#endif
