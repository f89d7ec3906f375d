/* cli.c: usage errors, number parsing and byte formatting shared by the
 * vx subcommands. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

int vx_cli_usage_error(const char *cmd, const char *msg) {
  fprintf(stderr, "vx %s: %s\nTry 'vx %s --help'.\n", cmd, msg ? msg : "bad arguments", cmd);
  return 2;
}

int vx_cli_bad_option(const char *cmd, int argc, char *const argv[], const char *shortopts) {
  const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
  char msg[320];
  const char *p = optopt ? strchr(shortopts, optopt) : NULL;
  if (!strncmp(arg, "--", 2) && optopt) /* a long option that takes a value, given none */
    snprintf(msg, sizeof msg, "option '%.200s' needs a value", arg);
  else if (p && p[1] == ':')
    snprintf(msg, sizeof msg, "option '-%c' needs a value", optopt);
  else if (optopt && !(arg[0] == '-' && arg[1] == '-'))
    snprintf(msg, sizeof msg, "unknown option '-%c'", optopt);
  else
    snprintf(msg, sizeof msg, "unknown option '%.200s'", arg);
  return vx_cli_usage_error(cmd, msg);
}

int vx_cli_help(const char *usage) {
  fputs(usage, stdout);
  return 0;
}

int vx_cli_parse_seconds(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || *end || errno || !(v >= 0) || v > 86400) return -EINVAL;
  *out = v;
  return 0;
}

int vx_cli_parse_count(const char *s, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *end || errno || v < 1) return -EINVAL;
  *out = v;
  return 0;
}

char *vx_fmt_bytes(uint64_t b, char *buf, size_t len) {
  static const char units[] = "KMGTPE";
  if (b < 1024) {
    snprintf(buf, len, "%u", (unsigned)b);
    return buf;
  }
  double v = (double)b;
  int u = -1;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
  return buf;
}

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *p) {
  size_t n = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
             : p[0] >= 0xe0 && p[0] <= 0xef ? 3
             : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                            : 0;
  for (size_t i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
      (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
    return 0;
  return n;
}

void vx_json_str(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    size_t n;
    if (*p == '"' || *p == '\\')
      fprintf(out, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f)
      fprintf(out, "\\u%04x", *p);
    else if (*p < 0x80)
      fputc(*p, out);
    else if ((n = utf8_len(p)) != 0)
      fwrite(p, 1, n, out), p += n - 1;
    else
      fputs("\\ufffd", out); /* not UTF-8: the output stays valid JSON */
  }
  fputc('"', out);
}
