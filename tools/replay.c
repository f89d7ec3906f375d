/* replay.c: `vx replay`: runs a recorded or synthetic launch trace through the
 * policies under a cost model and prints, per policy, time, stalls, bytes, overhead. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "replay.h"
#include "synth.h"

#define MAX_POL 16

struct opts {
  const char *trace, *synth, *policies, *save;
  int json, live_place;
  uint32_t watermark, distance;
  uint64_t capacity, chunk;
  double link_gbps, dev_gbps, fault_us;
};

static int usage(FILE *f) {
  fprintf(f,
          "usage: vx replay TRACE|--synth NAME[,key=value...] [--policy a,b,...] [--json]\n"
          "                 [--capacity S] [--link-gbps G] [--fault-us U] [--dev-gbps G] "
          "[--chunk S] [--save FILE]\n"
          "                 [--place live|recorded|movable] [--watermark P] [--distance N]\n"
          "policies: demand deepum static predict clairvoyant bound infinite (default: all)\n"
          "  clairvoyant: vx's planner given the true future (a reference, not a bound;\n"
          "  'oracle' is accepted for it); bound: a lower bound on every policy's time\n"
          "workloads: transformer-train transformer-infer cnn moe two-stream\n"
          "  keys: layers hidden batch seq iters oversub(1-3) seed drift(0|1) tokens prompt\n"
          "        experts active kvcat(0|1: transformer-infer KV cache grown by torch.cat)\n"
          "--save FILE writes the trace (e.g. the --synth one) to FILE before replaying it\n"
          "defaults: capacity from the trace, link 25 GB/s, fault batch 45 us, device 3000 GB/s,\n"
          "          chunk from the trace (2 MiB), place movable\n"
          "--place live: as libvx runs live: some allocations native (never moved), those\n"
          "  brought up about once per use pinned to host memory, no access modes for the\n"
          "  policy, and each free waiting for the device (cuMemFree); movable (default):\n"
          "  every allocation is managed memory; recorded: as live, but an allocation is\n"
          "  native where the trace's ALLOC says so (a VX_TRACE records libvx's placement)\n"
          "--watermark P: the planner pushes chunks down ahead of need above P%% of the\n"
          "  capacity (1-100; default 100, or VX_EVICT_WATERMARK's default with --place live\n"
          "  or recorded)\n"
          "--distance N: the planner looks at most N launches ahead (VX_PREFETCH_DISTANCE;\n"
          "  1-4096; default 0 = as far as capacity and the predictions that come true allow)\n");
  return f == stdout ? 0 : 2;
}

static int parse_pos(const char *s, double *out) {
  char *end;
  *out = strtod(s, &end);
  return end != s && !*end && *out > 0 ? 0 : -EINVAL;
}

/* A whole number in [lo, hi] (no sign: strtoul would wrap "-N" around). */
static int parse_range(const char *s, unsigned long lo, unsigned long hi, uint32_t *out) {
  char *end;
  unsigned long n = strtoul(s, &end, 10);
  *out = (uint32_t)n;
  return end != s && !*end && s[0] != '-' && n >= lo && n <= hi ? 0 : -EINVAL;
}

