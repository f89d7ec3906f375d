/* stat.c: `vx stat [PID] [--json]`: one process's live counters, printed
 * once (without PID: every live vx process of this user). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "counters.h"
#include "stats_shm.h"

static const char usage[] =
    "usage: vx stat [PID] [--json | --prometheus]\n"
    "Prints the live counters of a process running under vx (default: all of\n"
    "this user's).  Exits 1 if PID publishes no statistics.\n"
    "  --json        one JSON object {\"processes\":[...]}\n"
    "  --prometheus  the Prometheus text format (vx_<counter>{pid,device,command};\n"
    "                sums as _total counters; vx_limit_bytes{limit=device|host|nvme})\n"
    "  -h, --help  this text\n";

static const char *limit_names[VX_LIMIT_COUNT] = {"device", "host", "nvme"};

struct stat_ctx {
  int json, prom, count;
  vx_stats_view_t *views; /* --prometheus: every process, printed metric by metric */
  size_t nviews, cap;
};

static double age_s(uint64_t ns) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
  return now - ns / 1e9;
}

static unsigned ncounters(const vx_stats_view_t *v) {
  return v->hdr.ncounters < (unsigned)VX_CTR_COUNT ? v->hdr.ncounters : (unsigned)VX_CTR_COUNT;
}

/* 1 if counter i counts bytes (printed human-readable in text output). */
static int counts_bytes(unsigned i) {
  return strstr(vx_counter_name((int)i), "bytes") != NULL;
}

/* 1 if the driver's own migrations of device d are known (an older
 * writer, without the counter, reads as not measured). */
static int demand_known(const vx_stats_view_t *v, unsigned d) {
  return VX_STATS_demand_measured < ncounters(v) && vx_stats_get(v, d, VX_STATS_demand_measured);
}

/* Counter i is one of the driver's own migrations, not measured on d. */
static int demand_unknown(const vx_stats_view_t *v, unsigned d, unsigned i) {
  return (i == VX_STATS_demand_up_bytes || i == VX_STATS_demand_down_bytes) && !demand_known(v, d);
}

/* Average rate of counter i since the process started, as "1.5G/s". */
static char *avg_rate(const vx_stats_view_t *v, unsigned d, unsigned i, char *buf, size_t len) {
  char b[16];
  double s = age_s(v->hdr.start_ns), x = (double)vx_stats_get(v, d, i);
  snprintf(buf, len, "%s/s", vx_fmt_bytes(s > 0.001 ? (uint64_t)(x / s) : 0, b, sizeof b));
  return buf;
}

/* vx's own traffic and the driver's, as rates since the start. */
static void text_rates(const vx_stats_view_t *v, unsigned d) {
  char u[24], w[24];
  printf("  device %u traffic, average since start: up %s down %s (vx's own)\n", d,
         avg_rate(v, d, VX_STATS_bytes_up, u, sizeof u),
         avg_rate(v, d, VX_STATS_bytes_down, w, sizeof w));
  if (demand_known(v, d))
    printf("  device %u demand migrations, average since start: up %s down %s (the driver's own)\n",
           d, avg_rate(v, d, VX_STATS_demand_up_bytes, u, sizeof u),
           avg_rate(v, d, VX_STATS_demand_down_bytes, w, sizeof w));
  else
    printf("  device %u demand migrations: not measured (the driver does not report them)\n", d);
}

static void text_device(const vx_stats_view_t *v, unsigned d) {
  char b[32];
  printf("  device %u limits:", d);
  for (unsigned l = 0; l < VX_LIMIT_COUNT; l++) {
    uint64_t x = vx_stats_limit(v, d, l);
    printf(" %s %s", limit_names[l], x ? vx_fmt_bytes(x, b, sizeof b) : "none");
  }
  printf("\n");
  text_rates(v, d);
  for (unsigned i = 0; i < ncounters(v); i++) {
    uint64_t x = vx_stats_get(v, d, i);
    if (demand_unknown(v, d, i)) {
      printf("    %-24s %20s\n", vx_counter_name((int)i), "not measured");
      continue;
    }
    printf("    %-24s %20llu", vx_counter_name((int)i), (unsigned long long)x);
    if (counts_bytes(i) && x >= 1024) printf("  (%s)", vx_fmt_bytes(x, b, sizeof b));
    printf("\n");
  }
}

