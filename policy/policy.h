/* policy.h: vx's placement and movement policy (pure C, no CUDA, no system calls, no locks).
 * Events in (allocations, frees, launches with the chunk ranges they reach), plans out. */
#ifndef VX_POLICY_H
#define VX_POLICY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A pol_t is one device's policy.  It is not thread-safe: the caller
 * serialises every call on one pol_t (libvx holds the device's policy lock,
 * ex_dev[i].lock in tiers/exec.c; the replay tool is single-threaded).  Time
 * is whatever monotonic nanoseconds the caller passes as `now`; the policy
 * never reads a clock.
 *
 * Chunks are named (alloc_id, index): index i covers bytes
 * [i*chunk_size, (i+1)*chunk_size) of the allocation.  Addresses matter only to
 * the DEEPUM reference (which keys its tables by address, as DeepUM does). */
typedef struct pol pol_t;

typedef enum pol_kind {
  POL_PREDICT = 0, /* vx's predictor: learned launch sequence, Belady-like planner */
  POL_DEMAND,      /* plain managed memory: empty plans, the driver faults */
  POL_STATIC,      /* placement only: fits -> device, else big -> host (GreenBoost) */
  POL_DEEPUM,      /* replay-only reference: DeepUM's correlation prefetcher */
  POL_ORACLE,      /* replay-only reference: true future via pol_set_future() */
  POL_KIND_COUNT
} pol_kind_t;

typedef struct pol_config {
  pol_kind_t kind;
  uint64_t capacity;          /* device bytes the policy may fill with managed chunks (> 0) */
  uint64_t chunk_size;        /* power of two, 64 KiB..1 GiB; 0 = 2 MiB */
  uint32_t prefetch_distance; /* most launches looked ahead; 0 = as far as capacity allows
                               * (bounded by one learned period and 4096 launches; the
                               * chunks held brought up ahead, unused, by a limit learned
                               * from lost bets: planner.c, planner_ahead_limit) */
  uint32_t evict_watermark;   /* percent 1..100; above it, chunks with no predicted use are
                               * pushed down ahead of need; 0 = 100 */
  uint64_t static_min;        /* POL_STATIC: allocations >= this go to host if they do not
                               * fit; 0 = 64 MiB */
  uint64_t host_capacity;     /* bytes of evicted chunks the host tier may hold before
                               * evictions go to the NVMe tier; 0 = unlimited (no NVMe) */
  uint32_t history;           /* launches of history kept (predictor); 0 = 16384 */
  uint32_t deepum_ahead;      /* POL_DEEPUM: kernels predicted ahead; 0 = 4 */
  uint32_t lead;              /* launches ahead whose chunks are prefetched even when
                               * Belady's MIN would wait (trading bytes for overlap);
                               * default 1 */
  uint32_t read_mostly;       /* 1 = advise ReadMostly for data read, never written, since
                               * it was made (access modes must be known); default 0: an
                               * eviction of a ReadMostly chunk keeps its device copy until
                               * pressure drops it, room the planner would count free */
  uint32_t demand_budget;     /* POL_DEMAND: 1 = each launch's missing chunks fault in,
                               * as on a device of `capacity` bytes: the policy evicts, as
                               * REQUIRED, the least recently used chunks for them and
                               * prefetches nothing (libvx's demand under VX_DEVICE_LIMIT);
                               * 0 (default) = no plans, the driver pages alone */
} pol_config_t;

/* Fills *c with the defaults above for `kind` and `capacity`. */
void pol_config_default(pol_config_t *c, pol_kind_t kind, uint64_t capacity);

/* Parses "predict", "demand", "static", "deepum", "oracle".  Returns the kind or -EINVAL. */
int pol_kind_parse(const char *name);
/* Name of a kind ("predict"...), or "?" for an out-of-range value. */
const char *pol_kind_name(pol_kind_t kind);

/* Creates a policy.  Returns 0 and sets *out, or -EINVAL for a bad config
 * (capacity 0, chunk size not a power of two in range, watermark > 100, bad kind)
 * or -ENOMEM.  Everything the hot path needs is allocated here. */
int pol_create(const pol_config_t *c, pol_t **out);
/* Frees the policy and everything it holds.  NULL is a no-op. */
void pol_destroy(pol_t *p);

