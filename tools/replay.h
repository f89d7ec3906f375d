/* replay.h: the offline replay of a launch trace through a policy under a cost
 * model (compute timeline, copy engines, demand faults), shared by `vx replay` and tests. */
#ifndef VX_TOOLS_REPLAY_H
#define VX_TOOLS_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "trace.h"

/* A trace loaded into memory, allocations numbered densely. */
typedef struct rp_alloc {
  uint64_t id, addr, size;
  uint64_t base; /* global index of its chunk 0 */
  uint32_t nchunks;
  uint32_t flags; /* the ALLOC record's: POL_ALLOC_NATIVE */
} rp_alloc_t;

typedef struct rp_event {
  uint32_t type;  /* POL_TREC_* */
  uint32_t alloc; /* ALLOC/FREE: dense allocation index */
  uint64_t time, dur, kernel, stream;
  uint64_t dur_own; /* LAUNCH: its own recorded duration (dur: a measured trace's shortest of
                     * the same launches, rp_trace_load) */
  uint64_t r0;      /* LAUNCH: first range in ranges[] */
  uint32_t nr;
  uint32_t dir, flags; /* COPY: POL_COPY_HTOD or _DTOH; POL_COPY_SYNC */
  uint64_t off, bytes; /* COPY: of allocation `alloc`, within it */
} rp_event_t;

typedef struct rp_trace {
  uint64_t chunk, capacity; /* from the header (or overridden) */
  rp_event_t *ev;
  size_t nev, nlaunch, ncopy;
  rp_alloc_t *al;
  size_t nal;
  pol_range_t *rg;    /* launch ranges, with the trace's allocation ids */
  uint32_t *rg_alloc; /* dense allocation index of each range */
  size_t nrg;
  uint64_t nchunks;  /* chunks of all allocations ever made */
  size_t *launch_ev; /* event index of each launch */
  int measured;      /* the header's POL_TRACE_MEASURED: each launch's dur is the
                      * shortest the device took for that kernel on ranges of
                      * the same size (rp_trace_load), its compute with what
                      * stalled it left out */
} rp_trace_t;

/* Loads an encoded trace.  chunk != 0 re-expresses ranges in chunks of that
 * size.  Only device 0 is replayed (other devices' records are skipped).
 * Returns 0, or a negative errno with a one-line reason in err: the trace
 * decoder's codes, -EINVAL for a FREE, LAUNCH or COPY of an unknown
 * allocation, a COPY past its allocation's end or a duplicate live id, -ENOMEM. */
int rp_trace_load(rp_trace_t *t, const void *buf, size_t len, uint64_t chunk, char *err,
                  size_t errlen);
void rp_trace_free(rp_trace_t *t);
/* Reads a whole file into a malloc'd buffer: 0, -errno, -EIO or -ENOMEM. */
int rp_read_file(const char *path, void **buf, size_t *len);
/* A size option: bytes with an optional K/M/G/T suffix (binary), at least 1
 * byte and at most 1e18: 0 and *out, or -EINVAL. */
int rp_parse_size(const char *s, uint64_t *out);

/* rp_model_t.live_place */
enum {
  RP_PLACE_MOVABLE,  /* every allocation managed memory, offline (no live stack) */
  RP_PLACE_LIVE,     /* libvx's placement rule at its default options, live stack */
  RP_PLACE_RECORDED, /* the trace's own native flags (a VX_TRACE: what libvx did), live stack */
};

typedef struct rp_model {
  uint64_t capacity;    /* device bytes for the program's data */
  double link_bps;      /* host link bytes/s (both directions, full duplex) */
  double dev_bps;       /* device memory bytes/s, for launches without a duration */
  double fault_ns;      /* cost of one fault batch */
  uint32_t fault_batch; /* chunks per fault batch */
  int live_place;       /* RP_PLACE_*: how allocations are placed, and whether the live
                         * stack (libvx over the driver) is modelled */
  int read_mostly;      /* 1: the planner advises ReadMostly (pol_config_t.read_mostly) */
  uint32_t watermark;   /* the planner's evict watermark in percent; 0 = 100, or
                         * libvx's under live_place */
  uint32_t distance;    /* pol_config_t.prefetch_distance (VX_PREFETCH_DISTANCE); 0 = none */
} rp_model_t;

void rp_model_default(rp_model_t *m, uint64_t capacity);

/* A launch's kernel time in ns: its recorded duration, else the bytes of its
 * distinct chunks at device memory speed (the engine and the bound agree). */
