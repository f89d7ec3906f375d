/* VX_* options: the table from options.def, pure parsers for each type,
 * loading from an environment, and text forms for `vx env`. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum opt_type { OT_BOOL, OT_SIZE, OT_SIZES, OT_PERCENT, OT_INT, OT_STRING, OT_ENUM };

struct opt_row {
  vx_option_info_t info;
  enum opt_type type;
  size_t offset;
};

/* Each ENUM option's choices as one string "|a|b|c", from choices.def: a
 * VX_CHOICES row ends the previous definition and opens the next. */
#define VX_CHOICES(opt)                                                                            \
  ;                                                                                                \
  static const char choices_##opt[] = ""
#define VX_CHOICE(opt, id, text) "|" text
static const char choices_none_[] __attribute__((unused)) = ""
#include "choices.def"
    ;
#undef VX_CHOICES
#undef VX_CHOICE

/* An option's choices past the leading '|' (ENUM), or NULL: an ENUM without
 * a VX_CHOICES row does not compile. */
#define CHOICES_BOOL(name) NULL
#define CHOICES_SIZE(name) NULL
#define CHOICES_SIZES(name) NULL
#define CHOICES_PERCENT(name) NULL
#define CHOICES_INT(name) NULL
#define CHOICES_STRING(name) NULL
#define CHOICES_ENUM(name) (choices_##name + 1)

static const struct opt_row opt_table[] = {
#define VX_OPTION(name, type, def, help)                                                           \
  {{"VX_" #name, #type, def, help, CHOICES_##type(name)}, OT_##type, offsetof(vx_options_t, name)},
#include "options.def"
#undef VX_OPTION
};

// ---- parsers ----

int vx_parse_bool(const char *s, int *out) {
  static const char *const yes[] = {"1", "yes", "true", "on"};
  static const char *const no[] = {"0", "no", "false", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (!strcasecmp(s, yes[i])) {
      *out = 1;
      return 0;
    }
    if (!strcasecmp(s, no[i])) {
      *out = 0;
      return 0;
    }
  }
  return -EINVAL;
}

/* A plain decimal number (digits, optional fraction), no sign, no spaces. */
static int parse_decimal(const char *s, double *val, const char **end) {
  const char *p = s;
  while (isdigit((unsigned char)*p))
    p++;
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p))
      p++;
  }
  if (p == s || (p == s + 1 && *s == '.')) return -EINVAL;
  *val = strtod(s, NULL);
  *end = p;
  return 0;
}

static int unit_shift(const char **p) {
  static const char units[] = "KMGT";
  const char *u = strchr(units, toupper((unsigned char)**p));
  if (!**p || !u) return 0;
  (*p)++;
  if ((**p == 'i' || **p == 'I') && (p[0][1] == 'B' || p[0][1] == 'b'))
    *p += 2;
  else if (**p == 'B' || **p == 'b')
    (*p)++;
  return 10 * (int)(u - units + 1);
}

int vx_parse_size(const char *s, vx_size_t *out) {
  double v;
  const char *p;
  if (parse_decimal(s, &v, &p)) return -EINVAL;
  if (*p == '%') {
    /* Below a millionth of a percent is a typo, not a budget; the bound also
     * keeps the value printable in plain decimals (see format_size). */
    if (p[1] || v < 1e-6 || v > 100) return -EINVAL;
    *out = (vx_size_t){.bytes = 0, .pct = v, .set = 1};
    return 0;
  }
  const char *num_end = p;
  int shift = unit_shift(&p);
  if (*p == 'B' || *p == 'b') p++;
  if (*p) return -EINVAL;
  /* A bare number other than 0 is refused: "8" meant 8 bytes where the
   * user meant 8G.  Bytes are written with B (512B). */
  if (p == num_end && v != 0) return -EINVAL;
  double bytes = ldexp(v, shift);
  if (bytes >= 18446744073709551616.0 || bytes != floor(bytes)) return -EINVAL;
  *out = (vx_size_t){.bytes = (uint64_t)bytes, .pct = 0, .set = 1};
  return 0;
}

