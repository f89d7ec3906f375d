/* prog_spill_e2e: an unmodified driver-API program whose data is 6x the device
 * (and 3x VX_HOST_LIMIT) runs under vx with an NVMe swap: every byte checked.
 *
 * usage: prog_spill_e2e MODE (orchestrates: runs `prog_spill_e2e --worker MODE` with the
 * environment of that mode and checks its output and vx's JSON report).
 * Modes: e2e (io_uring or the pool, whatever the machine gives), pool
 * (VX_NVME_ENGINE=pool), full (VX_NVME_LIMIT tiny: data stays in RAM),
 * corrupt (the swap file's bytes overwritten: reads fail, never wrong data),
 * truncate (the swap file cut to 0: restores get short reads -> errors),
 * nodiscard (the driver refuses cuMemDiscardBatchAsync: data stays in RAM),
 * kernel (as e2e, every kernel launched as a CUkernel from cuLibraryLoadData
 * + cuLibraryGetKernel, as libcudart 13 does), graph (as e2e, and spilled
 * buffers read first by a CUDA graph captured from CUkernel launches: its
 * nodes carry `kern`, not `func`), unseen (no parameter layout
 * from either query family: after the copies spilled, the first launch vx
 * cannot read restores everything and spilling stops; data verifies).
 * Under an older simulated driver (SIMCUDA_DRIVER_VERSION < 13000: no
 * cuMemDiscardBatchAsync) e2e expects the tier off, said once, and every
 * byte still right. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define MB ((size_t)1 << 20)
#define ALLOC (8 * MB)
#define SLACK (64 * MB) /* 4 protected calls x 2 allocations x 8 MiB */

static size_t vram(void) {
  return vxt_env_size("SIMCUDA_VRAM", 128 * MB);
}

// ---- the worker: an ordinary program ----

typedef struct prog {
  int n;
  CUdeviceptr p[256];
  uint32_t *host;
  unsigned long long errors; /* operations that failed (allowed only when told) */
  size_t bad;                /* words that came back wrong: never allowed */
} prog_t;

/* late: the kernels run after every copy (the copies spill first). */
static void write_all(prog_t *g, int late) {
  for (int k = 0; k < g->n; k++) {
    CHECK_CU(kit_cu.cuMemAlloc_v2(&g->p[k], ALLOC));
    /* odd ones: a stale pattern copied in, then the right one by a kernel */
    uint32_t seed = k % 2 ? (uint32_t)k + 1000 : (uint32_t)k;
    for (size_t i = 0; i < ALLOC / 4; i++)
      g->host[i] = kit_hash(seed, i);
    CHECK_CU(kit_cu.cuMemcpyHtoD_v2(g->p[k], g->host, ALLOC));
    if (k % 2 && !late) CHECK_CU(kit_fill(g->p[k], ALLOC / 4, (uint32_t)k, NULL));
  }
  for (int k = 1; late && k < g->n; k += 2)
    CHECK_CU(kit_fill(g->p[k], ALLOC / 4, (uint32_t)k, NULL));
  CHECK_CU(kit_cu.cuCtxSynchronize());
}

/* One allocation read back by a kernel (how = 0) or a DtoH copy (how = 1). */
static void read_one(prog_t *g, int k, int how, int may_fail) {
  CUresult r;
  if (how == 0) {
    unsigned long long bad = 0;
    r = kit_check(g->p[k], ALLOC / 4, (uint32_t)k, NULL, &bad);
    if (r == CUDA_SUCCESS) g->bad += bad;
  } else {
    r = kit_cu.cuMemcpyDtoH_v2(g->host, g->p[k], ALLOC);
    if (r == CUDA_SUCCESS) g->bad += kit_verify_host(g->host, ALLOC / 4, (uint32_t)k, 0);
  }
  if (r == CUDA_SUCCESS) return;
  if (!may_fail) {
    kit_report(__FILE__, __LINE__, how ? "DtoH" : "check_u32", r);
    exit(2);
  }
  g->errors++;
  if (g->errors == 1) printf("first error: %s\n", kit_err_name(r));
}

static void read_all(prog_t *g, int may_fail) {
  for (int k = 0; k < g->n; k++)
    read_one(g, k, 0, may_fail); /* forward, kernels */
  for (int k = g->n - 1; k >= 0; k--)
    read_one(g, k, 1, may_fail); /* backward, copies */
  for (int j = 0; j < g->n; j++)
    read_one(g, (j * 37) % g->n, j % 2, may_fail); /* strided */
}

