/* The graph entry points that make or change an executable graph besides
 * cuGraphInstantiateWithFlags: what vx collected for the exec (the values
 * cuGraphLaunch is observed with, and the spill tier restores) follows. */
#include <string.h>

#include "launch.h"
#include "vx.h"

#define INSTANTIATE_P(name)                                                                        \
  CUresult name(CUgraphExec *pe, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *ip) {                   \
    VX_ENTER(on);                                                                                  \
    CUresult r = on && ip ? graph_device_launch_check(ip->flags) : CUDA_SUCCESS;                   \
    if (r != CUDA_SUCCESS) return r;                                                               \
    r = VX_CALL(name, pe, g, ip);                                                                  \
    int ok = r == CUDA_SUCCESS && pe && (!ip || ip->result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS); \
    if (on && ok) graph_remember(*pe, g);                                                          \
    return r;                                                                                      \
  }

INSTANTIATE_P(cuGraphInstantiateWithParams)
INSTANTIATE_P(cuGraphInstantiateWithParams_ptsz)

/* The node's new parameters replace its values (the graph's node keeps its
 * old ones: collecting from the graph again would be wrong). */
CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode node,
                                           const CUDA_KERNEL_NODE_PARAMS *p) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGraphExecKernelNodeSetParams_v2, e, node, p);
  if (on && r == CUDA_SUCCESS) graph_exec_set_node(e, node, p);
  return r;
}

/* v1 parameters are the leading fields of v2 (no kern, no ctx). */
CUresult cuGraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode node,
                                        const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGraphExecKernelNodeSetParams, e, node, p);
  if (on && r == CUDA_SUCCESS && p) {
    CUDA_KERNEL_NODE_PARAMS q;
    memset(&q, 0, sizeof q);
    memcpy(&q, p, sizeof *p);
    graph_exec_set_node(e, node, &q);
  }
  return r;
}

CUresult cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGraphExecUpdate_v2, e, g, info);
  if (on && r == CUDA_SUCCESS) graph_exec_update(e, g);
  return r;
}

CUresult cuGraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphNode *err_node,
                           CUgraphExecUpdateResult *res) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGraphExecUpdate, e, g, err_node, res);
  if (on && r == CUDA_SUCCESS) graph_exec_update(e, g);
  return r;
}

/* The memset and memcpy nodes of an exec: their new ranges
 * replace the old ones, as for kernel nodes. */
CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec e, CUgraphNode node,
                                        const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGraphExecMemsetNodeSetParams, e, node, p, ctx);
  if (on && r == CUDA_SUCCESS) graph_exec_set_memset(e, node, p);
  return r;
}

CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec e, CUgraphNode node, const CUDA_MEMCPY3D *p,
                                        CUcontext ctx) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGraphExecMemcpyNodeSetParams, e, node, p, ctx);
  if (on && r == CUDA_SUCCESS) graph_exec_set_memcpy(e, node, p);
  return r;
}

/* CUDA 12.2's generic form: kernel, memset and memcpy nodes follow as
 * above.  A child graph, conditional or memory-operation node made its
 * graph unseen at instantiation already; the other kinds reach no tracked
 * memory. */
CUresult cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode node, CUgraphNodeParams *np) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGraphExecNodeSetParams, e, node, np);
  if (!on || r != CUDA_SUCCESS || !np) return r;
  if (np->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    CUDA_KERNEL_NODE_PARAMS k; /* v3 and v2 have the same fields */
    _Static_assert(sizeof k == sizeof np->kernel, "kernel node parameters v2 != v3");
    memcpy(&k, &np->kernel, sizeof k);
    graph_exec_set_node(e, node, &k);
  } else if (np->type == CU_GRAPH_NODE_TYPE_MEMSET) {
    const CUDA_MEMSET_NODE_PARAMS_v2 *v = &np->memset;
    CUDA_MEMSET_NODE_PARAMS m = {.dst = v->dst,
                                 .pitch = v->pitch,
                                 .value = v->value,
                                 .elementSize = v->elementSize,
                                 .width = v->width,
                                 .height = v->height};
    graph_exec_set_memset(e, node, &m);
  } else if (np->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
    graph_exec_set_memcpy(e, node, &np->memcpy.copyParams);
  }
  return r;
}
