/* The NVMe tier inside libvx: managed chunks written to the private swap file
 * and discarded when host memory is over VX_HOST_LIMIT, restored before use. */
#ifndef VX_TIERS_SPILL_H
#define VX_TIERS_SPILL_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* Reads VX_NVME_DIR / VX_NVME_LIMIT / VX_NVME_QD / VX_HOST_LIMIT, probes the
 * driver (cuMemDiscardBatchAsync) and opens the swap file.  Returns 0 (also
 * when the tier is simply not configured), or -errno: the tier then stays off
 * and the reason has been said once on stderr.  Called once from vx's init. */
int spill_init(void);
void spill_fini(void);

/* Makes [p, p+n) readable by work enqueued on stream s after this returns:
 * every spilled chunk in the range is read back (checksum verified) and
 * copied into managed memory.  Returns CUDA_SUCCESS, or the error the
 * application must see for the operation that needed the range
 * (CUDA_ERROR_UNKNOWN for an I/O error or a checksum mismatch): never stale
 * or zeroed data.  Ranges outside vx's managed allocations are ignored.
 * Takes the spill lock; never called with the registry lock held. */
CUresult spill_make_resident(CUdeviceptr p, size_t n, CUstream s);

/* Spills chunks [first, first+count) of the managed allocation at base
 * (a policy decision: EVICT to the NVMe tier).  0, or -errno: the data then
 * stays where it was (nothing is lost).  Never called with the registry
 * lock held. */
int spill_chunks(CUdeviceptr base, uint32_t first, uint32_t count);

/* The allocation at base is being freed: its slots are released,
 * nothing is written back.  Call before the memory is returned to the driver. */
void spill_forget(CUdeviceptr base);

// ---- chunk tracking and restore ----

/* Nonzero while the NVMe tier is on (swap open): then the copy hooks and
 * the launch guard track which chunks are used and restore spilled ones.
 * One relaxed load; 0 when VX_NVME_DIR is unset or the tier failed. */
int spill_armed(void);

/* fork handlers of spill_g.mu (init.c's fork list; registered whether or
 * not the tier is armed): the child turns the tier off. */
void spill_atfork_prepare(void);
void spill_atfork_parent(void);
void spill_atfork_child(void);

/* As spill_make_resident for several ranges at once: none of them is
 * chosen to make room for another (use this when one operation needs them
 * together: a copy's source and destination, a launch's arguments).
 * n[i] == SPILL_WHOLE: the whole allocation p[i] points into. */
#define SPILL_WHOLE ((size_t)-1)
CUresult spill_make_resident_many(const CUdeviceptr *p, const size_t *n, int count, CUstream s);

/* The calling thread's operation, whose ranges it made resident, is
 * enqueued: they may be spilled again (until then they are pinned; see
 * spill_int.h).  Launch paths may skip it: a thread's pins also lapse
 * after its next few calls. */
void spill_op_done(void);
/* Only the pins of spill_op_done: for a launch path that has told
 * spill_order_enqueued its stream itself. */
void spill_pins_release(void);

// ---- unseen launches (CUkernel handles) ----

/* A launch whose pointer arguments vx cannot learn is about to be enqueued:
 * vx can no longer prove it sees every access, so every spilled chunk is
 * restored and nothing is spilled again (the host limit then goes
 * unenforced; said once).  CUDA_SUCCESS, or CUDA_ERROR_UNKNOWN when a
 * restore failed (the launch fails: never stale data).  After the first
 * call, one relaxed load when nothing is left in the swap. */
CUresult spill_unseen_launch(void);

// ---- frees ----

/* The allocation at base is about to be given to the driver's free: its
 * record (residency, swap slots) is set aside, so that no lookup finds it
 * and an address the driver hands out again starts afresh.  Returns a
 * token for spill_forget_end (0: nothing set aside).  Takes the spill lock;
 * never with the registry lock held. */
uint64_t spill_forget_begin(CUdeviceptr base);
/* After the free: freed != 0 releases the record's slots (as
 * spill_forget); freed == 0 (the free failed, the memory is still the
 * application's) puts the record back, so its swapped chunks are restored
 * on their next use instead of lost. */
void spill_forget_end(uint64_t token, int freed);

#endif
