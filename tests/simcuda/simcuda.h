/* simcuda.h: what a test program sees of the simulated CUDA driver.
 * Kernels as host functions, the virtual clock and counters, fault injection. */
#ifndef VX_SIMCUDA_H
#define VX_SIMCUDA_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- kernels ----
 *
 * A module image is ordinary PTX text (what `nvcc -ptx` makes), so the same
 * test program runs on a real GPU.  The simulator reads each `.entry`'s name
 * and parameter list from it (that is what cuFuncGetParamInfo reports) and
 * runs, in place of the device code, the host function registered under the
 * same name.  A test file registers its kernels with SIMCUDA_KERNEL(name);
 * on a real driver the registration finds no simulator and does nothing.
 *
 * A kernel receives the launch's parameter array (as cuLaunchKernel got it)
 * and a context.  It reaches device memory only through simcuda_access():
 * that faults managed chunks in, charges the clock, and refuses what the
 * device cannot reach (freed, plain host, discarded-then-read memory) by
 * returning NULL; the launch then fails with CUDA_ERROR_ILLEGAL_ADDRESS,
 * sticky for the context, as on a real GPU.  A kernel must return as soon
 * as simcuda_access() returns NULL. */

typedef struct simcuda_kctx simcuda_kctx_t;
typedef void (*simcuda_kernel_fn)(void **params, simcuda_kctx_t *k);

enum { SIMCUDA_READ = 1, SIMCUDA_WRITE = 2, SIMCUDA_RW = 3 };

/* Host address through which the kernel may access [dptr, dptr+bytes) in the
 * given mode, or NULL (see above). */
void *simcuda_access(simcuda_kctx_t *k, CUdeviceptr dptr, size_t bytes, int mode);
/* Grid and block dimensions of the launch (x, y, z). */
void simcuda_dims(const simcuda_kctx_t *k, unsigned grid[3], unsigned block[3]);
/* The stream the launch runs on: the handle cuStreamCreate gave, or
 * CU_STREAM_LEGACY / CU_STREAM_PER_THREAD for those streams (however the
 * launch named them).  Kernels that run in order per stream can key
 * out-of-band launch descriptions on it (vx play does). */
CUstream simcuda_kernel_stream(const simcuda_kctx_t *k);
/* Declares how long the kernel computes, in virtual ns: it replaces the
 * launch overhead and the device-bandwidth estimate from the bytes the
 * kernel accessed; fault stalls and bytes read over the link still add.
 * The last call of a launch wins. */
void simcuda_kernel_time(simcuda_kctx_t *k, uint64_t ns);
/* Registers fn as the host body of the PTX entry `name`.  Returns 0. */
int simcuda_register_kernel(const char *name, simcuda_kernel_fn fn);

/* Registration that is a no-op without the simulator (symbol looked up at
 * run time, so test programs link against a real libcuda too). */
#define SIMCUDA_KERNEL(name)                                                   \
  static void simk_##name(void **params, simcuda_kctx_t *k);                   \
  __attribute__((constructor)) static void simk_register_##name(void) {        \
    simcuda_register_kernel_fn_t reg = simcuda_find_register();                \
    if (reg) reg(#name, simk_##name);                                          \
  }                                                                            \
  static void simk_##name(void **params, simcuda_kctx_t *k)

typedef int (*simcuda_register_kernel_fn_t)(const char *, simcuda_kernel_fn);
/* The registration hook SIMCUDA_KERNEL calls.  Defined in tests/kit
 * (kit_sim.c, library vxkit), which test programs that use SIMCUDA_KERNEL
 * link: it remembers the body and forwards it to simcuda_register_kernel of
 * the loaded libcuda.so.1 (found with dlopen(RTLD_NOLOAD) + dlsym), now and
 * again at kit_module(); on a real driver there is nothing to forward to.
 * Kernel bodies should reach memory through kit_access() (kit.h), which
 * finds simcuda_access() the same way. */
simcuda_register_kernel_fn_t simcuda_find_register(void);

/* ---- counters and the virtual clock ----
 * All times in virtual nanoseconds.  SIMCUDA_STATS=1 prints them at exit. */
