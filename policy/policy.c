/* policy.c: the public face of policy/: configuration, events in, plans out.
 * Dispatches to the predictor, the DeepUM and oracle references, or placement only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pol_internal.h"

static const char *const kind_names[POL_KIND_COUNT] = {"predict", "demand", "static", "deepum",
                                                       "oracle"};

int pol_kind_parse(const char *name) {
  for (int k = 0; name && k < POL_KIND_COUNT; k++)
    if (!strcmp(name, kind_names[k])) return k;
  return -EINVAL;
}

const char *pol_kind_name(pol_kind_t kind) {
  return (unsigned)kind < POL_KIND_COUNT ? kind_names[kind] : "?";
}

void pol_config_default(pol_config_t *c, pol_kind_t kind, uint64_t capacity) {
  *c = (pol_config_t){.kind = kind,
                      .capacity = capacity,
                      .chunk_size = 2u << 20,
                      .evict_watermark = 100,
                      .static_min = 64u << 20,
                      .history = 16384,
                      .deepum_ahead = 4,
                      .lead = 1};
}

static int config_check(pol_config_t *c) {
  if (!c->chunk_size) c->chunk_size = 2u << 20;
  if (!c->evict_watermark) c->evict_watermark = 100;
  if (!c->static_min) c->static_min = 64u << 20;
  if (!c->deepum_ahead) c->deepum_ahead = 4;
  if ((unsigned)c->kind >= POL_KIND_COUNT || c->evict_watermark > 100) return -EINVAL;
  if (c->chunk_size & (c->chunk_size - 1) || c->chunk_size < (64u << 10) ||
      c->chunk_size > (1u << 30))
    return -EINVAL;
  if (c->capacity < c->chunk_size || c->history > (1u << 24)) return -EINVAL;
  return 0;
}

/* Managed chunks get the capacity less the most native memory has taken:
 * native allocations made and freed every iteration (activations a program
 * keeps native) come back, and a device filled with managed chunks in
 * between makes the driver evict some the policy believes resident for
 * each of them (vx play of cnn: 2535 faults, 13 GB of driver write-backs). */
static void set_capacity(pol_t *p) {
  if (p->native_bytes > p->native_peak) p->native_peak = p->native_bytes;
  uint64_t bytes = p->cfg.capacity > p->native_peak ? p->cfg.capacity - p->native_peak : 0;
  p->cap_chunks = bytes / p->cfg.chunk_size;
  p->mark_chunks = p->cap_chunks * p->cfg.evict_watermark / 100;
}

static int scratch_create(pol_t *p) {
  uint64_t full = p->cfg.capacity / p->cfg.chunk_size + 64;
  p->win_cap = full > (1u << 26) ? (1u << 26) : (uint32_t)full;
  p->want_cap = p->win_cap * POL_WINDOW_FACTOR;
  p->win = calloc(p->win_cap, sizeof *p->win);
  p->want = calloc(p->want_cap, sizeof *p->want);
  p->fut = calloc(POL_MAX_RANGES, sizeof *p->fut);
  return p->win && p->want && p->fut ? 0 : -ENOMEM;
}

int pol_create(const pol_config_t *c, pol_t **out) {
  if (!c || !out) return -EINVAL;
  pol_t *p = calloc(1, sizeof *p);
  if (!p) return -ENOMEM;
  p->cfg = *c;
  int r = config_check(&p->cfg);
  if (r < 0) {
    free(p);
    return r;
  }
  p->lru.next = p->lru.prev = &p->lru;
  p->ahead_lim = UINT64_MAX; /* the capacity, until a bet is lost */
  set_capacity(p);
  r = scratch_create(p);
  if (!r && p->cfg.kind == POL_PREDICT) r = hist_create(p);
  if (!r && p->cfg.kind == POL_DEEPUM) r = dum_create(p);
  if (r < 0) {
    pol_destroy(p);
    return r;
  }
  *out = p;
  return 0;
}

