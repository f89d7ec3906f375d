/* sim_copy.c: cuMemcpy* and cuMemsetD* (sync and async): pointer checks at
 * issue, translation to the bytes at run time, copy-engine time. */
#include <errno.h>
#include <string.h>

#include "sim_internal.h"

/* Host address of [p, p+n) for a copy, or NULL: -EINVAL (not device memory
 * when dev_only, or out of bounds), -EFAULT (discarded read). */
static void *xlate_locked(CUdeviceptr p, size_t n, int write, int dev_only, int *err, int *is_dev) {
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  *err = 0;
  *is_dev = 0;
  if (!a) {
    if (dev_only) *err = -EINVAL;
    return dev_only ? NULL : (void *)(uintptr_t)p;
  }
  size_t off = (size_t)(p - a->base);
  if (off + n > a->size) {
    *err = -EINVAL;
    return NULL;
  }
  switch (a->kind) {
  case SIM_NATIVE:
  case SIM_VMM:
    *is_dev = 1;
    return (char *)a->backing + off;
  case SIM_MANAGED:
    *is_dev = 1;
    if (sim_managed_copy_touch_locked(a, off, n, write) != 0) {
      *err = -EFAULT;
      return NULL;
    }
    return (void *)(uintptr_t)p;
  default:
    return (void *)(uintptr_t)p;
  }
}

static void copy_counters_locked(sim_dev *d, int dir, size_t n) {
  if (dir == CP_HTOD)
    d->st.bytes_memcpy_htod += n;
  else if (dir == CP_DTOH)
    d->st.bytes_memcpy_dtoh += n;
  else if (dir == CP_DTOD)
    d->st.bytes_memcpy_dtod += n;
}

