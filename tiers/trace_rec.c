/* VX_TRACE recording: records encoded with policy/trace.h into a 1 MiB
 * buffer under one lock, written out when full and at exit.  Each traced
 * launch is timed on the device (a timing event pair around it) and its
 * dur_ns filled in once both events complete, in the buffer or, if it was
 * written out meanwhile, in the file. */
#include "trace_rec.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "exec.h"
#include "outfile.h"
#include "registry.h"
#include "trace.h"
#include "driver.h"
#include "log.h"
#include "locks.h"

#define TR_BUF (1u << 20)

static pthread_mutex_t tr_lock = PTHREAD_MUTEX_INITIALIZER;
static int tr_on; /* atomic: recording */
static int tr_fd = -1;
static int tr_ndev; /* devices in the header; 0 until it is written */
static unsigned char *tr_buf;
static size_t tr_len;
static uint64_t tr_written; /* file bytes before tr_buf[0] */

/* Launches being timed: events a (before the kernel) and b (after) and the
 * file offset of the launch's record.  A FIFO of TR_TIMED under tr_lock;
 * only the holder of tr_harvest removes entries, so its head stays put
 * while it queries the driver without tr_lock. */
#define TR_TIMED 8192
typedef struct tr_timed {
  CUevent a, b;
  uint64_t at;
} tr_timed;
static tr_timed tr_q[TR_TIMED];
static size_t tr_qhead, tr_qlen;
static pthread_mutex_t tr_harvest = PTHREAD_MUTEX_INITIALIZER;
/* This thread's launch between trace_rec_launch and trace_rec_launched:
 * armed (its record's offset is known), then started (event a recorded). */
static __thread __attribute__((tls_model("initial-exec"))) struct {
  int armed;
  uint64_t at;
  CUevent a;
} tr_cur;

static uint64_t tr_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int trace_rec_on(void) {
  return __atomic_load_n(&tr_on, __ATOMIC_RELAXED);
}

int trace_rec_init(const char *path, char *why, size_t n) {
  tr_buf = malloc(TR_BUF);
  if (!tr_buf) {
    snprintf(why, n, "out of memory");
    return -ENOMEM;
  }
  /* A regular file only: the header is rewritten in place at the end, and
   * a FIFO's reader would stall every launch.  The open never blocks. */
  tr_fd = vx_outfile_open(path, VX_OUT_REGULAR, why, n);
  if (tr_fd < 0) {
    int e = tr_fd;
    tr_fd = -1;
    free(tr_buf);
    tr_buf = NULL;
    return e;
  }
  __atomic_store_n(&tr_on, 1, __ATOMIC_RELEASE);
  return 0;
}

