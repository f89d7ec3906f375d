/* The deferred-free queue: vx's managed memory that the application freed
 * with cuMemFreeAsync (which the driver rejects for it) is released once an
 * event recorded on the stream then has completed, so that the stream's
 * earlier work is done with it, without synchronising the stream.  One lock
 * (defer_lock), never held across a driver call. */
#ifndef VX_TIERS_DEFER_H
#define VX_TIERS_DEFER_H

#include <cuda.h>

#include "registry.h"

/* Queues a's release: after an event recorded on s now (armed = 1), or,
 * when s's capture status is unknown (armed = 0), once defer_drain finds s
 * not capturing and arms it.  0, or -1 when the caller must fall back. */
int defer_free(const vx_alloc_info_t *a, CUstream s, int armed);

/* Gives each entry whose event has completed to release (which frees the
 * memory and its accounting), then destroys the event; the others stay
 * queued.  Nothing while a capture is in progress.  Cheap when empty. */
typedef void (*defer_release_fn)(const vx_alloc_info_t *a);
void defer_drain(defer_release_fn release);

/* fork: prepare takes the lock, the parent releases it, the child
 * re-creates it. */
void defer_atfork_prepare(void);
void defer_atfork_parent(void);
void defer_atfork_child(void);

#endif
