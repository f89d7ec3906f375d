/* prog_spill_threads: four threads of one program write, spill and read back
 * their own buffers at once (copies and kernels on their own streams) while
 * the host limit forces the NVMe tier to move chunks under all of them. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define MB ((size_t)1 << 20)
#define SZ (2 * MB)
#define NTHREADS 4
#define PER 6 /* buffers per thread */
#define ROUNDS 3

static CUcontext ctx;

typedef struct job {
  int id;
  size_t bad;
  CUresult err;
} job_t;

static void *run(void *arg) {
  job_t *j = arg;
  CUdeviceptr p[PER];
  CUstream s;
  uint32_t *host = malloc(SZ);
  if (kit_cu.cuCtxSetCurrent(ctx) || kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) {
    j->err = CUDA_ERROR_UNKNOWN;
    return NULL;
  }
  for (int r = 0; r < ROUNDS && !j->err; r++)
    for (int k = 0; k < PER && !j->err; k++) {
      uint32_t seed = (uint32_t)(j->id * 1000 + r * 100 + k);
      if (r == 0 && (j->err = kit_cu.cuMemAlloc_v2(&p[k], SZ))) break;
      for (size_t i = 0; i < SZ / 4; i++)
        host[i] = kit_hash(seed, i);
      if ((j->err = kit_cu.cuMemcpyHtoDAsync_v2(p[k], host, SZ, s))) break;
      if ((j->err = kit_cu.cuStreamSynchronize(s))) break;
      /* the previous buffer, written one step ago: read by a kernel */
      int q = (k + PER - 1) % PER;
      if (r > 0 || k > 0) {
        uint32_t qs = (uint32_t)(j->id * 1000 + (k == 0 ? r - 1 : r) * 100 + q);
        unsigned long long bad = 0;
        if ((j->err = kit_check(p[q], SZ / 4, qs, s, &bad))) break;
        j->bad += bad;
      }
      memset(host, 0, SZ);
      if ((j->err = kit_cu.cuMemcpyDtoH_v2(host, p[k], SZ))) break;
      j->bad += kit_verify_host(host, SZ / 4, seed, 0);
    }
  for (int k = 0; k < PER; k++)
    kit_cu.cuMemFree_v2(p[k]);
  kit_cu.cuStreamDestroy_v2(s);
  free(host);
  return NULL;
}

static int worker(void) {
  CUmodule m;
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&m));
  pthread_t t[NTHREADS];
  job_t j[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    j[i] = (job_t){.id = i};
    pthread_create(&t[i], NULL, run, &j[i]);
  }
  size_t bad = 0;
  int err = 0;
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(t[i], NULL);
    bad += j[i].bad;
    if (j[i].err) {
      printf("thread %d: %s\n", i, kit_err_name(j[i].err));
      err = 1;
    }
  }
  printf("bad=%zu\n", bad);
  return err ? 2 : bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--worker")) return worker();
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  char dir[256], report[256], e_dir[300], e_rep[300];
  vxt_tmpname(dir, sizeof dir, ".swap");
  VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", dir);
  snprintf(e_rep, sizeof e_rep, "VX_REPORT=%s", report);
  /* 48 MiB of data, 12 MiB of host allowed */
  const char *env[] = {"SIMCUDA_VRAM=64M", "VX_DEVICE_LIMIT=0", "VX_HOST_LIMIT=12M", e_dir, e_rep, NULL};
  const char *args[] = {NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0);
  rmdir(dir);
  printf("%s%s", r.out, r.err);
  VXT_ASSERT(r.status == 0 && strstr(r.out, "bad=0"), "worker status %d", r.status);
  char *json = vxt_read_file(report);
  unlink(report);
  VXT_ASSERT(json, "no report");
  VXT_ASSERT(vxt_json_u64(json, 0, "nvme_write_bytes") > 0 &&
                 vxt_json_u64(json, 0, "nvme_read_bytes") > 0,
             "the tier moved nothing: the test would not test it");
  VXT_ASSERT(vxt_json_u64(json, 0, "nvme_read_failures") == 0);
  free(json);
  printf("ok\n");
  return 0;
}
