/* vx_procaddr: vx's cuGetProcAddress_v2 maps the pointer the real driver
 * returns to the exact variant (version, per-thread-stream flag) and hands
 * out that variant's hook; anything vx does not hook comes back untouched.
 * libcuda.so.1 and libvx.so are dlopen'ed locally (no preload), so the
 * driver's table holds its own functions, as a real driver's does. */
#include <dlfcn.h>
#include <string.h>

#include "vxt.h"

static const struct {
  const char *name, *base;
  int cu;
} hooks[] = {
#define VX_HOOK(fam, name, stream, base, ret, params) {#name, base, !strcmp(#fam, "CU")},
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
};
#define NHOOKS (sizeof hooks / sizeof *hooks)

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

int main(void) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  VXT_ASSERT(cuda, "%s", dlerror());
  const char *lib = getenv("VXT_LIBVX");
  void *vx = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  VXT_ASSERT(vx, "%s", dlerror());
  gpa_t real = (gpa_t)dlsym(cuda, "cuGetProcAddress_v2"),
        hook = (gpa_t)dlsym(vx, "cuGetProcAddress_v2");
  VXT_ASSERT(real && hook && (void *)real != (void *)hook);
  int reached[NHOOKS] = {0}, checks = 0, handed = 0;
  const int versions[] = {3020, 10000, 11030, 12000, 12080, 13000};
  for (size_t v = 0; v < sizeof versions / sizeof *versions; v++)
    for (int ptds = 0; ptds < 2; ptds++)
      for (size_t i = 0; i < NHOOKS; i++) {
        if (!hooks[i].cu) continue;
        cuuint64_t flags =
            ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
        void *rp = NULL, *hp = NULL;
        CUdriverProcAddressQueryResult rs, hs;
        CUresult rr = real(hooks[i].base, &rp, versions[v], flags, &rs);
        CUresult hr = hook(hooks[i].base, &hp, versions[v], flags, &hs);
        VXT_ASSERT(rr == hr && rs == hs, "%s@%d: status differs", hooks[i].base, versions[v]);
        if (rr != CUDA_SUCCESS) continue;
        if (!rp) { /* the driver has no such variant: neither has vx */
          VXT_ASSERT(!hp, "%s@%d ptds=%d: vx gave %p where the driver gave none", hooks[i].base,
                     versions[v], ptds, hp);
          continue;
        }
        void *want = rp;
        for (size_t k = 0; k < NHOOKS; k++) /* the exact variant the driver gave */
          if (hooks[k].cu && dlsym(cuda, hooks[k].name) == rp) {
            want = dlsym(vx, hooks[k].name);
            reached[k] = 1;
            handed++;
          }
        VXT_ASSERT(hp == want, "%s@%d ptds=%d: vx gave %p, want %p", hooks[i].base, versions[v],
                   ptds, hp, want);
        checks++;
      }
  /* every hooked variant the driver has is reachable through some lookup */
  int missing = 0;
  for (size_t k = 0; k < NHOOKS; k++)
    if (hooks[k].cu && dlsym(cuda, hooks[k].name) && !reached[k]) {
      fprintf(stderr, "hooked variant %s never returned by the driver's lookup\n", hooks[k].name);
      missing++;
    }
  VXT_ASSERT(missing == 0);
  VXT_ASSERT(handed > 50, "only %d lookups handed out hooks", handed);
  printf("%d lookups checked, %d handed vx's exact variant\n", checks, handed);
  return 0;
}
