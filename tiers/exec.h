/* Plan execution: one policy (policy/policy.h) per device fed with
 * allocations, frees and launches, and its plans carried out through the
 * real driver, on vx's own side streams only (the batch calls refuse the
 * legacy stream): ordered after the launch stream's earlier work with an
 * event, and the launch stream made to wait for the required prefetches. */
#ifndef VX_TIERS_EXEC_H
#define VX_TIERS_EXEC_H

#include <cuda.h>
#include <stdint.h>

#include "policy.h"
#include "registry.h"

/* Reads the options in effect (VX_POLICY, VX_PREFETCH_DISTANCE,
 * VX_EVICT_WATERMARK, VX_HOST_LIMIT) and VX_TRACE.  Called once at start-up
 * before any hook runs; never fails (a bad trace path is said once). */
void exec_init(void);
/* Writes the trace out (at exit). */
void exec_fini(void);

/* Device bytes the policy may fill (physical minus VX_RESERVE; natives
 * count against it); 0 before the device's budget is set up. */
uint64_t exec_capacity(int dev);

/* 1 when the predictor makes plans (VX_POLICY=predict). */
int exec_planning(void);
/* 1 when a policy plans launches: the predictor, or demand paging kept
 * inside VX_DEVICE_LIMIT (VX_POLICY=demand or static with a limit:
 * evictions only). */
int exec_active(void);
/* The most bytes one planned launch of device dev has reached so far (its
 * ranges, native and managed): the room a launch needs on the device. */
uint64_t exec_launch_max(int dev);

/* Room in the device budget for a native allocation of `bytes`, already
 * charged to the budget (budget_try_charge_below) and about to be made.
 * Native memory takes its room at once, while the policy's chunks leave
 * only when evictions have gone down: the policy counts the bytes against
 * its capacity from now on (no plan of another thread fills their room),
 * evicts what a launch would for its own needs where the budget less
 * native bytes, resident chunks and evictions still going down has no
 * room left, and the caller waits until `down` has run them.  Returns 1
 * (the bytes are held: the caller sets vx_alloc_info_t.held, or calls
 * exec_native_unclaim if the allocation fails), 0 (no policy plans for the
 * device: nothing to hold), -1 (no room can be made: a capture in
 * progress, nothing left to evict, a driver error; nothing held).  Takes
 * the device's policy lock; driver calls outside it. */
int exec_native_claim(int dev, uint64_t bytes);
/* The allocation exec_native_claim held for was not made. */
void exec_native_unclaim(int dev, uint64_t bytes);

/* An allocation appeared / was freed by the application (a->id set, a->dev
 * the device).  Feeds the device's policy (created on first use) and the
 * trace.  Takes the device's policy lock; no driver call under it. */
void exec_alloc(const vx_alloc_info_t *a);
void exec_free(const vx_alloc_info_t *a);

/* The chunks [*first, *first + *count) a launch's pointers offs[0..n)
 * into allocation `id` (of `size` bytes) reach: from the lowest pointer to
 * the furthest end of an object, where an object at offset p ends at the
 * next offset any launch has passed a pointer to (within the last 64
 * distinct ones), else at the allocation's end.  A framework's caching
 * allocator carves tensors out of 20 MiB (or larger) segments and kernels
 * get interior pointers: without the bound every tensor would drag in the
 * rest of its segment.  A range cut short by a stale start only costs a
 * fault (managed memory); the NVMe tier takes whole allocations.  Learns
 * the offsets as starts; takes the device's policy lock.  *in_place is set
 * to 1 the first time the range falls short of the allocation: the caller
 * then advises PreferredLocation host on it (launch_plan.c says why);
 * NULL: not now (the caller may not advise), ask again at a later call. */
void exec_extent(int dev, uint64_t id, uint64_t size, const uint64_t *offs, int n, uint32_t *first,
                 uint32_t *count, int *in_place);

/* A launch on device `dev` reaching ranges[0..n) of vx-tracked non-native
 * allocations is about to be enqueued on `stream` (already resolved: the
 * per-thread stream for _ptsz forms), which the caller has checked is not
 * capturing (nothing of vx's may go into a capture, and a captured launch
 * does not run now).  Plans and carries out the plan.
 * graph: the launch is a graph's, many kernels in one, whose time says
 * nothing of any one kernel's (exec_time.c: not timed).
 * Returns CUDA_SUCCESS (plans are hints: a failed prefetch is reported to
 * the policy, never to the application). */
CUresult exec_launch(int dev, uint64_t kernel, CUstream stream, const pol_range_t *ranges,
                     uint32_t n, int graph);

/* Called by the launch hooks right after the real launch call returned r:
 * when exec_launch planned that launch on this thread, an event recorded on
 * its stream marks the launch's end, which the evictions of later plans
 * wait for (instead of everything before their own launch).  Cheap when
 * nothing was planned (a thread-local flag). */
void exec_launched(CUresult r);

/* fork: locks taken before, released in the parent, re-created in the child. */
void exec_order_atfork_prepare(void); /* the ORDER locks (rank ORDER, core/locks.h) */
void exec_order_atfork_parent(void);
void exec_order_atfork_child(void);
void exec_atfork_prepare(void);
void exec_atfork_parent(void);
void exec_atfork_child(void);

#endif
