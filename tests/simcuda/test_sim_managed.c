/* test_sim_managed.c: managed memory: exact fault counts, batches, eviction,
 * prefetch, advice, discard, range attributes and the virtual clock. */
#include <string.h>

#include "sim_test.h"

static uint64_t ns(uint64_t bytes, double gbps) { return (uint64_t)((double)bytes / gbps + 0.5); }

static CUdeviceptr managed_host_written(size_t bytes, uint32_t seed) {
  CUdeviceptr p;
  ck_cu(cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL));
  uint32_t *h = (uint32_t *)(uintptr_t)p; /* managed memory: the host writes it directly */
  for (size_t i = 0; i < bytes / 4; i++) h[i] = kit_hash(seed, i);
  return p;
}

START_TEST(fault_in_exact) {
  sim_test_setup("64M");
  CUdeviceptr p = managed_host_written(16 * MiB, 5);
  ck_assert_int_eq(simcuda_chunk_residency(p), -1); /* host writes are not observed yet */
  unsigned long long bad = 1;
  ck_cu(kit_check(p, 4 * MiB, 5, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 8);
  ck_assert_uint_eq(st.fault_batches, 1);
  ck_assert_uint_eq(st.bytes_fault_htod, 16 * MiB);
  ck_assert_uint_eq(st.stall_ns, 45000 + ns(16 * MiB, 25));
  for (int i = 0; i < 8; i++) ck_assert_int_eq(simcuda_chunk_residency(p + i * 2 * MiB), 1);
  ck_cu(kit_check(p, 4 * MiB, 5, NULL, &bad)); /* resident now: no more faults */
  ck_assert_uint_eq(sim_test_stats(0).faults, 8);
  ck_assert_uint_eq(sim_test_stats(0).host_backing_bytes, 0);
}
END_TEST

START_TEST(fault_batches_of_32) {
  sim_test_setup("256M");
  CUdeviceptr p;
  ck_cu(cuMemAllocManaged(&p, 160 * MiB, CU_MEM_ATTACH_GLOBAL));
  memset((void *)(uintptr_t)p, 0, 160 * MiB);
  ck_cu(kit_scale(p, 40 * MiB, 2.0f, NULL));
  ck_cu(cuCtxSynchronize());
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 80);
  ck_assert_uint_eq(st.fault_batches, 3);
  ck_assert_uint_eq(st.stall_ns, 3 * 45000 + ns(64 * MiB, 25) * 2 + ns(32 * MiB, 25));
}
END_TEST

