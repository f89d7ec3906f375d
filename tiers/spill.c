/* The NVMe tier's API, which the hooks call: ranges made resident (chunks
 * stamped, pinned, restored), policy-chosen spills, frees, and launches vx
 * cannot see.  The state, the lock and its order: spill_int.h. */
#include "spill.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spill_int.h"
#include "driver.h"
#include "log.h"
#include "locks.h"

/* Nonzero when some chunk is in the swap file right now (one relaxed load). */
static int spill_any(void) {
  return __atomic_load_n(&spill_g.any, __ATOMIC_RELAXED) != 0;
}

int spill_armed(void) {
  return __atomic_load_n(&spill_g.armed, __ATOMIC_RELAXED);
}

/* Stamps the chunks of [p, p+n) inside a (now), pins them for the calling
 * thread (into *pin when not NULL), restores the spilled ones.  0 or -errno. */
static int touch_locked(const vx_alloc_info_t *a, CUdeviceptr p, size_t n, uint64_t now,
                        spill_pin_t *pin) {
  spill_rec_t *r = spill_rec_get_locked(a);
  if (!r) return 0; /* no memory for bookkeeping: never spilled either */
  CUdeviceptr lo = p < a->base ? a->base : p, hi = p + n;
  if (hi > a->base + a->size || hi < p) hi = a->base + a->size;
  if (hi <= lo) return 0;
  uint32_t first = (uint32_t)((lo - a->base) >> VX_CHUNK_SHIFT);
  uint32_t end = (uint32_t)((hi - 1 - a->base) >> VX_CHUNK_SHIFT) + 1;
  if (pin) {
    *pin = (spill_pin_t){.gen = r->gen, .base = r->base, .first = first, .end = end};
    for (uint32_t i = first; i < end; i++)
      r->pins[i]++;
  }
  spill_order_touch_locked(r); /* its users: once the operation is enqueued */
  for (uint32_t i = first; i < end; i++) {
    if (!r->stamp[i]) spill_g.resident += spill_chunk_len(r, i); /* first use: now backed */
    r->stamp[i] = now;
  }
  return spill_g.nspilled ? spill_restore_locked(r, first, end) : 0;
}

/* The allocations some ranges reach: SPILL_PIN_RANGES inline, more on the
 * heap (a fused optimizer kernel reaches hundreds: none is left out). */
typedef struct reach {
  int k, cap;
  vx_alloc_info_t *a;
  CUdeviceptr *lo;
  size_t *len;
  vx_alloc_info_t a0[SPILL_PIN_RANGES];
  CUdeviceptr lo0[SPILL_PIN_RANGES];
  size_t len0[SPILL_PIN_RANGES];
} reach_t;

static void reach_free(reach_t *r) {
  if (r->a != r->a0) free(r->a), free(r->lo), free(r->len);
}

/* Appends one; 0 or -ENOMEM. */
static int reach_add(reach_t *r, const vx_alloc_info_t *x, CUdeviceptr lo, size_t len) {
  if (r->k == r->cap) {
    int nc = 2 * r->cap;
    vx_alloc_info_t *a = malloc((size_t)nc * sizeof *a);
    CUdeviceptr *l = malloc((size_t)nc * sizeof *l);
    size_t *n = malloc((size_t)nc * sizeof *n);
    if (!a || !l || !n) {
      free(a), free(l), free(n);
      return -ENOMEM;
    }
    memcpy(a, r->a, (size_t)r->k * sizeof *a);
    memcpy(l, r->lo, (size_t)r->k * sizeof *l);
    memcpy(n, r->len, (size_t)r->k * sizeof *n);
    reach_free(r);
    r->a = a, r->lo = l, r->len = n, r->cap = nc;
  }
  r->a[r->k] = *x;
  r->lo[r->k] = lo;
  r->len[r->k++] = len;
  return 0;
}

/* The allocations the ranges reach, looked up before spill_g.mu is taken,
 * into *r (emptied first).  0 or -ENOMEM. */
static int lookup_ranges(const CUdeviceptr *p, const size_t *n, int count, reach_t *r) {
  r->k = 0;
  for (int i = 0; i < count; i++) {
    CUdeviceptr at = p[i], end = p[i] + (n[i] ? n[i] : 1);
    vx_alloc_info_t x;
    if (n[i] == SPILL_WHOLE) {
      if (reg_lookup(at, &x) == 0 && spill_spillable(&x) && reach_add(r, &x, x.base, x.size))
        return -ENOMEM;
      continue;
    }
    if (end < at) end = (CUdeviceptr)-1;
    while (at < end && reg_lookup(at, &x) == 0) {
      if (spill_spillable(&x) && reach_add(r, &x, at, end - at)) return -ENOMEM;
      at = x.base + x.size;
    }
  }
  return 0;
}

/* Without memory to pin what an operation reaches, the tier cannot keep
 * it resident until it is enqueued: everything is restored and spilling
 * stops (spill_unseen_launch), the one fallback that needs no memory. */
