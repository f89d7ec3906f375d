/* sim_managed.c: managed memory: per-2-MiB-chunk residency, device LRU,
 * kernel faults, prefetch, discard.  The bytes always live at the VA.
 *
 * Model (simple and honest):
 * - a chunk is UNPOP (never touched), HOST, DEVICE(d) or DISCARDED;
 *   ReadMostly chunks fetched for reading keep their host copy ("dup"):
 *   evicting them costs no transfer, a write drops the host copy;
 * - a kernel touching a chunk not on its device faults it in, in batches of
 *   up to VX_COST_FAULT_BATCH (32) chunks per simcuda_access call (FAULT_NS + bytes / link each);
 * - PreferredLocation=host: a kernel reads/writes such host chunks over the
 *   link, charged per byte touched, with no fault and no migration;
 * - AccessedBy(d): the mapping is kept, so the access takes no fault
 *   overhead, but the chunk still migrates (bytes / link are charged);
 * - thrash (cuda.h, PREFERRED_LOCATION): a chunk that memory pressure
 *   pushed off the device and a kernel faulted back SIM_THRASH_PIN times
 *   is pinned to host memory and read over the link from then on (no fault,
 *   no migration) until a prefetch moves it; one whose preferred location
 *   is a device is never pinned: it "will continue to thrash indefinitely";
 * - an UNPOP chunk the host has written (pages present, seen with mincore)
 *   counts as HOST; one nobody touched is populated where first used;
 * - host accesses to managed memory are direct loads and stores and are not
 *   observed: they neither migrate nor cost anything;
 * - a prefetch to a full device evicts LRU chunks (cuda.h, cuMemPrefetchAsync:
 *   "may evict pages from other cuMemAllocManaged allocations"): the
 *   write-backs run on the D2H engine, the copies in on the H2D engine, each
 *   copy after the write-back that made its room (issue 11). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "costs.h" /* policy/costs.h: VX_COST_FAULT_BATCH */
#include "sim_internal.h"

/* Faults back in after evictions before the driver pins a chunk to host
 * memory (the real driver's threshold is not documented; a high one gives
 * the no-preference case little relief: strict). */
#define SIM_THRASH_PIN 8

size_t sim_chunk_bytes(const sim_chunk *c) {
  size_t rest = c->a->size - c->idx * SIM_CHUNK;
  return rest < SIM_CHUNK ? rest : SIM_CHUNK;
}

static simcuda_stats_t *owner_st(const sim_chunk *c) { return &sim_g.dev[c->a->dev].st; }

static void backing_add(sim_chunk *c, int64_t delta) {
  simcuda_stats_t *st = owner_st(c);
  st->host_backing_bytes += (uint64_t)delta;
  if (st->host_backing_bytes > st->host_backing_peak) st->host_backing_peak = st->host_backing_bytes;
}

static void lru_remove(sim_dev *d, sim_chunk *c) {
  if (c->prev) c->prev->next = c->next; else d->lru_head = c->next;
  if (c->next) c->next->prev = c->prev; else d->lru_tail = c->prev;
  c->prev = c->next = NULL;
}

static void lru_push(sim_dev *d, sim_chunk *c) {
  c->prev = d->lru_tail;
  c->next = NULL;
  if (d->lru_tail) d->lru_tail->next = c; else d->lru_head = c;
  d->lru_tail = c;
}

void sim_lru_touch_locked(sim_dev *d, sim_chunk *c) {
  lru_remove(d, c);
  lru_push(d, c);
}

void sim_chunk_to_host_locked(sim_chunk *c) {
  if (c->state == CH_DEVICE) {
    sim_dev *d = &sim_g.dev[c->dev];
    lru_remove(d, c);
    d->resident_bytes -= sim_chunk_bytes(c);
    if (!c->dup) backing_add(c, (int64_t)sim_chunk_bytes(c));
    sim_stat_gauges_locked(d);
  } else if (c->state != CH_HOST) {
    backing_add(c, (int64_t)sim_chunk_bytes(c));
  }
  c->state = CH_HOST;
  c->dup = 0;
}

