/* sim_vmm.c: virtual memory management: physical allocations (cuMemCreate,
 * counted as device memory), address reservations, mappings. */
#include <stdlib.h>
#include <sys/mman.h>

#include "sim_internal.h"

#define GRAN SIM_CHUNK

typedef struct vmm_phys {
  int dev;
  size_t size;
  void *backing;
  int maps;
  int released;
} vmm_phys;

typedef struct vmm_resv {
  CUdeviceptr p;
  size_t size;
  struct vmm_resv *next;
} vmm_resv;

static vmm_resv *resvs; /* under sim_lock */

static void phys_free_locked(vmm_phys *h) {
  sim_dev *d = &sim_g.dev[h->dev];
  d->native_bytes -= h->size;
  sim_stat_gauges_locked(d);
  munmap(h->backing, h->size);
  sim_handle_del(SIM_H_VMM, h);
  free(h);
}

void sim_vmm_unmapped_locked(void *owner) {
  vmm_phys *h = owner;
  if (--h->maps == 0 && h->released) phys_free_locked(h);
}

SIM_API CUresult cuMemGetAllocationGranularity(size_t *gran, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option) {
  SIM_ENTER_INIT(cuMemGetAllocationGranularity);
  (void)option;
  if (!gran || !prop) return CUDA_ERROR_INVALID_VALUE;
  *gran = GRAN;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags) {
  SIM_ENTER_INIT(cuMemCreate);
  if (!handle || !prop || flags || size == 0 || size % GRAN ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  sim_dev *d = sim_dev_get(prop->location.id);
  if (!d) return CUDA_ERROR_INVALID_DEVICE;
  vmm_phys *h = calloc(1, sizeof *h);
  if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
  h->dev = d->ord;
  h->size = size;
  h->backing = mmap(NULL, size, sim_data_prot(),
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (h->backing == MAP_FAILED) {
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  sim_lock();
  int64_t cost =
      d->native_bytes + d->ctx_bytes + size <= d->capacity ? sim_make_room_locked(d, size) : -1;
  if (cost < 0) {
    sim_unlock();
    munmap(h->backing, size);
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  d->native_bytes += size;
  sim_stat_gauges_locked(d);
  sim_unlock();
  sim_handle_add(SIM_H_VMM, h);
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
  return CUDA_SUCCESS;
}

/* Released now, freed when its last mapping goes (as on the driver). */
SIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  SIM_ENTER_INIT(cuMemRelease);
  vmm_phys *h = (vmm_phys *)(uintptr_t)handle;
  if (!h || !sim_handle_ok(SIM_H_VMM, h)) return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  CUresult r = h->released ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  h->released = 1;
  if (r == CUDA_SUCCESS && h->maps == 0) phys_free_locked(h);
  sim_unlock();
  return r;
}

SIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                     unsigned long long flags) {
  SIM_ENTER_INIT(cuMemAddressReserve);
  (void)addr; /* a hint */
  if (!ptr || size == 0 || size % GRAN || flags || (align & (align - 1)))
    return CUDA_ERROR_INVALID_VALUE;
  vmm_resv *r = calloc(1, sizeof *r);
  if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
  sim_lock();
  r->p = sim_va_alloc_locked(size, align > GRAN ? align : GRAN);
  r->size = size;
  if (r->p) {
    r->next = resvs;
    resvs = r;
  }
  sim_unlock();
  if (!r->p) {
    free(r);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ptr = r->p;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  SIM_ENTER_INIT(cuMemAddressFree);
  sim_lock();
  vmm_resv **pp = &resvs;
  while (*pp && !((*pp)->p == ptr && (*pp)->size == size)) pp = &(*pp)->next;
  vmm_resv *r = *pp;
  if (r) {
    *pp = r->next;
    sim_va_free_locked(ptr, size);
  }
  sim_unlock();
  free(r);
  return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int reserved_locked(CUdeviceptr p, size_t size) {
  for (vmm_resv *r = resvs; r; r = r->next)
    if (p >= r->p && p + size <= r->p + r->size) return 1;
  return 0;
}

SIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags) {
  SIM_ENTER_INIT(cuMemMap);
  vmm_phys *h = (vmm_phys *)(uintptr_t)handle;
  if (!h || !sim_handle_ok(SIM_H_VMM, h)) return CUDA_ERROR_INVALID_HANDLE;
  if (flags || size == 0 || size % GRAN || offset % GRAN || offset + size > h->size)
    return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c = NULL;
  if (sim_ctx_current(&c) != CUDA_SUCCESS) c = NULL;
  sim_alloc *a = calloc(1, sizeof *a);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  a->kind = SIM_VMM;
  a->base = ptr;
  a->size = a->span = size;
  a->dev = h->dev;
  a->ctx = c;
  a->backing = (char *)h->backing + offset;
  a->owner = h;
  sim_lock();
  int ok = !h->released && reserved_locked(ptr, size) && !sim_map_find_locked(ptr) &&
           !sim_map_find_locked(ptr + size - 1) && sim_map_insert_locked(a) == 0;
  if (ok) h->maps++;
  sim_unlock();
  if (!ok) free(a);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  SIM_ENTER_INIT(cuMemUnmap);
  sim_lock();
  sim_alloc *a = sim_map_find_base_locked(ptr);
  int ok = a && a->kind == SIM_VMM && a->size == size;
  if (ok) {
    sim_map_remove_locked(a);
    sim_alloc_destroy_locked(a);
  }
  sim_unlock();
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                size_t count) {
  SIM_ENTER_INIT(cuMemSetAccess);
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  sim_alloc *a = sim_map_find_locked(ptr);
  int ok = a && a->kind == SIM_VMM && (size_t)(ptr - a->base) + size <= a->size;
  sim_unlock();
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
