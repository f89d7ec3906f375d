/* sim_copy_batch.c: the copy and set forms beyond sim_copy.c's: batches
 * (v1 with failIdx, 13.0's v2), 3D batches of pointer operands, peer and 3D
 * peer copies, 2D sets, and 1D CUDA arrays with their AtoD/DtoA/HtoA/AtoH
 * copies.  Every form is built from the same stream ops as sim_copy.c's
 * (OP_COPY/OP_SET), so data, access checks and timing are the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

// ---- shared helpers ----

/* Waits for the current context's work (synchronous array forms). */
static CUresult sim_ctx_sync_current(void) {
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  return r == CUDA_SUCCESS ? sim_ctx_sync(c) : r;
}

/* 0: not simulated device memory (host); 1: device memory in bounds;
 * -1: device memory but [p, p+n) runs past its allocation. */
static int where(CUdeviceptr p, size_t n) {
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  int dev = a && (a->kind == SIM_NATIVE || a->kind == SIM_MANAGED || a->kind == SIM_VMM);
  int in = a && (size_t)(p - a->base) + n <= a->size;
  sim_unlock();
  if (!a) return 0;
  if (!in) return -1;
  return dev;
}

static CUresult enq_copy(sim_stream *s, CUdeviceptr dst, CUdeviceptr src, void *hdst,
                         const void *hsrc, size_t n, int dir) {
  if (!dir) {
    int dd = hdst ? 0 : where(dst, n) > 0, sd = hsrc ? 0 : where(src, n) > 0;
    dir = dd && sd ? CP_DTOD : dd ? CP_HTOD : sd ? CP_DTOH : CP_HTOH;
  }
  return sim_copy_enqueue(s, dir, dst, src, hdst, hsrc, n);
}

/* Batch calls: "Must not be legacy NULL stream" (cuda.h).  In a _ptsz
 * variant NULL is the per-thread stream, which is allowed. */
static CUresult batch_stream(CUstream h, int ptds, sim_stream **s) {
  if (h == CU_STREAM_LEGACY || (!h && !ptds)) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = sim_stream_resolve(h, ptds, s);
  if (r == CUDA_SUCCESS && (*s)->kind == ST_LEGACY) return CUDA_ERROR_INVALID_VALUE;
  return r;
}

// ---- cuMemcpyBatchAsync ----

static CUresult batch_check(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                            CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *bad) {
  *bad = SIZE_MAX;
  if (!d || !s || !n || !count || !a || !ai || !na || na > count || ai[0] != 0)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t k = 0; k < na; k++) {
    if ((k && ai[k] <= ai[k - 1]) || ai[k] >= count) return CUDA_ERROR_INVALID_VALUE;
    if (a[k].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
        a[k].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
      return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; i++)
    if (!n[i] || where(d[i], n[i]) < 0 || where(s[i], n[i]) < 0) {
      *bad = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
  return CUDA_SUCCESS;
}

static CUresult batch(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                      CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail, CUstream h,
                      int ptds) {
  sim_stream *st;
  size_t bad = SIZE_MAX;
  CUresult r = batch_stream(h, ptds, &st);
  if (r == CUDA_SUCCESS) r = batch_check(d, s, n, count, a, ai, na, &bad);
  int during = 0;
  for (size_t k = 0; r == CUDA_SUCCESS && k < na; k++)
    during |= a[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++)
    if ((r = enq_copy(st, d[i], s[i], NULL, NULL, n[i], 0)) != CUDA_SUCCESS) bad = i;
  /* DURING_API_CALL: the sources are read before the call returns. */
  if (r == CUDA_SUCCESS && during) r = sim_stream_sync(st);
  if (fail) *fail = bad;
  return r;
}

SIM_API CUresult cuMemcpyBatchAsync(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                    CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail,
                                    CUstream h) {
  SIM_ENTER_INIT(cuMemcpyBatchAsync);
  return batch(d, s, n, count, a, ai, na, fail, h, 0);
}
SIM_API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                         CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail,
                                         CUstream h) {
  SIM_ENTER_INIT(cuMemcpyBatchAsync_ptsz);
  return batch(d, s, n, count, a, ai, na, fail, h, 1);
}
SIM_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                       CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyBatchAsync_v2);
  return batch(d, s, n, count, a, ai, na, NULL, h, 0);
}
SIM_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                            CUmemcpyAttributes *a, size_t *ai, size_t na,
                                            CUstream h) {
  SIM_ENTER_INIT(cuMemcpyBatchAsync_v2_ptsz);
  return batch(d, s, n, count, a, ai, na, NULL, h, 1);
}

