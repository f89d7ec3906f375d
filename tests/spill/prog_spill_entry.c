/* prog_spill_entry: the copy, set, stream-memory and graph entry points cudart
 * 12.8/13 reaches beyond prog_spill_hooks' (issue #12 point 8), each reached by
 * its exact symbol (dlsym on libcuda.so.1), on a buffer vx has spilled to
 * NVMe: the operation must see (and keep) the right bytes.  The graph cases
 * re-point an executable graph at the spilled buffer (instantiate with
 * params, exec kernel-node set-params, exec update) and launch it. */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define MB ((size_t)1 << 20)
#define SZ (8 * MB)
#define N32 (SZ / 4)
#define OFF 4096 /* where partial writes land (bytes) */

#define NFILL 6 /* more than the tier's protected last calls (4) */
static CUdeviceptr A, X, Y, Z, fill[NFILL];
static uint32_t *host, *want;
static CUcontext ctx;
static CUstream st;
static const char *only; /* run only the cases whose name holds this */

static int skip(const char *name) {
  return only && !strstr(name, only);
}

static void *entry(const char *name) {
  return vxt_entry(name);
}

static void pattern(uint32_t seed) {
  for (size_t i = 0; i < N32; i++)
    want[i] = kit_hash(seed, i);
}

static void spill_a(uint32_t seed) {
  pattern(seed);
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(A, want, SZ));
  for (int i = 0; i < NFILL; i++)
    CHECK_CU(kit_cu.cuMemcpyHtoD_v2(fill[i], host, SZ));
  CHECK_CU(kit_cu.cuCtxSynchronize());
  for (size_t off = 0; off < SZ; off += 2 * MB)
    VXT_ASSERT(kit_sim_residency(A + off) == -1, "A+%zu not spilled (residency %d)", off,
               kit_sim_residency(A + off));
}

static void expect(CUdeviceptr p, const char *what) {
  CHECK_CU(kit_cu.cuCtxSynchronize());
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(host, p, SZ));
  VXT_ASSERT(!memcmp(host, want, SZ), "%s: wrong bytes", what);
}

// ---- batches ----

typedef CUresult (*batch_v1_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                                CUmemcpyAttributes *, size_t *, size_t, size_t *, CUstream);
typedef CUresult (*batch_v2_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                                CUmemcpyAttributes *, size_t *, size_t, CUstream);

/* A -> X in 40 pieces (more than one group of the tier's pins), two
 * attribute entries. */
