/* test_sim_entry: the simulator's batch, 2D-set, 3D-peer, stream-memory and
 * exec-graph entry points: data semantics and cuda.h's checks. */
#include <string.h>

#include "sim_test.h"

/* cuda.h names the newest variants; the others by their exact symbols. */
#undef cuMemcpyBatchAsync
#undef cuStreamBatchMemOp
CUresult cuMemcpyBatchAsync(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *,
                            size_t *, size_t, size_t *, CUstream);
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                                    CUmemcpyAttributes *, size_t *, size_t, CUstream);
CUresult cuStreamBatchMemOp(CUstream, unsigned int, CUstreamBatchMemOpParams *, unsigned int);

START_TEST(batch_copies) {
  sim_test_setup(NULL);
  CUdeviceptr a, b;
  CUstream s;
  ck_cu(cuMemAlloc(&a, MiB));
  ck_cu(cuMemAlloc(&b, MiB));
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ck_cu(kit_fill(a, MiB / 4, 7, NULL));
  ck_cu(cuCtxSynchronize());
  CUdeviceptr d[2] = {b, b + MiB / 2}, src[2] = {a, a + MiB / 2};
  size_t n[2] = {MiB / 2, MiB / 2}, idx[1] = {0}, fail = 0;
  CUmemcpyAttributes at = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
  /* "Must not be legacy NULL stream". */
  ck_cu_is(cuMemcpyBatchAsync_v2(d, src, n, 2, &at, idx, 1, NULL), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemcpyBatchAsync_v2(d, src, n, 2, &at, idx, 1, CU_STREAM_LEGACY),
           CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuMemcpyBatchAsync_v2_ptsz(d, src, n, 2, &at, idx, 1, NULL)); /* per-thread: allowed */
  ck_cu(cuMemcpyBatchAsync_v2(d, src, n, 2, &at, idx, 1, s));
  unsigned long long bad = 1;
  ck_cu(kit_check(b, MiB / 4, 7, s, &bad));
  ck_assert_uint_eq(bad, 0);
  /* v1: failIdx names the copy that runs past its allocation. */
  n[1] = MiB;
  ck_cu_is(cuMemcpyBatchAsync(d, src, n, 2, &at, idx, 1, &fail, s), CUDA_ERROR_INVALID_VALUE);
  ck_assert_uint_eq(fail, 1);
  n[1] = MiB / 2;
  ck_cu(cuMemcpyBatchAsync(d, src, n, 2, &at, idx, 1, &fail, s));
  ck_assert_uint_eq(fail, SIZE_MAX);
  size_t idx_bad[1] = {1};
  ck_cu_is(cuMemcpyBatchAsync_v2(d, src, n, 2, &at, idx_bad, 1, s), CUDA_ERROR_INVALID_VALUE);
  at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
  ck_cu_is(cuMemcpyBatchAsync_v2(d, src, n, 2, &at, idx, 1, s), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* A copy out of a discarded managed chunk is an illegal address, in a
 * batch as anywhere else. */
START_TEST(batch_reads_discarded) {
  sim_test_setup(NULL);
  CUdeviceptr m, b;
  CUstream s;
  ck_cu(cuMemAllocManaged(&m, 2 * MiB, CU_MEM_ATTACH_GLOBAL));
  ck_cu(cuMemAlloc(&b, 2 * MiB));
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ck_cu(cuMemsetD8(m, 1, 2 * MiB));
  size_t n = 2 * MiB, idx = 0;
  ck_cu(cuMemDiscardBatchAsync(&m, &n, 1, 0, s));
  CUmemcpyAttributes at = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
  ck_cu(cuMemcpyBatchAsync_v2(&b, &m, &n, 1, &at, &idx, 1, s));
  ck_cu_is(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
}
END_TEST

START_TEST(sets_2d_and_peer_3d) {
  sim_test_setup(NULL);
  CUdeviceptr d;
  CUcontext c;
  static unsigned char h[4 * 4096];
  ck_cu(cuCtxGetCurrent(&c));
  ck_cu(cuMemAlloc(&d, 4 * 4096));
  ck_cu(cuMemsetD8(d, 0, 4 * 4096));
  ck_cu(cuMemsetD2D32(d, 4096, 0x01020304u, 16, 4)); /* 64 bytes of each 4096-byte row */
  ck_cu_is(cuMemsetD2D32(d + 2, 4096, 0, 16, 4), CUDA_ERROR_INVALID_VALUE); /* unaligned */
  ck_cu_is(cuMemsetD2D8(d, 32, 0, 64, 2), CUDA_ERROR_INVALID_VALUE);        /* pitch < row */
  ck_cu_is(cuMemsetD2D8(d, 4096, 0, 64, 5), CUDA_ERROR_INVALID_VALUE);      /* past the end */
  CUDA_MEMCPY3D_PEER p = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                          .srcDevice = d,
                          .srcContext = c,
                          .srcPitch = 4096,
                          .srcHeight = 2,
                          .dstMemoryType = CU_MEMORYTYPE_HOST,
                          .dstHost = h,
                          .dstContext = c,
                          .dstPitch = 4096,
                          .dstHeight = 2,
                          .WidthInBytes = 4096,
                          .Height = 2,
                          .Depth = 2};
  ck_cu(cuMemcpy3DPeer(&p));
  for (int y = 0; y < 4; y++)
    for (int x = 0; x < 4096; x++) {
      uint32_t want = x < 64 ? (0x01020304u >> (8 * (x % 4))) & 0xff : 0;
      ck_assert_uint_eq(h[y * 4096 + x], want);
    }
  p.Depth = 3; /* one slice too many */
  ck_cu_is(cuMemcpy3DPeer(&p), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(stream_memory_ops) {
  sim_test_setup(NULL);
  CUdeviceptr w, d;
  CUstream a, b;
  ck_cu(cuMemAlloc(&w, 4096));
  ck_cu(cuMemAlloc(&d, 4096));
  ck_cu(cuMemsetD8(w, 0, 4096));
  ck_cu(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  ck_cu(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  ck_cu_is(cuStreamWriteValue32(a, w + 2, 1, 0), CUDA_ERROR_INVALID_VALUE); /* unaligned */
  ck_cu_is(cuStreamWriteValue32(a, 0x1000, 1, 0), CUDA_ERROR_INVALID_VALUE);
  /* a waits for b's write, then sets d: the set runs only after the write. */
  ck_cu(cuStreamWaitValue32(a, w, 5, CU_STREAM_WAIT_VALUE_GEQ));
  ck_cu(cuMemsetD32Async(d, 0xabcdef01u, 1, a));
  ck_assert_int_eq(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
  ck_cu(cuStreamWriteValue32(b, w, 7, 0));
  ck_cu(cuStreamSynchronize(a));
  uint32_t v[2];
  ck_cu(cuMemcpyDtoH(v, d, 4));
  ck_assert_uint_eq(v[0], 0xabcdef01u);
  ck_cu(cuStreamWriteValue64(a, w + 8, 0x1122334455667788ull, 0));
  ck_cu(cuStreamSynchronize(a));
  ck_cu(cuMemcpyDtoH(v, w + 8, 8));
  ck_assert_uint_eq(((uint64_t)v[1] << 32) | v[0], 0x1122334455667788ull);
  CUstreamBatchMemOpParams ops[256];
  memset(ops, 0, sizeof ops);
  for (int i = 0; i < 256; i++)
    ops[i].operation = CU_STREAM_MEM_OP_BARRIER;
  ck_cu_is(cuStreamBatchMemOp_v2(a, 256, ops, 0), CUDA_ERROR_INVALID_VALUE); /* < 256 */
  ck_cu_is(cuStreamBatchMemOp(a, 1, ops, 0), CUDA_ERROR_INVALID_VALUE);      /* v2 only */
  ck_cu(cuStreamBatchMemOp_v2(a, 1, ops, 0));
  ck_cu_is(cuStreamBatchMemOp_v2(a, 1, ops, 1), CUDA_ERROR_INVALID_VALUE); /* flags */
}
END_TEST

static CUgraph capture_fill(CUstream s, CUdeviceptr p, uint32_t seed) {
  CUgraph g;
  size_t n = 1024;
  void *args[] = {&p, &n, &seed};
  ck_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ck_cu(cuLaunchKernel(kit_fn("fill_u32"), 8, 1, 1, 128, 1, 1, 0, s, args, NULL));
  ck_cu(cuStreamEndCapture(s, &g));
  return g;
}

START_TEST(exec_graph_changes) {
  sim_test_setup(NULL);
  CUdeviceptr x, y;
  CUstream s;
  ck_cu(cuMemAlloc(&x, 4096));
  ck_cu(cuMemAlloc(&y, 4096));
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUgraph g = capture_fill(s, x, 1);
  CUgraphExec e;
  CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = 1ull << 40};
  ck_cu_is(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_ERROR_INVALID_VALUE);
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  ip.hUploadStream = s;
  ck_cu(cuGraphInstantiateWithParams(&e, g, &ip));
  ck_assert_int_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  /* Re-point the exec's node at y with another seed: the graph keeps x. */
  CUgraphNode node;
  size_t nn = 1;
  ck_cu(cuGraphGetNodes(g, &node, &nn));
  CUDA_KERNEL_NODE_PARAMS p;
  ck_cu(cuGraphKernelNodeGetParams(node, &p));
  CUdeviceptr to = y;
  size_t n = 1024;
  uint32_t seed = 2;
  void *args[] = {&to, &n, &seed};
  p.kernelParams = args;
  ck_cu(cuGraphExecKernelNodeSetParams(e, node, &p));
  CUDA_KERNEL_NODE_PARAMS q;
  ck_cu(cuGraphKernelNodeGetParams(node, &q));
  ck_assert_uint_eq(*(CUdeviceptr *)q.kernelParams[0], x);
  ck_cu(cuMemsetD8(x, 0, 4096));
  ck_cu(cuGraphLaunch(e, s));
  unsigned long long bad = 1;
  ck_cu(kit_check(y, 1024, 2, s, &bad));
  ck_assert_uint_eq(bad, 0);
  ck_cu(kit_check(x, 1024, 0, s, &bad)); /* untouched: still zero, not seed 1 */
  ck_assert_uint_ne(bad, 0);
  /* An update must keep the topology. */
  CUgraph g2;
  ck_cu(cuGraphCreate(&g2, 0));
  CUgraphExecUpdateResultInfo info;
  ck_cu_is(cuGraphExecUpdate(e, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  ck_assert_int_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  CUgraph g3 = capture_fill(s, x, 3);
  ck_cu(cuGraphExecUpdate(e, g3, &info));
  ck_assert_int_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  ck_cu(cuGraphLaunch(e, s));
  ck_cu(kit_check(x, 1024, 3, s, &bad));
  ck_assert_uint_eq(bad, 0);
  ck_cu(cuGraphDestroy(g)); /* its nodes are gone: nothing names them any more */
  ck_cu_is(cuGraphExecKernelNodeSetParams(e, node, &p), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_entry");
  TCase *tc = tcase_create("entry");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, batch_copies);
  tcase_add_test(tc, batch_reads_discarded);
  tcase_add_test(tc, sets_2d_and_peer_3d);
  tcase_add_test(tc, stream_memory_ops);
  tcase_add_test(tc, exec_graph_changes);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