void sim_chunk_drop_locked(sim_chunk *c) {
  size_t cb = sim_chunk_bytes(c);
  if (c->state == CH_DEVICE) {
    sim_dev *d = &sim_g.dev[c->dev];
    lru_remove(d, c);
    d->resident_bytes -= cb;
    if (c->dup) backing_add(c, -(int64_t)cb);
    sim_stat_gauges_locked(d);
  } else if (c->state == CH_HOST) {
    backing_add(c, -(int64_t)cb);
  }
  c->state = CH_UNPOP;
  c->dup = 0;
  c->evicted = c->refaults = c->thrash_pin = 0;
}

/* Moves c (not on device d) to d; keep_host leaves a read-mostly duplicate. */
static void chunk_to_dev(sim_chunk *c, sim_dev *d, int keep_host) {
  size_t cb = sim_chunk_bytes(c);
  if (c->state == CH_DEVICE) sim_chunk_to_host_locked(c);
  if (c->state == CH_HOST && !keep_host) backing_add(c, -(int64_t)cb);
  c->dup = c->state == CH_HOST && keep_host;
  c->state = CH_DEVICE;
  c->dev = (int8_t)d->ord;
  d->resident_bytes += cb;
  lru_push(d, c);
  sim_stat_gauges_locked(d);
}

static int host_populated(const sim_chunk *c) {
  unsigned char vec[SIM_CHUNK / 4096];
  size_t cb = sim_chunk_bytes(c);
  void *p = (void *)(uintptr_t)(c->a->base + c->idx * SIM_CHUNK);
  if (mincore(p, cb, vec) != 0) return 0;
  for (size_t i = 0; i < (cb + 4095) / 4096; i++)
    if (vec[i] & 1) return 1;
  return 0;
}

/* UNPOP chunks the host has written become HOST. */
static void settle_unpop(sim_chunk *c) {
  if (c->state == CH_UNPOP && host_populated(c)) sim_chunk_to_host_locked(c);
}

