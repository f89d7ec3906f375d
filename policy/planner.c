/* planner.c: turns the launch being planned plus a predicted future into a plan.
 * Belady-like: chunks are ranked by predicted next use; room is made by evicting
 * what is needed furthest in the future (never the launch's own chunks). */
#include <errno.h>

#include "pol_internal.h"

/* 1 if a's chunks are the planner's to move: managed, not kept in host
 * memory by the executor (pol_pin). */
static int movable(const struct pol_arec *a) {
  return a && a->tier == POL_TIER_MANAGED && !a->pinned;
}

// ---- deaths ----

void planner_note_free(pol_t *p, const struct pol_arec *a) {
  if (!a->use_seq) return;
  struct pol_death *d = &p->death[a->name & (POL_DEATH_SLOTS - 1)];
  d->name = a->name;
  d->gap = p->seq - a->use_seq;
}

/* The gap from a's last use to its free in its name's last lifetime, if
 * one is remembered; NULL if none. */
static const struct pol_death *last_death(const pol_t *p, const struct pol_arec *a) {
  const struct pol_death *d = &p->death[a->name & (POL_DEATH_SLOTS - 1)];
  return d->name == a->name ? d : NULL;
}

/* A resident chunk whose allocation history says is about to be freed,
 * with no predicted use before then: returns the position (launches from
 * now, >= 1) by which its room comes back for free, else 0.  Evicting it
 * earlier writes back data nobody reads (cnn: 5 of 8.8 GB down); a use
 * predicted after the free is the next incarnation's, of the same name. */
static uint64_t dying(const pol_t *p, const struct pol_chunk *c) {
  const struct pol_arec *a = c->a;
  const struct pol_death *d = last_death(p, a);
  if (!a->use_seq || !d) return 0;
  uint64_t f = a->use_seq + d->gap; /* freed after launch f */
  if (f < p->seq) return 0;         /* overdue: history was wrong this time */
  if (c->stamp == p->epoch && c->next_use && p->seq + c->next_use <= f) return 0;
  return f + 1 - p->seq;
}

/* 1 if c's room comes back by itself by position j. */
static int dies_by(const pol_t *p, const struct pol_chunk *c, uint32_t j) {
  uint64_t at = dying(p, c);
  return at && at <= j;
}

// ---- victims ----

static int protected_prev(const pol_t *p, const struct pol_chunk *c) {
  return c->last_use && c->last_use + 1 >= p->seq; /* used by this or the previous launch */
}

/* A chunk with no predicted use, least recently used first, whose room
 * does not come back by itself by position j. */
static struct pol_chunk *victim_cold(pol_t *p, int allow_prev, uint32_t j) {
  while (p->cursor != &p->lru) {
    struct pol_chunk *c = p->cursor;
    p->cursor = c->next;
    if (c->stamp == p->epoch) continue;
    if (!allow_prev && protected_prev(p, c)) continue;
    if (dies_by(p, c, j)) continue;
    return c;
  }
  return NULL;
}

/* The resident chunk predicted furthest ahead, if its use is later than j. */
static struct pol_chunk *victim_far(pol_t *p, uint32_t j) {
  while (p->wtail > 0) {
    struct pol_chunk *c = p->win[p->wtail - 1];
    if (c->loc != LOC_DEV || c->stamp != p->epoch || c->next_use == 0) {
      p->wtail--;
      continue;
    }
    if (c->next_use <= j) return NULL;
    p->wtail--;
    return c;
  }
  return NULL;
}

// ---- how far ahead ----

