/* ledger.c: the per-device budget ledger shared by a user's vx processes.
 * A robust process-shared mutex guards a fixed table of {pid, start, bytes}. */
#include "ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEDGER_MAGIC UINT64_C(0x7678206c65646772) /* "vx ledgr" */
#define LEDGER_VERSION 1u
#define LEDGER_KEY_MAX 64

struct ledger_slot {
  int32_t pid; /* 0 = free */
  uint32_t reserved;
  uint64_t start; /* /proc start time; 0 = unknown (no procfs) */
  uint64_t bytes;
};

/* The layout of the shared segment; its size is part of the check. */
struct ledger_seg {
  uint64_t magic;
  uint32_t version;
  uint32_t nslots;
  pthread_mutex_t lock;
  struct ledger_slot slot[LEDGER_SLOTS];
};

struct vx_ledger {
  struct ledger_seg *seg;
  int shared;   /* seg is the mapped segment (else calloc'ed) */
  int observer; /* holds no slot */
  int slot;     /* own slot index, -1 when none */
  pid_t pid;    /* the process that owns `slot` (fork detection) */
  uint64_t cap;
};

// ---- small helpers ----

static void say(char *err, size_t n, const char *fmt, ...) {
  if (!err || n == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

static int key_ok(const char *key) {
  size_t len = key ? strlen(key) : 0;
  if (len == 0 || len > LEDGER_KEY_MAX) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = key[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-';
    if (!ok) return 0;
  }
  return 1;
}

static void seg_name(char *buf, size_t n, const char *key) {
  snprintf(buf, n, "/vx-ledger-%u-%s", (unsigned)geteuid(), key);
}

// ---- process liveness ----

/* 1 and *start set: running; 0: gone or zombie; -1: cannot tell. */
static int proc_stat(pid_t pid, uint64_t *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? 0 : -1;
  ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got <= 0) return got == 0 ? 0 : -1;
  buf[got] = '\0';
  char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
  if (!p || p[1] != ' ') return -1;
  char state = p[2];
  if (state == 'Z' || state == 'X' || state == 'x') return 0;
  p += 2;
  for (int field = 3; field < 22; field++) { /* skip to field 22 */
    p = strchr(p, ' ');
    if (!p) return -1;
    p++;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (errno || end == p) return -1;
  *start = v;
  return 1;
}

uint64_t ledger_proc_start(pid_t pid) {
  uint64_t start = 0;
  return proc_stat(pid, &start) == 1 ? start : 0;
}

/* A slot's holder is alive unless proven dead: ESRCH, a zombie, or a
 * different start time (the pid was reused). */
static int slot_alive(const struct ledger_slot *s) {
  if (s->pid <= 0) return 0;
  if (kill(s->pid, 0) != 0 && errno == ESRCH) return 0;
  if (s->start == 0) return 1;
  uint64_t start = 0;
  int r = proc_stat(s->pid, &start);
  if (r < 0) return 1;
  return r == 1 && start == s->start;
}

// ---- the table (caller holds seg->lock) ----

static void reclaim_locked(struct ledger_seg *s, int self) {
  for (int i = 0; i < LEDGER_SLOTS; i++) {
    if (i != self && s->slot[i].pid != 0 && !slot_alive(&s->slot[i]))
      memset(&s->slot[i], 0, sizeof s->slot[i]);
  }
}

/* Sum of every held share, saturating at UINT64_MAX. */
static uint64_t total_locked(const struct ledger_seg *s) {
  uint64_t sum = 0;
  for (int i = 0; i < LEDGER_SLOTS; i++) {
    if (s->slot[i].pid == 0) continue;
    uint64_t b = s->slot[i].bytes;
    sum = b > UINT64_MAX - sum ? UINT64_MAX : sum + b;
  }
  return sum;
}

/* Takes a free (or reclaimed) slot for the calling process; index or -ENOSPC. */
static int claim_locked(struct ledger_seg *s) {
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < LEDGER_SLOTS; i++) {
      if (s->slot[i].pid != 0) continue;
      s->slot[i].pid = (int32_t)getpid();
      s->slot[i].start = ledger_proc_start(getpid());
      s->slot[i].bytes = 0;
      return i;
    }
    reclaim_locked(s, -1);
  }
  return -ENOSPC;
}

