/* The copy, set and stream-memory entry points libcudart 12.8/13 reaches
 * besides those in copy.c: batches, 3D peer copies, 2D sets, array copies,
 * stream memory operations and the v1 prefetch.  Each makes the device
 * ranges it touches resident (restored from the NVMe tier) first. */
#include <string.h>

#include "spill.h"
#include "vx.h"

/* A big batch is issued in groups of this many ranges, each guarded on its
 * own (the spill tier pins any number per call; the groups keep the arrays
 * on the stack).  The copies of one batch are unordered among themselves,
 * so issuing them as several batches on the same stream keeps their
 * meaning.  Host-to-device copies in a batch are not scanned for pointers
 * (tiers/ptrref.c): a source pointer could be device memory vx does not
 * track, which the CPU cannot read. */
#define GROUP_RANGES 32

static inline int armed(int on) {
  return on && __builtin_expect(spill_armed(), 0);
}

static inline CUresult finish(CUresult r, int pinned) {
  if (pinned) spill_op_done();
  return r;
}

static CUresult guard(const CUdeviceptr *p, const size_t *n, int k) {
  return k ? spill_make_resident_many(p, n, k, NULL) : CUDA_SUCCESS;
}

// ---- cuMemcpyBatchAsync: v1 (12.8, with failIdx) and v2 (13.0) ----

/* The attribute entries of copies [g0, g1), rebased to the group: attrs[k]
 * covers copies attrsIdxs[k] .. attrsIdxs[k+1]-1.  Returns their count. */
static size_t group_attrs(const CUmemcpyAttributes *attrs, const size_t *idx, size_t nattrs,
                          size_t g0, size_t g1, CUmemcpyAttributes *ga, size_t *gi) {
  size_t m = 0;
  for (size_t k = 0; k < nattrs; k++) {
    size_t lo = idx[k], hi = k + 1 < nattrs ? idx[k + 1] : (size_t)-1;
    if (hi <= g0 || lo >= g1) continue;
    ga[m] = attrs[k];
    gi[m++] = lo > g0 ? lo - g0 : 0;
  }
  return m;
}

/* The real batch for copies [g0, g1): v1 (with failIdx) or v2. */
static CUresult call_batch(int id, CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                           CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail,
                           CUstream st) {
  void *f = vx_real_v[id];
  if (!f) return CUDA_ERROR_NOT_SUPPORTED;
  if (id == VX_ID_cuMemcpyBatchAsync || id == VX_ID_cuMemcpyBatchAsync_ptsz)
    return ((vx_pfn_cuMemcpyBatchAsync)f)(d, s, n, count, a, ai, na, fail, st);
  return ((vx_pfn_cuMemcpyBatchAsync_v2)f)(d, s, n, count, a, ai, na, st);
}

/* Splitting must not accept what the driver refuses: a batch whose
 * attribute indices are not as cuda.h demands goes to it whole. */
static int well_formed(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                       CUmemcpyAttributes *a, size_t *ai, size_t na) {
  if (!d || !s || !n || !a || !ai || !na || na > count || ai[0] != 0) return 0;
  for (size_t k = 1; k < na; k++)
    if (ai[k] <= ai[k - 1] || ai[k] >= count) return 0;
  return 1;
}

static CUresult batch(int id, int on, CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                      CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail, CUstream st) {
  /* Malformed batches go to the driver whole: its own error, nothing moved. */
  if (!armed(on) || !well_formed(d, s, n, count, a, ai, na))
    return call_batch(id, d, s, n, count, a, ai, na, fail, st);
  const size_t per = GROUP_RANGES / 2;
  for (size_t g0 = 0; g0 < count; g0 += per) {
    size_t g1 = count - g0 < per ? count : g0 + per, k = 0, m;
    CUdeviceptr p[GROUP_RANGES];
    size_t len[GROUP_RANGES], gi[GROUP_RANGES / 2];
    CUmemcpyAttributes ga[GROUP_RANGES / 2];
    for (size_t i = g0; i < g1; i++) {
      p[k] = d[i], len[k++] = n[i];
      p[k] = s[i], len[k++] = n[i];
    }
    CUresult r = guard(p, len, (int)k);
    if (r != CUDA_SUCCESS) {
      if (fail) *fail = g0;
      return finish(r, 1);
    }
    m = group_attrs(a, ai, na, g0, g1, ga, gi);
    size_t gf = (size_t)-1;
    r = call_batch(id, d + g0, s + g0, n + g0, g1 - g0, ga, gi, m, fail ? &gf : NULL, st);
    if (r != CUDA_SUCCESS) {
      if (fail) *fail = gf == (size_t)-1 ? gf : g0 + gf;
      return finish(r, 1);
    }
    spill_op_done();
  }
  if (fail) *fail = (size_t)-1;
  return CUDA_SUCCESS;
}