static void batch(const char *name, int v2) {
  if (skip(name)) return;
  enum { K = 40 };
  CUdeviceptr d[K], s[K];
  size_t n[K], idx[2] = {0, 25}, fail = 7;
  CUmemcpyAttributes at[2];
  memset(at, 0, sizeof at);
  at[0].srcAccessOrder = at[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  for (int i = 0; i < K; i++) {
    size_t lo = SZ / K * (size_t)i, hi = i == K - 1 ? SZ : SZ / K * (size_t)(i + 1);
    d[i] = X + lo, s[i] = A + lo, n[i] = hi - lo;
  }
  spill_a(11);
  CHECK_CU(kit_cu.cuMemsetD32_v2(X, 0, N32));
  CUresult r = v2 ? ((batch_v2_fn)entry(name))(d, s, n, K, at, idx, 2, st)
                  : ((batch_v1_fn)entry(name))(d, s, n, K, at, idx, 2, &fail, st);
  CHECK_CU(r);
  VXT_ASSERT(v2 || fail == SIZE_MAX, "%s: failIdx %zu after success", name, fail);
  expect(X, name);
  expect(A, name);
}

typedef CUresult (*b3_v1_fn)(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long,
                             CUstream);
typedef CUresult (*b3_v2_fn)(size_t, CUDA_MEMCPY3D_BATCH_OP *, unsigned long long, CUstream);

static void batch_3d(const char *name, int v2) {
  if (skip(name)) return;
  CUDA_MEMCPY3D_BATCH_OP op;
  memset(&op, 0, sizeof op);
  op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.src.op.ptr.ptr = A, op.dst.op.ptr.ptr = X;
  op.extent = (CUextent3D){.width = MB, .height = 4, .depth = 2};
  op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  spill_a(12);
  CHECK_CU(kit_cu.cuMemsetD32_v2(X, 0, N32));
  size_t fail = 0;
  CHECK_CU(v2 ? ((b3_v2_fn)entry(name))(1, &op, 0, st)
              : ((b3_v1_fn)entry(name))(1, &op, &fail, 0, st));
  expect(X, name);
}

// ---- 3D peer copies, 2D sets, arrays ----

static void peer_3d(const char *name) {
  if (skip(name)) return;
  CUDA_MEMCPY3D_PEER c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = A, c.srcContext = ctx;
  c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = host, c.dstContext = ctx;
  c.WidthInBytes = MB, c.Height = 8, c.Depth = 1, c.srcPitch = c.dstPitch = MB;
  spill_a(13);
  memset(host, 0, SZ);
  CUresult r = strstr(name, "Async")
                   ? ((CUresult(*)(const CUDA_MEMCPY3D_PEER *, CUstream))entry(name))(&c, NULL)
                   : ((CUresult(*)(const CUDA_MEMCPY3D_PEER *))entry(name))(&c);
  CHECK_CU(r);
  CHECK_CU(kit_cu.cuCtxSynchronize());
  VXT_ASSERT(!memcmp(host, want, SZ), "%s: wrong bytes", name);
}

/* 4 rows of 64 elements, 4096 bytes apart, from A+OFF. */
static void set_2d(const char *name, int el) {
  if (skip(name)) return;
  spill_a(14);
  int async = strstr(name, "Async") != NULL;
  CUresult r;
  if (el == 1)
    r = async ? ((CUresult(*)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream))entry(
                    name))(A + OFF, 4096, 0x5a, 64, 4, NULL)
              : ((CUresult(*)(CUdeviceptr, size_t, unsigned char, size_t, size_t))entry(name))(
                    A + OFF, 4096, 0x5a, 64, 4);
  else if (el == 2)
    r = async ? ((CUresult(*)(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream))entry(
                    name))(A + OFF, 4096, 0x5a5a, 64, 4, NULL)
              : ((CUresult(*)(CUdeviceptr, size_t, unsigned short, size_t, size_t))entry(name))(
                    A + OFF, 4096, 0x5a5a, 64, 4);
  else
    r = async ? ((CUresult(*)(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream))entry(
                    name))(A + OFF, 4096, 0x5a5a5a5au, 64, 4, NULL)
              : ((CUresult(*)(CUdeviceptr, size_t, unsigned int, size_t, size_t))entry(name))(
                    A + OFF, 4096, 0x5a5a5a5au, 64, 4);
  CHECK_CU(r);
  for (int y = 0; y < 4; y++)
    memset((char *)want + OFF + 4096 * y, 0x5a, 64 * (size_t)el);
  expect(A, name);
}

static void arrays(const char *atod, const char *dtoa) {
  if (skip(atod)) return;
  CUarray arr;
  CUDA_ARRAY_DESCRIPTOR d = {
      .Width = 65536, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
  CHECK_CU(
      ((CUresult(*)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *))entry("cuArrayCreate_v2"))(&arr, &d));
  CUresult (*htoa)(CUarray, size_t, const void *, size_t) = entry("cuMemcpyHtoA_v2");
  CUresult (*atoh)(void *, CUarray, size_t, size_t) = entry("cuMemcpyAtoH_v2");
  /* DtoA reads the spilled A. */
  spill_a(15);
  CHECK_CU(((CUresult(*)(CUarray, size_t, CUdeviceptr, size_t))entry(dtoa))(arr, 0, A, 65536));
  memset(host, 0, 65536);
  CHECK_CU(atoh(host, arr, 0, 65536));
  VXT_ASSERT(!memcmp(host, want, 65536), "%s: wrong bytes", dtoa);
  /* AtoD writes part of the spilled A: the rest must survive. */
  spill_a(16);
  uint32_t words[4] = {0xfeedf00d, 4, 5, 6};
  CHECK_CU(htoa(arr, 128, words, sizeof words));
  CHECK_CU(((CUresult(*)(CUdeviceptr, CUarray, size_t, size_t))entry(atod))(A + OFF, arr, 128,
                                                                            sizeof words));
  memcpy((char *)want + OFF, words, sizeof words);
  expect(A, atod);
  CHECK_CU(((CUresult(*)(CUarray))entry("cuArrayDestroy"))(arr));
}

