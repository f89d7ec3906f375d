/* sim_graph_exec.c: executable graphs made or changed after capture:
 * cuGraphInstantiateWithParams, cuGraphExecKernelNodeSetParams (v1, _v2)
 * and cuGraphExecUpdate (v1, _v2).  Changes reach the exec only: the graph
 * the exec came from keeps its nodes' old parameters, as on the driver. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static CUresult instantiate_p(CUgraphExec *pe, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *ip,
                              int ptds) {
  const cuuint64_t known =
      CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
      CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (!ip || (ip->flags & ~known)) return CUDA_ERROR_INVALID_VALUE;
  ip->hErrNode_out = NULL;
  ip->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  if (ip->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) { /* the upload stream must be real */
    sim_stream *s;
    CUresult r = sim_stream_resolve(ip->hUploadStream, ptds, &s);
    if (r != CUDA_SUCCESS) return r;
  }
  CUresult r = sim_graph_instantiate(pe, g);
  if (r == CUDA_SUCCESS) ip->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  return r;
}

SIM_API CUresult cuGraphInstantiateWithParams(CUgraphExec *pe, CUgraph g,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *ip) {
  SIM_ENTER_INIT(cuGraphInstantiateWithParams);
  return instantiate_p(pe, g, ip, 0);
}

SIM_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *pe, CUgraph g,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *ip) {
  SIM_ENTER_INIT(cuGraphInstantiateWithParams_ptsz);
  return instantiate_p(pe, g, ip, 1);
}

// ---- kernel node parameters ----

/* Index of graph node `node` in exec e, or -1. */
static long exec_index(sim_exec *e, CUgraphNode node) {
  for (size_t i = 0; i < e->n; i++)
    if ((CUgraphNode)e->src[i] == node) return (long)i;
  return -1;
}

/* The function may change, but not its context (cuda.h).  CUkernel
 * parameters (kern) are not simulated here: func must be given. */
CUresult sim_graph_exec_set_kernel(CUgraphExec he, CUgraphNode node,
                                   const CUDA_KERNEL_NODE_PARAMS *p) {
  if (!he || !sim_handle_ok(SIM_H_EXEC, he) || !node || !sim_handle_ok(SIM_H_NODE, node) || !p)
    return CUDA_ERROR_INVALID_VALUE;
  sim_exec *e = (sim_exec *)he;
  long i = exec_index(e, node);
  if (i < 0 || e->ops[i]->kind != OP_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  sim_func *f = (sim_func *)p->func;
  if (!f || !sim_handle_ok(SIM_H_FUNC, f)) return CUDA_ERROR_INVALID_VALUE;
  if (f->ctx != e->ops[i]->u.k.f->ctx) return CUDA_ERROR_INVALID_VALUE;
  if (!p->gridDimX || !p->gridDimY || !p->gridDimZ || !p->blockDimX || !p->blockDimY ||
      !p->blockDimZ)
    return CUDA_ERROR_INVALID_VALUE;
  unsigned char *buf;
  size_t len;
  CUresult r = sim_pack_params(f, p->kernelParams, p->extra, &buf, &len);
  if (r != CUDA_SUCCESS) return r;
  sim_op *op = e->ops[i];
  free(op->u.k.pbuf);
  op->u.k.f = f;
  op->u.k.pbuf = buf;
  op->u.k.psize = len;
  op->u.k.grid[0] = p->gridDimX, op->u.k.grid[1] = p->gridDimY, op->u.k.grid[2] = p->gridDimZ;
  op->u.k.block[0] = p->blockDimX, op->u.k.block[1] = p->blockDimY;
  op->u.k.block[2] = p->blockDimZ;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec he, CUgraphNode node,
                                                   const CUDA_KERNEL_NODE_PARAMS *p) {
  SIM_ENTER_INIT(cuGraphExecKernelNodeSetParams_v2);
  return sim_graph_exec_set_kernel(he, node, p);
}

/* v1's fields are the leading fields of v2. */
SIM_API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec he, CUgraphNode node,
                                                const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  SIM_ENTER_INIT(cuGraphExecKernelNodeSetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS q;
  memset(&q, 0, sizeof q);
  memcpy(&q, p, sizeof *p);
  return sim_graph_exec_set_kernel(he, node, &q);
}

// ---- whole-graph update ----

/* hg must have the exec's topology: the same nodes, in order, of the same
 * types, kernels of the same context.  Then every op is replaced. */
static CUresult update(CUgraphExec he, CUgraph hg, CUgraphNode *err_node,
                       CUgraphExecUpdateResult *res) {
  *err_node = NULL;
  *res = CU_GRAPH_EXEC_UPDATE_ERROR;
  if (!he || !sim_handle_ok(SIM_H_EXEC, he) || !hg || !sim_handle_ok(SIM_H_GRAPH, hg))
    return CUDA_ERROR_INVALID_VALUE;
  sim_exec *e = (sim_exec *)he;
  sim_graph *g = (sim_graph *)hg;
  if (g->n != e->n) {
    *res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  for (size_t i = 0; i < g->n; i++) {
    const sim_op *a = e->ops[i], *b = g->nodes[i]->op;
    int bad = a->kind != b->kind ? CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED
              : a->kind == OP_KERNEL && a->u.k.f->ctx != b->u.k.f->ctx
                  ? CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE
                  : 0;
    if (bad) {
      *err_node = (CUgraphNode)g->nodes[i];
      *res = (CUgraphExecUpdateResult)bad;
      return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
  }
  sim_op **fresh = calloc(g->n ? g->n : 1, sizeof *fresh);
  size_t k = 0;
  for (; fresh && k < g->n; k++)
    if (!(fresh[k] = sim_op_clone(g->nodes[k]->op))) break;
  if (!fresh || k != g->n) {
    for (size_t i = 0; fresh && i < k; i++)
      sim_op_free(fresh[i]);
    free(fresh);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < e->n; i++) {
    sim_op_free(e->ops[i]);
    e->ops[i] = fresh[i];
  }
  free(fresh);
  *res = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphExecUpdate_v2(CUgraphExec he, CUgraph hg,
                                      CUgraphExecUpdateResultInfo *info) {
  SIM_ENTER_INIT(cuGraphExecUpdate_v2);
  if (!info) return CUDA_ERROR_INVALID_VALUE;
  info->errorFromNode = NULL;
  return update(he, hg, &info->errorNode, &info->result);
}

SIM_API CUresult cuGraphExecUpdate(CUgraphExec he, CUgraph hg, CUgraphNode *err_node,
                                   CUgraphExecUpdateResult *res) {
  SIM_ENTER_INIT(cuGraphExecUpdate);
  if (!err_node || !res) return CUDA_ERROR_INVALID_VALUE;
  return update(he, hg, err_node, res);
}
