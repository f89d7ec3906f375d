/* The NVMe tier inside libvx: per-chunk residency of vx's managed allocations,
 * the host limit, spill (DtoH -> swap -> discard) and restore (swap -> HtoD).
 *
 * Locking: one spill lock (spill_mu) guards the records, the clock and the
 * swap's jobs; it is held across the driver copies and the I/O of a job (a
 * thread that needs a chunk being moved must wait for it anyway).  Order:
 * the registry lock is never held while calling in here (reg_lookup is
 * called before spill_mu is taken, and never under it), and place.c calls
 * spill_forget after reg_remove has returned.  The driver is called under
 * spill_mu only through the real table, which takes no vx lock. */
#include "spill.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "vxhash.h"

#include "budget.h"
#include "capture.h"
#include "move.h"
#include "nvme.h"
#include "registry.h"
#include "spill_int.h"
#include "vx.h"

#define CHUNK ((size_t)1 << VX_CHUNK_SHIFT)

struct spill_rec {
  CUdeviceptr base;
  size_t size;
  int dev;
  uint32_t nchunks;
  uint64_t gen;    /* unique per record: pins name it */
  uint64_t *stamp; /* last use per chunk (the spill clock) */
  int32_t *slot;   /* -1 = in managed memory, else its slot in the swap */
  uint32_t *pins;  /* operations between make-resident and enqueued */
  UT_hash_handle hh;
};

struct spill_state spill_g = {.mu = PTHREAD_MUTEX_INITIALIZER};
static spill_rec_t *recs;  /* by base; under spill_mu */
static uint64_t clock_now; /* under spill_mu */
static uint64_t resident;  /* bytes of known records in managed memory */
static uint64_t full_at;   /* spilled chunk count when the swap said ENOSPC; 0 = not full */
static uint64_t published; /* host_held_bytes as last published */
static int no_discard;     /* the driver refused a discard: no more spills */
static int unseen;         /* a launch vx could not read: no more spills */
static uint64_t gens;      /* record generations */
/* Bumped (under spill_mu) whenever a record is forgotten: a registry lookup
 * made before spill_mu was taken is stale if this moved in between (the
 * allocation may be freed, its address reused), and is then made again. */
static uint64_t forgets;

static size_t chunk_len(const spill_rec_t *r, uint32_t i) {
  size_t lo = (size_t)i * CHUNK;
  return r->size - lo < CHUNK ? r->size - lo : CHUNK;
}

// ---- records ----

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
  r->nchunks = (uint32_t)((a->size + CHUNK - 1) / CHUNK);
  r->gen = ++gens;
  r->stamp = calloc(r->nchunks, sizeof *r->stamp);
  r->pins = calloc(r->nchunks, sizeof *r->pins);
  r->slot = malloc(r->nchunks * sizeof *r->slot);
  if (!r->stamp || !r->slot || !r->pins) {
    rec_free(r);
    return NULL;
  }
  memset(r->slot, 0xff, r->nchunks * sizeof *r->slot);
  vxhash_oomed = 0;
  HASH_ADD(hh, recs, base, sizeof r->base, r);
  if (vxhash_oomed) {
    rec_free(r);
    return NULL;
  }
  return r;
}

/* Drops the record: slots freed, nothing written back. */
static void rec_drop_locked(spill_rec_t *r) {
  for (uint32_t i = 0; i < r->nchunks; i++) {
    size_t len = chunk_len(r, i);
    if (r->slot[i] < 0) {
      if (r->stamp[i]) resident -= len;
      continue;
    }
    nvme_slot_free(spill_g.swap, r->slot[i]);
    ctr_cur_sub(r->dev, VX_CTR_nvme_bytes, len);
    spill_g.nspilled--;
  }
  __atomic_store_n(&spill_g.any, spill_g.nspilled, __ATOMIC_RELAXED);
  full_at = 0;
  HASH_DEL(recs, r);
  rec_free(r);
}

/* The record of a, created on first sight; a stale one (same base, other
 * size: the address was freed behind vx's back and reused) is replaced. */
static spill_rec_t *rec_get_locked(const vx_alloc_info_t *a) {
  spill_rec_t *r;
  HASH_FIND(hh, recs, &a->base, sizeof a->base, r);
  if (r && r->size == a->size) return r;
  if (r) rec_drop_locked(r);
  return rec_new_locked(a);
}

