/* counters.c: names, kinds and meanings of the counters (counters.def), in
 * the order the stats segment stores them. */
#include <string.h>

#include "cli_counters.h"

const vx_counter_desc_t vx_counter_table[] = {
#define VX_COUNTER(name, kind, help) {#name, #kind, help},
#include "counters.def"
#undef VX_COUNTER
};
const unsigned vx_counter_count = sizeof vx_counter_table / sizeof vx_counter_table[0];

int vx_counter_is_bytes(unsigned idx) {
  return idx < vx_counter_count && strstr(vx_counter_table[idx].name, "bytes") != NULL;
}