/* Prefetching ahead pays only where the predictions hold.  Where they do
 * not, each chunk brought up far ahead is a bet twice: on the chunk (wasted
 * if evicted unused) and on its victim (MIN's choice, the furthest
 * predicted use, fetched back REQUIRED when that prediction was wrong).
 * On a link-bound job every lost bet is bytes on the critical path: the
 * launch traces of real models at half their footprint (tests/traces,
 * vx replay --place live) moved 1.1-1.5x what a shallow planner moves,
 * where the clairvoyant planner loses nothing by going deep.  So the
 * chunks brought up ahead and not used yet are limited, additive increase
 * and multiplicative decrease as TCP's window: a prefetch used grows the
 * limit by one chunk, a lost bet takes 1/POL_AHEAD_BACKOFF of it, down to
 * POL_AHEAD_MIN; it starts at the capacity, where right predictions keep
 * it (transformer-train: no bet lost).  moe.vxt 6.72 -> 5.05 s, bert
 * 2.33 -> 2.31, llama 7.86 -> 7.16, mixtral 14.4 -> 12.9; a backoff of 4
 * or 8 gained more on these but lost up to 4% on two-stream 2x.
 * A bound in time was tried as well and is not here: stop prefetching ahead
 * once the up link's backlog passes 3x the predicted time to the next full
 * plan (the launches' end-to-end intervals, measured by timed end events
 * live, floored at 1.5x the backlog the launches before that plan leave).
 * With the traces' exact extents it took bert 2.30 -> 2.16 s, gpt2 3.41 ->
 * 3.20, moe 4.99 -> 4.65 but llama 6.97 -> 7.15; with the extents libvx
 * infers (the VX_TRACE of a play, replayed) bert and gpt2 gained under 1%,
 * moe 8.01 -> 7.27, llama 8.16 -> 9.62; live (vx play, median of 5) bert
 * +0.7%, gpt2 +1.5%, moe -1.4%, llama +7.1%.  Llama is link-bound with
 * tiny kernels: the predicted time to the next plan is microseconds while
 * a layer's transfers take milliseconds, and any such horizon lets the
 * link drain at plan boundaries. */
uint64_t planner_ahead_limit(const pol_t *p) {
  return p->ahead_lim < p->cap_chunks ? p->ahead_lim : p->cap_chunks;
}

static void ahead_lost(pol_t *p) {
  uint64_t l = planner_ahead_limit(p);
  l -= l / POL_AHEAD_BACKOFF;
  p->ahead_lim = l < POL_AHEAD_MIN ? POL_AHEAD_MIN : l;
}

static void ahead_won(pol_t *p) {
  uint64_t l = planner_ahead_limit(p);
  if (l < p->cap_chunks) p->ahead_lim = l + 1;
}

static int evict_tier(const pol_t *p) {
  if (p->cfg.host_capacity && (p->host_used + 1) * p->cfg.chunk_size > p->cfg.host_capacity)
    return POL_TIER_NVME;
  return POL_TIER_HOST;
}

static int evict(pol_t *p, struct pol_chunk *v, int when, pol_plan_t *plan) {
  int tier = evict_tier(p);
  int clean = !v->dirty && tier == POL_TIER_HOST;
  int r = plan_emit_f(plan, POL_OP_EVICT, when, tier, clean ? POL_ACT_CLEAN : 0, v);
  if (r < 0) return r;
  if (v->ahead) {
    p->st.ahead_wasted++;
    ahead_lost(p);
  }
  /* chunk_set_away clears the flag and counts it out of p->inv */
  chunk_set_away(p, v, tier == POL_TIER_NVME ? LOC_NVME : LOC_HOST);
  p->st.chunks_evicted++;
  return 0;
}

/* Frees one chunk of room for a use at position j (0 = the launch itself).
 * Returns 0, -ENOENT when nothing may be evicted for it, -ENOSPC when the plan is full. */
int planner_evict_for(pol_t *p, uint32_t j, int when, pol_plan_t *plan) {
  struct pol_chunk *v = victim_cold(p, 0, j);
  if (!v) v = victim_far(p, j);
  if (!v && j == 0) {
    p->cursor = p->lru.next; /* last resort for the launch itself: the previous launch's */
    v = victim_cold(p, 1, j);
  }
  if (!v) return -ENOENT;
  return evict(p, v, when, plan);
}

/* Room on the device outside any launch (a native allocation about to be
 * made): evicts, as REQUIRED, until at most `max_used` chunks are
 * resident: what has no predicted use, least recently used first, then
 * what the last plan predicted furthest ahead, then what the last launches
 * used.  Returns 0 when the room is there, -ENOENT when nothing more may
 * go, -ENOSPC when the plan is full. */
int planner_make_room(pol_t *p, uint64_t max_used, pol_plan_t *plan) {
  p->cursor = p->lru.next;
  p->wtail = p->win_n;
  while (p->used > max_used) {
    int r = planner_evict_for(p, 0, POL_REQUIRED, plan); /* as for a launch's own needs */
    if (r == -ENOENT) {
      /* Only the last launch's chunks are left: no launch is being
       * planned, and the eviction waits for that launch's end. */
      struct pol_chunk *v = p->lru.next;
      r = v == &p->lru ? -ENOENT : evict(p, v, POL_REQUIRED, plan);
    }
    if (r < 0) return r;
  }
  return 0;
}

