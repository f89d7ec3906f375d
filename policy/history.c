/* history.c: the predictor's memory: a ring of past launches (kernel, stream,
 * time, chunk ranges by allocation *name*) and context tables that find where
 * in the past the present launch sequence last occurred. */
#include <errno.h>
#include <stdlib.h>

#include "history.h"

static uint32_t pow2_at_least(uint64_t n) {
  uint32_t v = 1;
  while (v < n && v < (1u << 30))
    v <<= 1;
  return v;
}

int hist_create(pol_t *p) {
  struct pred_hist *h = calloc(1, sizeof *h);
  if (!h) return -ENOMEM;
  h->nrec = pow2_at_least(p->cfg.history ? p->cfg.history : 16384);
  h->nrng = (uint64_t)h->nrec * 16;
  h->tsize = h->nrec * 2;
  h->rec = calloc(h->nrec, sizeof *h->rec);
  h->rng = calloc(h->nrng, sizeof *h->rng);
  h->tf = calloc(h->tsize, sizeof *h->tf);
  h->tm = calloc(h->tsize, sizeof *h->tm);
  h->tc = calloc(h->tsize, sizeof *h->tc);
  p->hist = h;
  if (!h->rec || !h->rng || !h->tf || !h->tm || !h->tc) return -ENOMEM;
  return 0;
}

void hist_destroy(pol_t *p) {
  struct pred_hist *h = p->hist;
  if (!h) return;
  free(h->rec);
  free(h->rng);
  free(h->tf);
  free(h->tm);
  free(h->tc);
  free(h);
  p->hist = NULL;
}

/* The record of launch `seq` if it is still in the ring with its ranges. */
const struct hrec *hist_get(const struct pred_hist *h, uint64_t seq) {
  if (!seq) return NULL;
  const struct hrec *r = &h->rec[seq & (h->nrec - 1)];
  if (r->seq != seq || r->rpos + h->nrng < h->rng_w) return NULL;
  return r;
}

// ---- context tables: key -> most recent launch with that context ----

static const struct hctx *table_get(const struct pred_hist *h, const struct hctx *t, uint64_t key) {
  for (uint32_t i = 0; i < 4; i++) {
    const struct hctx *e = &t[(key + i) & (h->tsize - 1)];
    if (e->key == key) return e;
  }
  return NULL;
}

static void table_put(const struct pred_hist *h, struct hctx *t, uint64_t key, uint64_t seq) {
  struct hctx *oldest = NULL;
  for (uint32_t i = 0; i < 4; i++) {
    struct hctx *e = &t[(key + i) & (h->tsize - 1)];
    if (e->key == key || !e->key) {
      e->prev = e->key == key ? e->seq : 0;
      e->key = key;
      e->seq = seq;
      return;
    }
    if (!oldest || e->seq < oldest->seq) oldest = e;
  }
  *oldest = (struct hctx){.key = key, .seq = seq};
}

// ---- streams ----

static struct hstream *stream_slot(struct pred_hist *h, uint64_t id, uint64_t seq) {
  struct hstream *lru = &h->s[0];
  for (int i = 0; i < POL_MAX_STREAMS; i++) {
    if (h->s[i].live && h->s[i].id == id) return &h->s[i];
    if (!h->s[i].live || h->s[i].last_seq < lru->last_seq) lru = &h->s[i];
    if (!h->s[i].live) break;
  }
  *lru = (struct hstream){.id = id, .live = 1, .last_seq = seq};
  return lru;
}

// ---- recording ----

// ---- allocation lineage ----

static void note_birth(pol_t *p, struct pol_arec *a) {
  struct pred_hist *h = p->hist;
  if (a->last != p->seq) {
    if (!a->born) {
      a->born = p->seq;
      if (h->born_seq != p->seq) h->born_seq = p->seq, h->nborn = 0;
      if (h->nborn < HIST_BIRTHS) h->born[h->nborn++] = a->id;
    }
    a->last = p->seq;
  }
}

