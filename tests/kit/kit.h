/* kit.h: helpers for driver-API test programs that run unchanged on the
 * simulated driver and on a real GPU, with or without LD_PRELOAD=libvx.so.
 *
 * The API below is stable, additions only.  Example: tests/kit/oversub.c
 * (vx_oversub).
 * Own kernels: declare the entry in your PTX, register a host body with
 * SIMCUDA_KERNEL(name) { ... kit_access(k, ptr, bytes, SIMCUDA_READ) ... }.
 *
 * Link with the CMake target `vxkit` (it brings libcuda.so.1 by SONAME and
 * no RPATH, so LD_LIBRARY_PATH decides: the simulator in tests, the real
 * driver elsewhere).  Everything here calls documented driver API only,
 * through the table kit_cu, which kit_bind() fills in one of three lookup
 * styles: linked symbols, dlopen+dlsym, or cuGetProcAddress_v2 (version and
 * per-thread-stream flag chosen by the caller).  Simulator-only extras
 * (counters) are found with dlsym and report -ENOSYS on a real driver.
 *
 * Kernels (tests/kit/kernels.cu, PTX embedded; simulator bodies in
 * kernels_sim.c, same hash, bit-identical results):
 *   fill_u32(uint32_t *p, size_t n, uint32_t seed)        p[i] = kit_hash(seed, i)
 *   check_u32(const uint32_t *p, size_t n, uint32_t seed, unsigned long long *bad)
 *                                                          *bad += mismatches
 *   add_u32(uint32_t *dst, const uint32_t *a, const uint32_t *b, size_t n)
 *   scale_f32(float *p, size_t n, float s)
 *   axpy_f32(float *y, const float *x, float a, size_t n)  y = a*x + y
 *   touch8(uchar *p0, const uchar *p1..p7, size_t n)      reads n bytes of each
 *                              non-null pointer; p0[0] = sum of first bytes */
#ifndef VX_KIT_H
#define VX_KIT_H

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kit_hash.h"
#include "simcuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the entry-point table ---- */
typedef struct kit_api {
#define KIT_CU(sym, base, ver) __typeof__(&sym) sym;
#include "kit_api.def"
#undef KIT_CU
} kit_api_t;

extern kit_api_t kit_cu;

enum kit_lookup {
  KIT_LINKED = 0,   /* the program's own link-time symbols (the default) */
  KIT_DLSYM = 1,    /* dlopen("libcuda.so.1") + dlsym(exact symbol) */
  KIT_PROCADDR = 2, /* cuGetProcAddress_v2(base name, version, flags) */
};

/* Fills kit_cu.  version/flags only matter for KIT_PROCADDR (each entry is
 * asked for at max(version, the version its variant appeared in); flags is
 * CU_GET_PROC_ADDRESS_DEFAULT or _PER_THREAD_DEFAULT_STREAM).  Returns 0, or
 * -ENOENT (naming the missing symbol on stderr).  Called implicitly with
 * KIT_LINKED by kit_init() when nothing was bound. */
int kit_bind(int style, int version, unsigned long long flags);
/* Parses "linked", "dlsym", "procaddr:12000" or "procaddr:13000:ptds" and
 * binds; returns 0 or -EINVAL/-ENOENT. */
int kit_bind_spec(const char *spec);

/* ---- errors ---- */
/* Prints "file:line: call: CUDA_ERROR_NAME" on stderr. */
void kit_report(const char *file, int line, const char *what, CUresult r);
/* On failure: report, then exit(2) (test programs: 2 = CUDA error). */
#define CHECK_CU(call)                                                         \
  do {                                                                         \
    CUresult kit_r_ = (call);                                                  \
    if (kit_r_ != CUDA_SUCCESS) {                                              \
      kit_report(__FILE__, __LINE__, #call, kit_r_);                           \
      exit(2);                                                                 \
    }                                                                          \
  } while (0)
/* On failure: report, then return the CUresult from the enclosing function. */
#define CHECK_CU_RET(call)                                                     \
  do {                                                                         \
    CUresult kit_r_ = (call);                                                  \
    if (kit_r_ != CUDA_SUCCESS) {                                              \
      kit_report(__FILE__, __LINE__, #call, kit_r_);                           \
      return kit_r_;                                                           \
    }                                                                          \
  } while (0)
/* cuGetErrorName through kit_cu, "CUDA_ERROR_?" when unknown. */
const char *kit_err_name(CUresult r);

/* ---- set-up ---- */
/* cuInit, retain device dev's primary context, make it current. */
CUresult kit_init(int dev, CUcontext *ctx);
/* Loads the embedded PTX (registering the simulator bodies first). */
CUresult kit_module(CUmodule *m);
/* Loads the embedded PTX as a context-less library (cuLibraryLoadData), as
 * libcudart 13 does; from then on kit_fn (and every launch helper) hands
 * out its CUkernels cast to CUfunction, never calling cuKernelGetFunction. */
CUresult kit_library(CUlibrary *lib);
/* Function `name` of the module kit_module loaded last (or the CUkernel of
 * the library kit_library loaded last); NULL (reported). */
CUfunction kit_fn(const char *name);
/* The embedded PTX text. */
extern const char kit_kernels_ptx[];

/* ---- launch helpers (grid-stride: any n) ---- */
CUresult kit_fill(CUdeviceptr p, size_t n_u32, uint32_t seed, CUstream s);
/* Launches check_u32 and waits; *bad = number of mismatching words. */
CUresult kit_check(CUdeviceptr p, size_t n_u32, uint32_t seed, CUstream s,
                   unsigned long long *bad);
CUresult kit_add(CUdeviceptr dst, CUdeviceptr a, CUdeviceptr b, size_t n_u32, CUstream s);
CUresult kit_axpy(CUdeviceptr y, CUdeviceptr x, float a, size_t n, CUstream s);
CUresult kit_scale(CUdeviceptr p, size_t n, float s, CUstream st);
/* touch8 with up to 8 pointers (unused ones 0); p[0] must be non-null. */
CUresult kit_touch8(const CUdeviceptr p[8], size_t n, CUstream s);
/* Host-side verification of a fill pattern; returns mismatching words. */
size_t kit_verify_host(const uint32_t *p, size_t n_u32, uint32_t seed, size_t first_index);
/* Device memory p (n_u32 words) read back into host (room for them) and
 * checked against seed's pattern: mismatching words, all of them when the
 * read fails (said on stdout). */
size_t kit_verify_dev(CUdeviceptr p, size_t n_u32, uint32_t seed, uint32_t *host);

/* ---- simulator extras (dlsym; -ENOSYS on a real driver) ---- */
int kit_is_sim(void);
int kit_sim_stats(int dev, simcuda_stats_t *st);
int kit_sim_reset_stats(void);
/* simcuda_chunk_residency(p), or -ENOSYS. */
int kit_sim_residency(CUdeviceptr p);
/* Prints the counters of dev as "sim: name=value ..." on one line. */
int kit_sim_print_stats(FILE *out, int dev);

/* For SIMCUDA_KERNEL bodies written outside the simulator: simcuda_access()
 * and simcuda_dims() found at run time. */
void *kit_access(simcuda_kctx_t *k, CUdeviceptr p, size_t bytes, int mode);

#ifdef __cplusplus
}
#endif
#endif
