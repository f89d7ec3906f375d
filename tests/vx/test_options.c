/* Unit tests of the VX_* option parsers and loader: every variable with
 * good and bad values, the one-line error, text forms that parse back. */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme.h"
#include "options.h"
#include "policy.h"

START_TEST(bools) {
  int v = -1;
  const char *yes[] = {"1", "yes", "TRUE", "on", "Yes"}, *no[] = {"0", "no", "false", "OFF"};
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
    ck_assert_int_eq(vx_parse_bool(yes[i], &v), 0);
    ck_assert_int_eq(v, 1);
  }
  for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
    ck_assert_int_eq(vx_parse_bool(no[i], &v), 0);
    ck_assert_int_eq(v, 0);
  }
  v = 7;
  const char *bad[] = {"", "2", "y", "truee", " 1", "-1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    ck_assert_int_eq(vx_parse_bool(bad[i], &v), -EINVAL);
  ck_assert_int_eq(v, 7);
}
END_TEST

START_TEST(sizes) {
  vx_size_t s;
  struct {
    const char *in;
    unsigned long long bytes;
  } good[] = {{"0", 0},
              {"123B", 123},
              {"4K", 4096},
              {"4k", 4096},
              {"1M", 1 << 20},
              {"8G", 8ULL << 30},
              {"2T", 2ULL << 40},
              {"1.5G", 3ULL << 29},
              {"8GiB", 8ULL << 30},
              {"8GB", 8ULL << 30},
              {"512B", 512},
              {"16777215T", 16777215ULL << 40}};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    ck_assert_msg(vx_parse_size(good[i].in, &s) == 0, "%s", good[i].in);
    ck_assert_uint_eq(s.bytes, good[i].bytes);
    ck_assert(s.pct == 0 && s.set == 1);
  }
  ck_assert_int_eq(vx_parse_size("50%", &s), 0);
  ck_assert(s.pct == 50.0 && s.set);
  ck_assert_uint_eq(vx_size_resolve(&s, 1000), 500);
  ck_assert_int_eq(vx_parse_size("12.5%", &s), 0);
  ck_assert_uint_eq(vx_size_resolve(&s, 1000), 125);
  const char *bad[] = {"",    "G",    "-1",  "1X",   "1 G",
                       "0%",  "101%", "1.5", "0.3K", "16777216T",
                       "1e3", "1G%",  "%",   "1.G.", "99999999999999999999",
                       "4KK", "1,5G", "8",   "123",  "1.5B"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    ck_assert_msg(vx_parse_size(bad[i], &s) == -EINVAL, "'%s' accepted", bad[i]);
}
END_TEST

