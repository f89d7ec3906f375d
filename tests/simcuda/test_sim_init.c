/* test_sim_init.c: initialisation, devices, attributes, contexts, errors,
 * configuration parsing of the simulated driver. */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim_test.h"

START_TEST(not_initialized_before_cuInit) {
  int n = -1, v = 0;
  CUdeviceptr p;
  ck_cu_is(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  ck_cu_is(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
  ck_cu_is(cuCtxSynchronize(), CUDA_ERROR_NOT_INITIALIZED);
  ck_cu(cuDriverGetVersion(&v));
  ck_assert_int_eq(v, 13000);
  ck_cu_is(cuInit(1), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuInit(0));
  ck_cu(cuDeviceGetCount(&n));
  ck_assert_int_eq(n, 1);
}
END_TEST

START_TEST(device_queries) {
  ck_cu(cuInit(0));
  CUdevice d;
  ck_cu(cuDeviceGet(&d, 0));
  ck_cu_is(cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
  ck_cu_is(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
  int v;
  ck_cu(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0));
  ck_assert_int_eq(v, 1);
  ck_cu(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0));
  ck_assert_int_eq(v, 0);
  ck_cu(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  ck_assert_int_eq(v, 9);
  ck_cu(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
  ck_assert_int_eq(v, 0);
  ck_cu(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  ck_assert_int_gt(v, 0);
  ck_cu_is(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3), CUDA_ERROR_INVALID_DEVICE);
  char name[64];
  ck_cu(cuDeviceGetName(name, sizeof name, 0));
  ck_assert_str_eq(name, "simcuda GPU 0");
  size_t total;
  ck_cu(cuDeviceTotalMem(&total, 0));
  ck_assert_uint_eq(total, (size_t)1 << 30); /* default SIMCUDA_VRAM */
  CUuuid a, b;
  ck_cu(cuDeviceGetUuid(&a, 0));
  ck_cu(cuDeviceGetUuid_v2(&b, 0));
  ck_assert_mem_eq(a.bytes, b.bytes, 16);
}
END_TEST

START_TEST(vram_and_devices_from_env) {
  setenv("SIMCUDA_DEVICES", "2", 1);
  setenv("SIMCUDA_VRAM", "256M,3G", 1);
  ck_cu(cuInit(0));
  int n;
  ck_cu(cuDeviceGetCount(&n));
  ck_assert_int_eq(n, 2);
  size_t t0, t1;
  ck_cu(cuDeviceTotalMem(&t0, 0));
  ck_cu(cuDeviceTotalMem(&t1, 1));
  ck_assert_uint_eq(t0, 256 * MiB);
  ck_assert_uint_eq(t1, (size_t)3 << 30);
  CUuuid a, b;
  ck_cu(cuDeviceGetUuid(&a, 0));
  ck_cu(cuDeviceGetUuid(&b, 1));
  ck_assert(memcmp(a.bytes, b.bytes, 16) != 0);
}
END_TEST

START_TEST(bad_vram_refuses_init) {
  setenv("SIMCUDA_VRAM", "12Q", 1);
  ck_cu_is(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

START_TEST(bad_jitter_refuses_init) {
  setenv("SIMCUDA_JITTER_US", "5ms", 1);
  ck_cu_is(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

START_TEST(jitter_beyond_a_second_refuses_init) {
  setenv("SIMCUDA_JITTER_US", "1000001", 1);
  ck_cu_is(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

START_TEST(bad_alloc_pause_refuses_init) {
  setenv("SIMCUDA_ALLOC_PAUSE_US", "-1", 1);
  ck_cu_is(cuInit(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

/* SIMCUDA_ALLOC_PAUSE_US: the allocation's memory is taken before the
 * pause, so another thread sees the device's occupancy grow while the
 * call has not yet returned. */
static int pause_done;
static CUcontext pause_ctx;
static void *pause_alloc(void *arg) {
  CUdeviceptr *p = arg;
  ck_cu(cuCtxSetCurrent(pause_ctx));
  ck_cu(cuMemAlloc_v2(p, 4u << 20));
  __atomic_store_n(&pause_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

START_TEST(alloc_pause_holds_the_call_not_the_memory) {
  setenv("SIMCUDA_ALLOC_PAUSE_US", "500000", 1);
  pause_ctx = sim_test_setup("64M");
  pthread_t t;
  CUdeviceptr p = 0;
  ck_assert_int_eq(pthread_create(&t, NULL, pause_alloc, &p), 0);
  int seen = 0; /* the memory taken while the call has not returned */
  while (!__atomic_load_n(&pause_done, __ATOMIC_ACQUIRE)) {
    uint64_t used = sim_test_stats(0).device_used_bytes;
    if (used >= (4u << 20) && !__atomic_load_n(&pause_done, __ATOMIC_ACQUIRE)) seen = 1;
    usleep(1000);
  }
  pthread_join(t, NULL);
  ck_assert_msg(seen, "the memory was not taken before the paused call returned");
  ck_cu(cuMemFree_v2(p));
}
END_TEST

/* SIMCUDA_JITTER_US reorders the workers in real time, never the streams'
 * semantics: each stream still runs in order and an event wait still
 * holds a stream back, whatever the pauses. */
START_TEST(jitter_keeps_stream_order) {
  setenv("SIMCUDA_JITTER_US", "300", 1);
  sim_test_setup("64M");
  CUstream a, b;
  ck_cu(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  ck_cu(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  ck_cu(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  size_t n = 1 << 16;
  CUdeviceptr p, q;
  ck_cu(cuMemAlloc(&p, n * 4));
  ck_cu(cuMemAlloc(&q, n * 4));
  for (uint32_t round = 0; round < 8; round++) {
    ck_cu(kit_fill(p, n, 100 + round, a));
    ck_cu(cuMemsetD32Async(p, round, 1, a)); /* after the fill, on a */
    ck_cu(cuEventRecord(ev, a));
    ck_cu(cuStreamWaitEvent(b, ev, 0));
    ck_cu(cuMemcpyDtoDAsync(q, p, n * 4, b)); /* after both, on b */
    ck_cu(cuStreamSynchronize(b));
    uint32_t h[2];
    ck_cu(cuMemcpyDtoH(h, q, sizeof h));
    ck_assert_uint_eq(h[0], round);
    ck_assert_uint_eq(h[1], kit_hash(100 + round, 1));
  }
  ck_cu(cuCtxSynchronize());
}
END_TEST

START_TEST(no_context_errors) {
  ck_cu(cuInit(0));
  CUdeviceptr p;
  size_t f, t;
  CUcontext c = (CUcontext)0x1;
  ck_cu_is(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
  ck_cu_is(cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
  ck_cu_is(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
  ck_cu(cuCtxGetCurrent(&c));
  ck_assert_ptr_null(c);
  ck_cu_is(cuCtxSetCurrent((CUcontext)&f), CUDA_ERROR_INVALID_CONTEXT);
}
END_TEST

START_TEST(primary_and_ordinary_contexts) {
  ck_cu(cuInit(0));
  CUcontext p1, p2, c, cur;
  ck_cu(cuDevicePrimaryCtxRetain(&p1, 0));
  ck_cu(cuDevicePrimaryCtxRetain(&p2, 0));
  ck_assert_ptr_eq(p1, p2);
  unsigned flags;
  int active;
  ck_cu(cuDevicePrimaryCtxGetState(0, &flags, &active));
  ck_assert_int_eq(active, 1);
  ck_cu(cuCtxSetCurrent(p1));
  ck_cu(cuCtxCreate(&c, NULL, 0, 0)); /* pushes */
  ck_cu(cuCtxGetCurrent(&cur));
  ck_assert_ptr_eq(cur, c);
  CUdeviceptr d;
  ck_cu(cuMemAlloc(&d, 4096));
  CUcontext owner;
  ck_cu(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, d));
  ck_assert_ptr_eq(owner, c);
  CUcontext popped;
  ck_cu(cuCtxPopCurrent(&popped));
  ck_assert_ptr_eq(popped, c);
  ck_cu(cuCtxGetCurrent(&cur));
  ck_assert_ptr_eq(cur, p1);
  ck_cu(cuCtxPushCurrent(c));
  ck_cu(cuCtxDestroy(c)); /* frees its memory, pops it */
  ck_cu(cuCtxGetCurrent(&cur));
  ck_assert_ptr_eq(cur, p1);
  ck_cu_is(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, d), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuCtxDestroy(c), CUDA_ERROR_INVALID_CONTEXT);
  ck_cu_is(cuCtxPushCurrent(c), CUDA_ERROR_INVALID_CONTEXT);
  CUdevice dev = -1;
  ck_cu(cuCtxGetDevice(&dev));
  ck_assert_int_eq(dev, 0);
  ck_cu(cuDevicePrimaryCtxRelease(0));
  ck_cu(cuDevicePrimaryCtxRelease(0));
  ck_cu_is(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
  ck_cu(cuDevicePrimaryCtxGetState(0, &flags, &active));
  ck_assert_int_eq(active, 0);
  ck_cu_is(cuMemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT); /* released primary */
}
END_TEST

START_TEST(error_names_and_export_table) {
  const char *s = NULL;
  ck_cu(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
  ck_assert_str_eq(s, "CUDA_ERROR_OUT_OF_MEMORY");
  ck_cu(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
  ck_assert_str_eq(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
  ck_cu_is(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
  ck_assert_str_eq(s, "out of memory");
  const void *tab = (void *)1;
  CUuuid id = {{0}};
  ck_cu_is(cuGetExportTable(&tab, &id), CUDA_ERROR_NOT_SUPPORTED);
}
END_TEST

START_TEST(unusable_after_fork) {
  ck_cu(cuInit(0));
  pid_t pid = fork();
  if (pid == 0) {
    int n;
    _exit(cuInit(0) == CUDA_ERROR_NOT_INITIALIZED &&
                  cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED
              ? 0
              : 1);
  }
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  int n;
  ck_cu(cuDeviceGetCount(&n)); /* the parent is unaffected */
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_init");
  TCase *tc = tcase_create("init");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, not_initialized_before_cuInit);
  tcase_add_test(tc, device_queries);
  tcase_add_test(tc, vram_and_devices_from_env);
  tcase_add_test(tc, bad_vram_refuses_init);
  tcase_add_test(tc, bad_jitter_refuses_init);
  tcase_add_test(tc, jitter_beyond_a_second_refuses_init);
  tcase_add_test(tc, jitter_keeps_stream_order);
  tcase_add_test(tc, bad_alloc_pause_refuses_init);
  tcase_add_test(tc, alloc_pause_holds_the_call_not_the_memory);
  tcase_add_test(tc, no_context_errors);
  tcase_add_test(tc, primary_and_ordinary_contexts);
  tcase_add_test(tc, error_names_and_export_table);
  tcase_add_test(tc, unusable_after_fork);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
