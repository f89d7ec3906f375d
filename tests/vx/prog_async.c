/* vx_async: stream-ordered allocation over budget goes to managed memory;
 * cuMemFreeAsync of such a pointer is released once the stream got there
 * (never by synchronising), and inside a capture vx never touches the
 * stream (the capture must still end cleanly). */
#include <string.h>
#include <unistd.h>

#include "vxt.h"

#define MB (1ULL << 20)

static int is_managed(CUdeviceptr p) {
  unsigned v = 0;
  VXT_CU(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
  return (int)v;
}

static void fill_and_check(CUfunction fill, CUdeviceptr p, size_t bytes, CUstream s,
                           uint32_t seed) {
  uint64_t words = bytes / 4;
  void *args[] = {&p, &words, &seed};
  VXT_CU(cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, s, args, NULL));
  VXT_CU(cuStreamSynchronize(s));
  uint32_t *h = malloc(bytes);
  VXT_CU(cuMemcpyDtoH_v2(h, p, bytes));
  for (uint64_t i = 0; i < words; i++)
    VXT_ASSERT(h[i] == vxt_pattern(i, seed), "word %llu", (unsigned long long)i);
  free(h);
}

static int worker(int under_vx) {
  vxt_api_t a;
  CUfunction fill, add, nop8;
  vxt_api_load(&a, "linked", 0);
  vxt_ctx(&a, 0);
  vxt_module(&a, &fill, &add, &nop8);
  CUstream s;
  VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr n8, m12, c12, tmp;
  VXT_CU(cuMemAllocAsync(&n8, 8 * MB, s));
  VXT_CU(cuMemAllocAsync(&m12, 12 * MB, s));
  VXT_CU(cuStreamSynchronize(s));
  if (under_vx)
    VXT_ASSERT(!is_managed(n8) && is_managed(m12), "placement: %d %d", is_managed(n8),
               is_managed(m12));
  fill_and_check(fill, n8, 8 * MB, s, 1);
  fill_and_check(fill, m12, 12 * MB, s, 2);
  /* work still queued on s when the managed pointer is freed */
  uint64_t words = 12 * MB / 4, cwords = 20 * MB / 4;
  uint32_t one = 1;
  void *args[] = {&m12, &words, &one};
  for (int i = 0; i < 4; i++)
    VXT_CU(cuLaunchKernel(add, 1, 1, 1, 64, 1, 1, 0, s, args, NULL));
  VXT_CU(cuMemFreeAsync(m12, s));
  VXT_CU(cuMemFreeAsync(n8, s));
  VXT_CU(cuStreamSynchronize(s));
  VXT_CU(cuMemAlloc_v2(&tmp, 1 * MB)); /* vx releases finished deferred frees here */
  VXT_CU(cuMemFree_v2(tmp));
  /* a capture in progress: vx must not synchronise or record on it */
  VXT_CU(cuMemAllocAsync(&c12, 20 * MB, s)); /* past the 8M native share of the 32M budget */
  VXT_CU(cuStreamSynchronize(s));
  if (under_vx) VXT_ASSERT(is_managed(c12));
  VXT_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  void *cargs[] = {&c12, &cwords, &one};
  VXT_CU(cuLaunchKernel(add, 1, 1, 1, 64, 1, 1, 0, s, cargs, NULL));
  CUresult fr = cuMemFreeAsync(c12, s);
  CUgraph g;
  VXT_CU(cuStreamEndCapture(s, &g));
  if (under_vx) VXT_ASSERT(fr == CUDA_SUCCESS, "free in capture: %d", (int)fr);
  VXT_CU(cuStreamSynchronize(s));
  VXT_CU(cuStreamDestroy_v2(s));
  printf("ok\n");
  return 0;
}

static void run_case(const char *name, const char *fail, uint64_t want_deferred) {
  char report[256], env_report[300];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(env_report, sizeof env_report, "VX_REPORT=%s", report);
  const char *env[] = {
      "SIMCUDA_VRAM=64M", "VX_DEVICE_LIMIT=32M", "VX_NATIVE_MAX=0", env_report, fail, NULL};
  const char *args[] = {"vx", NULL};
  vxt_run_t *r = malloc(sizeof *r);
  VXT_ASSERT(vxt_run(r, 1, env, args) == 0);
  VXT_ASSERT(r->status == 0, "%s: status %d\n%s%s", name, r->status, r->out, r->err);
  char *json = vxt_read_file(report);
  VXT_ASSERT(json);
  unlink(report);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_managed") == 2, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_native") == 2, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "frees") == 4, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "deferred_frees") == want_deferred, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "capture_kept") == 1, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "managed_bytes") == 20 * MB, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "native_bytes") == 0, "%s: %s", name, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "underflows") == 0, "%s: %s", name, json);
  printf("%s: ok\n", name);
  free(json);
  free(r);
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker(argc >= 3 && !strcmp(argv[2], "vx"));
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  /* the program is correct without vx too (it fits the device) */
  vxt_run_t *r = malloc(sizeof *r);
  const char *env0[] = {"SIMCUDA_VRAM=64M", NULL};
  VXT_ASSERT(vxt_run(r, 0, env0, NULL) == 0 && r->status == 0, "without vx: %s%s", r->out, r->err);
  free(r);
  run_case("deferred", "VX_TEST_UNUSED=", 1);
  /* no event can be recorded: vx falls back to waiting for the stream */
  run_case("no-event", "SIMCUDA_FAIL=cuEventRecord:1+", 0);
  return 0;
}