/* The swap file (vx's, nameless) among this process's descriptors. */
static int swap_fd(const char *dir) {
  DIR *d = opendir("/proc/self/fd");
  int found = -1;
  for (struct dirent *e; d && (e = readdir(d));) {
    char path[300], target[4096];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    if (!strncmp(target, dir, strlen(dir)) && target[strlen(dir)] == '/') found = atoi(e->d_name);
  }
  if (d) closedir(d);
  return found;
}

/* Damages the swap file through a second descriptor of its own. */
static void damage_swap(const char *mode) {
  const char *dir = getenv("VX_NVME_DIR");
  int fd = swap_fd(dir);
  if (fd < 0) {
    printf("no swap file found under %s\n", dir);
    exit(3);
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int w = open(path, O_RDWR);
  if (w < 0) exit(3);
  struct stat st;
  fstat(w, &st);
  if (!strcmp(mode, "truncate")) {
    if (ftruncate(w, 0)) exit(3);
  } else {
    static char junk[1 << 16];
    memset(junk, 0x5a, sizeof junk);
    for (off_t off = 0; off < st.st_size; off += (off_t)sizeof junk)
      if (pwrite(w, junk, sizeof junk, off) < 0) exit(3);
    fsync(w);
  }
  close(w);
  printf("damaged %lld bytes (%s)\n", (long long)st.st_size, mode);
}

/* The modes that run 6x the device with the host limit at 2x. */
static int big_mode(const char *mode) {
  return !strcmp(mode, "e2e") || !strcmp(mode, "pool") || !strcmp(mode, "kernel") ||
         !strcmp(mode, "graph");
}

/* check_u32 over GRAPH_BUFS buffers whose first chunk is in the swap (the
 * simulator says discarded) from one captured graph; every mismatch lands
 * in one counter. */
#define GRAPH_BUFS 8
static void graph_check(prog_t *g, CUfunction f) {
  int pick[GRAPH_BUFS], np = 0;
  for (int k = 0; k < g->n && np < GRAPH_BUFS; k++)
    if (kit_sim_residency(g->p[k]) == -1) pick[np++] = k;
  printf("graph reads %d spilled buffers\n", np);
  if (!np) exit(3); /* nothing spilled: the check would prove nothing */
  CUstream s;
  CUdeviceptr cnt;
  CUgraph gr;
  CUgraphExec e;
  size_t n = ALLOC / 4;
  uint32_t seed[GRAPH_BUFS];
  CHECK_CU(kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&cnt, 8));
  CHECK_CU(kit_cu.cuMemsetD32_v2(cnt, 0, 2));
  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int i = 0; i < np; i++) {
    seed[i] = (uint32_t)pick[i];
    void *params[] = {&g->p[pick[i]], &n, &seed[i], &cnt};
    CHECK_CU(kit_cu.cuLaunchKernel(f, 4096, 1, 1, 256, 1, 1, 0, s, params, NULL));
  }
  CHECK_CU(kit_cu.cuStreamEndCapture(s, &gr));
  CHECK_CU(kit_cu.cuGraphInstantiateWithFlags(&e, gr, 0));
  CHECK_CU(kit_cu.cuGraphLaunch(e, s));
  CHECK_CU(kit_cu.cuStreamSynchronize(s));
  unsigned long long bad = 0;
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(&bad, cnt, sizeof bad));
  printf("graph check: %llu bad\n", bad);
  g->bad += bad;
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(gr));
  CHECK_CU(kit_cu.cuMemFree_v2(cnt));
  CHECK_CU(kit_cu.cuStreamDestroy_v2(s));
}

