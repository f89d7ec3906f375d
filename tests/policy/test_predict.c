/* test_predict.c: the predictor and planner under a fake clock and a fake
 * executor: learning, phase changes, plan invariants on random traces, API errors. */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <stdlib.h>

#include "fx.h"

// ---- a training-like loop: persistent weights, activations re-made each iteration ----

struct loop {
  uint32_t layers, wch, ach;
  uint64_t kbase, stream, next_id;
  uint64_t w[32];
};

static void loop_init(struct fx *f, struct loop *L, uint32_t layers, uint32_t wch, uint32_t ach,
                      uint64_t kbase, uint64_t first_id) {
  *L = (struct loop){
      .layers = layers, .wch = wch, .ach = ach, .kbase = kbase, .stream = 1, .next_id = first_id};
  for (uint32_t l = 0; l < layers; l++) {
    L->w[l] = L->next_id++;
    fx_alloc(f, L->w[l], wch);
    pol_range_t r = {.alloc_id = L->w[l], .count = wch, .mode = POL_ACCESS_WRITE};
    fx_launch(f, kbase + 9, L->stream, &r, 1);
  }
}

/* Forward layer l: makes its activation act[l] and launches. */
static void loop_forward(struct fx *f, struct loop *L, uint32_t l, uint64_t *act) {
  act[l] = L->next_id++;
  fx_alloc(f, act[l], L->ach);
  pol_range_t r[3] = {
      {.alloc_id = L->w[l], .count = L->wch, .mode = POL_ACCESS_READ},
      {.alloc_id = act[l], .count = L->ach, .mode = POL_ACCESS_WRITE},
      {.alloc_id = l ? act[l - 1] : act[l], .count = L->ach, .mode = POL_ACCESS_READ}};
  fx_launch(f, L->kbase + 1, L->stream, r, l ? 3 : 2);
}

/* The backward pass: each layer's weights updated, its activation read and freed. */
static void loop_backward(struct fx *f, struct loop *L, const uint64_t *act) {
  for (uint32_t l = L->layers; l-- > 0;) {
    pol_range_t r[2] = {{.alloc_id = L->w[l], .count = L->wch, .mode = POL_ACCESS_RW},
                        {.alloc_id = act[l], .count = L->ach, .mode = POL_ACCESS_READ}};
    fx_launch(f, L->kbase + 2, L->stream, r, 2);
    fx_free(f, act[l]);
  }
}

static void loop_iter(struct fx *f, struct loop *L) {
  uint64_t act[32] = {0};
  for (uint32_t l = 0; l < L->layers; l++)
    loop_forward(f, L, l, act);
  loop_backward(f, L, act);
}

static struct fx F;

/* Runs the next iteration's forward layers by hand until some chunks
 * brought up ahead wait for their use and returns the counters then; then
 * presses those chunks out: allocation `id`, the whole device, written by
 * a kernel never seen, which no history announced. */
static pol_stats_t press_out_ahead(struct loop *L, uint64_t id) {
  pol_stats_t st;
  uint64_t act[8];
  for (uint32_t l = 0; l < L->layers; l++) {
    loop_forward(&F, L, l, act);
    pol_get_stats(F.p, &st);
    if (st.chunks_ahead > st.ahead_used + st.ahead_wasted) break;
  }
  fx_alloc(&F, id, 24);
  pol_range_t r = {.alloc_id = id, .count = 24, .mode = POL_ACCESS_WRITE};
  fx_launch(&F, 7, 1, &r, 1);
  return st;
}

START_TEST(periodic_learned_in_one_iteration) {
  struct loop L;
  fx_init(&F, POL_PREDICT, 24); /* footprint 8*4 + 8*2 = 48 chunks: half fits */
  loop_init(&F, &L, 8, 4, 2, 100, 1);
  loop_iter(&F, &L); /* learns */
  for (int it = 1; it < 6; it++) {
    fx_reset_counts(&F);
    loop_iter(&F, &L);
    ck_assert_msg(fx_coverage(&F) >= 0.95, "iteration %d: coverage %.3f", it, fx_coverage(&F));
    ck_assert_uint_eq(F.required_host, F.used - F.covered);
  }
  pol_stats_t st;
  pol_get_stats(F.p, &st);
  ck_assert_uint_gt(st.launches_matched, st.launches / 2);
  /* a learned loop uses what it brings up ahead of need */
  ck_assert_uint_gt(st.ahead_used, 0);
  ck_assert_uint_le(st.ahead_used + st.ahead_wasted, st.chunks_ahead);
  ck_assert_uint_le(st.ahead_wasted * 10, st.ahead_used);
  fx_fini(&F);
}
END_TEST

/* A prediction that does not come true: the chunks brought up for the
 * next layers leave unused, pressed out by an allocation no
 * history announced, and the planner counts them wasted. */
START_TEST(ahead_prefetches_evicted_unused_count_as_wasted) {
  struct loop L;
  fx_init(&F, POL_PREDICT, 24);
  loop_init(&F, &L, 8, 4, 2, 100, 1);
  for (int it = 0; it < 3; it++)
    loop_iter(&F, &L);
  pol_stats_t before = press_out_ahead(&L, 60), after;
  ck_assert_uint_gt(before.chunks_ahead, before.ahead_used + before.ahead_wasted);
  pol_get_stats(F.p, &after);
  ck_assert_uint_gt(after.ahead_wasted, before.ahead_wasted);
  ck_assert_uint_eq(after.ahead_used, before.ahead_used);
  ck_assert_uint_le(after.ahead_used + after.ahead_wasted, after.chunks_ahead);
  fx_fini(&F);
}
END_TEST

/* An allocation the executor keeps in host memory (pol_pin): no plan
 * names it while pinned (fx_apply fails on one that does), its uses keep
 * the loop's keys (the rest stays covered), and once moved again it is
 * brought up as before. */
START_TEST(pinned_allocation_planned_no_more) {
  struct loop L;
  fx_init(&F, POL_PREDICT, 24);
  loop_init(&F, &L, 8, 4, 2, 100, 1);
  for (int it = 0; it < 2; it++)
    loop_iter(&F, &L);
  ck_assert_int_eq(pol_pin(F.p, 999, 1), -ENOENT);
  ck_assert_int_eq(pol_pin(NULL, L.w[0], 1), -ENOENT);
  ck_assert_int_eq(pol_alloc(F.p, 500, 0, 2u << 21, POL_ALLOC_NATIVE, F.now++), POL_TIER_DEVICE);
  ck_assert_int_eq(pol_pin(F.p, 500, 1), -EINVAL);
  ck_assert_int_eq(pol_free(F.p, 500, F.now++, NULL), 0);
  uint64_t before = pol_used(F.p);
  fx_pin(&F, L.w[3], 1);
  ck_assert_uint_le(pol_used(F.p), before); /* its resident chunks left */
  for (int it = 0; it < 3; it++) {
    fx_reset_counts(&F);
    loop_iter(&F, &L);
  }
  /* what is not pinned is still brought up ahead: 4 of the 48 chunks used
   * per iteration (w[3], read and written) are not there, by design */
  ck_assert_msg(fx_coverage(&F) >= 0.80, "coverage %.3f", fx_coverage(&F));
  fx_pin(&F, L.w[3], 0);
  loop_iter(&F, &L); /* fx_launch checks every chunk of each launch is resident */
  ck_assert_uint_gt(F.res[L.w[3]][0] + F.res[L.w[3]][1] + F.res[L.w[3]][2] + F.res[L.w[3]][3] +
                        F.ahead,
                    0);
  fx_fini(&F);
}
END_TEST