START_TEST(size_lists) {
  vx_sizes_t l;
  ck_assert_int_eq(vx_parse_sizes("8G,4G,50%", &l), 0);
  ck_assert_int_eq(l.n, 3);
  ck_assert_uint_eq(l.v[0].bytes, 8ULL << 30);
  ck_assert_uint_eq(l.v[1].bytes, 4ULL << 30);
  ck_assert(l.v[2].pct == 50.0);
  ck_assert_ptr_eq(vx_sizes_for(&l, 1), &l.v[1]);
  ck_assert_ptr_null(vx_sizes_for(&l, 3));
  ck_assert_int_eq(vx_parse_sizes("1G", &l), 0);
  ck_assert_ptr_eq(vx_sizes_for(&l, 5), &l.v[0]); /* one value: every device */
  const char *bad[] = {
      "", ",", "1G,", ",1G", "1G,,2G", "1G,x", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    ck_assert_msg(vx_parse_sizes(bad[i], &l) == -EINVAL, "'%s' accepted", bad[i]);
}
END_TEST

START_TEST(ints_percents_enums) {
  long n;
  int p, e;
  ck_assert_int_eq(vx_parse_int("0", &n), 0);
  ck_assert_int_eq(vx_parse_int("32", &n), 0);
  ck_assert_int_eq(n, 32);
  const char *badint[] = {"", "-1", "+3", "3x", "1.0", "99999999999999999999", " 3"};
  for (size_t i = 0; i < sizeof badint / sizeof *badint; i++)
    ck_assert_msg(vx_parse_int(badint[i], &n) == -EINVAL, "'%s'", badint[i]);
  ck_assert_int_eq(vx_parse_percent("90", &p), 0);
  ck_assert_int_eq(p, 90);
  ck_assert_int_eq(vx_parse_percent("100%", &p), 0);
  ck_assert_int_eq(p, 100);
  ck_assert_int_eq(vx_parse_percent("101", &p), -EINVAL);
  ck_assert_int_eq(vx_parse_percent("-5", &p), -EINVAL);
  ck_assert_int_eq(vx_parse_percent("%", &p), -EINVAL);
  const char *choices = "alpha|beta|gamma";
  ck_assert_int_eq(vx_parse_enum("gamma", choices, &e), 0);
  ck_assert_int_eq(e, 2);
  ck_assert_int_eq(vx_parse_enum("ALPHA", choices, &e), 0);
  ck_assert_int_eq(e, 0);
  ck_assert_int_eq(vx_parse_enum("alph", choices, &e), -EINVAL);
  ck_assert_int_eq(vx_parse_enum("", choices, &e), -EINVAL);
  ck_assert_int_eq(vx_parse_enum("beta|gamma", choices, &e), -EINVAL);
  ck_assert_int_eq(vx_parse_enum("alpha", NULL, &e), -EINVAL);
}
END_TEST

/* Every ENUM has its choices (choices.def), its default is one of them, and
 * every other type has none. */
START_TEST(enum_choices_are_data) {
  vx_options_t o;
  char err[256];
  for (int i = 0; i < vx_option_count(); i++) {
    const vx_option_info_t *inf = vx_option_info(i);
    int is_enum = !strcmp(inf->type, "ENUM");
    ck_assert_msg(is_enum == (inf->choices != NULL), "%s", inf->name);
    if (!is_enum) continue;
    ck_assert_msg(*inf->choices && !strchr(inf->help, '|'), "%s: choices only in choices.def",
                  inf->name);
    ck_assert_int_eq(vx_option_set(&o, i, inf->def, err, sizeof err), 0);
    char text[64];
    ck_assert_int_eq(vx_option_format(&o, i, text, sizeof text), 0);
    ck_assert_str_eq(text, inf->def);
  }
  ck_assert_int_eq(VX_LOG_ERROR, 0);
  ck_assert_int_eq(VX_LOG_DEBUG, 3);
  ck_assert_int_eq(VX_NVME_ENGINE_POOL, 2);
  ck_assert_int_eq(VX_IPC_NATIVE, 1);
}
END_TEST

/* The C enums in options.h follow the order of the choices in choices.def. */
START_TEST(enum_orders) {
  vx_options_t o;
  char err[256];
  vx_options_defaults(&o);
  struct {
    const char *name, *value;
    int want;
  } cases[] = {{"LOG", "error", 0},
               {"LOG", "debug", 3},
               {"REPORT_MEMORY", "physical", VX_REPORT_MEMORY_PHYSICAL},
               {"REPORT_MEMORY", "limit", VX_REPORT_MEMORY_LIMIT},
               {"REPORT_MEMORY", "extended", VX_REPORT_MEMORY_EXTENDED},
               {"POLICY", "predict", VX_POLICY_PREDICT},
               {"POLICY", "demand", VX_POLICY_DEMAND},
               {"POLICY", "static", VX_POLICY_STATIC}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int id = vx_option_find(cases[i].name);
    ck_assert_int_ge(id, 0);
    ck_assert_int_eq(vx_option_set(&o, id, cases[i].value, err, sizeof err), 0);
  }
  ck_assert_int_eq(o.POLICY, VX_POLICY_STATIC);
  ck_assert_int_eq(o.REPORT_MEMORY, VX_REPORT_MEMORY_EXTENDED);
}
END_TEST

/* Choice idx of an ENUM option's "a|b|c" into buf; 0, or -1 past the end. */
static int choice_text(const char *choices, int idx, char *buf, size_t len) {
  const char *c = choices;
  for (int k = 0; k < idx && c; k++)
    c = strchr(c, '|') ? strchr(c, '|') + 1 : NULL;
  if (!c) return -1;
  snprintf(buf, len, "%.*s", (int)strcspn(c, "|"), c);
  return 0;
}

/* Each choice of VX_NVME_ENGINE, as libvx stores it, is the nvme_engine_t
 * of the same name (tiers/spill_init.c casts one into the other); each of
 * VX_POLICY's is the pol_kind_t of the same name. */
START_TEST(enum_maps_to_other_enums) {
  vx_options_t o;
  char err[256], text[64];
  int eng = vx_option_find("NVME_ENGINE"), pol = vx_option_find("POLICY"), n = 0;
  ck_assert_int_ge(eng, 0);
  ck_assert_int_ge(pol, 0);
  for (int idx = 0; !choice_text(vx_option_info(eng)->choices, idx, text, sizeof text); idx++) {
    ck_assert_int_eq(vx_option_set(&o, eng, text, err, sizeof err), 0);
    ck_assert_int_eq(o.NVME_ENGINE, idx);
    nvme_engine_t e = (nvme_engine_t)-1;
    ck_assert_int_eq(nvme_engine_parse(text, &e), 0);
    ck_assert_int_eq((int)e, o.NVME_ENGINE);
    ck_assert_str_eq(nvme_engine_name((nvme_engine_t)o.NVME_ENGINE), text);
    n++;
  }
  ck_assert_int_eq(n, 3); /* auto, uring, pool */
  for (int idx = 0; !choice_text(vx_option_info(pol)->choices, idx, text, sizeof text); idx++) {
    ck_assert_int_eq(vx_option_set(&o, pol, text, err, sizeof err), 0);
    ck_assert_int_eq(o.POLICY, pol_kind_parse(text));
    ck_assert_str_eq(pol_kind_name((pol_kind_t)o.POLICY), text);
    n++;
  }
  ck_assert_int_eq(n, 6); /* predict, demand, static */
}
END_TEST

/* Per type: values that must parse and values that must not. */
static const char *good_for(const char *type, int k) {
  static const char *const b[] = {"1", "off", NULL}, *const s[] = {"512M", "25%", NULL},
                           *const l[] = {"8G", "1G,512M", NULL}, *const p[] = {"0", "75", NULL},
                           *const i[] = {"0", "64", NULL}, *const t[] = {"x", "/tmp/a b", NULL};
  const char *const *set = !strcmp(type, "BOOL")      ? b
                           : !strcmp(type, "SIZE")    ? s
                           : !strcmp(type, "SIZES")   ? l
                           : !strcmp(type, "PERCENT") ? p
                           : !strcmp(type, "INT")     ? i
                                                      : t;
  return set[k];
}
static const char *bad_for(const char *type) {
  return !strcmp(type, "BOOL")      ? "maybe"
         : !strcmp(type, "SIZE")    ? "12Q"
         : !strcmp(type, "SIZES")   ? "1G,,2G"
         : !strcmp(type, "PERCENT") ? "150"
         : !strcmp(type, "INT")     ? "-4"
         : !strcmp(type, "ENUM")    ? "nonsense"
                                    : NULL;
}

START_TEST(every_option) {
  vx_options_t o;
  char err[512], text[VX_OPT_STRING_MAX + 8];
  ck_assert_int_eq(vx_option_count(), VX_OPTION_COUNT);
  ck_assert_ptr_null(vx_option_info(VX_OPTION_COUNT));
  for (int i = 0; i < vx_option_count(); i++) {
    const vx_option_info_t *info = vx_option_info(i);
    ck_assert(!strncmp(info->name, "VX_", 3));
    ck_assert_int_eq(vx_option_find(info->name), i);
    ck_assert_int_eq(vx_option_find(info->name + 3), i);
    /* the default parses */
    vx_options_defaults(&o);
    ck_assert_msg(vx_option_set(&o, i, info->def, err, sizeof err) == 0, "%s default", info->name);
    if (!strcmp(info->type, "ENUM")) {
      ck_assert_int_eq(vx_option_format(&o, i, text, sizeof text), 0);
      ck_assert_str_eq(text, info->def);
    }
    for (int k = 0; strcmp(info->type, "ENUM") && good_for(info->type, k); k++) {
      const char *v = good_for(info->type, k);
      ck_assert_msg(vx_option_set(&o, i, v, err, sizeof err) == 0, "%s=%s", info->name, v);
      /* the text form parses back to the same text */
      ck_assert_int_eq(vx_option_format(&o, i, text, sizeof text), 0);
      vx_options_t o2;
      vx_options_defaults(&o2);
      ck_assert_int_eq(vx_option_set(&o2, i, text, err, sizeof err), 0);
      char text2[sizeof text];
      vx_option_format(&o2, i, text2, sizeof text2);
      ck_assert_str_eq(text, text2);
    }
    const char *bad = bad_for(info->type);
    if (bad) {
      ck_assert_int_eq(vx_option_set(&o, i, bad, err, sizeof err), -EINVAL);
      char want[256];
      snprintf(want, sizeof want, "%s='%s' is not valid: expected %s", info->name, bad,
               vx_option_form(i));
      ck_assert_str_eq(err, want);
    }
  }
}
END_TEST

static const char *env_k[8], *env_v[8];
static const char *fake_getenv(const char *name) {
  for (int i = 0; i < 8 && env_k[i]; i++)
    if (!strcmp(env_k[i], name)) return env_v[i];
  return NULL;
}

/* A percentage formats to text that parses back to the same value, even
 * tiny ones (found by fuzzing: "1e-07%" used to come out, which the parser
 * rejects), and below a millionth of a percent is refused. */
START_TEST(percent_round_trip) {
  static const char *vals[] = {"50%", "0.000001%", "0.1234567890123%", "99.99999%", "100%"};
  int i = vx_option_find("VX_DEVICE_LIMIT");
  ck_assert_int_ge(i, 0);
  for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
    vx_options_t o, o2;
    char err[256], text[128];
    memset(env_k, 0, sizeof env_k);
    ck_assert_int_eq(vx_options_load(&o, fake_getenv, err, sizeof err), 0);
    ck_assert_int_eq(vx_option_set(&o, i, vals[k], err, sizeof err), 0);
    ck_assert_int_eq(vx_option_format(&o, i, text, sizeof text), 0);
    ck_assert_int_eq(vx_options_load(&o2, fake_getenv, err, sizeof err), 0);
    ck_assert_msg(vx_option_set(&o2, i, text, err, sizeof err) == 0, "%s -> %s: %s", vals[k], text,
                  err);
    ck_assert(o.DEVICE_LIMIT.v[0].pct == o2.DEVICE_LIMIT.v[0].pct);
  }
  vx_size_t sz;
  ck_assert_int_eq(vx_parse_size("0.0000001%", &sz), -EINVAL);
}
END_TEST

