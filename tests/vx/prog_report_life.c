/* prog_report_life: VX_REPORT over a job's life (#14 point 2).
 *   - %p and %h expand (the ranks of a job, or a fork, get their own);
 *   - a forked child that made no CUDA call writes no report;
 *   - the report is rewritten while the program runs, whole each time
 *     (a temporary file renamed over it), so SIGKILL leaves the last one;
 *   - a path that cannot work is said at start-up, before the program's
 *     work, not at exit. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vxt.h"

static CUdeviceptr use_cuda(void) {
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr p;
  VXT_CU(cuInit(0));
  VXT_CU(cuDeviceGet(&dev, 0));
  VXT_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  VXT_CU(cuCtxSetCurrent(ctx));
  VXT_CU(cuMemAlloc_v2(&p, 1 << 20));
  VXT_CU(cuMemsetD8_v2(p, 0x5a, 1 << 20));
  return p;
}

/* fork: a child that never calls CUDA and exits normally (its destructors
 * run); sleep: works, then waits to be killed. */
static int worker(const char *mode) {
  CUdeviceptr p = use_cuda();
  printf("pid %d\n", (int)getpid());
  fflush(stdout);
  if (!strcmp(mode, "fork")) {
    pid_t c = fork();
    if (c == 0) exit(0);
    int st;
    waitpid(c, &st, 0);
    printf("child %d\n", (int)c);
  }
  if (!strcmp(mode, "sleep"))
    for (;;)
      pause();
  VXT_CU(cuMemFree_v2(p));
  printf("worker done\n");
  return 0;
}

static int files_in(const char *dir, char names[][256], int max) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.' && n < max) snprintf(names[n++], 256, "%s", e->d_name);
  if (d) closedir(d);
  return n;
}

static void clean(const char *dir) {
  char names[16][256], p[1024];
  int n = files_in(dir, names, 16);
  for (int i = 0; i < n; i++) {
    snprintf(p, sizeof p, "%.255s/%.255s", dir, names[i]);
    unlink(p);
  }
}

static int int_after(const char *text, const char *key) {
  const char *p = strstr(text, key);
  VXT_ASSERT(p, "no '%s' in\n%s", key, text);
  return atoi(p + strlen(key));
}

/* %p and %h; the fork child writes nothing. */
static void expand_and_fork(const char *dir) {
  char kv[400], host[256];
  snprintf(kv, sizeof kv, "VX_REPORT=%s/r-%%h-%%p.json", dir);
  const char *env[] = {kv, NULL};
  const char *args[] = {"fork", NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0 && r.status == 0, "status %d\n%s", r.status, r.err);
  int pid = int_after(r.out, "pid "), child = int_after(r.out, "child ");
  VXT_ASSERT(gethostname(host, sizeof host) == 0);
  char names[16][256], want[512];
  int n = files_in(dir, names, 16);
  snprintf(want, sizeof want, "r-%s-%d.json", host, pid);
  VXT_ASSERT(n == 1 && !strcmp(names[0], want), "want only %s (child %d wrote nothing), got %d: %s",
             want, child, n, n ? names[0] : "");
  char path[600];
  snprintf(path, sizeof path, "%s/%s", dir, want);
  char *json = vxt_read_file(path);
  VXT_ASSERT(json && (int)vxt_json_u64(json, -1, "pid") == pid, "the report is the parent's");
  free(json);
  clean(dir);
  printf("%%h-%%p expanded to %s; the fork child (%d) wrote no report\n", want, child);
}

/* Rewritten while it runs: the file appears before the program ends, and
 * after SIGKILL what is there is a whole report. */
static void survives_kill(const char *dir, const char *self) {
  char path[400];
  snprintf(path, sizeof path, "%s/killed.json", dir);
  int out[2];
  VXT_ASSERT(pipe(out) == 0);
  pid_t c = fork();
  if (c == 0) {
    dup2(out[1], 1);
    close(out[0]);
    setenv("VX_REPORT", path, 1);
    setenv("VX_REPORT_PERIOD", "1", 1);
    execl(self, self, "--worker", "sleep", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  char *json = NULL;
  for (int i = 0; i < 600 && !json; i++) { /* up to a minute: the CI gate has no timing */
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    json = vxt_read_file(path);
  }
  kill(c, SIGKILL);
  int st;
  waitpid(c, &st, 0);
  VXT_ASSERT(json, "no report appeared while the program ran");
  free(json);
  json = vxt_read_file(path); /* what SIGKILL left */
  size_t len = json ? strlen(json) : 0;
  VXT_ASSERT(len > 2 && json[0] == '{' && !strcmp(json + len - 2, "}\n"), "not a whole report");
  VXT_ASSERT((pid_t)vxt_json_u64(json, -1, "pid") == c);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_native") + vxt_json_u64(json, 0, "alloc_managed") == 1,
             "the allocation is in the report");
  free(json);
  char names[16][256];
  int n = files_in(dir, names, 16);
  VXT_ASSERT(n == 1, "%d files left (a temporary one?)", n);
  close(out[0]);
  clean(dir);
  printf("killed with SIGKILL: the last report is whole (%zu bytes)\n", len);
}

/* Said at start-up: before the worker's own first line. */
static void said_at_start(void) {
  const char *env[] = {"VX_REPORT=/nonexistent-vx-dir/r.json", NULL};
  const char *args[] = {"plain", NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0 && r.status == 0, "status %d", r.status);
  const char *want = "vx: VX_REPORT=/nonexistent-vx-dir/r.json: cannot write in "
                     "/nonexistent-vx-dir (No such file or directory); no report\n";
  VXT_ASSERT(!strcmp(r.err, want), "stderr\n%s\nwant\n%s", r.err, want);
  printf("an unusable path is said once, at start-up\n");
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "--worker")) return worker(argv[2]);
  if (!vxt_vx_preloaded()) {
    fprintf(stderr, "prog_report_life: needs LD_PRELOAD=libvx.so\n");
    return 77;
  }
  char dir[256];
  vxt_tmpname(dir, sizeof dir, ".reports");
  VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  expand_and_fork(dir);
  survives_kill(dir, argv[0]);
  said_at_start();
  rmdir(dir);
  printf("prog_report_life: ok\n");
  return 0;
}
