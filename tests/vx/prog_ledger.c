/* prog_ledger: several vx processes on one (simulated) GPU share its budget
 * through the per-GPU ledger; a process killed with SIGKILL gives its share back.
 *
 * Each simulated driver is private to its process, so two processes each
 * see the whole device; the ledger (keyed by VX_LEDGER, or by the device
 * UUID, which the simulator derives from the ordinal) is what makes them
 * agree.  Device: SIMCUDA_VRAM=256M, VX_RESERVE=16M (a sixteenth, the most
 * the reserve may take): 240M for all together. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ledger.h"
#include "vxt.h"

#define MB (1ULL << 20)
enum { BUF = 20 * MB, CAPACITY = 240 * MB };

// ---- the worker: allocate, verify, report, hold, free ----

static void fill(unsigned char *h, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    h[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 12));
}

static int worker(int nbuf, int hold) {
  CUdevice dev;
  CUcontext ctx;
  CUuuid u;
  VXT_CU(cuInit(0));
  VXT_CU(cuDeviceGet(&dev, 0));
  VXT_CU(cuCtxCreate_v2(&ctx, 0, dev));
  VXT_CU(cuDeviceGetUuid_v2(&u, dev));
  CUdeviceptr p[64];
  unsigned char *h = malloc(BUF), *back = malloc(BUF);
  VXT_ASSERT(h && back && nbuf <= 64);
  uint64_t native = 0, managed = 0;
  for (int i = 0; i < nbuf; i++) {
    VXT_CU(cuMemAlloc_v2(&p[i], BUF));
    unsigned is_managed = 0;
    VXT_CU(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p[i]));
    *(is_managed ? &managed : &native) += BUF;
    fill(h, BUF, (unsigned)i);
    VXT_CU(cuMemcpyHtoD_v2(p[i], h, BUF));
  }
  for (int i = 0; i < nbuf; i++) {
    fill(h, BUF, (unsigned)i);
    VXT_CU(cuMemcpyDtoH_v2(back, p[i], BUF));
    VXT_ASSERT(!memcmp(h, back, BUF), "buffer %d read back differs", i);
  }
  printf("uuid ");
  for (int i = 0; i < 16; i++)
    printf("%02x", (unsigned char)u.bytes[i]);
  printf("\nnative %llu managed %llu\n", (unsigned long long)native, (unsigned long long)managed);
  fflush(stdout);
  if (hold) {
    char line[8];
    if (!fgets(line, sizeof line, stdin)) { /* the parent went away: just end */
    }
  }
  for (int i = 0; i < nbuf; i++)
    VXT_CU(cuMemFree_v2(p[i]));
  VXT_CU(cuCtxDestroy_v2(ctx));
  free(h);
  free(back);
  return 0;
}

// ---- the orchestrator ----

typedef struct proc {
  pid_t pid;
  int in, out; /* its stdin (we write), its stdout (we read) */
  char uuid[33];
  uint64_t native, managed;
  char errpath[256]; /* its stderr */
} proc_t;

static char ledger_name[64];