#define SIMCUDA_COUNTERS(X)                                                    \
  X(faults)                /* managed chunks faulted in by kernels */          \
  X(fault_batches)         /* fault batches serviced */                        \
  X(bytes_fault_htod)      /* bytes migrated to the device by faults */        \
  X(bytes_prefetch_htod)   /* bytes migrated to the device by prefetch */      \
  X(bytes_prefetch_dtoh)   /* bytes migrated to the host by prefetch */        \
  X(bytes_evict_dtoh)      /* bytes migrated to the host by eviction */        \
  X(bytes_link_htod)       /* host memory kernels read over the link */        \
  X(bytes_link_dtoh)       /* host memory kernels wrote over the link */       \
  X(bytes_memcpy_htod)                                                         \
  X(bytes_memcpy_dtoh)                                                         \
  X(bytes_memcpy_dtod)                                                         \
  X(evictions)             /* chunks evicted to make room */                   \
  X(discards)              /* chunks discarded */                              \
  X(launches)                                                                  \
  X(kernel_ns)             /* virtual time spent computing */                  \
  X(stall_ns)              /* virtual time kernels waited for faults */        \
  X(total_ns)              /* virtual time of the whole run so far */          \
  X(host_backing_bytes)    /* host memory now backing managed data */          \
  X(host_backing_peak)                                                         \
  X(device_used_bytes)     /* in use (native + resident + contexts) */         \
  X(device_used_peak)                                                          \
  X(thrash_pins)           /* chunks the thrash logic pinned to host memory */

typedef struct simcuda_stats {
#define SIMCUDA_FIELD(n) uint64_t n;
  SIMCUDA_COUNTERS(SIMCUDA_FIELD)
#undef SIMCUDA_FIELD
} simcuda_stats_t;

/* Counters of device `dev` (ordinal), summed since start or the last reset.
 * Returns 0, or -EINVAL for a bad ordinal. */
int simcuda_get_stats(int dev, simcuda_stats_t *out);
void simcuda_reset_stats(void);
/* Bytes the driver migrated on its own on device dev (faults up, evictions
 * down): what libvx's report calls demand migrations.  0 or -EINVAL. */
int simcuda_demand_migration(int dev, uint64_t *up, uint64_t *down);
/* Residency of the managed chunk holding p: 1 device, 0 host, -1 discarded or
 * never populated, -2 not managed memory. */
int simcuda_chunk_residency(CUdeviceptr p);

/* ---- extras (also in libcuda.so.1) ----
 * For the simulated NVML: capacity and bytes in use (native + resident
 * managed) of device dev; 0 or -EINVAL.  Number of devices. */
int simcuda_nvml_memory(int dev, unsigned long long *total, unsigned long long *used);
int simcuda_device_count(void);
/* Row i of the cuGetProcAddress table: its exported symbol; 0 or -1. */
int simcuda_proc_row(int i, const char **sym);

/* ---- environment ----
 * SIMCUDA_DEVICES=n (1..8, default 1); SIMCUDA_VRAM=size[,size...] (K/M/G,
 * default 1G, one per device, the last repeats); SIMCUDA_LINK_GBPS (25),
 * SIMCUDA_DEV_GBPS (3000), SIMCUDA_FAULT_NS (45000), SIMCUDA_LAUNCH_NS (3000):
 * the defaults are policy/costs.h, the numbers vx replay uses;
 * SIMCUDA_FAIL=entry:N[+][:code],... (code: a CUDA_ERROR_* name or number;
 * default OUT_OF_MEMORY for allocation entry points, UNKNOWN otherwise);
 * SIMCUDA_LOG=procaddr (one stderr line per lookup); SIMCUDA_STATS=1;
 * SIMCUDA_CTX_OVERHEAD=size (VRAM each live context holds, default 0);
 * SIMCUDA_CONCURRENT_MANAGED=0|1 (the attribute, default 1; see README);
 * SIMCUDA_TIMING_ONLY=1 (no data kept: device and managed bytes read as
 * zeros and cannot be written from the host; see README);
 * SIMCUDA_DRIVER_VERSION=12000|12020|12040|12080|13000 (13000: the release
 * imitated; the driver-V/ variants of libcuda.so.1 also hide from dlsym what
 * that release lacks).
 * A bad value makes cuInit fail with CUDA_ERROR_NO_DEVICE, saying why. */

#ifdef __cplusplus
}
#endif
#endif
