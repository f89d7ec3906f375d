/* Spill and restore jobs: chunks flow through a ring of bounce buffers, the
 * caller's copy callbacks on this thread overlapping the engine's I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvme_int.h"
#include "locks.h"

#define ROUND_UP(x, a) (((x) + (a)-1) / (a) * (a))
#define MAX_BUFS 1024

typedef struct jbuf {
  size_t chunk; /* index in the job */
  int32_t slot;
  uint32_t iolen, crc;
  int attempts, busy;
} jbuf_t;

typedef struct job {
  nvme_swap_t *s;
  nvme_chunk_t *c;
  size_t n, next;
  int write;
  nvme_fill_fn fill;
  nvme_drain_fn drain;
  void *arg;
  int nbufs; /* bounce buffers the job cycles through */
  int qd;    /* most requests in flight; nbufs > qd lets copies run meanwhile */
  int inflight, queued;
  jbuf_t *jb;
  int *freeb, nfree;
  int *ready, ready_head, nready; /* FIFO of prepared (filled) buffers awaiting room */
  nvme_cqe_t *cq;                 /* reaped completions */
  nvme_cqe_t *errq;               /* requests the engine refused to queue */
  int nerr;
  uint64_t busy_from; /* when inflight went from 0 to 1 */
} job_t;

// ---- bounce buffers ----

void nvme_bufs_drop_locked(nvme_swap_t *s) {
  if (s->eng) s->eng->ops->unreg_bufs(s->eng);
  if (s->bufs_internal)
    for (int i = 0; i < s->nbufs; i++)
      free(s->bufs[i]);
  free(s->bufs);
  s->bufs = NULL;
  s->nbufs = 0;
  s->bufs_internal = 0;
  __atomic_store_n(&s->fixed_bufs, 0, __ATOMIC_RELAXED);
}

static void bufs_register_locked(nvme_swap_t *s) {
  int r = s->eng->ops->reg_bufs(s->eng, s->bufs, s->nbufs, s->bufsize);
  __atomic_store_n(&s->fixed_bufs, r == 0, __ATOMIC_RELAXED);
  if (r && s->engine == NVME_ENGINE_URING)
    nvme_fallback(s, SAY_FIXBUF,
                  "nvme: io_uring buffer registration failed (%s): unregistered buffers",
                  strerror(-r));
}

int nvme_bufs_ensure_locked(nvme_swap_t *s) {
  if (s->nbufs) return 0;
  int n = s->qd + 2 < NVME_BUFS_DEFAULT ? s->qd + 2 : NVME_BUFS_DEFAULT;
  s->bufs = calloc((size_t)n, sizeof *s->bufs);
  if (!s->bufs) return -ENOMEM;
  s->bufs_internal = 1;
  s->bufsize = s->chunk;
  for (; s->nbufs < n; s->nbufs++)
    if (posix_memalign(&s->bufs[s->nbufs], NVME_ALIGN, s->chunk)) {
      nvme_bufs_drop_locked(s);
      return -ENOMEM;
    }
  bufs_register_locked(s);
  return 0;
}

int nvme_register_buffers(nvme_swap_t *s, void **bufs, int n, size_t size) {
  if (!bufs || n < 1 || n > MAX_BUFS || size < s->chunk) return -EINVAL;
  for (int i = 0; i < n; i++)
    if (!bufs[i] || (uintptr_t)bufs[i] % NVME_ALIGN) return -EINVAL;
  void **copy = malloc((size_t)n * sizeof *copy);
  if (!copy) return -ENOMEM;
  memcpy(copy, bufs, (size_t)n * sizeof *copy);
  vx_mutex_lock(&s->lock, VX_RANK_SWAP);
  nvme_bufs_drop_locked(s);
  s->bufs = copy;
  s->nbufs = n;
  s->bufsize = size;
  bufs_register_locked(s);
  vx_mutex_unlock(&s->lock, VX_RANK_SWAP);
  return 0;
}

void nvme_unregister_buffers(nvme_swap_t *s) {
  vx_mutex_lock(&s->lock, VX_RANK_SWAP);
  nvme_bufs_drop_locked(s);
  vx_mutex_unlock(&s->lock, VX_RANK_SWAP);
}

// ---- one request ----

static void busy_end(job_t *j) {
  if (--j->inflight) return;
  uint64_t ns = nvme_now_ns() - j->busy_from;
  if (j->write)
    NVME_STAT_ADD(j->s, write_ns, ns);
  else
    NVME_STAT_ADD(j->s, read_ns, ns);
}

