/* The thread-pool engine, for when io_uring is unavailable or forced off:
 * 2-4 threads doing pread/pwrite (through the seam) from a bounded queue. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "nvme_int.h"
#include "locks.h"

typedef struct pool_eng {
  nvme_eng_t base;
  int fd, qd, nthreads;
  pthread_t th[4];
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  nvme_io_t *pend; /* queued by the job thread, not yet submitted (no lock) */
  int npend;
  nvme_io_t *work; /* ring of qd requests, under mu */
  int work_head, nwork;
  nvme_cqe_t *done; /* ring of qd completions, under mu */
  int done_head, ndone;
  int stop;
} pool_eng_t;

static pool_eng_t *P(nvme_eng_t *e) {
  return (pool_eng_t *)e;
}

static int p_do(const nvme_io_t *io, int fd) {
  ssize_t r = io->write ? nvme_sys.pwrite(fd, io->buf, io->len, (off_t)io->off)
                        : nvme_sys.pread(fd, io->buf, io->len, (off_t)io->off);
  return r < 0 ? -errno : (int)r;
}

static void *p_worker(void *arg) {
  pool_eng_t *p = arg;
  vx_mutex_lock(&p->mu, VX_RANK_POOL);
  for (;;) {
    while (!p->stop && !p->nwork)
      pthread_cond_wait(&p->work_cv, &p->mu);
    if (!p->nwork) /* stopping, and nothing left to do */
      break;
    nvme_io_t io = p->work[p->work_head];
    p->work_head = (p->work_head + 1) % p->qd;
    p->nwork--;
    vx_mutex_unlock(&p->mu, VX_RANK_POOL);
    int res = p_do(&io, p->fd);
    vx_mutex_lock(&p->mu, VX_RANK_POOL);
    p->done[(p->done_head + p->ndone++) % p->qd] = (nvme_cqe_t){.tag = io.tag, .res = res};
    pthread_cond_signal(&p->done_cv);
  }
  vx_mutex_unlock(&p->mu, VX_RANK_POOL);
  return NULL;
}

static int p_queue(nvme_eng_t *e, const nvme_io_t *io) {
  pool_eng_t *p = P(e);
  if (p->npend >= p->qd) return -EBUSY;
  p->pend[p->npend++] = *io;
  return 0;
}

static int p_submit(nvme_eng_t *e) {
  pool_eng_t *p = P(e);
  if (!p->npend) return 0;
  vx_mutex_lock(&p->mu, VX_RANK_POOL);
  int r = 0, i = 0;
  for (; i < p->npend && p->nwork < p->qd; i++)
    p->work[(p->work_head + p->nwork++) % p->qd] = p->pend[i];
  for (; i < p->npend; i++) { /* more than qd outstanding: the caller's bug */
    p->done[(p->done_head + p->ndone++) % p->qd] =
        (nvme_cqe_t){.tag = p->pend[i].tag, .res = -EBUSY};
    r = -EBUSY;
  }
  p->npend = 0;
  pthread_cond_broadcast(&p->work_cv);
  vx_mutex_unlock(&p->mu, VX_RANK_POOL);
  return r;
}

static int p_reap(nvme_eng_t *e, nvme_cqe_t *out, int max, int wait) {
  pool_eng_t *p = P(e);
  vx_mutex_lock(&p->mu, VX_RANK_POOL);
  while (wait && !p->ndone)
    pthread_cond_wait(&p->done_cv, &p->mu);
  int n = 0;
  for (; n < max && p->ndone; n++, p->ndone--) {
    out[n] = p->done[p->done_head];
    p->done_head = (p->done_head + 1) % p->qd;
  }
  vx_mutex_unlock(&p->mu, VX_RANK_POOL);
  return n;
}

static int p_reg_bufs(nvme_eng_t *e, void **bufs, int n, size_t size) {
  (void)e, (void)bufs, (void)n, (void)size;
  return -EOPNOTSUPP; /* nothing to register: plain pread/pwrite */
}

static void p_unreg_bufs(nvme_eng_t *e) {
  (void)e;
}

static void p_free(pool_eng_t *p) {
  free(p->pend);
  free(p->work);
  free(p->done);
  free(p);
}

static void p_fini(nvme_eng_t *e) {
  pool_eng_t *p = P(e);
  vx_mutex_lock(&p->mu, VX_RANK_POOL);
  p->stop = 1;
  pthread_cond_broadcast(&p->work_cv);
  vx_mutex_unlock(&p->mu, VX_RANK_POOL);
  for (int i = 0; i < p->nthreads; i++)
    pthread_join(p->th[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->done_cv);
  p_free(p);
}

/* The workers do not exist in a child and mu may be held: leave it all. */
static void p_abandon(nvme_eng_t *e) {
  (void)e;
}

static const nvme_eng_ops_t pool_ops = {
    .queue = p_queue,
    .submit = p_submit,
    .reap = p_reap,
    .reg_bufs = p_reg_bufs,
    .unreg_bufs = p_unreg_bufs,
    .fini = p_fini,
    .abandon = p_abandon,
};

int nvme_pool_init(nvme_swap_t *s, int fd, int qd, int threads, nvme_eng_t **out) {
  pool_eng_t *p = calloc(1, sizeof *p);
  if (!p) return -ENOMEM;
  p->pend = calloc((size_t)qd, sizeof *p->pend);
  p->work = calloc((size_t)qd, sizeof *p->work);
  p->done = calloc((size_t)qd, sizeof *p->done);
  if (!p->pend || !p->work || !p->done) {
    p_free(p);
    return -ENOMEM;
  }
  p->base = (nvme_eng_t){.ops = &pool_ops, .swap = s};
  p->fd = fd;
  p->qd = qd;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  sigset_t all, old; /* the application's signals are not ours to take */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int r = 0;
  for (; p->nthreads < threads && !r; p->nthreads++)
    r = pthread_create(&p->th[p->nthreads], NULL, p_worker, p);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (r) {
    p->nthreads--;
    if (!p->nthreads) {
      p_fini(&p->base);
      return -r;
    }
  }
  *out = &p->base;
  return 0;
}
