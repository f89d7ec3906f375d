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
  ck_cu_is(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
  ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  ck_assert_ptr_null(fn);
  ck_cu_is(cuGetProcAddress_v2("cuMemPrefetchBatchAsync", &fn, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
  ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
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

int main(void) {
  Suite *s = suite_create("sim_procaddr");
  TCase *tc = tcase_create("procaddr");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, variants_by_version_and_flag);
  tcase_add_test(tc, status_on_failure);
  tcase_add_test(tc, log_line);
  tcase_add_test(tc, every_row_resolves);
  suite_add_tcase(s, tc);
  return sim_test_run(s);
}
