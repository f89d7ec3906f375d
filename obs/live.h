/* libvx's live stats segment, /dev/shm/vx-<uid>-<pid> (VX_STATS=1): what
 * `vx stat` and `vx top` read while the program runs. */
#ifndef VX_OBS_LIVE_H
#define VX_OBS_LIVE_H

/* Creates the segment and starts its publisher thread, which copies the
 * counters and the devices' limits every VX_STATS_PERIOD_MS.  A failure
 * leaves no segment behind (stats_shm.h says why). */
void obs_live_start(void);

#endif
