/* test_sim_nvml.c: the simulated NVML reads the driver's device state: two
 * devices with different SIMCUDA_VRAM, consistent with cuMemGetInfo. */
#include <string.h>

#include "sim_nvml.h"
#include "sim_test.h"

START_TEST(before_init) {
  unsigned n;
  ck_assert_int_eq(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
  ck_assert_int_eq(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}
END_TEST

START_TEST(two_devices_consistent_with_driver) {
  setenv("SIMCUDA_DEVICES", "2", 1);
  sim_test_setup("256M,512M");
  ck_assert_int_eq(nvmlInit_v2(), NVML_SUCCESS);
  unsigned n;
  ck_assert_int_eq(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
  ck_assert_uint_eq(n, 2);
  nvmlDevice_t d0, d1, bad;
  ck_assert_int_eq(nvmlDeviceGetHandleByIndex_v2(0, &d0), NVML_SUCCESS);
  ck_assert_int_eq(nvmlDeviceGetHandleByIndex_v2(1, &d1), NVML_SUCCESS);
  ck_assert_int_eq(nvmlDeviceGetHandleByIndex_v2(2, &bad), NVML_ERROR_INVALID_ARGUMENT);
  CUcontext c1;
  CUdeviceptr p, m;
  ck_cu(cuDevicePrimaryCtxRetain(&c1, 1));
  ck_cu(cuCtxPushCurrent(c1));
  ck_cu(cuMemAlloc(&p, 64 * MiB));
  ck_cu(cuMemAllocManaged(&m, 8 * MiB, CU_MEM_ATTACH_GLOBAL));
  ck_cu(kit_module(NULL));
  ck_cu(kit_fill(m, 2 * MiB, 1, NULL)); /* 8 MiB of managed memory now resident on device 1 */
  ck_cu(cuCtxSynchronize());
  size_t f, t;
  ck_cu(cuMemGetInfo(&f, &t));
  nvmlMemory_t mem;
  ck_assert_int_eq(nvmlDeviceGetMemoryInfo(d1, &mem), NVML_SUCCESS);
  ck_assert_uint_eq(mem.total, 512 * MiB);
  ck_assert_uint_eq(mem.used, 72 * MiB);
  ck_assert_uint_eq(mem.total, t);
  ck_assert_uint_eq(mem.free, f);
  nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
  ck_assert_int_eq(nvmlDeviceGetMemoryInfo_v2(d0, &m2), NVML_SUCCESS);
  ck_assert_uint_eq(m2.total, 256 * MiB);
  ck_assert_uint_eq(m2.used, 0);
  ck_assert_uint_eq(m2.free, 256 * MiB);
  m2.version = 1;
  ck_assert_int_eq(nvmlDeviceGetMemoryInfo_v2(d0, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  char name[64], uuid[96], small[4];
  ck_assert_int_eq(nvmlDeviceGetName(d1, name, sizeof name), NVML_SUCCESS);
  ck_assert_str_eq(name, "simcuda GPU 1");
  ck_assert_int_eq(nvmlDeviceGetName(d1, small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  ck_assert_int_eq(nvmlDeviceGetUUID(d0, uuid, sizeof uuid), NVML_SUCCESS);
  CUuuid cu;
  ck_cu(cuDeviceGetUuid(&cu, 0));
  char want[16];
  snprintf(want, sizeof want, "GPU-%02x%02x", (unsigned char)cu.bytes[0], (unsigned char)cu.bytes[1]);
  ck_assert_int_eq(strncmp(uuid, want, strlen(want)), 0);
  ck_assert_uint_eq(strlen(uuid), 40);
  ck_assert_str_eq(nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
  ck_assert_int_eq(nvmlShutdown(), NVML_SUCCESS);
  ck_assert_int_eq(nvmlDeviceGetMemoryInfo(d1, &mem), NVML_ERROR_UNINITIALIZED);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_nvml");
  TCase *tc = tcase_create("nvml");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, before_init);
  tcase_add_test(tc, two_devices_consistent_with_driver);
  suite_add_tcase(s, tc);
  return sim_test_run(s);
}