// ---- the future window ----

static void want_add(pol_t *p, struct pol_chunk *c, uint32_t j, int nodata) {
  if (p->want_n < p->want_cap)
    p->want[p->want_n++] = (struct want){.c = c, .j = j, .nodata = (uint32_t)nodata};
}

/* 1 the first time this walk meets future allocation `key` (or when the table is full). */
static int first_sight(pol_t *p, uint64_t key) {
  for (uint32_t i = 0; i < 8; i++) {
    uint32_t s = (uint32_t)(key + i * 0x9e37u) & (POL_SEEN_SLOTS - 1);
    if (p->seen_stamp[s] != p->epoch) {
      p->seen_stamp[s] = p->epoch;
      p->seen[s] = key;
      return 1;
    }
    if (p->seen[s] == key) return 0;
  }
  return 0;
}

/* An allocation history says is coming, first touched at j: the room its
 * chunks will take must not be filled by prefetches of later uses. */
static uint64_t want_room(pol_t *p, const struct fut_rng *r, uint32_t j) {
  if (!r->key || !first_sight(p, r->key) || p->want_n >= p->want_cap) return 0;
  uint64_t n = r->count < p->cap_chunks ? r->count : p->cap_chunks;
  if (!n) return 0;
  p->want[p->want_n++] = (struct want){.c = NULL, .j = j, .nodata = 1, .room = (uint32_t)n};
  return n;
}

/* Adds one future launch's chunks; returns how many distinct ones were new. */
static uint64_t walk_launch(pol_t *p, const struct fut_launch *fl, uint32_t j) {
  uint64_t added = 0;
  for (uint32_t i = 0; i < fl->n; i++) {
    const struct fut_rng *r = &fl->r[i];
    if (r->a && r->a->pinned) continue; /* read over the link: no room, no move */
    if (!r->a) {                        /* not allocated yet: nothing to move, room to keep */
      added += want_room(p, r, j);
      continue;
    }
    uint32_t end = r->first + r->count;
    if (end > r->a->nchunks || end < r->first) end = r->a->nchunks;
    for (uint32_t k = r->first; k < end; k++) {
      struct pol_chunk *c = &r->a->chunks[k];
      if (c->stamp == p->epoch) {
        if (!c->next2 && j > c->next_use) c->next2 = j;
        continue;
      }
      c->stamp = p->epoch;
      c->next_use = j;
      c->next2 = 0;
      if (c->loc == LOC_DEV) {
        if (p->win_n < p->win_cap) p->win[p->win_n++] = c;
      } else {
        want_add(p, c, j, r->mode == POL_ACCESS_WRITE);
      }
      added++;
    }
  }
  return added;
}

/* Pass 1: stamps every chunk of the predicted window with its next use. */
static void walk(pol_t *p, fut_next_fn next, void *it, uint64_t budget) {
  uint32_t maxj = p->cfg.prefetch_distance ? p->cfg.prefetch_distance : POL_MAX_LOOKAHEAD;
  uint64_t distinct = 0;
  p->walked = 0;
  struct fut_launch fl = {.n = 0, .r = p->fut};
  for (uint32_t j = 1; j <= maxj && distinct < budget; j++) {
    if (next(p, it, &fl) <= 0) break;
    distinct += walk_launch(p, &fl, j);
    if (p->want_n >= p->want_cap || p->win_n >= p->win_cap) break;
    p->walked = j;
  }
}

// ---- the launch itself ----

static void note_use(struct pol_arec *a, uint32_t mode) {
  if (!a->used) {
    a->used = 1; /* the first use initialises it */
    return;
  }
  if (mode == POL_ACCESS_READ)
    a->reads++;
  else
    a->written = 1;
}

/* Stamps the launch's chunks (next use 0); returns how many of them, each
 * counted once, are not on the device, and in *all (if not NULL) how many
 * there are. */
