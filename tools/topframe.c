/* topframe.c: one `vx top` frame: per process and device, tier bars against
 * limits, migration/NVMe rates from deltas, prefetch hit rate, and each
 * process's share of every GPU's shared budget (the ledger); <= 80 columns. */
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tiers/ledger.h"
#include "cli.h"
#include "cli_top.h"
#include "stats_shm.h"

/* Counters whose rates are shown. */
enum { R_UP, R_DOWN, R_NVR, R_NVW, R_LAUNCH, R_DUP, R_DDOWN, R_N };
static const unsigned rate_idx[R_N] = {VX_STATS_bytes_up,         VX_STATS_bytes_down,
                                       VX_STATS_nvme_read_bytes,  VX_STATS_nvme_write_bytes,
                                       VX_STATS_launches,         VX_STATS_demand_up_bytes,
                                       VX_STATS_demand_down_bytes};

struct prev {
  pid_t pid;
  uint64_t start_ns;
  double t;
  uint64_t v[VX_STATS_MAX_DEV][R_N];
  int seen; /* in the current frame */
};

struct vx_top_state {
  struct prev *p;
  size_t n, cap;
  FILE *out;
  int width;
  double interval;
  int nprocs;
  pid_t only;
  int rows; /* 0: no limit */
};

vx_top_state_t *vx_top_new(void) {
  return calloc(1, sizeof(vx_top_state_t));
}

void vx_top_free(vx_top_state_t *st) {
  if (st) free(st->p);
  free(st);
}

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double real_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One output line, cut to the width; control and non-ASCII bytes become '?'. */
static void emit(vx_top_state_t *st, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  size_t n = strlen(line);
  while (n && line[n - 1] == ' ')
    n--;
  if (n > (size_t)st->width) n = (size_t)st->width;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)line[i] < 0x20 || (unsigned char)line[i] >= 0x7f) line[i] = '?';
  fprintf(st->out, "%.*s\n", (int)n, line);
}

/* first (NULL: an indent), then the fields, one space apart; a field that
 * would pass the width starts the next line, indented (trailing padding may
 * pass it: emit drops it), so a number is never cut.  At 80 columns each
 * group is one line. */
static void emit_fields(vx_top_state_t *st, const char *first, const char *const *f, int n) {
  char line[512];
  size_t ind = st->width < 40 ? 2 : 6, len;
  memset(line, ' ', ind);
  line[ind] = 0;
  if (first) snprintf(line, sizeof line, "%s", first);
  len = strlen(line);
  for (int i = 0; i < n; i++) {
    size_t shown = strlen(f[i]), start = len;
    while (shown && f[i][shown - 1] == ' ')
      shown--;
    while (start > ind && line[start - 1] == ' ')
      start--;
    if (start > ind && len + 1 + shown > (size_t)st->width) {
      emit(st, "%s", line);
      memset(line, ' ', ind);
      line[len = ind] = 0;
    }
    len += (size_t)snprintf(line + len, sizeof line - len, "%s%s", len > ind ? " " : "", f[i]);
    if (len >= sizeof line) len = sizeof line - 1;
  }
  emit(st, "%s", line);
}

static char *bar(uint64_t used, uint64_t limit, char *buf) {
  int w = 20, fill = 0;
  if (limit) fill = used >= limit ? w : (int)((double)used / (double)limit * w + 0.5);
  for (int i = 0; i < w; i++)
    buf[i] = limit ? (i < fill ? '#' : '.') : ' ';
  buf[w] = 0;
  return buf;
}

static char *rate(double bps, char *buf, size_t len) {
  char b[16];
  snprintf(buf, len, "%s/s", vx_fmt_bytes(bps < 0 ? 0 : (uint64_t)bps, b, sizeof b));
  return buf;
}

/* At most six characters ("9999", "999.9k", "1.2M"), so that a group of
 * fields stays one line at 80 columns whatever the value: a launch rate
 * taken since the start of a process a moment old ran into millions a
 * second, printed "1234.5k", and pushed "alloc failures" onto a line of
 * its own (cli_top failed on it now and then under a parallel ctest). */
