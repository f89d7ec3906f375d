/* Which stream captures the application has in progress, as the capture
 * hooks (interpose/stream_capture.c) report them, so that vx's own driver
 * calls never invalidate one (capture.h). */
#include "capture.h"

#include <pthread.h>

#include "driver.h"
#include "log.h"
#include "move.h"
#include "locks.h"

// ---- the captures in progress ----

/* Few at a time: a small table under one lock, off the hot path.  A
 * per-thread default stream is one stream per thread: its key is the
 * thread as well as the handle. */
#define CAP_MAX 256

typedef struct cap {
  CUstream s;
  pthread_t thr; /* for CU_STREAM_PER_THREAD only */
} cap_t;

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static cap_t caps[CAP_MAX];
static int ncaps; /* written under cap_mu, read relaxed */
/* A capture begun while the table was full cannot be told from the others
 * at its end: from then on vx counts one as active until exit (atomic). */
static int saturated;
/* Captures this thread began and has not seen end (a capture ended on
 * another thread leaves it high: vx_capture_mine is then only careful). */
static __thread int my_caps __attribute__((tls_model("initial-exec")));

int vx_capture_active(void) {
  return __atomic_load_n(&ncaps, __ATOMIC_RELAXED) != 0 ||
         __atomic_load_n(&saturated, __ATOMIC_RELAXED);
}

static CUstream key_of(CUstream s, int ptsz) {
  return ptsz && !s ? CU_STREAM_PER_THREAD : s;
}

static int same(const cap_t *c, CUstream s) {
  return c->s == s && (s != CU_STREAM_PER_THREAD || pthread_equal(c->thr, pthread_self()));
}

/* fork: the table's lock is taken before, released in the parent; the
 * child starts with none (the driver cannot be used across fork, so no
 * capture of the parent goes on there).  Registered by init.c's fork list. */
void capture_atfork_prepare(void) {
  vx_mutex_lock(&cap_mu, VX_RANK_CAP);
}
void capture_atfork_parent(void) {
  vx_mutex_unlock(&cap_mu, VX_RANK_CAP);
}
void capture_atfork_child(void) {
  pthread_mutex_init(&cap_mu, NULL);
  __atomic_store_n(&saturated, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&ncaps, 0, __ATOMIC_RELAXED);
}

void vx_capture_began(CUstream stream, int ptsz) {
  CUstream s = key_of(stream, ptsz);
  vx_mutex_lock(&cap_mu, VX_RANK_CAP);
  my_caps++;
  if (ncaps < CAP_MAX) {
    caps[ncaps] = (cap_t){.s = s, .thr = pthread_self()};
    __atomic_store_n(&ncaps, ncaps + 1, __ATOMIC_RELAXED);
  } else {
    /* never less careful than the driver: careful until exit */
    __atomic_store_n(&saturated, 1, __ATOMIC_RELAXED);
    VX_LOG_ONCE(VX_LOG_WARN,
                "more than %d stream captures at once: from now on vx defers frees and skips "
                "movement and spills as if one were always in progress",
                CAP_MAX);
  }
  vx_mutex_unlock(&cap_mu, VX_RANK_CAP);
}

/* The capture on s ended, or failed to end (r: what cuStreamEndCapture
 * said).  The stream is asked whether it still captures, so that neither
 * an invalidated capture (ended with an error) leaks nor a refused end
 * (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) drops a live one. */
void vx_capture_ended(CUstream stream, int ptsz, CUresult r) {
  CUstream s = key_of(stream, ptsz);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult q = VX_CALL(cuStreamIsCapturing, s, &st);
  int still = q == CUDA_SUCCESS ? st != CU_STREAM_CAPTURE_STATUS_NONE
                                : r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  if (still) return;
  vx_mutex_lock(&cap_mu, VX_RANK_CAP);
  int i = 0;
  while (i < ncaps && !same(&caps[i], s))
    i++;
  if (i < ncaps) {
    if (pthread_equal(caps[i].thr, pthread_self()) && my_caps > 0) my_caps--;
    int n = ncaps - 1;
    caps[i] = caps[n];
    __atomic_store_n(&ncaps, n, __ATOMIC_RELAXED);
  }
  /* else: a capture vx never saw begin (begun while vx passed through) */
  vx_mutex_unlock(&cap_mu, VX_RANK_CAP);
}

// ---- vx's own calls during a capture ----

void vx_capture_relax_begin(vx_capture_relax_t *r) {
  r->on = 0;
  if (!vx_capture_active()) return;
  r->saved = CU_STREAM_CAPTURE_MODE_RELAXED;
  r->on = VX_CALL(cuThreadExchangeStreamCaptureMode, &r->saved) == CUDA_SUCCESS;
}

void vx_capture_relax_end(vx_capture_relax_t *r) {
  if (r->on) VX_CALL(cuThreadExchangeStreamCaptureMode, &r->saved);
  r->on = 0;
}

void vx_capture_relax_force(vx_capture_relax_t *r) {
  r->saved = CU_STREAM_CAPTURE_MODE_RELAXED;
  r->on = VX_CALL(cuThreadExchangeStreamCaptureMode, &r->saved) == CUDA_SUCCESS;
}

int vx_capture_mine(void) {
  return vx_capture_active() && (my_caps > 0 || __atomic_load_n(&saturated, __ATOMIC_RELAXED));
}

CUresult vx_capture_safe_htod(CUdeviceptr dst, const void *src, size_t n) {
  vx_capture_relax_t rx;
  vx_capture_relax_force(&rx);
  CUstream s = move_stream(); /* the current context's: a stream belongs to one */
  CUresult r = s ? VX_CALL(cuMemcpyHtoDAsync_v2, dst, src, n, s) : CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) r = VX_CALL(cuStreamSynchronize, s);
  vx_capture_relax_end(&rx);
  return r;
}