int vx_parse_sizes(const char *s, vx_sizes_t *out) {
  vx_sizes_t r = {0};
  char item[64];
  const char *p = s;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == 0 || len >= sizeof item || r.n == VX_MAX_DEVICES) return -EINVAL;
    memcpy(item, p, len);
    item[len] = 0;
    if (vx_parse_size(item, &r.v[r.n])) return -EINVAL;
    r.n++;
    if (!comma) break;
    p = comma + 1;
  }
  *out = r;
  return 0;
}

int vx_parse_int(const char *s, long *out) {
  if (!isdigit((unsigned char)*s)) return -EINVAL;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || *end) return -EINVAL;
  *out = v;
  return 0;
}

int vx_parse_percent(const char *s, int *out) {
  char buf[16];
  size_t len = strlen(s);
  if (len == 0 || len >= sizeof buf) return -EINVAL;
  memcpy(buf, s, len + 1);
  if (buf[len - 1] == '%') buf[len - 1] = 0;
  long v;
  if (vx_parse_int(buf, &v) || v > 100) return -EINVAL;
  *out = (int)v;
  return 0;
}

int vx_parse_enum(const char *s, const char *choices, int *out) {
  size_t want = strlen(s);
  if (!choices || want == 0) return -EINVAL;
  const char *c = choices, *end = c + strlen(c);
  for (int i = 0; c < end; i++) {
    const char *bar = memchr(c, '|', (size_t)(end - c));
    size_t n = bar ? (size_t)(bar - c) : (size_t)(end - c);
    if (n == want && !strncasecmp(c, s, n)) {
      *out = i;
      return 0;
    }
    c += n + 1;
  }
  return -EINVAL;
}

uint64_t vx_size_resolve(const vx_size_t *s, uint64_t physical) {
  if (!s || !s->set) return 0;
  if (s->pct > 0) return (uint64_t)((double)physical * s->pct / 100.0);
  return s->bytes;
}

const vx_size_t *vx_sizes_for(const vx_sizes_t *s, int dev) {
  if (s->n == 1) return &s->v[0];
  if (dev >= 0 && dev < s->n) return &s->v[dev];
  return NULL;
}

// ---- the host-memory cap ----

int vx_meminfo_available(const char *meminfo, uint64_t *bytes) {
  static const char key[] = "MemAvailable:";
  for (const char *p = meminfo; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, key, sizeof key - 1)) continue;
    p += sizeof key - 1;
    while (*p == ' ' || *p == '\t')
      p++;
    if (!isdigit((unsigned char)*p)) return -ENOENT;
    errno = 0;
    char *end;
    unsigned long long kb = strtoull(p, &end, 10);
    while (*end == ' ' || *end == '\t')
      end++;
    if (errno || strncmp(end, "kB", 2) || kb > UINT64_MAX / 1024) return -ENOENT;
    *bytes = (uint64_t)kb * 1024;
    return 0;
  }
  return -ENOENT;
}

/* 80%: MemAvailable already excludes what other processes hold; the fifth
 * left over is for the program's own later growth (data loaders, pinned
 * staging buffers, the driver's host allocations) and the page cache, so
 * that reaching the cap is an OOM error, not swapping or the OOM killer. */
uint64_t vx_host_max_default(uint64_t available) {
  return available / 5 * 4 + available % 5 * 4 / 5;
}

uint64_t vx_host_max_resolve(const vx_size_t *opt, uint64_t available, uint64_t fallback) {
  if (opt && opt->set) {
    if (opt->pct > 0) return available ? vx_size_resolve(opt, available) : fallback;
    return opt->bytes;
  }
  return available ? vx_host_max_default(available) : fallback;
}

// ---- the table ----

int vx_option_count(void) {
  return VX_OPTION_COUNT;
}

const vx_option_info_t *vx_option_info(int i) {
  return i >= 0 && i < VX_OPTION_COUNT ? &opt_table[i].info : NULL;
}

int vx_option_find(const char *name) {
  if (!strncmp(name, "VX_", 3)) name += 3;
  for (int i = 0; i < VX_OPTION_COUNT; i++)
    if (!strcmp(opt_table[i].info.name + 3, name)) return i;
  return -1;
}

