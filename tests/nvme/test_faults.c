/* Injected faults on one engine (argv[1]: uring|pool), through the seam:
 * EIO, short and ENOSPC on writes and reads, failed submits, full disks and
 * corrupted slots.  Nothing is lost: a failed spill leaves the data with the
 * caller, a failed restore delivers nothing. */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define CH 16384u
#define N 8

static nvme_engine_t engine;
static char *dir;
static nvme_swap_t *sw;
static uint8_t src[N][CH], dst[N][CH];
static nvme_chunk_t c[N];

static void setup(void) {
  dir = tu_mkdtemp();
  nvme_config_t cfg = {.dir = dir,
                       .engine = engine,
                       .chunk = CH,
                       .limit = 64 * CH,
                       .qd = 4,
                       .grow_step = 4 * CH,
                       .log = tu_log};
  ck_assert_int_eq(nvme_swap_open(&cfg, &sw), 0);
  for (int i = 0; i < N; i++) {
    for (unsigned k = 0; k < CH; k++)
      src[i][k] = (uint8_t)(k * 31 + (unsigned)i * 7 + 1);
    c[i] = (nvme_chunk_t){.key = (uint64_t)i, .arg = src[i], .len = CH - 8 * (uint32_t)i};
  }
  memset(dst, 0xEE, sizeof dst);
  __atomic_store_n(&tu_drains, 0, __ATOMIC_RELAXED);
}

/* Still the 0xEE setup() wrote: nothing was delivered there. */
static int untouched(const uint8_t *d) {
  for (unsigned k = 0; k < CH; k++)
    if (d[k] != 0xEE) return 0;
  return 1;
}

static void teardown(void) {
  tu_fault_off();
  nvme_swap_close(sw);
  sw = NULL;
  ck_assert_int_eq(tu_dir_entries(dir), 0);
  tu_rmdir(dir);
  dir = NULL;
}

static nvme_stats_t stats(void) {
  nvme_stats_t st;
  nvme_stats_get(sw, &st);
  return st;
}

static uint32_t slots_used(void) {
  nvme_info_t info;
  nvme_swap_info(sw, &info);
  return info.slots_used;
}

static void spill_all_ok(void) {
  ck_assert_int_eq(nvme_spill(sw, c, N, tu_fill, NULL), 0);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(c[i].status, 0);
}

/* Restores every chunk into dst and checks it byte for byte. */
static void restore_all_ok(void) {
  for (int i = 0; i < N; i++)
    c[i].arg = dst[i];
  ck_assert_int_eq(nvme_restore(sw, c, N, tu_drain, NULL), 0);
  for (int i = 0; i < N; i++)
    ck_assert_msg(!memcmp(src[i], dst[i], c[i].len), "chunk %d differs", i);
}

// ---- spill ----

START_TEST(write_eio_transient) {
  tu_fault_arm(TU_WRITE, TU_ERR, EIO, 3, 1);
  spill_all_ok();
  ck_assert_int_eq(tu_fault.hits, 1);
  ck_assert_uint_eq(stats().retries, 1);
  tu_fault_off();
  restore_all_ok();
}
END_TEST

static void write_persistent(int mode, int err, int expect) {
  tu_fault_arm(TU_WRITE, mode, err, 3, -1); /* two writes succeed, then none */
  ck_assert_int_eq(nvme_spill(sw, c, N, tu_fill, NULL), expect);
  int ok = 0;
  uint64_t held = 0;
  for (int i = 0; i < N; i++) {
    ck_assert(c[i].status == 0 || c[i].status == expect);
    ck_assert_int_eq(c[i].slot >= 0, c[i].status == 0);
    ok += c[i].status == 0;
    held += c[i].status == 0 ? c[i].len : 0;
  }
  ck_assert_int_eq(ok, 2);
  nvme_stats_t st = stats();
  ck_assert_uint_eq(st.write_failures, N - 2);
  ck_assert_uint_eq(st.bytes, held);
  ck_assert_uint_eq(slots_used(), 2); /* failed chunks gave their slots back */
  int tries = expect == -ENOSPC ? 1 : 1 + NVME_RETRIES;
  ck_assert_uint_eq(st.retries, (uint64_t)(N - 2) * (tries - 1));
  ck_assert_int_eq(tu_fault.hits, (N - 2) * tries);
  tu_fault_off();
  /* the caller still has the data: spill the failed ones again */
  nvme_chunk_t again[N];
  int n = 0;
  for (int i = 0; i < N; i++)
    if (c[i].status) again[n++] = c[i];
  ck_assert_int_eq(nvme_spill(sw, again, (size_t)n, tu_fill, NULL), 0);
  for (int i = 0, k = 0; i < N; i++)
    if (c[i].status) c[i] = again[k++];
  restore_all_ok();
}

