/* Movement primitives: prefetch, advice and discard through the real table,
 * each falling back to what the driver has, and the probe that names, once,
 * what a missing entry point costs. */
#include "move.h"

#include <pthread.h>
#include <stdio.h>

#include "driver.h"
#include "log.h"
#include "locks.h"

/* cuda.h maps these to the _v2 names; here they are the v1 entry points. */
#undef cuMemPrefetchAsync
#undef cuMemAdvise

#define MOVE_BATCH 64 /* ranges per batch call */

// ---- the probe ----

static char driver_str[16] = "?";

/* "12.2" from 12020. */
static void version_str(int v, char *buf, size_t len) {
  snprintf(buf, len, "%d.%d", v / 1000, v % 1000 / 10);
}

int move_layouts(void) {
  return VX_REAL_FN(cuFuncGetParamInfo) || VX_REAL_FN(cuKernelGetParamInfo);
}

static void lacks(int level, const char *entry, const char *since, const char *cost) {
  vx_log(level, "driver %s lacks %s (%s): %s", driver_str, entry, since, cost);
}

void move_probe(void) {
  int v = 0;
  if (VX_CALL(cuDriverGetVersion, &v) == CUDA_SUCCESS && v > 0)
    version_str(v, driver_str, sizeof driver_str);
  if (!move_layouts())
    lacks(VX_LOG_WARN, "cuFuncGetParamInfo", "12.4",
          "launches are invisible, predictor and NVMe tier off");
  if (!VX_REAL_FN(cuFuncGetName))
    lacks(VX_LOG_INFO, "cuFuncGetName", "12.3", "kernels are named by their handles");
  if (!VX_REAL_FN(cuMemPrefetchAsync_v2))
    lacks(VX_LOG_INFO, "cuMemPrefetchAsync_v2", "12.2",
          VX_REAL_FN(cuMemPrefetchAsync) ? "prefetches use cuMemPrefetchAsync (device ordinals)"
                                         : "no prefetching");
  if (!VX_REAL_FN(cuMemAdvise_v2))
    lacks(VX_LOG_INFO, "cuMemAdvise_v2", "12.2",
          VX_REAL_FN(cuMemAdvise) ? "advice uses cuMemAdvise (device ordinals)" : "no advice");
  if (!VX_REAL_FN(cuMemPrefetchBatchAsync))
    lacks(VX_LOG_INFO, "cuMemPrefetchBatchAsync", "13.0", "prefetches go range by range");
}

const char *move_driver(void) {
  return driver_str;
}

// ---- advice ----

static CUdevice ordinal(CUmemLocation loc) {
  return loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? (CUdevice)loc.id : CU_DEVICE_CPU;
}

CUresult move_advise(CUdeviceptr p, size_t n, CUmem_advise advice, CUmemLocation loc) {
  if (VX_REAL_FN(cuMemAdvise_v2)) return VX_CALL(cuMemAdvise_v2, p, n, advice, loc);
  return VX_CALL(cuMemAdvise, p, n, advice, ordinal(loc));
}

// ---- prefetch ----

static CUresult prefetch_one(CUdeviceptr p, size_t n, CUmemLocation loc, CUstream s) {
  if (VX_REAL_FN(cuMemPrefetchAsync_v2)) return VX_CALL(cuMemPrefetchAsync_v2, p, n, loc, 0, s);
  return VX_CALL(cuMemPrefetchAsync, p, n, ordinal(loc), s);
}

static size_t mark(uint8_t *failed, size_t i, int bad) {
  if (failed) failed[i] = (uint8_t)bad;
  return bad ? 1 : 0;
}

/* One batch call for p[0..n) (n <= MOVE_BATCH); CUDA_SUCCESS or its error. */
static CUresult prefetch_batch(const CUdeviceptr *p, const size_t *sz, size_t n, CUmemLocation loc,
                               CUstream s) {
  CUdeviceptr pp[MOVE_BATCH];
  size_t ss[MOVE_BATCH], idx = 0;
  for (size_t i = 0; i < n; i++)
    pp[i] = p[i], ss[i] = sz[i];
  return VX_CALL(cuMemPrefetchBatchAsync, pp, ss, n, &loc, &idx, 1, 0, s);
}