const char *vx_option_form(int i) {
  static __thread char buf[160];
  if (i < 0 || i >= VX_OPTION_COUNT) return "";
  switch (opt_table[i].type) {
  case OT_BOOL:
    return "0/1, yes/no, true/false or on/off";
  case OT_SIZE:
    return "a size with a unit such as 512M, 8G, 1.5T or 50% (of physical VRAM), or 0";
  case OT_SIZES:
    return "a size with a unit such as 8G or 50%, or a comma list of sizes, one per device";
  case OT_PERCENT:
    return "a whole percentage from 0 to 100";
  case OT_INT:
    return "a non-negative whole number";
  case OT_STRING:
    return "at most 4095 characters";
  case OT_ENUM:
    snprintf(buf, sizeof buf, "one of %s", opt_table[i].info.choices);
    return buf;
  }
  return "";
}

static int opt_parse(const struct opt_row *r, void *field, const char *v) {
  switch (r->type) {
  case OT_BOOL:
    return vx_parse_bool(v, field);
  case OT_SIZE:
    if (!*v) {
      *(vx_size_t *)field = (vx_size_t){0};
      return 0;
    }
    return vx_parse_size(v, field);
  case OT_SIZES:
    if (!*v) {
      *(vx_sizes_t *)field = (vx_sizes_t){0};
      return 0;
    }
    return vx_parse_sizes(v, field);
  case OT_PERCENT:
    return vx_parse_percent(v, field);
  case OT_INT:
    return vx_parse_int(v, field);
  case OT_ENUM:
    return vx_parse_enum(v, r->info.choices, field);
  case OT_STRING:
    if (strlen(v) >= VX_OPT_STRING_MAX) return -EINVAL;
    strcpy(((vx_optstr_t *)field)->s, v);
    return 0;
  }
  return -EINVAL;
}

/* SIZE options whose empty value means "no limit": there 0 read as no
 * limit too, which nobody means; refused, with the way to say either. */
static int zero_refused(const struct opt_row *r) {
  static const char *const names[] = {"VX_HOST_LIMIT",
                                      "VX_NVME_LIMIT"}; /* DEVICE_LIMIT=0: all movable */
  for (size_t k = 0; k < sizeof names / sizeof *names; k++)
    if (!strcmp(r->info.name, names[k])) return 1;
  return 0;
}

/* Nonzero when a SIZE/SIZES value holds a 0. */
static int holds_zero(const struct opt_row *r, const void *field) {
  if (r->type == OT_SIZE) {
    const vx_size_t *v = field;
    return v->set && !v->bytes && v->pct == 0;
  }
  if (r->type != OT_SIZES) return 0;
  const vx_sizes_t *l = field;
  for (int k = 0; k < l->n; k++)
    if (l->v[k].set && !l->v[k].bytes && l->v[k].pct == 0) return 1;
  return 0;
}

/* A digits-only value (no unit, no %, no dot). */
static int bare_number(const char *v) {
  if (!*v) return 0;
  for (; *v; v++)
    if (!isdigit((unsigned char)*v)) return 0;
  return 1;
}

int vx_option_set(vx_options_t *o, int i, const char *value, char *err, size_t errlen) {
  if (i < 0 || i >= VX_OPTION_COUNT) return -EINVAL;
  const struct opt_row *r = &opt_table[i];
  int sized = r->type == OT_SIZE || r->type == OT_SIZES;
  union {
    vx_size_t one;
    vx_sizes_t list;
  } tmp;
  void *field = (char *)o + r->offset;
  /* Parsed aside first: a refused value leaves the option as it was. */
  if (sized && opt_parse(r, &tmp, value) == 0) {
    if (!(zero_refused(r) && holds_zero(r, &tmp))) {
      memcpy(field, &tmp, r->type == OT_SIZE ? sizeof tmp.one : sizeof tmp.list);
      return 0;
    }
    if (err && errlen)
      snprintf(err, errlen,
               "%s='%.200s' is not valid: 0 is not a limit (leave %s empty for no limit)",
               r->info.name, value, r->info.name);
    return -EINVAL;
  }
  if (!sized && opt_parse(r, field, value) == 0) return 0;
  if (err && errlen && sized && bare_number(value))
    snprintf(err, errlen, "%s='%.200s' is not valid: a size needs a unit (%sM? %sG? %sB for bytes)",
             r->info.name, value, value, value, value);
  else if (err && errlen)
    snprintf(err, errlen, "%s='%.200s' is not valid: expected %s", r->info.name, value,
             vx_option_form(i));
  return -EINVAL;
}

