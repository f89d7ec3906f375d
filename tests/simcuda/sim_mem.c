/* sim_mem.c: device and pinned host memory: cuMemAlloc*, frees, memory info,
 * address ranges, pointer attributes, host allocation and registration. */
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_internal.h"

#define FREE_PENDING 0x80000000u

static unsigned long long next_buffer_id = 1;

size_t sim_native_round(size_t n) {
  if (n >= SIM_CHUNK) return (n + SIM_CHUNK - 1) & ~(SIM_CHUNK - 1);
  return (n + 255) & ~(size_t)255;
}

static size_t page_round(size_t n) { return (n + 4095) & ~(size_t)4095; }

static sim_alloc *alloc_new(int kind, sim_ctx *c, size_t size) {
  sim_alloc *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->kind = kind;
  a->ctx = c;
  a->dev = c ? c->dev : 0;
  a->size = size;
  a->id = __atomic_fetch_add(&next_buffer_id, 1, __ATOMIC_RELAXED);
  return a;
}

int64_t sim_make_room_locked(sim_dev *d, size_t need) {
  int64_t cost = 0;
  while (d->capacity - sim_dev_used_locked(d) < need) {
    sim_chunk *c = d->lru_head;
    if (!c) return -1;
    size_t cb = sim_chunk_bytes(c);
    if (!c->dup) {
      d->st.bytes_evict_dtoh += cb;
      cost += (int64_t)sim_ns_for_bytes(cb, sim_g.link_gbps);
    }
    d->st.evictions++;
    sim_chunk_to_host_locked(c);
    c->evicted = 1; /* a fault back in is thrash (sim_managed.c) */
  }
  return cost;
}

void sim_alloc_destroy_locked(sim_alloc *a) {
  sim_dev *d = &sim_g.dev[a->dev];
  switch (a->kind) {
  case SIM_NATIVE:
    if (a->flags & SIM_AF_IPC_SHARED) sim_ipc_forget_locked(a);
    if (a->flags & SIM_AF_POOL) sim_pool_freed_locked(a->owner, a->span);
    d->native_bytes -= a->span;
    munmap(a->backing, page_round(a->span));
    sim_va_free_locked(a->base, a->span);
    break;
  case SIM_MANAGED:
    for (size_t i = 0; i < a->nchunks; i++) sim_chunk_drop_locked(&a->chunks[i]);
    free(a->chunks);
    sim_va_free_locked(a->base, a->span);
    break;
  case SIM_HOST_PINNED:
    munmap(a->backing, page_round(a->size));
    break;
  case SIM_VMM:
    sim_vmm_unmapped_locked(a->owner);
    break;
  default:
    break;
  }
  sim_stat_gauges_locked(d);
  free(a);
}

/* cuMemAlloc*: native memory when native + size fits the capacity, making
 * room by evicting managed chunks (charged on the D2H engine). */
