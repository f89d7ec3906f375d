/* Unit tests of the executor's extents (tiers/exec_extent.c): where the
 * object behind a pointer into an allocation ends. */
#include <check.h>

#include "vx_check.h"
#include <string.h>

#include "exec_int.h"

#define MIB ((uint64_t)1 << 20)

static ex_alloc_t A;

static void setup(void) {
  memset(&A, 0, sizeof A);
  A.size = 20 * MIB; /* a caching allocator's segment */
}

START_TEST(next_start_bounds_the_object) {
  ex_start_note(&A, 0, 1);
  ex_start_note(&A, 6 * MIB, 2);
  ex_start_note(&A, 10 * MIB, 3);
  ck_assert_uint_eq(ex_start_end(&A, 0, 3), 6 * MIB);
  ck_assert_uint_eq(ex_start_end(&A, 6 * MIB, 3), 10 * MIB);
  ck_assert_uint_eq(ex_start_end(&A, 10 * MIB, 3), 20 * MIB); /* the last: to the end */
}
END_TEST

/* 4 MiB was a block boundary long ago; the tensor first passed at 0 much
 * later spans it (the allocator merged and carved the space again): the
 * old start no longer cuts it short, the next live one does. */
START_TEST(stale_start_no_longer_bounds) {
  ex_start_note(&A, 4 * MIB, 1);
  ex_start_note(&A, 12 * MIB, 1);
  uint64_t t = 1 + 10 * EX_START_RECENT;
  ex_start_note(&A, 12 * MIB, t - 1); /* its neighbour, still in use */
  ex_start_note(&A, 0, t);
  ck_assert_uint_eq(ex_start_end(&A, 0, t), 12 * MIB);
  /* passed again, 4 MiB is a live neighbour again */
  ex_start_note(&A, 4 * MIB, t + 1);
  ck_assert_uint_eq(ex_start_end(&A, 0, t + 1 + 10 * EX_START_RECENT), 4 * MIB);
}
END_TEST

/* A start passed after the object was last seen before bounds it however
 * long ago that was: the two coexisted. */
START_TEST(start_passed_since_bounds) {
  ex_start_note(&A, 0, 100);
  ex_start_note(&A, 8 * MIB, 101);
  ck_assert_uint_eq(ex_start_end(&A, 0, 100 + 50 * EX_START_RECENT), 8 * MIB);
}
END_TEST

/* A start passed just before the object first appeared bounds it. */
START_TEST(recent_start_bounds) {
  uint64_t t = 10 * EX_START_RECENT;
  ex_start_note(&A, 8 * MIB, t - EX_START_RECENT);
  ex_start_note(&A, 0, t);
  ck_assert_uint_eq(ex_start_end(&A, 0, t), 8 * MIB);
  ck_assert_uint_eq(ex_start_end(&A, 0, t + 1), 20 * MIB); /* one call later it is stale */
}
END_TEST

/* A full table gives up the least recently passed start, and the others
 * keep their sightings. */
START_TEST(full_table_drops_the_oldest) {
  for (uint32_t k = 0; k < EX_STARTS; k++)
    ex_start_note(&A, (uint64_t)k * 256 * 1024, 1 + k);
  ck_assert_uint_eq(A.nstarts, EX_STARTS);
  ex_start_note(&A, 19 * MIB, 1000); /* drops offset 0, passed at 1 */
  ck_assert_uint_eq(A.nstarts, EX_STARTS);
  ck_assert_uint_eq(A.starts[0], 256 * 1024);
  ck_assert_uint_eq(A.prev[0], 2);
  ck_assert_uint_eq(A.starts[EX_STARTS - 1], 19 * MIB);
  ck_assert_uint_eq(A.prev[EX_STARTS - 1], 1000);
  /* 256 KiB was first passed at 2 and 512 KiB at 3, after it: it bounds */
  ck_assert_uint_eq(ex_start_end(&A, 256 * 1024, 1000), 512 * 1024);
}
END_TEST

/* A caching allocator gives offset 0 to a new, bigger tensor each
 * iteration; 8 MiB was a neighbour of the first one only.  Seen between two
 * uses of the offset it bounds the object there; once the offset has been
 * passed again with no sight of 8 MiB in between, it no longer does. */
START_TEST(start_older_than_the_previous_use_no_longer_bounds) {
  uint64_t t = 100, gap = 20 * EX_START_RECENT;
  ex_start_note(&A, 0, t);
  ex_start_note(&A, 8 * MIB, t + 1);
  ex_start_note(&A, 0, t + gap);
  ck_assert_uint_eq(ex_start_end(&A, 0, t + gap), 8 * MIB); /* passed since the last use */
  ex_start_note(&A, 0, t + 2 * gap);
  ck_assert_uint_eq(ex_start_end(&A, 0, t + 2 * gap), 20 * MIB);
  ex_start_note(&A, 0, t + 2 * gap); /* twice in one launch: still one pass */
  ck_assert_uint_eq(ex_start_end(&A, 0, t + 2 * gap), 20 * MIB);
  ex_start_note(&A, 8 * MIB, t + 2 * gap + 1); /* seen again: it bounds again */
  ex_start_note(&A, 0, t + 3 * gap);
  ck_assert_uint_eq(ex_start_end(&A, 0, t + 3 * gap), 8 * MIB);
}
END_TEST

int main(void) {
  Suite *s = suite_create("exec_extent");
  TCase *tc = tcase_create("exec_extent");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_add_test(tc, next_start_bounds_the_object);
  tcase_add_test(tc, stale_start_no_longer_bounds);
  tcase_add_test(tc, start_passed_since_bounds);
  tcase_add_test(tc, recent_start_bounds);
  tcase_add_test(tc, full_table_drops_the_oldest);
  tcase_add_test(tc, start_older_than_the_previous_use_no_longer_bounds);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
