/* The spill tier's records: one per managed allocation seen used, with each
 * chunk's last use (stamp), place (managed memory or a swap slot) and pins.
 * Every function here runs under the spill lock. */
#include <stdlib.h>
#include <string.h>

#include "spill.h"
#include "spill_int.h"
#include "ctr.h"
#include "log.h"
#include "locks.h"

int spill_spillable(const vx_alloc_info_t *a) {
  return a->tier == VX_TIER_MANAGED || a->tier == VX_TIER_HOST;
}

static void rec_free(spill_rec_t *r) {
  free(r->stamp);
  free(r->slot);
  free(r->pins);
  free(r);
}

static spill_rec_t *rec_new_locked(const vx_alloc_info_t *a) {
  spill_rec_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->base = a->base;
  r->size = a->size;
  r->dev = a->dev;
  r->nchunks = (uint32_t)((a->size + SPILL_CHUNK - 1) / SPILL_CHUNK);
  r->gen = ++spill_g.gens;
  r->stamp = calloc(r->nchunks, sizeof *r->stamp);
  r->pins = calloc(r->nchunks, sizeof *r->pins);
  r->slot = malloc(r->nchunks * sizeof *r->slot);
  if (!r->stamp || !r->slot || !r->pins) {
    rec_free(r);
    return NULL;
  }
  memset(r->slot, 0xff, r->nchunks * sizeof *r->slot);
  vxhash_oomed = 0;
  HASH_ADD(hh, spill_g.recs, base, sizeof r->base, r);
  if (vxhash_oomed) {
    rec_free(r);
    return NULL;
  }
  return r;
}

/* The bookkeeping of r's chunks goes (slots freed, nothing written back),
 * then r; r is in no table. */
static void rec_release_locked(spill_rec_t *r) {
  for (uint32_t i = 0; i < r->nchunks; i++) {
    size_t len = spill_chunk_len(r, i);
    if (r->slot[i] < 0) {
      if (r->stamp[i]) spill_g.resident -= len;
      continue;
    }
    nvme_slot_free(spill_g.swap, r->slot[i]);
    ctr_cur_sub(r->dev, VX_CTR_nvme_bytes, len);
    spill_g.nspilled--;
  }
  __atomic_store_n(&spill_g.any, spill_g.nspilled, __ATOMIC_RELAXED);
  spill_g.full_at = 0;
  rec_free(r);
}

void spill_rec_drop_locked(spill_rec_t *r) {
  HASH_DEL(spill_g.recs, r);
  rec_release_locked(r);
}

spill_rec_t *spill_rec_find_locked(CUdeviceptr base) {
  spill_rec_t *r;
  HASH_FIND(hh, spill_g.recs, &base, sizeof base, r);
  return r;
}

spill_rec_t *spill_rec_get_locked(const vx_alloc_info_t *a) {
  spill_rec_t *r = spill_rec_find_locked(a->base);
  if (r && r->size == a->size) return r;
  if (r) spill_rec_drop_locked(r);
  return rec_new_locked(a);
}

void spill_drop_all_locked(void) {
  spill_rec_t *r, *tmp;
  HASH_ITER(hh, spill_g.recs, r, tmp) spill_rec_drop_locked(r);
  spill_g.published = 0;
}

// ---- frees: a record is set aside until the free is known to succeed ----

/* Records of allocations being freed (spill_forget_begin), by next. */
static spill_rec_t *limbo;

uint64_t spill_forget_begin(CUdeviceptr base) {
  if (!spill_armed()) return 0;
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
  spill_rec_t *r = spill_rec_find_locked(base);
  uint64_t token = 0;
  if (r) {
    HASH_DEL(spill_g.recs, r);
    r->limbo_next = limbo;
    limbo = r;
    token = r->gen;
  }
  /* lookups made before are stale: the address may come back soon */
  __atomic_store_n(&spill_g.forgets, spill_g.forgets + 1, __ATOMIC_RELEASE);
  spill_publish_locked();
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
  return token;
}

void spill_forget_end(uint64_t token, int freed) {
  if (!token) return;
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
  spill_rec_t **at = &limbo, *r;
  while ((r = *at) && r->gen != token)
    at = &r->limbo_next;
  if (r) {
    *at = r->limbo_next;
    if (freed) {
      rec_release_locked(r);
    } else {
      /* still allocated: its swapped chunks are its data; a record made
       * meanwhile (a use racing the free) holds nothing newer */
      spill_rec_t *now = spill_rec_find_locked(r->base);
      if (now) spill_rec_drop_locked(now);
      vxhash_oomed = 0;
      HASH_ADD(hh, spill_g.recs, base, sizeof r->base, r);
      if (vxhash_oomed) { /* cannot happen: uthash grows its buckets only */
        rec_release_locked(r);
        VX_LOG_ONCE(VX_LOG_ERROR, "no memory for the NVMe tier's records: data lost");
      }
    }
    __atomic_store_n(&spill_g.forgets, spill_g.forgets + 1, __ATOMIC_RELEASE);
    spill_publish_locked();
  }
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
}