static int spillable(const vx_alloc_info_t *a) {
  /* Only memory the application believes is device memory: it cannot touch
   * it from the CPU behind vx's back (its own managed memory it can). */
  return a->tier == VX_TIER_MANAGED || a->tier == VX_TIER_HOST;
}

// ---- the host limit ----

/* Managed bytes vx holds that cannot be on the device: resident bytes of
 * the allocations vx has seen used, minus the room the device budgets have
 * left after native allocations, at least 0. */
static uint64_t host_held_locked(void) {
  uint64_t room = 0;
  for (int d = 0; d < ctr_devices(); d++) {
    uint64_t lim = budget_limit(d), used = budget_used(d);
    room += lim > used ? lim - used : 0;
  }
  return resident > room ? resident - room : 0;
}

static void publish_locked(void) {
  uint64_t now = host_held_locked();
  if (now > published) ctr_cur_add(0, VX_CTR_host_held_bytes, now - published);
  if (now < published) ctr_cur_sub(0, VX_CTR_host_held_bytes, published - now);
  published = now;
}

static int victim_cmp(const void *a, const void *b) {
  uint64_t x = ((const victim_t *)a)->stamp, y = ((const victim_t *)b)->stamp;
  return x < y ? -1 : x > y;
}

/* Resident chunks used at least once (never-used ones hold no memory) and
 * not pinned, coldest first.  *n = count. */
static victim_t *victims_locked(size_t *n) {
  size_t cap = 0, k = 0;
  spill_rec_t *r, *tmp;
  HASH_ITER(hh, recs, r, tmp) cap += r->nchunks;
  victim_t *v = cap ? malloc(cap * sizeof *v) : NULL;
  if (!v) {
    *n = 0;
    return NULL;
  }
  HASH_ITER(hh, recs, r, tmp)
  for (uint32_t i = 0; i < r->nchunks; i++)
    if (r->slot[i] < 0 && r->stamp[i] && !r->pins[i]) v[k++] = (victim_t){r, i, r->stamp[i]};
  qsort(v, k, sizeof *v, victim_cmp);
  *n = k;
  return v;
}

/* Spills the coldest unpinned chunks until the host holds at most the
 * limit.  0, -ENOSPC (swap full or off: over the limit), or the first
 * other error. */
static int enforce_locked(void) {
  uint64_t held = host_held_locked();
  if (!spill_g.host_limit || held <= spill_g.host_limit) return 0;
  if (full_at && spill_g.nspilled >= full_at) return -ENOSPC;
  if (no_discard || unseen) return -ENOTSUP;
  size_t n, take = 0;
  victim_t *v = victims_locked(&n);
  uint64_t need = held - spill_g.host_limit, got = 0;
  for (; take < n && got < need; take++)
    got += chunk_len(v[take].r, v[take].i);
  int rc = 0;
  for (size_t at = 0; at < take && rc != -ENOSPC;) {
    size_t batch = take - at < SPILL_BATCH ? take - at : SPILL_BATCH;
    int r = spill_batch_locked(v + at, batch);
    if (r && !rc) rc = r;
    at += batch;
  }
  free(v);
  publish_locked();
  return rc;
}

// ---- spill and restore of chunk lists ----

static int fill_dtoh(void *buf, const nvme_chunk_t *c, void *arg) {
  (void)arg;
  CUresult r = VX_CALL(cuMemcpyDtoH_v2, buf, (CUdeviceptr)(uintptr_t)c->arg, c->len);
  return r == CUDA_SUCCESS ? 0 : -EIO;
}

static int drain_htod(const void *buf, const nvme_chunk_t *c, void *arg) {
  (void)arg;
  CUdeviceptr to = (CUdeviceptr)(uintptr_t)c->arg;
  /* a synchronous copy uses the legacy stream: illegal during a capture */
  CUresult r = vx_capture_active() ? vx_capture_safe_htod(to, buf, c->len)
                                   : VX_CALL(cuMemcpyHtoD_v2, to, buf, c->len);
  return r == CUDA_SUCCESS ? 0 : -EIO;
}

