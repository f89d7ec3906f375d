/* optcheck.c: a VX_* value checked with libvx's own table and parser
 * (core/options.c), before the library sees it: one grammar, one table. */
#include "cli.h"
#include "options.h"

#include <errno.h>
#include <stdio.h>

int vx_opt_check(int i, const char *v, char *err, size_t errlen) {
  static vx_options_t scratch;
  if (!vx_option_info(i)) {
    if (err && errlen) snprintf(err, errlen, "option %d: not an option of this libvx", i);
    return -EINVAL;
  }
  return *v ? vx_option_set(&scratch, i, v, err, errlen) : 0;
}