static CUresult no_room_to_pin(void) {
  VX_LOG_ONCE(VX_LOG_WARN, "no memory to pin the allocations an operation reaches: "
                           "restoring everything from the NVMe swap");
  return spill_unseen_launch();
}

CUresult spill_make_resident_many(const CUdeviceptr *p, const size_t *n, int count, CUstream s) {
  (void)s; /* restores are synchronous copies: done before any later work */
  if (!spill_armed()) return CUDA_SUCCESS;
  reach_t R = {.cap = SPILL_PIN_RANGES};
  R.a = R.a0, R.lo = R.lo0, R.len = R.len0;
  spill_pinset_t *ps = spill_pinset();
  if (!ps) return no_room_to_pin();
  int rc = 0;
  for (;;) {
    uint64_t seen = __atomic_load_n(&spill_g.forgets, __ATOMIC_ACQUIRE);
    if (lookup_ranges(p, n, count, &R)) {
      reach_free(&R);
      return no_room_to_pin();
    }
    if (!R.k) return CUDA_SUCCESS;
    vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
    if (spill_g.forgets == seen) break;
    vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL); /* a free raced with the lookup */
  }
  spill_pin_t *call = spill_pin_call_locked(ps, R.k);
  if (!call) {
    vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
    reach_free(&R);
    return no_room_to_pin();
  }
  uint64_t now = ++spill_g.clock_now;
  /* All of them stamped and pinned in one call: none is spilled to make
   * room for another (the pins hold until the thread's next calls). */
  for (int i = 0; i < R.k; i++) {
    call[i] = (spill_pin_t){0}; /* stays empty where no record could be made */
    int e = touch_locked(&R.a[i], R.lo[i], R.len[i], now, &call[i]);
    if (e && !rc) rc = e;
  }
  ps->n[ps->head] = R.k;
  if (!rc) spill_enforce_locked(); /* over the limit: a warning was said */
  spill_publish_locked();
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
  reach_free(&R);
  if (rc)
    VX_LOG_ONCE(VX_LOG_ERROR, "restore from the NVMe swap failed (%s): the operation fails",
                strerror(-rc));
  return rc ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

CUresult spill_make_resident(CUdeviceptr p, size_t n, CUstream s) {
  return spill_make_resident_many(&p, &n, 1, s);
}

int spill_chunks(CUdeviceptr base, uint32_t first, uint32_t count) {
  vx_alloc_info_t a;
  if (!spill_armed()) return -ENOSYS;
  for (;;) {
    uint64_t seen = __atomic_load_n(&spill_g.forgets, __ATOMIC_ACQUIRE);
    if (reg_lookup(base, &a) || a.base != base || !spill_spillable(&a)) return -EINVAL;
    vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
    if (spill_g.forgets == seen) break;
    vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL); /* a free raced with the lookup */
  }
  spill_rec_t *r = spill_rec_get_locked(&a);
  int rc = r ? 0 : -ENOMEM;
  victim_t v[SPILL_BATCH];
  for (uint32_t i = first; r && i < first + count && i < r->nchunks && !rc;) {
    size_t k = 0;
    for (; i < first + count && i < r->nchunks && k < SPILL_BATCH; i++)
      if (r->slot[i] < 0 && !r->pins[i]) v[k++] = (victim_t){r, i, r->stamp[i]};
    if (k) rc = spill_batch_locked(v, k);
  }
  spill_publish_locked();
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
  return rc;
}

void spill_forget(CUdeviceptr base) {
  if (!spill_armed()) return;
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
  spill_rec_t *r = spill_rec_find_locked(base);
  if (r) spill_rec_drop_locked(r);
  __atomic_store_n(&spill_g.forgets, spill_g.forgets + 1, __ATOMIC_RELEASE);
  spill_publish_locked();
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
}

// ---- unseen launches (CUkernel handles) ----

CUresult spill_unseen_launch(void) {
  if (!spill_armed()) return CUDA_SUCCESS;
  if (__atomic_load_n(&spill_g.unseen, __ATOMIC_RELAXED) && !spill_any()) return CUDA_SUCCESS;
  vx_mutex_lock(&spill_g.mu, VX_RANK_SPILL);
  int first = !spill_g.unseen, rc = 0;
  __atomic_store_n(&spill_g.unseen, 1, __ATOMIC_RELAXED);
  spill_rec_t *r, *tmp;
  if (spill_g.nspilled) HASH_ITER(hh, spill_g.recs, r, tmp) {
      int e = spill_restore_locked(r, 0, r->nchunks);
      if (e && !rc) rc = e;
    }
  spill_publish_locked();
  vx_mutex_unlock(&spill_g.mu, VX_RANK_SPILL);
  if (first)
    VX_LOG_ONCE(VX_LOG_WARN,
                "a kernel launch whose pointer arguments vx cannot learn: spilled data "
                "restored, no more NVMe spills (data stays in host RAM)");
  if (rc)
    VX_LOG_ONCE(VX_LOG_ERROR, "restore from the NVMe swap failed (%s): the launch fails",
                strerror(-rc));
  return rc ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}
