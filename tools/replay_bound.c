/* replay_bound.c: the "bound" policy.  Lower bounds on transfers in each
 * direction: Belady's MIN over the chunk reference string (up), and over the
 * write-to-next-use gaps (down); the lower bound on total time they give, and
 * a policy's share of the gain the bound allows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

struct hent {
  uint64_t key;
  uint32_t g;
};

struct heap {
  struct hent *v;
  size_t n;
};

static void heap_push(struct heap *h, uint64_t key, uint32_t g) {
  size_t i = h->n++;
  while (i && h->v[(i - 1) / 2].key < key) {
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = (struct hent){key, g};
}

static struct hent heap_pop(struct heap *h) {
  struct hent top = h->v[0], last = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->v[c + 1].key > h->v[c].key) c++;
    if (h->v[c].key <= last.key) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n) h->v[i] = last;
  return top;
}

/* How a launch reaches a chunk: RF_RD if some range reaching it may read it
 * (not POL_ACCESS_WRITE: the old data is needed), RF_WR if some range may
 * write it (not POL_ACCESS_READ). */
enum { RF_RD = 1, RF_WR = 2 };

/* The launch's distinct chunks, appended to refs, with their RF_* in fl. */
static size_t launch_refs(const rp_trace_t *t, const rp_event_t *ev, uint32_t *stamp, uint32_t s,
                          size_t *at, uint32_t *refs, uint8_t *fl, size_t n) {
  for (uint32_t r = 0; r < ev->nr; r++) {
    const pol_range_t *rg = &t->rg[ev->r0 + r];
    const rp_alloc_t *a = &t->al[t->rg_alloc[ev->r0 + r]];
    uint8_t f =
        (rg->mode != POL_ACCESS_WRITE ? RF_RD : 0) | (rg->mode != POL_ACCESS_READ ? RF_WR : 0);
    for (uint64_t i = rg->first; i < (uint64_t)rg->first + rg->count && i < a->nchunks; i++) {
      uint32_t g = (uint32_t)(a->base + i);
      if (stamp[g] != s) {
        stamp[g] = s;
        at[g] = n;
        fl[n] = 0;
        refs[n++] = g;
      }
      fl[at[g]] |= f;
    }
  }
  return n;
}

struct refs {
  uint32_t *g;  /* every launch's distinct chunks, each launch ended by UINT32_MAX */
  uint8_t *fl;  /* RF_* of that launch for that chunk; RF_WR starts a span of data only the
                 * device has */
  uint64_t *nx; /* position of the chunk's next reference if it reads, UINT64_MAX = none */
  uint64_t *se; /* where the span of device-only data it is in ends (min_down) */
  uint64_t *sz; /* bytes of each chunk (a tail chunk is shorter) */
  size_t n;
};

/* Both bounds relax the device to `cap` bytes in which any part of a chunk may
 * stay (each byte a unit page of uniform cost): Belady's farthest-next-use rule
 * is optimal there, and every schedule of whole chunks in whole slots is one of
 * its schedules, so the optimum bounds them all from below. */

/* Evicts from the heap's farthest entries until size <= cap; returns bytes taken
 * from entries still valid (res[g] > 0 and keyed by their current next use).
 * Entries with pin[g] == s (the launch's own chunks) are kept: set aside in
 * `aside`, pushed back at the end. */
static uint64_t shrink(struct heap *h, uint64_t *res, const uint64_t *cur, uint64_t *size,
                       uint64_t cap, const uint32_t *pin, uint32_t s, struct hent *aside) {
  uint64_t out = 0;
  size_t na = 0;
  while (*size > cap && h->n) {
    struct hent v = heap_pop(h);
    if (!res[v.g] || cur[v.g] != v.key) continue;
    if (pin && pin[v.g] == s) {
      aside[na++] = v;
      continue;
    }
    uint64_t x = *size - cap < res[v.g] ? *size - cap : res[v.g];
    res[v.g] -= x, *size -= x, out += x;
    if (res[v.g]) heap_push(h, v.key, v.g);
  }
  while (na)
    heap_push(h, aside[na - 1].key, aside[na - 1].g), na--;
  return out;
}

