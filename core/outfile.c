/* outfile.c: files vx writes at paths the user names (the exit report, the
 * trace).  A FIFO without a reader or a reader that leaves must not hang or kill the program. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int vx_path_expand(const char *tmpl, char *out, size_t n) {
  size_t k = 0;
  char host[256];
  for (const char *p = tmpl; *p; p++) {
    char num[24];
    const char *add = NULL;
    if (p[0] == '%' && p[1] == 'p') {
      snprintf(num, sizeof num, "%d", (int)getpid());
      add = num;
    } else if (p[0] == '%' && p[1] == 'h') {
      if (gethostname(host, sizeof host)) snprintf(host, sizeof host, "unknown");
      host[sizeof host - 1] = 0;
      for (char *c = host; *c; c++) /* a path component */
        if (*c == '/') *c = '_';
      add = host;
    } else if (p[0] == '%' && p[1] == '%') {
      add = "%";
    }
    if (add) {
      size_t len = strlen(add);
      if (k + len >= n) return -ENAMETOOLONG;
      memcpy(out + k, add, len);
      k += len;
      p++;
      continue;
    }
    if (k + 1 >= n) return -ENAMETOOLONG;
    out[k++] = *p;
  }
  if (!n) return -ENAMETOOLONG;
  out[k] = 0;
  return 0;
}

static const char *kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

static int refuse(int fd, int e, char *why, size_t n, const char *fmt, const char *what) {
  if (fd >= 0) close(fd);
  if (why && n) snprintf(why, n, fmt, what);
  return -e;
}

int vx_outfile_open(const char *path, int accept, char *why, size_t n) {
  if (why && n) why[0] = '\0';
  int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    struct stat st;
    if (e == ENXIO && stat(path, &st) == 0) /* a FIFO with no reader, or a socket */
      return refuse(-1, e, why, n, "%s with no reader", kind_of(st.st_mode));
    return refuse(-1, e, why, n, "%s", strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return refuse(fd, errno, why, n, "%s", strerror(errno));
  int ok = S_ISREG(st.st_mode) ||
           (accept == VX_OUT_STREAM && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)));
  if (!ok) return refuse(fd, EINVAL, why, n, "%s, not a regular file", kind_of(st.st_mode));
  if (S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0)
    return refuse(fd, errno, why, n, "%s", strerror(errno));
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
    return refuse(fd, errno, why, n, "%s", strerror(errno));
  return fd;
}

int vx_outfile_write(int fd, const void *buf, size_t n) {
  sigset_t pipe_set, old, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigemptyset(&pending);
  int masked = pthread_sigmask(SIG_BLOCK, &pipe_set, &old) == 0;
  int was_pending = masked && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
  const char *p = buf;
  int rc = 0;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      rc = w < 0 ? -errno : -EIO;
      break;
    }
    p += w;
    n -= (size_t)w;
  }
  if (masked) {
    if (rc == -EPIPE && !was_pending) { /* ours: take it before unblocking */
      struct timespec zero = {0, 0};
      while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  return rc;
}
