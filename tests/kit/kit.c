/* kit.c: the kit's entry-point table (three lookup styles), error reporting,
 * set-up and launch helpers for driver-API test programs. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

/* Weak, the entry points newer than CUDA 12.0 in kit_api.def: against an
 * older driver (tests/simcuda/driver-V) one it lacks is NULL in the linked
 * table instead of failing the program's start.  (Not all of them: with
 * only weak references the linker would drop libcuda.so.1 as not needed.) */
#pragma weak cuMemPrefetchAsync_v2
#pragma weak cuMemAdvise_v2
#pragma weak cuEventElapsedTime_v2
#pragma weak cuFuncGetParamInfo
#pragma weak cuLibraryEnumerateKernels

kit_api_t kit_cu;
static int bound;
static CUmodule last_module;
static CUlibrary last_library; /* set by kit_library: kit_fn hands out CUkernels */
static pthread_mutex_t fn_mu = PTHREAD_MUTEX_INITIALIZER;
/* Functions of the last module, looked up once each (cleared on a load). */
static struct {
  char name[32];
  CUfunction f;
} fn_cache[16];

// ---- binding ----

static void bind_linked(void) {
#define KIT_CU(sym, base, ver) kit_cu.sym = &sym;
#include "kit_api.def"
#undef KIT_CU
}

static void *open_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) fprintf(stderr, "kit: dlopen(libcuda.so.1): %s\n", dlerror());
  return h;
}

