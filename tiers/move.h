/* Movement primitives through the real driver, each degrading to what the
 * driver has: prefetch (batch, else range by range; _v2, else v1), advice
 * (_v2, else v1) and discard (batch, retried range by range), and the
 * start-up probe that says once what a missing entry point costs. */
#ifndef VX_TIERS_MOVE_H
#define VX_TIERS_MOVE_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* Says once per missing entry point (one stderr line each, vx_log) what vx
 * loses or does instead: v1 prefetch/advice before 12.2, range-by-range
 * prefetch before 13.0, no launch visibility before 12.4.  Called once at
 * start-up after the real table is resolved; no driver call but
 * cuDriverGetVersion. */
void move_probe(void);

/* The driver's version as "12.2" ("?" before move_probe). */
const char *move_driver(void);

/* 1 when the driver can say where a kernel's parameters are
 * (cuFuncGetParamInfo or cuKernelGetParamInfo, both CUDA 12.4): without
 * either launches are invisible, so the predictor and the NVMe tier stay
 * off. */
int move_layouts(void);

/* 1 for the legacy default stream (NULL or CU_STREAM_LEGACY), which the
 * batch calls refuse. */
static inline int move_legacy(CUstream s) {
  return !s || s == CU_STREAM_LEGACY;
}

/* Prefetches [p[i], p[i] + sz[i]) for i < n to loc, in order on stream s
 * (one vx created: never the legacy one, never a capturing one).  One batch
 * call where the driver has it and s allows it; on any batch error (and
 * without one) range by range.  failed[i] (if not NULL) is set to 1 for a
 * range that was not enqueued, 0 otherwise.  Returns how many failed. */
size_t move_prefetch(const CUdeviceptr *p, const size_t *sz, size_t n, CUmemLocation loc,
                     CUstream s, uint8_t *failed);

/* cuMemAdvise_v2, or v1 cuMemAdvise (a device ordinal or CU_DEVICE_CPU)
 * before 12.2.  CUDA_ERROR_NOT_SUPPORTED when the driver has neither. */
CUresult move_advise(CUdeviceptr p, size_t n, CUmem_advise advice, CUmemLocation loc);

/* Discards [p[i], p[i] + sz[i]) for i < n on stream s (vx's own), one batch
 * call, retried range by range when it fails.  failed[i] as above; *err (if
 * not NULL) the first error of a range, else CUDA_SUCCESS.  Returns how
 * many failed (all of them without cuMemDiscardBatchAsync). */
size_t move_discard(const CUdeviceptr *p, const size_t *sz, size_t n, CUstream s, uint8_t *failed,
                    CUresult *err);

/* vx's own non-blocking stream of the current context (made on first
 * use; legal during a capture), or NULL (no context, none could be made).
 * Thread-safe. */
CUstream move_stream(void);
/* fork child handler of those streams (init.c's fork list): forgets them. */
void move_atfork_child(void);

/* move_discard on move_stream(), then waits for that stream only (the
 * caller is in relaxed capture mode if a capture may be in progress).
 * failed[i] = 1 only for a range the driver refused (its data is still
 * in managed memory); *err (if not NULL) the first refusal, else
 * CUDA_SUCCESS; *wait (if not NULL) the result of the wait: other than
 * CUDA_SUCCESS, the discards enqueued may or may not have happened.
 * Returns how many were refused (all n without a stream or the entry
 * point). */
size_t move_discard_sync(const CUdeviceptr *p, const size_t *sz, size_t n, uint8_t *failed,
                         CUresult *err, CUresult *wait);

#endif
