/* replay_engine.c: the cost model.  A compute timeline per stream, an H2D and a
 * D2H copy engine at link bandwidth overlapping compute, demand faults that stall. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "costs.h"
#include "replay.h"

enum { C_FRESH = 0, C_HOST, C_DEV, C_DEAD };
#define MAX_STREAMS 64

struct ck {
  double arrive, busy;
  uint32_t prev, next, stamp, alloc;
  uint8_t loc, clean; /* clean: a valid host copy exists (ReadMostly, not written since) */
  /* the driver's thrash resolution (cuda.h, SET_PREFERRED_LOCATION), as the
   * simulator has it: pushed off by memory pressure (pressed), faulted back
   * THRASH_PIN times (refaults), the chunk is pinned to host memory (pinned)
   * and read over the link, until a prefetch moves it */
  uint8_t pressed, refaults, pinned;
  uint8_t hdir; /* this launch reaches it in host memory: 1 reads, 2 writes */
  /* written back and not read since (WB_OUT); WB_LAUNCH: the launch being
   * run reaches it and none of its ranges so far reads it */
  uint8_t wb;
  /* advised PreferredLocation host by a READ_IN_PLACE (policy.h; advice
   * stays): in host memory, a launch reaches it over the link, no fault */
  uint8_t in_place;
};

enum { WB_NONE = 0, WB_OUT, WB_LAUNCH };

#define THRASH_PIN 8 /* tests/simcuda/sim_managed.c, SIM_THRASH_PIN */

/* --place live: libvx's timing of a thrash pin's candidates (tiers/exec_int.h:
 * EX_KT_SAMPLES launches per allocation, EX_KT_IDS allocations per launch;
 * tiers/exec.c: EX_PIN_HIDE) */
#define KT_SAMPLES 4
#define KT_IDS 4
#define PIN_HIDE 10
#define PIN_ROOM 4

/* --place live: libvx's pin for one use, per allocation (live_once) */
enum { ONCE_PINNED = 1, ONCE_DONE };

struct idm {
  uint64_t id;
  uint32_t idx;
  UT_hash_handle hh;
};

/* One copy engine's reservations (take()), in time order, merged where
 * they touch: an engine takes work in order, each no earlier than the
 * last ended. */
struct span {
  double s, e;
};
struct busy {
  struct span *v;
  size_t n, cap;
  int oom;
};

enum { ENG_H2D = 0, ENG_D2H = 1 };

struct eng {
  const rp_trace_t *t;
  const rp_model_t *m;
  rp_result_t *res;
  struct ck *ck;
  uint32_t sentinel; /* LRU list head, index nchunks */
  uint8_t *tier, *rm;
  uint64_t *ups, *uses;    /* --place live: libvx's pin counts per allocation (tiers/exec.c) */
  uint64_t *pin_uses;      /* ... `uses` when pinned for one use */
  uint8_t *once;           /* ... 0, ONCE_PINNED, ONCE_DONE (tiers/exec.c: EX_PIN_ONCE) */
  double *kt_min;          /* ... the shortest timed launch that reached it (kt_n > 0) */
  uint8_t *kt_n;           /* ... launches timed for it (tiers/exec.c: time_due) */
  uint32_t kt_due[KT_IDS]; /* the launch being run is timed for these */
  int nkt_due;
  struct idm *ids, *idm_pool;
  uint64_t cap, used, native;
  double h2d_free, d2h_free, prio_free, t_issue, prev_start, end;
  double compute_free; /* the device runs one kernel at a time, as the simulator does */
  uint64_t launch_max; /* the most bytes one launch has reached (libvx's exec_launch_max) */
  /* the trace's ranges as the policy sees them; under --place live a copy
   * with no access modes (seen_ranges) */
  const pol_range_t *prg;
  pol_range_t *prg_own;
  uint64_t sid[MAX_STREAMS];
  double sfree[MAX_STREAMS];
  int nstreams, infinite;
  /* blind: libvx's executor (user space) runs the plans: it cannot see the
   * driver's evictions and faults, and its prefetches to a full device make
   * the driver evict.  DeepUM's runtime lives in the driver and sees both. */
  int blind;
  int place; /* POL_KIND_COUNT: every allocation movable; else libvx's placement for that kind */
  uint32_t stamp;
  size_t cur;
  pol_t *pol;
  pol_plan_t plan;
  uint32_t *missing;
  double *slot; /* min-heap: when each freed device slot becomes usable */
  size_t nslot;
  uint64_t free0;    /* slots free from the start */
  struct busy bz[2]; /* when each copy engine is busy: ENG_H2D, ENG_D2H */
};

void rp_model_default(rp_model_t *m, uint64_t capacity) {
  *m = (rp_model_t){.capacity = capacity,
                    .link_bps = VX_COST_LINK_GBPS * 1e9,
                    .dev_bps = VX_COST_DEV_GBPS * 1e9,
                    .fault_ns = VX_COST_FAULT_NS,
                    .fault_batch = VX_COST_FAULT_BATCH};
}

/* "clairvoyant" is vx's planner fed the true future ("oracle", its old name, is
 * still accepted): a reference, not a bound.  "bound" is the lower bound. */
static const char *const policies[] = {"demand",   "deepum", "static", "predict", "clairvoyant",
                                       "infinite", "bound",  "oracle", NULL};

int rp_policy_known(const char *name) {
  for (int i = 0; policies[i]; i++)
    if (!strcmp(name, policies[i])) return 1;
  return 0;
}

// ---- chunk bookkeeping ----

static double xfer(const struct eng *e, uint64_t bytes) {
  return (double)bytes / e->m->link_bps * 1e9;
}

/* Reserves copy engine `dir` for `dur` from `at` or when it is next free,
 * whichever is later; records the span and returns its end. */
static double take(struct eng *e, int dir, double at, double dur) {
  double *free_at = dir == ENG_H2D ? &e->h2d_free : &e->d2h_free;
  double start = at > *free_at ? at : *free_at, end = start + dur;
  *free_at = end;
  struct busy *b = &e->bz[dir];
  if (end <= start || b->oom) return end;
  if (b->n && start <= b->v[b->n - 1].e) {
    b->v[b->n - 1].e = end;
    return end;
  }
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 256;
    struct span *v = realloc(b->v, cap * sizeof *v);
    if (!v) {
      b->oom = 1;
      return end;
    }
    b->v = v, b->cap = cap;
  }
  b->v[b->n++] = (struct span){start, end};
  return end;
}