static void print_text(const vx_stats_view_t *v) {
  unsigned used = 0;
  for (unsigned d = 0; d < v->hdr.ndev; d++)
    used += vx_stats_dev_active(v, d);
  printf("pid %d  %s\n  started %.0f s ago, heartbeat %.1f s ago, %u of %u device slots in use, "
         "%u counters\n",
         (int)v->hdr.pid, v->hdr.cmdline, age_s(v->hdr.start_ns), age_s(vx_stats_heartbeat(v)),
         used, v->hdr.ndev, v->hdr.ncounters);
  for (unsigned d = 0; d < v->hdr.ndev; d++)
    if (vx_stats_dev_active(v, d)) text_device(v, d);
}

static void json_device(const vx_stats_view_t *v, unsigned d, int first) {
  printf("%s{\"device\":%u,\"limits\":{", first ? "" : ",", d);
  for (unsigned l = 0; l < VX_LIMIT_COUNT; l++)
    printf("%s\"%s\":%llu", l ? "," : "", limit_names[l],
           (unsigned long long)vx_stats_limit(v, d, l));
  printf("},");
  if (!demand_known(v, d)) printf("\"demand_migrations\":\"not measured\",");
  printf("\"counters\":{");
  for (unsigned i = 0; i < ncounters(v); i++)
    printf("%s\"%s\":%llu", i ? "," : "", vx_counter_name((int)i),
           (unsigned long long)vx_stats_get(v, d, i));
  printf("}}");
}

static void print_json(const vx_stats_view_t *v, int first) {
  printf("%s\n{\"pid\":%d,\"cmdline\":", first ? "" : ",", (int)v->hdr.pid);
  vx_json_str(stdout, v->hdr.cmdline);
  printf(",\"start_ns\":%llu,\"heartbeat_ns\":%llu,\"version\":%u,\"devices\":[",
         (unsigned long long)v->hdr.start_ns, (unsigned long long)vx_stats_heartbeat(v),
         v->hdr.version);
  /* The devices in use, as the text form (the segment has a slot for
   * every device the process could use). */
  for (unsigned d = 0, n = 0; d < v->hdr.ndev; d++)
    if (vx_stats_dev_active(v, d)) json_device(v, d, n++ == 0);
  printf("]}");
}

// ---- the Prometheus text format ----

/* A label value: backslash, quote and newline escaped, at most 80 bytes. */
static void prom_label(const char *s) {
  for (int n = 0; *s && n < 80; s++, n++) {
    if (*s == '\\' || *s == '"')
      printf("\\%c", *s);
    else if (*s == '\n')
      printf("\\n");
    else
      putchar((unsigned char)*s >= 0x20 ? *s : '?');
  }
}

static void prom_labels(const vx_stats_view_t *v, unsigned d) {
  printf("{pid=\"%d\",device=\"%u\",command=\"", (int)v->hdr.pid, d);
  prom_label(v->hdr.cmdline);
  printf("\"");
}

/* Every metric once (HELP, TYPE), then its samples for every process and
 * device in use: the format wants a metric's samples together. */