static void say_failure(int err) {
  if (err == -ENOSPC)
    VX_LOG_ONCE(VX_LOG_WARN,
                "NVMe swap full (VX_NVME_LIMIT or the disk): data stays in host RAM, over "
                "VX_HOST_LIMIT");
  else
    VX_LOG_ONCE(VX_LOG_WARN, "NVMe spill failed (%s): the data stays in host RAM", strerror(-err));
}

/* After a spill job: discards what reached the swap, takes back what the
 * driver would not discard.  Returns the number of chunks now spilled. */
static size_t commit_spill_locked(victim_t *v, nvme_chunk_t *c, size_t n) {
  CUdeviceptr p[SPILL_BATCH];
  size_t sz[SPILL_BATCH], k = 0;
  for (size_t j = 0; j < n; j++)
    if (c[j].status == 0) {
      p[k] = (CUdeviceptr)(uintptr_t)c[j].arg;
      sz[k++] = c[j].len;
    }
  if (!k) return 0;
  /* On vx's own stream: the batch calls refuse the legacy one. */
  uint8_t bad[SPILL_BATCH];
  CUresult r;
  size_t nbad = move_discard_sync(p, sz, k, bad, &r);
  for (size_t j = 0, i = 0; j < n; j++) {
    if (c[j].status != 0) continue;
    if (bad[i++]) { /* the data is still in managed memory: keep it there */
      nvme_slot_free(spill_g.swap, c[j].slot);
      continue;
    }
    v[j].r->slot[v[j].i] = c[j].slot;
    resident -= c[j].len;
    spill_g.nspilled++;
    ctr_cur_add(v[j].r->dev, VX_CTR_nvme_bytes, c[j].len);
  }
  if (nbad == k) {
    no_discard = 1;
    VX_LOG_ONCE(VX_LOG_WARN,
                "cuMemDiscardBatchAsync failed (%d): data stays in host RAM, no more spills",
                (int)r);
  } else {
    ctr_add(v[0].r->dev, VX_CTR_nvme_spills, 1);
  }
  __atomic_store_n(&spill_g.any, spill_g.nspilled, __ATOMIC_RELAXED);
  return k - nbad;
}

int spill_batch_locked(victim_t *v, size_t n) {
  nvme_chunk_t c[SPILL_BATCH];
  if (!spill_g.swap) return -ENOSPC;
  if (unseen) return -ENOTSUP; /* see spill_unseen_launch */
  /* cuCtxSynchronize and synchronous copies would invalidate a capture in
   * progress on any thread: the data stays in host RAM until it ends. */
  if (vx_capture_active()) return -EAGAIN;
  spill_bounce_ensure_locked();
  /* The copies out must see every write enqueued before: wait for the
   * context's work (chunks chosen here are cold, so rarely any). */
  if (VX_CALL(cuCtxSynchronize) != CUDA_SUCCESS) return -EIO;
  for (size_t j = 0; j < n; j++)
    c[j] = (nvme_chunk_t){.key = v[j].i,
                          .arg = (void *)(uintptr_t)(v[j].r->base + (size_t)v[j].i * CHUNK),
                          .len = (uint32_t)chunk_len(v[j].r, v[j].i),
                          .slot = -1};
  int rc = nvme_spill(spill_g.swap, c, n, fill_dtoh, NULL);
  size_t ok = commit_spill_locked(v, c, n);
  spill_stats_sync_locked(v[0].r->dev);
  if (rc == -ENOSPC) full_at = spill_g.nspilled ? spill_g.nspilled : 1;
  if (rc) say_failure(rc);
  return rc ? rc : ok == n ? 0 : -EIO;
}

/* Restores the spilled chunks [first, end) of r.  0, or -errno: the
 * chunks that failed stay in the swap (their data is never replaced). */
