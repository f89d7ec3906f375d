/* prog_freeasync_fault: vx's own capture query failing inside cuMemFreeAsync of
 * vx's managed memory is not the application's error: the free is deferred,
 * returns CUDA_SUCCESS, and the memory is released after the stream's work. */
#include <string.h>
#include <unistd.h>

#include "vxt.h"

#define MB (1ULL << 20)

static int worker(void) {
  CUdevice dev;
  CUcontext ctx;
  CUstream s;
  VXT_CU(cuInit(0));
  VXT_CU(cuDeviceGet(&dev, 0));
  VXT_CU(cuCtxCreate_v2(&ctx, 0, dev));
  VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr m, n;
  /* 1st cuStreamIsCapturing: vx's own, in cuMemAllocAsync (succeeds). */
  VXT_CU(cuMemAllocAsync(&m, 8 * MB, s)); /* over the 4M limit: managed */
  unsigned managed = 0;
  VXT_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
  VXT_ASSERT(managed == 1);
  VXT_CU(cuMemsetD32Async(m, 0xabcdef01u, 2 * MB, s));
  /* 2nd: in cuMemFreeAsync, failed by SIMCUDA_FAIL=cuStreamIsCapturing:2. */
  CUresult r = cuMemFreeAsync(m, s);
  VXT_ASSERT(r == CUDA_SUCCESS, "cuMemFreeAsync of vx's managed memory = %d", (int)r);
  VXT_CU(cuStreamSynchronize(s));
  /* Later allocations drain the deferred free: the first one finds the
   * stream not capturing and records the event the free waits for; once
   * that event has completed (the context synchronised), the next one
   * releases the memory. */
  VXT_CU(cuMemAlloc_v2(&n, 1 * MB));
  VXT_CU(cuMemFree_v2(n));
  VXT_CU(cuCtxSynchronize());
  VXT_CU(cuMemAlloc_v2(&n, 1 * MB));
  VXT_CU(cuMemFree_v2(n));
  VXT_CU(cuStreamDestroy_v2(s));
  VXT_CU(cuCtxDestroy_v2(ctx));
  printf("ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker();
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  char report[256], env_report[300];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(env_report, sizeof env_report, "VX_REPORT=%s", report);
  const char *env[] = {"SIMCUDA_VRAM=64M",
                       "VX_DEVICE_LIMIT=4M",
                       "VX_NATIVE_MAX=0",
                       "VX_STATS=0",
                       env_report,
                       "SIMCUDA_FAIL=cuStreamIsCapturing:2",
                       NULL};
  vxt_run_t *r = malloc(sizeof *r);
  VXT_ASSERT(r && vxt_run(r, 1, env, NULL) == 0);
  VXT_ASSERT(r->status == 0 && strstr(r->out, "ok"), "status %d\n%s%s", r->status, r->out, r->err);
  char *json = vxt_read_file(report);
  VXT_ASSERT(json);
  unlink(report);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_managed") == 1, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "deferred_frees") == 1, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "managed_bytes") == 0, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "capture_kept") == 0, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "underflows") == 0, "%s", json);
  printf("prog_freeasync_fault: deferred, released, counters exact\n");
  free(json);
  free(r);
  return 0;
}
