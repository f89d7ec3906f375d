/* Per-thread pins: the chunks of the ranges a thread made resident stay
 * out of every spill until its operation is enqueued (spill_op_done) or
 * its next SPILL_PIN_CALLS calls have passed. */
#include <stdlib.h>

#include "spill.h"
#include "spill_int.h"
#include "spill_order.h"
#include "locks.h"

static void pin_thread_exit(void *arg) {
  spill_pinset_t *ps = arg;
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
  spill_unpin_all_locked(ps);
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
  for (int c = 0; c < SPILL_PIN_CALLS; c++)
    if (ps->p[c] != ps->p0[c]) free(ps->p[c]);
  free(ps);
}

static void pin_key_make(void) {
  spill_g.pin_key_ok = pthread_key_create(&spill_g.pin_key, pin_thread_exit) == 0;
}

spill_pinset_t *spill_pinset(void) {
  pthread_once(&spill_g.pin_once, pin_key_make);
  if (!spill_g.pin_key_ok) return NULL;
  spill_pinset_t *ps = pthread_getspecific(spill_g.pin_key);
  if (ps) return ps;
  ps = calloc(1, sizeof *ps);
  for (int c = 0; ps && c < SPILL_PIN_CALLS; c++)
    ps->p[c] = ps->p0[c], ps->cap[c] = SPILL_PIN_RANGES;
  if (ps && pthread_setspecific(spill_g.pin_key, ps)) {
    free(ps);
    ps = NULL;
  }
  return ps;
}

/* Takes back one pin (the record may be gone, or be a new one at the same
 * address: the generation tells). */
static void unpin_locked(const spill_pin_t *p) {
  spill_rec_t *r = spill_rec_find_locked(p->base);
  if (!r || r->gen != p->gen) return;
  for (uint32_t i = p->first; i < p->end && i < r->nchunks; i++)
    if (r->pins[i]) r->pins[i]--;
}

spill_pin_t *spill_pin_call_locked(spill_pinset_t *ps, int k) {
  int c = ps->head = (ps->head + 1) % SPILL_PIN_CALLS;
  for (int i = 0; i < ps->n[c]; i++)
    unpin_locked(&ps->p[c][i]);
  ps->n[c] = 0;
  if (k > ps->cap[c]) { /* a call reaching more than ever: this slot grows */
    spill_pin_t *np = malloc((size_t)k * sizeof *np);
    if (!np) return NULL;
    if (ps->p[c] != ps->p0[c]) free(ps->p[c]);
    ps->p[c] = np, ps->cap[c] = k;
  }
  return ps->p[c];
}

void spill_unpin_all_locked(spill_pinset_t *ps) {
  for (int c = 0; c < SPILL_PIN_CALLS; c++) {
    for (int i = 0; i < ps->n[c]; i++)
      unpin_locked(&ps->p[c][i]);
    ps->n[c] = 0;
  }
}

void spill_op_done(void) {
  if (!spill_armed()) return;
  spill_order_enqueued(NULL, SPILL_ORDER_UNKNOWN); /* the copy hooks do not name the stream */
  spill_pins_release();
}

void spill_pins_release(void) {
  if (!spill_armed()) return;
  /* Every launch comes here: look, never make a pinset (a thread that
   * pinned nothing has none). */
  pthread_once(&spill_g.pin_once, pin_key_make);
  spill_pinset_t *ps = spill_g.pin_key_ok ? pthread_getspecific(spill_g.pin_key) : NULL;
  if (!ps) return;
  int any = 0; /* the owner alone writes n[]: no lock to read it */
  for (int c = 0; c < SPILL_PIN_CALLS; c++)
    any |= ps->n[c];
  if (!any) return;
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
  spill_unpin_all_locked(ps);
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
}
