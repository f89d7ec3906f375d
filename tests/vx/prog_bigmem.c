/* vx_bigmem_*: one unmodified program allocates 4x SIMCUDA_VRAM in mixed
 * sizes, writes patterns by copies and by kernels, reads everything back.
 * Without vx it must fail with CUDA_ERROR_OUT_OF_MEMORY; with vx it passes
 * and the exit report shows the exact split between native and managed.
 *   prog_bigmem STYLE   (linked | dlsym | pa:12000 | pa:13000:ptds ...) */
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "kit.h"
#include "vxt.h"

#define LIMIT_MB 48 /* VX_DEVICE_LIMIT of the vx run (SIMCUDA_VRAM=64M) */

/* The allocation sizes: mixed, deterministic, summing to >= 4x VRAM. */
static size_t sizes_max(const size_t *s, int n) {
  size_t m = 0;
  for (int i = 0; i < n; i++)
    m = s[i] > m ? s[i] : m;
  return m;
}

static int bigmem_sizes(size_t vram, size_t *sizes, int max) {
  const size_t pattern[] = {vram / 64 + 4096,     vram / 8, 300 << 10,
                            vram / 4 + 12344,     1 << 20,  vram / 16,
                            vram / 3 & ~(size_t)3};
  size_t total = 0;
  int n = 0;
  while (total < 4 * vram && n < max) {
    sizes[n] = pattern[n % (sizeof pattern / sizeof *pattern)];
    total += sizes[n++];
  }
  return n;
}

/* Every entry point the kit bound must be vx's hook of exactly the variant
 * the driver gave (per-thread-stream forms under ptds), or not vx's at all. */
static const char *const vx_hooks[] = {
#define VX_HOOK(fam, name, stream, base, ret, params) #name,
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
};

static int hooked(const char *name) {
  for (size_t i = 0; i < sizeof vx_hooks / sizeof *vx_hooks; i++)
    if (!strcmp(vx_hooks[i], name)) return 1;
  return 0;
}

static void check_bound(int ptds) {
  struct {
    const char *sym;
    void *p;
  } t[] = {
#define KIT_CU(sym, base, ver) {#sym, (void *)kit_cu.sym},
#include "kit_api.def"
#undef KIT_CU
  };
  int nhooked = 0;
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    char ptsz[128], ptds_sym[128], want[128] = "";
    snprintf(ptsz, sizeof ptsz, "%s_ptsz", t[i].sym);
    snprintf(ptds_sym, sizeof ptds_sym, "%s_ptds", t[i].sym);
    if (ptds && hooked(ptsz))
      snprintf(want, sizeof want, "%s", ptsz);
    else if (ptds && hooked(ptds_sym))
      snprintf(want, sizeof want, "%s", ptds_sym);
    else if (hooked(t[i].sym))
      snprintf(want, sizeof want, "%s", t[i].sym);
    Dl_info info;
    VXT_ASSERT(t[i].p && dladdr(t[i].p, &info), "%s not bound", t[i].sym);
    size_t len = strlen(info.dli_fname);
    int in_vx = len >= 8 && !strcmp(info.dli_fname + len - 8, "libvx.so");
    if (want[0]) {
      VXT_ASSERT(in_vx && info.dli_sname && !strcmp(info.dli_sname, want),
                 "%s: got %s in %s, want vx's %s", t[i].sym, info.dli_sname ? info.dli_sname : "?",
                 info.dli_fname, want);
      nhooked++;
    } else {
      VXT_ASSERT(!in_vx, "%s: vx handed out %s", t[i].sym, info.dli_sname ? info.dli_sname : "?");
    }
  }
  VXT_ASSERT(nhooked >= 10, "only %d hooked entries bound", nhooked);
}

/* vx's managed memory has no device as preferred location: cuda.h says such
 * pages "will continue to thrash indefinitely" under memory pressure, past
 * the driver's thrash resolution. */
static void check_advice(const CUdeviceptr *p, const size_t *sizes, int n) {
  CUresult (*attr)(void *, size_t, CUmem_range_attribute, CUdeviceptr, size_t);
  CUresult (*ptr)(void *, CUpointer_attribute, CUdeviceptr);
  *(void **)&attr = dlsym(RTLD_DEFAULT, "cuMemRangeGetAttribute");
  *(void **)&ptr = dlsym(RTLD_DEFAULT, "cuPointerGetAttribute");
  VXT_ASSERT(attr && ptr);
  int managed = 0;
  for (int i = 0; i < n; i++) {
    unsigned is_managed = 0;
    int loc = 0;
    CHECK_CU(ptr(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p[i]));
    if (!is_managed) continue;
    managed++;
    CHECK_CU(attr(&loc, 4, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p[i], sizes[i]));
    VXT_ASSERT(loc == CU_DEVICE_INVALID, "allocation %d prefers device %d", i, loc);
  }
  VXT_ASSERT(managed > 0, "no managed allocation to check");
}