#define BATCH_V1(name)                                                                             \
  CUresult name(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count, CUmemcpyAttributes *a,    \
                size_t *ai, size_t na, size_t *fail, CUstream st) {                                \
    VX_ENTER(on);                                                                                  \
    return batch(VX_ID_##name, on, d, s, n, count, a, ai, na, fail, st);                           \
  }
#define BATCH_V2(name)                                                                             \
  CUresult name(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count, CUmemcpyAttributes *a,    \
                size_t *ai, size_t na, CUstream st) {                                              \
    VX_ENTER(on);                                                                                  \
    return batch(VX_ID_##name, on, d, s, n, count, a, ai, na, NULL, st);                           \
  }

BATCH_V1(cuMemcpyBatchAsync)
BATCH_V1(cuMemcpyBatchAsync_ptsz)
BATCH_V2(cuMemcpyBatchAsync_v2)
BATCH_V2(cuMemcpyBatchAsync_v2_ptsz)

// ---- cuMemcpy3DBatchAsync: v1 (12.8, with failIdx) and v2 (13.0) ----

/* Pointer operands: the whole allocation (rows are counted in elements of
 * a size only the driver knows; the allocation bounds every legal copy). */
static int operand(const CUmemcpy3DOperand *o, CUdeviceptr *p, size_t *n) {
  if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER) return 0;
  *p = o->op.ptr.ptr, *n = SPILL_WHOLE;
  return 1;
}

static CUresult call_3d(int id, size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                        unsigned long long flags, CUstream st) {
  void *f = vx_real_v[id];
  if (!f) return CUDA_ERROR_NOT_SUPPORTED;
  if (id == VX_ID_cuMemcpy3DBatchAsync || id == VX_ID_cuMemcpy3DBatchAsync_ptsz)
    return ((vx_pfn_cuMemcpy3DBatchAsync)f)(nops, ops, fail, flags, st);
  return ((vx_pfn_cuMemcpy3DBatchAsync_v2)f)(nops, ops, flags, st);
}

static CUresult batch_3d(int id, int on, size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                         unsigned long long flags, CUstream st) {
  if (!armed(on) || !ops || !nops) return call_3d(id, nops, ops, fail, flags, st);
  const size_t per = GROUP_RANGES / 2;
  for (size_t g0 = 0; g0 < nops; g0 += per) {
    size_t g1 = nops - g0 < per ? nops : g0 + per;
    CUdeviceptr p[GROUP_RANGES];
    size_t len[GROUP_RANGES];
    int k = 0;
    for (size_t i = g0; i < g1; i++) {
      k += operand(&ops[i].src, &p[k], &len[k]);
      k += operand(&ops[i].dst, &p[k], &len[k]);
    }
    CUresult r = guard(p, len, k);
    size_t gf = (size_t)-1;
    if (r == CUDA_SUCCESS)
      r = call_3d(id, g1 - g0, ops + g0, fail ? &gf : NULL, flags, st);
    else
      gf = 0;
    if (r != CUDA_SUCCESS) {
      if (fail) *fail = gf == (size_t)-1 ? gf : g0 + gf;
      return finish(r, 1);
    }
    spill_op_done();
  }
  if (fail) *fail = (size_t)-1;
  return CUDA_SUCCESS;
}

#define BATCH3D_V1(name)                                                                           \
  CUresult name(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail, unsigned long long flags,  \
                CUstream st) {                                                                     \
    VX_ENTER(on);                                                                                  \
    return batch_3d(VX_ID_##name, on, nops, ops, fail, flags, st);                                 \
  }
#define BATCH3D_V2(name)                                                                           \
  CUresult name(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags, CUstream st) { \
    VX_ENTER(on);                                                                                  \
    return batch_3d(VX_ID_##name, on, nops, ops, NULL, flags, st);                                 \
  }

BATCH3D_V1(cuMemcpy3DBatchAsync)
BATCH3D_V1(cuMemcpy3DBatchAsync_ptsz)
BATCH3D_V2(cuMemcpy3DBatchAsync_v2)
BATCH3D_V2(cuMemcpy3DBatchAsync_v2_ptsz)

// ---- cuMemcpy3DPeer(Async) ----

static int device_side(CUmemorytype t) {
  return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED;
}

/* Bytes a pitched box spans from its first byte (as copy.c's span). */
static size_t box(size_t x, size_t y, size_t z, size_t pitch, size_t rows, const size_t *ext,
                  CUdeviceptr base, CUdeviceptr *start) {
  *start = base + (z * rows + y) * pitch + x;
  if (!ext[0] || !ext[1] || !ext[2]) return 0;
  return ((ext[2] - 1) * rows + (ext[1] - 1)) * pitch + ext[0];
}

static CUresult guard_peer(const CUDA_MEMCPY3D_PEER *c) {
  CUdeviceptr p[2];
  size_t n[2], ext[3];
  int k = 0;
  if (!c) return CUDA_SUCCESS;
  ext[0] = c->WidthInBytes, ext[1] = c->Height, ext[2] = c->Depth;
  if (device_side(c->srcMemoryType))
    n[k] =
        box(c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch, c->srcHeight, ext, c->srcDevice, &p[k]),
    k++;
  if (device_side(c->dstMemoryType))
    n[k] =
        box(c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight, ext, c->dstDevice, &p[k]),
    k++;
  return guard(p, n, k);
}

#define PEER3D(name, PARAMS, ARGS)                                                                 \
  CUresult name PARAMS {                                                                           \
    VX_ENTER(on);                                                                                  \
    int pinned = armed(on);                                                                        \
    if (pinned) {                                                                                  \
      CUresult r = guard_peer(c);                                                                  \
      if (r != CUDA_SUCCESS) return finish(r, 1);                                                  \
    }                                                                                              \
    return finish(VX_CALL ARGS, pinned);                                                           \
  }

PEER3D(cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *c), (cuMemcpy3DPeer, c))
PEER3D(cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER *c), (cuMemcpy3DPeer_ptds, c))
PEER3D(cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *c, CUstream s), (cuMemcpy3DPeerAsync, c, s))
PEER3D(cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER *c, CUstream s),
       (cuMemcpy3DPeerAsync_ptsz, c, s))

