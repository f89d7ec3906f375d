/* Placement of allocations in tiers and frees routed by what the pointer
 * is; managed memory freed with cuMemFreeAsync goes through defer.c. */
#include "place.h"

#include <errno.h>

#include "budget.h"
#include "capture.h"
#include "defer.h"
#include "exec.h"
#include "move.h"
#include "registry.h"
#include "spill.h"
#include "driver.h"
#include "ctr.h"
#include "log.h"
#include "options.h"

// ---- accounting ----

static const struct {
  int alloc_ctr, bytes_ctr;
} tier_ctrs[] = {
    [VX_TIER_NATIVE] = {VX_CTR_alloc_native, VX_CTR_native_bytes},
    [VX_TIER_MANAGED] = {VX_CTR_alloc_managed, VX_CTR_managed_bytes},
    [VX_TIER_HOST] = {VX_CTR_alloc_host_static, VX_CTR_host_tier_bytes},
    [VX_TIER_APP_MANAGED] = {VX_CTR_alloc_app_managed, VX_CTR_app_managed_bytes},
};

static uint64_t next_id = 1; /* atomic: allocation ids, never reused */

/* Registers and counts an allocation.  Returns 0, or -ENOMEM when the
 * registry cannot hold it: then nothing is counted and its budget charge is
 * returned (an untracked pointer's free goes to the driver untouched). */
static int track(vx_alloc_info_t *a, vx_alloc_info_t *placed) {
  a->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
  if (reg_add(a)) {
    VX_LOG_ONCE(VX_LOG_WARN, "out of memory for bookkeeping: some allocations are not tracked");
    budget_release(a->dev, a->charged);
    a->charged = 0;
    return -ENOMEM;
  }
  ctr_add(a->dev, tier_ctrs[a->tier].alloc_ctr, 1);
  ctr_cur_add(a->dev, tier_ctrs[a->tier].bytes_ctr, a->size);
  exec_alloc(a);
  if (placed) *placed = *a;
  return 0;
}

/* vx's own managed memory: what VX_HOST_MAX caps (budget_host_try_commit). */
static int host_backed(int tier) {
  return tier == VX_TIER_MANAGED || tier == VX_TIER_HOST;
}

/* The memory is gone: its bytes leave the tier and the budget. */
static void untrack_bytes(const vx_alloc_info_t *a) {
  ctr_cur_sub(a->dev, tier_ctrs[a->tier].bytes_ctr, a->size);
  budget_release(a->dev, a->charged);
  if (host_backed(a->tier)) budget_host_uncommit(a->size);
}

/* A still-allocated pointer goes back into the registry (its free failed);
 * if even that fails vx forgets it, and its bytes leave the counters. */
static void retrack(const vx_alloc_info_t *a) {
  if (reg_add(a)) untrack_bytes(a);
}

// ---- placement ----

/* Advice for vx's managed memory, as cuda.h documents it working under
 * oversubscription.
 * Over budget (VX_TIER_MANAGED): none.  No PreferredLocation = the device:
 * cuda.h says such pages, when they thrash under memory pressure, "will
 * continue to thrash indefinitely", because a device preference overrides
 * the driver's thrash resolution (pinning a bouncing page to host memory and
 * mapping it).  No AccessedBy either: it maps the pages instead of
 * migrating them on a miss, so reused data would be read over the bus every
 * time.  Pages migrate on fault or ahead of it (the predictor's prefetch),
 * and the driver may pin what bounces.
 * Host tier (VX_POLICY=static, GreenBoost-style): PreferredLocation = host
 * plus AccessedBy = device: pages stay in host RAM, the GPU reads them over
 * the bus and nothing migrates (a host preference leaves thrash resolution
 * alone: there is nothing to bounce). */
static void advise(CUdeviceptr p, size_t size, int dev, int tier) {
  CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  if (tier != VX_TIER_HOST) return;
  vx_capture_relax_t rx; /* advice is a potentially unsafe call: legal when relaxed */
  vx_capture_relax_begin(&rx);
  CUresult r = move_advise(p, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host);
  if (r == CUDA_SUCCESS) r = move_advise(p, size, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu);
  vx_capture_relax_end(&rx);
  char eb[VX_CU_ERR_TEXT];
  if (r != CUDA_SUCCESS)
    VX_LOG_ONCE(VX_LOG_INFO, "cuMemAdvise failed (%s): host-tier memory left unadvised",
                vx_cu_err(r, eb));
}

