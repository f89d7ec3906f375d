/* pol_internal.h: the policy's private state, shared by the files of policy/.
 * Allocation table and chunk states, the launch history, the planner's scratch. */
#ifndef VX_POL_INTERNAL_H
#define VX_POL_INTERNAL_H

#include "vxhash.h"

#include "policy.h"

#define POL_MAX_RANGES 256 /* ranges of one launch kept in history / futures */
#define POL_MAX_STREAMS 16 /* streams tracked at once by the predictor */
#define POL_MAX_LOOKAHEAD 4096
#define POL_REPLAN_EVERY 4   /* launches on a predicted track between full plans */
#define POL_REPLAN_QUIET 64  /* the same after a full plan that moved nothing */
#define POL_WAIT_NEAR 3      /* a prefetch waiting for its victim this near ends the walk */
#define POL_WINDOW_FACTOR 4  /* the window ranks up to this many capacities of chunks */
#define POL_AHEAD_BACKOFF 16 /* a lost bet takes this fraction of the ahead limit */
#define POL_AHEAD_MIN 8      /* chunks the ahead limit never goes under */
#define POL_ROOM_FAR 2       /* room-only victims: next use >= window / this past the want */
#define POL_DEATH_SLOTS 1024 /* names whose last death is remembered (a table, not a list) */

enum { LOC_FRESH = 0, LOC_DEV, LOC_HOST, LOC_NVME };

struct pol_arec;

/* One chunk.  Resident chunks sit on the policy's LRU list. */
struct pol_chunk {
  struct pol_arec *a;
  struct pol_chunk *prev, *next;
  uint64_t last_use; /* launch sequence number of the last use (0 = never) */
  uint32_t idx;
  uint32_t stamp;    /* plan epoch in which next_use was set */
  uint32_t next_use; /* launches until the predicted next use (valid when stamp == epoch) */
  uint32_t next2;    /* the use after that within the window, 0 = none */
  uint32_t in_place; /* plan epoch in which the launch reads it in place (READ_IN_PLACE) */
  uint8_t loc;       /* LOC_* as the policy believes */
  uint8_t dirty;     /* resident and not known to match a copy elsewhere (see POL_ACT_CLEAN) */
  uint8_t ahead;     /* brought up ahead of need and not used since */
  uint8_t victim;    /* evicted ahead for a prefetch, not back since */
};

/* One live allocation. */
struct pol_arec {
  uint64_t id, addr, size;
  uint64_t name; /* drift-proof identity: (size, rank among live same-size allocs) */
  uint32_t nchunks;
  uint32_t reads;      /* read-only launches since its first (initialising) use */
  uint8_t tier;        /* pol_tier_t */
  uint8_t used;        /* has been touched by a launch */
  uint8_t written;     /* written (or unknown mode) after the initialising launch */
  uint8_t advised;     /* ReadMostly advice given */
  uint8_t pinned;      /* kept in host memory by the executor (pol_pin): nothing planned */
  uint64_t born, last; /* predictor: launches of its first and last use (0 = none) */
  uint64_t use_seq;    /* planner: the last launch that used it (0 = none) */
  struct pol_chunk *chunks;
  UT_hash_handle hh; /* by id */
  UT_hash_handle hn; /* by name */
  UT_hash_handle ha; /* by addr (DEEPUM) */
};

/* A future launch resolved against the live allocations (a == NULL: the
 * allocation does not exist yet; key is its name or id). */
struct fut_rng {
  struct pol_arec *a;
  uint64_t key;
  uint32_t first, count, mode;
};
struct fut_launch {
  uint32_t n;
  struct fut_rng *r;
};

/* A chunk wanted on the device for predicted position j. */
struct want {
  struct pol_chunk *c; /* NULL: room for `room` chunks of an allocation not made yet */
  uint32_t j;
  uint32_t nodata; /* its first predicted use only writes it: it needs room, no transfer */
  uint32_t room;
};

#define POL_SEEN_SLOTS 1024 /* future allocations told apart by one walk */

/* How long after its last use an allocation of this name was freed: gap
 * launches (0: before the next launch).  One slot per name hash. */
struct pol_death {
  uint64_t name, gap;
};

struct pred_hist;
struct dum;

struct pol {
  pol_config_t cfg;
  uint64_t cap_chunks;
  uint64_t mark_chunks; /* watermark in chunks */
  uint64_t used;        /* chunks believed resident */
  uint64_t inv;         /* of those, brought up ahead and not used yet (pol_chunk.ahead) */
  uint64_t ahead_lim;   /* most such chunks, above the capacity at first (planner_ahead_limit) */
  uint64_t host_used;   /* chunks on the host tier */
  uint64_t native_bytes;
  uint64_t native_peak; /* the most native_bytes has been: the room native memory takes */
  uint64_t seq;         /* launches seen */
  uint64_t last_full;   /* launch of the last full plan */
  uint64_t changes;     /* allocations and frees seen (a new one forces a full plan) */
  uint64_t planned_changes;
  int last_full_moved; /* the last full plan had actions */
  int noreserve;       /* the window ranks up to this many capacities of chunks */
  uint32_t epoch;      /* planner epoch */
  pol_stats_t st;
  struct pol_arec *by_id, *by_name, *by_addr;
  struct pol_chunk lru; /* sentinel: lru.next = least recently used */

