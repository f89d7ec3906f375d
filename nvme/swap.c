/* The swap object: a private, nameless file in a checked directory, grown in
 * preallocated steps up to a limit, and the I/O engine chosen for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nvme_int.h"
#include "locks.h"

#define GROW_STEP_DEFAULT (64ull << 20)

// ---- messages and small helpers ----

static void say_v(nvme_swap_t *s, unsigned bit, const char *fmt, va_list ap) {
  if (__atomic_fetch_or(&s->said, bit, __ATOMIC_RELAXED) & bit) return;
  if (!s->log) return;
  char msg[256];
  vsnprintf(msg, sizeof msg, fmt, ap);
  s->log(s->log_arg, msg);
}

void nvme_say(nvme_swap_t *s, unsigned bit, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_v(s, bit, fmt, ap);
  va_end(ap);
}

void nvme_fallback(nvme_swap_t *s, unsigned bit, const char *fmt, ...) {
  NVME_STAT_ADD(s, fallbacks, 1);
  va_list ap;
  va_start(ap, fmt);
  say_v(s, bit, fmt, ap);
  va_end(ap);
}

uint64_t nvme_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int nvme_engine_parse(const char *str, nvme_engine_t *out) {
  static const char *const names[] = {"auto", "uring", "pool"};
  for (int i = 0; i < 3; i++)
    if (str && !strcmp(str, names[i])) {
      *out = (nvme_engine_t)i;
      return 0;
    }
  return -EINVAL;
}

const char *nvme_engine_name(nvme_engine_t e) {
  return e == NVME_ENGINE_URING ? "uring" : e == NVME_ENGINE_POOL ? "pool" : "auto";
}

// ---- the directory ----

/* Opens dir as an O_PATH descriptor after the checks DESIGN.md's rules ask. */
static int dir_open(nvme_swap_t *s, const char *dir) {
  struct stat st;
  if (lstat(dir, &st) < 0) {
    int e = errno;
    nvme_say(s, SAY_REFUSED, "nvme: swap directory %s: %s", dir, strerror(e));
    return -e;
  }
  if (S_ISLNK(st.st_mode)) {
    nvme_say(s, SAY_REFUSED,
             "nvme: swap directory %s is a symbolic link: refused (docs/SECURITY.md)", dir);
    return -ELOOP;
  }
  int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    int e = errno == ENOTDIR && S_ISDIR(st.st_mode) ? ELOOP : errno; /* swapped for a link */
    nvme_say(s, SAY_REFUSED, "nvme: swap directory %s: %s", dir, strerror(e));
    return -e;
  }
  if (fstat(dfd, &st) < 0 || !S_ISDIR(st.st_mode)) {
    close(dfd);
    return -ENOTDIR;
  }
  int sticky = (st.st_mode & S_ISVTX) != 0;
  const char *why = NULL;
  if (st.st_uid != geteuid() && !(st.st_uid == 0 && sticky))
    why = "is not owned by you";
  else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky)
    why = "is group- or world-writable without the sticky bit";
  if (why) {
    nvme_say(s, SAY_REFUSED, "nvme: swap directory %s %s: refused (docs/SECURITY.md)", dir, why);
    close(dfd);
    return -EPERM;
  }
  return dfd;
}

// ---- the file ----

static int tmpfile_named(nvme_swap_t *s, int dfd, int flags) {
  for (int tries = 0; tries < 32; tries++) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
      r = nvme_now_ns() ^ ((uint64_t)getpid() << 32);
    char name[40];
    snprintf(name, sizeof name, ".vx-swap-%016llx", (unsigned long long)r);
    int fd = nvme_sys.openat(dfd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return -errno;
    if (nvme_sys.unlinkat(dfd, name, 0) < 0) { /* a name must never outlive open */
      int e = errno;
      close(fd);
      return -e;
    }
    s->tmpfile = 0;
    return fd;
  }
  return -EEXIST;
}

static int file_create(nvme_swap_t *s, int dfd, int flags) {
  int fd = nvme_sys.openat(dfd, ".", flags | O_TMPFILE, 0600);
  if (fd >= 0) {
    s->tmpfile = 1;
    return fd;
  }
  int e = errno;
  if (e == EINVAL && (flags & O_DIRECT)) return -EINVAL; /* the caller retries without O_DIRECT */
  if (e != EOPNOTSUPP && e != EISDIR && e != EINVAL && e != ENOENT) return -e;
  fd = tmpfile_named(s, dfd, flags);
  if (fd >= 0)
    nvme_fallback(s, SAY_TMPFILE,
                  "nvme: O_TMPFILE not supported here (%s): using a file unlinked at once",
                  strerror(e));
  return fd;
}