START_TEST(eviction_keeps_data) {
  sim_test_setup("32M");
  CUdeviceptr p;
  ck_cu(cuMemAllocManaged(&p, 64 * MiB, CU_MEM_ATTACH_GLOBAL));
  ck_cu(kit_fill(p, 16 * MiB, 9, NULL));
  ck_cu(cuCtxSynchronize());
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 0); /* first touch on the device: no migration */
  ck_assert_uint_eq(st.evictions, 16);
  ck_assert_uint_eq(st.bytes_evict_dtoh, 32 * MiB);
  ck_assert_uint_eq(st.host_backing_bytes, 32 * MiB);
  ck_assert_uint_eq(st.device_used_bytes, 32 * MiB);
  ck_assert_int_eq(simcuda_chunk_residency(p), 0);
  ck_assert_int_eq(simcuda_chunk_residency(p + 63 * MiB), 1);
  unsigned long long bad = 1;
  ck_cu(kit_check(p, 16 * MiB, 9, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  ck_assert_uint_ge(sim_test_stats(0).faults, 16);
  ck_assert_uint_eq(kit_verify_host((uint32_t *)(uintptr_t)p, 16 * MiB, 9, 0), 0);
  uint32_t tail[1024];
  ck_cu(cuMemcpyDtoH(tail, p + 64 * MiB - sizeof tail, sizeof tail));
  ck_assert_uint_eq(kit_verify_host(tail, 1024, 9, 16 * MiB - 1024), 0);
}
END_TEST

START_TEST(prefetch_moves_and_records) {
  sim_test_setup("64M");
  CUdeviceptr p = managed_host_written(8 * MiB, 4);
  CUstream s;
  ck_cu(cuStreamCreate(&s, 0));
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  ck_cu(cuMemPrefetchAsync(p, 8 * MiB, dev0, 0, s));
  ck_cu(cuStreamSynchronize(s));
  ck_assert_int_eq(simcuda_chunk_residency(p + 7 * MiB), 1);
  unsigned long long bad = 1;
  ck_cu(kit_check(p, 2 * MiB, 4, s, &bad));
  ck_assert_uint_eq(bad, 0);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 0);
  ck_assert_uint_eq(st.bytes_prefetch_htod, 8 * MiB);
  int v;
  ck_cu(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, 8 * MiB));
  ck_assert_int_eq(v, 0);
  ck_cu(cuMemPrefetchAsync(p, 8 * MiB, host, 0, s));
  ck_cu(cuStreamSynchronize(s));
  ck_assert_int_eq(simcuda_chunk_residency(p), 0);
  ck_assert_uint_eq(sim_test_stats(0).bytes_prefetch_dtoh, 8 * MiB);
  ck_cu(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, 8 * MiB));
  ck_assert_int_eq(v, CU_DEVICE_CPU);
  ck_cu(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, p, MiB));
  ck_assert_int_eq(v, CU_MEM_LOCATION_TYPE_HOST);
  /* the batch form: first range to the device, second to the host */
  CUdeviceptr q = managed_host_written(4 * MiB, 6);
  CUdeviceptr ptrs[2] = {p, q};
  size_t sizes[2] = {2 * MiB, 4 * MiB};
  CUmemLocation locs[2] = {dev0, host};
  size_t idx[2] = {0, 1};
  ck_cu(cuMemPrefetchBatchAsync(ptrs, sizes, 2, locs, idx, 2, 0, s));
  ck_cu(cuStreamSynchronize(s));
  ck_assert_int_eq(simcuda_chunk_residency(p), 1);
  ck_assert_int_eq(simcuda_chunk_residency(p + 2 * MiB), 0);
  ck_assert_int_eq(simcuda_chunk_residency(q), 0);
  CUdeviceptr n;
  ck_cu(cuMemAlloc(&n, MiB));
  ck_cu_is(cuMemPrefetchAsync(n, MiB, dev0, 0, s), CUDA_ERROR_INVALID_VALUE);
  CUmemLocation bad_dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 5};
  ck_cu_is(cuMemPrefetchAsync(p, MiB, bad_dev, 0, s), CUDA_ERROR_INVALID_DEVICE);
  ck_cu_is(cuMemPrefetchAsync(p, 9 * MiB, dev0, 0, s), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* Faulting B in during the kernels costs more than prefetching it on another
 * stream while a kernel computes on A. */
START_TEST(clock_prefetch_overlap_beats_faults) {
  setenv("SIMCUDA_DEV_GBPS", "50", 1);
  sim_test_setup("512M");
  size_t sz = 64 * MiB;
  CUdeviceptr a1 = managed_host_written(sz, 1), b1 = managed_host_written(sz, 2);
  CUdeviceptr a2 = managed_host_written(sz, 3), b2 = managed_host_written(sz, 4);
  CUstream s1, s2;
  ck_cu(cuStreamCreate(&s1, 0));
  ck_cu(cuStreamCreate(&s2, 0));
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  ck_cu(cuMemPrefetchAsync(a1, sz, dev0, 0, s1));
  ck_cu(cuMemPrefetchAsync(a2, sz, dev0, 0, s1));
  ck_cu(cuStreamSynchronize(s1));
  uint64_t k = 3000 + ns(sz, 50), x = ns(sz, 25);
  uint64_t xp = 32 * ns(2 * MiB, 25); /* a prefetch moves (and rounds) chunk by chunk */

  simcuda_reset_stats(); /* demand paging: B faults in during its kernel */
  ck_cu(kit_scale(a1, sz / 4, 2.0f, s1));
  ck_cu(kit_scale(b1, sz / 4, 2.0f, s1));
  ck_cu(cuStreamSynchronize(s1));
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.stall_ns, 45000 + x);
  ck_assert_uint_eq(st.total_ns, 2 * k + 45000 + x);
  uint64_t demand = st.total_ns;

  simcuda_reset_stats(); /* B prefetched on s2 while A computes on s1 */
  CUevent ev;
  ck_cu(cuEventCreate(&ev, 0));
  ck_cu(kit_scale(a2, sz / 4, 2.0f, s1));
  ck_cu(cuMemPrefetchAsync(b2, sz, dev0, 0, s2));
  ck_cu(cuEventRecord(ev, s2));
  ck_cu(cuStreamWaitEvent(s1, ev, 0));
  ck_cu(kit_scale(b2, sz / 4, 2.0f, s1));
  ck_cu(cuStreamSynchronize(s1));
  st = sim_test_stats(0);
  ck_assert_uint_eq(st.stall_ns, 0);
  ck_assert_uint_eq(st.faults, 0);
  ck_assert_uint_eq(st.total_ns, (k > xp ? k : xp) + k);
  ck_assert_uint_lt(st.total_ns, demand);
}
END_TEST

