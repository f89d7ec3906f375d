/* Launch observation: a launch's parameter values turned into the tracked
 * allocations they point into (the predictor's and the spill tier's input). */
#ifndef VX_TIERS_OBSERVE_H
#define VX_TIERS_OBSERVE_H

#include <cuda.h>
#include <stdint.h>

#include "registry.h"

/* Sizes of the on-stack arrays of the launch path: a launch or graph that
 * reaches more goes to the heap (nothing is capped). */
#define OBS_MAX_VALS 256    /* 8-byte words of one kernel launch kept on the stack */
#define OBS_GRAPH_VALS 1024 /* ... of one graph launch */
#define OBS_MAX_ALLOCS 64   /* distinct allocations an obs_set_t holds inline */

/* The distinct allocations a launch reaches: a[i] with lo[i], the lowest
 * argument pointing into it.  `nonnative` counts those not in native memory
 * (vx's managed, host tier, or the application's managed memory).  Holds
 * OBS_MAX_ALLOCS inline and grows on the heap past them; `oom` is set when
 * it could not grow (the set is then incomplete: the caller falls back).
 * obs_set_init before use, obs_set_fini after (frees what grew); not to be
 * copied (a and lo may point into the struct). */
typedef struct obs_set {
  int n, nonnative, oom, cap;
  CUdeviceptr *lo;
  vx_alloc_info_t *a;
  int *hidx; /* open-addressed index of a by base once past the inline arrays */
  int hcap;
  CUdeviceptr lo0[OBS_MAX_ALLOCS];
  vx_alloc_info_t a0[OBS_MAX_ALLOCS];
} obs_set_t;

void obs_set_init(obs_set_t *s);
void obs_set_fini(obs_set_t *s);

/* The 8-byte words of a launch of f's arguments: from kernelParams with the
 * layout of cuFuncGetParamInfo, or cuKernelGetParamInfo when f is a CUkernel
 * (cached per handle; every parameter of 8 bytes or more, a struct scanned
 * at 8-byte steps: a framework's multi-tensor struct of pointers is one
 * parameter; up to the 32 KiB CUDA 12.1 allows, and more), or, for an
 * `extra` launch, every 8-byte step of the packed buffer up to the size of
 * f's parameter layout (never the size the caller claims: the driver reads
 * the layout's bytes, and a bigger claim would make vx read past the
 * buffer).  Writes at most `cap` values and returns how many there are
 * (more than cap: call again with room for all), or -1 when neither query
 * family gives f's layout (nothing can be read from kernelParams, and an
 * `extra` buffer cannot be bounded: the launch is unseen).  Lock-free;
 * allocates only the first time it sees f. */
int obs_values(CUfunction f, void **params, void **extra, CUdeviceptr *vals, int cap);

/* Stable 64-bit id of f: a hash of its name (cuFuncGetName, or
 * cuKernelGetName for a CUkernel; looked up once per handle), or of the
 * handle when the driver cannot name it. */
uint64_t obs_kernel_id(CUfunction f);

/* Resolves vals[0..n) against the registry and adds the allocations they
 * reach to *s (merging duplicates; s as obs_set_init left it, or holding
 * earlier results).  One registry read lock per 64 values. */
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
