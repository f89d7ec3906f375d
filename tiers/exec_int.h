/* exec_int.h: the plan executor's state shared by exec.c (planning, under
 * the device lock) and exec_issue.c (the plan's driver calls, no lock held). */
#ifndef VX_TIERS_EXEC_INT_H
#define VX_TIERS_EXEC_INT_H

#include <pthread.h>
#include <stdint.h>
#include "vxhash.h"

#include "exec.h"

#define EX_PLAN_CAP POL_PLAN_ACTIONS /* a thread's plan buffer (exec.c) */
/* A plan's REQUIRED part goes down and comes up in slices of this many
 * chunks: each slice of its evictions is a group of its own (exec_room.c)
 * and its prefetches are cut to match, so that a slice comes up as soon as
 * its room is there while the next slice is still going down.  The launch
 * waits for the last slice to come up, which starts once every slice has
 * gone down: a slice is what the two directions do not overlap.  The
 * replay's model frees room chunk by chunk; with slices of 16, vx play of
 * prog_torch's trace waited twice the model's time before each launch that
 * made room (9 chunks down, then 9 up) and took 1.30x the replay's time,
 * 1.14x with one chunk per slice.  The price is an event record and a wait
 * per chunk on vx's streams (2 MiB take 40-80 us on the link). */
#define EX_REQ_SLICE 1
#define EX_OPS_CAP (EX_PLAN_CAP + 256) /* ops: the plan's, and the slices cut from them */
#define EX_BATCH 64
#define EX_RING 256            /* events marking the end of recent AHEAD prefetches */
#define EX_LRING 256           /* events marking the end of recent planned launches */
#define EX_STARTS 64           /* pointer offsets remembered per allocation (extents) */
#define EX_START_RECENT 64     /* exec_extent calls within which any start bounds (exec_extent.c) */
#define EX_DRING 256           /* events marking the end of recent eviction groups on `down` */
#define EX_PEND 256            /* eviction groups whose room no prefetch has taken yet */
#define EX_ROOM_ALL UINT32_MAX /* ex_op_t.room: wait for all of `down` */

enum { EX_PIN_NONE = 0, EX_PIN_THRASH, EX_PIN_ONCE }; /* ex_alloc_t.pinned (exec.c) */

/* Timing what hides a transfer (exec_time.c): launches reaching a thrash
 * pin's candidates are timed on the device, and so are some AHEAD
 * prefetches, for the link's rate. */
#define EX_KT_SAMPLES 4      /* launches timed per allocation */
#define EX_KT_IDS 4          /* allocations one timed launch informs */
#define EX_KT_RING 16        /* timed launches in flight per device */
#define EX_LT_RING 4         /* timed prefetches in flight per device */
#define EX_LT_RATES 8        /* link rate samples kept (their median is the rate) */
#define EX_LT_MIN (2u << 20) /* prefetches smaller than a chunk are not timed */
#define EX_LT_EVERY 64       /* ... and once EX_LT_RATES are in, one in this many */

typedef struct ex_alloc {
  uint64_t id;
  CUdeviceptr base;
  size_t size;
  uint32_t nchunks;
  uint32_t nstarts;
  uint64_t starts[EX_STARTS]; /* sorted: offsets launches have passed pointers to */
  uint64_t seen[EX_STARTS];   /* the extent call (ex_dev_t.launches) each was last passed in */
  uint64_t prev[EX_STARTS];   /* ... and before that (its first pass, at first) */
  uint64_t uses, ups;         /* chunk references by launches; chunks prefetched (pinning) */
  uint8_t pinned;             /* EX_PIN_*: served from host memory over the link */
  uint8_t rented;             /* it had its EX_PIN_ONCE (exec.c) */
  uint8_t in_place;           /* its extents are guesses: PreferredLocation host advised */
  uint64_t pin_uses;          /* EX_PIN_ONCE: `uses` when it was pinned */
  uint64_t kt_min;            /* shortest timed launch that reached it, ns (kt_n > 0) */
  uint32_t kt_n;              /* launches timed for it */
  UT_hash_handle hh;
  uint32_t *last_use;  /* per chunk: the planned launch (ex_dev_t.lseq) that last
                        * reached it; 0 = none (points past ahead[]) */
  uint32_t *evicted;   /* per chunk: the eviction group (ex_room_t) that last sent
                        * it down; 0 = none (past last_use[]) */
  uint32_t *other_use; /* per chunk: the latest planned launch that reached it
                        * on a stream other than last_use's; 0 = none (past evicted[]) */
  uint32_t ahead[];    /* per chunk: the AHEAD batch (seq) that brought it in and
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
  uint32_t lseq[EX_LRING];    /* atomic: the planned launch each was last recorded after */
  CUstream lstream[EX_LRING]; /* ... and its stream (written before lseq) */
  CUevent dev_[EX_DRING];
  uint32_t dseq[EX_DRING]; /* atomic: the eviction group each was last recorded after */
} ex_side_t;

