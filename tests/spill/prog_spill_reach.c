/* prog_spill_reach: everything a launch or a graph reaches is restored from the
 * NVMe swap before it runs (issue #13), with no cap that loses the tail.
 * Each mode spills its buffers (checked: the simulator reports them
 * discarded, and reads of discarded memory fail with ILLEGAL_ADDRESS),
 * runs the pattern, and verifies every byte:
 *   graph_memset   a captured cuMemsetD8Async, and the exec's node moved to
 *                  another buffer and back (cuGraphExecMemsetNodeSetParams,
 *                  cuGraphExecNodeSetParams); the graph is seen: spilling
 *                  goes on after it
 *   graph_memcpy   captured DtoH and DtoD copies reading a spilled buffer,
 *                  and the exec's DtoD node re-pointed; spilling goes on
 *   many_allocs    one kernel reading 48, then 300 spilled allocations
 *                  (a struct of pointers: a fused optimizer's shape)
 *   graph_nodes    a graph of 600 kernel nodes, the last one reading a
 *                  spilled buffer
 *   params_big     a pointer at byte 3000 of a 4 KiB struct parameter, and
 *                  a pointer as the 300th of 300 parameters
 *   extra_oversize an `extra` launch claiming 1 MiB for a 32-byte buffer at
 *                  the end of a mapping (vx must not read past it)
 *   ptr_array      a pointer array copied in with cuMemcpyHtoD(Async), read
 *                  by a kernel that follows its pointers to spilled buffers;
 *                  then freed, made again and filled with other pointers
 *   graph_ptr_array a graph copying a pointer array in from pinned memory
 *                  (new pointers before each launch), then following it
 *   graph_device_launch a graph instantiated for device launch restores
 *                  everything first (vx cannot see kernels launch it)
 * usage: prog_spill_reach MODE (runs `prog_spill_reach --worker MODE` under vx). */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define MB ((size_t)1 << 20)
#define SZ (8 * MB)
#define N32 (SZ / 4)
#define OFF 4096 /* where partial writes land (bytes) */
#define NFILL 6  /* 48 MiB pushed through a 16 MiB host limit */
#define SMALL (256 << 10)
#define NMANY 300
#define NWIDE 300
#define NNODES 600
#define NGATHER 8

static CUdeviceptr A, X, cnt, fill[NFILL];
static uint32_t *host, *want;
static CUcontext ctx;
static CUstream st;
static CUmodule mod;

static void *entry(const char *name) {
  return vxt_entry(name);
}
#define CU(name) ((__typeof__(&name))entry(#name))

// ---- kernels of this test (PTX layouts; host bodies for the simulator) ----

#define ARG(T, i) (*(T *)params[i])

/* p[0..n) holds kit_hash(seed, i)?  Mismatches added to *bad.  0 when the
 * simulator refused an access (the launch then fails). */
static int check(simcuda_kctx_t *k, CUdeviceptr p, size_t n, uint32_t seed,
                 unsigned long long *bad) {
  const uint32_t *h = kit_access(k, p, n * 4, SIMCUDA_READ);
  if (!h) return 0;
  for (size_t i = 0; i < n; i++)
    *bad += h[i] != kit_hash(seed, i);
  return 1;
}

/* reach_many(struct { CUdeviceptr p[NMANY]; } ptrs, count, n, cnt): p[i]
 * holds seed i. */
SIMCUDA_KERNEL(reach_many) {
  const CUdeviceptr *p = params[0];
  size_t count = ARG(size_t, 1), n = ARG(size_t, 2);
  unsigned long long *bad = kit_access(k, ARG(CUdeviceptr, 3), 8, SIMCUDA_RW);
  for (size_t i = 0; bad && i < count; i++)
    if (!check(k, p[i], n, (uint32_t)i, bad)) return;
}

/* reach_big(4 KiB struct: pointer at 3000, n at 3008, seed at 3016; cnt) */
SIMCUDA_KERNEL(reach_big) {
  const unsigned char *s = params[0];
  CUdeviceptr p;
  size_t n;
  uint64_t seed;
  memcpy(&p, s + 3000, 8), memcpy(&n, s + 3008, 8), memcpy(&seed, s + 3016, 8);
  unsigned long long *bad = kit_access(k, ARG(CUdeviceptr, 1), 8, SIMCUDA_RW);
  if (bad) check(k, p, n, (uint32_t)seed, bad);
}

