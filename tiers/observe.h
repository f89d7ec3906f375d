/* Launch observation: a launch's parameter values turned into the tracked
 * allocations they point into (the predictor's and the spill tier's input). */
#ifndef VX_TIERS_OBSERVE_H
#define VX_TIERS_OBSERVE_H

#include <cuda.h>
#include <stdint.h>

#include "registry.h"

#define OBS_MAX_VALS 256    /* 8-byte words examined per kernel launch (more are ignored) */
#define OBS_GRAPH_VALS 1024 /* ... per graph launch */
#define OBS_MAX_ALLOCS 64   /* distinct allocations one observation holds */

/* The distinct allocations a launch reaches: a[i] with lo[i], the lowest
 * argument pointing into it.  `nonnative` counts those not in native memory
 * (vx's managed, host tier, or the application's managed memory);
 * `overflow` is set when more than OBS_MAX_ALLOCS were reached (the rest
 * are not in the set). */
typedef struct obs_set {
  int n, nonnative, overflow;
  CUdeviceptr lo[OBS_MAX_ALLOCS];
  vx_alloc_info_t a[OBS_MAX_ALLOCS];
} obs_set_t;

/* The 8-byte words of a launch of f's arguments: from kernelParams with the
 * layout of cuFuncGetParamInfo, or cuKernelGetParamInfo when f is a CUkernel
 * (cached per handle; every parameter of 8
 * bytes or more, a struct scanned at 8-byte steps: a framework's
 * multi-tensor struct of pointers is one parameter), or, for an `extra`
 * launch, every 8-byte step of the packed buffer (a conservative scan).
 * Writes at most `cap` values and returns how many, or -1 when neither
 * query family gives f's layout (nothing can be read from kernelParams: the
 * launch is unseen).  Lock-free; allocates only the first time it sees f. */
int obs_values(CUfunction f, void **params, void **extra, CUdeviceptr *vals, int cap);

/* Stable 64-bit id of f: a hash of its name (cuFuncGetName, or
 * cuKernelGetName for a CUkernel; looked up once per handle), or of the
 * handle when the driver cannot name it. */
uint64_t obs_kernel_id(CUfunction f);

/* Resolves vals[0..n) against the registry and adds the allocations they
 * reach to *s (merging duplicates; zero n, nonnative and overflow first).
 * One registry read lock per 64 values. */
void obs_resolve(const CUdeviceptr *vals, int n, obs_set_t *s);

/* The launch hot path's filter: a counting table (one 16-bit counter per
 * hash of a 2 MiB chunk number) of the chunks of live non-native
 * allocations.  obs_mark adds (add = 1) or removes (add = 0) an
 * allocation's chunks: lock-free, called when it appears and when the
 * application frees it.  A saturated counter stays so (false positives
 * only cost the full lookup). */
void obs_mark(CUdeviceptr base, size_t size, int add);
/* 0 when no value can point into a non-native allocation (then the launch
 * reaches native memory only, or nothing vx tracks); 1 when one may.
 * No lock: a load per value. */
int obs_maybe_nonnative(const CUdeviceptr *vals, int n);

/* Name hash used for kernel ids (FNV-1a 64, never 0). */
uint64_t obs_hash_name(const char *name);

#endif