uint64_t sim_copy_run(sim_op *op, sim_stream *s, uint64_t ready) {
  int e1, e2, d1 = 0, d2 = 0;
  size_t n = op->u.cp.n;
  int dir = op->u.cp.dir;
  sim_lock();
  void *dst = op->u.cp.hdst
                  ? op->u.cp.hdst
                  : xlate_locked(op->u.cp.dst, n, 1, dir == CP_HTOD || dir == CP_DTOD, &e1, &d1);
  const void *src =
      op->u.cp.hsrc ? op->u.cp.hsrc
                    : xlate_locked(op->u.cp.src, n, 0, dir == CP_DTOH || dir == CP_DTOD, &e2, &d2);
  if (op->u.cp.hdst) e1 = 0;
  if (op->u.cp.hsrc) e2 = 0;
  sim_unlock();
  if (e1 || e2 || !dst || !src) {
    sim_ctx_set_sticky(s->ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
    return ready;
  }
  if (!n) {
  } else if (!sim_g.timing_only) {
    memmove(dst, src, n);
  } else if (!op->u.cp.hdst && d1) {
    /* timing-only: device or managed bytes are not kept */
  } else if (!op->u.cp.hsrc && d2) {
    memset(dst, 0, n); /* timing-only: device bytes read as zeros */
  } else {
    memmove(dst, src, n);
  }
  sim_lock();
  sim_dev *d = &sim_g.dev[s->ctx->dev];
  copy_counters_locked(d, dir, n);
  uint64_t end = ready;
  if (dir == CP_HTOD || dir == CP_DTOH) {
    end = sim_eng_run(dir == CP_HTOD ? &d->h2d : &d->d2h, ready,
                      sim_ns_for_bytes(n, sim_g.link_gbps));
  } else if (dir == CP_DTOD) {
    end = sim_eng_run(&d->compute, ready, sim_ns_for_bytes(2 * (uint64_t)n, sim_g.dev_gbps));
  }
  sim_note_end_locked(d, end);
  sim_unlock();
  return end;
}

uint64_t sim_set_run(sim_op *op, sim_stream *s, uint64_t ready) {
  int err, isdev;
  size_t bytes = op->u.set.n * (size_t)op->u.set.elsize;
  sim_lock();
  void *dst = xlate_locked(op->u.set.dst, bytes, 1, 1, &err, &isdev);
  sim_unlock();
  if (!dst) {
    sim_ctx_set_sticky(s->ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
    return ready;
  }
  if (sim_g.timing_only) {
    /* timing-only: device bytes are not kept */
  } else if (op->u.set.elsize == 1) {
    memset(dst, (int)op->u.set.val, bytes);
  } else if (op->u.set.elsize == 2) {
    uint16_t *p = dst, v = (uint16_t)op->u.set.val;
    for (size_t i = 0; i < op->u.set.n; i++)
      p[i] = v;
  } else {
    uint32_t *p = dst, v = op->u.set.val;
    for (size_t i = 0; i < op->u.set.n; i++)
      p[i] = v;
  }
  sim_lock();
  sim_dev *d = &sim_g.dev[s->ctx->dev];
  uint64_t end = sim_eng_run(&d->compute, ready, sim_ns_for_bytes(bytes, sim_g.dev_gbps));
  sim_note_end_locked(d, end);
  sim_unlock();
  return end;
}

// ---- issue-time checks and entry points ----

/* The device side(s) must be known memory, in bounds. */
static CUresult check_dev(CUdeviceptr p, size_t n) {
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  int ok = a && (size_t)(p - a->base) + n <= a->size;
  sim_unlock();
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int classify(CUdeviceptr p) {
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  int dev = a && (a->kind == SIM_NATIVE || a->kind == SIM_MANAGED || a->kind == SIM_VMM);
  sim_unlock();
  return dev;
}

CUresult sim_set_enqueue(sim_stream *s, CUdeviceptr dst, uint32_t v, int el, size_t n) {
  sim_op *op = sim_op_new(OP_SET);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.set.dst = dst;
  op->u.set.val = v;
  op->u.set.elsize = el;
  op->u.set.n = n;
  return sim_enqueue(s, op);
}

CUresult sim_copy_enqueue(sim_stream *s, int dir, CUdeviceptr dst, CUdeviceptr src, void *hdst,
                          const void *hsrc, size_t n) {
  sim_op *op = sim_op_new(OP_COPY);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.cp.dir = dir;
  op->u.cp.dst = dst;
  op->u.cp.src = src;
  op->u.cp.hdst = hdst;
  op->u.cp.hsrc = hsrc;
  op->u.cp.n = n;
  return sim_enqueue(s, op);
}

/* One copy; sync: waits for it (the legacy or per-thread stream). */
static CUresult copy(int dir, CUdeviceptr dst, CUdeviceptr src, void *hdst, const void *hsrc,
                     size_t n, CUstream h, int ptds, int sync) {
  sim_stream *s;
  if (sync) SIM_CAPTURE_UNSAFE();
  CUresult r = sim_stream_resolve(sync ? NULL : h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  if ((dir == CP_HTOD && !hsrc) || (dir == CP_DTOH && !hdst)) return CUDA_ERROR_INVALID_VALUE;
  if (dir == CP_HTOD || dir == CP_DTOD) r = check_dev(dst, n);
  if (r == CUDA_SUCCESS && (dir == CP_DTOH || dir == CP_DTOD)) r = check_dev(src, n);
  if (r != CUDA_SUCCESS) return r;
  if (dir == 0) { /* cuMemcpy: unified addressing decides */
    int dd = classify(dst), sd = classify(src);
    dir = dd && sd ? CP_DTOD : dd ? CP_HTOD : sd ? CP_DTOH : CP_HTOH;
  }
  r = sim_copy_enqueue(s, dir, dst, src, hdst, hsrc, n);
  if (r != CUDA_SUCCESS || !sync) return r;
  return sim_stream_sync(s);
}

#define HTOD(p, q, n, h, pt, sy) copy(CP_HTOD, p, 0, NULL, q, n, h, pt, sy)
#define DTOH(p, q, n, h, pt, sy) copy(CP_DTOH, 0, q, p, NULL, n, h, pt, sy)
#define DTOD(p, q, n, h, pt, sy) copy(CP_DTOD, p, q, NULL, NULL, n, h, pt, sy)
#define ANY(p, q, n, h, pt, sy) copy(0, p, q, NULL, NULL, n, h, pt, sy)

SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  SIM_ENTER_INIT(cuMemcpyHtoD_v2);
  return HTOD(dst, src, n, NULL, 0, 1);
}
SIM_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) {
  SIM_ENTER_INIT(cuMemcpyHtoD_v2_ptds);
  return HTOD(dst, src, n, NULL, 1, 1);
}
SIM_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  SIM_ENTER_INIT(cuMemcpyDtoH_v2);
  return DTOH(dst, src, n, NULL, 0, 1);
}
SIM_API CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) {
  SIM_ENTER_INIT(cuMemcpyDtoH_v2_ptds);
  return DTOH(dst, src, n, NULL, 1, 1);
}
SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_ENTER_INIT(cuMemcpyDtoD_v2);
  return DTOD(dst, src, n, NULL, 0, 1);
}
SIM_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_ENTER_INIT(cuMemcpyDtoD_v2_ptds);
  return DTOD(dst, src, n, NULL, 1, 1);
}
SIM_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_ENTER_INIT(cuMemcpy);
  return ANY(dst, src, n, NULL, 0, 1);
}
SIM_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_ENTER_INIT(cuMemcpy_ptds);
  return ANY(dst, src, n, NULL, 1, 1);
}
SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyHtoDAsync_v2);
  return HTOD(dst, src, n, h, 0, 0);
}
SIM_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyHtoDAsync_v2_ptsz);
  return HTOD(dst, src, n, h, 1, 0);
}
SIM_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyDtoHAsync_v2);
  return DTOH(dst, src, n, h, 0, 0);
}
SIM_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyDtoHAsync_v2_ptsz);
  return DTOH(dst, src, n, h, 1, 0);
}
SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyDtoDAsync_v2);
  return DTOD(dst, src, n, h, 0, 0);
}
SIM_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyDtoDAsync_v2_ptsz);
  return DTOD(dst, src, n, h, 1, 0);
}
SIM_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyAsync);
  return ANY(dst, src, n, h, 0, 0);
}
SIM_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemcpyAsync_ptsz);
  return ANY(dst, src, n, h, 1, 0);
}