static CUresult native_alloc(CUdeviceptr *dptr, size_t size, sim_ctx *c) {
  if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t span = sim_native_round(size);
  sim_alloc *a = alloc_new(SIM_NATIVE, c, size);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  a->span = span;
  a->backing = mmap(NULL, page_round(span), sim_data_prot(),
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (a->backing == MAP_FAILED) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  sim_lock();
  sim_dev *d = &sim_g.dev[c->dev];
  int64_t cost = d->native_bytes + d->ctx_bytes + span <= d->capacity ? sim_make_room_locked(d, span)
                                                                       : -1;
  a->base = cost >= 0 ? sim_va_alloc_locked(span, span >= SIM_CHUNK ? SIM_CHUNK : 256) : 0;
  if (!a->base || sim_map_insert_locked(a) != 0) {
    if (a->base) sim_va_free_locked(a->base, span);
    sim_unlock();
    munmap(a->backing, page_round(span));
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (cost > 0) {
    sim_note_end_locked(d, sim_eng_run(&d->d2h, d->host_now, (uint64_t)cost));
  }
  d->native_bytes += span;
  sim_stat_gauges_locked(d);
  sim_unlock();
  /* SIMCUDA_ALLOC_PAUSE_US: the memory is the device's from here, and the
   * call has not returned yet (a real driver's allocation maps pages and
   * takes the context's lock: it takes real time, and other threads run
   * meanwhile).  A test widens that window with it. */
  if (sim_g.alloc_pause_us) usleep(sim_g.alloc_pause_us);
  *dptr = a->base;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  SIM_ENTER_INIT(cuMemAlloc_v2);
  sim_ctx *c;
  CUresult r = sim_capture_check_unsafe();
  if (r == CUDA_SUCCESS) r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  return native_alloc(dptr, bytesize, c);
}

/* The 32-bit v1 entry point: the simulator's addresses do not fit in 32 bits,
 * so it can only report that no such memory is left. */
SIM_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
  SIM_ENTER_INIT(cuMemAlloc);
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult pitch_alloc(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned el) {
  if (!dptr || !pitch || w == 0 || h == 0 || (el != 4 && el != 8 && el != 16))
    return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_capture_check_unsafe();
  if (r == CUDA_SUCCESS) r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  size_t p = (w + 511) & ~(size_t)511;
  r = native_alloc(dptr, p * h, c);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}

SIM_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes) {
  SIM_ENTER_INIT(cuMemAllocPitch_v2);
  return pitch_alloc(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

static CUresult mem_free(CUdeviceptr dptr) {
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  /* It waits for the device, as cudaFree does: a synchronisation of the
   * context (stricter than the driver in relaxed mode: see README). */
  r = sim_capture_check_ctx(c);
  if (r != CUDA_SUCCESS) return r;
  sim_ctx_sync(c);
  sim_lock();
  sim_alloc *a = sim_map_find_base_locked((uintptr_t)dptr);
  if (!a || (a->kind != SIM_NATIVE && a->kind != SIM_MANAGED) ||
      (a->flags & (FREE_PENDING | SIM_AF_IPC_OPEN))) { /* IPC: cuIpcCloseMemHandle */
    sim_unlock();
    return CUDA_ERROR_INVALID_VALUE;
  }
  sim_map_remove_locked(a);
  sim_alloc_destroy_locked(a);
  sim_unlock();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  SIM_ENTER_INIT(cuMemFree_v2);
  return mem_free(dptr);
}

SIM_API CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  SIM_ENTER_INIT(cuMemFree);
  return mem_free((CUdeviceptr)dptr);
}

static CUresult mem_info(size_t *free_b, size_t *total) {
  if (!free_b || !total) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  sim_lock();
  sim_dev *d = &sim_g.dev[c->dev];
  *free_b = d->capacity - sim_dev_used_locked(d);
  *total = d->capacity;
  sim_unlock();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) {
  SIM_ENTER_INIT(cuMemGetInfo_v2);
  return mem_info(free_b, total);
}

SIM_API CUresult cuMemGetInfo(unsigned int *free_b, unsigned int *total) {
  SIM_ENTER_INIT(cuMemGetInfo);
  size_t f, t;
  if (!free_b || !total) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = mem_info(&f, &t);
  if (r == CUDA_SUCCESS) {
    *free_b = f > 0xffffffffu ? 0xffffffffu : (unsigned)f;
    *total = t > 0xffffffffu ? 0xffffffffu : (unsigned)t;
  }
  return r;
}

SIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  SIM_ENTER_INIT(cuMemGetAddressRange_v2);
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)dptr);
  if (!a || (a->kind != SIM_NATIVE && a->kind != SIM_MANAGED && a->kind != SIM_VMM)) {
    sim_unlock();
    return CUDA_ERROR_NOT_FOUND;
  }
  if (pbase) *pbase = a->base;
  if (psize) *psize = a->size;
  sim_unlock();
  return CUDA_SUCCESS;
}

// ---- stream-ordered allocation ----