static void drop_alloc(const rp_trace_t *t, const rp_event_t *ev, uint64_t *res, uint64_t *size) {
  const rp_alloc_t *a = &t->al[ev->alloc];
  for (uint32_t i = 0; i < a->nchunks; i++)
    *size -= res[a->base + i], res[a->base + i] = 0;
}

/* H2D: MIN over the reference string (first touches are free, freed chunks
 * leave), a launch's chunks all resident while it runs (when they fit).  A
 * launch that only writes a chunk needs none of its old data: placing it
 * costs nothing (the planner's POL_ACT_NODATA), and what only such a write
 * comes for next is worth nothing kept (nx). */
static uint64_t min_up(const rp_trace_t *t, uint64_t cap, const struct refs *R, uint64_t *res,
                       uint8_t *touched, uint64_t *cur, struct heap *h, uint32_t *pin,
                       struct hent *aside) {
  uint64_t bytes = 0, size = 0;
  size_t pos = 0;
  uint32_t s = 0;
  for (size_t e = 0; e < t->nev; e++) {
    const rp_event_t *ev = &t->ev[e];
    if (ev->type == POL_TREC_FREE) drop_alloc(t, ev, res, &size);
    if (ev->type != POL_TREC_LAUNCH) continue;
    uint64_t own = 0;
    s++;
    for (; R->g[pos] != UINT32_MAX; pos++) {
      uint32_t g = R->g[pos];
      uint64_t miss = R->sz[pos] - res[g];
      if (touched[g] && (R->fl[pos] & RF_RD)) bytes += miss;
      res[g] = R->sz[pos], size += miss, own += R->sz[pos];
      touched[g] = 1;
      cur[g] = R->nx[pos];
      pin[g] = s;
      heap_push(h, R->nx[pos], g);
    }
    shrink(h, res, cur, &size, cap > own ? cap : own, pin, s, aside);
    pos++; /* the launch's end marker */
  }
  return bytes;
}

/* D2H: a chunk a launch writes holds data only the device has (one never
 * written holds zeros, or what a copy put there: a host tier may hold and
 * read that in place, never on the device at all).  Managed memory
 * keeps one copy and no exact policy drops a live byte (vx cannot know
 * nothing will read it: the host may, unseen), so if the chunk leaves the
 * device before that data dies (the next write, its free, or the end of the
 * run), it is written back, at least once: after that a ReadMostly copy
 * may serve the rest of the span for free.  So each such span is an
 * interval the device holds or pays its bytes for; reads inside it do not
 * end it.  Keeping the most bytes in `cap` is interval packing, and giving
 * up what ends last when over capacity (MIN again) keeps the most.  A
 * launch's other chunks take no room here: a launch may reach them over
 * the link (a host tier does), and charging their room would make that
 * rule wrong (a span kept spares the room its reads take: the engine's
 * demand paging wrote back less than such a bound on transformer-train). */
static uint64_t min_down(const rp_trace_t *t, uint64_t cap, const struct refs *R, uint64_t *res,
                         uint64_t *cur, struct heap *h) {
  uint64_t bytes = 0, size = 0;
  size_t pos = 0;
  for (size_t e = 0; e < t->nev; e++) {
    const rp_event_t *ev = &t->ev[e];
    if (ev->type == POL_TREC_FREE) drop_alloc(t, ev, res, &size);
    if (ev->type != POL_TREC_LAUNCH) continue;
    for (; R->g[pos] != UINT32_MAX; pos++) {
      if (!(R->fl[pos] & RF_WR)) continue; /* a read inside a span carries on what is kept */
      uint32_t g = R->g[pos];
      size += R->sz[pos] - res[g], res[g] = R->sz[pos];
      cur[g] = R->se[pos];
      heap_push(h, R->se[pos], g);
    }
    bytes += shrink(h, res, cur, &size, cap, NULL, 0, NULL);
    pos++;
  }
  return bytes;
}

/* Bytes of chunk i of allocation a (a tail chunk is shorter). */
static uint64_t alloc_chunk_bytes(const rp_trace_t *t, const rp_alloc_t *a, uint32_t i) {
  uint64_t left = a->size - (uint64_t)i * t->chunk;
  return left < t->chunk ? left : t->chunk;
}

