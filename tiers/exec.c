/* Plan execution: per-device policy state (the policy, alloc id -> address
 * with an "arrived ahead" bit per chunk) and plans turned into prefetches,
 * evictions and advice through the real driver, outside the lock. */
#include "exec.h"

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
#include "spill.h"
#include "trace_rec.h"
#include "vx.h"
#include "locks.h"

#define EX_PLAN_CAP 128
#define EX_BATCH 64
#define EX_RING 256  /* events marking the end of recent AHEAD prefetches */
#define EX_LRING 256 /* events marking the end of recent planned launches */
#define EX_STARTS 64 /* pointer offsets remembered per allocation (extents) */

typedef struct ex_alloc {
  uint64_t id;
  CUdeviceptr base;
  size_t size;
  uint32_t nchunks;
  uint32_t nstarts;
  uint64_t starts[EX_STARTS]; /* sorted: offsets launches have passed pointers to */
  uint64_t seen[EX_STARTS];   /* the launch count when each was last passed */
  uint64_t uses, ups;         /* chunk references by launches; chunks prefetched (pinning) */
  int pinned;                 /* served from host memory over the link from now on */
  UT_hash_handle hh;
  uint32_t *last_use; /* per chunk: the planned launch (ex_dev_t.lseq) that last
                       * reached it; 0 = none (points past ahead[]) */
  uint32_t ahead[];   /* per chunk: the AHEAD batch (seq) that brought it in and
                       * no launch has used since; 0 = none */
} ex_alloc_t;

/* The side streams: `down` for evictions, `up` for prefetches (so that the
 * links' two directions overlap: plan k's evictions run while plan k-1's
 * prefetches land), `now` for the prefetches a launch cannot do without
 * (the launch's stream waits for them; not behind `up`'s queue), and a ring
 * of events, one recorded on `up` after each AHEAD batch: a launch that uses
 * prefetched chunks waits for its batch.  vx moves data only on these: the
 * batch calls refuse the legacy stream, which is where an application's
 * default-stream launches (PyTorch's among them) arrive. */
typedef struct ex_side {
  CUstream up, down, now;
  CUevent ev[EX_RING];
  uint32_t seq[EX_RING]; /* atomic: the batch each event was last recorded for */
  CUevent lev[EX_LRING];
  uint32_t lseq[EX_LRING]; /* atomic: the planned launch each was last recorded after */
} ex_side_t;

typedef struct ex_dev {
  pthread_mutex_t lock;
  uint64_t launches; /* exec_extent calls: the age of remembered starts */
  pol_t *pol;
  int failed;                      /* pol_create failed: no plans on this device */
  uint32_t down_issued, up_waited; /* atomic: eviction runs sent down; the last
                                    * one `up` was ordered after */
  uint32_t seq;                    /* AHEAD batches planned */
  uint32_t lseq;                   /* launches planned */
  ex_alloc_t *by_id;
  ex_side_t *side; /* atomic; created on first use */
} ex_dev_t;

/* One action of a plan, with its addresses. */
typedef struct ex_op {
  CUdeviceptr p;
  size_t n;
  uint64_t id;
  uint32_t first, count;
  uint8_t op, when, tier, failed;
  uint8_t dropped; /* not carried out (a pinned allocation's prefetch, its room) */
  uint8_t nodata;  /* POL_ACT_NODATA: a first touch, no data to move */
  uint32_t seq;    /* AHEAD: its batch */
} ex_op_t;

static ex_dev_t ex_dev[VX_MAX_DEVICES] = {
    [0 ... VX_MAX_DEVICES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};
static int ex_planning; /* VX_POLICY=predict */

static uint64_t ex_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Device d's lock rank: one member of the EXEC family each (core/locks.h). */
#define EX_RANK(d) (VX_RANK_EXEC + (int)((d)-ex_dev))
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
  ex_planning = vx_opt.POLICY == VX_POLICY_PREDICT && move_layouts();
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
  return ex_planning;
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
  pol_config_default(&c, POL_PREDICT, cap);
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
  ex_alloc_t *e = calloc(1, sizeof *e + 2 * (size_t)nch * sizeof e->ahead[0]);
  if (!e) return NULL;
  e->last_use = e->ahead + nch;
  e->id = a->id, e->base = a->base, e->size = a->size, e->nchunks = nch;
  return e;
}

