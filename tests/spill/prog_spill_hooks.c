/* prog_spill_hooks: every copy, set and prefetch entry point the simulator has,
 * reached the way an application reaches it (dlsym on libcuda.so.1, and
 * cuGetProcAddress_v2), restores a range vx has spilled to NVMe first.
 * Each case: write a pattern, push the buffer out to the swap (checked:
 * the simulator reports its chunks discarded), run the entry point, compare. */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define MB ((size_t)1 << 20)
#define SZ (8 * MB)
#define N32 (SZ / 4)
#define OFF 4096 /* where partial writes land (bytes) */

#define NFILL 6 /* more than the tier's protected last calls (4) */
static CUdeviceptr A, X, fill[NFILL];
static uint32_t *host, *want;

static void *entry(const char *name) {
  return vxt_entry(name);
}

static void pattern(uint32_t seed) {
  for (size_t i = 0; i < N32; i++)
    want[i] = kit_hash(seed, i);
}

/* A holds `want`, then is spilled: other buffers are used after it. */
static void spill_a(uint32_t seed) {
  pattern(seed);
  CHECK_CU(kit_cu.cuMemcpyHtoD_v2(A, want, SZ));
  for (int i = 0; i < NFILL; i++)
    CHECK_CU(kit_cu.cuMemcpyHtoD_v2(fill[i], host, SZ));
  CHECK_CU(kit_cu.cuCtxSynchronize());
  for (size_t off = 0; off < SZ; off += 2 * MB)
    VXT_ASSERT(kit_sim_residency(A + off) == -1, "A+%zu not spilled (residency %d)", off,
               kit_sim_residency(A + off));
}

static void expect_a(const char *what) {
  CHECK_CU(kit_cu.cuCtxSynchronize());
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(host, A, SZ));
  VXT_ASSERT(!memcmp(host, want, SZ), "%s: A differs after the restore", what);
}

static void expect_x(const char *what) {
  CHECK_CU(kit_cu.cuCtxSynchronize());
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(host, X, SZ));
  VXT_ASSERT(!memcmp(host, want, SZ), "%s: the copy of A differs", what);
}

// ---- families ----

/* Sync forms have no stream parameter: each is called with its own type. */
#define IS_ASYNC(name) (strstr(name, "Async") != NULL)
#define CALL(name, T, ...)                                                                         \
  (IS_ASYNC(name) ? ((CUresult(*)(T, CUstream))entry(name))(__VA_ARGS__, NULL)                     \
                  : ((CUresult(*)(T))entry(name))(__VA_ARGS__))
#define DTOH_T void *, CUdeviceptr, size_t
#define HTOD_T CUdeviceptr, const void *, size_t
#define DTOD_T CUdeviceptr, CUdeviceptr, size_t
#define SET8_T CUdeviceptr, unsigned char, size_t
#define SET16_T CUdeviceptr, unsigned short, size_t
#define SET32_T CUdeviceptr, unsigned int, size_t

static void dtoh(const char *name) {
  spill_a(1);
  memset(host, 0, SZ);
  CHECK_CU(CALL(name, DTOH_T, host, A, SZ));
  CHECK_CU(kit_cu.cuCtxSynchronize());
  VXT_ASSERT(!memcmp(host, want, SZ), "%s: wrong data", name);
}

static void dtod(const char *name) {
  spill_a(2);
  CHECK_CU(kit_cu.cuMemsetD32_v2(X, 0, N32));
  CHECK_CU(CALL(name, DTOD_T, X, A, SZ));
  expect_x(name);
  expect_a(name);
}

static void htod_part(const char *name) {
  spill_a(3);
  uint32_t words[4] = {0xdeadbeef, 1, 2, 3};
  CHECK_CU(CALL(name, HTOD_T, A + OFF, words, sizeof words));
  memcpy((char *)want + OFF, words, sizeof words);
  expect_a(name);
}

static void set_part(const char *name, int elem) {
  spill_a(4);
  CUresult r;
  if (elem == 1)
    r = CALL(name, SET8_T, A + OFF, 0xa5, 64);
  else if (elem == 2)
    r = CALL(name, SET16_T, A + OFF, 0xa5a5, 64);
  else
    r = CALL(name, SET32_T, A + OFF, 0xa5a5a5a5u, 64);
  CHECK_CU(r);
  memset((char *)want + OFF, 0xa5, 64 * (size_t)elem);
  expect_a(name);
}

