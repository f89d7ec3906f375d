/* deepum.c: replay-only reference: DeepUM's correlation prefetcher (ASPLOS'23).
 * Execution id = hash(kernel, argument addresses); tables map the previous ids
 * to the next and each id to its chunks; prefetch up to N kernels ahead,
 * pre-evict (LRU) chunks not predicted for those N; the launch's own misses fault. */
#include <errno.h>
#include <stdlib.h>

#include "pol_internal.h"

struct dum_rng {
  uint64_t addr; /* base address of the allocation, as DeepUM sees pages by address */
  uint32_t first, count;
};

struct dum_id {
  uint64_t id;
  uint32_t n;
  struct dum_rng *r;
  UT_hash_handle hh;
};

struct dum_corr {
  uint64_t key, next;
  UT_hash_handle hh;
};

struct dum {
  struct dum_id *ids;
  struct dum_corr *corr;
  uint64_t prev1, prev2; /* the two previous execution ids */
};

int dum_create(pol_t *p) {
  p->dum = calloc(1, sizeof *p->dum);
  return p->dum ? 0 : -ENOMEM;
}

void dum_destroy(pol_t *p) {
  struct dum *d = p->dum;
  if (!d) return;
  struct dum_id *e, *te;
  HASH_ITER(hh, d->ids, e, te) {
    HASH_DEL(d->ids, e);
    free(e->r);
    free(e);
  }
  struct dum_corr *c, *tc;
  HASH_ITER(hh, d->corr, c, tc) {
    HASH_DEL(d->corr, c);
    free(c);
  }
  free(d);
  p->dum = NULL;
}

/* Freed chunks are simply forgotten (DeepUM drops them, no write-back). */
void dum_forget(pol_t *p, struct pol_arec *a) {
  (void)p;
  (void)a;
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

static int corr_put(struct dum *d, uint64_t key, uint64_t next) {
  struct dum_corr *c;
  HASH_FIND(hh, d->corr, &key, sizeof key, c);
  if (!c) {
    if (!(c = calloc(1, sizeof *c))) return -ENOMEM;
    c->key = key;
    vxhash_oomed = 0;
    HASH_ADD(hh, d->corr, key, sizeof c->key, c);
    if (vxhash_oomed) {
      free(c);
      return -ENOMEM;
    }
  }
  c->next = next;
  return 0;
}

static uint64_t corr_get(struct dum *d, uint64_t key) {
  struct dum_corr *c;
  HASH_FIND(hh, d->corr, &key, sizeof key, c);
  return c ? c->next : 0;
}

static int id_record(pol_t *p, uint64_t id, const pol_launch_t *l) {
  struct dum *d = p->dum;
  struct dum_id *e;
  HASH_FIND(hh, d->ids, &id, sizeof id, e);
  if (e) return 0;
  if (!(e = calloc(1, sizeof *e)) || !(e->r = calloc(l->nranges + 1, sizeof *e->r))) {
    free(e);
    return -ENOMEM;
  }
  e->id = id;
  for (uint32_t i = 0; i < l->nranges; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    if (a && a->tier == POL_TIER_MANAGED)
      e->r[e->n++] = (struct dum_rng){a->addr, l->ranges[i].first, l->ranges[i].count};
  }
  vxhash_oomed = 0;
  HASH_ADD(hh, d->ids, id, sizeof e->id, e);
  if (vxhash_oomed) {
    free(e->r);
    free(e);
    return -ENOMEM;
  }
  return 0;
}

static void learn(pol_t *p, uint64_t id, const pol_launch_t *l) {
  struct dum *d = p->dum;
  if (d->prev1) {
    corr_put(d, d->prev1, id);
    if (d->prev2) corr_put(d, pol_hash2(d->prev2, d->prev1), id);
  }
  id_record(p, id, l);
  d->prev2 = d->prev1;
  d->prev1 = id;
}

/* Stamps the chunks of one predicted execution; collects the missing ones. */
static void want_id(pol_t *p, const struct dum_id *e, uint32_t j) {
  for (uint32_t i = 0; i < e->n; i++) {
    struct pol_arec *a = pol_find_addr(p, e->r[i].addr);
    if (!a || a->tier != POL_TIER_MANAGED) continue;
    uint32_t end = e->r[i].first + e->r[i].count;
    if (end > a->nchunks || end < e->r[i].first) end = a->nchunks;
    for (uint32_t k = e->r[i].first; k < end; k++) {
      struct pol_chunk *c = &a->chunks[k];
      if (c->stamp == p->epoch) continue;
      c->stamp = p->epoch;
      c->next_use = j;
      if (c->loc != LOC_DEV && p->want_n < p->want_cap)
        p->want[p->want_n++] = (struct want){.c = c, .j = j};
    }
  }
}

static void predict(pol_t *p, uint64_t id) {
  struct dum *d = p->dum;
  uint64_t a = d->prev2, b = id;
  for (uint32_t j = 1; j <= p->cfg.deepum_ahead; j++) {
    uint64_t n = a ? corr_get(d, pol_hash2(a, b)) : 0;
    if (!n) n = corr_get(d, b);
    struct dum_id *e;
    HASH_FIND(hh, d->ids, &n, sizeof n, e);
    if (!n || !e) return;
    want_id(p, e, j);
    a = b;
    b = n;
  }
}

static void touch_current(pol_t *p, const pol_launch_t *l) {
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
    }
  }
}

int dum_launch(pol_t *p, const pol_launch_t *l, pol_plan_t *plan) {
  if (++p->epoch == 0) p->epoch = 1;
  p->want_n = p->win_n = 0;
  uint64_t id = exec_id(p, l);
  touch_current(p, l);
  learn(p, id, l);
  if (p->st.launches > 1 && corr_get(p->dum, id)) p->st.launches_matched++;
  predict(p, id);
  p->cursor = p->lru.next;
  p->wtail = 0;
  for (uint32_t w = 0; w < p->want_n; w++) {
    struct pol_chunk *c = p->want[w].c;
    /* room only from chunks not predicted for the next N kernels (DeepUM's
     * pre-eviction); evicting predicted ones for farther predictions thrashes */
    if (p->used >= p->cap_chunks && planner_evict_for(p, p->want[w].j, POL_AHEAD, plan) < 0) break;
    if (plan_emit(plan, POL_OP_PREFETCH, POL_AHEAD, 0, c) < 0) break;
    chunk_set_resident(p, c);
    p->st.chunks_ahead++;
  }
  return (int)plan->n;
}
