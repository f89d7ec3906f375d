/* test_sim_symbolic.c: an interposer's definition of an entry point (here the
 * program's own, exported) does not leak into cuGetProcAddress's answers:
 * the simulator binds to itself, as the real driver does (-Bsymbolic). */
#include <dlfcn.h>

#include "sim_test.h"

static int interposed_calls;

/* Interposes libcuda's cuMemAlloc_v2 for the whole process. */
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  (void)dptr;
  (void)bytesize;
  interposed_calls++;
  return CUDA_ERROR_UNKNOWN;
}

START_TEST(procaddr_returns_the_drivers_own) {
  sim_test_setup(NULL);
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ck_assert_ptr_nonnull(h);
  void *own = dlsym(h, "cuMemAlloc_v2");
  ck_assert_ptr_ne(own, (void *)&cuMemAlloc_v2);
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  ck_cu(cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &st));
  ck_assert_ptr_eq(fn, own);
  CUdeviceptr p = 0;
  ck_cu(((CUresult(*)(CUdeviceptr *, size_t))fn)(&p, 4096));
  ck_assert_uint_ne(p, 0);
  ck_assert_int_eq(interposed_calls, 0);
  dlclose(h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_symbolic");
  TCase *tc = tcase_create("symbolic");
  tcase_add_test(tc, procaddr_returns_the_drivers_own);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
