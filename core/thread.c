/* vx_thread_start: a thread of vx's that is running its own code by the
 * time the call returns, with every signal blocked. */
#include "thread.h"
#include "locks.h"

#include <errno.h>
#include <signal.h>

struct start {
  void *(*fn)(void *);
  void *arg;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int running;
};

static void *trampoline(void *p) {
  struct start *s = p; /* on the creator's stack: read it before saying so */
  void *(*fn)(void *) = s->fn;
  void *arg = s->arg;
  vx_mutex_lock(&s->mu, VX_RANK_THREAD_START);
  s->running = 1;
  pthread_cond_signal(&s->cv);
  vx_mutex_unlock(&s->mu, VX_RANK_THREAD_START);
  return fn(arg);
}

int vx_thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
  struct start s = {.fn = fn, .arg = arg, .running = 0};
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  sigset_t all, old; /* the thread inherits the mask */
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(t, NULL, trampoline, &s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0) {
    vx_mutex_lock(&s.mu, VX_RANK_THREAD_START);
    while (!s.running)
      pthread_cond_wait(&s.cv, &s.mu);
    vx_mutex_unlock(&s.mu, VX_RANK_THREAD_START);
  }
  pthread_cond_destroy(&s.cv);
  pthread_mutex_destroy(&s.mu);
  return -rc;
}