static int bind_dlsym(void *h) {
  int missing = 0;
#define KIT_CU(sym, base, ver)                                                 \
  *(void **)&kit_cu.sym = dlsym(h, #sym);                                      \
  if (!kit_cu.sym) {                                                           \
    fprintf(stderr, "kit: dlsym(%s) failed\n", #sym);                          \
    missing = 1;                                                               \
  }
#include "kit_api.def"
#undef KIT_CU
  return missing ? -ENOENT : 0;
}

static int bind_procaddr(void *h, int version, unsigned long long flags) {
  __typeof__(&cuGetProcAddress_v2) gpa;
  *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
  if (!gpa) {
    fprintf(stderr, "kit: no cuGetProcAddress_v2 in libcuda.so.1\n");
    return -ENOENT;
  }
  int missing = 0;
  CUdriverProcAddressQueryResult st;
#define KIT_CU(sym, base, ver)                                                 \
  if (gpa(#base, (void **)&kit_cu.sym, version > (ver) ? version : (ver), flags, &st) != \
          CUDA_SUCCESS ||                                                      \
      !kit_cu.sym) {                                                           \
    fprintf(stderr, "kit: cuGetProcAddress_v2(%s, %d) failed (status %d)\n", #base, \
            version > (ver) ? version : (ver), (int)st);                       \
    missing = 1;                                                               \
  }
#include "kit_api.def"
#undef KIT_CU
  return missing ? -ENOENT : 0;
}

int kit_bind(int style, int version, unsigned long long flags) {
  int err = 0;
  if (style == KIT_LINKED) {
    bind_linked();
  } else {
    void *h = open_driver();
    if (!h) return -ENOENT;
    err = style == KIT_DLSYM ? bind_dlsym(h) : bind_procaddr(h, version, flags);
  }
  bound = err == 0;
  return err;
}

int kit_bind_spec(const char *spec) {
  if (!spec || strcmp(spec, "linked") == 0) return kit_bind(KIT_LINKED, 0, 0);
  if (strcmp(spec, "dlsym") == 0) return kit_bind(KIT_DLSYM, 0, 0);
  if (strncmp(spec, "procaddr:", 9) == 0) {
    char *end;
    long v = strtol(spec + 9, &end, 10);
    unsigned long long fl = CU_GET_PROC_ADDRESS_DEFAULT;
    if (strcmp(end, ":ptds") == 0) fl = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    else if (*end) return -EINVAL;
    if (v < 11030) return -EINVAL;
    return kit_bind(KIT_PROCADDR, (int)v, fl);
  }
  return -EINVAL;
}

// ---- errors ----

const char *kit_err_name(CUresult r) {
  const char *s = NULL;
  if (kit_cu.cuGetErrorName && kit_cu.cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  return "CUDA_ERROR_?";
}

void kit_report(const char *file, int line, const char *what, CUresult r) {
  fprintf(stderr, "%s:%d: %s: %s (%d)\n", file, line, what, kit_err_name(r), (int)r);
}

// ---- set-up ----

CUresult kit_init(int dev, CUcontext *ctx) {
  if (!bound) bind_linked(), bound = 1;
  CUdevice d;
  CUcontext c;
  CHECK_CU_RET(kit_cu.cuInit(0));
  CHECK_CU_RET(kit_cu.cuDeviceGet(&d, dev));
  CHECK_CU_RET(kit_cu.cuDevicePrimaryCtxRetain(&c, d));
  CHECK_CU_RET(kit_cu.cuCtxSetCurrent(c));
  if (ctx) *ctx = c;
  return CUDA_SUCCESS;
}

void kit_sim_register_all(void);
void kit_kernels_sim_anchor(void);

CUresult kit_module(CUmodule *m) {
  kit_kernels_sim_anchor();
  kit_sim_register_all();
  CUmodule mod;
  CHECK_CU_RET(kit_cu.cuModuleLoadData(&mod, kit_kernels_ptx));
  pthread_mutex_lock(&fn_mu);
  last_module = mod;
  last_library = NULL;
  memset(fn_cache, 0, sizeof fn_cache);
  pthread_mutex_unlock(&fn_mu);
  if (m) *m = mod;
  return CUDA_SUCCESS;
}

CUresult kit_library(CUlibrary *lib) {
  kit_kernels_sim_anchor();
  kit_sim_register_all();
  CUlibrary l;
  CHECK_CU_RET(kit_cu.cuLibraryLoadData(&l, kit_kernels_ptx, NULL, NULL, 0, NULL, NULL, 0));
  pthread_mutex_lock(&fn_mu);
  last_library = l;
  memset(fn_cache, 0, sizeof fn_cache);
  pthread_mutex_unlock(&fn_mu);
  if (lib) *lib = l;
  return CUDA_SUCCESS;
}

static CUresult lookup(CUfunction *f, const char *name) {
  if (last_library) {
    CUkernel k;
    CUresult r = kit_cu.cuLibraryGetKernel(&k, last_library, name);
    if (r == CUDA_SUCCESS) *f = (CUfunction)k; /* as libcudart 13 launches <<<>>> */
    return r;
  }
  return last_module ? kit_cu.cuModuleGetFunction(f, last_module, name) : CUDA_ERROR_INVALID_HANDLE;
}

CUfunction kit_fn(const char *name) {
  CUfunction f = NULL;
  pthread_mutex_lock(&fn_mu);
  size_t i = 0;
  while (i < 16 && fn_cache[i].f && strcmp(fn_cache[i].name, name) != 0) i++;
  if (i < 16 && fn_cache[i].f) f = fn_cache[i].f;
  CUresult r = f ? CUDA_SUCCESS : lookup(&f, name);
  if (r == CUDA_SUCCESS && i < 16 && !fn_cache[i].f && strlen(name) < sizeof fn_cache[i].name) {
    strcpy(fn_cache[i].name, name);
    fn_cache[i].f = f;
  }
  pthread_mutex_unlock(&fn_mu);
  if (r != CUDA_SUCCESS) {
    kit_report(__FILE__, __LINE__, name, r);
    return NULL;
  }
  return f;
}

// ---- launches ----

static unsigned grid_for(size_t n) {
  size_t g = (n + 255) / 256;
  return g == 0 ? 1 : g > 4096 ? 4096 : (unsigned)g;
}

static CUresult launch(const char *name, size_t n, CUstream s, void **params) {
  CUfunction f = kit_fn(name);
  if (!f) return CUDA_ERROR_NOT_FOUND;
  return kit_cu.cuLaunchKernel(f, grid_for(n), 1, 1, 256, 1, 1, 0, s, params, NULL);
}

CUresult kit_fill(CUdeviceptr p, size_t n, uint32_t seed, CUstream s) {
  void *params[] = {&p, &n, &seed};
  return launch("fill_u32", n, s, params);
}

CUresult kit_check(CUdeviceptr p, size_t n, uint32_t seed, CUstream s, unsigned long long *bad) {
  CUdeviceptr cnt;
  CHECK_CU_RET(kit_cu.cuMemAlloc_v2(&cnt, sizeof(unsigned long long)));
  CUresult r = kit_cu.cuMemsetD32_v2(cnt, 0, 2);
  void *params[] = {&p, &n, &seed, &cnt};
  if (r == CUDA_SUCCESS) r = launch("check_u32", n, s, params);
  if (r == CUDA_SUCCESS) r = kit_cu.cuStreamSynchronize(s);
  if (r == CUDA_SUCCESS) r = kit_cu.cuMemcpyDtoH_v2(bad, cnt, sizeof *bad);
  CUresult r2 = kit_cu.cuMemFree_v2(cnt);
  return r != CUDA_SUCCESS ? r : r2;
}

CUresult kit_add(CUdeviceptr dst, CUdeviceptr a, CUdeviceptr b, size_t n, CUstream s) {
  void *params[] = {&dst, &a, &b, &n};
  return launch("add_u32", n, s, params);
}

CUresult kit_axpy(CUdeviceptr y, CUdeviceptr x, float a, size_t n, CUstream s) {
  void *params[] = {&y, &x, &a, &n};
  return launch("axpy_f32", n, s, params);
}

CUresult kit_scale(CUdeviceptr p, size_t n, float sc, CUstream s) {
  void *params[] = {&p, &n, &sc};
  return launch("scale_f32", n, s, params);
}

CUresult kit_touch8(const CUdeviceptr p[8], size_t n, CUstream s) {
  CUdeviceptr q[8];
  memcpy(q, p, sizeof q);
  void *params[] = {&q[0], &q[1], &q[2], &q[3], &q[4], &q[5], &q[6], &q[7], &n};
  return launch("touch8", n, s, params);
}

size_t kit_verify_host(const uint32_t *p, size_t n, uint32_t seed, size_t first) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += p[i] != kit_hash(seed, first + i);
  return bad;
}

size_t kit_verify_dev(CUdeviceptr p, size_t n, uint32_t seed, uint32_t *host) {
  memset(host, 0, n * sizeof *host);
  CUresult r = kit_cu.cuMemcpyDtoH_v2(host, p, n * sizeof *host);
  if (r != CUDA_SUCCESS) {
    printf("read back: %s\n", kit_err_name(r));
    return n;
  }
  return kit_verify_host(host, n, seed, 0);
}