/* How far ahead the planner goes (pol_stats_t.ahead_limit): as far as
 * the capacity while its bets come true; a wrong prediction (chunks
 * brought up ahead, pressed out unused by an allocation no history
 * announced) takes a share of the limit, and prefetches used give it back. */
START_TEST(ahead_limit_backs_off_on_lost_bets) {
  struct loop L;
  pol_stats_t st;
  fx_init(&F, POL_PREDICT, 24);
  loop_init(&F, &L, 8, 4, 2, 100, 1);
  for (int it = 0; it < 4; it++)
    loop_iter(&F, &L);
  pol_get_stats(F.p, &st);
  ck_assert_uint_gt(st.ahead_used, 0);
  ck_assert_uint_eq(st.ahead_limit, 24); /* right so far: as deep as the capacity */
  uint64_t wasted = st.ahead_wasted;
  press_out_ahead(&L, 60);
  fx_free(&F, 60);
  pol_get_stats(F.p, &st);
  ck_assert_uint_gt(st.ahead_wasted, wasted);
  ck_assert_uint_lt(st.ahead_limit, 24);
  ck_assert_uint_ge(st.ahead_limit, 8); /* never under POL_AHEAD_MIN */
  uint64_t low = st.ahead_limit, used = st.ahead_used;
  for (int it = 0; it < 4; it++)
    loop_iter(&F, &L);
  pol_get_stats(F.p, &st);
  ck_assert_uint_gt(st.ahead_used, used);
  ck_assert_uint_gt(st.ahead_limit, low); /* bets won again: deeper again */
  fx_fini(&F);
}
END_TEST

START_TEST(demand_learns_nothing) {
  struct loop L;
  fx_init(&F, POL_DEMAND, 24);
  loop_init(&F, &L, 8, 4, 2, 100, 1);
  for (int it = 0; it < 3; it++) {
    fx_reset_counts(&F);
    loop_iter(&F, &L);
  }
  ck_assert_uint_eq(F.ahead, 0); /* demand plans nothing: every miss is the driver's */
  fx_fini(&F);
}
END_TEST

START_TEST(phase_change_recovered) {
  struct loop L;
  fx_init(&F, POL_PREDICT, 24);
  loop_init(&F, &L, 8, 4, 2, 100, 1);
  for (int it = 0; it < 4; it++)
    loop_iter(&F, &L);
  L.ach = 3; /* new shapes: activations grow, the same weights */
  double cov[5];
  for (int it = 0; it < 5; it++) {
    fx_reset_counts(&F);
    loop_iter(&F, &L);
    cov[it] = fx_coverage(&F);
  }
  ck_assert_msg(cov[2] >= 0.95 && cov[3] >= 0.95 && cov[4] >= 0.95,
                "after the change: %.3f %.3f %.3f %.3f %.3f", cov[0], cov[1], cov[2], cov[3],
                cov[4]);
  fx_fini(&F);
}
END_TEST

START_TEST(two_streams_interleaved) {
  struct loop A, B;
  fx_init(&F, POL_PREDICT, 40);
  loop_init(&F, &A, 6, 4, 2, 100, 1);
  loop_init(&F, &B, 4, 4, 1, 500, 4000);
  B.stream = 2;
  srand(7);
  for (int it = 0; it < 8; it++) {
    if (it == 3) fx_reset_counts(&F);
    if (rand() % 2) {
      loop_iter(&F, &A);
      loop_iter(&F, &B);
    } else {
      loop_iter(&F, &B);
      loop_iter(&F, &A);
    }
  }
  ck_assert_msg(fx_coverage(&F) >= 0.9, "coverage %.3f", fx_coverage(&F));
  fx_fini(&F);
}
END_TEST

/* A second stream the predictor cannot follow (a new kernel every launch)
 * reads its own weights between the launches of a loop it predicts: the
 * predicted window never reaches those weights, so they are cold victims,
 * the most recently used of them.  A plan's prefetches must not take the
 * chunks the last two launches used (as a launch's own evictions do not):
 * on two-stream that was the other stream's working set, most of it wanted
 * back within 50 launches. */
START_TEST(prefetches_spare_what_the_last_launches_used) {
  struct loop A;
  fx_init(&F, POL_PREDICT, 16);
  loop_init(&F, &A, 6, 2, 2, 100, 1);
  uint64_t x = 4000;
  fx_made(&F, x, 3);
  uint64_t kernel = 7000, taken = 0, ahead = 0;
  uint64_t act[8];
  for (int it = 0; it < 10; it++) {
    for (uint32_t l = 0; l < A.layers; l++) {
      loop_forward(&F, &A, l, act);
      pol_range_t rx = {.alloc_id = x, .count = 3, .mode = POL_ACCESS_READ};
      fx_launch(&F, kernel++, 2, &rx, 1);
      /* the next launch's plan: x was used by the launch before it */
      pol_range_t r[2] = {{.alloc_id = A.w[l], .count = A.wch, .mode = POL_ACCESS_READ},
                          {.alloc_id = act[l], .count = A.ach, .mode = POL_ACCESS_READ}};
      int n = fx_launch(&F, A.kbase + 3, 1, r, 2);
      for (int i = 0; i < n; i++) {
        if (F.act[i].op != POL_OP_EVICT || F.act[i].when != POL_AHEAD) continue;
        ahead += F.act[i].count;
        taken += F.act[i].alloc_id == x ? F.act[i].count : 0;
      }
    }
    loop_backward(&F, &A, act);
  }
  ck_assert_uint_gt(ahead, 0); /* it does not fit: the plans make room ahead */
  ck_assert_msg(taken == 0, "%llu of %llu chunks evicted ahead were the last launch's",
                (unsigned long long)taken, (unsigned long long)ahead);
  fx_fini(&F);
}
END_TEST

// ---- random traces: the plan contract holds whatever the predictor believes ----

static void random_trace(pol_kind_t kind, unsigned seed) {
  fx_init(&F, kind, 16);
  srand(seed);
  uint64_t ids[64];
  int n = 0;
  uint64_t next = 1;
  for (int step = 0; step < 3000; step++) {
    int op = rand() % 10;
    if ((op == 0 || n < 3) && n < 64) {
      ids[n] = next++;
      fx_alloc(&F, ids[n++], 1 + rand() % 8);
    } else if (op == 1 && n > 3) {
      int k = rand() % n;
      fx_free(&F, ids[k]);
      ids[k] = ids[--n];
    } else {
      pol_range_t r[4];
      int nr = 1 + rand() % 4;
      for (int i = 0; i < nr; i++) {
        uint64_t id = ids[(step / 7 + i * 3 + (rand() % 4 == 0 ? rand() : 0)) % n];
        uint32_t first = rand() % F.nchunks[id];
        r[i] = (pol_range_t){.alloc_id = id,
                             .first = first,
                             .count = 1 + rand() % (F.nchunks[id] - first),
                             .mode = rand() % 4};
      }
      fx_launch(&F, 1000 + (uint64_t)(step % 5), 1 + rand() % 2, r, (uint32_t)nr);
    }
  }
  pol_stats_t st;
  pol_get_stats(F.p, &st);
  ck_assert_uint_eq(st.resident, F.resident);
  ck_assert_uint_le(st.ahead_used + st.ahead_wasted, st.chunks_ahead);
  fx_fini(&F);
}

START_TEST(random_traces_keep_the_contract) {
  for (unsigned seed = 1; seed <= 4; seed++) {
    random_trace(POL_PREDICT, seed);
    random_trace(POL_DEEPUM, seed);
  }
}
END_TEST

// ---- oracle and deepum ----

struct fut {
  pol_launch_t l[64];
  pol_range_t r[64][2];
  uint32_t n, cur;
};

