/* What the spill_*.c files share: the tier's state, the chunk lists a spill
 * job takes, and the helpers spill.c calls under the spill lock. */
#ifndef VX_TIERS_SPILL_INT_H
#define VX_TIERS_SPILL_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme.h"

#define SPILL_BATCH 64      /* chunks per nvme job (128 MiB of 2 MiB chunks) */
#define SPILL_PIN_CALLS 4   /* calls of a thread whose ranges stay pinned */
#define SPILL_PIN_RANGES 32 /* allocations one call reaches (more are ignored) */
#define SPILL_BOUNCE 8      /* pinned bounce buffers (K >= 2: copies overlap I/O) */

typedef struct spill_rec spill_rec_t;
typedef struct victim {
  spill_rec_t *r;
  uint32_t i; /* chunk index in r */
  uint64_t stamp;
} victim_t;

/* A range a thread made resident and may not have enqueued its work on
 * yet: its chunks are never chosen for a spill.  The ranges of a thread's
 * last SPILL_PIN_CALLS calls stay pinned (a launch path may hand over a
 * launch's allocations one call each); the copy hooks release them all
 * once their operation is enqueued (spill_op_done). */
typedef struct spill_pin {
  uint64_t gen;
  uintptr_t base;
  uint32_t first, end;
} spill_pin_t;
typedef struct spill_pinset {
  int head;
  int n[SPILL_PIN_CALLS];
  spill_pin_t p[SPILL_PIN_CALLS][SPILL_PIN_RANGES];
} spill_pinset_t;

/* The calling thread's pins (made on first use, unpinned and freed at
 * thread exit); NULL without memory.  Not called with spill_g.mu held. */
spill_pinset_t *spill_pinset(void);
/* Moves to the thread's oldest call slot, unpinning what it held, and
 * returns its SPILL_PIN_RANGES entries (the caller sets ps->n[ps->head]). */
spill_pin_t *spill_pin_call_locked(spill_pinset_t *ps);
void spill_unpin_all_locked(spill_pinset_t *ps);

struct spill_state {
  pthread_mutex_t mu;  /* the spill lock (see spill.c for the order) */
  nvme_swap_t *swap;   /* NULL: tier off */
  int armed;           /* 1 while the tier is on (relaxed loads in the hooks) */
  uint64_t any;        /* chunks spilled now, mirrored for relaxed loads */
  uint64_t nspilled;   /* chunks spilled now; under mu */
  uint64_t host_limit; /* VX_HOST_LIMIT in bytes; 0 = none */
  void *bounce[SPILL_BOUNCE];
  int nbounce, bounce_tried;
  nvme_stats_t seen; /* nvme's counters as last copied into vx's */
};
extern struct spill_state spill_g;

/* Spills v[0..n) (n <= SPILL_BATCH): 0, or -errno (the chunks that failed
 * stay in managed memory). */
int spill_batch_locked(victim_t *v, size_t n);
/* Allocates the pinned bounce ring once (a context must be current); on
 * failure nvme keeps its own ring of plain memory. */
void spill_bounce_ensure_locked(void);
/* Copies nvme's counters (deltas) into vx's counters of device dev. */
void spill_stats_sync_locked(int dev);
/* Forgets every record (fini, fork child). */
void spill_drop_all_locked(void);

#endif
