/* test_sim_ipc: IPC memory and event handles (across two processes that
 * each load the simulator), memory pools and peer access. */
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim_test.h"

extern char **environ;

static void hex(const void *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

static void unhex(const char *s, void *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(s + 2 * i, "%2x", &v);
    ((unsigned char *)p)[i] = (unsigned char)v;
  }
}

/* Runs this program again as `--child what handle`; its exit status. */
static int child(const char *what, const void *handle) {
  char h[2 * CU_IPC_HANDLE_SIZE + 1];
  hex(handle, CU_IPC_HANDLE_SIZE, h);
  char *argv[] = {"test_sim_ipc", "--child", (char *)what, h, NULL};
  pid_t pid;
  ck_assert_int_eq(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ), 0);
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

#define N32 (1 << 16)
#define NB (N32 * 4)

/* The child side: 0 = all as expected; a distinct code per failure. */
static int child_main(const char *what, const char *h) {
  CUcontext c;
  if (kit_init(0, &c) != CUDA_SUCCESS || kit_module(NULL) != CUDA_SUCCESS) return 10;
  if (!strcmp(what, "event")) {
    CUipcEventHandle eh;
    CUevent ev;
    unhex(h, &eh, sizeof eh);
    return cuIpcOpenEventHandle(&ev, eh) == CUDA_ERROR_NOT_SUPPORTED ? 0 : 11;
  }
  CUipcMemHandle mh;
  CUdeviceptr p, q;
  unhex(h, &mh, sizeof mh);
  CUresult r = cuIpcOpenMemHandle(&p, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (!strcmp(what, "gone")) return r == CUDA_ERROR_INVALID_HANDLE ? 0 : 12;
  if (r != CUDA_SUCCESS) return 13;
  static uint32_t buf[N32];
  if (cuMemcpyDtoH(buf, p, NB) != CUDA_SUCCESS || kit_verify_host(buf, N32, 1, 0) != 0)
    return 14; /* the exporter's bytes */
  if (kit_fill(p, N32, 2, NULL) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS)
    return 15;                                             /* a kernel writes them */
  if (cuMemFree(p) != CUDA_ERROR_INVALID_VALUE) return 16; /* close, not free */
  if (cuIpcOpenMemHandle(&q, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS || q != p)
    return 17; /* opened again: the same mapping, counted */
  if (cuIpcCloseMemHandle(p) != CUDA_SUCCESS || cuIpcCloseMemHandle(p) != CUDA_SUCCESS) return 18;
  if (cuIpcCloseMemHandle(p) != CUDA_ERROR_INVALID_VALUE) return 19;
  return 0;
}

START_TEST(ipc_mem_across_processes) {
  sim_test_setup(NULL);
  CUdeviceptr p;
  ck_cu(cuMemAlloc(&p, NB));
  ck_cu(kit_fill(p, N32, 1, NULL));
  CUipcMemHandle h, h2;
  ck_cu(cuIpcGetMemHandle(&h, p));
  ck_cu(cuIpcGetMemHandle(&h2, p + 4096)); /* an interior pointer names the allocation */
  ck_assert(!memcmp(&h, &h2, sizeof h));
  ck_assert_int_eq(child("mem", &h), 0);
  unsigned long long bad = 1;
  ck_cu(kit_check(p, N32, 2, NULL, &bad)); /* the child's writes are here */
  ck_assert_uint_eq(bad, 0);
  ck_cu(cuMemFree(p));
  ck_assert_int_eq(child("gone", &h), 0); /* freed: the handle is dead */
}
END_TEST

START_TEST(ipc_mem_refusals) {
  sim_test_setup(NULL);
  CUdeviceptr n, m, pool;
  CUipcMemHandle h;
  void *host;
  ck_cu(cuMemAlloc(&n, 4096));
  ck_cu(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
  ck_cu(cuMemAllocAsync(&pool, 4096, NULL));
  ck_cu(cuMemAllocHost(&host, 4096));
  ck_cu_is(cuIpcGetMemHandle(&h, m), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuIpcGetMemHandle(&h, pool), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuIpcGetMemHandle(&h, (CUdeviceptr)(uintptr_t)host), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuIpcGetMemHandle(&h, 0x10), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuIpcGetMemHandle(&h, n));
  CUdeviceptr q;
  ck_cu_is(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
           CUDA_ERROR_INVALID_CONTEXT); /* the exporting process */
  ck_cu_is(cuIpcOpenMemHandle(&q, h, 0), CUDA_ERROR_INVALID_VALUE);
  memset(&h, 0x5a, sizeof h);
  ck_cu_is(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuIpcCloseMemHandle(n), CUDA_ERROR_INVALID_VALUE);
  /* The exported allocation still works as device memory. */
  ck_cu(kit_fill(n, 1024, 3, NULL));
  unsigned long long bad = 1;
  ck_cu(kit_check(n, 1024, 3, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  ck_cu(cuMemFree(n));
}
END_TEST

START_TEST(ipc_events) {
  sim_test_setup(NULL);
  CUevent plain, ipc;
  CUipcEventHandle h;
  ck_cu(cuEventCreate(&plain, CU_EVENT_DISABLE_TIMING));
  ck_cu_is(cuIpcGetEventHandle(&h, plain), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuEventCreate(&ipc, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  ck_cu(cuIpcGetEventHandle(&h, ipc));
  CUevent e;
  ck_cu_is(cuIpcOpenEventHandle(&e, h), CUDA_ERROR_INVALID_CONTEXT);
  ck_assert_int_eq(child("event", &h), 0);
}
END_TEST

static cuuint64_t used(CUmemoryPool p) {
  cuuint64_t v = 0;
  ck_cu(cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
  return v;
}

START_TEST(memory_pools) {
  sim_test_setup(NULL);
  CUmemoryPool def, cur, mine;
  ck_cu(cuDeviceGetDefaultMemPool(&def, 0));
  ck_cu(cuDeviceGetMemPool(&cur, 0));
  ck_assert_ptr_eq(def, cur);
  CUmemPoolProps pr;
  memset(&pr, 0, sizeof pr);
  pr.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ck_cu(cuMemPoolCreate(&mine, &pr));
  pr.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemoryPool fdpool;
  ck_cu_is(cuMemPoolCreate(&fdpool, &pr), CUDA_ERROR_NOT_SUPPORTED);
  pr.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  pr.location.id = 3;
  ck_cu_is(cuMemPoolCreate(&fdpool, &pr), CUDA_ERROR_INVALID_DEVICE);
  CUdeviceptr a, b;
  ck_cu(cuMemAllocFromPoolAsync(&a, 4 * MiB, mine, NULL));
  ck_assert_uint_eq(used(mine), 4 * MiB);
  ck_assert_uint_eq(used(def), 0);
  ck_cu(cuDeviceSetMemPool(0, mine)); /* cuMemAllocAsync now takes from it */
  ck_cu(cuMemAllocAsync(&b, 2 * MiB, NULL));
  ck_assert_uint_eq(used(mine), 6 * MiB);
  cuuint64_t v = 1, high = 0;
  ck_cu_is(cuMemPoolSetAttribute(mine, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &v),
           CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemPoolSetAttribute(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v),
           CUDA_ERROR_INVALID_VALUE);
  v = 64 * MiB;
  ck_cu(cuMemPoolSetAttribute(mine, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
  v = 0;
  ck_cu(cuMemPoolGetAttribute(mine, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
  ck_assert_uint_eq(v, 64 * MiB);
  ck_cu(cuMemFreeAsync(a, NULL));
  ck_cu(cuMemFreeAsync(b, NULL));
  ck_cu(cuCtxSynchronize());
  ck_assert_uint_eq(used(mine), 0);
  ck_cu(cuMemPoolGetAttribute(mine, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &high));
  ck_assert_uint_eq(high, 6 * MiB);
  ck_cu(cuMemPoolTrimTo(mine, 0));
  ck_cu(cuMemPoolDestroy(mine)); /* the device's default is current again */
  ck_cu(cuDeviceGetMemPool(&cur, 0));
  ck_assert_ptr_eq(cur, def);
  ck_cu_is(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemAllocFromPoolAsync(&a, 4096, mine, NULL), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuMemPoolTrimTo(mine, 0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(peer_access) {
  setenv("SIMCUDA_DEVICES", "2", 1);
  CUcontext c0 = sim_test_setup(NULL), c1;
  int can = -1;
  ck_cu(cuDeviceCanAccessPeer(&can, 0, 1));
  ck_assert_int_eq(can, 1);
  ck_cu(cuDeviceCanAccessPeer(&can, 0, 0));
  ck_assert_int_eq(can, 0);
  ck_cu(cuDevicePrimaryCtxRetain(&c1, 1));
  CUdeviceptr p1, p0;
  ck_cu(cuCtxPushCurrent(c1));
  ck_cu(cuMemAlloc(&p1, NB));
  ck_cu(cuCtxPopCurrent(NULL));
  ck_cu(cuMemAlloc(&p0, NB));
  ck_cu_is(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  ck_cu_is(cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_INVALID_DEVICE);
  ck_cu_is(cuCtxEnablePeerAccess(c1, 1), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuCtxEnablePeerAccess(c1, 0));
  ck_cu_is(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  ck_cu(kit_fill(p1, N32, 4, NULL)); /* device 0's kernel writes device 1's memory */
  ck_cu(cuCtxSynchronize());
  ck_cu(cuMemcpyPeer(p0, c0, p1, c1, NB)); /* copies need no peer access either way */
  unsigned long long bad = 1;
  ck_cu(kit_check(p0, N32, 4, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  ck_cu(cuCtxDisablePeerAccess(c1));
  ck_cu(kit_fill(p1, N32, 5, NULL)); /* no access any more: an illegal address */
  ck_cu_is(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
}
END_TEST

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--child")) return child_main(argv[2], argv[3]);
  Suite *s = suite_create("sim_ipc");
  TCase *tc = tcase_create("ipc");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, ipc_mem_across_processes);
  tcase_add_test(tc, ipc_mem_refusals);
  tcase_add_test(tc, ipc_events);
  tcase_add_test(tc, memory_pools);
  tcase_add_test(tc, peer_access);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