static char *count(uint64_t x, char *buf, size_t len) {
  static const char units[] = "kMGTPE";
  if (x < 10000) {
    snprintf(buf, len, "%llu", (unsigned long long)x);
    return buf;
  }
  double v = (double)x / 1e3;
  int u = 0;
  while (v >= 999.95 && u < 5) {
    v /= 1e3;
    u++;
  }
  snprintf(buf, len, "%.1f%c", v, units[u]);
  return buf;
}

static struct prev *find_prev(vx_top_state_t *st, pid_t pid, uint64_t start_ns) {
  for (size_t i = 0; i < st->n; i++)
    if (st->p[i].pid == pid && st->p[i].start_ns == start_ns) return &st->p[i];
  if (st->n == st->cap) {
    size_t cap = st->cap ? st->cap * 2 : 16;
    struct prev *p = realloc(st->p, cap * sizeof *p);
    if (!p) return NULL;
    st->p = p, st->cap = cap;
  }
  struct prev *p = &st->p[st->n++];
  memset(p, 0, sizeof *p);
  p->pid = pid, p->start_ns = start_ns;
  return p;
}

/* On a terminal too narrow for the bar, the bar goes, never a number; the
 * extra fields that do not fit go to the next line. */
static void tier_line(vx_top_state_t *st, const char *lead, const char *name, uint64_t used,
                      uint64_t limit, const char *const *extra, int nextra) {
  char b1[24], b2[16], b3[16], first[128];
  snprintf(b2, sizeof b2, "%s", limit ? vx_fmt_bytes(limit, b3, sizeof b3) : "-");
  if (st->width < 70)
    snprintf(first, sizeof first, "%-6s%-7s%6s/%-6s", lead, name, vx_fmt_bytes(used, b3, sizeof b3),
             b2);
  else
    snprintf(first, sizeof first, "%-6s%-7s[%s] %6s/%-6s", lead, name, bar(used, limit, b1),
             vx_fmt_bytes(used, b3, sizeof b3), b2);
  emit_fields(st, first, extra, nextra);
}

static void device_lines(vx_top_state_t *st, const vx_stats_view_t *v, unsigned d,
                         const double *r) {
  char lead[16], a[16], b[16], c[16], e[16], f[4][48];
#define G(name) vx_stats_get(v, d, VX_STATS_##name)
  snprintf(lead, sizeof lead, " gpu%u", d);
  snprintf(f[0], sizeof f[0], "managed %s ", vx_fmt_bytes(G(managed_bytes), a, sizeof a));
  snprintf(f[1], sizeof f[1], "vmm %s", vx_fmt_bytes(G(vmm_bytes), b, sizeof b));
  tier_line(st, lead, "device", G(native_bytes) + G(vmm_bytes),
            vx_stats_limit(v, d, VX_LIMIT_DEVICE), (const char *const[]){f[0], f[1]}, 2);
  snprintf(f[0], sizeof f[0], "pinned %s", vx_fmt_bytes(G(host_pinned_bytes), a, sizeof a));
  /* What VX_HOST_LIMIT limits, as the report's partition counts it: the
   * static tier, or the NVMe tier's host-held bytes (which cover it). */
  uint64_t host = G(host_tier_bytes) > G(host_held_bytes) ? G(host_tier_bytes) : G(host_held_bytes);
  tier_line(st, "", "host", host, vx_stats_limit(v, d, VX_LIMIT_HOST), (const char *const[]){f[0]},
            1);
  tier_line(st, "", "nvme", G(nvme_bytes), vx_stats_limit(v, d, VX_LIMIT_NVME), NULL, 0);
  uint64_t hits = G(prefetch_hits), tries = hits + G(prefetch_misses);
  if (tries)
    snprintf(e, sizeof e, "%.1f%%", 100.0 * (double)hits / (double)tries);
  else
    snprintf(e, sizeof e, "-");
  snprintf(f[0], sizeof f[0], "up %-9s", rate(r[R_UP], a, sizeof a));
  snprintf(f[1], sizeof f[1], "down %-9s", rate(r[R_DOWN], a, sizeof a));
  snprintf(f[2], sizeof f[2], "prefetch hit %-6s", e);
  snprintf(f[3], sizeof f[3], "faults avoided %s", count(G(faults_avoided), c, sizeof c));
  emit_fields(st, NULL, (const char *const[]){f[0], f[1], f[2], f[3]}, 4);
  /* The driver's own migrations beside vx's, where the driver reports them. */
  if (G(demand_measured)) {
    snprintf(f[0], sizeof f[0], "demand up %-9s", rate(r[R_DUP], a, sizeof a));
    snprintf(f[1], sizeof f[1], "down %-9s", rate(r[R_DDOWN], a, sizeof a));
    emit_fields(st, NULL, (const char *const[]){f[0], f[1], "(the driver's own)"}, 3);
  } else {
    static const char *const unknown[] = {"demand migrations", "not measured",
                                          "(the driver does not report them)"};
    emit_fields(st, NULL, unknown, 3);
  }
  snprintf(f[0], sizeof f[0], "nvme read %-9s", rate(r[R_NVR], a, sizeof a));
  snprintf(f[1], sizeof f[1], "write %-9s", rate(r[R_NVW], a, sizeof a));
  snprintf(f[2], sizeof f[2], "launches %s/s ", count((uint64_t)r[R_LAUNCH], c, sizeof c));
  snprintf(f[3], sizeof f[3], "alloc failures %s", count(G(alloc_failures), b, sizeof b));
  emit_fields(st, NULL, (const char *const[]){f[0], f[1], f[2], f[3]}, 4);
#undef G
}

