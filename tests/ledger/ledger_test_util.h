/* ledger_test_util.h: helpers shared by the ledger tests.
 * Unique segment keys per test, and a pipe to collect numbers from children. */
#ifndef VX_TESTS_LEDGER_UTIL_H
#define VX_TESTS_LEDGER_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "ledger.h"

/* The test binary's pid, set by main() before anything forks, so that a
 * test's children name the same segments as the test itself. */
static pid_t lt_base;

/* A key no other test (or real vx process) uses: "test-<pid>-<tag>". */
static inline const char *lt_key(const char *tag) {
  static char key[64];
  snprintf(key, sizeof key, "test-%d-%s", (int)lt_base, tag);
  return key;
}

/* Writes/reads one uint64_t through a pipe; 0 on success. */
static inline int lt_put(int fd, uint64_t v) {
  return write(fd, &v, sizeof v) == (ssize_t)sizeof v ? 0 : -1;
}
static inline int lt_get(int fd, uint64_t *v) {
  return read(fd, v, sizeof *v) == (ssize_t)sizeof *v ? 0 : -1;
}

#endif
