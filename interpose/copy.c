/* Copy, set and prefetch hooks: once the NVMe tier can discard contents,
 * every range one of these reads or writes is made resident first. */
#include "capture.h"
#include "ptrref.h"
#include "spill.h"
#include "spill_order.h"
#include "trace.h"
#include "trace_rec.h"
#include "vx.h"

/* While the tier is off (the usual case) a hook is VX_ENTER, one relaxed
 * load, and the real call.  While it is on, the device-side ranges are
 * handed to the spill tier, which stamps them (recency) and restores what
 * is in the swap; a failed restore is the operation's error. */
#define GUARD(count, ...)                                                                          \
  int pinned_ = 0;                                                                                 \
  if (on && __builtin_expect(spill_armed(), 0)) {                                                  \
    CUdeviceptr p_[] = {__VA_ARGS__};                                                              \
    pinned_ = 1;                                                                                   \
    CUresult r_ = guard_ranges(p_, count);                                                         \
    if (r_ != CUDA_SUCCESS) return finish(r_, 1);                                                  \
  }

/* The operation is enqueued (or failed): the ranges it pinned may go. */
static inline CUresult finish(CUresult r, int pinned) {
  if (pinned) spill_op_done();
  return r;
}

/* As finish, for an operation enqueued on stream s: its allocations are
 * marked used by that stream (an event recorded after it), so that a
 * snapshot waits for it alone; the context as a whole would be a
 * synchronisation, which a capture on any thread forbids.  NULL (the
 * legacy or the per-thread stream) and a capture in progress (the event
 * would join it) count the whole context, as the synchronous forms do. */
static inline CUresult finish_on(CUresult r, int pinned, CUstream s) {
  if (!pinned) return r;
  int known = s && !vx_capture_active();
  spill_order_enqueued(known ? s : NULL, r != CUDA_SUCCESS ? SPILL_ORDER_NONE
                                         : known           ? SPILL_ORDER_STREAM
                                                           : SPILL_ORDER_UNKNOWN);
  spill_pins_release();
  return r;
}

/* p[0..count) are addresses, p[count..2count) their lengths. */
static CUresult guard_ranges(const CUdeviceptr *p, int count) {
  size_t n[2];
  for (int i = 0; i < count; i++)
    n[i] = (size_t)p[count + i];
  return spill_make_resident_many(p, n, count, NULL);
}

/* Sync (S) and async (A) forms differ by a trailing stream parameter. */
#define S_PARAMS
#define S_ARGS
#define S_STREAM NULL
#define A_PARAMS , CUstream s
#define A_ARGS , s
#define A_STREAM s

// ---- 1D copies ----

/* A host-to-device copy into a small allocation may store pointers (a
 * batched GEMM's pointer array): once it is enqueued, the words that point
 * into tracked memory become references of that allocation, restored with
 * it by any launch that reaches it (tiers/ptrref.c; what stays unseen is
 * said there). */
static inline CUresult htod_done(CUresult r, int pinned, CUdeviceptr dst, const void *src, size_t n,
                                 CUstream s) {
  if (pinned && r == CUDA_SUCCESS) ptrref_note(dst, src, n);
  return finish_on(r, pinned, s);
}

/* VX_TRACE: the copy as a COPY record (policy/TRACE.md), once enqueued;
 * not while a capture may be on (a captured copy runs in a graph launch). */
static inline CUresult traced(CUresult r, int on, CUdeviceptr d, size_t n, uint32_t dir, CUstream s,
                              int sync) {
  if (on && r == CUDA_SUCCESS && trace_rec_on() && !vx_capture_active())
    trace_rec_copy(d, n, dir, s, sync);
  return r;
}

#define S_SYNC 1
#define A_SYNC 0

