/* cli.h: helpers the vx subcommands share: usage errors, byte formatting,
 * the VX_* option table with its validators, live-segment enumeration. */
#ifndef VX_TOOLS_CLI_H
#define VX_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

// ---- usage ----

/* Prints "vx CMD: msg" (if msg) and the usage text on stderr; returns 2. */
int vx_cli_usage_error(const char *cmd, const char *usage, const char *msg);
/* Prints usage on stdout; returns 0 (for --help). */
int vx_cli_help(const char *usage);
/* Parses a non-negative decimal (seconds, may have a fraction) into *out;
 * returns 0 or -EINVAL. */
int vx_cli_parse_seconds(const char *s, double *out);
/* Parses a positive integer; returns 0 or -EINVAL. */
int vx_cli_parse_count(const char *s, long *out);

// ---- formatting ----

/* "1.5G", "512M", "0" into buf (>= 16 bytes); returns buf. */
char *vx_fmt_bytes(uint64_t bytes, char *buf, size_t len);
/* Writes s as a JSON string literal (with quotes); bytes that are not
 * UTF-8 become U+FFFD, so the output is always valid JSON. */
void vx_json_str(FILE *out, const char *s);

// ---- the VX_* table (options.def) ----

enum vx_opt_type {
  VX_T_BOOL,
  VX_T_SIZE,
  VX_T_SIZES,
  VX_T_PERCENT,
  VX_T_INT,
  VX_T_STRING,
  VX_T_ENUM
};

typedef struct vx_opt_desc {
  const char *name; /* without the VX_ prefix */
  enum vx_opt_type type;
  const char *def;
  const char *help;
} vx_opt_desc_t;

extern const vx_opt_desc_t vx_opt_table[];
extern const size_t vx_opt_count;

/* The row for name (without VX_), or NULL. */
const vx_opt_desc_t *vx_opt_find(const char *name);
/* Checks value against the row's type (an empty value means the default).
 * Returns 0, or -EINVAL with "VX_NAME: accepted form" in err. */
int vx_opt_check(const vx_opt_desc_t *o, const char *value, char *err, size_t errlen);
/* Name of the type ("SIZE"...). */
const char *vx_opt_type_name(enum vx_opt_type t);

// ---- live segments (procs.c) ----

/* Calls fn(pid, arg) for each /dev/shm/vx-<euid>-<pid> of a live process in
 * ascending pid order; removes segments of dead processes that we own.
 * Returns the number of live segments, or -errno. */
int vx_procs_each(void (*fn)(pid_t pid, void *arg), void *arg);

#endif
