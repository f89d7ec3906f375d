/* fx.h: a fake executor for the policy tests: applies plans to a residency map
 * and checks the plan contract (capacity, order, the launch's chunks untouched). */
#ifndef VX_TESTS_POLICY_FX_H
#define VX_TESTS_POLICY_FX_H

#include <check.h>
#include <stdint.h>
#include <string.h>

#include "policy.h"

#define FX_IDS 8192
#define FX_CHUNKS 64

struct fx {
  pol_t *p;
  uint64_t cap;      /* chunks */
  uint64_t resident; /* chunks on the device */
  uint8_t res[FX_IDS][FX_CHUNKS];
  uint8_t data[FX_IDS][FX_CHUNKS]; /* touched at least once: has contents */
  uint8_t live[FX_IDS];
  uint8_t pinned[FX_IDS]; /* kept in host memory (pol_pin): no action may name it */
  uint32_t nchunks[FX_IDS];
  uint64_t now;
  int faults; /* the policy leaves misses to the driver: fault them in (LRU-less, first found) */
  /* counters since the last fx_reset_counts() */
  uint64_t used, covered, required_host, evicted_dead, ahead;
  uint64_t in_place; /* chunks the plans left in host memory for their launch (READ_IN_PLACE) */
  pol_action_t act[4096];
};

/* A policy made from config c (its capacity in 2 MiB chunks). */
static inline void fx_init_config(struct fx *f, const pol_config_t *c) {
  memset(f, 0, sizeof *f);
  ck_assert_int_eq(pol_create(c, &f->p), 0);
  f->cap = c->capacity / (2u << 20);
  f->faults = c->kind == POL_DEMAND || c->kind == POL_DEEPUM;
}

static inline void fx_init(struct fx *f, pol_kind_t kind, uint64_t cap_chunks) {
  pol_config_t c;
  pol_config_default(&c, kind, cap_chunks * (2u << 20));
  fx_init_config(f, &c);
}

static inline void fx_fini(struct fx *f) {
  pol_destroy(f->p);
}

static inline void fx_reset_counts(struct fx *f) {
  f->used = f->covered = f->required_host = f->ahead = f->in_place = 0;
}

static inline void fx_alloc(struct fx *f, uint64_t id, uint32_t chunks) {
  ck_assert_uint_lt(id, FX_IDS);
  ck_assert_uint_le(chunks, FX_CHUNKS);
  ck_assert_int_eq(
      pol_alloc(f->p, id, 0x100000000ull + id * 0x10000000ull, (uint64_t)chunks << 21, 0, f->now++),
      POL_TIER_MANAGED);
  f->live[id] = 1;
  f->pinned[id] = 0;
  f->nchunks[id] = chunks;
  memset(f->res[id], 0, sizeof f->res[id]);
  memset(f->data[id], 0, sizeof f->data[id]);
}

static inline void fx_free(struct fx *f, uint64_t id) {
  pol_plan_t plan = {.actions = f->act, .cap = 4096};
  int n = pol_free(f->p, id, f->now++, &plan);
  ck_assert_int_ge(n, 0);
  uint32_t dropped = 0;
  for (int i = 0; i < n; i++) {
    ck_assert_int_eq(f->act[i].op, POL_OP_DROP); /* dead chunks are never written back */
    ck_assert_uint_eq(f->act[i].alloc_id, id);
    dropped += f->act[i].count;
  }
  uint32_t was = 0;
  for (uint32_t i = 0; i < f->nchunks[id]; i++)
    was += f->res[id][i];
  ck_assert_uint_eq(dropped, was);
  f->resident -= was;
  f->live[id] = 0;
  memset(f->res[id], 0, sizeof f->res[id]);
}

/* The executor keeps allocation id in host memory (pinned) or moves it again. */
static inline void fx_pin(struct fx *f, uint64_t id, int pinned) {
  ck_assert_int_eq(pol_pin(f->p, id, pinned), 0);
  f->pinned[id] = (uint8_t)(pinned != 0);
  for (uint32_t i = 0; pinned && i < f->nchunks[id]; i++) {
    f->resident -= f->res[id][i];
    f->res[id][i] = 0;
  }
}

static inline int fx_in(const pol_launch_t *l, uint64_t id, uint32_t idx) {
  for (uint32_t i = 0; i < l->nranges; i++)
    if (l->ranges[i].alloc_id == id && idx >= l->ranges[i].first &&
        idx - l->ranges[i].first < l->ranges[i].count)
      return 1;
  return 0;
}

