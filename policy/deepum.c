/* deepum.c: replay-only reference: DeepUM's correlation prefetcher (Jung et al., ASPLOS'23),
 * as the paper describes it, without vx's own machinery (no Belady, no names, no advice).
 *
 * - Execution id: hash of the kernel and its arguments (range start addresses and
 *   sizes), so a kernel run on other tensors is another execution.
 * - Execution-id correlation table: the last DUM_HIST ids -> the id that came next
 *   (the latest successor wins); a prediction needs the whole history to match.
 *   History is kept per stream (the paper's PyTorch runs one; interleaving of
 *   several is not predictable), the table is shared.
 * - Block table, one per execution id: the chunks (by virtual address) that actually
 *   faulted while it ran, in fault order.  Chunks a prefetch brought in do not fault
 *   and so are not re-learned, but entries once learned stay.
 * - At each launch: prefetch the current id's learned chunks, then walk the predicted
 *   chain up to deepum_ahead kernels (as far as their chunks fit the device) and
 *   prefetch theirs, in chain order.
 * - Pre-eviction: room for a prefetch comes only from chunks that belong to no kernel
 *   of that window (kernels that are done), least recently used first; a chunk of
 *   the window is never evicted for another one.
 * - Freed memory is dropped without write-back (DeepUM invalidates inactive PyTorch
 *   blocks), which pol_free() already plans. */
#include <errno.h>
#include <stdlib.h>

#include "pol_internal.h"

#define DUM_HIST 3 /* previous execution ids a correlation key spans (all must match) */

struct dum_blk {
  uint64_t addr; /* base address of the allocation, as DeepUM sees pages by address */
  uint32_t idx;  /* chunk within it */
};

struct dum_id {
  uint64_t id;
  struct dum_blk *b;
  uint32_t n, cap;
  UT_hash_handle hh;
};

struct dum_key { /* correlation entries and the (id, block) seen set share this shape */
  uint64_t key, val;
  UT_hash_handle hh;
};

struct dum {
  struct dum_id *ids;
  struct dum_key *corr, *seen;
  struct dum_id *cur;    /* the execution running now: its faults are learned */
  struct dum_id **chain; /* deepum_ahead + 1 entries: the predicted executions */
  struct dum_stream {
    uint64_t stream, hist[DUM_HIST];
    uint32_t nhist;
  } st[POL_MAX_STREAMS], *cs; /* each stream's recent ids; cs: the launch's */
  uint32_t nst;
};

int dum_create(pol_t *p) {
  p->dum = calloc(1, sizeof *p->dum);
  if (!p->dum) return -ENOMEM;
  p->dum->chain = calloc((size_t)p->cfg.deepum_ahead + 1, sizeof *p->dum->chain);
  return p->dum->chain ? 0 : -ENOMEM;
}

static void keys_clear(struct dum_key **h) {
  struct dum_key *c, *tc;
  HASH_ITER(hh, *h, c, tc) {
    HASH_DEL(*h, c);
    free(c);
  }
}

void dum_destroy(pol_t *p) {
  struct dum *d = p->dum;
  if (!d) return;
  struct dum_id *e, *te;
  HASH_ITER(hh, d->ids, e, te) {
    HASH_DEL(d->ids, e);
    free(e->b);
    free(e);
  }
  keys_clear(&d->corr);
  keys_clear(&d->seen);
  free(d->chain);
  free(d);
  p->dum = NULL;
}

/* Freed chunks are simply forgotten (DeepUM drops them, no write-back); the
 * tables keep their addresses, which a later allocation may reuse. */
void dum_forget(pol_t *p, struct pol_arec *a) {
  (void)p;
  (void)a;
}

// ---- tables ----

static struct dum_key *key_find(struct dum_key *h, uint64_t key) {
  struct dum_key *c;
  HASH_FIND(hh, h, &key, sizeof key, c);
  return c;
}

/* Sets key -> val; returns 1 if the key is new, 0 if it existed, -ENOMEM. */
static int key_put(struct dum_key **h, uint64_t key, uint64_t val) {
  struct dum_key *c = key_find(*h, key);
  if (c) {
    c->val = val;
    return 0;
  }
  if (!(c = calloc(1, sizeof *c))) return -ENOMEM;
  c->key = key;
  c->val = val;
  vxhash_oomed = 0;
  HASH_ADD(hh, *h, key, sizeof c->key, c);
  if (vxhash_oomed) {
    free(c);
    return -ENOMEM;
  }
  return 1;
}