static int future(void *ctx, uint32_t k, pol_launch_t *out) {
  struct fut *u = ctx;
  if (u->cur + k >= u->n) return 0;
  *out = u->l[u->cur + k];
  return 1;
}

START_TEST(oracle_sees_the_future) {
  static struct fut u;
  fx_init(&F, POL_ORACLE, 6);
  ck_assert_int_eq(pol_set_future(F.p, future, &u), 0);
  for (uint64_t id = 1; id <= 10; id++)
    fx_alloc(&F, id, 1);
  for (uint32_t i = 0; i < 60; i++) {
    u.r[i][0] = (pol_range_t){.alloc_id = 1 + i % 10, .count = 1, .mode = POL_ACCESS_RW};
    u.l[i] = (pol_launch_t){.kernel = 5, .stream = 1, .ranges = u.r[i], .nranges = 1};
  }
  u.n = 60;
  for (u.cur = 0; u.cur < 60; u.cur++) {
    if (u.cur == 10) fx_reset_counts(&F);
    fx_launch(&F, 5, 1, u.r[u.cur], 1);
  }
  /* cyclic over 10 chunks with room for 6: MIN refetches 5 per cycle, all ahead */
  ck_assert_uint_eq(F.required_host, 0);
  ck_assert_uint_le(F.ahead, 25);
  ck_assert_uint_ge(F.ahead, 20);
  fx_fini(&F);
}
END_TEST

/* A prefetch that has to wait does not hold up the room of the writes after
 * it.  Device of 4 chunks holding A B C D; P on the host.  Next launches:
 * A B C P N(written first) A C A C ... D.  P, wanted at 4, waits: MIN's
 * victim for it is B, still needed at 2.  N, wanted at 5, needs room only,
 * and D is used far later: the plan made now already evicts for N (its
 * write-back runs while the link is idle), and P still waits.  Over the run
 * P arrives ahead of its launch and N finds its room made. */
START_TEST(waiting_prefetch_does_not_hold_up_room_for_writes) {
  enum { A = 1, B, C, D, P, N, LEN = 17 };
  static struct fut u;
  fx_init(&F, POL_ORACLE, 4);
  ck_assert_int_eq(pol_set_future(F.p, future, &u), 0);
  fx_made(&F, P, 1);
  for (uint64_t id = A; id <= D; id++)
    fx_made(&F, id, 1); /* D's room pushes P to the host */
  ck_assert(!F.res[P][0]);
  fx_alloc(&F, N, 1);
  static const uint64_t seq[LEN] = {C, A, B, C, P, N, A, C, A, C, A, C, A, C, A, C, D};
  for (uint32_t i = 0; i < LEN; i++) {
    u.r[i][0] = (pol_range_t){
        .alloc_id = seq[i], .count = 1, .mode = seq[i] == N ? POL_ACCESS_WRITE : POL_ACCESS_READ};
    u.l[i] = (pol_launch_t){.kernel = 7, .stream = 1, .ranges = u.r[i], .nranges = 1};
  }
  u.n = LEN;
  fx_reset_counts(&F);
  uint64_t required_evictions = 0;
  for (u.cur = 0; u.cur < LEN; u.cur++) {
    int n = fx_launch(&F, 7, 1, u.r[u.cur], 1);
    int evicted = 0, fetched = 0;
    for (int i = 0; i < n; i++) {
      const pol_action_t *a = &F.act[i];
      if (a->op == POL_OP_EVICT && a->when == POL_REQUIRED) required_evictions += a->count;
      if (u.cur == 0 && a->op == POL_OP_EVICT) {
        evicted++;
        ck_assert_msg(a->alloc_id != A && a->alloc_id != B && a->alloc_id != C,
                      "evicted %llu, used before N", (unsigned long long)a->alloc_id);
      }
      fetched |= a->op == POL_OP_PREFETCH && a->alloc_id == P;
    }
    if (u.cur == 0) {
      ck_assert_int_eq(evicted, 1); /* N's room, now */
      ck_assert_int_eq(fetched, 0); /* P waits for B's last use */
    }
  }
  ck_assert_uint_eq(F.required_host, 0); /* P (and D) came up ahead */
  ck_assert_uint_eq(required_evictions, 0);
  fx_fini(&F);
}
END_TEST

START_TEST(deepum_prefetches_stable_addresses) {
  fx_init(&F, POL_DEEPUM, 16); /* a period of 48 kernels: longer than DeepUM's 32 */
  for (uint64_t id = 1; id <= 48; id++)
    fx_alloc(&F, id, 1);
  for (int it = 0; it < 5; it++) {
    if (it == 2) fx_reset_counts(&F);
    for (uint64_t id = 1; id <= 48; id++) {
      pol_range_t r = {.alloc_id = id, .count = 1, .mode = POL_ACCESS_READ};
      fx_launch(&F, 40 + id, 1, &r, 1);
    }
  }
  ck_assert_uint_gt(F.ahead, 48);
  ck_assert_msg(fx_coverage(&F) > 0.5, "coverage %.3f", fx_coverage(&F));
  fx_fini(&F);
}
END_TEST

// ---- advice, placement, dead chunks ----

/* Only when configured to (pol_config_t.read_mostly): by default no advice
 * at all, access modes known or not. */
START_TEST(read_mostly_advised_only_when_never_written) {
  for (int run = 0; run < 4; run++) {
    int unknown = run & 1, on = run < 2;
    pol_config_t c;
    pol_config_default(&c, POL_PREDICT, 8 * (2u << 20));
    c.read_mostly = (uint32_t)on;
    fx_init_config(&F, &c);
    fx_alloc(&F, 1, 2);
    int advised = 0;
    for (int i = 0; i < 5; i++) {
      pol_range_t r = {.alloc_id = 1,
                       .count = 2,
                       .mode = i == 0    ? POL_ACCESS_WRITE
                               : unknown ? POL_ACCESS_UNKNOWN
                                         : POL_ACCESS_READ};
      int n = fx_launch(&F, 3, 1, &r, 1);
      for (int k = 0; k < n; k++)
        if (F.act[k].op == POL_OP_ADVISE_READ_MOSTLY) {
          advised++;
          ck_assert_int_eq(i, 2); /* after two read-only uses past the initialising write */
          ck_assert_uint_eq(F.act[k].alloc_id, 1);
        }
    }
    ck_assert_int_eq(advised, unknown || !on ? 0 : 1);
    fx_fini(&F);
  }
}
END_TEST

START_TEST(freed_chunks_dropped_not_written_back) {
  fx_init(&F, POL_PREDICT, 4);
  fx_made(&F, 1, 3);
  fx_free(&F, 1); /* asserts DROP only, exactly the resident chunks */
  fx_alloc(&F, 2, 4);
  pol_range_t r2 = {.alloc_id = 2, .count = 4, .mode = POL_ACCESS_WRITE};
  int n = fx_launch(&F, 2, 1, &r2, 1);
  for (int i = 0; i < n; i++)
    ck_assert_int_ne(F.act[i].op, POL_OP_EVICT); /* the room came from the freed chunks */
  pol_stats_t st;
  pol_get_stats(F.p, &st);
  ck_assert_uint_eq(st.chunks_dropped, 3);
  ck_assert_uint_eq(st.chunks_evicted, 0);
  fx_fini(&F);
}
END_TEST

/* A native allocation takes its room at once: pol_make_room plans the
 * evictions that leave the managed chunks what the allocation leaves them,
 * least recently used first, before it is made (tiers/exec.c). */
