/* vx_check.h: the one Check runner every unit-test binary ends with, so the
 * suites differ only in their cases. */
#ifndef VX_TESTS_VX_CHECK_H
#define VX_TESTS_VX_CHECK_H

#include <check.h>

/* Runs suite s (its cases in forked children unless CK_FORK=no, or fork is
 * 0: one process, in order, when the cases share the library's globals).
 * Returns the process's exit status: 0 when every case passed, else 1.
 * Per-case timeouts scale with CK_TIMEOUT_MULTIPLIER, which CTest sets
 * (tests/vx_testing.cmake): they catch hangs, never slowness. */
static inline int vx_check_run(Suite *s, int fork) {
  SRunner *r = srunner_create(s);
  if (!fork) srunner_set_fork_status(r, CK_NOFORK);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

#endif