/* Key of the correlation entry for the k most recent ids of h (h[0] newest). */
static uint64_t corr_key(const uint64_t *h, uint32_t k) {
  uint64_t key = pol_hash2(0xc0, k);
  for (uint32_t i = 0; i < k; i++)
    key = pol_hash2(key, h[i]);
  return key;
}

/* The id that followed history h (n ids) the last time; 0 = none (or history too short). */
static uint64_t corr_next(struct dum *d, const uint64_t *h, uint32_t n) {
  struct dum_key *c = n < DUM_HIST ? NULL : key_find(d->corr, corr_key(h, DUM_HIST));
  return c ? c->val : 0;
}

static void hist_push(uint64_t *h, uint32_t *n, uint64_t id) {
  for (uint32_t i = DUM_HIST - 1; i > 0; i--)
    h[i] = h[i - 1];
  h[0] = id;
  if (*n < DUM_HIST) (*n)++;
}

static struct dum_id *id_get(struct dum *d, uint64_t id) {
  struct dum_id *e;
  HASH_FIND(hh, d->ids, &id, sizeof id, e);
  if (e || !(e = calloc(1, sizeof *e))) return e;
  e->id = id;
  vxhash_oomed = 0;
  HASH_ADD(hh, d->ids, id, sizeof e->id, e);
  if (vxhash_oomed) {
    free(e);
    return NULL;
  }
  return e;
}

static uint64_t exec_id(pol_t *p, const pol_launch_t *l) {
  uint64_t h = pol_hash2(l->kernel, 0xd0);
  for (uint32_t i = 0; i < l->nranges; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    uint64_t addr = a ? a->addr + (uint64_t)l->ranges[i].first * p->cfg.chunk_size : 0;
    h = pol_hash2(pol_hash2(h, addr), l->ranges[i].count);
  }
  return h;
}

/* A demand fault of chunk idx of a while the current execution runs: learn it. */
void dum_fault(pol_t *p, struct pol_arec *a, uint32_t idx) {
  struct dum *d = p->dum;
  struct dum_id *e = d ? d->cur : NULL;
  if (!e || a->tier != POL_TIER_MANAGED) return;
  uint64_t key = pol_hash2(pol_hash2(e->id, a->addr), idx);
  if (key_put(&d->seen, key, 0) != 1) return;
  if (e->n == e->cap) {
    uint32_t cap = e->cap ? 2 * e->cap : 16;
    struct dum_blk *nb = realloc(e->b, cap * sizeof *nb);
    if (!nb) return;
    e->b = nb;
    e->cap = cap;
  }
  e->b[e->n++] = (struct dum_blk){a->addr, idx};
}

// ---- a launch ----

/* Stamps and touches the launch's own chunks; returns how many there are. */
static uint64_t touch_current(pol_t *p, const pol_launch_t *l) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < l->nranges; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    if (!a || a->tier != POL_TIER_MANAGED) continue;
    uint32_t end = l->ranges[i].first + l->ranges[i].count;
    if (end > a->nchunks || end < l->ranges[i].first) end = a->nchunks;
    for (uint32_t k = l->ranges[i].first; k < end; k++) {
      struct pol_chunk *c = &a->chunks[k];
      c->stamp = p->epoch;
      c->next_use = 0;
      c->last_use = p->seq;
      lru_touch(p, c);
      p->st.chunks_used++;
      n++;
    }
  }
  return n;
}

/* Stamps the learned chunks of one execution (position j, 0 = now); queues the missing. */
static void want_id(pol_t *p, const struct dum_id *e, uint32_t j) {
  p->want_n = 0;
  for (uint32_t i = 0; i < e->n; i++) {
    struct pol_arec *a = pol_find_addr(p, e->b[i].addr);
    if (!a || a->tier != POL_TIER_MANAGED || e->b[i].idx >= a->nchunks) continue;
    struct pol_chunk *c = &a->chunks[e->b[i].idx];
    c->next_use = j;
    if (c->loc != LOC_DEV && p->want_n < p->want_cap)
      p->want[p->want_n++] = (struct want){.c = c, .j = j};
  }
}