static int seg_lock(struct ledger_seg *s, int self) {
  int rc = pthread_mutex_lock(&s->lock);
  if (rc == EOWNERDEAD) { /* the holder died: the table is consistent slot by slot */
    pthread_mutex_consistent(&s->lock);
    reclaim_locked(s, self);
    rc = 0;
  }
  return -rc;
}

static void seg_unlock(struct ledger_seg *s) {
  pthread_mutex_unlock(&s->lock);
}

static int seg_init_lock(struct ledger_seg *s, int pshared) {
  pthread_mutexattr_t a;
  int rc = pthread_mutexattr_init(&a);
  if (rc) return -rc;
  if (pshared) {
    rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (!rc) rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  }
  if (!rc) rc = pthread_mutex_init(&s->lock, &a);
  pthread_mutexattr_destroy(&a);
  return -rc;
}

/* After fork() the child inherits the parent's handle: give it a slot of its
 * own rather than touching the parent's.  Caller holds the lock. */
static int self_locked(vx_ledger_t *l) {
  if (l->observer) return -EPERM;
  if (l->pid == getpid()) return l->slot;
  int i = claim_locked(l->seg);
  if (i < 0) return i;
  l->slot = i;
  l->pid = getpid();
  return i;
}

// ---- mapping the segment ----

/* Checks (and, when empty or abandoned mid-creation, initialises) the
 * segment behind fd; the caller holds flock(fd).  0 or -errno, err filled. */
static int seg_check(int fd, int create, const char *name, char *err, size_t n) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  if (st.st_uid != geteuid()) {
    say(err, n, "/dev/shm%s is owned by uid %u, not by this user", name, (unsigned)st.st_uid);
    return -EACCES;
  }
  if (st.st_size == 0 && create) {
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, sizeof(struct ledger_seg)) != 0) return -errno;
    return 0;
  }
  if ((st.st_mode & 07777) != 0600) {
    say(err, n, "/dev/shm%s has mode %04o, not 0600", name, (unsigned)(st.st_mode & 07777));
    return -EPERM;
  }
  if (st.st_size != (off_t)sizeof(struct ledger_seg)) {
    say(err, n, "/dev/shm%s has a foreign layout (%lld bytes)", name, (long long)st.st_size);
    return -EPROTO;
  }
  return 0;
}

