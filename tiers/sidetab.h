/* A small locked table from a handle or host pointer to (size, device):
 * how vx remembers VMM handles and pinned host allocations. */
#ifndef VX_TIERS_SIDETAB_H
#define VX_TIERS_SIDETAB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "locks.h"

typedef struct sidetab {
  pthread_mutex_t lock;
  struct sidetab_entry *head;
  int rank; /* the lock's VX_RANK_* (core/locks.h) */
} sidetab_t;

#define SIDETAB_INIT(rank)                                                                         \
  { PTHREAD_MUTEX_INITIALIZER, NULL, rank }

/* Remembers key -> (size, dev).  Returns 0, -EEXIST or -ENOMEM. */
int sidetab_add(sidetab_t *t, uint64_t key, size_t size, int dev);
/* Forgets key, returning its size and device.  Returns 0 or -ENOENT. */
int sidetab_remove(sidetab_t *t, uint64_t key, size_t *size, int *dev);

/* fork: prepare takes the lock, the parent releases it, the child
 * re-creates it (the table itself stays valid). */
void sidetab_atfork_prepare(sidetab_t *t);
void sidetab_atfork_parent(sidetab_t *t);
void sidetab_atfork_child(sidetab_t *t);

#endif