/* Seconds each engine was busy, and both at once. */
static void busy_sums(const struct eng *e, rp_result_t *out) {
  const struct busy *u = &e->bz[ENG_H2D], *d = &e->bz[ENG_D2H];
  double su = 0, sd = 0, both = 0;
  for (size_t i = 0; i < u->n; i++)
    su += u->v[i].e - u->v[i].s;
  for (size_t i = 0; i < d->n; i++)
    sd += d->v[i].e - d->v[i].s;
  for (size_t i = 0, k = 0; i < u->n && k < d->n;) {
    double lo = u->v[i].s > d->v[k].s ? u->v[i].s : d->v[k].s;
    double hi = u->v[i].e < d->v[k].e ? u->v[i].e : d->v[k].e;
    if (hi > lo) both += hi - lo;
    if (u->v[i].e < d->v[k].e)
      i++;
    else
      k++;
  }
  out->h2d_busy_s = su / 1e9, out->d2h_busy_s = sd / 1e9, out->both_busy_s = both / 1e9;
}

static uint64_t ck_bytes(const struct eng *e, uint32_t g) {
  const rp_alloc_t *a = &e->t->al[e->ck[g].alloc];
  uint64_t off = (g - a->base) * e->t->chunk;
  return a->size - off < e->t->chunk ? a->size - off : e->t->chunk;
}

static void lru_unlink(struct eng *e, uint32_t g) {
  e->ck[e->ck[g].prev].next = e->ck[g].next;
  e->ck[e->ck[g].next].prev = e->ck[g].prev;
}

static void lru_push(struct eng *e, uint32_t g) {
  uint32_t s = e->sentinel;
  e->ck[g].prev = e->ck[s].prev;
  e->ck[g].next = s;
  e->ck[e->ck[s].prev].next = g;
  e->ck[s].prev = g;
}

// ---- device slots: a freed slot is usable once its old chunk is written back ----

static void slot_push(struct eng *e, double t) {
  size_t i = e->nslot++;
  while (i && e->slot[(i - 1) / 2] > t) {
    e->slot[i] = e->slot[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  e->slot[i] = t;
}

/* Takes the slot that is usable first; returns when. */
static double slot_pop(struct eng *e) {
  if (e->free0) {
    e->free0--;
    return 0;
  }
  if (!e->nslot) return 0;
  double top = e->slot[0], last = e->slot[--e->nslot];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= e->nslot) break;
    if (c + 1 < e->nslot && e->slot[c + 1] < e->slot[c]) c++;
    if (e->slot[c] >= last) break;
    e->slot[i] = e->slot[c];
    i = c;
  }
  if (e->nslot) e->slot[i] = last;
  return top;
}

static double set_dev(struct eng *e, uint32_t g) {
  e->ck[g].loc = C_DEV;
  e->used++;
  lru_push(e, g);
  return slot_pop(e);
}

/* Takes g off the device; its slot is usable from `ready`. */
static void set_away_at(struct eng *e, uint32_t g, int loc, double ready) {
  if (e->ck[g].loc == C_DEV) {
    lru_unlink(e, g);
    e->used--;
    slot_push(e, ready);
  }
  e->ck[g].loc = (uint8_t)loc;
}

static void set_away(struct eng *e, uint32_t g, int loc) {
  set_away_at(e, g, loc, e->ck[g].busy);
}

static void tell(struct eng *e, uint32_t g, int state) {
  const rp_alloc_t *a = &e->t->al[e->ck[g].alloc];
  if (e->pol) pol_chunk_state(e->pol, a->id, (uint32_t)(g - a->base), 1, state);
}

/* Evicts g no earlier than `at`; returns when its space is free.  Only a
 * chunk with a valid host copy (a ReadMostly duplicate, not written since)
 * goes without write-back: managed memory keeps one copy, so a migrated
 * chunk's eviction copies it back even when no launch wrote it, and a plan's
 * POL_ACT_CLEAN mark changes nothing here (an executor that kept the host
 * copy could drop the pages; libvx's does not: it has no such copy). */
static double evict(struct eng *e, uint32_t g, double at) {
  double ready = at > e->ck[g].busy ? at : e->ck[g].busy;
  if (!e->ck[g].clean) {
    uint64_t b = ck_bytes(e, g);
    ready = take(e, ENG_D2H, ready, xfer(e, b));
    e->res->bytes_down += b;
    e->ck[g].wb = WB_OUT;
  }
  set_away_at(e, g, C_HOST, ready);
  e->res->evictions++;
  return ready;
}

/* A write-back no launch read: the chunk was freed, or wholly written
 * again, before any launch read what went down (bytes_down_dead). */
static void dead_writeback(struct eng *e, uint32_t g) {
  if (e->ck[g].wb != WB_LAUNCH) return;
  e->ck[g].wb = WB_NONE;
  e->res->bytes_down_dead += ck_bytes(e, g);
}

/* libvx evicts with a prefetch to the host.  For a ReadMostly chunk that
 * makes a host copy (a write-back if the chunk was written since it came
 * up) and the device keeps its own: the simulator does so (tests/simcuda:
 * cuda.h's "read-only copy on the destination", uvm_migrate.c's
 * make_resident_read_duplicate), and only pressure drops the duplicate,
 * for free (prefetch and faults below, which evict the least recently used
 * chunk).  So the eviction frees no room, whatever the policy counts. */
static void keep_duplicate(struct eng *e, uint32_t g, double at) {
  if (e->ck[g].clean) return;
  double ready = at > e->ck[g].busy ? at : e->ck[g].busy;
  uint64_t b = ck_bytes(e, g);
  take(e, ENG_D2H, ready, xfer(e, b));
  e->res->bytes_down += b;
  e->ck[g].clean = 1;
}

/* 1 if the launch being planned reaches g only through POL_ACCESS_WRITE ranges. */
static int write_only(const struct eng *e, uint32_t g) {
  const rp_event_t *ev = &e->t->ev[e->t->launch_ev[e->cur]];
  int hit = 0;
  for (uint32_t r = 0; r < ev->nr; r++) {
    const pol_range_t *rg = &e->t->rg[ev->r0 + r];
    const rp_alloc_t *a = &e->t->al[e->t->rg_alloc[ev->r0 + r]];
    if (g < a->base + rg->first || g >= a->base + (uint64_t)rg->first + rg->count) continue;
    if (rg->mode != POL_ACCESS_WRITE) return 0;
    hit = 1;
  }
  return hit;
}