// ---- one-range forms: 2D sets, array copies, stream memory ops, v1 prefetch ----

/* Guards [p, p+n), then makes the call. */
#define ONE_RANGE(name, PARAMS, P, N, ARGS)                                                        \
  CUresult name PARAMS {                                                                           \
    VX_ENTER(on);                                                                                  \
    int pinned = armed(on);                                                                        \
    if (pinned) {                                                                                  \
      CUdeviceptr p_ = (P);                                                                        \
      size_t n_ = (N);                                                                             \
      CUresult r = guard(&p_, &n_, 1);                                                             \
      if (r != CUDA_SUCCESS) return finish(r, 1);                                                  \
    }                                                                                              \
    return finish(VX_CALL ARGS, pinned);                                                           \
  }

/* A 2D set writes Height rows of Width elements, pitch bytes apart. */
static size_t rows_span(size_t pitch, size_t width_bytes, size_t height) {
  return width_bytes && height ? (height - 1) * pitch + width_bytes : 0;
}

#define SET2D(name, T, EL)                                                                         \
  ONE_RANGE(name, (CUdeviceptr d, size_t pitch, T v, size_t w, size_t h), d,                       \
            rows_span(pitch, w *(EL), h), (name, d, pitch, v, w, h))
#define SET2D_A(name, T, EL)                                                                       \
  ONE_RANGE(name, (CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream s), d,           \
            rows_span(pitch, w *(EL), h), (name, d, pitch, v, w, h, s))

SET2D(cuMemsetD2D8_v2, unsigned char, 1)
SET2D(cuMemsetD2D8_v2_ptds, unsigned char, 1)
SET2D(cuMemsetD2D16_v2, unsigned short, 2)
SET2D(cuMemsetD2D16_v2_ptds, unsigned short, 2)
SET2D(cuMemsetD2D32_v2, unsigned int, 4)
SET2D(cuMemsetD2D32_v2_ptds, unsigned int, 4)
SET2D_A(cuMemsetD2D8Async, unsigned char, 1)
SET2D_A(cuMemsetD2D8Async_ptsz, unsigned char, 1)
SET2D_A(cuMemsetD2D16Async, unsigned short, 2)
SET2D_A(cuMemsetD2D16Async_ptsz, unsigned short, 2)
SET2D_A(cuMemsetD2D32Async, unsigned int, 4)
SET2D_A(cuMemsetD2D32Async_ptsz, unsigned int, 4)

#define ATOD(name)                                                                                 \
  ONE_RANGE(name, (CUdeviceptr d, CUarray a, size_t off, size_t n), d, n, (name, d, a, off, n))
#define DTOA(name)                                                                                 \
  ONE_RANGE(name, (CUarray a, size_t off, CUdeviceptr s, size_t n), s, n, (name, a, off, s, n))

