/* test_sim_mem.c: device memory (capacity, OOM, frees, info, ranges, pointer
 * attributes), pinned host memory, copies and sets. */
#include <string.h>

#include "sim_test.h"

START_TEST(copy_roundtrip) {
  sim_test_setup(NULL);
  enum { N = 300000 };
  static uint32_t src[N], dst[N];
  for (size_t i = 0; i < N; i++) src[i] = kit_hash(7, i);
  CUdeviceptr a, b;
  ck_cu(cuMemAlloc(&a, sizeof src));
  ck_cu(cuMemAlloc(&b, sizeof src));
  ck_cu(cuMemcpyHtoD(a, src, sizeof src));
  ck_cu(cuMemcpyDtoD(b, a, sizeof src));
  ck_cu(cuMemcpyDtoH(dst, b, sizeof dst));
  ck_assert_mem_eq(src, dst, sizeof src);
  memset(dst, 0, sizeof dst);
  ck_cu(cuMemcpy((CUdeviceptr)(uintptr_t)dst, a, sizeof dst)); /* unified addressing */
  ck_assert_mem_eq(src, dst, sizeof src);
  ck_cu(cuMemsetD32(a, 0xdeadbeef, N));
  ck_cu(cuMemsetD8(a, 0x5a, 3));
  ck_cu(cuMemcpyDtoH(dst, a, sizeof dst));
  ck_assert_uint_eq(dst[0], 0xde5a5a5a);
  ck_assert_uint_eq(dst[N - 1], 0xdeadbeef);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.bytes_memcpy_htod, sizeof src);
  ck_assert_uint_eq(st.bytes_memcpy_dtod, sizeof src);
  ck_assert_uint_eq(st.bytes_memcpy_dtoh, 3 * sizeof src);
  ck_cu_is(cuMemsetD32(a + 2, 0, 1), CUDA_ERROR_INVALID_VALUE); /* misaligned */
  ck_cu_is(cuMemcpyHtoD(a + 4, src, sizeof src), CUDA_ERROR_INVALID_VALUE); /* past the end */
  ck_cu_is(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)src, src, 4), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemcpyDtoH(NULL, a, 4), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuMemFree(a));
  ck_cu(cuMemFree(b));
}
END_TEST

START_TEST(capacity_and_oom) {
  sim_test_setup("64M");
  size_t f, t;
  CUdeviceptr a, b, c;
  ck_cu(cuMemGetInfo(&f, &t));
  ck_assert_uint_eq(t, 64 * MiB);
  ck_assert_uint_eq(f, 64 * MiB);
  ck_cu(cuMemAlloc(&a, 48 * MiB));
  ck_cu(cuMemGetInfo(&f, &t));
  ck_assert_uint_eq(f, 16 * MiB);
  ck_cu_is(cuMemAlloc(&b, 32 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
  ck_cu(cuMemAlloc(&b, 16 * MiB)); /* exactly full */
  ck_cu_is(cuMemAlloc(&c, 1), CUDA_ERROR_OUT_OF_MEMORY);
  ck_cu(cuMemFree(a));
  ck_cu(cuMemAlloc(&c, 32 * MiB));
  ck_assert(c != a); /* freed ranges are quarantined, not reused at once */
  ck_assert_uint_eq(c % (2 * MiB), 0);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.device_used_bytes, 48 * MiB);
  ck_assert_uint_eq(st.device_used_peak, 64 * MiB);
  ck_cu_is(cuMemAlloc(&c, 0), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(bad_frees) {
  sim_test_setup(NULL);
  CUdeviceptr a;
  ck_cu(cuMemAlloc(&a, 1000));
  ck_assert_uint_eq(a % 256, 0);
  ck_cu_is(cuMemFree(a + 8), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemFree((CUdeviceptr)0x1234), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuMemFree(0));
  ck_cu(cuMemFree(a));
  ck_cu_is(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(address_range_and_attributes) {
  sim_test_setup(NULL);
  CUdeviceptr a, m, base;
  size_t size;
  ck_cu(cuMemAlloc(&a, 5000));
  ck_cu(cuMemAllocManaged(&m, 3 * MiB, CU_MEM_ATTACH_GLOBAL));
  ck_cu(cuMemGetAddressRange(&base, &size, a + 4999));
  ck_assert_uint_eq(base, a);
  ck_assert_uint_eq(size, 5000);
  ck_cu_is(cuMemGetAddressRange(&base, &size, a + 5000 + (1 << 20) * 64), CUDA_ERROR_NOT_FOUND);
  unsigned type = 0, managed = 7;
  int ord = -1;
  ck_cu(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 10));
  ck_assert_uint_eq(type, CU_MEMORYTYPE_DEVICE);
  ck_cu(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a));
  ck_assert_uint_eq(managed, 0);
  ck_cu(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + MiB));
  ck_assert_uint_eq(managed, 1);
  ck_cu(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, m));
  ck_assert_int_eq(ord, 0);
  ck_cu(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, m + 100));
  ck_assert_uint_eq(base, m);
  void *hp;
  ck_cu_is(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, a), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, m));
  ck_assert_ptr_eq(hp, (void *)(uintptr_t)m);
  int local;
  ck_cu_is(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)&local),
           CUDA_ERROR_INVALID_VALUE);
  CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void *data[2] = {&type, &managed};
  type = 9;
  managed = 9;
  ck_cu(cuPointerGetAttributes(2, at, data, (CUdeviceptr)(uintptr_t)&local));
  ck_assert_uint_eq(type, 0);
  ck_assert_uint_eq(managed, 0);
  unsigned long long id1, id2;
  ck_cu(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
  ck_cu(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, m));
  ck_assert(id1 != id2);
}
END_TEST

