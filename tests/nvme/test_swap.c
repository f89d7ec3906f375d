/* The swap file: directory checks, mode 0600, no name while open, gone after
 * close, exit and kill -9, and each fallback (O_TMPFILE, O_DIRECT,
 * fallocate, io_uring) said once and counted. */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#define CHUNK (64u << 10)

static char *dir;

static void setup(void) {
  dir = tu_mkdtemp();
  tu_log_count = 0;
  tu_log_last[0] = 0;
}

static void teardown(void) {
  nvme_sys_reset();
  tu_rmdir(dir);
  dir = NULL;
}

static int try_open(const char *d, nvme_engine_t e, nvme_swap_t **s) {
  nvme_config_t cfg = {.dir = d, .engine = e, .chunk = CHUNK, .limit = 16 * CHUNK, .log = tu_log};
  return nvme_swap_open(&cfg, s);
}

/* Spills one chunk and reads it back: the swap works. */
static void round_trip(nvme_swap_t *s) {
  static uint8_t src[CHUNK], dst[CHUNK];
  for (size_t i = 0; i < CHUNK; i++)
    src[i] = (uint8_t)(i * 7 + 3);
  memset(dst, 0, sizeof dst);
  nvme_chunk_t c = {.arg = src, .len = CHUNK - 100};
  ck_assert_int_eq(nvme_spill(s, &c, 1, tu_fill, NULL), 0);
  c.arg = dst;
  ck_assert_int_eq(nvme_restore(s, &c, 1, tu_drain, NULL), 0);
  ck_assert_uint_eq(c.len, CHUNK - 100);
  ck_assert_mem_eq(src, dst, CHUNK - 100);
  ck_assert_int_eq(nvme_slot_free(s, c.slot), 0);
}

/* The swap file of this process: nameless, 0600. */
static void check_private(void) {
  char link[512];
  int fd = tu_find_fd(getpid(), dir, link, sizeof link);
  ck_assert_msg(fd >= 0, "no descriptor into %s", dir);
  ck_assert_msg(strstr(link, " (deleted)") != NULL, "swap file has a name: %s", link);
  ck_assert_int_eq(tu_dir_entries(dir), 0);
  char p[64];
  snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
  struct stat st;
  ck_assert_int_eq(stat(p, &st), 0);
  ck_assert_int_eq(st.st_mode & 07777, 0600);
  ck_assert_int_eq(st.st_nlink, 0);
}

// ---- the directory ----

START_TEST(refuses_symlink) {
  char link[600];
  snprintf(link, sizeof link, "%s-link", dir);
  ck_assert_int_eq(symlink(dir, link), 0);
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(try_open(link, NVME_ENGINE_AUTO, &s), -ELOOP);
  unlink(link);
  ck_assert_ptr_null(s);
  ck_assert_int_eq(tu_log_count, 1);
  ck_assert_ptr_nonnull(strstr(tu_log_last, "symbolic link"));
}
END_TEST

START_TEST(refuses_group_writable) {
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(chmod(dir, 0770), 0);
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_AUTO, &s), -EPERM);
  ck_assert_ptr_nonnull(strstr(tu_log_last, "writable"));
  ck_assert_int_eq(chmod(dir, 0707), 0);
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_AUTO, &s), -EPERM);
  ck_assert_ptr_null(s);
  ck_assert_int_eq(chmod(dir, 01777), 0); /* sticky, like /tmp: accepted */
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_AUTO, &s), 0);
  round_trip(s);
  nvme_swap_close(s);
  ck_assert_int_eq(tu_dir_entries(dir), 0);
}
END_TEST

START_TEST(refuses_other_owner) {
  nvme_swap_t *s = NULL;
  if (geteuid() == 0) {
    ck_assert_int_eq(chown(dir, 65534, 65534), 0); /* nobody */
    ck_assert_int_eq(try_open(dir, NVME_ENGINE_AUTO, &s), -EPERM);
  } else {
    ck_assert_int_eq(try_open("/", NVME_ENGINE_AUTO, &s), -EPERM); /* root's, not sticky */
  }
  ck_assert_ptr_null(s);
  ck_assert_ptr_nonnull(strstr(tu_log_last, "not owned by you"));
}
END_TEST

