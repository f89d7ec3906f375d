/* Unit tests of core/locks.h's rank check (built here with VX_LOCK_CHECK,
 * whatever the build type): nesting in LOCKS.md's order passes, and an
 * inversion aborts with one line naming both locks. */
#include <check.h>

#include "vx_check.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "locks.h"

#ifndef VX_LOCK_CHECK
#error "this test needs the check compiled in"
#endif

static pthread_mutex_t spill = PTHREAD_MUTEX_INITIALIZER, swap = PTHREAD_MUTEX_INITIALIZER,
                       slot = PTHREAD_MUTEX_INITIALIZER,
                       ex[3] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t order = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t reg = PTHREAD_RWLOCK_INITIALIZER;

/* LOCKS.md's nestings: 2 -> 3 -> 4 (released out of order), 8b -> 15 (read),
 * 0 -> 9 and 0 -> 2 -> 3 (a plan, then its issue), the EXEC family in
 * ascending index as the fork prepare takes it. */
START_TEST(nesting_in_order_passes) {
  vx_mutex_lock(&spill, VX_RANK_SPILL);
  vx_mutex_lock(&swap, VX_RANK_SWAP);
  vx_mutex_lock(&slot, VX_RANK_SLOT);
  ck_assert_int_eq(__builtin_popcountll(vx_lock_held), 3);
  vx_mutex_unlock(&swap, VX_RANK_SWAP); /* unlocks need not nest */
  vx_mutex_unlock(&slot, VX_RANK_SLOT);
  vx_mutex_lock(&slot, VX_RANK_SLOT); /* 2 -> 4 directly (nvme_slot_free) */
  vx_mutex_unlock(&slot, VX_RANK_SLOT);
  vx_mutex_unlock(&spill, VX_RANK_SPILL);
  ck_assert_uint_eq(vx_lock_held, 0);

  pthread_mutex_t pr = PTHREAD_MUTEX_INITIALIZER;
  vx_mutex_lock(&pr, VX_RANK_PTRREF);
  vx_rwlock_rdlock(&reg, VX_RANK_REG);
  vx_rwlock_unlock(&reg, VX_RANK_REG);
  vx_mutex_unlock(&pr, VX_RANK_PTRREF);

  for (int i = 0; i < 3; i++)
    vx_mutex_lock(&ex[i], VX_RANK_EXEC + i);
  for (int i = 2; i >= 0; i--)
    vx_mutex_unlock(&ex[i], VX_RANK_EXEC + i);
  ck_assert_uint_eq(vx_lock_held, 0);

  vx_mutex_lock(&order, VX_RANK_ORDER + 1);
  vx_mutex_lock(&ex[1], VX_RANK_EXEC + 1);
  vx_mutex_unlock(&ex[1], VX_RANK_EXEC + 1);
  vx_mutex_lock(&spill, VX_RANK_SPILL);
  vx_mutex_lock(&swap, VX_RANK_SWAP);
  vx_mutex_unlock(&swap, VX_RANK_SWAP);
  vx_mutex_unlock(&spill, VX_RANK_SPILL);
  vx_mutex_unlock(&order, VX_RANK_ORDER + 1);
  ck_assert_uint_eq(vx_lock_held, 0);

  /* the same lock again, once released, is fine */
  vx_rwlock_wrlock(&reg, VX_RANK_REG);
  vx_rwlock_unlock(&reg, VX_RANK_REG);
  vx_rwlock_wrlock(&reg, VX_RANK_REG);
  vx_rwlock_unlock(&reg, VX_RANK_REG);
  ck_assert_uint_eq(vx_lock_held, 0);
}
END_TEST

/* Runs fn in a child with stderr into a pipe; returns how it ended
 * (wait status) and its stderr in out. */
static int run_child(void (*fn)(void), char *out, size_t len) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    dup2(p[1], 2);
    close(p[0]);
    fn();
    _exit(0); /* not reached when the check aborts */
  }
  close(p[1]);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < len && (r = read(p[0], out + got, len - 1 - got)) > 0)
    got += (size_t)r;
  out[got] = 0;
  close(p[0]);
  int st = 0;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  return st;
}