static int parse_args(int argc, char **argv, struct opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int r = 0, val = 1;
    if (!strcmp(a, "--json")) {
      o->json = 1, val = 0;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      return 1;
    } else if (!v && a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "vx replay: %s needs a value\n", a);
      return -EINVAL;
    } else if (!strcmp(a, "--synth")) {
      o->synth = v;
    } else if (!strcmp(a, "--save")) {
      o->save = v;
    } else if (!strcmp(a, "--policy")) {
      o->policies = v;
    } else if (!strcmp(a, "--capacity")) {
      r = rp_parse_size(v, &o->capacity);
    } else if (!strcmp(a, "--place")) {
      o->live_place = !strcmp(v, "live")       ? RP_PLACE_LIVE
                      : !strcmp(v, "recorded") ? RP_PLACE_RECORDED
                                               : RP_PLACE_MOVABLE;
      r = o->live_place || !strcmp(v, "movable") ? 0 : -EINVAL;
    } else if (!strcmp(a, "--watermark")) {
      r = parse_range(v, 1, 100, &o->watermark);
    } else if (!strcmp(a, "--distance")) {
      r = parse_range(v, 1, 4096, &o->distance);
    } else if (!strcmp(a, "--chunk")) {
      r = rp_parse_size(v, &o->chunk);
      r = r ? r : (o->chunk & (o->chunk - 1)) || o->chunk < (64u << 10) ? -EINVAL : 0;
    } else if (!strcmp(a, "--link-gbps")) {
      r = parse_pos(v, &o->link_gbps);
    } else if (!strcmp(a, "--dev-gbps")) {
      r = parse_pos(v, &o->dev_gbps);
    } else if (!strcmp(a, "--fault-us")) {
      r = parse_pos(v, &o->fault_us);
    } else if (a[0] != '-' && !o->trace) {
      o->trace = a, val = 0;
    } else {
      fprintf(stderr, "vx replay: unexpected argument '%s'\n", a);
      return -EINVAL;
    }
    if (r < 0) {
      fprintf(stderr, "vx replay: bad value '%s' for %s\n", v, a);
      return r;
    }
    i += val;
  }
  if (!o->trace == !o->synth) {
    fprintf(stderr, "vx replay: give a TRACE file or --synth NAME (one of them)\n");
    return -EINVAL;
  }
  return 0;
}

static int save(const char *path, const void *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -errno;
  size_t n = fwrite(buf, 1, len, f);
  int bad = fclose(f) != 0 || n != len;
  return bad ? -EIO : 0;
}

static int load(const struct opts *o, rp_trace_t *t) {
  void *buf = NULL;
  size_t len = 0;
  char err[256] = "";
  int r = o->synth ? synth_generate(o->synth, &buf, &len, err, sizeof err)
                   : rp_read_file(o->trace, &buf, &len);
  if (r < 0) {
    if (err[0])
      fprintf(stderr, "vx replay: %s\n", err);
    else
      fprintf(stderr, "vx replay: %s: %s\n", o->trace, strerror(-r));
    return r;
  }
  if (o->save && (r = save(o->save, buf, len)) < 0) {
    fprintf(stderr, "vx replay: %s: %s\n", o->save, strerror(-r));
    free(buf);
    return r;
  }
  r = rp_trace_load(t, buf, len, o->chunk, err, sizeof err);
  free(buf);
  if (r < 0) fprintf(stderr, "vx replay: %s\n", err);
  return r;
}

// ---- output ----

static void print_json(const rp_result_t *r, const char *src, const rp_model_t *m) {
  printf("{\"policy\":\"%s\",\"source\":\"%s\",\"total_s\":%.6f,\"stall_s\":%.6f,"
         "\"compute_s\":%.6f,\"bytes_up\":%llu,\"bytes_down\":%llu,\"faults\":%llu,"
         "\"overhead\":%.6f,\"oracle_gain_share\":%.6f,\"capacity\":%llu,"
         "\"bound_gain_share\":%.6f,\"ahead_used\":%llu,\"ahead_wasted\":%llu,"
         "\"bytes_down_dead\":%llu,\"victims_back\":%llu,\"host_pins\":%llu,"
         "\"h2d_busy_s\":%.6f,\"d2h_busy_s\":%.6f,\"both_busy_s\":%.6f,\"in_place\":%llu}\n",
         r->policy, src, r->total_s, r->stall_s, r->compute_s, (unsigned long long)r->bytes_up,
         (unsigned long long)r->bytes_down, (unsigned long long)r->faults, r->overhead,
         r->oracle_gain_share, (unsigned long long)m->capacity, r->bound_gain_share,
         (unsigned long long)r->ahead_used, (unsigned long long)r->ahead_wasted,
         (unsigned long long)r->bytes_down_dead, (unsigned long long)r->victims_back,
         (unsigned long long)r->host_pins, r->h2d_busy_s, r->d2h_busy_s, r->both_busy_s,
         (unsigned long long)r->in_place);
}