/* Rates per device: deltas since the previous frame, or since the start. */
static void rates(struct prev *p, const vx_stats_view_t *v, unsigned d, double now, double *r) {
  double up = real_now() - v->hdr.start_ns / 1e9;
  for (int k = 0; k < R_N; k++) {
    uint64_t x = vx_stats_get(v, d, rate_idx[k]);
    if (p && p->t > 0 && now > p->t)
      r[k] = x >= p->v[d][k] ? (double)(x - p->v[d][k]) / (now - p->t) : 0;
    else
      r[k] = up > 0.001 ? (double)x / up : 0;
    if (p) p->v[d][k] = x;
  }
}

static void uptime(double s, char *buf, size_t len) {
  long t = s < 0 ? 0 : (long)s;
  if (t < 3600)
    snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
  else
    snprintf(buf, len, "%ldh%02ldm", t / 3600, (t / 60) % 60);
}

void vx_top_only(vx_top_state_t *st, pid_t pid) {
  st->only = pid;
}

void vx_top_rows(vx_top_state_t *st, int rows) {
  st->rows = rows;
}

int vx_top_shown(const vx_top_state_t *st) {
  return st->nprocs;
}

/* Writes text's first `rows` lines (all when rows is 0); when lines were
 * left out, the last one written says how many and how to see them. */
static void put_rows(FILE *out, const char *text, int rows, pid_t only) {
  int total = 0;
  for (const char *p = text; *p; p++)
    total += *p == '\n';
  if (!rows || total <= rows) {
    fputs(text, out);
    return;
  }
  const char *p = text;
  for (int i = 0; i < rows - 1; i++) {
    const char *nl = strchr(p, '\n');
    fwrite(p, 1, (size_t)(nl - p + 1), out);
    p = nl + 1;
  }
  fprintf(out, "... %d more line%s: a taller terminal%s\n", total - rows + 1,
          total - rows + 1 == 1 ? "" : "s", only ? "" : ", or vx top PID for one process");
}

static void show_proc(pid_t pid, void *arg) {
  vx_top_state_t *st = arg;
  vx_stats_view_t v;
  if ((st->only && pid != st->only) || vx_stats_shm_open(pid, &v)) return;
  double now = mono_now();
  struct prev *p = find_prev(st, pid, v.hdr.start_ns);
  char up[48];
  uptime(real_now() - v.hdr.start_ns / 1e9, up, sizeof up);
  emit(st, "");
  emit(st, "PID %-7d up %-7s %s", (int)pid, up, v.hdr.cmdline);
  for (unsigned d = 0; d < v.hdr.ndev; d++) {
    double r[R_N];
    if (!vx_stats_dev_active(&v, d)) continue;
    rates(p, &v, d, now, r);
    device_lines(st, &v, d, r);
  }
  if (p) p->t = now, p->seen = 1;
  st->nprocs++;
  vx_stats_shm_close(&v);
}

