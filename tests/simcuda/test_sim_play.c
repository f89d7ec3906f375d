/* test_sim_play.c: what vx play needs of the simulator (issue 11): kernels
 * that declare their time and know their stream, the timing-only mode. */
#include <signal.h>
#include <string.h>

#include "costs.h"
#include "sim_test.h"

static const char play_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry sim_declared(\n\t.param .u64 sim_declared_param_0\n)\n{\n\tret;\n}\n";

static CUstream seen_stream;
static size_t touch_bytes;
static uint64_t declare_ns;
static int read_value = -1;

SIMCUDA_KERNEL(sim_declared) {
  CUdeviceptr p = *(CUdeviceptr *)params[0];
  seen_stream = simcuda_kernel_stream(k);
  const unsigned char *h = simcuda_access(k, p, touch_bytes, SIMCUDA_READ);
  if (h) read_value = h[touch_bytes - 1];
  if (declare_ns) simcuda_kernel_time(k, declare_ns);
}

static CUfunction load(void) {
  CUmodule m;
  CUfunction f;
  ck_cu(cuModuleLoadData(&m, play_ptx));
  ck_cu(cuModuleGetFunction(&f, m, "sim_declared"));
  return f;
}

static void launch(CUfunction f, CUdeviceptr p, CUstream s) {
  void *args[] = {&p};
  ck_cu(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
  ck_cu(cuCtxSynchronize());
}

/* The defaults are policy/costs.h's, the numbers vx replay charges. */
START_TEST(cost_defaults) {
  sim_test_setup(NULL);
  CUfunction f = load();
  CUdeviceptr p;
  size_t n = 30 << 20;
  ck_cu(cuMemAlloc(&p, n));
  touch_bytes = n;
  simcuda_reset_stats();
  launch(f, p, NULL);
  simcuda_stats_t st = sim_test_stats(0);
  uint64_t want = VX_COST_LAUNCH_NS + (uint64_t)((double)n / VX_COST_DEV_GBPS + 0.5);
  ck_assert_uint_eq(st.kernel_ns, want);
  ck_assert_uint_eq(VX_COST_DEV_GBPS, 3000);
}
END_TEST

/* A declared time replaces launch overhead and bandwidth; faults still add. */
START_TEST(declared_time_and_stream) {
  sim_test_setup("64M");
  CUfunction f = load();
  CUdeviceptr p, m;
  CUstream s;
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ck_cu(cuMemAlloc(&p, 8 << 20));
  touch_bytes = 8 << 20;
  declare_ns = 123456;
  simcuda_reset_stats();
  launch(f, p, s);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.kernel_ns, 123456);
  ck_assert_ptr_eq(seen_stream, s);
  launch(f, p, NULL);
  ck_assert_ptr_eq(seen_stream, CU_STREAM_LEGACY);
  /* managed memory on the host: one fault batch on top of the declared time */
  ck_cu(cuMemAllocManaged(&m, 4 << 20, CU_MEM_ATTACH_GLOBAL));
  memset((void *)(uintptr_t)m, 1, 4 << 20);
  touch_bytes = 4 << 20;
  simcuda_reset_stats();
  launch(f, m, s);
  st = sim_test_stats(0);
  ck_assert_uint_eq(st.kernel_ns, 123456);
  ck_assert_uint_eq(st.stall_ns,
                    VX_COST_FAULT_NS + (uint64_t)((4 << 20) / VX_COST_LINK_GBPS + 0.5));
  ck_assert_uint_eq(st.total_ns, st.kernel_ns + st.stall_ns);
  ck_assert_int_eq(read_value, 1);
}
END_TEST

/* Timing-only: nothing is kept, everything else is counted the same. */
START_TEST(timing_only) {
  setenv("SIMCUDA_TIMING_ONLY", "1", 1);
  sim_test_setup("64M");
  CUfunction f = load();
  CUdeviceptr p, m;
  unsigned char *h;
  size_t n = 4 << 20;
  ck_cu(cuMemAllocHost((void **)&h, n));
  memset(h, 7, n);
  ck_cu(cuMemAlloc(&p, n));
  ck_cu(cuMemcpyHtoD(p, h, n));
  ck_cu(cuMemsetD8(p, 9, n));
  ck_cu(cuMemcpyDtoH(h, p, n));
  ck_assert_int_eq(h[0], 0); /* device bytes read as zeros */
  ck_assert_int_eq(h[n - 1], 0);
  touch_bytes = n;
  read_value = -1;
  launch(f, p, NULL);
  ck_assert_int_eq(read_value, 0);
  /* managed: a 256 MiB allocation on a 64 MiB device migrates as usual */
  size_t big = 256 << 20;
  ck_cu(cuMemAllocManaged(&m, big, CU_MEM_ATTACH_GLOBAL));
  touch_bytes = big;
  simcuda_reset_stats();
  launch(f, m, NULL);
  launch(f, m, NULL);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_gt(st.faults, 0);
  ck_assert_uint_gt(st.evictions, 0);
  ck_assert_uint_gt(st.bytes_evict_dtoh, 0);
  ck_assert_uint_le(st.device_used_peak, 64 << 20);
  ck_cu(cuMemFreeHost(h));
}
END_TEST

/* A host write to managed memory in timing-only mode is refused loudly. */
START_TEST(timing_only_refuses_writes) {
  setenv("SIMCUDA_TIMING_ONLY", "1", 1);
  sim_test_setup(NULL);
  CUdeviceptr m;
  ck_cu(cuMemAllocManaged(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL));
  ck_assert_int_eq(((volatile unsigned char *)(uintptr_t)m)[5], 0);
  ((volatile unsigned char *)(uintptr_t)m)[5] = 1; /* SIGSEGV */
}
END_TEST

START_TEST(timing_only_bad_value) {
  setenv("SIMCUDA_TIMING_ONLY", "yes", 1);
  ck_cu_is(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_play");
  TCase *tc = tcase_create("play");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, cost_defaults);
  tcase_add_test(tc, declared_time_and_stream);
  tcase_add_test(tc, timing_only);
#ifndef __SANITIZE_ADDRESS__ /* ASan turns the SIGSEGV into its own report and exit */
  tcase_add_test_raise_signal(tc, timing_only_refuses_writes, SIGSEGV);
#else
  (void)timing_only_refuses_writes;
#endif
  tcase_add_test(tc, timing_only_bad_value);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