/* Timed launches and prefetches in flight, and the link's rate; under the
 * device's `order` lock (exec.c: held from a plan to its launch's mark). */
typedef struct ex_tpair {
  CUevent a, b;  /* made on first use, kept */
  uint8_t state; /* EX_T_* */
} ex_tpair_t;

typedef struct ex_time {
  struct {
    ex_tpair_t ev;
    uint64_t id[EX_KT_IDS];
    uint8_t nid;
  } k[EX_KT_RING];
  uint32_t khead, kn; /* k[]: a FIFO of started or recorded slots */
  struct {
    ex_tpair_t ev;
    uint64_t bytes;
  } l[EX_LT_RING];
  uint32_t lhead, ln;
  uint32_t rate[EX_LT_RATES]; /* bytes per microsecond */
  uint32_t nrate, rate_at, skip;
  uint32_t bpus; /* the median of rate[], 0 = not measured */
} ex_time_t;

enum { EX_T_FREE = 0, EX_T_STARTED, EX_T_RECORDED };

/* A timed launch's result (ex_time_harvest): its allocations and ns. */
typedef struct ex_ktres {
  uint64_t id[EX_KT_IDS];
  uint8_t nid;
  uint64_t ns;
} ex_ktres_t;

/* Room on the device, as the replay's model has it (a freed slot is usable
 * once its old chunk's write-back ends): a prefetch takes room that is free
 * now first, then the room of the oldest evictions still under way, and
 * waits for the eviction group whose room it takes last, not for all of
 * `down`.  Evictions are numbered in groups (each AHEAD eviction one group,
 * a plan's REQUIRED evictions one per EX_REQ_SLICE chunks), each group's end marked by an event on
 * `down`.  Counted in chunks, under the device lock. */
typedef struct ex_room {
  uint64_t planned; /* chunks evictions were planned to free */
  uint64_t taken;   /* of those, chunks prefetches were given */
  uint32_t group;   /* eviction groups numbered */
  uint32_t head, n; /* pend[]: a ring of groups with room not all taken */
  struct {
    uint64_t hi; /* `planned` at the group's end */
    uint32_t group;
  } pend[EX_PEND];
} ex_room_t;

typedef struct ex_dev {
  pthread_mutex_t order; /* from a plan to its launch's end mark, one thread at a time (exec.c) */
  pthread_mutex_t lock;
  uint64_t launches; /* exec_extent calls: the age of remembered starts */
  pol_t *pol;
  int failed;    /* pol_create failed: no plans on this device */
  int paging;    /* demand paging inside the budget: launches fault their chunks in */
  uint32_t seq;  /* AHEAD batches planned */
  uint32_t lseq; /* launches planned */
  ex_room_t room;
  ex_time_t time; /* under `order` */
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
  uint32_t group;  /* EVICT: its eviction group (ex_room_t); 0 = none */
  uint32_t last;   /* EVICT: the latest planned launch that reached its chunks; 0 = none */
  uint32_t other;  /* EVICT: the latest on another stream than `last`'s; 0 = none */
  uint32_t room;   /* PREFETCH: the eviction group whose end it waits for,
                    * 0 = none (the room is free), EX_ROOM_ALL = all of `down` */
} ex_op_t;

