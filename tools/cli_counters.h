/* cli_counters.h: the counters table (counters.def) as the tools see it;
 * indices are VX_STATS_<name> from stats_shm.h. */
#ifndef VX_TOOLS_CLI_COUNTERS_H
#define VX_TOOLS_CLI_COUNTERS_H

typedef struct vx_counter_desc {
  const char *name;
  const char *kind; /* "SUM", "CUR" or "PEAK" */
  const char *help;
} vx_counter_desc_t;

extern const vx_counter_desc_t vx_counter_table[];
extern const unsigned vx_counter_count;

/* 1 if the counter counts bytes (printed human-readable in text output). */
int vx_counter_is_bytes(unsigned idx);

#endif
