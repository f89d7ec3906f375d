/* Who used an allocation since its last snapshot: the streams (an event
 * each) and contexts whose work may still read or write it, so that a spill
 * waits for all of them, whatever thread, context or device enqueued it. */
#ifndef VX_TIERS_SPILL_ORDER_H
#define VX_TIERS_SPILL_ORDER_H

#include <cuda.h>

/* How the operation whose ranges the calling thread made resident was
 * enqueued: on a known stream (a launch: vx records an event there), on a
 * stream vx was not told (a copy hook: the whole context counts), or not
 * at all (it failed: nothing to wait for). */
enum { SPILL_ORDER_NONE, SPILL_ORDER_STREAM, SPILL_ORDER_UNKNOWN };

/* The calling thread's operation is enqueued (or failed, how ==
 * SPILL_ORDER_NONE): the allocations it made resident are marked as used
 * by that stream (an event recorded on s after the operation) or by the
 * current context.  One thread-local load when the thread made nothing
 * resident; else takes the spill lock.  Never with the spill lock held. */
void spill_order_enqueued(CUstream s, int how);

#endif
