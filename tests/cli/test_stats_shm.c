/* test_stats_shm.c: the live stats segment: writer/reader round trip,
 * 0600 and ownership checks, validation of every header field, a fuzz pass. */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats_shm.h"

static uint64_t limits2[2 * VX_LIMIT_COUNT] = {8, 16, 64, 4, 16, 64};

static uint64_t *make(int ndev) {
  char err[256] = "";
  uint64_t *c = vx_stats_shm_create(ndev, limits2, err, sizeof err);
  ck_assert_msg(c != NULL, "create: %s", err);
  return c;
}

/* The segment's bytes as a reader would see them. */
static char *snapshot(size_t *len) {
  char path[64];
  vx_stats_shm_path(geteuid(), getpid(), path, sizeof path);
  int fd = open(path, O_RDONLY);
  ck_assert_int_ge(fd, 0);
  struct stat st;
  ck_assert_int_eq(fstat(fd, &st), 0);
  char *buf = malloc((size_t)st.st_size);
  ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
  close(fd);
  *len = (size_t)st.st_size;
  return buf;
}

START_TEST(round_trip) {
  mode_t old = umask(0);
  uint64_t *c = make(2);
  umask(old);
  c[VX_STATS_native_bytes] = 123;
  c[VX_STATS_NCOUNTERS + VX_STATS_bytes_up] = 456;
  vx_stats_view_t v;
  ck_assert_int_eq(vx_stats_shm_open(getpid(), &v), 0);
  ck_assert_int_eq(v.hdr.ndev, 2);
  ck_assert_int_eq(v.hdr.ncounters, VX_STATS_NCOUNTERS);
  ck_assert_int_eq(v.hdr.pid, getpid());
  ck_assert_uint_eq(vx_stats_get(&v, 0, VX_STATS_native_bytes), 123);
  ck_assert_uint_eq(vx_stats_get(&v, 1, VX_STATS_bytes_up), 456);
  ck_assert_uint_eq(vx_stats_get(&v, 2, 0), 0); /* out of range reads 0 */
  ck_assert_uint_eq(vx_stats_limit(&v, 1, VX_LIMIT_DEVICE), 4);
  ck_assert_uint_eq(vx_stats_limit(&v, 0, VX_LIMIT_NVME), 64);
  ck_assert_ptr_nonnull(strstr(v.hdr.cmdline, "cli_stats_shm_test"));
  uint64_t hb = vx_stats_heartbeat(&v);
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  vx_stats_shm_heartbeat();
  ck_assert_uint_gt(vx_stats_heartbeat(&v), hb);
  c[VX_STATS_launches] = 7; /* live: the view sees later writes */
  ck_assert_uint_eq(vx_stats_get(&v, 0, VX_STATS_launches), 7);
  char path[64];
  struct stat st;
  ck_assert_int_eq(stat(vx_stats_shm_path(geteuid(), getpid(), path, sizeof path), &st), 0);
  ck_assert_int_eq(st.st_mode & 07777, 0600); /* despite umask 0 */
  vx_stats_shm_close(&v);
  vx_stats_shm_destroy();
  ck_assert_int_eq(vx_stats_shm_open(getpid(), &v), -ENOENT);
  ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

/* Mutates one header field of a valid copy and expects rc. */
#define EXPECT_BAD(field, value, rc)                                                               \
  do {                                                                                             \
    char *b = malloc(len);                                                                         \
    memcpy(b, good, len);                                                                          \
    ((vx_stats_hdr_t *)b)->field = value;                                                          \
    ck_assert_int_eq(vx_stats_validate(b, len, NULL, err, sizeof err), rc);                        \
    free(b);                                                                                       \
  } while (0)

START_TEST(validate_fields) {
  make(2);
  size_t len;
  char *good = snapshot(&len), err[128];
  vx_stats_hdr_t h;
  ck_assert_int_eq(vx_stats_validate(good, len, &h, err, sizeof err), 0);
  ck_assert_int_eq(h.ndev, 2);
  EXPECT_BAD(magic[0], 'X', -EBADMSG);
  EXPECT_BAD(version, VX_STATS_VERSION + 1, -EPROTONOSUPPORT);
  EXPECT_BAD(header_size, 8, -EBADMSG);
  EXPECT_BAD(ndev, 0, -EBADMSG);
  EXPECT_BAD(ndev, VX_STATS_MAX_DEV + 1, -EBADMSG);
  EXPECT_BAD(ndev, 3, -EBADMSG); /* total size no longer matches */
  EXPECT_BAD(ncounters, 0, -EBADMSG);
  EXPECT_BAD(ncounters, VX_STATS_MAX_COUNTERS + 1, -EBADMSG);
  EXPECT_BAD(total_size, len + 8, -EBADMSG);
  EXPECT_BAD(pid, 0, -EBADMSG);
  EXPECT_BAD(cmdline[VX_STATS_CMDLINE - 1], 'x', 0); /* a NUL earlier still ends it */
  /* an unterminated command line */
  char *b = malloc(len);
  memcpy(b, good, len);
  memset(((vx_stats_hdr_t *)b)->cmdline, 'x', VX_STATS_CMDLINE);
  ck_assert_int_eq(vx_stats_validate(b, len, NULL, err, sizeof err), -EBADMSG);
  free(b);
  /* shorter than its header, shorter than total_size */
  ck_assert_int_eq(vx_stats_validate(good, sizeof(vx_stats_hdr_t) - 1, NULL, err, sizeof err),
                   -EBADMSG);
  ck_assert_int_eq(vx_stats_validate(good, len - 8, NULL, err, sizeof err), -EBADMSG);
  ck_assert_int_eq(vx_stats_validate(NULL, 0, NULL, err, sizeof err), -EBADMSG);
  free(good);
  vx_stats_shm_destroy();
}
END_TEST

START_TEST(validate_fuzz) {
  make(1);
  size_t len;
  char *good = snapshot(&len), *b = malloc(len);
  unsigned seed = 12345;
  int accepted = 0;
  for (int i = 0; i < 20000; i++) {
    memcpy(b, good, len);
    int flips = 1 + rand_r(&seed) % 4;
    for (int k = 0; k < flips; k++)
      b[rand_r(&seed) % (int)sizeof(vx_stats_hdr_t)] = (char)rand_r(&seed);
    size_t l = rand_r(&seed) % 4 ? len : (size_t)rand_r(&seed) % (len + 64);
    vx_stats_hdr_t h;
    if (vx_stats_validate(b, l < len ? l : len, &h, NULL, 0) == 0) {
      accepted++;
      ck_assert_uint_le(h.total_size, l < len ? l : len);
      ck_assert_uint_le(h.ndev, VX_STATS_MAX_DEV);
    }
  }
  ck_assert_int_gt(accepted, 0); /* flips in the command line stay valid */
  free(b);
  free(good);
  vx_stats_shm_destroy();
}
END_TEST

START_TEST(open_refuses) {
  make(1);
  char path[64], other[64];
  vx_stats_shm_path(geteuid(), getpid(), path, sizeof path);
  vx_stats_view_t v;
  ck_assert_int_eq(chmod(path, 0644), 0);
  ck_assert_int_eq(vx_stats_shm_open(getpid(), &v), -EACCES);
  ck_assert_int_eq(chmod(path, 0600), 0);
  /* a valid segment under another pid's name: the pid inside disagrees */
  pid_t fake = 0x3ffffff0;
  vx_stats_shm_path(geteuid(), fake, other, sizeof other);
  ck_assert_int_eq(link(path, other), 0);
  ck_assert_int_eq(vx_stats_shm_open(fake, &v), -EBADMSG);
  unlink(other);
  ck_assert_int_eq(symlink(path, other), 0);
  ck_assert_int_eq(vx_stats_shm_open(fake, &v), -EPERM);
  unlink(other);
  /* corrupt contents */
  int fd = open(other, O_CREAT | O_EXCL | O_WRONLY, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, "VXSTATS\0garbage", 15), 15);
  close(fd);
  ck_assert_int_eq(vx_stats_shm_open(fake, &v), -EBADMSG);
  if (geteuid() == 0) { /* a segment owned by someone else */
    ck_assert_int_eq(chown(path, 65534, 65534), 0);
    ck_assert_int_eq(vx_stats_shm_open(getpid(), &v), -EPERM);
    ck_assert_int_eq(chown(path, 0, 0), 0);
  }
  unlink(other);
  ck_assert_int_eq(vx_stats_shm_open(getpid(), &v), 0);
  vx_stats_shm_close(&v);
  vx_stats_shm_destroy();
}
END_TEST

