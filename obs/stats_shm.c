/* stats_shm.c: the live stats segment that `vx stat`/`vx top` read.
 * Writer (create, heartbeat, destroy) for libvx; validating reader for tools. */
#include "stats_shm.h"

#include "thread.h"
#include "locks.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(vx_stats_hdr_t) % 8 == 0, "counters must stay 8-byte aligned");
_Static_assert(sizeof(VX_STATS_MAGIC) == 8, "magic is 8 bytes");

static void set_err(char *err, size_t errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

char *vx_stats_shm_path(uid_t uid, pid_t pid, char *buf, size_t len) {
  snprintf(buf, len, "/dev/shm/vx-%u-%d", (unsigned)uid, (int)pid);
  return buf;
}

static size_t layout_size(uint64_t hsize, uint64_t ndev, uint64_t ncounters) {
  return (size_t)(hsize + ndev * VX_LIMIT_COUNT * 8 + ndev * ncounters * 8);
}

// ---- validation (pure) ----

int vx_stats_validate(const void *buf, size_t len, vx_stats_hdr_t *hdr_out, char *err,
                      size_t errlen) {
  vx_stats_hdr_t h;
  if (!buf || len < sizeof h)
    return set_err(err, errlen, "segment shorter than its header"), -EBADMSG;
  memcpy(&h, buf, sizeof h);
  if (memcmp(h.magic, VX_STATS_MAGIC, sizeof h.magic))
    return set_err(err, errlen, "bad magic (not a vx stats segment, or not ready)"), -EBADMSG;
  if (h.version != VX_STATS_VERSION)
    return set_err(err, errlen, "segment version differs from this tool's"), -EPROTONOSUPPORT;
  if (h.header_size != sizeof h) return set_err(err, errlen, "bad header size"), -EBADMSG;
  if (h.ndev < 1 || h.ndev > VX_STATS_MAX_DEV)
    return set_err(err, errlen, "device count out of range"), -EBADMSG;
  if (h.ncounters < 1 || h.ncounters > VX_STATS_MAX_COUNTERS)
    return set_err(err, errlen, "counter count out of range"), -EBADMSG;
  if (h.total_size != layout_size(h.header_size, h.ndev, h.ncounters))
    return set_err(err, errlen, "total size inconsistent with the counts"), -EBADMSG;
  if (h.total_size > len || h.total_size > VX_STATS_MAX_SIZE)
    return set_err(err, errlen, "total size past the end of the segment"), -EBADMSG;
  if (h.pid <= 0) return set_err(err, errlen, "bad pid"), -EBADMSG;
  if (!memchr(h.cmdline, 0, sizeof h.cmdline))
    return set_err(err, errlen, "command line not terminated"), -EBADMSG;
  if (hdr_out) *hdr_out = h;
  return 0;
}

int vx_stats_check_owner(const struct stat *st, uid_t uid) {
  if (!S_ISREG(st->st_mode) || st->st_uid != uid) return -EPERM;
  if ((st->st_mode & 07777) != 0600) return -EACCES;
  return 0;
}

// ---- reader ----

static int map_checked(int fd, pid_t pid, vx_stats_view_t *v) {
  struct stat st;
  if (fstat(fd, &st)) return -errno;
  int rc = vx_stats_check_owner(&st, geteuid());
  if (rc) return rc;
  if (st.st_size < (off_t)sizeof(vx_stats_hdr_t) || st.st_size > (off_t)VX_STATS_MAX_SIZE)
    return -EBADMSG;
  size_t len = (size_t)st.st_size;
  void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return -errno;
  vx_stats_hdr_t h;
  rc = vx_stats_validate(map, len, &h, NULL, 0);
  if (!rc && (h.pid != pid || h.uid != st.st_uid)) rc = -EBADMSG;
  if (rc) {
    munmap(map, len);
    return rc;
  }
  v->hdr = h;
  v->map = map;
  v->map_len = len;
  v->limits = (const uint64_t *)((const char *)map + h.header_size);
  v->counters = v->limits + (size_t)h.ndev * VX_LIMIT_COUNT;
  return 0;
}

int vx_stats_shm_open(pid_t pid, vx_stats_view_t *v) {
  char path[64];
  vx_stats_shm_path(geteuid(), pid, path, sizeof path);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return errno == ELOOP ? -EPERM : -errno;
  int rc = map_checked(fd, pid, v);
  close(fd);
  return rc;
}

void vx_stats_shm_close(vx_stats_view_t *v) {
  if (v->map) munmap(v->map, v->map_len);
  memset(v, 0, sizeof *v);
}

uint64_t vx_stats_get(const vx_stats_view_t *v, unsigned dev, unsigned idx) {
  if (dev >= v->hdr.ndev || idx >= v->hdr.ncounters) return 0;
  return __atomic_load_n(&v->counters[(size_t)dev * v->hdr.ncounters + idx], __ATOMIC_RELAXED);
}

uint64_t vx_stats_limit(const vx_stats_view_t *v, unsigned dev, unsigned which) {
  if (dev >= v->hdr.ndev || which >= VX_LIMIT_COUNT) return 0;
  return __atomic_load_n(&v->limits[(size_t)dev * VX_LIMIT_COUNT + which], __ATOMIC_RELAXED);
}

uint64_t vx_stats_heartbeat(const vx_stats_view_t *v) {
  const vx_stats_hdr_t *live = v->map;
  return __atomic_load_n(&live->heartbeat_ns, __ATOMIC_RELAXED);
}

int vx_stats_dev_active(const vx_stats_view_t *v, unsigned dev) {
  if (dev == 0) return 1;
  for (unsigned l = 0; l < VX_LIMIT_COUNT; l++)
    if (vx_stats_limit(v, dev, l)) return 1;
  for (unsigned i = 0; i < v->hdr.ncounters; i++)
    if (vx_stats_get(v, dev, i)) return 1;
  return 0;
}

// ---- writer ----

static vx_stats_hdr_t *w_hdr;
static size_t w_len;
static pid_t w_pid;
static char w_name[64];

static void read_cmdline(char *out, size_t cap) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read(fd, out, cap - 1);
  if (fd >= 0) close(fd);
  if (n < 0) n = 0;
  out[n] = 0;
  while (n > 0 && out[n - 1] == 0)
    n--;
  for (ssize_t i = 0; i < n; i++)
    if (out[i] == 0) out[i] = ' ';
}

