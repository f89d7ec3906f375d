/* play.c: `vx play TRACE`: runs a launch trace live, one child process per
 * policy (libvx.so preloaded over the simulated driver), and prints the
 * simulator's counters with the keys `vx replay --json` uses. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cli_libpath.h"
#include "commands.h"
#include "play.h"
#include "replay.h"

#define MAX_POL 8

static const char usage_text[] =
    "usage: vx play TRACE [--capacity S] [--policy P[,P...]] [--json] [--ahead N] [--sim DIR]\n"
    "runs TRACE live: its allocations, frees and launches as a driver-API program over\n"
    "the simulated driver (timing only: no data kept) with libvx.so preloaded, once per\n"
    "policy, and prints the simulator's counters (the keys of vx replay --json)\n"
    "policies: um (plain Unified Memory: every allocation managed, nothing moved by vx)\n"
    "          demand static predict (default: demand,predict)\n"
    "--capacity S  simulated device memory (K/M/G; default: the trace's capacity)\n"
    "--ahead N     the host issues a launch once the one N before it is done, as vx replay\n"
    "              issues each when the previous starts (default 2; 0 = never waits)\n"
    "--sim DIR     directory holding the simulator's libcuda.so.1\n";

struct popts {
  const char *trace, *policies, *sim;
  int json;
  uint64_t capacity;
  long ahead;
};

struct pres {
  char policy[16];
  unsigned long long total_ns, stall_ns, up, down, faults, compute_ns;
};

static int bad(const char *msg, const char *arg) {
  fprintf(stderr, "vx play: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
  return 2;
}

/* 0, 1 (help), or 2 (a usage error, said). */
static int parse_args(int argc, char **argv, struct popts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
    if (!strcmp(a, "--json")) {
      o->json = 1;
      continue;
    }
    if (a[0] == '-' && a[1] == '-' && !v) return bad(a, "needs a value");
    if (!strcmp(a, "--capacity")) {
      if (rp_parse_size(v, &o->capacity) < 0)
        return fprintf(stderr, "vx play: bad value '%s' for --capacity (a size: 512M, 8G)\n", v), 2;
    } else if (!strcmp(a, "--policy")) {
      o->policies = v;
    } else if (!strcmp(a, "--ahead")) {
      char *end;
      errno = 0;
      o->ahead = strtol(v, &end, 10);
      if (!*v || *end || errno || o->ahead < 0 || o->ahead > 4096)
        return fprintf(stderr, "vx play: bad value '%s' for --ahead (0..4096)\n", v), 2;
    } else if (!strcmp(a, "--sim")) {
      o->sim = v;
    } else if (a[0] != '-' && !o->trace) {
      o->trace = a;
      continue;
    } else {
      return fprintf(stderr, "vx play: unexpected argument '%s'\n", a), 2;
    }
    i++;
  }
  if (!o->trace) return bad("give a TRACE file", NULL);
  return 0;
}

static int split_policies(const char *list, char names[MAX_POL][16]) {
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%s", list ? list : "demand,predict");
  int n = 0;
  char *save = NULL;
  for (char *p = strtok_r(tmp, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
    int live =
        !strcmp(p, "demand") || !strcmp(p, "static") || !strcmp(p, "predict") || !strcmp(p, "um");
    if (!live || n == MAX_POL) {
      fprintf(stderr,
              rp_policy_known(p)
                  ? "vx play: policy '%s' exists only offline (vx replay); live "
                    "ones: um demand static predict\n"
                  : "vx play: unknown policy '%s' (live ones: um demand static predict)\n",
              p);
      return -EINVAL;
    }
    snprintf(names[n++], 16, "%s", p);
  }
  if (!n) fprintf(stderr, "vx play: --policy names no policy\n");
  return n ? n : -EINVAL;
}

// ---- the trace: read once here to check it and learn its capacity ----

int vx_play_load(const char *path, rp_trace_t *t, char *err, size_t errlen) {
  void *buf = NULL;
  size_t len = 0;
  int r = rp_read_file(path, &buf, &len);
  if (r < 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(-r));
    return r;
  }
  r = rp_trace_load(t, buf, len, 0, err, errlen);
  free(buf);
  return r;
}