START_TEST(refuses_missing_and_files) {
  nvme_swap_t *s = NULL;
  char p[600];
  snprintf(p, sizeof p, "%s/none", dir);
  ck_assert_int_eq(try_open(p, NVME_ENGINE_AUTO, &s), -ENOENT);
  int fd = open(p, O_CREAT | O_WRONLY, 0600);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_int_eq(try_open(p, NVME_ENGINE_AUTO, &s), -ENOTDIR);
  unlink(p);
  ck_assert_int_eq(try_open(NULL, NVME_ENGINE_AUTO, &s), -EINVAL);
  ck_assert_ptr_null(s);
}
END_TEST

START_TEST(rejects_bad_config) {
  nvme_swap_t *s = NULL;
  nvme_config_t cfg = {.dir = dir, .chunk = 5000};
  ck_assert_int_eq(nvme_swap_open(&cfg, &s), -EINVAL); /* not a multiple of 4 KiB */
  cfg = (nvme_config_t){.dir = dir, .chunk = CHUNK, .limit = CHUNK - 1};
  ck_assert_int_eq(nvme_swap_open(&cfg, &s), -EINVAL); /* no room for one slot */
  cfg = (nvme_config_t){.dir = dir, .chunk = (1u << 30) + 4096};
  ck_assert_int_eq(nvme_swap_open(&cfg, &s), -EINVAL); /* past NVME_CHUNK_MAX */
  cfg = (nvme_config_t){.dir = dir, .qd = -1};
  ck_assert_int_eq(nvme_swap_open(&cfg, &s), -EINVAL);
  cfg = (nvme_config_t){.dir = dir, .pool_threads = 9};
  ck_assert_int_eq(nvme_swap_open(&cfg, &s), -EINVAL);
  ck_assert_ptr_null(s);
  nvme_engine_t e;
  ck_assert_int_eq(nvme_engine_parse("pool", &e), 0);
  ck_assert_int_eq(e, NVME_ENGINE_POOL);
  ck_assert_int_eq(nvme_engine_parse("uring", &e), 0);
  ck_assert_int_eq(e, NVME_ENGINE_URING);
  ck_assert_int_eq(nvme_engine_parse("fast", &e), -EINVAL);
  ck_assert_str_eq(nvme_engine_name(NVME_ENGINE_POOL), "pool");
}
END_TEST

// ---- the file ----

START_TEST(private_and_gone_after_close) {
  mode_t old = umask(0); /* the mode must not depend on the umask */
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_AUTO, &s), 0);
  umask(old);
  check_private();
  round_trip(s);
  nvme_info_t info;
  nvme_swap_info(s, &info);
  int probe = open(dir, O_TMPFILE | O_RDWR, 0600); /* the file system takes O_TMPFILE */
  ck_assert_int_eq(info.tmpfile, probe >= 0);
  if (probe >= 0) close(probe);
  char link[512];
  int fd = tu_find_fd(getpid(), dir, link, sizeof link);
  ck_assert_int_eq((fcntl(fd, F_GETFL) & O_DIRECT) != 0, info.o_direct); /* as reported */
  nvme_swap_close(s);
  ck_assert_int_eq(tu_find_fd(getpid(), dir, link, sizeof link), -1);
  ck_assert_int_eq(tu_dir_entries(dir), 0);
}
END_TEST

START_TEST(mode_with_strict_umask) {
  mode_t old = umask(0277); /* would leave 0400 */
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_AUTO, &s), 0);
  umask(old);
  check_private();
  round_trip(s);
  nvme_swap_close(s);
}
END_TEST

/* A child opens a swap, spills, then exits without closing (how == 0) or
 * waits to be killed with SIGKILL (how == 1). */
