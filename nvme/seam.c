/* The system-call seam: the default table points at the real libc and
 * liburing functions; tests swap entries to inject faults. */
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include "nvme_seam.h"

static int real_openat(int dirfd, const char *path, int flags, mode_t mode) {
  return openat(dirfd, path, flags, mode);
}

static int real_uring_result(int write, int res) {
  (void)write;
  return res;
}

#define REAL_SYS                                                                                   \
  {                                                                                                \
    .openat = real_openat, .unlinkat = unlinkat, .fallocate = fallocate, .ftruncate = ftruncate,   \
    .pwrite = pwrite, .pread = pread, .uring_init = io_uring_queue_init,                           \
    .uring_submit = io_uring_submit, .uring_result = real_uring_result,                            \
    .uring_register_buffers = io_uring_register_buffers,                                           \
  }

nvme_sys_t nvme_sys = REAL_SYS;

void nvme_sys_reset(void) {
  nvme_sys = (nvme_sys_t)REAL_SYS;
}
