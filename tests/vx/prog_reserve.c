/* vx_reserve, vx_no_concurrent_managed, vx_host_max: issue 12 points 3, 4
 * and 10 end to end.  One worker fills the device with 4 MiB allocations
 * (copies in, then every byte read back) and prints what it got:
 *   prog_reserve reserve   the budget comes from what is free at first use
 *                       (SIMCUDA_CTX_OVERHEAD takes half the device): no
 *                       native OOM from the driver, VX_RESERVE left free;
 *   prog_reserve nocma     SIMCUDA_CONCURRENT_MANAGED=0: no managed memory,
 *                       native until the driver's OOM as without vx, said once;
 *   prog_reserve hostmax   VX_HOST_MAX caps vx's host-backed managed bytes:
 *                       OOM past it, earlier data intact, extended memory
 *                       reports only what is backed. */
#include <dlfcn.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vxt.h"

#define MB ((size_t)1 << 20)
#define CHUNK (4 * MB)
#define MAXN 64

typedef int (*nvml_memory_fn)(int, unsigned long long *, unsigned long long *);

/* The simulator's own view of device 0 (not rewritten by vx): bytes free. */
static unsigned long long real_free(void) {
  nvml_memory_fn f = (nvml_memory_fn)dlsym(RTLD_DEFAULT, "simcuda_nvml_memory");
  unsigned long long total = 0, used = 0;
  VXT_ASSERT(f && f(0, &total, &used) == 0, "simcuda_nvml_memory");
  return total - used;
}

/* worker N: up to N allocations of CHUNK; stops at the first failure. */
static int worker(int n) {
  vxt_api_t a;
  vxt_api_load(&a, "linked", 0);
  vxt_ctx(&a, 0);
  size_t f0, t0;
  VXT_CU(a.cuMemGetInfo(&f0, &t0));
  printf("meminfo total %zu free %zu\n", t0, f0);
  CUdeviceptr p[MAXN];
  uint32_t *buf = malloc(CHUNK);
  VXT_ASSERT(buf && n <= MAXN);
  int got = 0;
  CUresult err = CUDA_SUCCESS;
  for (; got < n; got++) {
    err = a.cuMemAlloc(&p[got], CHUNK);
    if (err != CUDA_SUCCESS) break;
    for (size_t i = 0; i < CHUNK / 4; i++)
      buf[i] = vxt_pattern(i, (uint32_t)got);
    VXT_CU(a.cuMemcpyHtoD(p[got], buf, CHUNK));
  }
  VXT_CU(a.cuCtxSynchronize());
  unsigned long long rf = real_free();
  for (int k = 0; k < got; k++) {
    memset(buf, 0, CHUNK);
    VXT_CU(a.cuMemcpyDtoH(buf, p[k], CHUNK));
    for (size_t i = 0; i < CHUNK / 4; i++)
      if (buf[i] != vxt_pattern(i, (uint32_t)k)) VXT_FAIL("allocation %d word %zu differs", k, i);
  }
  printf("allocs %d err %d realfree %llu\n", got, (int)err, rf);
  for (int k = 0; k < got; k++)
    VXT_CU(a.cuMemFree(p[k]));
  free(buf);
  return 0;
}

typedef struct {
  int allocs, err;
  unsigned long long realfree, total;
} result_t;

static result_t run(vxt_run_t *r, int with_vx, const char *const *env, const char *n) {
  const char *args[] = {n, NULL};
  VXT_ASSERT(vxt_run(r, with_vx, env, args) == 0);
  VXT_ASSERT(r->status == 0, "status %d\n%s%s", r->status, r->out, r->err);
  result_t x;
  const char *m = strstr(r->out, "meminfo total "), *l = strstr(r->out, "allocs ");
  VXT_ASSERT(m && sscanf(m, "meminfo total %llu", &x.total) == 1, "%s", r->out);
  VXT_ASSERT(l && sscanf(l, "allocs %d err %d realfree %llu", &x.allocs, &x.err, &x.realfree) == 3,
             "%s", r->out);
  return x;
}

static char *report_of(const char *path) {
  char *json = vxt_read_file(path);
  VXT_ASSERT(json, "no report at %s", path);
  unlink(path);
  return json;
}

/* Point 3: half of a 64M device is taken at context creation. */
static void check_reserve(const char *reserve, uint64_t headroom) {
  vxt_run_t *r = malloc(sizeof *r);
  char report[256], e_report[300], e_reserve[64];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_report, sizeof e_report, "VX_REPORT=%s", report);
  snprintf(e_reserve, sizeof e_reserve, "VX_RESERVE=%s", reserve);
  const char *env[] = {"SIMCUDA_VRAM=64M",
                       "SIMCUDA_CTX_OVERHEAD=32M",
                       "VX_NATIVE_MAX=0",
                       "VX_LEDGER=off",
                       "VX_MOVABLE=0", /* native while the budget has room */
                       "VX_DEVICE_LIMIT=",
                       e_report,
                       reserve[0] ? e_reserve : "VX_RESERVE=",
                       NULL};
  result_t x = run(r, 1, env, "16");
  char *json = report_of(report);
  uint64_t budget = 32 * MB - headroom;
  VXT_ASSERT(x.allocs == 16, "%d allocations\n%s%s", x.allocs, r->out, r->err);
  VXT_ASSERT(vxt_json_u64(json, 0, "managed_fallbacks") == 0,
             "the driver said out of memory to a native allocation: %s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "limit_bytes") == budget, "reserve '%s': %s", reserve, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "native_bytes_peak") == budget, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_failures") == 0, "%s", json);
  VXT_ASSERT(x.realfree >= headroom, "reserve '%s': %llu bytes really free, headroom %llu", reserve,
             x.realfree, (unsigned long long)headroom);
  VXT_ASSERT(x.total == budget, "cuMemGetInfo total %llu, budget %llu", x.total,
             (unsigned long long)budget);
  printf("reserve '%s': ok (budget %llu, %llu really free)\n", reserve, (unsigned long long)budget,
         x.realfree);
  free(json);
  free(r);
}

