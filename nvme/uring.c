/* The io_uring engine: registered file and buffers, requests batched into
 * the submission ring, failed submits retried, then failed as completions. */
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "nvme_int.h"

#define TAG_IGNORE UINT64_MAX /* a neutralised request: its completion is dropped */

typedef struct uring_eng {
  nvme_eng_t base;
  struct io_uring ring;
  int fd, fixed_file, fixed_bufs, qd;
  struct io_uring_sqe **pend; /* prepared, not yet accepted by the kernel */
  uint64_t *pend_tag;
  int npend;
  nvme_cqe_t *failed; /* completions made up for requests never started */
  int nfailed;
} uring_eng_t;

static uring_eng_t *U(nvme_eng_t *e) {
  return (uring_eng_t *)e;
}

static int u_submit(nvme_eng_t *e);

static int u_queue(nvme_eng_t *e, const nvme_io_t *io) {
  uring_eng_t *u = U(e);
  struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
  if (!sqe) { /* the ring is full of requests or of neutralised ones: flush it */
    if (u->npend)
      u_submit(e);
    else
      nvme_sys.uring_submit(&u->ring);
    if (!(sqe = io_uring_get_sqe(&u->ring))) return -EBUSY;
  }
  int fd = u->fixed_file ? 0 : u->fd;
  if (io->write && u->fixed_bufs && io->buf_index >= 0)
    io_uring_prep_write_fixed(sqe, fd, io->buf, io->len, io->off, io->buf_index);
  else if (io->write)
    io_uring_prep_write(sqe, fd, io->buf, io->len, io->off);
  else if (u->fixed_bufs && io->buf_index >= 0)
    io_uring_prep_read_fixed(sqe, fd, io->buf, io->len, io->off, io->buf_index);
  else
    io_uring_prep_read(sqe, fd, io->buf, io->len, io->off);
  if (u->fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
  uint64_t tag = io->tag << 1 | (io->write ? 1 : 0);
  io_uring_sqe_set_data64(sqe, tag);
  u->pend[u->npend] = sqe;
  u->pend_tag[u->npend++] = tag;
  return 0;
}

/* Requests the kernel never took: turn them into no-ops (they may still be
 * flushed by a later submit) and complete them with the error. */
static void u_fail_pending(uring_eng_t *u, int err) {
  for (int i = 0; i < u->npend; i++) {
    io_uring_prep_nop(u->pend[i]);
    io_uring_sqe_set_data64(u->pend[i], TAG_IGNORE);
    u->failed[u->nfailed++] = (nvme_cqe_t){.tag = u->pend_tag[i] >> 1, .res = err};
  }
  u->npend = 0;
}

/* The kernel takes requests in ring order and the pending ones are the
 * newest, so those it has not taken yet are the last sq_ready() of them. */
static void u_trim_taken(uring_eng_t *u) {
  unsigned left = io_uring_sq_ready(&u->ring);
  if (left >= (unsigned)u->npend) return;
  int taken = u->npend - (int)left;
  memmove(u->pend, u->pend + taken, left * sizeof *u->pend);
  memmove(u->pend_tag, u->pend_tag + taken, left * sizeof *u->pend_tag);
  u->npend = (int)left;
}

static int u_submit(nvme_eng_t *e) {
  uring_eng_t *u = U(e);
  for (int attempt = 0; u->npend > 0; attempt++) {
    int r = nvme_sys.uring_submit(&u->ring);
    u_trim_taken(u);
    if (!u->npend) break;
    if (attempt >= NVME_RETRIES) {
      u_fail_pending(u, r < 0 ? r : -EIO);
      return r < 0 ? r : -EIO;
    }
    NVME_STAT_ADD(e->swap, retries, 1);
  }
  return 0;
}

static int u_take(uring_eng_t *u, struct io_uring_cqe *cqe, nvme_cqe_t *out) {
  uint64_t tag = io_uring_cqe_get_data64(cqe);
  int res = cqe->res;
  io_uring_cqe_seen(&u->ring, cqe);
  if (tag == TAG_IGNORE) return 0;
  out->tag = tag >> 1;
  out->res = nvme_sys.uring_result((int)(tag & 1), res);
  return 1;
}

static int u_reap(nvme_eng_t *e, nvme_cqe_t *out, int max, int wait) {
  uring_eng_t *u = U(e);
  int n = 0;
  while (u->nfailed && n < max)
    out[n++] = u->failed[--u->nfailed];
  while (n < max) {
    struct io_uring_cqe *cqe = NULL;
    int r = io_uring_peek_cqe(&u->ring, &cqe);
    if (r == -EAGAIN && wait && n == 0) r = io_uring_wait_cqe(&u->ring, &cqe);
    if (r == -EINTR || r == -ETIME) continue;
    if (r == -EAGAIN) break;
    if (r < 0) return n ? n : r;
    n += u_take(u, cqe, &out[n]);
  }
  return n;
}

static int u_reg_bufs(nvme_eng_t *e, void **bufs, int n, size_t size) {
  uring_eng_t *u = U(e);
  struct iovec *iov = calloc((size_t)n, sizeof *iov);
  if (!iov) return -ENOMEM;
  for (int i = 0; i < n; i++)
    iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = size};
  int r = nvme_sys.uring_register_buffers(&u->ring, iov, (unsigned)n);
  free(iov);
  u->fixed_bufs = r == 0;
  return r;
}

static void u_unreg_bufs(nvme_eng_t *e) {
  uring_eng_t *u = U(e);
  if (u->fixed_bufs) io_uring_unregister_buffers(&u->ring);
  u->fixed_bufs = 0;
}

static void u_fini(nvme_eng_t *e) {
  uring_eng_t *u = U(e);
  io_uring_queue_exit(&u->ring);
  free(u->pend);
  free(u->pend_tag);
  free(u->failed);
  free(u);
}

/* The ring's mappings and descriptor are the child's own copies. */
static void u_abandon(nvme_eng_t *e) {
  io_uring_queue_exit(&U(e)->ring);
}

static const nvme_eng_ops_t uring_ops = {
    .queue = u_queue,
    .submit = u_submit,
    .reap = u_reap,
    .reg_bufs = u_reg_bufs,
    .unreg_bufs = u_unreg_bufs,
    .fini = u_fini,
    .abandon = u_abandon,
};

int nvme_uring_init(nvme_swap_t *s, int fd, int qd, nvme_eng_t **out) {
  uring_eng_t *u = calloc(1, sizeof *u);
  if (!u) return -ENOMEM;
  u->pend = calloc((size_t)qd, sizeof *u->pend);
  u->pend_tag = calloc((size_t)qd, sizeof *u->pend_tag);
  u->failed = calloc((size_t)qd, sizeof *u->failed);
  int r = u->pend && u->pend_tag && u->failed ? nvme_sys.uring_init((unsigned)qd, &u->ring, 0)
                                              : -ENOMEM;
  if (r < 0) {
    free(u->pend);
    free(u->pend_tag);
    free(u->failed);
    free(u);
    return r;
  }
  u->base = (nvme_eng_t){.ops = &uring_ops, .swap = s};
  u->fd = fd;
  u->qd = qd;
  int rf = io_uring_register_files(&u->ring, &fd, 1);
  u->fixed_file = rf == 0;
  if (rf)
    nvme_fallback(s, SAY_FIXFILE, "nvme: io_uring file registration failed (%s): plain descriptor",
                  strerror(-rf));
  *out = &u->base;
  return 0;
}
