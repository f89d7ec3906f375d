/* sim_pool.c: memory pools for stream-ordered allocation: each device's
 * default pool and current pool, cuMemPoolCreate/Destroy, attributes,
 * cuMemPoolTrimTo.  cuMemAllocAsync allocates from the stream's device's
 * current pool, cuMemAllocFromPoolAsync from the one named; the pool counts
 * what it has handed out.  A freed block goes straight back to the device
 * (the simulator keeps no cache: reserved == used, trimming has nothing to
 * release), a deliberate difference that can only lower memory use. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define POOL_MAGIC 0x504f4f4cu

typedef struct sim_pool {
  uint32_t magic;
  int dev;
  int is_default, destroyed;
  CUmemPoolProps props;
  int reuse[3]; /* FOLLOW_EVENT_DEPENDENCIES, ALLOW_OPPORTUNISTIC, ALLOW_INTERNAL_DEPENDENCIES */
  cuuint64_t threshold;
  cuuint64_t used, used_high, live; /* bytes, bytes, allocations */
} sim_pool;

static sim_pool defaults[SIM_MAXDEV];
static sim_pool *current[SIM_MAXDEV];

/* Under sim_lock. */
static sim_pool *default_locked(int dev) {
  sim_pool *p = &defaults[dev];
  if (!p->magic) {
    p->magic = POOL_MAGIC;
    p->dev = dev;
    p->is_default = 1;
    p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->props.location = (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    sim_handle_add(SIM_H_POOL, p);
  }
  return p;
}

static sim_pool *pool_get(CUmemoryPool h) {
  if (!h || !sim_handle_ok(SIM_H_POOL, h)) return NULL;
  sim_pool *p = (sim_pool *)h;
  return p->destroyed ? NULL : p;
}

void *sim_pool_for_alloc_locked(int dev, CUmemoryPool h, CUresult *r) {
  *r = CUDA_SUCCESS;
  if (!h) return current[dev] ? current[dev] : default_locked(dev);
  sim_pool *p = pool_get(h);
  if (!p) *r = CUDA_ERROR_INVALID_VALUE;
  return p;
}

void sim_pool_allocated_locked(void *pool, size_t bytes) {
  sim_pool *p = pool;
  p->used += bytes;
  p->live++;
  if (p->used > p->used_high) p->used_high = p->used;
}

/* Pool of a freed allocation; a destroyed pool goes with its last block. */
void sim_pool_freed_locked(void *pool, size_t bytes) {
  sim_pool *p = pool;
  p->used -= bytes < p->used ? bytes : p->used;
  if (p->live) p->live--;
  if (p->destroyed && !p->live) free(p);
}

int sim_pool_dev(CUmemoryPool h) {
  sim_pool *p = pool_get(h);
  return p ? p->dev : -1;
}

// ---- entry points ----

SIM_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceGetDefaultMemPool);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  sim_lock();
  *pool = (CUmemoryPool)default_locked(dev);
  sim_unlock();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceGetMemPool);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  sim_lock();
  *pool = (CUmemoryPool)(current[dev] ? current[dev] : default_locked(dev));
  sim_unlock();
  return CUDA_SUCCESS;
}

/* The pool must belong to the device (cuda.h). */
SIM_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  SIM_ENTER_INIT(cuDeviceSetMemPool);
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  sim_lock();
  sim_pool *p = pool_get(pool);
  CUresult r = p && p->dev == dev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) current[dev] = p;
  sim_unlock();
  return r;
}

/* Pinned device pools only; a handle type the simulator cannot export is
 * CUDA_ERROR_NOT_SUPPORTED, reserved bytes must be zero. */
SIM_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  SIM_ENTER_INIT(cuMemPoolCreate);
  if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->win32SecurityAttributes)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof props->reserved; i++)
    if (props->reserved[i]) return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_get(props->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_NOT_SUPPORTED;
  sim_pool *p = calloc(1, sizeof *p);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  p->magic = POOL_MAGIC;
  p->dev = props->location.id;
  p->props = *props;
  p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
  sim_handle_add(SIM_H_POOL, p);
  *pool = (CUmemoryPool)p;
  return CUDA_SUCCESS;
}

/* A device's default pool cannot be destroyed; a current one hands the
 * device back to its default; blocks still out keep the pool alive until
 * they are freed (cuda.h). */
SIM_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  SIM_ENTER_INIT(cuMemPoolDestroy);
  sim_lock();
  sim_pool *p = pool_get(pool);
  if (!p || p->is_default) {
    sim_unlock();
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (current[p->dev] == p) current[p->dev] = NULL;
  sim_handle_del(SIM_H_POOL, p);
  p->destroyed = 1;
  if (!p->live) free(p);
  sim_unlock();
  return CUDA_SUCCESS;
}

static CUresult attr(sim_pool *p, CUmemPool_attribute a, void *v, int set) {
  switch (a) {
  case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
  case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
  case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
    int *r = &p->reuse[a - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
    if (set)
      *r = *(int *)v != 0;
    else
      *(int *)v = *r;
    return CUDA_SUCCESS;
  }
  case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
    if (set)
      p->threshold = *(cuuint64_t *)v;
    else
      *(cuuint64_t *)v = p->threshold;
    return CUDA_SUCCESS;
  case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
  case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    if (set) return CUDA_ERROR_INVALID_VALUE; /* read-only */
    *(cuuint64_t *)v = p->used;
    return CUDA_SUCCESS;
  case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
  case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    if (set) { /* "It is illegal to set this attribute to a non-zero value." */
      if (*(cuuint64_t *)v) return CUDA_ERROR_INVALID_VALUE;
      p->used_high = p->used;
    } else {
      *(cuuint64_t *)v = p->used_high;
    }
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

static CUresult pool_attr(CUmemoryPool pool, CUmemPool_attribute a, void *v, int set) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  sim_pool *p = pool_get(pool);
  CUresult r = p ? attr(p, a, v, set) : CUDA_ERROR_INVALID_VALUE;
  sim_unlock();
  return r;
}

SIM_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void *v) {
  SIM_ENTER_INIT(cuMemPoolSetAttribute);
  return pool_attr(pool, a, v, 1);
}

SIM_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void *v) {
  SIM_ENTER_INIT(cuMemPoolGetAttribute);
  return pool_attr(pool, a, v, 0);
}

SIM_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  SIM_ENTER_INIT(cuMemPoolTrimTo);
  (void)keep; /* nothing is cached: nothing to release */
  sim_lock();
  CUresult r = pool_get(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  sim_unlock();
  return r;
}
