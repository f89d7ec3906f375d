/* The real entry points: libcuda.so.1 and libnvidia-ml.so.1 opened once and
 * every listed symbol resolved with libc's dlsym (never vx's own hook). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "driver.h"
#include "log.h"

void *vx_real_v[VX_ID_COUNT];

static vx_dlsym_fn real_dlsym_fn;
static void *cuda_handle, *nvml_handle;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT, nvml_once = PTHREAD_ONCE_INIT;

static const struct {
  const char *name;
  int family;
} real_names[VX_ID_COUNT] = {
#define VX_HOOK(fam, name, stream, base, ret, params) {#name, VX_FAMILY_##fam},
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
#define VX_HOOK(fam, name, stream, base, ret, params)
#define VX_REAL(fam, name, ret, params) {#name, VX_FAMILY_##fam},
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
};

VX_NO_SANITIZE vx_dlsym_fn vx_real_dlsym(void) {
  vx_dlsym_fn f = __atomic_load_n(&real_dlsym_fn, __ATOMIC_ACQUIRE);
  if (f) return f;
  /* glibc 2.34 moved dlsym into libc under a new version; then older ones
   * (x86_64, aarch64).  Literals, not a table: no instrumented data here. */
  f = (vx_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!f) f = (vx_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  if (!f) f = (vx_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
  __atomic_store_n(&real_dlsym_fn, f, __ATOMIC_RELEASE);
  return f;
}

static void resolve_family(void *handle, int family) {
  vx_dlsym_fn dl = vx_real_dlsym();
  for (int i = 0; i < VX_ID_COUNT; i++)
    if (real_names[i].family == family)
      __atomic_store_n(&vx_real_v[i], dl(handle, real_names[i].name), __ATOMIC_RELEASE);
}

static void cuda_init_once(void) {
  __atomic_store_n(&vx_real_v[VX_ID_dlsym], (void *)vx_real_dlsym(), __ATOMIC_RELEASE);
  void *h = dlopen("libcuda.so.1", RTLD_LAZY);
  if (!h) return;
  resolve_family(h, VX_FAMILY_CU);
  __atomic_store_n(&cuda_handle, h, __ATOMIC_RELEASE);
}

static void nvml_init_once(void) {
  void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
  if (!h) return;
  resolve_family(h, VX_FAMILY_NVML);
  __atomic_store_n(&nvml_handle, h, __ATOMIC_RELEASE);
}

int vx_real_init(void) {
  if (!vx_real_dlsym()) return -ENOSYS;
  pthread_once(&cuda_once, cuda_init_once);
  return __atomic_load_n(&cuda_handle, __ATOMIC_ACQUIRE) ? 0 : -ENOENT;
}

int vx_real_nvml_init(void) {
  if (!vx_real_dlsym()) return -ENOSYS;
  pthread_once(&nvml_once, nvml_init_once);
  return __atomic_load_n(&nvml_handle, __ATOMIC_ACQUIRE) ? 0 : -ENOENT;
}

const char *vx_cu_err(CUresult r, char buf[VX_CU_ERR_TEXT]) {
  const char *name = NULL;
  vx_pfn_cuGetErrorName fn = VX_REAL_FN(cuGetErrorName);
  if (fn && fn(r, &name) == CUDA_SUCCESS && name) return name;
  snprintf(buf, VX_CU_ERR_TEXT, "CUresult %d", (int)r);
  return buf;
}

void *vx_real_driver_sym(const char *name) {
  void *h = __atomic_load_n(&cuda_handle, __ATOMIC_ACQUIRE);
  vx_dlsym_fn dl = vx_real_dlsym();
  return h && dl ? dl(h, name) : NULL;
}
