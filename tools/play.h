/* play.h: `vx play`, a trace run live over the simulated driver with libvx.so
 * preloaded: the parent (play.c) runs one child per policy (play_child.c). */
#ifndef VX_TOOLS_PLAY_H
#define VX_TOOLS_PLAY_H

#include <stddef.h>

/* The child: plays the trace at path as a driver-API program (allocations,
 * frees, one kernel per launch; the host issues launch i once launch
 * i - ahead is done, 0 = never waits), then writes one line of counters to stdout
 * ("vxplay total_ns=N stall_ns=N bytes_up=N bytes_down=N faults=N").
 * Returns the exit status: 0, or 1 with a line on stderr. */
int vx_play_child(const char *path, unsigned ahead);

/* Reads the trace at path into t (as rp_trace_load, the trace's own chunk
 * size): 0, or -errno with a line in err.  Both sides read it. */
struct rp_trace;
int vx_play_load(const char *path, struct rp_trace *t, char *err, size_t errlen);

#endif