SIM_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  SIM_ENTER_INIT(cuMemAllocManaged);
  SIM_CAPTURE_UNSAFE();
  if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
    return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  size_t span = (bytesize + SIM_CHUNK - 1) & ~(SIM_CHUNK - 1);
  sim_alloc *a = calloc(1, sizeof *a);
  sim_chunk *ch = calloc(span / SIM_CHUNK, sizeof *ch);
  if (!a || !ch) {
    free(a);
    free(ch);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->kind = SIM_MANAGED;
  a->ctx = c;
  a->dev = c->dev;
  a->size = bytesize;
  a->span = span;
  a->flags = flags;
  a->chunks = ch;
  a->nchunks = span / SIM_CHUNK;
  static unsigned long long ids = 1ull << 40;
  a->id = __atomic_fetch_add(&ids, 1, __ATOMIC_RELAXED);
  for (size_t i = 0; i < a->nchunks; i++) {
    ch[i].a = a;
    ch[i].idx = i;
    ch[i].dev = ch[i].pref_dev = ch[i].pf_dev = -2;
  }
  sim_lock();
  a->base = sim_va_alloc_locked(span, SIM_CHUNK);
  void *m = a->base ? mmap((void *)(uintptr_t)a->base, span, sim_data_prot(),
                           MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                    : MAP_FAILED;
  if (m == MAP_FAILED || sim_map_insert_locked(a) != 0) {
    if (a->base) sim_va_free_locked(a->base, span);
    sim_unlock();
    free(ch);
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  sim_unlock();
  *dptr = a->base;
  return CUDA_SUCCESS;
}

// ---- kernel accesses ----

typedef struct fault_batch {
  sim_chunk *c[VX_COST_FAULT_BATCH];
  int n;
} fault_batch;

static void flush_batch(fault_batch *b, sim_dev *d, int mode, sim_kcost *kc) {
  if (!b->n) return;
  uint64_t bytes = 0;
  for (int i = 0; i < b->n; i++) {
    sim_chunk *c = b->c[i];
    size_t cb = sim_chunk_bytes(c);
    int64_t ev = sim_make_room_locked(d, cb);
    if (ev < 0) { /* device full of native memory: served over the link */
      sim_link_add(kc, cb, mode);
      continue;
    }
    kc->stall_ns += (uint64_t)ev;
    chunk_to_dev(c, d, c->read_mostly && !(mode & SIMCUDA_WRITE));
    bytes += cb;
    d->st.faults++;
  }
  d->st.bytes_fault_htod += bytes;
  d->st.fault_batches++;
  kc->stall_ns += sim_g.fault_ns + sim_ns_for_bytes(bytes, sim_g.link_gbps);
  b->n = 0;
}

static void populate_on(sim_chunk *c, sim_dev *d, int mode, sim_kcost *kc) {
  int64_t ev = sim_make_room_locked(d, sim_chunk_bytes(c));
  if (ev < 0) { /* nowhere to put it: first touch lands on the host */
    sim_chunk_to_host_locked(c);
    sim_link_add(kc, sim_chunk_bytes(c), mode);
    return;
  }
  kc->stall_ns += (uint64_t)ev;
  if (c->state == CH_DISCARDED) c->state = CH_UNPOP;
  chunk_to_dev(c, d, 0);
}

/* A kernel on d is about to fault host chunk c in.  Returns 1 when the
 * driver's thrash resolution pins it to host memory instead. */
static int thrash_pins(sim_chunk *c, sim_dev *d) {
  if (!c->evicted) return 0;
  c->evicted = 0;
  if (c->refaults < 255) c->refaults++;
  if (c->pref == PREF_DEV || c->refaults < SIM_THRASH_PIN) return 0;
  c->thrash_pin = 1;
  d->st.thrash_pins++;
  return 1;
}

static size_t overlap(const sim_chunk *c, size_t off, size_t n) {
  size_t lo = c->idx * SIM_CHUNK, hi = lo + sim_chunk_bytes(c);
  size_t a = off > lo ? off : lo, b = off + n < hi ? off + n : hi;
  return b > a ? b - a : 0;
}

int sim_managed_touch_locked(sim_alloc *a, size_t off, size_t n, int mode, int dev,
                             sim_kcost *kc) {
  size_t first = off / SIM_CHUNK, last = (off + n - 1) / SIM_CHUNK;
  sim_dev *d = &sim_g.dev[dev];
  if (mode & SIMCUDA_READ)
    for (size_t i = first; i <= last; i++)
      if (a->chunks[i].state == CH_DISCARDED) return -EFAULT;
  kc->bytes += n;
  fault_batch b = {.n = 0};
  size_t upgrades = 0; /* writes to read-duplicated chunks */
  for (size_t i = first; i <= last; i++) {
    sim_chunk *c = &a->chunks[i];
    settle_unpop(c);
    if ((c->state == CH_UNPOP || c->state == CH_DISCARDED) && c->pref == PREF_HOST) {
      /* cuda.h: with a preferred location, a faulting page is placed there
       * (host pages are then mapped for the device): first touch populates
       * host memory, and the kernel reaches it over the link. */
      if (c->state == CH_DISCARDED) c->state = CH_UNPOP;
      sim_chunk_to_host_locked(c);
      sim_link_add(kc, overlap(c, off, n), mode);
      continue;
    }
    if (c->state == CH_UNPOP || c->state == CH_DISCARDED) {
      populate_on(c, d, mode, kc);
      continue;
    }
    if (c->state == CH_DEVICE && c->dev == dev) {
      sim_lru_touch_locked(d, c);
      if ((mode & SIMCUDA_WRITE) && c->dup) {
        c->dup = 0; /* a write invalidates the read-mostly host copy */
        backing_add(c, -(int64_t)sim_chunk_bytes(c));
        upgrades++;
      }
      continue;
    }
    if (c->state == CH_HOST && (c->pref == PREF_HOST || c->thrash_pin || thrash_pins(c, d))) {
      sim_link_add(kc, overlap(c, off, n), mode);
      continue;
    }
    if (c->accessed_by & (1u << dev)) {
      size_t cb = sim_chunk_bytes(c);
      int64_t ev = sim_make_room_locked(d, cb);
      if (ev < 0) {
        sim_link_add(kc, overlap(c, off, n), mode);
        continue;
      }
      kc->stall_ns += (uint64_t)ev + sim_ns_for_bytes(cb, sim_g.link_gbps);
      d->st.bytes_fault_htod += cb;
      chunk_to_dev(c, d, c->read_mostly && !(mode & SIMCUDA_WRITE));
      continue;
    }
    b.c[b.n++] = c;
    if (b.n == VX_COST_FAULT_BATCH) flush_batch(&b, d, mode, kc);
  }
  flush_batch(&b, d, mode, kc);
  if (upgrades) {
    /* A read-duplicated page is mapped read-only on every processor
     * (cuda.h, CU_MEM_ADVISE_SET_READ_MOSTLY: "a write ... will invalidate
     * all copies except the one where the write occurred"): the write
     * faults, the driver revokes the other copies and makes this one
     * writable.  No data moves; each batch of such faults costs a fault's
     * service time, as a migration's does. */
    uint64_t batches = (upgrades + VX_COST_FAULT_BATCH - 1) / VX_COST_FAULT_BATCH;
    kc->stall_ns += batches * sim_g.fault_ns;
    d->st.faults += upgrades;
    d->st.fault_batches += batches;
  }
  return 0;
}

int sim_managed_copy_touch_locked(sim_alloc *a, size_t off, size_t n, int write) {
  if (n == 0) return 0;
  size_t first = off / SIM_CHUNK, last = (off + n - 1) / SIM_CHUNK;
  for (size_t i = first; i <= last; i++)
    if (!write && a->chunks[i].state == CH_DISCARDED) return -EFAULT;
  for (size_t i = first; i <= last; i++) {
    sim_chunk *c = &a->chunks[i];
    if (c->state == CH_DISCARDED || (write && c->state == CH_UNPOP)) sim_chunk_to_host_locked(c);
    else if (write && c->state == CH_DEVICE && c->dup) {
      c->dup = 0;
      backing_add(c, -(int64_t)sim_chunk_bytes(c));
    }
  }
  return 0;
}

// ---- prefetch and discard (run on stream workers) ----

/* The copy engines a prefetch drives, from the time it may start.  The link
 * is full duplex: a write-back that makes room runs on the D2H engine (the
 * driver migrates the victim to host memory) while earlier chunks still
 * stream in on the H2D engine; a chunk's own copy in waits for both its
 * turn on the H2D engine and the write-back that freed its room. */
typedef struct pf_clock {
  sim_dev *d;
  uint64_t ready, end;
} pf_clock;

/* Room for cb bytes on d: evicts, charging write-back to D2H; returns when
 * the room is usable, or UINT64_MAX when native memory leaves none. */
static uint64_t pf_room(pf_clock *k, size_t cb) {
  int64_t ev = sim_make_room_locked(k->d, cb);
  if (ev < 0) return UINT64_MAX;
  if (ev == 0) return k->ready;
  uint64_t end = sim_eng_run(&k->d->d2h, k->ready, (uint64_t)ev);
  if (end > k->end) k->end = end;
  return end;
}

/* One copy of cb bytes on engine g, no earlier than `after`. */
static void pf_copy(pf_clock *k, sim_engine *g, uint64_t after, size_t cb) {
  uint64_t end = sim_eng_run(g, after, sim_ns_for_bytes(cb, sim_g.link_gbps));
  if (end > k->end) k->end = end;
}

static void prefetch_to_dev(sim_chunk *c, pf_clock *k) {
  sim_dev *d = k->d;
  settle_unpop(c);
  c->evicted = c->refaults = c->thrash_pin = 0; /* moved on purpose: no thrash */
  if (c->state == CH_DEVICE && c->dev == d->ord) {
    sim_lru_touch_locked(d, c);
    return;
  }
  size_t cb = sim_chunk_bytes(c);
  uint64_t room = pf_room(k, cb);
  if (room == UINT64_MAX) return; /* no room left by native memory: stays where it is */
  if (room > k->end) k->end = room;
  if (c->state == CH_UNPOP || c->state == CH_DISCARDED) {
    c->state = CH_UNPOP;
    chunk_to_dev(c, d, 0);
    return;
  }
  d->st.bytes_prefetch_htod += cb;
  chunk_to_dev(c, d, c->read_mostly);
  pf_copy(k, &d->h2d, room, cb);
}

static void prefetch_to_host(sim_chunk *c, pf_clock *k) {
  if (c->state != CH_DEVICE) {
    settle_unpop(c);
    if (c->state != CH_HOST) sim_chunk_to_host_locked(c);
    return;
  }
  size_t cb = sim_chunk_bytes(c);
  if (c->read_mostly) {
    /* cuda.h: a prefetch of a ReadMostly range "will create a read-only
     * copy of the data on the destination processor"; NVIDIA's UVM driver
     * makes that copy and revokes no other (uvm_migrate.c: read-duplicate
     * ranges migrate with make_resident_read_duplicate).  So the device
     * keeps its copy and its memory: only pressure drops a duplicate (free,
     * sim_make_room).  A chunk written since (no host copy) is copied down. */
    if (!c->dup) {
      sim_dev *d = &sim_g.dev[c->dev];
      d->st.bytes_prefetch_dtoh += cb;
      pf_copy(k, &d->d2h, k->ready, cb);
      backing_add(c, (int64_t)cb);
      c->dup = 1;
    }
    return;
  }
  int copy = !c->dup;
  sim_dev *d = &sim_g.dev[c->dev];
  if (copy) d->st.bytes_prefetch_dtoh += cb;
  sim_chunk_to_host_locked(c);
  if (copy) pf_copy(k, &d->d2h, k->ready, cb);
}

uint64_t sim_prefetch_locked(CUdeviceptr p, size_t n, CUmemLocation loc, int sdev,
                             uint64_t ready) {
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  int to_dev = loc.type == CU_MEM_LOCATION_TYPE_DEVICE;
  pf_clock k = {.d = &sim_g.dev[to_dev ? loc.id : sdev], .ready = ready, .end = ready};
  if (!a || a->kind != SIM_MANAGED || n == 0) return ready;
  size_t off = (size_t)(p - a->base);
  if (off + n > a->size) n = a->size - off;
  for (size_t i = off / SIM_CHUNK; i <= (off + n - 1) / SIM_CHUNK; i++) {
    sim_chunk *c = &a->chunks[i];
    if (to_dev) {
      prefetch_to_dev(c, &k);
      c->pf_type = CU_MEM_LOCATION_TYPE_DEVICE;
      c->pf_dev = (int8_t)loc.id;
    } else {
      prefetch_to_host(c, &k);
      c->pf_type = CU_MEM_LOCATION_TYPE_HOST;
      c->pf_dev = -1;
    }
  }
  sim_note_end_locked(k.d, k.end);
  return k.end;
}

/* Whole chunks inside the range lose their contents and backing; a partly
 * covered chunk keeps its bytes ("indeterminate" allows the old value). */
void sim_discard_locked(CUdeviceptr p, size_t n) {
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  if (!a || a->kind != SIM_MANAGED || n == 0) return;
  size_t off = (size_t)(p - a->base);
  size_t end = off + n > a->size ? a->size : off + n;
  for (size_t i = (off + SIM_CHUNK - 1) / SIM_CHUNK; i < a->nchunks; i++) {
    sim_chunk *c = &a->chunks[i];
    size_t lo = i * SIM_CHUNK, cb = sim_chunk_bytes(c);
    if (lo + cb > end) break;
    sim_chunk_drop_locked(c);
    madvise((void *)(uintptr_t)(a->base + lo), (cb + 4095) & ~(size_t)4095, MADV_DONTNEED);
    c->state = CH_DISCARDED;
    owner_st(c)->discards++;
  }
}

// ---- entry points ----

/* A managed range [p, p+n) inside one allocation, or NULL. */
static sim_alloc *managed_range_locked(CUdeviceptr p, size_t n) {
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  if (!a || a->kind != SIM_MANAGED || n == 0 || p + n > a->base + a->size) return NULL;
  return a;
}

static int loc_ok(CUmemLocation loc) {
  if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE) return loc.id >= 0 && loc.id < sim_g.ndev;
  return loc.type == CU_MEM_LOCATION_TYPE_HOST || loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static CUresult enqueue_prefetch(CUdeviceptr p, size_t n, CUmemLocation loc, sim_stream *s) {
  if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE) loc.type = CU_MEM_LOCATION_TYPE_HOST;
  sim_op *op = sim_op_new(OP_PREFETCH);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.pf.p = p;
  op->u.pf.n = n;
  op->u.pf.loc = loc;
  return sim_enqueue(s, op);
}

static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, CUstream h,
                         int ptds) {
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE && (loc.id < 0 || loc.id >= sim_g.ndev))
    return CUDA_ERROR_INVALID_DEVICE;
  /* cuda.h: a device destination, and the stream's device, must have
   * CONCURRENT_MANAGED_ACCESS (SIMCUDA_CONCURRENT_MANAGED=0: none has). */
  if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE && !sim_g.concurrent_managed)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!loc_ok(loc)) return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  sim_alloc *a = managed_range_locked(p, n);
  sim_unlock();
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  return enqueue_prefetch(p, n, loc, s);
}