/* From pool h (NULL: the device's current pool, sim_pool.c), which must be
 * the stream's device's; the block is counted in the pool until freed. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream h, int ptds,
                            CUmemoryPool pool) {
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  sim_lock();
  void *p = sim_pool_for_alloc_locked(s->ctx->dev, pool, &r);
  sim_unlock();
  if (r != CUDA_SUCCESS) return r;
  if (pool && sim_pool_dev(pool) != s->ctx->dev) return CUDA_ERROR_INVALID_VALUE;
  r = native_alloc(dptr, size, s->ctx);
  if (r != CUDA_SUCCESS) return r;
  sim_lock();
  sim_alloc *a = sim_map_find_base_locked((uintptr_t)*dptr);
  if (a) {
    a->flags |= SIM_AF_POOL;
    a->owner = p;
    sim_pool_allocated_locked(p, a->span);
  }
  sim_unlock();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  SIM_ENTER_INIT(cuMemAllocAsync);
  return alloc_async(dptr, bytesize, hStream, 0, NULL);
}

SIM_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  SIM_ENTER_INIT(cuMemAllocAsync_ptsz);
  return alloc_async(dptr, bytesize, hStream, 1, NULL);
}

SIM_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream) {
  SIM_ENTER_INIT(cuMemAllocFromPoolAsync);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dptr, bytesize, hStream, 0, pool);
}

SIM_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                              CUmemoryPool pool, CUstream hStream) {
  SIM_ENTER_INIT(cuMemAllocFromPoolAsync_ptsz);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dptr, bytesize, hStream, 1, pool);
}

/* Runs on the stream's worker when the free's turn comes. */
void sim_free_now(CUdeviceptr p) {
  sim_lock();
  sim_alloc *a = sim_map_find_base_locked((uintptr_t)p);
  if (a && (a->flags & FREE_PENDING)) {
    sim_map_remove_locked(a);
    sim_alloc_destroy_locked(a);
  }
  sim_unlock();
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, int ptds) {
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  sim_lock();
  sim_alloc *a = sim_map_find_base_locked((uintptr_t)dptr);
  if (!a || a->kind != SIM_NATIVE || (a->flags & (FREE_PENDING | SIM_AF_IPC_OPEN))) {
    sim_unlock();
    return CUDA_ERROR_INVALID_VALUE; /* managed memory is refused, as on the driver */
  }
  a->flags |= FREE_PENDING;
  sim_unlock();
  sim_op *op = sim_op_new(OP_FREE);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.fr.p = dptr;
  return sim_enqueue(s, op);
}

SIM_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  SIM_ENTER_INIT(cuMemFreeAsync);
  return free_async(dptr, hStream, 0);
}

SIM_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  SIM_ENTER_INIT(cuMemFreeAsync_ptsz);
  return free_async(dptr, hStream, 1);
}

// ---- pinned and registered host memory ----

static CUresult host_alloc(void **pp, size_t size, unsigned flags) {
  if (!pp || size == 0) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  sim_alloc *a = alloc_new(SIM_HOST_PINNED, c, size);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  a->backing = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (a->backing == MAP_FAILED) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->base = (CUdeviceptr)(uintptr_t)a->backing;
  a->span = size;
  a->flags = flags;
  sim_lock();
  int err = sim_map_insert_locked(a);
  sim_unlock();
  if (err) {
    munmap(a->backing, page_round(size));
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pp = a->backing;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
  SIM_ENTER_INIT(cuMemAllocHost_v2);
  SIM_CAPTURE_UNSAFE();
  return host_alloc(pp, bytesize, 0);
}

SIM_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  SIM_ENTER_INIT(cuMemHostAlloc);
  SIM_CAPTURE_UNSAFE();
  return host_alloc(pp, bytesize, Flags);
}

