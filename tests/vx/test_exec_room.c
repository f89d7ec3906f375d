/* Unit tests of the executor's room accounting (tiers/exec_room.c): which
 * eviction group each prefetch of a plan waits for. */
#include <check.h>

#include "vx_check.h"
#include <string.h>

#include "exec_int.h"

static ex_room_t R;

static ex_op_t evict(int when) {
  return (ex_op_t){.op = POL_OP_EVICT, .when = (uint8_t)when, .tier = POL_TIER_HOST, .count = 1};
}

static ex_op_t fetch(int when, uint32_t count) {
  return (ex_op_t){.op = POL_OP_PREFETCH, .when = (uint8_t)when, .count = count};
}

static void setup(void) {
  memset(&R, 0, sizeof R);
}

START_TEST(free_room_waits_for_nothing) {
  ex_op_t ops[] = {fetch(POL_REQUIRED, 2), fetch(POL_AHEAD, 3)};
  ex_room_plan_locked(&R, ops, 2, 5);
  ck_assert_uint_eq(ops[0].room, 0);
  ck_assert_uint_eq(ops[1].room, 0);
}
END_TEST

START_TEST(prefetch_waits_for_its_eviction) {
  ex_op_t ops[] = {evict(POL_AHEAD), fetch(POL_AHEAD, 1), evict(POL_AHEAD), fetch(POL_AHEAD, 1)};
  ex_room_plan_locked(&R, ops, 4, 0);
  ck_assert_uint_ne(ops[0].group, 0);
  ck_assert_uint_gt(ops[2].group, ops[0].group);
  ck_assert_uint_eq(ops[1].room, ops[0].group); /* not the later one */
  ck_assert_uint_eq(ops[3].room, ops[2].group);
}
END_TEST

/* A plan's REQUIRED evictions go down in groups of EX_REQ_SLICE chunks (one
 * each), and a required prefetch waits only for the group that gives its
 * room, not for the evictions after it: the first chunk comes up while the
 * next one still goes down, as the replay's model pipelines them (a group
 * of 16 chunks serialised the two directions: vx play of prog_torch's
 * trace took 1.30x the replay's time, 1.14x with a chunk per group). */
START_TEST(required_evictions_a_group_per_slice) {
  ex_op_t ops[2 * EX_REQ_SLICE + 4];
  int n = 0;
  for (int i = 0; i < EX_REQ_SLICE; i++)
    ops[n++] = evict(POL_REQUIRED);
  ops[n++] = fetch(POL_REQUIRED, EX_REQ_SLICE);
  for (int i = 0; i < EX_REQ_SLICE; i++)
    ops[n++] = evict(POL_REQUIRED);
  ops[n++] = fetch(POL_REQUIRED, EX_REQ_SLICE);
  ops[n++] = evict(POL_AHEAD);
  ops[n++] = fetch(POL_AHEAD, 1);
  ex_room_plan_locked(&R, ops, n, 0);
  uint32_t g0 = ops[0].group, g1 = ops[EX_REQ_SLICE + 1].group;
  ck_assert_uint_ne(g0, 0);
  ck_assert_uint_gt(g1, g0);
  for (int i = 0; i < EX_REQ_SLICE; i++) {
    ck_assert_uint_eq(ops[i].group, g0);
    ck_assert_uint_eq(ops[EX_REQ_SLICE + 1 + i].group, g1);
  }
  ck_assert_uint_eq(ops[EX_REQ_SLICE].room, g0); /* not g1: it need not wait for it */
  ck_assert_uint_eq(ops[2 * EX_REQ_SLICE + 1].room, g1);
  ck_assert_uint_gt(ops[n - 2].group, g1);
  ck_assert_uint_eq(ops[n - 1].room, ops[n - 2].group);
}
END_TEST

/* What the slices are for: the first chunk a launch needs comes up once
 * one victim is down, not after all of them (fails with slices of 16). */
START_TEST(required_chunk_waits_for_one_eviction) {
  ex_op_t ops[] = {evict(POL_REQUIRED), evict(POL_REQUIRED), evict(POL_REQUIRED),
                   fetch(POL_REQUIRED, 1), fetch(POL_REQUIRED, 1), fetch(POL_REQUIRED, 1)};
  ex_room_plan_locked(&R, ops, 6, 0);
  for (int i = 0; i < 3; i++) {
    if (i) ck_assert_uint_gt(ops[i].group, ops[i - 1].group);
    ck_assert_uint_eq(ops[3 + i].room, ops[i].group);
  }
}
END_TEST