struct pol_arec *hist_successor(pol_t *p, const struct pol_arec *dead) {
  struct pred_hist *h = p->hist;
  if (!h || !dead->last || dead->last != h->born_seq) return NULL;
  struct pol_arec *best = NULL;
  for (uint32_t i = 0; i < h->nborn; i++) {
    struct pol_arec *x = pol_find(p, h->born[i]);
    if (!x || x == dead || x->size < dead->size || x->size > 2 * dead->size) continue;
    if (!best || x->size < best->size) best = x;
  }
  if (best) { /* one heir per birth */
    for (uint32_t i = 0; i < h->nborn; i++)
      if (h->born[i] == best->id) h->born[i] = h->born[--h->nborn];
  }
  return best;
}

// ---- recording ----

/* Keys: `fine` = kernel + every range (name, extent; a range over a whole
 * allocation counts as "whole", so a cache that grows keeps its key),
 * `medium` = kernel + every name, `coarse` = kernel + first name. */
static void launch_keys(pol_t *p, const pol_launch_t *l, struct hrec *r) {
  struct pred_hist *h = p->hist;
  uint64_t kf = pol_hash2(l->kernel, 0x5f), km = kf, kc = kf;
  r->nr = 0;
  r->rpos = h->rng_w;
  for (uint32_t i = 0; i < l->nranges && r->nr < POL_MAX_RANGES; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    if (!a || a->tier != POL_TIER_MANAGED) continue;
    note_birth(p, a);
    struct hrng *g = &h->rng[h->rng_w++ & (h->nrng - 1)];
    uint32_t first = l->ranges[i].first, count = l->ranges[i].count;
    *g = (struct hrng){.name = a->name,
                       .first = first,
                       .count = count,
                       .mode = l->ranges[i].mode,
                       .whole = first == 0 && count >= a->nchunks};
    if (!r->nr) kc = pol_hash2(kc, a->name);
    km = pol_hash2(km, a->name);
    kf = pol_hash2(km, g->whole ? 0xffffffffull : ((uint64_t)first << 32) | count);
    r->nr++;
  }
  r->kf = kf;
  r->km = km;
  r->kc = kc;
}

/* 1 if past launch n could be the present r with some of its arguments moved:
 * the same kernel and number of ranges, the same first allocation (in a
 * mixture of experts the expert's weights: another one is another path) and
 * at least half of the ranges on the same allocations (a KV cache re-made
 * elsewhere each token changes the others). */
static int similar(const struct pred_hist *h, const struct hrec *n, const struct hrec *r) {
  if (n->kernel != r->kernel || n->nr != r->nr) return 0;
  uint32_t same = 0;
  if (r->nr && h->rng[n->rpos & (h->nrng - 1)].name != h->rng[r->rpos & (h->nrng - 1)].name)
    return 0;
  for (uint32_t i = 0; i < r->nr; i++)
    same +=
        h->rng[(n->rpos + i) & (h->nrng - 1)].name == h->rng[(r->rpos + i) & (h->nrng - 1)].name;
  return 2 * same >= r->nr;
}

#define HIST_AGREE 192 /* launches compared back when candidate matches disagree */

/* How well the present's recent past agrees with the past at candidate c's
 * lag: of the stream's last HIST_AGREE launches, those whose fine key equals
 * the launch the same distance back from c, plus one if c is the present's
 * own fine key.  Launches that touch only activations look alike in every
 * layer and agree at a lag of a layer or two; launches with a layer's own
 * weights agree only at a lag of whole periods. */
static uint32_t agreement(const struct pred_hist *h, const struct hrec *r, const struct hrec *c) {
  uint64_t lag = r->seq - c->seq;
  uint32_t score = c->kf == r->kf;
  for (uint64_t i = 1; i <= HIST_AGREE && i + lag < r->seq; i++) {
    const struct hrec *a = hist_get(h, r->seq - i), *b = hist_get(h, r->seq - i - lag);
    if (a && b && a->stream == r->stream) score += a->kf == b->kf;
  }
  return score;
}

