/* Unit test of vx_secure_exec() (core/secure.c): 0 in an ordinary
 * process, and it agrees with the kernel's AT_SECURE entry read directly. */
#include <check.h>

#include "vx_check.h"
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "secure.h"

/* AT_SECURE straight from /proc/self/auxv, not through getauxval(). */
static long auxv_secure(void) {
  FILE *f = fopen("/proc/self/auxv", "rb");
  if (!f) return -1;
  Elf64_auxv_t a;
  long v = -1;
  while (fread(&a, sizeof a, 1, f) == 1 && a.a_type != AT_NULL)
    if (a.a_type == AT_SECURE) v = (long)a.a_un.a_val;
  fclose(f);
  return v;
}

START_TEST(ordinary_process_is_not_secure) {
  /* This test runs with its real and effective ids equal (not setuid), so
   * the kernel did not set AT_SECURE.  A setuid run (AT_SECURE = 1) needs a
   * binary owned by another user with the set-user-id bit, i.e. root to set
   * up; the lead's init.c check makes vx pass-through there. */
  ck_assert_int_eq(getuid(), geteuid());
  ck_assert_int_eq(getgid(), getegid());
  ck_assert_int_eq(vx_secure_exec(), 0);
  long direct = auxv_secure();
  if (direct >= 0) ck_assert_int_eq(vx_secure_exec(), direct != 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("secure");
  TCase *tc = tcase_create("at_secure");
  tcase_add_test(tc, ordinary_process_is_not_secure);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