SIM_API CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc,
                                       unsigned int flags, CUstream h) {
  SIM_ENTER_INIT(cuMemPrefetchAsync_v2);
  return prefetch(p, n, loc, flags, h, 0);
}

SIM_API CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, CUmemLocation loc,
                                            unsigned int flags, CUstream h) {
  SIM_ENTER_INIT(cuMemPrefetchAsync_v2_ptsz);
  return prefetch(p, n, loc, flags, h, 1);
}

static CUmemLocation loc_of_device(CUdevice d) {
  CUmemLocation l;
  l.type = d == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  l.id = d == CU_DEVICE_CPU ? 0 : d;
  return l;
}

SIM_API CUresult cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice dst, CUstream h) {
  SIM_ENTER_INIT(cuMemPrefetchAsync);
  return prefetch(p, n, loc_of_device(dst), 0, h, 0);
}

SIM_API CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice dst, CUstream h) {
  SIM_ENTER_INIT(cuMemPrefetchAsync_ptsz);
  return prefetch(p, n, loc_of_device(dst), 0, h, 1);
}

/* cuda.h for both batch calls: "Must not be legacy NULL stream".  NULL is
 * the legacy stream except in a _ptsz variant (there it is the per-thread
 * stream, which is allowed, as is CU_STREAM_PER_THREAD). */
