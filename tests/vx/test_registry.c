/* Unit tests of the allocation registry (chunk index lookups against a
 * brute-force model) and of the saturating per-device counters. */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <stdlib.h>

#include "ctr.h"
#include "registry.h"

#define MB (1ULL << 20)

START_TEST(interior_lookup) {
  /* one 7 MiB allocation straddling chunks, and small ones sharing a chunk */
  vx_alloc_info_t big = {
      .base = 0x7f0000100000ULL, .size = 7 * MB, .dev = 1, .tier = VX_TIER_MANAGED};
  ck_assert_int_eq(reg_add(&big), 0);
  ck_assert_int_eq(reg_add(&big), -EEXIST);
  for (int i = 0; i < 64; i++) {
    vx_alloc_info_t s = {.base = 0x7e0000000000ULL + (CUdeviceptr)i * 4096, .size = 4000, .dev = 0};
    ck_assert_int_eq(reg_add(&s), 0);
  }
  vx_alloc_info_t got;
  for (CUdeviceptr off = 0; off < 7 * MB; off += 65536 + 1) {
    ck_assert_int_eq(reg_lookup(big.base + off, &got), 0);
    ck_assert_uint_eq(got.base, big.base);
    ck_assert_int_eq(got.dev, 1);
  }
  ck_assert_int_eq(reg_lookup(big.base + 7 * MB - 1, &got), 0);
  ck_assert_int_eq(reg_lookup(big.base + 7 * MB, &got), -ENOENT);
  ck_assert_int_eq(reg_lookup(big.base - 1, &got), -ENOENT);
  ck_assert_int_eq(reg_lookup(0x7e0000000000ULL + 5 * 4096 + 3999, &got), 0);
  ck_assert_uint_eq(got.base, 0x7e0000000000ULL + 5 * 4096);
  ck_assert_int_eq(reg_lookup(0x7e0000000000ULL + 5 * 4096 + 4000, &got), -ENOENT); /* gap */
  ck_assert_uint_eq(reg_count(), 65);
  CUdeviceptr many[3] = {big.base + 3 * MB, 0x10, 0x7e0000000000ULL + 63 * 4096 + 1};
  vx_alloc_info_t outs[3];
  int found[3];
  ck_assert_int_eq(reg_lookup_many(many, 3, outs, found), 2);
  ck_assert(found[0] && !found[1] && found[2]);
  ck_assert_uint_eq(outs[0].base, big.base);
  ck_assert_uint_eq(outs[2].base, 0x7e0000000000ULL + 63 * 4096);
  ck_assert_int_eq(reg_remove(big.base, &got), 0);
  ck_assert_uint_eq(got.size, 7 * MB);
  ck_assert_int_eq(reg_remove(big.base, &got), -ENOENT);
  ck_assert_int_eq(reg_lookup(big.base + MB, &got), -ENOENT);
  for (int i = 0; i < 64; i++)
    ck_assert_int_eq(reg_remove(0x7e0000000000ULL + (CUdeviceptr)i * 4096, NULL), 0);
  ck_assert_uint_eq(reg_count(), 0);
}
END_TEST

/* Random disjoint allocations in a 256 MiB window against a page model. */
START_TEST(random_model) {
  enum { PAGES = 65536, N = 400 };
  static int owner[PAGES]; /* page (4 KiB) -> allocation index + 1 */
  static vx_alloc_info_t a[N];
  const CUdeviceptr base0 = 0x200000000000ULL;
  srand(7);
  int live = 0;
  for (int round = 0; round < 4000; round++) {
    int i = rand() % N;
    if (a[i].size) {
      ck_assert_int_eq(reg_remove(a[i].base, NULL), 0);
      for (CUdeviceptr p = (a[i].base - base0) / 4096; p < (a[i].base - base0 + a[i].size) / 4096;
           p++)
        owner[p] = 0;
      a[i].size = 0;
      live--;
      continue;
    }
    int first = rand() % PAGES, n = 1 + (rand() % 8 ? rand() % 16 : rand() % 2048);
    if (first + n > PAGES) continue;
    int free_run = 1;
    for (int p = first; p < first + n && free_run; p++)
      free_run = !owner[p];
    if (!free_run) continue;
    a[i] = (vx_alloc_info_t){
        .base = base0 + (CUdeviceptr)first * 4096, .size = (size_t)n * 4096, .dev = i};
    ck_assert_int_eq(reg_add(&a[i]), 0);
    for (int p = first; p < first + n; p++)
      owner[p] = i + 1;
    live++;
    for (int probe = 0; probe < 8; probe++) {
      int p = rand() % PAGES;
      vx_alloc_info_t got;
      int rc = reg_lookup(base0 + (CUdeviceptr)p * 4096 + (CUdeviceptr)(rand() % 4096), &got);
      if (owner[p]) {
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(got.dev, owner[p] - 1);
      } else {
        ck_assert_int_eq(rc, -ENOENT);
      }
    }
  }
  ck_assert_uint_eq(reg_count(), (size_t)live);
  for (int i = 0; i < N; i++)
    if (a[i].size) ck_assert_int_eq(reg_remove(a[i].base, NULL), 0);
  ck_assert_uint_eq(reg_count(), 0);
}
END_TEST

START_TEST(counters_saturate) {
  ctr_cur_add(2, VX_CTR_native_bytes, 100);
  ctr_cur_add(2, VX_CTR_native_bytes, 50);
  ctr_cur_sub(2, VX_CTR_native_bytes, 120);
  ck_assert_uint_eq(vx_ctr[2].native_bytes, 30);
  ck_assert_uint_eq(vx_ctr[2].native_bytes_peak, 150);
  ck_assert_uint_eq(vx_ctr[2].underflows, 0);
  ctr_cur_sub(2, VX_CTR_native_bytes, 31);
  ck_assert_uint_eq(vx_ctr[2].native_bytes, 0);
  ck_assert_uint_eq(vx_ctr[2].underflows, 1);
  ck_assert_int_ge(ctr_devices(), 3);
  ck_assert_int_eq(vx_counter_peak_of(VX_CTR_managed_bytes), VX_CTR_managed_bytes_peak);
  ck_assert_int_eq(vx_counter_peak_of(VX_CTR_frees), -1);
  ctr_add(99, VX_CTR_frees, 1); /* out-of-range ordinals land in slot 0 */
  ck_assert_uint_eq(vx_ctr[0].frees, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("registry");
  TCase *tc = tcase_create("registry");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, interior_lookup);
  tcase_add_test(tc, random_model);
  tcase_add_test(tc, counters_saturate);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