static void prefetch(const char *name, int batch) {
  spill_a(5);
  CUmemLocation dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  if (batch) {
    CUresult (*f)(CUdeviceptr *, size_t *, size_t, CUmemLocation *, size_t *, size_t,
                  unsigned long long, CUstream) = entry(name);
    CUdeviceptr p[1] = {A};
    size_t n[1] = {SZ}, idx[1] = {0};
    /* the batch calls refuse the legacy stream (cuda.h): the per-thread one */
    CHECK_CU(f(p, n, 1, &dev, idx, 1, 0, CU_STREAM_PER_THREAD));
  } else {
    CUresult (*f)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream) = entry(name);
    CHECK_CU(f(A, SZ, dev, 0, NULL));
  }
  CHECK_CU(kit_cu.cuCtxSynchronize());
  for (size_t off = 0; off < SZ; off += 2 * MB)
    VXT_ASSERT(kit_sim_residency(A + off) == 1, "%s: A+%zu not on the device after the prefetch",
               name, off);
  expect_a(name);
}

/* The same entry reached through cuGetProcAddress_v2 (base name + flags). */
static void procaddr_dtoh(const char *base, int ptds) {
  CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
      entry("cuGetProcAddress_v2");
  void *fn = NULL;
  CHECK_CU(gpa(base, &fn, 12000,
               ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT,
               NULL));
  Dl_info info;
  VXT_ASSERT(fn && dladdr(fn, &info) && strstr(info.dli_fname, "libvx.so"),
             "%s: cuGetProcAddress did not hand out vx's hook", base);
  spill_a(6);
  memset(host, 0, SZ);
  CHECK_CU(((CUresult(*)(DTOH_T))fn)(host, A, SZ));
  CHECK_CU(kit_cu.cuCtxSynchronize());
  VXT_ASSERT(!memcmp(host, want, SZ), "%s (procaddr%s): wrong data", base, ptds ? ", ptds" : "");
}

static int worker(void) {
  CUcontext ctx;
  CUmodule m;
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&m));
  host = malloc(SZ);
  want = malloc(SZ);
  memset(host, 7, SZ);
  CHECK_CU(kit_cu.cuMemAlloc_v2(&A, SZ));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&X, SZ));
  for (int i = 0; i < NFILL; i++)
    CHECK_CU(kit_cu.cuMemAlloc_v2(&fill[i], SZ));
  int cases = 0;
  const char *dtoh_names[] = {"cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds", "cuMemcpyDtoHAsync_v2",
                              "cuMemcpyDtoHAsync_v2_ptsz"};
  for (int i = 0; i < 4; i++, cases++)
    dtoh(dtoh_names[i]);
  const char *dtod_names[] = {"cuMemcpyDtoD_v2",
                              "cuMemcpyDtoD_v2_ptds",
                              "cuMemcpyDtoDAsync_v2",
                              "cuMemcpyDtoDAsync_v2_ptsz",
                              "cuMemcpy",
                              "cuMemcpy_ptds",
                              "cuMemcpyAsync",
                              "cuMemcpyAsync_ptsz"};
  for (int i = 0; i < 8; i++, cases++)
    dtod(dtod_names[i]);
  const char *htod_names[] = {"cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds", "cuMemcpyHtoDAsync_v2",
                              "cuMemcpyHtoDAsync_v2_ptsz"};
  for (int i = 0; i < 4; i++, cases++)
    htod_part(htod_names[i]);
  const struct {
    const char *name;
    int elem;
  } sets[] = {{"cuMemsetD8_v2", 1},        {"cuMemsetD8_v2_ptds", 1},  {"cuMemsetD16_v2", 2},
              {"cuMemsetD32_v2", 4},       {"cuMemsetD32_v2_ptds", 4}, {"cuMemsetD8Async", 1},
              {"cuMemsetD8Async_ptsz", 1}, {"cuMemsetD16Async", 2},    {"cuMemsetD32Async", 4},
              {"cuMemsetD32Async_ptsz", 4}};
  for (size_t i = 0; i < sizeof sets / sizeof *sets; i++, cases++)
    set_part(sets[i].name, sets[i].elem);
  prefetch("cuMemPrefetchAsync_v2", 0);
  prefetch("cuMemPrefetchAsync_v2_ptsz", 0);
  prefetch("cuMemPrefetchBatchAsync", 1);
  prefetch("cuMemPrefetchBatchAsync_ptsz", 1);
  procaddr_dtoh("cuMemcpyDtoH", 0);
  procaddr_dtoh("cuMemcpyDtoH", 1);
  cases += 6;
  printf("ok %d cases\n", cases);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--worker")) return worker();
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  char dir[256], e_dir[300];
  vxt_tmpname(dir, sizeof dir, ".swap");
  VXT_ASSERT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  snprintf(e_dir, sizeof e_dir, "VX_NVME_DIR=%s", dir);
  const char *env[] = {"SIMCUDA_VRAM=128M", "VX_DEVICE_LIMIT=0", "VX_HOST_LIMIT=16M", e_dir, NULL};
  const char *args[] = {NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0);
  rmdir(dir);
  printf("%s%s", r.out, r.err);
  VXT_ASSERT(r.status == 0 && strstr(r.out, "ok 32 cases"), "worker status %d", r.status);
  return 0;
}
