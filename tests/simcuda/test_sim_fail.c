/* test_sim_fail.c: SIMCUDA_FAIL fault injection: Nth call, N+ (every call
 * from the Nth), codes by name or number, defaults, lists, bad specs. */
#include "sim_test.h"

START_TEST(nth_call_of_an_allocation) {
  setenv("SIMCUDA_FAIL", "cuMemAlloc_v2:3", 1);
  sim_test_setup(NULL);
  CUdeviceptr p;
  ck_cu(cuMemAlloc(&p, 64));
  ck_cu(cuMemAlloc(&p, 64));
  ck_cu_is(cuMemAlloc(&p, 64), CUDA_ERROR_OUT_OF_MEMORY); /* default for allocations */
  ck_cu(cuMemAlloc(&p, 64));
  ck_cu(cuMemFree(p)); /* other entry points are not affected */
}
END_TEST

START_TEST(every_call_from_n_with_named_code) {
  setenv("SIMCUDA_FAIL", "cuStreamCreate:2+:CUDA_ERROR_INVALID_VALUE", 1);
  sim_test_setup(NULL);
  CUstream s;
  ck_cu(cuStreamCreate(&s, 0));
  ck_cu_is(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(list_numeric_code_and_default_unknown) {
  setenv("SIMCUDA_FAIL", "cuCtxSynchronize:1,cuMemGetInfo_v2:2:2,cuLaunchKernel:1", 1);
  sim_test_setup(NULL);
  size_t f, t;
  ck_cu_is(cuCtxSynchronize(), CUDA_ERROR_UNKNOWN);
  ck_cu(cuCtxSynchronize());
  ck_cu(cuMemGetInfo(&f, &t));
  ck_cu_is(cuMemGetInfo(&f, &t), CUDA_ERROR_OUT_OF_MEMORY); /* code 2 */
  CUdeviceptr p;
  ck_cu(cuMemAlloc(&p, 64));
  ck_cu_is(kit_fill(p, 16, 1, NULL), CUDA_ERROR_UNKNOWN);
  ck_cu(kit_fill(p, 16, 1, NULL));
}
END_TEST

START_TEST(counts_per_exported_symbol) {
  setenv("SIMCUDA_FAIL", "cuMemAlloc:1", 1); /* the v1 symbol, not cuMemAlloc_v2 */
  sim_test_setup(NULL);
  CUdeviceptr p;
  ck_cu(cuMemAlloc(&p, 64));
}
END_TEST

START_TEST(bad_specs_refuse_init) {
  const char *bad[] = {"cuMemAlloc_v2", "cuMemAlloc_v2:0", "cuMemAlloc_v2:x", ":3",
                       "cuMemAlloc_v2:1:NOT_A_CODE", "cuMemAlloc_v2:1+x"};
  setenv("SIMCUDA_FAIL", bad[_i], 1);
  ck_cu_is(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_fail");
  TCase *tc = tcase_create("fail");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, nth_call_of_an_allocation);
  tcase_add_test(tc, every_call_from_n_with_named_code);
  tcase_add_test(tc, list_numeric_code_and_default_unknown);
  tcase_add_test(tc, counts_per_exported_symbol);
  tcase_add_loop_test(tc, bad_specs_refuse_init, 0, 6);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