/* Forgets processes that were not in this frame. */
static void prune(vx_top_state_t *st) {
  size_t k = 0;
  for (size_t i = 0; i < st->n; i++)
    if (st->p[i].seen) {
      st->p[i].seen = 0;
      st->p[k++] = st->p[i];
    }
  st->n = k;
}

// ---- shared budgets: one ledger per GPU, one share per vx process ----

struct ledger_rows {
  ledger_entry_t e[LEDGER_SLOTS];
  int n;
  uint64_t total;
};

static void ledger_collect(const ledger_entry_t *e, void *arg) {
  struct ledger_rows *r = arg;
  if (r->n == LEDGER_SLOTS) return;
  r->e[r->n++] = *e;
  r->total += e->bytes;
}

/* One ledger: a header, then each live process's share and its part of
 * the total reserved.  Nothing when no process holds a slot (or, with a
 * PID given, when that process is not among them). */
static void ledger_show(vx_top_state_t *st, const char *key) {
  struct ledger_rows r = {.n = 0};
  vx_ledger_t *l = ledger_observe_key(key, NULL, 0);
  if (!l) return;
  ledger_list(l, ledger_collect, &r);
  ledger_close(l);
  int mine = !st->only;
  for (int i = 0; i < r.n; i++)
    mine |= r.e[i].pid == st->only;
  if (!r.n || !mine) return;
  char b1[16], b2[24];
  emit(st, "");
  emit(st, "GPU %.32s shared: %d process%s, %s reserved", key, r.n, r.n == 1 ? "" : "es",
       vx_fmt_bytes(r.total, b1, sizeof b1));
  for (int i = 0; i < r.n; i++)
    emit(st, "  PID %-7d share %8s %5.1f%% [%s]", (int)r.e[i].pid,
         vx_fmt_bytes(r.e[i].bytes, b1, sizeof b1),
         r.total ? 100.0 * (double)r.e[i].bytes / (double)r.total : 0.0,
         bar(r.e[i].bytes, r.total, b2));
}

/* Every ledger segment of this user in /dev/shm (vx-ledger-<euid>-<key>). */
static void ledgers(vx_top_state_t *st) {
  char prefix[48];
  int plen = snprintf(prefix, sizeof prefix, "vx-ledger-%u-", (unsigned)geteuid());
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, (size_t)plen)) ledger_show(st, e->d_name + plen);
  closedir(d);
}

void vx_top_frame(vx_top_state_t *st, FILE *out, int width, double interval) {
  char clock[16];
  time_t t = time(NULL);
  struct tm tm;
  strftime(clock, sizeof clock, "%H:%M:%S", localtime_r(&t, &tm));
  /* The body first (the header counts its processes), then the frame:
   * header and body, cut to the terminal's rows. */
  char *body = NULL, *frame = NULL;
  size_t len = 0, flen = 0;
  FILE *mem = open_memstream(&body, &len);
  st->out = mem ? mem : out;
  st->width = width > VX_TOP_WIDTH ? VX_TOP_WIDTH : width;
  st->interval = interval;
  st->nprocs = 0;
  int n = vx_procs_each(show_proc, st);
  prune(st);
  ledgers(st);
  if (mem) fclose(mem);
  FILE *fm = mem ? open_memstream(&frame, &flen) : NULL;
  st->out = fm ? fm : out;
  emit(st, "vx top - %s  %d process%s  every %.1fs  q quits", clock, st->nprocs,
       st->nprocs == 1 ? "" : "es", interval);
  if (n < 0)
    emit(st, "cannot read /dev/shm");
  else if (!st->nprocs)
    emit(st, "no process of this user is running under vx (with VX_STATS=1)");
  if (body) fputs(body, st->out);
  if (fm) fclose(fm);
  st->out = out;
  if (frame) put_rows(out, frame, st->rows, st->only);
  free(frame);
  free(body);
}