/* reach_wide(NWIDE u64 parameters: cnt at 0, n at NWIDE-2, the pointer
 * last; seed 7) */
SIMCUDA_KERNEL(reach_wide) {
  unsigned long long *bad = kit_access(k, ARG(CUdeviceptr, 0), 8, SIMCUDA_RW);
  if (bad) check(k, ARG(CUdeviceptr, NWIDE - 1), ARG(size_t, NWIDE - 2), 7, bad);
}

/* reach_gather(ptrs, count, n, cnt): ptrs[i] in device memory, seed i. */
SIMCUDA_KERNEL(reach_gather) {
  size_t count = ARG(size_t, 1), n = ARG(size_t, 2);
  const CUdeviceptr *p = kit_access(k, ARG(CUdeviceptr, 0), count * 8, SIMCUDA_READ);
  unsigned long long *bad = p ? kit_access(k, ARG(CUdeviceptr, 3), 8, SIMCUDA_RW) : NULL;
  for (size_t i = 0; bad && i < count; i++)
    if (!check(k, p[i], n, (uint32_t)i, bad)) return;
}

static char *ptx(void) {
  size_t cap = 64 << 10, at = 0;
  char *s = malloc(cap);
  at += (size_t)snprintf(s + at, cap - at,
                         ".version 8.0\n.target sm_90\n.address_size 64\n"
                         ".visible .entry reach_many(.param .align 8 .b8 m0[%d], .param .u64 m1, "
                         ".param .u64 m2, .param .u64 m3)\n{\n\tret;\n}\n"
                         ".visible .entry reach_big(.param .align 8 .b8 b0[4096], .param .u64 "
                         "b1)\n{\n\tret;\n}\n"
                         ".visible .entry reach_gather(.param .u64 g0, .param .u64 g1, .param "
                         ".u64 g2, .param .u64 g3)\n{\n\tret;\n}\n"
                         ".visible .entry reach_wide(",
                         NMANY * 8);
  for (int i = 0; i < NWIDE; i++)
    at += (size_t)snprintf(s + at, cap - at, "%s.param .u64 w%d", i ? ", " : "", i);
  snprintf(s + at, cap - at, ")\n{\n\tret;\n}\n");
  return s;
}

static CUfunction fn(const char *name) {
  CUfunction f;
  CHECK_CU(kit_cu.cuModuleGetFunction(&f, mod, name));
  return f;
}

// ---- helpers ----

static void pattern(uint32_t *dst, size_t n32, uint32_t seed) {
  for (size_t i = 0; i < n32; i++)
    dst[i] = kit_hash(seed, i);
}

/* Other buffers written after the given ones: those go to the swap. */
static void push_out(void) {
  for (int i = 0; i < NFILL; i++)
    CHECK_CU(kit_cu.cuMemcpyHtoD_v2(fill[i], host, SZ));
  CHECK_CU(kit_cu.cuCtxSynchronize());
}

static int spilled(CUdeviceptr p, size_t n) {
  for (size_t off = 0; off < n; off += 2 * MB)
    if (kit_sim_residency(p + off) != -1) return 0;
  return 1;
}

static void must_spill(CUdeviceptr p, size_t n, const char *what) {
  VXT_ASSERT(spilled(p, n), "%s not spilled (residency %d): the case would prove nothing", what,
             kit_sim_residency(p));
}

/* want[] into A, then A spilled. */
static void spill_a(uint32_t seed) {
  pattern(want, N32, seed);
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(A, want, SZ));
  push_out();
  must_spill(A, SZ, "A");
}

static void expect(CUdeviceptr p, const char *what) {
  CHECK_CU(kit_cu.cuCtxSynchronize());
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(host, p, SZ));
  VXT_ASSERT(!memcmp(host, want, SZ), "%s: wrong bytes", what);
}

static unsigned long long take_bad(void) {
  unsigned long long bad = 0;
  CHECK_CU(kit_cu.cuCtxSynchronize());
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(&bad, cnt, sizeof bad));
  CHECK_CU(kit_cu.cuMemsetD32_v2(cnt, 0, 2));
  return bad;
}

static CUgraphExec instantiate(CUgraph g) {
  CUgraphExec e;
  CHECK_CU(kit_cu.cuGraphInstantiateWithFlags(&e, g, 0));
  return e;
}