static uint64_t chunk_bytes(const rp_trace_t *t, uint32_t g, const uint32_t *owner) {
  const rp_alloc_t *a = &t->al[owner[g]];
  return alloc_chunk_bytes(t, a, (uint32_t)(g - a->base));
}

static int refs_build(const rp_trace_t *t, struct refs *R) {
  size_t maxref = t->nlaunch;
  for (size_t i = 0; i < t->nrg; i++)
    maxref += t->rg[i].count;
  size_t nc = t->nchunks + 1;
  uint32_t *stamp = calloc(nc, sizeof *stamp);
  uint32_t *owner = malloc(nc * sizeof *owner);
  size_t *at = malloc(nc * sizeof *at);
  uint64_t *last = malloc(nc * sizeof *last), *end = malloc(nc * sizeof *end);
  R->g = malloc((maxref + 1) * sizeof *R->g);
  R->fl = malloc(maxref + 1);
  R->nx = malloc((maxref + 1) * sizeof *R->nx);
  R->sz = malloc((maxref + 1) * sizeof *R->sz);
  R->se = malloc((maxref + 1) * sizeof *R->se);
  int ok = stamp && owner && at && last && end && R->g && R->fl && R->nx && R->sz && R->se;
  if (ok) {
    for (size_t a = 0; a < t->nal; a++)
      for (uint32_t i = 0; i < t->al[a].nchunks; i++)
        owner[t->al[a].base + i] = (uint32_t)a;
    uint32_t s = 0;
    size_t n = 0;
    for (size_t g = 0; g < nc; g++)
      end[g] = UINT64_MAX;
    for (size_t e = 0; e < t->nev; e++) {
      const rp_event_t *ev = &t->ev[e];
      if (ev->type == POL_TREC_FREE) { /* its data dies here, before the next launch */
        const rp_alloc_t *a = &t->al[ev->alloc];
        for (uint32_t i = 0; i < a->nchunks; i++)
          end[a->base + i] = n;
      }
      if (ev->type != POL_TREC_LAUNCH) continue;
      size_t p0 = n;
      n = launch_refs(t, ev, stamp, ++s, at, R->g, R->fl, n);
      for (size_t i = p0; i < n; i++)
        R->sz[i] = chunk_bytes(t, R->g[i], owner);
      R->g[n++] = UINT32_MAX; /* end of launch */
    }
    R->n = n;
    for (size_t g = 0; g < nc; g++)
      last[g] = UINT64_MAX;
    for (size_t i = n; i-- > 0;) {
      uint32_t g = R->g[i];
      if (g == UINT32_MAX) continue;
      R->nx[i] = last[g] != UINT64_MAX && (R->fl[last[g]] & RF_RD) ? last[g] : UINT64_MAX;
      last[g] = i;
    }
    /* spans: a write starts one; it ends where the next starts, at the
     * chunk's free, or at the end of the run (end[]) */
    for (size_t g = 0; g < nc; g++)
      if (end[g] == UINT64_MAX) end[g] = n;
    for (size_t i = n; i-- > 0;) {
      uint32_t g = R->g[i];
      if (g == UINT32_MAX) continue;
      R->se[i] = end[g];
      if (R->fl[i] & RF_WR) end[g] = i;
    }
  }
  free(stamp), free(owner), free(at), free(last), free(end);
  return ok ? 0 : -ENOMEM;
}

static void refs_free(struct refs *R) {
  free(R->g), free(R->fl), free(R->nx), free(R->sz), free(R->se);
}

int rp_min_traffic(const rp_trace_t *t, uint64_t capacity, uint64_t *up, uint64_t *down) {
  uint64_t cap = capacity / t->chunk * t->chunk; /* whole slots, as the engine has */
  struct refs R = {0};
  int r = refs_build(t, &R);
  uint64_t *cur = calloc(t->nchunks + 1, 8), *flag = calloc(t->nchunks + 1, 8);
  uint8_t *touched = calloc(t->nchunks + 1, 1);
  uint32_t *pin = calloc(t->nchunks + 1, sizeof *pin);
  struct heap h = {.v = malloc((R.n + 1) * sizeof *h.v)};
  struct hent *aside = malloc((R.n + 1) * sizeof *aside);
  if (!r && (!cur || !flag || !touched || !pin || !h.v || !aside)) r = -ENOMEM;
  if (!r) {
    *up = min_up(t, cap, &R, flag, touched, cur, &h, pin, aside);
    memset(flag, 0, (t->nchunks + 1) * sizeof *flag);
    h.n = 0;
    *down = min_down(t, cap, &R, flag, cur, &h);
  }
  refs_free(&R);
  free(cur), free(flag), free(touched), free(h.v);
  free(pin), free(aside);
  return r;
}