START_TEST(native_room_made_before_the_allocation) {
  fx_init(&F, POL_PREDICT, 8);
  fx_made(&F, 1, 4);
  fx_made(&F, 2, 4); /* the device is full */
  pol_plan_t plan = {.actions = F.act, .cap = 4096};
  int n = pol_make_room(F.p, 5u << 20, &plan); /* 5 MiB: 3 chunks must go */
  ck_assert_int_gt(n, 0);
  uint32_t evicted = 0;
  for (int i = 0; i < n; i++) {
    ck_assert_int_eq(F.act[i].op, POL_OP_EVICT);
    ck_assert_int_eq(F.act[i].when, POL_REQUIRED);
    ck_assert_uint_eq(F.act[i].alloc_id, 1); /* the older one goes first */
    evicted += F.act[i].count;
  }
  ck_assert_uint_eq(evicted, 3);
  pol_launch_t none = {0};
  fx_apply(&F, &none, n);
  ck_assert_int_eq(pol_alloc(F.p, 3, 0x900000000ull, 5u << 20, POL_ALLOC_NATIVE, F.now++),
                   POL_TIER_DEVICE);
  ck_assert_uint_eq(pol_used(F.p), 5);
  ck_assert_uint_eq(pol_room(F.p), 0); /* 16 - 5 MiB hold 5 chunks: all taken, none over */
  /* room that is there plans nothing; more than the capacity cannot be made */
  ck_assert_int_eq(pol_make_room(F.p, 1, &plan), 0);
  ck_assert_int_eq(pol_make_room(F.p, 64u << 20, &plan), -ENOENT);
  ck_assert_int_eq(pol_make_room(NULL, 1, &plan), -EINVAL);
  fx_fini(&F);
}
END_TEST

/* Demand paging inside the capacity (pol_config_t.demand_budget, libvx's
 * demand under VX_DEVICE_LIMIT): a launch whose chunks do not fit gets the
 * least recently used chunks evicted as REQUIRED, and no prefetch: its
 * accesses fault the chunks in, into that room.  Without the flag demand
 * plans nothing and the driver pages past any budget. */
START_TEST(demand_budget_evicts_lru_for_faults) {
  pol_config_t c;
  pol_config_default(&c, POL_DEMAND, 8u << 21);
  c.demand_budget = 1;
  fx_init_config(&F, &c);
  fx_made(&F, 1, 4);
  fx_made(&F, 2, 4); /* the device is full */
  ck_assert_uint_eq(pol_used(F.p), 8);
  fx_alloc(&F, 3, 4);
  pol_range_t r = {.alloc_id = 3, .count = 4, .mode = POL_ACCESS_WRITE};
  pol_launch_t l = {.kernel = 7, .stream = 1, .now = F.now += 1000, .ranges = &r, .nranges = 1};
  pol_plan_t plan = {.actions = F.act, .cap = 4096};
  int n = pol_launch(F.p, &l, &plan);
  ck_assert_int_gt(n, 0);
  uint32_t evicted = 0;
  for (int i = 0; i < n; i++) {
    ck_assert_int_eq(F.act[i].op, POL_OP_EVICT); /* never a prefetch */
    ck_assert_int_eq(F.act[i].when, POL_REQUIRED);
    ck_assert_uint_eq(F.act[i].alloc_id, 1); /* the least recently used */
    evicted += F.act[i].count;
  }
  ck_assert_uint_eq(evicted, 4);
  ck_assert_uint_eq(pol_used(F.p), 8); /* alloc 3 counted resident: it faults in */
  fx_fini(&F);

  fx_init(&F, POL_DEMAND, 8); /* the reference: no plan, whatever the room */
  fx_made(&F, 1, 4);
  fx_made(&F, 2, 4);
  fx_alloc(&F, 3, 4);
  l.now = F.now += 1000;
  plan.n = 0;
  ck_assert_int_eq(pol_launch(F.p, &l, &plan), 0);
  fx_fini(&F);
}
END_TEST

/* Bytes held for a native allocation about to be made count against the
 * capacity at once: a plan made meanwhile (another thread's launch) leaves
 * their room free, and giving them back when pol_alloc counts the
 * allocation itself changes nothing. */
START_TEST(held_native_room_is_not_planned_into) {
  fx_init(&F, POL_PREDICT, 8);
  fx_made(&F, 1, 4);
  pol_native_hold(F.p, 6u << 20, 0);      /* 16 - 6 MiB: 5 chunks for managed data */
  ck_assert_uint_eq(pol_room(F.p), 1);
  fx_alloc(&F, 2, 4);
  pol_range_t r = {.alloc_id = 2, .count = 4, .mode = POL_ACCESS_WRITE};
  fx_launch(&F, 2, 1, &r, 1);
  ck_assert_uint_le(F.resident, 5);        /* the plan evicted to stay out of the held room */
  ck_assert_uint_le(pol_used(F.p), 5);
  pol_native_hold(F.p, 6u << 20, 1);      /* counted as itself from here */
  ck_assert_int_eq(pol_alloc(F.p, 3, 0x900000000ull, 6u << 20, POL_ALLOC_NATIVE, F.now++),
                   POL_TIER_DEVICE);
  ck_assert_uint_eq(pol_room(F.p), 5 - pol_used(F.p));
  pol_native_hold(NULL, 1, 0);             /* no policy: nothing happens */
  fx_fini(&F);
}
END_TEST

START_TEST(evictions_spill_to_nvme_past_the_host_budget) {
  pol_config_t c;
  pol_t *p;
  pol_config_default(&c, POL_PREDICT, 2 * (2u << 20)); /* two device chunks */
  c.host_capacity = 2 * (2u << 20);                    /* two host chunks */
  ck_assert_int_eq(pol_create(&c, &p), 0);
  pol_action_t act[64];
  int tiers[POL_TIER_NVME + 1] = {0};
  for (uint64_t id = 1; id <= 6; id++) {
    ck_assert_int_eq(pol_alloc(p, id, 0, 2u << 20, 0, 0), POL_TIER_MANAGED);
    pol_range_t r = {.alloc_id = id, .count = 1, .mode = POL_ACCESS_WRITE};
    pol_launch_t l = {.kernel = id, .stream = 1, .ranges = &r, .nranges = 1};
    pol_plan_t plan = {.actions = act, .cap = 64};
    int n = pol_launch(p, &l, &plan);
    for (int i = 0; i < n; i++)
      if (act[i].op == POL_OP_EVICT) tiers[act[i].tier] += (int)act[i].count;
  }
  ck_assert_int_eq(tiers[POL_TIER_HOST], 2); /* chunks 1 and 2 fill the host budget */
  ck_assert_int_eq(tiers[POL_TIER_NVME], 2); /* chunks 3 and 4 go further down */
  pol_destroy(p);
}
END_TEST

START_TEST(static_placement) {
  pol_config_t c;
  pol_t *p;
  pol_config_default(&c, POL_STATIC, 100u << 20); /* 50 chunks */
  ck_assert_int_eq(pol_create(&c, &p), 0);
  ck_assert_int_eq(pol_alloc(p, 1, 0, 80u << 20, 0, 0), POL_TIER_DEVICE);
  ck_assert_int_eq(pol_alloc(p, 2, 0, 64u << 20, 0, 0), POL_TIER_HOST);
  ck_assert_int_eq(pol_alloc(p, 3, 0, 32u << 20, 0, 0), POL_TIER_MANAGED);
  ck_assert_int_eq(pol_free(p, 1, 0, NULL), 0);
  ck_assert_int_eq(pol_alloc(p, 4, 0, 64u << 20, 0, 0), POL_TIER_DEVICE);
  pol_destroy(p);
}
END_TEST