START_TEST(pitch) {
  sim_test_setup(NULL);
  CUdeviceptr p;
  size_t pitch = 0;
  ck_cu(cuMemAllocPitch(&p, &pitch, 1000, 10, 4));
  ck_assert_uint_eq(pitch, 1024);
  size_t size;
  ck_cu(cuMemGetAddressRange(NULL, &size, p));
  ck_assert_uint_eq(size, 10240);
  ck_cu_is(cuMemAllocPitch(&p, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(host_memory) {
  sim_test_setup(NULL);
  void *h1, *h2;
  ck_cu(cuMemAllocHost(&h1, 10000));
  ck_cu(cuMemHostAlloc(&h2, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
  unsigned fl;
  ck_cu(cuMemHostGetFlags(&fl, h2));
  ck_assert_uint_eq(fl, CU_MEMHOSTALLOC_DEVICEMAP);
  CUdeviceptr dp;
  ck_cu(cuMemHostGetDevicePointer(&dp, (char *)h1 + 8, 0));
  ck_assert_uint_eq(dp, (CUdeviceptr)(uintptr_t)h1 + 8);
  unsigned type;
  ck_cu(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp));
  ck_assert_uint_eq(type, CU_MEMORYTYPE_HOST);
  static char buf[8192];
  ck_cu(cuMemHostRegister(buf, sizeof buf, 0));
  ck_cu_is(cuMemHostRegister(buf + 100, 10, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  ck_cu(cuMemHostUnregister(buf));
  ck_cu_is(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  ck_cu_is(cuMemFreeHost(buf), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr d;
  ck_cu(cuMemAlloc(&d, 10000));
  memset(h1, 0x3c, 10000);
  ck_cu(cuMemcpyHtoD(d, h1, 10000));
  memset(h1, 0, 10000);
  ck_cu(cuMemcpyDtoH(h1, d, 10000));
  ck_assert_int_eq(((unsigned char *)h1)[9999], 0x3c);
  ck_cu_is(cuMemFree((CUdeviceptr)(uintptr_t)h1), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuMemFreeHost(h1));
  ck_cu(cuMemFreeHost(h2));
  ck_cu_is(cuMemFreeHost(h1), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(stream_ordered_alloc) {
  sim_test_setup("32M");
  CUstream s;
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr a, m;
  ck_cu(cuMemAllocAsync(&a, 16 * MiB, s));
  ck_cu(cuMemsetD32Async(a, 7, 4 * MiB, s));
  ck_cu(cuMemFreeAsync(a, s));
  ck_cu_is(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE); /* already pending */
  ck_cu(cuStreamSynchronize(s));
  size_t f, t;
  ck_cu(cuMemGetInfo(&f, &t));
  ck_assert_uint_eq(f, 32 * MiB);
  ck_cu(cuMemAllocManaged(&m, MiB, CU_MEM_ATTACH_GLOBAL));
  ck_cu_is(cuMemFreeAsync(m, s), CUDA_ERROR_INVALID_VALUE); /* managed is refused */
  ck_cu_is(cuMemAllocAsync(&a, 16, (CUstream)&f), CUDA_ERROR_INVALID_HANDLE);
  ck_cu(cuStreamDestroy(s));
}
END_TEST

START_TEST(native_alloc_evicts_managed) {
  sim_test_setup("16M");
  CUdeviceptr m, a;
  ck_cu(cuMemAllocManaged(&m, 16 * MiB, CU_MEM_ATTACH_GLOBAL));
  ck_cu(kit_fill(m, 4 * MiB, 3, NULL)); /* first touch on the device: 8 chunks resident */
  ck_cu(cuCtxSynchronize());
  ck_assert_int_eq(simcuda_chunk_residency(m), 1);
  size_t f, t;
  ck_cu(cuMemGetInfo(&f, &t));
  ck_assert_uint_eq(f, 0);
  ck_cu(cuMemAlloc(&a, 6 * MiB));
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.evictions, 3);
  ck_assert_uint_eq(st.bytes_evict_dtoh, 6 * MiB);
  ck_assert_int_eq(simcuda_chunk_residency(m), 0); /* LRU first */
  unsigned long long bad = 1;
  ck_cu(kit_check(m, 4 * MiB - 64, 3, NULL, &bad)); /* data survived the eviction */
  ck_assert_uint_eq(bad, 0);
  ck_cu_is(cuMemAlloc(&a, 12 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
}
END_TEST

START_TEST(async_copies_in_stream_order) {
  sim_test_setup(NULL);
  CUstream s;
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  size_t n = 1 << 16;
  uint32_t *h;
  ck_cu(cuMemAllocHost((void **)&h, n * 4));
  for (size_t i = 0; i < n; i++) h[i] = kit_hash(2, i);
  CUdeviceptr a, b, c;
  ck_cu(cuMemAlloc(&a, n * 4));
  ck_cu(cuMemAlloc(&b, n * 4));
  ck_cu(cuMemAlloc(&c, n * 4));
  ck_cu(cuMemcpyHtoDAsync(a, h, n * 4, s));
  ck_cu(cuMemcpyDtoDAsync(b, a, n * 4, s));
  ck_cu(cuMemcpyAsync(c, b, n * 4, s));
  ck_cu(cuMemsetD8Async(c, 0xff, 4, s));
  ck_cu(cuMemcpyDtoHAsync(h, c, n * 4, s));
  ck_cu(cuStreamSynchronize(s));
  ck_assert_uint_eq(h[0], 0xffffffffu);
  ck_assert_uint_eq(kit_verify_host(h + 1, n - 1, 2, 1), 0);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.bytes_memcpy_htod, n * 4);
  ck_assert_uint_eq(st.bytes_memcpy_dtod, 2 * n * 4);
  ck_assert_uint_eq(st.bytes_memcpy_dtoh, n * 4);
  /* link copies at 25 B/ns, device copies read+write at 3000 B/ns (policy/costs.h), in order */
  ck_assert_uint_eq(st.total_ns, 2 * 10486 + 2 * 175);
  ck_cu_is(cuMemcpyHtoDAsync(a, h, n * 4, (CUstream)h), CUDA_ERROR_INVALID_HANDLE);
  ck_cu(cuMemFreeHost(h));
}
END_TEST

START_TEST(vmm_counts_and_maps) {
  sim_test_setup("16M");
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  size_t gran, f, t;
  ck_cu(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  ck_assert_uint_eq(gran, 2 * MiB);
  CUmemGenericAllocationHandle h, h2;
  ck_cu_is(cuMemCreate(&h, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuMemCreate(&h, 4 * MiB, &prop, 0));
  ck_cu(cuMemGetInfo(&f, &t));
  ck_assert_uint_eq(f, 12 * MiB);
  ck_cu_is(cuMemCreate(&h2, 14 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CUdeviceptr va;
  ck_cu(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
  ck_cu(cuMemMap(va + 2 * MiB, 4 * MiB, 0, h, 0));
  ck_cu_is(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* overlaps */
  CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  ck_cu(cuMemSetAccess(va + 2 * MiB, 4 * MiB, &acc, 1));
  ck_cu_is(cuMemSetAccess(va, 2 * MiB, &acc, 1), CUDA_ERROR_INVALID_VALUE); /* not mapped */
  unsigned long long bad = 1;
  ck_cu(kit_fill(va + 2 * MiB, MiB, 4, NULL));
  ck_cu(kit_check(va + 2 * MiB, MiB, 4, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  CUdeviceptr base;
  size_t size;
  ck_cu(cuMemGetAddressRange(&base, &size, va + 3 * MiB));
  ck_assert_uint_eq(base, va + 2 * MiB);
  ck_assert_uint_eq(size, 4 * MiB);
  ck_cu(cuMemRelease(h)); /* still mapped: the memory stays */
  ck_cu_is(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuMemGetInfo(&f, &t));
  ck_assert_uint_eq(f, 12 * MiB);
  ck_cu(cuMemUnmap(va + 2 * MiB, 4 * MiB));
  ck_cu(cuMemGetInfo(&f, &t));
  ck_assert_uint_eq(f, 16 * MiB);
  ck_cu_is(cuMemUnmap(va + 2 * MiB, 4 * MiB), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuMemAddressFree(va, 8 * MiB));
  ck_cu_is(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
  CUmemoryPool pool;
  CUdeviceptr p;
  ck_cu(cuDeviceGetDefaultMemPool(&pool, 0));
  ck_cu(cuMemAllocFromPoolAsync(&p, 2 * MiB, pool, NULL));
  ck_cu(cuMemFreeAsync(p, NULL));
  ck_cu_is(cuMemAllocFromPoolAsync(&p, 2 * MiB, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_mem");
  TCase *tc = tcase_create("mem");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, copy_roundtrip);
  tcase_add_test(tc, capacity_and_oom);
  tcase_add_test(tc, bad_frees);
  tcase_add_test(tc, address_range_and_attributes);
  tcase_add_test(tc, pitch);
  tcase_add_test(tc, host_memory);
  tcase_add_test(tc, stream_ordered_alloc);
  tcase_add_test(tc, native_alloc_evicts_managed);
  tcase_add_test(tc, async_copies_in_stream_order);
  tcase_add_test(tc, vmm_counts_and_maps);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
