/* outfile.h: opening and writing a file at a path the user gave (VX_REPORT,
 * VX_TRACE) without ever blocking on a FIFO or dying of SIGPIPE. */
#ifndef VX_INTERPOSE_OUTFILE_H
#define VX_INTERPOSE_OUTFILE_H

#include <stddef.h>

/* What vx_outfile_open accepts besides a regular file. */
enum {
  VX_OUT_REGULAR = 0, /* a regular file only (the trace rewrites its header in place) */
  VX_OUT_STREAM = 1,  /* also a FIFO with a reader, or a character device (a tty, /dev/null) */
};

/* Opens `path` for writing: created 0600 when absent, truncated when it is
 * a regular file, O_CLOEXEC, never a controlling terminal.  The open itself
 * never blocks (O_NONBLOCK, cleared once the file is open): a FIFO with no
 * reader is -ENXIO, not a hang.  Anything `accept` does not allow (a
 * directory, a block device, a FIFO where a regular file is needed) is
 * refused with -EINVAL.  Returns the descriptor, or -errno with `why` (n
 * bytes) filled with a one-phrase reason for the caller's line. */
int vx_outfile_open(const char *path, int accept, char *why, size_t n);

/* tmpl with %p replaced by the process id, %h by the host name and %%
 * by %, as core_pattern does (so that the ranks of a job, or a fork,
 * each get their own VX_REPORT / VX_TRACE).  Other % sequences stay as
 * they are.  0, or -ENAMETOOLONG when the result does not fit n bytes. */
int vx_path_expand(const char *tmpl, char *out, size_t n);

/* Writes all of buf to fd, retrying on EINTR and short writes, with
 * SIGPIPE blocked in the calling thread (a FIFO reader that went away is
 * -EPIPE, not the program's death; a SIGPIPE raised by this write is
 * consumed, one already pending is left alone).  0 or -errno. */
int vx_outfile_write(int fd, const void *buf, size_t n);

#endif