static void print_prom(const struct stat_ctx *c) {
  for (int i = 0; i < VX_CTR_COUNT; i++) {
    int sum = vx_counter_kind(i) == VX_CTR_KIND_SUM;
    const char *name = vx_counter_name(i);
    printf("# HELP vx_%s%s %s\n", name, sum ? "_total" : "", vx_counter_help(i));
    printf("# TYPE vx_%s%s %s\n", name, sum ? "_total" : "", sum ? "counter" : "gauge");
    for (size_t k = 0; k < c->nviews; k++) {
      const vx_stats_view_t *v = &c->views[k];
      if ((unsigned)i >= ncounters(v)) continue;
      for (unsigned d = 0; d < v->hdr.ndev; d++) {
        /* not measured: no sample, rather than a zero that reads as none */
        if (!vx_stats_dev_active(v, d) || demand_unknown(v, d, (unsigned)i)) continue;
        printf("vx_%s%s", name, sum ? "_total" : "");
        prom_labels(v, d);
        printf("} %llu\n", (unsigned long long)vx_stats_get(v, d, (unsigned)i));
      }
    }
  }
  printf("# HELP vx_limit_bytes the device budget, VX_HOST_LIMIT and VX_NVME_LIMIT (0: none)\n");
  printf("# TYPE vx_limit_bytes gauge\n");
  for (size_t k = 0; k < c->nviews; k++)
    for (unsigned d = 0; d < c->views[k].hdr.ndev; d++) {
      if (!vx_stats_dev_active(&c->views[k], d)) continue;
      for (unsigned l = 0; l < VX_LIMIT_COUNT; l++) {
        printf("vx_limit_bytes");
        prom_labels(&c->views[k], d);
        printf(",limit=\"%s\"} %llu\n", limit_names[l],
               (unsigned long long)vx_stats_limit(&c->views[k], d, l));
      }
    }
}

static int show(pid_t pid, struct stat_ctx *c) {
  vx_stats_view_t v;
  int rc = vx_stats_shm_open(pid, &v);
  if (rc) return rc;
  if (c->prom) { /* kept open: printed metric by metric at the end */
    if (c->nviews == c->cap) {
      size_t cap = c->cap ? 2 * c->cap : 16;
      vx_stats_view_t *nv = realloc(c->views, cap * sizeof *nv);
      if (!nv) {
        vx_stats_shm_close(&v);
        return -ENOMEM;
      }
      c->views = nv, c->cap = cap;
    }
    c->views[c->nviews++] = v;
    c->count++;
    return 0;
  }
  if (c->json)
    print_json(&v, c->count == 0);
  else
    print_text(&v);
  c->count++;
  vx_stats_shm_close(&v);
  return 0;
}

static void show_each(pid_t pid, void *arg) {
  int rc = show(pid, arg);
  if (rc && rc != -ENOENT) fprintf(stderr, "vx stat: pid %d: %s\n", (int)pid, strerror(-rc));
}

int vx_cmd_stat(int argc, char **argv) {
  static const struct option longopts[] = {
      {"json", 0, 0, 'j'}, {"prometheus", 0, 0, 'p'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  struct stat_ctx c = {0};
  long pid = 0;
  int ch;
  optind = 1;
  opterr = 0; /* vx_cli_bad_option says it, prefixed "vx stat:" */
  while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    if (ch == 'j')
      c.json = 1;
    else if (ch == 'p')
      c.prom = 1;
    else if (ch == 'h')
      return vx_cli_help(usage);
    else
      return vx_cli_bad_option("stat", argc, argv, "h");
  }
  if (argc - optind > 1 ||
      (optind < argc && (vx_cli_parse_count(argv[optind], &pid) || pid > 0x3fffffff)))
    return vx_cli_usage_error("stat", "PID must be one positive number");
  if (c.json && c.prom) return vx_cli_usage_error("stat", "--json or --prometheus, not both");
  if (c.json) printf("{\"processes\":[");
  int rc = 0;
  if (pid) {
    rc = show((pid_t)pid, &c);
    if (rc)
      fprintf(stderr, "vx stat: pid %ld: %s\n", pid,
              rc == -ENOENT ? "no vx statistics (not under vx, or VX_STATS=0)" : strerror(-rc));
  } else if (vx_procs_each(show_each, &c) < 0) {
    fprintf(stderr, "vx stat: cannot read /dev/shm\n");
    rc = -1;
  }
  if (c.json) {
    printf("]}\n");
  } else if (c.prom) {
    print_prom(&c); /* with no process: the HELP and TYPE lines only, as exporters do */
    for (size_t k = 0; k < c.nviews; k++)
      vx_stats_shm_close(&c.views[k]);
    free(c.views);
  } else if (!pid && !c.count) {
    printf("no vx processes of this user\n");
  }
  return rc ? 1 : 0;
}
