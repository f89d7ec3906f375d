/* What the spill_*.c files share: the tier's one state struct (spill_g),
 * the per-chunk records, the chunk lists a spill job takes, and the
 * functions each file offers the others under the spill lock.
 *
 *   spill.c        the API the hooks call (make resident, spill, forget,
 *                  unseen launches)
 *   spill_rec.c    per-allocation records: chunk residency, stamps, slots
 *   spill_limit.c  the host limit: bytes held on the host, published, and
 *                  the coldest chunks spilled past VX_HOST_LIMIT
 *   spill_io.c     spill and restore of chunk lists through the pinned
 *                  bounce ring, and nvme's counters copied into vx's
 *   spill_pin.c    per-thread pins (chunks an operation needs stay put)
 *   spill_init.c   options, the driver probe, the swap file, fork, fini
 *   spill_order.c  who used a record since its last snapshot, and the
 *                  wait for them before its chunks are copied out
 *
 * Locking: one spill lock (spill_g.mu) guards everything in spill_g but the
 * fields marked atomic; it is held across the driver copies and the I/O of
 * a job (a thread that needs a chunk being moved must wait for it anyway).
 * Order: the registry lock is never held while calling in here (reg_lookup
 * is called before spill_g.mu is taken, and never under it), and place.c
 * calls spill_forget(_begin) after reg_remove has returned.  The driver is called
 * under spill_g.mu only through the real table, which takes no vx lock. */
#ifndef VX_TIERS_SPILL_INT_H
#define VX_TIERS_SPILL_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme.h"
#include "registry.h"
#include "vxhash.h"

#define SPILL_BATCH 64      /* chunks per nvme job (128 MiB of 2 MiB chunks) */
#define SPILL_PIN_CALLS 4   /* calls of a thread whose ranges stay pinned */
#define SPILL_PIN_RANGES 32 /* pins of one call held inline (more go to the heap) */
#define SPILL_BOUNCE 8      /* pinned bounce buffers (K >= 2: copies overlap I/O) */
#define SPILL_CHUNK ((size_t)1 << VX_CHUNK_SHIFT)

/* One managed allocation the tier has seen used, by base. */
typedef struct spill_rec {
  CUdeviceptr base;
  size_t size;
  int dev;
  uint32_t nchunks;
  uint64_t gen;    /* unique per record: pins name it */
  uint64_t *stamp; /* last use per chunk (the spill clock) */
  int32_t *slot;   /* -1 = in managed memory, else its slot in the swap */
  uint32_t *pins;  /* operations between make-resident and enqueued */
  /* spill_order.c: who used it since its last snapshot (a bit per user) */
  uint64_t users;
  /* spill_forget_begin: set aside while its free is under way */
  struct spill_rec *limbo_next;
  UT_hash_handle hh;
} spill_rec_t;

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
  int cap[SPILL_PIN_CALLS];        /* of p[c]: SPILL_PIN_RANGES, or more on the heap */
  spill_pin_t *p[SPILL_PIN_CALLS]; /* p0[c], or a heap array */
  spill_pin_t p0[SPILL_PIN_CALLS][SPILL_PIN_RANGES];
} spill_pinset_t;

struct spill_state {
  pthread_mutex_t mu;  /* the spill lock */
  nvme_swap_t *swap;   /* NULL: tier off */
  int armed;           /* atomic: 1 while the tier is on (relaxed loads in the hooks) */
  uint64_t any;        /* atomic: chunks spilled now, mirrored for relaxed loads */
  uint64_t nspilled;   /* chunks spilled now */
  uint64_t host_limit; /* VX_HOST_LIMIT in bytes; 0 = none */
  /* records (spill_rec.c) */
  spill_rec_t *recs;  /* by base */
  uint64_t gens;      /* record generations */
  uint64_t clock_now; /* the spill clock: one tick per make-resident call */
  uint64_t resident;  /* bytes of known records in managed memory */
  /* Bumped (atomic store, under mu) whenever a record is forgotten: a
   * registry lookup made before mu was taken is stale if this moved in
   * between (the allocation may be freed, its address reused), and is then
   * made again. */
  uint64_t forgets;
  /* the host limit (spill_limit.c) */
  uint64_t published; /* host_held_bytes as last published */
  uint64_t full_at;   /* spilled chunk count when the swap said ENOSPC; 0 = not full */
  int no_discard;     /* the driver refused a discard: no more spills */
  int unseen;         /* atomic: a launch vx could not read: no more spills */
  /* I/O (spill_io.c) */
  void *bounce[SPILL_BOUNCE];
  int nbounce, bounce_tried;
  nvme_stats_t seen; /* nvme's counters as last copied into vx's */
  /* per-thread pins (spill_pin.c); not under mu */
  pthread_key_t pin_key;
  pthread_once_t pin_once;
  int pin_key_ok;
};
extern struct spill_state spill_g;