static uint64_t stamp_current(pol_t *p, const pol_launch_t *l, uint64_t *all) {
  uint64_t n = 0, k_all = 0;
  for (uint32_t i = 0; i < l->nranges; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    if (!movable(a)) continue;
    uint32_t end = l->ranges[i].first + l->ranges[i].count;
    if (end > a->nchunks || end < l->ranges[i].first) end = a->nchunks;
    for (uint32_t k = l->ranges[i].first; k < end; k++) {
      struct pol_chunk *c = &a->chunks[k];
      if (c->stamp == p->epoch && c->next_use == 0) continue;
      c->stamp = p->epoch;
      c->next_use = 0;
      c->next2 = 0;
      n += c->loc != LOC_DEV;
      k_all++;
    }
  }
  if (all) *all = k_all;
  return n;
}

/* 1 if chunk k of a is reached by range i of the launch with a read (any
 * range other than a POL_ACCESS_WRITE one): its contents are needed. */
static int read_by(const pol_launch_t *l, uint64_t id, uint32_t k) {
  for (uint32_t i = 0; i < l->nranges; i++) {
    const pol_range_t *g = &l->ranges[i];
    if (g->alloc_id == id && g->mode != POL_ACCESS_WRITE && k >= g->first &&
        k - g->first < g->count)
      return 1;
  }
  return 0;
}

/* Brings chunk c up for the launch itself, into room made before.
 * Returns 0, 1 when there is no room (the access will fault), -ENOSPC. */
static int require_chunk(pol_t *p, const pol_launch_t *l, uint32_t mode, struct pol_chunk *c,
                         pol_plan_t *plan) {
  if (p->used >= p->cap_chunks) return 1;
  if (p->cfg.demand_budget) { /* the access faults it in, into the room made */
    chunk_set_resident(p, c);
    c->dirty = 1; /* the driver keeps no host copy of a migrated page */
    return 0;
  }
  int nodata = c->loc == LOC_FRESH || (mode == POL_ACCESS_WRITE && !read_by(l, c->a->id, c->idx));
  if (plan_emit_f(plan, POL_OP_PREFETCH, POL_REQUIRED, 0, nodata ? POL_ACT_NODATA : 0, c) < 0)
    return -ENOSPC;
  int from_host = c->loc == LOC_HOST;
  if (c->victim) { /* the prediction that let it go was wrong */
    p->st.victims_back++;
    ahead_lost(p);
  }
  chunk_set_resident(p, c);
  c->dirty = (uint8_t)(nodata || !from_host); /* a host copy the executor may keep */
  p->st.chunks_required++;
  return 0;
}

// ---- reads in place ----

/* A launch that reaches more chunks than the device holds cannot have them
 * all there at once.  Planned as any other, it brought up what the room
 * allowed and the driver faulted in the rest, evicting as it went, and
 * wrote back what it evicted: on cnn at 3x (a 336 MiB device) the backward
 * of its first layers reads an activation (196 MiB) and a gradient and
 * writes another, 588 MiB in all, and 4.9 GB a run went down in those
 * faults.  A chunk such a launch reads from host memory, and that nothing
 * uses again before its allocation dies, gains nothing by coming up: it
 * crosses the link once either way, and read in place it takes no room, so
 * nothing goes down for it.  As many such chunks as the launch has more
 * than the device holds are left where they are (POL_OP_READ_IN_PLACE) and
 * the rest come up as before: a prefetch can run beside the kernels before
 * it, a read in place runs in its own kernel's time.  `vx replay --synth
 * cnn,oversub=3`: 0.788 -> 0.668 s (share 43.7 -> 65.1%), 16.7 -> 10.6 GB
 * down; 2x 59.5 -> 59.6%; no other synthetic workload or model trace has
 * such a launch.  Every such chunk, not only the excess: 3x 64.6%, 2x
 * 60.7%.  Tried on every launch, not only those past the device: what no
 * prediction uses again was read in place at each use, serial with its
 * kernel, and moe's experts, drawn at random, are used again where none was
 * predicted (share 55 -> 36% at 1.5x).
 * Only where the launch is known to read the chunk (POL_ACCESS_READ): one
 * of unknown mode may be written, and written in place it crosses the link
 * again.  libvx sees no access modes, so live the rule does not fire; its
 * executor's pin for one use (tiers/exec.c, EX_PIN_ONCE) already reads
 * such an activation over the link, and with unknown modes counted as
 * reads the two together played cnn 2x slower (vx play 0.494 -> 0.546 s:
 * the evictions that pin drops with the prefetches it drops were made
 * instead, for room the kernel then did not need). */