void pol_destroy(pol_t *p) {
  if (!p) return;
  pol_arec_clear(p);
  hist_destroy(p);
  dum_destroy(p);
  free(p->win);
  free(p->want);
  free(p->fut);
  free(p);
}

// ---- allocations ----

static int placement(pol_t *p, uint64_t size, uint32_t flags) {
  int fits = p->native_bytes + size <= p->cfg.capacity;
  if (flags & POL_ALLOC_NATIVE) return POL_TIER_DEVICE;
  if (p->cfg.kind != POL_STATIC) return POL_TIER_MANAGED;
  if (fits) return POL_TIER_DEVICE;
  return size >= p->cfg.static_min ? POL_TIER_HOST : POL_TIER_MANAGED;
}

int pol_alloc(pol_t *p, uint64_t alloc_id, uint64_t addr, uint64_t size, uint32_t flags,
              uint64_t now) {
  (void)now;
  if (!p || !size) return -EINVAL;
  if (pol_find(p, alloc_id)) return -EEXIST;
  struct pol_arec *a;
  int r = pol_arec_add(p, alloc_id, addr, size, &a);
  if (r < 0) return r;
  a->tier = (uint8_t)placement(p, size, flags);
  p->changes++;
  if (a->tier == POL_TIER_DEVICE) {
    p->native_bytes += size;
    set_capacity(p);
  }
  return a->tier;
}

int pol_free(pol_t *p, uint64_t alloc_id, uint64_t now, pol_plan_t *plan) {
  (void)now;
  if (plan) {
    plan->n = 0;
    plan->truncated = 0;
  }
  struct pol_arec *a = p ? pol_find(p, alloc_id) : NULL;
  if (!a) return -ENOENT;
  for (uint32_t i = 0; plan && i < a->nchunks; i++) {
    if (a->chunks[i].loc != LOC_DEV) continue;
    if (plan_emit(plan, POL_OP_DROP, POL_REQUIRED, 0, &a->chunks[i]) == 0) p->st.chunks_dropped++;
  }
  if (a->tier == POL_TIER_DEVICE) {
    p->native_bytes -= a->size;
    set_capacity(p);
  }
  if (p->dum) dum_forget(p, a);
  planner_note_free(p, a);
  p->changes++;
  struct pol_arec *heir = p->hist ? hist_successor(p, a) : NULL;
  uint64_t name = a->name;
  pol_arec_remove(p, a);
  if (heir) pol_arec_rename(p, heir, name); /* a grown copy plays its part */
  return plan ? (int)plan->n : 0;
}

// ---- launches ----

struct oracle_it {
  uint32_t k;
};

int oracle_next(pol_t *p, void *vit, struct fut_launch *out) {
  struct oracle_it *it = vit;
  pol_launch_t l;
  if (!p->fut_fn || p->fut_fn(p->fut_ctx, ++it->k, &l) <= 0) return 0;
  out->n = 0;
  for (uint32_t i = 0; i < l.nranges && out->n < POL_MAX_RANGES; i++) {
    struct pol_arec *a = pol_find(p, l.ranges[i].alloc_id);
    if (a && a->tier != POL_TIER_MANAGED) continue;
    out->r[out->n++] = (struct fut_rng){.a = a,
                                        .key = l.ranges[i].alloc_id,
                                        .first = l.ranges[i].first,
                                        .count = l.ranges[i].count,
                                        .mode = l.ranges[i].mode};
  }
  return 1;
}