// ---- cuMemcpy3DBatchAsync (pointer operands; element size 1) ----

/* Row (y, z) of an operand: its address, rows tightly packed when 0. */
static CUdeviceptr row_at(const CUmemcpy3DOperand *o, const CUextent3D *e, size_t y, size_t z) {
  size_t rl = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
  size_t lh = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
  return o->op.ptr.ptr + (z * lh + y) * rl;
}

static int operand_ok(const CUmemcpy3DOperand *o, const CUextent3D *e) {
  if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER) return 0; /* arrays: not simulated */
  if (o->op.ptr.rowLength && o->op.ptr.rowLength < e->width) return 0;
  if (o->op.ptr.layerHeight && o->op.ptr.layerHeight < e->height) return 0;
  CUdeviceptr last = row_at(o, e, e->height - 1, e->depth - 1);
  return where(o->op.ptr.ptr, 1) >= 0 && where(last, e->width) >= 0 &&
         where(o->op.ptr.ptr, 1) == where(last, e->width);
}

static CUresult batch_3d(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                         unsigned long long flags, CUstream h, int ptds) {
  sim_stream *st;
  size_t bad = SIZE_MAX;
  CUresult r = batch_stream(h, ptds, &st);
  if (r == CUDA_SUCCESS && (!nops || !ops || flags)) r = CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; r == CUDA_SUCCESS && i < nops; i++) {
    const CUextent3D *e = &ops[i].extent;
    if (!e->width || !e->height || !e->depth || !operand_ok(&ops[i].src, e) ||
        !operand_ok(&ops[i].dst, e) || ops[i].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
        ops[i].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
      bad = i, r = CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; r == CUDA_SUCCESS && i < nops; i++) {
    const CUextent3D *e = &ops[i].extent;
    for (size_t z = 0; r == CUDA_SUCCESS && z < e->depth; z++)
      for (size_t y = 0; r == CUDA_SUCCESS && y < e->height; y++)
        r = enq_copy(st, row_at(&ops[i].dst, e, y, z), row_at(&ops[i].src, e, y, z), NULL, NULL,
                     e->width, 0);
    if (r != CUDA_SUCCESS) bad = i;
  }
  if (fail) *fail = bad;
  return r;
}

SIM_API CUresult cuMemcpy3DBatchAsync(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                                      unsigned long long flags, CUstream h) {
  SIM_ENTER_INIT(cuMemcpy3DBatchAsync);
  return batch_3d(nops, ops, fail, flags, h, 0);
}
SIM_API CUresult cuMemcpy3DBatchAsync_ptsz(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                                           unsigned long long flags, CUstream h) {
  SIM_ENTER_INIT(cuMemcpy3DBatchAsync_ptsz);
  return batch_3d(nops, ops, fail, flags, h, 1);
}
SIM_API CUresult cuMemcpy3DBatchAsync_v2(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops,
                                         unsigned long long flags, CUstream h) {
  SIM_ENTER_INIT(cuMemcpy3DBatchAsync_v2);
  return batch_3d(nops, ops, NULL, flags, h, 0);
}
SIM_API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops,
                                              unsigned long long flags, CUstream h) {
  SIM_ENTER_INIT(cuMemcpy3DBatchAsync_v2_ptsz);
  return batch_3d(nops, ops, NULL, flags, h, 1);
}

// ---- peer copies ----

/* Both contexts must be live; the copy runs on the caller's stream (the
 * driver stages peer copies itself: no peer access is needed, cuda.h). */
static CUresult peer_ctx(CUcontext dc, CUcontext sc) {
  CUresult r = sim_ctx_check((sim_ctx *)dc);
  return r == CUDA_SUCCESS ? sim_ctx_check((sim_ctx *)sc) : r;
}

