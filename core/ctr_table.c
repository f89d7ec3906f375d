/* The counter table from counters.def: names, kinds, each gauge's value ->
 * peak pairing (for the live counters, core/ctr_live.c, and `vx stat`) and
 * the text/JSON printer of the exit report. */
#include "counters.h"

#include <stdio.h>

static const struct {
  const char *name;
  int kind;
  const char *help; /* vx stat --prometheus's HELP lines */
} ctr_table[] = {
#define VX_COUNTER(name, kind, help) {#name, VX_CTR_KIND_##kind, help},
#define VX_GAUGE VX_GAUGE_ROWS
#include "counters.def"
#undef VX_GAUGE
#undef VX_COUNTER
};

/* Each gauge's value -> its peak; 0 (no counter's peak: a peak follows its
 * value, so it is never id 0) for every other counter. */
static const unsigned short peak_of[VX_CTR_COUNT] = {
#define VX_COUNTER(name, kind, help)
#define VX_GAUGE(name, help) [VX_CTR_##name] = VX_CTR_##name##_peak,
#include "counters.def"
#undef VX_GAUGE
#undef VX_COUNTER
};

#define VX_COUNTER(name, kind, help)
#define VX_GAUGE(name, help)                                                                       \
  _Static_assert(VX_CTR_##name##_peak == VX_CTR_##name + 1, "a gauge's peak follows its value");
#include "counters.def"
#undef VX_GAUGE
#undef VX_COUNTER

_Static_assert(sizeof(vx_counters_t) == VX_CTR_COUNT * sizeof(uint64_t), "counters are uint64_t");

const char *vx_counter_name(int id) {
  return id >= 0 && id < VX_CTR_COUNT ? ctr_table[id].name : "";
}
const char *vx_counter_help(int id) {
  return id >= 0 && id < VX_CTR_COUNT ? ctr_table[id].help : "";
}
int vx_counter_kind(int id) {
  return id >= 0 && id < VX_CTR_COUNT ? ctr_table[id].kind : -1;
}

int vx_counter_peak_of(int id) {
  return id >= 0 && id < VX_CTR_COUNT && peak_of[id] ? peak_of[id] : -1;
}

void vx_counters_print_one(const vx_counters_t *c, int json, int all, vx_out_fn out, void *arg) {
  char line[128];
  for (int i = 0; i < VX_CTR_COUNT; i++) {
    unsigned long long v = (unsigned long long)c->v[i];
    if (json)
      snprintf(line, sizeof line, "%s\"%s\":%llu", i ? "," : "", ctr_table[i].name, v);
    else if (v || all || ctr_table[i].kind != VX_CTR_KIND_SUM)
      snprintf(line, sizeof line, "  %-24s %llu\n", ctr_table[i].name, v);
    else
      continue;
    out(arg, line);
  }
}