static int restore_range_locked(spill_rec_t *r, uint32_t first, uint32_t end) {
  nvme_chunk_t c[SPILL_BATCH];
  uint32_t idx[SPILL_BATCH];
  int rc = 0;
  for (uint32_t i = first; i < end;) {
    size_t n = 0;
    for (; i < end && n < SPILL_BATCH; i++)
      if (r->slot[i] >= 0) {
        idx[n] = i;
        c[n++] = (nvme_chunk_t){
            .key = i, .arg = (void *)(uintptr_t)(r->base + (size_t)i * CHUNK), .slot = r->slot[i]};
      }
    if (!n) continue;
    spill_bounce_ensure_locked();
    int e = nvme_restore(spill_g.swap, c, n, drain_htod, NULL);
    for (size_t j = 0; j < n; j++) {
      if (c[j].status) continue;
      nvme_slot_free(spill_g.swap, r->slot[idx[j]]);
      r->slot[idx[j]] = -1;
      resident += c[j].len;
      spill_g.nspilled--;
      ctr_cur_sub(r->dev, VX_CTR_nvme_bytes, c[j].len);
    }
    full_at = 0;
    __atomic_store_n(&spill_g.any, spill_g.nspilled, __ATOMIC_RELAXED);
    spill_stats_sync_locked(r->dev);
    if (e && !rc) rc = e;
  }
  return rc;
}

// ---- the API ----

int spill_any(void) {
  return __atomic_load_n(&spill_g.any, __ATOMIC_RELAXED) != 0;
}

int spill_armed(void) {
  return __atomic_load_n(&spill_g.armed, __ATOMIC_RELAXED);
}

/* Stamps the chunks of [p, p+n) inside a (now), pins them for the calling
 * thread (into *pin when not NULL), restores the spilled ones.  0 or -errno. */
static int touch_locked(const vx_alloc_info_t *a, CUdeviceptr p, size_t n, uint64_t now,
                        spill_pin_t *pin) {
  spill_rec_t *r = rec_get_locked(a);
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
  for (uint32_t i = first; i < end; i++) {
    if (!r->stamp[i]) resident += chunk_len(r, i); /* first use: now backed */
    r->stamp[i] = now;
  }
  return spill_g.nspilled ? restore_range_locked(r, first, end) : 0;
}

/* The allocations the ranges reach, looked up before spill_mu is taken. */
static int lookup_ranges(const CUdeviceptr *p, const size_t *n, int count, vx_alloc_info_t *a,
                         CUdeviceptr *lo, size_t *len, int cap) {
  int k = 0;
  for (int i = 0; i < count; i++) {
    CUdeviceptr at = p[i], end = p[i] + (n[i] ? n[i] : 1);
    vx_alloc_info_t x;
    if (n[i] == SPILL_WHOLE) {
      if (k < cap && reg_lookup(at, &x) == 0 && spillable(&x)) {
        a[k] = x;
        lo[k] = x.base;
        len[k++] = x.size;
      }
      continue;
    }
    if (end < at) end = (CUdeviceptr)-1;
    while (at < end && k < cap && reg_lookup(at, &x) == 0) {
      if (spillable(&x)) {
        a[k] = x;
        lo[k] = at;
        len[k++] = end - at;
      }
      at = x.base + x.size;
    }
  }
  return k;
}

CUresult spill_make_resident_many(const CUdeviceptr *p, const size_t *n, int count, CUstream s) {
  (void)s; /* restores are synchronous copies: done before any later work */
  vx_alloc_info_t a[SPILL_PIN_RANGES];
  CUdeviceptr lo[SPILL_PIN_RANGES];
  size_t len[SPILL_PIN_RANGES];
  if (!spill_armed()) return CUDA_SUCCESS;
  spill_pinset_t *ps = spill_pinset(); /* NULL (no memory): nothing pinned */
  int rc = 0, k;
  for (;;) {
    uint64_t seen = __atomic_load_n(&forgets, __ATOMIC_ACQUIRE);
    k = lookup_ranges(p, n, count, a, lo, len, SPILL_PIN_RANGES);
    if (!k) return CUDA_SUCCESS;
    pthread_mutex_lock(&spill_g.mu);
    if (forgets == seen) break;
    pthread_mutex_unlock(&spill_g.mu); /* a free raced with the lookup */
  }
  uint64_t now = ++clock_now;
  spill_pin_t *call = ps ? spill_pin_call_locked(ps) : NULL;
  for (int i = 0; i < k; i++) {
    int e = touch_locked(&a[i], lo[i], len[i], now, call ? &call[i] : NULL);
    if (e && !rc) rc = e;
  }
  if (ps) ps->n[ps->head] = k;
  if (!rc) enforce_locked(); /* over the limit: a warning was said */
  publish_locked();
  pthread_mutex_unlock(&spill_g.mu);
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
    uint64_t seen = __atomic_load_n(&forgets, __ATOMIC_ACQUIRE);
    if (reg_lookup(base, &a) || a.base != base || !spillable(&a)) return -EINVAL;
    pthread_mutex_lock(&spill_g.mu);
    if (forgets == seen) break;
    pthread_mutex_unlock(&spill_g.mu); /* a free raced with the lookup */
  }
  spill_rec_t *r = rec_get_locked(&a);
  int rc = r ? 0 : -ENOMEM;
  victim_t v[SPILL_BATCH];
  for (uint32_t i = first; r && i < first + count && i < r->nchunks && !rc;) {
    size_t k = 0;
    for (; i < first + count && i < r->nchunks && k < SPILL_BATCH; i++)
      if (r->slot[i] < 0 && !r->pins[i]) v[k++] = (victim_t){r, i, r->stamp[i]};
    if (k) rc = spill_batch_locked(v, k);
  }
  publish_locked();
  pthread_mutex_unlock(&spill_g.mu);
  return rc;
}

