/* fuzz_options.c: libFuzzer target for the VX_* value parsers (core/options.c).
 * Byte 0 picks the option, the rest is the value; accepted values must round-trip. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

static const char *fuzz_value;
static const char *every_var(const char *name) {
  (void)name;
  return fuzz_value;
}

/* An accepted value, formatted and parsed again, formats the same. */
static void round_trip(int i, const char *value) {
  static vx_options_t a, b;
  static char fa[VX_OPT_STRING_MAX + 64], fb[VX_OPT_STRING_MAX + 64];
  char err[256] = "";
  vx_options_defaults(&a);
  if (vx_option_set(&a, i, value, err, sizeof err) != 0) {
    if (strncmp(err, "VX_", 3) != 0) __builtin_trap(); /* the error names the variable */
    return;
  }
  if (vx_option_format(&a, i, fa, sizeof fa) != 0) __builtin_trap();
  vx_options_defaults(&b);
  if (vx_option_set(&b, i, fa, err, sizeof err) != 0) __builtin_trap();
  if (vx_option_format(&b, i, fb, sizeof fb) != 0) __builtin_trap();
  if (strcmp(fa, fb) != 0) __builtin_trap();
}

static void pure_parsers(const char *s) {
  vx_size_t sz;
  if (vx_parse_size(s, &sz) == 0) {
    (void)vx_size_resolve(&sz, 0);
    (void)vx_size_resolve(&sz, UINT64_C(80) << 30);
    (void)vx_size_resolve(&sz, UINT64_C(1) << 60); /* devices are smaller than 2^64 */
  }
  static vx_sizes_t ss;
  if (vx_parse_sizes(s, &ss) == 0) {
    if (ss.n < 0 || ss.n > VX_MAX_DEVICES) __builtin_trap();
    for (int d = -1; d <= VX_MAX_DEVICES; d++) {
      const vx_size_t *one = vx_sizes_for(&ss, d);
      if (one) (void)vx_size_resolve(one, UINT64_C(24) << 30);
    }
  }
  int v;
  long l;
  (void)vx_parse_bool(s, &v);
  if (vx_parse_percent(s, &v) == 0 && (v < 0 || v > 100)) __builtin_trap();
  if (vx_parse_int(s, &l) == 0 && l < 0) __builtin_trap();
  for (int i = 0; i < vx_option_count(); i++) {
    const vx_option_info_t *info = vx_option_info(i);
    if (strcmp(info->type, "ENUM") == 0) (void)vx_parse_enum(s, info->choices, &v);
  }
  (void)vx_option_find(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 2 * VX_OPT_STRING_MAX) return 0;
  char *s = malloc(size);
  if (!s) return 0;
  memcpy(s, data + 1, size - 1);
  s[size - 1] = '\0';
  round_trip(data[0] % vx_option_count(), s);
  pure_parsers(s);
  static vx_options_t o;
  char err[256];
  fuzz_value = s;
  (void)vx_options_load(&o, every_var, err, sizeof err);
  free(s);
  return 0;
}