/* Length of chunk i of r (the last one may be short). */
static inline size_t spill_chunk_len(const spill_rec_t *r, uint32_t i) {
  size_t lo = (size_t)i * SPILL_CHUNK;
  return r->size - lo < SPILL_CHUNK ? r->size - lo : SPILL_CHUNK;
}

// ---- spill_rec.c, each under spill_g.mu ----

/* Only memory the application believes is device memory: it cannot touch
 * it from the CPU behind vx's back (its own managed memory it can). */
int spill_spillable(const vx_alloc_info_t *a);
/* The record at base, or NULL. */
spill_rec_t *spill_rec_find_locked(CUdeviceptr base);
/* The record of a, created on first sight; a stale one (same base, other
 * size: the address was freed behind vx's back and reused) is replaced.
 * NULL without memory. */
spill_rec_t *spill_rec_get_locked(const vx_alloc_info_t *a);
/* Drops the record: slots freed, nothing written back. */
void spill_rec_drop_locked(spill_rec_t *r);
/* Forgets every record (fini, fork child). */
void spill_drop_all_locked(void);

// ---- spill_limit.c, each under spill_g.mu ----

/* Updates the host_held_bytes counter to what the host holds now. */
void spill_publish_locked(void);
/* Spills the coldest unpinned chunks until the host holds at most the
 * limit.  0, -ENOSPC (swap full or off: over the limit), or the first
 * other error. */
int spill_enforce_locked(void);

// ---- spill_io.c, each under spill_g.mu ----

/* Spills v[0..n) (n <= SPILL_BATCH): 0, or -errno (the chunks that failed
 * stay in managed memory). */
int spill_batch_locked(victim_t *v, size_t n);
/* Restores the spilled chunks [first, end) of r.  0, or -errno: the
 * chunks that failed stay in the swap (their data is never replaced). */
int spill_restore_locked(spill_rec_t *r, uint32_t first, uint32_t end);
/* Allocates the pinned bounce ring once (a context must be current); on
 * failure nvme keeps its own ring of plain memory. */
void spill_bounce_ensure_locked(void);
/* At exit the driver may already be going away: the pinned ring is only
 * taken back from nvme, not freed (it stays reachable from spill_g). */
void spill_bounce_forget_locked(void);
/* Copies nvme's counters (deltas) into vx's counters of device dev. */
void spill_stats_sync_locked(int dev);

// ---- spill_pin.c ----

/* The calling thread's pins (made on first use, unpinned and freed at
 * thread exit); NULL without memory.  Not called with spill_g.mu held. */
spill_pinset_t *spill_pinset(void);
/* Moves to the thread's oldest call slot, unpinning what it held, and
 * returns room for k entries there (the caller sets ps->n[ps->head]), or
 * NULL without memory (the slot is then empty). */
spill_pin_t *spill_pin_call_locked(spill_pinset_t *ps, int k);
void spill_unpin_all_locked(spill_pinset_t *ps);

// ---- spill_order.c, each under spill_g.mu ----

#define SPILL_ORDER_USERS 63                 /* streams and contexts with a bit */
#define SPILL_ORDER_LOST ((uint64_t)1 << 63) /* a use vx cannot wait for */

/* Notes that the calling thread's current operation uses r (its users are
 * marked once the operation is enqueued: spill_order_enqueued). */
void spill_order_touch_locked(const spill_rec_t *r);
/* Waits until every use of r noted so far is done (its users are then
 * cleared): 0; -EBUSY when another context's work on it is still in flight
 * or vx cannot know (leave it); -EAGAIN when the wait needs a whole-context
 * synchronisation while a capture is in progress; -EIO on a driver error.
 * The caller has switched to relaxed capture mode. */
int spill_order_wait_locked(spill_rec_t *r);
/* Fork child: the parent's events are gone. */
void spill_order_fork_child(void);

#endif