/* Starts `self --worker NBUF HOLD` with VX_LEDGER=ledger (NULL = unset). */
static void spawn(proc_t *w, int nbuf, int hold, const char *ledger) {
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
    setenv("VX_MOVABLE", "0", 1); /* native while the budget has room: the shares counted */
    setenv("VX_STATS", "0", 1);
    unsetenv("VX_DEVICE_LIMIT");
    if (ledger)
      setenv("VX_LEDGER", ledger, 1);
    else
      unsetenv("VX_LEDGER");
    char n[16], hd[4];
    snprintf(n, sizeof n, "%d", nbuf);
    snprintf(hd, sizeof hd, "%d", hold);
    execl("/proc/self/exe", "prog_ledger", "--worker", n, hd, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  w->in = in[1];
  w->out = out[0];
}

/* Reads the worker's report (waiting at most 30 s). */
static void report(proc_t *w) {
  char buf[512] = "";
  size_t len = 0;
  while (!strstr(buf, "managed ") || !strchr(strstr(buf, "managed "), '\n')) {
    struct pollfd pf = {w->out, POLLIN, 0};
    VXT_ASSERT(poll(&pf, 1, 30000) == 1, "worker %d reported nothing in 30 s", (int)w->pid);
    ssize_t n = read(w->out, buf + len, sizeof buf - 1 - len);
    if (n <= 0) {
      char *err = vxt_read_file(w->errpath);
      VXT_FAIL("worker %d ended without a report: %s", (int)w->pid, err ? err : "");
    }
    len += (size_t)n;
    buf[len] = '\0';
  }
  unsigned long long nat, man;
  VXT_ASSERT(sscanf(buf, "uuid %32s native %llu managed %llu", w->uuid, &nat, &man) == 3, "%s",
             buf);
  w->native = nat;
  w->managed = man;
}

/* Lets a holding worker free everything and end; checks it ended well. */
static void finish(proc_t *w) {
  VXT_ASSERT(write(w->in, "go\n", 3) == 3);
  int st;
  VXT_ASSERT(waitpid(w->pid, &st, 0) == w->pid);
  char *err = vxt_read_file(w->errpath);
  VXT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d: status %d: %s", (int)w->pid, st,
             err ? err : "");
  free(err);
  close(w->in);
  close(w->out);
  unlink(w->errpath);
}