START_TEST(write_eio_persistent) {
  write_persistent(TU_ERR, EIO, -EIO);
}
END_TEST

START_TEST(write_short_persistent) {
  write_persistent(TU_SHORT, 0, -EIO);
}
END_TEST

START_TEST(write_enospc) {
  write_persistent(TU_ERR, ENOSPC, -ENOSPC);
}
END_TEST

START_TEST(write_short_transient) {
  tu_fault_arm(TU_WRITE, TU_SHORT, 0, 1, 2);
  spill_all_ok();
  ck_assert_uint_eq(stats().retries, 2);
  tu_fault_off();
  restore_all_ok();
}
END_TEST

static int falloc_enospc(int fd, int mode, off_t off, off_t len) {
  (void)fd, (void)mode, (void)off, (void)len;
  errno = ENOSPC;
  return -1;
}

START_TEST(disk_full) {
  nvme_sys.fallocate = falloc_enospc;
  ck_assert_int_eq(nvme_spill(sw, c, N, tu_fill, NULL), -ENOSPC);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(c[i].status, -ENOSPC);
    ck_assert_int_eq(c[i].slot, -1);
  }
  nvme_stats_t st = stats();
  ck_assert_uint_eq(st.enospc, N);
  ck_assert_uint_eq(st.file_bytes, 0);
  ck_assert_int_eq(tu_log_count > 0, 1);
  ck_assert_ptr_nonnull(strstr(tu_log_last, "host RAM"));
  nvme_sys_reset();
  spill_all_ok();
  restore_all_ok();
}
END_TEST

static int falloc_one_slot(int fd, int mode, off_t off, off_t len) {
  if (len > (off_t)CH) {
    errno = ENOSPC;
    return -1;
  }
  return fallocate(fd, mode, off, len);
}

START_TEST(disk_nearly_full) {
  nvme_sys.fallocate = falloc_one_slot; /* the 4-slot step fails, one slot fits */
  spill_all_ok();
  ck_assert_uint_eq(stats().file_bytes, (uint64_t)N * CH);
  restore_all_ok();
}
END_TEST

// ---- restore ----

START_TEST(read_eio_transient) {
  spill_all_ok();
  tu_fault_arm(TU_READ, TU_ERR, EIO, 2, 1);
  restore_all_ok();
  ck_assert_uint_eq(stats().retries, 1);
}
END_TEST

static void read_persistent(int mode) {
  spill_all_ok();
  tu_fault_arm(TU_READ, mode, EIO, 1, -1);
  for (int i = 0; i < N; i++)
    c[i].arg = dst[i];
  ck_assert_int_eq(nvme_restore(sw, c, N, tu_drain, NULL), -EIO);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(c[i].status, -EIO);
    /* nothing delivered: not stale, not zeroed */
    ck_assert_msg(untouched(dst[i]), "chunk %d was written to", i);
  }
  ck_assert_int_eq(tu_drains, 0);
  nvme_stats_t st = stats();
  ck_assert_uint_eq(st.read_failures, N);
  ck_assert_uint_eq(st.read_bytes, 0);
  ck_assert_uint_eq(st.retries, (uint64_t)N * NVME_RETRIES);
  ck_assert_uint_eq(slots_used(), N); /* the data is still on the swap */
  tu_fault_off();
  restore_all_ok();
}

START_TEST(read_eio_persistent) {
  read_persistent(TU_ERR);
}
END_TEST