START_TEST(load) {
  vx_options_t o;
  char err[512] = "";
  memset(env_k, 0, sizeof env_k);
  env_k[0] = "VX_DEVICE_LIMIT", env_v[0] = "1G,512M";
  env_k[1] = "VX_REPORT", env_v[1] = "/tmp/r.json";
  env_k[2] = "VX_NATIVE_MAX", env_v[2] = ""; /* empty = default */
  env_k[3] = "VX_POLICY", env_v[3] = "static";
  ck_assert_int_eq(vx_options_load(&o, fake_getenv, err, sizeof err), 0);
  ck_assert_int_eq(o.DEVICE_LIMIT.n, 2);
  ck_assert_uint_eq(o.DEVICE_LIMIT.v[1].bytes, 512ULL << 20);
  ck_assert_str_eq(o.REPORT.s, "/tmp/r.json");
  ck_assert_uint_eq(o.NATIVE_MAX.bytes, 1ULL << 20);
  ck_assert_uint_eq(o.RESERVE.bytes, 1ULL << 30);
  ck_assert_int_eq(o.POLICY, VX_POLICY_STATIC);
  ck_assert_int_eq(o.DISABLE, 0);
  ck_assert_int_eq(o.STATS, 1);
  ck_assert(!o.HOST_LIMIT.set);
  /* the first bad value is reported; the others still parse */
  env_k[4] = "VX_STRICT", env_v[4] = "sure";
  env_k[5] = "VX_LOG", env_v[5] = "loud";
  ck_assert_int_eq(vx_options_load(&o, fake_getenv, err, sizeof err), -EINVAL);
  ck_assert_str_eq(err,
                   "VX_STRICT='sure' is not valid: expected 0/1, yes/no, true/false or on/off");
  ck_assert_int_eq(o.POLICY, VX_POLICY_STATIC);
}
END_TEST

