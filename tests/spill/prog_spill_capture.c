/* prog_spill_capture: the main thread captures a blocking stream in GLOBAL mode
 * while thread B (GLOBAL mode too) launches a kernel whose first use of R
 * takes the host over VX_HOST_LIMIT (the process's first spill: the bounce
 * buffers, the snapshot, the discard and its wait), then copies Q, which
 * that spill sent to the swap, back (a restore from a copy hook).  The
 * NVMe tier must keep the host limit during the capture and make no call
 * that invalidates it: the capture ends as without vx, the graph runs,
 * every byte verifies (issue 13).  Mode plain: the same without the tier.
 * Mode own: Q is in the swap when the main thread captures a memset of Q and
 * a copy of Q back on its own stream: recording them restores nothing (the
 * graph's launch does), so the thread's own capture stays valid.
 * Mode copy: as nvme, Q written by an async host-to-device copy on a
 * stream of its own (a copy names its stream: Q's snapshot waits for that
 * stream's event, not for the whole context, which a capture forbids). */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define MB ((size_t)1 << 20)
#define SZ (8 * MB)
#define GSZ (2 * MB)

static CUcontext ctx;
static CUdeviceptr P, Q, R, G;
static int nvme, by_copy, own;

/* Mode own: Q spilled first, then captured into a memset and a copy back. */
static int own_capture(CUstream cs) {
  CUstream ns;
  CHECK_CU(kit_cu.cuStreamCreate(&ns, CU_STREAM_NON_BLOCKING));
  CHECK_CU(kit_add(R, P, P, SZ / 4, ns)); /* R's first use: Q (the coldest) spills */
  CHECK_CU(kit_cu.cuStreamSynchronize(ns));
  int spilled = 0;
  for (size_t off = 0; off < SZ; off += 2 * MB)
    spilled += kit_sim_residency(Q + off) == -1;
  printf("chunks of Q in the swap before the capture: %d\n", spilled);
  if (!spilled) return 3;
  uint32_t *hq = calloc(1, SZ);
  CUgraph g;
  CUgraphExec ge;
  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUresult r1 = kit_cu.cuMemsetD32Async(Q + SZ / 2, 0x5a5a5a5a, SZ / 8, cs);
  CUresult r2 = kit_cu.cuMemcpyDtoHAsync_v2(hq, Q, SZ, cs);
  CUresult end = kit_cu.cuStreamEndCapture(cs, &g);
  printf("own capture: memset %s, copy %s, end %s\n", kit_err_name(r1), kit_err_name(r2),
         kit_err_name(end));
  if (r1 || r2 || end) return 2;
  CHECK_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
  CHECK_CU(cuGraphLaunch(ge, cs));
  CHECK_CU(kit_cu.cuStreamSynchronize(cs));
  size_t bad = 0;
  for (size_t i = 0; i < SZ / 4; i++)
    bad += hq[i] != (i < SZ / 8 ? kit_hash(2, i) : 0x5a5a5a5au);
  free(hq);
  printf("bad=%zu\n", bad);
  return bad ? 1 : 0;
}
static CUresult b_err;
static int q_spilled;
static size_t q_bad;

#define B_CU(call) VXT_FIRST_ERR(b_err, "thread B", call)

/* Thread B: a second model thread while the main thread captures. */
static void *thread_b(void *arg) {
  (void)arg;
  CUstream bs;
  B_CU(kit_cu.cuCtxSetCurrent(ctx));
  B_CU(kit_cu.cuStreamCreate(&bs, CU_STREAM_NON_BLOCKING));
  B_CU(kit_add(R, P, P, SZ / 4, bs)); /* R's first use: Q (the coldest) spills */
  for (size_t off = 0; off < SZ; off += 2 * MB)
    q_spilled += kit_sim_residency(Q + off) == -1;
  uint32_t *hq = calloc(1, SZ);
  B_CU(kit_cu.cuMemcpyDtoHAsync_v2(hq, Q, SZ, bs)); /* Q restored first */
  /* its waits in relaxed mode, as PyTorch's allocator does */
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  B_CU(cuThreadExchangeStreamCaptureMode(&m));
  B_CU(kit_cu.cuStreamSynchronize(bs));
  B_CU(cuThreadExchangeStreamCaptureMode(&m));
  q_bad = kit_verify_host(hq, SZ / 4, 2, 0);
  free(hq);
  return NULL;
}

static size_t verify(CUdeviceptr p, size_t bytes, uint32_t seed, int twice, uint32_t *host) {
  memset(host, 0, bytes);
  CUresult r = kit_cu.cuMemcpyDtoH_v2(host, p, bytes);
  if (r != CUDA_SUCCESS) {
    printf("read back: %s\n", kit_err_name(r));
    return bytes / 4;
  }
  size_t bad = 0;
  for (size_t i = 0; i < bytes / 4; i++)
    bad += host[i] != (twice ? 2 * kit_hash(seed, i) : kit_hash(seed, i));
  return bad;
}

