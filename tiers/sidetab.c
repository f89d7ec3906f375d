/* Locked uthash table from a key (VMM handle, host pointer) to its size
 * and device. */
#include "sidetab.h"

#include <errno.h>
#include <stdlib.h>

/* uthash in non-fatal mode: a failed allocation sets vxhash_oomed. */
#include "vxhash.h"
#include "locks.h"

struct sidetab_entry {
  uint64_t key;
  size_t size;
  int dev;
  UT_hash_handle hh;
};

int sidetab_add(sidetab_t *t, uint64_t key, size_t size, int dev) {
  struct sidetab_entry *e = malloc(sizeof *e), *old;
  if (!e) return -ENOMEM;
  *e = (struct sidetab_entry){.key = key, .size = size, .dev = dev};
  vxhash_oomed = 0;
  vx_mutex_lock(&t->lock, t->rank);
  HASH_FIND(hh, t->head, &key, sizeof key, old);
  if (!old) HASH_ADD(hh, t->head, key, sizeof e->key, e);
  vx_mutex_unlock(&t->lock, t->rank);
  if (old || vxhash_oomed) {
    free(e);
    return old ? -EEXIST : -ENOMEM;
  }
  return 0;
}

int sidetab_remove(sidetab_t *t, uint64_t key, size_t *size, int *dev) {
  struct sidetab_entry *e;
  vx_mutex_lock(&t->lock, t->rank);
  HASH_FIND(hh, t->head, &key, sizeof key, e);
  if (e) HASH_DEL(t->head, e);
  vx_mutex_unlock(&t->lock, t->rank);
  if (!e) return -ENOENT;
  *size = e->size;
  *dev = e->dev;
  free(e);
  return 0;
}

void sidetab_atfork_prepare(sidetab_t *t) {
  vx_mutex_lock(&t->lock, t->rank);
}
void sidetab_atfork_parent(sidetab_t *t) {
  vx_mutex_unlock(&t->lock, t->rank);
}
void sidetab_atfork_child(sidetab_t *t) {
  pthread_mutex_init(&t->lock, NULL);
}
