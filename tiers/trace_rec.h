/* VX_TRACE: the launch trace (policy/TRACE.md) recorded from a live program,
 * buffered in memory and written when the buffer fills and at exit. */
#ifndef VX_TIERS_TRACE_REC_H
#define VX_TIERS_TRACE_REC_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* Creates (truncates) `path` with mode 0600 and turns recording on.  The
 * path must be a regular file (or absent); the open never blocks (a FIFO
 * is refused).  Returns 0 or -errno (recording stays off) with `why` (n
 * bytes) filled with the reason for the caller's line. */
int trace_rec_init(const char *path, char *why, size_t n);
/* Nonzero while recording: one relaxed load, for the launch hot path. */
int trace_rec_on(void);

/* Records; each takes the trace lock (never held across a driver call) and
 * may write the buffer out when it is full.  No-ops when recording is off.
 * flags: 1 = native (not movable), as in TRACE.md. */
void trace_rec_alloc(int dev, uint64_t id, uint64_t addr, uint64_t size, uint32_t flags);
void trace_rec_free(int dev, uint64_t id);
void trace_rec_launch(int dev, uint64_t kernel, uint64_t stream, const pol_range_t *r, uint32_t n);
/* Kernel durations (dur_ns), timed on the device: after trace_rec_launch
 * and whatever vx enqueues ahead of the kernel, trace_rec_launch_start(s)
 * records a timing event on s; after the real launch, trace_rec_launched
 * records the end event (r: the launch's result; a failed launch is not
 * timed).  The duration is what the device took from one to the other:
 * the kernel, including any stall on faults it took.  It is filled in when
 * both events have completed (polled at later launches, waited for at
 * trace_rec_fini).  trace_rec_launch_cancel: the launch is not made.
 * Per thread; no-ops when nothing is armed (one TLS load). */
void trace_rec_launch_start(CUstream s);
void trace_rec_launched(CUstream s, CUresult r);
void trace_rec_launch_cancel(void);
/* A copy of n bytes at dptr enqueued on s, dir POL_COPY_HTOD (dptr is
 * written) or POL_COPY_DTOH; sync: the host waits for it.  Recorded when
 * dptr lies in an allocation vx tracks (the registry's lookup, before the
 * trace lock). */
void trace_rec_copy(CUdeviceptr dptr, size_t n, uint32_t dir, CUstream s, int sync);

/* Writes what is buffered, the final per-device capacities into the header,
 * and closes the file; recording stops.  Safe to call twice. */
void trace_rec_fini(void);

/* fork: the child stops recording (the parent owns the file). */
void trace_rec_atfork_prepare(void);
void trace_rec_atfork_parent(void);
void trace_rec_atfork_child(void);

#endif
