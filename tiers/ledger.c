/* ledger.c: the per-device budget ledger shared by a user's vx processes.
 * A robust process-shared mutex guards a fixed table of {pid, start, bytes};
 * each holder keeps an OFD lock on its slot's byte, which the kernel drops at death.
 * The segment file is ledger_seg.c's, the liveness tests ledger_live.c's. */
#include "ledger.h"
#include "ledger_int.h"
#include "locks.h"

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

struct ledger_priv {
  struct ledger_seg seg;
  pid_t pid; /* the process that owns `slot` here (fork detection) */
  int slot;
};

struct vx_ledger {
  struct ledger_seg *seg;   /* the mapped segment (NULL when private from the start) */
  struct ledger_priv *priv; /* atomic: set once, then the table in use */
  int shared;               /* opened on the shared segment */
  int observer;             /* holds no slot */
  int slot;                 /* own slot index in seg, -1 when none */
  pid_t pid;                /* the process that owns `slot` (fork detection) */
  int fd;                   /* the segment file: holds this process's slot lock */
  pid_t fd_pid;             /* the process whose open file description fd is */
  int locks_blind;          /* fd is shared with a parent: OFD lock tests unusable */
  uint64_t cap;
  uint64_t mine; /* atomic: own share as last written, kept across a detach */
  char key[LEDGER_KEY_MAX + 1];
};

static void (*ledger_warn)(const char *line); /* atomic */

void ledger_set_warn(void (*warn)(const char *line)) {
  __atomic_store_n(&ledger_warn, warn, __ATOMIC_RELEASE);
}

// ---- small helpers ----

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

// ---- the table (caller holds seg->lock) ----

/* fd: the segment's descriptor for lock tests, -1 for none (private). */
static void reclaim_locked(struct ledger_seg *s, int fd, int self) {
  for (int i = 0; i < LEDGER_SLOTS; i++) {
    if (i != self && s->slot[i].pid != 0 && !ledger_slot_alive(&s->slot[i], fd, i))
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

/* Takes a free (or reclaimed) slot for the calling process and, with fd
 * >= 0 (the shared segment), its liveness lock; index or -ENOSPC. */
static int claim_locked(struct ledger_seg *s, int fd) {
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < LEDGER_SLOTS; i++) {
      if (s->slot[i].pid != 0) continue;
      int lk = fd >= 0 ? ledger_slot_lock_set(fd, i, F_WRLCK) : -ENOSYS;
      if (lk == -EAGAIN) continue; /* a freed slot whose lock is still held */
      s->slot[i].pid = (int32_t)getpid();
      s->slot[i].flags = lk == 0 ? SLOT_LOCKED : 0;
      s->slot[i].start = ledger_proc_start(getpid());
      s->slot[i].bytes = 0;
      return i;
    }
    reclaim_locked(s, fd, -1);
  }
  return -ENOSPC;
}

/* Locks the table; a holder that died inside the lock is repaired after
 * (the table is consistent slot by slot) and dead slots reclaimed. */
static int seg_lock(struct ledger_seg *s, int fd, int self) {
  int rc = vx_mutex_lock(&s->lock, VX_RANK_LEDGER);
  if (rc == EOWNERDEAD) {
    pthread_mutex_consistent(&s->lock);
    reclaim_locked(s, fd, self);
    rc = 0;
  }
  return -rc;
}

static void seg_unlock(struct ledger_seg *s) {
  vx_mutex_unlock(&s->lock, VX_RANK_LEDGER);
}

/* After fork() the child inherits the parent's descriptor, so its open file
 * description and the parent's slot lock: lock tests through it would see
 * the parent's slot as free.  The child opens the file anew (its own
 * description; the parent's lock is left with the parent).  Caller holds
 * the table lock (threads of the child serialise here). */
static void fork_fixup_locked(vx_ledger_t *l) {
  if (l->fd < 0 || l->fd_pid == getpid()) return;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", l->fd);
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    close(l->fd); /* the parent still holds the description and its lock */
    l->fd = fd;
    l->locks_blind = 0;
  } else {
    l->locks_blind = 1; /* no /proc: count every locked slot as alive */
  }
  l->fd_pid = getpid();
}

static int lock_fd(const vx_ledger_t *l) {
  return l->locks_blind ? -1 : l->fd;
}

/* After fork() the child inherits the parent's handle: give it a slot of its
 * own rather than touching the parent's.  Caller holds the lock. */
