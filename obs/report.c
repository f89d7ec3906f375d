/* The exit summary (VX_REPORT): command line, per device counters, the
 * timeline and the top allocation sites, as text or JSON (path ending in
 * .json).  Reads vx's own state, and asks the driver only for the
 * migrations it made on its own (where it reports them). */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget.h"
#include "ctr.h"
#include "outfile.h"
#include "registry.h"
#include "sites.h"
#include "stats_shm.h"
#include "timeline.h"
#include "driver.h"
#include "ctr.h"
#include "log.h"
#include "options.h"

#define REPORT_CMD_MAX 1024 /* bytes of /proc/self/cmdline kept */
#define REPORT_TOP_SITES 20

struct report_out {
  int fd;
  int err; /* first write error (-errno): the rest is dropped */
  size_t used;
  char buf[4096];
};

static void out_flush(struct report_out *o) {
  if (!o->err && o->used) o->err = vx_outfile_write(o->fd, o->buf, o->used);
  o->used = 0;
}

static void out_text(void *arg, const char *text) {
  struct report_out *o = arg;
  for (size_t len = strlen(text); len;) {
    if (o->used == sizeof o->buf) out_flush(o);
    size_t n = sizeof o->buf - o->used < len ? sizeof o->buf - o->used : len;
    memcpy(o->buf + o->used, text, n);
    o->used += n;
    text += n;
    len -= n;
  }
}

// ---- parts: command line, timeline, sites ----

/* The command line, arguments separated by spaces, truncated. */
static void command_line(char *buf, size_t len) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
  if (fd >= 0) close(fd);
  if (n < 0) n = 0;
  while (n > 0 && buf[n - 1] == 0)
    n--;
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] == 0) buf[i] = ' ';
  buf[n] = 0;
}

/* text as a JSON string literal (quotes included). */
static void out_json_str(struct report_out *o, const char *text) {
  char esc[8];
  out_text(o, "\"");
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    if (*p == '"' || *p == '\\') {
      snprintf(esc, sizeof esc, "\\%c", *p);
    } else if (*p < 0x20 || *p == 0x7f) {
      snprintf(esc, sizeof esc, "\\u%04x", *p);
    } else {
      esc[0] = (char)*p, esc[1] = 0;
    }
    out_text(o, esc);
  }
  out_text(o, "\"");
}

static tl_sample_t samples[TL_MAX_SAMPLES];
static site_stat_t sites[SITES_MAX];

static void json_timeline(struct report_out *o) {
  char line[256];
  size_t n = timeline_copy(samples, TL_MAX_SAMPLES);
  out_text(o, ",\"timeline\":[");
  for (size_t i = 0; i < n; i++) {
    const tl_sample_t *s = &samples[i];
    snprintf(line, sizeof line,
             "%s{\"t\":%.3f,\"native\":%llu,\"managed\":%llu,\"host\":%llu,\"nvme\":%llu,"
             "\"live\":%llu,\"bytes_up\":%llu,\"bytes_down\":%llu}",
             i ? "," : "", s->t, (unsigned long long)s->native, (unsigned long long)s->managed,
             (unsigned long long)s->host, (unsigned long long)s->nvme, (unsigned long long)s->live,
             (unsigned long long)s->up, (unsigned long long)s->down);
    out_text(o, line);
  }
  out_text(o, "]");
}