/* ---- events in ---- */

/* Where an allocation should live, returned by pol_alloc. */
typedef enum pol_tier {
  POL_TIER_DEVICE = 0, /* native device memory, never moved */
  POL_TIER_MANAGED,    /* managed memory, chunks moved by plans (and faults) */
  POL_TIER_HOST,       /* pinned to host memory, accessed over the link */
  POL_TIER_NVME,       /* (eviction target only) the NVMe swap tier */
} pol_tier_t;

enum {
  POL_ALLOC_NATIVE = 1, /* flag: the caller will keep it native (counts against capacity) */
};

/* An allocation of `size` bytes (> 0) at device address `addr` (0 if unknown)
 * appeared.  alloc_id must be unique among live allocations.  Its chunks start
 * out unpopulated (no data anywhere): their first use needs no transfer.
 * Returns the tier it should live in (pol_tier_t, >= 0), -EEXIST for a live
 * duplicate id, -EINVAL for size 0, -ENOMEM.  May allocate. */
int pol_alloc(pol_t *p, uint64_t alloc_id, uint64_t addr, uint64_t size, uint32_t flags,
              uint64_t now);

/* A plan: ordered actions, written into a caller-owned bounded array. */
typedef enum pol_op {
  POL_OP_PREFETCH = 1,       /* chunks [index, index+count) -> device */
  POL_OP_EVICT,              /* chunks -> `tier` (host or nvme); dirty ones written back
                              * (POL_ACT_CLEAN: none of them is dirty) */
  POL_OP_DROP,               /* dead chunks: discard, never write back */
  POL_OP_ADVISE_READ_MOSTLY, /* whole allocation: ReadMostly (index/count = 0/all) */
  POL_OP_READ_IN_PLACE,      /* REQUIRED only: chunks in host memory the launch being
                              * planned reads over the link, where they are (below) */
} pol_op_t;

/* POL_OP_READ_IN_PLACE: the launch reaches more chunks than the device
 * holds, and these, in host memory, it only reads (POL_ACCESS_READ ranges)
 * and nothing is predicted to use again before their allocation dies:
 * coming up they would cross the link as often and take room from the
 * launch's other chunks, whose write-backs would pay for it.  At most as
 * many as the launch has past the device.  They stay in host memory (the
 * policy counts them there) and the launch reaches them over the link.
 * An executor carries it out by advising the range PreferredLocation host
 * and AccessedBy the device, so that the kernel neither faults nor migrates
 * them (`vx replay` models that advice as staying: a chunk of it no later
 * plan brings up is read over the link too).  libvx passes no access modes,
 * so its plans hold none.  An executor that ignores the action is correct:
 * the kernel faults them in, past the policy's count. */

typedef enum pol_when {
  POL_REQUIRED = 1, /* the launch being planned needs it before it runs */
  POL_AHEAD,        /* predicted: useful later, may be dropped by the executor */
} pol_when_t;

/* pol_action_t.flags: what the policy knows about the chunks of one action.
 * An executor that ignores them is correct, only slower. */
enum {
  /* POL_OP_EVICT to POL_TIER_HOST: every chunk is clean: a PREFETCH of a plan
   * brought it from the host tier (not a fault, not POL_ACT_NODATA) and no
   * launch has written it since (a range with a mode other than
   * POL_ACCESS_READ).  If the executor kept the host copy when it brought the
   * chunk up, it may discard the device pages without write-back (a DROP from
   * the device, the host copy stays valid); otherwise it evicts as usual. */
  POL_ACT_CLEAN = 1,
  /* POL_OP_PREFETCH (REQUIRED only): the launch only writes these chunks
   * (POL_ACCESS_WRITE ranges) or they hold no data yet (never populated): they
   * need room, not a transfer.  An executor that cannot populate without
   * copying may fetch them as usual or leave them to the first touch.  The
   * policy never prefetches such chunks ahead of their launch. */
  POL_ACT_NODATA = 2,
};