void vx_options_defaults(vx_options_t *o) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < VX_OPTION_COUNT; i++)
    vx_option_set(o, i, opt_table[i].info.def, NULL, 0); /* defaults are tested to parse */
}

int vx_options_load(vx_options_t *o, const char *(*getenv_fn)(const char *), char *err,
                    size_t errlen) {
  int rc = 0;
  vx_options_defaults(o);
  for (int i = 0; i < VX_OPTION_COUNT; i++) {
    const char *v = getenv_fn(opt_table[i].info.name);
    if (!v || !*v) continue;
    if (vx_option_set(o, i, v, rc ? NULL : err, errlen)) rc = -EINVAL;
  }
  return rc;
}

// ---- text forms ----

static void format_size(const vx_size_t *s, char *buf, size_t len) {
  static const char units[] = " KMGT";
  if (!s->set) {
    snprintf(buf, len, "%s", "");
    return;
  }
  if (s->pct > 0) {
    /* Plain decimals with 17 significant digits, so that the text parses
     * back to the same double (the parser takes no exponent). */
    char num[48];
    int prec = 17;
    for (double x = s->pct; x < 1 && prec < 24; x *= 10)
      prec++;
    snprintf(num, sizeof num, "%.*f", prec, s->pct);
    char *e = num + strlen(num) - 1;
    while (*e == '0')
      *e-- = 0;
    if (*e == '.') *e = 0;
    snprintf(buf, len, "%s%%", num);
    return;
  }
  uint64_t v = s->bytes;
  int u = 0;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    u++;
  }
  if (u)
    snprintf(buf, len, "%llu%c", (unsigned long long)v, units[u]);
  else
    snprintf(buf, len, v ? "%lluB" : "%llu", (unsigned long long)v);
}

static void format_enum(const char *choices, int idx, char *buf, size_t len) {
  const char *c = choices;
  snprintf(buf, len, "%d", idx);
  const char *end = c + strlen(c);
  for (int i = 0; c < end; i++) {
    const char *bar = memchr(c, '|', (size_t)(end - c));
    size_t w = bar ? (size_t)(bar - c) : (size_t)(end - c);
    if (i == idx) {
      snprintf(buf, len, "%.*s", (int)w, c);
      return;
    }
    c += w + 1;
  }
}

int vx_option_format(const vx_options_t *o, int i, char *buf, size_t len) {
  if (i < 0 || i >= VX_OPTION_COUNT || !len) return -EINVAL;
  const struct opt_row *r = &opt_table[i];
  const void *f = (const char *)o + r->offset;
  buf[0] = 0;
  switch (r->type) {
  case OT_BOOL:
  case OT_PERCENT:
    snprintf(buf, len, "%d", *(const int *)f);
    break;
  case OT_INT:
    snprintf(buf, len, "%ld", *(const long *)f);
    break;
  case OT_STRING:
    snprintf(buf, len, "%s", ((const vx_optstr_t *)f)->s);
    break;
  case OT_ENUM:
    format_enum(r->info.choices, *(const int *)f, buf, len);
    break;
  case OT_SIZE:
    format_size(f, buf, len);
    break;
  case OT_SIZES: {
    const vx_sizes_t *s = f;
    size_t used = 0;
    for (int k = 0; k < s->n && used + 1 < len; k++) {
      if (k) buf[used++] = ',', buf[used] = 0;
      format_size(&s->v[k], buf + used, len - used);
      used += strlen(buf + used);
    }
    break;
  }
  }
  return 0;
}
