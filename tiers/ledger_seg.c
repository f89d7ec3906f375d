/* ledger_seg.c: the ledger's shared segment as a file: its name, the checks
 * on its owner, mode and layout, and mapping and initialising it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ledger_int.h"

void ledger_say(char *err, size_t n, const char *fmt, ...) {
  if (!err || n == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

void ledger_seg_name(char *buf, size_t n, const char *key) {
  snprintf(buf, n, "/vx-ledger-%u-%s", (unsigned)geteuid(), key);
}

int ledger_seg_init_lock(struct ledger_seg *s, int pshared) {
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

/* Checks (and, when empty or abandoned mid-creation, initialises) the
 * segment behind fd; the caller holds flock(fd).  0 or -errno, err filled. */
static int seg_check(int fd, int create, const char *name, char *err, size_t n) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  if (st.st_uid != geteuid()) {
    ledger_say(err, n, "/dev/shm%s is owned by uid %u, not by this user", name,
               (unsigned)st.st_uid);
    return -EACCES;
  }
  if (st.st_size == 0 && create) {
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, sizeof(struct ledger_seg)) != 0) return -errno;
    return 0;
  }
  if ((st.st_mode & 07777) != 0600) {
    ledger_say(err, n, "/dev/shm%s has mode %04o, not 0600", name, (unsigned)(st.st_mode & 07777));
    return -EPERM;
  }
  if (st.st_size != (off_t)sizeof(struct ledger_seg)) {
    ledger_say(err, n, "/dev/shm%s has a foreign layout (%lld bytes)", name, (long long)st.st_size);
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
    rc = ledger_seg_init_lock(s, 1);
    if (!rc) {
      s->version = LEDGER_VERSION;
      s->nslots = LEDGER_SLOTS;
      __atomic_store_n(&s->magic, LEDGER_MAGIC, __ATOMIC_RELEASE);
    }
  } else if (s->magic != LEDGER_MAGIC || s->version != LEDGER_VERSION ||
             s->nslots != LEDGER_SLOTS) {
    ledger_say(err, n, "/dev/shm%s has a foreign layout", name);
    rc = -EPROTO;
  }
  if (rc)
    munmap(p, sizeof *s);
  else
    *out = s;
  return rc;
}

/* Maps the segment of `key`; *fd_out keeps the file open (the slot lock
 * lives on it, and fstat guards every use of the mapping). */
int ledger_seg_map(const char *key, int create, struct ledger_seg **out, int *fd_out, char *err,
                   size_t n) {
  char name[128];
  ledger_seg_name(name, sizeof name, key);
  int fd = shm_open(name, O_RDWR | (create ? O_CREAT : 0) | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    ledger_say(err, n, "cannot open /dev/shm%s: %s", name, strerror(e));
    return -e;
  }
  int rc = flock(fd, LOCK_EX) == 0 ? 0 : -errno; /* serialises initialisation */
  if (!rc) rc = seg_map_fd(fd, create, name, out, err, n);
  if (rc && err && n && !err[0])
    ledger_say(err, n, "cannot use /dev/shm%s: %s", name, strerror(-rc));
  flock(fd, LOCK_UN);
  if (rc)
    close(fd);
  else
    *fd_out = fd;
  return rc;
}