/* O_DIRECT can be accepted by open and refused by the first write. */
static int direct_probe(nvme_swap_t *s) {
  void *b;
  if (posix_memalign(&b, NVME_ALIGN, NVME_ALIGN)) return -ENOMEM;
  memset(b, 0, NVME_ALIGN);
  ssize_t r = nvme_sys.pwrite(s->fd, b, NVME_ALIGN, 0);
  int e = r < 0 ? errno : 0;
  free(b);
  if (r == (ssize_t)NVME_ALIGN) return 0;
  if (e != EINVAL) return r < 0 ? -e : -EIO;
  int fl = fcntl(s->fd, F_GETFL);
  if (fl < 0 || fcntl(s->fd, F_SETFL, fl & ~O_DIRECT) < 0) return -errno;
  s->o_direct = 0;
  nvme_fallback(s, SAY_DIRECT, "nvme: O_DIRECT writes refused in the swap directory: buffered I/O");
  return 0;
}

static int file_open(nvme_swap_t *s, const nvme_config_t *cfg) {
  int dfd = dir_open(s, cfg->dir);
  if (dfd < 0) return dfd;
  int flags = O_RDWR | O_CLOEXEC;
  int fd = -EINVAL;
  if (!cfg->buffered) {
    fd = file_create(s, dfd, flags | O_DIRECT);
    s->o_direct = fd >= 0;
    if (fd == -EINVAL)
      nvme_fallback(s, SAY_DIRECT, "nvme: O_DIRECT not supported in %s: buffered I/O", cfg->dir);
  }
  if (fd == -EINVAL) fd = file_create(s, dfd, flags);
  close(dfd);
  if (fd < 0) return fd;
  s->fd = fd;
  if (fchmod(fd, 0600) < 0) /* whatever the umask did */
    return -errno;
  return s->o_direct ? direct_probe(s) : 0;
}

// ---- growth and slots ----

static int grow_to(nvme_swap_t *s, uint32_t nslots) {
  off_t from = (off_t)s->slots.nfile * s->chunk, to = (off_t)nslots * s->chunk;
  if (!s->use_ftruncate) {
    if (nvme_sys.fallocate(s->fd, 0, from, to - from) == 0) goto done;
    int e = errno;
    if (e != EOPNOTSUPP && e != ENOSYS) return -e;
    s->use_ftruncate = 1;
    nvme_fallback(s, SAY_FALLOC,
                  "nvme: fallocate not supported (%s): growing the swap file with ftruncate",
                  strerror(e));
  }
  if (nvme_sys.ftruncate(s->fd, to) < 0) return -errno;
done:
  __atomic_store_n(&s->st.file_bytes, (uint64_t)to, __ATOMIC_RELAXED);
  return nvme_slots_resize(&s->slots, nslots);
}

static int grow_locked(nvme_swap_t *s) {
  uint32_t have = s->slots.nfile, room = s->slots.max - have;
  if (!room) return -ENOSPC;
  uint32_t step = s->step < room ? s->step : room;
  int r = grow_to(s, have + step);
  if (r == -ENOSPC && step > 1) /* the disk is nearly full: take what fits */
    r = grow_to(s, have + 1);
  return r;
}

int nvme_slot_take(nvme_swap_t *s, int32_t *slot) {
  vx_mutex_lock(&s->slot_lock, VX_RANK_SLOT);
  int32_t r = nvme_slots_take(&s->slots);
  if (r == -ENOSPC) {
    int g = grow_locked(s);
    r = g < 0 ? g : nvme_slots_take(&s->slots);
  }
  vx_mutex_unlock(&s->slot_lock, VX_RANK_SLOT);
  if (r < 0) return r;
  *slot = r;
  return 0;
}

void nvme_slot_commit(nvme_swap_t *s, int32_t slot, uint32_t len, uint32_t crc) {
  vx_mutex_lock(&s->slot_lock, VX_RANK_SLOT);
  s->slots.tab[slot] = (nvme_slot_t){.len = len, .crc = crc, .state = SLOT_VALID};
  vx_mutex_unlock(&s->slot_lock, VX_RANK_SLOT);
  NVME_STAT_ADD(s, bytes, len);
}

void nvme_slot_drop(nvme_swap_t *s, int32_t slot) {
  uint32_t len;
  vx_mutex_lock(&s->slot_lock, VX_RANK_SLOT);
  nvme_slots_release(&s->slots, slot, &len);
  vx_mutex_unlock(&s->slot_lock, VX_RANK_SLOT);
}

int nvme_slot_get(nvme_swap_t *s, int32_t slot, uint32_t *len, uint32_t *crc) {
  int r = -EINVAL;
  vx_mutex_lock(&s->slot_lock, VX_RANK_SLOT);
  if (slot >= 0 && (uint32_t)slot < s->slots.hwm && s->slots.tab[slot].state == SLOT_VALID) {
    *len = s->slots.tab[slot].len;
    *crc = s->slots.tab[slot].crc;
    r = 0;
  }
  vx_mutex_unlock(&s->slot_lock, VX_RANK_SLOT);
  return r;
}