static CUgraphNode only_node(CUgraph g, size_t i) {
  CUgraphNode nodes[4];
  size_t n = 4;
  CHECK_CU(CU(cuGraphGetNodes)(g, nodes, &n));
  VXT_ASSERT(i < n);
  return nodes[i];
}

// ---- modes ----

static void graph_memset(void) {
  CUgraph g;
  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(CU(cuMemsetD8Async)(A + OFF, 0xa5, 64 << 10, st));
  CHECK_CU(kit_cu.cuStreamEndCapture(st, &g));
  CUgraphExec e = instantiate(g);
  spill_a(1);
  CHECK_CU(kit_cu.cuGraphLaunch(e, st));
  memset((char *)want + OFF, 0xa5, 64 << 10);
  expect(A, "memset node into spilled A");
  /* the exec's node now sets X: X restored before the launch */
  CUDA_MEMSET_NODE_PARAMS p;
  CHECK_CU(CU(cuGraphMemsetNodeGetParams)(only_node(g, 0), &p));
  p.dst = X + OFF, p.value = 0x5a;
  CHECK_CU(CU(cuGraphExecMemsetNodeSetParams)(e, only_node(g, 0), &p, ctx));
  pattern(want, N32, 2);
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(X, want, SZ));
  push_out();
  must_spill(X, SZ, "X");
  CHECK_CU(kit_cu.cuGraphLaunch(e, st));
  memset((char *)want + OFF, 0x5a, 64 << 10);
  expect(X, "memset node re-pointed at spilled X");
  /* and back to A through 12.2's generic form */
  CUgraphNodeParams np;
  memset(&np, 0, sizeof np);
  np.type = CU_GRAPH_NODE_TYPE_MEMSET;
  np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){A + OFF, p.pitch, 0x3c, 1, p.width, 1, ctx};
  CHECK_CU(CU(cuGraphExecNodeSetParams)(e, only_node(g, 0), &np));
  spill_a(3); /* the tier still spills: the graph was seen */
  CHECK_CU(kit_cu.cuGraphLaunch(e, st));
  memset((char *)want + OFF, 0x3c, 64 << 10);
  expect(A, "memset node re-pointed at spilled A (cuGraphExecNodeSetParams)");
  spill_a(12);
  expect(A, "A after the graphs");
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(g));
}

static void graph_memcpy(void) {
  CUgraph g;
  uint32_t *out = malloc(SZ);
  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(CU(cuMemcpyDtoHAsync_v2)(out, A, SZ, st));
  CHECK_CU(CU(cuMemcpyDtoDAsync_v2)(X, A, SZ, st));
  CHECK_CU(kit_cu.cuStreamEndCapture(st, &g));
  CUgraphExec e = instantiate(g);
  spill_a(4);
  CHECK_CU(kit_cu.cuGraphLaunch(e, st));
  CHECK_CU(kit_cu.cuStreamSynchronize(st));
  VXT_ASSERT(!memcmp(out, want, SZ), "DtoH node from spilled A: wrong bytes");
  expect(X, "DtoD node from spilled A");
  /* the exec's DtoD node now copies fill[0] (spilled) into X */
  CUDA_MEMCPY3D c;
  CHECK_CU(CU(cuGraphMemcpyNodeGetParams)(only_node(g, 1), &c));
  pattern(want, N32, 5);
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(fill[0], want, SZ));
  c.srcDevice = fill[0];
  CHECK_CU(CU(cuGraphExecMemcpyNodeSetParams)(e, only_node(g, 1), &c, ctx));
  for (int i = 1; i < NFILL; i++) /* fill[0] and X pushed out by the others and A */
    CHECK_CU(kit_cu.cuMemcpyHtoD_v2(fill[i], host, SZ));
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(A, host, SZ));
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(fill[1], host, SZ));
  CHECK_CU(kit_cu.cuCtxSynchronize());
  must_spill(fill[0], SZ, "fill[0]");
  CHECK_CU(kit_cu.cuGraphLaunch(e, st));
  expect(X, "DtoD node re-pointed at spilled fill[0]");
  spill_a(6); /* the tier still spills */
  expect(A, "A after the graphs");
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(g));
  free(out);
}