static int seg_map_fd(int fd, int create, const char *name, struct ledger_seg **out, char *err,
                      size_t n) {
  int rc = seg_check(fd, create, name, err, n);
  if (rc) return rc;
  void *p = mmap(NULL, sizeof(struct ledger_seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -errno;
  struct ledger_seg *s = p;
  if (s->magic == 0 && create) {
    /* new, or its creator died before finishing (magic is set last, under
     * the flock we now hold): ours to initialise */
    rc = seg_init_lock(s, 1);
    if (!rc) {
      s->version = LEDGER_VERSION;
      s->nslots = LEDGER_SLOTS;
      __atomic_store_n(&s->magic, LEDGER_MAGIC, __ATOMIC_RELEASE);
    }
  } else if (s->magic != LEDGER_MAGIC || s->version != LEDGER_VERSION ||
             s->nslots != LEDGER_SLOTS) {
    say(err, n, "/dev/shm%s has a foreign layout", name);
    rc = -EPROTO;
  }
  if (rc)
    munmap(p, sizeof *s);
  else
    *out = s;
  return rc;
}

static int seg_map(const char *key, int create, struct ledger_seg **out, char *err, size_t n) {
  char name[128];
  seg_name(name, sizeof name, key);
  int fd = shm_open(name, O_RDWR | (create ? O_CREAT : 0) | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    say(err, n, "cannot open /dev/shm%s: %s", name, strerror(e));
    return -e;
  }
  int rc = flock(fd, LOCK_EX) == 0 ? 0 : -errno; /* serialises initialisation */
  if (!rc) rc = seg_map_fd(fd, create, name, out, err, n);
  if (rc && err && n && !err[0]) say(err, n, "cannot use /dev/shm%s: %s", name, strerror(-rc));
  flock(fd, LOCK_UN); /* explicitly: the mapping keeps the open file alive */
  close(fd);
  return rc;
}

// ---- opening and closing ----

static vx_ledger_t *open_private(vx_ledger_t *l) {
  l->seg = calloc(1, sizeof *l->seg);
  if (!l->seg || seg_init_lock(l->seg, 0) != 0) {
    free(l->seg);
    free(l);
    return NULL;
  }
  l->shared = 0;
  l->slot = 0;
  l->pid = getpid();
  l->seg->slot[0].pid = (int32_t)l->pid;
  return l;
}

static void add_fallback_note(char *err, size_t n) {
  size_t len = strlen(err);
  if (len < n)
    snprintf(err + len, n - len, "; using a private ledger (other processes not counted)");
}

vx_ledger_t *ledger_open_key(const char *key, uint64_t device_capacity, char *err, size_t n) {
  if (err && n) err[0] = '\0';
  vx_ledger_t *l = calloc(1, sizeof *l);
  if (!l) {
    say(err, n, "ledger: out of memory");
    return NULL;
  }
  l->cap = device_capacity;
  if (!key_ok(key)) {
    say(err, n, "ledger key must be 1-%d characters of [A-Za-z0-9_-]", LEDGER_KEY_MAX);
  } else if (seg_map(key, 1, &l->seg, err, n) == 0) {
    l->shared = 1;
    int rc = seg_lock(l->seg, -1);
    if (rc == 0) {
      rc = l->slot = claim_locked(l->seg);
      seg_unlock(l->seg);
    }
    l->pid = getpid();
    if (rc >= 0) return l;
    if (rc == -ENOSPC)
      say(err, n, "ledger table for %s is full (%d processes)", key, LEDGER_SLOTS);
    else
      say(err, n, "ledger lock for %s unusable: %s", key, strerror(-rc));
    munmap(l->seg, sizeof *l->seg);
  }
  if (err && n) add_fallback_note(err, n);
  if (!open_private(l)) {
    say(err, n, "ledger: out of memory");
    return NULL;
  }
  return l;
}

vx_ledger_t *ledger_observe_key(const char *key, char *err, size_t n) {
  if (err && n) err[0] = '\0';
  if (!key_ok(key)) {
    say(err, n, "ledger key must be 1-%d characters of [A-Za-z0-9_-]", LEDGER_KEY_MAX);
    return NULL;
  }
  vx_ledger_t *l = calloc(1, sizeof *l);
  if (!l) {
    say(err, n, "ledger: out of memory");
    return NULL;
  }
  if (seg_map(key, 0, &l->seg, err, n) != 0) {
    free(l);
    return NULL;
  }
  l->shared = 1;
  l->observer = 1;
  l->slot = -1;
  l->pid = getpid();
  return l;
}

void ledger_close(vx_ledger_t *l) {
  if (!l) return;
  if (!l->observer && l->pid == getpid() && seg_lock(l->seg, l->slot) == 0) {
    struct ledger_slot *s = &l->seg->slot[l->slot];
    if (s->pid == (int32_t)l->pid) memset(s, 0, sizeof *s);
    seg_unlock(l->seg);
  }
  if (l->shared) {
    munmap(l->seg, sizeof *l->seg);
  } else {
    pthread_mutex_destroy(&l->seg->lock);
    free(l->seg);
  }
  free(l);
}

char *ledger_key_uuid(const unsigned char uuid[16], char out[33]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[uuid[i] >> 4];
    out[2 * i + 1] = hex[uuid[i] & 15];
  }
  out[32] = '\0';
  return out;
}

int ledger_unlink_key(const char *key) {
  char name[128];
  if (!key_ok(key)) return -EINVAL;
  seg_name(name, sizeof name, key);
  return shm_unlink(name) == 0 ? 0 : -errno;
}

// ---- shares ----

int ledger_reserve(vx_ledger_t *l, uint64_t bytes) {
  if (l->observer) return -EPERM;
  int rc = seg_lock(l->seg, l->slot);
  if (rc) return rc;
  int self = self_locked(l);
  if (self < 0) {
    seg_unlock(l->seg);
    return self;
  }
  uint64_t sum = total_locked(l->seg), cap = ledger_capacity(l);
  if (sum > cap || bytes > cap - sum) {
    reclaim_locked(l->seg, self);
    sum = total_locked(l->seg);
  }
  if (bytes > UINT64_MAX - sum)
    rc = -EOVERFLOW;
  else if (sum > cap || bytes > cap - sum)
    rc = -ENOMEM;
  else
    l->seg->slot[self].bytes += bytes;
  seg_unlock(l->seg);
  return rc;
}

int ledger_release(vx_ledger_t *l, uint64_t bytes) {
  if (l->observer) return -EPERM;
  int rc = seg_lock(l->seg, l->slot);
  if (rc) return rc;
  int self = self_locked(l);
  if (self >= 0) {
    struct ledger_slot *s = &l->seg->slot[self];
    rc = bytes > s->bytes ? -ERANGE : 0;
    s->bytes = bytes > s->bytes ? 0 : s->bytes - bytes;
  } else {
    rc = self;
  }
  seg_unlock(l->seg);
  return rc;
}

uint64_t ledger_share(vx_ledger_t *l) {
  uint64_t b = 0;
  if (l->observer || seg_lock(l->seg, l->slot) != 0) return 0;
  if (l->pid == getpid()) b = l->seg->slot[l->slot].bytes;
  seg_unlock(l->seg);
  return b;
}

uint64_t ledger_others(vx_ledger_t *l) {
  int self = l->observer || l->pid != getpid() ? -1 : l->slot;
  if (seg_lock(l->seg, self) != 0) return 0;
  reclaim_locked(l->seg, self);
  uint64_t sum = total_locked(l->seg);
  uint64_t mine = self >= 0 ? l->seg->slot[self].bytes : 0;
  seg_unlock(l->seg);
  return sum - mine;
}

uint64_t ledger_capacity(const vx_ledger_t *l) {
  return __atomic_load_n(&l->cap, __ATOMIC_RELAXED);
}

void ledger_set_capacity(vx_ledger_t *l, uint64_t device_capacity) {
  if (l && !l->observer) __atomic_store_n(&l->cap, device_capacity, __ATOMIC_RELAXED);
}

int ledger_is_shared(const vx_ledger_t *l) {
  return l->shared;
}

int ledger_list(vx_ledger_t *l, void (*cb)(const ledger_entry_t *e, void *arg), void *arg) {
  ledger_entry_t e[LEDGER_SLOTS];
  int count = 0;
  int self = l->observer || l->pid != getpid() ? -1 : l->slot;
  if (seg_lock(l->seg, self) != 0) return 0;
  reclaim_locked(l->seg, self);
  for (int i = 0; i < LEDGER_SLOTS; i++) {
    const struct ledger_slot *s = &l->seg->slot[i];
    if (s->pid == 0) continue;
    e[count] = (ledger_entry_t){s->pid, s->start, s->bytes, i == self};
    count++;
  }
  seg_unlock(l->seg);
  for (int i = 0; i < count; i++)
    cb(&e[i], arg);
  return count;
}
