/* The report's timeline: a sampler thread (started only with VX_REPORT)
 * reads vx's counters every period into a bounded ring, halving it when full. */
#include "timeline.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "ctr.h"
#include "thread.h"
#include "log.h"
#include "options.h"
#include "locks.h"

static pthread_mutex_t tl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tl_cond; /* CLOCK_MONOTONIC; signalled to stop */
static tl_sample_t tl_ring[TL_MAX_SAMPLES];
static size_t tl_n;
static unsigned tl_period = TL_FIRST_PERIOD_MS;
static struct timespec tl_start;
static pthread_t tl_thread;
static int tl_running; /* under tl_lock: a sampler thread exists */
static int tl_stop;    /* under tl_lock: the sampler must leave */
static int tl_active;  /* atomic: timeline_init ran (VX_REPORT set) */

// ---- sampling ----

static double since_start(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - tl_start.tv_sec) + (now.tv_nsec - tl_start.tv_nsec) * 1e-9;
}

static uint64_t ld(int dev, int id) {
  return __atomic_load_n(&vx_ctr[dev].v[id], __ATOMIC_RELAXED);
}

/* The partition of what is live.  managed_bytes holds vx's managed
 * allocations wherever their pages are; the static tier's allocations
 * (host_tier_bytes) are in host memory; the NVMe tier's accounting knows
 * how much of them is in the swap (nvme_bytes) and how much it holds on the
 * host (host_held_bytes, the static tier's resident part included when it
 * is on: hence the larger of the two, not their sum).  What remains of the
 * movable bytes is "managed": on the device or on the host, not known. */
void timeline_partition(tl_sample_t *s, uint64_t native, uint64_t vmm, uint64_t managed,
                        uint64_t host_tier, uint64_t app_managed, uint64_t host_held,
                        uint64_t nvme) {
  uint64_t movable = managed + host_tier;
  s->live = native + vmm + movable + app_managed;
  s->native = native + vmm;
  s->nvme = nvme < movable ? nvme : movable;
  uint64_t host = host_tier > host_held ? host_tier : host_held;
  s->host = host < movable - s->nvme ? host : movable - s->nvme;
  s->managed = s->live - s->native - s->host - s->nvme;
}

