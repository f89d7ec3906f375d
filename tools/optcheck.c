/* optcheck.c: the VX_* option table (from interpose/options.def); values are
 * checked with libvx's own parser (interpose/options.c) before the library sees them. */
#include "cli.h"
#include "options.h"

#include <errno.h>
#include <string.h>

#define BOOL VX_T_BOOL
#define SIZE VX_T_SIZE
#define SIZES VX_T_SIZES
#define PERCENT VX_T_PERCENT
#define INT VX_T_INT
#define STRING VX_T_STRING
#define ENUM VX_T_ENUM
const vx_opt_desc_t vx_opt_table[] = {
#define VX_OPTION(name, type, def, help) {#name, type, def, help},
#include "options.def"
#undef VX_OPTION
};
#undef BOOL
#undef SIZE
#undef SIZES
#undef PERCENT
#undef INT
#undef STRING
#undef ENUM
const size_t vx_opt_count = sizeof vx_opt_table / sizeof vx_opt_table[0];

const char *vx_opt_type_name(enum vx_opt_type t) {
  static const char *names[] = {"BOOL", "SIZE", "SIZES", "PERCENT", "INT", "STRING", "ENUM"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

const vx_opt_desc_t *vx_opt_find(const char *name) {
  for (size_t i = 0; i < vx_opt_count; i++)
    if (!strcmp(vx_opt_table[i].name, name)) return &vx_opt_table[i];
  return NULL;
}

/* The library's own parser decides (options.c): one grammar for both. */
int vx_opt_check(const vx_opt_desc_t *o, const char *v, char *err, size_t errlen) {
  static vx_options_t scratch;
  char name[64];
  snprintf(name, sizeof name, "VX_%s", o->name);
  int i = vx_option_find(name);
  if (i < 0) {
    if (err && errlen) snprintf(err, errlen, "%s: not an option of this libvx", name);
    return -EINVAL;
  }
  return *v ? vx_option_set(&scratch, i, v, err, errlen) : 0;
}
