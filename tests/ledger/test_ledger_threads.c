/* test_ledger_threads.c: the budget ledger under threads of one process.
 * Each thread holds its own handle (own slot); totals must stay exact (TSan). */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "ledger_test_util.h"

#define NTHREADS 8

struct arg {
  vx_ledger_t *l;
  uint64_t got;
  uint64_t share;
  atomic_int *go;
};

/* One unit at a time until the ledger is full. */
static void *fill(void *p) {
  struct arg *a = p;
  while (!atomic_load(a->go)) {
  }
  while (ledger_reserve(a->l, 1) == 0)
    a->got++;
  a->share = ledger_share(a->l);
  return NULL;
}

START_TEST(test_threads_never_exceed) {
  uint64_t cap = 8000;
  struct arg a[NTHREADS];
  pthread_t t[NTHREADS];
  atomic_int go = 0;
  for (int i = 0; i < NTHREADS; i++) {
    a[i] = (struct arg){ledger_open_key(lt_key("thr"), cap, NULL, 0), 0, 0, &go};
    ck_assert(ledger_is_shared(a[i].l));
    ck_assert_int_eq(pthread_create(&t[i], NULL, fill, &a[i]), 0);
  }
  atomic_store(&go, 1);
  uint64_t total = 0;
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(t[i], NULL);
    ck_assert_int_eq(a[i].got, a[i].share);
    total += a[i].got;
  }
  ck_assert_int_eq(total, cap);
  ck_assert_int_eq(ledger_others(a[0].l), cap - a[0].got);
  for (int i = 0; i < NTHREADS; i++)
    ledger_close(a[i].l);
  ck_assert_int_eq(ledger_unlink_key(lt_key("thr")), 0);
}
END_TEST

static void count(const ledger_entry_t *e, void *arg) {
  (void)e;
  ++*(int *)arg;
}

/* Reserve/release pairs, with listing and querying from the same threads:
 * every pair returns what it took, so the end state is empty. */
static void *churn(void *p) {
  struct arg *a = p;
  for (unsigned k = 0; k < 3000; k++) {
    uint64_t b = 1 + k % 97;
    if (ledger_reserve(a->l, b) == 0) {
      a->got++;
      if (ledger_release(a->l, b) != 0) return (void *)1;
    }
    if (k % 100 == 0) {
      int n = 0;
      ledger_list(a->l, count, &n);
      if (n != NTHREADS) return (void *)2;
      if (ledger_others(a->l) > 1000) return (void *)3;
    }
  }
  return NULL;
}

START_TEST(test_threads_churn_balanced) {
  struct arg a[NTHREADS];
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    a[i] = (struct arg){ledger_open_key(lt_key("churn"), 1000, NULL, 0), 0, 0, NULL};
    ck_assert(ledger_is_shared(a[i].l));
  }
  for (int i = 0; i < NTHREADS; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, churn, &a[i]), 0);
  for (int i = 0; i < NTHREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    ck_assert_ptr_null(r);
    ck_assert_int_gt(a[i].got, 0);
  }
  for (int i = 0; i < NTHREADS; i++)
    ck_assert_int_eq(ledger_share(a[i].l), 0);
  ck_assert_int_eq(ledger_others(a[0].l), 0);
  for (int i = 0; i < NTHREADS; i++)
    ledger_close(a[i].l);
  ck_assert_int_eq(ledger_unlink_key(lt_key("churn")), 0);
}
END_TEST

int main(void) {
  lt_base = getpid();
  Suite *s = suite_create("ledger_threads");
  TCase *t = tcase_create("threads");
  tcase_set_timeout(t, 30);
  tcase_add_test(t, test_threads_never_exceed);
  tcase_add_test(t, test_threads_churn_balanced);
  suite_add_tcase(s, t);
  return vx_check_run(s, 1);
}
