/* The allocation registry: every allocation vx tracks, by base address, and a
 * 2 MiB chunk index so that any interior address finds its allocation in
 * O(1) (a hash probe plus a binary search among the few allocations that
 * share the chunk).  One rwlock; no driver calls under it. */
#ifndef VX_TIERS_REGISTRY_H
#define VX_TIERS_REGISTRY_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#define VX_CHUNK_SHIFT 21 /* 2 MiB */

/* Where an allocation lives. */
enum vx_tier {
  VX_TIER_NATIVE,      /* cuMemAlloc*: device memory, charged to the budget */
  VX_TIER_MANAGED,     /* vx put it in managed memory (over budget) */
  VX_TIER_HOST,        /* managed, advised to stay on the host (static policy) */
  VX_TIER_APP_MANAGED, /* the application's own cuMemAllocManaged */
};

typedef struct vx_alloc_info {
  CUdeviceptr base;
  size_t size;
  int dev;
  int tier;
  uint64_t charged; /* bytes charged to the device budget */
  uint64_t id;      /* vx's id for the policy and traces: unique, never reused (0 = none) */
  uint8_t held;     /* native: its bytes were held in the policy (exec_native_claim) */
} vx_alloc_info_t;

/* Adds an allocation.  Returns 0, -EEXIST if base is already tracked, or
 * -ENOMEM (the allocation then stays untracked). */
int reg_add(const vx_alloc_info_t *a);
/* Removes the allocation starting exactly at base, copying it to *out.
 * Returns 0 or -ENOENT. */
int reg_remove(CUdeviceptr base, vx_alloc_info_t *out);
/* The allocation containing addr (any interior address).  0 or -ENOENT. */
int reg_lookup(CUdeviceptr addr, vx_alloc_info_t *out);
/* The allocations containing each of addrs[0..n) under one read lock (the
 * launch path: a kernel's pointer arguments).  found[i] = 1 and out[i]
 * filled, or found[i] = 0.  Returns how many were found. */
int reg_lookup_many(const CUdeviceptr *addrs, int n, vx_alloc_info_t *out, int *found);
/* Number of allocations tracked. */
size_t reg_count(void);
/* fork: prepare takes the lock, the parent releases it, the child
 * re-creates it. */
void reg_atfork_prepare(void);
void reg_atfork_parent(void);
void reg_atfork_child(void);

#endif