static int worker(const char *style) {
  CUcontext ctx;
  CUmodule mod;
  VXT_ASSERT(kit_bind_spec(style) == 0, "bad style %s", style);
  if (vxt_vx_preloaded()) check_bound(strstr(style, ":ptds") != NULL);
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&mod));
  size_t vram = vxt_env_size("SIMCUDA_VRAM", 1 << 30), sizes[256];
  int n = bigmem_sizes(vram, sizes, 256);
  CUdeviceptr p[256], seven;
  for (int i = 0; i < n; i++) {
    CUresult r = kit_cu.cuMemAlloc_v2(&p[i], sizes[i]);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      printf("oom at allocation %d\n", i);
      return 3;
    }
    CHECK_CU(r);
  }
  if (vxt_vx_preloaded()) check_advice(p, sizes, n);
  for (int i = 0; i < n; i++) { /* even: copies, odd: kernels */
    size_t words = sizes[i] / 4;
    uint32_t seed = (uint32_t)i * 977u;
    if (i % 2 == 0) {
      uint32_t *h = malloc(words * 4);
      for (size_t k = 0; k < words; k++)
        h[k] = kit_hash(seed, k);
      CHECK_CU(kit_cu.cuMemcpyHtoD_v2(p[i], h, words * 4));
      free(h);
    } else {
      CHECK_CU(kit_fill(p[i], words, seed, NULL));
    }
  }
  /* every third buffer: p = p + sevens, by a kernel reading two buffers */
  size_t maxw = 0;
  for (int i = 0; i < n; i++)
    maxw = sizes[i] / 4 > maxw ? sizes[i] / 4 : maxw;
  CHECK_CU(kit_cu.cuMemAlloc_v2(&seven, maxw * 4));
  CHECK_CU(kit_cu.cuMemsetD32_v2(seven, 7, maxw));
  for (int i = 0; i < n; i += 3)
    CHECK_CU(kit_add(p[i], p[i], seven, sizes[i] / 4, NULL));
  CHECK_CU(kit_cu.cuCtxSynchronize());
  for (int i = 0; i < n; i++) {
    size_t words = sizes[i] / 4;
    uint32_t *h = malloc(words * 4), seed = (uint32_t)i * 977u;
    if (i % 3 == 1) { /* verified on the device */
      unsigned long long bad = 1;
      CHECK_CU(kit_check(p[i], words, seed, NULL, &bad));
      VXT_ASSERT(bad == 0, "buffer %d: %llu bad words", i, bad);
    }
    CHECK_CU(kit_cu.cuMemcpyDtoH_v2(h, p[i], words * 4));
    for (size_t k = 0; k < words; k++)
      if (h[k] != kit_hash(seed, k) + (i % 3 == 0 ? 7 : 0))
        VXT_FAIL("buffer %d word %zu: %u", i, k, h[k]);
    free(h);
    CHECK_CU(kit_cu.cuMemFree_v2(p[i]));
  }
  CHECK_CU(kit_cu.cuMemFree_v2(seven));
  printf("ok %d buffers\n", n);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--worker")) return worker(argv[2]);
  VXT_ASSERT(argc == 2, "usage: prog_bigmem STYLE");
  if (!vxt_vx_preloaded()) VXT_FAIL("run me with libvx.so in LD_PRELOAD");
  vxt_run_t *r = malloc(sizeof *r);
  const char *args[] = {argv[1], NULL};
  /* without vx: out of memory */
  const char *env0[] = {"SIMCUDA_VRAM=64M", NULL};
  VXT_ASSERT(vxt_run(r, 0, env0, args) == 0);
  VXT_ASSERT(r->status == 3 && strstr(r->out, "oom at"), "without vx: status %d\n%s%s", r->status,
             r->out, r->err);
  /* with vx: every byte verified, the split exact */
  char report[256], env_report[300];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(env_report, sizeof env_report, "VX_REPORT=%s", report);
  const char *env1[] = {"SIMCUDA_VRAM=64M", "VX_DEVICE_LIMIT=48M", "VX_NATIVE_MAX=0", "VX_MOVABLE=0", env_report,
                        NULL};
  VXT_ASSERT(vxt_run(r, 1, env1, args) == 0);
  VXT_ASSERT(r->status == 0 && strstr(r->out, "ok "), "with vx: status %d\n%s%s", r->status, r->out,
             r->err);
  char *json = vxt_read_file(report);
  VXT_ASSERT(json, "no report at %s", report);
  unlink(report);
  /* the same greedy split vx must make: native while it fits the limit */
  size_t sizes[256], limit = (size_t)LIMIT_MB << 20, used = 0, native_n = 0, managed_b = 0;
  int n = bigmem_sizes(64 << 20, sizes, 256);
  sizes[n] = sizes_max(sizes, n) & ~(size_t)3; /* the buffer of sevens */
  n++;
  for (int i = 0; i < n; i++) {
    if (used + sizes[i] <= limit) {
      used += sizes[i];
      native_n++;
    } else {
      managed_b += sizes[i];
    }
  }
  /* kit_check allocates its mismatch counter (8 bytes, native) per call */
  size_t checks = 0;
  for (int i = 0; i < n - 1; i++)
    checks += i % 3 == 1;
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_native") == native_n + checks,
             "want %zu native of %d, %zu bytes: %s", native_n, n, used, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "alloc_managed") == (uint64_t)n - native_n, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "native_bytes_peak") == used, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "managed_bytes_peak") == managed_b, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "frees") == (uint64_t)n + checks, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "native_bytes") == 0 &&
             vxt_json_u64(json, 0, "managed_bytes") == 0);
  VXT_ASSERT(vxt_json_u64(json, 0, "managed_fallbacks") == 0 &&
             vxt_json_u64(json, 0, "underflows") == 0);
  VXT_ASSERT(vxt_json_u64(json, 0, "limit_bytes") == limit);
  VXT_ASSERT(vxt_json_u64(json, 0, "launches") >= (uint64_t)n / 2, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, -1, "tracked") == 0);
  n--; /* report the test buffers */
  printf("%s: %d buffers (%zu native, %d managed, %zu managed bytes), verified\n", argv[1], n,
         native_n, n - (int)native_n, managed_b);
  free(json);
  free(r);
  return 0;
}