static int by_spilled(const void *a, const void *b) {
  const site_stat_t *x = a, *y = b;
  if (x->spilled != y->spilled) return x->spilled < y->spilled ? 1 : -1;
  return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

/* The recorded sites, largest spill first; returns how many (all of them). */
static size_t top_sites(uint64_t *dropped) {
  size_t n = sites_copy(sites, SITES_MAX, dropped);
  qsort(sites, n, sizeof *sites, by_spilled);
  return n;
}

static void json_sites(struct report_out *o) {
  char line[256];
  uint64_t dropped;
  size_t n = top_sites(&dropped);
  snprintf(line, sizeof line, ",\"sites_recorded\":%zu,\"sites_dropped_allocs\":%llu,\"sites\":[",
           n, (unsigned long long)dropped);
  out_text(o, line);
  for (size_t i = 0; i < n && i < REPORT_TOP_SITES; i++) {
    const site_stat_t *s = &sites[i];
    snprintf(line, sizeof line,
             "%s{\"bytes_spilled\":%llu,\"bytes\":%llu,\"live_bytes\":%llu,\"count\":%llu,"
             "\"stack\":[",
             i ? "," : "", (unsigned long long)s->spilled, (unsigned long long)s->bytes,
             (unsigned long long)s->live, (unsigned long long)s->count);
    out_text(o, line);
    for (int f = 0; f < s->nframes; f++) {
      sites_symbol(s->frames[f], line, sizeof line);
      if (f) out_text(o, ",");
      out_json_str(o, line);
    }
    out_text(o, "]}");
  }
  out_text(o, "]");
}

static void text_sites(struct report_out *o) {
  char line[320], sym[256];
  uint64_t dropped;
  size_t n = top_sites(&dropped);
  snprintf(line, sizeof line, "top allocation sites (by bytes spilled; %zu recorded):\n", n);
  out_text(o, line);
  for (size_t i = 0; i < n && i < REPORT_TOP_SITES; i++) {
    const site_stat_t *s = &sites[i];
    snprintf(line, sizeof line, "  %2zu. spilled %llu, bytes %llu, count %llu\n", i + 1,
             (unsigned long long)s->spilled, (unsigned long long)s->bytes,
             (unsigned long long)s->count);
    out_text(o, line);
    for (int f = 0; f < s->nframes && f < 4; f++) {
      sites_symbol(s->frames[f], sym, sizeof sym);
      snprintf(line, sizeof line, "      %s\n", sym);
      out_text(o, line);
    }
  }
}

// ---- demand migrations ----

/* Bytes the driver moved on its own for device d (faults in, evictions
 * out), where the driver reports them: the simulator does; NVIDIA's
 * driver has no entry point for it.  1 with *up and *down set, or 0: not
 * measured (never a zero that would read as "none"). */
static int demand_migration(int d, uint64_t *up, uint64_t *down) {
  static void *sym;     /* atomic: the entry point, once looked up */
  static int looked_up; /* atomic */
  if (!__atomic_load_n(&looked_up, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&sym, vx_real_driver_sym("simcuda_demand_migration"), __ATOMIC_RELEASE);
    __atomic_store_n(&looked_up, 1, __ATOMIC_RELEASE);
  }
  int (*fn)(int, uint64_t *, uint64_t *);
  *(void **)&fn = __atomic_load_n(&sym, __ATOMIC_ACQUIRE);
  return fn && fn(d, up, down) == 0;
}

/* The driver's own migrations into the live counters of the devices in
 * use (demand_measured says whether they are known), for vx stat and vx
 * top and the report's counters.  On the stats publisher's thread, and
 * before each report, with no vx lock held: it calls the driver. */
void vx_report_demand_publish(void) {
  int ndev = ctr_devices();
  for (int d = 0; d < ndev && d < VX_MAX_DEVICES; d++) {
    uint64_t up = 0, down = 0;
    int known = demand_migration(d, &up, &down);
    if (known) {
      __atomic_store_n(&vx_ctr[d].v[VX_CTR_demand_up_bytes], up, __ATOMIC_RELAXED);
      __atomic_store_n(&vx_ctr[d].v[VX_CTR_demand_down_bytes], down, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&vx_ctr[d].v[VX_CTR_demand_measured], (uint64_t)known, __ATOMIC_RELAXED);
  }
}

// ---- the two formats ----

static void report_json(struct report_out *o, const vx_counters_t *c, int ndev) {
  char line[256];
  static char cmd[REPORT_CMD_MAX];
  command_line(cmd, sizeof cmd);
  snprintf(line, sizeof line, "{\"vx\":\"0.1.0\",\"pid\":%d,\"command\":", (int)getpid());
  out_text(o, line);
  out_json_str(o, cmd);
  snprintf(line, sizeof line, ",\"tracked\":%zu,\"devices\":[", reg_count());
  out_text(o, line);
  for (int d = 0; d < ndev; d++) {
    snprintf(line, sizeof line, "%s{\"device\":%d,\"physical_bytes\":%llu,\"limit_bytes\":%llu,",
             d ? "," : "", d, (unsigned long long)budget_physical(d),
             (unsigned long long)budget_limit(d));
    out_text(o, line);
    uint64_t up, down;
    if (demand_migration(d, &up, &down))
      snprintf(line, sizeof line, "\"demand_bytes_up\":%llu,\"demand_bytes_down\":%llu,",
               (unsigned long long)up, (unsigned long long)down);
    else
      snprintf(line, sizeof line, "\"demand_migrations\":\"not measured\",");
    out_text(o, line);
    vx_counters_print_one(&c[d], 1, 1, out_text, o);
    out_text(o, "}");
  }
  out_text(o, "]");
  json_timeline(o);
  if (vx_opt.SITES) json_sites(o);
  out_text(o, "}\n");
}

static void report_text(struct report_out *o, const vx_counters_t *c, int ndev) {
  char line[256];
  snprintf(line, sizeof line, "vx summary (pid %d, %zu allocations still tracked)\n", (int)getpid(),
           reg_count());
  out_text(o, line);
  static char cmd[REPORT_CMD_MAX];
  command_line(cmd, sizeof cmd);
  out_text(o, "command: ");
  out_text(o, cmd);
  out_text(o, "\n");
  /* The timeline's partition, as the JSON's samples have it. */
  tl_sample_t s;
  timeline_read(&s);
  char t[5][VX_SIZE_TEXT];
  snprintf(line, sizeof line, "memory now: %s live = %s native + %s managed + %s host + %s nvme\n",
           vx_size_text(s.live, t[0]), vx_size_text(s.native, t[1]), vx_size_text(s.managed, t[2]),
           vx_size_text(s.host, t[3]), vx_size_text(s.nvme, t[4]));
  out_text(o, line);
  for (int d = 0; d < ndev; d++) {
    char ph[VX_SIZE_TEXT], lim[VX_SIZE_TEXT];
    snprintf(line, sizeof line, "device %d: physical %s, limit %s\n", d,
             vx_size_text(budget_physical(d), ph), vx_size_text(budget_limit(d), lim));
    out_text(o, line);
    uint64_t up, down;
    char u[VX_SIZE_TEXT], dn[VX_SIZE_TEXT];
    if (demand_migration(d, &up, &down))
      snprintf(line, sizeof line, "  demand migrations (the driver's own): %s up, %s down\n",
               vx_size_text(up, u), vx_size_text(down, dn));
    else
      snprintf(line, sizeof line,
               "  demand migrations: not measured (the driver does not report them)\n");
    out_text(o, line);
    vx_counters_print_one(&c[d], 0, 0, out_text, o);
  }
  if (vx_opt.SITES) text_sites(o);
}

// ---- where and when ----

/* hook_calls of all devices: a fork child inherits its parent's. */
static uint64_t calls_total(void) {
  uint64_t n = 0;
  for (int d = 0; d < VX_MAX_DEVICES; d++)
    n += __atomic_load_n(&vx_ctr[d].v[VX_CTR_hook_calls], __ATOMIC_RELAXED);
  return n;
}

static uint64_t calls_at_fork; /* a process that made no call since writes no report */
static int said; /* atomic: a failure was said (once: at start-up, or at the first write) */

void vx_report_atfork_child(void) {
  calls_at_fork = calls_total();
}

/* The report's path now (VX_REPORT with %p and %h expanded), 0 or -errno. */
static int report_path(char *path, size_t n) {
  return vx_path_expand(vx_opt.REPORT.s, path, n);
}

void vx_report_init(void) {
  char path[VX_OPT_STRING_MAX + 256], dir[sizeof path];
  if (!vx_opt.REPORT.s[0] || !strcmp(vx_opt.REPORT.s, "stderr")) return;
  if (report_path(path, sizeof path)) {
    vx_log(VX_LOG_WARN, "VX_REPORT=%s: the path is too long once expanded; no report",
           vx_opt.REPORT.s);
    return;
  }
  struct stat st;
  if (!lstat(path, &st) && S_ISDIR(st.st_mode)) {
    vx_log(VX_LOG_WARN, "VX_REPORT=%s: %s is a directory; no report", vx_opt.REPORT.s, path);
    return;
  }
  /* The directory must take the file (and its temporary twin). */
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = 0;
  else
    *slash = 0;
  /* Said now; vx still tries at exit (the program may make the directory). */
  if (access(dir, W_OK | X_OK) && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
    vx_log(VX_LOG_WARN, "VX_REPORT=%s: cannot write in %s (%s); no report", vx_opt.REPORT.s, dir,
           strerror(errno));
}

/* Writes the report into fd; 0 or -errno. */
static int write_into(int fd, int json) {
  static struct report_out o; /* 4 KiB: kept off the stack of an exiting thread */
  static vx_counters_t c[VX_MAX_DEVICES];
  o.fd = fd;
  o.used = 0;
  o.err = 0;
  vx_report_demand_publish(); /* the counters say what the report's demand lines say */
  int ndev = ctr_devices();
  ctr_snapshot(c, ndev);
  if (json)
    report_json(&o, c, ndev);
  else
    report_text(&o, c, ndev);
  out_flush(&o);
  return o.err;
}

/* A regular file (or none yet) is written whole into a temporary twin and
 * renamed over it: a reader, or a job killed between two writes, only ever
 * sees a complete report.  0, or -errno with why. */
static int write_atomic(const char *path, int json, char *why, size_t n) {
  char tmp[VX_OPT_STRING_MAX + 320];
  snprintf(tmp, sizeof tmp, "%s.vx-tmp-%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
  if (fd < 0) {
    snprintf(why, n, "%s", strerror(errno));
    return -errno;
  }
  int rc = write_into(fd, json);
  if (close(fd) && !rc) rc = -errno;
  if (!rc && rename(tmp, path)) rc = -errno;
  if (rc) {
    unlink(tmp);
    snprintf(why, n, "%s", strerror(-rc));
  }
  return rc;
}

/* final: at exit (once); else a refresh while the program runs, only into
 * a regular file. */
static void write_report(int final) {
  static int written;
  char path[VX_OPT_STRING_MAX + 256], why[160];
  if (!vx_opt.REPORT.s[0] || (final && __atomic_exchange_n(&written, 1, __ATOMIC_RELAXED))) return;
  if (calls_total() <= calls_at_fork) return; /* no CUDA call here (a fork child, say) */
  if (report_path(path, sizeof path)) return; /* said at start-up */
  size_t len = strlen(path);
  int json = len > 5 && !strcmp(path + len - 5, ".json");
  struct stat st;
  int regular =
      strcmp(path, "stderr") && (lstat(path, &st) ? errno == ENOENT : S_ISREG(st.st_mode));
  if (!regular && !final) return;
  int rc;
  if (regular) {
    rc = write_atomic(path, json, why, sizeof why);
  } else {
    /* Never blocks: a FIFO with no reader is refused, not waited for. */
    int fd = strcmp(path, "stderr") ? vx_outfile_open(path, VX_OUT_STREAM, why, sizeof why)
                                    : STDERR_FILENO;
    if (fd < 0) {
      vx_log(VX_LOG_WARN, "VX_REPORT=%s: cannot write the report there: %s; no report", path, why);
      return;
    }
    rc = write_into(fd, json);
    if (fd != STDERR_FILENO) close(fd);
    /* (not into a stderr whose reader left: the line itself would raise SIGPIPE) */
    if (rc == -EPIPE && fd == STDERR_FILENO) return;
    snprintf(why, sizeof why, "%s", rc ? strerror(-rc) : "");
  }
  if (rc && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
    vx_log(VX_LOG_WARN, "VX_REPORT=%s: writing the report failed: %s%s", path, why,
           final ? "; no report" : "; tried again later");
}

void vx_report_write(void) {
  write_report(1);
}

void vx_report_refresh(void) {
  write_report(0);
}