static void set_cap(struct eng *e) {
  uint64_t b = e->m->capacity > e->native ? e->m->capacity - e->native : 0;
  uint64_t cap = b / e->t->chunk;
  if (cap > e->cap)
    e->free0 += cap - e->cap;
  else
    e->free0 -= e->free0 < e->cap - cap ? e->free0 : e->cap - cap;
  e->cap = cap;
}

static uint32_t dense(struct eng *e, uint64_t id) {
  struct idm *m = NULL;
  HASH_FIND(hh, e->ids, &id, sizeof id, m);
  return m ? m->idx : UINT32_MAX;
}

// ---- plans ----

/* nodata: POL_ACT_NODATA, honoured (no copy) for a required chunk the launch only writes. */
static void prefetch(struct eng *e, uint32_t g, int required, int nodata, double T) {
  if (e->ck[g].loc == C_DEV || e->ck[g].loc == C_DEAD) return;
  /* A full device: under libvx (blind) the driver makes room as for any
   * migration, evicting its least recently used chunk (cuda.h: prefetching
   * to a device may evict), and nobody tells the policy.
   * With no resident chunk to evict (native memory holds the device) the
   * chunk stays where it is; the driver reports success all the same. */
  while (e->used >= e->cap) {
    uint32_t v = e->ck[e->sentinel].next;
    if (!e->blind || v == e->sentinel) {
      if (!e->blind) tell(e, g, POL_STATE_HOST); /* a driver-level runtime refuses */
      return;
    }
    evict(e, v, T);
    e->ck[v].pressed = 1;
  }
  e->ck[g].pressed = e->ck[g].refaults = e->ck[g].pinned = 0; /* moved on purpose */
  int from_host = e->ck[g].loc == C_HOST && !(nodata && required && write_only(e, g));
  double space = set_dev(e, g);
  double arrive = T > space ? T : space;
  e->ck[g].clean = 0;
  if (from_host) {
    uint64_t b = ck_bytes(e, g);
    double x = xfer(e, b);
    /* One H2D engine, in order, for required and predicted prefetches
     * alike, as in the simulator: a required copy does not jump the queue
     * (a lane of its own made vx replay of two-stream 2% faster than the
     * simulator can run it) */
    arrive = take(e, ENG_H2D, arrive, x);
    e->res->bytes_up += b;
    e->ck[g].clean = e->rm[e->ck[g].alloc];
  }
  e->res->prefetches++;
  e->ck[g].arrive = arrive;
}

static void action(struct eng *e, const pol_action_t *a, double T) {
  uint32_t d = dense(e, a->alloc_id);
  if (d == UINT32_MAX) {
    if (a->op == POL_OP_EVICT) e->res->writebacks_of_freed++;
    return;
  }
  const rp_alloc_t *al = &e->t->al[d];
  if (a->op == POL_OP_ADVISE_READ_MOSTLY) {
    e->rm[d] = 1;
    return;
  }
  if (a->op == POL_OP_READ_IN_PLACE) { /* nothing moves: the launch reads them over the link */
    for (uint64_t i = a->index; i < (uint64_t)a->index + a->count && i < al->nchunks; i++)
      e->ck[al->base + i].in_place = 1;
    return;
  }
  if (a->op == POL_OP_PREFETCH && e->m->live_place) {
    if (e->tier[d] == POL_TIER_HOST) { /* pinned: libvx drops it, the kernel reads over the link */
      for (uint64_t i = a->index; i < (uint64_t)a->index + a->count && i < al->nchunks; i++)
        tell(e, (uint32_t)(al->base + i), POL_STATE_HOST);
      return;
    }
    if (!(a->flags & POL_ACT_NODATA)) e->ups[d] += a->count;
  }
  for (uint64_t i = a->index; i < (uint64_t)a->index + a->count && i < al->nchunks; i++) {
    uint32_t g = (uint32_t)(al->base + i);
    if (a->op == POL_OP_PREFETCH) {
      prefetch(e, g, a->when == POL_REQUIRED, a->flags & POL_ACT_NODATA, T);
    } else if (a->op == POL_OP_EVICT && e->ck[g].loc == C_DEV) {
      if (e->blind && e->rm[d])
        keep_duplicate(e, g, T);
      else
        evict(e, g, T);
    } else if (a->op == POL_OP_DROP && e->ck[g].loc == C_DEV) {
      set_away(e, g, C_DEAD);
      e->res->drops++;
    }
  }
}

/* 1 if action a is a prefetch libvx drops: of an allocation pinned to host memory. */
static int pinned_prefetch(struct eng *e, const pol_action_t *a) {
  if (a->op != POL_OP_PREFETCH || !e->m->live_place) return 0;
  uint32_t d = dense(e, a->alloc_id);
  return d != UINT32_MAX && e->tier[d] == POL_TIER_HOST;
}

/* Drops eviction k of the plan: its chunks stay, and the policy is told. */
static void keep_victims(struct eng *e, uint8_t *drop, uint32_t k) {
  const pol_action_t *a = &e->plan.actions[k];
  drop[k] = 1;
  pol_chunk_state(e->pol, a->alloc_id, a->index, a->count, POL_STATE_DEVICE);
}

/* libvx's drop_room (tiers/exec.c): the evictions that made room for
 * dropped prefetches are dropped too (the AHEAD run just before a dropped
 * AHEAD prefetch; REQUIRED runs, latest first, no more than the dropped
 * required prefetches needed), and the policy is told their chunks stayed. */
static void drop_room(struct eng *e, uint8_t *drop) {
  const pol_plan_t *pl = &e->plan;
  uint64_t req = 0;
  memset(drop, 0, pl->n);
  for (uint32_t i = 0; i < pl->n; i++) {
    if (!pinned_prefetch(e, &pl->actions[i])) continue;
    if (pl->actions[i].when == POL_REQUIRED) {
      req += pl->actions[i].count;
      continue;
    }
    for (uint32_t k = i;
         k-- > 0 && pl->actions[k].op == POL_OP_EVICT && pl->actions[k].when == POL_AHEAD;)
      keep_victims(e, drop, k);
  }
  for (uint32_t k = pl->n; k-- > 0 && req;)
    if (pl->actions[k].op == POL_OP_EVICT && pl->actions[k].when == POL_REQUIRED && !drop[k] &&
        pl->actions[k].count <= req) {
      req -= pl->actions[k].count;
      keep_victims(e, drop, k);
    }
}

