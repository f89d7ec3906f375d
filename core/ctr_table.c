/* The counter table from counters.def: names, kinds, PEAK/CUR pairing (for
 * the live counters, tiers/ctr_live.c, and `vx stat`) and the text/JSON
 * printer of the exit report. */
#include "counters.h"

#include <stdio.h>
#include <string.h>

static const struct {
  const char *name;
  int kind;
  const char *help; /* vx stat --prometheus's HELP lines */
} ctr_table[] = {
#define VX_COUNTER(name, kind, help) {#name, VX_CTR_KIND_##kind, help},
#include "counters.def"
#undef VX_COUNTER
};

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
  if (vx_counter_kind(id) != VX_CTR_KIND_CUR) return -1;
  size_t len = strlen(ctr_table[id].name);
  for (int i = 0; i < VX_CTR_COUNT; i++)
    if (ctr_table[i].kind == VX_CTR_KIND_PEAK &&
        !strncmp(ctr_table[i].name, ctr_table[id].name, len) &&
        !strcmp(ctr_table[i].name + len, "_peak"))
      return i;
  return -1;
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