static int worker(void) {
  CUlibrary lib;
  CUstream cs;
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_library(&lib));
  CHECK_CU(kit_cu.cuStreamCreate(&cs, 0)); /* blocking: the legacy stream is off limits */
  CHECK_CU(kit_cu.cuMemAlloc_v2(&P, SZ));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&Q, SZ));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&R, SZ));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&G, GSZ));
  CHECK_CU(kit_fill(P, SZ / 4, 1, cs));
  if (by_copy) {
    CUstream ns;
    uint32_t *hq = malloc(SZ);
    for (size_t i = 0; i < SZ / 4; i++)
      hq[i] = kit_hash(2, i);
    CHECK_CU(kit_cu.cuStreamCreate(&ns, CU_STREAM_NON_BLOCKING));
    CHECK_CU(kit_cu.cuMemcpyHtoDAsync_v2(Q, hq, SZ, ns));
    CHECK_CU(kit_cu.cuStreamSynchronize(ns));
    free(hq);
  } else {
    CHECK_CU(kit_fill(Q, SZ / 4, 2, cs));
  }
  for (int i = 0; i < 4; i++) /* P and Q are no longer pinned (18 MiB: no spill yet) */
    CHECK_CU(kit_fill(G, GSZ / 4, 6, cs));
  CHECK_CU(kit_cu.cuStreamSynchronize(cs));
  if (own) return own_capture(cs);

  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK_CU(kit_fill(G, GSZ / 4, 7, cs)); /* recorded, not run */
  pthread_t t;
  pthread_create(&t, NULL, thread_b, NULL);
  pthread_join(t, NULL);
  CUstreamCaptureStatus st;
  CHECK_CU(kit_cu.cuStreamIsCapturing(cs, &st));
  printf("capture status after thread B: %d (1: active)\n", (int)st);
  CUgraph g;
  CUresult end = kit_cu.cuStreamEndCapture(cs, &g);
  printf("end of the capture: %s\n", kit_err_name(end));
  if (b_err || end != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_ACTIVE) return 2;
  printf("chunks of Q in the swap during the capture: %d; Q read by thread B: %zu words wrong\n",
         q_spilled, q_bad);
  if (nvme && !q_spilled) return 3; /* VX_HOST_LIMIT not held during the capture */

  CUgraphExec ge;
  CHECK_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
  CHECK_CU(cuGraphLaunch(ge, cs));
  CHECK_CU(kit_cu.cuStreamSynchronize(cs));
  uint32_t *host = malloc(SZ);
  size_t bad = q_bad + verify(G, GSZ, 7, 0, host) + verify(R, SZ, 1, 1, host) +
               verify(P, SZ, 1, 0, host) + verify(Q, SZ, 2, 0, host);
  free(host);
  printf("bad=%zu\n", bad);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--worker")) {
    by_copy = !strcmp(argv[2], "copy");
    own = !strcmp(argv[2], "own");
    nvme = by_copy || own || !strcmp(argv[2], "nvme");
    return worker();
  }
  VXT_ASSERT(argc == 2 && (!strcmp(argv[1], "nvme") || !strcmp(argv[1], "plain") ||
                           !strcmp(argv[1], "copy") || !strcmp(argv[1], "own")),
             "usage: nvme|plain|copy|own");
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  int on = strcmp(argv[1], "plain") != 0;
  char dir[256], report[256], e_dir[300], e_rep[300];
  vxt_tmpname(dir, sizeof dir, ".swap");
  if (on) VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", on ? dir : "");
  snprintf(e_rep, sizeof e_rep, "VX_REPORT=%s", report);
  const char *env[] = {"SIMCUDA_VRAM=64M",
                       "VX_DEVICE_LIMIT=0",
                       on ? "VX_HOST_LIMIT=20M" : "VX_HOST_LIMIT=",
                       e_dir,
                       e_rep,
                       NULL};
  const char *args[] = {argv[1], NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0);
  if (on) rmdir(dir);
  printf("%s%s", r.out, r.err);
  VXT_ASSERT(r.status == 0 && strstr(r.out, "bad=0"), "worker status %d", r.status);
  char *json = vxt_read_file(report);
  unlink(report);
  VXT_ASSERT(json, "no report");
  if (on)
    VXT_ASSERT(vxt_json_u64(json, 0, "nvme_write_bytes") > 0 &&
                   vxt_json_u64(json, 0, "nvme_read_bytes") > 0,
               "the tier moved nothing: the test would not test it");
  free(json);
  printf("ok\n");
  return 0;
}