static void run_plan(struct eng *e, double T) {
  uint8_t drop[POL_PLAN_ACTIONS];
  drop_room(e, drop);
  for (uint32_t i = 0; i < e->plan.n; i++)
    if (!drop[i]) action(e, &e->plan.actions[i], T);
}

/* libvx learns pointers from a kernel's parameters, never whether it
 * reads or writes through them: under --place live every mode is unknown
 * to the policy (the kernels still do what the trace says). */
static int seen_ranges(struct eng *e) {
  e->prg = e->t->rg;
  if (!e->m->live_place || !e->t->nrg) return 0;
  e->prg_own = malloc(e->t->nrg * sizeof *e->prg_own);
  if (!e->prg_own) return -ENOMEM;
  for (size_t i = 0; i < e->t->nrg; i++) {
    e->prg_own[i] = e->t->rg[i];
    e->prg_own[i].mode = POL_ACCESS_UNKNOWN;
  }
  e->prg = e->prg_own;
  return 0;
}

static int future(void *ctx, uint32_t k, pol_launch_t *out) {
  struct eng *e = ctx;
  if (e->cur + k >= e->t->nlaunch) return 0;
  const rp_event_t *ev = &e->t->ev[e->t->launch_ev[e->cur + k]];
  *out = (pol_launch_t){.kernel = ev->kernel,
                        .stream = ev->stream,
                        .now = ev->time,
                        .ranges = e->prg + ev->r0,
                        .nranges = ev->nr};
  return 1;
}

// ---- events ----

/* Where libvx puts an allocation of `size` under policy kind e->place, at
 * its default options (tiers/place.c, decide(); core/options.def): at
 * most VX_NATIVE_MAX (1M) stays native; under static, VX_STATIC_MIN (64M)
 * and more lives in host memory; the rest is native while the native bytes
 * stay within the device budget less the room kept for movable data
 * (VX_MOVABLE: 75% under predict, none otherwise), managed past it.  The
 * replay models what the live library does: native bytes never move and
 * take the policy's room (demand is native-first live). */
#define LIVE_NATIVE_MAX (1ull << 20)
#define LIVE_STATIC_MIN (64ull << 20)
#define LIVE_MOVABLE_PCT 75 /* tiers/place.c: MOVABLE_PREDICT_PCT */
/* VX_EVICT_WATERMARK's default: libvx's predictor pushes chunks down ahead
 * of need above 95% occupancy (pol_config_default's 100 is the offline one) */
#define LIVE_EVICT_WATERMARK 95

static int live_tier(const struct eng *e, const rp_alloc_t *a) {
  uint64_t size = a->size;
  if (e->place == POL_KIND_COUNT) return POL_TIER_MANAGED;
  /* --place recorded: where the run that wrote the trace put it (libvx
   * records its own placement in a VX_TRACE) */
  if (e->m->live_place == RP_PLACE_RECORDED)
    return a->flags & POL_ALLOC_NATIVE ? POL_TIER_DEVICE : POL_TIER_MANAGED;
  if (e->place == POL_STATIC && size >= LIVE_STATIC_MIN) return POL_TIER_HOST;
  if (size <= LIVE_NATIVE_MAX) return POL_TIER_DEVICE;
  uint64_t room = e->place == POL_PREDICT || e->place == POL_ORACLE
                      ? e->m->capacity / 100 * LIVE_MOVABLE_PCT
                      : 0;
  /* and at least the biggest launch seen so far (tiers/place.c) */
  if ((e->place == POL_PREDICT || e->place == POL_ORACLE) && e->launch_max > room)
    room = e->launch_max > e->m->capacity ? e->m->capacity : e->launch_max;
  uint64_t lim = e->m->capacity - room;
  return e->native + size <= lim ? POL_TIER_DEVICE : POL_TIER_MANAGED;
}

/* libvx (tiers/exec.c, exec_native_claim): a native allocation that does not
 * fit the room free now waits until the policy's evictions for it, and
 * every eviction queued before them, have gone down. */
static void live_make_room(struct eng *e, uint64_t size) {
  /* what is still going down counts as held, as libvx counts it */
  double going = e->d2h_free > e->t_issue ? (e->d2h_free - e->t_issue) / 1e9 * e->m->link_bps : 0;
  uint64_t held = e->native + e->used * e->t->chunk + (uint64_t)going;
  if (held + size <= e->m->capacity) return;
  if (pol_make_room(e->pol, size, &e->plan) > 0) run_plan(e, e->t_issue);
  if (e->d2h_free > e->t_issue) e->t_issue = e->d2h_free;
}

static void on_alloc(struct eng *e, const rp_event_t *ev) {
  const rp_alloc_t *a = &e->t->al[ev->alloc];
  int want = live_tier(e, a);
  uint32_t flags = want == POL_TIER_DEVICE ? POL_ALLOC_NATIVE : 0;
  if (want == POL_TIER_DEVICE && e->pol && e->m->live_place && e->place == POL_PREDICT)
    live_make_room(e, a->size);
  int tier = e->pol ? pol_alloc(e->pol, a->id, a->addr, a->size, flags, (uint64_t)e->t_issue)
                    : POL_TIER_MANAGED;
  if (tier >= 0 && e->place != POL_KIND_COUNT) tier = want;
  e->tier[ev->alloc] = (uint8_t)(tier < 0 ? POL_TIER_MANAGED : tier);
  if (e->tier[ev->alloc] == POL_TIER_DEVICE) {
    e->native += a->size;
    set_cap(e);
    /* cuMemAlloc on a device full of managed chunks: the driver evicts the
     * least recently used ones to make room (as the simulator does) */
    for (uint32_t v; e->used > e->cap && (v = e->ck[e->sentinel].next) != e->sentinel;) {
      evict(e, v, e->t_issue);
      e->ck[v].pressed = 1;
    }
  }
  struct idm *m = &e->idm_pool[ev->alloc];
  m->id = a->id;
  m->idx = ev->alloc;
  HASH_ADD(hh, e->ids, id, sizeof m->id, m);
}

