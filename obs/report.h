/* The exit summary (VX_REPORT): written at exit, rewritten every
 * VX_REPORT_PERIOD seconds while the program runs, and checked at start-up. */
#ifndef VX_OBS_REPORT_H
#define VX_OBS_REPORT_H

/* Writes the exit summary now (also run at exit), into a file only when
 * this process made a CUDA call since it started or forked. */
void vx_report_write(void);
/* Rewrites a regular VX_REPORT file while the program runs (the timeline's
 * sampler, every VX_REPORT_PERIOD seconds). */
void vx_report_refresh(void);
/* At start-up: says at once when the report could not be written. */
void vx_report_init(void);
void vx_report_atfork_child(void);
/* The driver's own migrations (where it reports them) into the live
 * counters: demand_up_bytes, demand_down_bytes, demand_measured.  Calls the
 * driver: no vx lock may be held. */
void vx_report_demand_publish(void);

#endif
