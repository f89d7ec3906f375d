/* Helpers of the vx end-to-end tests: workers with and without vx, the
 * exit report, the three lookup styles, and the test kernels. */
#include "vxt.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "simcuda.h"

extern char **environ;

// ---- workers ----

int vxt_vx_preloaded(void) {
  const char *p = getenv("LD_PRELOAD");
  return p && strstr(p, "libvx.so");
}

void vxt_tmpname(char *buf, size_t len, const char *suffix) {
  static int seq;
  const char *dir = getenv("TMPDIR");
  snprintf(buf, len, "%s/vxt-%d-%d%s", dir && *dir ? dir : "/tmp", (int)getpid(), seq++, suffix);
}

char *vxt_read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *s = malloc(cap);
  for (size_t got; s && (got = fread(s + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (cap - n - 1 == 0) {
      char *t = realloc(s, cap *= 2);
      if (!t) {
        free(s);
        s = NULL;
      }
      s = t;
    }
  }
  fclose(f);
  if (s) s[n] = 0;
  return s;
}

/* LD_PRELOAD without its libvx.so entries. */
static void strip_vx(const char *in, char *out, size_t len) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", in);
  out[0] = 0;
  for (char *save, *t = strtok_r(tmp, ": ", &save); t; t = strtok_r(NULL, ": ", &save))
    if (!strstr(t, "libvx.so"))
      snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? ":" : "", t);
}

static void slurp(int fd, char *buf, size_t len) {
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, buf, len - 1);
  buf[n > 0 ? n : 0] = 0;
  close(fd);
}

static int tmp_fd(void) {
  char path[256];
  vxt_tmpname(path, sizeof path, ".out");
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  unlink(path);
  return fd;
}

static void child_env(int with_vx, const char *const *env) {
  const char *pre = getenv("LD_PRELOAD");
  if (pre && !with_vx) {
    char buf[4096];
    strip_vx(pre, buf, sizeof buf);
    if (buf[0])
      setenv("LD_PRELOAD", buf, 1);
    else
      unsetenv("LD_PRELOAD");
  }
  for (int i = 0; env && env[i]; i++) {
    static char kv[16384];
    snprintf(kv, sizeof kv, "%s", env[i]);
    char *eq = strchr(kv, '=');
    if (!eq) continue;
    *eq = 0;
    if (eq[1])
      setenv(kv, eq + 1, 1);
    else
      unsetenv(kv);
  }
}

