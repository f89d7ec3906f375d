/* report_load.c: reading the exit report JSON into samples and sites;
 * missing parts (no timeline, no sites) are simply empty. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_report.h"

#define MAX_REPORT (64u << 20)

const char *const vx_report_col_names[VX_REPORT_COLS] = {"native", "managed", "host", "nvme"};

/* Accepted spellings of each field. */
static const char *const tier_keys[VX_REPORT_COLS][3] = {{"native", "native_bytes", "device"},
                                                         {"managed", "managed_bytes", NULL},
                                                         {"host", "host_tier_bytes", "host_bytes"},
                                                         {"nvme", "nvme_bytes", NULL}};

static double field(const vx_json_t *o, const char *const *keys, size_t n, double def) {
  for (size_t i = 0; i < n; i++)
    if (keys[i] && vx_json_get(o, keys[i])) return vx_json_num(vx_json_get(o, keys[i]), def);
  return def;
}

static char *slurp(const char *path, size_t *len, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  char *buf = NULL;
  if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > (off_t)MAX_REPORT) {
    snprintf(err, errlen, "%s: %s", path,
             fd < 0 ? strerror(errno) : "not a regular file under 64 MiB");
  } else if ((buf = malloc((size_t)st.st_size + 1))) {
    ssize_t n = read(fd, buf, (size_t)st.st_size);
    if (n != st.st_size) {
      snprintf(err, errlen, "%s: short read", path);
      free(buf);
      buf = NULL;
    }
    *len = (size_t)st.st_size;
  }
  if (fd >= 0) close(fd);
  return buf;
}

static double delta_rate(double cur, double prev, double dt) {
  double d = cur >= prev ? cur - prev : cur; /* a decrease is a counter reset */
  return dt > 0 ? d / dt : 0;
}

static int load_timeline(vx_report_t *r) {
  const vx_json_t *tl = vx_json_get(r->root, "timeline");
  if (!tl || tl->type != VX_JSON_ARR || !tl->count) return 0;
  r->samples = calloc(tl->count, sizeof *r->samples);
  if (!r->samples) return -ENOMEM;
  static const char *const tk[] = {"t", "time", "t_s"}, *const uk[] = {"up", "bytes_up"},
                           *const dk[] = {"down", "bytes_down"};
  double prev_up = 0, prev_down = 0, prev_t = 0;
  for (const vx_json_t *s = tl->child; s; s = s->next) {
    if (s->type != VX_JSON_OBJ) continue;
    const vx_json_t *b = vx_json_get(s, "bytes");
    vx_sample_t *x = &r->samples[r->nsamples];
    x->t = field(s, tk, 3, 0);
    if (r->nsamples && x->t < prev_t) continue; /* samples must go forward in time */
    for (int k = 0; k < VX_REPORT_COLS; k++)
      x->tier[k] = field(b && b->type == VX_JSON_OBJ ? b : s, tier_keys[k], 3, 0);
    double up = field(s, uk, 2, 0), down = field(s, dk, 2, 0);
    x->up = r->nsamples ? delta_rate(up, prev_up, x->t - prev_t) : 0;
    x->down = r->nsamples ? delta_rate(down, prev_down, x->t - prev_t) : 0;
    prev_up = up, prev_down = down, prev_t = x->t;
    r->nsamples++;
  }
  return 0;
}

static int by_spilled(const void *a, const void *b) {
  double x = ((const vx_site_t *)a)->spilled, y = ((const vx_site_t *)b)->spilled;
  return (x < y) - (x > y);
}

static int load_sites(vx_report_t *r) {
  const vx_json_t *st = vx_json_get(r->root, "sites");
  if (!st || st->type != VX_JSON_ARR || !st->count) return 0;
  r->sites = calloc(st->count, sizeof *r->sites);
  if (!r->sites) return -ENOMEM;
  static const char *const sk[] = {"bytes_spilled", "spilled"}, *const bk[] = {"bytes"},
                           *const ck[] = {"count", "allocs"};
  for (const vx_json_t *s = st->child; s; s = s->next) {
    if (s->type != VX_JSON_OBJ) continue;
    vx_site_t *x = &r->sites[r->nsites++];
    x->spilled = field(s, sk, 2, 0);
    x->bytes = field(s, bk, 1, 0);
    x->count = field(s, ck, 2, 0);
    x->stack = vx_json_get(s, "stack") ? vx_json_get(s, "stack") : vx_json_get(s, "site");
  }
  qsort(r->sites, r->nsites, sizeof *r->sites, by_spilled);
  return 0;
}

int vx_report_load(const char *path, vx_report_t *r, char *err, size_t errlen) {
  size_t len = 0;
  memset(r, 0, sizeof *r);
  char *buf = slurp(path, &len, err, errlen);
  if (!buf) return -EINVAL;
  char jerr[128];
  r->root = vx_json_parse(buf, len, jerr, sizeof jerr);
  free(buf);
  if (!r->root || r->root->type != VX_JSON_OBJ) {
    snprintf(err, errlen, "%s: %s", path, r->root ? "not a JSON object" : jerr);
    vx_report_free(r);
    return -EINVAL;
  }
  /* Any JSON object would do so far: an exit report has its devices (or,
   * from an older vx, at least a timeline). */
  const vx_json_t *devs = vx_json_get(r->root, "devices"), *tl = vx_json_get(r->root, "timeline");
  if ((!devs || devs->type != VX_JSON_ARR) && (!tl || tl->type != VX_JSON_ARR)) {
    snprintf(err, errlen, "%s: not a vx report (no \"devices\" or \"timeline\")", path);
    vx_report_free(r);
    return -EINVAL;
  }
  static const char *const lk[] = {"limit_bytes"};
  for (const vx_json_t *d = devs && devs->type == VX_JSON_ARR ? devs->child : NULL; d; d = d->next)
    if (d->type == VX_JSON_OBJ) r->budget += field(d, lk, 1, 0);
  const vx_json_t *cmd = vx_json_get(r->root, "command");
  r->command = vx_json_str_or(cmd ? cmd : vx_json_get(r->root, "cmdline"), "");
  if (load_timeline(r) || load_sites(r)) {
    snprintf(err, errlen, "%s: out of memory", path);
    vx_report_free(r);
    return -ENOMEM;
  }
  return 0;
}

void vx_report_free(vx_report_t *r) {
  vx_json_free(r->root);
  free(r->samples);
  free(r->sites);
  memset(r, 0, sizeof *r);
}

void vx_site_stack(const vx_site_t *s, char *buf, size_t len) {
  size_t n = 0;
  buf[0] = 0;
  if (s->stack && s->stack->type == VX_JSON_STR) {
    snprintf(buf, len, "%s", s->stack->str);
    return;
  }
  for (const vx_json_t *f = s->stack && s->stack->type == VX_JSON_ARR ? s->stack->child : NULL;
       f && n + 1 < len; f = f->next) {
    int w = snprintf(buf + n, len - n, "%s%s", n ? " < " : "", vx_json_str_or(f, "?"));
    n += w > 0 ? (size_t)w : 0;
  }
}