/* 1 if chunk k of allocation `id` is reached by the launch, and only
 * through ranges known to read it. */
static int only_read_by(const pol_launch_t *l, uint64_t id, uint32_t k) {
  int hit = 0;
  for (uint32_t i = 0; i < l->nranges; i++) {
    const pol_range_t *g = &l->ranges[i];
    if (g->alloc_id != id || k < g->first || k - g->first >= g->count) continue;
    if (g->mode != POL_ACCESS_READ) return 0;
    hit = 1;
  }
  return hit;
}

/* 1 if nothing is predicted to use c (of the launch being planned) again
 * while its allocation lives: no later use in the window, or one past the
 * allocation's predicted death, by its last lifetime's gap from last use to
 * free (the use predicted is then the next incarnation's, of the same name,
 * as cnn's activations are each iteration). */
static int unused_again(const pol_t *p, const struct pol_chunk *c) {
  if (!c->next2) return 1;
  const struct pol_death *d = last_death(p, c->a);
  return d && d->gap < c->next2;
}

/* Plans up to `most` of the launch's chunks to be read in place; returns
 * how many (each once), or -ENOSPC. */
static int64_t reads_in_place(pol_t *p, const pol_launch_t *l, uint64_t most, pol_plan_t *plan) {
  uint64_t n = 0;
  int r = 0;
  for (uint32_t i = 0; i < l->nranges && n < most && !r; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    if (!movable(a) || l->ranges[i].mode != POL_ACCESS_READ) continue;
    uint32_t end = l->ranges[i].first + l->ranges[i].count;
    if (end > a->nchunks || end < l->ranges[i].first) end = a->nchunks;
    for (uint32_t k = l->ranges[i].first; k < end && n < most && !r; k++) {
      struct pol_chunk *c = &a->chunks[k];
      if (c->loc != LOC_HOST || c->in_place == p->epoch || !unused_again(p, c) ||
          !only_read_by(l, a->id, k))
        continue;
      r = plan_emit(plan, POL_OP_READ_IN_PLACE, POL_REQUIRED, 0, c);
      if (r == 0) c->in_place = p->epoch, n++;
    }
  }
  p->st.chunks_in_place += n;
  return r < 0 ? r : (int64_t)n;
}

/* The launch's own chunks: first the room for the missing ones (the
 * evictions as one run of actions, so that the prefetches after them merge
 * into one action per range: interleaved, a launch of 64 missing chunks
 * filled a 128-action plan and the rest faulted, behind the policy's back),
 * then their prefetches, as far as the room goes.  m: the missing chunks
 * (stamp_current's count); excess: how many chunks more than the device
 * holds the launch reaches, as many as may be read in place (reads_in_place). */
static int required(pol_t *p, const pol_launch_t *l, uint64_t m, uint64_t excess,
                    pol_plan_t *plan) {
  if (excess) {
    int64_t k = reads_in_place(p, l, excess, plan);
    if (k < 0) return (int)k;
    m -= (uint64_t)k;
  }
  while (m && p->used + m > p->cap_chunks) {
    int r = planner_evict_for(p, 0, POL_REQUIRED, plan);
    if (r == -ENOSPC) return r;
    if (r < 0) break; /* nothing may go: the rest will fault */
  }
  for (uint32_t i = 0; i < l->nranges; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    if (!movable(a)) continue;
    a->use_seq = p->seq;
    uint32_t mode = l->ranges[i].mode;
    uint32_t end = l->ranges[i].first + l->ranges[i].count;
    if (end > a->nchunks || end < l->ranges[i].first) end = a->nchunks;
    for (uint32_t k = l->ranges[i].first; k < end; k++) {
      struct pol_chunk *c = &a->chunks[k];
      if (c->last_use != p->seq) p->st.chunks_used++;
      if (c->in_place == p->epoch) { /* read where it is */
        c->last_use = p->seq;
        continue;
      }
      if (c->loc != LOC_DEV) {
        int r = require_chunk(p, l, mode, c, plan);
        if (r < 0) return r;
        if (r > 0) continue;
      }
      if (mode != POL_ACCESS_READ) c->dirty = 1; /* this launch writes it */
      if (c->ahead) {
        p->st.ahead_used++;
        p->inv--;
        ahead_won(p);
      }
      c->ahead = 0;
      c->last_use = p->seq;
      lru_touch(p, c);
    }
  }
  return 0;
}