static int self_locked(vx_ledger_t *l) {
  if (l->observer) return -EPERM;
  if (l->pid == getpid()) return l->slot;
  int i = claim_locked(l->seg, lock_fd(l));
  if (i < 0) return i;
  l->slot = i;
  l->pid = getpid();
  __atomic_store_n(&l->mine, 0, __ATOMIC_RELAXED);
  return i;
}

// ---- the table in use: shared while intact, else private ----

/* The shared segment's file still has the full size: touching the mapping
 * cannot raise SIGBUS.  (A truncation between this check and the access
 * still could: the window is the few instructions up to the next check.) */
static int seg_file_intact(const vx_ledger_t *l) {
  struct stat st;
  return fstat(l->fd, &st) == 0 && st.st_size >= (off_t)sizeof(struct ledger_seg);
}

/* Under the table lock: the segment is still ours (not re-created over a
 * truncation: magic set, our slot still names us). */
static int seg_ours_locked(const vx_ledger_t *l) {
  const struct ledger_seg *s = l->seg;
  if (s->magic != LEDGER_MAGIC || s->version != LEDGER_VERSION || s->nslots != LEDGER_SLOTS)
    return 0;
  if (l->observer || l->pid != getpid() || l->slot < 0) return 1;
  return s->slot[l->slot].pid == (int32_t)l->pid;
}

static struct ledger_priv *priv_new(pid_t pid, uint64_t bytes) {
  struct ledger_priv *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  if (ledger_seg_init_lock(&p->seg, 0) != 0) {
    free(p);
    return NULL;
  }
  p->pid = pid;
  p->slot = 0;
  p->seg.slot[0].pid = (int32_t)pid;
  p->seg.slot[0].bytes = bytes;
  return p;
}

/* The shared segment was truncated or replaced under this process: from
 * now on a private table holding this process's share (said once).
 * 0, or -errno when there is nothing to fall back to (an observer, or no
 * memory: the caller gives up this call). */