START_TEST(api_errors) {
  pol_config_t c;
  pol_t *p = NULL;
  pol_config_default(&c, POL_PREDICT, 0);
  ck_assert_int_eq(pol_create(&c, &p), -EINVAL);
  pol_config_default(&c, POL_PREDICT, 1u << 30);
  c.chunk_size = 3u << 20;
  ck_assert_int_eq(pol_create(&c, &p), -EINVAL);
  pol_config_default(&c, POL_PREDICT, 1u << 30);
  c.evict_watermark = 101;
  ck_assert_int_eq(pol_create(&c, &p), -EINVAL);
  pol_config_default(&c, (pol_kind_t)99, 1u << 30);
  ck_assert_int_eq(pol_create(&c, &p), -EINVAL);
  ck_assert_int_eq(pol_kind_parse("oracle"), POL_ORACLE);
  ck_assert_int_eq(pol_kind_parse("lru"), -EINVAL);
  ck_assert_str_eq(pol_kind_name(POL_DEEPUM), "deepum");

  pol_config_default(&c, POL_PREDICT, 4u << 20); /* two chunks */
  ck_assert_int_eq(pol_create(&c, &p), 0);
  ck_assert_int_eq(pol_alloc(p, 1, 0, 0, 0, 0), -EINVAL);
  ck_assert_int_eq(pol_alloc(p, 1, 0, 6u << 20, 0, 0), POL_TIER_MANAGED);
  ck_assert_int_eq(pol_alloc(p, 1, 0, 1, 0, 0), -EEXIST);
  ck_assert_int_eq(pol_free(p, 9, 0, NULL), -ENOENT);
  ck_assert_int_eq(pol_chunk_state(p, 9, 0, 1, POL_STATE_HOST), -ENOENT);
  ck_assert_int_eq(pol_chunk_state(p, 1, 2, 2, POL_STATE_HOST), -EINVAL);
  ck_assert_int_eq(pol_chunk_state(p, 1, 0, 1, 7), -EINVAL);
  ck_assert_int_eq(pol_set_future(p, future, NULL), -EINVAL);
  pol_action_t one[1];
  pol_plan_t plan = {.actions = one, .cap = 0};
  pol_range_t r[2] = {{.alloc_id = 1, .first = 0, .count = 1},
                      {.alloc_id = 1, .first = 2, .count = 1}};
  pol_launch_t l = {.kernel = 1, .ranges = r, .nranges = 2};
  ck_assert_int_eq(pol_launch(p, &l, &plan), -EINVAL);
  plan.cap = 1; /* two separate prefetches do not fit: the plan says so */
  ck_assert_int_eq(pol_launch(p, &l, &plan), 1);
  ck_assert_int_eq(plan.truncated, 1);
  ck_assert_int_eq(one[0].op, POL_OP_PREFETCH);
  ck_assert_int_eq(one[0].when, POL_REQUIRED);
  ck_assert_int_eq(pol_chunk_state(p, 1, 0, 3, POL_STATE_HOST), 0);
  pol_stats_t st;
  pol_get_stats(p, &st);
  ck_assert_uint_eq(st.resident, 0);
  pol_destroy(p);
  pol_destroy(NULL);
}
END_TEST

// ---- #11: executor-facing rules, growing caches, room for coming allocations ----

/* A read-only chunk the plan brought from the host leaves clean (no
 * write-back); one written since, or faulted in, does not. */
static uint8_t came_up_clean[FX_IDS][FX_CHUNKS];

static void check_flags(struct fx *f, const pol_launch_t *l, int n) {
  for (int i = 0; i < n; i++) {
    const pol_action_t *a = &f->act[i];
    for (uint32_t k = a->index; a->op != POL_OP_ADVISE_READ_MOSTLY && k < a->index + a->count;
         k++) {
      if (a->op == POL_OP_EVICT) {
        ck_assert_int_eq(!!(a->flags & POL_ACT_CLEAN), came_up_clean[a->alloc_id][k]);
      } else if (a->op == POL_OP_PREFETCH) {
        came_up_clean[a->alloc_id][k] = f->data[a->alloc_id][k] && !(a->flags & POL_ACT_NODATA);
      }
    }
  }
  for (uint32_t i = 0; i < l->nranges; i++)
    for (uint32_t k = l->ranges[i].first; k < l->ranges[i].first + l->ranges[i].count; k++)
      if (l->ranges[i].mode != POL_ACCESS_READ) came_up_clean[l->ranges[i].alloc_id][k] = 0;
}

static int launch_checked(struct fx *f, uint64_t kernel, const pol_range_t *r, uint32_t nr) {
  int n = fx_launch(f, kernel, 1, r, nr);
  pol_launch_t l = {.ranges = r, .nranges = nr};
  check_flags(f, &l, n);
  return n;
}

START_TEST(clean_evictions_marked) {
  memset(came_up_clean, 0, sizeof came_up_clean);
  fx_init(&F, POL_PREDICT, 6);
  for (uint64_t id = 1; id <= 10; id++) { /* ten one-chunk tensors, room for six */
    fx_alloc(&F, id, 1);
    pol_range_t r = {.alloc_id = id, .count = 1, .mode = POL_ACCESS_WRITE};
    launch_checked(&F, 1, &r, 1);
  }
  uint64_t clean = 0, dirty = 0;
  for (int it = 0; it < 8; it++)
    for (uint64_t id = 1; id <= 10; id++) {
      /* odd tensors are only read; even ones are updated in place */
      pol_range_t r = {
          .alloc_id = id, .count = 1, .mode = id % 2 ? POL_ACCESS_READ : POL_ACCESS_RW};
      int n = launch_checked(&F, 10 + id, &r, 1);
      for (int i = 0; i < n; i++)
        if (F.act[i].op == POL_OP_EVICT) {
          if (F.act[i].flags & POL_ACT_CLEAN) {
            clean += F.act[i].count;
            ck_assert_uint_eq(F.act[i].alloc_id % 2, 1);
          } else {
            dirty += F.act[i].count;
          }
        }
    }
  ck_assert_uint_gt(clean, 8); /* read-only tensors cycle through and leave clean */
  ck_assert_uint_gt(dirty, 8);
  fx_fini(&F);
}
END_TEST

START_TEST(write_only_ranges_never_prefetched) {
  fx_init(&F, POL_PREDICT, 8);
  enum { OUT = 1, W0 = 2 };
  fx_alloc(&F, OUT, 2);
  for (uint64_t id = W0; id < W0 + 6; id++) {
    fx_made(&F, id, 2);
  }
  uint64_t nodata = 0;
  for (int it = 0; it < 6; it++) {
    for (uint64_t id = W0; id < W0 + 6; id++) {
      /* each layer reads its weights; the last one overwrites OUT entirely */
      pol_range_t r[2] = {{.alloc_id = id, .count = 2, .mode = POL_ACCESS_READ},
                          {.alloc_id = OUT, .count = 2, .mode = POL_ACCESS_WRITE}};
      int n = fx_launch(&F, 20 + id, 1, r, id == W0 + 5 ? 2 : 1);
      for (int i = 0; i < n; i++) {
        const pol_action_t *a = &F.act[i];
        if (a->op != POL_OP_PREFETCH || a->alloc_id != OUT) continue;
        ck_assert_msg(a->when == POL_REQUIRED, "iteration %d: write-only chunks prefetched ahead",
                      it);
        ck_assert(a->flags & POL_ACT_NODATA);
        nodata += a->count;
      }
    }
    pol_range_t r = {.alloc_id = OUT, .count = 2, .mode = POL_ACCESS_READ}; /* the result */
    fx_launch(&F, 30, 1, &r, 1);
  }
  ck_assert_uint_gt(nodata, 0); /* OUT was pushed out between uses: it came back without data */
  fx_fini(&F);
}
END_TEST