static void read_sample(tl_sample_t *s) {
  *s = (tl_sample_t){.t = since_start()};
  uint64_t c[7] = {0};
  static const int ids[7] = {VX_CTR_native_bytes,      VX_CTR_vmm_bytes,
                             VX_CTR_managed_bytes,     VX_CTR_host_tier_bytes,
                             VX_CTR_app_managed_bytes, VX_CTR_host_held_bytes,
                             VX_CTR_nvme_bytes};
  int ndev = ctr_devices();
  for (int d = 0; d < ndev && d < VX_MAX_DEVICES; d++) {
    for (int k = 0; k < 7; k++)
      c[k] += ld(d, ids[k]);
    s->up += ld(d, VX_CTR_bytes_up);
    s->down += ld(d, VX_CTR_bytes_down);
  }
  timeline_partition(s, c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
}

void timeline_read(tl_sample_t *s) {
  read_sample(s);
}

/* Keeps every other sample (the first and, by the caller, the newest). */
static void decimate_locked(void) {
  for (size_t i = 1; 2 * i < tl_n; i++)
    tl_ring[i] = tl_ring[2 * i];
  tl_n = (tl_n + 1) / 2;
  tl_period *= 2;
}

static void add_sample_locked(void) {
  if (tl_n == TL_MAX_SAMPLES) decimate_locked();
  read_sample(&tl_ring[tl_n++]);
}

// ---- the sampler thread ----

static void deadline(struct timespec *ts, unsigned ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void (*tl_every_fn)(void); /* set before timeline_init */
static unsigned tl_every_s;

void timeline_every(void (*fn)(void), unsigned seconds) {
  tl_every_fn = fn;
  tl_every_s = seconds;
}

/* Samples, and every tl_every_s seconds calls tl_every_fn (the report's
 * rewrite) with tl_lock released: the report copies the timeline. */
static void *sampler(void *arg) {
  (void)arg;
  double period = tl_every_fn ? (double)tl_every_s : 0, last = mono_s();
  vx_mutex_lock(&tl_lock, VX_RANK_TIMELINE);
  while (!tl_stop) {
    struct timespec ts;
    deadline(&ts, tl_period);
    int rc = 0;
    while (!tl_stop && rc != ETIMEDOUT)
      rc = pthread_cond_timedwait(&tl_cond, &tl_lock, &ts);
    if (tl_stop) break;
    add_sample_locked();
    if (period > 0 && mono_s() - last >= period) {
      vx_mutex_unlock(&tl_lock, VX_RANK_TIMELINE);
      tl_every_fn();
      last = mono_s();
      vx_mutex_lock(&tl_lock, VX_RANK_TIMELINE);
    }
  }
  vx_mutex_unlock(&tl_lock, VX_RANK_TIMELINE);
  return NULL;
}

/* Returns 0 or -errno.  Caller holds tl_lock. */
static int start_locked(void) {
  tl_stop = 0;
  int rc = vx_thread_start(&tl_thread, sampler, NULL);
  tl_running = rc == 0;
  return rc;
}

static void init_cond(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&tl_cond, &ca);
  pthread_condattr_destroy(&ca);
}

// ---- public ----

int timeline_init(void) {
  if (!vx_opt.REPORT.s[0]) return 0;
  init_cond();
  clock_gettime(CLOCK_MONOTONIC, &tl_start);
  vx_mutex_lock(&tl_lock, VX_RANK_TIMELINE);
  add_sample_locked();
  int rc = start_locked();
  vx_mutex_unlock(&tl_lock, VX_RANK_TIMELINE);
  __atomic_store_n(&tl_active, 1, __ATOMIC_RELEASE);
  if (rc)
    vx_log(VX_LOG_WARN, "no timeline sampler thread (%s): the report has few samples",
           strerror(rc < 0 ? -rc : rc));
  return rc;
}

void timeline_fini(void) {
  if (!__atomic_load_n(&tl_active, __ATOMIC_ACQUIRE)) return;
  vx_mutex_lock(&tl_lock, VX_RANK_TIMELINE);
  int join = tl_running;
  tl_stop = 1;
  tl_running = 0;
  pthread_cond_broadcast(&tl_cond);
  vx_mutex_unlock(&tl_lock, VX_RANK_TIMELINE);
  if (join) pthread_join(tl_thread, NULL);
  timeline_sample();
}

void timeline_sample(void) {
  if (!__atomic_load_n(&tl_active, __ATOMIC_ACQUIRE)) return;
  vx_mutex_lock(&tl_lock, VX_RANK_TIMELINE);
  add_sample_locked();
  vx_mutex_unlock(&tl_lock, VX_RANK_TIMELINE);
}

size_t timeline_copy(tl_sample_t *out, size_t max) {
  vx_mutex_lock(&tl_lock, VX_RANK_TIMELINE);
  size_t n = tl_n < max ? tl_n : max;
  for (size_t i = 0; i < n; i++)
    out[i] = tl_ring[i];
  vx_mutex_unlock(&tl_lock, VX_RANK_TIMELINE);
  return n;
}

unsigned timeline_period_ms(void) {
  vx_mutex_lock(&tl_lock, VX_RANK_TIMELINE);
  unsigned p = tl_period;
  vx_mutex_unlock(&tl_lock, VX_RANK_TIMELINE);
  return p;
}

void timeline_atfork_prepare(void) {
  vx_mutex_lock(&tl_lock, VX_RANK_TIMELINE);
}
void timeline_atfork_parent(void) {
  vx_mutex_unlock(&tl_lock, VX_RANK_TIMELINE);
}
void timeline_atfork_child(void) {
  pthread_mutex_init(&tl_lock, NULL);
  if (!__atomic_load_n(&tl_active, __ATOMIC_RELAXED)) return;
  init_cond();
  tl_running = 0;
}