void exec_alloc(const vx_alloc_info_t *a) {
  int native = a->tier == VX_TIER_NATIVE;
  if (!native) obs_mark(a->base, a->size, 1);
  trace_rec_alloc(a->dev, a->id, a->base, a->size, native ? POL_ALLOC_NATIVE : 0);
  /* No concurrent managed access: no policy there, so no prefetch or advice. */
  if (!ex_planning || !a->id || !budget_managed_ok(a->dev)) return;
  ex_alloc_t *e = native ? NULL : entry_new(a);
  if (!native && !e) return; /* untracked by the policy: plain managed memory */
  ex_dev_t *d = dev_of(a->dev);
  vx_mutex_lock(&d->lock, EX_RANK(d));
  int rc = make_policy_locked(d, a->dev);
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

// ---- extents: where a tensor inside a segment ends ----

/* Remembers offset `off` as a start of e (the oldest start gives way when
 * the table is full). */
static void start_note(ex_alloc_t *e, uint64_t off, uint64_t now) {
  uint32_t i = 0;
  while (i < e->nstarts && e->starts[i] < off)
    i++;
  if (i < e->nstarts && e->starts[i] == off) {
    e->seen[i] = now;
    return;
  }
  if (e->nstarts == EX_STARTS) { /* drop the least recently passed */
    uint32_t old = 0;
    for (uint32_t k = 1; k < e->nstarts; k++)
      if (e->seen[k] < e->seen[old]) old = k;
    memmove(&e->starts[old], &e->starts[old + 1], (e->nstarts - old - 1) * sizeof e->starts[0]);
    memmove(&e->seen[old], &e->seen[old + 1], (e->nstarts - old - 1) * sizeof e->seen[0]);
    e->nstarts--;
    if (old < i) i--;
  }
  memmove(&e->starts[i + 1], &e->starts[i], (e->nstarts - i) * sizeof e->starts[0]);
  memmove(&e->seen[i + 1], &e->seen[i], (e->nstarts - i) * sizeof e->seen[0]);
  e->starts[i] = off, e->seen[i] = now;
  e->nstarts++;
}

/* The end of the object at `off`: the next start above it, else the end. */
static uint64_t start_next(const ex_alloc_t *e, uint64_t off) {
  for (uint32_t i = 0; i < e->nstarts; i++)
    if (e->starts[i] > off) return e->starts[i];
  return e->size;
}

void exec_extent(int dev, uint64_t id, uint64_t size, const uint64_t *offs, int n, uint32_t *first,
                 uint32_t *count) {
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
        if (offs[k] < e->size) start_note(e, offs[k], now);
      hi = 0;
      for (int k = 0; k < n; k++) {
        uint64_t end = offs[k] < e->size ? start_next(e, offs[k]) : e->size;
        if (end > hi) hi = end;
      }
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

/* Seq wrap-around compare: a is later than b. */
static int seq_after(uint32_t a, uint32_t b) {
  return (int32_t)(a - b) > 0;
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
 * as many evicted chunks as the dropped required prefetches needed, latest
 * first.  The policy is told both (feedback): the prefetched chunks stayed
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
  for (int k = n - 1; k >= 0 && req_dropped; k--)
    if (ops[k].op == POL_OP_EVICT && ops[k].when == POL_REQUIRED && !ops[k].dropped) {
      ops[k].dropped = 1;
      req_dropped = req_dropped > ops[k].count ? req_dropped - ops[k].count : 0;
    }
}

/* Plan actions -> ops with addresses; returns the ops written. */
static int translate_locked(ex_dev_t *d, const pol_plan_t *pl, ex_op_t *ops, uint64_t *missed) {
  int n = 0;
  uint32_t seq = 0;
  for (uint32_t i = 0; i < pl->n; i++) {
    const pol_action_t *a = &pl->actions[i];
    ex_alloc_t *e;
    HASH_FIND(hh, d->by_id, &a->alloc_id, sizeof a->alloc_id, e);
    if (!e || a->op == POL_OP_DROP) continue;
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
    if (a->op == POL_OP_EVICT) { /* the AHEAD batch still bringing a victim up, if any */
      for (uint32_t c = a->index; c < a->index + a->count && c < e->nchunks; c++)
        if (e->ahead[c] && (!seq || seq_after(e->ahead[c], seq))) seq = e->ahead[c];
      mark(e, a->index, a->count, 0);
    }
    o->seq = seq;
  }
  drop_room(ops, n);
  return n;
}

/* Tells the policy which moves did not happen. */
static void feedback(ex_dev_t *d, const ex_op_t *ops, int n) {
  vx_mutex_lock(&d->lock, EX_RANK(d));
  for (int i = 0; i < n; i++) {
    if (!ops[i].failed || !d->pol) continue;
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
  vx_mutex_unlock(&d->lock, EX_RANK(d));
}

// ---- driver calls (no lock held) ----

/* A run of ops moving to one place, issued as one batch. */
typedef struct ex_batch {
  CUdeviceptr p[EX_BATCH];
  size_t sz[EX_BATCH];
  ex_op_t *op[EX_BATCH];
  size_t n;
  int to_dev;
} ex_batch_t;

static void batch_flush(ex_batch_t *b, int dev, CUstream s) {
  if (!b->n) return;
  CUmemLocation loc = {.type = b->to_dev ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST,
                       .id = b->to_dev ? dev : 0};
  /* A chunk in the swap file may be prefetched too: that populates
   * discarded memory with indeterminate bytes, but the spill record stays
   * authoritative, and every operation that reaches the chunk restores it
   * from the swap first (launch, copy, set, the application's prefetch).
   * Restoring here instead would take the launch path's pins away. */
  uint8_t failed[EX_BATCH];
  size_t lost = move_prefetch(b->p, b->sz, b->n, loc, s, failed);
  uint64_t bytes = 0;
  for (size_t i = 0; i < b->n; i++) {
    b->op[i]->failed = failed[i];
    if (!failed[i]) bytes += b->sz[i];
  }
  if (bytes) ctr_add(dev, b->to_dev ? VX_CTR_bytes_up : VX_CTR_bytes_down, bytes);
  if (lost) ctr_add(dev, VX_CTR_prefetch_failures, lost);
  b->n = 0;
}

static void batch_add(ex_batch_t *b, ex_op_t *o, int to_dev, int dev, CUstream s) {
  if (b->n && (b->to_dev != to_dev || b->n == EX_BATCH)) batch_flush(b, dev, s);
  b->to_dev = to_dev;
  b->p[b->n] = o->p, b->sz[b->n] = o->n, b->op[b->n++] = o;
}

static void advise_read_mostly(ex_op_t *o, int dev) {
  CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
  o->failed = move_advise(o->p, o->n, CU_MEM_ADVISE_SET_READ_MOSTLY, loc) != CUDA_SUCCESS;
}

/* The NVMe tier: spill.c writes the chunks out (synchronously, its own lock). */
static void spill(ex_op_t *o, int dev) {
  CUdeviceptr base = o->p - ((CUdeviceptr)o->first << VX_CHUNK_SHIFT);
  if (spill_chunks(base, o->first, o->count) == 0)
    ctr_add(dev, VX_CTR_bytes_down, o->n);
  else
    o->failed = 1;
}

/* ops[0..n) in plan order on stream s: all of them (sel < 0), only the
 * evictions (sel = 1) or all but the evictions (sel = 0). */
static void issue_sel(ex_op_t *ops, int n, int dev, CUstream s, int sel) {
  ex_batch_t b;
  b.n = 0;
  for (int i = 0; i < n; i++) {
    ex_op_t *o = &ops[i];
    if (sel >= 0 && (o->op == POL_OP_EVICT) != sel) continue;
    if (o->dropped) { /* told to the policy as not done (feedback) */
      o->failed = 1;
      continue;
    }
    if (o->op == POL_OP_PREFETCH) {
      batch_add(&b, o, 1, dev, s);
    } else if (o->op == POL_OP_EVICT && o->tier == POL_TIER_NVME) {
      batch_flush(&b, dev, s);
      spill(o, dev);
    } else if (o->op == POL_OP_EVICT) {
      batch_add(&b, o, 0, dev, s);
    } else if (o->op == POL_OP_ADVISE_READ_MOSTLY) {
      advise_read_mostly(o, dev);
    }
  }
  batch_flush(&b, dev, s);
}

static void issue(ex_op_t *ops, int n, int dev, CUstream s) {
  issue_sel(ops, n, dev, s, -1);
}

static void issue_only(ex_op_t *ops, int n, int dev, CUstream s, int evictions) {
  issue_sel(ops, n, dev, s, evictions);
}

static void side_destroy(ex_side_t *x) {
  for (int i = 0; i < EX_RING; i++)
    if (x->ev[i]) VX_CALL(cuEventDestroy_v2, x->ev[i]);
  for (int i = 0; i < EX_LRING; i++)
    if (x->lev[i]) VX_CALL(cuEventDestroy_v2, x->lev[i]);
  if (x->up) VX_CALL(cuStreamDestroy_v2, x->up);
  if (x->down) VX_CALL(cuStreamDestroy_v2, x->down);
  if (x->now) VX_CALL(cuStreamDestroy_v2, x->now);
  free(x);
}

static ex_side_t *side_new(void) {
  ex_side_t *x = calloc(1, sizeof *x);
  if (!x) return NULL;
  int ok = VX_CALL(cuStreamCreate, &x->up, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
           VX_CALL(cuStreamCreate, &x->down, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
           VX_CALL(cuStreamCreate, &x->now, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
  for (int i = 0; ok && i < EX_RING; i++)
    ok = VX_CALL(cuEventCreate, &x->ev[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  for (int i = 0; ok && i < EX_LRING; i++)
    ok = VX_CALL(cuEventCreate, &x->lev[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  if (ok) return x;
  side_destroy(x);
  return NULL;
}

static ex_side_t *side_get(ex_dev_t *d) {
  ex_side_t *x = __atomic_load_n(&d->side, __ATOMIC_ACQUIRE), *mine;
  if (x || !(mine = side_new())) return x;
  /* Racing creators each make a set; the losers destroy theirs (cheaper
   * than a lock held around driver calls). */
  if (__atomic_compare_exchange_n(&d->side, &x, mine, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return mine;
  side_destroy(mine);
  return x;
}

/* Streams to[0..n) wait for everything enqueued on `after` so far. */
static int order_after(CUstream after, const CUstream *to, int n) {
  CUevent ev;
  if (VX_CALL(cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return -1;
  CUresult r = VX_CALL(cuEventRecord, ev, after);
  for (int i = 0; i < n && r == CUDA_SUCCESS; i++)
    r = VX_CALL(cuStreamWaitEvent, to[i], ev, 0);
  VX_CALL(cuEventDestroy_v2, ev); /* released once the waits are satisfied */
  return r == CUDA_SUCCESS ? 0 : -1;
}

/* Marks the end of AHEAD batch `seq` on the side stream. */
static void side_mark(ex_side_t *x, uint32_t seq) {
  unsigned slot = seq % EX_RING;
  if (VX_CALL(cuEventRecord, x->ev[slot], x->up) == CUDA_SUCCESS)
    __atomic_store_n(&x->seq[slot], seq, __ATOMIC_RELEASE);
}

static void mark_failed(ex_op_t *ops, int n) {
  for (int i = 0; i < n; i++)
    if (ops[i].op == POL_OP_PREFETCH || ops[i].op == POL_OP_EVICT) ops[i].failed = 1;
}

/* The AHEAD part in plan order: evictions go down; a prefetch waits for
 * the evictions sent down before it (the room the policy counts as free may
 * be theirs: a prefetch that ran first would take the device past the
 * budget, or make the driver evict on its own), but only when some were
 * sent since `up` last waited, so a plan whose room is already free waits
 * for nothing and the link's two directions overlap.  Each prefetch is
 * followed by its event, so that a launch waits only for the prefetch it
 * needs. */
static void issue_ahead(ex_dev_t *d, ex_op_t *ops, int n, int dev, ex_side_t *x) {
  for (int i = 0; i < n; i++) {
    if (ops[i].op == POL_OP_EVICT) {
      issue(ops + i, 1, dev, x->down);
      if (!ops[i].dropped) __atomic_add_fetch(&d->down_issued, 1, __ATOMIC_RELAXED);
      continue;
    }
    uint32_t sent = __atomic_load_n(&d->down_issued, __ATOMIC_RELAXED);
    if (sent != __atomic_load_n(&d->up_waited, __ATOMIC_RELAXED)) {
      if (order_after(x->down, &x->up, 1)) {
        mark_failed(ops + i, n - i);
        return;
      }
      __atomic_store_n(&d->up_waited, sent, __ATOMIC_RELAXED);
    }
    issue(ops + i, 1, dev, x->up);
    if (ops[i].dropped) continue;
    if (ops[i].seq && !ops[i].failed) side_mark(x, ops[i].seq);
  }
}

/* Stream s waits until batch `seq` has landed.  A slot recorded again since
 * holds a later batch of the same stream: waiting for it is still right. */
static void side_wait(ex_dev_t *d, uint32_t seq, CUstream s) {
  ex_side_t *x = __atomic_load_n(&d->side, __ATOMIC_ACQUIRE);
  unsigned slot = seq % EX_RING;
  uint32_t have = x ? __atomic_load_n(&x->seq[slot], __ATOMIC_ACQUIRE) : 0;
  if (have && !seq_after(seq, have)) VX_CALL(cuStreamWaitEvent, s, x->ev[slot], 0);
}

/* The launch's stream s (not capturing: the caller checked) gets two
 * event waits at most: for the required prefetches on `now`, and (in
 * exec_launch) for the AHEAD batch its chunks came with. */
/* What waits for what.  Evictions (on `down`) wait for the last planned
 * launch that reached their allocations (`last`: its end event, recorded
 * right after it by exec_launched): a kernel may still use what leaves,
 * but the victims of a plan are chunks used long ago, so the write-backs
 * start while the kernels before the launch still run.  Prefetches
 * wait only for evictions: the required ones for everything on `down` so
 * far (their room; a chunk an earlier plan sent down lands before it comes
 * back up), each AHEAD one for the evictions written just before it
 * (issue_ahead); not for the kernels before the launch, so the required
 * transfers overlap the previous kernel as the replay's model has them
 * (waiting for s serialised transfer, kernel, transfer: vx play of cnn took
 * 1.6x the replay's time). */
/* `down` waits until planned launch `last` (the latest that reached a
 * victim) has run: its end event, or everything before this launch on s
 * when the event is not there (another thread's launch not yet marked). */
static int down_after(ex_side_t *x, uint32_t last, CUstream s) {
  if (!last) return 0; /* no planned launch reached the victims */
  unsigned slot = last % EX_LRING;
  uint32_t have = __atomic_load_n(&x->lseq[slot], __ATOMIC_ACQUIRE);
  if (have && !seq_after(last, have))
    return VX_CALL(cuStreamWaitEvent, x->down, x->lev[slot], 0) == CUDA_SUCCESS ? 0 : -1;
  return order_after(s, &x->down, 1);
}

static void run_plan(ex_dev_t *d, int dev, ex_op_t *ops, int n, CUstream s, uint32_t last) {
  int req = 0, evicts = 0, req_evicts = 0;
  while (req < n && ops[req].when == POL_REQUIRED)
    req++;
  for (int i = 0; i < n; i++)
    if (ops[i].op == POL_OP_EVICT && !ops[i].dropped) evicts = 1, req_evicts |= i < req;
  ex_side_t *x = side_get(d);
  /* A victim an earlier AHEAD prefetch is still bringing up must arrive
   * before it leaves: an eviction that ran first would be undone by the
   * prefetch, the chunk left on the device while the policy counts it
   * gone (the budget overshot under load).  `up` is in order: waiting for
   * the latest such batch covers the earlier ones. */
  uint32_t up_seq = 0;
  for (int i = 0; i < n; i++)
    if (ops[i].op == POL_OP_EVICT && !ops[i].dropped && ops[i].seq &&
        (!up_seq || seq_after(ops[i].seq, up_seq)))
      up_seq = ops[i].seq;
  if (x && up_seq) side_wait(d, up_seq, x->down);
  if (!x || (evicts && down_after(x, last, s))) {
    mark_failed(ops, n);
    return;
  }
  if (req) {
    issue_only(ops, req, dev, x->down, 1);
    if (req_evicts) /* `up` orders after them too */
      __atomic_add_fetch(&d->down_issued, 1, __ATOMIC_RELAXED);
    if (order_after(x->down, &x->now, 1)) {
      mark_failed(ops, n);
      return;
    }
    issue_only(ops, req, dev, x->now, 0);
    /* If s cannot be ordered after them the launch races its prefetches:
     * still correct (managed memory faults), only slower. */
    order_after(x->now, &s, 1);
  }
  if (req == n) return;
  issue_ahead(d, ops + req, n - req, dev, x);
}

// ---- pinning to host memory what moving costs more than it saves ----

/* Moving a chunk of managed memory in and out costs two transfers (an
 * eviction copies it back even when it is clean: the driver keeps one copy),
 * reading it over the link from host memory one per use.  An allocation
 * whose chunks come up about once per use (fewer than 1.5 references per
 * chunk brought up, after each chunk came up twice on average) is worth
 * more where it is: it is pinned to the host (preferred location host,
 * accessed by the device: the kernels read it over the link, nothing
 * migrates, as the static tier) and its prefetches are dropped from then
 * on.  This is the driver's own thrash resolution (pages that bounce are
 * pinned to host memory and mapped), which vx's prefetches would otherwise
 * keep from happening.  Under demand paging with an inference loop the
 * driver does it; without it predict moved every weight every token. */
#define EX_PIN_MAX 4

typedef struct ex_pin {
  uint64_t id;
  CUdeviceptr base;
  size_t size;
  uint32_t nchunks;
} ex_pin_t;

static int pin_due(const ex_alloc_t *e) {
  return !e->pinned && e->ups >= 2ull * e->nchunks && 2 * e->uses < 3 * e->ups;
}

/* Counts the launch's references and stamps its chunks with its number
 * `seq` (exec_launched marks its end); returns the allocations to pin now.
 * A plan never evicts the launch's own chunks, so stamping before its
 * victims are read (victims_last_use_locked) changes none of them. */
static int count_refs_locked(ex_dev_t *d, const pol_range_t *r, uint32_t n, uint32_t seq,
                             ex_pin_t *pin) {
  int np = 0;
  for (uint32_t k = 0; k < n; k++) {
    ex_alloc_t *e;
    HASH_FIND(hh, d->by_id, &r[k].alloc_id, sizeof r[k].alloc_id, e);
    if (!e) continue;
    e->uses += r[k].count;
    for (uint32_t c = r[k].first; c < r[k].first + r[k].count && c < e->nchunks; c++)
      e->last_use[c] = seq;
    if (np < EX_PIN_MAX && pin_due(e)) {
      e->pinned = 1;
      pin[np++] = (ex_pin_t){.id = e->id, .base = e->base, .size = e->size, .nchunks = e->nchunks};
    }
  }
  return np;
}

static void pin_to_host(ex_dev_t *d, int dev, const ex_pin_t *pin, int np, CUstream s) {
  CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  ex_side_t *x = side_get(d);
  /* What leaves waits for the work before, and for the AHEAD prefetches
   * still bringing the allocation's chunks up (`up` is in order: all of
   * it): a chunk that landed after its move to the host stayed on the
   * device while the policy counted it on the host (the budget overshot
   * by that much under load, predict_budget). */
  if (x && (order_after(s, &x->down, 1) || order_after(x->up, &x->down, 1))) x = NULL;
  for (int i = 0; i < np; i++) {
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
      __atomic_add_fetch(&d->down_issued, 1, __ATOMIC_RELAXED);
    }
    ctr_add(dev, VX_CTR_host_pins, 1);
  }
  vx_mutex_lock(&d->lock, EX_RANK(d));
  for (int i = 0; i < np && d->pol; i++)
    pol_chunk_state(d->pol, pin[i].id, 0, pin[i].nchunks, POL_STATE_HOST);
  vx_mutex_unlock(&d->lock, EX_RANK(d));
}

/* The planned launch this thread is about to enqueue (exec_launched). */
typedef struct ex_pend {
  ex_dev_t *d;
  uint32_t seq;
  CUstream stream;
} ex_pend_t;
static __thread ex_pend_t ex_pending;

/* The latest planned launch that reached a chunk a plan evicts. */
static uint32_t victims_last_use_locked(ex_dev_t *d, const ex_op_t *ops, int n) {
  uint32_t last = 0;
  for (int i = 0; i < n; i++) {
    if (ops[i].op != POL_OP_EVICT || ops[i].dropped) continue;
    ex_alloc_t *e;
    HASH_FIND(hh, d->by_id, &ops[i].id, sizeof ops[i].id, e);
    for (uint32_t c = ops[i].first; e && c < ops[i].first + ops[i].count && c < e->nchunks; c++)
      if (e->last_use[c] && (!last || seq_after(e->last_use[c], last))) last = e->last_use[c];
  }
  return last;
}

static void count_use(int dev, uint64_t hits, uint64_t missed) {
  if (hits) {
    ctr_add(dev, VX_CTR_prefetch_hits, hits);
    ctr_add(dev, VX_CTR_faults_avoided, (hits + 31) / 32);
  }
  if (missed) ctr_add(dev, VX_CTR_prefetch_misses, missed);
}

CUresult exec_launch(int dev, uint64_t kernel, CUstream stream, const pol_range_t *ranges,
                     uint32_t n) {
  if (!ex_planning || !n) return CUDA_SUCCESS;
  /* Plans are hints, and some of their calls (advice, spills) would
   * invalidate another thread's capture: none while one is in progress. */
  if (vx_capture_active()) return CUDA_SUCCESS;
  ex_dev_t *d = dev_of(dev);
  pol_action_t acts[EX_PLAN_CAP];
  ex_op_t ops[EX_PLAN_CAP];
  pol_plan_t plan = {.actions = acts, .cap = EX_PLAN_CAP};
  pol_launch_t l = {.kernel = kernel,
                    .stream = (uint64_t)(uintptr_t)stream,
                    .now = ex_now(),
                    .ranges = ranges,
                    .nranges = n};
  uint64_t missed = 0, hits = 0;
  uint32_t wait = 0;
  int nops = 0, npin = 0;
  uint32_t last = 0, me = 0;
  ex_pin_t pin[EX_PIN_MAX];
  vx_mutex_lock(&d->lock, EX_RANK(d));
  if (d->pol && pol_launch(d->pol, &l, &plan) >= 0) {
    hits = take_hits_locked(d, ranges, n, &wait);
    while (!(me = ++d->lseq)) { /* 0 means none */
    }
    npin = count_refs_locked(d, ranges, n, me, pin); /* first: their prefetches are dropped */
    nops = translate_locked(d, &plan, ops, &missed);
    last = victims_last_use_locked(d, ops, nops);
  }
  vx_mutex_unlock(&d->lock, EX_RANK(d));
  if (me) ex_pending = (ex_pend_t){.d = d, .seq = me, .stream = stream};
  count_use(dev, hits, missed);
  if (npin) pin_to_host(d, dev, pin, npin, stream);
  if (!nops && !wait) return CUDA_SUCCESS;
  if (wait) side_wait(d, wait, stream);
  run_plan(d, dev, ops, nops, stream, last);
  for (int i = 0; i < nops; i++)
    if (ops[i].failed) {
      feedback(d, ops, nops);
      break;
    }
  return CUDA_SUCCESS;
}

void exec_launched(CUresult r) {
  ex_pend_t p = ex_pending;
  if (!p.seq) return;
  ex_pending.seq = 0;
  ex_side_t *x = p.d ? __atomic_load_n(&p.d->side, __ATOMIC_ACQUIRE) : NULL;
  if (r != CUDA_SUCCESS || !x) return; /* evictions then wait for s (down_after) */
  unsigned slot = p.seq % EX_LRING;
  if (VX_CALL(cuEventRecord, x->lev[slot], p.stream) == CUDA_SUCCESS)
    __atomic_store_n(&x->lseq[slot], p.seq, __ATOMIC_RELEASE);
}

// ---- fork ----

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
    ex_dev[i].side = NULL; /* the parent's stream means nothing here (leaked) */
  }
}
