/* What vx knows of the application's stream captures, so that it makes no
 * driver call a capture forbids (cuda.h, cuThreadExchangeStreamCaptureMode). */
#ifndef VX_TIERS_CAPTURE_H
#define VX_TIERS_CAPTURE_H

#include <cuda.h>
#include <stddef.h>

/* 1 while a capture the application began (any mode, any thread) may
 * still be in progress, else 0.  One relaxed load.  While it is 1 vx
 * defers its frees and drains, skips optional movement and does not
 * spill: synchronising a context (cuCtxSynchronize, cuMemFree) or using the
 * legacy stream is illegal during a capture in every mode. */
int vx_capture_active(void);

/* Brackets vx's own "potentially unsafe" calls that must be made while a
 * capture may be active (advice on memory the application asked for,
 * pinned bounce buffers): the calling thread is switched to relaxed mode
 * (the documented tool) and back.  Nothing happens when no capture is
 * active.  The calls bracketed must still not synchronise a context or
 * use the legacy stream. */
typedef struct vx_capture_relax {
  int on;
  CUstreamCaptureMode saved;
} vx_capture_relax_t;
void vx_capture_relax_begin(vx_capture_relax_t *r);
void vx_capture_relax_end(vx_capture_relax_t *r);

/* As vx_capture_relax_begin, but always (two driver calls): for a path
 * that waits, where a capture begun by another thread just after a check
 * of vx_capture_active would otherwise be invalidated. */
void vx_capture_relax_force(vx_capture_relax_t *r);

/* 1 when the calling thread has a capture in progress (or vx lost count):
 * relaxed mode does not lift what its own capture forbids, so it must not
 * wait for anything.  Takes the capture table's lock when one is active. */
int vx_capture_mine(void);

/* A host-to-device copy legal during another thread's capture: relaxed
 * mode, an async copy on vx's own non-blocking stream of the current
 * context (move_stream), then a wait for that stream only.  CUresult of
 * the first failing call. */
CUresult vx_capture_safe_htod(CUdeviceptr dst, const void *src, size_t n);

/* From the capture hooks, after the real call.  began: a capture on stream
 * (ptsz: the per-thread default stream's variant) began.  ended: the
 * application ended (r: what the driver said) the capture on stream; the
 * stream is asked whether it still captures, so that neither an
 * invalidated capture (ended with an error) leaks nor a refused end
 * (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) drops a live one. */
void vx_capture_began(CUstream stream, int ptsz);
void vx_capture_ended(CUstream stream, int ptsz, CUresult r);

/* fork handlers of the capture table's lock (init.c's fork list). */
void capture_atfork_prepare(void);
void capture_atfork_parent(void);
void capture_atfork_child(void);

#endif