typedef struct pol_action {
  uint64_t alloc_id;
  uint32_t index; /* first chunk */
  uint32_t count; /* chunks (>= 1) */
  uint8_t op;     /* pol_op_t */
  uint8_t when;   /* pol_when_t */
  uint8_t tier;   /* POL_OP_EVICT: POL_TIER_HOST or POL_TIER_NVME; else 0 */
  uint8_t flags;  /* POL_ACT_* bits */
} pol_action_t;

/* The actions libvx gives one plan (tiers/exec.c), and so `vx replay`,
 * which models libvx: a plan cut short loses its last predictions (the
 * required part comes first). */
#define POL_PLAN_ACTIONS 1024

typedef struct pol_plan {
  pol_action_t *actions; /* caller-owned array of `cap` entries */
  uint32_t cap;
  uint32_t n;         /* actions written (set by the policy) */
  uint32_t truncated; /* 1 if the plan stopped because the array was full */
} pol_plan_t;

/* Frees an allocation: its chunks are dead.  If plan is not NULL, one DROP
 * action per run of chunks the policy believes resident is written to it (the
 * executor discards them, no write-back).  Returns the number of actions
 * written, or -ENOENT for an unknown id (plan->n = 0 then). */
int pol_free(pol_t *p, uint64_t alloc_id, uint64_t now, pol_plan_t *plan);

enum { POL_ACCESS_UNKNOWN = 0, POL_ACCESS_READ = 1, POL_ACCESS_WRITE = 2, POL_ACCESS_RW = 3 };

/* Chunks [first, first+count) of an allocation that a launch's pointer
 * arguments reach, with the access mode if known (unknown counts as written). */
typedef struct pol_range {
  uint64_t alloc_id;
  uint32_t first;
  uint32_t count;
  uint32_t mode;
  uint32_t pad;
} pol_range_t;

typedef struct pol_launch {
  uint64_t kernel; /* stable hash of the function (name), not its address */
  uint64_t stream; /* stream handle value or any stable id */
  uint64_t now;
  const pol_range_t *ranges; /* ranges of live allocations; unknown ids are ignored */
  uint32_t nranges;
} pol_launch_t;

/* A launch is about to be enqueued.  Learns from it and writes the plan to
 * execute before it: REQUIRED actions first (evictions to make room, then
 * prefetches of its missing chunks; POL_ACT_NODATA on those it only writes),
 * then AHEAD actions (predicted prefetches in order of predicted use, each
 * preceded by the eviction that makes room, advice, pre-evictions of chunks
 * with no predicted use).  Chunks a predicted launch only writes, and
 * allocations the history says are coming, are never prefetched ahead: the
 * plan keeps room for them instead (evicting early what MIN would evict by
 * then, so that write-backs start before the launch needs the room), and
 * prefetches never fill that room.  No plan action ever evicts a chunk of
 * this launch, and an AHEAD eviction never takes a chunk predicted to be used
 * before the one it makes room for.  The policy assumes every action it wrote
 * will succeed; report failures with pol_chunk_state().  Ranges past an
 * allocation's end are clipped.  Returns the number of actions (plan->n, the
 * array is never overrun: plan->truncated = 1 when it was full; the required
 * part comes first, so only predictions are lost unless cap is tiny), or
 * -EINVAL (NULL args, cap 0).  POL_PREDICT/ORACLE/DEMAND/STATIC allocate nothing
 * here (the history is a ring sized at create); POL_DEEPUM grows its tables.
 * Cost: O(ranges) while the launch sequence runs as predicted and its chunks
 * are resident (a full re-plan every 4 such launches, every 64 after a plan
 * that moved nothing); otherwise one walk of the predicted window (up to 4x
 * capacity in chunks). */
int pol_launch(pol_t *p, const pol_launch_t *l, pol_plan_t *plan);

/* ---- feedback ---- */

enum {
  POL_STATE_DEVICE = 1, /* the chunks are on the device (a fault brought them, say) */
  POL_STATE_HOST,       /* they are not (a prefetch failed, the driver evicted them) */
};

/* Chunks of allocation alloc_id that plan brings up with data (PREFETCH
 * actions without POL_ACT_NODATA) at `when` (POL_REQUIRED or POL_AHEAD). */
uint64_t pol_plan_ups(const pol_plan_t *plan, uint64_t alloc_id, int when);

/* Chunks of allocation alloc_id that plan makes resident: every PREFETCH
 * action, REQUIRED or AHEAD, with data or not. */
