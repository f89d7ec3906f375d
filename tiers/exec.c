/* Plan execution: per-device policy state (the policy, alloc id -> address
 * with an "arrived ahead" bit per chunk), plans translated into ops under
 * the device lock, and pinning to the host; exec_issue.c carries the ops
 * out through the real driver, outside the lock. */
#include "exec.h"
#include "exec_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "vxhash.h"

#include "budget.h"
#include "capture.h"
#include "move.h"
#include "observe.h"
#include "outfile.h"
#include "trace_rec.h"
#include "driver.h"
#include "ctr.h"
#include "log.h"
#include "options.h"
#include "locks.h"

static ex_dev_t ex_dev[VX_MAX_DEVICES] = {
    [0 ... VX_MAX_DEVICES - 1] = {.order = PTHREAD_MUTEX_INITIALIZER,
                                  .lock = PTHREAD_MUTEX_INITIALIZER}};
static int ex_planning;    /* a policy plans launches: VX_POLICY=predict, or demand with a limit */
static pol_kind_t ex_kind; /* POL_PREDICT, or POL_DEMAND: demand paging inside the budget */
static uint64_t ex_launch_max[VX_MAX_DEVICES]; /* atomic: exec_launch_max */

static uint64_t ex_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Device d's lock rank: one member of the EXEC family each (core/locks.h). */
#define EX_RANK(d) (VX_RANK_EXEC + (int)((d)-ex_dev))
#define EX_ORDER_RANK(d) (VX_RANK_ORDER + (int)((d)-ex_dev))
_Static_assert(VX_MAX_DEVICES <= VX_LOCK_EXEC_SLOTS, "a lock rank per device");

static ex_dev_t *dev_of(int dev) {
  return &ex_dev[ctr_slot(dev)];
}

// ---- set-up ----

/* VX_POLICY's choices (choices.def) name policy/'s kinds of the same value
 * (test_options.c checks the names too). */
_Static_assert((int)VX_POLICY_PREDICT == (int)POL_PREDICT &&
                   (int)VX_POLICY_DEMAND == (int)POL_DEMAND &&
                   (int)VX_POLICY_STATIC == (int)POL_STATIC,
               "choices.def's POLICY list is policy/policy.h's pol_kind_t, in order");

void exec_init(void) {
  /* Without parameter layouts no launch is seen: nothing to plan from (the
   * one line saying so is move_probe's). */
  /* Under VX_POLICY=demand or static with VX_DEVICE_LIMIT the budget is
   * kept too, as on a smaller device: launches still fault what they
   * miss, and the policy evicts the least recently used chunks to make
   * their room (pol_config_t.demand_budget); static's host-tier
   * allocations are read in place and never take room.  Without a limit,
   * demand is the driver's paging alone (the reference, plain UM with its
   * VX_MOVABLE). */
  int predict = vx_opt.POLICY == VX_POLICY_PREDICT;
  int demand_budget = (vx_opt.POLICY == VX_POLICY_DEMAND || vx_opt.POLICY == VX_POLICY_STATIC) &&
                      vx_opt.DEVICE_LIMIT.n > 0;
  ex_kind = predict ? POL_PREDICT : POL_DEMAND;
  ex_planning = (predict || demand_budget) && move_layouts();
  if (!vx_opt.TRACE.s[0]) return;
  char why[128] = "";
  char path[VX_OPT_STRING_MAX + 256];
  int rc = vx_path_expand(vx_opt.TRACE.s, path, sizeof path);
  if (rc)
    snprintf(why, sizeof why, "the path is too long once expanded");
  else
    rc = trace_rec_init(path, why, sizeof why);
  if (rc) vx_log(VX_LOG_ERROR, "VX_TRACE=%s: cannot create it: %s; no trace", vx_opt.TRACE.s, why);
}

void exec_fini(void) {
  trace_rec_fini();
}

int exec_planning(void) {
  return ex_planning && ex_kind == POL_PREDICT;
}

int exec_active(void) {
  return ex_planning;
}

uint64_t exec_launch_max(int dev) {
  return __atomic_load_n(&ex_launch_max[ctr_slot(dev)], __ATOMIC_RELAXED);
}

