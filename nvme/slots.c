/* The slot table: one entry per chunk-sized slot of the swap file, a stack of
 * freed slots for reuse, and a high-water mark below the file's size. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvme_int.h"

int nvme_slots_init(nvme_slots_t *t, uint32_t max) {
  memset(t, 0, sizeof *t);
  t->max = max;
  return max ? 0 : -EINVAL;
}

void nvme_slots_fini(nvme_slots_t *t) {
  free(t->tab);
  free(t->free);
  memset(t, 0, sizeof *t);
}

int nvme_slots_resize(nvme_slots_t *t, uint32_t n) {
  if (n <= t->nfile) return 0;
  if (n > t->max) return -EINVAL;
  nvme_slot_t *tab = realloc(t->tab, (size_t)n * sizeof *tab);
  if (!tab) return -ENOMEM;
  t->tab = tab;
  int32_t *fr = realloc(t->free, (size_t)n * sizeof *fr);
  if (!fr) return -ENOMEM;
  t->free = fr;
  memset(tab + t->nfile, 0, (size_t)(n - t->nfile) * sizeof *tab);
  t->nfile = n;
  return 0;
}

int32_t nvme_slots_take(nvme_slots_t *t) {
  int32_t slot;
  if (t->nfree)
    slot = t->free[--t->nfree];
  else if (t->hwm < t->nfile)
    slot = (int32_t)t->hwm++;
  else
    return -ENOSPC;
  t->tab[slot].state = SLOT_WRITING;
  t->tab[slot].len = 0;
  t->used++;
  return slot;
}

int nvme_slots_release(nvme_slots_t *t, int32_t slot, uint32_t *len) {
  if (slot < 0 || (uint32_t)slot >= t->hwm || t->tab[slot].state == SLOT_FREE) return -EINVAL;
  *len = t->tab[slot].state == SLOT_VALID ? t->tab[slot].len : 0;
  t->tab[slot].state = SLOT_FREE;
  t->free[t->nfree++] = slot;
  t->used--;
  return 0;
}