/* Point 4: no concurrent managed access. */
static void check_nocma(void) {
  vxt_run_t *r = malloc(sizeof *r);
  const char *env0[] = {"SIMCUDA_VRAM=64M", "SIMCUDA_CONCURRENT_MANAGED=0", NULL};
  result_t plain = run(r, 0, env0, "20");
  VXT_ASSERT(plain.allocs == 16 && plain.err == CUDA_ERROR_OUT_OF_MEMORY, "without vx: %d, %d",
             plain.allocs, plain.err);
  char report[256], e_report[300];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_report, sizeof e_report, "VX_REPORT=%s", report);
  const char *env1[] = {"SIMCUDA_VRAM=64M",
                        "SIMCUDA_CONCURRENT_MANAGED=0",
                        "VX_DEVICE_LIMIT=16M",
                        "VX_NATIVE_MAX=0",
                        "VX_LEDGER=off",
                       "VX_MOVABLE=0", /* native while the budget has room */
                        "VX_REPORT_MEMORY=extended",
                        e_report,
                        NULL};
  result_t x = run(r, 1, env1, "20");
  char *json = report_of(report);
  VXT_ASSERT(x.allocs == plain.allocs && x.err == plain.err, "with vx: %d, %d\n%s", x.allocs, x.err,
             r->err);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_managed") == 0 &&
                 vxt_json_u64(json, 0, "managed_bytes_peak") == 0 &&
                 vxt_json_u64(json, 0, "managed_fallbacks") == 0,
             "managed memory on a device without concurrent managed access: %s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "native_bytes_peak") == 64 * MB, "%s", json);
  /* extended memory advertises no host or NVMe capacity the device cannot use */
  VXT_ASSERT(x.total == 16 * MB, "extended total %llu", x.total);
  VXT_ASSERT(vxt_count(r->err, "no concurrent managed access") == 1, "stderr:\n%s", r->err);
  VXT_ASSERT(vxt_count(r->err, "vx:") == 1, "one line only:\n%s", r->err);
  printf("nocma: ok (%d native allocations, then the driver's OOM)\n", x.allocs);
  free(json);
  free(r);
}

/* Point 10: VX_HOST_MAX, with and without the NVMe tier. */
static void check_hostmax(const char *dir) {
  vxt_run_t *r = malloc(sizeof *r);
  char report[256], e_report[300], e_dir[300];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_report, sizeof e_report, "VX_REPORT=%s", report);
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", dir ? dir : "");
  /* 16M budget + 32M of host RAM: 12 allocations of 4M, the 13th is refused. */
  const char *env[] = {"SIMCUDA_VRAM=64M",
                       "VX_DEVICE_LIMIT=16M",
                       "VX_NATIVE_MAX=0",
                       "VX_LEDGER=off",
                       "VX_MOVABLE=0", /* native while the budget has room */
                       "VX_REPORT_MEMORY=extended",
                       "VX_HOST_MAX=32M",
                       dir ? "VX_HOST_LIMIT=8M" : "VX_HOST_LIMIT=",
                       dir ? "VX_NVME_LIMIT=16M" : "VX_NVME_LIMIT=",
                       e_dir,
                       e_report,
                       NULL};
  result_t x = run(r, 1, env, "20");
  char *json = report_of(report);
  /* Backed beyond the budget: the cap, plus with the NVMe tier (spilling
   * above 8M) the 16M swap file. */
  uint64_t beyond = dir ? 48 * MB : 32 * MB;
  int want = (int)((16 * MB + beyond) / CHUNK);
  VXT_ASSERT(x.total == 16 * MB + beyond, "extended total %llu, want %llu", x.total,
             (unsigned long long)(16 * MB + beyond));
  VXT_ASSERT(x.allocs == want && x.err == CUDA_ERROR_OUT_OF_MEMORY,
             "%s: %d allocations, err %d\n%s", dir ? "nvme" : "host", x.allocs, x.err, r->err);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_managed") == (uint64_t)want - 4, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_failures") >= 1, "%s", json);
  VXT_ASSERT(vxt_count(r->err, "host memory cap reached") == 1, "stderr:\n%s", r->err);
  printf("hostmax %s: ok (%d allocations, then out of memory)\n", dir ? "with nvme" : "host only",
         x.allocs);
  free(json);
  free(r);
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "--worker")) return worker(atoi(argv[2]));
  VXT_ASSERT(argc == 2, "usage: prog_reserve reserve|nocma|hostmax");
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  if (!strcmp(argv[1], "reserve")) {
    check_reserve("0", 0); /* no headroom: the budget is all that was free */
    check_reserve("", 4 * MB); /* the 1G default, capped at a sixteenth of 64M */
  } else if (!strcmp(argv[1], "nocma")) {
    check_nocma();
  } else if (!strcmp(argv[1], "hostmax")) {
    check_hostmax(NULL);
    char dir[256];
    vxt_tmpname(dir, sizeof dir, "");
    VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    check_hostmax(dir);
    rmdir(dir);
  } else {
    VXT_FAIL("unknown mode %s", argv[1]);
  }
  return 0;
}