static inline double rp_launch_ns(const rp_event_t *ev, uint64_t touched, const rp_model_t *m) {
  return ev->dur ? (double)ev->dur : (double)touched / m->dev_bps * 1e9;
}

static inline double rp_max3(double a, double b, double c) {
  double x = a > b ? a : b;
  return x > c ? x : c;
}

typedef struct rp_result {
  char policy[16];
  double total_s, stall_s, compute_s;
  uint64_t bytes_up, bytes_down, faults, fault_batches, prefetches, evictions, drops;
  uint64_t writebacks_of_freed; /* must stay 0: dead chunks are never written back */
  /* planner policies: chunks brought up ahead of need that a launch then
   * used, and those evicted before any did (a misprediction's cost) */
  uint64_t ahead_used, ahead_wasted;
  /* chunks a prefetch's eviction let go that came back REQUIRED (a wrong
   * prediction of the victim's next use: ahead_limit in policy/planner.c) */
  uint64_t victims_back;
  /* chunks a plan left in host memory for a launch larger than the device
   * to read over the link (POL_OP_READ_IN_PLACE, policy/planner.c) */
  uint64_t in_place;
  /* bytes written back that no launch read before the chunk was freed or
   * wholly written again: write-back only a discard of dead data saves */
  uint64_t bytes_down_dead;
  /* --place live: allocations libvx's thrash rule pins to host memory for
   * good (tiers/exec.c, pin_due; vx stat's host_pins counts these and the
   * pins for one use) */
  uint64_t host_pins;
  /* seconds the H2D and D2H copy engines were busy (copies, faults,
   * prefetches, write-backs, kernels' reads and writes over the link),
   * and both at once: the link is full duplex, and a run whose engines
   * take turns uses half of it (0 for "bound", which schedules nothing) */
  double h2d_busy_s, d2h_busy_s, both_busy_s;
  double overhead, oracle_gain_share;
  double bound_gain_share; /* (demand - this) / (demand - bound), on total time */
} rp_result_t;

/* Policies: "demand", "deepum", "static", "predict", "clairvoyant" (vx's planner
 * given the true future; "oracle" is the same run under its old name: a
 * reference, not a bound), "infinite", "bound" (a lower bound on every policy's
 * total time in this model).  Returns 1 if name is one. */
int rp_policy_known(const char *name);
/* Replays t through `policy` under m.  Fills everything but overhead and
 * oracle_gain_share (see rp_derive).  Returns 0, -EINVAL (unknown policy), -ENOMEM. */
int rp_run(const rp_trace_t *t, const rp_model_t *m, const char *policy, rp_result_t *out);
/* Fills overhead = total/infinite_total - 1 and the share of the clairvoyant
 * planner's gain over demand, (stall_demand - stall)/(stall_demand - stall_oracle)
 * (1 when it gains nothing and the policy stalls no more than it); `oracle` is
 * that run.  It is not a bound: a policy may exceed 1. */
void rp_derive(rp_result_t *r, const rp_result_t *infinite, const rp_result_t *demand,
               const rp_result_t *oracle);
/* Fills bound_gain_share = (total_demand - total)/(total_demand - total_bound)
 * (1 when the bound gains nothing and the policy is no slower than it). */
void rp_bound_share(rp_result_t *r, const rp_result_t *demand, const rp_result_t *bound);
/* The "bound" policy's result (rp_run calls it): total time no shorter than
 * with infinite memory, nor than MIN's transfers take on the busier
 * direction of the link.  0 or -errno. */
int rp_run_bound(const rp_trace_t *t, const rp_model_t *m, rp_result_t *out);
/* Lower bounds on the bytes any policy moves up (*up: what Belady's MIN
 * replacement must bring up) and writes back (*down: dirty chunks that must
 * leave the device before their next use; clean, dead and never reused data
 * cost nothing), for a device of
 * `capacity` bytes.  Tail chunks (shorter than the trace's chunk) are left out.
 * Returns 0 or -ENOMEM. */
int rp_min_traffic(const rp_trace_t *t, uint64_t capacity, uint64_t *up, uint64_t *down);

/* The cut bound on total time (*out_s): at any launch's start the data
 * written before it and needed after it, beyond the device's capacity, has
 * been written back, and what is needed after it and not on the device is
 * still to come up.  Returns 0 or -ENOMEM. */
int rp_cut_bound(const rp_trace_t *t, const rp_model_t *m, double *out_s);

#endif
