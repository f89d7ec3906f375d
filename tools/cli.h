/* cli.h: helpers the vx subcommands share: usage errors, byte formatting,
 * the VX_* option table with its validators, live-segment enumeration. */
#ifndef VX_TOOLS_CLI_H
#define VX_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

// ---- usage ----

/* Prints "vx CMD: msg" and "Try 'vx CMD --help'." on stderr; returns 2
 * (the usage text itself is --help's, on stdout). */
int vx_cli_usage_error(const char *cmd, const char *msg);
/* After getopt_long returned '?' (opterr = 0): says which option was
 * unknown or lacked its value, as vx_cli_usage_error does; returns 2. */
int vx_cli_bad_option(const char *cmd, int argc, char *const argv[], const char *shortopts);
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

// ---- the VX_* table (options.def, through libvx's vx_option_info) ----

/* Checks value against option i's type (an empty value means the default).
 * Returns 0, or -EINVAL with "VX_NAME='value' is not valid: expected <form>"
 * in err. */
int vx_opt_check(int i, const char *value, char *err, size_t errlen);

// ---- live segments (procs.c) ----

/* Calls fn(pid, arg) for each /dev/shm/vx-<euid>-<pid> of a live process in
 * ascending pid order; removes segments of dead processes that we own.
 * Returns the number of live segments, or -errno. */
int vx_procs_each(void (*fn)(pid_t pid, void *arg), void *arg);

#endif