static int worker(const char *mode) {
  CUcontext ctx;
  CUmodule m;
  CHECK_CU(kit_init(0, &ctx));
  CUfunction kcheck = NULL; /* graph: a CUkernel; the other launches: CUfunctions */
  if (!strcmp(mode, "kernel") || !strcmp(mode, "graph")) CHECK_CU(kit_library(NULL));
  if (!strcmp(mode, "graph") && !(kcheck = kit_fn("check_u32"))) return 2;
  if (strcmp(mode, "kernel")) CHECK_CU(kit_module(&m));
  static prog_t g;
  g.n = (int)(6 * vram() / ALLOC);
  if (!big_mode(mode)) g.n /= 3;
  g.host = malloc(ALLOC);
  write_all(&g, !strcmp(mode, "unseen"));
  if (!strcmp(mode, "graph")) graph_check(&g, kcheck);
  int damage = !strcmp(mode, "corrupt") || !strcmp(mode, "truncate");
  if (damage) damage_swap(mode);
  read_all(&g, damage); /* three orders: every buffer read three times */
  simcuda_stats_t st;
  if (kit_sim_stats(0, &st)) return 3;
  printf("allocs=%d bytes=%zu errors=%llu bad=%zu host_backing_peak=%llu\n", g.n,
         (size_t)g.n * ALLOC, g.errors, g.bad, (unsigned long long)st.host_backing_peak);
  for (int k = 0; k < g.n; k++)
    kit_cu.cuMemFree_v2(g.p[k]);
  free(g.host);
  return g.bad ? 1 : 0;
}