uint64_t pol_plan_resident(const pol_plan_t *plan, uint64_t alloc_id);

/* Tells the policy what really happened to chunks [first, first+count).
 * Returns 0, -ENOENT for an unknown allocation, -EINVAL for a bad state or a
 * range outside the allocation. */
int pol_chunk_state(pol_t *p, uint64_t alloc_id, uint32_t first, uint32_t count, int state);

/* The executor keeps managed allocation alloc_id in host memory, its
 * kernels reading it over the link (pinned = 1), or moves it again (0).
 * While pinned its chunks count as on the host and plans neither bring
 * them up nor evict them, nor keep room for its predicted uses; the
 * history still records its uses, so the launch sequence keeps its keys.
 * (Planned anyway, an executor drops those prefetches: each plan of a
 * launch near one re-planned them, a full plan at every launch, and they
 * filled the plan's actions before the predictions that would stand.)
 * Returns 0, -ENOENT for an unknown allocation, -EINVAL if it is not
 * managed memory. */
int pol_pin(pol_t *p, uint64_t alloc_id, int pinned);

/* POL_ORACLE only: the launch k launches after the one being planned (k >= 1).
 * Writes *out (ranges must stay valid until the next call) and returns 1, or
 * returns 0 when there is none. */
typedef int (*pol_future_fn)(void *ctx, uint32_t k, pol_launch_t *out);
/* Installs the oracle's view of the future.  Returns 0, or -EINVAL if p is not
 * POL_ORACLE. */
int pol_set_future(pol_t *p, pol_future_fn fn, void *ctx);

/* ---- observability ---- */
typedef struct pol_stats {
  uint64_t launches;
  uint64_t launches_matched; /* launches whose context was found in the history */
  uint64_t chunks_used;      /* chunk references of launches */
  uint64_t chunks_required;  /* of those, missing at plan time (REQUIRED prefetch) */
  uint64_t chunks_in_place;  /* of those, left in host memory for the launch (READ_IN_PLACE) */
  uint64_t chunks_ahead;     /* AHEAD prefetches planned */
  uint64_t ahead_used;       /* of those, used by a launch while still resident */
  uint64_t ahead_wasted;     /* of those, evicted before any launch used them */
  uint64_t victims_back;     /* chunks evicted ahead for a prefetch, fetched back REQUIRED */
  uint64_t ahead_limit;      /* chunks the planner may hold brought up ahead, unused (now) */
  uint64_t chunks_evicted;   /* EVICT actions' chunks */
  uint64_t chunks_dropped;   /* DROP actions' chunks */
  uint64_t advised;          /* ADVISE_READ_MOSTLY actions */
  uint64_t resident;         /* chunks now believed on the device */
} pol_stats_t;

/* Copies the counters.  Never fails. */
void pol_get_stats(const pol_t *p, pol_stats_t *out);

/* Room for `bytes` of native memory about to be allocated outside any
 * launch: plans REQUIRED evictions (what has no predicted use, least
 * recently used first, then what is predicted furthest ahead, then the
 * last launches' chunks) until the chunks resident fit the capacity the
 * allocation will leave them; the caller carries them out and waits for
 * them before the allocation is made.  Returns the actions planned (0: the
 * room is there), -ENOENT when not enough may go (the plan holds what may),
 * -ENOSPC when the plan is full, -EINVAL. */
int pol_make_room(pol_t *p, uint64_t bytes, pol_plan_t *plan);

/* Native bytes about to be allocated, counted against the capacity from
 * now on (give_back 0) so that no plan fills their room, or no longer
 * (give_back 1: the allocation failed, or pol_alloc is about to count it). */
void pol_native_hold(pol_t *p, uint64_t bytes, int give_back);

/* Chunks the policy counts resident on the device. */
uint64_t pol_used(const pol_t *p);

/* Chunks of room the policy believes free on the device now: its capacity
 * (less native memory) minus the chunks it counts resident, 0 when over.
 * Chunks its plans evicted count as free from the plan on, before their
 * write-backs end: the executor orders prefetches after those. */
uint64_t pol_room(const pol_t *p);

#ifdef __cplusplus
}
#endif
#endif
