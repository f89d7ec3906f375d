/* test_exec_time.c: the executor's timings (tiers/exec_time.c) over fake
 * event calls: a timed launch's duration reaches the allocations it was
 * timed for, in launch order, only once its end event has completed; a
 * launch whose end is never recorded is dropped; the link's rate is the
 * median of the timed prefetches, so one that moved nothing (its chunks
 * were on the device already) or waited behind other transfers does not
 * make it; driver errors drop samples instead of failing. */
#include <check.h>

#include "vx_check.h"
#include <stdint.h>
#include <string.h>

#include "driver.h"
#include "exec_int.h"

/* Fake events: each has a time (ms) once recorded; `done` says which have
 * completed.  The time a record gets is the next value of `clock_ms`. */
#define NEV 256
static float ev_time[NEV];
static int ev_done[NEV], ev_recorded[NEV], nev, fail_create, fail_record;
static float clock_ms;

static int idx(CUevent e) {
  return (int)(intptr_t)e - 1;
}

static CUresult fake_create(CUevent *e, unsigned int flags) {
  ck_assert_uint_eq(flags, CU_EVENT_DEFAULT); /* timing events */
  if (fail_create || nev == NEV) return CUDA_ERROR_OUT_OF_MEMORY;
  *e = (CUevent)(intptr_t)(++nev);
  return CUDA_SUCCESS;
}

static CUresult fake_record(CUevent e, CUstream s) {
  (void)s;
  if (fail_record) return CUDA_ERROR_INVALID_HANDLE;
  ev_time[idx(e)] = clock_ms;
  ev_recorded[idx(e)] = 1;
  ev_done[idx(e)] = 0;
  return CUDA_SUCCESS;
}