int nvme_slot_free(nvme_swap_t *s, int32_t slot) {
  uint32_t len = 0;
  vx_mutex_lock(&s->slot_lock, VX_RANK_SLOT);
  int r = nvme_slots_release(&s->slots, slot, &len);
  vx_mutex_unlock(&s->slot_lock, VX_RANK_SLOT);
  if (!r) NVME_STAT_SUB(s, bytes, len);
  return r;
}

// ---- open and close ----

static int config_check(const nvme_config_t *cfg, nvme_swap_t *s) {
  if (!cfg || !cfg->dir || !*cfg->dir) return -EINVAL;
  s->chunk = cfg->chunk ? cfg->chunk : NVME_CHUNK_DEFAULT;
  s->limit = cfg->limit ? cfg->limit : NVME_LIMIT_DEFAULT;
  s->qd = cfg->qd ? cfg->qd : NVME_QD_DEFAULT;
  s->engine = cfg->engine;
  if (s->chunk % NVME_ALIGN || s->chunk > NVME_CHUNK_MAX || s->qd < 1 || s->qd > NVME_QD_MAX ||
      cfg->engine > NVME_ENGINE_POOL || cfg->pool_threads < 0 || cfg->pool_threads > 4)
    return -EINVAL;
  uint64_t max = s->limit / s->chunk;
  if (max == 0 || max > INT32_MAX) return -EINVAL;
  uint64_t step = (cfg->grow_step ? cfg->grow_step : GROW_STEP_DEFAULT) / s->chunk;
  s->step = (uint32_t)(step ? (step < max ? step : max) : 1);
  return nvme_slots_init(&s->slots, (uint32_t)max);
}

static int engine_open(nvme_swap_t *s, const nvme_config_t *cfg) {
  int threads = cfg->pool_threads ? cfg->pool_threads : 4;
  if (threads < 2) threads = 2;
  if (s->engine != NVME_ENGINE_POOL) {
    int r = nvme_uring_init(s, s->fd, s->qd, &s->eng);
    if (!r) {
      s->engine = NVME_ENGINE_URING;
      return 0;
    }
    if (s->engine == NVME_ENGINE_URING) return r;
    nvme_fallback(s, SAY_URING,
                  "nvme: io_uring unavailable (%s): using a %d-thread pread/pwrite pool",
                  strerror(-r), threads);
  }
  s->engine = NVME_ENGINE_POOL;
  return nvme_pool_init(s, s->fd, s->qd, threads, &s->eng);
}

int nvme_swap_open(const nvme_config_t *cfg, nvme_swap_t **out) {
  nvme_swap_t *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  s->fd = -1;
  int r = pthread_mutex_init(&s->lock, NULL);
  if (r) {
    free(s);
    return -r;
  }
  pthread_mutex_init(&s->slot_lock, NULL); /* cannot fail with default attributes */
  if (cfg) {
    s->log = cfg->log;
    s->log_arg = cfg->log_arg;
  }
  r = config_check(cfg, s);
  if (!r) r = file_open(s, cfg);
  if (!r) r = engine_open(s, cfg);
  if (r) {
    nvme_swap_close(s);
    return r;
  }
  *out = s;
  return 0;
}

void nvme_swap_close(nvme_swap_t *s) {
  if (!s) return;
  nvme_bufs_drop_locked(s); /* while the engine can still unregister them */
  if (s->eng) s->eng->ops->fini(s->eng);
  if (s->fd >= 0) close(s->fd);
  nvme_slots_fini(&s->slots);
  pthread_mutex_destroy(&s->lock);
  pthread_mutex_destroy(&s->slot_lock);
  free(s);
}

void nvme_swap_abandon(nvme_swap_t *s) {
  if (!s) return;
  if (s->eng) s->eng->ops->abandon(s->eng);
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

// ---- queries ----

void nvme_stats_get(const nvme_swap_t *s, nvme_stats_t *out) {
  const uint64_t *src = (const uint64_t *)&s->st;
  uint64_t *dst = (uint64_t *)out;
  for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
    dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

void nvme_swap_info(const nvme_swap_t *s, nvme_info_t *out) {
  nvme_swap_t *m = (nvme_swap_t *)s; /* the lock is not part of the value */
  vx_mutex_lock(&m->slot_lock, VX_RANK_SLOT);
  *out = (nvme_info_t){.engine = s->engine,
                       .o_direct = s->o_direct,
                       .tmpfile = s->tmpfile,
                       .fixed_buffers = __atomic_load_n(&s->fixed_bufs, __ATOMIC_RELAXED),
                       .qd = s->qd,
                       .chunk = s->chunk,
                       .limit = s->limit,
                       .slots_used = s->slots.used,
                       .slots_file = s->slots.nfile};
  vx_mutex_unlock(&m->slot_lock, VX_RANK_SLOT);
}

int nvme_swap_flush(nvme_swap_t *s) {
  if (fdatasync(s->fd) < 0) return -errno;
  int r = posix_fadvise(s->fd, 0, 0, POSIX_FADV_DONTNEED);
  return -r;
}