/* A launch whose 48 chunks are all away, on a device full of 64 chunks of
 * other data (not in order of use): its room is made first, as runs of
 * evictions, and its chunks come up in one action per range, so that the
 * required part fits a small plan (interleaved, evict-prefetch-evict...,
 * it took two actions a chunk: 128 of libvx's then held 64 chunks, and
 * the rest faulted behind the policy's back). */
START_TEST(required_part_is_compact) {
  fx_init(&F, POL_PREDICT, 64);
  enum { BIG = 1, SMALL0 = 2 };
  for (uint64_t id = SMALL0; id < SMALL0 + 16; id++) { /* 16 x 4 chunks fill the device */
    fx_made(&F, id, 4);
  }
  for (uint64_t id = SMALL0 + 15; id >= SMALL0; id--) { /* used last to first */
    pol_range_t r = {.alloc_id = id, .count = 4, .mode = POL_ACCESS_READ};
    fx_launch(&F, 2, 1, &r, 1);
  }
  fx_alloc(&F, BIG, 48);
  pol_range_t r = {.alloc_id = BIG, .count = 48, .mode = POL_ACCESS_WRITE};
  int n = fx_launch(&F, 3, 1, &r, 1); /* fx_launch: all 48 resident after the plan */
  int evictions = 0, prefetches = 0, first_prefetch = -1, last_evict = -1;
  uint32_t up = 0, down = 0;
  for (int i = 0; i < n; i++) {
    const pol_action_t *a = &F.act[i];
    if (a->when != POL_REQUIRED) continue;
    if (a->op == POL_OP_EVICT) evictions++, down += a->count, last_evict = i;
    if (a->op == POL_OP_PREFETCH) {
      prefetches++, up += a->count;
      if (first_prefetch < 0) first_prefetch = i;
    }
  }
  ck_assert_uint_eq(up, 48);
  ck_assert_uint_eq(down, 48);
  ck_assert_int_eq(prefetches, 1);
  ck_assert_int_le(evictions, 16); /* runs: at most one per small tensor */
  ck_assert_int_lt(last_evict, first_prefetch);
  fx_fini(&F);
}
END_TEST

/* Decode with a KV cache per layer re-made one chunk bigger each token
 * (torch.cat: allocate, copy the old in and append, free the old). */
START_TEST(growing_kv_cache_keeps_matching) {
  enum { LAYERS = 4, WCH = 2, KV0 = 8, TOKENS = 16 };
  fx_init(&F, POL_PREDICT, 56); /* weights 8 + caches 4 x (9..24): up to twice the room */
  uint64_t id = 1, w[LAYERS], kv[LAYERS], x = id++;
  fx_alloc(&F, x, 1);
  for (int l = 0; l < LAYERS; l++) {
    w[l] = id++;
    fx_made(&F, w[l], WCH);
    kv[l] = id++;
    fx_alloc(&F, kv[l], KV0);
    pol_range_t r2 = {.alloc_id = kv[l], .count = KV0, .mode = POL_ACCESS_WRITE};
    fx_launch(&F, 2, 1, &r2, 1);
  }
  pol_stats_t st0 = {0};
  for (uint32_t t = 0; t < TOKENS; t++) {
    if (t == 4) {
      fx_reset_counts(&F);
      pol_get_stats(F.p, &st0);
    }
    for (int l = 0; l < LAYERS; l++) {
      uint32_t n = KV0 + t + 1;
      uint64_t grown = id++;
      fx_alloc(&F, grown, n);
      pol_range_t cat[2] = {{.alloc_id = kv[l], .count = n - 1, .mode = POL_ACCESS_READ},
                            {.alloc_id = grown, .count = n, .mode = POL_ACCESS_WRITE}};
      fx_launch(&F, 3, 1, cat, 2);
      fx_free(&F, kv[l]);
      kv[l] = grown;
      pol_range_t attn[3] = {{.alloc_id = w[l], .count = WCH, .mode = POL_ACCESS_READ},
                             {.alloc_id = x, .count = 1, .mode = POL_ACCESS_RW},
                             {.alloc_id = kv[l], .count = n, .mode = POL_ACCESS_READ}};
      fx_launch(&F, 4, 1, attn, 3);
    }
  }
  pol_stats_t st;
  pol_get_stats(F.p, &st);
  /* after warm-up every launch is matched, and the old caches are fetched
   * ahead: the grown copy inherits the old one's place in the history */
  ck_assert_uint_eq(st.launches_matched - st0.launches_matched, st.launches - st0.launches);
  ck_assert_msg(fx_coverage(&F) >= 0.9, "coverage %.3f", fx_coverage(&F));
  ck_assert_msg(F.required_host <= F.used / 10, "required %llu of %llu",
                (unsigned long long)F.required_host, (unsigned long long)F.used);
  fx_fini(&F);
}
END_TEST

/* Decode over a layered model whose KV blocks are re-placed in recycled
 * segments every token (the caching allocator's way): a layer's cache lands
 * where another layer's was, so a launch's ranges look like another layer's,
 * and the launches that touch only activations look alike in every layer.
 * The predictor must keep the lag of whole tokens (the period) through them:
 * then the next layers' weights are fetched ahead, not at their launch. */
START_TEST(recycled_kv_blocks_keep_the_period) {
  enum { LAYERS = 8, WCH = 2, POOL = 5, TOKENS = 24 };
  fx_init(&F, POL_PREDICT, 16); /* weights 16 + activations 1 + pool 5 do not fit */
  uint64_t id = 1, w[LAYERS], pool[POOL], x = id++;
  fx_alloc(&F, x, 1);
  fx_weights(&F, w, LAYERS, WCH, &id);
  for (int i = 0; i < POOL; i++)
    fx_alloc(&F, pool[i] = id++, 1);
  uint64_t w_used = 0, w_covered = 0;
  for (uint32_t t = 0; t < TOKENS; t++) {
    if (t == TOKENS / 2) fx_reset_counts(&F);
    for (uint32_t l = 0; l < LAYERS; l++) {
      pol_range_t norm = {.alloc_id = x, .count = 1, .mode = POL_ACCESS_RW};
      fx_launch(&F, 10, 1, &norm, 1);
      uint64_t u0 = F.used, c0 = F.covered;
      pol_range_t mm[2] = {{.alloc_id = x, .count = 1, .mode = POL_ACCESS_RW},
                           {.alloc_id = w[l], .count = WCH, .mode = POL_ACCESS_READ}};
      fx_launch(&F, 11, 1, mm, 2);
      if (t >= TOKENS / 2) w_used += F.used - u0, w_covered += F.covered - c0;
      fx_launch(&F, 13, 1, &norm, 1);
      uint32_t b = (l * 3 + t) % POOL;
      pol_range_t kv[3] = {{.alloc_id = pool[b], .count = 1, .mode = POL_ACCESS_WRITE},
                           {.alloc_id = pool[(b + 1) % POOL], .count = 1, .mode = POL_ACCESS_READ},
                           {.alloc_id = x, .count = 1, .mode = POL_ACCESS_READ}};
      fx_launch(&F, 12, 1, kv, 3);
      fx_launch(&F, 10, 1, &norm, 1);
    }
  }
  /* a matmul reaches 3 chunks, x always resident: 1/3 if no weight is
   * fetched ahead (the lag lost at every cache launch), 0.72 when kept */
  ck_assert_msg(w_covered * 10 >= w_used * 6, "matmul coverage %llu of %llu",
                (unsigned long long)w_covered, (unsigned long long)w_used);
  fx_fini(&F);
}
END_TEST

