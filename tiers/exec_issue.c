/* exec_issue.c: a plan carried out through the real driver, outside the
 * device lock: batched prefetches and evictions, advice and NVMe spills on
 * vx's side streams, and the events that order them and the launch. */
#include <stdlib.h>

#include "exec_int.h"
#include "move.h"
#include "spill.h"
#include "ctr.h"
#include "driver.h"

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
  for (int i = 0; i < EX_DRING; i++)
    if (x->dev_[i]) VX_CALL(cuEventDestroy_v2, x->dev_[i]);
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
  for (int i = 0; ok && i < EX_DRING; i++)
    ok = VX_CALL(cuEventCreate, &x->dev_[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  if (ok) return x;
  side_destroy(x);
  return NULL;
}

ex_side_t *ex_side_get(ex_dev_t *d) {
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
int ex_order_after(CUstream after, const CUstream *to, int n) {
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

int ex_group_ended(ex_dev_t *d, uint32_t group) {
  ex_side_t *x = __atomic_load_n(&d->side, __ATOMIC_ACQUIRE);
  if (!x || !group) return 0;
  unsigned slot = group % EX_DRING;
  uint32_t have = __atomic_load_n(&x->dseq[slot], __ATOMIC_ACQUIRE);
  return have && !seq_after(group, have) && VX_CALL(cuEventQuery, x->dev_[slot]) == CUDA_SUCCESS;
}

void ex_group_mark(ex_side_t *x, uint32_t group) {
  unsigned slot = group % EX_DRING;
  if (VX_CALL(cuEventRecord, x->dev_[slot], x->down) == CUDA_SUCCESS)
    __atomic_store_n(&x->dseq[slot], group, __ATOMIC_RELEASE);
}

/* Stream t waits for the end of eviction group `room` (exec_room.c): its
 * event, or all of `down` so far when the group is not marked yet (another
 * thread's plan, still being issued) or not known.  0 or -1. */
static int room_wait(ex_side_t *x, uint32_t room, CUstream t) {
  if (!room) return 0;
  if (room != EX_ROOM_ALL) {
    unsigned slot = room % EX_DRING;
    uint32_t have = __atomic_load_n(&x->dseq[slot], __ATOMIC_ACQUIRE);
    if (have && !seq_after(room, have))
      return VX_CALL(cuStreamWaitEvent, t, x->dev_[slot], 0) == CUDA_SUCCESS ? 0 : -1;
  }
  return ex_order_after(x->down, &t, 1);
}

/* The launches `down` was made to wait for in one issue, the latest per
 * stream: a launch's end implies the end of its stream's earlier launches,
 * not of another stream's. */
#define EX_WAITED 4
typedef struct ex_waited {
  CUstream s[EX_WAITED];
  uint32_t seq[EX_WAITED];
  int n;
} ex_waited_t;

/* `down` waits until planned launch `last` (one that reached a victim) has
 * run: its end event (a later launch's, where its slot was recorded again
 * since), unless `down` already waits for a launch as late on its stream;
 * or everything before this launch on s where it was never marked (its
 * launch failed).  Plans are issued in order (exec.c, order_take): every
 * earlier launch that ran is marked by now. */
static int down_after(ex_side_t *x, ex_waited_t *w, uint32_t last, CUstream s) {
  if (!last) return 0; /* no planned launch reached the victims */
  unsigned slot = last % EX_LRING;
  uint32_t have = __atomic_load_n(&x->lseq[slot], __ATOMIC_ACQUIRE);
  if (!have || seq_after(last, have)) return ex_order_after(s, &x->down, 1);
  CUstream on = x->lstream[slot];
  int i = 0;
  while (i < w->n && w->s[i] != on)
    i++;
  if (i < w->n && !seq_after(have, w->seq[i])) return 0;
  if (VX_CALL(cuStreamWaitEvent, x->down, x->lev[slot], 0) != CUDA_SUCCESS) return -1;
  if (i == w->n && w->n < EX_WAITED) w->n++;
  if (i == EX_WAITED) i = EX_WAITED - 1; /* forgets one: at worst a wait again */
  w->s[i] = on, w->seq[i] = have;
  return 0;
}

/* An eviction's wait: for the latest launch that reached its chunks and the
 * latest on another stream (exec.c, count_refs_locked). */
static int down_after_uses(ex_side_t *x, ex_waited_t *w, const ex_op_t *o, CUstream s) {
  return down_after(x, w, o->last, s) || down_after(x, w, o->other, s) ? -1 : 0;
}

/* The AHEAD part in plan order: evictions go down, each group's end marked
 * and each after the launches that reached its chunks (down_after_uses;
 * `w`: what `down` waits for already); a prefetch waits only for the
 * group whose room it takes (none when its room is free now), so that the
 * link's two directions overlap.  Each prefetch is followed by its event,
 * so that a launch waits only for the prefetch it needs. */
static void issue_ahead(ex_op_t *ops, int n, int dev, ex_side_t *x, CUstream s, ex_waited_t *w,
                        ex_time_t *t) {
  for (int i = 0; i < n; i++) {
    if (ops[i].op == POL_OP_EVICT) {
      if (!ops[i].dropped && down_after_uses(x, w, &ops[i], s)) {
        mark_failed(ops + i, n - i);
        return;
      }
      issue(ops + i, 1, dev, x->down);
      if (ops[i].group) ex_group_mark(x, ops[i].group);
      continue;
    }
    if (!ops[i].dropped && room_wait(x, ops[i].room, x->up)) {
      mark_failed(ops + i, n - i);
      return;
    }
    /* a large prefetch is timed for the link's rate (exec_time.c), after
     * the room it waits for */
    int lt = ops[i].dropped || ops[i].nodata ? 0 : ex_time_link_begin(t, x->up, ops[i].n);
    issue(ops + i, 1, dev, x->up);
    ex_time_link_end(t, lt, x->up, !ops[i].failed);
    if (ops[i].dropped) continue;
    if (ops[i].seq && !ops[i].failed) side_mark(x, ops[i].seq);
  }
}

/* A victim an earlier AHEAD prefetch is still bringing up must arrive
 * before it leaves: an eviction that ran first would be undone by the
 * prefetch, the chunk left on the device while the policy counts it gone
 * (the budget overshot under load).  `up` is in order: `down` waiting for
 * the latest such batch of ops[0..n) covers the earlier ones. */
static void down_after_victims_land(ex_dev_t *d, ex_side_t *x, const ex_op_t *ops, int n) {
  uint32_t up_seq = 0;
  for (int i = 0; i < n; i++)
    if (ops[i].op == POL_OP_EVICT && !ops[i].dropped && ops[i].seq &&
        (!up_seq || seq_after(ops[i].seq, up_seq)))
      up_seq = ops[i].seq;
  if (up_seq) ex_side_wait(d, up_seq, x->down);
}

int ex_run_evictions(ex_dev_t *d, int dev, ex_op_t *ops, int n) {
  ex_side_t *x = ex_side_get(d);
  if (!x) {
    mark_failed(ops, n);
    return -1;
  }
  down_after_victims_land(d, x, ops, n);
  ex_waited_t w = {.n = 0};
  for (int i = 0; i < n; i++) {
    ex_op_t *o = &ops[i];
    if (o->op != POL_OP_EVICT || o->dropped) continue;
    /* after the launches that reached it (everything on the legacy stream
     * so far when one's end is not marked) */
    if (down_after_uses(x, &w, o, CU_STREAM_LEGACY)) {
      mark_failed(ops + i, n - i);
      return -1;
    }
    issue(o, 1, dev, x->down);
    if (o->group) ex_group_mark(x, o->group);
  }
  CUevent ev;
  if (VX_CALL(cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return -1;
  CUresult r = VX_CALL(cuEventRecord, ev, x->down);
  if (r == CUDA_SUCCESS) r = VX_CALL(cuEventSynchronize, ev);
  VX_CALL(cuEventDestroy_v2, ev);
  return r == CUDA_SUCCESS ? 0 : -1;
}

/* Stream s waits until batch `seq` has landed.  A slot recorded again since
 * holds a later batch of the same stream: waiting for it is still right. */
void ex_side_wait(ex_dev_t *d, uint32_t seq, CUstream s) {
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
 * wait only for evictions, and only for the group whose room they take or
 * that still takes one of their chunks down (exec_room.c): not for the
 * evictions made ahead of need queued before, and not for the kernels
 * before the launch, so the required transfers overlap the previous kernel
 * as the replay's model has them (waiting for s serialised transfer,
 * kernel, transfer: vx play of cnn took 1.6x the replay's time). */
void ex_run_plan(ex_dev_t *d, int dev, ex_op_t *ops, int n, CUstream s) {
  int req = 0;
  ex_waited_t w = {.n = 0};
  while (req < n && ops[req].when == POL_REQUIRED)
    req++;
  ex_side_t *x = ex_side_get(d);
  if (x) down_after_victims_land(d, x, ops, n);
  for (int i = 0; x && i < req; i++) /* the required victims' launches, first */
    if (ops[i].op == POL_OP_EVICT && !ops[i].dropped && down_after_uses(x, &w, &ops[i], s)) {
      x = NULL;
      break;
    }
  if (!x) {
    mark_failed(ops, n);
    return;
  }
  if (req) {
    /* The evictions, a batch per slice (EX_REQ_SLICE), each slice's end
     * marked; then the prefetches, each run of them after the slice that
     * gives its room, so that the two directions overlap. */
    int i = 0;
    while (i < req) {
      int j = i;
      uint32_t group = 0;
      while (j < req &&
             (ops[j].op != POL_OP_EVICT || !ops[j].group || !group || ops[j].group == group)) {
        if (ops[j].op == POL_OP_EVICT && ops[j].group) group = ops[j].group;
        j++;
      }
      issue_only(ops + i, j - i, dev, x->down, 1);
      if (group) ex_group_mark(x, group); /* set only by an eviction not dropped */
      i = j;
    }
    for (i = 0; i < req;) {
      uint32_t room = 0;
      int j = i;
      while (j < req &&
             (ops[j].op != POL_OP_PREFETCH || ops[j].dropped || j == i || ops[j].room == room)) {
        if (ops[j].op == POL_OP_PREFETCH && !ops[j].dropped) room = room_later(room, ops[j].room);
        j++;
      }
      if (room_wait(x, room, x->now)) { /* the evictions went down, nothing after */
        for (int k = i; k < n; k++)
          if (k >= req || ops[k].op != POL_OP_EVICT) mark_failed(ops + k, 1);
        return;
      }
      issue_only(ops + i, j - i, dev, x->now, 0);
      i = j;
    }
    /* If s cannot be ordered after them the launch races its prefetches:
     * still correct (managed memory faults), only slower.  Paging inside
     * the budget (demand, static), nothing is prefetched and the launch
     * faults its chunks in: s waits for the evictions themselves.  (Not
     * under predict, where a required part of evictions only makes room
     * for what its prefetches bring: waiting for `down` there too cost
     * vx play of moe 5%.) */
    ex_order_after(d->paging ? x->down : x->now, &s, 1);
  }
  if (req == n) return;
  issue_ahead(ops + req, n - req, dev, x, s, &w, &d->time);
}
