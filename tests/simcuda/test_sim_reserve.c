/* test_sim_reserve.c: SIMCUDA_CTX_OVERHEAD (VRAM each live context holds,
 * visible to cuMemGetInfo and NVML, unavailable to cuMemAlloc, given back at
 * destruction) and SIMCUDA_CONCURRENT_MANAGED=0 (the attribute reads 0 and
 * what cuda.h reserves for such devices is refused). */
#include <unistd.h>

#include "sim_test.h"

static size_t sim_free(void) {
  size_t f, t;
  ck_cu(cuMemGetInfo(&f, &t));
  return f;
}

START_TEST(ctx_overhead_primary) {
  setenv("SIMCUDA_VRAM", "64M", 1);
  setenv("SIMCUDA_CTX_OVERHEAD", "24M", 1);
  ck_cu(cuInit(0));
  CUcontext c;
  ck_cu(cuDevicePrimaryCtxRetain(&c, 0));
  ck_cu(cuCtxSetCurrent(c));
  ck_assert_uint_eq(sim_free(), 40 * MiB);
  unsigned long long total, used;
  ck_assert_int_eq(simcuda_nvml_memory(0, &total, &used), 0);
  ck_assert_uint_eq(used, 24 * MiB);
  /* A second reference is the same context: nothing more is taken. */
  CUcontext c2;
  ck_cu(cuDevicePrimaryCtxRetain(&c2, 0));
  ck_assert_uint_eq(sim_free(), 40 * MiB);
  /* Native memory cannot have the context's share. */
  CUdeviceptr p, q;
  ck_cu(cuMemAlloc(&p, 40 * MiB));
  ck_cu_is(cuMemAlloc(&q, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
  ck_cu(cuMemFree(p));
  /* Managed memory can oversubscribe, but its resident pages share the rest. */
  ck_cu(cuMemAllocManaged(&q, 64 * MiB, CU_MEM_ATTACH_GLOBAL));
  CUmemLocation dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  ck_cu(cuMemPrefetchAsync_v2(q, 64 * MiB, dev, 0, NULL));
  ck_cu(cuCtxSynchronize());
  ck_assert_uint_eq(sim_free(), 0);
  ck_assert_uint_eq(sim_test_stats(0).device_used_bytes, 64 * MiB);
  ck_cu(cuMemFree(q));
  ck_cu(cuDevicePrimaryCtxRelease(0));
  ck_cu(cuDevicePrimaryCtxRelease(0));
  /* The last release destroyed it: its VRAM is back. */
  ck_assert_int_eq(simcuda_nvml_memory(0, &total, &used), 0);
  ck_assert_uint_eq(used, 0);
}
END_TEST

START_TEST(ctx_overhead_ordinary_contexts) {
  setenv("SIMCUDA_VRAM", "64M", 1);
  setenv("SIMCUDA_CTX_OVERHEAD", "24M", 1);
  ck_cu(cuInit(0));
  CUcontext a, b, c;
  ck_cu(cuCtxCreate(&a, NULL, 0, 0));
  ck_cu(cuCtxCreate(&b, NULL, 0, 0));
  ck_assert_uint_eq(sim_free(), 16 * MiB);
  /* No room for a third context: creation fails as the driver's does. */
  ck_cu_is(cuCtxCreate(&c, NULL, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ck_cu(cuCtxDestroy(b));
  ck_assert_uint_eq(sim_free(), 40 * MiB);
  ck_cu(cuCtxDestroy(a));
  unsigned long long total, used;
  ck_assert_int_eq(simcuda_nvml_memory(0, &total, &used), 0);
  ck_assert_uint_eq(used, 0);
}
END_TEST

START_TEST(ctx_overhead_bad_value) {
  setenv("SIMCUDA_CTX_OVERHEAD", "lots", 1);
  ck_cu_is(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

START_TEST(no_concurrent_managed_access) {
  setenv("SIMCUDA_CONCURRENT_MANAGED", "0", 1);
  sim_test_setup("64M");
  int v = -1;
  ck_cu(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0));
  ck_assert_int_eq(v, 0);
  CUdeviceptr p;
  ck_cu(cuMemAllocManaged(&p, 4 * MiB, CU_MEM_ATTACH_GLOBAL));
  CUmemLocation dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  ck_cu_is(cuMemPrefetchAsync_v2(p, 4 * MiB, dev, 0, NULL), CUDA_ERROR_INVALID_DEVICE);
  ck_cu(cuMemPrefetchAsync_v2(p, 4 * MiB, host, 0, NULL));
  ck_cu_is(cuMemAdvise_v2(p, 4 * MiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev),
           CUDA_ERROR_INVALID_DEVICE);
  ck_cu_is(cuMemAdvise_v2(p, 4 * MiB, CU_MEM_ADVISE_SET_ACCESSED_BY, dev),
           CUDA_ERROR_INVALID_DEVICE);
  ck_cu(cuMemAdvise_v2(p, 4 * MiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
  size_t sz = 4 * MiB, idx = 0;
  CUstream s;
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ck_cu_is(cuMemPrefetchBatchAsync(&p, &sz, 1, &host, &idx, 1, 0, s), CUDA_ERROR_NOT_SUPPORTED);
  ck_cu(cuStreamSynchronize(s));
  ck_cu(cuMemFree(p));
}
END_TEST

START_TEST(concurrent_managed_bad_value) {
  setenv("SIMCUDA_CONCURRENT_MANAGED", "maybe", 1);
  ck_cu_is(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_reserve");
  TCase *tc = tcase_create("reserve");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, ctx_overhead_primary);
  tcase_add_test(tc, ctx_overhead_ordinary_contexts);
  tcase_add_test(tc, ctx_overhead_bad_value);
  tcase_add_test(tc, no_concurrent_managed_access);
  tcase_add_test(tc, concurrent_managed_bad_value);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
