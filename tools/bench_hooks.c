/* `vx bench hooks`: the extra cost of libvx.so per kernel launch (8 pointer
 * arguments into tracked allocations, nothing to move) and per cuMemAlloc/
 * cuMemFree pair, measured with and without vx in the same run. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_libpath.h"
#include "bench.h"
#include "commands.h"

/* Benchmarks besides `hooks`: one row each, when their file exists. */
static const struct {
  const char *name;
  int (*fn)(int argc, char **argv);
} bench_table[] = {
    {"hooks", vx_bench_hooks},
    {"nvme", vx_bench_nvme},
};

static const char bench_usage[] =
    "usage: vx bench hooks [--iters N]\n"
    "       vx bench nvme --dir DIR --size SIZE [...]   (vx bench nvme --help)\n"
    "hooks: nanoseconds vx adds per driver call; nvme: the NVMe tier's throughput.\n";

int vx_cmd_bench(int argc, char **argv) {
  if (argc >= 2)
    for (size_t i = 0; i < sizeof bench_table / sizeof bench_table[0]; i++)
      if (!strcmp(argv[1], bench_table[i].name)) return bench_table[i].fn(argc - 1, argv + 1);
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
    return vx_cli_help(bench_usage);
  if (argc < 2) return vx_cli_usage_error("bench", "which benchmark: hooks or nvme?");
  char msg[300];
  snprintf(msg, sizeof msg, "unknown benchmark '%.200s' (hooks or nvme)", argv[1]);
  return vx_cli_usage_error("bench", msg);
}

// ---- the child: times the driver calls it reaches through dlsym ----

enum { BATCH_LAUNCH = 50, BATCH_ALLOC = 25, NARGS = 8, ROUNDS = 5 };

struct api {
  CUresult (*init)(unsigned);
  CUresult (*dev_get)(CUdevice *, int);
  CUresult (*ctx_retain)(CUcontext *, CUdevice);
  CUresult (*ctx_set)(CUcontext);
  CUresult (*module_load)(CUmodule *, const void *);
  CUresult (*get_function)(CUfunction *, CUmodule, const char *);
  CUresult (*alloc)(CUdeviceptr *, size_t);
  CUresult (*free)(CUdeviceptr);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, CUstream, void **, void **);
  CUresult (*sync)(void);
};

static const char bench_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry vx_bench_nop(.param .u64 a0, .param .u64 a1, .param .u64 a2, .param .u64 a3,"
    " .param .u64 a4, .param .u64 a5, .param .u64 a6, .param .u64 a7)\n{\n  ret;\n}\n";

typedef struct simcuda_kctx simcuda_kctx_t;
static void bench_nop(void **params, simcuda_kctx_t *k) {
  (void)params, (void)k;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int load_api(struct api *a) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "vx bench: cannot load libcuda.so.1: %s\n", dlerror());
    return -1;
  }
  void **slots[] = {(void **)&a->init,    (void **)&a->dev_get,     (void **)&a->ctx_retain,
                    (void **)&a->ctx_set, (void **)&a->module_load, (void **)&a->get_function,
                    (void **)&a->alloc,   (void **)&a->free,        (void **)&a->launch,
                    (void **)&a->sync};
  const char *names[] = {"cuInit",          "cuDeviceGet",      "cuDevicePrimaryCtxRetain",
                         "cuCtxSetCurrent", "cuModuleLoadData", "cuModuleGetFunction",
                         "cuMemAlloc_v2",   "cuMemFree_v2",     "cuLaunchKernel",
                         "cuCtxSynchronize"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!(*slots[i] = dlsym(h, names[i]))) {
      fprintf(stderr, "vx bench: libcuda.so.1 lacks %s\n", names[i]);
      return -1;
    }
  int (*reg)(const char *, void (*)(void **, simcuda_kctx_t *)) =
      (int (*)(const char *, void (*)(void **, simcuda_kctx_t *)))dlsym(h,
                                                                        "simcuda_register_kernel");
  if (reg) /* on a real GPU the PTX runs as is */
    reg("vx_bench_nop", bench_nop);
  return 0;
}