/* Weights cycle through a device too small for them; a scratch tensor is made
 * and freed every iteration.  Once the loop is learned, no plan before the
 * scratch's first launch prefetches ahead a chunk used only after it into the
 * room the scratch will take, nothing prefetched ahead is evicted unused, and
 * the room has mostly been made before the scratch's launch. */
START_TEST(no_prefetch_into_room_of_recurring_allocations) {
  enum { NW = 16, WCH = 1, SCH = 4, AT = 8 };
  fx_init(&F, POL_PREDICT, 12);
  uint64_t id = 1, w[NW];
  fx_weights(&F, w, NW, WCH, &id);
  static uint8_t pending[FX_IDS][FX_CHUNKS];
  memset(pending, 0, sizeof pending);
  uint64_t wasted = 0, into_room = 0, req_evict = 0;
  for (int it = 0; it < 8; it++) {
    uint64_t scratch = 0;
    for (int l = 0; l < NW; l++) {
      pol_range_t r[2] = {{.alloc_id = w[l], .count = WCH, .mode = POL_ACCESS_READ}};
      uint32_t nr = 1;
      if (l == AT) { /* mid-iteration: scratch made and written */
        scratch = id++;
        fx_alloc(&F, scratch, SCH);
        r[nr++] = (pol_range_t){.alloc_id = scratch, .count = SCH, .mode = POL_ACCESS_WRITE};
      } else if (l == AT + 1) {
        r[nr++] = (pol_range_t){.alloc_id = scratch, .count = SCH, .mode = POL_ACCESS_READ};
      }
      int n = fx_launch(&F, 10 + l, 1, r, nr);
      int late = 0; /* this plan prefetched ahead a weight used after the scratch */
      for (int i = 0; i < n; i++) {
        const pol_action_t *a = &F.act[i];
        for (uint32_t k = a->index; k < a->index + a->count; k++) {
          if (a->op == POL_OP_PREFETCH && a->when == POL_AHEAD) {
            pending[a->alloc_id][k] = 1;
            late |= a->alloc_id > w[AT] && a->alloc_id <= w[NW - 1];
          }
          if (a->op == POL_OP_EVICT && pending[a->alloc_id][k] && it >= 2) wasted++;
          if (a->op == POL_OP_EVICT) pending[a->alloc_id][k] = 0;
        }
        if (it >= 2 && l == AT && a->op == POL_OP_EVICT && a->when == POL_REQUIRED)
          req_evict += a->count;
      }
      if (it >= 2 && l < AT && late && F.resident + SCH > F.cap) into_room++;
      for (uint32_t i = 0; i < nr; i++)
        for (uint32_t k = 0; k < r[i].count; k++)
          pending[r[i].alloc_id][k] = 0;
      if (l == AT + 1) fx_free(&F, scratch);
    }
  }
  ck_assert_uint_eq(wasted, 0);
  ck_assert_uint_eq(into_room, 0);
  /* the room is mostly free when the scratch is first written (without
   * keeping it, all 6 x 4 of its chunks needed a REQUIRED eviction) */
  ck_assert_msg(req_evict <= 6 * SCH / 4, "%llu REQUIRED evictions", (unsigned long long)req_evict);
  fx_fini(&F);
}
END_TEST

/* Backward passes free an activation one launch after its last use (cnn:
 * a[l+1] is dead after backward l+1 and freed after backward l).  Evicting
 * it to make room for a prefetch writes back data nobody reads: the room
 * comes back by itself one launch later, so the prefetch waits for it. */
START_TEST(room_a_free_returns_is_not_bought_with_a_write_back) {
  enum { L = 8, WCH = 2, ACH = 3 };
  fx_init(&F, POL_PREDICT, 16);
  uint64_t id = 1, w[L];
  fx_weights(&F, w, L, WCH, &id);
  static uint8_t down[FX_IDS][FX_CHUNKS]; /* evicted and not used since */
  memset(down, 0, sizeof down);
  uint64_t dead = 0, evicted = 0;
  for (int it = 0; it < 8; it++) {
    uint64_t a[L];
    for (int k = 0; k < 2 * L; k++) {
      int l = k < L ? k : 2 * L - 1 - k;
      pol_range_t r[3];
      uint32_t nr = 0;
      if (k < L) {
        a[l] = id++;
        fx_alloc(&F, a[l], ACH);
        r[nr++] = (pol_range_t){.alloc_id = w[l], .count = WCH, .mode = POL_ACCESS_READ};
        r[nr++] = (pol_range_t){.alloc_id = a[l], .count = ACH, .mode = POL_ACCESS_WRITE};
        if (l) r[nr++] = (pol_range_t){.alloc_id = a[l - 1], .count = ACH, .mode = POL_ACCESS_READ};
      } else {
        r[nr++] = (pol_range_t){.alloc_id = w[l], .count = WCH, .mode = POL_ACCESS_RW};
        r[nr++] = (pol_range_t){.alloc_id = a[l], .count = ACH, .mode = POL_ACCESS_READ};
      }
      int n = fx_launch(&F, 10 + (uint64_t)k, 1, r, nr);
      for (int i = 0; i < n; i++)
        for (uint32_t c = F.act[i].index; F.act[i].op == POL_OP_EVICT && c < F.act[i].index + F.act[i].count; c++) {
          down[F.act[i].alloc_id][c] = 1;
          evicted += it >= 2;
        }
      for (uint32_t i = 0; i < nr; i++)
        for (uint32_t c = 0; c < r[i].count; c++)
          down[r[i].alloc_id][c] = 0;
      if (k >= L && l + 1 < L) { /* a[l+1]'s last use was the launch before */
        for (uint32_t c = 0; c < ACH; c++)
          dead += it >= 2 && down[a[l + 1]][c];
        fx_free(&F, a[l + 1]);
      }
    }
    fx_free(&F, a[0]);
  }
  ck_assert_uint_gt(evicted, 0); /* it does not fit: something moves */
  ck_assert_msg(dead == 0, "%llu of %llu evicted chunks were freed unread",
                (unsigned long long)dead, (unsigned long long)evicted);
  fx_fini(&F);
}
END_TEST

/* A backward pass making gradients as big as the activations it reads
 * (cnn's conv_bwd), early layers the biggest: each gradient's room is a
 * write only, due when the device is full of what the next launches read,
 * and the activation freed a launch after its last use is the chunk MIN
 * would give up for it.  That room comes back by itself and counts for the
 * gradient; the rest is evicted ahead, so that most evictions are not left
 * to the gradient's launch (REQUIRED: it stalls on their write-backs).
 * Without the count, 56 of 63 evictions were REQUIRED; with it 35 of 77. */