// ---- where libvx.so and the simulator are ----

static int is_file(const char *p) {
  return access(p, R_OK) == 0;
}

/* The directory holding the simulator's libcuda.so.1 into out: --sim, the
 * build tree (<dir of vx>/tests/simcuda), or an install (<libdir>/vx/simcuda).
 * Returns 0, or -ENOENT after naming the places looked at. */
static int find_sim(const char *given, const char *libvx, char *out, size_t len) {
  char exe[PATH_MAX] = "", cand[3][PATH_MAX + 64], p[sizeof cand[0] + 16];
  int n = 0;
  if (given) {
    snprintf(cand[n++], sizeof cand[0], "%s", given);
  } else {
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
      exe[k] = 0;
      *strrchr(exe, '/') = 0;
      snprintf(cand[n++], sizeof cand[0], "%s/tests/simcuda", exe);
    }
    const char *slash = strrchr(libvx, '/');
    snprintf(cand[n++], sizeof cand[0], "%.*s/vx/simcuda", (int)(slash - libvx), libvx);
  }
  for (int i = 0; i < n; i++) {
    if (snprintf(p, sizeof p, "%s/libcuda.so.1", cand[i]) >= (int)sizeof p) continue;
    if (is_file(p) && realpath(cand[i], out) && strlen(out) < len) return 0;
  }
  fprintf(stderr,
          "vx play: the simulated driver (libcuda.so.1) is not in %s%s%s; build it "
          "(tests/simcuda) or give --sim DIR\n",
          cand[0], n > 1 ? " nor " : "", n > 1 ? cand[1] : "");
  return -ENOENT;
}

// ---- one child per policy ----

static int child_env(const char *policy, uint64_t cap, const char *libvx, const char *sim) {
  char v[64];
  char *pre = vx_preload_value(libvx, getenv("LD_PRELOAD"));
  const char *old = getenv("LD_LIBRARY_PATH");
  size_t ll = strlen(sim) + (old ? strlen(old) : 0) + 2;
  char *lib = malloc(ll);
  if (!pre || !lib) return -ENOMEM;
  snprintf(lib, ll, "%s%s%s", sim, old && *old ? ":" : "", old && *old ? old : "");
  snprintf(v, sizeof v, "%llu", (unsigned long long)cap);
  /* um: plain Unified Memory as a program that made everything managed
   * gets it (vx's demand policy with no native placement). */
  int um = !strcmp(policy, "um");
  if (um && (setenv("VX_MOVABLE", "100%", 1) || setenv("VX_NATIVE_MAX", "0", 1))) return -errno;
  /* In timing-only mode the simulator keeps no data, so this machine's RAM
   * bounds nothing: the trace's machine is modelled, as vx replay models
   * it, with host memory for whatever does not fit on the device.  Left to
   * its default (a share of MemAvailable here), VX_HOST_MAX would refuse a
   * trace whose footprint passes device plus this machine's RAM
   * (mixtral-decode at half its peak). */
  const char *timing = getenv("SIMCUDA_TIMING_ONLY");
  if ((!timing || strcmp(timing, "0")) && !getenv("VX_HOST_MAX") && setenv("VX_HOST_MAX", "1T", 1))
    return -errno;
  int r = setenv("VX_POLICY", um ? "demand" : policy, 1) | setenv("SIMCUDA_VRAM", v, 1) |
          setenv("VX_RESERVE", "0", 1) | setenv("VX_LEDGER", "off", 1) |
          setenv("LD_PRELOAD", pre, 1) | setenv("LD_LIBRARY_PATH", lib, 1) |
          setenv("SIMCUDA_TIMING_ONLY",
                 getenv("SIMCUDA_TIMING_ONLY") ? getenv("SIMCUDA_TIMING_ONLY") : "1", 1);
  free(pre);
  free(lib);
  return r ? -errno : 0;
}

