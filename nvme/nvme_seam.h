/* nvme's system-call seam: every file and io_uring operation nvme/ makes goes
 * through this table, so tests can wrap an entry (fail the Nth call, ...). */
#ifndef VX_NVME_SEAM_H
#define VX_NVME_SEAM_H

#include <sys/types.h>

struct io_uring;
struct iovec;

/* Each entry returns what the system call does (-1 with errno set for the
 * libc forms; -errno for the io_uring forms).  Tests replace entries before
 * opening a swap (or while no job runs) and call nvme_sys_reset() after. */
typedef struct nvme_sys {
  int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
  int (*unlinkat)(int dirfd, const char *path, int flags);
  int (*fallocate)(int fd, int mode, off_t off, off_t len);
  int (*ftruncate)(int fd, off_t len);
  ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
  ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
  int (*uring_init)(unsigned entries, struct io_uring *ring, unsigned flags);
  int (*uring_submit)(struct io_uring *ring);
  int (*uring_register_buffers)(struct io_uring *ring, const struct iovec *iov, unsigned n);
  /* Every io_uring completion's result passes through here (write: 1 for a
   * write, 0 for a read): return res unchanged, or an injected -EIO, short... */
  int (*uring_result)(int write, int res);
} nvme_sys_t;

extern nvme_sys_t nvme_sys;

/* Puts the real functions back. */
void nvme_sys_reset(void);

#endif
