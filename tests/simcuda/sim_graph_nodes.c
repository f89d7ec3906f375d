/* sim_graph_nodes.c: the parameters of captured memset and memcpy nodes
 * (cuGraphMemsetNodeGetParams, cuGraphMemcpyNodeGetParams) and their
 * changes in an exec (cuGraphExec{Memset,Memcpy}NodeSetParams).  The
 * simulator's copies and sets are 1D: the parameters say so (height and
 * depth 1), and an exec change must stay 1D, of the same direction, and
 * not empty (cuda.h), or it is refused. */
#include <string.h>

#include "sim_internal.h"

static sim_node *node_of(CUgraphNode h, int kind) {
  if (!h || !sim_handle_ok(SIM_H_NODE, h)) return NULL;
  sim_node *nd = (sim_node *)h;
  return nd->op->kind == kind ? nd : NULL;
}

SIM_API CUresult cuGraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *p) {
  SIM_ENTER_INIT(cuGraphMemsetNodeGetParams);
  sim_node *nd = node_of(h, OP_SET);
  if (!nd || !p) return CUDA_ERROR_INVALID_VALUE;
  memset(p, 0, sizeof *p);
  p->dst = nd->op->u.set.dst;
  p->value = nd->op->u.set.val;
  p->elementSize = (unsigned)nd->op->u.set.elsize;
  p->width = nd->op->u.set.n;
  p->height = 1;
  p->pitch = nd->op->u.set.n * (size_t)nd->op->u.set.elsize;
  return CUDA_SUCCESS;
}

static int host_side(int dir, int src) {
  return dir == CP_HTOH || (src ? dir == CP_HTOD : dir == CP_DTOH);
}

SIM_API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode h, CUDA_MEMCPY3D *p) {
  SIM_ENTER_INIT(cuGraphMemcpyNodeGetParams);
  sim_node *nd = node_of(h, OP_COPY);
  if (!nd || !p) return CUDA_ERROR_INVALID_VALUE;
  const sim_op *op = nd->op;
  memset(p, 0, sizeof *p);
  int dir = op->u.cp.dir;
  p->srcMemoryType = host_side(dir, 1) ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  p->dstMemoryType = host_side(dir, 0) ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  if (host_side(dir, 1))
    p->srcHost = op->u.cp.hsrc;
  else
    p->srcDevice = op->u.cp.src;
  if (host_side(dir, 0))
    p->dstHost = op->u.cp.hdst;
  else
    p->dstDevice = op->u.cp.dst;
  p->srcPitch = p->dstPitch = op->u.cp.n;
  p->srcHeight = p->dstHeight = 1;
  p->WidthInBytes = op->u.cp.n;
  p->Height = p->Depth = 1;
  return CUDA_SUCCESS;
}

/* The exec's op for graph node h of kind `kind`, or NULL. */
static sim_op *exec_op(CUgraphExec he, CUgraphNode h, int kind) {
  if (!he || !sim_handle_ok(SIM_H_EXEC, he) || !node_of(h, kind)) return NULL;
  sim_exec *e = (sim_exec *)he;
  for (size_t i = 0; i < e->n; i++)
    if ((CUgraphNode)e->src[i] == h) return e->ops[i];
  return NULL;
}

static int ctx_ok(CUcontext c) {
  return c && sim_handle_ok(SIM_H_CTX, c);
}

static CUresult set_memset(CUgraphExec he, CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p,
                           CUcontext c) {
  sim_op *op = exec_op(he, h, OP_SET);
  if (!op || !p || !ctx_ok(c) || p->height != 1 || !p->width) return CUDA_ERROR_INVALID_VALUE;
  if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)
    return CUDA_ERROR_INVALID_VALUE;
  op->u.set.dst = p->dst;
  op->u.set.val = p->value;
  op->u.set.elsize = (int)p->elementSize;
  op->u.set.n = p->width;
  return CUDA_SUCCESS;
}

/* A 1D side's address (offsets folded in; Y and Z must be 0). */
static int side_1d(size_t x, size_t y, size_t z) {
  (void)x;
  return !y && !z;
}

static CUresult set_memcpy(CUgraphExec he, CUgraphNode h, const CUDA_MEMCPY3D *p, CUcontext c) {
  sim_op *op = exec_op(he, h, OP_COPY);
  if (!op || !p || !ctx_ok(c) || !p->WidthInBytes || p->Height != 1 || p->Depth != 1 ||
      !side_1d(p->srcXInBytes, p->srcY, p->srcZ) || !side_1d(p->dstXInBytes, p->dstY, p->dstZ))
    return CUDA_ERROR_INVALID_VALUE;
  int dir = op->u.cp.dir;
  CUmemorytype st = host_side(dir, 1) ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  CUmemorytype dt = host_side(dir, 0) ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  if (p->srcMemoryType != st || p->dstMemoryType != dt) return CUDA_ERROR_INVALID_VALUE;
  if (st == CU_MEMORYTYPE_HOST)
    op->u.cp.hsrc = (const char *)p->srcHost + p->srcXInBytes;
  else
    op->u.cp.src = p->srcDevice + p->srcXInBytes;
  if (dt == CU_MEMORYTYPE_HOST)
    op->u.cp.hdst = (char *)p->dstHost + p->dstXInBytes;
  else
    op->u.cp.dst = p->dstDevice + p->dstXInBytes;
  op->u.cp.n = p->WidthInBytes;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec he, CUgraphNode h,
                                                const CUDA_MEMSET_NODE_PARAMS *p, CUcontext c) {
  SIM_ENTER_INIT(cuGraphExecMemsetNodeSetParams);
  return set_memset(he, h, p, c);
}

SIM_API CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec he, CUgraphNode h,
                                                const CUDA_MEMCPY3D *p, CUcontext c) {
  SIM_ENTER_INIT(cuGraphExecMemcpyNodeSetParams);
  return set_memcpy(he, h, p, c);
}

/* CUDA 12.2's generic form: kernel, memset and memcpy nodes (the kinds the
 * simulator captures); reserved fields must be zero, other kinds are
 * refused. */
SIM_API CUresult cuGraphExecNodeSetParams(CUgraphExec he, CUgraphNode h, CUgraphNodeParams *np) {
  SIM_ENTER_INIT(cuGraphExecNodeSetParams);
  if (!np || np->reserved0[0] || np->reserved0[1] || np->reserved0[2] || np->reserved2)
    return CUDA_ERROR_INVALID_VALUE;
  if (np->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    CUDA_KERNEL_NODE_PARAMS k;
    memset(&k, 0, sizeof k);
    memcpy(&k, &np->kernel, sizeof np->kernel < sizeof k ? sizeof np->kernel : sizeof k);
    return sim_graph_exec_set_kernel(he, h, &k);
  }
  if (np->type == CU_GRAPH_NODE_TYPE_MEMSET) {
    const CUDA_MEMSET_NODE_PARAMS_v2 *v = &np->memset;
    CUDA_MEMSET_NODE_PARAMS m = {.dst = v->dst,
                                 .pitch = v->pitch,
                                 .value = v->value,
                                 .elementSize = v->elementSize,
                                 .width = v->width,
                                 .height = v->height};
    return set_memset(he, h, &m, v->ctx);
  }
  if (np->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
    if (np->memcpy.flags || np->memcpy.reserved) return CUDA_ERROR_INVALID_VALUE;
    return set_memcpy(he, h, &np->memcpy.copyParams, np->memcpy.copyCtx);
  }
  return CUDA_ERROR_INVALID_VALUE;
}
