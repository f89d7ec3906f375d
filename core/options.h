/* VX_* options: the struct generated from options.def, the pure value
 * parsers, loading from an environment, and iteration for `vx env`. */
#ifndef VX_INTERPOSE_OPTIONS_H
#define VX_INTERPOSE_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#define VX_MAX_DEVICES 16
#define VX_OPT_STRING_MAX 4096

/* A size: bytes, or a percentage of the device's physical memory (pct > 0).
 * set = 0 means the option was empty (its meaning is in the help text). */
typedef struct {
  uint64_t bytes;
  double pct;
  int set;
} vx_size_t;
typedef struct {
  int n; /* entries given; 0 = empty */
  vx_size_t v[VX_MAX_DEVICES];
} vx_sizes_t;
typedef struct {
  char s[VX_OPT_STRING_MAX];
} vx_optstr_t;

#define VX_OPTF_BOOL int
#define VX_OPTF_SIZE vx_size_t
#define VX_OPTF_SIZES vx_sizes_t
#define VX_OPTF_PERCENT int
#define VX_OPTF_INT long
#define VX_OPTF_STRING vx_optstr_t
#define VX_OPTF_ENUM int /* index into the choices listed in the help text */

typedef struct vx_options {
#define VX_OPTION(name, type, def, help) VX_OPTF_##type name;
#include "options.def"
#undef VX_OPTION
} vx_options_t;

enum vx_option_id {
#define VX_OPTION(name, type, def, help) VX_OPT_##name,
#include "options.def"
#undef VX_OPTION
  VX_OPTION_COUNT
};

/* ENUM values: VX_<OPTION>_<ID> is the index of that choice in its list in
 * choices.def (0 first), which is what an ENUM field holds.  Generated in
 * two steps: a running sequence over all rows, then each choice's distance
 * from its option's VX_CHOICES row. */
enum vx_choice_seq {
#define VX_CHOICES(opt) VX_CHOICE_SEQ_##opt,
#define VX_CHOICE(opt, id, text) VX_CHOICE_SEQ_##opt##_##id,
#include "choices.def"
#undef VX_CHOICES
#undef VX_CHOICE
  VX_CHOICE_SEQ_COUNT
};
enum vx_choice {
#define VX_CHOICES(opt)
#define VX_CHOICE(opt, id, text)                                                                   \
  VX_##opt##_##id = VX_CHOICE_SEQ_##opt##_##id - VX_CHOICE_SEQ_##opt - 1,
#include "choices.def"
#undef VX_CHOICES
#undef VX_CHOICE
};

/* The options in effect in libvx: parsed once at start-up (interpose/init.c),
 * read-only afterwards (core/state.c).  The tools never set it. */
extern vx_options_t vx_opt;

/* ---- pure parsers: 0, or -EINVAL (out untouched) ---- */
int vx_parse_bool(const char *s, int *out);
/* "123", "4K", "1.5g", "8GiB", "2TB" (units of 1024), or "50%" / "12.5%". */
int vx_parse_size(const char *s, vx_size_t *out);
/* One size, or a comma list of at most VX_MAX_DEVICES sizes. */
int vx_parse_sizes(const char *s, vx_sizes_t *out);
/* A whole number 0..100, optionally followed by '%'. */
int vx_parse_percent(const char *s, int *out);
/* A non-negative whole number that fits a long. */
int vx_parse_int(const char *s, long *out);
/* Index of s (any case) among the '|'-separated `choices` ("a|b|c"). */
int vx_parse_enum(const char *s, const char *choices, int *out);
/* Bytes a size stands for on a device with `physical` bytes (0 if unset). */
uint64_t vx_size_resolve(const vx_size_t *s, uint64_t physical);
/* The size for device `dev` from a per-device list: its own entry, or the
 * only entry when one value was given; NULL when none applies. */
const vx_size_t *vx_sizes_for(const vx_sizes_t *s, int dev);

/* ---- the host-memory cap (VX_HOST_MAX) ---- */
/* MemAvailable from the text of /proc/meminfo ("MemAvailable:  123 kB"):
 * 0 with *bytes set, or -ENOENT when the line is missing or malformed. */
int vx_meminfo_available(const char *meminfo, uint64_t *bytes);
/* The default cap for `available` bytes of MemAvailable: 80% of it. */
uint64_t vx_host_max_default(uint64_t available);
/* The cap in bytes: VX_HOST_MAX when set (a % of `available`), else the
 * default; `available` = 0 means unknown and gives `fallback`. */
uint64_t vx_host_max_resolve(const vx_size_t *opt, uint64_t available, uint64_t fallback);

/* ---- loading ---- */
/* Fills every option with its default. */
void vx_options_defaults(vx_options_t *o);
/* Defaults, then each VX_<NAME> that getenv_fn returns non-empty.  Returns
 * 0, or -EINVAL with err = "VX_NAME='value' is not valid: expected <form>"
 * for the first bad value (the other options are still parsed). */
int vx_options_load(vx_options_t *o, const char *(*getenv_fn)(const char *), char *err,
                    size_t errlen);
/* Parses one value into option i.  Same return and err as above. */
int vx_option_set(vx_options_t *o, int i, const char *value, char *err, size_t errlen);

/* ---- iteration (for `vx env` and the README table) ---- */
typedef struct {
  const char *name; /* "VX_DISABLE" */
  const char *type; /* "BOOL", "SIZE", ... */
  const char *def;
  const char *help;
  const char *choices; /* ENUM: "a|b|c" from choices.def; NULL otherwise */
} vx_option_info_t;
int vx_option_count(void);
/* NULL when i is out of range. */
const vx_option_info_t *vx_option_info(int i);
/* Index of the option named VX_<name> or <name>, or -1. */
int vx_option_find(const char *name);
/* Option i's value in o as text (the form it can be parsed back from).
 * Returns 0, or -EINVAL for a bad index. */
int vx_option_format(const vx_options_t *o, int i, char *buf, size_t len);
/* The accepted form of option i, as the error line states it. */
const char *vx_option_form(int i);

#endif
