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

/* vx's observer: the launch's allocations (spilled ones made resident
 * first: an error there fails the launch), the trace record, and the
 * predictor's plan.  When every allocation reached is native and no trace
 * is recorded it returns after the registry lookup. */
CUresult vx_launch_predict(const vx_launch_t *launch);

/* graph.c: the device pointers graph exec e's nodes reach, as collected at
 * instantiation (kernel nodes' pointer arguments, memset destinations,
 * memcpy device sides; at most cap written), and the graph's combined
 * kernel id.  Returns how many there are (more than cap: ask again with
 * room), or -1 when the graph is unseen: vx did not see it instantiated,
 * or it holds a node vx cannot read (a kernel node without a layout, a
 * child or conditional graph, a batched memory operation, a kind vx does
 * not know). */
int graph_values(CUgraphExec e, CUdeviceptr *vals, int cap, uint64_t *kernel);
/* graph.c: exec e was instantiated from g (another
 * instantiate form); node's parameters in e are now p; e was updated from g
 * (cuGraphExecUpdate).  What graph_values returns follows each change. */
void graph_remember(CUgraphExec e, CUgraph g);
void graph_exec_set_node(CUgraphExec e, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p);
void graph_exec_set_memset(CUgraphExec e, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p);
void graph_exec_set_memcpy(CUgraphExec e, CUgraphNode node, const CUDA_MEMCPY3D *p);
/* graph.c: exec e is about to be launched: the sources of its small 1D
 * host-to-device copy nodes are read now for stored pointers (ptrref_note),
 * the bytes those copies will write. */
void graph_htod_note(CUgraphExec e);
/* graph.c: before an instantiation with these flags.  A graph made for
 * device launch (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) is launched by
 * kernels, where vx cannot see it: while the NVMe tier is on, everything is
 * restored and spilling stops first (spill_unseen_launch), said once.
 * CUDA_SUCCESS, or the restore's error (then do not instantiate). */
CUresult graph_device_launch_check(unsigned long long flags);
void graph_exec_update(CUgraphExec e, CUgraph g);
void graph_atfork_prepare(void);
void graph_atfork_parent(void);
void graph_atfork_child(void);

#endif