/* A big REQUIRED part goes down in slices of EX_REQ_SLICE chunks, a group
 * each, and its prefetch, cut to match (exec.c), waits slice by slice: the
 * first slice comes up once the first slice of evictions is down. */
START_TEST(required_part_in_slices) {
  enum { NS = 3, NE = NS * EX_REQ_SLICE };
  ex_op_t ops[NE + NS];
  for (int i = 0; i < NE; i++)
    ops[i] = evict(POL_REQUIRED);
  for (int k = 0; k < NS; k++)
    ops[NE + k] = fetch(POL_REQUIRED, EX_REQ_SLICE);
  ex_room_plan_locked(&R, ops, NE + NS, 0);
  for (int k = 0; k < NS; k++) {
    uint32_t g = ops[k * EX_REQ_SLICE].group;
    ck_assert_uint_ne(g, 0);
    if (k) ck_assert_uint_gt(g, ops[(k - 1) * EX_REQ_SLICE].group);
    for (int i = 0; i < EX_REQ_SLICE; i++)
      ck_assert_uint_eq(ops[k * EX_REQ_SLICE + i].group, g);
    ck_assert_uint_eq(ops[NE + k].room, g);
  }
}
END_TEST

/* Evictions made ahead of need: a later plan's prefetches take their room
 * oldest first, then room that is free for real waits for nothing. */
START_TEST(ahead_evictions_give_room_oldest_first) {
  ex_op_t a[] = {evict(POL_AHEAD), evict(POL_AHEAD)};
  ex_room_plan_locked(&R, a, 2, 0);
  ex_op_t b[] = {fetch(POL_REQUIRED, 1), fetch(POL_AHEAD, 1)};
  ex_room_plan_locked(&R, b, 2, 2); /* the policy counts both free */
  ck_assert_uint_eq(b[0].room, a[0].group);
  ck_assert_uint_eq(b[1].room, a[1].group);
  ex_op_t c[] = {fetch(POL_AHEAD, 1)};
  ex_room_plan_locked(&R, c, 1, 1); /* one chunk free, no eviction under way */
  ck_assert_uint_eq(c[0].room, 0);
}
END_TEST

/* More room under way than the policy counts free (it took some back):
 * prefetches then wait for later groups, never for earlier ones. */
START_TEST(room_taken_back_waits_later) {
  ex_op_t a[] = {evict(POL_AHEAD), evict(POL_AHEAD), evict(POL_AHEAD)};
  ex_room_plan_locked(&R, a, 3, 0);
  ex_op_t b[] = {fetch(POL_AHEAD, 1), fetch(POL_AHEAD, 1)};
  ex_room_plan_locked(&R, b, 2, 2);
  ck_assert_uint_eq(b[0].room, a[1].group);
  ck_assert_uint_eq(b[1].room, a[2].group);
}
END_TEST

/* A prefetch bigger than the free room waits for the group that gives it
 * its last chunk. */
START_TEST(big_prefetch_waits_for_last_room) {
  ex_op_t a[] = {evict(POL_AHEAD), evict(POL_AHEAD)};
  ex_room_plan_locked(&R, a, 2, 0);
  ex_op_t b[] = {fetch(POL_REQUIRED, 3)};
  ex_room_plan_locked(&R, b, 1, 3); /* one free chunk plus the two under way */
  ck_assert_uint_eq(b[0].room, a[1].group);
}
END_TEST

/* A pin's move goes down before the evictions of the plan made with it,
 * and its room is counted before theirs: a prefetch takes the pin's room
 * first and waits for the pin's group alone, then the plan's evictions'. */
START_TEST(pin_counted_in_down_order) {
  ex_op_t a[] = {evict(POL_AHEAD)};
  ex_room_plan_locked(&R, a, 1, 0);
  ex_op_t a2[] = {fetch(POL_AHEAD, 1)}; /* a's room taken */
  ex_room_plan_locked(&R, a2, 1, 1);
  ck_assert_uint_eq(a2[0].room, a[0].group);
  uint32_t pin = ex_room_add_locked(&R, 2);
  ck_assert_uint_gt(pin, a[0].group);
  ex_op_t b[] = {evict(POL_AHEAD), fetch(POL_AHEAD, 1), fetch(POL_AHEAD, 1),
                 fetch(POL_AHEAD, 1)};
  ex_room_plan_locked(&R, b, 4, 2); /* the policy counts the pin's two chunks free */
  ck_assert_uint_eq(b[1].room, pin);
  ck_assert_uint_eq(b[2].room, pin);
  ck_assert_uint_eq(b[3].room, b[0].group); /* past the pin's room: the plan's eviction */
  for (int i = 1; i < 4; i++)
    ck_assert_uint_ne(b[i].room, EX_ROOM_ALL);
}
END_TEST