static void child_run(int how) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(p[0]);
    nvme_config_t cfg = {.dir = dir, .chunk = CHUNK, .limit = 16 * CHUNK};
    nvme_swap_t *s = NULL;
    static uint8_t src[CHUNK];
    nvme_chunk_t c = {.arg = src, .len = CHUNK};
    int ok = nvme_swap_open(&cfg, &s) == 0 && nvme_spill(s, &c, 1, tu_fill, NULL) == 0;
    ssize_t w = write(p[1], ok ? "y" : "n", 1);
    if (how == 0 || !ok || w != 1) _exit(ok ? 0 : 1);
    for (;;)
      pause();
  }
  close(p[1]);
  char ready = 0;
  ck_assert_int_eq(read(p[0], &ready, 1), 1);
  close(p[0]);
  ck_assert_int_eq(ready, 'y');
  if (how == 1) {
    char link[512];
    int fd = tu_find_fd(pid, dir, link, sizeof link);
    ck_assert_msg(fd >= 0, "child has no descriptor into %s", dir);
    ck_assert_msg(strstr(link, " (deleted)") != NULL, "child's swap file has a name: %s", link);
    ck_assert_int_eq(tu_dir_entries(dir), 0);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
  }
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  if (how == 1)
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  else
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ck_assert_int_eq(tu_dir_entries(dir), 0);
}

START_TEST(gone_after_exit) {
  child_run(0);
}
END_TEST

START_TEST(gone_after_kill9) {
  child_run(1);
}
END_TEST

// ---- fallbacks ----

static int no_tmpfile(int dfd, const char *path, int flags, mode_t mode) {
  if ((flags & O_TMPFILE) == O_TMPFILE) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return openat(dfd, path, flags, mode);
}

START_TEST(tmpfile_fallback) {
  int direct;
  tu_fs_fallbacks(dir, NVME_ENGINE_AUTO, &direct, NULL);
  nvme_sys.openat = no_tmpfile;
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_AUTO, &s), 0);
  nvme_info_t info;
  nvme_swap_info(s, &info);
  ck_assert_int_eq(info.tmpfile, 0);
  check_private(); /* unlinked at once, still 0600 */
  round_trip(s);
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.fallbacks, 1 + !direct);
  ck_assert_ptr_nonnull(strstr(tu_log_last, "O_TMPFILE"));
  nvme_swap_close(s);
  ck_assert_int_eq(tu_dir_entries(dir), 0);
}
END_TEST

static int no_direct_open(int dfd, const char *path, int flags, mode_t mode) {
  if (flags & O_DIRECT) {
    errno = EINVAL;
    return -1;
  }
  return openat(dfd, path, flags, mode);
}

START_TEST(direct_refused_at_open) {
  int tmpfile;
  tu_fs_fallbacks(dir, NVME_ENGINE_AUTO, NULL, &tmpfile);
  nvme_sys.openat = no_direct_open;
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_AUTO, &s), 0);
  nvme_info_t info;
  nvme_swap_info(s, &info);
  ck_assert_int_eq(info.o_direct, 0);
  ck_assert_int_eq(info.tmpfile, tmpfile);
  round_trip(s);
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.fallbacks, 1 + !tmpfile);
  ck_assert_int_eq(tu_log_count, 1 + !tmpfile);
  nvme_swap_close(s);
}
END_TEST

/* A file system that takes O_DIRECT at open and refuses it on write. */
static ssize_t einval_first_pwrite(int fd, const void *b, size_t n, off_t off) {
  static int calls;
  if ((fcntl(fd, F_GETFL) & O_DIRECT) && calls++ == 0) {
    errno = EINVAL;
    return -1;
  }
  return pwrite(fd, b, n, off);
}

START_TEST(direct_refused_at_write) {
  int tmpfile;
  tu_fs_fallbacks(dir, NVME_ENGINE_POOL, NULL, &tmpfile);
  nvme_sys.pwrite = einval_first_pwrite;
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_POOL, &s), 0);
  nvme_info_t info;
  nvme_swap_info(s, &info);
  ck_assert_int_eq(info.o_direct, 0);
  round_trip(s);
  char link[512];
  int fd = tu_find_fd(getpid(), dir, link, sizeof link);
  ck_assert_int_eq(fcntl(fd, F_GETFL) & O_DIRECT, 0);
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.fallbacks, 1 + !tmpfile);
  nvme_swap_close(s);
}
END_TEST