static void many_allocs(void) {
  static CUdeviceptr p[NMANY];
  uint32_t *h = malloc(SMALL);
  for (int i = 0; i < NMANY; i++) {
    CHECK_CU(kit_cu.cuMemAlloc_v2(&p[i], SMALL));
    pattern(h, SMALL / 4, (uint32_t)i);
    CHECK_CU(kit_cu.cuMemcpyHtoD_v2(p[i], h, SMALL));
  }
  CUfunction f = fn("reach_many");
  size_t n = SMALL / 4;
  int counts[] = {48, NMANY};
  for (int c = 0; c < 2; c++) {
    size_t count = (size_t)counts[c];
    push_out();
    int gone = 0;
    for (size_t i = 0; i < count; i++)
      gone += spilled(p[i], SMALL);
    printf("%zu allocations, %d spilled\n", count, gone);
    VXT_ASSERT(gone > 32, "too few spilled (%d): the case would prove nothing", gone);
    void *params[] = {p, &count, &n, &cnt};
    CHECK_CU(kit_cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    unsigned long long bad = take_bad();
    VXT_ASSERT(bad == 0, "%zu allocations: %llu words wrong", count, bad);
  }
  for (int i = 0; i < NMANY; i++)
    CHECK_CU(kit_cu.cuMemFree_v2(p[i]));
  free(h);
}

static void graph_nodes(void) {
  CUdeviceptr b;
  CHECK_CU(kit_cu.cuMemAlloc_v2(&b, 4096));
  CHECK_CU(kit_fill(b, 1, 9, NULL));
  CUfunction f = kit_fn("check_u32");
  size_t one = 1, n = N32;
  uint32_t s9 = 9, s7 = 7;
  CUgraph g;
  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int i = 0; i < NNODES - 1; i++) {
    void *params[] = {&b, &one, &s9, &cnt};
    CHECK_CU(kit_cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, st, params, NULL));
  }
  void *last[] = {&A, &n, &s7, &cnt};
  CHECK_CU(kit_cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, st, last, NULL));
  CHECK_CU(kit_cu.cuStreamEndCapture(st, &g));
  CUgraphExec e = instantiate(g);
  spill_a(7);
  CHECK_CU(kit_cu.cuGraphLaunch(e, st));
  unsigned long long bad = take_bad();
  VXT_ASSERT(bad == 0, "graph of %d nodes: %llu words wrong", NNODES, bad);
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(g));
}