  /* planner scratch, sized at create */
  struct pol_chunk **win;
  uint32_t win_n, win_cap;
  struct want *want;
  uint32_t want_n, want_cap;
  struct fut_rng *fut;           /* POL_MAX_RANGES entries */
  struct pol_chunk *cursor;      /* victim cursor on the LRU list */
  uint32_t wtail;                /* victim cursor on win (from the tail) */
  uint32_t walked;               /* launches the last walk predicted */
  uint64_t held;                 /* chunks of room the last walk made past a waiting prefetch */
  uint64_t seen[POL_SEEN_SLOTS]; /* names of future allocations met by this walk */
  uint32_t seen_stamp[POL_SEEN_SLOTS];
  struct pol_death death[POL_DEATH_SLOTS];

  struct pred_hist *hist;
  struct dum *dum;
  pol_future_fn fut_fn;
  void *fut_ctx;
};

/* ---- alloc.c: allocation table, names, residency and the LRU list ---- */
struct pol_arec *pol_find(pol_t *p, uint64_t id);
struct pol_arec *pol_find_name(pol_t *p, uint64_t name);
struct pol_arec *pol_find_addr(pol_t *p, uint64_t addr);
int pol_arec_add(pol_t *p, uint64_t id, uint64_t addr, uint64_t size, struct pol_arec **out);
void pol_arec_remove(pol_t *p, struct pol_arec *a);
void pol_arec_clear(pol_t *p);
/* Gives live allocation a the name `name` (no live allocation may hold it). */
void pol_arec_rename(pol_t *p, struct pol_arec *a, uint64_t name);
void lru_touch(pol_t *p, struct pol_chunk *c);
void chunk_set_resident(pol_t *p, struct pol_chunk *c);
void chunk_set_away(pol_t *p, struct pol_chunk *c, int loc);
uint64_t pol_hash2(uint64_t a, uint64_t b);

/* ---- plan.c: writing actions ---- */
int plan_emit(pol_plan_t *plan, int op, int when, int tier, const struct pol_chunk *c);
/* The same with POL_ACT_* flags (runs merge only with equal flags). */
int plan_emit_f(pol_plan_t *plan, int op, int when, int tier, int flags, const struct pol_chunk *c);
int plan_emit_alloc(pol_plan_t *plan, int op, int when, const struct pol_arec *a);

/* ---- planner.c ---- */
/* Plans launch `cur` (resolved ranges) and, through next(), the future. */
typedef int (*fut_next_fn)(pol_t *p, void *it, struct fut_launch *out);
int planner_run(pol_t *p, const pol_launch_t *l, pol_plan_t *plan, fut_next_fn next, void *it);
int planner_evict_for(pol_t *p, uint32_t j, int when, pol_plan_t *plan);
int planner_make_room(pol_t *p, uint64_t max_used, pol_plan_t *plan);
/* Remembers how long after its last use allocation a is being freed. */
void planner_note_free(pol_t *p, const struct pol_arec *a);
/* The fast path: if every chunk of the launch is resident, touches them and
 * returns the (advice-only) action count; -EAGAIN when a full plan is needed. */
int planner_light(pol_t *p, const pol_launch_t *l, pol_plan_t *plan);
/* The most chunks brought up ahead and unused a plan may leave ("how far ahead"). */
uint64_t planner_ahead_limit(const pol_t *p);
/* Demand paging inside the capacity (pol_config_t.demand_budget): room for
 * the launch's missing chunks, least recently used first; the chunks count
 * as resident from the plan on (their accesses fault them in). */
int planner_fault(pol_t *p, const pol_launch_t *l, pol_plan_t *plan);

/* ---- history.c / predict.c: the learned launch sequence ---- */
int hist_create(pol_t *p);
void hist_destroy(pol_t *p);
/* Records launch l (sequence number p->seq) and matches its context. */
void hist_record(pol_t *p, const pol_launch_t *l);
int hist_on_track(const pol_t *p);
/* The allocation that takes over dying allocation `dead`'s role (and name):
 * one made bigger (up to 2x) and first used by the launch that used `dead` last
 * (a cache grown by copying, torch.cat style), or NULL. */
struct pol_arec *hist_successor(pol_t *p, const struct pol_arec *dead);
/* Iterator over predicted launches, merged across streams. */
struct pred_it;
struct pred_it *pred_begin(pol_t *p);
int pred_next(pol_t *p, void *it, struct fut_launch *out);

/* ---- oracle (policy.c) ---- */
int oracle_next(pol_t *p, void *it, struct fut_launch *out);

/* ---- deepum.c ---- */
int dum_create(pol_t *p);
void dum_destroy(pol_t *p);
int dum_launch(pol_t *p, const pol_launch_t *l, pol_plan_t *plan);
void dum_forget(pol_t *p, struct pol_arec *a);
/* Chunk idx of a came to the device by a demand fault during the current launch. */
void dum_fault(pol_t *p, struct pol_arec *a, uint32_t idx);

#endif
