/* crc32c: known-answer vectors for the software and SSE4.2 forms, and both
 * agreeing on random lengths, alignments and chained calls. */
#include <check.h>

#include "vx_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void kat(crc_fn f) {
  ck_assert_uint_eq(f(0, "123456789", 9), 0xE3069283u);
  ck_assert_uint_eq(f(0, "", 0), 0u);
  ck_assert_uint_eq(f(0, "a", 1), 0xC1D04330u);
  uint8_t z[32] = {0}, o[32], inc[32], dec[32];
  memset(o, 0xFF, sizeof o);
  for (int i = 0; i < 32; i++)
    inc[i] = (uint8_t)i, dec[i] = (uint8_t)(31 - i);
  /* RFC 3720 (iSCSI) B.4 */
  ck_assert_uint_eq(f(0, z, 32), 0x8A9136AAu);
  ck_assert_uint_eq(f(0, o, 32), 0x62A8AB43u);
  ck_assert_uint_eq(f(0, inc, 32), 0x46DD794Eu);
  ck_assert_uint_eq(f(0, dec, 32), 0x113FDB5Cu);
  /* chaining equals one pass */
  ck_assert_uint_eq(f(f(0, "1234", 4), "56789", 5), 0xE3069283u);
}

START_TEST(kat_sw) {
  kat(nvme_crc32c_sw);
}
END_TEST

START_TEST(kat_hw) {
  if (!nvme_crc32c_hw_available()) printf("no SSE4.2 here: nvme_crc32c_hw is the software form\n");
  kat(nvme_crc32c_hw);
  kat(nvme_crc32c);
}
END_TEST

START_TEST(sw_equals_hw) {
  srand(tu_seed("crc32c sw==hw"));
  size_t cap = 1 << 16;
  uint8_t *b = malloc(cap + 16);
  for (size_t i = 0; i < cap + 16; i++)
    b[i] = (uint8_t)rand();
  for (int t = 0; t < 2000; t++) {
    size_t off = (size_t)rand() % 16, n = (size_t)rand() % (t < 1000 ? 100 : cap);
    uint32_t init = (uint32_t)rand();
    ck_assert_uint_eq(nvme_crc32c_sw(init, b + off, n), nvme_crc32c_hw(init, b + off, n));
    size_t cut = n ? (size_t)rand() % n : 0;
    uint32_t two = nvme_crc32c_hw(nvme_crc32c_sw(init, b + off, cut), b + off + cut, n - cut);
    ck_assert_uint_eq(two, nvme_crc32c(init, b + off, n));
  }
  free(b);
  /* slot-sized buffers, where the SSE4.2 form runs three combined streams */
  size_t big = (2u << 20) + 4096 + 13;
  b = malloc(big);
  for (size_t i = 0; i < big; i++)
    b[i] = (uint8_t)(i * 2654435761u >> 13);
  ck_assert_uint_eq(nvme_crc32c_sw(0, b, big), nvme_crc32c_hw(0, b, big));
  ck_assert_uint_eq(nvme_crc32c_sw(0, b + 3, 2u << 20), nvme_crc32c_hw(0, b + 3, 2u << 20));
  ck_assert_uint_eq(nvme_crc32c_sw(7, b, 3 * 4096), nvme_crc32c_hw(7, b, 3 * 4096));
  /* a single flipped bit changes the sum */
  uint32_t base = nvme_crc32c(0, b, 4096);
  b[1234] ^= 0x10;
  ck_assert_uint_ne(base, nvme_crc32c(0, b, 4096));
  free(b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nvme_crc32c");
  TCase *tc = tcase_create("crc32c");
  tcase_add_test(tc, kat_sw);
  tcase_add_test(tc, kat_hw);
  tcase_add_test(tc, sw_equals_hw);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