static void issue(job_t *j, int b) {
  nvme_swap_t *s = j->s;
  jbuf_t *x = &j->jb[b];
  nvme_io_t io = {.buf = s->bufs[b],
                  .off = (uint64_t)x->slot * s->chunk,
                  .len = x->iolen,
                  .buf_index = s->fixed_bufs ? b : -1,
                  .write = j->write,
                  .tag = (uint64_t)b};
  if (j->inflight++ == 0) j->busy_from = nvme_now_ns();
  int r = s->eng->ops->queue(s->eng, &io);
  if (r < 0)
    j->errq[j->nerr++] = (nvme_cqe_t){.tag = (uint64_t)b, .res = r};
  else
    j->queued++;
}

static void flush(job_t *j) {
  if (j->queued) j->s->eng->ops->submit(j->s->eng);
  j->queued = 0;
}

static void release(job_t *j, int b) {
  j->jb[b].busy = 0;
  j->freeb[j->nfree++] = b;
}

static void chunk_fail(job_t *j, jbuf_t *x, nvme_chunk_t *c, int err) {
  nvme_swap_t *s = j->s;
  c->status = err;
  if (j->write) {
    nvme_slot_drop(s, x->slot);
    c->slot = -1;
    NVME_STAT_ADD(s, write_failures, 1);
    if (err == -ENOSPC) NVME_STAT_ADD(s, enospc, 1);
  } else {
    NVME_STAT_ADD(s, read_failures, 1);
  }
}

static void spill_done(job_t *j, jbuf_t *x, nvme_chunk_t *c) {
  nvme_slot_commit(j->s, x->slot, c->len, x->crc);
  c->slot = x->slot;
  c->status = 0;
  NVME_STAT_ADD(j->s, write_bytes, c->len);
}

/* Data reaches the caller only after its checksum matched. */
static void restore_done(job_t *j, int b, jbuf_t *x, nvme_chunk_t *c) {
  const void *buf = j->s->bufs[b];
  if (nvme_crc32c(0, buf, c->len) != x->crc) {
    NVME_STAT_ADD(j->s, checksum_failures, 1);
    chunk_fail(j, x, c, -EBADMSG);
    return;
  }
  int r = j->drain(buf, c, j->arg);
  if (r) {
    c->status = r;
    return;
  }
  c->status = 0;
  NVME_STAT_ADD(j->s, read_bytes, c->len);
}

static int retryable(int res) {
  return res >= 0 || res == -EIO || res == -EINTR || res == -EAGAIN || res == -EBUSY;
}

static void complete(job_t *j, int b, int res) {
  jbuf_t *x = &j->jb[b];
  nvme_chunk_t *c = &j->c[x->chunk];
  busy_end(j);
  if (res == (int)x->iolen) {
    if (j->write)
      spill_done(j, x, c);
    else
      restore_done(j, b, x, c);
  } else if (retryable(res) && x->attempts < NVME_RETRIES) {
    x->attempts++;
    NVME_STAT_ADD(j->s, retries, 1);
    issue(j, b);
    return;
  } else {
    chunk_fail(j, x, c, res < 0 ? res : -EIO); /* a short transfer is an I/O error */
  }
  release(j, b);
}

// ---- starting chunks ----

static int spill_prepare(job_t *j, jbuf_t *x, nvme_chunk_t *c, void *buf) {
  nvme_swap_t *s = j->s;
  c->slot = -1;
  if (c->len == 0 || c->len > s->chunk) return -EINVAL;
  int r = nvme_slot_take(s, &x->slot);
  if (r == -ENOSPC)
    nvme_say(s, SAY_ENOSPC,
             "nvme: swap file full (limit %llu bytes, or the disk): chunks stay in host RAM",
             (unsigned long long)s->limit);
  if (r) return r;
  if ((r = j->fill(buf, c, j->arg)) != 0) {
    nvme_slot_drop(s, x->slot);
    return r;
  }
  x->iolen = ROUND_UP(c->len, NVME_ALIGN);
  memset((char *)buf + c->len, 0, x->iolen - c->len);
  x->crc = nvme_crc32c(0, buf, c->len);
  return 0;
}

static int restore_prepare(job_t *j, jbuf_t *x, nvme_chunk_t *c) {
  uint32_t len;
  int r = nvme_slot_get(j->s, c->slot, &len, &x->crc);
  if (r) return r;
  x->slot = c->slot;
  c->len = len;
  x->iolen = ROUND_UP(len, NVME_ALIGN);
  return 0;
}

/* Prepares the next chunk in buffer b (a spill fills it); 0 when the chunk
 * ended there, without I/O. */
static int start_one(job_t *j, int b) {
  jbuf_t *x = &j->jb[b];
  size_t i = j->next++;
  nvme_chunk_t *c = &j->c[i];
  *x = (jbuf_t){.chunk = i, .busy = 1};
  int r = j->write ? spill_prepare(j, x, c, j->s->bufs[b]) : restore_prepare(j, x, c);
  if (r) {
    c->status = r;
    if (j->write) NVME_STAT_ADD(j->s, write_failures, 1);
    if (r == -ENOSPC) NVME_STAT_ADD(j->s, enospc, 1);
    x->busy = 0;
    return 0;
  }
  return 1;
}

