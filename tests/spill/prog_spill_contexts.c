/* prog_spill_contexts: a kernel enqueued in another context (mode ctx: a second
 * context on device 0; mode dev: device 1's, SIMCUDA_DEVICES=2) is still to
 * write buffer X when the host limit makes the main thread spill X.  The
 * snapshot must wait for that kernel (or leave X alone): a spill that
 * waited only for the main thread's context would save X's old bytes,
 * discard the kernel's output and restore the old bytes over it (issue 13).
 * The other thread's stream is held by a host function until the main
 * thread's spill is over, so the order is the same on every run. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define MB ((size_t)1 << 20)
#define SZ (8 * MB)

static CUcontext c_main, c_other;
static CUdeviceptr X, W;
static int mode_dev;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int gate_open, enqueued;
static CUresult t_err;

static void CUDA_CB gate(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  while (!gate_open)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}

static void set_flag(int *f) {
  pthread_mutex_lock(&mu);
  *f = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

#define T_CU(call) VXT_FIRST_ERR(t_err, "thread", call)

/* The other context's thread: X's new contents, enqueued behind the gate. */
static void *other(void *arg) {
  (void)arg;
  CUstream s;
  CUdeviceptr y;
  uint32_t word = 7;
  T_CU(kit_cu.cuCtxSetCurrent(c_other));
  T_CU(kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  T_CU(kit_cu.cuMemAlloc_v2(&y, 2 * MB));
  T_CU(kit_cu.cuLaunchHostFunc(s, gate, NULL));
  T_CU(kit_fill(X, SZ / 4, 2, s));
  /* a copy on the same stream: the operation is enqueued, X is no longer
   * pinned for this thread */
  T_CU(kit_cu.cuMemcpyHtoDAsync_v2(y, &word, sizeof word, s));
  set_flag(&enqueued);
  T_CU(kit_cu.cuStreamSynchronize(s)); /* after the main thread opened the gate */
  T_CU(kit_cu.cuMemFree_v2(y));
  T_CU(kit_cu.cuStreamDestroy_v2(s));
  return NULL;
}

static size_t verify(CUdeviceptr p, uint32_t seed, uint32_t *host) {
  return kit_verify_dev(p, SZ / 4, seed, host);
}

static int worker(void) {
  CUstream s;
  CUlibrary lib;
  CHECK_CU(kit_init(0, &c_main));
  CHECK_CU(kit_library(&lib)); /* CUkernels: they run in any context */
  if (mode_dev) {
    CUdevice d1;
    CHECK_CU(kit_cu.cuDeviceGet(&d1, 1));
    CHECK_CU(kit_cu.cuDevicePrimaryCtxRetain(&c_other, d1));
  } else {
    CHECK_CU(cuCtxCreate(&c_other, NULL, 0, 0));
  }
  CHECK_CU(kit_cu.cuCtxSetCurrent(c_main));
  CHECK_CU(kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&X, SZ));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&W, SZ));
  CHECK_CU(kit_fill(X, SZ / 4, 1, s));
  CHECK_CU(kit_cu.cuStreamSynchronize(s));
  uint32_t word;
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(&word, X, sizeof word)); /* a copy: X is unpinned here */

  pthread_t t;
  pthread_create(&t, NULL, other, NULL);
  pthread_mutex_lock(&mu);
  while (!enqueued)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  /* W's first use takes the host over VX_HOST_LIMIT: X is the coldest */
  CHECK_CU(kit_fill(W, SZ / 4, 3, s));
  CHECK_CU(kit_cu.cuStreamSynchronize(s));
  printf("X's chunks while the other context's kernel waits:");
  for (size_t off = 0; off < SZ; off += 2 * MB)
    printf(" %d", kit_sim_residency(X + off));
  printf(" (-1: discarded)\n");
  set_flag(&gate_open);
  pthread_join(t, NULL);
  if (t_err) return 2;

  uint32_t *host = malloc(SZ);
  size_t bad = verify(X, 2, host);
  printf("X after the other context's kernel: %zu of %zu words wrong\n", bad, SZ / 4);
  /* now X is idle: it may go to the swap and come back whole */
  CUdeviceptr v;
  CHECK_CU(kit_cu.cuMemAlloc_v2(&v, SZ));
  CHECK_CU(kit_fill(v, SZ / 4, 4, s));
  CHECK_CU(kit_fill(W, SZ / 4, 5, s));
  CHECK_CU(kit_cu.cuStreamSynchronize(s));
  bad += verify(X, 2, host) + verify(W, 5, host) + verify(v, 4, host);
  free(host);
  printf("bad=%zu\n", bad);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--worker")) {
    mode_dev = !strcmp(argv[2], "dev");
    return worker();
  }
  VXT_ASSERT(argc == 2 && (!strcmp(argv[1], "ctx") || !strcmp(argv[1], "dev")), "usage: ctx|dev");
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  char dir[256], report[256], e_dir[300], e_rep[300];
  vxt_tmpname(dir, sizeof dir, ".swap");
  VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", dir);
  snprintf(e_rep, sizeof e_rep, "VX_REPORT=%s", report);
  const char *env[] = {"SIMCUDA_VRAM=64M",
                       "SIMCUDA_DEVICES=2",
                       "VX_DEVICE_LIMIT=0",
                       "VX_HOST_LIMIT=12M",
                       e_dir,
                       e_rep,
                       NULL};
  const char *args[] = {argv[1], NULL};
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
  free(json);
  printf("ok\n");
  return 0;
}