int pol_launch(pol_t *p, const pol_launch_t *l, pol_plan_t *plan) {
  if (!p || !l || !plan || !plan->actions || !plan->cap || (l->nranges && !l->ranges))
    return -EINVAL;
  plan->n = 0;
  plan->truncated = 0;
  p->seq++;
  p->st.launches++;
  switch (p->cfg.kind) {
  case POL_PREDICT: {
    hist_record(p, l);
    /* a full plan walks the window: after one that moved nothing, trust it longer */
    uint64_t every = p->last_full_moved ? POL_REPLAN_EVERY : POL_REPLAN_QUIET;
    int quiet =
        hist_on_track(p) && p->changes == p->planned_changes && p->seq - p->last_full < every;
    int r = quiet ? planner_light(p, l, plan) : -EAGAIN;
    if (r != -EAGAIN) return r;
    p->last_full = p->seq;
    p->planned_changes = p->changes;
    plan->n = plan->truncated = 0;
    r = planner_run(p, l, plan, pred_next, pred_begin(p));
    p->last_full_moved = r != 0;
    return r;
  }
  case POL_ORACLE: {
    struct oracle_it it = {0};
    return planner_run(p, l, plan, oracle_next, &it);
  }
  case POL_DEEPUM:
    return dum_launch(p, l, plan);
  case POL_DEMAND:
    if (p->cfg.demand_budget) return planner_fault(p, l, plan);
    return 0; /* the driver faults what is missing */
  default:
    return 0; /* static: the driver faults what is missing */
  }
}

// ---- feedback and observability ----

int pol_chunk_state(pol_t *p, uint64_t alloc_id, uint32_t first, uint32_t count, int state) {
  struct pol_arec *a = p ? pol_find(p, alloc_id) : NULL;
  if (!a) return -ENOENT;
  if ((state != POL_STATE_DEVICE && state != POL_STATE_HOST) || first > a->nchunks ||
      count > a->nchunks - first)
    return -EINVAL;
  for (uint32_t i = first; i < first + count; i++) {
    if (state == POL_STATE_DEVICE && a->chunks[i].loc != LOC_DEV && p->dum)
      dum_fault(p, a, i); /* DeepUM learns from the chunks that really faulted */
    if (state == POL_STATE_DEVICE)
      chunk_set_resident(p, &a->chunks[i]);
    else if (a->chunks[i].loc == LOC_DEV)
      chunk_set_away(p, &a->chunks[i], LOC_HOST);
  }
  return 0;
}

int pol_pin(pol_t *p, uint64_t alloc_id, int pinned) {
  struct pol_arec *a = p ? pol_find(p, alloc_id) : NULL;
  if (!a) return -ENOENT;
  if (a->tier != POL_TIER_MANAGED) return -EINVAL;
  a->pinned = pinned != 0;
  return a->pinned ? pol_chunk_state(p, alloc_id, 0, a->nchunks, POL_STATE_HOST) : 0;
}

int pol_set_future(pol_t *p, pol_future_fn fn, void *ctx) {
  if (!p || p->cfg.kind != POL_ORACLE) return -EINVAL;
  p->fut_fn = fn;
  p->fut_ctx = ctx;
  return 0;
}

void pol_get_stats(const pol_t *p, pol_stats_t *out) {
  *out = p->st;
  out->resident = p->used;
  out->ahead_limit = planner_ahead_limit(p);
}

int pol_make_room(pol_t *p, uint64_t bytes, pol_plan_t *plan) {
  if (!p || !plan || !plan->actions || !plan->cap) return -EINVAL;
  plan->n = 0;
  plan->truncated = 0;
  /* the managed chunks' capacity once the allocation is made (set_capacity) */
  uint64_t native = p->native_bytes + bytes;
  uint64_t peak = native > p->native_peak ? native : p->native_peak;
  if (peak > p->cfg.capacity) return -ENOENT;
  int r = planner_make_room(p, (p->cfg.capacity - peak) / p->cfg.chunk_size, plan);
  if (r == -ENOSPC) plan->truncated = 1;
  return r < 0 ? r : (int)plan->n;
}

void pol_native_hold(pol_t *p, uint64_t bytes, int give_back) {
  if (!p) return;
  if (give_back)
    p->native_bytes -= bytes < p->native_bytes ? bytes : p->native_bytes;
  else
    p->native_bytes += bytes;
  set_capacity(p);
}

uint64_t pol_used(const pol_t *p) {
  return p->used;
}

uint64_t pol_room(const pol_t *p) {
  return p->cap_chunks > p->used ? p->cap_chunks - p->used : 0;
}
