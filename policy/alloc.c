/* alloc.c: the policy's table of live allocations, their drift-proof names,
 * and per-chunk residency with the LRU list of resident chunks. */
#include <errno.h>
#include <stdlib.h>

#include "pol_internal.h"

uint64_t pol_hash2(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h ? h : 1;
}

struct pol_arec *pol_find(pol_t *p, uint64_t id) {
  struct pol_arec *a = NULL;
  HASH_FIND(hh, p->by_id, &id, sizeof id, a);
  return a;
}

struct pol_arec *pol_find_name(pol_t *p, uint64_t name) {
  struct pol_arec *a = NULL;
  HASH_FIND(hn, p->by_name, &name, sizeof name, a);
  return a;
}

struct pol_arec *pol_find_addr(pol_t *p, uint64_t addr) {
  struct pol_arec *a = NULL;
  HASH_FIND(ha, p->by_addr, &addr, sizeof addr, a);
  return a;
}

/* Allocations re-created every iteration land at new addresses and get new
 * ids; their name does not change: the k-th live allocation of a given size
 * (lowest free rank) is named the same each time the program's allocation
 * order repeats. */
static uint64_t name_for(pol_t *p, uint64_t size) {
  for (uint64_t rank = 0;; rank++) {
    uint64_t name = pol_hash2(size, rank);
    if (!pol_find_name(p, name)) return name;
  }
}

int pol_arec_add(pol_t *p, uint64_t id, uint64_t addr, uint64_t size, struct pol_arec **out) {
  uint64_t n = (size + p->cfg.chunk_size - 1) / p->cfg.chunk_size;
  if (n > UINT32_MAX) return -EINVAL;
  struct pol_arec *a = calloc(1, sizeof *a);
  struct pol_chunk *c = calloc(n, sizeof *c);
  if (!a || !c) {
    free(a);
    free(c);
    return -ENOMEM;
  }
  a->id = id;
  a->addr = addr;
  a->size = size;
  a->nchunks = (uint32_t)n;
  a->chunks = c;
  for (uint32_t i = 0; i < a->nchunks; i++) {
    c[i].a = a;
    c[i].idx = i;
  }
  a->name = name_for(p, size);
  vxhash_oomed = 0;
  HASH_ADD(hh, p->by_id, id, sizeof a->id, a);
  if (!vxhash_oomed) {
    HASH_ADD(hn, p->by_name, name, sizeof a->name, a);
    if (vxhash_oomed) HASH_DELETE(hh, p->by_id, a);
  }
  if (vxhash_oomed) {
    free(a);
    free(c);
    return -ENOMEM;
  }
  /* by_addr is only a hint for drifting addresses: failing to index it is
   * harmless (uthash leaves the table as it was). */
  if (addr && !pol_find_addr(p, addr)) HASH_ADD(ha, p->by_addr, addr, sizeof a->addr, a);
  *out = a;
  return 0;
}

void pol_arec_remove(pol_t *p, struct pol_arec *a) {
  for (uint32_t i = 0; i < a->nchunks; i++)
    chunk_set_away(p, &a->chunks[i], LOC_FRESH);
  HASH_DELETE(hh, p->by_id, a);
  HASH_DELETE(hn, p->by_name, a);
  if (pol_find_addr(p, a->addr) == a) HASH_DELETE(ha, p->by_addr, a);
  free(a->chunks);
  free(a);
}

void pol_arec_rename(pol_t *p, struct pol_arec *a, uint64_t name) {
  HASH_DELETE(hn, p->by_name, a);
  a->name = name;
  vxhash_oomed = 0;
  HASH_ADD(hn, p->by_name, name, sizeof a->name, a);
  /* uthash cannot fail to re-add an entry it just removed unless the bucket
   * array must grow; then the allocation is only unnamed for prediction */
}

void pol_arec_clear(pol_t *p) {
  struct pol_arec *a, *t;
  HASH_ITER(hh, p->by_id, a, t) pol_arec_remove(p, a);
}

static void lru_unlink(struct pol_chunk *c) {
  c->prev->next = c->next;
  c->next->prev = c->prev;
  c->prev = c->next = NULL;
}

static void lru_append(pol_t *p, struct pol_chunk *c) {
  c->prev = p->lru.prev;
  c->next = &p->lru;
  p->lru.prev->next = c;
  p->lru.prev = c;
}

/* Marks a resident chunk most recently used. */
void lru_touch(pol_t *p, struct pol_chunk *c) {
  if (c->loc != LOC_DEV) return;
  if (p->cursor == c) p->cursor = c->next;
  lru_unlink(c);
  lru_append(p, c);
}

void chunk_set_resident(pol_t *p, struct pol_chunk *c) {
  if (c->loc == LOC_DEV) return;
  c->victim = 0;
  if (c->loc == LOC_HOST && p->host_used) p->host_used--;
  c->dirty = 1; /* no copy elsewhere is known to be kept; a plan's prefetch clears it */
  c->loc = LOC_DEV;
  p->used++;
  lru_append(p, c);
}

/* Moves a chunk off the device (to LOC_HOST/LOC_NVME) or forgets it (LOC_FRESH). */
void chunk_set_away(pol_t *p, struct pol_chunk *c, int loc) {
  if (c->ahead) p->inv--;
  c->ahead = 0;
  if (c->loc == LOC_DEV) {
    if (p->cursor == c) p->cursor = c->next;
    lru_unlink(c);
    p->used--;
  } else if (c->loc == LOC_HOST && p->host_used) {
    p->host_used--;
  }
  c->loc = (uint8_t)loc;
  if (loc == LOC_HOST) p->host_used++;
}