static void print_table(const rp_result_t *res, int n, const rp_trace_t *t, const rp_model_t *m,
                        const char *src) {
  printf("%s: %zu launches, %zu allocations, capacity %.2f GiB, chunk %llu KiB\n", src, t->nlaunch,
         t->nal, (double)m->capacity / (1 << 30), (unsigned long long)(t->chunk >> 10));
  printf("%-11s %10s %10s %10s %10s %9s %9s %9s\n", "policy", "total_s", "stall_s", "up_GiB",
         "down_GiB", "overhead", "clairv%", "bound%");
  for (int i = 0; i < n; i++)
    printf("%-11s %10.4f %10.4f %10.3f %10.3f %8.1f%% %8.1f%% %8.1f%%\n", res[i].policy,
           res[i].total_s, res[i].stall_s, (double)res[i].bytes_up / (1 << 30),
           (double)res[i].bytes_down / (1 << 30), res[i].overhead * 100,
           res[i].oracle_gain_share * 100, res[i].bound_gain_share * 100);
}

static int split_policies(const char *list, char names[MAX_POL][16]) {
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%s",
           list ? list : "demand,deepum,static,predict,clairvoyant,bound,infinite");
  int n = 0;
  char *save = NULL;
  for (char *p = strtok_r(tmp, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
    if (!rp_policy_known(p) || n == MAX_POL) {
      fprintf(stderr,
              "vx replay: unknown policy '%s' (demand deepum static predict clairvoyant "
              "bound infinite)\n",
              p);
      return -EINVAL;
    }
    snprintf(names[n++], 16, "%s", p);
  }
  return n;
}

static int run_all(const struct opts *o, const rp_trace_t *t, const rp_model_t *m,
                   char names[MAX_POL][16], int n) {
  rp_result_t ref[4], res[MAX_POL];
  const char *refs[4] = {"infinite", "demand", "clairvoyant", "bound"};
  for (int i = 0; i < 4; i++)
    if (rp_run(t, m, refs[i], &ref[i]) < 0) return -ENOMEM;
  const char *src = o->synth ? o->synth : o->trace;
  for (int i = 0; i < n; i++) {
    /* a reference already run is not run again: the replay is deterministic */
    int k = 0;
    const char *as = strcmp(names[i], "oracle") ? names[i] : "clairvoyant";
    while (k < 4 && strcmp(as, refs[k]))
      k++;
    if (k < 4) {
      res[i] = ref[k];
      _Static_assert(sizeof res[i].policy == sizeof names[i], "a policy name fits");
      memcpy(res[i].policy, names[i], sizeof res[i].policy);
    } else if (rp_run(t, m, names[i], &res[i]) < 0) {
      return -ENOMEM;
    }
    if (!strcmp(names[i], "bound")) res[i].stall_s = res[i].total_s - ref[0].total_s;
    rp_derive(&res[i], &ref[0], &ref[1], &ref[2]);
    rp_bound_share(&res[i], &ref[1], &ref[3]);
    if (o->json) print_json(&res[i], src, m);
  }
  if (!o->json) print_table(res, n, t, m, src);
  return 0;
}

int vx_cmd_replay(int argc, char **argv) {
  struct opts o = {0};
  int r = parse_args(argc, argv, &o);
  if (r > 0) return usage(stdout);
  if (r) return fprintf(stderr, "Try 'vx replay --help'.\n"), 2; /* parse_args said what */
  char names[MAX_POL][16];
  int n = split_policies(o.policies, names);
  if (n < 0) return 2;
  rp_trace_t t;
  r = load(&o, &t);
  if (r < 0) return r == -EINVAL && o.synth ? 2 : 1;
  rp_model_t m;
  rp_model_default(&m, o.capacity ? o.capacity : t.capacity);
  if (o.link_gbps) m.link_bps = o.link_gbps * 1e9;
  if (o.dev_gbps) m.dev_bps = o.dev_gbps * 1e9;
  if (o.fault_us) m.fault_ns = o.fault_us * 1e3;
  m.live_place = o.live_place;
  m.watermark = o.watermark;
  m.distance = o.distance;
  r = m.capacity >= t.chunk ? run_all(&o, &t, &m, names, n) : -EINVAL;
  if (r == -EINVAL)
    fprintf(stderr, "vx replay: capacity below one chunk\n");
  else if (r < 0)
    fprintf(stderr, "vx replay: out of memory\n");
  rp_trace_free(&t);
  return r < 0 ? 1 : 0;
}
