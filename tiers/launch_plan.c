/* The launch path's planning: a launch's pointer arguments turned into the
 * allocations they reach (observe.c, ptrref.c), spilled ones made whole
 * first (the spill tier's contract), the trace record, and the
 * predictor's plan for the device (exec.c).  No allocation or syscall when
 * nothing has to move (but for launches past the on-stack arrays:
 * OBS_MAX_VALS values, OBS_MAX_ALLOCS allocations); one registry read lock
 * when every allocation reached is native. */
#include "launch_plan.h"

#include <stdlib.h>

#include "capture.h"
#include "ctr.h"
#include "driver.h"
#include "exec.h"
#include "log.h"
#include "move.h"
#include "observe.h"
#include "ptrref.h"
#include "spill.h"
#include "trace_rec.h"

/* 1 capturing, 0 not, -1 the query failed (the legacy stream during
 * another stream's global capture, or a driver error).  Unknown is neither:
 * vx enqueues nothing of its own on the stream (it may capture), but what
 * the launch reads is still restored, in the capture-safe way (the spill
 * tier's copies use vx's own stream in relaxed mode), so it never runs on
 * discarded pages. */
static int capturing(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (VX_CALL(cuStreamIsCapturing, s, &st) != CUDA_SUCCESS) {
    VX_LOG_ONCE(VX_LOG_INFO, "cuStreamIsCapturing failed: a launch is restored, not predicted");
    return -1;
  }
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* The spill tier's contract: every allocation the launch reaches is whole
 * again before the launch is enqueued (the whole allocation, not only from
 * the pointer on: a kernel may index anywhere in its buffer), and pinned
 * until then.  One call for all of them, however many (on the heap past
 * OBS_MAX_ALLOCS): none is spilled to make room for another.  A set that
 * could not be completed (no memory) restores everything instead. */
static CUresult make_resident(const obs_set_t *s, CUstream st) {
  CUdeviceptr p0[OBS_MAX_ALLOCS], *p = p0;
  size_t n0[OBS_MAX_ALLOCS], *n = n0;
  if (s->oom) return spill_unseen_launch();
  if (s->nonnative > OBS_MAX_ALLOCS) {
    p = malloc((size_t)s->nonnative * sizeof *p);
    n = malloc((size_t)s->nonnative * sizeof *n);
  }
  CUresult r;
  if (!p || !n) {
    r = spill_unseen_launch();
  } else {
    int k = 0;
    for (int i = 0; i < s->n; i++) {
      if (s->a[i].tier == VX_TIER_NATIVE) continue;
      p[k] = s->a[i].base, n[k++] = SPILL_WHOLE;
    }
    r = k ? spill_make_resident_many(p, n, k, st) : CUDA_SUCCESS;
  }
  if (p != p0) free(p);
  if (n != n0) free(n);
  return r;
}

/* An allocation whose extents are guesses (a caching allocator's segment:
 * kernels get pointers into it) is advised PreferredLocation host, once.
 * The guesses fall short now and then (a stale start, a view's interior
 * pointer), and without the advice the kernel faulted the rest onto the
 * device behind the policy's back: the device filled past the budget (a
 * VX_DEVICE_LIMIT of 48M on prog_torch peaked at 60 MiB) and the driver
 * made room by evicting what the plan had brought up, which faulted back
 * in turn (72 of prog_torch's 184 faults at the defaults).  With the
 * advice a page no plan brought up is read in place over the link, the
 * documented behaviour of a host preference where the device can map host
 * memory (cuda.h, CU_MEM_ADVISE_SET_PREFERRED_LOCATION: migration is
 * avoided when the faulting processor can establish a mapping), while a
 * prefetch still migrates whatever the preferred location.  Device
 * residency then is what the policy placed: prog_torch at 48M peaks at 48
 * MiB with no fault, 147 ms virtual at the defaults as before.
 * Allocations that are their tensors (ranges always to the end) keep no
 * preference: a miss there migrates and stays, where being read over the
 * link at every use cost vx play of cnn 1.5x its time. */
static void advise_in_place(const vx_alloc_info_t *a) {
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  CUresult r = move_advise(a->base, a->size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host);
  if (r != CUDA_SUCCESS) {
    char eb[VX_CU_ERR_TEXT];
    VX_LOG_ONCE(VX_LOG_INFO,
                "cuMemAdvise failed (%s): a segment's pages vx did not plan may fault in",
                vx_cu_err(r, eb));
    return;
  }
  ctr_add(a->dev, VX_CTR_in_place_allocs, 1);
}

/* Chunk ranges for the policy and the trace: from the lowest pointer into
 * each allocation to the end of the objects the pointers name.  What lies
 * before a pointer is out (C semantics: the object a pointer argument
 * names starts there); where an object ends is learned (exec_extent: the
 * next pointer other launches pass into the same allocation), else the
 * allocation's end.  So the tensors of a caching allocator's segment do
 * not drag in the rest of it.  A miss is only a fault: managed memory
 * stays correct.  The spill tier, where a miss would be data loss, gets
 * whole allocations (make_resident above). */
static uint32_t ranges_of(const obs_set_t *s, const CUdeviceptr *vals, int nv, pol_range_t *r,
                          int nonnative_only, int *dev, int *mdev, uint8_t *native) {
  uint32_t n = 0;
  for (int i = 0; i < s->n; i++) {
    const vx_alloc_info_t *a = &s->a[i];
    if ((nonnative_only && a->tier == VX_TIER_NATIVE) || !a->id) continue;
    native[n] = a->tier == VX_TIER_NATIVE;
    uint32_t first = (uint32_t)((s->lo[i] - a->base) >> VX_CHUNK_SHIFT);
    uint32_t count = (uint32_t)((a->size - 1) >> VX_CHUNK_SHIFT) - first + 1;
    if (a->tier != VX_TIER_NATIVE && a->size > (1ull << VX_CHUNK_SHIFT)) {
      /* Movable and more than a chunk: bounded by the objects' extents (of
       * the first OBS_MAX_VALS pointers into it: a hint for the policy,
       * never what the spill tier restores). */
      uint64_t offs[OBS_MAX_VALS];
      int k = 0;
      for (int v = 0; v < nv && k < OBS_MAX_VALS; v++)
        if (vals[v] >= a->base && vals[v] - a->base < a->size) offs[k++] = vals[v] - a->base;
      /* no advice while a capture is in progress (it may be another
       * thread's, in global mode: an unsafe call would invalidate it) */
      int in_place = 0, may = a->tier == VX_TIER_MANAGED && !vx_capture_active();
      exec_extent(a->dev, a->id, a->size, offs, k, &first, &count, may ? &in_place : NULL);
      if (in_place) advise_in_place(a);
    }
    r[n++] = (pol_range_t){
        .alloc_id = a->id, .first = first, .count = count, .mode = POL_ACCESS_UNKNOWN};
    if (*dev < 0) *dev = a->dev;
    if (*mdev < 0 && a->tier != VX_TIER_NATIVE) *mdev = a->dev;
  }
  return n;
}

/* The launch reaches the allocations of s (kernel: 0 = not known yet). */
static CUresult predict_set(const vx_launch_t *l, const obs_set_t *s, const CUdeviceptr *vals,
                            int nv, uint64_t kernel, int tracing) {
  CUstream st = l->stream;
  int cap = capturing(st);
  if (cap > 0) return CUDA_SUCCESS; /* recorded, not run: seen at cuGraphLaunch */
  if ((s->nonnative || s->oom) && spill_armed()) {
    CUresult r = make_resident(s, st);
    if (r != CUDA_SUCCESS || cap < 0) return r;
  }
  if (cap < 0) return CUDA_SUCCESS; /* may be capturing: nothing of vx's enqueued */
  if (!kernel) kernel = obs_kernel_id(l->f);
  pol_range_t r0[OBS_MAX_ALLOCS], *r = r0;
  uint8_t nat0[OBS_MAX_ALLOCS], *nat = nat0;
  if (s->n > OBS_MAX_ALLOCS &&
      (!(r = malloc((size_t)s->n * sizeof *r)) || !(nat = malloc((size_t)s->n)))) {
    free(r == r0 ? NULL : r);
    return CUDA_SUCCESS; /* no memory: not predicted, not traced (data is resident) */
  }
  /* The ranges are computed once per launch: exec_extent learns from each
   * call (its clock is the count of calls), so computing them again for
   * the trace made a traced run another run (prog_torch: 35 faults traced
   * against 184 untraced).  The trace gets every allocation, the plan the
   * movable ones among them. */
  int dev = -1, mdev = -1, plan = s->nonnative && exec_active();
  uint32_t n = tracing || plan ? ranges_of(s, vals, nv, r, !tracing, &dev, &mdev, nat) : 0;
  if (tracing && n) trace_rec_launch(dev, kernel, (uint64_t)(uintptr_t)st, r, n);
  uint32_t k = 0;
  for (uint32_t i = 0; plan && i < n; i++)
    if (!nat[i]) r[k++] = r[i];
  CUresult rc = k ? exec_launch(mdev, kernel, st, r, k, l->graph != NULL) : CUDA_SUCCESS;
  if (r != r0) free(r);
  if (nat != nat0) free(nat);
  if (tracing) { /* timed from here: after the waits the plan enqueued */
    if (rc == CUDA_SUCCESS)
      trace_rec_launch_start(st);
    else
      trace_rec_launch_cancel();
  }
  return rc;
}

/* The launch reaches vals[0..nv), and what pointers stored in device
 * memory among them reach (ptrref_expand). */
CUresult launch_plan_values(const vx_launch_t *l, const CUdeviceptr *vals, int nv,
                            uint64_t kernel) {
  int tracing = trace_rec_on();
  if (!tracing && !obs_maybe_nonnative(vals, nv)) return CUDA_SUCCESS; /* all native */
  obs_set_t s;
  obs_set_init(&s);
  obs_resolve(vals, nv, &s);
  ptrref_expand(&s);
  CUresult r = CUDA_SUCCESS;
  if (s.nonnative || tracing || s.oom) /* else the hot path ends here */
    r = predict_set(l, &s, vals, nv, kernel, tracing);
  obs_set_fini(&s);
  return r;
}

/* A launch whose pointer arguments vx cannot learn (obs_values or
 * graph_values said -1): no prediction, no trace record, and the spill
 * tier can no longer prove it sees every access.  The rule: the first such
 * launch while the tier is on restores every spilled chunk and stops all
 * spilling for good (spill_unseen_launch); simplest correct with threads,
 * since nothing can be spilled between the restore and this enqueue.  A
 * capturing stream only records it: the graph's launch decides then. */
CUresult launch_plan_unseen(const vx_launch_t *l) {
  if (capturing(l->stream) > 0) return CUDA_SUCCESS; /* unknown: restore */
  ctr_add(vx_tls_dev, VX_CTR_launches_unseen, 1);
  VX_LOG_ONCE(VX_LOG_INFO,
              "a %s whose pointer arguments vx cannot learn: not predicted "
              "(counted in launches_unseen)",
              l->graph ? "graph launch" : "kernel launch");
  return spill_armed() ? spill_unseen_launch() : CUDA_SUCCESS;
}

/* A launch with more than OBS_MAX_VALS values (CUDA 12.1 allows 32 KiB of
 * parameters): all of them, on the heap. */
static __attribute__((noinline)) CUresult predict_big(const vx_launch_t *l, int want) {
  CUdeviceptr *vals = malloc((size_t)want * sizeof *vals);
  if (!vals) return launch_plan_unseen(l);
  int nv = obs_values(l->f, l->params, l->extra, vals, want);
  CUresult r = nv < 0 || nv > want ? launch_plan_unseen(l) : launch_plan_values(l, vals, nv, 0);
  free(vals);
  return r;
}

int launch_plan_needed(void) {
  return exec_active() || trace_rec_on() || spill_armed();
}

CUresult launch_plan(const vx_launch_t *l) {
  if (!launch_plan_needed()) return CUDA_SUCCESS; /* demand, static */
  CUdeviceptr vals[OBS_MAX_VALS];
  int nv = obs_values(l->f, l->params, l->extra, vals, OBS_MAX_VALS);
  if (nv > OBS_MAX_VALS) return predict_big(l, nv);
  return nv < 0 ? launch_plan_unseen(l) : launch_plan_values(l, vals, nv, 0);
}
