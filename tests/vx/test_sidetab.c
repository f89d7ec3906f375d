/* Unit tests of the side table (tiers/sidetab.c) when uthash's own
 * allocations fail: -ENOMEM, the table unchanged, never exit(). */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <stdlib.h>

#include "sidetab.h"
#include "sidetab_failalloc.h"

/* uthash allocations left before one fails (-1 = never). */
static long uthash_budget = -1;
static long uthash_calls;

void *vxt_uthash_malloc(size_t n) {
  uthash_calls++;
  if (uthash_budget == 0) return NULL;
  if (uthash_budget > 0) uthash_budget--;
  return malloc(n);
}

static void expect_entry(sidetab_t *t, uint64_t key, size_t size, int dev) {
  size_t s = 0;
  int d = -1;
  ck_assert_int_eq(sidetab_remove(t, key, &s, &d), 0);
  ck_assert_uint_eq(s, size);
  ck_assert_int_eq(d, dev);
}

START_TEST(first_add_table_oom) {
  /* The first add allocates the table: when that fails the add reports
   * -ENOMEM (before the fix uthash called exit(-1)) and nothing is kept. */
  sidetab_t t = SIDETAB_INIT(VX_RANK_VMM);
  size_t s;
  int d;
  uthash_budget = 0;
  ck_assert_int_eq(sidetab_add(&t, 42, 100, 1), -ENOMEM);
  ck_assert_ptr_null(t.head);
  ck_assert_int_eq(sidetab_remove(&t, 42, &s, &d), -ENOENT);
  uthash_budget = -1;
  ck_assert_int_eq(sidetab_add(&t, 42, 100, 1), 0);
  ck_assert_int_eq(sidetab_add(&t, 42, 7, 0), -EEXIST);
  expect_entry(&t, 42, 100, 1);
  ck_assert_ptr_null(t.head);
}
END_TEST

START_TEST(expand_oom_keeps_table) {
  /* Growing the bucket array fails half-way through many adds: the failed
   * key is absent, every earlier key is still there with its values. */
  sidetab_t t = SIDETAB_INIT(VX_RANK_VMM);
  enum { N = 2000 };
  uthash_budget = -1;
  uthash_calls = 0;
  int failed_at = -1;
  for (int i = 0; i < N; i++) {
    if (uthash_calls > 0 && uthash_budget < 0) uthash_budget = 0; /* after the table exists */
    int rc = sidetab_add(&t, (uint64_t)i * 4096, (size_t)i + 1, i % 3);
    if (rc) {
      ck_assert_int_eq(rc, -ENOMEM);
      failed_at = i;
      break;
    }
  }
  ck_assert_int_gt(failed_at, 0); /* a bucket expansion was attempted and failed */
  size_t s;
  int d;
  ck_assert_int_eq(sidetab_remove(&t, (uint64_t)failed_at * 4096, &s, &d), -ENOENT);
  uthash_budget = -1;
  ck_assert_int_eq(sidetab_add(&t, (uint64_t)failed_at * 4096, 5, 2), 0);
  expect_entry(&t, (uint64_t)failed_at * 4096, 5, 2);
  for (int i = 0; i < failed_at; i++)
    expect_entry(&t, (uint64_t)i * 4096, (size_t)i + 1, i % 3);
  ck_assert_ptr_null(t.head);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sidetab");
  TCase *tc = tcase_create("oom");
  tcase_add_test(tc, first_add_table_oom);
  tcase_add_test(tc, expand_oom_keeps_table);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