static int detach(vx_ledger_t *l) {
  if (__atomic_load_n(&l->priv, __ATOMIC_ACQUIRE)) return 0;
  if (l->observer) return -ENOENT;
  uint64_t mine = l->pid == getpid() ? __atomic_load_n(&l->mine, __ATOMIC_RELAXED) : 0;
  struct ledger_priv *p = priv_new(getpid(), mine), *none = NULL;
  if (!p) return -ENOMEM;
  if (!__atomic_compare_exchange_n(&l->priv, &none, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    pthread_mutex_destroy(&p->seg.lock);
    free(p); /* another thread detached first */
    return 0;
  }
  void (*warn)(const char *) = __atomic_load_n(&ledger_warn, __ATOMIC_ACQUIRE);
  if (warn) {
    char line[256];
    snprintf(line, sizeof line,
             "ledger %s: its shared segment was truncated or replaced under this process; "
             "using a private ledger (other processes not counted)",
             l->key);
    warn(line);
  }
  return 0;
}

/* Locks the table the handle uses now and returns it, with *self the
 * caller's slot there: claimed for a fork child when `claim`, else -1 when
 * it has none.  NULL when nothing is locked (an observer of a lost
 * segment, a lock error; -errno in *self). */
static struct ledger_seg *acquire(vx_ledger_t *l, int claim, int *self) {
  for (;;) {
    struct ledger_priv *p = __atomic_load_n(&l->priv, __ATOMIC_ACQUIRE);
    if (p) {
      int rc = vx_mutex_lock(&p->seg.lock, VX_RANK_LEDGER);
      if (rc) {
        *self = -rc;
        return NULL;
      }
      if (p->pid != getpid() && claim && !l->observer) {
        int i = claim_locked(&p->seg, -1);
        if (i >= 0) p->pid = getpid(), p->slot = i;
      }
      *self = p->pid == getpid() ? p->slot : -1;
      return &p->seg;
    }
    int rc = seg_file_intact(l) ? 0 : detach(l);
    if (rc) {
      *self = rc;
      return NULL;
    }
    if (__atomic_load_n(&l->priv, __ATOMIC_ACQUIRE)) continue;
    int dead = 0;
    rc = vx_mutex_lock(&l->seg->lock, VX_RANK_LEDGER);
    if (rc == EOWNERDEAD) { /* repaired below, once this process may test locks */
      pthread_mutex_consistent(&l->seg->lock);
      dead = 1;
      rc = 0;
    }
    if (rc) {
      *self = -rc;
      return NULL;
    }
    int intact = seg_file_intact(l);
    if (!intact || !seg_ours_locked(l)) {
      /* Truncated while we waited: re-extend it (zeros) so that the unlock
       * and glibc's robust-mutex list cannot fault; a newcomer will then
       * initialise it afresh.  Either way this process leaves it. */
      if (!intact && ftruncate(l->fd, sizeof *l->seg) != 0) {
        /* cannot re-extend: leave the lock word alone rather than fault */
        vx_lock_forget(VX_RANK_LEDGER);
      } else {
        seg_unlock(l->seg);
      }
      if ((rc = detach(l)) != 0) {
        *self = rc;
        return NULL;
      }
      continue;
    }
    fork_fixup_locked(l);
    int i = l->observer ? -1 : l->pid == getpid() ? l->slot : claim ? self_locked(l) : -1;
    if (dead) reclaim_locked(l->seg, lock_fd(l), i);
    *self = i;
    return l->seg;
  }
}

static void release_table(struct ledger_seg *s) {
  seg_unlock(s);
}

// ---- opening and closing ----

static void add_fallback_note(char *err, size_t n) {
  size_t len = strlen(err);
  if (len < n)
    snprintf(err + len, n - len, "; using a private ledger (other processes not counted)");
}

vx_ledger_t *ledger_open_key(const char *key, uint64_t device_capacity, char *err, size_t n) {
  if (err && n) err[0] = '\0';
  vx_ledger_t *l = calloc(1, sizeof *l);
  if (!l) {
    ledger_say(err, n, "ledger: out of memory");
    return NULL;
  }
  l->cap = device_capacity;
  l->fd = -1;
  l->slot = -1;
  l->pid = getpid();
  if (!key_ok(key)) {
    ledger_say(err, n, "ledger key must be 1-%d characters of [A-Za-z0-9_-]", LEDGER_KEY_MAX);
  } else if (ledger_seg_map(key, 1, &l->seg, &l->fd, err, n) == 0) {
    snprintf(l->key, sizeof l->key, "%s", key);
    l->shared = 1;
    l->fd_pid = getpid();
    int rc = seg_lock(l->seg, l->fd, -1);
    if (rc == 0) {
      rc = l->slot = claim_locked(l->seg, l->fd);
      seg_unlock(l->seg);
    }
    if (rc >= 0) return l;
    if (rc == -ENOSPC)
      ledger_say(err, n, "ledger table for %s is full (%d processes)", key, LEDGER_SLOTS);
    else
      ledger_say(err, n, "ledger lock for %s unusable: %s", key, strerror(-rc));
    munmap(l->seg, sizeof *l->seg);
    close(l->fd);
    l->seg = NULL;
    l->fd = -1;
    l->shared = 0;
  }
  if (err && n) add_fallback_note(err, n);
  l->priv = priv_new(l->pid, 0);
  if (!l->priv) {
    free(l);
    ledger_say(err, n, "ledger: out of memory");
    return NULL;
  }
  return l;
}

vx_ledger_t *ledger_observe_key(const char *key, char *err, size_t n) {
  if (err && n) err[0] = '\0';
  if (!key_ok(key)) {
    ledger_say(err, n, "ledger key must be 1-%d characters of [A-Za-z0-9_-]", LEDGER_KEY_MAX);
    return NULL;
  }
  vx_ledger_t *l = calloc(1, sizeof *l);
  if (!l) {
    ledger_say(err, n, "ledger: out of memory");
    return NULL;
  }
  if (ledger_seg_map(key, 0, &l->seg, &l->fd, err, n) != 0) {
    free(l);
    return NULL;
  }
  snprintf(l->key, sizeof l->key, "%s", key);
  l->shared = 1;
  l->observer = 1;
  l->slot = -1;
  l->pid = getpid();
  l->fd_pid = getpid();
  return l;
}

void ledger_close(vx_ledger_t *l) {
  if (!l) return;
  int self;
  struct ledger_seg *s = l->observer ? NULL : acquire(l, 0, &self);
  if (s) {
    if (self >= 0 && s->slot[self].pid == (int32_t)getpid()) {
      memset(&s->slot[self], 0, sizeof s->slot[self]);
      /* explicitly: a fork child may share this description and keep it */
      if (s == l->seg) ledger_slot_lock_set(l->fd, self, F_UNLCK);
    }
    release_table(s);
  }
  if (l->seg) munmap(l->seg, sizeof *l->seg);
  if (l->fd >= 0) close(l->fd);
  if (l->priv) {
    pthread_mutex_destroy(&l->priv->seg.lock);
    free(l->priv);
  }
  free(l);
}

void ledger_atfork_child(vx_ledger_t *l) {
  struct ledger_priv *p = l ? __atomic_load_n(&l->priv, __ATOMIC_ACQUIRE) : NULL;
  if (p) ledger_seg_init_lock(&p->seg, 0);
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
  ledger_seg_name(name, sizeof name, key);
  return shm_unlink(name) == 0 ? 0 : -errno;
}

// ---- shares ----

/* The fd for lock tests on table s: the segment's, none for a private one. */
static int test_fd(const vx_ledger_t *l, const struct ledger_seg *s) {
  return s == l->seg ? lock_fd(l) : -1;
}

int ledger_reserve(vx_ledger_t *l, uint64_t bytes) {
  if (l->observer) return -EPERM;
  int self;
  struct ledger_seg *s = acquire(l, 1, &self);
  if (!s) return self;
  if (self < 0) {
    release_table(s);
    return self;
  }
  int rc = 0;
  uint64_t sum = total_locked(s), cap = ledger_capacity(l);
  if (sum > cap || bytes > cap - sum) {
    reclaim_locked(s, test_fd(l, s), self);
    sum = total_locked(s);
  }
  if (bytes > UINT64_MAX - sum)
    rc = -EOVERFLOW;
  else if (sum > cap || bytes > cap - sum)
    rc = -ENOMEM;
  else
    s->slot[self].bytes += bytes;
  __atomic_store_n(&l->mine, s->slot[self].bytes, __ATOMIC_RELAXED);
  release_table(s);
  return rc;
}

int ledger_release(vx_ledger_t *l, uint64_t bytes) {
  if (l->observer) return -EPERM;
  int self;
  struct ledger_seg *s = acquire(l, 1, &self);
  if (!s) return self;
  int rc = self;
  if (self >= 0) {
    struct ledger_slot *sl = &s->slot[self];
    rc = bytes > sl->bytes ? -ERANGE : 0;
    sl->bytes = bytes > sl->bytes ? 0 : sl->bytes - bytes;
    __atomic_store_n(&l->mine, sl->bytes, __ATOMIC_RELAXED);
  }
  release_table(s);
  return rc;
}

uint64_t ledger_share(vx_ledger_t *l) {
  uint64_t b = 0;
  int self;
  struct ledger_seg *s = l->observer ? NULL : acquire(l, 0, &self);
  if (!s) return 0;
  if (self >= 0) b = s->slot[self].bytes;
  release_table(s);
  return b;
}

uint64_t ledger_others(vx_ledger_t *l) {
  int self;
  struct ledger_seg *s = acquire(l, 0, &self);
  if (!s) return 0;
  reclaim_locked(s, test_fd(l, s), self);
  uint64_t sum = total_locked(s);
  uint64_t mine = self >= 0 ? s->slot[self].bytes : 0;
  release_table(s);
  return sum - mine;
}

uint64_t ledger_room(vx_ledger_t *l) {
  int self;
  struct ledger_seg *s = l->observer ? NULL : acquire(l, 0, &self);
  if (!s) return 0;
  uint64_t sum = total_locked(s), cap = ledger_capacity(l);
  if (sum > cap) {
    reclaim_locked(s, test_fd(l, s), self);
    sum = total_locked(s);
  }
  release_table(s);
  return sum < cap ? cap - sum : 0;
}

uint64_t ledger_capacity(const vx_ledger_t *l) {
  return __atomic_load_n(&l->cap, __ATOMIC_RELAXED);
}

void ledger_set_capacity(vx_ledger_t *l, uint64_t device_capacity) {
  if (l && !l->observer) __atomic_store_n(&l->cap, device_capacity, __ATOMIC_RELAXED);
}

int ledger_is_shared(const vx_ledger_t *l) {
  return l->shared && !__atomic_load_n(&l->priv, __ATOMIC_ACQUIRE);
}

int ledger_list(vx_ledger_t *l, void (*cb)(const ledger_entry_t *e, void *arg), void *arg) {
  ledger_entry_t e[LEDGER_SLOTS];
  int count = 0, self;
  struct ledger_seg *s = acquire(l, 0, &self);
  if (!s) return 0;
  reclaim_locked(s, test_fd(l, s), self);
  for (int i = 0; i < LEDGER_SLOTS; i++) {
    const struct ledger_slot *sl = &s->slot[i];
    if (sl->pid == 0) continue;
    e[count] = (ledger_entry_t){sl->pid, sl->start, sl->bytes, i == self};
    count++;
  }
  release_table(s);
  for (int i = 0; i < count; i++)
    cb(&e[i], arg);
  return count;
}