static int no_fallocate(int fd, int mode, off_t off, off_t len) {
  (void)fd, (void)mode, (void)off, (void)len;
  errno = EOPNOTSUPP;
  return -1;
}

START_TEST(fallocate_fallback) {
  int base = tu_fs_fallbacks(dir, NVME_ENGINE_AUTO, NULL, NULL);
  nvme_sys.fallocate = no_fallocate;
  nvme_config_t cfg = {
      .dir = dir, .chunk = CHUNK, .limit = 16 * CHUNK, .grow_step = 2 * CHUNK, .log = tu_log};
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(nvme_swap_open(&cfg, &s), 0);
  round_trip(s);
  round_trip(s);
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.fallbacks, 1 + base); /* said and counted once: ftruncate from then on */
  ck_assert_uint_eq(st.file_bytes, 2 * CHUNK);
  ck_assert_ptr_nonnull(strstr(tu_log_last, "ftruncate"));
  char link[512];
  int fd = tu_find_fd(getpid(), dir, link, sizeof link);
  struct stat sb;
  ck_assert_int_eq(fstat(fd, &sb), 0);
  ck_assert_int_eq(sb.st_size, 2 * CHUNK);
  nvme_swap_close(s);
}
END_TEST

static int uring_enosys(unsigned n, struct io_uring *r, unsigned f) {
  (void)n, (void)r, (void)f;
  return -ENOSYS;
}

static int uring_eperm(unsigned n, struct io_uring *r, unsigned f) {
  (void)n, (void)r, (void)f;
  return -EPERM;
}

static void uring_off(int (*init)(unsigned, struct io_uring *, unsigned), int err) {
  int base = tu_fs_fallbacks(dir, NVME_ENGINE_POOL, NULL, NULL);
  nvme_sys.uring_init = init;
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_URING, &s), err); /* forced: the error */
  ck_assert_ptr_null(s);
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_AUTO, &s), 0);
  nvme_info_t info;
  nvme_swap_info(s, &info);
  ck_assert_int_eq(info.engine, NVME_ENGINE_POOL);
  round_trip(s);
  round_trip(s);
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.fallbacks, 1 + base);
  ck_assert_ptr_nonnull(strstr(tu_log_last, "io_uring unavailable"));
  ck_assert_ptr_nonnull(strstr(tu_log_last, strerror(-err)));
  nvme_swap_close(s);
  ck_assert_int_eq(tu_dir_entries(dir), 0);
}

START_TEST(uring_enosys_falls_back) {
  uring_off(uring_enosys, -ENOSYS);
}
END_TEST

START_TEST(uring_eperm_falls_back) {
  uring_off(uring_eperm, -EPERM);
}
END_TEST

START_TEST(pool_forced) {
  int base = tu_fs_fallbacks(dir, NVME_ENGINE_POOL, NULL, NULL);
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(try_open(dir, NVME_ENGINE_POOL, &s), 0);
  nvme_info_t info;
  nvme_swap_info(s, &info);
  ck_assert_int_eq(info.engine, NVME_ENGINE_POOL);
  round_trip(s);
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.fallbacks, base); /* asked for, not a fallback */
  nvme_swap_close(s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nvme_swap");
  TCase *tc = tcase_create("swap");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, refuses_symlink);
  tcase_add_test(tc, refuses_group_writable);
  tcase_add_test(tc, refuses_other_owner);
  tcase_add_test(tc, refuses_missing_and_files);
  tcase_add_test(tc, rejects_bad_config);
  tcase_add_test(tc, private_and_gone_after_close);
  tcase_add_test(tc, mode_with_strict_umask);
  tcase_add_test(tc, gone_after_exit);
  tcase_add_test(tc, gone_after_kill9);
  tcase_add_test(tc, tmpfile_fallback);
  tcase_add_test(tc, direct_refused_at_open);
  tcase_add_test(tc, direct_refused_at_write);
  tcase_add_test(tc, fallocate_fallback);
  tcase_add_test(tc, uring_enosys_falls_back);
  tcase_add_test(tc, uring_eperm_falls_back);
  tcase_add_test(tc, pool_forced);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