/* Learns access modes; advises ReadMostly for data read, never written, since
 * it was made, when configured to (pol_config_t.read_mostly). */
static int advise(pol_t *p, const pol_launch_t *l, pol_plan_t *plan) {
  for (uint32_t i = 0; i < l->nranges; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    if (!movable(a)) continue;
    note_use(a, l->ranges[i].mode);
    if (p->cfg.read_mostly && !a->advised && !a->written && a->reads >= 2) {
      if (plan_emit_alloc(plan, POL_OP_ADVISE_READ_MOSTLY, POL_AHEAD, a) < 0) return -ENOSPC;
      a->advised = 1;
      p->st.advised++;
    }
  }
  return 0;
}

/* Chunks of the launch all resident: nothing required, the last plan's
 * prefetches are still on their way; the window is re-planned every few launches. */
int planner_light(pol_t *p, const pol_launch_t *l, pol_plan_t *plan) {
  for (uint32_t i = 0; i < l->nranges; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    if (!movable(a)) continue;
    uint32_t end = l->ranges[i].first + l->ranges[i].count;
    if (end > a->nchunks || end < l->ranges[i].first) end = a->nchunks;
    for (uint32_t k = l->ranges[i].first; k < end; k++)
      if (a->chunks[k].loc != LOC_DEV) return -EAGAIN;
  }
  if (++p->epoch == 0) p->epoch = 1;
  stamp_current(p, l, NULL);
  int r = required(p, l, 0, 0, plan); /* nothing missing: only counts and touches */
  if (r == 0) r = advise(p, l, plan);
  return r == 0 || r == -ENOSPC ? (int)plan->n : r;
}

int planner_fault(pol_t *p, const pol_launch_t *l, pol_plan_t *plan) {
  if (++p->epoch == 0) p->epoch = 1;
  p->win_n = p->want_n = 0;
  uint64_t missing = stamp_current(p, l, NULL);
  p->cursor = p->lru.next;
  p->wtail = 0;
  int r = required(p, l, missing, 0, plan);
  return r == -ENOSPC || r == 0 ? (int)plan->n : r;
}

// ---- predicted work ----

/* The prefetches follow Belady's MIN, done early ("conservative" prefetching):
 * a chunk wanted at position j may replace a victim now only if that victim is
 * the one MIN would replace at j (the furthest next use after j) and it is not
 * used before j.  Resident chunks already used by j ("passed": this launch's,
 * those predicted up to j, those prefetched for earlier positions) compete
 * with their use after j; if one of them wins, the prefetch waits for a later
 * plan.  This moves no more bytes than MIN and starts each move as early as
 * MIN allows. */
struct passed {
  uint32_t w;          /* win[0..w) are passed */
  int inf;             /* a passed chunk has no (known) use after j */
  uint32_t min2, max2; /* range of passed chunks' next uses after their first */
  uint32_t n;
};

static void pass_add(struct passed *s, const struct pol_chunk *c) {
  if (!c->next2) {
    s->inf = 1;
    return;
  }
  s->min2 = s->n && s->min2 < c->next2 ? s->min2 : c->next2;
  s->max2 = s->n && s->max2 > c->next2 ? s->max2 : c->next2;
  s->n++;
}

static void pass_current(pol_t *p, const pol_launch_t *l, struct passed *s) {
  for (uint32_t i = 0; i < l->nranges; i++) {
    struct pol_arec *a = pol_find(p, l->ranges[i].alloc_id);
    if (!movable(a)) continue;
    for (uint32_t k = l->ranges[i].first;
         k < a->nchunks && k - l->ranges[i].first < l->ranges[i].count; k++)
      if (a->chunks[k].loc == LOC_DEV) pass_add(s, &a->chunks[k]);
  }
}