int vxt_run(vxt_run_t *r, int with_vx, const char *const *env, const char *const *args) {
  int out = tmp_fd(), err = tmp_fd();
  if (out < 0 || err < 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    child_env(with_vx, env);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    const char *argv[64] = {"vxt-worker", "--worker"};
    int n = 2;
    for (int i = 0; args && args[i] && n < 63; i++)
      argv[n++] = args[i];
    argv[n] = NULL;
    execv("/proc/self/exe", (char *const *)argv);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  slurp(out, r->out, sizeof r->out);
  slurp(err, r->err, sizeof r->err);
  return 0;
}

uint64_t vxt_json_u64(const char *json, int dev, const char *key) {
  const char *scope = json;
  if (dev >= 0) {
    char head[64];
    snprintf(head, sizeof head, "{\"device\":%d,", dev);
    scope = strstr(json, head);
    VXT_ASSERT(scope, "device %d missing from report: %.300s", dev, json);
  }
  const char *end = dev >= 0 ? strchr(scope, '}') : scope + strlen(scope);
  char k[128];
  snprintf(k, sizeof k, "\"%s\":", key);
  const char *p = strstr(scope, k);
  VXT_ASSERT(p && p < end, "key %s (device %d) missing from report", key, dev);
  return strtoull(p + strlen(k), NULL, 10);
}

// ---- lookup styles ----

static int in_libvx(const void *p, const char **sname) {
  Dl_info info;
  if (!p || !dladdr(p, &info) || !info.dli_fname) return 0;
  *sname = info.dli_sname ? info.dli_sname : "";
  size_t n = strlen(info.dli_fname);
  return n >= 8 && !strcmp(info.dli_fname + n - 8, "libvx.so");
}

/* hooked: the variant name vx must hand out, or NULL for "not vx's". */
static void check_ptr(const char *what, const void *p, const char *hooked, int check_vx) {
  const char *sname = "";
  VXT_ASSERT(p, "no pointer for %s", what);
  if (!check_vx) return;
  int vx = in_libvx(p, &sname);
  if (hooked) {
    VXT_ASSERT(vx, "%s: not vx's hook", what);
    VXT_ASSERT(!strcmp(sname, hooked), "%s: got hook %s, want %s", what, sname, hooked);
  } else {
    VXT_ASSERT(!vx, "%s: vx handed out %s for an entry it does not hook", what, sname);
  }
}

struct lookup {
  const char *base, *exported;
  size_t off;
  const char *hook, *hook_ptds; /* vx's variant (NULL = not hooked) */
};

#define VXT_L(base, exported, field, hook, hook_ptds)                                              \
  { base, exported, offsetof(vxt_api_t, field), hook, hook_ptds }
static const struct lookup lookups[] = {
    VXT_L("cuInit", "cuInit", cuInit, NULL, NULL),
    VXT_L("cuDeviceGet", "cuDeviceGet", cuDeviceGet, NULL, NULL),
    VXT_L("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, NULL,
          NULL),
    VXT_L("cuCtxSetCurrent", "cuCtxSetCurrent", cuCtxSetCurrent, NULL, NULL),
    VXT_L("cuCtxSynchronize", "cuCtxSynchronize", cuCtxSynchronize, NULL, NULL),
    VXT_L("cuModuleLoadData", "cuModuleLoadData", cuModuleLoadData, NULL, NULL),
    VXT_L("cuModuleGetFunction", "cuModuleGetFunction", cuModuleGetFunction, NULL, NULL),
    VXT_L("cuMemAlloc", "cuMemAlloc_v2", cuMemAlloc, "cuMemAlloc_v2", "cuMemAlloc_v2"),
    VXT_L("cuMemFree", "cuMemFree_v2", cuMemFree, "cuMemFree_v2", "cuMemFree_v2"),
    VXT_L("cuMemcpyHtoD", "cuMemcpyHtoD_v2", cuMemcpyHtoD, NULL, NULL),
    VXT_L("cuMemcpyDtoH", "cuMemcpyDtoH_v2", cuMemcpyDtoH, NULL, NULL),
    VXT_L("cuLaunchKernel", "cuLaunchKernel", cuLaunchKernel, "cuLaunchKernel",
          "cuLaunchKernel_ptsz"),
    VXT_L("cuMemGetInfo", "cuMemGetInfo_v2", cuMemGetInfo, "cuMemGetInfo_v2", "cuMemGetInfo_v2"),
};

static void *linked_ptr(const char *exported) {
  static const struct {
    const char *name;
    void *p;
  } t[] = {{"cuInit", (void *)cuInit},
           {"cuDeviceGet", (void *)cuDeviceGet},
           {"cuDevicePrimaryCtxRetain", (void *)cuDevicePrimaryCtxRetain},
           {"cuCtxSetCurrent", (void *)cuCtxSetCurrent},
           {"cuCtxSynchronize", (void *)cuCtxSynchronize},
           {"cuModuleLoadData", (void *)cuModuleLoadData},
           {"cuModuleGetFunction", (void *)cuModuleGetFunction},
           {"cuMemAlloc_v2", (void *)cuMemAlloc_v2},
           {"cuMemFree_v2", (void *)cuMemFree_v2},
           {"cuMemcpyHtoD_v2", (void *)cuMemcpyHtoD_v2},
           {"cuMemcpyDtoH_v2", (void *)cuMemcpyDtoH_v2},
           {"cuLaunchKernel", (void *)cuLaunchKernel},
           {"cuMemGetInfo_v2", (void *)cuMemGetInfo_v2}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    if (!strcmp(t[i].name, exported)) return t[i].p;
  return NULL;
}

typedef CUresult (*gpa_v2_t)(const char *, void **, int, cuuint64_t,
                             CUdriverProcAddressQueryResult *);

void vxt_api_load(vxt_api_t *a, const char *style, int check_vx) {
  memset(a, 0, sizeof *a);
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  VXT_ASSERT(h, "dlopen libcuda.so.1: %s", dlerror());
  gpa_v2_t gpa = NULL;
  int version = 0;
  cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT;
  if (!strncmp(style, "pa:", 3)) {
    version = atoi(style + 3);
    a->ptds = strstr(style, ":ptds") != NULL;
    flags =
        a->ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    gpa = (gpa_v2_t)dlsym(h, "cuGetProcAddress_v2");
    check_ptr("dlsym cuGetProcAddress_v2", (void *)gpa, "cuGetProcAddress_v2", check_vx);
    /* as libcudart does: ask the lookup for itself, use the answer */
    void *self = NULL;
    CUdriverProcAddressQueryResult st;
    VXT_CU(gpa("cuGetProcAddress", &self, version, flags, &st));
    check_ptr("cuGetProcAddress(cuGetProcAddress)", self, "cuGetProcAddress_v2", check_vx);
    gpa = (gpa_v2_t)self;
  } else {
    VXT_ASSERT(!strcmp(style, "linked") || !strcmp(style, "dlsym"), "unknown style %s", style);
  }
  for (size_t i = 0; i < sizeof lookups / sizeof *lookups; i++) {
    const struct lookup *l = &lookups[i];
    void *p = NULL;
    if (gpa) {
      CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      VXT_CU(gpa(l->base, &p, version, flags, &st));
      VXT_ASSERT(st == CU_GET_PROC_ADDRESS_SUCCESS, "%s status %d", l->base, (int)st);
    } else if (!strcmp(style, "dlsym")) {
      p = dlsym(h, l->exported);
    } else {
      p = linked_ptr(l->exported);
    }
    check_ptr(l->base, p, a->ptds ? l->hook_ptds : l->hook, check_vx);
    memcpy((char *)a + l->off, &p, sizeof p);
  }
}

void vxt_ctx(const vxt_api_t *a, int dev) {
  CUdevice d;
  CUcontext c;
  VXT_CU(a->cuInit(0));
  VXT_CU(a->cuDeviceGet(&d, dev));
  VXT_CU(a->cuDevicePrimaryCtxRetain(&c, d));
  VXT_CU(a->cuCtxSetCurrent(c));
}

// ---- kernels ----

const char vxt_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".visible .entry vxt_fill_u32(.param .u64 p, .param .u64 n, .param .u32 seed)\n{\n  ret;\n}\n\n"
    ".visible .entry vxt_add_u32(.param .u64 p, .param .u64 n, .param .u32 v)\n{\n  ret;\n}\n\n"
    ".visible .entry vxt_nop8(.param .u64 a0, .param .u64 a1, .param .u64 a2, .param .u64 a3,\n"
    "    .param .u64 a4, .param .u64 a5, .param .u64 a6, .param .u64 a7)\n{\n  ret;\n}\n";

static void k_fill(void **params, simcuda_kctx_t *k) {
  CUdeviceptr p = *(CUdeviceptr *)params[0];
  uint64_t n = *(uint64_t *)params[1];
  uint32_t seed = *(uint32_t *)params[2];
  uint32_t *h = simcuda_access(k, p, n * 4, SIMCUDA_WRITE);
  for (uint64_t i = 0; h && i < n; i++)
    h[i] = vxt_pattern(i, seed);
}

static void k_add(void **params, simcuda_kctx_t *k) {
  CUdeviceptr p = *(CUdeviceptr *)params[0];
  uint64_t n = *(uint64_t *)params[1];
  uint32_t v = *(uint32_t *)params[2];
  uint32_t *h = simcuda_access(k, p, n * 4, SIMCUDA_RW);
  for (uint64_t i = 0; h && i < n; i++)
    h[i] += v;
}

static void k_nop(void **params, simcuda_kctx_t *k) {
  (void)params, (void)k;
}

void vxt_register_kernels(void) {
  simcuda_register_kernel("vxt_fill_u32", k_fill);
  simcuda_register_kernel("vxt_add_u32", k_add);
  simcuda_register_kernel("vxt_nop8", k_nop);
}

void vxt_module(const vxt_api_t *a, CUfunction *fill, CUfunction *add, CUfunction *nop8) {
  CUmodule m;
  vxt_register_kernels();
  VXT_CU(a->cuModuleLoadData(&m, vxt_ptx));
  VXT_CU(a->cuModuleGetFunction(fill, m, "vxt_fill_u32"));
  VXT_CU(a->cuModuleGetFunction(add, m, "vxt_add_u32"));
  VXT_CU(a->cuModuleGetFunction(nop8, m, "vxt_nop8"));
}

size_t vxt_env_size(const char *name, size_t def) {
  const char *s = getenv(name);
  if (!s || !*s) return def;
  char *end;
  size_t v = strtoull(s, &end, 10);
  switch (*end) {
  case 'K':
  case 'k':
    return v << 10;
  case 'M':
  case 'm':
    return v << 20;
  case 'G':
  case 'g':
    return v << 30;
  default:
    return v;
  }
}

int vxt_count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

uint64_t vxt_out_u64(const vxt_run_t *r, const char *key) {
  const char *p = strstr(r->out, key);
  VXT_ASSERT(p, "no %s in\n%s", key, r->out);
  return strtoull(p + strlen(key), NULL, 10);
}

void *vxt_entry(const char *name) {
  static void *libcuda;
  if (!libcuda) libcuda = dlopen("libcuda.so.1", RTLD_NOW);
  VXT_ASSERT(libcuda, "libcuda.so.1: %s", dlerror());
  void *p = dlsym(libcuda, name);
  VXT_ASSERT(p, "%s not found", name);
  return p;
}
