/* predict.c: the predicted future: each stream replays what followed the past
 * launch its present matches; streams are merged by predicted time. */
#include "history.h"

static uint64_t next_in(const struct pred_hist *h, uint64_t seq, uint64_t stop) {
  const struct hrec *r = hist_get(h, seq);
  if (!r || !r->next_same || r->next_same >= stop || !hist_get(h, r->next_same)) return 0;
  return r->next_same;
}

struct pred_it *pred_begin(pol_t *p) {
  struct pred_hist *h = p->hist;
  struct pred_it *it = &h->it;
  it->n = 0;
  for (int i = 0; i < POL_MAX_STREAMS; i++) {
    const struct hstream *s = &h->s[i];
    it->cur[i] = 0;
    if (!s->live || !s->match || s->last_seq + POL_MAX_LOOKAHEAD < p->seq) continue;
    const struct hrec *m = hist_get(h, s->match);
    if (!m) continue;
    it->stop[i] = s->last_seq;
    it->base[i] = s->last_time - m->time; /* past time + base = predicted time */
    it->cur[i] = next_in(h, s->match, it->stop[i]);
  }
  return it;
}

/* Resolves a past launch's ranges (by name) against the live allocations. */
static void resolve(pol_t *p, const struct hrec *r, struct fut_launch *out) {
  const struct pred_hist *h = p->hist;
  out->n = 0;
  for (uint32_t i = 0; i < r->nr; i++) {
    const struct hrng *g = &h->rng[(r->rpos + i) & (h->nrng - 1)];
    struct fut_rng *f = &out->r[out->n++];
    f->a = pol_find_name(p, g->name);
    f->key = g->name;
    f->first = g->first;
    f->count = g->whole && f->a ? f->a->nchunks : g->count; /* it may have grown */
    f->mode = g->mode;
  }
}

int pred_next(pol_t *p, void *vit, struct fut_launch *out) {
  struct pred_hist *h = p->hist;
  struct pred_it *it = vit;
  int best = -1;
  uint64_t best_t = 0;
  for (int i = 0; i < POL_MAX_STREAMS; i++) {
    const struct hrec *r = it->cur[i] ? hist_get(h, it->cur[i]) : NULL;
    if (!r) {
      it->cur[i] = 0;
      continue;
    }
    uint64_t t = r->time + it->base[i];
    if (best < 0 || (int64_t)(t - best_t) < 0) {
      best = i;
      best_t = t;
    }
  }
  if (best < 0) return 0;
  const struct hrec *r = hist_get(h, it->cur[best]);
  resolve(p, r, out);
  it->cur[best] = next_in(h, r->seq, it->stop[best]);
  it->n++;
  return 1;
}