START_TEST(discard_releases_backing) {
  sim_test_setup("64M");
  CUdeviceptr p = managed_host_written(8 * MiB, 3);
  CUstream s;
  ck_cu(cuStreamCreate(&s, 0));
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  ck_cu(cuMemPrefetchAsync(p, 8 * MiB, host, 0, s));
  ck_cu(cuStreamSynchronize(s));
  ck_assert_uint_eq(sim_test_stats(0).host_backing_bytes, 8 * MiB);
  size_t size = 6 * MiB;
  ck_cu(cuMemDiscardBatchAsync(&p, &size, 1, 0, s));
  ck_cu(cuStreamSynchronize(s));
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.discards, 3);
  ck_assert_uint_eq(st.host_backing_bytes, 2 * MiB);
  ck_assert_int_eq(simcuda_chunk_residency(p), -1);
  ck_assert_int_eq(simcuda_chunk_residency(p + 6 * MiB), 0);
  /* a write re-populates; the data is then what was written */
  ck_cu(kit_fill(p, 2 * MiB, 8, s));
  unsigned long long bad = 1;
  ck_cu(kit_check(p, 2 * MiB, 8, s, &bad));
  ck_assert_uint_eq(bad, 0);
  /* a prefetch re-populates too: reading is allowed again */
  ck_cu(cuMemDiscardBatchAsync(&p, &size, 1, 0, s));
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  ck_cu(cuMemPrefetchAsync(p, 8 * MiB, dev0, 0, s));
  ck_cu(kit_check(p, 2 * MiB, 8, s, &bad));
  ck_assert_int_eq(simcuda_chunk_residency(p), 1);
  ck_cu_is(cuMemDiscardBatchAsync(&p, &size, 1, 1, s), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(discarded_read_is_illegal) {
  sim_test_setup("64M");
  CUdeviceptr p = managed_host_written(4 * MiB, 3);
  size_t size = 4 * MiB;
  ck_cu(cuMemDiscardBatchAsync(&p, &size, 1, 0, CU_STREAM_PER_THREAD));
  unsigned long long bad;
  ck_cu_is(kit_check(p, MiB, 3, NULL, &bad), CUDA_ERROR_ILLEGAL_ADDRESS);
  ck_cu_is(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
}
END_TEST

START_TEST(discarded_copy_is_illegal) {
  sim_test_setup("64M");
  CUdeviceptr p = managed_host_written(4 * MiB, 3);
  size_t size = 4 * MiB;
  ck_cu(cuMemDiscardBatchAsync(&p, &size, 1, 0, CU_STREAM_PER_THREAD));
  uint32_t w;
  ck_cu_is(cuMemcpyDtoH(&w, p, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
}
END_TEST

START_TEST(read_mostly_duplicates) {
  sim_test_setup("10M");
  CUdeviceptr a = managed_host_written(8 * MiB, 2);
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  ck_cu(cuMemAdvise(a, 8 * MiB, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0));
  int v;
  ck_cu(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, a, 8 * MiB));
  ck_assert_int_eq(v, 1);
  unsigned long long bad = 1;
  ck_cu(kit_check(a, 2 * MiB, 2, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 4);
  ck_assert_uint_eq(st.host_backing_bytes, 8 * MiB); /* the host copies stay */
  CUdeviceptr b;
  ck_cu(cuMemAllocManaged(&b, 8 * MiB, CU_MEM_ATTACH_GLOBAL));
  ck_cu(kit_fill(b, 2 * MiB, 1, NULL));
  ck_cu(cuCtxSynchronize());
  st = sim_test_stats(0);
  ck_assert_uint_eq(st.evictions, 3);
  ck_assert_uint_eq(st.bytes_evict_dtoh, 0); /* duplicates are dropped, not copied */
  ck_cu(kit_check(a, 2 * MiB, 2, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
}
END_TEST

/* cuda.h, CU_MEM_ADVISE_SET_READ_MOSTLY: a write to a read-duplicated page
 * "will invalidate all copies except the one where the write occurred".
 * Each copy is mapped read-only, so the write faults and the driver
 * revokes the others: reading the duplicates costs nothing, the first write
 * to each costs a fault's service time (one batch per VX_COST_FAULT_BATCH
 * chunks) and moves no data, and a write to a chunk no longer duplicated
 * costs nothing more.  Before, the write was free, which flattered any
 * policy that advises ReadMostly on data that is written. */
START_TEST(write_to_read_duplicate_faults) {
  sim_test_setup("20M");
  CUdeviceptr a = managed_host_written(8 * MiB, 2);
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  ck_cu(cuMemAdvise(a, 8 * MiB, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0));
  ck_cu(cuMemPrefetchAsync(a, 8 * MiB, dev0, 0, NULL));
  ck_cu(cuCtxSynchronize());
  simcuda_reset_stats();
  unsigned long long bad = 1;
  ck_cu(kit_check(a, 2 * MiB, 2, NULL, &bad)); /* reads all four duplicated chunks */
  ck_assert_uint_eq(bad, 0);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 0);
  ck_assert_uint_eq(st.stall_ns, 0);
  ck_assert_uint_eq(st.host_backing_bytes, 8 * MiB); /* the host copies are there */
  ck_cu(kit_fill(a, 2 * MiB, 5, NULL)); /* writes all four */
  ck_cu(cuCtxSynchronize());
  st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 4);
  ck_assert_uint_eq(st.fault_batches, 1);
  ck_assert_uint_gt(st.stall_ns, 0);
  ck_assert_uint_eq(st.bytes_fault_htod, 0); /* nothing moved */
  ck_assert_uint_eq(st.host_backing_bytes, 0); /* the host copies are revoked */
  uint64_t stalled = st.stall_ns;
  ck_cu(kit_fill(a, 2 * MiB, 6, NULL)); /* no duplicate left: no fault */
  ck_cu(kit_check(a, 2 * MiB, 6, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 4);
  ck_assert_uint_eq(st.stall_ns, stalled);
}
END_TEST

/* A prefetch to the host of a ReadMostly range makes a host copy and keeps
 * the device's (the driver revokes no duplicate): nothing moves for chunks
 * the host still has, the written ones are copied down, and the device
 * memory stays in use until pressure drops the duplicates, for free. */
START_TEST(read_mostly_prefetch_to_host_keeps_the_device_copy) {
  sim_test_setup("20M");
  CUdeviceptr a = managed_host_written(8 * MiB, 2);
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  ck_cu(cuMemAdvise(a, 8 * MiB, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0));
  ck_cu(cuMemPrefetchAsync(a, 8 * MiB, dev0, 0, NULL));
  ck_cu(cuCtxSynchronize());
  simcuda_reset_stats();
  ck_cu(cuMemPrefetchAsync(a, 8 * MiB, host, 0, NULL));
  ck_cu(cuCtxSynchronize());
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.bytes_prefetch_dtoh, 0);
  ck_assert_uint_eq(st.device_used_bytes, 8 * MiB);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(simcuda_chunk_residency(a + i * 2 * MiB), 1);
  ck_cu(kit_fill(a, 2 * MiB, 3, NULL)); /* writes collapse the duplicates onto the device */
  ck_cu(cuMemPrefetchAsync(a, 8 * MiB, host, 0, NULL));
  ck_cu(cuCtxSynchronize());
  st = sim_test_stats(0);
  ck_assert_uint_eq(st.bytes_prefetch_dtoh, 8 * MiB);
  ck_assert_uint_eq(st.device_used_bytes, 8 * MiB);
  CUdeviceptr b; /* pressure: 16 MiB more on a 20 MiB device */
  ck_cu(cuMemAllocManaged(&b, 16 * MiB, CU_MEM_ATTACH_GLOBAL));
  ck_cu(kit_fill(b, 4 * MiB, 1, NULL));
  ck_cu(cuCtxSynchronize());
  st = sim_test_stats(0);
  ck_assert_uint_ge(st.evictions, 2);
  ck_assert_uint_eq(st.bytes_evict_dtoh, 0); /* the duplicates are dropped, not copied */
  unsigned long long bad = 1;
  ck_cu(kit_check(a, 2 * MiB, 3, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
}
END_TEST

/* cuda.h, CU_MEM_ADVISE_UNSET_READ_MOSTLY: the duplicates collapse at the
 * preferred location when a copy is there (no transfer: the device's copy
 * goes and its memory comes back); with none preferred, at one of them (the
 * simulator keeps the device's). */
START_TEST(unset_read_mostly_collapses_at_the_preferred_location) {
  sim_test_setup("20M");
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  for (int pref = 0; pref < 2; pref++) {
    CUdeviceptr a = managed_host_written(8 * MiB, 2);
    ck_cu(cuMemAdvise(a, 8 * MiB, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0));
    if (pref) ck_cu(cuMemAdvise(a, 8 * MiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
    ck_cu(cuMemPrefetchAsync(a, 8 * MiB, dev0, 0, NULL));
    ck_cu(cuCtxSynchronize());
    ck_assert_uint_eq(sim_test_stats(0).device_used_bytes, 8 * MiB);
    simcuda_reset_stats();
    ck_cu(cuMemAdvise(a, 8 * MiB, CU_MEM_ADVISE_UNSET_READ_MOSTLY, dev0));
    simcuda_stats_t st = sim_test_stats(0);
    ck_assert_uint_eq(st.bytes_prefetch_dtoh + st.bytes_evict_dtoh, 0);
    ck_assert_uint_eq(st.device_used_bytes, (pref ? 0 : 8 * MiB));
    for (int i = 0; i < 4; i++)
      ck_assert_int_eq(simcuda_chunk_residency(a + i * 2 * MiB), (pref ? 0 : 1));
    unsigned long long bad = 1; /* the data is the data, wherever it collapsed */
    ck_cu(kit_check(a, 2 * MiB, 2, NULL, &bad));
    ck_assert_uint_eq(bad, 0);
    ck_cu(cuMemFree(a));
  }
}
END_TEST

START_TEST(preferred_host_reads_over_the_link) {
  sim_test_setup("64M");
  CUdeviceptr p = managed_host_written(8 * MiB, 2);
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  ck_cu(cuMemAdvise(p, 8 * MiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
  int v;
  ck_cu(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, 8 * MiB));
  ck_assert_int_eq(v, CU_DEVICE_CPU);
  ck_cu(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, MiB));
  ck_assert_int_eq(v, CU_MEM_LOCATION_TYPE_HOST);
  unsigned long long bad = 1;
  simcuda_reset_stats();
  ck_cu(kit_check(p, 2 * MiB, 2, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 0);
  ck_assert_int_eq(simcuda_chunk_residency(p), 0);
  ck_assert_uint_ge(st.kernel_ns, ns(8 * MiB, 25));
}
END_TEST

START_TEST(accessed_by_skips_fault_overhead) {
  sim_test_setup("64M");
  CUdeviceptr p = managed_host_written(8 * MiB, 2);
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  ck_cu(cuMemAdvise(p, 8 * MiB, CU_MEM_ADVISE_SET_ACCESSED_BY, dev0));
  int devs[2];
  ck_cu(cuMemRangeGetAttribute(devs, sizeof devs, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, 8 * MiB));
  ck_assert_int_eq(devs[0], 0);
  ck_assert_int_eq(devs[1], CU_DEVICE_INVALID);
  unsigned long long bad = 1;
  ck_cu(kit_check(p, 2 * MiB, 2, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.faults, 0);
  ck_assert_uint_eq(st.fault_batches, 0);
  ck_assert_uint_eq(st.bytes_fault_htod, 8 * MiB);
  ck_assert_uint_eq(st.stall_ns, ns(2 * MiB, 25) * 4);
  ck_assert_int_eq(simcuda_chunk_residency(p), 1);
}
END_TEST

START_TEST(managed_errors) {
  sim_test_setup(NULL);
  CUdeviceptr p, n;
  ck_cu_is(cuMemAllocManaged(&p, MiB, 0), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuMemAllocManaged(&p, 3 * MiB, CU_MEM_ATTACH_GLOBAL)); /* more than any 1 GiB? no: fine */
  ck_cu(cuMemAlloc(&n, MiB));
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUmemLocation dev9 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 9};
  ck_cu_is(cuMemAdvise(n, MiB, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemAdvise(p, MiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev9), CUDA_ERROR_INVALID_DEVICE);
  int v[2];
  ck_cu_is(cuMemRangeGetAttribute(v, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, MiB),
           CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemRangeGetAttribute(v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, n, MiB),
           CUDA_ERROR_INVALID_VALUE);
  /* managed memory may exceed the device: 4 GiB on a 1 GiB device */
  CUdeviceptr big;
  ck_cu(cuMemAllocManaged(&big, (size_t)4 << 30, CU_MEM_ATTACH_GLOBAL));
  ck_cu(cuMemFree(big));
}
END_TEST

// ---- movement: the legacy-stream rule and thrash resolution ----

/* The per-thread forms, exported by the simulator as by the driver (cuda.h
 * declares them only for its own per-thread builds). */
CUresult cuMemPrefetchBatchAsync_ptsz(CUdeviceptr *, size_t *, size_t, CUmemLocation *, size_t *,
                                      size_t, unsigned long long, CUstream);
CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr *, size_t *, size_t, unsigned long long, CUstream);

/* cuda.h, both batch calls: "Must not be legacy NULL stream". */
START_TEST(batch_calls_refuse_legacy_stream) {
  sim_test_setup("64M");
  CUdeviceptr p = managed_host_written(4 * MiB, 2);
  size_t size = 4 * MiB, idx = 0;
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUstream s;
  ck_cu(cuStreamCreate(&s, 0));
  ck_cu_is(cuMemPrefetchBatchAsync(&p, &size, 1, &dev0, &idx, 1, 0, NULL),
           CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemPrefetchBatchAsync(&p, &size, 1, &dev0, &idx, 1, 0, CU_STREAM_LEGACY),
           CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemPrefetchBatchAsync_ptsz(&p, &size, 1, &dev0, &idx, 1, 0, CU_STREAM_LEGACY),
           CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemDiscardBatchAsync(&p, &size, 1, 0, NULL), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemDiscardBatchAsync(&p, &size, 1, 0, CU_STREAM_LEGACY), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemDiscardBatchAsync_ptsz(&p, &size, 1, 0, CU_STREAM_LEGACY),
           CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuCtxSynchronize());
  ck_assert_int_eq(simcuda_chunk_residency(p), -1); /* nothing was enqueued */
  ck_assert_uint_eq(sim_test_stats(0).discards, 0);
  /* a created stream and the per-thread stream (NULL in a _ptsz form) are fine */
  ck_cu(cuMemPrefetchBatchAsync(&p, &size, 1, &dev0, &idx, 1, 0, s));
  ck_cu(cuMemPrefetchBatchAsync(&p, &size, 1, &dev0, &idx, 1, 0, CU_STREAM_PER_THREAD));
  ck_cu(cuMemPrefetchBatchAsync_ptsz(&p, &size, 1, &dev0, &idx, 1, 0, NULL));
  ck_cu(cuStreamSynchronize(s));
  ck_cu(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  ck_assert_int_eq(simcuda_chunk_residency(p), 1);
  ck_cu(cuMemDiscardBatchAsync(&p, &size, 1, 0, s));
  ck_cu(cuMemDiscardBatchAsync_ptsz(&p, &size, 1, 0, NULL));
  ck_cu(cuCtxSynchronize());
  ck_assert_uint_eq(sim_test_stats(0).discards, 4);
}
END_TEST

/* 24 chunks cycled through a 16 MiB device `passes` times, all rewritten by
 * kernels; returns the faults of the last pass. */
static uint64_t cycle(CUdeviceptr p, int passes, int device_preferred, simcuda_stats_t *st) {
  if (device_preferred) {
    CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    ck_cu(cuMemAdvise_v2(p, 48 * MiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev0));
  }
  simcuda_reset_stats();
  uint64_t before = 0;
  for (int i = 0; i < passes; i++) {
    before = sim_test_stats(0).faults;
    ck_cu(kit_scale(p, 12 * MiB, 1.0f, NULL));
    ck_cu(cuCtxSynchronize());
  }
  *st = sim_test_stats(0);
  return st->faults - before;
}

/* cuda.h: a thrashing page "may eventually be pinned to host memory ... But
 * if the preferred location is set as device memory, then the page will
 * continue to thrash indefinitely". */
START_TEST(thrash_pins_unless_device_preferred) {
  sim_test_setup("16M");
  simcuda_stats_t none, dev;
  CUdeviceptr a = managed_host_written(48 * MiB, 1);
  uint64_t last_none = cycle(a, 12, 0, &none);
  ck_cu(cuMemFree(a));
  CUdeviceptr b = managed_host_written(48 * MiB, 1);
  uint64_t last_dev = cycle(b, 12, 1, &dev);
  /* 8 chunks fit: each pass faults the 16 others in, until the driver pins
   * some to host memory (read over the link from then on, no fault) */
  ck_assert_uint_gt(none.thrash_pins, 0);
  ck_assert_uint_lt(last_none, 16);
  ck_assert_uint_eq(dev.thrash_pins, 0);
  ck_assert_uint_eq(last_dev, 16); /* still every pass: thrash without end */
  ck_assert_uint_eq(dev.faults, 24 + 11 * 16);
  ck_assert_uint_gt(dev.faults, none.faults);
  ck_assert_uint_gt(dev.evictions, none.evictions);
  ck_assert_uint_gt(dev.stall_ns, none.stall_ns);
  /* a prefetch undoes the pin: the chunk migrates again */
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  ck_cu(cuMemFree(b));
  CUdeviceptr c = managed_host_written(48 * MiB, 1);
  cycle(c, 12, 0, &none);
  ck_cu(cuMemPrefetchAsync_v2(c, 2 * MiB, dev0, 0, CU_STREAM_PER_THREAD));
  ck_cu(cuCtxSynchronize());
  ck_assert_int_eq(simcuda_chunk_residency(c), 1);
}
END_TEST

/* A prefetch into a full device (issue 11): the write-back that makes room
 * runs on the D2H engine while the chunk before it still streams in on the
 * H2D engine (the link is full duplex); each chunk's copy waits for the
 * write-back that freed its room.  Two chunks in, two out: three transfer
 * times, not four on one engine. */
START_TEST(prefetch_eviction_uses_the_down_engine) {
  sim_test_setup("4M");
  CUdeviceptr p = managed_host_written(8 * MiB, 7);
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUstream s;
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ck_cu(cuMemPrefetchAsync(p, 4 * MiB, dev0, 0, s));
  ck_cu(cuStreamSynchronize(s));
  simcuda_reset_stats();
  ck_cu(cuMemPrefetchAsync(p + 4 * MiB, 4 * MiB, dev0, 0, s));
  ck_cu(cuStreamSynchronize(s));
  simcuda_stats_t st = sim_test_stats(0);
  uint64_t x = ns(2 * MiB, 25);
  ck_assert_uint_eq(st.evictions, 2);
  ck_assert_uint_eq(st.bytes_evict_dtoh, 4 * MiB);
  ck_assert_uint_eq(st.bytes_prefetch_htod, 4 * MiB);
  ck_assert_uint_eq(st.total_ns, 3 * x);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(simcuda_chunk_residency(p + i * 2 * MiB), i >= 2);
  /* a prefetch to host: one write-back on the down engine */
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  simcuda_reset_stats();
  ck_cu(cuMemPrefetchAsync(p + 4 * MiB, 2 * MiB, host, 0, s));
  ck_cu(cuStreamSynchronize(s));
  ck_assert_uint_eq(sim_test_stats(0).total_ns, x);
  unsigned long long bad = 1;
  ck_cu(kit_check(p, 2 * MiB, 7, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
}
END_TEST

/* The link tests' setup: p (8 MiB, preferred on the host: kernels reach it
 * over the link) and q (8 MiB), both written by the host, and two streams. */
static void link_pair(CUdeviceptr *p, CUdeviceptr *q, CUstream *s1, CUstream *s2) {
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  *p = managed_host_written(8 * MiB, 3);
  *q = managed_host_written(8 * MiB, 4);
  ck_cu(cuMemAdvise(*p, 8 * MiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
  ck_cu(cuStreamCreate(s1, CU_STREAM_NON_BLOCKING));
  ck_cu(cuStreamCreate(s2, CU_STREAM_NON_BLOCKING));
}

/* A kernel's reads of host memory cross the link the copy engines use: a
 * prefetch and a kernel reading 8 MiB over the link from two streams at
 * once take two transfer times, whichever runs first (before, the kernel's
 * link time ran beside the H2D engine, a second link a GPU does not have). */
START_TEST(host_reads_share_the_link) {
  sim_test_setup("64M");
  CUdeviceptr p, q;
  CUstream s1, s2;
  link_pair(&p, &q, &s1, &s2);
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  simcuda_reset_stats();
  unsigned long long bad = 1;
  ck_cu(cuMemPrefetchAsync(q, 8 * MiB, dev0, 0, s1));
  ck_cu(kit_check(p, 2 * MiB, 3, s2, &bad));
  ck_cu(cuCtxSynchronize());
  ck_assert_uint_eq(bad, 0);
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.bytes_prefetch_htod, 8 * MiB);
  ck_assert_uint_ge(st.total_ns, 2 * ns(8 * MiB, 25));
}
END_TEST

/* Its writes to host memory cross the link the other way, beside the
 * write-backs: a write-back of 8 MiB and a kernel writing 8 MiB over the link
 * take two transfer times, while the same kernel beside a prefetch to the
 * device shares no engine with it and both end within one and a bit. */
START_TEST(host_writes_share_the_down_link) {
  sim_test_setup("64M");
  CUdeviceptr p, q;
  CUstream s1, s2;
  link_pair(&p, &q, &s1, &s2);
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  ck_cu(cuMemPrefetchAsync(q, 8 * MiB, dev0, 0, s1));
  ck_cu(cuCtxSynchronize());
  simcuda_reset_stats();
  ck_cu(cuMemPrefetchAsync(q, 8 * MiB, host, 0, s1)); /* write-back: D2H */
  ck_cu(kit_fill(p, 2 * MiB, 5, s2));                 /* 8 MiB written over the link */
  ck_cu(cuCtxSynchronize());
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_eq(st.bytes_prefetch_dtoh, 8 * MiB);
  ck_assert_uint_eq(st.bytes_link_dtoh, 8 * MiB); /* the kernel's writes, counted */
  ck_assert_uint_eq(st.bytes_link_htod, 0);
  ck_assert_uint_ge(st.total_ns, 2 * ns(8 * MiB, 25));
  simcuda_reset_stats();
  ck_cu(cuMemPrefetchAsync(q, 8 * MiB, dev0, 0, s1)); /* H2D */
  ck_cu(kit_fill(p, 2 * MiB, 6, s2));
  ck_cu(cuCtxSynchronize());
  st = sim_test_stats(0);
  ck_assert_uint_eq(st.bytes_prefetch_htod, 8 * MiB);
  ck_assert_uint_lt(st.total_ns, 2 * ns(8 * MiB, 25));
  unsigned long long bad = 1;
  simcuda_reset_stats();
  ck_cu(kit_check(p, 2 * MiB, 6, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  st = sim_test_stats(0);
  ck_assert_uint_eq(st.bytes_link_htod, 8 * MiB); /* read back over the link */
  ck_assert_uint_eq(st.bytes_link_dtoh, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_managed");
  TCase *tc = tcase_create("managed");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, fault_in_exact);
  tcase_add_test(tc, fault_batches_of_32);
  tcase_add_test(tc, eviction_keeps_data);
  tcase_add_test(tc, prefetch_moves_and_records);
  tcase_add_test(tc, clock_prefetch_overlap_beats_faults);
  tcase_add_test(tc, discard_releases_backing);
  tcase_add_test(tc, discarded_read_is_illegal);
  tcase_add_test(tc, discarded_copy_is_illegal);
  tcase_add_test(tc, read_mostly_duplicates);
  tcase_add_test(tc, write_to_read_duplicate_faults);
  tcase_add_test(tc, read_mostly_prefetch_to_host_keeps_the_device_copy);
  tcase_add_test(tc, unset_read_mostly_collapses_at_the_preferred_location);
  tcase_add_test(tc, preferred_host_reads_over_the_link);
  tcase_add_test(tc, host_reads_share_the_link);
  tcase_add_test(tc, host_writes_share_the_down_link);
  tcase_add_test(tc, accessed_by_skips_fault_overhead);
  tcase_add_test(tc, managed_errors);
  tcase_add_test(tc, batch_calls_refuse_legacy_stream);
  tcase_add_test(tc, thrash_pins_unless_device_preferred);
  tcase_add_test(tc, prefetch_eviction_uses_the_down_engine);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