static void params_big(void) {
  static unsigned char s[4096];
  size_t n = N32;
  uint64_t seed = 8;
  spill_a(8);
  memcpy(s + 3000, &A, 8), memcpy(s + 3008, &n, 8), memcpy(s + 3016, &seed, 8);
  void *params[] = {s, &cnt};
  CHECK_CU(kit_cu.cuLaunchKernel(fn("reach_big"), 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
  unsigned long long bad = take_bad();
  VXT_ASSERT(bad == 0, "pointer at byte 3000: %llu words wrong", bad);
  static uint64_t w[NWIDE];
  void *wp[NWIDE];
  for (int i = 0; i < NWIDE; i++)
    wp[i] = &w[i];
  spill_a(7);
  w[0] = cnt, w[NWIDE - 2] = N32, w[NWIDE - 1] = A;
  CHECK_CU(kit_cu.cuLaunchKernel(fn("reach_wide"), 1, 1, 1, 32, 1, 1, 0, NULL, wp, NULL));
  bad = take_bad();
  VXT_ASSERT(bad == 0, "pointer as parameter %d: %llu words wrong", NWIDE, bad);
}

static void extra_oversize(void) {
  long pg = sysconf(_SC_PAGESIZE);
  unsigned char *m =
      mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  VXT_ASSERT(m != MAP_FAILED);
  VXT_ASSERT(mprotect(m + pg, (size_t)pg, PROT_NONE) == 0);
  unsigned char *buf = m + pg - 32; /* check_u32's 32 bytes, the page's last */
  size_t n = N32, claim = MB;
  uint32_t seed = 11;
  memset(buf, 0, 32);
  memcpy(buf, &A, 8), memcpy(buf + 8, &n, 8), memcpy(buf + 16, &seed, 4), memcpy(buf + 24, &cnt, 8);
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &claim,
                   CU_LAUNCH_PARAM_END};
  spill_a(11);
  CHECK_CU(kit_cu.cuLaunchKernel(kit_fn("check_u32"), 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
  unsigned long long bad = take_bad();
  VXT_ASSERT(bad == 0, "extra launch: %llu words wrong", bad);
  munmap(m, 2 * (size_t)pg);
}

static void ptr_array(void) {
  static CUdeviceptr p[NGATHER];
  CUdeviceptr arr[2];
  uint32_t *h = malloc(2 * MB);
  for (int i = 0; i < NGATHER; i++) {
    CHECK_CU(kit_cu.cuMemAlloc_v2(&p[i], 2 * MB));
    pattern(h, 2 * MB / 4, (uint32_t)i);
    CHECK_CU(kit_cu.cuMemcpyHtoD_v2(p[i], h, 2 * MB));
  }
  for (int a = 0; a < 2; a++)
    CHECK_CU(kit_cu.cuMemAlloc_v2(&arr[a], NGATHER * 8));
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(arr[0], p, sizeof p));              /* sync */
  CHECK_CU(kit_cu.cuMemcpyHtoDAsync_v2(arr[1], p, sizeof p / 2, st)); /* async, two halves */
  CHECK_CU(kit_cu.cuMemcpyHtoDAsync_v2(arr[1] + sizeof p / 2, p + NGATHER / 2, sizeof p / 2, st));
  CHECK_CU(kit_cu.cuStreamSynchronize(st));
  CUfunction f = fn("reach_gather");
  size_t count = NGATHER, n = 2 * MB / 4;
  for (int a = 0; a < 2; a++) {
    push_out();
    int gone = 0;
    for (int i = 0; i < NGATHER; i++)
      gone += spilled(p[i], 2 * MB);
    VXT_ASSERT(gone > 0, "none of the buffers spilled: the case would prove nothing");
    void *params[] = {&arr[a], &count, &n, &cnt};
    CHECK_CU(kit_cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    unsigned long long bad = take_bad();
    VXT_ASSERT(bad == 0, "pointer array %d: %llu words wrong", a, bad);
    printf("pointer array %d: %d spilled buffers read back right\n", a, gone);
  }
  /* arr[0] freed and made again, now pointing at other buffers: the new
   * pointers count */
  CHECK_CU(kit_cu.cuMemFree_v2(arr[0]));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&arr[0], NGATHER * 8));
  CUdeviceptr rev[NGATHER];
  for (int i = 0; i < NGATHER; i++) {
    CHECK_CU(kit_cu.cuMemAlloc_v2(&rev[i], 2 * MB));
    pattern(h, 2 * MB / 4, (uint32_t)i);
    CHECK_CU(kit_cu.cuMemcpyHtoD_v2(rev[i], h, 2 * MB));
  }
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(arr[0], rev, sizeof rev));
  push_out();
  VXT_ASSERT(spilled(rev[0], 2 * MB), "the first buffer did not spill: the case proves nothing");
  void *params[] = {&arr[0], &count, &n, &cnt};
  CHECK_CU(kit_cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
  unsigned long long bad = take_bad();
  VXT_ASSERT(bad == 0, "pointer array made again: %llu words wrong", bad);
  free(h);
}

/* A graph that copies a pointer array in (a memcpy node from pinned host
 * memory) and then follows it: the pointers the node will write at each
 * launch are the array's references (zero while capturing: only the
 * graph's launch can know them). */
static void graph_ptr_array(void) {
  static CUdeviceptr p[2][NGATHER];
  CUdeviceptr arr, *hp;
  uint32_t *h = malloc(2 * MB);
  CHECK_CU(kit_cu.cuMemAllocHost_v2((void **)&hp, sizeof p[0]));
  memset(hp, 0, sizeof p[0]);
  CHECK_CU(kit_cu.cuMemAlloc_v2(&arr, sizeof p[0]));
  CUfunction f = fn("reach_gather");
  size_t count = NGATHER, n = 2 * MB / 4;
  void *params[] = {&arr, &count, &n, &cnt};
  CUgraph g;
  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(kit_cu.cuMemcpyHtoDAsync_v2(arr, hp, sizeof p[0], st));
  CHECK_CU(kit_cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, st, params, NULL));
  CHECK_CU(kit_cu.cuStreamEndCapture(st, &g));
  CUgraphExec e = instantiate(g);
  for (int round = 0; round < 2; round++) { /* new buffers each round */
    for (int i = 0; i < NGATHER; i++) {
      CHECK_CU(kit_cu.cuMemAlloc_v2(&p[round][i], 2 * MB));
      pattern(h, 2 * MB / 4, (uint32_t)i);
      CHECK_CU(kit_cu.cuMemcpyHtoD_v2(p[round][i], h, 2 * MB));
    }
    memcpy(hp, p[round], sizeof p[round]);
    push_out();
    VXT_ASSERT(spilled(p[round][0], 2 * MB), "round %d: nothing spilled", round);
    CHECK_CU(kit_cu.cuGraphLaunch(e, st));
    unsigned long long bad = take_bad();
    VXT_ASSERT(bad == 0, "round %d: %llu words wrong", round, bad);
  }
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(g));
  CHECK_CU(kit_cu.cuMemFreeHost(hp));
  free(h);
}

