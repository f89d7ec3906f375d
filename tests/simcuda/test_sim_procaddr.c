/* test_sim_procaddr.c: cuGetProcAddress(_v2): variant chosen by version and
 * stream flag, symbolStatus, its own entry, the SIMCUDA_LOG=procaddr line. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim_test.h"

static void *sym(const char *name) {
  void *p = dlsym(RTLD_DEFAULT, name);
  ck_assert_msg(p != NULL, "%s is not exported", name);
  return p;
}

static void expect(const char *name, int ver, cuuint64_t flags, const char *variant) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult st = 99;
  ck_cu(cuGetProcAddress_v2(name, &fn, ver, flags, &st));
  ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
  ck_assert_msg(fn == sym(variant), "%s@%d flags %llu is not %s", name, ver,
                (unsigned long long)flags, variant);
}

#define PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

START_TEST(variants_by_version_and_flag) {
  /* lookups work before cuInit, as the runtime needs */
  expect("cuInit", 12000, 0, "cuInit");
  expect("cuMemAlloc", 2000, 0, "cuMemAlloc");
  expect("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
  expect("cuMemAlloc", 13000, PTDS, "cuMemAlloc_v2");
  expect("cuCtxCreate", 3020, 0, "cuCtxCreate_v2");
  expect("cuCtxCreate", 12000, 0, "cuCtxCreate_v3");
  expect("cuCtxCreate", 13000, 0, "cuCtxCreate_v4");
  expect("cuLaunchKernel", 12000, 0, "cuLaunchKernel");
  expect("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel");
  expect("cuLaunchKernel", 12000, PTDS, "cuLaunchKernel_ptsz");
  expect("cuMemcpyHtoD", 13000, PTDS, "cuMemcpyHtoD_v2_ptds");
  expect("cuMemcpyHtoD", 13000, 0, "cuMemcpyHtoD_v2");
  expect("cuMemPrefetchAsync", 12000, 0, "cuMemPrefetchAsync");
  expect("cuMemPrefetchAsync", 12020, 0, "cuMemPrefetchAsync_v2");
  expect("cuMemPrefetchAsync", 13000, PTDS, "cuMemPrefetchAsync_v2_ptsz");
  expect("cuMemAdvise", 12010, 0, "cuMemAdvise");
  expect("cuMemAdvise", 12020, 0, "cuMemAdvise_v2");
  expect("cuStreamGetCaptureInfo", 12000, 0, "cuStreamGetCaptureInfo_v2");
  expect("cuStreamGetCaptureInfo", 12030, PTDS, "cuStreamGetCaptureInfo_v3_ptsz");
  expect("cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags");
  expect("cuEventElapsedTime", 12000, 0, "cuEventElapsedTime");
  expect("cuEventElapsedTime", 13000, 0, "cuEventElapsedTime_v2");
  expect("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
  expect("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
}
END_TEST

START_TEST(status_on_failure) {
  void *fn = (void *)1;
  CUdriverProcAddressQueryResult st = 99;
  ck_cu_is(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_SUCCESS);
  ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  ck_assert_ptr_null(fn);
  ck_cu_is(cuGetProcAddress_v2("cuMemPrefetchBatchAsync", &fn, 12000, 0, &st), CUDA_SUCCESS);
  ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  ck_assert_ptr_null(fn);
  /* Per-thread flag: a symbol with a per-thread variant newer than asked
   * gets none (the real driver's answer), not the legacy one; one without
   * any per-thread variant gets the legacy one. */
  fn = (void *)1;
  ck_cu(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 3020,
                            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  ck_assert_ptr_null(fn);
  ck_cu(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                            &st));
  ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
  ck_assert_ptr_eq(fn, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  ck_cu_is(cuGetProcAddress_v2(NULL, &fn, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuGetProcAddress_v2("cuInit", NULL, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuGetProcAddress_v2("cuInit", &fn, 13000, 8, &st), CUDA_ERROR_INVALID_VALUE);
  /* the v1 signature, reached through the table itself */
  CUresult (*v1)(const char *, void **, int, cuuint64_t);
  ck_cu(cuGetProcAddress_v2("cuGetProcAddress", (void **)&v1, 11030, 0, &st));
  ck_cu(v1("cuMemFree", &fn, 13000, 0));
  ck_assert_ptr_eq(fn, sym("cuMemFree_v2"));
}
END_TEST

START_TEST(log_line) {
  setenv("SIMCUDA_LOG", "procaddr", 1);
  FILE *tmp = tmpfile();
  ck_assert_ptr_nonnull(tmp);
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  void *fn;
  CUdriverProcAddressQueryResult st;
  cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &st);
  cuGetProcAddress_v2("cuNope", &fn, 12000, 2, &st);
  cuGetProcAddress_v2("cuMemDiscardBatchAsync", &fn, 12000, 0, &st);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char buf[1024] = {0};
  rewind(tmp);
  size_t n = fread(buf, 1, sizeof buf - 1, tmp);
  fclose(tmp);
  ck_assert_uint_gt(n, 0);
  ck_assert_str_eq(buf, "simcuda: procaddr cuMemAlloc version=12000 flags=0 -> found\n"
                        "simcuda: procaddr cuNope version=12000 flags=2 -> not-found\n"
                        "simcuda: procaddr cuMemDiscardBatchAsync version=12000 flags=0 -> version\n");
}
END_TEST

START_TEST(every_row_resolves) {
  int (*row)(int, const char **) = (int (*)(int, const char **))sym("simcuda_proc_row");
  const char *s;
  int i = 0;
  for (; row(i, &s) == 0; i++) ck_assert_ptr_nonnull(dlsym(RTLD_DEFAULT, s));
  ck_assert_int_gt(i, 150);
}
END_TEST

// ---- movement: older driver releases (SIMCUDA_DRIVER_VERSION, driver-V/) ----

static void lacks(CUresult (*gpa)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *),
                  const char *name) {
  void *fn = (void *)1;
  CUdriverProcAddressQueryResult st = 99;
  ck_assert_msg(gpa(name, &fn, 13000, 0, &st) == CUDA_SUCCESS && !fn, "%s found", name);
  ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  ck_assert_ptr_null(fn);
}

START_TEST(driver_version_hides_newer) {
  setenv("SIMCUDA_DRIVER_VERSION", "12000", 1);
  int v = 0;
  ck_cu(cuDriverGetVersion(&v));
  ck_assert_int_eq(v, 12000);
  lacks(cuGetProcAddress_v2, "cuFuncGetParamInfo");
  lacks(cuGetProcAddress_v2, "cuFuncGetName");
  lacks(cuGetProcAddress_v2, "cuMemPrefetchBatchAsync");
  lacks(cuGetProcAddress_v2, "cuMemDiscardBatchAsync");
  /* the older variant is what a newer request gets */
  expect("cuMemPrefetchAsync", 13000, 0, "cuMemPrefetchAsync");
  expect("cuMemPrefetchAsync", 13000, PTDS, "cuMemPrefetchAsync_ptsz");
  expect("cuMemAdvise", 13000, 0, "cuMemAdvise");
  expect("cuCtxCreate", 13000, 0, "cuCtxCreate_v3");
  expect("cuEventElapsedTime", 13000, 0, "cuEventElapsedTime");
  expect("cuMemAlloc", 13000, 0, "cuMemAlloc_v2");
}
END_TEST

START_TEST(driver_version_12040) {
  setenv("SIMCUDA_DRIVER_VERSION", "12040", 1);
  expect("cuFuncGetParamInfo", 13000, 0, "cuFuncGetParamInfo");
  expect("cuMemPrefetchAsync", 13000, 0, "cuMemPrefetchAsync_v2");
  expect("cuMemAdvise", 13000, 0, "cuMemAdvise_v2");
  lacks(cuGetProcAddress_v2, "cuMemPrefetchBatchAsync");
  lacks(cuGetProcAddress_v2, "cuMemDiscardBatchAsync");
}
END_TEST

START_TEST(driver_version_bad) {
  setenv("SIMCUDA_DRIVER_VERSION", "12345", 1);
  ck_cu_is(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

/* build/tests/simcuda/driver-V/libcuda.so.1, loaded beside the full one. */
static void *variant(int v) {
  const char *bin = getenv("VX_TEST_BIN_DIR");
  ck_assert_ptr_nonnull(bin);
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/simcuda/driver-%d/libcuda.so.1", bin, v);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(h != NULL, "%s: %s", path, dlerror());
  return h;
}

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* Each variant's dynamic symbol table has exactly what its release has: a
 * program that dlsyms (vx's real table does) finds no more than
 * cuGetProcAddress hands out. */
START_TEST(driver_variants_hide_from_dlsym) {
  static const struct {
    int v;
    const char *has, *lacks;
  } t[] = {{12000, "cuMemPrefetchAsync", "cuMemPrefetchAsync_v2"},
           {12000, "cuMemAdvise", "cuMemAdvise_v2"},
           {12020, "cuMemAdvise_v2", "cuFuncGetName"},
           {12040, "cuFuncGetParamInfo", "cuMemPrefetchBatchAsync"},
           {12080, "cuEventElapsedTime_v2", "cuMemDiscardBatchAsync_ptsz"},
           {13000, "cuMemDiscardBatchAsync", "cuNoSuchThing"}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    void *h = variant(t[i].v);
    ck_assert_msg(dlsym(h, t[i].has) != NULL, "driver-%d lacks %s", t[i].v, t[i].has);
    ck_assert_msg(dlsym(h, t[i].lacks) == NULL, "driver-%d exports %s", t[i].v, t[i].lacks);
    ck_assert_ptr_nonnull(dlsym(h, "simcuda_get_stats")); /* the extras stay */
    int (*ver)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    int got = 0;
    ck_assert_int_eq(ver(&got), CUDA_SUCCESS);
    ck_assert_int_eq(got, t[i].v); /* no SIMCUDA_DRIVER_VERSION: the variant's own */
    gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    ck_assert_ptr_nonnull(gpa);
    if (t[i].v < 13000) lacks(gpa, t[i].lacks);
  }
}
END_TEST

/* A variant refuses to imitate another release than its own. */
START_TEST(driver_variant_mismatch) {
  setenv("SIMCUDA_DRIVER_VERSION", "13000", 1);
  void *h = variant(12020);
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
  ck_assert_int_eq(init(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_procaddr");
  TCase *tc = tcase_create("procaddr");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, variants_by_version_and_flag);
  tcase_add_test(tc, status_on_failure);
  tcase_add_test(tc, log_line);
  tcase_add_test(tc, every_row_resolves);
  tcase_add_test(tc, driver_version_hides_newer);
  tcase_add_test(tc, driver_version_12040);
  tcase_add_test(tc, driver_version_bad);
  tcase_add_test(tc, driver_variants_hide_from_dlsym);
  tcase_add_test(tc, driver_variant_mismatch);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
