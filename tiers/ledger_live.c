/* ledger_live.c: whether a slot's holder still lives: its OFD lock on the
 * segment file (any PID namespace), else kill(2) and its /proc start time. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger_int.h"

/* 1 and *start set: running; 0: gone or zombie; -1: cannot tell. */
int ledger_proc_stat(pid_t pid, uint64_t *start) {
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
  return ledger_proc_stat(pid, &start) == 1 ? start : 0;
}

/* Slot i's liveness lock on fd: F_OFD_SETLK with type F_WRLCK or F_UNLCK.
 * 0 or -errno (-EAGAIN: another open file description holds it). */
int ledger_slot_lock_set(int fd, int i, short type) {
  struct flock fl = {
      .l_type = type, .l_whence = SEEK_SET, .l_start = LEDGER_LOCK_BASE + i, .l_len = 1};
  if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return 0;
  return errno == EACCES ? -EAGAIN : -errno;
}

/* 1: slot i's lock is held (by another open file description than fd's),
 * 0: nobody holds it, -1: cannot tell. */
static int slot_lock_held(int fd, int i) {
  struct flock fl = {
      .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LEDGER_LOCK_BASE + i, .l_len = 1};
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return -1;
  return fl.l_type != F_UNLCK;
}

/* A slot's holder is alive unless proven dead.  A locked slot: its lock is
 * gone (the kernel drops OFD locks when the holder's last descriptor closes:
 * death, or exec), whatever PID namespace the holder is in.  An unlocked
 * one (older vx): ESRCH, a zombie, or a different start time (the pid was
 * reused).  fd < 0: no lock test possible; a locked slot counts as alive. */
int ledger_slot_alive(const struct ledger_slot *s, int fd, int i) {
  if (s->pid == 0) return 0;
  if (s->flags & SLOT_LOCKED) return fd < 0 || slot_lock_held(fd, i) != 0;
  if (s->pid < 0) return 1;
  if (kill(s->pid, 0) != 0 && errno == ESRCH) return 0;
  if (s->start == 0) return 1;
  uint64_t start = 0;
  int r = ledger_proc_stat(s->pid, &start);
  if (r < 0) return 1;
  return r == 1 && start == s->start;
}