/* Seq wrap-around compare: a is later than b. */
static inline int seq_after(uint32_t a, uint32_t b) {
  return (int32_t)(a - b) > 0;
}

/* The later of two ex_op_t.room waits (0: none; EX_ROOM_ALL: all). */
static inline uint32_t room_later(uint32_t a, uint32_t b) {
  if (a == EX_ROOM_ALL || b == EX_ROOM_ALL) return EX_ROOM_ALL;
  if (!a || !b) return a ? a : b;
  return seq_after(a, b) ? a : b;
}

// ---- exec_issue.c ----

/* The device's side streams and events, created on first use; NULL when
 * the driver cannot make them.  Thread-safe (racing creators: one wins). */
ex_side_t *ex_side_get(ex_dev_t *d);
/* Streams to[0..n) wait for everything enqueued on `after` so far; 0 or -1. */
int ex_order_after(CUstream after, const CUstream *to, int n);
/* Stream s waits until AHEAD batch `seq` has landed. */
void ex_side_wait(ex_dev_t *d, uint32_t seq, CUstream s);
/* Carries out plan ops[0..n) for a launch on stream s (not capturing).
 * No lock held; failed ops are marked in ops[].failed. */
void ex_run_plan(ex_dev_t *d, int dev, ex_op_t *ops, int n, CUstream s);
/* Carries out REQUIRED evictions ops[0..n) (pol_make_room's, no launch
 * after them) on `down`, each after the launch that last reached it, and
 * waits on the host until `down` has run them; 0 or -1. */
int ex_run_evictions(ex_dev_t *d, int dev, ex_op_t *ops, int n);
/* 1 when eviction group `group` (and so every group before it: `down` runs
 * in order) has gone down; 0 when not, not marked yet, or not known. */
int ex_group_ended(ex_dev_t *d, uint32_t group);
/* Marks the end of eviction group `group`, just enqueued on `down`. */
void ex_group_mark(ex_side_t *x, uint32_t group);

// ---- exec_time.c (under the device's `order` lock) ----

/* Starts timing a launch about to be enqueued on s (after vx's waits on
 * it), for allocations ids[0..n): returns its slot + 1, 0 if not timed. */
int ex_time_launch_begin(ex_time_t *t, CUstream s, const uint64_t *ids, int n);
/* Ends it after the real launch (ok: it was enqueued on s), or drops it. */
void ex_time_launch_end(ex_time_t *t, int slot, CUstream s, int ok);
/* The timed launches that have run, oldest first, into out[0..max);
 * returns how many.  Also takes the link's finished samples into bpus. */
int ex_time_harvest(ex_time_t *t, ex_ktres_t *out, int max);
/* Starts timing an AHEAD prefetch of `bytes` on s: slot + 1, or 0. */
int ex_time_link_begin(ex_time_t *t, CUstream s, uint64_t bytes);
/* Ends it (ok: the prefetch was issued). */
void ex_time_link_end(ex_time_t *t, int slot, CUstream s, int ok);
/* Forgets everything (a forked child: the events are the parent's). */
void ex_time_reset(ex_time_t *t);

// ---- exec_extent.c (under the device lock) ----

/* Notes that a launch passed a pointer to offset `off` of e, at extent call
 * `now` (the oldest start gives way when the table is full). */
void ex_start_note(ex_alloc_t *e, uint64_t off, uint64_t now);
/* Where the object at offset `off` (a noted start) ends, as of call `now`:
 * the next start above it that still bounds it, else the allocation's end. */
uint64_t ex_start_end(const ex_alloc_t *e, uint64_t off, uint64_t now);

// ---- exec_room.c (under the device lock) ----

/* Numbers the plan's eviction groups and gives each prefetch the group it
 * waits for; `free_before` is the policy's free room before the plan. */
void ex_room_plan_locked(ex_room_t *r, ex_op_t *ops, int n, uint64_t free_before);
/* `chunks` more leave the device in a new group (a pin's move, issued on
 * `down` before any eviction planned after this call); returns it. */
uint32_t ex_room_add_locked(ex_room_t *r, uint64_t chunks);

#endif