static int write_all_locked(const void *p, size_t n, off_t at) {
  const unsigned char *b = p;
  while (n) {
    ssize_t w = at < 0 ? write(tr_fd, b, n) : pwrite(tr_fd, b, n, at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -EIO;
    b += w, n -= (size_t)w;
    if (at >= 0) at += w;
  }
  return 0;
}

static void header_locked(pol_trace_header_t *h) {
  h->device_count = (uint32_t)tr_ndev;
  h->chunk_size = 1ull << VX_CHUNK_SHIFT;
  if (VX_REAL_FN(cuEventElapsedTime)) h->flags |= POL_TRACE_MEASURED; /* trace_rec_launched */
  for (int d = 0; d < tr_ndev; d++)
    h->capacity[d] = exec_capacity(d);
}

/* Writes the buffer; on an I/O error recording stops (said once). */
static void flush_locked(void) {
  if (tr_len && write_all_locked(tr_buf, tr_len, -1)) {
    VX_LOG_ONCE(VX_LOG_WARN, "VX_TRACE: write failed; the trace stops here");
    __atomic_store_n(&tr_on, 0, __ATOMIC_RELAXED);
  }
  tr_written += tr_len;
  tr_len = 0;
}

/* The header goes first, once the driver can say how many devices exist. */
static int ensure_header_locked(int ndev) {
  if (tr_ndev) return 0;
  tr_ndev = ndev < 1 ? 1 : ndev > POL_TRACE_MAX_DEVICES ? POL_TRACE_MAX_DEVICES : ndev;
  pol_trace_header_t h = {0};
  header_locked(&h);
  int n = pol_trace_write_header(tr_buf, TR_BUF, &h);
  if (n < 0) return n;
  tr_len = (size_t)n;
  return 0;
}

static int device_count(void) {
  static int n;
  int v = __atomic_load_n(&n, __ATOMIC_RELAXED);
  if (!v) {
    if (VX_CALL(cuDeviceGetCount, &v) != CUDA_SUCCESS || v < 1) v = 1;
    __atomic_store_n(&n, v, __ATOMIC_RELAXED);
  }
  return v;
}

/* Records r; returns the file offset it will have, or UINT64_MAX. */
static uint64_t record(pol_trace_rec_t *r) {
  if (!trace_rec_on()) return UINT64_MAX;
  int ndev = device_count();
  r->time = tr_now();
  uint64_t at = UINT64_MAX;
  vx_mutex_lock(&tr_lock, VX_RANK_TRACE);
  if (tr_on && !ensure_header_locked(ndev) && r->device < (uint32_t)tr_ndev) {
    size_t need = pol_trace_rec_size(r);
    if (tr_len + need > TR_BUF) flush_locked();
    int n = pol_trace_encode(tr_buf + tr_len, TR_BUF - tr_len, r);
    if (n > 0) {
      at = tr_written + tr_len;
      tr_len += (size_t)n;
    }
  }
  vx_mutex_unlock(&tr_lock, VX_RANK_TRACE);
  return at;
}

void trace_rec_alloc(int dev, uint64_t id, uint64_t addr, uint64_t size, uint32_t flags) {
  pol_trace_rec_t r = {.type = POL_TREC_ALLOC,
                       .device = (uint32_t)dev,
                       .alloc_id = id,
                       .addr = addr,
                       .size = size,
                       .flags = flags};
  record(&r);
}

void trace_rec_free(int dev, uint64_t id) {
  pol_trace_rec_t r = {.type = POL_TREC_FREE, .device = (uint32_t)dev, .alloc_id = id};
  record(&r);
}

void trace_rec_launch(int dev, uint64_t kernel, uint64_t stream, const pol_range_t *rg,
                      uint32_t n) {
  pol_trace_rec_t r = {.type = POL_TREC_LAUNCH,
                       .device = (uint32_t)dev,
                       .kernel = kernel,
                       .stream = stream,
                       .nranges = n,
                       .ranges = (pol_range_t *)rg};
  uint64_t at = record(&r);
  tr_cur.armed = at != UINT64_MAX;
  tr_cur.at = at;
  tr_cur.a = NULL;
}

// ---- kernel durations ----

/* Fills in the dur_ns of the record at file offset at. */
static void set_dur_locked(uint64_t at, uint64_t ns) {
  if (at >= tr_written && at - tr_written + POL_TRACE_DUR_AT + 8 <= tr_len) {
    pol_trace_set_dur(tr_buf + (at - tr_written), ns);
  } else if (at < tr_written && tr_fd >= 0) {
    unsigned char rec[POL_TRACE_DUR_AT + 8];
    pol_trace_set_dur(rec, ns);
    write_all_locked(rec + POL_TRACE_DUR_AT, 8, (off_t)(at + POL_TRACE_DUR_AT));
  }
}

static void destroy_pair(CUevent a, CUevent b) {
  if (a) VX_CALL(cuEventDestroy_v2, a);
  if (b) VX_CALL(cuEventDestroy_v2, b);
}

/* Takes the timed launches from the head of the FIFO whose end event has
 * completed (all of them, waiting, when wait is set; else up to 64, so a
 * launch pays for a bounded number).  The caller holds tr_harvest. */
static void harvest(int wait) {
  for (int k = 0; wait || k < 64; k++) {
    vx_mutex_lock(&tr_lock, VX_RANK_TRACE);
    int any = tr_qlen > 0;
    tr_timed t = any ? tr_q[tr_qhead] : (tr_timed){0};
    vx_mutex_unlock(&tr_lock, VX_RANK_TRACE);
    if (!any) return;
    CUresult q = wait ? VX_CALL(cuEventSynchronize, t.b) : VX_CALL(cuEventQuery, t.b);
    if (q == CUDA_ERROR_NOT_READY) return;
    float ms = 0;
    vx_pfn_cuEventElapsedTime elapsed = VX_REAL_FN(cuEventElapsedTime);
    int ok = q == CUDA_SUCCESS && elapsed && elapsed(&ms, t.a, t.b) == CUDA_SUCCESS && ms > 0;
    destroy_pair(t.a, t.b);
    vx_mutex_lock(&tr_lock, VX_RANK_TRACE);
    tr_qhead = (tr_qhead + 1) % TR_TIMED;
    tr_qlen--;
    if (ok) set_dur_locked(t.at, (uint64_t)((double)ms * 1e6 + 0.5));
    vx_mutex_unlock(&tr_lock, VX_RANK_TRACE);
  }
}

void trace_rec_launch_start(CUstream s) {
  if (!tr_cur.armed || tr_cur.a) return;
  CUevent a = NULL;
  if (VX_CALL(cuEventCreate, &a, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
      VX_CALL(cuEventRecord, a, s) != CUDA_SUCCESS) {
    VX_LOG_ONCE(VX_LOG_INFO, "VX_TRACE: a launch could not be timed (dur_ns 0: unknown)");
    destroy_pair(a, NULL);
    tr_cur.armed = 0;
    return;
  }
  tr_cur.a = a;
}

void trace_rec_launched(CUstream s, CUresult r) {
  if (!tr_cur.armed) return;
  tr_cur.armed = 0;
  CUevent a = tr_cur.a, b = NULL;
  tr_cur.a = NULL;
  if (!a) return;
  if (r != CUDA_SUCCESS || VX_CALL(cuEventCreate, &b, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
      VX_CALL(cuEventRecord, b, s) != CUDA_SUCCESS) {
    destroy_pair(a, b);
    return;
  }
  vx_mutex_lock(&tr_lock, VX_RANK_TRACE);
  int queued = tr_qlen < TR_TIMED && tr_fd >= 0;
  if (queued) tr_q[(tr_qhead + tr_qlen++) % TR_TIMED] = (tr_timed){a, b, tr_cur.at};
  vx_mutex_unlock(&tr_lock, VX_RANK_TRACE);
  if (!queued) destroy_pair(a, b); /* a full FIFO: this one stays unknown */
  if (!pthread_mutex_trylock(&tr_harvest)) {
    harvest(0);
    pthread_mutex_unlock(&tr_harvest);
  }
}

void trace_rec_launch_cancel(void) {
  if (tr_cur.a) destroy_pair(tr_cur.a, NULL);
  tr_cur.armed = 0;
  tr_cur.a = NULL;
}

void trace_rec_copy(CUdeviceptr dptr, size_t n, uint32_t dir, CUstream s, int sync) {
  vx_alloc_info_t a; /* reg_lookup: dptr lies in a; record() checks that recording is on */
  if (!n || reg_lookup(dptr, &a) || !a.id || n > a.size - (dptr - a.base)) return;
  pol_trace_rec_t r = {.type = POL_TREC_COPY,
                       .device = (uint32_t)a.dev,
                       .stream = (uint64_t)(uintptr_t)s,
                       .alloc_id = a.id,
                       .offset = dptr - a.base,
                       .bytes = n,
                       .dir = dir,
                       .flags = sync ? POL_COPY_SYNC : 0};
  record(&r);
}

void trace_rec_fini(void) {
  /* The durations still outstanding, while the driver can still say them
   * (an error, such as a context already destroyed, leaves them 0). */
  if (trace_rec_on()) {
    pthread_mutex_lock(&tr_harvest);
    harvest(1);
    pthread_mutex_unlock(&tr_harvest);
  }
  vx_mutex_lock(&tr_lock, VX_RANK_TRACE);
  if (tr_fd >= 0) {
    __atomic_store_n(&tr_on, 0, __ATOMIC_RELAXED);
    flush_locked();
    if (tr_ndev) { /* capacities as they ended up (budgets are set lazily) */
      pol_trace_header_t h = {0};
      header_locked(&h);
      int n = pol_trace_write_header(tr_buf, TR_BUF, &h);
      if (n > 0) write_all_locked(tr_buf, (size_t)n, 0);
    }
    close(tr_fd);
    tr_fd = -1;
    free(tr_buf);
    tr_buf = NULL;
  }
  vx_mutex_unlock(&tr_lock, VX_RANK_TRACE);
}

void trace_rec_atfork_prepare(void) {
  vx_mutex_lock(&tr_lock, VX_RANK_TRACE);
}
void trace_rec_atfork_parent(void) {
  vx_mutex_unlock(&tr_lock, VX_RANK_TRACE);
}
void trace_rec_atfork_child(void) {
  pthread_mutex_init(&tr_lock, NULL);
  __atomic_store_n(&tr_on, 0, __ATOMIC_RELAXED);
  tr_len = 0;
  tr_qlen = 0; /* the parent's events: never queried here */
  pthread_mutex_init(&tr_harvest, NULL);
  tr_cur.armed = 0;
  tr_cur.a = NULL;
  if (tr_fd >= 0) close(tr_fd); /* the parent's file: never touched here */
  tr_fd = -1;
  free(tr_buf);
  tr_buf = NULL;
}
