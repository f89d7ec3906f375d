/* report.c: `vx report FILE.json [--svg OUT.svg] [--text]`: reads the exit
 * report (VX_REPORT=x.json) and prints a summary and/or draws the timeline. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_report.h"
#include "commands.h"

static const char usage[] =
    "usage: vx report FILE.json [--svg OUT.svg] [--folded OUT] [--text]\n"
    "Reads an exit report written with VX_REPORT=FILE.json.\n"
    "  --svg OUT     draw the timeline (bytes per tier, migration traffic) and\n"
    "                the top allocation sites by bytes spilled into OUT\n"
    "  --folded OUT  the allocation sites as folded stacks, outermost frame first,\n"
    "                weighted by bytes spilled (flamegraph.pl, speedscope, inferno)\n"
    "  --text        print the summary (the default without --svg or --folded)\n"
    "  -h, --help    this text\n";

/* Counters worth a line per device, when the report has them. */
static const char *const summary_keys[] = {"native_bytes_peak",
                                           "managed_bytes_peak",
                                           "host_tier_bytes_peak",
                                           "nvme_bytes_peak",
                                           "bytes_up",
                                           "bytes_down",
                                           "demand_bytes_up",
                                           "demand_bytes_down",
                                           "managed_fallbacks",
                                           "alloc_failures",
                                           "launches"};

static void text_devices(const vx_report_t *r) {
  const vx_json_t *devs = vx_json_get(r->root, "devices");
  for (const vx_json_t *d = devs && devs->type == VX_JSON_ARR ? devs->child : NULL; d;
       d = d->next) {
    const vx_json_t *c = vx_json_get(d, "counters") ? vx_json_get(d, "counters") : d;
    printf("device %.0f:\n", vx_json_num(vx_json_get(d, "device"), 0));
    for (size_t i = 0; i < sizeof summary_keys / sizeof *summary_keys; i++) {
      const vx_json_t *v = vx_json_get(c, summary_keys[i]);
      char b[16];
      if (v && v->type == VX_JSON_NUM)
        printf("  %-22s %18.0f%s%s%s\n", summary_keys[i], v->num,
               strstr(summary_keys[i], "bytes") ? "  (" : "",
               strstr(summary_keys[i], "bytes") ? vx_fmt_bytes((uint64_t)v->num, b, sizeof b) : "",
               strstr(summary_keys[i], "bytes") ? ")" : "");
    }
    if (vx_json_get(d, "demand_migrations")) /* the driver did not report them */
      printf("  %-22s %18s\n", "demand migrations", "not measured");
    double h = vx_json_num(vx_json_get(c, "prefetch_hits"), 0);
    double m = vx_json_num(vx_json_get(c, "prefetch_misses"), 0);
    if (h + m > 0) printf("  %-22s %17.1f%%\n", "prefetch hit rate", 100 * h / (h + m));
  }
}

static void print_text(const vx_report_t *r) {
  char b[16], stack[512];
  printf("command: %s\n", *r->command ? r->command : "(not recorded)");
  text_devices(r);
  if (r->nsamples)
    printf("timeline: %zu samples over %.1f s\n", r->nsamples,
           r->samples[r->nsamples - 1].t - r->samples[0].t);
  else
    printf("timeline: none recorded\n");
  if (!r->nsites) printf("allocation sites: none recorded (run with VX_SITES=1)\n");
  for (size_t i = 0; i < r->nsites && i < 10; i++) {
    vx_site_stack(&r->sites[i], stack, sizeof stack);
    printf("%2zu. %8s spilled  %s\n", i + 1,
           vx_fmt_bytes((uint64_t)r->sites[i].spilled, b, sizeof b), stack);
  }
}

/* One line per site: frames outermost first, ';'-separated (a ';' inside a
 * frame becomes ','), then the bytes it spilled; sites that spilled
 * nothing are left out (a flame graph of zero width). */
static void folded(const vx_report_t *r, FILE *out) {
  for (size_t i = 0; i < r->nsites; i++) {
    const vx_json_t *st = r->sites[i].stack;
    uint64_t w = r->sites[i].spilled > 0 ? (uint64_t)r->sites[i].spilled : 0;
    if (!w || !st) continue;
    const vx_json_t *fr[256];
    size_t n = 0;
    if (st->type == VX_JSON_ARR)
      for (const vx_json_t *f = st->child; f && n < 256; f = f->next)
        fr[n++] = f;
    else
      fr[n++] = st;
    for (size_t k = n; k-- > 0;) {
      for (const char *c = vx_json_str_or(fr[k], "?"); *c; c++)
        fputc(*c == ';' ? ',' : (*c == '\n' ? ' ' : *c), out);
      fputc(k ? ';' : ' ', out);
    }
    fprintf(out, "%llu\n", (unsigned long long)w);
  }
}

static int write_folded(const vx_report_t *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "vx report: %s: %s\n", path, strerror(errno));
    return 1;
  }
  folded(r, f);
  if (fclose(f)) {
    fprintf(stderr, "vx report: %s: %s\n", path, strerror(errno));
    return 1;
  }
  return 0;
}

static int write_svg(const vx_report_t *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return 1;
  }
  vx_report_svg(r, f);
  if (fclose(f)) {
    perror(path);
    return 1;
  }
  return 0;
}

int vx_cmd_report(int argc, char **argv) {
  static const struct option longopts[] = {{"svg", 1, 0, 's'},
                                           {"folded", 1, 0, 'f'},
                                           {"text", 0, 0, 't'},
                                           {"help", 0, 0, 'h'},
                                           {0, 0, 0, 0}};
  const char *svg = NULL, *fold = NULL;
  int ch, text = 0;
  optind = 1;
  opterr = 0; /* vx_cli_bad_option says it, prefixed "vx report:" */
  while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    if (ch == 's')
      svg = optarg;
    else if (ch == 'f')
      fold = optarg;
    else if (ch == 't')
      text = 1;
    else if (ch == 'h')
      return vx_cli_help(usage);
    else
      return vx_cli_bad_option("report", argc, argv, "h");
  }
  if (argc - optind != 1) return vx_cli_usage_error("report", "give exactly one report file");
  vx_report_t r;
  char err[512];
  if (vx_report_load(argv[optind], &r, err, sizeof err)) {
    fprintf(stderr, "vx report: %s\n", err);
    return 1;
  }
  int rc = svg ? write_svg(&r, svg) : 0;
  if (fold) rc |= write_folded(&r, fold);
  if (text || (!svg && !fold)) print_text(&r);
  vx_report_free(&r);
  return rc;
}