static CUresult fake_query(CUevent e) {
  return ev_done[idx(e)] ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult fake_elapsed(float *ms, CUevent a, CUevent b) {
  if (!ev_recorded[idx(a)] || !ev_recorded[idx(b)]) return CUDA_ERROR_INVALID_HANDLE;
  *ms = ev_time[idx(b)] - ev_time[idx(a)];
  return CUDA_SUCCESS;
}

static ex_time_t T;

static void setup(void) {
  memset(ev_time, 0, sizeof ev_time), memset(ev_done, 0, sizeof ev_done);
  memset(ev_recorded, 0, sizeof ev_recorded);
  nev = fail_create = fail_record = 0;
  clock_ms = 0;
  vx_real_v[VX_ID_cuEventCreate] = (void *)fake_create;
  vx_real_v[VX_ID_cuEventRecord] = (void *)fake_record;
  vx_real_v[VX_ID_cuEventQuery] = (void *)fake_query;
  vx_real_v[VX_ID_cuEventElapsedTime] = (void *)fake_elapsed;
  ex_time_reset(&T);
}

/* A launch timed from clock a to clock b (ms); returns its slot. */
static int timed(float a, float b, const uint64_t *ids, int n) {
  clock_ms = a;
  int slot = ex_time_launch_begin(&T, NULL, ids, n);
  clock_ms = b;
  ex_time_launch_end(&T, slot, NULL, 1);
  return slot;
}

static void complete_all(void) {
  for (int i = 0; i < nev; i++)
    ev_done[i] = ev_recorded[i];
}

START_TEST(launch_durations_in_order_once_done) {
  setup();
  ex_ktres_t r[EX_KT_RING];
  uint64_t ids1[2] = {7, 9}, ids2[1] = {9};
  ck_assert_int_gt(timed(0, 2.5f, ids1, 2), 0);
  ck_assert_int_gt(timed(3, 3.25f, ids2, 1), 0);
  ck_assert_int_eq(ex_time_harvest(&T, r, EX_KT_RING), 0); /* nothing has run */
  ev_done[1] = 1;                                           /* the first's end */
  ck_assert_int_eq(ex_time_harvest(&T, r, EX_KT_RING), 1);
  ck_assert_uint_eq(r[0].nid, 2);
  ck_assert_uint_eq(r[0].id[0], 7);
  ck_assert_uint_eq(r[0].id[1], 9);
  ck_assert_uint_eq(r[0].ns, 2500000);
  complete_all();
  ck_assert_int_eq(ex_time_harvest(&T, r, EX_KT_RING), 1);
  ck_assert_uint_eq(r[0].ns, 250000);
  ck_assert_uint_eq(T.kn, 0);
}
END_TEST

/* The first slot's end comes later than the second's: the FIFO waits. */
START_TEST(later_results_wait_for_earlier) {
  setup();
  ex_ktres_t r[EX_KT_RING];
  uint64_t id = 3;
  timed(0, 1, &id, 1);
  timed(1, 3, &id, 1);
  ev_done[3] = 1; /* the second launch's end only */
  ck_assert_int_eq(ex_time_harvest(&T, r, EX_KT_RING), 0);
  ev_done[1] = 1;
  ck_assert_int_eq(ex_time_harvest(&T, r, EX_KT_RING), 2);
  ck_assert_uint_eq(r[0].ns, 1000000);
  ck_assert_uint_eq(r[1].ns, 2000000);
}
END_TEST

/* A launch not made (its end never recorded) or not enqueued is dropped
 * and does not hold up the ones after it; a full ring times nothing more. */
START_TEST(dropped_launches_and_a_full_ring) {
  setup();
  ex_ktres_t r[EX_KT_RING];
  uint64_t id = 5;
  clock_ms = 0;
  int s = ex_time_launch_begin(&T, NULL, &id, 1);
  ex_time_launch_end(&T, s, NULL, 0); /* the launch failed */
  timed(1, 2, &id, 1);
  complete_all();
  ck_assert_int_eq(ex_time_harvest(&T, r, EX_KT_RING), 1);
  ck_assert_uint_eq(r[0].ns, 1000000);
  for (int i = 0; i < EX_KT_RING; i++)
    ck_assert_int_gt(timed(0, 1, &id, 1), 0);
  ck_assert_int_eq(ex_time_launch_begin(&T, NULL, &id, 1), 0);
  ck_assert_int_eq(ex_time_launch_begin(&T, NULL, &id, 0), 0); /* for nothing: not timed */
  complete_all();
  ck_assert_int_eq(ex_time_harvest(&T, r, EX_KT_RING), EX_KT_RING);
  ck_assert_int_gt(ex_time_launch_begin(&T, NULL, &id, 1), 0); /* room again */
}
END_TEST

/* Driver errors: no timing, no failure; an error on the query side drops
 * the sample. */
START_TEST(driver_errors_drop_samples) {
  setup();
  ex_ktres_t r[EX_KT_RING];
  uint64_t id = 5;
  fail_create = 1;
  ck_assert_int_eq(ex_time_launch_begin(&T, NULL, &id, 1), 0);
  ck_assert_int_eq(ex_time_link_begin(&T, NULL, 8u << 20), 0);
  fail_create = 0;
  fail_record = 1;
  ck_assert_int_eq(ex_time_launch_begin(&T, NULL, &id, 1), 0);
  fail_record = 0;
  int s = timed(0, 1, &id, 1);
  ck_assert_int_gt(s, 0);
  vx_real_v[VX_ID_cuEventElapsedTime] = NULL; /* an old driver's table */
  complete_all();
  ck_assert_int_eq(ex_time_harvest(&T, r, EX_KT_RING), 0);
  ck_assert_uint_eq(T.kn, 0);
}
END_TEST

/* A timed prefetch of `mib` MiB taking `ms`. */
static void link_sample(unsigned mib, float ms) {
  clock_ms = 0;
  int s = ex_time_link_begin(&T, NULL, (uint64_t)mib << 20);
  ck_assert_int_gt(s, 0);
  clock_ms = ms;
  ex_time_link_end(&T, s, NULL, 1);
  complete_all();
  ex_ktres_t r[1];
  ex_time_harvest(&T, r, 1);
}

START_TEST(link_rate_is_the_median) {
  setup();
  ck_assert_uint_eq(T.bpus, 0);
  ck_assert_int_eq(ex_time_link_begin(&T, NULL, 1u << 20), 0); /* under a chunk: not timed */
  link_sample(8, 0.32f); /* 8 MiB in 320 us: 26214 bytes/us */
  ck_assert_uint_eq(T.bpus, 26214);
  link_sample(8, 0.001f); /* moved nothing: far too fast */
  link_sample(8, 3.2f);   /* waited behind other transfers */
  ck_assert_uint_eq(T.bpus, 26214);
  link_sample(4, 0.16f);
  link_sample(4, 0.16f);
  ck_assert_uint_eq(T.bpus, 26214);
  ck_assert_uint_eq(T.ln, 0);
  for (int i = 0; i < 3; i++)
    link_sample(8, 0.32f); /* EX_LT_RATES in */
  int timed_n = 0;
  for (int i = 0; i < 2 * EX_LT_EVERY; i++) {
    int s = ex_time_link_begin(&T, NULL, 8u << 20);
    timed_n += s > 0;
    ex_time_link_end(&T, s, NULL, 1);
    complete_all();
    ex_ktres_t r[1];
    ex_time_harvest(&T, r, 1);
  }
  ck_assert_int_eq(timed_n, 2); /* then one in EX_LT_EVERY */
}
END_TEST

int main(void) {
  Suite *s = suite_create("exec_time");
  TCase *t = tcase_create("exec_time");
  tcase_add_test(t, launch_durations_in_order_once_done);
  tcase_add_test(t, later_results_wait_for_earlier);
  tcase_add_test(t, dropped_launches_and_a_full_ring);
  tcase_add_test(t, driver_errors_drop_samples);
  tcase_add_test(t, link_rate_is_the_median);
  suite_add_tcase(s, t);
  return vx_check_run(s, 1);
}