/* MIN's choice at j among resident chunks, if it may be evicted now.  dead
 * (keep_room): the chunk wanted at j needs room only (no transfer), NULL for
 * a prefetch.  For room only, the victim may also be
 * one MIN would keep for a passed chunk, if its own next use is far (half the
 * predicted window past j), so that write-backs start early, while the
 * down link is idle, instead of on the launch's critical path.  MIN's
 * choice may be a chunk whose room comes back by itself by j (dies_by): a
 * prefetch waits for that; with `dead` (keep_room), that room counts for
 * the want (++*dead, NULL returned) and the search goes on for the rest:
 * giving up there left the rest of the room to REQUIRED evictions at the
 * want's launch (cnn's backward: the gradient of a[1], 196 MiB, made a
 * launch before a[2] is freed; vx play cnn 2x 0.4999 -> 0.4963 s).
 * The cold victims skip what the last two launches used, as a launch's own
 * evictions do (planner_evict_for): the cold list runs least recently used
 * first, so it reaches them only when nothing older is left, and there the
 * predictor's silence about a chunk is weaker evidence than its use a
 * launch ago.  On two-stream 1.5x the prefetches took 958 such chunks, the
 * other stream's working set the predicted window did not reach; 684 came
 * back within 50 launches.  MIN's choice among the predicted, or waiting,
 * is better (vx replay two-stream 1.5x 0.877 -> 0.840 s, 1.3 GB less each
 * way).
 * For room only, a passed chunk with no second use in the window (s->inf)
 * does not hold the victim back: MIN would make that room from it, but
 * only once its own use is over, so its write-back would run between that
 * use and the want's launch, and the write would wait for it; the victim,
 * used later in the window, goes down now instead, and comes back ahead of
 * its use.  On two-stream 1.5x 107 such refusals a run kept the down link
 * waiting on the training stream's outputs (used now, next read past the
 * window): the same bytes move (10.55 GB up), the engines overlap 130 ms
 * instead of 87 (vx replay 0.840 -> 0.802 s; no other synthetic workload
 * or model trace changes). */
static struct pol_chunk *victim_min(pol_t *p, struct passed *s, uint32_t j, uint64_t *dead) {
  struct pol_chunk *v = victim_cold(p, 0, j);
  if (v) return v;
  while (s->w < p->wtail && p->win[s->w]->next_use <= j) {
    const struct pol_chunk *c = p->win[s->w++];
    if (c->loc == LOC_DEV && c->stamp == p->epoch) pass_add(s, c);
  }
  int inf = s->inf && !dead;
  uint32_t best_passed = inf || (s->n && s->min2 <= j) ? UINT32_MAX : s->n ? s->max2 : 0;
  while (p->wtail > s->w) {
    v = p->win[p->wtail - 1];
    if (v->loc != LOC_DEV || v->stamp != p->epoch) {
      p->wtail--;
      continue;
    }
    if (dies_by(p, v, j)) {
      if (!dead) return NULL; /* wait for the free */
      p->wtail--;
      ++*dead;
      return NULL;
    }
    int far = dead && v->next_use - j >= p->walked / POL_ROOM_FAR;
    if (v->next_use <= j || (v->next_use <= best_passed && j > p->cfg.lead && !far)) return NULL;
    p->wtail--;
    return v;
  }
  return NULL;
}

/* Keeps room for n chunks wanted at j that need no transfer (written only,
 * or of an allocation not made yet): evicts now what MIN would evict by then.
 * *dead: chunks whose room comes back by itself before the wants met so far
 * (victim_min), counted as room for them. */
static int keep_room(pol_t *p, struct passed *s, uint32_t j, uint64_t n, uint64_t *reserved,
                     uint64_t *dead, pol_plan_t *plan) {
  *reserved += n;
  while (p->used + *reserved > p->cap_chunks + *dead && p->used) {
    uint64_t was = *dead;
    struct pol_chunk *v = victim_min(p, s, j, dead);
    if (!v && *dead > was) continue;
    if (!v) return -ENOENT;
    int r = evict(p, v, POL_AHEAD, plan);
    if (r < 0) return r;
  }
  return 0;
}

