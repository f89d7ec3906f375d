/* test_json.c: the strict JSON parser of `vx report`: what it accepts,
 * what it rejects (with the offset), depth limit, escapes, a fuzz pass. */
#include <check.h>

#include "vx_check.h"
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"

static vx_json_t *parse(const char *s) {
  char err[128];
  return vx_json_parse(s, strlen(s), err, sizeof err);
}

static void reject(const char *s) {
  char err[128] = "";
  vx_json_t *v = vx_json_parse(s, strlen(s), err, sizeof err);
  ck_assert_msg(v == NULL, "accepted: %s", s);
  ck_assert_msg(strstr(err, "offset ") == err, "no offset in error for %s: %s", s, err);
}

START_TEST(accepts_values) {
  vx_json_t *v =
      parse(" {\"a\": [1, -2.5e3, true, false, null], \"b\": {\"c\": \"x\\u00e9\\n\"}, \"a\": 0} ");
  ck_assert_ptr_nonnull(v);
  ck_assert_int_eq(v->type, VX_JSON_OBJ);
  ck_assert_int_eq(v->count, 3);
  const vx_json_t *a = vx_json_get(v, "a"); /* the first of duplicate keys */
  ck_assert_int_eq(a->type, VX_JSON_ARR);
  ck_assert_int_eq(a->count, 5);
  ck_assert(vx_json_num(a->child, 0) == 1);
  ck_assert(vx_json_num(a->child->next, 0) == -2500);
  ck_assert_int_eq(a->child->next->next->boolean, 1);
  ck_assert_int_eq(a->child->next->next->next->type, VX_JSON_BOOL);
  ck_assert_int_eq(a->child->next->next->next->next->type, VX_JSON_NULL);
  ck_assert_str_eq(vx_json_str_or(vx_json_get(vx_json_get(v, "b"), "c"), ""), "x\xc3\xa9\n");
  ck_assert_ptr_null(vx_json_get(v, "zz"));
  ck_assert(vx_json_num(NULL, 3.5) == 3.5);
  vx_json_free(v);
  v = parse("\"\\ud83d\\ude00 \\\"\\\\\\/\\b\\f\\r\\t\"");
  ck_assert_str_eq(v->str, "\xf0\x9f\x98\x80 \"\\/\b\f\r\t");
  vx_json_free(v);
  v = parse("[]");
  ck_assert_int_eq(v->count, 0);
  vx_json_free(v);
  v = parse("0");
  ck_assert(v && v->num == 0);
  vx_json_free(v);
  v = parse("\"\xe2\x82\xac\""); /* raw UTF-8 */
  ck_assert_str_eq(v->str, "\xe2\x82\xac");
  vx_json_free(v);
}
END_TEST

START_TEST(rejects_invalid) {
  static const char *bad[] = {"",
                              " ",
                              "{",
                              "[1,]",
                              "{\"a\":1,}",
                              "[1 2]",
                              "{\"a\" 1}",
                              "{a:1}",
                              "01",
                              "1.",
                              ".5",
                              "-",
                              "1e",
                              "+1",
                              "NaN",
                              "Infinity",
                              "tru",
                              "nul",
                              "'x'",
                              "\"abc",
                              "\"\\x\"",
                              "\"\\u12\"",
                              "\"\\ud800\"",
                              "\"\\udc00\"",
                              "\"\\u0000\"",
                              "\"tab\there\"",
                              "[1] 2",
                              "{\"a\":1}}",
                              "\"\xc0\xaf\"",
                              "\"\xed\xa0\x80\"",
                              "\"\xf5\x80\x80\x80\"",
                              "\"\xe2\x82\"",
                              "[\"\x80\"]"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    reject(bad[i]);
  char nul[] = "[1]\0";
  char err[64];
  ck_assert_ptr_null(vx_json_parse(nul, 4, err, sizeof err)); /* an embedded NUL is trailing junk */
}
END_TEST

START_TEST(depth_limit) {
  char deep[2 * (VX_JSON_MAX_DEPTH + 2) + 1];
  for (int ok = 0; ok < 2; ok++) {
    int n = ok ? VX_JSON_MAX_DEPTH + 1 : VX_JSON_MAX_DEPTH + 2; /* depth counts from 0 */
    memset(deep, '[', (size_t)n);
    memset(deep + n, ']', (size_t)n);
    deep[2 * n] = 0;
    vx_json_t *v = parse(deep);
    ck_assert_msg((v != NULL) == ok, "depth %d", n);
    vx_json_free(v);
  }
  static char huge[100001];
  memset(huge, '[', sizeof huge - 1);
  reject(huge); /* no stack overflow */
}
END_TEST

START_TEST(fuzz_no_crash) {
  const char *seed =
      "{\"timeline\":[{\"t\":0.5,\"native\":1e9,\"up\":2},{\"t\":1}],\"s\":\"\\u00e9\",\"n\":null}";
  size_t len = strlen(seed);
  char *b = malloc(len);
  unsigned r = 7;
  for (int i = 0; i < 50000; i++) {
    memcpy(b, seed, len);
    for (int k = 1 + rand_r(&r) % 3; k > 0; k--)
      b[rand_r(&r) % len] = "{}[]\",:\\0e-.u \x80"[rand_r(&r) % 16];
    char err[64];
    vx_json_free(vx_json_parse(b, rand_r(&r) % (len + 1), err, sizeof err));
  }
  free(b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("json");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, accepts_values);
  tcase_add_test(tc, rejects_invalid);
  tcase_add_test(tc, depth_limit);
  tcase_add_test(tc, fuzz_no_crash);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