/* #14: a bare number is refused with the units it may have meant; 0 is
 * refused where it read as "no limit"; 0 stays a value elsewhere; bytes
 * format with B and parse back. */
START_TEST(size_units_and_zero) {
  vx_options_t o;
  char err[256], text[64];
  vx_options_defaults(&o);
  int host = vx_option_find("VX_HOST_LIMIT"), dev = vx_option_find("VX_DEVICE_LIMIT");
  int nvme = vx_option_find("VX_NVME_LIMIT"), nmax = vx_option_find("VX_NATIVE_MAX");
  ck_assert_int_eq(vx_option_set(&o, host, "8", err, sizeof err), -EINVAL);
  ck_assert_str_eq(err, "VX_HOST_LIMIT='8' is not valid: a size needs a unit (8M? 8G? 8B for bytes)");
  ck_assert(!o.HOST_LIMIT.set); /* a refused value leaves the option as it was */
  const char *zero_limits[][2] = {{"VX_HOST_LIMIT", "0"}, {"VX_NVME_LIMIT", "0G"}};
  for (size_t k = 0; k < 2; k++) {
    int i = vx_option_find(zero_limits[k][0]);
    ck_assert_int_eq(vx_option_set(&o, i, zero_limits[k][1], err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "0 is not a limit (leave ") != NULL, "%s", err);
  }
  ck_assert_uint_eq(o.NVME_LIMIT.bytes, 64ULL << 30); /* still the default */
  ck_assert_int_eq(vx_option_set(&o, nmax, "0", err, sizeof err), 0);
  ck_assert(o.NATIVE_MAX.set && o.NATIVE_MAX.bytes == 0);
  ck_assert_int_eq(vx_option_set(&o, vx_option_find("VX_MOVABLE"), "0", err, sizeof err), 0);
  ck_assert_int_eq(vx_option_set(&o, dev, "8G,4G", err, sizeof err), 0);
  ck_assert_int_eq(vx_option_set(&o, dev, "0", err, sizeof err), 0); /* a budget of 0: all managed */
  ck_assert_int_eq(vx_option_set(&o, nvme, "1000B", err, sizeof err), 0);
  ck_assert_int_eq(vx_option_format(&o, nvme, text, sizeof text), 0);
  ck_assert_str_eq(text, "1000B");
  ck_assert_int_eq(vx_option_set(&o, nvme, text, err, sizeof err), 0);
  ck_assert_uint_eq(o.NVME_LIMIT.bytes, 1000);
}
END_TEST

int main(void) {
  Suite *s = suite_create("options");
  TCase *tc = tcase_create("parse");
  tcase_add_test(tc, bools);
  tcase_add_test(tc, sizes);
  tcase_add_test(tc, size_units_and_zero);
  tcase_add_test(tc, size_lists);
  tcase_add_test(tc, ints_percents_enums);
  tcase_add_test(tc, enum_orders);
  tcase_add_test(tc, enum_choices_are_data);
  tcase_add_test(tc, enum_maps_to_other_enums);
  tcase_add_test(tc, every_option);
  tcase_add_test(tc, load);
  tcase_add_test(tc, percent_round_trip);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
