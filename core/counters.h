/* vx's counters (counters.def) as a struct of uint64_t, their names and
 * kinds (the one table: the exit report and `vx stat` both read it), and the
 * exit report's printer (text or JSON through an (out, arg) callback).
 * Pure: no state, no driver.  Defined in ctr_table.c. */
#ifndef VX_INTERPOSE_COUNTERS_H
#define VX_INTERPOSE_COUNTERS_H

#include <stdint.h>

/* A gauge row of counters.def as its two counters, value then peak: for
 * includers that want one VX_COUNTER per counter (#define VX_GAUGE
 * VX_GAUGE_ROWS). */
#define VX_GAUGE_ROWS(name, help)                                                                  \
  VX_COUNTER(name, CUR, help)                                                                      \
  VX_COUNTER(name##_peak, PEAK, "peak of " #name)

enum vx_counter_id {
#define VX_COUNTER(name, kind, help) VX_CTR_##name,
#define VX_GAUGE VX_GAUGE_ROWS
#include "counters.def"
#undef VX_GAUGE
#undef VX_COUNTER
  VX_CTR_COUNT
};

enum { VX_CTR_KIND_SUM, VX_CTR_KIND_CUR, VX_CTR_KIND_PEAK };

/* One device's counters: by name (c.native_bytes) or by id (c.v[VX_CTR_x]). */
typedef union vx_counters {
  struct {
#define VX_COUNTER(name, kind, help) uint64_t name;
#define VX_GAUGE VX_GAUGE_ROWS
#include "counters.def"
#undef VX_GAUGE
#undef VX_COUNTER
  };
  uint64_t v[VX_CTR_COUNT];
} vx_counters_t;

const char *vx_counter_name(int id);
/* Its help text from counters.def. */
const char *vx_counter_help(int id);
int vx_counter_kind(int id);
/* Id of the PEAK counter of gauge value `id` (counters.def's VX_GAUGE
 * rows: a table, no name matching), or -1 for any other counter. */
int vx_counter_peak_of(int id);

typedef void (*vx_out_fn)(void *arg, const char *text);

/* One device's counters: JSON members `"name":value,...` (no braces), or
 * text lines "  name  value\n" (zero SUM counters skipped unless all=1). */
void vx_counters_print_one(const vx_counters_t *c, int json, int all, vx_out_fn out, void *arg);

#endif
