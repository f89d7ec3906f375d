/* Helpers of the vx end-to-end tests: running a worker (this same binary)
 * with or without libvx.so preloaded, reading the exit report, the driver
 * API reached in one of the three lookup styles, and test kernels. */
#ifndef VX_TESTS_VXT_H
#define VX_TESTS_VXT_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// ---- assertions (test programs: print and exit 1) ----
#define VXT_FAIL(...)                                                                              \
  do {                                                                                             \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                           \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    exit(1);                                                                                       \
  } while (0)
#define VXT_ASSERT(c, ...)                                                                         \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c);                                 \
      fprintf(stderr, " " __VA_ARGS__);                                                            \
      fprintf(stderr, "\n");                                                                       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
/* (With kit.h.) The first failing call of a thread that must not exit: said once on
 * stdout as "who: call: ERROR" and kept in err (a CUresult lvalue). */
#define VXT_FIRST_ERR(err, who, call)                                                              \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS && !(err)) {                                                            \
      printf("%s: %s: %s\n", who, #call, kit_err_name(r_));                                        \
      (err) = r_;                                                                                  \
    }                                                                                              \
  } while (0)
#define VXT_CU(call)                                                                               \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) VXT_FAIL("%s = %d", #call, (int)r_);                                   \
  } while (0)

// ---- running workers ----
typedef struct vxt_run {
  int status;      /* exit code, or 128 + signal */
  char out[65536]; /* stdout */
  char err[16384]; /* stderr */
} vxt_run_t;

/* Runs this program again as `self --worker ARGS...` with the extra
 * environment `env` (NULL-terminated "K=V" list; "K=" unsets K).  with_vx=0
 * removes libvx.so from LD_PRELOAD (keeping a sanitizer runtime).  Returns
 * 0, or -1 if it could not run.  The result is in *r. */
int vxt_run(vxt_run_t *r, int with_vx, const char *const *env, const char *const *args);
/* 1 if LD_PRELOAD names libvx.so (the test was started under PRELOAD). */
int vxt_vx_preloaded(void);
/* The entry point libcuda.so.1 gives dlsym for exactly `name` (vx's hook
 * when it is preloaded); fails the test when there is none. */
void *vxt_entry(const char *name);
/* A fresh temporary path (under $TMPDIR or /tmp) ending in suffix. */
void vxt_tmpname(char *buf, size_t len, const char *suffix);
/* Reads a whole file into a malloc'ed string (NULL on error). */
char *vxt_read_file(const char *path);
/* The value of key in the exit report: top level (dev < 0) or device dev.
 * Fails the test when absent. */
uint64_t vxt_json_u64(const char *json, int dev, const char *key);
/* How many times needle occurs in hay (a line said once, say). */
int vxt_count(const char *hay, const char *needle);
/* The number right after key in the worker's stdout (fails the test when
 * key is absent). */
uint64_t vxt_out_u64(const vxt_run_t *r, const char *key);

// ---- the driver API, reached in one lookup style ----
typedef struct vxt_api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
  CUresult (*cuMemGetInfo)(size_t *, size_t *);
  int ptds; /* per-thread default stream variants were asked for */
} vxt_api_t;

/* style: "linked", "dlsym", or "pa:VERSION[:ptds]" (cuGetProcAddress_v2,
 * itself found by dlsym and then asked for "cuGetProcAddress").  With
 * check_vx, every pointer of a hooked entry must lie in libvx.so and be
 * exactly the variant the real driver would give. */
void vxt_api_load(vxt_api_t *a, const char *style, int check_vx);
/* cuInit, primary context of device dev made current. */
void vxt_ctx(const vxt_api_t *a, int dev);

// ---- kernels (PTX entries run by host bodies on the simulator) ----
/* fill_u32(p, n, seed): p[i] = vxt_pattern(i, seed).  add_u32(p, n, v):
 * p[i] += v.  nop8(a0..a7): touches nothing. */
extern const char vxt_ptx[];
void vxt_register_kernels(void);
static inline uint32_t vxt_pattern(uint64_t i, uint32_t seed) {
  return (uint32_t)(i * 2654435761u) ^ seed ^ (uint32_t)(i >> 32);
}
/* Loads vxt_ptx and returns its functions. */
void vxt_module(const vxt_api_t *a, CUfunction *fill, CUfunction *add, CUfunction *nop8);
/* Size with K/M/G suffix (for SIMCUDA_VRAM); default if unset. */
size_t vxt_env_size(const char *name, size_t def);

#endif