// ---- the job loop ----

static void issue_ready(job_t *j) {
  while (j->nready && j->inflight < j->qd) {
    int b = j->ready[j->ready_head];
    j->ready_head = (j->ready_head + 1) % j->nbufs;
    j->nready--;
    issue(j, b);
    if (j->write) flush(j); /* each write starts at once, overlapping the next fill */
  }
}

/* Puts free buffers to work: up to qd requests in flight, and spills fill the
 * remaining buffers ahead, so that the next write goes out as soon as one
 * completes (a late copy does not leave the device idle). */
static void refill(job_t *j) {
  for (;;) {
    issue_ready(j);
    int room = j->write || j->inflight + j->nready < j->qd;
    if (j->next >= j->n || !j->nfree || !room) break;
    int b = j->freeb[--j->nfree];
    if (start_one(j, b))
      j->ready[(j->ready_head + j->nready++) % j->nbufs] = b;
    else
      j->freeb[j->nfree++] = b;
  }
  flush(j);
}

/* Handles completions one by one, reusing each freed buffer at once. */
static int reap(job_t *j, int wait) {
  while (j->nerr) {
    nvme_cqe_t e = j->errq[--j->nerr];
    complete(j, (int)e.tag, e.res);
    refill(j);
    wait = 0;
  }
  int k = j->s->eng->ops->reap(j->s->eng, j->cq, j->qd, wait && j->inflight > 0);
  for (int i = 0; i < k; i++) {
    complete(j, (int)j->cq[i].tag, j->cq[i].res);
    refill(j);
  }
  return k;
}

/* The engine cannot say what happened to requests in flight: fail them. */
static void abandon(job_t *j, int err) {
  for (int b = 0; b < j->nbufs; b++)
    if (j->jb[b].busy) {
      chunk_fail(j, &j->jb[b], &j->c[j->jb[b].chunk], err);
      release(j, b);
    }
  for (; j->next < j->n; j->next++)
    j->c[j->next].status = err;
  j->inflight = j->nready = 0;
}

static int job_loop(job_t *j) {
  refill(j);
  while (j->next < j->n || j->inflight || j->nready) {
    int r = reap(j, 1);
    if (r < 0) {
      abandon(j, r);
      return r;
    }
  }
  return 0;
}

static int job_setup(job_t *j) {
  nvme_swap_t *s = j->s;
  int r = nvme_bufs_ensure_locked(s);
  if (r) return r;
  j->nbufs = s->nbufs;
  j->qd = s->qd;
  j->jb = calloc((size_t)j->nbufs, sizeof *j->jb);
  j->freeb = calloc((size_t)j->nbufs, sizeof *j->freeb);
  j->cq = calloc((size_t)j->qd, sizeof *j->cq);
  j->errq = calloc((size_t)j->nbufs, sizeof *j->errq);
  j->ready = calloc((size_t)j->nbufs, sizeof *j->ready);
  if (!j->jb || !j->freeb || !j->cq || !j->errq || !j->ready) return -ENOMEM;
  for (int b = j->nbufs - 1; b >= 0; b--)
    j->freeb[j->nfree++] = b;
  return 0;
}

static int job_run(job_t *j) {
  for (size_t i = 0; i < j->n; i++)
    j->c[i].status = -ECANCELED; /* until the chunk is reached */
  vx_mutex_lock(&j->s->lock, VX_RANK_SWAP);
  int r = job_setup(j);
  if (!r)
    r = job_loop(j);
  else
    for (size_t i = 0; i < j->n; i++)
      j->c[i].status = r;
  vx_mutex_unlock(&j->s->lock, VX_RANK_SWAP);
  free(j->jb);
  free(j->freeb);
  free(j->cq);
  free(j->errq);
  free(j->ready);
  for (size_t i = 0; i < j->n; i++)
    if (j->c[i].status) return j->c[i].status;
  return 0;
}

int nvme_spill(nvme_swap_t *s, nvme_chunk_t *chunks, size_t n, nvme_fill_fn fill, void *arg) {
  if (!s || (n && (!chunks || !fill))) return -EINVAL;
  job_t j = {.s = s, .c = chunks, .n = n, .write = 1, .fill = fill, .arg = arg};
  return job_run(&j);
}

int nvme_restore(nvme_swap_t *s, nvme_chunk_t *chunks, size_t n, nvme_drain_fn drain, void *arg) {
  if (!s || (n && (!chunks || !drain))) return -EINVAL;
  job_t j = {.s = s, .c = chunks, .n = n, .write = 0, .drain = drain, .arg = arg};
  return job_run(&j);
}