static void on_free(struct eng *e, const rp_event_t *ev) {
  const rp_alloc_t *a = &e->t->al[ev->alloc];
  /* Under --place live the FREE is the player's cuMemFree, which waits for
   * the whole context in the simulator (cuda.h: it "may perform implicit
   * synchronization"), libvx's own copy streams included: nothing is
   * issued after it before the device is idle. */
  if (e->m->live_place) {
    double t = rp_max3(e->end, e->h2d_free, e->d2h_free);
    t = rp_max3(t, e->prio_free, e->compute_free);
    if (t > e->t_issue) e->t_issue = t;
  }
  for (uint32_t i = 0; i < a->nchunks; i++) {
    uint32_t g = (uint32_t)(a->base + i);
    if (e->ck[g].wb) e->ck[g].wb = WB_LAUNCH; /* freed unread */
    dead_writeback(e, g);
    set_away(e, g, C_DEAD);
  }
  if (e->pol && pol_free(e->pol, a->id, (uint64_t)e->t_issue, &e->plan) > 0)
    for (uint32_t i = 0; i < e->plan.n; i++)
      if (e->plan.actions[i].op != POL_OP_DROP) e->res->writebacks_of_freed++;
  if (e->tier[ev->alloc] == POL_TIER_DEVICE) {
    e->native -= a->size;
    set_cap(e);
  }
  struct idm *m = &e->idm_pool[ev->alloc];
  HASH_DEL(e->ids, m);
}

static double *stream_free(struct eng *e, uint64_t id) {
  for (int i = 0; i < e->nstreams; i++)
    if (e->sid[i] == id) return &e->sfree[i];
  int i = e->nstreams < MAX_STREAMS ? e->nstreams++ : MAX_STREAMS - 1;
  e->sid[i] = id;
  e->sfree[i] = 0;
  return &e->sfree[i];
}

/* Least recently used resident chunk not used by the launch; when the
 * launch's own chunks fill the device, the least recently used of those (a
 * kernel whose working set exceeds the room thrashes against itself: the
 * device never holds more than it has, as in the simulator); UINT32_MAX if
 * none is resident. */
static uint32_t lru_victim(struct eng *e) {
  for (uint32_t g = e->ck[e->sentinel].next; g != e->sentinel; g = e->ck[g].next)
    if (e->ck[g].stamp != e->stamp) return g;
  uint32_t g = e->ck[e->sentinel].next;
  return g != e->sentinel ? g : UINT32_MAX;
}

/* Services the launch's missing chunks in fault batches from t0; returns the end. */
static double faults(struct eng *e, uint32_t nm, double t0) {
  double tf = t0;
  for (uint32_t i = 0; i < nm; i += e->m->fault_batch) {
    tf += e->m->fault_ns;
    e->res->fault_batches++;
    for (uint32_t k = i; k < nm && k < i + e->m->fault_batch; k++) {
      uint32_t g = e->missing[k], v;
      while (e->used >= e->cap && (v = lru_victim(e)) != UINT32_MAX) {
        tf = evict(e, v, tf);
        e->ck[v].pressed = 1;
        if (!e->blind) tell(e, v, POL_STATE_HOST); /* libvx is not told */
      }
      if (e->ck[g].loc == C_HOST) {
        uint64_t b = ck_bytes(e, g);
        double start = tf > e->prio_free ? tf : e->prio_free;
        tf = e->prio_free = start + xfer(e, b);
        take(e, ENG_H2D, start, xfer(e, b));
        e->res->bytes_up += b;
      }
      e->ck[g].clean = 0;
      (void)set_dev(e, g);
      e->ck[g].arrive = tf;
      e->res->faults++;
      tell(e, g, POL_STATE_DEVICE);
    }
  }
  return tf;
}

/* A host chunk a launch is about to fault in: 1 when the driver pins it to
 * host memory instead (the kernel reads it over the link).  Modelled with
 * --place live only (the live stack as the simulator has it); the default
 * model keeps plain migration, which its references were tuned against. */
static int thrash_pinned(struct ck *c) {
  if (c->pinned) return 1;
  if (!c->pressed || c->loc != C_HOST) return 0;
  c->pressed = 0;
  if (c->refaults < 255) c->refaults++;
  return c->pinned = c->refaults >= THRASH_PIN;
}

/* Host-memory bytes of a launch, by the direction they cross the link. */
struct hostb {
  uint64_t rd, wr, all; /* all: each chunk once, read or written */
};

/* Counts g's bytes for each direction range mode `mode` adds to it. */
static void host_dir(struct eng *e, uint32_t g, uint32_t mode, struct hostb *h) {
  uint8_t dir = (mode == POL_ACCESS_WRITE ? 0 : 1) | (mode == POL_ACCESS_READ ? 0 : 2);
  uint8_t add = dir & (uint8_t)~e->ck[g].hdir;
  if (!e->ck[g].hdir) h->all += ck_bytes(e, g);
  if (add & 1) h->rd += ck_bytes(e, g);
  if (add & 2) h->wr += ck_bytes(e, g);
  e->ck[g].hdir |= dir;
}

/* Marks the launch's chunks; returns the time its resident ones are all there. */
static double gather(struct eng *e, const rp_event_t *ev, double t0, uint32_t *nm,
                     uint64_t *touched, struct hostb *host) {
  double wait = t0;
  for (uint32_t r = 0; r < ev->nr; r++) {
    const pol_range_t *rg = &e->t->rg[ev->r0 + r];
    uint32_t d = e->t->rg_alloc[ev->r0 + r];
    const rp_alloc_t *a = &e->t->al[d];
    for (uint64_t i = rg->first; i < (uint64_t)rg->first + rg->count && i < a->nchunks; i++) {
      uint32_t g = (uint32_t)(a->base + i);
      if (e->ck[g].stamp == e->stamp) { /* seen: another range may add a direction */
        if (e->ck[g].hdir) host_dir(e, g, rg->mode, host);
        if (e->ck[g].wb == WB_LAUNCH && rg->mode != POL_ACCESS_WRITE) e->ck[g].wb = WB_NONE;
        continue;
      }
      e->ck[g].stamp = e->stamp;
      e->ck[g].hdir = 0;
      if (e->ck[g].wb) e->ck[g].wb = rg->mode == POL_ACCESS_WRITE ? WB_LAUNCH : WB_NONE;
      *touched += ck_bytes(e, g);
      if (e->infinite || e->tier[d] == POL_TIER_DEVICE) continue;
      if (e->tier[d] == POL_TIER_HOST)
        host_dir(e, g, rg->mode, host);
      else if (e->ck[g].loc == C_DEV)
        wait = wait > e->ck[g].arrive ? wait : e->ck[g].arrive;
      /* pinned, advised in place, or no room left by native memory */
      else if ((e->m->live_place && (thrash_pinned(&e->ck[g]) || e->once[d] == ONCE_DONE)) ||
               e->cap == 0 || e->ck[g].in_place)
        host_dir(e, g, rg->mode, host);
      else
        e->missing[(*nm)++] = g;
    }
  }
  return wait;
}