#define BENCH_CHECK(call)                                                                          \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      fprintf(stderr, "vx bench: %s failed: %d\n", #call, (int)r_);                                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

/* Per-call time of one batch of launches / alloc-free pairs (ns). */
static double time_launches(launch_fn launch, CUfunction fn, void **params) {
  double t0 = now_ns();
  for (int i = 0; i < BATCH_LAUNCH; i++)
    if (launch(fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS) return -1;
  return (now_ns() - t0) / BATCH_LAUNCH;
}

static double time_allocs(alloc_fn alloc, free_fn release) {
  double t0 = now_ns();
  for (int i = 0; i < BATCH_ALLOC; i++) {
    CUdeviceptr p;
    if (alloc(&p, 1u << 20) != CUDA_SUCCESS || release(p) != CUDA_SUCCESS) return -1;
  }
  return (now_ns() - t0) / BATCH_ALLOC;
}

/* Prints "L_a L_b A_a A_b": median per-call ns of launches and alloc/free
 * pairs through the entry points a program gets from dlsym (a: vx's hooks
 * when vx is preloaded) and through the driver's own (b: dlvsym, which vx
 * does not hook), in alternating batches so both see the same load. */
static int bench_child(int iters) {
  struct api a;
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  if (load_api(&a)) return 1;
  /* The driver's own entry points, through libc's dlsym called directly
   * (vx hooks the dlsym a program links against, not libc's inside libc). */
  void *h = dlopen("libcuda.so.1", RTLD_NOW), *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  void *(*libc_dlsym)(void *, const char *) =
      libc ? (void *(*)(void *, const char *))dlvsym(libc, "dlsym", "GLIBC_2.34") : NULL;
  if (libc && !libc_dlsym)
    libc_dlsym = (void *(*)(void *, const char *))dlvsym(libc, "dlsym", "GLIBC_2.2.5");
  launch_fn real_launch = libc_dlsym ? (launch_fn)libc_dlsym(h, "cuLaunchKernel") : NULL;
  alloc_fn real_alloc = libc_dlsym ? (alloc_fn)libc_dlsym(h, "cuMemAlloc_v2") : NULL;
  free_fn real_free = libc_dlsym ? (free_fn)libc_dlsym(h, "cuMemFree_v2") : NULL;
  if (!real_launch || !real_alloc || !real_free) {
    real_launch = a.launch, real_alloc = a.alloc, real_free = a.free;
  }
  BENCH_CHECK(a.init(0));
  BENCH_CHECK(a.dev_get(&dev, 0));
  BENCH_CHECK(a.ctx_retain(&ctx, dev));
  BENCH_CHECK(a.ctx_set(ctx));
  BENCH_CHECK(a.module_load(&mod, bench_ptx));
  BENCH_CHECK(a.get_function(&fn, mod, "vx_bench_nop"));
  CUdeviceptr buf[NARGS];
  void *params[NARGS];
  for (int i = 0; i < NARGS; i++) {
    BENCH_CHECK(a.alloc(&buf[i], 4u << 20)); /* tracked by vx when preloaded */
    params[i] = &buf[i];
  }
  int nb = iters / BATCH_LAUNCH / 2 > 0 ? iters / BATCH_LAUNCH / 2 : 1;
  double *ta = calloc((size_t)nb, sizeof *ta), *tb = calloc((size_t)nb, sizeof *tb), out[4];
  if (!ta || !tb) return 1;
  for (int b = 0; b < nb; b++) {
    ta[b] = time_launches(a.launch, fn, params);
    BENCH_CHECK(a.sync()); /* outside the timing: keeps the queue short */
    tb[b] = time_launches(real_launch, fn, params);
    BENCH_CHECK(a.sync());
    if (ta[b] < 0 || tb[b] < 0) return 1;
  }
  out[0] = median(ta, nb);
  out[1] = median(tb, nb);
  int na = nb / 2 > 0 ? nb / 2 : 1;
  for (int b = 0; b < na; b++) {
    ta[b] = time_allocs(a.alloc, a.free);
    tb[b] = time_allocs(real_alloc, real_free);
    if (ta[b] < 0 || tb[b] < 0) return 1;
  }
  out[2] = median(ta, na);
  out[3] = median(tb, na);
  free(ta);
  free(tb);
  for (int i = 0; i < NARGS; i++)
    a.free(buf[i]);
  printf("%.1f %.1f %.1f %.1f\n", out[0], out[1], out[2], out[3]);
  return 0;
}

// ---- the parent: runs the child with and without vx ----

/* Directory of this executable (where libvx.so is built and installed). */
/* The driver the dynamic linker finds for libcuda.so.1 (LD_LIBRARY_PATH,
 * then ld.so.cache, as for the program being measured), or the file name:
 * its path into path, and whether it is the simulator.  0, or -ENOENT with the reason in
 * why. */
static int find_driver(const char *name, char *path, size_t len, int *simulated, char *why,
                       size_t wlen) {
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(why, wlen, "%s", dlerror());
    return -ENOENT;
  }
  void *init = dlsym(h, "cuInit");
  Dl_info info;
  if (!init || !dladdr(init, &info) || !info.dli_fname) {
    snprintf(why, wlen, "libcuda.so.1 has no cuInit");
    dlclose(h);
    return -ENOENT;
  }
  char real[PATH_MAX];
  snprintf(path, len, "%s", realpath(info.dli_fname, real) ? real : info.dli_fname);
  for (char *c = path; *c; c++) /* printed inside a JSON string */
    if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = '?';
  *simulated = dlsym(h, "simcuda_access") != NULL;
  dlclose(h);
  return 0;
}