/* The residency manager's rule (README "How it works"): the device budget
 * holds native bytes and the managed bytes resident on the device, and
 * under VX_POLICY=predict native allocations stop short of the budget by
 * VX_MOVABLE, the room the predictor stages movable chunks in
 * (exec_capacity gives it the budget; native bytes count against it).
 * First come stays native: in a training program those are the weights and
 * optimiser state, used every iteration.  A program within budget -
 * VX_MOVABLE is fully native; one within the budget has movable data that
 * stays resident (nothing evicts it); past the budget the predictor
 * streams the movable part through its room.  Why a fixed share rather
 * than native-first: native bytes never move, so with native-first the
 * room left for what does move is whatever the last native allocation
 * left, often nothing, and the predictor has no place to prefetch into.
 * For a cyclic working set of T bytes the least traffic per cycle is
 * T - budget either way (native N never misses, the room M holds M of the
 * T - N that cycle), so the share costs no traffic and buys the overlap.
 * Why three quarters: working sets are not uniform cycles.  First come is
 * also the optimiser state a training step touches once per iteration, or
 * one model of two sharing the device, and as native it holds room the
 * predictor would give to data used sooner.  Measured live on the
 * simulator at 2x (scripts/bench-predictor.sh, predict against the better
 * of plain UM and demand, summed over its eight programs): 6.21 at a half,
 * 6.09 at 65%, 5.99 at 75%, 6.05 at 85%, 6.03 with none native; at 75%
 * two-stream gains 11%, transformer-train 9%, moe 13%, prog_train loses
 * 6%.  A program within a quarter of the budget stays fully native. */
#define MOVABLE_PREDICT_PCT 75 /* tools/replay_engine.c: LIVE_MOVABLE_PCT */

static uint64_t movable_room(int dev) {
  uint64_t lim = budget_limit(dev);
  uint64_t room = vx_opt.MOVABLE.set ? vx_size_resolve(&vx_opt.MOVABLE, lim)
                  : exec_active()    ? lim / 100 * MOVABLE_PREDICT_PCT
                                     : 0; /* demand, static without a limit: native while
                                        * the budget has room */
  /* Under predict (and demand or static kept inside a VX_DEVICE_LIMIT,
   * whose paging needs the same room), by default, at least the biggest launch seen so
   * far: the room is where a launch's data must all be at once, and one
   * that does not fit it faults against itself (vx play of cnn: its
   * largest launches reach 0.6 of the device) */
  if (!vx_opt.MOVABLE.set && exec_active() && exec_launch_max(dev) > room)
    room = exec_launch_max(dev);
  return room > lim ? lim : room;
}

static int decide(int dev, size_t size, uint64_t *charged, uint8_t *held) {
  uint64_t phys = budget_physical(dev);
  *charged = 0;
  *held = 0;
  if (!budget_managed_ok(dev)) {
    /* No concurrent managed access: native, as without vx (said once). */
    budget_charge(dev, size);
    *charged = size;
    return VX_TIER_NATIVE;
  }
  /* VX_IPC=native: neither the budget nor the static policy moves cuMemAlloc
   * memory out of the device (IPC handles need native memory); only the
   * driver's own OOM does (place_alloc's fallback). */
  if (vx_opt.POLICY == VX_POLICY_STATIC && vx_opt.IPC != VX_IPC_NATIVE &&
      size >= vx_size_resolve(&vx_opt.STATIC_MIN, phys))
    return VX_TIER_HOST;
  /* Native memory takes its room at once; the policy's chunks leave only
   * when evictions have run.  exec_native_claim makes the room first where
   * they hold it (the allocation waits): native, it would put the device
   * over its budget until the next plan's evictions went down. */
  if (size <= vx_size_resolve(&vx_opt.NATIVE_MAX, phys) || vx_opt.IPC == VX_IPC_NATIVE) {
    budget_charge(dev, size);
    *charged = size;
    *held = exec_native_claim(dev, size) > 0; /* native whatever room there is */
    return VX_TIER_NATIVE;
  }
  if (budget_try_charge_below(dev, size, movable_room(dev))) {
    int c = exec_native_claim(dev, size);
    if (c < 0) { /* no room can be made: movable, not over the budget */
      budget_release(dev, size);
      return VX_TIER_MANAGED;
    }
    *charged = size;
    *held = c > 0;
    return VX_TIER_NATIVE;
  }
  return VX_TIER_MANAGED;
}

/* VX_LOG=info: the first allocation of a device that is not native, once
 * per device: the moment vx starts working for the program. */