START_TEST(create_stale_and_foreign) {
  char path[64], err[256] = "";
  vx_stats_shm_path(geteuid(), getpid(), path, sizeof path);
  int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600); /* a dead process's leftover */
  ck_assert_int_ge(fd, 0);
  close(fd);
  make(1);
  vx_stats_view_t v;
  ck_assert_int_eq(vx_stats_shm_open(getpid(), &v), 0);
  vx_stats_shm_close(&v);
  vx_stats_shm_destroy();
  if (geteuid() != 0) return;
  fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(fchown(fd, 65534, 65534), 0);
  close(fd);
  ck_assert_ptr_null(vx_stats_shm_create(1, NULL, err, sizeof err));
  ck_assert_ptr_nonnull(strstr(err, "not ours"));
  unlink(path);
}
END_TEST

START_TEST(fork_child_keeps_parent_segment) {
  make(1);
  pid_t pid = fork();
  if (pid == 0) {
    vx_stats_shm_destroy();
    _exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
  vx_stats_view_t v;
  ck_assert_int_eq(vx_stats_shm_open(getpid(), &v), 0);
  vx_stats_shm_close(&v);
  vx_stats_shm_destroy();
}
END_TEST

START_TEST(publish_copies_live_counters) {
  static uint64_t live[3][VX_STATS_NCOUNTERS];
  ck_assert_int_eq(vx_stats_shm_publish(live, 3), 0);
  __atomic_store_n(&live[2][VX_STATS_frees], 99, __ATOMIC_RELAXED);
  vx_stats_view_t v;
  ck_assert_int_eq(vx_stats_shm_open(getpid(), &v), 0);
  ck_assert_int_eq(v.hdr.ndev, 3);
  uint64_t got = 0;
  for (int i = 0; i < 200 && got != 99; i++) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
    got = vx_stats_get(&v, 2, VX_STATS_frees);
  }
  ck_assert_uint_eq(got, 99);
  __atomic_store_n(&live[0][VX_STATS_launches], 5, __ATOMIC_RELAXED);
  vx_stats_shm_destroy(); /* joins, with a last copy */
  ck_assert_uint_eq(vx_stats_get(&v, 0, VX_STATS_launches), 5);
  vx_stats_shm_close(&v);
  ck_assert_int_eq(vx_stats_shm_open(getpid(), &v), -ENOENT);
}
END_TEST

int main(void) {
  Suite *s = suite_create("stats_shm");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, round_trip);
  tcase_add_test(tc, validate_fields);
  tcase_add_test(tc, validate_fuzz);
  tcase_add_test(tc, open_refuses);
  tcase_add_test(tc, create_stale_and_foreign);
  tcase_add_test(tc, fork_child_keeps_parent_segment);
  tcase_add_test(tc, publish_copies_live_counters);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
