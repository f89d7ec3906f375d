/* test_sim_launch.c: modules (PTX parsing, parameter layout), launches in
 * every form, kernel-side access checks and the sticky illegal address. */
#include <string.h>

#include "sim_test.h"

/* The per-thread variants, not declared by cuda.h in a default build. */
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
CUresult cuStreamSynchronize_ptsz(CUstream);

static const char test_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    "// a comment with .entry inside\n"
    ".visible .entry sim_peek(\n\t.param .u64 sim_peek_param_0\n)\n{\n\tret;\n}\n"
    ".visible .entry sim_layout(\n\t.param .align 16 .b8 sim_layout_param_0[24],\n"
    "\t.param .u32 sim_layout_param_1,\n\t.param .u64 .ptr .align 1 sim_layout_param_2,\n"
    "\t.param .u8 sim_layout_param_3\n)\n{\n\tret;\n}\n"
    ".visible .entry sim_nobody(\n\t.param .u64 p\n)\n{\n\tret;\n}\n";

SIMCUDA_KERNEL(sim_peek) {
  CUdeviceptr p = *(CUdeviceptr *)params[0];
  volatile uint32_t *h = kit_access(k, p, 4, SIMCUDA_READ);
  if (h) (void)*h;
}

SIMCUDA_KERNEL(sim_layout) { (void)params, (void)k; }

static CUfunction load_test(const char *name) {
  CUmodule m;
  CUfunction f;
  ck_cu(cuModuleLoadData(&m, test_ptx));
  ck_cu(cuModuleGetFunction(&f, m, name));
  return f;
}

START_TEST(param_layout) {
  sim_test_setup(NULL);
  size_t off, sz;
  CUfunction f = kit_fn("fill_u32");
  ck_assert_ptr_nonnull(f);
  size_t want_off[] = {0, 8, 16}, want_sz[] = {8, 8, 4};
  for (int i = 0; i < 3; i++) {
    ck_cu(cuFuncGetParamInfo(f, i, &off, &sz));
    ck_assert_uint_eq(off, want_off[i]);
    ck_assert_uint_eq(sz, want_sz[i]);
  }
  ck_cu_is(cuFuncGetParamInfo(f, 3, &off, &sz), CUDA_ERROR_INVALID_VALUE);
  f = kit_fn("touch8");
  ck_cu(cuFuncGetParamInfo(f, 8, &off, &sz));
  ck_assert_uint_eq(off, 64);
  ck_assert_uint_eq(sz, 8);
  const char *name;
  ck_cu(cuFuncGetName(&name, f));
  ck_assert_str_eq(name, "touch8");
  f = load_test("sim_layout");
  size_t lo[] = {0, 24, 32, 40}, ls[] = {24, 4, 8, 1};
  for (int i = 0; i < 4; i++) {
    ck_cu(cuFuncGetParamInfo(f, i, &off, &sz));
    ck_assert_uint_eq(off, lo[i]);
    ck_assert_uint_eq(sz, ls[i]);
  }
}
END_TEST