static void say_first_movable(int dev, const vx_alloc_info_t *a, int fell_back) {
  static int said[VX_MAX_DEVICES];
  if (vx_log_level() < VX_LOG_INFO || dev < 0 || dev >= VX_MAX_DEVICES ||
      __atomic_exchange_n(&said[dev], 1, __ATOMIC_RELAXED))
    return;
  char sz[VX_SIZE_TEXT], used[VX_SIZE_TEXT], lim[VX_SIZE_TEXT];
  vx_size_text(a->size, sz);
  if (a->tier == VX_TIER_HOST)
    vx_log(VX_LOG_INFO,
           "device %d: first allocation in host memory (%s; VX_POLICY=static puts those of at "
           "least VX_STATIC_MIN there): kernels read it over the bus",
           dev, sz);
  else if (fell_back)
    vx_log(VX_LOG_INFO,
           "device %d: the driver ran out of memory below vx's budget: this %s allocation "
           "and the next ones that do not fit are managed memory",
           dev, sz);
  else
    vx_log(VX_LOG_INFO,
           "device %d: %s native of a %s budget: this %s allocation and the next ones past it "
           "are managed memory, %s",
           dev, vx_size_text(budget_used(dev), used), vx_size_text(budget_limit(dev), lim), sz,
           exec_planning() ? "staged on the device ahead of use by the predictor"
           : exec_active() ? "paged in on demand, inside the budget"
                           : "paged in on demand by the driver");
}

static int place_device(int *dev) {
  if (vx_current_device(dev)) return -1;
  return budget_device_init(*dev, 0, &vx_opt) ? -1 : 0;
}

