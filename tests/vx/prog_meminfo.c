/* vx_meminfo: what cuMemGetInfo_v2, cuDeviceTotalMem_v2 and NVML's
 * nvmlDeviceGetMemoryInfo(_v2) report in each VX_REPORT_MEMORY mode, on two
 * simulated devices (1G and 512M) with different limits (768M and 256M). */
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "vxt.h"

#define MB (1ULL << 20)
static const uint64_t phys[2] = {1024 * MB, 512 * MB}, limit[2] = {768 * MB, 256 * MB},
                      used[2] = {100 * MB, 64 * MB}, host_limit = 2048 * MB, nvme_limit = 4096 * MB;

typedef struct {
  unsigned long long total, free, used;
} nvml_mem_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvml_mem2_t;

static int worker(void) {
  void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  VXT_ASSERT(nv, "libnvidia-ml.so.1: %s", dlerror());
  int (*nv_init)(void) = (int (*)(void))dlsym(nv, "nvmlInit_v2");
  int (*nv_handle)(unsigned, void **) =
      (int (*)(unsigned, void **))dlsym(nv, "nvmlDeviceGetHandleByIndex_v2");
  int (*nv_mem)(void *, nvml_mem_t *) =
      (int (*)(void *, nvml_mem_t *))dlsym(nv, "nvmlDeviceGetMemoryInfo");
  int (*nv_mem2)(void *, nvml_mem2_t *) =
      (int (*)(void *, nvml_mem2_t *))dlsym(nv, "nvmlDeviceGetMemoryInfo_v2");
  VXT_ASSERT(nv_init && nv_handle && nv_mem && nv_mem2);
  VXT_ASSERT(nv_init() == 0);
  vxt_api_t a;
  vxt_api_load(&a, "linked", 0);
  for (int d = 0; d < 2; d++) {
    CUdevice dev;
    CUcontext c;
    CUdeviceptr p;
    VXT_CU(cuInit(0));
    VXT_CU(cuDeviceGet(&dev, d));
    VXT_CU(cuDevicePrimaryCtxRetain(&c, dev));
    VXT_CU(cuCtxSetCurrent(c));
    VXT_CU(cuMemAlloc_v2(&p, used[d]));
    size_t f, t, tm;
    VXT_CU(cuMemGetInfo_v2(&f, &t));
    VXT_CU(cuDeviceTotalMem_v2(&tm, dev));
    void *h;
    nvml_mem_t m;
    nvml_mem2_t m2 = {.version = (unsigned)sizeof(nvml_mem2_t) | (2u << 24)};
    VXT_ASSERT(nv_handle((unsigned)d, &h) == 0);
    VXT_ASSERT(nv_mem(h, &m) == 0);
    VXT_ASSERT(nv_mem2(h, &m2) == 0);
    printf("dev %d free %zu total %zu devtotal %zu nvtotal %llu nvfree %llu nvused %llu "
           "nv2total %llu nv2free %llu\n",
           d, f, t, tm, m.total, m.free, m.used, m2.total, m2.free);
  }
  return 0;
}

static void check_mode(const char *mode) {
  char env_mode[64];
  snprintf(env_mode, sizeof env_mode, "VX_REPORT_MEMORY=%s", mode);
  const char *env[] = {"SIMCUDA_DEVICES=2",
                       "SIMCUDA_VRAM=1G,512M",
                       "VX_DEVICE_LIMIT=768M,256M",
                       "VX_HOST_LIMIT=2G",
                       "VX_HOST_MAX=2G", /* not the machine's MemAvailable */
                       "VX_NVME_DIR=/tmp",
                       "VX_NVME_LIMIT=4G",
                       env_mode,
                       NULL};
  vxt_run_t *r = malloc(sizeof *r);
  VXT_ASSERT(vxt_run(r, 1, env, NULL) == 0);
  VXT_ASSERT(r->status == 0, "%s: status %d\n%s%s", mode, r->status, r->out, r->err);
  for (int d = 0; d < 2; d++) {
    char head[16];
    snprintf(head, sizeof head, "dev %d ", d);
    const char *line = strstr(r->out, head);
    VXT_ASSERT(line, "%s", r->out);
    unsigned long long f, t, tm, nt, nf, nu, n2t, n2f;
    VXT_ASSERT(sscanf(line,
                      "dev %*d free %llu total %llu devtotal %llu nvtotal %llu nvfree %llu "
                      "nvused %llu nv2total %llu nv2free %llu",
                      &f, &t, &tm, &nt, &nf, &nu, &n2t, &n2f) == 8);
    uint64_t want_t, want_f;
    if (!strcmp(mode, "physical")) {
      want_t = phys[d];
      VXT_ASSERT(f <= phys[d] - used[d] && f + 64 * MB >= phys[d] - used[d], "%s dev %d free %llu",
                 mode, d, f);
      VXT_ASSERT(nf == f && n2f == f, "%s dev %d: nvml free %llu/%llu, driver %llu", mode, d, nf,
                 n2f, f);
      want_f = f;
    } else if (!strcmp(mode, "limit")) {
      want_t = limit[d];
      want_f = limit[d] - used[d];
    } else {
      want_t = limit[d] + host_limit + nvme_limit;
      want_f = want_t - used[d];
    }
    VXT_ASSERT(t == want_t && tm == want_t && nt == want_t && n2t == want_t,
               "%s dev %d: totals %llu %llu %llu %llu, want %llu", mode, d, t, tm, nt, n2t,
               (unsigned long long)want_t);
    VXT_ASSERT(f == want_f && nf == want_f && n2f == want_f && nu == want_t - want_f,
               "%s dev %d: free %llu %llu %llu used %llu, want free %llu", mode, d, f, nf, n2f, nu,
               (unsigned long long)want_f);
  }
  printf("%s: ok\n", mode);
  free(r);
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker();
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  check_mode("physical");
  check_mode("limit");
  check_mode("extended");
  return 0;
}
