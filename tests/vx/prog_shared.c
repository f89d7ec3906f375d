/* prog_shared: two vx processes on one simulated GPU through the shared ledger.
 * cuMemGetInfo counts the other process's share (free never offers bytes
 * the other one holds), and truncating the ledger file under a running
 * holder neither kills it (SIGBUS before) nor loses a byte of its data.
 *
 * Device: SIMCUDA_VRAM=256M, VX_RESERVE=16M: 240M for the processes
 * together.  Each simulated driver is private to its process: only the
 * ledger makes them agree.  Workers take commands on stdin, one per line
 * ("alloc N", "free N", "info", "verify", "exit"), and answer one line. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vxt.h"

#define MB (1ULL << 20)
enum { BUF = 20 * MB, MAXBUF = 32, CAPACITY = 240 * MB };

// ---- the worker ----

static CUdeviceptr bufs[MAXBUF];
static int nbufs;
static unsigned char *host;

static void fill(unsigned char *h, unsigned seed) {
  for (size_t i = 0; i < BUF; i++)
    h[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 12));
}

static int verify_all(void) {
  unsigned char *want = malloc(BUF);
  int bad = 0;
  for (int i = 0; i < nbufs; i++) {
    fill(want, (unsigned)i);
    VXT_CU(cuMemcpyDtoH_v2(host, bufs[i], BUF));
    bad += memcmp(want, host, BUF) != 0;
  }
  free(want);
  return bad;
}

static int worker(void) {
  CUdevice dev;
  CUcontext ctx;
  VXT_CU(cuInit(0));
  VXT_CU(cuDeviceGet(&dev, 0));
  VXT_CU(cuCtxCreate_v2(&ctx, 0, dev));
  host = malloc(BUF);
  VXT_ASSERT(host);
  char line[64];
  setvbuf(stdout, NULL, _IOLBF, 0);
  while (fgets(line, sizeof line, stdin)) {
    int n = 0;
    if (sscanf(line, "alloc %d", &n) == 1) {
      uint64_t native = 0;
      for (int k = 0; k < n && nbufs < MAXBUF; k++) {
        CUdeviceptr p;
        VXT_CU(cuMemAlloc_v2(&p, BUF));
        unsigned managed = 0;
        VXT_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
        native += managed ? 0 : BUF;
        fill(host, (unsigned)nbufs);
        VXT_CU(cuMemcpyHtoD_v2(p, host, BUF));
        bufs[nbufs++] = p;
      }
      printf("native %llu\n", (unsigned long long)native);
    } else if (sscanf(line, "free %d", &n) == 1) {
      for (int k = 0; k < n && nbufs > 0; k++)
        VXT_CU(cuMemFree_v2(bufs[--nbufs]));
      printf("freed\n");
    } else if (!strncmp(line, "info", 4)) {
      size_t f = 0, t = 0;
      VXT_CU(cuMemGetInfo_v2(&f, &t));
      printf("free %zu total %zu\n", f, t);
    } else if (!strncmp(line, "verify", 6)) {
      printf("bad %d of %d\n", verify_all(), nbufs);
    } else {
      break;
    }
  }
  while (nbufs > 0)
    VXT_CU(cuMemFree_v2(bufs[--nbufs]));
  VXT_CU(cuCtxDestroy_v2(ctx));
  free(host);
  return 0;
}

// ---- the orchestrator ----

typedef struct proc {
  pid_t pid;
  int in, out;
  char errpath[256];
} proc_t;

static char ledger_name[64];

static void spawn(proc_t *w) {
  int in[2], out[2];
  VXT_ASSERT(!pipe(in) && !pipe(out));
  vxt_tmpname(w->errpath, sizeof w->errpath, ".err");
  w->pid = fork();
  VXT_ASSERT(w->pid >= 0);
  if (w->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    if (!freopen(w->errpath, "w", stderr)) _exit(2);
    close(in[1]);
    close(out[0]);
    setenv("SIMCUDA_VRAM", "256M", 1);
    setenv("VX_RESERVE", "16M", 1);
    setenv("VX_NATIVE_MAX", "64K", 1);
    setenv("VX_MOVABLE", "0", 1); /* native while the budget has room */
    setenv("VX_STATS", "0", 1);
    setenv("VX_LEDGER", ledger_name, 1);
    unsetenv("VX_DEVICE_LIMIT");
    execl("/proc/self/exe", "prog_shared", "--worker", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  w->in = in[1];
  w->out = out[0];
}

/* Sends one command and returns its one-line answer (static buffer). */
static const char *ask(proc_t *w, const char *cmd) {
  static char buf[256];
  size_t len = 0;
  VXT_ASSERT(write(w->in, cmd, strlen(cmd)) == (ssize_t)strlen(cmd));
  VXT_ASSERT(write(w->in, "\n", 1) == 1);
  buf[0] = '\0';
  while (!strchr(buf, '\n')) {
    struct pollfd pf = {w->out, POLLIN, 0};
    VXT_ASSERT(poll(&pf, 1, 60000) == 1, "worker %d: no answer to '%s'", (int)w->pid, cmd);
    ssize_t n = read(w->out, buf + len, sizeof buf - 1 - len);
    if (n <= 0) {
      int st = 0;
      waitpid(w->pid, &st, 0);
      char *err = vxt_read_file(w->errpath);
      VXT_FAIL("worker %d died (%s %d) at '%s': %s", (int)w->pid,
               WIFSIGNALED(st) ? "signal" : "status",
               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), cmd, err ? err : "");
    }
    len += (size_t)n;
    buf[len] = '\0';
  }
  return buf;
}