static const struct hrec *table_hit(const struct pred_hist *h, const struct hctx *t, uint64_t key) {
  const struct hctx *e = table_get(h, t, key);
  return e ? hist_get(h, e->seq) : NULL;
}

/* Where the present continues a past sequence: first the launch after the last
 * match if it repeats (sticky); else, of the candidates -- the last occurrence
 * of this context by the fine key, the sticky candidate n if it is similar
 * (the sequence goes on with some arguments moved), by the medium key, by the
 * coarse key (which must agree on the number of ranges), n if it is the same
 * kernel, only against others -- the one whose lag the recent past agrees
 * with most (see
 * agreement), the first in that order on a tie.  A KV cache re-made each
 * token makes a layer's launch look, by its ranges, like another layer's; the
 * lag of whole periods is what the launches around it confirm.  When nothing
 * matches, the present predicts nothing, but the next launch is still tried
 * against the sticky candidate's successor (s->lost): one launch with moved
 * arguments must not make the next one jump to another layer. */
static uint64_t find_match(struct pred_hist *h, struct hstream *s, const struct hrec *r,
                           const uint64_t ctx[3]) {
  const struct hrec *m = hist_get(h, s->match ? s->match : s->lost);
  const struct hrec *n = m ? hist_get(h, m->next_same) : NULL;
  h->on_track = 0;
  s->lost = 0;
  if (n && n->kf == r->kf) {
    h->on_track = 1;
    return n->seq;
  }
  int kin = n && n->kernel == r->kernel;
  const struct hrec *cc = table_hit(h, h->tc, ctx[2]);
  const struct hrec *cand[5] = {table_hit(h, h->tf, ctx[0]), n && similar(h, n, r) ? n : NULL,
                                table_hit(h, h->tm, ctx[1]), cc && cc->nr == r->nr ? cc : NULL,
                                kin ? n : NULL};
  const struct hrec *best = NULL;
  uint32_t best_a = 0;
  int others = 0;
  for (int i = 0; i < 5; i++) {
    if (!cand[i]) continue;
    if (i < 4)
      others = 1;
    else if (!others)
      break; /* n alone, neither similar nor named by a table: no match */
    uint32_t a = agreement(h, r, cand[i]);
    if (!best || a > best_a) best = cand[i], best_a = a;
  }
  if (!best && kin) s->lost = n->seq;
  return best ? best->seq : 0;
}

void hist_record(pol_t *p, const pol_launch_t *l) {
  struct pred_hist *h = p->hist;
  struct hrec *r = &h->rec[p->seq & (h->nrec - 1)];
  *r = (struct hrec){.seq = p->seq, .stream = l->stream, .time = l->now, .kernel = l->kernel};
  launch_keys(p, l, r);
  struct hstream *s = stream_slot(h, l->stream, p->seq);
  uint64_t ctx[3] = {pol_hash2(s->kf, r->kf), pol_hash2(s->km, r->km), pol_hash2(s->kc, r->kc)};
  s->match = find_match(h, s, r, ctx);
  if (s->match) p->st.launches_matched++;
  struct hrec *prev = (struct hrec *)hist_get(h, s->last_seq);
  if (prev && prev != r) prev->next_same = p->seq;
  table_put(h, h->tf, ctx[0], p->seq);
  table_put(h, h->tm, ctx[1], p->seq);
  table_put(h, h->tc, ctx[2], p->seq);
  s->kf = r->kf;
  s->km = r->km;
  s->kc = r->kc;
  s->last_seq = p->seq;
  s->last_time = l->now;
}

int hist_on_track(const pol_t *p) {
  return p->hist->on_track;
}