static void finish(struct eng *e, const rp_event_t *ev, double end) {
  for (uint32_t r = 0; r < ev->nr; r++) {
    const pol_range_t *rg = &e->t->rg[ev->r0 + r];
    const rp_alloc_t *a = &e->t->al[e->t->rg_alloc[ev->r0 + r]];
    for (uint64_t i = rg->first; i < (uint64_t)rg->first + rg->count && i < a->nchunks; i++) {
      uint32_t g = (uint32_t)(a->base + i);
      dead_writeback(e, g); /* only written by this launch since it went down */
      e->ck[g].busy = end;
      if (rg->mode != POL_ACCESS_READ) e->ck[g].clean = 0;
      if (e->ck[g].loc == C_DEV) {
        lru_unlink(e, g);
        lru_push(e, g);
      }
    }
  }
}

/* Pins allocation d to host memory as libvx does (tiers/exec.c,
 * pin_to_host): what is on the device goes down once, and the policy is
 * told every chunk is on the host. */
static void pin_to_host(struct eng *e, uint32_t d, double T) {
  const rp_alloc_t *a = &e->t->al[d];
  e->tier[d] = POL_TIER_HOST;
  for (uint32_t i = 0; i < a->nchunks; i++) {
    uint32_t g = (uint32_t)(a->base + i);
    if (e->ck[g].loc == C_DEV) evict(e, g, T);
    if (e->ck[g].loc == C_FRESH) e->ck[g].loc = C_HOST;
  }
  pol_chunk_state(e->pol, a->id, 0, a->nchunks, POL_STATE_HOST);
}

/* libvx's executor pins an allocation to host memory once it has brought
 * it up twice over and each chunk brought up served fewer than 1.5 uses,
 * unless the kernels that reach it compute long enough to hide its moves
 * (tiers/exec.c, pin_due): its chunks on the device go down once, its
 * prefetches are dropped from then on, and kernels read it over the link.
 * libvx times the launches reaching an allocation once it has come up
 * whole (on the device: the kernel's own run, its reads over the link
 * included), its first KT_SAMPLES, and keeps the shortest; its link time
 * is the allocation's size at the link's rate, which libvx measures from
 * its own prefetches. */
static void live_pins(struct eng *e, const rp_event_t *ev, double T) {
  e->nkt_due = 0;
  for (uint32_t r = 0; r < ev->nr; r++) {
    uint32_t d = e->t->rg_alloc[ev->r0 + r];
    const rp_alloc_t *a = &e->t->al[d];
    e->uses[d] += e->t->rg[ev->r0 + r].count;
    if (e->tier[d] == POL_TIER_MANAGED && e->ups[d] >= a->nchunks && e->kt_n[d] < KT_SAMPLES &&
        e->nkt_due < KT_IDS) {
      int seen = 0;
      for (int i = 0; i < e->nkt_due; i++)
        seen |= e->kt_due[i] == d;
      if (!seen) e->kt_due[e->nkt_due++] = d;
    }
    if (e->tier[d] != POL_TIER_MANAGED || e->ups[d] < 2ull * a->nchunks ||
        2 * e->uses[d] >= 3 * e->ups[d])
      continue;
    /* its kernels hide its moves: they computed, per use, a tenth of its
     * time over the link or more (libvx times them), and it fits a
     * quarter of the movable room, beside what the kernels before use */
    if (e->kt_n[d] && e->kt_min[d] * PIN_HIDE >= xfer(e, a->size) &&
        (uint64_t)PIN_ROOM * a->nchunks <= e->cap)
      continue;
    pin_to_host(e, d, T);
    pol_pin(e->pol, a->id, 1);
    e->res->host_pins++;
  }
}

/* libvx's pin for one use (tiers/exec.c, EX_PIN_ONCE), decided on the plan:
 * an allocation made on the device (nothing brought up), pushed down since
 * and wanted back unforeseen (half of it REQUIRED, none AHEAD) is read over
 * the link by this launch; a second use, or a plan that predicts one, moves
 * it from then on, its counts started afresh.  Once per allocation.  Its
 * advice stays (preferred location host): a chunk of it no plan brings up
 * is read over the link, not faulted in (gather). */
static void live_once(struct eng *e, const rp_event_t *ev, double T) {
  for (uint32_t r = 0; r < ev->nr; r++) {
    uint32_t d = e->t->rg_alloc[ev->r0 + r];
    const rp_alloc_t *a = &e->t->al[d];
    if (e->once[d] == ONCE_PINNED && e->tier[d] == POL_TIER_HOST &&
        (e->uses[d] - e->pin_uses[d] >= a->nchunks || pol_plan_ups(&e->plan, a->id, POL_AHEAD))) {
      e->tier[d] = POL_TIER_MANAGED;
      e->once[d] = ONCE_DONE;
      e->uses[d] = e->t->rg[ev->r0 + r].count, e->ups[d] = 0;
      continue;
    }
    if (e->once[d] || e->tier[d] != POL_TIER_MANAGED || e->ups[d] ||
        e->uses[d] < 2ull * a->nchunks ||
        2 * pol_plan_ups(&e->plan, a->id, POL_REQUIRED) < a->nchunks ||
        pol_plan_ups(&e->plan, a->id, POL_AHEAD))
      continue;
    e->once[d] = ONCE_PINNED;
    e->pin_uses[d] = e->uses[d];
    pin_to_host(e, d, T);
  }
}

/* A write to a ReadMostly duplicate faults (the copies are read-only) and
 * the driver revokes the others, as in the simulator: each batch of the
 * launch's written duplicates costs a fault's service time, and no data
 * moves.  Returns that time. */