/* The cut bound.  The engine runs kernels one at a time in trace order, so
 * every launch k starts at a moment T_k when the launches before it are done
 * and those after it have not begun, with at most `cap` bytes on the device
 * (a chunk being copied, or being written back, holds its room).  Between
 * two such moments T_a and T_b:
 *   up:    every chunk that launches a..b-1 use, touched before a, first
 *          used in between by one that reads it (not only writes), and not
 *          on the device at T_a is copied up (or read over the link) in
 *          between: at least U(a,b) - cap bytes;
 *   down:  every chunk that launches a..b-1 write (a span's start, as
 *          min_down has it) and
 *          still allocated at T_b (used again or not: the trace records no
 *          host copies, so any live byte may yet be read and no exact
 *          policy drops it), but not on the device at T_b, was written
 *          back in between, or written over the link (managed memory keeps
 *          no other copy): at least W(a,b) - cap bytes;
 *   compute: the kernels a..b-1 run in between.
 * T_b - T_a is at least the largest of the three; the run is at least the
 * sum over any split of the launches into such intervals, and the best
 * split is found by dynamic programming over interval ends.  The MIN
 * bounds let a training step's write-back (forward) and fetch (backward)
 * overlap on the full-duplex link as if they came at the same time; this
 * one keeps each on its side of the turn.  Splits are tried only at
 * CUT_POINTS launches evenly spaced (fewer splits: still a bound), which
 * keeps the search at CUT_POINTS passes over the trace. */
#define CUT_POINTS 512
struct cut {
  uint32_t *first;        /* the first launch using each chunk */
  uint32_t *seen, *wseen; /* interval stamps: counted in U, in W */
  size_t *p0;             /* each launch's first entry in R->g */
  size_t *f0;             /* fr[f0[j]..f0[j+1]): allocations freed after launch j */
  uint32_t *fr;
  double *dur, *best;
};

static void cut_free(struct cut *c) {
  free(c->first), free(c->seen), free(c->wseen), free(c->p0), free(c->dur);
  free(c->f0), free(c->fr);
  free(c->best);
}

static int cut_setup(const rp_trace_t *t, const rp_model_t *m, const struct refs *R,
                     struct cut *c) {
  size_t n = t->nchunks + 1, k = t->nlaunch;
  c->first = malloc(n * sizeof *c->first);
  c->seen = calloc(n, sizeof *c->seen), c->wseen = calloc(n, sizeof *c->wseen);
  c->p0 = malloc((k + 1) * sizeof *c->p0), c->dur = malloc((k + 1) * sizeof *c->dur);
  c->best = calloc(k + 1, sizeof *c->best);
  c->f0 = calloc(k + 1, sizeof *c->f0), c->fr = malloc((t->nal + 1) * sizeof *c->fr);
  if (!c->first || !c->seen || !c->wseen || !c->p0 || !c->dur || !c->best || !c->f0 || !c->fr)
    return -ENOMEM;
  memset(c->first, 0xff, n * sizeof *c->first);
  size_t pos = 0, j = 0, nf = 0;
  for (size_t e = 0; e < t->nev; e++) {
    const rp_event_t *ev = &t->ev[e];
    if (ev->type == POL_TREC_FREE && j) c->fr[nf++] = ev->alloc; /* after launch j - 1 */
    if (ev->type != POL_TREC_LAUNCH) continue;
    c->f0[j] = nf;
    uint64_t touched = 0;
    c->p0[j] = pos;
    for (; R->g[pos] != UINT32_MAX; pos++) {
      uint32_t g = R->g[pos];
      if (c->first[g] == UINT32_MAX) c->first[g] = (uint32_t)j;
      touched += R->sz[pos];
    }
    pos++;
    c->dur[j++] = rp_launch_ns(ev, touched, m);
  }
  c->p0[j] = pos;
  c->f0[j] = nf;
  return 0;
}

