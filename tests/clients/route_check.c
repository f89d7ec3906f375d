/* route_check LIBCUDA LOOKUPS: replays libcudart's cuGetProcAddress_v2
 * lookups (lines "symbol version flags") against a real NVIDIA libcuda.so.1
 * with libvx.so preloaded.  For each, vx must return its hook for exactly
 * the variant the driver returns (named by dladdr) and the driver's own
 * pointer otherwise, with the same result and status; and the same through
 * the v1 cuGetProcAddress (no status), which runtimes before 12.0 use. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* vx's hooked driver variants (hooks.def), by exported name. */
static const char *const cu_hooks[] = {
#define VX_HOOK(fam, name, stream, base, ret, params) #fam[0] == 'C' && #fam[1] == 'U' ? #name : NULL,
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
};
#define NHOOKS (sizeof cu_hooks / sizeof *cu_hooks)

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa1_t)(const char *, void **, int, cuuint64_t);
typedef void *(*dlsym_t)(void *, const char *);

static int is_hook(const char *name) {
  for (size_t i = 0; name && i < NHOOKS; i++)
    if (cu_hooks[i] && !strcmp(cu_hooks[i], name)) return 1;
  return 0;
}

/* The exported name at exactly p, or NULL. */
static const char *name_of(const void *p, const char **file) {
  Dl_info di;
  if (!p || !dladdr(p, &di)) return NULL;
  if (file) *file = di.dli_fname;
  return di.dli_saddr == p ? di.dli_sname : NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: route_check LIBCUDA LOOKUPS\n");
    return 2;
  }
  /* libc's own dlsym: vx hooks dlsym for libcuda handles. */
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  dlsym_t sym = libc ? (dlsym_t)dlvsym(libc, "dlsym", "GLIBC_2.34") : NULL;
  if (!sym && libc) sym = (dlsym_t)dlvsym(libc, "dlsym", "GLIBC_2.2.5");
  void *drv = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!sym || !drv) {
    fprintf(stderr, "FAIL: cannot open %s: %s\n", argv[1], dlerror());
    return 1;
  }
  /* vx opens the driver as "libcuda.so.1": it must be this very object. */
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) != drv) {
    fprintf(stderr, "FAIL: libcuda.so.1 is not %s (LD_LIBRARY_PATH?)\n", argv[1]);
    return 1;
  }
  gpa_t real = (gpa_t)sym(drv, "cuGetProcAddress_v2");
  gpa_t hook = (gpa_t)sym(RTLD_DEFAULT, "cuGetProcAddress_v2");
  gpa1_t real1 = (gpa1_t)sym(drv, "cuGetProcAddress"),
         hook1 = (gpa1_t)sym(RTLD_DEFAULT, "cuGetProcAddress");
  const char *vxfile = NULL;
  name_of((void *)hook, &vxfile);
  void *vx = vxfile ? dlopen(vxfile, RTLD_NOW | RTLD_NOLOAD) : NULL;
  if (!real || !hook || (void *)hook == (void *)real || !vx || vx == drv || !real1 || !hook1 ||
      (void *)real1 == (void *)hook1) {
    fprintf(stderr, "FAIL: vx's cuGetProcAddress_v2 is not preloaded over the driver\n");
    return 1;
  }
  FILE *in = fopen(argv[2], "r");
  if (!in) {
    perror(argv[2]);
    return 1;
  }
  char s[256];
  int ver, n = 0, found = 0, handed = 0, bad = 0;
  unsigned long long flags;
  while (fscanf(in, "%255s %d %llu", s, &ver, &flags) == 3) {
    void *rp = NULL, *hp = NULL;
    CUdriverProcAddressQueryResult rs = -1, hs = -1;
    CUresult rr = real(s, &rp, ver, flags, &rs);
    CUresult hr = hook(s, &hp, ver, flags, &hs);
    n++;
    const char *rname = name_of(rp, NULL), *hname = name_of(hp, NULL);
    void *want = rp;
    if (rp) found++;
    if (is_hook(rname)) {
      want = sym(vx, rname);
      handed++;
    }
    if (rr != hr || rs != hs || hp != want) {
      printf("FAIL: %s version=%d flags=%llu: driver %d/%d %s, vx %d/%d %s%s\n", s, ver, flags, rr,
             rs,
             rname ? rname
             : rp  ? "(unnamed)"
                   : "NULL",
             hr, hs,
             hname ? hname
             : hp  ? "(unnamed)"
                   : "NULL",
             hp == want ? "" : " (wrong pointer)");
      bad++;
    } else if (getenv("ROUTE_VERBOSE") && is_hook(rname)) {
      printf("hook: %s version=%d flags=%llu -> %s\n", s, ver, flags, rname);
    }
    void *rp1 = NULL, *hp1 = NULL;
    CUresult rr1 = real1(s, &rp1, ver, flags), hr1 = hook1(s, &hp1, ver, flags);
    void *want1 = is_hook(name_of(rp1, NULL)) ? sym(vx, name_of(rp1, NULL)) : rp1;
    if (rr1 != hr1 || hp1 != want1) {
      const char *h1 = name_of(hp1, NULL);
      printf("FAIL: v1 %s version=%d flags=%llu: driver %d %s, vx %d %s\n", s, ver, flags, rr1,
             name_of(rp1, NULL) ? name_of(rp1, NULL)
             : rp1              ? "(unnamed)"
                                : "NULL",
             hr1,
             h1    ? h1
             : hp1 ? "(unnamed)"
                   : "NULL");
      bad++;
    }
  }
  fclose(in);
  printf("route_check: %d lookups (each through cuGetProcAddress_v2 and v1), %d answered by the "
         "driver, %d handed vx's hook of that variant, %d wrong\n",
         n, found, handed, bad);
  return bad || n == 0 || handed == 0;
}
