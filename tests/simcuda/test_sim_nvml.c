/* test_sim_nvml.c: the simulated NVML reads the driver's device state: two
 * devices with different SIMCUDA_VRAM, consistent with cuMemGetInfo. */
#include <string.h>
#include <unistd.h>

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
  snprintf(want, sizeof want, "GPU-%02x%02x", (unsigned char)cu.bytes[0],
           (unsigned char)cu.bytes[1]);
  ck_assert_int_eq(strncmp(uuid, want, strlen(want)), 0);
  ck_assert_uint_eq(strlen(uuid), 40);
  ck_assert_str_eq(nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
  ck_assert_int_eq(nvmlShutdown(), NVML_SUCCESS);
  ck_assert_int_eq(nvmlDeviceGetMemoryInfo(d1, &mem), NVML_ERROR_UNINITIALIZED);
}
END_TEST

/* What real clients (nvidia-ml-py) call: nvmlInitWithFlags, versions, the
 * process lists in their three layouts, utilization. */
START_TEST(client_calls) {
  setenv("SIMCUDA_VRAM", "512M", 1);
  ck_cu(cuInit(0));
  ck_assert_int_eq(nvmlInitWithFlags(8), NVML_ERROR_INVALID_ARGUMENT);
  ck_assert_int_eq(nvmlInitWithFlags(0), NVML_SUCCESS);
  int cv;
  ck_assert_int_eq(nvmlSystemGetCudaDriverVersion(&cv), NVML_SUCCESS);
  int want_cv;
  ck_cu(cuDriverGetVersion(&want_cv));
  ck_assert_int_eq(cv, want_cv);
  ck_assert_int_eq(nvmlSystemGetCudaDriverVersion_v2(&cv), NVML_SUCCESS);
  char ver[80], tiny[3];
  ck_assert_int_eq(nvmlSystemGetDriverVersion(ver, sizeof ver), NVML_SUCCESS);
  ck_assert_ptr_nonnull(strchr(ver, '.'));
  ck_assert_int_eq(nvmlSystemGetDriverVersion(tiny, sizeof tiny), NVML_ERROR_INSUFFICIENT_SIZE);
  nvmlDevice_t d, byuuid;
  ck_assert_int_eq(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
  char uuid[96];
  ck_assert_int_eq(nvmlDeviceGetUUID(d, uuid, sizeof uuid), NVML_SUCCESS);
  ck_assert_int_eq(nvmlDeviceGetHandleByUUID(uuid, &byuuid), NVML_SUCCESS);
  ck_assert_ptr_eq(byuuid, d);
  ck_assert_int_eq(nvmlDeviceGetHandleByUUID("GPU-nope", &byuuid), NVML_ERROR_NOT_FOUND);

  /* No context yet: no process. */
  unsigned n = 0;
  ck_assert_int_eq(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL), NVML_SUCCESS);
  ck_assert_uint_eq(n, 0);
  CUdeviceptr p;
  sim_test_setup(NULL);
  n = 0;
  ck_assert_int_eq(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL),
                   NVML_ERROR_INSUFFICIENT_SIZE);
  ck_assert_uint_eq(n, 1);
  ck_cu(cuMemAlloc(&p, 96 * MiB));
  n = 1;
  ck_assert_int_eq(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL),
                   NVML_ERROR_INVALID_ARGUMENT);

  /* The layouts: v1 entries are 16 bytes, v2/v3 24 (nvml.h's ABI). */
  ck_assert_uint_eq(sizeof(nvmlProcessInfo_v1_t), 16);
  ck_assert_uint_eq(sizeof(nvmlProcessInfo_v2_t), 24);
  ck_assert_uint_eq(sizeof(nvmlProcessInfo_t), 24);
  nvmlProcessInfo_v1_t v1[2];
  memset(v1, 0xab, sizeof v1);
  n = 2;
  ck_assert_int_eq(nvmlDeviceGetComputeRunningProcesses(d, &n, v1), NVML_SUCCESS);
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(v1[0].pid, (unsigned)getpid());
  ck_assert_uint_eq(v1[0].usedGpuMemory, 96 * MiB);
  ck_assert_uint_eq(v1[1].pid, 0xababababu); /* only n entries written */
  nvmlProcessInfo_v2_t v2[1];
  n = 1;
  ck_assert_int_eq(nvmlDeviceGetComputeRunningProcesses_v2(d, &n, v2), NVML_SUCCESS);
  ck_assert_uint_eq(v2[0].pid, (unsigned)getpid());
  ck_assert_uint_eq(v2[0].usedGpuMemory, 96 * MiB);
  ck_assert_uint_eq(v2[0].gpuInstanceId, 0xFFFFFFFFu);
  ck_assert_uint_eq(v2[0].computeInstanceId, 0xFFFFFFFFu);
  nvmlProcessInfo_t v3[1];
  n = 1;
  ck_assert_int_eq(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, v3), NVML_SUCCESS);
  ck_assert_uint_eq(v3[0].usedGpuMemory, 96 * MiB);
  n = 0;
  ck_assert_int_eq(nvmlDeviceGetGraphicsRunningProcesses_v3(d, &n, NULL), NVML_SUCCESS);
  ck_assert_uint_eq(n, 0);
  ck_assert_int_eq(nvmlDeviceGetGraphicsRunningProcesses(d, &n, NULL), NVML_SUCCESS);
  ck_assert_int_eq(nvmlDeviceGetMPSComputeRunningProcesses_v3(d, &n, NULL), NVML_SUCCESS);
  ck_assert_uint_eq(n, 0);
  char pname[64];
  ck_assert_int_eq(nvmlSystemGetProcessName((unsigned)getpid(), pname, sizeof pname), NVML_SUCCESS);
  ck_assert_uint_gt(strlen(pname), 0);

  /* Utilization: a kernel ran for part of the virtual time since start. */
  ck_cu(kit_fill(p, 8 * MiB, 3, NULL));
  ck_cu(cuCtxSynchronize());
  nvmlUtilization_t u;
  ck_assert_int_eq(nvmlDeviceGetUtilizationRates(d, &u), NVML_SUCCESS);
  ck_assert_uint_gt(u.gpu, 0);
  ck_assert_uint_le(u.gpu, 100);
  ck_assert_uint_le(u.memory, 100);
  ck_assert_int_eq(nvmlDeviceGetUtilizationRates(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
  ck_assert_int_eq(nvmlShutdown(), NVML_SUCCESS);
  ck_assert_int_eq(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL), NVML_ERROR_UNINITIALIZED);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_nvml");
  TCase *tc = tcase_create("nvml");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, before_init);
  tcase_add_test(tc, two_devices_consistent_with_driver);
  tcase_add_test(tc, client_calls);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
