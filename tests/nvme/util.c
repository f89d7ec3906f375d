/* Helpers shared by the nvme tests (see util.h): temporary directories,
 * /proc lookups, memcpy callbacks and the fault plan on the seam. */
#include "util.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int tu_log_count;
char tu_log_last[256];
long tu_drains;
tu_fault_t tu_fault;

char *tu_mkdtemp(void) {
  char *d = strdup("/tmp/vx-nvme-XXXXXX");
  ck_assert_ptr_nonnull(d);
  ck_assert_ptr_nonnull(mkdtemp(d));
  ck_assert_int_eq(chmod(d, 0700), 0);
  return d;
}

void tu_rmdir(char *dir) {
  if (!dir) return;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      char p[4096 + 256];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  if (d) closedir(d);
  rmdir(dir);
  free(dir);
}

int tu_dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

int tu_find_fd(pid_t pid, const char *dir, char *link, size_t n) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  int found = -1;
  struct dirent *e;
  size_t dl = strlen(dir);
  while (found < 0 && (e = readdir(d))) {
    char p[320];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    ssize_t k = readlink(p, link, n - 1);
    if (k <= 0) continue;
    link[k] = 0;
    if (!strncmp(link, dir, dl) && link[dl] == '/') found = atoi(e->d_name);
  }
  closedir(d);
  return found;
}

unsigned tu_seed(const char *what) {
  const char *env = getenv("NVME_TEST_SEED");
  unsigned s = env ? (unsigned)strtoul(env, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
  printf("%s: seed %u (rerun with NVME_TEST_SEED=%u)\n", what, s, s);
  fflush(stdout);
  return s;
}

nvme_swap_t *tu_open(const char *dir, nvme_engine_t e, uint32_t chunk, uint64_t limit, int qd) {
  nvme_config_t cfg = {
      .dir = dir, .engine = e, .chunk = chunk, .limit = limit, .qd = qd, .log = tu_log};
  nvme_swap_t *s = NULL;
  int r = nvme_swap_open(&cfg, &s);
  ck_assert_msg(r == 0, "nvme_swap_open: %s", strerror(-r));
  return s;
}

int tu_fs_fallbacks(const char *dir, nvme_engine_t e, int *direct, int *tmpfile) {
  nvme_swap_t *s = tu_open(dir, e, 4096, 1 << 20, 4);
  nvme_info_t info;
  nvme_stats_t st;
  nvme_swap_info(s, &info);
  nvme_stats_get(s, &st);
  nvme_swap_close(s);
  if (direct) *direct = info.o_direct;
  if (tmpfile) *tmpfile = info.tmpfile;
  ck_assert_uint_eq(st.fallbacks, (uint64_t)(!info.o_direct + !info.tmpfile));
  if (st.fallbacks)
    printf("%s: no%s%s here: expected fallback counts adjusted\n", dir,
           info.o_direct ? "" : " O_DIRECT", info.tmpfile ? "" : " O_TMPFILE");
  tu_log_count = 0;
  return (int)st.fallbacks;
}

nvme_engine_t tu_engine_arg(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "pool")) return NVME_ENGINE_POOL;
  struct io_uring ring;
  int r = io_uring_queue_init(4, &ring, 0);
  if (r < 0) {
    printf("io_uring cannot be set up here (%s): skipped\n", strerror(-r));
    exit(77);
  }
  io_uring_queue_exit(&ring);
  return NVME_ENGINE_URING;
}

void tu_log(void *arg, const char *msg) {
  (void)arg;
  __atomic_fetch_add(&tu_log_count, 1, __ATOMIC_RELAXED);
  snprintf(tu_log_last, sizeof tu_log_last, "%s", msg);
}

int tu_fill(void *buf, const nvme_chunk_t *c, void *arg) {
  (void)arg;
  memcpy(buf, c->arg, c->len);
  return 0;
}

int tu_drain(const void *buf, const nvme_chunk_t *c, void *arg) {
  (void)arg;
  memcpy(c->arg, buf, c->len);
  __atomic_fetch_add(&tu_drains, 1, __ATOMIC_RELAXED);
  return 0;
}

// ---- fault plan ----

/* 0 = let the call through, else inject. */
static int fault_hit(int op) {
  if (!(__atomic_load_n(&tu_fault.ops, __ATOMIC_ACQUIRE) & op)) return 0;
  long k = __atomic_add_fetch(&tu_fault.calls, 1, __ATOMIC_RELAXED);
  if (k < tu_fault.nth || (tu_fault.times >= 0 && k >= tu_fault.nth + tu_fault.times)) return 0;
  __atomic_fetch_add(&tu_fault.hits, 1, __ATOMIC_RELAXED);
  return 1;
}

static ssize_t f_pwrite(int fd, const void *b, size_t n, off_t off) {
  if (!fault_hit(TU_WRITE)) return pwrite(fd, b, n, off);
  if (tu_fault.mode == TU_SHORT) return pwrite(fd, b, n > 4096 ? n - 4096 : 0, off);
  errno = tu_fault.err;
  return -1;
}

static ssize_t f_pread(int fd, void *b, size_t n, off_t off) {
  if (!fault_hit(TU_READ)) return pread(fd, b, n, off);
  if (tu_fault.mode == TU_SHORT) return pread(fd, b, n > 4096 ? n - 4096 : 0, off);
  errno = tu_fault.err;
  return -1;
}

static int f_submit(struct io_uring *ring) {
  if (!fault_hit(TU_SUBMIT)) return io_uring_submit(ring);
  return -tu_fault.err;
}

static int f_result(int write, int res) {
  if (res < 0 || !fault_hit(write ? TU_WRITE : TU_READ)) return res;
  if (tu_fault.mode == TU_SHORT) return res > 4096 ? res - 4096 : 0;
  return -tu_fault.err;
}

void tu_fault_arm(int ops, int mode, int err, long nth, long times) {
  tu_fault = (tu_fault_t){.mode = mode, .err = err, .nth = nth, .times = times};
  nvme_sys.pwrite = f_pwrite;
  nvme_sys.pread = f_pread;
  nvme_sys.uring_submit = f_submit;
  nvme_sys.uring_result = f_result;
  __atomic_store_n(&tu_fault.ops, ops, __ATOMIC_RELEASE);
}

void tu_fault_off(void) {
  __atomic_store_n(&tu_fault.ops, 0, __ATOMIC_RELEASE);
  nvme_sys_reset();
}