START_TEST(room_a_free_returns_counts_toward_new_allocations) {
  enum { L = 4, WCH = 1, ACH = 8 };
  fx_init(&F, POL_PREDICT, 20);
  uint64_t id = 1, w[L];
  fx_weights(&F, w, L, WCH, &id);
  uint64_t required = 0, evicted = 0;
  for (int it = 0; it < 10; it++) {
    uint64_t a[L + 1], g = 0;
    uint32_t sz[L + 1];
    for (int l = 0; l <= L; l++)
      sz[l] = ACH >> l ? ACH >> l : 1;
    a[0] = id++;
    fx_alloc(&F, a[0], sz[0]);
    for (int k = 0; k < 2 * L; k++) {
      int l = k < L ? k : 2 * L - 1 - k;
      pol_range_t r[4];
      uint32_t nr = 0;
      if (k < L) {
        a[l + 1] = id++;
        fx_alloc(&F, a[l + 1], sz[l + 1]);
        r[nr++] = (pol_range_t){.alloc_id = w[l], .count = WCH, .mode = POL_ACCESS_READ};
        r[nr++] = (pol_range_t){.alloc_id = a[l], .count = sz[l], .mode = POL_ACCESS_READ};
        r[nr++] = (pol_range_t){.alloc_id = a[l + 1], .count = sz[l + 1], .mode = POL_ACCESS_WRITE};
      } else {
        uint64_t gp = id++;
        fx_alloc(&F, gp, sz[l]);
        r[nr++] = (pol_range_t){.alloc_id = w[l], .count = WCH, .mode = POL_ACCESS_RW};
        r[nr++] = (pol_range_t){.alloc_id = a[l], .count = sz[l], .mode = POL_ACCESS_READ};
        if (g) r[nr++] = (pol_range_t){.alloc_id = g, .count = sz[l + 1], .mode = POL_ACCESS_READ};
        r[nr++] = (pol_range_t){.alloc_id = gp, .count = sz[l], .mode = POL_ACCESS_WRITE};
      }
      int n = fx_launch(&F, 10 + (uint64_t)k, 1, r, nr);
      for (int i = 0; i < n; i++)
        if (F.act[i].op == POL_OP_EVICT && it >= 3) {
          evicted += F.act[i].count;
          required += F.act[i].when == POL_REQUIRED ? F.act[i].count : 0;
        }
      if (k >= L) {
        if (g) fx_free(&F, g); /* the gradient it read */
        g = r[nr - 1].alloc_id;
        fx_free(&F, a[l + 1]); /* a launch after its last use */
      }
    }
    fx_free(&F, g);
    fx_free(&F, a[0]);
  }
  ck_assert_uint_gt(evicted, 0); /* it does not fit: something moves */
  ck_assert_msg(required * 5 < evicted * 3, "%llu of %llu evictions REQUIRED",
                (unsigned long long)required, (unsigned long long)evicted);
  fx_fini(&F);
}
END_TEST

/* A launch larger than the device (8 chunks): it reads A (4, pushed to the
 * host by B) and B (8, resident) and writes C (4), 16 chunks.  A, only
 * read and used by nothing after, is read in place (no transfer, no room)
 * instead of coming up into room nobody has; a launch that fits brings it
 * up; a range of unknown mode may be written and is never read in place;
 * and once the loop is learned, A's next use is predicted and it comes up
 * as far as room goes. */
static int in_place_of(int n, uint64_t id) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (F.act[i].op == POL_OP_READ_IN_PLACE) {
      ck_assert_uint_eq(F.act[i].alloc_id, id);
      k += (int)F.act[i].count;
    }
  return k;
}

static int big_launch(uint32_t mode_a) {
  pol_range_t r[3] = {{.alloc_id = 1, .count = 4, .mode = mode_a},
                      {.alloc_id = 2, .count = 8, .mode = POL_ACCESS_READ},
                      {.alloc_id = 3, .count = 4, .mode = POL_ACCESS_WRITE}};
  return fx_launch(&F, 30, 1, r, 3);
}

/* A (4 chunks) and B (8) made, C (4) allocated, on an 8-chunk device. */
static void big_setup(void) {
  fx_init(&F, POL_PREDICT, 8);
  fx_made(&F, 1, 4);
  fx_made(&F, 2, 8);
  fx_alloc(&F, 3, 4);
}

static void push_a_out(void) {
  pol_range_t r = {.alloc_id = 2, .count = 8, .mode = POL_ACCESS_READ};
  fx_launch(&F, 31, 1, &r, 1);
  for (uint32_t k = 0; k < 4; k++)
    ck_assert_int_eq(F.res[1][k], 0);
}

START_TEST(launch_past_the_device_reads_in_place) {
  big_setup();
  push_a_out();
  ck_assert_int_eq(in_place_of(big_launch(POL_ACCESS_READ), 1), 4);
  ck_assert_uint_eq(F.in_place, 4);
  pol_stats_t st;
  pol_get_stats(F.p, &st);
  ck_assert_uint_eq(st.chunks_in_place, 4);
  for (uint32_t k = 0; k < 4; k++)
    ck_assert_int_eq(F.res[1][k], 0); /* left where it was */
  /* it fits: A comes up */
  pol_range_t r = {.alloc_id = 1, .count = 4, .mode = POL_ACCESS_READ};
  int n = fx_launch(&F, 32, 1, &r, 1);
  ck_assert_int_eq(in_place_of(n, 1), 0);
  for (uint32_t k = 0; k < 4; k++)
    ck_assert_int_eq(F.res[1][k], 1);
  fx_fini(&F);

  /* unknown mode: A comes up as far as room goes, never read in place */
  big_setup();
  push_a_out();
  ck_assert_int_eq(in_place_of(big_launch(POL_ACCESS_UNKNOWN), 1), 0);
  ck_assert_uint_eq(F.in_place, 0);
  fx_fini(&F);

  /* a loop: the big launch, then A read again; learned, A's next use is
   * predicted at the big launch and A is not read in place there */
  big_setup();
  int first = 0, last = 0;
  for (int it = 0; it < 4; it++) {
    push_a_out();
    int k = in_place_of(big_launch(POL_ACCESS_READ), 1);
    if (it == 0) first = k;
    last = k;
    fx_launch(&F, 32, 1, &r, 1);
  }
  ck_assert_int_eq(first, 4); /* nothing predicted yet */
  ck_assert_int_eq(last, 0);
  fx_fini(&F);
}
END_TEST

int main(void) {
  Suite *s = suite_create("policy_predict");
  TCase *t = tcase_create("predict");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, periodic_learned_in_one_iteration);
  tcase_add_test(t, ahead_prefetches_evicted_unused_count_as_wasted);
  tcase_add_test(t, pinned_allocation_planned_no_more);
  tcase_add_test(t, ahead_limit_backs_off_on_lost_bets);
  tcase_add_test(t, demand_learns_nothing);
  tcase_add_test(t, phase_change_recovered);
  tcase_add_test(t, two_streams_interleaved);
  tcase_add_test(t, prefetches_spare_what_the_last_launches_used);
  tcase_add_test(t, random_traces_keep_the_contract);
  tcase_add_test(t, oracle_sees_the_future);
  tcase_add_test(t, waiting_prefetch_does_not_hold_up_room_for_writes);
  tcase_add_test(t, deepum_prefetches_stable_addresses);
  tcase_add_test(t, read_mostly_advised_only_when_never_written);
  tcase_add_test(t, freed_chunks_dropped_not_written_back);
  tcase_add_test(t, evictions_spill_to_nvme_past_the_host_budget);
  tcase_add_test(t, static_placement);
  tcase_add_test(t, api_errors);
  tcase_add_test(t, clean_evictions_marked);
  tcase_add_test(t, write_only_ranges_never_prefetched);
  tcase_add_test(t, growing_kv_cache_keeps_matching);
  tcase_add_test(t, no_prefetch_into_room_of_recurring_allocations);
  tcase_add_test(t, recycled_kv_blocks_keep_the_period);
  tcase_add_test(t, required_part_is_compact);
  tcase_add_test(t, room_a_free_returns_is_not_bought_with_a_write_back);
  tcase_add_test(t, room_a_free_returns_counts_toward_new_allocations);
  tcase_add_test(t, native_room_made_before_the_allocation);
  tcase_add_test(t, held_native_room_is_not_planned_into);
  tcase_add_test(t, demand_budget_evicts_lru_for_faults);
  tcase_add_test(t, launch_past_the_device_reads_in_place);
  suite_add_tcase(s, t);
  return vx_check_run(s, 1);
}