START_TEST(module_errors) {
  sim_test_setup(NULL);
  CUmodule m;
  CUfunction f;
  ck_cu(cuModuleLoadData(&m, test_ptx));
  ck_cu_is(cuModuleGetFunction(&f, m, "sim_nobody"), CUDA_ERROR_NOT_FOUND); /* no body */
  ck_cu_is(cuModuleGetFunction(&f, m, "nope"), CUDA_ERROR_NOT_FOUND);
  ck_cu_is(cuModuleLoadData(&m, "not ptx at all"), CUDA_ERROR_INVALID_PTX);
  ck_cu_is(cuModuleLoadData(&m, NULL), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuModuleLoadData(&m, test_ptx));
  ck_cu(cuModuleGetFunction(&f, m, "sim_peek"));
  ck_cu(cuModuleUnload(m));
  ck_cu_is(cuModuleGetFunction(&f, m, "sim_peek"), CUDA_ERROR_INVALID_HANDLE);
  CUdeviceptr p = 0;
  void *args[] = {&p};
  ck_cu_is(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

static void expect_pattern(CUdeviceptr p, size_t n, uint32_t seed) {
  uint32_t *h = malloc(n * 4);
  ck_cu(cuMemcpyDtoH(h, p, n * 4));
  ck_assert_uint_eq(kit_verify_host(h, n, seed, 0), 0);
  free(h);
}

START_TEST(launch_forms) {
  sim_test_setup(NULL);
  size_t n = 100000;
  uint32_t seed = 11;
  CUdeviceptr p;
  ck_cu(cuMemAlloc(&p, n * 4));
  CUfunction f = kit_fn("fill_u32");
  void *args[] = {&p, &n, &seed};
  ck_cu(cuLaunchKernel(f, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  expect_pattern(p, n, seed);
  struct { CUdeviceptr p; size_t n; uint32_t seed; uint32_t pad; } buf = {p, n, 12, 0};
  size_t bsz = sizeof buf;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsz,
                   CU_LAUNCH_PARAM_END};
  ck_cu(cuLaunchKernel_ptsz(f, 64, 1, 1, 256, 1, 1, 0, NULL, NULL, extra));
  ck_cu(cuStreamSynchronize_ptsz(NULL));
  expect_pattern(p, n, 12);
  seed = 13;
  CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE};
  attr.value.cooperative = 1;
  CUlaunchConfig cfg = {.gridDimX = 8, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
                        .blockDimY = 1, .blockDimZ = 1, .attrs = &attr, .numAttrs = 1};
  ck_cu(cuLaunchKernelEx(&cfg, f, args, NULL));
  expect_pattern(p, n, 13);
  seed = 14;
  ck_cu(cuLaunchCooperativeKernel(f, 8, 1, 1, 128, 1, 1, 0, NULL, args));
  expect_pattern(p, n, 14);
  ck_assert_uint_eq(sim_test_stats(0).launches, 4);
  ck_cu_is(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, extra), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuLaunchKernelEx(NULL, f, args, NULL), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(pinned_host_is_reachable) {
  sim_test_setup(NULL);
  CUfunction f = load_test("sim_peek");
  void *h;
  ck_cu(cuMemAllocHost(&h, 4096));
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)h;
  void *args[] = {&p};
  ck_cu(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  ck_cu(cuCtxSynchronize());
}
END_TEST

/* Each case: the launch itself succeeds (asynchronous), the next
 * synchronisation reports CUDA_ERROR_ILLEGAL_ADDRESS, and so does every later
 * call on the context. */
static void expect_illegal(CUdeviceptr bad) {
  CUfunction f = load_test("sim_peek");
  void *args[] = {&bad};
  ck_cu(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  ck_cu_is(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  CUdeviceptr q;
  ck_cu_is(cuMemAlloc(&q, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
  ck_cu_is(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
}

START_TEST(illegal_freed) {
  sim_test_setup(NULL);
  CUdeviceptr p;
  ck_cu(cuMemAlloc(&p, 4096));
  ck_cu(cuMemFree(p));
  expect_illegal(p);
}
END_TEST

START_TEST(illegal_plain_host) {
  sim_test_setup(NULL);
  static uint32_t word;
  expect_illegal((CUdeviceptr)(uintptr_t)&word);
}
END_TEST

START_TEST(illegal_out_of_bounds) {
  sim_test_setup(NULL);
  CUdeviceptr p;
  ck_cu(cuMemAlloc(&p, 4096));
  expect_illegal(p + 4094); /* a 4-byte read across the end */
}
END_TEST

START_TEST(illegal_other_device) {
  setenv("SIMCUDA_DEVICES", "2", 1);
  sim_test_setup(NULL);
  CUcontext c1;
  CUdeviceptr p;
  ck_cu(cuDevicePrimaryCtxRetain(&c1, 1));
  ck_cu(cuCtxPushCurrent(c1));
  ck_cu(cuMemAlloc(&p, 4096));
  ck_cu(cuCtxPopCurrent(NULL));
  expect_illegal(p); /* device 1's memory from a device 0 kernel */
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_launch");
  TCase *tc = tcase_create("launch");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, param_layout);
  tcase_add_test(tc, module_errors);
  tcase_add_test(tc, launch_forms);
  tcase_add_test(tc, pinned_host_is_reachable);
  tcase_add_test(tc, illegal_freed);
  tcase_add_test(tc, illegal_plain_host);
  tcase_add_test(tc, illegal_out_of_bounds);
  tcase_add_test(tc, illegal_other_device);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
