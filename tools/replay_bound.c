/* replay_bound.c: the lower bound on transfers: Belady's MIN replacement over the
 * trace's chunk reference string (first touches are free, freed chunks leave). */
#include <stdlib.h>

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

/* The launch's distinct chunks, appended to refs. */
static size_t launch_refs(const rp_trace_t *t, const rp_event_t *ev, uint32_t *stamp, uint32_t s,
                          uint32_t *refs, size_t n) {
  for (uint32_t r = 0; r < ev->nr; r++) {
    const pol_range_t *rg = &t->rg[ev->r0 + r];
    const rp_alloc_t *a = &t->al[t->rg_alloc[ev->r0 + r]];
    for (uint64_t i = rg->first; i < (uint64_t)rg->first + rg->count && i < a->nchunks; i++) {
      uint32_t g = (uint32_t)(a->base + i);
      if (stamp[g] != s) {
        stamp[g] = s;
        refs[n++] = g;
      }
    }
  }
  return n;
}

static uint64_t min_pass(const rp_trace_t *t, uint64_t cap, const uint32_t *refs,
                         const uint64_t *nxt, uint8_t *res, uint8_t *touched, uint64_t *cur,
                         struct heap *h) {
  uint64_t bytes = 0, size = 0;
  size_t pos = 0;
  for (size_t e = 0; e < t->nev; e++) {
    const rp_event_t *ev = &t->ev[e];
    if (ev->type == POL_TREC_FREE) {
      const rp_alloc_t *a = &t->al[ev->alloc];
      for (uint32_t i = 0; i < a->nchunks; i++)
        if (res[a->base + i]) res[a->base + i] = 0, size--;
      continue;
    }
    if (ev->type != POL_TREC_LAUNCH) continue;
    for (; refs[pos] != UINT32_MAX; pos++) { /* this launch's refs, then a marker */
      uint32_t g = refs[pos];
      if (!res[g]) {
        if (touched[g]) bytes += t->chunk;
        while (size >= cap && h->n) {
          struct hent v = heap_pop(h);
          if (res[v.g] && cur[v.g] == v.key) res[v.g] = 0, size--;
        }
        res[g] = 1, size++;
      }
      touched[g] = 1;
      cur[g] = nxt[pos];
      heap_push(h, nxt[pos], g);
    }
    pos++; /* the launch's end marker */
  }
  return bytes;
}

uint64_t rp_min_bytes(const rp_trace_t *t, uint64_t capacity) {
  uint64_t cap = capacity / t->chunk, bytes = 0;
  size_t nref = 0, maxref = t->nlaunch;
  for (size_t i = 0; i < t->nrg; i++)
    maxref += t->rg[i].count;
  uint32_t *refs = malloc((maxref + 1) * sizeof *refs), *stamp = calloc(t->nchunks + 1, 4);
  uint64_t *nxt = malloc((maxref + 1) * sizeof *nxt), *last = malloc((t->nchunks + 1) * 8);
  uint64_t *cur = calloc(t->nchunks + 1, 8);
  uint8_t *res = calloc(t->nchunks + 1, 1), *touched = calloc(t->nchunks + 1, 1);
  struct heap h = {.v = malloc((maxref + 1) * sizeof *h.v)};
  if (refs && stamp && nxt && last && cur && res && touched && h.v) {
    uint32_t s = 0;
    for (size_t e = 0; e < t->nev; e++)
      if (t->ev[e].type == POL_TREC_LAUNCH) {
        nref = launch_refs(t, &t->ev[e], stamp, ++s, refs, nref);
        refs[nref++] = UINT32_MAX; /* end of launch */
      }
    for (size_t g = 0; g <= t->nchunks; g++)
      last[g] = UINT64_MAX;
    for (size_t i = nref; i-- > 0;) {
      if (refs[i] == UINT32_MAX) continue;
      nxt[i] = last[refs[i]];
      last[refs[i]] = i;
    }
    bytes = min_pass(t, cap, refs, nxt, res, touched, cur, &h);
  }
  free(refs), free(stamp), free(nxt), free(last), free(cur), free(res), free(touched), free(h.v);
  return bytes;
}