static int legacy_stream(CUstream h, int ptds) {
  return h == CU_STREAM_LEGACY || (!h && !ptds);
}

static CUresult prefetch_batch(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                               CUmemLocation *locs, size_t *locidx, size_t nlocs,
                               unsigned long long flags, CUstream h, int ptds) {
  if (!dptrs || !sizes || count == 0 || !locs || !locidx || nlocs == 0 || nlocs > count ||
      locidx[0] != 0 || flags != 0 || legacy_stream(h, ptds))
    return CUDA_ERROR_INVALID_VALUE;
  /* cuda.h: every device must have CONCURRENT_MANAGED_ACCESS "otherwise the
   * API will return an error". */
  if (!sim_g.concurrent_managed) return CUDA_ERROR_NOT_SUPPORTED;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  sim_lock();
  for (size_t i = 0; i < count; i++)
    if (!managed_range_locked(dptrs[i], sizes[i])) r = CUDA_ERROR_INVALID_VALUE;
  for (size_t j = 0; j < nlocs; j++)
    if (!loc_ok(locs[j]) || locidx[j] >= count || (j && locidx[j] <= locidx[j - 1]))
      r = CUDA_ERROR_INVALID_VALUE;
  sim_unlock();
  if (r != CUDA_SUCCESS) return r;
  size_t j = 0;
  for (size_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
    while (j + 1 < nlocs && locidx[j + 1] <= i) j++;
    r = enqueue_prefetch(dptrs[i], sizes[i], locs[j], s);
  }
  return r;
}