/* --sim: the simulated driver of the build tree vx runs from, put first
 * on the children's LD_LIBRARY_PATH; its file into lib (PATH_MAX). */
static int use_simulator(char *lib) {
  char dir[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
  if (n <= 0) return -ENOENT;
  dir[n] = 0;
  char *slash = strrchr(dir, '/');
  if (!slash || (size_t)(slash - dir) + sizeof "/tests/simcuda/libcuda.so.1" > PATH_MAX)
    return -ENAMETOOLONG;
  strcpy(slash, "/tests/simcuda");
  strcpy(lib, dir); /* fits: checked above */
  strcat(lib, "/libcuda.so.1");
  if (access(lib, R_OK)) return -ENOENT;
  const char *ld = getenv("LD_LIBRARY_PATH");
  size_t need = strlen(dir) + 2 + (ld ? strlen(ld) : 0);
  char *value = malloc(need);
  if (!value) return -ENOMEM;
  snprintf(value, need, "%s%s%s", dir, ld && *ld ? ":" : "", ld ? ld : "");
  int rc = setenv("LD_LIBRARY_PATH", value, 1) ? -errno : 0;
  free(value);
  return rc;
}

/* Runs `exe bench hooks --child --iters N` with LD_PRELOAD = preload (NULL =
 * unset) and reads "launch alloc" from it.  Returns 0 or -1. */
static int run_child(const char *exe, int iters, const char *preload, double out[4]) {
  int fds[2];
  if (pipe(fds)) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    char n[32];
    snprintf(n, sizeof n, "%d", iters);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    if (preload)
      setenv("LD_PRELOAD", preload, 1);
    else
      unsetenv("LD_PRELOAD");
    setenv("VX_STATS", "0", 1);
    execl(exe, exe, "bench", "hooks", "--child", "--iters", n, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[128] = "";
  FILE *f = fdopen(fds[0], "r");
  int got = f && fgets(buf, sizeof buf, f) &&
            sscanf(buf, "%lf %lf %lf %lf", &out[0], &out[1], &out[2], &out[3]) == 4;
  if (f) fclose(f);
  int status;
  waitpid(pid, &status, 0);
  return got && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static const char hooks_usage[] =
    "usage: vx bench hooks [--iters N] [--sim]\n"
    "Times a kernel launch (8 pointer arguments into tracked allocations,\n"
    "nothing to move) and a cuMemAlloc/cuMemFree pair, without and with\n"
    "libvx.so, on the driver the dynamic linker finds for libcuda.so.1;\n"
    "--sim: on the simulated driver of the build tree vx runs from.\n"
    "Prints one JSON object (nanoseconds; driver: the library measured).\n";

int vx_bench_hooks(int argc, char **argv) {
  int iters = 200000, child = 0, want_sim = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--child"))
      child = 1;
    else if (!strcmp(argv[i], "--sim"))
      want_sim = 1;
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc && atoi(argv[i + 1]) > 0)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
      return vx_cli_help(hooks_usage);
    else {
      char msg[300];
      snprintf(msg, sizeof msg, "unexpected '%.200s' (--iters takes a positive number)", argv[i]);
      return vx_cli_usage_error("bench hooks", msg);
    }
  }
  if (child) return bench_child(iters);
  char exe[PATH_MAX], lib[PATH_MAX], sim[PATH_MAX], driver[PATH_MAX], why[512];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return fprintf(stderr, "vx bench hooks: cannot find my own binary\n"), 1;
  exe[n] = 0;
  if (vx_find_libvx(lib, sizeof lib)) {
    fprintf(stderr, "vx bench hooks: libvx.so not found next to vx nor in %s\n",
            vx_install_libdir());
    return 1;
  }
  if (want_sim && use_simulator(sim)) {
    fprintf(stderr, "vx bench hooks: --sim needs the simulated driver of a build tree "
                    "(tests/simcuda next to vx); this vx has none\n");
    return 1;
  }
  int simulated = 0;
  if (find_driver(want_sim ? sim : "libcuda.so.1", driver, sizeof driver, &simulated, why,
                  sizeof why)) {
    fprintf(stderr,
            "vx bench hooks: no CUDA driver (%s); install the NVIDIA driver, or "
            "benchmark the simulator of a build tree with --sim\n",
            why);
    return 1;
  }
  /* Rounds of a plain child and a vx child.  The added cost is measured
   * inside the vx child (its hooks against the driver's own entry points,
   * alternating batches); the cross-process figures are the raw medians. */
  double add_l[ROUNDS], add_a[ROUNDS], plain_l[ROUNDS], plain_a[ROUNDS], vx_l[ROUNDS], vx_a[ROUNDS];
  for (int round = 0; round < ROUNDS; round++) {
    double r[4];
    if (run_child(exe, iters / ROUNDS, NULL, r)) {
      fprintf(stderr, "vx bench: the run without vx failed\n");
      return 1;
    }
    plain_l[round] = r[0], plain_a[round] = r[2];
    if (run_child(exe, iters / ROUNDS, lib, r)) {
      fprintf(stderr, "vx bench: the run with vx failed\n");
      return 1;
    }
    vx_l[round] = r[0], vx_a[round] = r[2];
    add_l[round] = r[0] - r[1], add_a[round] = r[2] - r[3];
  }
  printf("{\"launch_ns_added\":%.1f,\"alloc_free_ns_added\":%.1f,"
         "\"launch_ns_plain\":%.1f,\"launch_ns_vx\":%.1f,"
         "\"alloc_free_ns_plain\":%.1f,\"alloc_free_ns_vx\":%.1f,"
         "\"iters\":%d,\"rounds\":%d,\"pointer_args\":%d,\"driver\":\"%s\",\"simulated\":%s}\n",
         median(add_l, ROUNDS), median(add_a, ROUNDS), median(plain_l, ROUNDS),
         median(vx_l, ROUNDS), median(plain_a, ROUNDS), median(vx_a, ROUNDS), iters, ROUNDS, NARGS,
         driver, simulated ? "true" : "false");
  return 0;
}
