/* The deferred-free queue (defer.h): entries pushed by cuMemFreeAsync of
 * vx's managed memory, released by defer_drain once their event is done. */
#include "defer.h"

#include <pthread.h>
#include <stdlib.h>

#include "capture.h"
#include "driver.h"
#include "locks.h"

struct deferred {
  vx_alloc_info_t a;
  CUevent ev; /* NULL: not armed yet (the stream's capture status was unknown) */
  CUstream s; /* the stream the free was ordered on */
  struct deferred *next;
};

static pthread_mutex_t defer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct deferred *defer_head;

static void defer_push_locked(struct deferred *list) {
  while (list) {
    struct deferred *next = list->next;
    list->next = defer_head;
    __atomic_store_n(&defer_head, list, __ATOMIC_RELAXED);
    list = next;
  }
}

/* Records the event after which d's memory may go: 0, or -1 (d->ev NULL). */
static int defer_arm(struct deferred *d) {
  if (VX_CALL(cuEventCreate, &d->ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    d->ev = NULL;
    return -1;
  }
  if (VX_CALL(cuEventRecord, d->ev, d->s) != CUDA_SUCCESS) {
    VX_CALL(cuEventDestroy_v2, d->ev);
    d->ev = NULL;
    return -1;
  }
  return 0;
}

int defer_free(const vx_alloc_info_t *a, CUstream s, int armed) {
  struct deferred *d = malloc(sizeof *d);
  if (!d) return -1;
  *d = (struct deferred){.a = *a, .s = s};
  if (armed && defer_arm(d)) {
    free(d);
    return -1;
  }
  vx_mutex_lock(&defer_lock, VX_RANK_DEFER);
  defer_push_locked(d);
  vx_mutex_unlock(&defer_lock, VX_RANK_DEFER);
  return 0;
}

/* An unarmed entry: armed now if its stream is known not to be capturing. */
static int defer_try_arm(struct deferred *d) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (VX_CALL(cuStreamIsCapturing, d->s, &st) != CUDA_SUCCESS ||
      st != CU_STREAM_CAPTURE_STATUS_NONE)
    return -1;
  return defer_arm(d);
}

void defer_drain(defer_release_fn release) {
  if (!__atomic_load_n(&defer_head, __ATOMIC_RELAXED)) return;
  /* cuEventQuery and cuMemFree are illegal during a capture (any thread,
   * global mode; cuMemFree synchronises the context in every mode): the
   * frees wait for the first drain after the captures ended. */
  if (vx_capture_active()) return;
  vx_mutex_lock(&defer_lock, VX_RANK_DEFER);
  struct deferred *list = defer_head, *keep = NULL;
  __atomic_store_n(&defer_head, NULL, __ATOMIC_RELAXED);
  vx_mutex_unlock(&defer_lock, VX_RANK_DEFER);
  while (list) {
    struct deferred *d = list;
    list = d->next;
    if ((!d->ev && defer_try_arm(d)) || VX_CALL(cuEventQuery, d->ev) == CUDA_ERROR_NOT_READY) {
      d->next = keep;
      keep = d;
      continue;
    }
    release(&d->a);
    VX_CALL(cuEventDestroy_v2, d->ev);
    free(d);
  }
  if (keep) {
    vx_mutex_lock(&defer_lock, VX_RANK_DEFER);
    defer_push_locked(keep);
    vx_mutex_unlock(&defer_lock, VX_RANK_DEFER);
  }
}

void defer_atfork_prepare(void) {
  vx_mutex_lock(&defer_lock, VX_RANK_DEFER);
}
void defer_atfork_parent(void) {
  vx_mutex_unlock(&defer_lock, VX_RANK_DEFER);
}
void defer_atfork_child(void) {
  pthread_mutex_init(&defer_lock, NULL);
}
