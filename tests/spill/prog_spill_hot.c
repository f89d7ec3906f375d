/* prog_spill_hot: segments hotter than the host limit.  A caching allocator's
 * program keeps a few big segments and launches kernels on tensors carved
 * out of them; every segment is reached again and again, none is ever cold
 * for long.  The host limit must still hold (within one spill batch, the
 * NVMe tier's unit of work) once the launches that reach a segment have
 * been enqueued, and every byte must come back.
 *
 * usage: prog_spill_hot MODE, MODE one of
 *   segments  four 40 MiB segments, each tensor launch reaches one segment:
 *             each segment fits beside the limit, all four do not;
 *   one       one 160 MiB segment, bigger than device room plus the limit:
 *             every launch needs it whole (vx cannot know which bytes a
 *             kernel reads), so vx says once that the limit cannot hold
 *             while such a launch runs, and the data is still right.
 * The orchestrator runs `prog_spill_hot --worker MODE` under VX_NVME_DIR with
 * VX_HOST_LIMIT at LIMIT on a 64 MiB simulated device, and checks the
 * worker's figures and vx's report. */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define MB ((size_t)1 << 20)
/* segments: each 40 MiB segment leaves 20 MiB in host RAM beside the
 * 20 MiB of device room the native first segment leaves (budget 60 MiB
 * of 64), under the 24 MiB limit; one: 100 MiB must stay over 16 MiB. */
#define LIMIT(one) ((one) ? 16 * MB : 24 * MB)
#define BATCH (128 * MB) /* SPILL_BATCH chunks of 2 MiB (tiers/spill_int.h) */
#define TENSOR (4 * MB)
#define ROUNDS 3

// ---- the worker ----

typedef struct seg {
  CUdeviceptr base;
  size_t size;
  int ntensors;
} seg_t;

static uint32_t seed_of(int s, int t, int round) {
  return (uint32_t)(s * 10000 + t * 100 + round);
}

static int worker(const char *mode) {
  CUcontext ctx;
  CUmodule m;
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&m));
  int one = !strcmp(mode, "one");
  int nseg = one ? 1 : 4;
  seg_t seg[4];
  for (int s = 0; s < nseg; s++) {
    seg[s].size = one ? 160 * MB : 40 * MB;
    seg[s].ntensors = (int)(seg[s].size / TENSOR);
    CHECK_CU(kit_cu.cuMemAlloc_v2(&seg[s].base, seg[s].size));
  }
  size_t bad = 0;
  uint64_t held_max_between = 0;
  simcuda_stats_t st;
  /* Round r writes every tensor with seed r and checks what round r-1
   * wrote: launches walk the segments in turn, tensor by tensor. */
  for (int r = 0; r < ROUNDS; r++) {
    for (int t = 0; t < seg[0].ntensors; t++)
      for (int s = 0; s < nseg; s++) {
        if (t >= seg[s].ntensors) continue;
        CUdeviceptr p = seg[s].base + (size_t)t * TENSOR;
        if (r > 0) {
          unsigned long long b = 0;
          CHECK_CU(kit_check(p, TENSOR / 4, seed_of(s, t, r - 1), NULL, &b));
          bad += b;
        }
        CHECK_CU(kit_fill(p, TENSOR / 4, seed_of(s, t, r), NULL));
      }
    CHECK_CU(kit_cu.cuCtxSynchronize());
    /* Between rounds nothing runs: what the host holds now is what vx
     * kept after the last launches were enqueued. */
    if (kit_sim_stats(0, &st)) return 3;
    if (st.host_backing_bytes > held_max_between) held_max_between = st.host_backing_bytes;
  }
  /* Read back through copies too. */
  uint32_t *host = malloc(TENSOR);
  for (int s = 0; s < nseg; s++)
    for (int t = 0; t < seg[s].ntensors; t++) {
      CHECK_CU(kit_cu.cuMemcpyDtoH_v2(host, seg[s].base + (size_t)t * TENSOR, TENSOR));
      bad += kit_verify_host(host, TENSOR / 4, seed_of(s, t, ROUNDS - 1), 0);
    }
  free(host);
  if (kit_sim_stats(0, &st)) return 3;
  printf("bad=%zu host_between=%llu host_backing_peak=%llu\n", bad,
         (unsigned long long)held_max_between, (unsigned long long)st.host_backing_peak);
  for (int s = 0; s < nseg; s++)
    kit_cu.cuMemFree_v2(seg[s].base);
  return bad ? 1 : 0;
}

// ---- the orchestrator ----

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--worker")) return worker(argv[2]);
  VXT_ASSERT(argc == 2 && (!strcmp(argv[1], "segments") || !strcmp(argv[1], "one")),
             "usage: prog_spill_hot segments|one");
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  const char *mode = argv[1];
  char dir[256], report[256], e_dir[300], e_rep[300], e_lim[64];
  vxt_tmpname(dir, sizeof dir, ".swap");
  VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", dir);
  snprintf(e_rep, sizeof e_rep, "VX_REPORT=%s", report);
  int one = !strcmp(mode, "one");
  size_t limit = LIMIT(one);
  snprintf(e_lim, sizeof e_lim, "VX_HOST_LIMIT=%zuM", limit / MB);
  const char *env[] = {"SIMCUDA_VRAM=64M", "VX_MOVABLE=0", e_dir, e_rep, e_lim, "VX_NVME_LIMIT=2G",
                       NULL};
  const char *args[] = {mode, NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0);
  printf("%s%s", r.out, r.err);
  char *json = vxt_read_file(report);
  unlink(report);
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') {
      char p[600];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  if (d) closedir(d);
  rmdir(dir);
  VXT_ASSERT(json, "no report");
  VXT_ASSERT(r.status == 0, "worker status %d (1 = wrong data came back)", r.status);
  VXT_ASSERT(vxt_out_u64(&r, "bad=") == 0);
  uint64_t wrote = vxt_json_u64(json, 0, "nvme_write_bytes");
  uint64_t between = vxt_out_u64(&r, "host_between=");
  printf("report: nvme_write_bytes=%llu host_held_bytes_peak=%llu\n", (unsigned long long)wrote,
         (unsigned long long)vxt_json_u64(json, 0, "host_held_bytes_peak"));
  VXT_ASSERT(wrote > 0, "nothing was spilled: the hot segments stayed whole in host RAM");
  if (!one) {
    /* Once the launches are enqueued, the limit holds within one batch,
     * and no more than one segment's worth is ever held over it. */
    VXT_ASSERT(between <= limit + 40 * MB, "host holds %llu between rounds, limit %zu",
               (unsigned long long)between, limit);
    VXT_ASSERT(vxt_count(r.err, "VX_HOST_LIMIT cannot hold") == 0, "%s", r.err);
  } else {
    VXT_ASSERT(between <= limit + BATCH, "host holds %llu between rounds, limit %zu",
               (unsigned long long)between, limit);
    VXT_ASSERT(vxt_count(r.err, "VX_HOST_LIMIT cannot hold") == 1, "said once:\n%s", r.err);
  }
  free(json);
  printf("ok %s\n", mode);
  return 0;
}
