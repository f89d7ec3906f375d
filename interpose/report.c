/* The exit summary (VX_REPORT): per device limit, peak and current bytes per
 * tier, allocations by tier, fallbacks, frees and hook calls, as text or
 * JSON (path ending in .json).  Reads only vx's counters: no driver calls. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "registry.h"
#include "vx.h"

struct report_out {
  int fd;
  size_t used;
  char buf[4096];
};

static void out_flush(struct report_out *o) {
  size_t off = 0;
  while (off < o->used) {
    ssize_t n = write(o->fd, o->buf + off, o->used - off);
    if (n <= 0) break;
    off += (size_t)n;
  }
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

static void report_json(struct report_out *o, const vx_counters_t *c, int ndev) {
  char line[256];
  snprintf(line, sizeof line, "{\"vx\":\"0.1.0\",\"pid\":%d,\"tracked\":%zu,\"devices\":[",
           (int)getpid(), reg_count());
  out_text(o, line);
  for (int d = 0; d < ndev; d++) {
    snprintf(line, sizeof line, "%s{\"device\":%d,\"physical_bytes\":%llu,\"limit_bytes\":%llu,",
             d ? "," : "", d, (unsigned long long)budget_physical(d),
             (unsigned long long)budget_limit(d));
    out_text(o, line);
    vx_counters_print_one(&c[d], 1, 1, out_text, o);
    out_text(o, "}");
  }
  out_text(o, "]}\n");
}

static void report_text(struct report_out *o, const vx_counters_t *c, int ndev) {
  char line[256];
  snprintf(line, sizeof line, "vx summary (pid %d, %zu allocations still tracked)\n", (int)getpid(),
           reg_count());
  out_text(o, line);
  for (int d = 0; d < ndev; d++) {
    snprintf(line, sizeof line, "device %d: physical %llu bytes, limit %llu bytes\n", d,
             (unsigned long long)budget_physical(d), (unsigned long long)budget_limit(d));
    out_text(o, line);
    vx_counters_print_one(&c[d], 0, 0, out_text, o);
  }
}

void vx_report_write(void) {
  static int written;
  const char *path = vx_opt.REPORT.s;
  if (!path[0] || __atomic_exchange_n(&written, 1, __ATOMIC_RELAXED)) return;
  static struct report_out o; /* 4 KiB: kept off the stack of an exiting thread */
  size_t len = strlen(path);
  int json = len > 5 && !strcmp(path + len - 5, ".json");
  o.used = 0;
  o.fd = strcmp(path, "stderr") ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)
                                : STDERR_FILENO;
  if (o.fd < 0) {
    vx_log(VX_LOG_WARN, "cannot write the report to %s", path);
    return;
  }
  static vx_counters_t c[VX_MAX_DEVICES];
  int ndev = ctr_devices();
  ctr_snapshot(c, ndev);
  if (json)
    report_json(&o, c, ndev);
  else
    report_text(&o, c, ndev);
  out_flush(&o);
  if (o.fd != STDERR_FILENO) close(o.fd);
}