START_TEST(read_short_persistent) {
  read_persistent(TU_SHORT);
}
END_TEST

/* Flips one byte of a slot on disk, behind nvme's back. */
static void corrupt(int32_t slot, uint32_t at) {
  char link[512];
  int fd = tu_find_fd(getpid(), dir, link, sizeof link);
  ck_assert_int_ge(fd, 0);
  void *b;
  ck_assert_int_eq(posix_memalign(&b, 4096, 4096), 0);
  off_t off = (off_t)slot * CH + (at & ~4095u);
  ck_assert_int_eq(pread(fd, b, 4096, off), 4096);
  ((uint8_t *)b)[at & 4095u] ^= 0x01;
  ck_assert_int_eq(pwrite(fd, b, 4096, off), 4096);
  free(b);
}

START_TEST(checksum_mismatch) {
  spill_all_ok();
  corrupt(c[5].slot, 777);
  for (int i = 0; i < N; i++)
    c[i].arg = dst[i];
  ck_assert_int_eq(nvme_restore(sw, c, N, tu_drain, NULL), -EBADMSG);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(c[i].status, i == 5 ? -EBADMSG : 0);
    if (i != 5) ck_assert_int_eq(memcmp(src[i], dst[i], c[i].len), 0);
  }
  ck_assert(untouched(dst[5]));
  ck_assert_int_eq(tu_drains, N - 1);
  nvme_stats_t st = stats();
  ck_assert_uint_eq(st.checksum_failures, 1);
  ck_assert_uint_eq(st.read_failures, 1);
}
END_TEST

// ---- io_uring submission ----

START_TEST(submit_fails_once) {
  tu_fault_arm(TU_SUBMIT, TU_ERR, EAGAIN, 2, 1);
  spill_all_ok();
  ck_assert_int_eq(tu_fault.hits, 1);
  ck_assert_uint_eq(stats().retries, 1);
  tu_fault_off();
  restore_all_ok();
}
END_TEST

START_TEST(submit_fails_always) {
  tu_fault_arm(TU_SUBMIT, TU_ERR, EBUSY, 1, -1);
  ck_assert_int_eq(nvme_spill(sw, c, N, tu_fill, NULL), -EBUSY);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(c[i].status, -EBUSY);
    ck_assert_int_eq(c[i].slot, -1);
  }
  ck_assert_uint_eq(slots_used(), 0);
  ck_assert_uint_eq(stats().write_failures, N);
  ck_assert_uint_ge(stats().retries, (uint64_t)N * NVME_RETRIES);
  tu_fault_off();
  /* the requests that never went out must not write later: reuse the slots */
  for (int i = 0; i < N; i++)
    c[i].arg = src[N - 1 - i], c[i].len = CH - 8 * (uint32_t)(N - 1 - i);
  spill_all_ok();
  for (int i = 0; i < N; i++)
    c[i].arg = dst[i];
  ck_assert_int_eq(nvme_restore(sw, c, N, tu_drain, NULL), 0);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(memcmp(src[N - 1 - i], dst[i], c[i].len), 0);
}
END_TEST

int main(int argc, char **argv) {
  engine = tu_engine_arg(argc, argv);
  Suite *s = suite_create(engine == NVME_ENGINE_URING ? "nvme_faults_uring" : "nvme_faults_pool");
  TCase *tc = tcase_create("faults");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, write_eio_transient);
  tcase_add_test(tc, write_eio_persistent);
  tcase_add_test(tc, write_short_persistent);
  tcase_add_test(tc, write_enospc);
  tcase_add_test(tc, write_short_transient);
  tcase_add_test(tc, disk_full);
  tcase_add_test(tc, disk_nearly_full);
  tcase_add_test(tc, read_eio_transient);
  tcase_add_test(tc, read_eio_persistent);
  tcase_add_test(tc, read_short_persistent);
  tcase_add_test(tc, checksum_mismatch);
  if (engine == NVME_ENGINE_URING) {
    tcase_add_test(tc, submit_fails_once);
    tcase_add_test(tc, submit_fails_always);
  }
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