static void reg_then_spill(void) { /* 15 then 2: spill.c must never run under reg_lock */
  vx_rwlock_rdlock(&reg, VX_RANK_REG);
  vx_mutex_lock(&spill, VX_RANK_SPILL);
}
static void slot_then_swap(void) { /* 4 then 3 */
  vx_mutex_lock(&spill, VX_RANK_SPILL);
  vx_mutex_lock(&slot, VX_RANK_SLOT);
  vx_mutex_lock(&swap, VX_RANK_SWAP);
}
static void spill_twice(void) { /* equal rank: the same lock again */
  vx_mutex_lock(&spill, VX_RANK_SPILL);
  vx_mutex_lock(&spill, VX_RANK_SPILL);
}
static void exec_descending(void) { /* the family out of index order */
  vx_mutex_lock(&ex[2], VX_RANK_EXEC + 2);
  vx_mutex_lock(&ex[1], VX_RANK_EXEC + 1);
}
static void order_under_exec(void) { /* a plan's lock, then its order: 9 then 0 */
  vx_mutex_lock(&ex[0], VX_RANK_EXEC);
  vx_mutex_lock(&order, VX_RANK_ORDER);
}
static void unlock_unheld(void) {
  vx_mutex_unlock(&swap, VX_RANK_SWAP);
}

static void expect_abort(void (*fn)(void), const char *want_a, const char *want_b) {
  char err[1024];
  int st = run_child(fn, err, sizeof err);
  ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "status %#x, stderr: %s", st, err);
  ck_assert_msg(!strncmp(err, "vx: lock order: ", 16), "%s", err);
  ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "one line: %s", err);
  ck_assert_msg(strstr(err, want_a), "%s lacks %s", err, want_a);
  if (want_b) ck_assert_msg(strstr(err, want_b), "%s lacks %s", err, want_b);
}

START_TEST(inversion_aborts_naming_both) {
  expect_abort(reg_then_spill,
               "taking tiers/spill_init.c:spill_g.mu (LOCKS.md row 2) while holding "
               "tiers/registry.c:reg_lock (LOCKS.md row 15)",
               NULL);
  expect_abort(slot_then_swap, "taking nvme/nvme_int.h:nvme_swap.lock (LOCKS.md row 3)",
               "while holding nvme/nvme_int.h:nvme_swap.slot_lock (LOCKS.md row 4)");
  expect_abort(spill_twice, "taking tiers/spill_init.c:spill_g.mu",
               "while holding tiers/spill_init.c:spill_g.mu");
  expect_abort(exec_descending, "taking tiers/exec.c:ex_dev[i].lock (LOCKS.md row 9, member 1)",
               "while holding tiers/exec.c:ex_dev[i].lock (LOCKS.md row 9, member 2)");
  expect_abort(order_under_exec, "taking tiers/exec.c:ex_dev[i].order (LOCKS.md row 0, member 0)",
               "while holding tiers/exec.c:ex_dev[i].lock (LOCKS.md row 9, member 0)");
  expect_abort(unlock_unheld, "releasing a lock not held: nvme/nvme_int.h:nvme_swap.lock", NULL);
}
END_TEST

/* The same sequences without an inversion exit normally in the child: the
 * harness itself does not abort. */
static void fine(void) {
  vx_mutex_lock(&spill, VX_RANK_SPILL);
  vx_mutex_lock(&swap, VX_RANK_SWAP);
  vx_mutex_unlock(&swap, VX_RANK_SWAP);
  vx_mutex_unlock(&spill, VX_RANK_SPILL);
}
START_TEST(child_harness_sees_a_clean_exit) {
  char err[256];
  int st = run_child(fine, err, sizeof err);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
  ck_assert_str_eq(err, "");
}
END_TEST

/* After a fork, the child's one thread holds nothing once the child
 * handlers ran (init.c calls vx_lock_forget_all). */
START_TEST(forget_all_empties_the_set) {
  vx_mutex_lock(&spill, VX_RANK_SPILL);
  vx_rwlock_wrlock(&reg, VX_RANK_REG);
  ck_assert_int_eq(__builtin_popcountll(vx_lock_held), 2);
  vx_lock_forget_all();
  ck_assert_uint_eq(vx_lock_held, 0);
  vx_mutex_lock(&slot, VX_RANK_SLOT); /* would be an inversion under reg */
  vx_mutex_unlock(&slot, VX_RANK_SLOT);
  pthread_rwlock_unlock(&reg); /* forgotten by the check, still locked */
  pthread_mutex_unlock(&spill);
}
END_TEST

int main(void) {
  Suite *s = suite_create("locks");
  TCase *tc = tcase_create("rank");
  tcase_add_test(tc, nesting_in_order_passes);
  tcase_add_test(tc, inversion_aborts_naming_both);
  tcase_add_test(tc, child_harness_sees_a_clean_exit);
  tcase_add_test(tc, forget_all_empties_the_set);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