static void kill9(proc_t *w) {
  int st;
  VXT_ASSERT(kill(w->pid, SIGKILL) == 0);
  VXT_ASSERT(waitpid(w->pid, &st, 0) == w->pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  close(w->in);
  close(w->out);
  unlink(w->errpath);
}

struct find {
  pid_t pid;
  int found;
  uint64_t bytes, total;
};

static void find_cb(const ledger_entry_t *e, void *arg) {
  struct find *f = arg;
  f->total += e->bytes;
  if (e->pid == f->pid) f->found = 1, f->bytes = e->bytes;
}

/* pid's share in the ledger `key` (fails when it holds no slot there). */
static uint64_t share_of(const char *key, pid_t pid, uint64_t *total) {
  char err[256];
  vx_ledger_t *l = ledger_observe_key(key, err, sizeof err);
  VXT_ASSERT(l, "observe %s: %s", key, err);
  struct find f = {.pid = pid};
  ledger_list(l, find_cb, &f);
  ledger_close(l);
  VXT_ASSERT(f.found, "pid %d has no slot in ledger %s", (int)pid, key);
  if (total) *total = f.total;
  return f.bytes;
}

/* `vx top --once` shows the ledger `key` with pid a's and pid b's shares,
 * every line within 80 columns. */
static void top_shows(const char *key, pid_t a, const char *share_a, pid_t b, const char *share_b) {
  const char *bin = getenv("VX_TEST_BIN_DIR");
  char cmd[512], line[256], want_a[64], want_b[64], head[128];
  if (!bin) return;
  snprintf(cmd, sizeof cmd, "%s/vx top --once", bin);
  snprintf(want_a, sizeof want_a, "PID %-7d share %8s", (int)a, share_a);
  snprintf(want_b, sizeof want_b, "PID %-7d share %8s", (int)b, share_b);
  snprintf(head, sizeof head, "GPU %s shared: 2 processes", key);
  FILE *p = popen(cmd, "r");
  VXT_ASSERT(p);
  int seen_head = 0, seen_a = 0, seen_b = 0, in_key = 0;
  while (fgets(line, sizeof line, p)) {
    size_t n = strcspn(line, "\n");
    VXT_ASSERT(n <= 80, "vx top line of %zu columns: %s", n, line);
    if (!strncmp(line, "GPU ", 4)) in_key = !strncmp(line, head, strlen(head));
    seen_head |= in_key && !strncmp(line, head, strlen(head));
    seen_a |= in_key && strstr(line, want_a) != NULL;
    seen_b |= in_key && strstr(line, want_b) != NULL;
  }
  VXT_ASSERT(pclose(p) == 0);
  VXT_ASSERT(seen_head && seen_a && seen_b, "vx top: head %d A %d B %d", seen_head, seen_a, seen_b);
}

/* Two holders: together never past the capacity; the second one's
 * over-share allocations are managed.  Then the first is SIGKILLed and a
 * third gets the whole capacity natively. */
static void share_and_kill(void) {
  char key[80];
  snprintf(key, sizeof key, "%s-0", ledger_name);
  proc_t a, b, c;
  spawn(&a, 8, 1, ledger_name);
  report(&a);
  VXT_ASSERT(a.native == 160 * MB && a.managed == 0, "A: native %llu managed %llu",
             (unsigned long long)a.native, (unsigned long long)a.managed);
  spawn(&b, 8, 1, ledger_name);
  report(&b);
  VXT_ASSERT(b.native == 80 * MB && b.managed == 80 * MB, "B: native %llu managed %llu",
             (unsigned long long)b.native, (unsigned long long)b.managed);
  VXT_ASSERT(a.native + b.native <= CAPACITY);
  uint64_t total;
  VXT_ASSERT(share_of(key, a.pid, &total) == 160 * MB);
  VXT_ASSERT(share_of(key, b.pid, NULL) == 80 * MB);
  VXT_ASSERT(total == CAPACITY, "ledger total %llu", (unsigned long long)total);
  top_shows(key, a.pid, "160M", b.pid, "80M");
  finish(&b); /* B's frees return its share */
  VXT_ASSERT(share_of(key, a.pid, &total) == 160 * MB && total == 160 * MB);
  kill9(&a); /* dies holding 160M */
  spawn(&c, 12, 1, ledger_name);
  report(&c);
  VXT_ASSERT(c.native == CAPACITY && c.managed == 0,
             "C after A was killed: native %llu managed %llu", (unsigned long long)c.native,
             (unsigned long long)c.managed);
  VXT_ASSERT(share_of(key, c.pid, &total) == CAPACITY && total == CAPACITY);
  finish(&c);
  printf("share_and_kill: A 160M native; B 80M native + 80M managed; A killed; C 240M native\n");
}

/* VX_LEDGER=uuid keys the ledger by the device UUID: the worker's slot is in the ledger
 * named by the UUID it reads itself, and its share equals its native bytes
 * (other vx processes on this machine may share the simulator's UUID, so
 * only this worker's own slot is checked). */
static void uuid_key(void) {
  proc_t d;
  spawn(&d, 1, 1, "uuid");
  report(&d);
  VXT_ASSERT(strlen(d.uuid) == 32);
  VXT_ASSERT(share_of(d.uuid, d.pid, NULL) == d.native, "native %llu",
             (unsigned long long)d.native);
  VXT_ASSERT(d.native + d.managed == BUF);
  finish(&d);
  printf("uuid_key: worker's slot found in ledger %s\n", d.uuid);
}

/* A ledger that cannot be opened: private accounting, one warning line. */
static void fallback(void) {
  proc_t e;
  spawn(&e, 8, 1, "bad name!");
  report(&e);
  VXT_ASSERT(e.native == 160 * MB && e.managed == 0);
  char *err = vxt_read_file(e.errpath);
  VXT_ASSERT(err);
  int lines = 0;
  for (char *s = err; (s = strstr(s, "budgeted for this process alone")); s++)
    lines++;
  VXT_ASSERT(lines == 1, "%d warning lines: %s", lines, err);
  free(err);
  finish(&e);
  printf("fallback: private accounting, one warning\n");
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--worker")) return worker(atoi(argv[2]), atoi(argv[3]));
  if (!vxt_vx_preloaded()) {
    fprintf(stderr, "prog_ledger: needs LD_PRELOAD=libvx.so\n");
    return 77;
  }
  signal(SIGPIPE, SIG_IGN);
  snprintf(ledger_name, sizeof ledger_name, "vxt-ledger-%d", (int)getpid());
  share_and_kill();
  uuid_key();
  fallback();
  char key[80];
  snprintf(key, sizeof key, "%s-0", ledger_name);
  VXT_ASSERT(ledger_unlink_key(key) == 0);
  printf("prog_ledger: ok\n");
  return 0;
}