void spill_forget(CUdeviceptr base, size_t size) {
  spill_rec_t *r;
  (void)size;
  if (!spill_armed()) return;
  pthread_mutex_lock(&spill_g.mu);
  HASH_FIND(hh, recs, &base, sizeof base, r);
  if (r) rec_drop_locked(r);
  __atomic_store_n(&forgets, forgets + 1, __ATOMIC_RELEASE);
  publish_locked();
  pthread_mutex_unlock(&spill_g.mu);
}

void spill_drop_all_locked(void) {
  spill_rec_t *r, *tmp;
  HASH_ITER(hh, recs, r, tmp) rec_drop_locked(r);
  published = 0;
}

// ---- pins ----

/* Takes back one pin (the record may be gone, or be a new one at the same
 * address: the generation tells). */
static void unpin_locked(const spill_pin_t *p) {
  spill_rec_t *r;
  CUdeviceptr base = p->base;
  HASH_FIND(hh, recs, &base, sizeof base, r);
  if (!r || r->gen != p->gen) return;
  for (uint32_t i = p->first; i < p->end && i < r->nchunks; i++)
    if (r->pins[i]) r->pins[i]--;
}

spill_pin_t *spill_pin_call_locked(spill_pinset_t *ps) {
  ps->head = (ps->head + 1) % SPILL_PIN_CALLS;
  for (int i = 0; i < ps->n[ps->head]; i++)
    unpin_locked(&ps->p[ps->head][i]);
  ps->n[ps->head] = 0;
  return ps->p[ps->head];
}

void spill_unpin_all_locked(spill_pinset_t *ps) {
  for (int c = 0; c < SPILL_PIN_CALLS; c++) {
    for (int i = 0; i < ps->n[c]; i++)
      unpin_locked(&ps->p[c][i]);
    ps->n[c] = 0;
  }
}

void spill_op_done(void) {
  if (!spill_armed()) return;
  spill_pinset_t *ps = spill_pinset();
  if (!ps) return;
  pthread_mutex_lock(&spill_g.mu);
  spill_unpin_all_locked(ps);
  pthread_mutex_unlock(&spill_g.mu);
}

// ---- unseen launches (CUkernel handles) ----

CUresult spill_unseen_launch(void) {
  if (!spill_armed()) return CUDA_SUCCESS;
  if (__atomic_load_n(&unseen, __ATOMIC_RELAXED) && !spill_any()) return CUDA_SUCCESS;
  pthread_mutex_lock(&spill_g.mu);
  int first = !unseen, rc = 0;
  __atomic_store_n(&unseen, 1, __ATOMIC_RELAXED);
  spill_rec_t *r, *tmp;
  if (spill_g.nspilled) HASH_ITER(hh, recs, r, tmp) {
      int e = restore_range_locked(r, 0, r->nchunks);
      if (e && !rc) rc = e;
    }
  publish_locked();
  pthread_mutex_unlock(&spill_g.mu);
  if (first)
    VX_LOG_ONCE(VX_LOG_WARN,
                "a kernel launch whose pointer arguments vx cannot learn: spilled data "
                "restored, no more NVMe spills (data stays in host RAM)");
  if (rc)
    VX_LOG_ONCE(VX_LOG_ERROR, "restore from the NVMe swap failed (%s): the launch fails",
                strerror(-rc));
  return rc ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}