/* O_EXCL create; a stale segment of ours under our own pid is replaced. */
static int create_fd(char *err, size_t errlen) {
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = shm_open(w_name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    if (errno != EEXIST) break;
    struct stat st;
    fd = shm_open(w_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    int ours = fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid();
    if (fd >= 0) close(fd);
    if (!ours) {
      set_err(err, errlen, "a stats segment with our name exists and is not ours; not reusing it");
      return -EEXIST;
    }
    shm_unlink(w_name); /* left by a dead process whose pid we now have */
  }
  int e = errno;
  if (err && errlen) snprintf(err, errlen, "shm_open /dev/shm%s: %s", w_name, strerror(e));
  return -e;
}

static void fill_header(vx_stats_hdr_t *h, uint32_t ndev, size_t len) {
  h->version = VX_STATS_VERSION;
  h->header_size = sizeof *h;
  h->total_size = len;
  h->pid = (int32_t)w_pid;
  h->uid = (uint32_t)geteuid();
  h->ndev = ndev;
  h->ncounters = VX_STATS_NCOUNTERS;
  h->start_ns = now_ns();
  h->heartbeat_ns = h->start_ns;
  read_cmdline(h->cmdline, sizeof h->cmdline);
  uint64_t magic;
  memcpy(&magic, VX_STATS_MAGIC, sizeof magic);
  __atomic_store_n(&h->magic_word, magic, __ATOMIC_RELEASE); /* last: now it validates */
}

uint64_t *vx_stats_shm_create(int ndev, const uint64_t *limits, char *err, size_t errlen) {
  if (w_hdr) return set_err(err, errlen, "stats segment already created"), NULL;
  if (ndev < 1 || (unsigned)ndev > VX_STATS_MAX_DEV)
    return set_err(err, errlen, "stats segment: device count out of range"), NULL;
  w_pid = getpid();
  snprintf(w_name, sizeof w_name, "/vx-%u-%d", (unsigned)geteuid(), (int)w_pid);
  int fd = create_fd(err, errlen);
  if (fd < 0) return NULL;
  size_t len = layout_size(sizeof(vx_stats_hdr_t), (unsigned)ndev, VX_STATS_NCOUNTERS);
  void *map = MAP_FAILED;
  if (!fchmod(fd, 0600) && !ftruncate(fd, (off_t)len))
    map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (map == MAP_FAILED) {
    shm_unlink(w_name);
    if (err && errlen) snprintf(err, errlen, "stats segment /dev/shm%s: %s", w_name, strerror(e));
    return NULL;
  }
  w_hdr = map;
  w_len = len;
  if (limits)
    memcpy((char *)map + sizeof(vx_stats_hdr_t), limits, (size_t)ndev * VX_LIMIT_COUNT * 8);
  fill_header(w_hdr, (uint32_t)ndev, len);
  return (uint64_t *)((char *)map + sizeof(vx_stats_hdr_t)) + (size_t)ndev * VX_LIMIT_COUNT;
}

void vx_stats_shm_set_limits(const uint64_t *limits) {
  if (!w_hdr || !limits) return;
  uint64_t *dst = (uint64_t *)(w_hdr + 1);
  for (size_t i = 0; i < (size_t)w_hdr->ndev * VX_LIMIT_COUNT; i++)
    __atomic_store_n(&dst[i], limits[i], __ATOMIC_RELAXED);
}

void vx_stats_shm_heartbeat(void) {
  if (w_hdr) __atomic_store_n(&w_hdr->heartbeat_ns, now_ns(), __ATOMIC_RELAXED);
}

// ---- publisher thread (vx_stats_shm_publish) ----

static const uint64_t *p_live;
static uint64_t *p_dst;
static size_t p_n;
static pthread_t p_thread;
static int p_running, p_stop;
static pthread_mutex_t p_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t p_cv;

static void (*p_before)(void); /* atomic: vx_stats_shm_before_copy */

void vx_stats_shm_before_copy(void (*fn)(void)) {
  __atomic_store_n(&p_before, fn, __ATOMIC_RELEASE);
}

static void publish_copy(void) {
  void (*before)(void) = __atomic_load_n(&p_before, __ATOMIC_ACQUIRE);
  if (before) before(); /* with no lock held: it may ask the driver */
  for (size_t i = 0; i < p_n; i++)
    __atomic_store_n(&p_dst[i], __atomic_load_n(&p_live[i], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  vx_stats_shm_heartbeat();
}

static void *publish_main(void *arg) {
  (void)arg;
  vx_mutex_lock(&p_mu, VX_RANK_PUBLISH);
  while (!p_stop) {
    vx_mutex_unlock(&p_mu, VX_RANK_PUBLISH);
    publish_copy();
    vx_mutex_lock(&p_mu, VX_RANK_PUBLISH);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += VX_STATS_PERIOD_MS * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    if (!p_stop) pthread_cond_timedwait(&p_cv, &p_mu, &ts);
  }
  vx_mutex_unlock(&p_mu, VX_RANK_PUBLISH);
  publish_copy();
  return NULL;
}

static void publish_stop(void) {
  if (!p_running) return;
  p_running = 0;
  if (getpid() != w_pid) return; /* a forked child: the thread stayed in the parent */
  vx_mutex_lock(&p_mu, VX_RANK_PUBLISH);
  p_stop = 1;
  pthread_cond_signal(&p_cv);
  vx_mutex_unlock(&p_mu, VX_RANK_PUBLISH);
  pthread_join(p_thread, NULL);
}

int vx_stats_shm_publish(const void *live, int ndev) {
  char err[160];
  uint64_t *dst = vx_stats_shm_create(ndev, NULL, err, sizeof err);
  if (!dst) return -EIO;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p_cv, &ca);
  pthread_condattr_destroy(&ca);
  p_live = live, p_dst = dst, p_n = (size_t)ndev * VX_STATS_NCOUNTERS, p_stop = 0;
  int rc = vx_thread_start(&p_thread, publish_main, NULL);
  if (rc) {
    vx_stats_shm_destroy();
    return rc;
  }
  p_running = 1;
  atexit(vx_stats_shm_destroy);
  return 0;
}

void vx_stats_shm_destroy(void) {
  publish_stop();
  if (!w_hdr) return;
  if (getpid() == w_pid) shm_unlink(w_name);
  munmap(w_hdr, w_len);
  w_hdr = NULL;
}