// ---- stream memory operations, v1 prefetch ----

typedef CUresult (*v32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
typedef CUresult (*v64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned);

static void write_value(const char *name, int wide) {
  if (skip(name)) return;
  spill_a(17);
  uint64_t v = 0x0123456789abcdefull;
  CHECK_CU(wide ? ((v64_fn)entry(name))(st, A + OFF, v, 0)
                : ((v32_fn)entry(name))(st, A + OFF, (cuuint32_t)v, 0));
  memcpy((char *)want + OFF, &v, wide ? 8 : 4);
  expect(A, name);
}

/* A wait on a word of the spilled A that already holds the awaited value. */
static void wait_value(const char *name, int wide) {
  if (skip(name)) return;
  spill_a(18);
  uint64_t v;
  memcpy(&v, (char *)want + OFF, 8);
  CHECK_CU(wide ? ((v64_fn)entry(name))(st, A + OFF, v, CU_STREAM_WAIT_VALUE_EQ)
                : ((v32_fn)entry(name))(st, A + OFF, (cuuint32_t)v, CU_STREAM_WAIT_VALUE_EQ));
  CHECK_CU(kit_cu.cuStreamSynchronize(st));
  expect(A, name);
}

static void batch_memop(const char *name) {
  if (skip(name)) return;
  CUstreamBatchMemOpParams ops[3];
  memset(ops, 0, sizeof ops);
  spill_a(19);
  uint64_t v;
  memcpy(&v, (char *)want + OFF + 64, 8);
  ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
  ops[0].waitValue.address = A + OFF + 64;
  ops[0].waitValue.value64 = v;
  ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[1].writeValue.address = A + OFF;
  ops[1].writeValue.value = 0xa1b2c3d4u;
  ops[2].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  ops[2].writeValue.address = A + OFF + 8;
  ops[2].writeValue.value64 = 0x1122334455667788ull;
  CHECK_CU(((CUresult(*)(CUstream, unsigned, CUstreamBatchMemOpParams *, unsigned))entry(name))(
      st, 3, ops, 0));
  memcpy((char *)want + OFF, &ops[1].writeValue.value, 4);
  memcpy((char *)want + OFF + 8, &ops[2].writeValue.value64, 8);
  expect(A, name);
}

static void prefetch_v1(const char *name) {
  if (skip(name)) return;
  spill_a(20);
  simcuda_stats_t s0, s1;
  VXT_ASSERT(kit_sim_stats(0, &s0) == 0);
  CHECK_CU(((CUresult(*)(CUdeviceptr, size_t, CUdevice, CUstream))entry(name))(A, SZ, 0, NULL));
  CHECK_CU(kit_cu.cuCtxSynchronize());
  /* The contents moved up, not zero pages in place of discarded ones. */
  VXT_ASSERT(kit_sim_stats(0, &s1) == 0);
  VXT_ASSERT(s1.bytes_prefetch_htod - s0.bytes_prefetch_htod >= SZ,
             "%s: prefetched %llu bytes of contents, not the %zu restored first", name,
             (unsigned long long)(s1.bytes_prefetch_htod - s0.bytes_prefetch_htod), SZ);
  for (size_t off = 0; off < SZ; off += 2 * MB)
    VXT_ASSERT(kit_sim_residency(A + off) == 1, "%s: A+%zu not on the device", name, off);
  expect(A, name);
}

// ---- graphs ----

/* A graph of one kernel node, add_u32(Y, src, Z, N32): Y = src (Z is 0). */
static CUgraph capture_add(CUdeviceptr src) {
  CUgraph g;
  CUdeviceptr dst = Y, zero = Z;
  size_t n = N32;
  void *args[] = {&dst, &src, &zero, &n};
  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_RELAXED));
  CHECK_CU(kit_cu.cuLaunchKernel(kit_fn("add_u32"), 64, 1, 1, 128, 1, 1, 0, st, args, NULL));
  CHECK_CU(kit_cu.cuStreamEndCapture(st, &g));
  return g;
}