START_TEST(spills_and_dropped_ops) {
  ex_op_t a[] = {evict(POL_AHEAD), fetch(POL_AHEAD, 1), evict(POL_AHEAD), fetch(POL_AHEAD, 1),
                 fetch(POL_AHEAD, 1)};
  a[0].tier = POL_TIER_NVME; /* spilled synchronously: its room is there once issued */
  a[2].dropped = a[3].dropped = 1;
  ex_room_plan_locked(&R, a, 5, 0);
  ck_assert_uint_eq(a[0].group, 0);
  ck_assert_uint_eq(a[1].room, 0);
  ck_assert_uint_eq(a[2].group, 0);
  ck_assert_uint_eq(a[3].room, 0);
  ck_assert_uint_eq(a[4].room, EX_ROOM_ALL); /* no room known: all of `down` */
}
END_TEST

/* More groups under way than the ring holds: the forgotten ones' room is
 * waited for through later groups, never through none. */
START_TEST(ring_overflow_waits_later) {
  enum { N = EX_PEND + 40 };
  static ex_op_t a[N];
  for (int i = 0; i < N; i++)
    a[i] = evict(POL_AHEAD);
  ex_room_plan_locked(&R, a, N, 0);
  static ex_op_t b[N];
  for (int i = 0; i < N; i++)
    b[i] = fetch(POL_AHEAD, 1);
  ex_room_plan_locked(&R, b, N, N);
  for (int i = 0; i < N; i++) {
    ck_assert_uint_ne(b[i].room, 0);
    if (b[i].room != EX_ROOM_ALL) ck_assert_uint_ge(b[i].room, a[i].group);
  }
  ck_assert_uint_eq(b[N - 1].room, a[N - 1].group);
}
END_TEST

/* A model: `down` in order, each prefetch run once the group it waits for
 * ended; the device never holds more than the budget, on random plans
 * whose counts are right (the policy's view). */
START_TEST(random_plans_stay_in_budget) {
  enum { CAP = 8, PLANS = 4000, MAXG = PLANS * 16 };
  static uint8_t gchunks[MAXG];
  unsigned seed = 12345;
  int used = 0;                  /* resident once everything issued has run */
  int free_pol = CAP;            /* the policy's free room */
  uint32_t ended = 0, issued = 0; /* groups ended / issued on `down` */
  int dev = 0;                   /* device occupancy as the model runs it */
  for (int p = 0; p < PLANS; p++) {
    ex_op_t ops[16];
    int n = 0, f = free_pol;
    int nev = (int)(rand_r(&seed) % 4), npf = (int)(rand_r(&seed) % 4);
    for (int i = 0; i < nev && used > 0; i++, used--, f++)
      ops[n++] = evict(POL_AHEAD);
    for (int i = 0; i < npf && f > 0; i++, used++, f--)
      ops[n++] = fetch(POL_AHEAD, 1);
    ex_room_plan_locked(&R, ops, n, (uint64_t)free_pol);
    free_pol = f;
    for (int i = 0; i < n; i++) {
      if (ops[i].op == POL_OP_EVICT) {
        ck_assert_uint_lt(ops[i].group, MAXG);
        gchunks[ops[i].group] = 1, issued = ops[i].group;
        continue;
      }
      /* the slowest order: `down` ends only what the prefetch waits for */
      uint32_t need = ops[i].room == EX_ROOM_ALL ? issued : ops[i].room;
      for (; ended < need; ended++)
        dev -= gchunks[ended + 1];
      dev += 1;
      ck_assert_int_le(dev, CAP);
    }
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("exec_room");
  TCase *tc = tcase_create("exec_room");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_add_test(tc, free_room_waits_for_nothing);
  tcase_add_test(tc, prefetch_waits_for_its_eviction);
  tcase_add_test(tc, required_evictions_a_group_per_slice);
  tcase_add_test(tc, required_chunk_waits_for_one_eviction);
  tcase_add_test(tc, required_part_in_slices);
  tcase_add_test(tc, ahead_evictions_give_room_oldest_first);
  tcase_add_test(tc, room_taken_back_waits_later);
  tcase_add_test(tc, big_prefetch_waits_for_last_room);
  tcase_add_test(tc, pin_counted_in_down_order);
  tcase_add_test(tc, spills_and_dropped_ops);
  tcase_add_test(tc, ring_overflow_waits_later);
  tcase_add_test(tc, random_plans_stay_in_budget);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