CUresult place_alloc(CUdeviceptr *dptr, size_t size, place_native_fn native, void *ctx,
                     vx_alloc_info_t *placed) {
  int dev;
  *placed = (vx_alloc_info_t){0};
  if (!dptr || !size || place_device(&dev))
    return native(dptr, ctx); /* the driver's own answer, untracked */
  place_drain();
  vx_alloc_info_t a = {.size = size, .dev = dev};
  a.tier = decide(dev, size, &a.charged, &a.held);
  CUresult fallback_from = CUDA_SUCCESS;
  if (a.tier == VX_TIER_NATIVE) {
    CUresult r = native(&a.base, ctx);
    if (r == CUDA_SUCCESS) {
      track(&a, placed);
      *dptr = a.base;
      return r;
    }
    budget_release(dev, a.charged);
    if (a.held) exec_native_unclaim(dev, size);
    a.held = 0;
    if (r != CUDA_ERROR_OUT_OF_MEMORY || !budget_managed_ok(dev)) return r;
    fallback_from = r;
    a.tier = VX_TIER_MANAGED;
    a.charged = 0;
  }
  if (!budget_host_try_commit(size)) {
    /* Host RAM would back it: past VX_HOST_MAX that is swapping or the OOM
     * killer, so the application gets the out-of-memory error instead. */
    VX_LOG_ONCE(VX_LOG_WARN,
                "host memory cap reached (VX_HOST_MAX=%llu bytes): allocations beyond the "
                "device budget and the NVMe tier fail with CUDA_ERROR_OUT_OF_MEMORY",
                (unsigned long long)budget_host_max());
    ctr_add(dev, VX_CTR_alloc_failures, 1);
    return fallback_from != CUDA_SUCCESS ? fallback_from : CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult r = VX_CALL(cuMemAllocManaged, &a.base, size, CU_MEM_ATTACH_GLOBAL);
  if (r != CUDA_SUCCESS) budget_host_uncommit(size);
  if (r == CUDA_SUCCESS && track(&a, placed)) {
    /* Untracked managed memory would reach the driver's cuMemFreeAsync,
     * which rejects it: give it back and report what the device lacks. */
    VX_CALL(cuMemFree_v2, a.base);
    budget_host_uncommit(size);
    ctr_add(dev, VX_CTR_alloc_failures, 1);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r == CUDA_SUCCESS) {
    advise(a.base, size, dev, a.tier);
    if (fallback_from != CUDA_SUCCESS) ctr_add(dev, VX_CTR_managed_fallbacks, 1);
    say_first_movable(dev, &a, fallback_from != CUDA_SUCCESS);
    *dptr = a.base;
    return r;
  }
  ctr_add(dev, VX_CTR_alloc_failures, 1);
  if (fallback_from != CUDA_SUCCESS) return fallback_from; /* what the application would have got */
  /* vx's managed attempt failed: do exactly what the application asked. */
  r = native(&a.base, ctx);
  if (r == CUDA_SUCCESS) {
    a.tier = VX_TIER_NATIVE;
    a.charged = size;
    budget_charge(dev, size);
    track(&a, placed);
    *dptr = a.base;
  }
  return r;
}

CUresult place_alloc_app_managed(CUdeviceptr *dptr, size_t size, unsigned flags) {
  int dev;
  CUresult r = VX_CALL(cuMemAllocManaged, dptr, size, flags);
  if (r != CUDA_SUCCESS || !dptr || place_device(&dev)) return r;
  vx_alloc_info_t a = {.base = *dptr, .size = size, .dev = dev, .tier = VX_TIER_APP_MANAGED};
  track(&a, NULL);
  return r;
}

// ---- frees ----

CUresult place_free(CUdeviceptr p, vx_alloc_info_t *freed) {
  vx_alloc_info_t a;
  *freed = (vx_alloc_info_t){0};
  place_drain();
  if (!p || reg_remove(p, &a)) return VX_CALL(cuMemFree_v2, p);
  /* the swapped contents go only once the free succeeded */
  uint64_t spilled = spill_forget_begin(a.base);
  CUresult r = VX_CALL(cuMemFree_v2, p);
  spill_forget_end(spilled, r == CUDA_SUCCESS);
  if (r != CUDA_SUCCESS) {
    retrack(&a); /* still allocated: keep tracking it */
    return r;
  }
  ctr_add(a.dev, VX_CTR_frees, 1);
  untrack_bytes(&a);
  exec_free(&a);
  *freed = a;
  return r;
}

/* vx's managed pointer given to cuMemFreeAsync (the driver would reject it). */
static CUresult free_async_managed(const vx_alloc_info_t *a, CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = VX_CALL(cuStreamIsCapturing, s, &st);
  if (r != CUDA_SUCCESS && defer_free(a, s, 0) == 0) {
    /* vx's own query failed: not the application's error.  The stream may
     * be capturing, so nothing is enqueued on it now; place_drain asks
     * again and releases the memory after the stream's work. */
    ctr_add(a->dev, VX_CTR_frees, 1);
    return CUDA_SUCCESS;
  }
  if (r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE) {
    /* Never touch a capturing stream; the graph may still use the memory
     * when it runs, so it is kept until exit. */
    VX_LOG_ONCE(VX_LOG_WARN, "managed memory freed inside a stream capture is kept until exit");
    ctr_add(a->dev, VX_CTR_capture_kept, 1);
    ctr_add(a->dev, VX_CTR_frees, 1);
    return CUDA_SUCCESS;
  }
  if (defer_free(a, s, 1) == 0) {
    ctr_add(a->dev, VX_CTR_frees, 1);
    return CUDA_SUCCESS;
  }
  /* No event.  While another stream captures, waiting is not allowed: the
   * release waits for place_drain (which arms it once nothing captures). */
  if (vx_capture_active() && defer_free(a, s, 0) == 0) {
    ctr_add(a->dev, VX_CTR_frees, 1);
    return CUDA_SUCCESS;
  }
  /* The stream is not capturing, so waiting for it is allowed. */
  r = VX_CALL(cuStreamSynchronize, s);
  uint64_t spilled = spill_forget_begin(a->base);
  if (r == CUDA_SUCCESS) r = VX_CALL(cuMemFree_v2, a->base);
  spill_forget_end(spilled, r == CUDA_SUCCESS);
  if (r == CUDA_SUCCESS) {
    ctr_add(a->dev, VX_CTR_frees, 1);
    untrack_bytes(a);
  }
  return r;
}

CUresult place_free_async(CUdeviceptr p, CUstream s, int ptsz, place_free_async_fn real,
                          vx_alloc_info_t *freed) {
  vx_alloc_info_t a;
  *freed = (vx_alloc_info_t){0};
  place_drain();
  if (!p || reg_remove(p, &a)) return real(p, s);
  CUresult r;
  if (a.tier == VX_TIER_NATIVE || a.tier == VX_TIER_APP_MANAGED) {
    r = real(p, s);
    if (r == CUDA_SUCCESS) {
      ctr_add(a.dev, VX_CTR_frees, 1);
      untrack_bytes(&a);
    }
  } else {
    r = free_async_managed(&a, ptsz && !s ? CU_STREAM_PER_THREAD : s);
  }
  if (r != CUDA_SUCCESS) {
    retrack(&a);
  } else {
    exec_free(&a);
    *freed = a;
  }
  return r;
}

/* A deferred entry's event has completed: the memory goes. */
static void release_deferred(const vx_alloc_info_t *a) {
  spill_forget(a->base);
  VX_CALL(cuMemFree_v2, a->base);
  ctr_add(a->dev, VX_CTR_deferred_frees, 1);
  untrack_bytes(a);
}

void place_drain(void) {
  defer_drain(release_deferred);
}