static CUresult peer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,
                     CUstream h, int ptds, int sync) {
  CUresult r = peer_ctx(dc, sc);
  if (r != CUDA_SUCCESS) return r;
  if (where(dst, n) != 1 || where(src, n) != 1) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  r = sim_stream_resolve(sync ? NULL : h, ptds, &s);
  if (r == CUDA_SUCCESS) r = enq_copy(s, dst, src, NULL, NULL, n, CP_DTOD);
  return r == CUDA_SUCCESS && sync ? sim_stream_sync(s) : r;
}

SIM_API CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  SIM_ENTER_INIT(cuMemcpyPeer);
  return peer(d, dc, s, sc, n, NULL, 0, 1);
}
SIM_API CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                   size_t n) {
  SIM_ENTER_INIT(cuMemcpyPeer_ptds);
  return peer(d, dc, s, sc, n, NULL, 1, 1);
}
SIM_API CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                   size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyPeerAsync);
  return peer(d, dc, s, sc, n, h, 0, 0);
}
SIM_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                        size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyPeerAsync_ptsz);
  return peer(d, dc, s, sc, n, h, 1, 0);
}

/* An operand of a 3D peer copy: host or device memory (arrays are not
 * simulated).  Returns 0 and the row (y, z) start, or -1. */
static int side(CUmemorytype t, CUdeviceptr dev, const void *host, size_t x, size_t y, size_t z,
                size_t pitch, size_t rows, CUdeviceptr *out) {
  CUdeviceptr base = t == CU_MEMORYTYPE_HOST ? (CUdeviceptr)(uintptr_t)host : dev;
  if (t != CU_MEMORYTYPE_HOST && t != CU_MEMORYTYPE_DEVICE && t != CU_MEMORYTYPE_UNIFIED) return -1;
  *out = base + (z * rows + y) * pitch + x;
  return 0;
}

static CUresult peer_3d(const CUDA_MEMCPY3D_PEER *c, CUstream h, int ptds, int sync) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = peer_ctx(c->dstContext, c->srcContext);
  if (r != CUDA_SUCCESS) return r;
  size_t w = c->WidthInBytes, hh = c->Height, dd = c->Depth;
  size_t sp = c->srcPitch ? c->srcPitch : w, dp = c->dstPitch ? c->dstPitch : w;
  size_t sh = c->srcHeight ? c->srcHeight : hh, dh = c->dstHeight ? c->dstHeight : hh;
  if (sp < w || dp < w || sh < hh || dh < hh) return CUDA_ERROR_INVALID_VALUE;
  if (!w || !hh || !dd) return CUDA_SUCCESS;
  CUdeviceptr s0, d0, s1, d1;
  if (side(c->srcMemoryType, c->srcDevice, c->srcHost, c->srcXInBytes, c->srcY, c->srcZ, sp, sh,
           &s0) ||
      side(c->dstMemoryType, c->dstDevice, c->dstHost, c->dstXInBytes, c->dstY, c->dstZ, dp, dh,
           &d0))
    return CUDA_ERROR_INVALID_VALUE;
  /* The last row of each side must lie in the same allocation as the first. */
  s1 = s0 + ((dd - 1) * sh + (hh - 1)) * sp;
  d1 = d0 + ((dd - 1) * dh + (hh - 1)) * dp;
  int ws = where(s0, 1), wd = where(d0, 1);
  if (ws < 0 || wd < 0 || where(s1, w) != ws || where(d1, w) != wd) return CUDA_ERROR_INVALID_VALUE;
  if ((c->srcMemoryType == CU_MEMORYTYPE_DEVICE && ws != 1) ||
      (c->dstMemoryType == CU_MEMORYTYPE_DEVICE && wd != 1))
    return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  r = sim_stream_resolve(sync ? NULL : h, ptds, &s);
  for (size_t z = 0; r == CUDA_SUCCESS && z < dd; z++)
    for (size_t y = 0; r == CUDA_SUCCESS && y < hh; y++)
      r = enq_copy(s, d0 + (z * dh + y) * dp, s0 + (z * sh + y) * sp, NULL, NULL, w, 0);
  return r == CUDA_SUCCESS && sync ? sim_stream_sync(s) : r;
}