/* A prefetch that finds no victim MIN allows yet waits for a later plan,
 * and so do the prefetches after it (they would take room out of order);
 * but if a later full plan can still bring it up ahead (it is wanted
 * POL_WAIT_NEAR launches or more from now), the walk goes on making
 * room for the chunks that need no transfer (keep_room), so that their
 * victims' write-backs start now, while the down link may be idle,
 * instead of when the device is full at their launch.  transformer-train
 * 2x: the optimizer step is bound by the up link with the down link idle,
 * and the forward after it waited on the write-backs that made room for
 * its activations; going on past the waiting prefetch, they run during
 * the step (vx replay 1.957 -> 1.590 s, the same bytes moved).  The room
 * so made is held (p->held) against the waiting prefetches of the next
 * walks, or the first of them would take it and the chunks it was made
 * for would find none at their launch.  A prefetch wanted sooner is
 * fetched at its launch, taking whatever room is free: making room past
 * it then only moves the REQUIRED evictions onto the launches that need
 * no transfer (policy_predict's no_prefetch_into_room_of_recurring_allocations,
 * which a bound of 2 fails).  Light plans come only between launches
 * that find all their chunks resident, so a full plan usually comes
 * sooner than POL_REPLAN_EVERY: at that bound (4) the walk ended at each
 * want three launches out, and transformer-train 3x left 151 more
 * evictions to the launches (vx replay 2.465 -> 2.362 s with 3; 12
 * layers 3x: share 75.6 -> 83.6%; no synthetic workload or model trace
 * slower, --place live unchanged). */
static int ahead(pol_t *p, const pol_launch_t *l, pol_plan_t *plan) {
  struct passed s = {0};
  uint64_t hold = p->held, reserved = hold, made = 0, dead = 0;
  int stuck = 0, r = 0;
  pass_current(p, l, &s);
  for (uint32_t w = 0; w < p->want_n && r == 0; w++) {
    const struct want *x = &p->want[w];
    if (x->c && x->c->loc == LOC_DEV) continue;
    if (x->nodata) { /* room at its launch, no prefetch */
      uint64_t n = x->c ? 1 : x->room, held = n < hold ? n : hold;
      hold -= held;
      r = keep_room(p, &s, x->j, n - held, &reserved, &dead, plan);
      if (r == 0 && stuck) made += n;
      continue;
    }
    if (stuck) continue;
    if (p->inv >= planner_ahead_limit(p)) { /* as far ahead as the bets pay */
      stuck = 1;
      continue;
    }
    if (p->used + reserved >= p->cap_chunks) {
      struct pol_chunk *v = victim_min(p, &s, x->j, NULL);
      if (!v && x->j < POL_WAIT_NEAR) {
        r = -ENOENT; /* no full plan before its launch: it will take any room there is */
        break;
      }
      if (!v) {
        stuck = 1;
        continue;
      }
      r = evict(p, v, POL_AHEAD, plan);
      if (r < 0) break;
      v->victim = 1; /* a bet on its predicted use (ahead_lost) */
    }
    if (plan_emit(plan, POL_OP_PREFETCH, POL_AHEAD, 0, x->c) < 0) {
      r = -ENOSPC;
      break;
    }
    int from_host = x->c->loc == LOC_HOST;
    chunk_set_resident(p, x->c);
    x->c->dirty = (uint8_t)!from_host;
    x->c->ahead = 1;
    p->inv++;
    pass_add(&s, x->c);
    p->st.chunks_ahead++;
  }
  p->held = made;
  return r ? r : stuck ? -ENOENT : 0;
}

/* Pushes chunks with no predicted use down until occupancy is under the watermark. */
static int pre_evict(pol_t *p, pol_plan_t *plan) {
  while (p->used > p->mark_chunks) {
    struct pol_chunk *v = victim_cold(p, 0, UINT32_MAX);
    if (!v) return 0;
    int r = evict(p, v, POL_AHEAD, plan);
    if (r < 0) return r;
  }
  return 0;
}

int planner_run(pol_t *p, const pol_launch_t *l, pol_plan_t *plan, fut_next_fn next, void *it) {
  if (++p->epoch == 0) p->epoch = 1;
  p->win_n = p->want_n = 0;
  uint64_t all, missing = stamp_current(p, l, &all);
  if (next) walk(p, next, it, POL_WINDOW_FACTOR * p->cap_chunks);
  p->cursor = p->lru.next;
  p->wtail = p->win_n;
  int r = required(p, l, missing, all > p->cap_chunks ? all - p->cap_chunks : 0, plan);
  if (r == 0) r = advise(p, l, plan);
  if (r == 0) r = ahead(p, l, plan);
  if (r == 0 || r == -ENOENT) r = pre_evict(p, plan);
  return r == -ENOSPC || r == 0 ? (int)plan->n : r;
}
