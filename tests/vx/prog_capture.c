/* vx_capture: while one thread captures a blocking stream in GLOBAL mode,
 * vx's work for other threads (and for the capturing thread in relaxed
 * mode) must not invalidate the capture: the deferred-free queue is not
 * drained (cuEventQuery, cuMemFree), movement is skipped, the NVMe tier
 * neither spills (cuCtxSynchronize, synchronous copies) nor restores over
 * the legacy stream.  The capture ends exactly as without vx, the graph
 * runs, every byte verifies, and the deferred frees happen afterwards. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vxt.h"

#define MB (1ULL << 20)
#define BIG (20 * MB) /* over VX_DEVICE_LIMIT=16M: managed under vx */

static CUfunction k_fill, k_add;
static CUcontext ctx;
static CUstream bs; /* thread B's own stream */
static CUdeviceptr m2, m3, m4;

static void fill(CUdeviceptr p, size_t bytes, uint32_t seed, CUstream s) {
  uint64_t words = bytes / 4;
  void *args[] = {&p, &words, &seed};
  VXT_CU(cuLaunchKernel(k_fill, 1, 1, 1, 64, 1, 1, 0, s, args, NULL));
}

static void add(CUdeviceptr p, size_t bytes, uint32_t v, CUstream s) {
  uint64_t words = bytes / 4;
  void *args[] = {&p, &words, &v};
  VXT_CU(cuLaunchKernel(k_add, 1, 1, 1, 64, 1, 1, 0, s, args, NULL));
}

static void check(const uint32_t *h, size_t bytes, uint32_t seed, uint32_t plus, const char *what) {
  for (uint64_t i = 0; i < bytes / 4; i++)
    VXT_ASSERT(h[i] == vxt_pattern(i, seed) + plus, "%s: word %llu", what, (unsigned long long)i);
}

static CUstreamCaptureMode set_mode(CUstreamCaptureMode m) {
  VXT_CU(cuThreadExchangeStreamCaptureMode(&m));
  return m;
}

/* Another thread, in the default (global) mode, while the main thread
 * captures: what a data-loader or a second model thread does. */
static void *thread_b(void *arg) {
  (void)arg;
  VXT_CU(cuCtxSetCurrent(ctx));
  fill(m4, BIG, 5, bs);           /* first use: over VX_HOST_LIMIT, vx would spill */
  add(m2, BIG, 1, bs);            /* vx: movement, a restore from the swap */
  VXT_CU(cuMemFreeAsync(m3, bs)); /* vx: the deferred queue */
  /* its allocations and waits in relaxed mode, as PyTorch's allocator does */
  CUstreamCaptureMode was = set_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
  VXT_ASSERT(was == CU_STREAM_CAPTURE_MODE_GLOBAL);
  CUdeviceptr bm;
  VXT_CU(cuMemAlloc_v2(&bm, BIG));
  fill(bm, BIG, 9, bs);
  uint32_t *h = malloc(BIG), *h2 = malloc(BIG), *h4 = malloc(BIG);
  VXT_CU(cuMemcpyDtoHAsync_v2(h, m2, BIG, bs));
  VXT_CU(cuMemcpyDtoHAsync_v2(h2, bm, BIG, bs));
  VXT_CU(cuMemcpyDtoHAsync_v2(h4, m4, BIG, bs));
  VXT_CU(cuStreamSynchronize(bs));
  set_mode(was);
  check(h, BIG, 2, 1, "m2 (thread B)");
  check(h2, BIG, 9, 0, "bm (thread B)");
  check(h4, BIG, 5, 0, "m4 (thread B)");
  free(h);
  free(h2);
  free(h4);
  VXT_CU(cuMemFreeAsync(m2, bs));
  VXT_CU(cuMemFreeAsync(m4, bs));
  VXT_CU(cuMemFreeAsync(bm, bs));
  return NULL;
}