static void launch_expect_y(CUgraphExec e, const char *what) {
  CHECK_CU(kit_cu.cuMemsetD32_v2(Y, 0, N32));
  CHECK_CU(kit_cu.cuMemsetD32_v2(Z, 0, N32));
  spill_a(21);
  CHECK_CU(kit_cu.cuGraphLaunch(e, st));
  CHECK_CU(kit_cu.cuStreamSynchronize(st));
  expect(Y, what);
}

static void graph_with_params(void) {
  if (skip("cuGraphInstantiateWithParams")) return;
  CUgraph g = capture_add(A);
  CUgraphExec e;
  CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = 0};
  CHECK_CU(((CUresult(*)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *))entry(
      "cuGraphInstantiateWithParams"))(&e, g, &ip));
  VXT_ASSERT(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS);
  launch_expect_y(e, "cuGraphInstantiateWithParams");
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(g));
}

/* Instantiated on X, re-pointed at A in the exec only. */
static void graph_set_params(const char *name) {
  if (skip(name)) return;
  CUgraph g = capture_add(X);
  CUgraphExec e;
  CHECK_CU(kit_cu.cuGraphInstantiateWithFlags(&e, g, 0));
  CUgraphNode node;
  size_t nn = 1;
  CHECK_CU(
      ((CUresult(*)(CUgraph, CUgraphNode *, size_t *))entry("cuGraphGetNodes"))(g, &node, &nn));
  CUDA_KERNEL_NODE_PARAMS p;
  CHECK_CU(((CUresult(*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *))entry(
      "cuGraphKernelNodeGetParams_v2"))(node, &p));
  CUdeviceptr dst = Y, src = A, zero = Z;
  size_t n = N32;
  void *args[] = {&dst, &src, &zero, &n};
  p.kernelParams = args;
  p.extra = NULL;
  CHECK_CU(((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *))entry(name))(
      e, node, &p));
  launch_expect_y(e, name);
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(g));
}

static void graph_update(const char *name, int v2) {
  if (skip(name)) return;
  CUgraph g = capture_add(X), g2 = capture_add(A);
  CUgraphExec e;
  CHECK_CU(kit_cu.cuGraphInstantiateWithFlags(&e, g, 0));
  if (v2) {
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(((CUresult(*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *))entry(name))(
        e, g2, &info));
  } else {
    CUgraphNode bad;
    CUgraphExecUpdateResult res;
    CHECK_CU(((CUresult(*)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *))entry(
        name))(e, g2, &bad, &res));
  }
  launch_expect_y(e, name);
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(g));
  CHECK_CU(kit_cu.cuGraphDestroy(g2));
}