// ---- memset ----

static CUresult set(CUdeviceptr dst, uint32_t v, int el, size_t n, CUstream h, int ptds, int sync) {
  sim_stream *s;
  if (sync) SIM_CAPTURE_UNSAFE();
  CUresult r = sim_stream_resolve(sync ? NULL : h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  if (dst % (CUdeviceptr)el) return CUDA_ERROR_INVALID_VALUE;
  r = check_dev(dst, n * (size_t)el);
  if (r != CUDA_SUCCESS) return r;
  r = sim_set_enqueue(s, dst, v, el, n);
  if (r != CUDA_SUCCESS || !sync) return r;
  return sim_stream_sync(s);
}

SIM_API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  SIM_ENTER_INIT(cuMemsetD8_v2);
  return set(d, v, 1, n, NULL, 0, 1);
}
SIM_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) {
  SIM_ENTER_INIT(cuMemsetD8_v2_ptds);
  return set(d, v, 1, n, NULL, 1, 1);
}
SIM_API CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
  SIM_ENTER_INIT(cuMemsetD16_v2);
  return set(d, v, 2, n, NULL, 0, 1);
}
SIM_API CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) {
  SIM_ENTER_INIT(cuMemsetD32_v2);
  return set(d, v, 4, n, NULL, 0, 1);
}
SIM_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) {
  SIM_ENTER_INIT(cuMemsetD32_v2_ptds);
  return set(d, v, 4, n, NULL, 1, 1);
}
SIM_API CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemsetD8Async);
  return set(d, v, 1, n, h, 0, 0);
}
SIM_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemsetD8Async_ptsz);
  return set(d, v, 1, n, h, 1, 0);
}
SIM_API CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemsetD16Async);
  return set(d, v, 2, n, h, 0, 0);
}
SIM_API CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemsetD32Async);
  return set(d, v, 4, n, h, 0, 0);
}
SIM_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream h) {
  SIM_ENTER_INIT(cuMemsetD32Async_ptsz);
  return set(d, v, 4, n, h, 1, 0);
}
