/* sim_driver.c: which driver release the simulator imitates.  The version
 * comes from SIMCUDA_DRIVER_VERSION or from the variant of libcuda.so.1
 * that was loaded (build/tests/simcuda/driver-V/, whose dynamic symbol table
 * holds only the entry points that release has); default 13000. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static const int known[] = {12000, 12020, 12040, 12080, 13000};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int version = 13000, bad;

/* The version a driver-V variant was linked for (sim_variant.c); 0 in the
 * full library. */
__attribute__((weak)) int sim_variant_version(void) {
  return 0;
}

static int is_known(long v) {
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (known[i] == v) return 1;
  return 0;
}

static void parse(void) {
  int variant = sim_variant_version();
  const char *s = getenv("SIMCUDA_DRIVER_VERSION");
  if (variant) version = variant;
  if (!s || !*s) return;
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || !is_known(v)) {
    sim_log("simcuda: bad SIMCUDA_DRIVER_VERSION='%s' (12000|12020|12040|12080|13000)", s);
    bad = 1;
    return;
  }
  /* A variant cannot pretend to be newer or older than its symbol table:
   * cuGetProcAddress and dlsym would disagree. */
  if (variant && v != variant) {
    sim_log("simcuda: SIMCUDA_DRIVER_VERSION=%ld, but this libcuda.so.1 is the driver-%d variant",
            v, variant);
    bad = 1;
    return;
  }
  version = (int)v;
}

int sim_driver_version(void) {
  pthread_once(&once, parse);
  return version;
}

int sim_driver_check(void) {
  pthread_once(&once, parse);
  return bad ? -EINVAL : 0;
}