SIM_API CUresult cuMemPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                         CUmemLocation *locs, size_t *locidx, size_t nlocs,
                                         unsigned long long flags, CUstream h) {
  SIM_ENTER_INIT(cuMemPrefetchBatchAsync);
  return prefetch_batch(dptrs, sizes, count, locs, locidx, nlocs, flags, h, 0);
}

SIM_API CUresult cuMemPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                              CUmemLocation *locs, size_t *locidx, size_t nlocs,
                                              unsigned long long flags, CUstream h) {
  SIM_ENTER_INIT(cuMemPrefetchBatchAsync_ptsz);
  return prefetch_batch(dptrs, sizes, count, locs, locidx, nlocs, flags, h, 1);
}

static CUresult discard_batch(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                              unsigned long long flags, CUstream h, int ptds) {
  if (!dptrs || !sizes || count == 0 || flags != 0 || legacy_stream(h, ptds))
    return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  sim_lock();
  for (size_t i = 0; i < count; i++)
    if (!managed_range_locked(dptrs[i], sizes[i])) r = CUDA_ERROR_INVALID_VALUE;
  sim_unlock();
  for (size_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
    sim_op *op = sim_op_new(OP_DISCARD);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.pf.p = dptrs[i];
    op->u.pf.n = sizes[i];
    r = sim_enqueue(s, op);
  }
  return r;
}