ATOD(cuMemcpyAtoD_v2)
ATOD(cuMemcpyAtoD_v2_ptds)
DTOA(cuMemcpyDtoA_v2)
DTOA(cuMemcpyDtoA_v2_ptds)

/* v1 and v2 of the value operations share one signature (v2 changed what
 * the flags mean, not the ABI); each variant is still its own hook. */
#define VALUE(name, T, EL)                                                                         \
  ONE_RANGE(name, (CUstream s, CUdeviceptr a, T v, unsigned int fl), a, EL, (name, s, a, v, fl))

VALUE(cuStreamWriteValue32, cuuint32_t, 4)
VALUE(cuStreamWriteValue32_ptsz, cuuint32_t, 4)
VALUE(cuStreamWriteValue32_v2, cuuint32_t, 4)
VALUE(cuStreamWriteValue32_v2_ptsz, cuuint32_t, 4)
VALUE(cuStreamWriteValue64, cuuint64_t, 8)
VALUE(cuStreamWriteValue64_ptsz, cuuint64_t, 8)
VALUE(cuStreamWriteValue64_v2, cuuint64_t, 8)
VALUE(cuStreamWriteValue64_v2_ptsz, cuuint64_t, 8)
VALUE(cuStreamWaitValue32, cuuint32_t, 4)
VALUE(cuStreamWaitValue32_ptsz, cuuint32_t, 4)
VALUE(cuStreamWaitValue32_v2, cuuint32_t, 4)
VALUE(cuStreamWaitValue32_v2_ptsz, cuuint32_t, 4)
VALUE(cuStreamWaitValue64, cuuint64_t, 8)
VALUE(cuStreamWaitValue64_ptsz, cuuint64_t, 8)
VALUE(cuStreamWaitValue64_v2, cuuint64_t, 8)
VALUE(cuStreamWaitValue64_v2_ptsz, cuuint64_t, 8)

/* The v1 prefetch takes a device ordinal (CU_DEVICE_CPU for the host). */
#define PREFETCH_V1(name)                                                                          \
  ONE_RANGE(name, (CUdeviceptr p, size_t n, CUdevice dev, CUstream s), p, n, (name, p, n, dev, s))

PREFETCH_V1(cuMemPrefetchAsync)
PREFETCH_V1(cuMemPrefetchAsync_ptsz)

// ---- cuStreamBatchMemOp ----

static int memop_range(const CUstreamBatchMemOpParams *o, CUdeviceptr *p, size_t *n) {
  switch (o->operation) {
  case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    *p = o->waitValue.address, *n = 4;
    return 1;
  case CU_STREAM_MEM_OP_WAIT_VALUE_64:
    *p = o->waitValue.address, *n = 8;
    return 1;
  case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    *p = o->writeValue.address, *n = 4;
    return 1;
  case CU_STREAM_MEM_OP_WRITE_VALUE_64:
    *p = o->writeValue.address, *n = 8;
    return 1;
  default:
    return 0; /* flushes and barriers touch no address */
  }
}

#define MEMOP(name)                                                                                \
  CUresult name(CUstream s, unsigned int count, CUstreamBatchMemOpParams *ops, unsigned int fl) {  \
    VX_ENTER(on);                                                                                  \
    /* At 256 and more the driver refuses the batch: it gets it whole. */                          \
    if (!armed(on) || !ops || count >= 256) return VX_CALL(name, s, count, ops, fl);               \
    for (unsigned g0 = 0; g0 < count; g0 += GROUP_RANGES) {                                        \
      unsigned g1 = count - g0 < GROUP_RANGES ? count : g0 + GROUP_RANGES;                         \
      CUdeviceptr p[GROUP_RANGES];                                                                 \
      size_t n[GROUP_RANGES];                                                                      \
      int k = 0;                                                                                   \
      for (unsigned i = g0; i < g1; i++)                                                           \
        k += memop_range(&ops[i], &p[k], &n[k]);                                                   \
      CUresult r = guard(p, n, k);                                                                 \
      if (r == CUDA_SUCCESS) r = VX_CALL(name, s, g1 - g0, ops + g0, fl);                          \
      if (r != CUDA_SUCCESS) return finish(r, 1);                                                  \
      spill_op_done();                                                                             \
    }                                                                                              \
    return count ? CUDA_SUCCESS : VX_CALL(name, s, count, ops, fl);                                \
  }

MEMOP(cuStreamBatchMemOp)
MEMOP(cuStreamBatchMemOp_ptsz)
MEMOP(cuStreamBatchMemOp_v2)
MEMOP(cuStreamBatchMemOp_v2_ptsz)
