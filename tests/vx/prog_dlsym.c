/* vx_dlsym: vx's dlsym.  Eight threads race to be the first to look up
 * driver symbols (vx starts inside dlsym); hooked names on a libcuda or
 * NVML handle give vx's hook, others the driver's own; RTLD_NEXT keeps
 * glibc's meaning for the program; RTLD_DEFAULT and misses behave. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "vxt.h"

static int in_lib(const void *p, const char *suffix) {
  Dl_info info;
  if (!p || !dladdr(p, &info) || !info.dli_fname) return 0;
  size_t n = strlen(info.dli_fname), k = strlen(suffix);
  return n >= k && !strcmp(info.dli_fname + n - k, suffix);
}

static void *racer(void *arg) {
  (void)arg;
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  VXT_ASSERT(h);
  for (int i = 0; i < 200; i++) {
    void *p = dlsym(h, "cuMemAlloc_v2"), *q = dlsym(h, "cuStreamQuery"),
         *g = dlsym(h, "cuGetProcAddress_v2");
    VXT_ASSERT(in_lib(p, "libvx.so") && in_lib(g, "libvx.so"), "hooked name not vx's");
    VXT_ASSERT(in_lib(q, "libcuda.so.1"), "unhooked name not the driver's");
  }
  return NULL;
}

int main(void) {
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  pthread_t t[8];
  for (int i = 0; i < 8; i++)
    VXT_ASSERT(pthread_create(&t[i], NULL, racer, NULL) == 0);
  for (int i = 0; i < 8; i++)
    pthread_join(t[i], NULL);
  /* the exact variant by exported name: v1 entry points are not vx's */
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  VXT_ASSERT(in_lib(dlsym(h, "cuMemFree_v2"), "libvx.so"));
  void *v1 = dlsym(h, "cuMemAlloc");
  VXT_ASSERT(!v1 || in_lib(v1, "libcuda.so.1"), "the v1 cuMemAlloc must stay the driver's");
  VXT_ASSERT(in_lib(dlsym(h, "cuLaunchKernel_ptsz"), "libvx.so"));
  VXT_ASSERT(dlsym(h, "cuNoSuchEntryPoint") == NULL && dlerror() != NULL);
  /* NVML through a handle */
  void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (nv) {
    VXT_ASSERT(in_lib(dlsym(nv, "nvmlDeviceGetMemoryInfo_v2"), "libvx.so"));
    VXT_ASSERT(in_lib(dlsym(nv, "nvmlInit_v2"), "libnvidia-ml.so.1"));
  }
  /* RTLD_DEFAULT: the preloaded definitions */
  VXT_ASSERT(in_lib(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), "libvx.so"));
  /* RTLD_NEXT from the program: the next definitions after it, as glibc
   * would find them (vx's hooks first, since vx comes right after) */
  VXT_ASSERT(in_lib(dlsym(RTLD_NEXT, "cuMemAlloc_v2"), "libvx.so"));
  VXT_ASSERT(dlsym(RTLD_NEXT, "malloc") == dlsym(RTLD_DEFAULT, "malloc"), "RTLD_NEXT malloc");
  VXT_ASSERT(dlsym(RTLD_NEXT, "strlen") == dlsym(RTLD_DEFAULT, "strlen"), "RTLD_NEXT strlen");
  VXT_ASSERT(dlsym(RTLD_NEXT, "vxt_no_such_symbol") == NULL);
  printf("dlsym: racing start-up, handles, RTLD_DEFAULT and RTLD_NEXT ok\n");
  return 0;
}
