/* What the launch hooks ask of graph.c: the pointers an executable graph's
 * nodes reach, kept current through instantiation and exec updates. */
#ifndef VX_INTERPOSE_LAUNCH_H
#define VX_INTERPOSE_LAUNCH_H

#include <cuda.h>
#include <stdint.h>

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
