/* Device-memory hooks: allocations placed by tiers/place.c (native while
 * they fit, managed beyond), frees routed by what the pointer is. */
#include "place.h"
#include "sites.h"
#include "vx.h"

// ---- the application's own calls, as place_alloc makes them ----

static CUresult native_alloc(CUdeviceptr *dptr, void *ctx) {
  return VX_CALL(cuMemAlloc_v2, dptr, *(size_t *)ctx);
}

struct async_req {
  size_t size;
  CUmemoryPool pool;
  CUstream stream;
  int hook; /* VX_ID_cuMemAllocAsync, ..._ptsz, VX_ID_cuMemAllocFromPoolAsync... */
};

static CUresult native_alloc_async(CUdeviceptr *dptr, void *ctx) {
  struct async_req *q = ctx;
  if (q->pool)
    return vx_hook_ptds(q->hook)
               ? VX_CALL(cuMemAllocFromPoolAsync_ptsz, dptr, q->size, q->pool, q->stream)
               : VX_CALL(cuMemAllocFromPoolAsync, dptr, q->size, q->pool, q->stream);
  return vx_hook_ptds(q->hook) ? VX_CALL(cuMemAllocAsync_ptsz, dptr, q->size, q->stream)
                               : VX_CALL(cuMemAllocAsync, dptr, q->size, q->stream);
}

struct pitch_req {
  size_t *pitch, width, height;
  unsigned elem;
};

static CUresult native_alloc_pitch(CUdeviceptr *dptr, void *ctx) {
  struct pitch_req *q = ctx;
  return VX_CALL(cuMemAllocPitch_v2, dptr, q->pitch, q->width, q->height, q->elem);
}

/* placement, then the allocation's site (VX_SITES=1: the caller's stack) */
static CUresult placed(CUdeviceptr *dptr, size_t size, place_native_fn native, void *ctx) {
  vx_alloc_info_t a;
  CUresult r = place_alloc(dptr, size, native, ctx, &a);
  if (a.size) sites_record(&a);
  return r;
}

static CUresult freed(CUresult r, const vx_alloc_info_t *a) {
  if (a->size) sites_forget(a);
  return r;
}

// ---- hooks ----

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  VX_ENTER(on);
  if (!on) return VX_CALL(cuMemAlloc_v2, dptr, bytesize);
  return placed(dptr, bytesize, native_alloc, &bytesize);
}

/* Pitch the driver would pick for a managed fallback: rows aligned to 512
 * bytes (the texture pitch alignment of current GPUs). */
enum { VX_PITCH_ALIGN = 512 };

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  VX_ENTER(on);
  int valid = pPitch && WidthInBytes && Height &&
              (ElementSizeBytes == 4 || ElementSizeBytes == 8 || ElementSizeBytes == 16);
  if (!on || !valid)
    return VX_CALL(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  size_t pitch = (WidthInBytes + VX_PITCH_ALIGN - 1) / VX_PITCH_ALIGN * VX_PITCH_ALIGN;
  if (Height > SIZE_MAX / pitch)
    return VX_CALL(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  size_t native_pitch = 0;
  struct pitch_req q = {&native_pitch, WidthInBytes, Height, ElementSizeBytes};
  CUresult r = placed(dptr, pitch * Height, native_alloc_pitch, &q);
  if (r == CUDA_SUCCESS) *pPitch = native_pitch ? native_pitch : pitch;
  return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  VX_ENTER(on);
  if (!on) return VX_CALL(cuMemFree_v2, dptr);
  vx_alloc_info_t a;
  CUresult r = place_free(dptr, &a);
  return freed(r, &a);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  VX_ENTER(on);
  if (!on) return VX_CALL(cuMemAllocManaged, dptr, bytesize, flags);
  return place_alloc_app_managed(dptr, bytesize, flags);
}

static CUresult alloc_async(CUdeviceptr *dptr, struct async_req *q) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUstream s = vx_hook_stream(q->hook, q->stream);
  /* Inside a capture the allocation is a graph node, not memory: pass it. */
  if (VX_CALL(cuStreamIsCapturing, s, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE)
    return native_alloc_async(dptr, q);
  return placed(dptr, q->size, native_alloc_async, q);
}

/* The stream-ordered hooks, each made for the plain entry point and its
 * _ptsz variant: hooks.def's stream column tells alloc_async and
 * place_free_async which one was called. */
#define ALLOC_ASYNC_HOOK(name)                                                                     \
  CUresult name(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {                            \
    VX_ENTER(on);                                                                                  \
    if (!on) return VX_CALL(name, dptr, bytesize, hStream);                                        \
    return alloc_async(dptr, &(struct async_req){bytesize, NULL, hStream, VX_ID_##name});          \
  }

ALLOC_ASYNC_HOOK(cuMemAllocAsync)
ALLOC_ASYNC_HOOK(cuMemAllocAsync_ptsz)

#define ALLOC_POOL_HOOK(name)                                                                      \
  CUresult name(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {         \
    VX_ENTER(on);                                                                                  \
    if (!on || !pool) return VX_CALL(name, dptr, bytesize, pool, hStream);                         \
    return alloc_async(dptr, &(struct async_req){bytesize, pool, hStream, VX_ID_##name});          \
  }

ALLOC_POOL_HOOK(cuMemAllocFromPoolAsync)
ALLOC_POOL_HOOK(cuMemAllocFromPoolAsync_ptsz)

#define FREE_ASYNC_HOOK(name)                                                                      \
  static CUresult real_##name(CUdeviceptr p, CUstream s) {                                         \
    return VX_CALL(name, p, s);                                                                    \
  }                                                                                                \
  CUresult name(CUdeviceptr dptr, CUstream hStream) {                                              \
    VX_ENTER(on);                                                                                  \
    if (!on) return VX_CALL(name, dptr, hStream);                                                  \
    vx_alloc_info_t a;                                                                             \
    CUresult r = place_free_async(dptr, hStream, VX_HOOK_PTDS(name), real_##name, &a);             \
    return freed(r, &a);                                                                           \
  }

FREE_ASYNC_HOOK(cuMemFreeAsync)
FREE_ASYNC_HOOK(cuMemFreeAsync_ptsz)

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  VX_ENTER(on);
  (void)on; /* managed and native memory alike: the driver knows them */
  return VX_CALL(cuMemGetAddressRange_v2, pbase, psize, dptr);
}