/* A graph made for device launch: kernels may launch it where vx cannot
 * see, so the instantiation restores everything (and spilling stops). */
static void graph_device_launch(void) {
  CUgraph g;
  CUgraphExec e;
  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(CU(cuMemsetD8Async)(X, 1, 4096, st));
  CHECK_CU(kit_cu.cuStreamEndCapture(st, &g));
  spill_a(13);
  CHECK_CU(kit_cu.cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH));
  for (size_t off = 0; off < SZ; off += 2 * MB)
    VXT_ASSERT(kit_sim_residency(A + off) != -1, "A+%zu still in the swap after the instantiation",
               off);
  expect(A, "A after a device-launch instantiation");
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(g));
}

static int worker(const char *mode) {
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(NULL));
  char *img = ptx();
  CHECK_CU(kit_cu.cuModuleLoadData(&mod, img));
  free(img);
  CHECK_CU(kit_cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  host = malloc(SZ);
  want = malloc(SZ);
  memset(host, 7, SZ);
  CHECK_CU(kit_cu.cuMemAlloc_v2(&A, SZ));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&X, SZ));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&cnt, 8));
  CHECK_CU(kit_cu.cuMemsetD32_v2(cnt, 0, 2));
  for (int i = 0; i < NFILL; i++)
    CHECK_CU(kit_cu.cuMemAlloc_v2(&fill[i], SZ));
  static const struct {
    const char *name;
    void (*fn)(void);
  } modes[] = {{"graph_memset", graph_memset},
               {"graph_memcpy", graph_memcpy},
               {"many_allocs", many_allocs},
               {"graph_nodes", graph_nodes},
               {"params_big", params_big},
               {"extra_oversize", extra_oversize},
               {"ptr_array", ptr_array},
               {"graph_ptr_array", graph_ptr_array},
               {"graph_device_launch", graph_device_launch}};
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
    if (!strcmp(mode, modes[i].name)) {
      modes[i].fn();
      printf("ok %s\n", mode);
      return 0;
    }
  printf("unknown mode %s\n", mode);
  return 2;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--worker")) return worker(argv[2]);
  VXT_ASSERT(argc == 2, "usage: prog_spill_reach MODE");
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  char dir[256], e_dir[300], want_ok[64];
  vxt_tmpname(dir, sizeof dir, ".swap");
  VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", dir);
  /* many_allocs: its 256 KiB allocations managed (spillable), not native */
  const char *native = !strcmp(argv[1], "many_allocs") ? "VX_NATIVE_MAX=64K" : "VX_NATIVE_MAX=1M";
  const char *env[] = {
      "SIMCUDA_VRAM=128M", "VX_DEVICE_LIMIT=0", "VX_HOST_LIMIT=16M", native, e_dir, NULL};
  const char *args[] = {argv[1], NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0);
  rmdir(dir);
  printf("%s%s", r.out, r.err);
  snprintf(want_ok, sizeof want_ok, "ok %s\n", argv[1]);
  VXT_ASSERT(r.status == 0 && strstr(r.out, want_ok), "worker status %d", r.status);
  /* seen, not restore-all: the tier never gave up spilling; but for a
   * graph made for device launch, where it must (said once) */
  const char *stop = strstr(r.err, "no more NVMe spills");
  if (!strcmp(argv[1], "graph_device_launch"))
    VXT_ASSERT(stop && !strstr(stop + 1, "no more NVMe spills"), "not said once:\n%s", r.err);
  else
    VXT_ASSERT(!stop, "the tier stopped spilling:\n%s", r.err);
  return 0;
}