SIM_API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *c) {
  SIM_ENTER_INIT(cuMemcpy3DPeer);
  return peer_3d(c, NULL, 0, 1);
}
SIM_API CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *c) {
  SIM_ENTER_INIT(cuMemcpy3DPeer_ptds);
  return peer_3d(c, NULL, 1, 1);
}
SIM_API CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *c, CUstream h) {
  SIM_ENTER_INIT(cuMemcpy3DPeerAsync);
  return peer_3d(c, h, 0, 0);
}
SIM_API CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *c, CUstream h) {
  SIM_ENTER_INIT(cuMemcpy3DPeerAsync_ptsz);
  return peer_3d(c, h, 1, 0);
}

// ---- 2D sets ----

/* Height rows of Width elements, pitch bytes apart; pitch >= the row, and
 * the destination aligned to the element (cuda.h). */
static CUresult set_2d(CUdeviceptr d, size_t pitch, uint32_t v, int el, size_t w, size_t h,
                       CUstream hs, int ptds, int sync) {
  if (d % (CUdeviceptr)el || (h > 1 && pitch < w * (size_t)el)) return CUDA_ERROR_INVALID_VALUE;
  if (!w || !h) return CUDA_SUCCESS;
  if (where(d, 1) != 1 || where(d + (h - 1) * pitch, w * (size_t)el) != 1)
    return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(sync ? NULL : hs, ptds, &s);
  for (size_t y = 0; r == CUDA_SUCCESS && y < h; y++)
    r = sim_set_enqueue(s, d + y * pitch, v, el, w);
  return r == CUDA_SUCCESS && sync ? sim_stream_sync(s) : r;
}

#define SET2D(name, T, EL, PT)                                                                     \
  SIM_API CUresult name(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h) {                    \
    SIM_ENTER_INIT(name);                                                                          \
    return set_2d(d, pitch, v, EL, w, h, NULL, PT, 1);                                             \
  }
#define SET2D_A(name, T, EL, PT)                                                                   \
  SIM_API CUresult name(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream s) {        \
    SIM_ENTER_INIT(name);                                                                          \
    return set_2d(d, pitch, v, EL, w, h, s, PT, 0);                                                \
  }

SET2D(cuMemsetD2D8_v2, unsigned char, 1, 0)
SET2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, 1)
SET2D(cuMemsetD2D16_v2, unsigned short, 2, 0)
SET2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, 1)
SET2D(cuMemsetD2D32_v2, unsigned int, 4, 0)
SET2D(cuMemsetD2D32_v2_ptds, unsigned int, 4, 1)
SET2D_A(cuMemsetD2D8Async, unsigned char, 1, 0)
SET2D_A(cuMemsetD2D8Async_ptsz, unsigned char, 1, 1)
SET2D_A(cuMemsetD2D16Async, unsigned short, 2, 0)
SET2D_A(cuMemsetD2D16Async_ptsz, unsigned short, 2, 1)
SET2D_A(cuMemsetD2D32Async, unsigned int, 4, 0)
SET2D_A(cuMemsetD2D32Async_ptsz, unsigned int, 4, 1)

// ---- CUDA arrays (1D and 2D, linear bytes: no texture layout) ----

#define ARRAY_MAGIC 0x41525259u

typedef struct sim_array {
  uint32_t magic;
  CUDA_ARRAY_DESCRIPTOR desc;
  size_t bytes;
  unsigned char *mem;
} sim_array;

static size_t format_bytes(CUarray_format f) {
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
  case CU_AD_FORMAT_SIGNED_INT8:
    return 1;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF:
    return 2;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT:
    return 4;
  default:
    return 0;
  }
}