SIM_API CUresult cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                        unsigned long long flags, CUstream h) {
  SIM_ENTER_INIT(cuMemDiscardBatchAsync);
  return discard_batch(dptrs, sizes, count, flags, h, 0);
}

SIM_API CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                             unsigned long long flags, CUstream h) {
  SIM_ENTER_INIT(cuMemDiscardBatchAsync_ptsz);
  return discard_batch(dptrs, sizes, count, flags, h, 1);
}

// ---- advice and range attributes ----

static void advise_chunk(sim_chunk *c, CUmem_advise adv, CUmemLocation loc) {
  int host = loc.type != CU_MEM_LOCATION_TYPE_DEVICE;
  switch (adv) {
  case CU_MEM_ADVISE_SET_READ_MOSTLY: c->read_mostly = 1; break;
  case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
    /* cuda.h: the duplicates collapse into one copy, at the preferred
     * location if the page has one and a duplicate is there, else at a
     * location "chosen arbitrarily": here the device copy (it keeps the
     * device's memory in use, never making room look freer than it is). */
    c->read_mostly = 0;
    if (c->dup && c->pref == PREF_HOST) {
      sim_chunk_to_host_locked(c); /* the host copy stays; the device's goes, with no copy */
    } else if (c->dup) {
      c->dup = 0;
      backing_add(c, -(int64_t)sim_chunk_bytes(c));
    }
    break;
  case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
    c->pref = host ? PREF_HOST : PREF_DEV;
    c->pref_dev = (int8_t)(host ? -1 : loc.id);
    if (!host) c->thrash_pin = 0; /* overrides the thrash resolution */
    break;
  case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
    c->pref = PREF_NONE;
    c->pref_dev = -2;
    break;
  case CU_MEM_ADVISE_SET_ACCESSED_BY:
    if (!host) c->accessed_by |= 1u << loc.id;
    break;
  case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
    if (!host) c->accessed_by &= ~(1u << loc.id);
    break;
  }
}

