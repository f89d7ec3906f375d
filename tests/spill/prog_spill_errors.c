/* prog_spill_errors: the NVMe tier's error paths never lose a byte (issue 13).
 * Each mode makes one driver call fail with the simulator's SIMCUDA_FAIL
 * while buffer A is (partly) in the swap, then reads A back:
 *   discard_sync  the wait after the discard fails (entry:after=trigger):
 *                 the discard may have happened, so the swap must keep A;
 *   capturing     every cuStreamIsCapturing fails: a launch reading A must
 *                 still restore it (not run on discarded pages);
 *   free          the application's cuMemFree of A fails: A is still its
 *                 memory, and its swapped contents must still be there;
 *   paraminfo     cuFuncGetParamInfo fails: the launches are unseen, so
 *                 everything is restored and spilling stops, said once;
 *   paraminfo_invalid  it fails with CUDA_ERROR_INVALID_VALUE, which is
 *                 also its answer past the last parameter: "no parameters"
 *                 for a launch that passes some is unseen too. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define MB ((size_t)1 << 20)
#define SZ (8 * MB)

static const char *mode;

static void residency(const char *what, CUdeviceptr p) {
  printf("%s:", what);
  for (size_t off = 0; off < SZ; off += 2 * MB)
    printf(" %d", kit_sim_residency(p + off));
  printf(" (-1: discarded)\n");
}

static size_t verify(CUdeviceptr p, uint32_t seed, uint32_t *host) {
  return kit_verify_dev(p, SZ / 4, seed, host);
}

static int worker(void) {
  CUcontext ctx;
  CUmodule m;
  CUstream s;
  CUdeviceptr a, b;
  uint32_t *host = malloc(SZ);
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&m));
  CHECK_CU(kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&a, SZ));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&b, SZ));
  /* A's and B's first uses are copies (the capturing mode's launches are
   * what is tested); B's takes the host over VX_HOST_LIMIT: A spills */
  for (size_t i = 0; i < SZ / 4; i++)
    host[i] = kit_hash(1, i);
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(a, host, SZ));
  for (size_t i = 0; i < SZ / 4; i++)
    host[i] = kit_hash(2, i);
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(b, host, SZ));
  residency("A after B's first use", a);
  size_t bad = 0;
  if (!strcmp(mode, "capturing") || !strncmp(mode, "paraminfo", 9)) {
    unsigned long long n = 0;
    CHECK_CU(kit_check(a, SZ / 4, 1, s, &n)); /* a kernel reads A */
    printf("kernel check of A: %llu words wrong\n", n);
    bad += n;
  } else if (!strcmp(mode, "free")) {
    CUresult r = kit_cu.cuMemFree_v2(a);
    printf("first free of A: %s\n", kit_err_name(r));
    if (r == CUDA_SUCCESS) return 3; /* the injection did not reach it */
  }
  bad += verify(a, 1, host) + verify(b, 2, host);
  /* the tier goes on working (or, for paraminfo, stays off) */
  CUdeviceptr c;
  CHECK_CU(kit_cu.cuMemAlloc_v2(&c, SZ));
  CHECK_CU(kit_fill(c, SZ / 4, 3, s));
  CHECK_CU(kit_cu.cuStreamSynchronize(s));
  bad += verify(a, 1, host) + verify(b, 2, host) + verify(c, 3, host);
  CHECK_CU(kit_cu.cuMemFree_v2(a));
  CHECK_CU(kit_cu.cuMemFree_v2(b));
  CHECK_CU(kit_cu.cuMemFree_v2(c));
  free(host);
  printf("bad=%zu\n", bad);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--worker")) {
    mode = argv[2];
    return worker();
  }
  VXT_ASSERT(argc == 2, "usage: discard_sync|capturing|free|paraminfo|paraminfo_invalid");
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  const char *fail =
      !strcmp(argv[1], "discard_sync")        ? "cuStreamSynchronize:after=cuMemDiscardBatchAsync"
      : !strcmp(argv[1], "capturing")         ? "cuStreamIsCapturing:1+"
      : !strcmp(argv[1], "free")              ? "cuMemFree_v2:1"
      : !strcmp(argv[1], "paraminfo")         ? "cuFuncGetParamInfo:1+"
      : !strcmp(argv[1], "paraminfo_invalid") ? "cuFuncGetParamInfo:1+:CUDA_ERROR_INVALID_VALUE"
                                              : NULL;
  VXT_ASSERT(fail, "unknown mode %s", argv[1]);
  char dir[256], report[256], e_dir[300], e_rep[300], e_fail[300];
  vxt_tmpname(dir, sizeof dir, ".swap");
  VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", dir);
  snprintf(e_rep, sizeof e_rep, "VX_REPORT=%s", report);
  snprintf(e_fail, sizeof e_fail, "SIMCUDA_FAIL=%s", fail);
  const char *env[] = {
      "SIMCUDA_VRAM=64M", "VX_DEVICE_LIMIT=0", "VX_HOST_LIMIT=12M", e_dir, e_rep, e_fail, NULL};
  const char *args[] = {argv[1], NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0);
  rmdir(dir);
  printf("%s%s", r.out, r.err);
  VXT_ASSERT(r.status == 0 && strstr(r.out, "bad=0"), "worker status %d", r.status);
  char *json = vxt_read_file(report);
  unlink(report);
  VXT_ASSERT(json, "no report");
  uint64_t wrote = vxt_json_u64(json, 0, "nvme_write_bytes");
  VXT_ASSERT(wrote > 0 && vxt_json_u64(json, 0, "nvme_read_bytes") > 0,
             "the tier moved nothing: the test would not test it");
  if (!strncmp(argv[1], "paraminfo", 9)) {
    /* the first launch is unseen: it restores A and no spill follows (C's
     * first use is over the limit too) */
    VXT_ASSERT(vxt_json_u64(json, 0, "nvme_spills") == 1, "spilled after an unseen launch: %s",
               json);
    VXT_ASSERT(strstr(r.err, "cannot learn"), "no line said why spilling stopped");
  }
  free(json);
  printf("ok\n");
  return 0;
}