/* Pre-eviction: the least recently used chunk of no kernel in the window. */
static int pre_evict(pol_t *p, int when, pol_plan_t *plan) {
  while (p->cursor != &p->lru) {
    struct pol_chunk *c = p->cursor;
    p->cursor = c->next;
    if (c->stamp == p->epoch) continue;
    if (plan_emit(plan, POL_OP_EVICT, when, POL_TIER_HOST, c) < 0) return -ENOSPC;
    chunk_set_away(p, c, LOC_HOST);
    p->st.chunks_evicted++;
    return 0;
  }
  return -ENOENT;
}

/* Prefetches the missing learned chunks of execution e (position j) in fault order.
 * Returns 0, or -ENOENT when room ran out (prefetching stops there). */
static int fetch_id(pol_t *p, const struct dum_id *e, uint32_t j, pol_plan_t *plan) {
  want_id(p, e, j);
  int when = j ? POL_AHEAD : POL_REQUIRED;
  for (uint32_t w = 0; w < p->want_n; w++) {
    struct pol_chunk *c = p->want[w].c;
    if (p->used >= p->cap_chunks && pre_evict(p, when, plan) < 0) return -ENOENT;
    if (plan_emit(plan, POL_OP_PREFETCH, when, 0, c) < 0) return -ENOENT;
    chunk_set_resident(p, c);
    if (j)
      p->st.chunks_ahead++;
    else
      p->st.chunks_required++;
  }
  return 0;
}

/* Chunks of e not yet stamped this epoch, stamping them. */
static uint64_t count_id(pol_t *p, const struct dum_id *e) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < e->n; i++) {
    struct pol_arec *a = pol_find_addr(p, e->b[i].addr);
    if (!a || a->tier != POL_TIER_MANAGED || e->b[i].idx >= a->nchunks) continue;
    struct pol_chunk *c = &a->chunks[e->b[i].idx];
    if (c->stamp != p->epoch) c->stamp = p->epoch, n++;
  }
  return n;
}

/* The predicted chain (chain[0] = the current execution), as long as its chunks
 * together fit the device, at most deepum_ahead kernels past the current one. */
static uint32_t chain(pol_t *p, uint64_t used) {
  struct dum *d = p->dum;
  uint64_t h[DUM_HIST];
  uint32_t n = d->cs->nhist, len = 0;
  for (uint32_t i = 0; i < DUM_HIST; i++)
    h[i] = d->cs->hist[i];
  struct dum_id *e = d->cur;
  while (e && len <= p->cfg.deepum_ahead) {
    used += count_id(p, e);
    if (used > p->cap_chunks) break;
    d->chain[len++] = e;
    uint64_t next = corr_next(d, h, n);
    e = NULL;
    if (next) HASH_FIND(hh, d->ids, &next, sizeof next, e);
    hist_push(h, &n, next);
  }
  return len;
}

/* The launch order is followed per stream: kernels of different streams
 * interleave as they are issued, which no table could predict. */
static struct dum_stream *stream_of(struct dum *d, uint64_t stream) {
  for (uint32_t i = 0; i < d->nst; i++)
    if (d->st[i].stream == stream) return &d->st[i];
  struct dum_stream *s = &d->st[d->nst < POL_MAX_STREAMS ? d->nst++ : POL_MAX_STREAMS - 1];
  *s = (struct dum_stream){.stream = stream};
  return s;
}

int dum_launch(pol_t *p, const pol_launch_t *l, pol_plan_t *plan) {
  struct dum *d = p->dum;
  if (++p->epoch == 0) p->epoch = 1;
  uint64_t id = exec_id(p, l);
  struct dum_stream *cs = d->cs = stream_of(d, l->stream);
  if (cs->nhist && corr_next(d, cs->hist, cs->nhist) == id) p->st.launches_matched++;
  if (cs->nhist == DUM_HIST) key_put(&d->corr, corr_key(cs->hist, DUM_HIST), id);
  hist_push(cs->hist, &cs->nhist, id);
  d->cur = id_get(d, id);
  uint64_t own = touch_current(p, l);
  uint32_t len = chain(p, own);
  /* fetch in chain order, protecting every chunk of the chain (a fresh epoch) */
  if (++p->epoch == 0) p->epoch = 1;
  touch_current(p, l);
  for (uint32_t j = 0; j < len; j++)
    count_id(p, d->chain[j]);
  p->cursor = p->lru.next;
  for (uint32_t j = 0; j < len; j++)
    if (fetch_id(p, d->chain[j], j, plan) < 0) break;
  return (int)plan->n;
}
