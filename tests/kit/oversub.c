/* oversub.c: vx_oversub, an unmodified driver-API program that needs 4x the
 * device's memory: allocates it in mixed sizes, fills, verifies, copies back.
 *
 * usage: vx_oversub [--bytes N[K|M|G]] [--factor F] [--managed] [--full]
 *                   [--lookup linked|dlsym|procaddr:V[:ptds]]
 * exit: 0 data verified, 1 data mismatch, 2 CUDA error (its name printed). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

#define MAX_ALLOCS 4096
#define WINDOW ((size_t)1 << 20)

typedef struct opts {
  size_t bytes;
  double factor;
  int managed, full;
  const char *lookup;
} opts;

static int parse_size(const char *s, size_t *out) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  int sh = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
  if (sh) end++;
  if (*end || v == 0) return -EINVAL;
  *out = (size_t)(v << sh);
  return 0;
}

static int parse(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  o->factor = 4.0;
  o->lookup = "linked";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--managed") == 0) o->managed = 1;
    else if (strcmp(a, "--full") == 0) o->full = 1;
    else if (strcmp(a, "--bytes") == 0 && v && parse_size(v, &o->bytes) == 0) i++;
    else if (strcmp(a, "--factor") == 0 && v && (o->factor = atof(v)) > 0) i++;
    else if (strcmp(a, "--lookup") == 0 && v) o->lookup = argv[++i];
    else {
      fprintf(stderr, "usage: vx_oversub [--bytes N] [--factor F] [--managed] [--full] "
                      "[--lookup linked|dlsym|procaddr:V[:ptds]]\n");
      return -EINVAL;
    }
  }
  return 0;
}

/* Mixed sizes, relative to the device (multiples of 4 bytes). */
static size_t size_of(size_t k, size_t total) {
  static const size_t div[] = {8, 32, 128, 16, 64, 512};
  size_t s = total / div[k % 6];
  if (k % 3 == 1) s += 4096 + 12; /* not a multiple of a page or a chunk */
  return s < 4096 ? 4096 : s & ~(size_t)3;
}

static int fail(const char *what, size_t k, size_t size, size_t done, CUresult r) {
  printf("vx_oversub: FAILED: %s (allocation %zu of %zu bytes, %zu MiB allocated so far): %s\n",
         what, k, size, done >> 20, kit_err_name(r));
  return 2;
}

/* Copies three 1 MiB windows (or everything with --full) back and checks
 * them on the host; returns the mismatching words. */
static size_t copy_back(CUdeviceptr p, size_t bytes, uint32_t seed, int full, uint32_t *buf,
                        CUresult *r) {
  size_t n = bytes / 4, bad = 0, w = WINDOW / 4;
  size_t starts[3] = {0, n / 2, n > w ? n - w : 0};
  size_t count = full ? (n + w - 1) / w : 3;
  *r = CUDA_SUCCESS;
  for (size_t i = 0; i < count; i++) {
    size_t first = full ? i * w : starts[i];
    size_t cnt = n - first < w ? n - first : w;
    *r = kit_cu.cuMemcpyDtoH_v2(buf, p + first * 4, cnt * 4);
    if (*r != CUDA_SUCCESS) return bad;
    bad += kit_verify_host(buf, cnt, seed, first);
  }
  return bad;
}

int main(int argc, char **argv) {
  opts o;
  if (parse(argc, argv, &o) != 0) return 2;
  if (kit_bind_spec(o.lookup) != 0) return 2;
  CUcontext ctx;
  CUresult r = kit_init(0, &ctx);
  if (r != CUDA_SUCCESS) return 2;
  CHECK_CU(kit_module(NULL));
  size_t total;
  CHECK_CU(kit_cu.cuDeviceTotalMem_v2(&total, 0));
  size_t want = o.bytes ? o.bytes : (size_t)((double)total * o.factor);
  /* sizes are relative to the device, or to want/factor when told the bytes */
  size_t ref = o.bytes ? (size_t)((double)o.bytes / o.factor) : total;
  if (want == 0 || ref == 0) {
    printf("vx_oversub: FAILED: the device reports %zu bytes of memory\n", total);
    return 2;
  }
  static CUdeviceptr ptr[MAX_ALLOCS];
  static size_t len[MAX_ALLOCS];
  size_t n = 0, done = 0;
  const char *api = o.managed ? "cuMemAllocManaged" : "cuMemAlloc_v2";
  while (done < want && n < MAX_ALLOCS) {
    size_t s = size_of(n, ref);
    if (s > want - done) s = (want - done + 3) & ~(size_t)3;
    r = o.managed ? kit_cu.cuMemAllocManaged(&ptr[n], s, CU_MEM_ATTACH_GLOBAL)
                  : kit_cu.cuMemAlloc_v2(&ptr[n], s);
    if (r != CUDA_SUCCESS) return fail(api, n, s, done, r);
    len[n++] = s;
    done += s;
  }
  if (done < want) {
    printf("vx_oversub: FAILED: %zu allocations cover only %zu of %zu bytes\n", n, done, want);
    return 2;
  }
  for (size_t k = 0; k < n; k++) {
    r = kit_fill(ptr[k], len[k] / 4, (uint32_t)k + 1, NULL);
    if (r != CUDA_SUCCESS) return fail("fill_u32", k, len[k], done, r);
  }
  unsigned long long bad = 0;
  size_t host_bad = 0;
  uint32_t *buf = malloc(WINDOW);
  if (!buf) return 2;
  for (size_t k = 0; k < n; k++) {
    unsigned long long b = 0;
    r = kit_check(ptr[k], len[k] / 4, (uint32_t)k + 1, NULL, &b);
    if (r != CUDA_SUCCESS) return fail("check_u32", k, len[k], done, r);
    bad += b;
    host_bad += copy_back(ptr[k], len[k], (uint32_t)k + 1, o.full, buf, &r);
    if (r != CUDA_SUCCESS) return fail("cuMemcpyDtoH_v2", k, len[k], done, r);
  }
  free(buf);
  for (size_t k = 0; k < n; k++) CHECK_CU(kit_cu.cuMemFree_v2(ptr[k]));
  int ok = bad == 0 && host_bad == 0;
  printf("vx_oversub: %s: %zu allocations, %zu MiB (%.2fx the device's %zu MiB) with %s, "
         "mismatches: %llu on the device, %zu copied back\n",
         ok ? "OK" : "MISMATCH", n, done >> 20, total ? (double)done / (double)total : 0.0,
         total >> 20, api, bad, host_bad);
  if (kit_is_sim()) kit_sim_print_stats(stdout, 0);
  CHECK_CU(kit_cu.cuDevicePrimaryCtxRelease_v2(0));
  return ok ? 0 : 1;
}
