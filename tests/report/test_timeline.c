/* test_timeline: the timeline ring alone (obs/timeline.c with the live
 * counters): sums over devices, bounded size, halving with a doubled period. */
#include <check.h>

#include "vx_check.h"
#include <string.h>

#include "ctr.h"
#include "timeline.h"
#include "options.h"

/* vx_opt (core/state.c), the library's options, is set by hand here */

static tl_sample_t got[TL_MAX_SAMPLES];

START_TEST(inactive_without_report) {
  timeline_sample(); /* no VX_REPORT: no thread, no samples */
  ck_assert_int_eq(timeline_init(), 0);
  timeline_sample();
  timeline_fini();
  ck_assert_uint_eq(timeline_copy(got, TL_MAX_SAMPLES), 0);
}
END_TEST

/* native + managed + host + nvme == live, whatever the counters say
 * (they are read one by one while they move: they need not agree). */
START_TEST(a_partition) {
  static const uint64_t v[] = {0, 1, 3, 4, 7, 1000, 1ull << 40};
  for (size_t a = 0; a < 7; a++)
    for (size_t b = 0; b < 7; b++)
      for (size_t c = 0; c < 7; c++)
        for (size_t d = 0; d < 7; d++) {
          tl_sample_t s = {0};
          timeline_partition(&s, v[a], v[b % 3], v[c], v[d], v[(a + b) % 7], v[(c + d) % 7],
                             v[(a + c) % 7]);
          ck_assert_uint_eq(s.native + s.managed + s.host + s.nvme, s.live);
          ck_assert_uint_eq(s.native, v[a] + v[b % 3]);
          ck_assert_uint_le(s.nvme, v[c] + v[d]);
          ck_assert_uint_le(s.host + s.nvme, v[c] + v[d]);
        }
  tl_sample_t s = {0}; /* the static tier only, nothing spilled: all its bytes on the host */
  timeline_partition(&s, 8, 0, 5, 6, 2, 0, 0);
  ck_assert_uint_eq(s.host, 6);
  ck_assert_uint_eq(s.managed, 7); /* vx's managed 5 and the program's own 2 */
}
END_TEST

START_TEST(sums_devices_and_stays_bounded) {
  strcpy(vx_opt.REPORT.s, "unused.json");
  ctr_cur_add(0, VX_CTR_native_bytes, 10);
  ctr_cur_add(1, VX_CTR_native_bytes, 5);
  ctr_cur_add(1, VX_CTR_managed_bytes, 7);
  ctr_cur_add(0, VX_CTR_host_tier_bytes, 3);
  ctr_cur_add(1, VX_CTR_host_held_bytes, 4);
  ctr_cur_add(0, VX_CTR_nvme_bytes, 9);
  ctr_add(1, VX_CTR_bytes_down, 2);
  ck_assert_int_eq(timeline_init(), 0);
  ck_assert_uint_eq(timeline_copy(got, TL_MAX_SAMPLES), 1);
  tl_sample_t s = got[0];
  ck_assert(s.t >= 0 && s.t < 1);
  /* live 25 (native 15, movable 7 + 3); the swap holds 9 of the movable
   * 10, so only 1 can be on the host, and nothing is left "managed" */
  ck_assert_uint_eq(s.live, 25);
  ck_assert_uint_eq(s.native, 15);
  ck_assert_uint_eq(s.nvme, 9);
  ck_assert_uint_eq(s.host, 1);
  ck_assert_uint_eq(s.managed, 0);
  ck_assert_uint_eq(s.up, 0);
  ck_assert_uint_eq(s.down, 2);
  ck_assert_uint_eq(timeline_period_ms(), TL_FIRST_PERIOD_MS);
  /* 5000 more samples (the sampler thread may add a few): one halving */
  for (int i = 1; i <= 5000; i++) {
    ctr_add(0, VX_CTR_bytes_up, 1);
    timeline_sample();
  }
  size_t n = timeline_copy(got, TL_MAX_SAMPLES);
  ck_assert_uint_gt(n, TL_MAX_SAMPLES / 2);
  ck_assert_uint_le(n, TL_MAX_SAMPLES);
  ck_assert_uint_eq(timeline_period_ms(), 2 * TL_FIRST_PERIOD_MS);
  ck_assert_uint_eq(got[0].up, 0); /* the first sample survives halving */
  for (size_t i = 1; i < n; i++) {
    ck_assert(got[i].t >= got[i - 1].t);
    ck_assert_uint_ge(got[i].up, got[i - 1].up);
  }
  ck_assert_uint_eq(got[n - 1].up, 5000); /* the newest is kept */
  ck_assert_uint_lt(got[TL_MAX_SAMPLES / 4].up, 2 * (TL_MAX_SAMPLES / 4) + 8); /* every other */
  ck_assert_uint_ge(got[TL_MAX_SAMPLES / 4].up, 2 * (TL_MAX_SAMPLES / 4) - 8);
  ctr_cur_sub(0, VX_CTR_native_bytes, 10);
  timeline_fini(); /* joins the sampler, then one last sample */
  timeline_fini();
  size_t m = timeline_copy(got, TL_MAX_SAMPLES); /* the sampler may have added some */
  ck_assert_uint_ge(m, n + 1);
  ck_assert_uint_le(m, TL_MAX_SAMPLES);
  ck_assert_uint_eq(got[m - 1].native, 5);
  ck_assert_uint_eq(got[n - 1].native, 15);
}
END_TEST

int main(void) {
  Suite *s = suite_create("timeline");
  TCase *tc = tcase_create("ring");
  /* one process, in this order: the state is the library's globals */
  tcase_add_test(tc, inactive_without_report);
  tcase_add_test(tc, sums_devices_and_stays_bounded);
  tcase_add_test(tc, a_partition);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 0);
}