#define HTOD(name, K)                                                                              \
  CUresult name(CUdeviceptr dst, const void *src, size_t n K##_PARAMS) {                           \
    VX_ENTER(on);                                                                                  \
    GUARD(1, dst, n);                                                                              \
    CUresult r = traced(VX_CALL(name, dst, src, n K##_ARGS), on, dst, n, POL_COPY_HTOD,            \
                        K##_STREAM, K##_SYNC);                                                     \
    return htod_done(r, pinned_, dst, src, n, K##_STREAM);                                         \
  }
#define DTOH(name, K)                                                                              \
  CUresult name(void *dst, CUdeviceptr src, size_t n K##_PARAMS) {                                 \
    VX_ENTER(on);                                                                                  \
    GUARD(1, src, n);                                                                              \
    CUresult r = traced(VX_CALL(name, dst, src, n K##_ARGS), on, src, n, POL_COPY_DTOH,            \
                        K##_STREAM, K##_SYNC);                                                     \
    return finish_on(r, pinned_, K##_STREAM);                                                      \
  }
#define DTOD(name, K)                                                                              \
  CUresult name(CUdeviceptr dst, CUdeviceptr src, size_t n K##_PARAMS) {                           \
    VX_ENTER(on);                                                                                  \
    GUARD(2, dst, src, n, n);                                                                      \
    return finish_on(VX_CALL(name, dst, src, n K##_ARGS), pinned_, K##_STREAM);                    \
  }
#define PEER(name, K)                                                                              \
  CUresult name(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,                  \
                size_t n K##_PARAMS) {                                                             \
    VX_ENTER(on);                                                                                  \
    GUARD(2, dst, src, n, n);                                                                      \
    return finish_on(VX_CALL(name, dst, dctx, src, sctx, n K##_ARGS), pinned_, K##_STREAM);        \
  }

HTOD(cuMemcpyHtoD_v2, S)
HTOD(cuMemcpyHtoD_v2_ptds, S)
HTOD(cuMemcpyHtoDAsync_v2, A)
HTOD(cuMemcpyHtoDAsync_v2_ptsz, A)
DTOH(cuMemcpyDtoH_v2, S)
DTOH(cuMemcpyDtoH_v2_ptds, S)
DTOH(cuMemcpyDtoHAsync_v2, A)
DTOH(cuMemcpyDtoHAsync_v2_ptsz, A)
DTOD(cuMemcpyDtoD_v2, S)
DTOD(cuMemcpyDtoD_v2_ptds, S)
DTOD(cuMemcpyDtoDAsync_v2, A)
DTOD(cuMemcpyDtoDAsync_v2_ptsz, A)
DTOD(cuMemcpy, S)
DTOD(cuMemcpy_ptds, S)
DTOD(cuMemcpyAsync, A)
DTOD(cuMemcpyAsync_ptsz, A)
PEER(cuMemcpyPeer, S)
PEER(cuMemcpyPeer_ptds, S)
PEER(cuMemcpyPeerAsync, A)
PEER(cuMemcpyPeerAsync_ptsz, A)

// ---- 2D and 3D copies ----

static int device_side(CUmemorytype t) {
  return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED;
}

/* The bytes a pitched copy of rows x height x depth spans from its start. */
static size_t span(size_t x, size_t y, size_t z, size_t pitch, size_t rows_per_slice, size_t width,
                   size_t height, size_t depth, CUdeviceptr *start, CUdeviceptr base) {
  *start = base + (z * rows_per_slice + y) * pitch + x;
  if (!width || !height || !depth) return 0;
  return ((depth - 1) * rows_per_slice + (height - 1)) * pitch + width;
}

static CUresult guard_2d(const CUDA_MEMCPY2D *c) {
  CUdeviceptr p[2];
  size_t n[2];
  int k = 0;
  if (!c) return CUDA_SUCCESS;
  if (device_side(c->srcMemoryType)) {
    n[k] = span(c->srcXInBytes, c->srcY, 0, c->srcPitch, 0, c->WidthInBytes, c->Height, 1, &p[k],
                c->srcDevice);
    k++;
  }
  if (device_side(c->dstMemoryType)) {
    n[k] = span(c->dstXInBytes, c->dstY, 0, c->dstPitch, 0, c->WidthInBytes, c->Height, 1, &p[k],
                c->dstDevice);
    k++;
  }
  return k ? spill_make_resident_many(p, n, k, NULL) : CUDA_SUCCESS;
}

static CUresult guard_3d(const CUDA_MEMCPY3D *c) {
  CUdeviceptr p[2];
  size_t n[2];
  int k = 0;
  if (!c) return CUDA_SUCCESS;
  if (device_side(c->srcMemoryType)) {
    n[k] = span(c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch, c->srcHeight, c->WidthInBytes,
                c->Height, c->Depth, &p[k], c->srcDevice);
    k++;
  }
  if (device_side(c->dstMemoryType)) {
    n[k] = span(c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight, c->WidthInBytes,
                c->Height, c->Depth, &p[k], c->dstDevice);
    k++;
  }
  return k ? spill_make_resident_many(p, n, k, NULL) : CUDA_SUCCESS;
}

#define COPY_ND(name, type, guard, K)                                                              \
  CUresult name(const type *c K##_PARAMS) {                                                        \
    VX_ENTER(on);                                                                                  \
    int pinned_ = on && __builtin_expect(spill_armed(), 0);                                        \
    if (pinned_) {                                                                                 \
      CUresult r = guard(c);                                                                       \
      if (r != CUDA_SUCCESS) return finish(r, 1);                                                  \
    }                                                                                              \
    return finish_on(VX_CALL(name, c K##_ARGS), pinned_, K##_STREAM);                              \
  }

COPY_ND(cuMemcpy2D_v2, CUDA_MEMCPY2D, guard_2d, S)
COPY_ND(cuMemcpy2D_v2_ptds, CUDA_MEMCPY2D, guard_2d, S)
COPY_ND(cuMemcpy2DUnaligned_v2, CUDA_MEMCPY2D, guard_2d, S)
COPY_ND(cuMemcpy2DUnaligned_v2_ptds, CUDA_MEMCPY2D, guard_2d, S)
COPY_ND(cuMemcpy2DAsync_v2, CUDA_MEMCPY2D, guard_2d, A)
COPY_ND(cuMemcpy2DAsync_v2_ptsz, CUDA_MEMCPY2D, guard_2d, A)
COPY_ND(cuMemcpy3D_v2, CUDA_MEMCPY3D, guard_3d, S)
COPY_ND(cuMemcpy3D_v2_ptds, CUDA_MEMCPY3D, guard_3d, S)
COPY_ND(cuMemcpy3DAsync_v2, CUDA_MEMCPY3D, guard_3d, A)
COPY_ND(cuMemcpy3DAsync_v2_ptsz, CUDA_MEMCPY3D, guard_3d, A)

// ---- sets ----

/* A set writes every byte of its range, but a partly covered chunk keeps
 * the rest of its bytes: the range is restored like any other. */
#define SET(name, type, elem, K)                                                                   \
  CUresult name(CUdeviceptr dst, type v, size_t n K##_PARAMS) {                                    \
    VX_ENTER(on);                                                                                  \
    GUARD(1, dst, n *(elem));                                                                      \
    return finish_on(VX_CALL(name, dst, v, n K##_ARGS), pinned_, K##_STREAM);                      \
  }

SET(cuMemsetD8_v2, unsigned char, 1, S)
SET(cuMemsetD8_v2_ptds, unsigned char, 1, S)
SET(cuMemsetD16_v2, unsigned short, 2, S)
SET(cuMemsetD16_v2_ptds, unsigned short, 2, S)
SET(cuMemsetD32_v2, unsigned int, 4, S)
SET(cuMemsetD32_v2_ptds, unsigned int, 4, S)
SET(cuMemsetD8Async, unsigned char, 1, A)
SET(cuMemsetD8Async_ptsz, unsigned char, 1, A)
SET(cuMemsetD16Async, unsigned short, 2, A)
SET(cuMemsetD16Async_ptsz, unsigned short, 2, A)
SET(cuMemsetD32Async, unsigned int, 4, A)
SET(cuMemsetD32Async_ptsz, unsigned int, 4, A)

// ---- prefetches ----

/* An application's prefetch of a spilled range would move discarded pages:
 * the contents are restored first. */
#define PREFETCH(name)                                                                             \
  CUresult name(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream s) {      \
    VX_ENTER(on);                                                                                  \
    GUARD(1, p, n);                                                                                \
    return finish_on(VX_CALL(name, p, n, loc, flags, s), pinned_, s);                              \
  }

PREFETCH(cuMemPrefetchAsync_v2)
PREFETCH(cuMemPrefetchAsync_v2_ptsz)

#define PREFETCH_BATCH(name)                                                                       \
  CUresult name(CUdeviceptr *p, size_t *n, size_t count, CUmemLocation *locs, size_t *loc_idx,     \
                size_t nlocs, unsigned long long flags, CUstream s) {                              \
    VX_ENTER(on);                                                                                  \
    int pinned_ = on && __builtin_expect(spill_armed(), 0) && p && n;                              \
    for (size_t i = 0; pinned_ && i < count; i++) {                                                \
      CUresult r = spill_make_resident(p[i], n[i], s);                                             \
      if (r != CUDA_SUCCESS) return finish(r, 1);                                                  \
    }                                                                                              \
    return finish_on(VX_CALL(name, p, n, count, locs, loc_idx, nlocs, flags, s), pinned_, s);      \
  }

PREFETCH_BATCH(cuMemPrefetchBatchAsync)
PREFETCH_BATCH(cuMemPrefetchBatchAsync_ptsz)