static int worker(void) {
  vxt_api_t a;
  CUfunction nop8;
  vxt_api_load(&a, "linked", 0);
  vxt_ctx(&a, 0);
  vxt_module(&a, &k_fill, &k_add, &nop8);
  VXT_CU(cuCtxGetCurrent(&ctx));
  CUstream cs;
  VXT_CU(cuStreamCreate(&cs, 0)); /* blocking: the legacy stream is off limits */
  VXT_CU(cuStreamCreate(&bs, CU_STREAM_NON_BLOCKING));
  CUdeviceptr gbuf, d1, t0m;
  VXT_CU(cuMemAlloc_v2(&gbuf, 4 * MB));
  VXT_CU(cuMemAlloc_v2(&d1, BIG));
  VXT_CU(cuMemAlloc_v2(&m2, BIG));
  VXT_CU(cuMemAlloc_v2(&m3, BIG));
  VXT_CU(cuMemAlloc_v2(&m4, BIG)); /* untouched until the capture */
  fill(gbuf, 4 * MB, 1, cs);
  fill(m2, BIG, 2, cs);
  fill(m3, BIG, 3, cs);
  fill(d1, BIG, 4, cs);
  for (int i = 0; i < 3; i++) /* with the NVMe tier: m2 (coldest, unpinned) goes to the swap */
    add(d1, BIG, 1, cs);
  VXT_CU(cuStreamSynchronize(cs));
  add(d1, BIG, 1, bs);
  VXT_CU(cuMemFreeAsync(d1, bs)); /* queued in vx until the stream got there */

  VXT_CU(cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
  add(gbuf, 4 * MB, 1, cs);
  /* the capturing thread allocates in relaxed mode (cudaMalloc in PyTorch) */
  CUstreamCaptureMode was = set_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
  VXT_CU(cuMemAlloc_v2(&t0m, BIG));
  set_mode(was);
  fill(t0m, BIG, 7, cs);
  pthread_t t;
  VXT_ASSERT(pthread_create(&t, NULL, thread_b, NULL) == 0);
  pthread_join(t, NULL);
  CUstreamCaptureStatus st;
  VXT_CU(cuStreamIsCapturing(cs, &st));
  VXT_ASSERT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "capture status %d", (int)st);
  CUgraph g;
  VXT_CU(cuStreamEndCapture(cs, &g));

  CUgraphExec ge;
  VXT_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
  VXT_CU(cuGraphLaunch(ge, cs));
  VXT_CU(cuStreamSynchronize(cs));
  uint32_t *h = malloc(BIG);
  VXT_CU(cuMemcpyDtoH_v2(h, gbuf, 4 * MB));
  check(h, 4 * MB, 1, 1, "gbuf (graph)");
  VXT_CU(cuMemcpyDtoH_v2(h, t0m, BIG));
  check(h, BIG, 7, 0, "t0m (graph)");
  free(h);

  /* a capture the application invalidates itself: vx's count must not leak */
  VXT_CU(cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
  VXT_ASSERT(cuStreamSynchronize(cs) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  VXT_ASSERT(cuStreamEndCapture(cs, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

  VXT_CU(cuStreamSynchronize(bs));

  /* a capture into an existing graph (cudaStreamBeginCaptureToGraph) is
   * one too: a relaxed allocation inside must not drain the queue */
  CUdeviceptr m5, m6;
  VXT_CU(cuMemAlloc_v2(&m5, BIG));
  VXT_CU(cuMemFreeAsync(m5, bs));
  CUgraph into, got = NULL;
  VXT_CU(cuGraphCreate(&into, 0));
  VXT_CU(cuStreamBeginCaptureToGraph(cs, into, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
  add(gbuf, 4 * MB, 1, cs);
  was = set_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
  VXT_CU(cuMemAlloc_v2(&m6, BIG));
  set_mode(was);
  VXT_CU(cuStreamEndCapture(cs, &got));
  VXT_ASSERT(got == into);
  VXT_CU(cuGraphDestroy(into));
  VXT_CU(cuMemFree_v2(m6));
  VXT_CU(cuStreamSynchronize(bs));
  CUdeviceptr tmp;
  VXT_CU(cuMemAlloc_v2(&tmp, MB)); /* no capture now: the deferred frees go */
  VXT_CU(cuMemFree_v2(tmp));
  VXT_CU(cuGraphExecDestroy(ge));
  VXT_CU(cuMemFree_v2(t0m));
  VXT_CU(cuMemFree_v2(gbuf));
  VXT_CU(cuStreamDestroy_v2(cs));
  VXT_CU(cuStreamDestroy_v2(bs));
  printf("ok\n");
  return 0;
}

static void run_case(const char *name, int nvme) {
  char report[256], e_rep[300], dir[256], e_dir[300];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_rep, sizeof e_rep, "VX_REPORT=%s", report);
  vxt_tmpname(dir, sizeof dir, ".swap");
  if (nvme) VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", nvme ? dir : "");
  const char *env[] = {"SIMCUDA_VRAM=160M",
                       "VX_DEVICE_LIMIT=16M",
                       /* placement fixed (half the budget movable), not grown
                        * with the launches: the case counts managed allocations */
                       "VX_MOVABLE=8M",
                       "VX_NATIVE_MAX=0",
                       nvme ? "VX_HOST_LIMIT=24M" : "VX_HOST_LIMIT=",
                       e_dir,
                       e_rep,
                       NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, NULL) == 0);
  VXT_ASSERT(r.status == 0, "%s: status %d\n%s%s", name, r.status, r.out, r.err);
  char *json = vxt_read_file(report);
  VXT_ASSERT(json, "%s: no report\n%s", name, r.err);
  unlink(report);
  if (nvme) rmdir(dir);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_managed") == 8, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "deferred_frees") == 6, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "capture_kept") == 0, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "managed_bytes") == 0, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "underflows") == 0, "%s: %s", name, json);
  if (nvme) {
    VXT_ASSERT(vxt_json_u64(json, 0, "nvme_write_bytes") > 0, "%s: nothing spilled: %s", name,
               json);
    VXT_ASSERT(vxt_json_u64(json, 0, "nvme_read_bytes") > 0, "%s: nothing restored: %s", name,
               json);
  }
  printf("%s: ok\n", name);
  free(json);
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker();
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  /* the same program without vx: the capture succeeds */
  static vxt_run_t r;
  const char *env0[] = {"SIMCUDA_VRAM=160M", NULL};
  VXT_ASSERT(vxt_run(&r, 0, env0, NULL) == 0 && r.status == 0, "without vx: %s%s", r.out, r.err);
  run_case("managed", 0);
  run_case("nvme", 1);
  return 0;
}