static CUresult advise(CUdeviceptr p, size_t n, CUmem_advise adv, CUmemLocation loc) {
  sim_ctx *cx;
  CUresult r = sim_ctx_current(&cx);
  if (r != CUDA_SUCCESS) return r;
  if (adv < CU_MEM_ADVISE_SET_READ_MOSTLY || adv > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
    return CUDA_ERROR_INVALID_VALUE;
  int needs_loc = adv >= CU_MEM_ADVISE_SET_PREFERRED_LOCATION;
  if (needs_loc && loc.type == CU_MEM_LOCATION_TYPE_DEVICE && (loc.id < 0 || loc.id >= sim_g.ndev))
    return CUDA_ERROR_INVALID_DEVICE;
  if (needs_loc && !loc_ok(loc)) return CUDA_ERROR_INVALID_VALUE;
  /* cuda.h: a GPU as preferred location or accessor needs
   * CONCURRENT_MANAGED_ACCESS there. */
  if ((adv == CU_MEM_ADVISE_SET_ACCESSED_BY || adv == CU_MEM_ADVISE_SET_PREFERRED_LOCATION) &&
      loc.type == CU_MEM_LOCATION_TYPE_DEVICE && !sim_g.concurrent_managed)
    return CUDA_ERROR_INVALID_DEVICE;
  sim_lock();
  sim_alloc *a = managed_range_locked(p, n);
  if (a) {
    size_t off = (size_t)(p - a->base);
    for (size_t i = off / SIM_CHUNK; i <= (off + n - 1) / SIM_CHUNK; i++)
      advise_chunk(&a->chunks[i], adv, loc);
  }
  sim_unlock();
  return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise adv, CUmemLocation loc) {
  SIM_ENTER_INIT(cuMemAdvise_v2);
  SIM_CAPTURE_UNSAFE();
  return advise(p, n, adv, loc);
}

SIM_API CUresult cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise adv, CUdevice dev) {
  SIM_ENTER_INIT(cuMemAdvise);
  SIM_CAPTURE_UNSAFE();
  return advise(p, n, adv, loc_of_device(dev));
}

/* One value for the whole range, or `mixed` when chunks disagree. */
static int range_value(sim_alloc *a, size_t off, size_t n, int attr, int mixed) {
  int v = mixed, first = 1;
  for (size_t i = off / SIM_CHUNK; i <= (off + n - 1) / SIM_CHUNK; i++) {
    sim_chunk *c = &a->chunks[i];
    int x;
    switch (attr) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: x = c->read_mostly; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      x = c->pref == PREF_NONE ? CU_DEVICE_INVALID : c->pref == PREF_HOST ? CU_DEVICE_CPU : c->pref_dev;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
      x = c->pref == PREF_NONE ? CU_MEM_LOCATION_TYPE_INVALID
          : c->pref == PREF_HOST ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: x = c->pref == PREF_DEV ? c->pref_dev : 0; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
      x = c->pf_type == CU_MEM_LOCATION_TYPE_DEVICE ? c->pf_dev
          : c->pf_type == CU_MEM_LOCATION_TYPE_HOST ? CU_DEVICE_CPU : CU_DEVICE_INVALID;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: x = c->pf_type; break;
    default: x = c->pf_type == CU_MEM_LOCATION_TYPE_DEVICE ? c->pf_dev : 0; break;
    }
    if (first) v = x;
    else if (v != x) return mixed;
    first = 0;
  }
  return v;
}

SIM_API CUresult cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attr,
                                        CUdeviceptr p, size_t n) {
  SIM_ENTER_INIT(cuMemRangeGetAttribute);
  if (!data || attr < CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY ||
      attr > CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID)
    return CUDA_ERROR_INVALID_VALUE;
  if (attr == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY ? (dataSize == 0 || dataSize % 4) : dataSize != 4)
    return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  sim_alloc *a = managed_range_locked(p, n);
  if (!a) {
    sim_unlock();
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t off = (size_t)(p - a->base);
  if (attr == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY) {
    uint32_t all = ~0u;
    for (size_t i = off / SIM_CHUNK; i <= (off + n - 1) / SIM_CHUNK; i++) all &= a->chunks[i].accessed_by;
    int *out = data;
    size_t k = 0;
    for (int d = 0; d < sim_g.ndev && k < dataSize / 4; d++)
      if (all & (1u << d)) out[k++] = d;
    for (; k < dataSize / 4; k++) out[k] = CU_DEVICE_INVALID;
  } else {
    int mixed = attr == CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY ? 0
                : (attr == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE ||
                   attr == CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE)
                    ? CU_MEM_LOCATION_TYPE_INVALID
                    : CU_DEVICE_INVALID;
    *(int *)data = range_value(a, off, n, attr, mixed);
  }
  sim_unlock();
  return CUDA_SUCCESS;
}
