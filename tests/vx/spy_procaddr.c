/* libvxspy.so: a test-only preload placed before libvx.so.  It wraps the
 * cuGetProcAddress(_v2) that a program obtains through dlsym (as libcudart
 * does) and checks every answer: vx's hook of exactly the variant the real
 * driver returns for hooked entry points, the real entry otherwise.  At
 * exit it writes "lookups N hooked H mismatches M" to $VXSPY_LOG. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPY_EXPORT __attribute__((visibility("default")))
/* libasan/libtsan look functions up with dlsym (ours) before they are set up. */
#define SPY_NOSAN __attribute__((no_sanitize("address", "thread", "undefined")))

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static const char *const hooks[] = {
#define VX_HOOK(fam, name, stream, base, ret, params) #name,
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
};

static dlsym_fn libc_dlsym, vx_dlsym;
static void *cuda, *vx;
static gpa_v2_fn next_v2, real_v2;
static gpa_v1_fn next_v1;
static unsigned long lookups, hooked, mismatches;
static char first_bad[8][256];

/* libvx.so as preloaded (by its full path). */
SPY_NOSAN static int ends_with_libvx(const char *s) {
  const char *want = "libvx.so";
  size_t n = 0;
  while (s && s[n])
    n++;
  if (n < 8) return 0;
  for (int i = 0; i < 8; i++)
    if (s[n - 8 + i] != want[i]) return 0;
  return 1;
}

SPY_NOSAN static int find_vx(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size, (void)arg;
  if (ends_with_libvx(info->dlpi_name)) {
    vx = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    return 1;
  }
  return 0;
}

SPY_NOSAN static void spy_init(void) {
  if (libc_dlsym) return;
  libc_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!libc_dlsym) libc_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  /* the next dlsym after this library: vx's (no dlopen here: too early) */
  vx_dlsym = (dlsym_fn)libc_dlsym(RTLD_NEXT, "dlsym");
  if (!vx_dlsym) vx_dlsym = libc_dlsym;
}

static Dl_info info_vx;

static void check(const char *sym, int ver, cuuint64_t flags, void *got) {
  if (!vx) dl_iterate_phdr(find_vx, NULL);
  if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!real_v2 && cuda) real_v2 = (gpa_v2_fn)libc_dlsym(cuda, "cuGetProcAddress_v2");
  void *want = NULL;
  CUdriverProcAddressQueryResult st;
  if (!real_v2 || real_v2(sym, &want, ver, flags, &st) != CUDA_SUCCESS) want = NULL;
  Dl_info wi;
  if (want && dladdr(want, &wi) && wi.dli_fbase && vx && libc_dlsym(vx, "dlsym") &&
      dladdr(libc_dlsym(vx, "dlsym"), &info_vx) && wi.dli_fbase == info_vx.dli_fbase) {
    /* the driver's own table already points into vx (its symbols were
     * interposed by the preload): that is vx's hook, as wanted */
    hooked++;
    lookups++;
    if (got != want && mismatches++ < 8)
      snprintf(first_bad[mismatches - 1], sizeof first_bad[0], "%s@%d: got %p want %p", sym, ver,
               got, want);
    return;
  }
  for (size_t i = 0; want && vx && i < sizeof hooks / sizeof *hooks; i++)
    if (libc_dlsym(cuda, hooks[i]) == want) { /* a variant vx hooks */
      want = libc_dlsym(vx, hooks[i]);
      hooked++;
      break;
    }
  lookups++;
  if (got != want) {
    if (mismatches < 8)
      snprintf(first_bad[mismatches], sizeof first_bad[0], "%s@%d flags %llu: got %p want %p", sym,
               ver, (unsigned long long)flags, got, want);
    mismatches++;
  }
}

static CUresult spy_v1(const char *, void **, int, cuuint64_t);

static CUresult spy_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status) {
  CUresult r = next_v2(sym, pfn, ver, flags, status);
  if (r != CUDA_SUCCESS || !pfn || !*pfn) return r;
  check(sym, ver, flags, *pfn);
  if (!strcmp(sym, "cuGetProcAddress")) { /* keep watching the lookups made with the answer */
    Dl_info info;
    if (dladdr(*pfn, &info) && info.dli_sname && !strcmp(info.dli_sname, "cuGetProcAddress_v2")) {
      next_v2 = (gpa_v2_fn)*pfn;
      *pfn = (void *)spy_v2;
    } else {
      next_v1 = (gpa_v1_fn)*pfn;
      *pfn = (void *)spy_v1;
    }
  }
  return r;
}

static CUresult spy_v1(const char *sym, void **pfn, int ver, cuuint64_t flags) {
  CUresult r = next_v1(sym, pfn, ver, flags);
  if (r == CUDA_SUCCESS && pfn && *pfn) check(sym, ver, flags, *pfn);
  return r;
}

SPY_NOSAN static int is_gpa(const char *s, int v2) {
  const char *want = v2 ? "cuGetProcAddress_v2" : "cuGetProcAddress";
  while (*s && *s == *want)
    s++, want++;
  return *s == *want;
}

SPY_EXPORT SPY_NOSAN void *dlsym(void *handle, const char *sym) {
  spy_init();
  void *p = vx_dlsym(handle, sym);
  if (p && is_gpa(sym, 1)) {
    next_v2 = (gpa_v2_fn)p;
    return (void *)spy_v2;
  }
  if (p && is_gpa(sym, 0)) {
    next_v1 = (gpa_v1_fn)p;
    return (void *)spy_v1;
  }
  return p;
}

__attribute__((destructor)) static void spy_fini(void) {
  const char *path = getenv("VXSPY_LOG");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  fprintf(f, "lookups %lu hooked %lu mismatches %lu\n", lookups, hooked, mismatches);
  for (unsigned long i = 0; i < mismatches && i < 8; i++)
    fprintf(f, "%s\n", first_bad[i]);
  fclose(f);
}