static CUresult host_release(void *p, int kind, CUresult bad) {
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  sim_lock();
  sim_alloc *a = sim_map_find_base_locked((uintptr_t)p);
  if (!p || !a || a->kind != kind) {
    sim_unlock();
    return bad;
  }
  sim_map_remove_locked(a);
  sim_alloc_destroy_locked(a);
  sim_unlock();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemFreeHost(void *p) {
  SIM_ENTER_INIT(cuMemFreeHost);
  SIM_CAPTURE_UNSAFE();
  return host_release(p, SIM_HOST_PINNED, CUDA_ERROR_INVALID_VALUE);
}

static CUresult host_register(void *p, size_t bytesize, unsigned int Flags) {
  if (!p || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  sim_alloc *a = alloc_new(SIM_HOST_REG, c, bytesize);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  a->base = (CUdeviceptr)(uintptr_t)p;
  a->backing = p;
  a->span = bytesize;
  a->flags = Flags;
  sim_lock();
  uintptr_t b = (uintptr_t)p;
  int overlap = sim_map_find_locked(b) || sim_map_find_locked(b + bytesize - 1);
  if (overlap || sim_map_insert_locked(a) != 0) {
    sim_unlock();
    free(a);
    return overlap ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED : CUDA_ERROR_OUT_OF_MEMORY;
  }
  sim_unlock();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags) {
  SIM_ENTER_INIT(cuMemHostRegister_v2);
  SIM_CAPTURE_UNSAFE();
  return host_register(p, bytesize, Flags);
}

SIM_API CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags) {
  SIM_ENTER_INIT(cuMemHostRegister);
  SIM_CAPTURE_UNSAFE();
  return host_register(p, bytesize, Flags);
}

SIM_API CUresult cuMemHostUnregister(void *p) {
  SIM_ENTER_INIT(cuMemHostUnregister);
  SIM_CAPTURE_UNSAFE();
  return host_release(p, SIM_HOST_REG, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

SIM_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags) {
  SIM_ENTER_INIT(cuMemHostGetDevicePointer_v2);
  if (!pdptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  int ok = a && (a->kind == SIM_HOST_PINNED || a->kind == SIM_HOST_REG);
  sim_unlock();
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p) {
  SIM_ENTER_INIT(cuMemHostGetFlags);
  if (!pFlags) return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  int ok = a && (a->kind == SIM_HOST_PINNED || a->kind == SIM_HOST_REG);
  if (ok) *pFlags = a->flags;
  sim_unlock();
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- pointer attributes ----

/* Boolean attributes are written as unsigned int, as callers pass them. */
static CUresult ptr_attr_locked(sim_alloc *a, CUpointer_attribute attr, void *data,
                                CUdeviceptr ptr) {
  int host = a->kind == SIM_HOST_PINNED || a->kind == SIM_HOST_REG;
  switch (attr) {
  case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = (CUcontext)a->ctx; break;
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    *(unsigned *)data = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    break;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = ptr; break;
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    if (a->kind == SIM_NATIVE || a->kind == SIM_VMM) return CUDA_ERROR_INVALID_VALUE;
    *(void **)data = (void *)(uintptr_t)ptr;
    break;
  case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(unsigned *)data = 1; break;
  case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = a->id; break;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data = a->kind == SIM_MANAGED; break;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a->dev; break;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = a->base; break;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a->size; break;
  case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned *)data = 1; break;
  case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(void **)data = NULL; break;
  case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    *(unsigned *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
    break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

SIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  SIM_ENTER_INIT(cuPointerGetAttribute);
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)ptr);
  CUresult r = a ? ptr_attr_locked(a, attribute, data, ptr) : CUDA_ERROR_INVALID_VALUE;
  sim_unlock();
  return r;
}

static size_t attr_size(CUpointer_attribute a) {
  switch (a) {
  case CU_POINTER_ATTRIBUTE_CONTEXT: case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
  case CU_POINTER_ATTRIBUTE_HOST_POINTER: case CU_POINTER_ATTRIBUTE_BUFFER_ID:
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
  case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    return 8;
  default: return 4;
  }
}

/* Unlike cuPointerGetAttribute, an unknown pointer is not an error: every
 * attribute gets its zero value. */
SIM_API CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
                                        CUdeviceptr ptr) {
  SIM_ENTER_INIT(cuPointerGetAttributes);
  if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)ptr);
  for (unsigned i = 0; i < n; i++) {
    if (!data[i]) continue;
    if (!a || ptr_attr_locked(a, attrs[i], data[i], ptr) != CUDA_SUCCESS) {
      memset(data[i], 0, attr_size(attrs[i]));
      if (attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) *(int *)data[i] = -2;
    }
  }
  sim_unlock();
  return CUDA_SUCCESS;
}

// ---- context overhead (SIMCUDA_CTX_OVERHEAD) ----

size_t sim_dev_used_locked(const sim_dev *d) {
  return d->native_bytes + d->resident_bytes + d->ctx_bytes;
}

/* A real context holds device memory from creation to destruction (its
 * local-memory pool, printf and malloc heaps, the loaded modules' code):
 * cuMemGetInfo shows it, cuMemAlloc cannot have it. */
int sim_ctx_charge(int dev) {
  sim_dev *d = sim_dev_get(dev);
  size_t n = sim_g.ctx_overhead;
  if (!d || !n) return 0;
  sim_lock();
  int64_t cost = d->native_bytes + d->ctx_bytes + n <= d->capacity ? sim_make_room_locked(d, n) : -1;
  if (cost >= 0) {
    d->ctx_bytes += n;
    sim_stat_gauges_locked(d);
  }
  sim_unlock();
  return cost >= 0 ? 0 : -ENOMEM;
}

void sim_ctx_uncharge(int dev) {
  sim_dev *d = sim_dev_get(dev);
  size_t n = sim_g.ctx_overhead;
  if (!d || !n) return;
  sim_lock();
  d->ctx_bytes -= d->ctx_bytes < n ? d->ctx_bytes : n;
  sim_stat_gauges_locked(d);
  sim_unlock();
}
