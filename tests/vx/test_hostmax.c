/* vx_hostmax: the pure parts of VX_HOST_MAX: MemAvailable read from an
 * injected /proc/meminfo text, the 80% default, an explicit size, a % of
 * MemAvailable, 0, and "off" refused (there is no silent "no limit"). */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <string.h>

#include "options.h"

static const char meminfo[] = "MemTotal:       24683652 kB\n"
                              "MemFree:         1000000 kB\n"
                              "MemAvailable:   10485760 kB\n"
                              "Buffers:          123456 kB\n";

START_TEST(available_from_text) {
  uint64_t b = 0;
  ck_assert_int_eq(vx_meminfo_available(meminfo, &b), 0);
  ck_assert_uint_eq(b, 10485760ull * 1024);
  ck_assert_int_eq(vx_meminfo_available("MemAvailable: 7 kB", &b), 0);
  ck_assert_uint_eq(b, 7 * 1024);
}
END_TEST

START_TEST(available_missing_or_malformed) {
  uint64_t b = 42;
  ck_assert_int_eq(vx_meminfo_available("MemTotal: 100 kB\nMemFree: 50 kB\n", &b), -ENOENT);
  ck_assert_int_eq(vx_meminfo_available("MemAvailable: lots\n", &b), -ENOENT);
  ck_assert_int_eq(vx_meminfo_available("MemAvailable: 100 MB\n", &b), -ENOENT);
  ck_assert_int_eq(vx_meminfo_available("MemAvailable: 99999999999999999999 kB\n", &b), -ENOENT);
  ck_assert_int_eq(vx_meminfo_available("", &b), -ENOENT);
  ck_assert_uint_eq(b, 42);
  /* a key that only starts like it is not it */
  ck_assert_int_eq(vx_meminfo_available("XMemAvailable: 5 kB\n", &b), -ENOENT);
}
END_TEST

START_TEST(default_is_80_percent) {
  ck_assert_uint_eq(vx_host_max_default(100), 80);
  ck_assert_uint_eq(vx_host_max_default(10ull << 30), 8ull << 30);
  ck_assert_uint_eq(vx_host_max_default(0), 0);
  ck_assert_uint_eq(vx_host_max_default(UINT64_MAX), UINT64_MAX / 5 * 4);
  uint64_t b;
  ck_assert_int_eq(vx_meminfo_available(meminfo, &b), 0);
  ck_assert_uint_eq(vx_host_max_resolve(NULL, b, 1), 8ull << 30);
}
END_TEST

START_TEST(explicit_values) {
  vx_options_t o;
  char err[256];
  vx_options_defaults(&o);
  ck_assert(!o.HOST_MAX.set);
  ck_assert_uint_eq(vx_host_max_resolve(&o.HOST_MAX, 1000, 7), 800);
  ck_assert_uint_eq(vx_host_max_resolve(&o.HOST_MAX, 0, 7), 7); /* MemAvailable unknown */
  int i = vx_option_find("VX_HOST_MAX");
  ck_assert_int_ge(i, 0);
  ck_assert_int_eq(vx_option_set(&o, i, "3G", err, sizeof err), 0);
  ck_assert_uint_eq(vx_host_max_resolve(&o.HOST_MAX, 1000, 7), 3ull << 30);
  ck_assert_int_eq(vx_option_set(&o, i, "0", err, sizeof err), 0);
  ck_assert(o.HOST_MAX.set);
  ck_assert_uint_eq(vx_host_max_resolve(&o.HOST_MAX, 1000, 7), 0); /* 0 means none */
  ck_assert_int_eq(vx_option_set(&o, i, "50%", err, sizeof err), 0);
  ck_assert_uint_eq(vx_host_max_resolve(&o.HOST_MAX, 1000, 7), 500); /* of MemAvailable */
  ck_assert_int_eq(vx_option_set(&o, i, "off", err, sizeof err), -EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "VX_HOST_MAX='off' is not valid"));
  ck_assert_int_eq(vx_option_set(&o, i, "unlimited", err, sizeof err), -EINVAL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("vx_hostmax");
  TCase *tc = tcase_create("hostmax");
  tcase_add_test(tc, available_from_text);
  tcase_add_test(tc, available_missing_or_malformed);
  tcase_add_test(tc, default_is_80_percent);
  tcase_add_test(tc, explicit_values);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