static uint64_t ask_u64(proc_t *w, const char *cmd, const char *fmt) {
  unsigned long long v = 0;
  const char *a = ask(w, cmd);
  VXT_ASSERT(sscanf(a, fmt, &v) == 1, "'%s': %s", cmd, a);
  return v;
}

/* Ends a worker and returns its stderr (malloc'ed); it must exit 0. */
static char *finish(proc_t *w) {
  VXT_ASSERT(write(w->in, "exit\n", 5) == 5);
  int st;
  VXT_ASSERT(waitpid(w->pid, &st, 0) == w->pid);
  char *err = vxt_read_file(w->errpath);
  VXT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d: %s %d: %s", (int)w->pid,
             WIFSIGNALED(st) ? "signal" : "status",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), err ? err : "");
  close(w->in);
  close(w->out);
  unlink(w->errpath);
  return err;
}

/* cuMemGetInfo's free never offers what another vx process holds. */
static void meminfo_counts_others(void) {
  proc_t a, b;
  spawn(&a);
  VXT_ASSERT(ask_u64(&a, "alloc 8", "native %llu") == 160 * MB);
  VXT_ASSERT(ask_u64(&a, "info", "free %llu") == CAPACITY - 160 * MB);
  spawn(&b);
  uint64_t fb = ask_u64(&b, "info", "free %llu");
  VXT_ASSERT(fb == CAPACITY - 160 * MB, "B sees %llu MB free, A holds 160 of 240 MB",
             (unsigned long long)(fb / MB));
  VXT_ASSERT(ask_u64(&b, "alloc 2", "native %llu") == 40 * MB);
  VXT_ASSERT(ask_u64(&b, "info", "free %llu") == 40 * MB);
  VXT_ASSERT(ask_u64(&a, "info", "free %llu") == 40 * MB, "A does not see B's 40 MB");
  free(finish(&b)); /* its share returns */
  VXT_ASSERT(ask_u64(&a, "info", "free %llu") == CAPACITY - 160 * MB);
  free(finish(&a));
  printf("meminfo_counts_others: B saw 80M free beside A's 160M; A saw B's 40M\n");
}

/* The ledger file truncated to 0 under a holder: it keeps allocating and
 * freeing, its data is intact, it exits 0 and says so once. */
static void truncated_ledger(void) {
  proc_t a, b;
  spawn(&a);
  spawn(&b);
  VXT_ASSERT(ask_u64(&a, "alloc 4", "native %llu") == 80 * MB);
  VXT_ASSERT(ask_u64(&b, "alloc 2", "native %llu") == 40 * MB);
  char path[192];
  snprintf(path, sizeof path, "/dev/shm/vx-ledger-%u-%s-0", (unsigned)geteuid(), ledger_name);
  int fd = open(path, O_RDWR);
  VXT_ASSERT(fd >= 0, "open %s: %s", path, strerror(errno));
  VXT_ASSERT(ftruncate(fd, 0) == 0);
  close(fd);
  VXT_ASSERT(ask_u64(&a, "alloc 3", "native %llu") == 60 * MB); /* SIGBUS here before */
  VXT_ASSERT(!strncmp(ask(&a, "free 2"), "freed", 5));
  VXT_ASSERT(ask_u64(&a, "alloc 1", "native %llu") == 20 * MB);
  VXT_ASSERT(!strcmp(ask(&a, "verify"), "bad 0 of 6\n"));
  VXT_ASSERT(!strcmp(ask(&b, "verify"), "bad 0 of 2\n"));
  ask(&a, "info"); /* still answers (its own budget now) */
  char *ea = finish(&a), *eb = finish(&b);
  int lines = 0;
  for (char *s = ea; s && (s = strstr(s, "truncated or replaced")); s++)
    lines++;
  VXT_ASSERT(lines == 1, "A: %d lines about the ledger: %s", lines, ea ? ea : "");
  VXT_ASSERT(!strstr(ea, "Bus error"));
  free(ea);
  free(eb);
  printf("truncated_ledger: holder kept allocating and freeing, data intact, exit 0, one line\n");
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker();
  if (!vxt_vx_preloaded()) {
    fprintf(stderr, "prog_shared: needs LD_PRELOAD=libvx.so\n");
    return 77;
  }
  signal(SIGPIPE, SIG_IGN);
  char key[96];
  snprintf(ledger_name, sizeof ledger_name, "vxt-shared-%d", (int)getpid());
  snprintf(key, sizeof key, "%s-0", ledger_name);
  /* one part alone: `prog_shared meminfo` or `prog_shared truncate` */
  if (argc < 2 || strcmp(argv[1], "truncate")) meminfo_counts_others();
  if (argc < 2 || strcmp(argv[1], "meminfo")) truncated_ledger();
  char path[192];
  snprintf(path, sizeof path, "/dev/shm/vx-ledger-%u-%s", (unsigned)geteuid(), key);
  unlink(path);
  printf("prog_shared: ok\n");
  return 0;
}