/* Raises exec_launch_max to the bytes this launch's ranges reach. */
static void note_launch_size(int dev, const pol_range_t *r, uint32_t n) {
  uint64_t chunks = 0;
  for (uint32_t i = 0; i < n; i++)
    chunks += r[i].count;
  uint64_t bytes = chunks << VX_CHUNK_SHIFT, *m = &ex_launch_max[ctr_slot(dev)];
  uint64_t old = __atomic_load_n(m, __ATOMIC_RELAXED);
  while (bytes > old &&
         !__atomic_compare_exchange_n(m, &old, bytes, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

/* The residency manager's capacity: the device budget (VX_DEVICE_LIMIT,
 * or free at first use minus VX_RESERVE), which covers native bytes (charged
 * against it as POL_ALLOC_NATIVE) and the managed chunks the policy keeps
 * on the device.  A budget below physical memory so behaves like a smaller
 * device. */
uint64_t exec_capacity(int dev) {
  return budget_limit(dev);
}

static int make_policy_locked(ex_dev_t *d, int dev) {
  if (d->pol || d->failed) return d->pol ? 0 : -1;
  uint64_t cap = exec_capacity(dev);
  pol_config_t c;
  pol_config_default(&c, ex_kind, cap);
  c.demand_budget = d->paging = ex_kind == POL_DEMAND;
  c.prefetch_distance = (uint32_t)vx_opt.PREFETCH_DISTANCE;
  c.evict_watermark = (uint32_t)vx_opt.EVICT_WATERMARK;
  if (vx_opt.NVME_DIR.s[0]) c.host_capacity = vx_size_resolve(&vx_opt.HOST_LIMIT, 0);
  if (pol_create(&c, &d->pol)) {
    d->failed = 1;
    VX_LOG_ONCE(VX_LOG_WARN, "the predictor could not start (device limit %llu): no prefetching",
                (unsigned long long)cap);
    return -1;
  }
  return 0;
}

// ---- allocations ----

static ex_alloc_t *entry_new(const vx_alloc_info_t *a) {
  uint32_t nch = (uint32_t)((a->size + (1ull << VX_CHUNK_SHIFT) - 1) >> VX_CHUNK_SHIFT);
  ex_alloc_t *e = calloc(1, sizeof *e + 4 * (size_t)nch * sizeof e->ahead[0]);
  if (!e) return NULL;
  e->last_use = e->ahead + nch;
  e->evicted = e->last_use + nch;
  e->other_use = e->evicted + nch;
  e->id = a->id, e->base = a->base, e->size = a->size, e->nchunks = nch;
  return e;
}

void exec_alloc(const vx_alloc_info_t *a) {
  int native = a->tier == VX_TIER_NATIVE;
  if (!native) obs_mark(a->base, a->size, 1);
  trace_rec_alloc(a->dev, a->id, a->base, a->size, native ? POL_ALLOC_NATIVE : 0);
  /* No concurrent managed access: no policy there, so no prefetch or advice.
   * The static tier's host allocations stay there (PreferredLocation host,
   * read in place): no device room to count. */
  if (!ex_planning || !a->id || !budget_managed_ok(a->dev) || a->tier == VX_TIER_HOST) return;
  ex_alloc_t *e = native ? NULL : entry_new(a);
  if (!native && !e) return; /* untracked by the policy: plain managed memory */
  ex_dev_t *d = dev_of(a->dev);
  vx_mutex_lock(&d->lock, EX_RANK(d));
  int rc = make_policy_locked(d, a->dev);
  if (!rc && native && a->held) pol_native_hold(d->pol, a->size, 1); /* now counted as itself */
  if (!rc) rc = pol_alloc(d->pol, a->id, a->base, a->size, native ? POL_ALLOC_NATIVE : 0, ex_now());
  if (rc >= 0 && e) {
    vxhash_oomed = 0;
    HASH_ADD(hh, d->by_id, id, sizeof e->id, e);
    if (!vxhash_oomed) e = NULL; /* else freed below: the allocation goes unplanned */
  }
  vx_mutex_unlock(&d->lock, EX_RANK(d));
  free(e);
}

void exec_free(const vx_alloc_info_t *a) {
  if (a->tier != VX_TIER_NATIVE) obs_mark(a->base, a->size, 0);
  trace_rec_free(a->dev, a->id);
  if (!ex_planning || !a->id) return;
  ex_dev_t *d = dev_of(a->dev);
  ex_alloc_t *e = NULL;
  vx_mutex_lock(&d->lock, EX_RANK(d));
  if (d->pol) {
    pol_free(d->pol, a->id, ex_now(), NULL); /* dead chunks: nothing to write back */
    HASH_FIND(hh, d->by_id, &a->id, sizeof a->id, e);
    if (e) HASH_DEL(d->by_id, e);
  }
  vx_mutex_unlock(&d->lock, EX_RANK(d));
  free(e);
}

// ---- extents: where a tensor inside a segment ends (exec_extent.c) ----

void exec_extent(int dev, uint64_t id, uint64_t size, const uint64_t *offs, int n, uint32_t *first,
                 uint32_t *count, int *in_place) {
  uint64_t lo = size, hi = 0;
  for (int k = 0; k < n; k++)
    if (offs[k] < lo) lo = offs[k];
  if (lo >= size) lo = 0;
  hi = size;
  ex_dev_t *d = dev_of(dev);
  ex_alloc_t *e = NULL;
  if (ex_planning && n > 0) {
    vx_mutex_lock(&d->lock, EX_RANK(d));
    HASH_FIND(hh, d->by_id, &id, sizeof id, e);
    if (e) {
      uint64_t now = ++d->launches;
      for (int k = 0; k < n; k++)
        if (offs[k] < e->size) ex_start_note(e, offs[k], now);
      hi = 0;
      for (int k = 0; k < n; k++) {
        uint64_t end = offs[k] < e->size ? ex_start_end(e, offs[k], now) : e->size;
        if (end > hi) hi = end;
      }
      /* cut short of the allocation's last chunk: the kernel may reach past it */
      if (in_place && !e->in_place && hi > lo && ((hi - 1) >> VX_CHUNK_SHIFT) + 1 < e->nchunks)
        *in_place = e->in_place = 1;
    }
    vx_mutex_unlock(&d->lock, EX_RANK(d));
  }
  if (hi <= lo) hi = size;
  *first = (uint32_t)(lo >> VX_CHUNK_SHIFT);
  *count = (uint32_t)(((hi - 1) >> VX_CHUNK_SHIFT) - *first + 1);
}

// ---- planning (under the device lock) ----

static void mark(ex_alloc_t *e, uint32_t first, uint32_t count, uint32_t seq) {
  for (uint32_t i = first; i < first + count && i < e->nchunks; i++)
    e->ahead[i] = seq;
}

/* Chunks of the launch that an AHEAD prefetch brought in (cleared now);
 * *wait = the latest batch among them (0 = none). */
static uint64_t take_hits_locked(ex_dev_t *d, const pol_range_t *r, uint32_t n, uint32_t *wait) {
  uint64_t hits = 0;
  for (uint32_t k = 0; k < n; k++) {
    ex_alloc_t *e;
    HASH_FIND(hh, d->by_id, &r[k].alloc_id, sizeof r[k].alloc_id, e);
    for (uint32_t i = r[k].first; e && i < r[k].first + r[k].count && i < e->nchunks; i++)
      if (e->ahead[i]) {
        if (!*wait || seq_after(e->ahead[i], *wait)) *wait = e->ahead[i];
        e->ahead[i] = 0;
        hits++;
      }
  }
  return hits;
}

/* The evictions that made room for dropped prefetches are dropped too:
 * for an AHEAD prefetch, the evictions just before it (the plan writes each
 * prefetch after the eviction that makes its room); for the REQUIRED part,
 * at most as many evicted chunks as the dropped required prefetches needed,
 * latest first.  The policy is told both (feedback): the prefetched chunks stayed
 * on the host, the evicted ones on the device. */
static void drop_room(ex_op_t *ops, int n) {
  uint64_t req_dropped = 0;
  for (int i = 0; i < n; i++) {
    if (ops[i].op != POL_OP_PREFETCH || !ops[i].dropped) continue;
    if (ops[i].when == POL_REQUIRED) {
      req_dropped += ops[i].count;
      continue;
    }
    for (int k = i - 1; k >= 0 && ops[k].op == POL_OP_EVICT && ops[k].when == POL_AHEAD; k--)
      ops[k].dropped = 1;
  }
  /* Never more than they needed: an eviction run longer than what is left
   * stays (it frees more than is needed, which is safe; dropping it would
   * leave the kept prefetches without their room) */
  for (int k = n - 1; k >= 0 && req_dropped; k--)
    if (ops[k].op == POL_OP_EVICT && ops[k].when == POL_REQUIRED && !ops[k].dropped &&
        ops[k].count <= req_dropped) {
      ops[k].dropped = 1;
      req_dropped -= ops[k].count;
    }
}

/* Cuts REQUIRED prefetch o[0] into slices of EX_REQ_SLICE chunks, written
 * after it (at most `room` of them); returns how many were added. */
static int slice(ex_op_t *o, int room) {
  int k = 0;
  while (o[k].count > EX_REQ_SLICE && k < room) {
    ex_op_t *cur = &o[k], *next = &o[k + 1];
    *next = *cur;
    next->first += EX_REQ_SLICE;
    next->count -= EX_REQ_SLICE;
    next->p += (size_t)EX_REQ_SLICE << VX_CHUNK_SHIFT;
    next->n -= (size_t)EX_REQ_SLICE << VX_CHUNK_SHIFT;
    cur->count = EX_REQ_SLICE;
    cur->n = (size_t)EX_REQ_SLICE << VX_CHUNK_SHIFT;
    k++;
  }
  return k;
}

/* Plan actions -> ops with addresses; returns the ops written. */
static int translate_locked(ex_dev_t *d, const pol_plan_t *pl, ex_op_t *ops, uint64_t *missed) {
  int n = 0;
  uint32_t seq = 0, seq0 = d->seq;
  for (uint32_t i = 0; i < pl->n; i++) {
    const pol_action_t *a = &pl->actions[i];
    ex_alloc_t *e;
    HASH_FIND(hh, d->by_id, &a->alloc_id, sizeof a->alloc_id, e);
    /* The policy plans reads in place only for ranges known to be read,
     * and libvx passes none known (launch_plan.c): never in its plans.
     * Ignored, one would only leave its chunks to fault in, as the
     * contract allows (policy.h). */
    if (!e || a->op == POL_OP_DROP || a->op == POL_OP_READ_IN_PLACE) continue;
    size_t off = (size_t)a->index << VX_CHUNK_SHIFT;
    if (off >= e->size && a->op != POL_OP_ADVISE_READ_MOSTLY) continue;
    ex_op_t *o = &ops[n++];
    *o = (ex_op_t){.id = a->alloc_id,
                   .first = a->index,
                   .count = a->count,
                   .op = a->op,
                   .when = a->when,
                   .tier = a->tier,
                   .nodata = (a->flags & POL_ACT_NODATA) != 0};
    o->p = e->base + (a->op == POL_OP_ADVISE_READ_MOSTLY ? 0 : off);
    o->n = a->op == POL_OP_ADVISE_READ_MOSTLY ? e->size : e->size - off;
    if (a->op != POL_OP_ADVISE_READ_MOSTLY && o->n > ((size_t)a->count << VX_CHUNK_SHIFT))
      o->n = (size_t)a->count << VX_CHUNK_SHIFT;
    if (a->op == POL_OP_PREFETCH && e->pinned) {
      o->dropped = 1; /* it stays on the host: the kernel reads it over the link */
      continue;
    }
    if (a->op == POL_OP_PREFETCH && !(a->flags & POL_ACT_NODATA))
      e->ups += a->count; /* moved data (a first touch moves none) */
    if (a->op == POL_OP_PREFETCH && a->when == POL_REQUIRED) *missed += a->count;
    seq = 0;
    if (a->op == POL_OP_PREFETCH && a->when == POL_AHEAD)
      while (!(seq = ++d->seq)) { /* 0 means none */
      }
    if (a->op == POL_OP_PREFETCH) mark(e, a->index, a->count, a->when == POL_AHEAD ? seq : 0);
    if (a->op == POL_OP_EVICT) /* the AHEAD batch still bringing a victim up, if any */
      for (uint32_t c = a->index; c < a->index + a->count && c < e->nchunks; c++)
        if (e->ahead[c] && (!seq || seq_after(e->ahead[c], seq))) seq = e->ahead[c];
    o->seq = seq;
    if (a->op == POL_OP_PREFETCH && a->when == POL_REQUIRED)
      n += slice(ops + n - 1, EX_OPS_CAP - n - (int)(pl->n - i - 1));
  }
  drop_room(ops, n);
  /* A victim's AHEAD batch is forgotten once its eviction is certain to go
   * down after the batch (ex_run_plan orders `down` after it).  Not for an
   * eviction dropped with its prefetch: the chunk stays, and the next plan
   * that evicts it must still wait for the batch.  (Forgotten here, such an
   * eviction went down before the chunk had landed, the chunk stayed on
   * the device while the policy counted it gone, and the budget was
   * overshot by a chunk or two under load: prog_torch, predict_in_place.) */
  for (int i = 0; i < n; i++) {
    if (ops[i].op != POL_OP_EVICT || ops[i].dropped) continue;
    ex_alloc_t *e;
    HASH_FIND(hh, d->by_id, &ops[i].id, sizeof ops[i].id, e);
    for (uint32_t c = ops[i].first; e && c < ops[i].first + ops[i].count && c < e->nchunks; c++)
      if (!seq_after(e->ahead[c], seq0)) e->ahead[c] = 0; /* not this plan's own batches */
  }
  return n;
}

/* What each op waits for.  A prefetch: room (exec_room.c), and the
 * eviction still taking any of its chunks down (a chunk an earlier plan
 * sent down lands before it comes back up: a prefetch that ran first would
 * do nothing and the eviction take the chunk away after it).  An eviction:
 * the latest planned launch that reached one of its chunks (`last`). */
static void waits_locked(ex_dev_t *d, ex_op_t *ops, int n, uint64_t free_before) {
  ex_room_plan_locked(&d->room, ops, n, free_before);
  for (int i = 0; i < n; i++) {
    ex_op_t *o = &ops[i];
    o->last = o->other = 0;
    if (o->dropped || (o->op != POL_OP_EVICT && o->op != POL_OP_PREFETCH)) continue;
    ex_alloc_t *e;
    HASH_FIND(hh, d->by_id, &o->id, sizeof o->id, e);
    for (uint32_t c = o->first; e && c < o->first + o->count && c < e->nchunks; c++)
      if (o->op == POL_OP_EVICT) {
        e->evicted[c] = o->group;
        if (e->last_use[c] && (!o->last || seq_after(e->last_use[c], o->last)))
          o->last = e->last_use[c];
        if (e->other_use[c] && (!o->other || seq_after(e->other_use[c], o->other)))
          o->other = e->other_use[c];
      } else if (e->evicted[c]) {
        o->room = room_later(o->room, e->evicted[c]);
        e->evicted[c] = 0;
      }
  }
}

/* Tells the policy which moves did not happen: with `dropped`, the ones
 * the executor dropped at translation; without, the others that failed. */
static void feedback_locked(ex_dev_t *d, const ex_op_t *ops, int n, int dropped) {
  for (int i = 0; i < n; i++) {
    if (!d->pol || (dropped ? !ops[i].dropped : !ops[i].failed || ops[i].dropped)) continue;
    if (ops[i].op == POL_OP_PREFETCH) {
      pol_chunk_state(d->pol, ops[i].id, ops[i].first, ops[i].count, POL_STATE_HOST);
      ex_alloc_t *e;
      HASH_FIND(hh, d->by_id, &ops[i].id, sizeof ops[i].id, e);
      if (e) mark(e, ops[i].first, ops[i].count, 0);
      if (e && !ops[i].dropped && !ops[i].nodata) /* it did not come up: not a move */
        e->ups = e->ups > ops[i].count ? e->ups - ops[i].count : 0;
    } else if (ops[i].op == POL_OP_EVICT) {
      pol_chunk_state(d->pol, ops[i].id, ops[i].first, ops[i].count, POL_STATE_DEVICE);
    }
  }
}

static void feedback(ex_dev_t *d, const ex_op_t *ops, int n) {
  vx_mutex_lock(&d->lock, EX_RANK(d));
  feedback_locked(d, ops, n, 0);
  vx_mutex_unlock(&d->lock, EX_RANK(d));
}

// ---- pinning to host memory what moving costs more than it saves ----

/* Moving a chunk of managed memory in and out costs two transfers (an
 * eviction copies it back even when it is clean: the driver keeps one copy),
 * reading it over the link from host memory one per use.  Two rules pin an
 * allocation to the host (preferred location host, accessed by the device:
 * the kernels read it over the link, nothing migrates, as the static tier;
 * its prefetches are dropped):
 *
 * - thrash (EX_PIN_THRASH, for good): its chunks come up about once per use
 *   (fewer than 1.5 references per chunk brought up, after each chunk came
 *   up twice on average).  This is the driver's own thrash resolution
 *   (pages that bounce are pinned to host memory and mapped), which vx's
 *   prefetches would otherwise keep from happening.  Under demand paging
 *   with an inference loop the driver does it; without it predict moved
 *   every weight every token.  Not when its kernels hide its moves: when
 *   the shortest of EX_KT_SAMPLES launches timed since its chunks first
 *   came up computed for at least 1/EX_PIN_HIDE of what reading the whole
 *   allocation over the link takes (exec_time.c measures both), and it
 *   takes at most 1/EX_PIN_ROOM of the movable room.  A kernel
 *   reading over the link holds the compute engine for the transfer, where
 *   a prefetch runs beside the kernels before it: the two-stream
 *   workload's training tensors (a fifth to half of their link time in
 *   compute per use) moved again play 1.39 -> 1.35 s, while decode weights
 *   (kernels of a thirtieth of it) are pinned as before.
 * - once (EX_PIN_ONCE, for one use): it was made on the device (its first
 *   touch was there: nothing ever came up), has been pushed down since,
 *   and a launch the plan did not see coming wants it back (at least half
 *   of it REQUIRED, none AHEAD).  Whether it will be used again is not
 *   known, and if not, bringing it up costs the second transfer for
 *   nothing: so this use reads it over the link, and only a second use (or
 *   a plan that predicts one) lets the plans move it again, its counts
 *   started afresh for the thrash rule.  At most once per allocation: a
 *   ski rental, never more than one extra transfer.  The advice stays
 *   (cuMemAdvise is not ordered with the streams: unset, it would make
 *   kernels enqueued before, which read the allocation in place, fault it
 *   onto the device behind the budget's back; predict_budget caught that),
 *   so a chunk of it no plan brings up is read over the link, not faulted.  Data written then read
 *   back once (vx_oversub) and activations the backward pass reads once
 *   (prog_train: 16% less virtual time, cnn 6%) are never moved twice;
 *   weights reused at once (moe's experts) pay one read over the link, in
 *   the first iteration only. */
#define EX_PIN_MAX 4
#define EX_PIN_HIDE 10
#define EX_PIN_ROOM 4

typedef struct ex_pin {
  uint64_t id;
  CUdeviceptr base;
  size_t size;
  uint32_t nchunks;
  int unpin;    /* undo an EX_PIN_ONCE */
  int for_good; /* EX_PIN_THRASH: the policy plans nothing for it from now on (pol_pin) */
} ex_pin_t;

/* 1 if the timed kernels that reached e compute for at least 1/EX_PIN_HIDE
 * of the time e takes to cross the link (exec_time.c; 0 while either is
 * not measured), and e fits 1/EX_PIN_ROOM of the movable room: a prefetch
 * runs beside the kernels before it only if it has room beside what they
 * use (two chunks taking turns in a one-chunk device wait for each other
 * whatever the compute: test_replay.c, live_exec_pins_low_reuse). */
static int compute_hides(const ex_dev_t *d, const ex_alloc_t *e) {
  uint64_t bpus = d->time.bpus;                        /* bytes per microsecond */
  uint64_t room = pol_used(d->pol) + pol_room(d->pol); /* the movable room, chunks */
  return e->kt_n && bpus && (uint64_t)EX_PIN_ROOM * e->nchunks <= room &&
         (double)e->kt_min * EX_PIN_HIDE * (double)bpus >= (double)e->size * 1e3;
}

/* Timed launches that have run (ex_time_harvest): each allocation keeps
 * the shortest. */
static void note_timed_locked(ex_dev_t *d, const ex_ktres_t *t, int n) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < t[i].nid; k++) {
      ex_alloc_t *e;
      HASH_FIND(hh, d->by_id, &t[i].id[k], sizeof t[i].id[k], e);
      if (!e || e->kt_n >= EX_KT_SAMPLES) continue;
      if (!e->kt_n || t[i].ns < e->kt_min) e->kt_min = t[i].ns;
      e->kt_n++;
    }
}

/* e->uses counts this launch's references already. */
static int pin_due(const ex_dev_t *d, const ex_alloc_t *e) {
  return !e->pinned && e->ups >= 2ull * e->nchunks && 2 * e->uses < 3 * e->ups &&
         !compute_hides(d, e);
}

/* 1 if a launch reaching e is to be timed for it: a thrash pin's candidate
 * (it came up whole once), not timed enough yet. */
static int time_due(const ex_alloc_t *e) {
  return !e->pinned && e->ups >= e->nchunks && e->kt_n < EX_KT_SAMPLES;
}

static int pin_once_due(const ex_alloc_t *e, const pol_plan_t *pl) {
  if (e->pinned || e->rented || e->ups || e->uses < 2ull * e->nchunks) return 0;
  return 2 * pol_plan_ups(pl, e->id, POL_REQUIRED) >= e->nchunks &&
         !pol_plan_ups(pl, e->id, POL_AHEAD);
}

static int unpin_due(const ex_alloc_t *e, const pol_plan_t *pl) {
  return e->pinned == EX_PIN_ONCE &&
         (e->uses - e->pin_uses >= e->nchunks || pol_plan_ups(pl, e->id, POL_AHEAD));
}

/* Whether planned launch `seq` was on `stream`: 1, 0, or -1 when that is
 * not known.  Plans are issued in order (order_take), so every earlier
 * launch that ran is marked by now with its stream (exec_launched); one
 * not marked never ran (nothing to wait for), one whose slot was marked
 * again since is too old. */
static int planned_on(const ex_dev_t *d, uint32_t seq, uint64_t stream) {
  const ex_side_t *x = __atomic_load_n(&d->side, __ATOMIC_ACQUIRE);
  unsigned slot = seq % EX_LRING;
  if (!x || __atomic_load_n(&x->lseq[slot], __ATOMIC_ACQUIRE) != seq) return -1;
  return (uint64_t)(uintptr_t)x->lstream[slot] == stream;
}

/* Counts the launch's references and stamps its chunks with its number
 * `seq` (exec_launched marks its end); returns the allocations to pin now.
 * A plan never evicts the launch's own chunks, so stamping before its
 * victims are read (waits_locked) changes none of them.  A chunk keeps
 * its latest use on another stream too (other_use): an eviction waits for
 * the end of both, as the stream of an earlier use may run behind the
 * stream of the latest (prog_stream_lag: the chunk faulted back when the
 * lagging stream read it, past the budget).  Two streams are exact; of
 * three or more, the latest two that reached a chunk are waited for. */
static int count_refs_locked(ex_dev_t *d, const pol_range_t *r, uint32_t n, uint32_t seq,
                             uint64_t stream, const pol_plan_t *pl, ex_pin_t *pin, uint64_t *kt,
                             int *nkt) {
  int np = 0;
  for (uint32_t k = 0; k < n; k++) {
    ex_alloc_t *e;
    HASH_FIND(hh, d->by_id, &r[k].alloc_id, sizeof r[k].alloc_id, e);
    if (!e) continue;
    e->uses += r[k].count;
    if (*nkt < EX_KT_IDS && time_due(e)) {
      int seen = 0;
      for (int i = 0; i < *nkt; i++)
        seen |= kt[i] == e->id;
      if (!seen) kt[(*nkt)++] = e->id;
    }
    for (uint32_t c = r[k].first; c < r[k].first + r[k].count && c < e->nchunks; c++) {
      uint32_t prev = e->last_use[c];
      if (prev && prev != seq && planned_on(d, prev, stream) == 0) e->other_use[c] = prev;
      e->last_use[c] = seq;
    }
    if (np == EX_PIN_MAX) continue;
    ex_pin_t x = {.id = e->id, .base = e->base, .size = e->size, .nchunks = e->nchunks};
    if (unpin_due(e, pl)) { /* used again: it moves from now on, judged afresh */
      e->pinned = EX_PIN_NONE;
      e->uses = r[k].count, e->ups = 0;
      x.unpin = 1;
      pin[np++] = x;
    } else if (pin_once_due(e, pl)) {
      e->pinned = EX_PIN_ONCE;
      e->rented = 1;
      e->pin_uses = e->uses;
      pin[np++] = x;
    } else if (pin_due(d, e)) {
      e->pinned = EX_PIN_THRASH;
      x.for_good = 1;
      pin[np++] = x;
    }
  }
  return np;
}

/* The policy counts the pinned chunks on the host from the plan on; the
 * room their moves leave is a group of the ring pushed before the plan's
 * evictions, as the moves go down before those (exec_room.c), and counts
 * as free before the plan (*room).  Chunks the plan itself brought up for
 * the launch are not in it: their prefetches are dropped (translate_locked),
 * they never took room.  Returns the group, 0 if the pins free no room.
 * Under the device lock. */
static uint32_t pin_room_locked(ex_dev_t *d, const pol_plan_t *pl, const ex_pin_t *pin, int np,
                                uint64_t *room) {
  uint64_t before = pol_room(d->pol), planned = 0;
  for (int i = 0; i < np; i++) {
    if (pin[i].unpin) continue;
    planned += pol_plan_resident(pl, pin[i].id);
    /* Both count its chunks on the host; a pin for one use stays in the
     * plans, as a plan that brings it up ahead is what ends it (unpin_due). */
    if (pin[i].for_good)
      pol_pin(d->pol, pin[i].id, 1);
    else
      pol_chunk_state(d->pol, pin[i].id, 0, pin[i].nchunks, POL_STATE_HOST);
  }
  uint64_t freed = pol_room(d->pol) - before;
  if (freed <= planned) return 0;
  *room += freed - planned;
  return ex_room_add_locked(&d->room, freed - planned);
}

static void pin_to_host(int dev, const ex_pin_t *pin, int np, uint32_t group, ex_side_t *x,
                        CUstream s) {
  CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  /* What leaves waits for the work before, and for the AHEAD prefetches
   * still bringing the allocation's chunks up (`up` is in order: all of
   * it): a chunk that landed after its move to the host stayed on the
   * device while the policy counted it on the host (the budget overshot
   * by that much under load, predict_budget). */
  if (x && (ex_order_after(s, &x->down, 1) || ex_order_after(x->up, &x->down, 1))) x = NULL;
  for (int i = 0; i < np; i++) {
    if (pin[i].unpin) {
      /* Its prefetches go from now on (a prefetch migrates whatever the
       * preferred location), but the advice stays: kernels enqueued
       * before still read it in place, and a chunk no plan brings up is
       * read over the link, never faulted onto the device behind the
       * budget's back. */
      ctr_add(dev, VX_CTR_host_unpins, 1);
      continue;
    }
    CUresult r = move_advise(pin[i].base, pin[i].size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host);
    if (r == CUDA_SUCCESS)
      r = move_advise(pin[i].base, pin[i].size, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu);
    if (r != CUDA_SUCCESS) {
      char eb[VX_CU_ERR_TEXT];
      VX_LOG_ONCE(VX_LOG_INFO, "cuMemAdvise failed (%s): an allocation stays movable",
                  vx_cu_err(r, eb));
      continue;
    }
    if (x) { /* what is on the device goes down once */
      CUdeviceptr p = pin[i].base;
      size_t sz = pin[i].size;
      uint8_t failed = 0;
      move_prefetch(&p, &sz, 1, host, x->down, &failed);
    }
    ctr_add(dev, VX_CTR_host_pins, 1);
  }
  /* The room the pinned chunks leave is there once their move ends: its
   * group is marked after the moves, before the plan's evictions go down.
   * Unmarked (no side streams), a prefetch taking it waits for all. */
  if (x && group) ex_group_mark(x, group);
}

/* The device whose ORDER lock this thread holds, and the planned launch
 * on it the thread is about to enqueue (exec_launched; seq 0 = none). */
typedef struct ex_pend {
  ex_dev_t *ordered;
  uint32_t seq;
  CUstream stream;
  int timed; /* ex_time_launch_begin's slot, 0 = the launch is not timed */
} ex_pend_t;
static __thread ex_pend_t ex_pending;

/* One thread at a time goes from planning to the end of what it issued
 * (d->order, taken before d->lock): a plan names the marks of earlier
 * plans (the end of an eviction group, of an AHEAD batch, of a launch
 * that used a victim), and another thread's earlier plan, made but not
 * yet issued, had not recorded them: the waits fell back to streams that
 * did not hold that work, an eviction ran before the launch that still
 * used its chunk, the launch faulted the chunk back and the device went
 * past its budget (prog_launch_threads, 4 threads on streams of their
 * own: one 8 MiB buffer over VX_DEVICE_LIMIT).  Held across the plan's
 * driver calls and the launch itself (LOCKS.md, E5): they only enqueue,
 * as the driver's own launch path does under its context's lock. */
static void order_take(ex_dev_t *d) {
  if (ex_pending.ordered) { /* a launch whose end was never marked: let it go */
    ex_pending.seq = 0;
    ex_time_launch_end(&ex_pending.ordered->time, ex_pending.timed, NULL, 0);
    ex_pending.timed = 0;
    vx_mutex_unlock(&ex_pending.ordered->order, EX_ORDER_RANK(ex_pending.ordered));
  }
  vx_mutex_lock(&d->order, EX_ORDER_RANK(d));
  ex_pending.ordered = d;
}

static void order_release(void) {
  ex_dev_t *d = ex_pending.ordered;
  if (!d) return;
  ex_pending.ordered = NULL;
  vx_mutex_unlock(&d->order, EX_ORDER_RANK(d));
}

static void count_use(int dev, uint64_t hits, uint64_t missed) {
  if (hits) {
    ctr_add(dev, VX_CTR_prefetch_hits, hits);
    ctr_add(dev, VX_CTR_faults_avoided, (hits + 31) / 32);
  }
  if (missed) ctr_add(dev, VX_CTR_prefetch_misses, missed);
}

/* A thread's plan and ops (80 KiB: too much for the stack of a thread the
 * application made), freed when the thread ends. */
typedef struct ex_buf {
  pol_action_t acts[EX_PLAN_CAP];
  ex_op_t ops[EX_OPS_CAP];
} ex_buf_t;
static __thread ex_buf_t *ex_tbuf;
static pthread_key_t ex_buf_key;
static pthread_once_t ex_buf_once = PTHREAD_ONCE_INIT;
static int ex_buf_key_ok;

static void buf_release(void *p) {
  free(p);
  ex_tbuf = NULL;
}

static void buf_key_make(void) {
  ex_buf_key_ok = pthread_key_create(&ex_buf_key, buf_release) == 0;
}

static ex_buf_t *buf_get(void) {
  if (ex_tbuf) return ex_tbuf;
  pthread_once(&ex_buf_once, buf_key_make);
  ex_buf_t *b = malloc(sizeof *b);
  if (!b) {
    VX_LOG_ONCE(VX_LOG_WARN, "out of memory for a plan buffer: launches go unplanned");
    return NULL;
  }
  if (ex_buf_key_ok) pthread_setspecific(ex_buf_key, b); /* else kept for the process */
  return ex_tbuf = b;
}

/* Native memory takes its room the moment cuMemAlloc returns, while the
 * policy's chunks leave only when evictions have gone down: so the room is
 * made first, and the allocation waits for it.  What goes is what a launch
 * would evict for its own needs (pol_make_room); the host waits for `down`
 * (in order: with it, for the evictions still under way before).  An
 * allocation is rare beside launches (a caching allocator reuses its
 * segments), and the wait is what a real driver does when cuMemAlloc finds
 * the device full of managed pages.  Evictions no prefetch took stay
 * counted as under way (exec_room.c gives their room to later prefetches,
 * which wait for their groups), though most went down long ago: `down`
 * runs in order, so once the newest group's end has passed they all have. */
int exec_native_claim(int dev, uint64_t bytes) {
  if (!ex_planning) return 0;
  int capturing = vx_capture_active(); /* no driver call of vx's may touch a capture */
  ex_dev_t *d = dev_of(dev);
  ex_buf_t *b = capturing ? NULL : buf_get();
  pol_plan_t plan = {.actions = b ? b->acts : NULL, .cap = EX_PLAN_CAP};
  uint64_t missed = 0, lim = budget_limit(dev), native = budget_used(dev); /* bytes included */
  int nops = 0, rc = 0, wait = 0;
  uint32_t newest = 0;
  order_take(d); /* the evictions wait for launches all marked */
  vx_mutex_lock(&d->lock, EX_RANK(d));
  /* The policy is made here if this is the device's first allocation: the
   * native bytes take the device from the driver's allocation on, and the
   * hold must count them before exec_alloc tells the policy of them, or
   * another thread's plan made in between fills their room. */
  make_policy_locked(d, dev);
  uint64_t used = d->pol ? (uint64_t)pol_used(d->pol) << VX_CHUNK_SHIFT : 0;
  uint64_t going = (d->room.planned - d->room.taken) << VX_CHUNK_SHIFT;
  if (d->pol && native + used + going > lim && !b) {
    rc = -1; /* a capture in progress, or no plan buffer: room cannot be made */
  } else if (d->pol) {
    pol_native_hold(d->pol, bytes, 0);
    rc = 1;
    if (native + used > lim) {
      uint64_t room = pol_room(d->pol);
      if (pol_make_room(d->pol, 0, &plan) < 0) rc = -1; /* what is planned still goes */
      nops = translate_locked(d, &plan, b->ops, &missed);
      waits_locked(d, b->ops, nops, room);
    }
    wait = native + used + going > lim;
    newest = d->room.group;
  }
  vx_mutex_unlock(&d->lock, EX_RANK(d));
  /* Only evictions still going down in the way: none once the newest has ended. */
  if (wait && !nops && ex_group_ended(d, newest)) wait = 0;
  if (wait && ex_run_evictions(d, dev, b->ops, nops)) rc = -1;
  for (int i = 0; i < nops; i++)
    if (b->ops[i].failed) {
      feedback(d, b->ops, nops);
      rc = -1;
      break;
    }
  order_release();
  if (rc < 0 && b) exec_native_unclaim(dev, bytes); /* held, then no room was made */
  return rc;
}

void exec_native_unclaim(int dev, uint64_t bytes) {
  if (!ex_planning) return;
  ex_dev_t *d = dev_of(dev);
  vx_mutex_lock(&d->lock, EX_RANK(d));
  if (d->pol) pol_native_hold(d->pol, bytes, 1);
  vx_mutex_unlock(&d->lock, EX_RANK(d));
}

CUresult exec_launch(int dev, uint64_t kernel, CUstream stream, const pol_range_t *ranges,
                     uint32_t n, int graph) {
  if (!ex_planning || !n) return CUDA_SUCCESS;
  /* Plans are hints, and some of their calls (advice, spills) would
   * invalidate another thread's capture: none while one is in progress. */
  if (vx_capture_active()) return CUDA_SUCCESS;
  note_launch_size(dev, ranges, n);
  ex_buf_t *b = buf_get();
  if (!b) return CUDA_SUCCESS; /* no plan: the launch faults what it needs */
  ex_dev_t *d = dev_of(dev);
  ex_op_t *ops = b->ops;
  pol_plan_t plan = {.actions = b->acts, .cap = EX_PLAN_CAP};
  pol_launch_t l = {.kernel = kernel,
                    .stream = (uint64_t)(uintptr_t)stream,
                    .now = ex_now(),
                    .ranges = ranges,
                    .nranges = n};
  uint64_t missed = 0, hits = 0;
  uint32_t wait = 0;
  int nops = 0, npin = 0;
  uint32_t me = 0, pin_group = 0;
  ex_pin_t pin[EX_PIN_MAX];
  uint64_t kt[EX_KT_IDS];
  int nkt = 0;
  order_take(d); /* released by exec_launched once the launch is marked */
  ex_ktres_t timed[EX_KT_RING];
  int ntimed = d->time.kn || d->time.ln ? ex_time_harvest(&d->time, timed, EX_KT_RING) : 0;
  vx_mutex_lock(&d->lock, EX_RANK(d));
  note_timed_locked(d, timed, ntimed);
  uint64_t room = d->pol ? pol_room(d->pol) : 0;
  if (d->pol && pol_launch(d->pol, &l, &plan) >= 0) {
    hits = take_hits_locked(d, ranges, n, &wait);
    while (!(me = ++d->lseq)) { /* 0 means none */
    }
    npin = count_refs_locked(d, ranges, n, me, l.stream, &plan, pin, kt,
                             &nkt); /* first: their prefetches are dropped */
    if (npin) pin_group = pin_room_locked(d, &plan, pin, npin, &room);
    nops = translate_locked(d, &plan, ops, &missed);
    waits_locked(d, ops, nops, room);
    /* The ops translate_locked dropped (a pinned allocation's prefetches, the
     * evictions that made their room) are told to the policy at once, under
     * the lock of the plan that made them.  Told after the plan was issued,
     * as the failures are, another thread's plan made in between counted the
     * room of an eviction that never went down as free, prefetched into it,
     * and the device went past its budget (prog_launch_threads: 8-24 MiB over
     * VX_DEVICE_LIMIT); and the late word could undo a later plan's eviction
     * of the same chunk. */
    feedback_locked(d, ops, nops, 1);
  }
  vx_mutex_unlock(&d->lock, EX_RANK(d));
  if (!me) {
    order_release(); /* nothing planned: nothing for later plans to wait for */
  } else {
    ex_pending.seq = me, ex_pending.stream = stream; /* on ex_pending.ordered, d */
  }
  count_use(dev, hits, missed);
  if (npin) pin_to_host(dev, pin, npin, pin_group, ex_side_get(d), stream);
  if (wait) ex_side_wait(d, wait, stream);
  if (nops) ex_run_plan(d, dev, ops, nops, stream);
  for (int i = 0; i < nops; i++)
    if (ops[i].failed && !ops[i].dropped) { /* the dropped ones were told at translation */
      feedback(d, ops, nops);
      break;
    }
  /* timed from here: after what vx made the stream wait for */
  if (me && nkt && !graph) ex_pending.timed = ex_time_launch_begin(&d->time, stream, kt, nkt);
  return CUDA_SUCCESS;
}

void exec_launched(CUresult r) {
  ex_pend_t p = ex_pending;
  if (!p.seq) return;
  ex_pending.seq = 0;
  ex_pending.timed = 0;
  ex_time_launch_end(&p.ordered->time, p.timed, p.stream, r == CUDA_SUCCESS);
  /* The side streams are made here if no plan has issued anything yet: a
   * launch whose plan moved nothing (a demand-paging plan with room, a
   * predictor's first launches) is still one a later eviction must wait
   * for.  (Unmarked, a later thread's eviction of its chunks waited for
   * that thread's own stream instead: prog_launch_threads under demand with
   * 2 threads went 8 MiB past the limit.) */
  ex_side_t *x = p.ordered && r == CUDA_SUCCESS ? ex_side_get(p.ordered) : NULL;
  /* Not marked, evictions wait for s (down_after): nothing ran */
  unsigned slot = p.seq % EX_LRING;
  if (r == CUDA_SUCCESS && x && VX_CALL(cuEventRecord, x->lev[slot], p.stream) == CUDA_SUCCESS) {
    x->lstream[slot] = p.stream;
    __atomic_store_n(&x->lseq[slot], p.seq, __ATOMIC_RELEASE);
  }
  order_release();
}

// ---- fork ----

void exec_order_atfork_prepare(void) {
  for (int i = 0; i < VX_MAX_DEVICES; i++)
    vx_mutex_lock(&ex_dev[i].order, VX_RANK_ORDER + i);
}
void exec_order_atfork_parent(void) {
  for (int i = VX_MAX_DEVICES - 1; i >= 0; i--)
    vx_mutex_unlock(&ex_dev[i].order, VX_RANK_ORDER + i);
}
void exec_order_atfork_child(void) {
  for (int i = 0; i < VX_MAX_DEVICES; i++)
    pthread_mutex_init(&ex_dev[i].order, NULL);
  ex_pending = (ex_pend_t){0};
}

void exec_atfork_prepare(void) {
  for (int i = 0; i < VX_MAX_DEVICES; i++)
    vx_mutex_lock(&ex_dev[i].lock, VX_RANK_EXEC + i);
}
void exec_atfork_parent(void) {
  for (int i = VX_MAX_DEVICES - 1; i >= 0; i--)
    vx_mutex_unlock(&ex_dev[i].lock, VX_RANK_EXEC + i);
}
void exec_atfork_child(void) {
  for (int i = 0; i < VX_MAX_DEVICES; i++) {
    pthread_mutex_init(&ex_dev[i].lock, NULL);
    ex_dev[i].side = NULL;          /* the parent's stream means nothing here (leaked) */
    ex_time_reset(&ex_dev[i].time); /* so are its events */
  }
}