// ---- the orchestrator ----

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--worker")) return worker(argv[2]);
  VXT_ASSERT(argc == 2,
             "usage: prog_spill_e2e e2e|pool|full|corrupt|truncate|nodiscard|kernel|graph|unseen");
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  const char *mode = argv[1];
  char dir[256], report[256], e_dir[300], e_rep[300], e_lim[64];
  vxt_tmpname(dir, sizeof dir, ".swap");
  VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", dir);
  snprintf(e_rep, sizeof e_rep, "VX_REPORT=%s", report);
  size_t limit = 2 * vram();
  if (!big_mode(mode)) limit = vram() / 2;
  snprintf(e_lim, sizeof e_lim, "VX_HOST_LIMIT=%zuM", limit / MB);
  const char *engine = !strcmp(mode, "pool") ? "VX_NVME_ENGINE=pool" : "VX_NVME_ENGINE=auto";
  const char *nvme_limit = !strcmp(mode, "full") ? "VX_NVME_LIMIT=4M" : "VX_NVME_LIMIT=64G";
  const char *fail = !strcmp(mode, "nodiscard") ? "SIMCUDA_FAIL=cuMemDiscardBatchAsync:1+:999"
                     : !strcmp(mode, "unseen")
                         ? "SIMCUDA_FAIL=cuFuncGetParamInfo:1+:999,cuKernelGetParamInfo:1+:999"
                         : "SIMCUDA_FAIL=";
  const char *env[] = {"SIMCUDA_VRAM=128M", "VX_MOVABLE=0", e_dir, e_rep, e_lim, engine, nvme_limit, fail, NULL};
  const char *args[] = {mode, NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0);
  printf("%s%s", r.out, r.err);
  char *json = vxt_read_file(report);
  unlink(report);
  DIR *d = opendir(dir);
  int left = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    left += e->d_name[0] != '.';
  if (d) closedir(d);
  rmdir(dir);
  VXT_ASSERT(left == 0, "the swap directory is not empty after exit");
  VXT_ASSERT(json, "no report");
  uint64_t wrote = vxt_json_u64(json, 0, "nvme_write_bytes");
  uint64_t read = vxt_json_u64(json, 0, "nvme_read_bytes");
  uint64_t peak = vxt_json_u64(json, 0, "nvme_bytes_peak");
  printf("report: nvme_write_bytes=%llu nvme_read_bytes=%llu nvme_bytes_peak=%llu "
         "host_held_bytes_peak=%llu limit=%zu\n",
         (unsigned long long)wrote, (unsigned long long)read, (unsigned long long)peak,
         (unsigned long long)vxt_json_u64(json, 0, "host_held_bytes_peak"), limit);
  const char *drv = getenv("SIMCUDA_DRIVER_VERSION");
  int version = drv && *drv ? atoi(drv) : 13000;
  if (version < 13000 && !strcmp(mode, "e2e")) {
    /* the tier is off, said once per missing entry point; the data is right */
    char said[160];
    snprintf(said, sizeof said, "driver %d.%d lacks cuMemDiscardBatchAsync (13.0): NVMe tier off",
             version / 1000, version % 1000 / 10);
    VXT_ASSERT(r.status == 0, "worker status %d", r.status);
    VXT_ASSERT(vxt_out_u64(&r, "errors=") == 0 && vxt_out_u64(&r, "bad=") == 0);
    VXT_ASSERT(vxt_count(r.err, said) == 1, "'%s' not said once:\n%s", said, r.err);
    VXT_ASSERT(vxt_count(r.err, "cuFuncGetParamInfo (12.4)") == (version < 12040), "%s", r.err);
    VXT_ASSERT(wrote == 0 && peak == 0, "spilled without cuMemDiscardBatchAsync");
  } else if (big_mode(mode)) {
    VXT_ASSERT(r.status == 0, "worker status %d", r.status);
    VXT_ASSERT(vxt_out_u64(&r, "errors=") == 0 && vxt_out_u64(&r, "bad=") == 0);
    uint64_t host_peak = vxt_out_u64(&r, "host_backing_peak=");
    VXT_ASSERT(host_peak <= limit + SLACK, "host backing peak %llu > limit %zu + slack %zu",
               (unsigned long long)host_peak, limit, SLACK);
    VXT_ASSERT(wrote > 0 && read > 0 && peak > 0);
    VXT_ASSERT(vxt_json_u64(json, 0, "nvme_read_failures") == 0);
    if (!strcmp(mode, "graph")) VXT_ASSERT(vxt_out_u64(&r, "graph reads ") > 0);
    /* vx's own stream for the discards: the tier keeps spilling (on the
     * legacy stream the first discard failed and the tier stopped) */
    VXT_ASSERT(vxt_json_u64(json, 0, "nvme_spills") > 1, "spilled %llu times",
               (unsigned long long)vxt_json_u64(json, 0, "nvme_spills"));
  } else if (!strcmp(mode, "full")) {
    VXT_ASSERT(r.status == 0, "worker status %d", r.status);
    VXT_ASSERT(vxt_out_u64(&r, "errors=") == 0 && vxt_out_u64(&r, "bad=") == 0);
    VXT_ASSERT(vxt_json_u64(json, 0, "nvme_enospc") > 0);
    VXT_ASSERT(peak <= 4 * MB, "the swap grew past VX_NVME_LIMIT: %llu", (unsigned long long)peak);
    VXT_ASSERT(vxt_count(r.err, "NVMe swap full") == 1, "the warning must be said once:\n%s", r.err);
  } else if (!strcmp(mode, "nodiscard")) {
    VXT_ASSERT(r.status == 0, "worker status %d", r.status);
    VXT_ASSERT(vxt_out_u64(&r, "errors=") == 0 && vxt_out_u64(&r, "bad=") == 0);
    VXT_ASSERT(peak == 0, "chunks counted as spilled although never discarded");
    VXT_ASSERT(vxt_count(r.err, "cuMemDiscardBatchAsync failed") == 1, "said once:\n%s", r.err);
    /* the driver's error by name, not by number (#14) */
    VXT_ASSERT(strstr(r.err, "cuMemDiscardBatchAsync failed (CUDA_ERROR_UNKNOWN)"), "%s", r.err);
  } else if (!strcmp(mode, "unseen")) {
    VXT_ASSERT(r.status == 0, "worker status %d", r.status);
    VXT_ASSERT(vxt_out_u64(&r, "errors=") == 0 && vxt_out_u64(&r, "bad=") == 0);
    VXT_ASSERT(wrote > 0 && read > 0, "the copies spilled and the unseen launch restored");
    VXT_ASSERT(vxt_json_u64(json, 0, "launches_unseen") > 0);
    VXT_ASSERT(vxt_count(r.err, "no more NVMe spills") == 1, "said once:\n%s", r.err);
  } else {
    /* damaged: operations fail, and nothing that succeeds returns wrong data */
    VXT_ASSERT(r.status == 0, "worker status %d (1 = wrong data came back)", r.status);
    VXT_ASSERT(vxt_out_u64(&r, "bad=") == 0);
    VXT_ASSERT(vxt_out_u64(&r, "errors=") > 0, "no operation failed after the swap was damaged");
    VXT_ASSERT(strstr(r.out, "first error: CUDA_ERROR_UNKNOWN"), "%s", r.out);
    VXT_ASSERT(vxt_json_u64(json, 0, "nvme_read_failures") > 0);
    if (!strcmp(mode, "corrupt")) VXT_ASSERT(vxt_json_u64(json, 0, "nvme_checksum_failures") > 0);
  }
  free(json);
  printf("ok %s\n", mode);
  return 0;
}