static inline void fx_apply(struct fx *f, const pol_launch_t *l, int n) {
  int seen_ahead = 0;
  for (int i = 0; i < n; i++) {
    const pol_action_t *a = &f->act[i];
    ck_assert_uint_lt(a->alloc_id, FX_IDS);
    ck_assert(f->live[a->alloc_id]);
    if (a->when == POL_AHEAD)
      seen_ahead = 1;
    else
      ck_assert_msg(!seen_ahead, "a REQUIRED action after an AHEAD one");
    if (a->op == POL_OP_ADVISE_READ_MOSTLY) continue;
    ck_assert_msg(!f->pinned[a->alloc_id], "a plan moves allocation %llu, pinned to the host",
                  (unsigned long long)a->alloc_id);
    ck_assert_uint_le((uint64_t)a->index + a->count, f->nchunks[a->alloc_id]);
    for (uint32_t k = a->index; k < a->index + a->count; k++) {
      uint8_t *r = &f->res[a->alloc_id][k];
      if (a->op == POL_OP_READ_IN_PLACE) { /* nothing moves */
        ck_assert_int_eq(a->when, POL_REQUIRED);
        ck_assert_msg(!*r, "read in place: a resident chunk");
        ck_assert_msg(f->data[a->alloc_id][k], "read in place: a chunk with no contents");
        ck_assert_msg(fx_in(l, a->alloc_id, k), "read in place: a chunk of another launch");
        f->in_place++;
        continue;
      }
      if (a->op == POL_OP_PREFETCH) {
        ck_assert_msg(!*r, "prefetch of a resident chunk");
        *r = 1;
        f->resident++;
        if (a->when == POL_AHEAD)
          f->ahead++;
        else if (f->data[a->alloc_id][k])
          f->required_host++;
      } else {
        ck_assert_int_eq(a->op, POL_OP_EVICT);
        ck_assert_msg(*r, "evict of a chunk not resident");
        ck_assert_msg(!fx_in(l, a->alloc_id, k), "evicted a chunk of the launch itself");
        *r = 0;
        f->resident--;
      }
      ck_assert_uint_le(f->resident, f->cap);
    }
  }
}

/* What the driver does for a policy that leaves misses to faults. */
static inline void fx_fault_in(struct fx *f, const pol_launch_t *l) {
  for (uint32_t i = 0; i < l->nranges; i++)
    for (uint32_t k = l->ranges[i].first; k < l->ranges[i].first + l->ranges[i].count; k++) {
      uint64_t id = l->ranges[i].alloc_id;
      if (f->res[id][k]) continue;
      for (uint64_t v = 0; v < FX_IDS && f->resident >= f->cap; v++)
        for (uint32_t c = 0; c < f->nchunks[v] && f->resident >= f->cap; c++)
          if (f->live[v] && f->res[v][c] && !fx_in(l, v, c)) {
            f->res[v][c] = 0;
            f->resident--;
            ck_assert_int_eq(pol_chunk_state(f->p, v, c, 1, POL_STATE_HOST), 0);
          }
      if (f->resident >= f->cap) return;
      f->res[id][k] = 1;
      f->resident++;
      ck_assert_int_eq(pol_chunk_state(f->p, id, k, 1, POL_STATE_DEVICE), 0);
    }
}

/* Launches kernel over ranges; checks the plan; returns its action count. */
static inline int fx_launch(struct fx *f, uint64_t kernel, uint64_t stream, const pol_range_t *r,
                            uint32_t nr) {
  pol_launch_t l = {
      .kernel = kernel, .stream = stream, .now = f->now += 1000, .ranges = r, .nranges = nr};
  for (uint32_t i = 0; i < nr; i++)
    for (uint32_t k = r[i].first; k < r[i].first + r[i].count; k++)
      if (f->data[r[i].alloc_id][k]) {
        f->used++;
        f->covered += f->res[r[i].alloc_id][k];
      }
  pol_plan_t plan = {.actions = f->act, .cap = 4096};
  int n = pol_launch(f->p, &l, &plan);
  ck_assert_int_ge(n, 0);
  ck_assert_int_eq(plan.truncated, 0);
  fx_apply(f, &l, n);
  if (f->faults) fx_fault_in(f, &l);
  uint64_t need = 0;
  for (uint32_t i = 0; i < nr; i++)
    need += r[i].count;
  for (uint32_t i = 0; i < nr && need <= f->cap; i++)
    for (uint32_t k = r[i].first; k < r[i].first + r[i].count && !f->pinned[r[i].alloc_id]; k++)
      ck_assert_msg(f->res[r[i].alloc_id][k], "a chunk of the launch is not resident");
  for (uint32_t i = 0; i < nr; i++)
    for (uint32_t k = r[i].first; k < r[i].first + r[i].count; k++)
      f->data[r[i].alloc_id][k] = 1;
  return n;
}

/* Allocation id of `chunks` chunks, made and written whole by its
 * initialising launch (kernel 1, stream 1), as a program's weights are. */
static inline void fx_made(struct fx *f, uint64_t id, uint32_t chunks) {
  fx_alloc(f, id, chunks);
  pol_range_t r = {.alloc_id = id, .count = chunks, .mode = POL_ACCESS_WRITE};
  fx_launch(f, 1, 1, &r, 1);
}

/* n weights of `chunks` chunks each (fx_made), numbered from *id on. */
static inline void fx_weights(struct fx *f, uint64_t *w, int n, uint32_t chunks, uint64_t *id) {
  for (int l = 0; l < n; l++) {
    w[l] = (*id)++;
    fx_made(f, w[l], chunks);
  }
}

static inline double fx_coverage(const struct fx *f) {
  return f->used ? (double)f->covered / (double)f->used : 1.0;
}

#endif