static int worker(const char *filter) {
  only = filter;
  CUmodule m;
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&m));
  host = malloc(SZ);
  want = malloc(SZ);
  memset(host, 7, SZ);
  CHECK_CU(kit_cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CUdeviceptr *bufs[] = {&A, &X, &Y, &Z};
  for (int i = 0; i < 4; i++)
    CHECK_CU(kit_cu.cuMemAlloc_v2(bufs[i], SZ));
  for (int i = 0; i < NFILL; i++)
    CHECK_CU(kit_cu.cuMemAlloc_v2(&fill[i], SZ));
  int cases = 0;
  const char *b1[] = {"cuMemcpyBatchAsync", "cuMemcpyBatchAsync_ptsz"};
  const char *b2[] = {"cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync_v2_ptsz"};
  const char *c1[] = {"cuMemcpy3DBatchAsync", "cuMemcpy3DBatchAsync_ptsz"};
  const char *c2[] = {"cuMemcpy3DBatchAsync_v2", "cuMemcpy3DBatchAsync_v2_ptsz"};
  for (int i = 0; i < 2; i++, cases += 4) {
    batch(b1[i], 0);
    batch(b2[i], 1);
    batch_3d(c1[i], 0);
    batch_3d(c2[i], 1);
  }
  const char *peers[] = {"cuMemcpy3DPeer", "cuMemcpy3DPeer_ptds", "cuMemcpy3DPeerAsync",
                         "cuMemcpy3DPeerAsync_ptsz"};
  for (int i = 0; i < 4; i++, cases++)
    peer_3d(peers[i]);
  const char *sets[] = {
      "cuMemsetD2D8_v2",         "cuMemsetD2D8_v2_ptds",   "cuMemsetD2D16_v2",
      "cuMemsetD2D16_v2_ptds",   "cuMemsetD2D32_v2",       "cuMemsetD2D32_v2_ptds",
      "cuMemsetD2D8Async",       "cuMemsetD2D8Async_ptsz", "cuMemsetD2D16Async",
      "cuMemsetD2D16Async_ptsz", "cuMemsetD2D32Async",     "cuMemsetD2D32Async_ptsz"};
  const int els[] = {1, 1, 2, 2, 4, 4, 1, 1, 2, 2, 4, 4};
  for (int i = 0; i < 12; i++, cases++)
    set_2d(sets[i], els[i]);
  arrays("cuMemcpyAtoD_v2", "cuMemcpyDtoA_v2");
  arrays("cuMemcpyAtoD_v2_ptds", "cuMemcpyDtoA_v2_ptds");
  cases += 4;
  const char *vals[] = {"cuStreamWriteValue32", "cuStreamWriteValue32_ptsz",
                        "cuStreamWriteValue32_v2", "cuStreamWriteValue32_v2_ptsz"};
  const char *vals64[] = {"cuStreamWriteValue64", "cuStreamWriteValue64_ptsz",
                          "cuStreamWriteValue64_v2", "cuStreamWriteValue64_v2_ptsz"};
  const char *waits[] = {"cuStreamWaitValue32", "cuStreamWaitValue32_ptsz",
                         "cuStreamWaitValue32_v2", "cuStreamWaitValue32_v2_ptsz"};
  const char *waits64[] = {"cuStreamWaitValue64", "cuStreamWaitValue64_ptsz",
                           "cuStreamWaitValue64_v2", "cuStreamWaitValue64_v2_ptsz"};
  const char *memops[] = {"cuStreamBatchMemOp", "cuStreamBatchMemOp_ptsz", "cuStreamBatchMemOp_v2",
                          "cuStreamBatchMemOp_v2_ptsz"};
  for (int i = 0; i < 4; i++, cases += 5) {
    write_value(vals[i], 0);
    write_value(vals64[i], 1);
    wait_value(waits[i], 0);
    wait_value(waits64[i], 1);
    batch_memop(memops[i]);
  }
  prefetch_v1("cuMemPrefetchAsync");
  prefetch_v1("cuMemPrefetchAsync_ptsz");
  cases += 2;
  graph_with_params();
  graph_set_params("cuGraphExecKernelNodeSetParams_v2");
  graph_set_params("cuGraphExecKernelNodeSetParams");
  graph_update("cuGraphExecUpdate_v2", 1);
  graph_update("cuGraphExecUpdate", 0);
  cases += 5;
  printf("ok %d cases\n", cases);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker(argc > 2 ? argv[2] : NULL);
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  char dir[256], e_dir[300];
  vxt_tmpname(dir, sizeof dir, ".swap");
  VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", dir);
  const char *env[] = {"SIMCUDA_VRAM=128M", "VX_DEVICE_LIMIT=0", "VX_HOST_LIMIT=16M", e_dir, NULL};
  /* An argument runs only the cases whose entry-point name holds it. */
  const char *args[] = {argc > 1 ? argv[1] : NULL, NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0);
  rmdir(dir);
  printf("%s%s", r.out, r.err);
  VXT_ASSERT(r.status == 0 && (argc > 1 || strstr(r.out, "ok 55 cases")), "worker status %d",
             r.status);
  return 0;
}