static double over(uint64_t bytes, uint64_t cap, double bps) {
  return bytes > cap ? (double)(bytes - cap) / bps * 1e9 : 0;
}

static int cut_bound(const rp_trace_t *t, const rp_model_t *m, uint64_t cap, const struct refs *R,
                     double *out_ns) {
  struct cut c = {0};
  int r = cut_setup(t, m, R, &c);
  size_t k = t->nlaunch, step = (k + CUT_POINTS - 1) / CUT_POINTS;
  if (step == 0) step = 1;
  for (size_t a = 0; !r && a < k; a += step) {
    uint32_t s = (uint32_t)a + 1;
    uint64_t up = 0, down = 0;
    double comp = 0;
    for (size_t j = a; j < k; j++) {
      for (size_t q = c.p0[j]; R->g[q] != UINT32_MAX; q++) {
        uint32_t g = R->g[q];
        if (c.seen[g] != s) {
          c.seen[g] = s;
          if (c.first[g] < a && (R->fl[q] & RF_RD)) up += R->sz[q];
        }
        if ((R->fl[q] & RF_WR) && c.wseen[g] != s) {
          c.wseen[g] = s;
          down += R->sz[q];
        }
      }
      for (size_t f = c.f0[j]; f < c.f0[j + 1]; f++) { /* freed after j, before T_(j+1) */
        const rp_alloc_t *al = &t->al[c.fr[f]];
        for (uint32_t i = 0; i < al->nchunks; i++) {
          if (c.wseen[al->base + i] != s) continue;
          down -= alloc_chunk_bytes(t, al, i);
          c.wseen[al->base + i] = 0;
        }
      }
      comp += c.dur[j];
      if ((j + 1) % step && j + 1 != k) continue; /* splits only at the cut points */
      double v = rp_max3(comp, over(up, cap, m->link_bps), over(down, cap, m->link_bps));
      if (c.best[a] + v > c.best[j + 1]) c.best[j + 1] = c.best[a] + v;
    }
  }
  *out_ns = r ? 0 : c.best[k];
  cut_free(&c);
  return r;
}

int rp_cut_bound(const rp_trace_t *t, const rp_model_t *m, double *out_s) {
  struct refs R = {0};
  double ns = 0;
  int r = refs_build(t, &R);
  if (!r) r = cut_bound(t, m, m->capacity / t->chunk * t->chunk, &R, &ns);
  refs_free(&R);
  *out_s = ns / 1e9;
  return r;
}

/* A lower bound on every policy's total time in this model: compute cannot go
 * faster than with infinite memory, each copy engine (the link is full
 * duplex) must carry at least MIN's transfers in its direction and the
 * program's copies, and no cut
 * between launches can be crossed sooner than cut_bound says. */
int rp_run_bound(const rp_trace_t *t, const rp_model_t *m, rp_result_t *out) {
  rp_result_t inf;
  int r = rp_run(t, m, "infinite", &inf);
  uint64_t up = 0, down = 0;
  if (!r) r = rp_min_traffic(t, m->capacity, &up, &down);
  if (r < 0) return r;
  /* the program's own copies hold the same engines in every policy */
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].type == POL_TREC_COPY) {
      if (t->ev[i].dir == POL_COPY_HTOD)
        up += t->ev[i].bytes;
      else
        down += t->ev[i].bytes;
    }
  double link_up = (double)up / m->link_bps, link_down = (double)down / m->link_bps;
  double link = link_up > link_down ? link_up : link_down;
  out->compute_s = inf.compute_s;
  double cut = 0;
  if (!r) r = rp_cut_bound(t, m, &cut);
  if (r < 0) return r;
  out->total_s = inf.total_s > link ? inf.total_s : link;
  if (cut > out->total_s) out->total_s = cut;
  out->bytes_up = up;
  out->bytes_down = down;
  return 0;
}

void rp_bound_share(rp_result_t *r, const rp_result_t *dem, const rp_result_t *bnd) {
  double gain = dem->total_s - bnd->total_s;
  if (gain > 1e-12)
    r->bound_gain_share = (dem->total_s - r->total_s) / gain;
  else
    r->bound_gain_share = r->total_s <= bnd->total_s + 1e-12 ? 1.0 : 0.0;
}