size_t move_prefetch(const CUdeviceptr *p, const size_t *sz, size_t n, CUmemLocation loc,
                     CUstream s, uint8_t *failed) {
  size_t bad = 0;
  int batch = VX_REAL_FN(cuMemPrefetchBatchAsync) && !move_legacy(s);
  for (size_t at = 0; at < n; at += MOVE_BATCH) {
    size_t k = n - at < MOVE_BATCH ? n - at : MOVE_BATCH;
    CUresult r = batch ? prefetch_batch(p + at, sz + at, k, loc, s) : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS) {
      for (size_t i = 0; i < k; i++)
        mark(failed, at + i, 0);
      continue;
    }
    char eb[VX_CU_ERR_TEXT];
    if (batch)
      VX_LOG_ONCE(VX_LOG_INFO, "cuMemPrefetchBatchAsync failed (%s): prefetching range by range",
                  vx_cu_err(r, eb));
    for (size_t i = 0; i < k; i++)
      bad += mark(failed, at + i, prefetch_one(p[at + i], sz[at + i], loc, s) != CUDA_SUCCESS);
  }
  return bad;
}

// ---- discard ----

size_t move_discard(const CUdeviceptr *p, const size_t *sz, size_t n, CUstream s, uint8_t *failed,
                    CUresult *err) {
  size_t bad = 0;
  if (err) *err = CUDA_SUCCESS;
  for (size_t at = 0; at < n; at += MOVE_BATCH) {
    size_t k = n - at < MOVE_BATCH ? n - at : MOVE_BATCH;
    CUdeviceptr pp[MOVE_BATCH];
    size_t ss[MOVE_BATCH];
    for (size_t i = 0; i < k; i++)
      pp[i] = p[at + i], ss[i] = sz[at + i];
    CUresult r = move_legacy(s) ? CUDA_ERROR_INVALID_VALUE
                                : VX_CALL(cuMemDiscardBatchAsync, pp, ss, k, 0, s);
    if (r == CUDA_SUCCESS) {
      for (size_t i = 0; i < k; i++)
        mark(failed, at + i, 0);
      continue;
    }
    /* Range by range: one the driver refuses keeps the others' discards. */
    for (size_t i = 0; i < k; i++) {
      CUresult e = move_legacy(s) ? CUDA_ERROR_INVALID_VALUE
                                  : VX_CALL(cuMemDiscardBatchAsync, &pp[i], &ss[i], 1, 0, s);
      bad += mark(failed, at + i, e != CUDA_SUCCESS);
      if (e != CUDA_SUCCESS && err && *err == CUDA_SUCCESS) *err = e;
    }
  }
  return bad;
}

// ---- vx's own streams, one per context ----

/* A stream belongs to its context: each context vx works in gets its own
 * non-blocking stream, made on first use (a few contexts per process). */
#define MOVE_STREAMS 64

typedef struct ctx_stream {
  CUcontext ctx;
  CUstream s;
} ctx_stream_t;

static ctx_stream_t streams[MOVE_STREAMS];
static int nstreams; /* under streams_mu */
static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;

void move_atfork_child(void) {
  pthread_mutex_init(&streams_mu, NULL);
  nstreams = 0; /* the parent's streams mean nothing here (leaked) */
}

static CUstream stream_find(CUcontext ctx) {
  CUstream s = NULL;
  vx_mutex_lock(&streams_mu, VX_RANK_STREAMS);
  for (int i = 0; i < nstreams && !s; i++)
    if (streams[i].ctx == ctx) s = streams[i].s;
  vx_mutex_unlock(&streams_mu, VX_RANK_STREAMS);
  return s;
}

CUstream move_stream(void) {
  CUcontext ctx = NULL;
  if (VX_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx) return NULL;
  CUstream s = stream_find(ctx), mine = NULL;
  if (s) return s;
  /* made outside the lock (cuStreamCreate is legal during any capture) */
  if (VX_CALL(cuStreamCreate, &mine, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return NULL;
  vx_mutex_lock(&streams_mu, VX_RANK_STREAMS);
  for (int i = 0; i < nstreams && !s; i++)
    if (streams[i].ctx == ctx) s = streams[i].s;
  if (!s && nstreams < MOVE_STREAMS) {
    streams[nstreams++] = (ctx_stream_t){ctx, mine};
    s = mine;
    mine = NULL;
  }
  vx_mutex_unlock(&streams_mu, VX_RANK_STREAMS);
  if (mine) VX_CALL(cuStreamDestroy_v2, mine); /* another thread's won, or the table is full */
  return s;
}

size_t move_discard_sync(const CUdeviceptr *p, const size_t *sz, size_t n, uint8_t *failed,
                         CUresult *err, CUresult *wait) {
  CUstream s = move_stream();
  CUresult first = s ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
  size_t bad = n;
  if (s)
    bad = move_discard(p, sz, n, s, failed, &first);
  else
    for (size_t i = 0; failed && i < n; i++)
      failed[i] = 1;
  CUresult w = s && bad < n ? VX_CALL(cuStreamSynchronize, s) : CUDA_SUCCESS;
  if (wait) *wait = w;
  if (err) *err = first;
  return bad;
}