/* Runs the child for one policy; 0 with *res filled, or -1 (said). */
static int run_child(const struct popts *o, const char *policy, uint64_t cap, const char *libvx,
                     const char *sim, struct pres *res) {
  int fd[2];
  if (pipe(fd) != 0) return -1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return close(fd[0]), close(fd[1]), -1;
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    if (child_env(policy, cap, libvx, sim) == 0) {
      char ahead[24];
      snprintf(ahead, sizeof ahead, "%ld", o->ahead);
      char *args[] = {"vx", "play", "--child", (char *)o->trace, ahead, NULL};
      execv("/proc/self/exe", args);
    }
    fprintf(stderr, "vx play: cannot start the player: %s\n", strerror(errno));
    _exit(1);
  }
  close(fd[1]);
  FILE *f = fdopen(fd[0], "r");
  char line[512] = "";
  int got = 0;
  while (f && fgets(line, sizeof line, f))
    if (!got && sscanf(line,
                       "vxplay total_ns=%llu stall_ns=%llu bytes_up=%llu bytes_down=%llu "
                       "faults=%llu compute_ns=%llu",
                       &res->total_ns, &res->stall_ns, &res->up, &res->down, &res->faults,
                       &res->compute_ns) == 6)
      got = 1;
  if (f)
    fclose(f);
  else
    close(fd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  snprintf(res->policy, sizeof res->policy, "%.15s", policy);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && got) return 0;
  if (WIFSIGNALED(st))
    fprintf(stderr, "vx play: policy %s: the player died of signal %d\n", policy, WTERMSIG(st));
  else
    fprintf(stderr, "vx play: policy %s: the player failed (exit %d)\n", policy,
            WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return -1;
}

static void print(const struct popts *o, const struct pres *r, int n, uint64_t cap) {
  if (!o->json)
    printf("%s: live over the simulator, capacity %.2f GiB\n%-9s %10s %10s %10s %10s %10s\n",
           o->trace, (double)cap / (1 << 30), "policy", "total_s", "stall_s", "up_GiB", "down_GiB",
           "faults");
  for (int i = 0; i < n; i++) {
    if (o->json)
      printf("{\"policy\":\"%s\",\"source\":\"live\",\"total_s\":%.6f,\"stall_s\":%.6f,"
             "\"compute_s\":%.6f,\"bytes_up\":%llu,\"bytes_down\":%llu,\"faults\":%llu,"
             "\"capacity\":%llu}\n",
             r[i].policy, r[i].total_ns / 1e9, r[i].stall_ns / 1e9, r[i].compute_ns / 1e9, r[i].up,
             r[i].down, r[i].faults, (unsigned long long)cap);
    else
      printf("%-9s %10.4f %10.4f %10.3f %10.3f %10llu\n", r[i].policy, r[i].total_ns / 1e9,
             r[i].stall_ns / 1e9, (double)r[i].up / (1 << 30), (double)r[i].down / (1 << 30),
             r[i].faults);
  }
}

int vx_cmd_play(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--child"))
    return vx_play_child(argv[2], (unsigned)strtoul(argv[3], NULL, 10));
  struct popts o = {.ahead = 2};
  int r = parse_args(argc, argv, &o);
  if (r == 1) return vx_cli_help(usage_text);
  if (r) return 2;
  char names[MAX_POL][16];
  int n = split_policies(o.policies, names);
  if (n < 0) return 2;
  rp_trace_t t;
  char err[256] = "";
  r = vx_play_load(o.trace, &t, err, sizeof err);
  if (r < 0) {
    fprintf(stderr, "vx play: %s\n", err);
    return r == -ENOENT || r == -EACCES || r == -EISDIR ? 2 : 1;
  }
  uint64_t cap = o.capacity ? o.capacity : t.capacity, chunk = t.chunk;
  rp_trace_free(&t);
  if (cap < chunk) return bad("capacity below one chunk of the trace", NULL);
  char libvx[PATH_MAX], sim[PATH_MAX];
  if (vx_find_libvx(libvx, sizeof libvx) < 0) {
    fprintf(stderr, "vx play: libvx.so is not next to vx nor in %s\n", vx_install_libdir());
    return 1;
  }
  if (find_sim(o.sim, libvx, sim, sizeof sim) < 0) return 1;
  struct pres res[MAX_POL];
  int ok = 0;
  for (int i = 0; i < n && ok == i; i++)
    if (run_child(&o, names[i], cap, libvx, sim, &res[i]) == 0) ok++;
  print(&o, res, ok, cap);
  return ok == n ? 0 : 1;
}