static double upgrades(struct eng *e, const rp_event_t *ev) {
  uint64_t n = 0;
  for (uint32_t r = 0; r < ev->nr; r++) {
    const pol_range_t *rg = &e->t->rg[ev->r0 + r];
    uint32_t d = e->t->rg_alloc[ev->r0 + r];
    const rp_alloc_t *a = &e->t->al[d];
    /* only advice makes a duplicate (a clean chunk): a launch touching no
     * advised allocation costs one test per range */
    if (rg->mode == POL_ACCESS_READ || !e->rm[d]) continue;
    for (uint64_t i = rg->first; i < (uint64_t)rg->first + rg->count && i < a->nchunks; i++) {
      struct ck *c = &e->ck[a->base + i];
      if (!c->clean || c->loc != C_DEV) continue;
      c->clean = 0; /* once per chunk, whatever ranges reach it (finish() would) */
      n++;
    }
  }
  if (!n) return 0;
  uint64_t batches = (n + e->m->fault_batch - 1) / e->m->fault_batch;
  e->res->faults += n;
  e->res->fault_batches += batches;
  return (double)batches * e->m->fault_ns;
}

/* The compute of a launch whose duration was measured (a VX_TRACE), given
 * hx, the time this replay charges it for host memory it reaches over the
 * link.  A measured duration holds what the kernel reached over the link
 * in the run.  ev->dur, the shortest of the same launches (rp_trace_load),
 * leaves out what the run read past the ranges vx inferred, but it may be
 * an instance that read nothing over the link: less hx, it dropped the
 * compute of a kernel this replay serves from host memory (two-stream: a
 * kernel that took 4.06 ms in the run, 1.38 of them compute, replayed in
 * 2.80).  Its own duration less hx is the compute when the replay charges
 * the link the run had; the smaller of the two, never less than the bytes
 * at device speed.  Never less than the shortest less hx (the rule before),
 * and a launch takes at least the shortest, the bound's compute. */
static double measured_compute(const struct eng *e, const rp_event_t *ev, uint64_t touched,
                               double hx) {
  double floor = (double)touched / e->m->dev_bps * 1e9;
  double own = (double)ev->dur_own - hx; /* dur_own >= dur: dur is the shortest of them */
  double c = (double)ev->dur < own ? (double)ev->dur : own;
  return c > floor ? c : floor;
}

static void on_launch(struct eng *e, size_t li, const rp_event_t *ev) {
  uint64_t chunks = 0;
  for (uint32_t r = 0; r < ev->nr; r++)
    chunks += e->t->rg[ev->r0 + r].count;
  if (chunks * e->t->chunk > e->launch_max) e->launch_max = chunks * e->t->chunk;
  double T = e->t_issue > e->prev_start ? e->t_issue : e->prev_start;
  e->t_issue = T;
  e->cur = li;
  if (e->pol && e->m->live_place) live_pins(e, ev, T);
  if (e->pol) {
    pol_launch_t l = {.kernel = ev->kernel,
                      .stream = ev->stream,
                      .now = (uint64_t)T,
                      .ranges = e->prg + ev->r0,
                      .nranges = ev->nr};
    if (pol_launch(e->pol, &l, &e->plan) > 0) {
      if (e->m->live_place) live_once(e, ev, T);
      run_plan(e, T);
    }
  }
  double *sf = stream_free(e, ev->stream);
  double t0 = *sf > T ? *sf : T;
  /* One kernel at a time on the device, whatever its stream (the
   * simulator's compute engine; a kernel's faults are served while it
   * holds the device) */
  if (e->compute_free > t0) t0 = e->compute_free;
  uint32_t nm = 0;
  uint64_t touched = 0;
  struct hostb host = {0, 0, 0};
  if (++e->stamp == 0) e->stamp = 1;
  double wait = gather(e, ev, t0, &nm, &touched, &host);
  /* A kernel faults only once it runs, after what its stream waits for
   * (its chunks already on their way): the missing ones are served from
   * then, not beside the wait, as in the simulator. */
  double tf = faults(e, nm, wait > t0 ? wait : t0);
  double ready = wait > tf ? wait : tf;
  /* Host memory reached over the link crosses it in its direction, as in
   * the simulator: reads wait for and hold the H2D engine, writes the D2H
   * engine; the kernel takes the time of both. */
  double up = xfer(e, host.rd), down = xfer(e, host.wr), hx = xfer(e, host.all);
  if (up > 0 && e->h2d_free > ready) ready = e->h2d_free;
  if (down > 0 && e->d2h_free > ready) ready = e->d2h_free;
  if (up > 0) take(e, ENG_H2D, ready, up);
  if (down > 0) take(e, ENG_D2H, ready, down);
  double dur = rp_launch_ns(ev, touched, e->m);
  if (e->t->measured && ev->dur) dur = measured_compute(e, ev, touched, hx);
  double wf = upgrades(e, ev);
  double end = ready + hx + wf + dur;
  for (int i = 0; e->m->live_place && i < e->nkt_due; i++) { /* timed on the device */
    uint32_t d = e->kt_due[i];
    double v = hx + wf + dur;
    if (!e->kt_n[d] || v < e->kt_min[d]) e->kt_min[d] = v;
    e->kt_n[d]++;
  }
  e->nkt_due = 0;
  e->compute_free = end;
  e->res->bytes_up += host.rd;
  e->res->bytes_down += host.wr;
  e->res->stall_s += (ready - t0 + hx + wf) / 1e9;
  e->res->compute_s += dur / 1e9;
  *sf = end;
  e->prev_start = ready;
  e->end = e->end > end ? e->end : end;
  finish(e, ev, end);
}

/* The chunks an H2D copy writes stay where they are (the simulator writes
 * a managed chunk in place): a never-touched one is populated on the host,
 * a device one is dirty, and neither goes before the copy ends. */
static void copy_written(struct eng *e, const rp_event_t *ev, double end) {
  const rp_alloc_t *a = &e->t->al[ev->alloc];
  uint64_t first = ev->off / e->t->chunk, last = (ev->off + ev->bytes - 1) / e->t->chunk;
  for (uint64_t i = first; i <= last && i < a->nchunks; i++) {
    struct ck *c = &e->ck[a->base + i];
    if (c->loc == C_FRESH || c->loc == C_DEAD) c->loc = C_HOST;
    c->clean = 0;
    if (c->busy < end) c->busy = end;
  }
}

/* A COPY: on its stream's timeline and its direction's copy engine, for
 * every policy alike, moving no chunk.  A synchronous one holds the host
 * until it ends. */