SIM_API CUresult cuArrayCreate_v2(CUarray *ph, const CUDA_ARRAY_DESCRIPTOR *d) {
  SIM_ENTER_INIT(cuArrayCreate_v2);
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  if (!ph || !d || !d->Width || !format_bytes(d->Format) ||
      (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
    return CUDA_ERROR_INVALID_VALUE;
  sim_array *a = calloc(1, sizeof *a);
  size_t h = d->Height ? d->Height : 1;
  if (a) a->bytes = d->Width * h * format_bytes(d->Format) * d->NumChannels;
  if (a) a->mem = calloc(1, a->bytes);
  if (!a || !a->mem) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->magic = ARRAY_MAGIC;
  a->desc = *d;
  sim_handle_add(SIM_H_ARRAY, a);
  *ph = (CUarray)a;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuArrayDestroy(CUarray h) {
  SIM_ENTER_INIT(cuArrayDestroy);
  if (!h || !sim_handle_ok(SIM_H_ARRAY, h)) return CUDA_ERROR_INVALID_HANDLE;
  sim_array *a = (sim_array *)h;
  CUresult r = sim_ctx_sync_current(); /* copies in flight may still read it */
  sim_handle_del(SIM_H_ARRAY, a);
  free(a->mem);
  free(a);
  return r;
}

/* The bytes [off, off+n) of array h, or NULL. */
static unsigned char *array_at(CUarray h, size_t off, size_t n) {
  if (!h || !sim_handle_ok(SIM_H_ARRAY, h)) return NULL;
  sim_array *a = (sim_array *)h;
  return off <= a->bytes && n <= a->bytes - off ? a->mem + off : NULL;
}

/* Array copies are synchronous (cuda.h lists no stream for these forms). */
static CUresult array_copy(CUdeviceptr dst, void *hdst, CUdeviceptr src, const void *hsrc, size_t n,
                           int ptds) {
  if ((!hdst && where(dst, n) != 1) || (!hsrc && where(src, n) != 1))
    return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(NULL, ptds, &s);
  if (r == CUDA_SUCCESS && n) r = enq_copy(s, dst, src, hdst, hsrc, n, CP_DTOD);
  return r == CUDA_SUCCESS ? sim_stream_sync(s) : r;
}

static CUresult atod(CUdeviceptr d, CUarray a, size_t off, size_t n, int ptds) {
  unsigned char *p = array_at(a, off, n);
  return p ? array_copy(d, NULL, 0, p, n, ptds) : CUDA_ERROR_INVALID_VALUE;
}
static CUresult dtoa(CUarray a, size_t off, CUdeviceptr s, size_t n, int ptds) {
  unsigned char *p = array_at(a, off, n);
  return p ? array_copy(0, p, s, NULL, n, ptds) : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemcpyAtoD_v2(CUdeviceptr d, CUarray a, size_t off, size_t n) {
  SIM_ENTER_INIT(cuMemcpyAtoD_v2);
  return atod(d, a, off, n, 0);
}
SIM_API CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr d, CUarray a, size_t off, size_t n) {
  SIM_ENTER_INIT(cuMemcpyAtoD_v2_ptds);
  return atod(d, a, off, n, 1);
}
SIM_API CUresult cuMemcpyDtoA_v2(CUarray a, size_t off, CUdeviceptr s, size_t n) {
  SIM_ENTER_INIT(cuMemcpyDtoA_v2);
  return dtoa(a, off, s, n, 0);
}
SIM_API CUresult cuMemcpyDtoA_v2_ptds(CUarray a, size_t off, CUdeviceptr s, size_t n) {
  SIM_ENTER_INIT(cuMemcpyDtoA_v2_ptds);
  return dtoa(a, off, s, n, 1);
}

/* Host <-> array: plain memory on both sides, after the device's work. */
static CUresult host_array(void *dst, const void *src, size_t n) {
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = sim_ctx_sync_current();
  if (r == CUDA_SUCCESS) memmove(dst, src, n);
  return r;
}

SIM_API CUresult cuMemcpyHtoA_v2(CUarray a, size_t off, const void *src, size_t n) {
  SIM_ENTER_INIT(cuMemcpyHtoA_v2);
  unsigned char *p = array_at(a, off, n);
  return p ? host_array(p, src, n) : CUDA_ERROR_INVALID_VALUE;
}
SIM_API CUresult cuMemcpyAtoH_v2(void *dst, CUarray a, size_t off, size_t n) {
  SIM_ENTER_INIT(cuMemcpyAtoH_v2);
  unsigned char *p = array_at(a, off, n);
  return p ? host_array(dst, p, n) : CUDA_ERROR_INVALID_VALUE;
}
