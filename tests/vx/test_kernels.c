/* test_kernels.c: the CUkernel hint table (tiers/kernels.c): kernels and
 * the functions of kernels are told apart, unknown handles are neither, a
 * full neighbourhood drops records instead of failing, and threads noting
 * at once lose nothing. */
#include <check.h>

#include "vx_check.h"
#include <pthread.h>
#include <stdint.h>

#include "kernels.h"

#define H(x) ((void *)(uintptr_t)(x))

START_TEST(kernels_and_functions) {
  kern_note((CUkernel)H(0x1000));
  kern_note_function((CUfunction)H(0x2000), (CUkernel)H(0x3000));
  ck_assert_int_eq(kern_is_kernel(H(0x1000)), 1);
  ck_assert_int_eq(kern_is_kernel(H(0x3000)), 1);
  ck_assert_int_eq(kern_is_kernel(H(0x2000)), 0);
  ck_assert_ptr_eq((void *)kern_of_function((CUfunction)H(0x2000)), H(0x3000));
  ck_assert_ptr_null((void *)kern_of_function((CUfunction)H(0x1000)));
  ck_assert_int_eq(kern_is_kernel(H(0x4000)), 0);
  ck_assert_int_eq(kern_is_kernel(NULL), 0);
  kern_note(NULL);                /* ignored */
  kern_note((CUkernel)H(0x1000)); /* again: still one */
  ck_assert_int_eq(kern_is_kernel(H(0x1000)), 1);
  /* A driver whose CUfunction is the CUkernel's own address. */
  kern_note_function((CUfunction)H(0x5000), (CUkernel)H(0x5000));
  ck_assert_int_eq(kern_is_kernel(H(0x5000)), 1);
}
END_TEST

START_TEST(full_table_drops_records) {
  /* Far more handles than slots: no crash, and the early ones stay known. */
  for (uintptr_t i = 1; i <= 40000; i++)
    kern_note((CUkernel)H(0x100000 + i * 64));
  int known = 0;
  for (uintptr_t i = 1; i <= 100; i++)
    known += kern_is_kernel(H(0x100000 + i * 64));
  ck_assert_int_eq(known, 100);
}
END_TEST

#define THREADS 4
#define PER 500

static void *noter(void *arg) {
  uintptr_t t = (uintptr_t)arg;
  for (uintptr_t i = 0; i < PER; i++)
    kern_note_function((CUfunction)H(0x7000000 + (t * PER + i) * 32),
                       (CUkernel)H(0x9000000 + (t * PER + i) * 32));
  return NULL;
}

START_TEST(threads) {
  pthread_t th[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++)
    pthread_create(&th[t], NULL, noter, (void *)t);
  for (int t = 0; t < THREADS; t++)
    pthread_join(th[t], NULL);
  for (uintptr_t i = 0; i < THREADS * PER; i++) {
    ck_assert_int_eq(kern_is_kernel(H(0x9000000 + i * 32)), 1);
    ck_assert_ptr_eq((void *)kern_of_function((CUfunction)H(0x7000000 + i * 32)),
                     H(0x9000000 + i * 32));
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("vx_kernels");
  TCase *tc = tcase_create("kernels");
  tcase_add_test(tc, kernels_and_functions);
  tcase_add_test(tc, threads);
  tcase_add_test(tc, full_table_drops_records);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 0);
}