static void on_copy(struct eng *e, const rp_event_t *ev) {
  double T = e->t_issue > e->prev_start ? e->t_issue : e->prev_start;
  double *sf = stream_free(e, ev->stream);
  int dir = ev->dir == POL_COPY_HTOD ? ENG_H2D : ENG_D2H;
  double end = *sf = take(e, dir, T > *sf ? T : *sf, xfer(e, ev->bytes));
  if (ev->dir == POL_COPY_DTOH) {
    e->res->bytes_down += ev->bytes;
  } else {
    e->res->bytes_up += ev->bytes;
    if (!e->infinite) copy_written(e, ev, end);
  }
  if (ev->flags & POL_COPY_SYNC && end > e->t_issue) e->t_issue = end;
  e->end = e->end > end ? e->end : end;
}

// ---- a run ----

static int setup(struct eng *e, const rp_trace_t *t, const rp_model_t *m, const char *policy) {
  e->t = t;
  e->m = m;
  e->sentinel = (uint32_t)t->nchunks;
  e->ck = calloc(t->nchunks + 1, sizeof *e->ck);
  e->tier = calloc(t->nal + 1, 1);
  e->rm = calloc(t->nal + 1, 1);
  e->ups = calloc(t->nal + 1, sizeof *e->ups);
  e->uses = calloc(t->nal + 1, sizeof *e->uses);
  e->pin_uses = calloc(t->nal + 1, sizeof *e->pin_uses);
  e->once = calloc(t->nal + 1, 1);
  e->kt_min = calloc(t->nal + 1, sizeof *e->kt_min);
  e->kt_n = calloc(t->nal + 1, 1);
  if (!e->ups || !e->uses || !e->pin_uses || !e->once || !e->kt_min || !e->kt_n) return -ENOMEM;
  e->idm_pool = calloc(t->nal + 1, sizeof *e->idm_pool);
  e->missing = calloc(t->nchunks + 1, sizeof *e->missing);
  if (seen_ranges(e)) return -ENOMEM;
  e->plan.actions = calloc(POL_PLAN_ACTIONS, sizeof *e->plan.actions);
  e->plan.cap = POL_PLAN_ACTIONS;
  e->slot = calloc(t->nchunks + 1, sizeof *e->slot);
  if (!e->slot) return -ENOMEM;
  if (!e->ck || !e->tier || !e->rm || !e->idm_pool || !e->missing || !e->plan.actions)
    return -ENOMEM;
  for (size_t a = 0; a < t->nal; a++)
    for (uint32_t i = 0; i < t->al[a].nchunks; i++)
      e->ck[t->al[a].base + i].alloc = (uint32_t)a;
  e->ck[e->sentinel].next = e->ck[e->sentinel].prev = e->sentinel;
  set_cap(e);
  e->infinite = !strcmp(policy, "infinite");
  int kind = pol_kind_parse(strcmp(policy, "clairvoyant") ? policy : "oracle");
  /* DeepUM (the paper's) runs over plain Unified Memory: all movable */
  e->blind = kind >= 0 && kind != POL_DEEPUM;
  e->place = kind < 0 || kind == POL_DEEPUM || !m->live_place ? POL_KIND_COUNT : kind;
  if (kind < 0) return e->infinite ? 0 : -EINVAL;
  pol_config_t c;
  pol_config_default(&c, (pol_kind_t)kind, m->capacity);
  c.chunk_size = t->chunk;
  if (m->live_place) c.evict_watermark = LIVE_EVICT_WATERMARK; /* as libvx configures it */
  if (m->watermark) c.evict_watermark = m->watermark;
  c.prefetch_distance = m->distance;
  c.read_mostly = (uint32_t)m->read_mostly;
  int r = pol_create(&c, &e->pol);
  if (!r && kind == POL_ORACLE) r = pol_set_future(e->pol, future, e);
  return r;
}

static void teardown(struct eng *e) {
  HASH_CLEAR(hh, e->ids);
  if (e->pol) { /* the planner's count of what it brought up ahead of need */
    pol_stats_t s;
    pol_get_stats(e->pol, &s);
    e->res->ahead_used = s.ahead_used;
    e->res->ahead_wasted = s.ahead_wasted;
    e->res->victims_back = s.victims_back;
    e->res->in_place = s.chunks_in_place;
  }
  pol_destroy(e->pol);
  free(e->bz[ENG_H2D].v);
  free(e->bz[ENG_D2H].v);
  free(e->ck);
  free(e->tier);
  free(e->rm);
  free(e->ups);
  free(e->uses);
  free(e->pin_uses);
  free(e->once);
  free(e->kt_min);
  free(e->kt_n);
  free(e->idm_pool);
  free(e->missing);
  free(e->plan.actions);
  free(e->slot);
  free(e->prg_own);
}

int rp_run(const rp_trace_t *t, const rp_model_t *m, const char *policy, rp_result_t *out) {
  memset(out, 0, sizeof *out);
  if (!rp_policy_known(policy)) return -EINVAL;
  strncpy(out->policy, policy, sizeof out->policy - 1);
  if (!strcmp(policy, "bound")) return rp_run_bound(t, m, out);
  struct eng e = {.res = out};
  int r = setup(&e, t, m, policy);
  size_t li = 0;
  for (size_t i = 0; !r && i < t->nev; i++) {
    const rp_event_t *ev = &t->ev[i];
    if (ev->type == POL_TREC_ALLOC)
      on_alloc(&e, ev);
    else if (ev->type == POL_TREC_FREE)
      on_free(&e, ev);
    else if (ev->type == POL_TREC_COPY)
      on_copy(&e, ev);
    else
      on_launch(&e, li++, ev);
  }
  out->total_s = e.end / 1e9;
  busy_sums(&e, out);
  if (!r && (e.bz[ENG_H2D].oom || e.bz[ENG_D2H].oom)) r = -ENOMEM;
  teardown(&e);
  return r;
}

void rp_derive(rp_result_t *r, const rp_result_t *inf, const rp_result_t *dem,
               const rp_result_t *ora) {
  r->overhead = inf->total_s > 0 ? r->total_s / inf->total_s - 1 : 0;
  double gain = dem->stall_s - ora->stall_s;
  if (gain > 1e-12)
    r->oracle_gain_share = (dem->stall_s - r->stall_s) / gain;
  else
    r->oracle_gain_share = r->stall_s <= ora->stall_s + 1e-12 ? 1.0 : 0.0;
}
