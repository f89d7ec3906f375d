/* Allocation registry: uthash by base address plus a chunk index (2 MiB
 * chunk number -> allocations overlapping it, sorted by base). */
#include "registry.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* uthash in non-fatal mode: a failed allocation sets vxhash_oomed. */
#include "vxhash.h"
#include "locks.h"

typedef struct reg_alloc {
  vx_alloc_info_t info;
  UT_hash_handle hh;
} reg_alloc_t;

typedef struct reg_chunk {
  uint64_t chunk;
  int n, cap;
  reg_alloc_t **v; /* sorted by base; ranges are disjoint */
  UT_hash_handle hh;
} reg_chunk_t;

static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static reg_alloc_t *reg_by_base;
static reg_chunk_t *reg_chunks;
static size_t reg_n;

static uint64_t chunk_of(CUdeviceptr p) {
  return (uint64_t)p >> VX_CHUNK_SHIFT;
}
static uint64_t last_chunk(const vx_alloc_info_t *a) {
  return chunk_of(a->base + (a->size ? a->size - 1 : 0));
}

/* Index of the first entry with base > p. */
static int chunk_upper(const reg_chunk_t *c, CUdeviceptr p) {
  int lo = 0, hi = c->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (c->v[mid]->info.base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int chunk_insert_locked(uint64_t k, reg_alloc_t *a) {
  reg_chunk_t *c;
  HASH_FIND(hh, reg_chunks, &k, sizeof k, c);
  if (!c) {
    c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->chunk = k;
    vxhash_oomed = 0;
    HASH_ADD(hh, reg_chunks, chunk, sizeof c->chunk, c);
    if (vxhash_oomed) {
      free(c);
      return -ENOMEM;
    }
  }
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 2;
    reg_alloc_t **v = realloc(c->v, (size_t)cap * sizeof *v);
    if (!v) {
      if (c->n == 0) { /* just made: leave no empty chunk behind */
        HASH_DEL(reg_chunks, c);
        free(c->v);
        free(c);
      }
      return -ENOMEM;
    }
    c->v = v;
    c->cap = cap;
  }
  int at = chunk_upper(c, a->info.base);
  memmove(c->v + at + 1, c->v + at, (size_t)(c->n - at) * sizeof *c->v);
  c->v[at] = a;
  c->n++;
  return 0;
}

static void chunk_erase_locked(uint64_t k, reg_alloc_t *a) {
  reg_chunk_t *c;
  HASH_FIND(hh, reg_chunks, &k, sizeof k, c);
  if (!c) return;
  for (int i = 0; i < c->n; i++) {
    if (c->v[i] != a) continue;
    memmove(c->v + i, c->v + i + 1, (size_t)(c->n - i - 1) * sizeof *c->v);
    c->n--;
    break;
  }
  if (c->n == 0) {
    HASH_DEL(reg_chunks, c);
    free(c->v);
    free(c);
  }
}

static void unindex_locked(reg_alloc_t *a, uint64_t upto) {
  for (uint64_t k = chunk_of(a->info.base); k < upto; k++)
    chunk_erase_locked(k, a);
}

int reg_add(const vx_alloc_info_t *info) {
  reg_alloc_t *a = calloc(1, sizeof *a), *old;
  if (!a) return -ENOMEM;
  a->info = *info;
  int rc = 0;
  vx_rwlock_wrlock(&reg_lock, VX_RANK_REG);
  HASH_FIND(hh, reg_by_base, &info->base, sizeof info->base, old);
  if (old) {
    rc = -EEXIST;
  } else {
    uint64_t k, last = last_chunk(info);
    for (k = chunk_of(info->base); k <= last && rc == 0; k++)
      rc = chunk_insert_locked(k, a);
    if (rc) {
      unindex_locked(a, k - 1); /* the failed chunk got nothing */
    } else {
      vxhash_oomed = 0;
      HASH_ADD(hh, reg_by_base, info.base, sizeof a->info.base, a);
      if (vxhash_oomed) {
        unindex_locked(a, last + 1);
        rc = -ENOMEM;
      } else {
        reg_n++;
      }
    }
  }
  vx_rwlock_unlock(&reg_lock, VX_RANK_REG);
  if (rc) free(a);
  return rc;
}

int reg_remove(CUdeviceptr base, vx_alloc_info_t *out) {
  reg_alloc_t *a;
  vx_rwlock_wrlock(&reg_lock, VX_RANK_REG);
  HASH_FIND(hh, reg_by_base, &base, sizeof base, a);
  if (a) {
    HASH_DEL(reg_by_base, a);
    unindex_locked(a, last_chunk(&a->info) + 1);
    reg_n--;
  }
  vx_rwlock_unlock(&reg_lock, VX_RANK_REG);
  if (!a) return -ENOENT;
  if (out) *out = a->info;
  free(a);
  return 0;
}

static const vx_alloc_info_t *lookup_locked(CUdeviceptr addr) {
  uint64_t k = chunk_of(addr);
  reg_chunk_t *c;
  HASH_FIND(hh, reg_chunks, &k, sizeof k, c);
  if (!c) return NULL;
  int i = chunk_upper(c, addr) - 1;
  if (i >= 0 && addr - c->v[i]->info.base < (c->v[i]->info.size ? c->v[i]->info.size : 1))
    return &c->v[i]->info;
  return NULL;
}

int reg_lookup(CUdeviceptr addr, vx_alloc_info_t *out) {
  vx_rwlock_rdlock(&reg_lock, VX_RANK_REG);
  const vx_alloc_info_t *a = lookup_locked(addr);
  if (a && out) *out = *a;
  vx_rwlock_unlock(&reg_lock, VX_RANK_REG);
  return a ? 0 : -ENOENT;
}

int reg_lookup_many(const CUdeviceptr *addrs, int n, vx_alloc_info_t *out, int *found) {
  int hits = 0;
  vx_rwlock_rdlock(&reg_lock, VX_RANK_REG);
  for (int i = 0; i < n; i++) {
    const vx_alloc_info_t *a = lookup_locked(addrs[i]);
    found[i] = a != NULL;
    if (a) {
      out[i] = *a;
      hits++;
    }
  }
  vx_rwlock_unlock(&reg_lock, VX_RANK_REG);
  return hits;
}

size_t reg_count(void) {
  vx_rwlock_rdlock(&reg_lock, VX_RANK_REG);
  size_t n = reg_n;
  vx_rwlock_unlock(&reg_lock, VX_RANK_REG);
  return n;
}

void reg_atfork_prepare(void) {
  vx_rwlock_wrlock(&reg_lock, VX_RANK_REG);
}
void reg_atfork_parent(void) {
  vx_rwlock_unlock(&reg_lock, VX_RANK_REG);
}
/* The child's thread has a new id, so glibc would not see it as the
 * writer: the lock is re-created (prepare left the table consistent). */
void reg_atfork_child(void) {
  pthread_rwlock_init(&reg_lock, NULL);
}
