/* vx's dlsym: for a symbol that resolves into libcuda.so.1 or
 * libnvidia-ml.so.1 and that vx hooks, hand out the hook.  Recursion-proof
 * (thread-local guard), safe before vx has started, RTLD_NEXT kept exact. */
#include <dlfcn.h>
#include <link.h>

#include "vx.h"

static __thread int dl_busy __attribute__((tls_model("initial-exec")));
static struct link_map *dl_lib_map[3]; /* by family; NULL until seen loaded */
static const char *const dl_lib_name[3] = {NULL, "libcuda.so.1", "libnvidia-ml.so.1"};

VX_NO_SANITIZE static struct link_map *map_of_addr(const void *p) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!dladdr1(p, &info, (void **)&lm, RTLD_DL_LINKMAP)) return NULL;
  return lm;
}

/* Link map of the family's library if it is loaded (dlopen NOLOAD). */
static struct link_map *lib_map(int family) {
  struct link_map *lm = __atomic_load_n(&dl_lib_map[family], __ATOMIC_ACQUIRE);
  if (lm) return lm;
  void *h = dlopen(dl_lib_name[family], RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0)
    __atomic_store_n(&dl_lib_map[family], lm, __ATOMIC_RELEASE);
  dlclose(h);
  return lm;
}

/* Could vx hook this name?  (No libc call: sanitizers intercept those.) */
VX_NO_SANITIZE static int dl_maybe_hooked(const char *s) {
  return (s[0] == 'c' && s[1] == 'u') || (s[0] == 'n' && s[1] == 'v' && s[2] == 'm' && s[3] == 'l');
}

static void *dl_substitute(const char *symbol, void *p) {
  int id = vx_hook_find(symbol);
  int fam = vx_hook_family(id);
  if (id < 0 || fam == VX_FAMILY_DL) return p;
  struct link_map *lib = lib_map(fam);
  if (!lib || map_of_addr(p) != lib || !vx_active()) return p;
  if (fam == VX_FAMILY_NVML && vx_real_nvml_init()) return p;
  return vx_real_v[id] == p ? vx_hook_fn(id) : p;
}

VX_NO_SANITIZE static int dl_streq(const char *a, const char *b) {
  while (*a && *a == *b)
    a++, b++;
  return *a == *b;
}

/* RTLD_NEXT as glibc means it for `caller`: the first definition in an
 * object loaded after the caller's (glibc would see vx as the caller).
 * Objects between the caller and vx are searched one by one; once the walk
 * reaches vx, vx's own hooks come first, then libc's RTLD_NEXT from vx.
 * The usual case (a sanitizer runtime or the program right before vx,
 * during their start-up) needs no dlopen and no allocation. */
VX_NO_SANITIZE static void *dl_next(vx_dlsym_fn real, const void *caller, const char *symbol) {
  struct link_map *self = map_of_addr(caller), *vxmap = map_of_addr((const void *)&dl_next);
  if (!self || self == vxmap) return real(RTLD_NEXT, symbol);
  for (struct link_map *l = self->l_next; l; l = l->l_next) {
    if (l == vxmap) {
      if (dl_streq(symbol, "dlsym")) return (void *)&dlsym;
      int id = dl_maybe_hooked(symbol) ? vx_hook_find(symbol) : -1;
      return id >= 0 ? vx_hook_fn(id) : real(RTLD_NEXT, symbol);
    }
    if (!l->l_name || !l->l_name[0]) continue;
    void *h = dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    void *p = real(h, symbol);
    dlclose(h);
    if (p && map_of_addr(p) == l) return p;
  }
  return NULL; /* vx comes before the caller, and nothing after it defines symbol */
}

VX_NO_SANITIZE void *dlsym(void *handle, const char *symbol) {
  vx_dlsym_fn real = vx_real_dlsym();
  if (!real) return NULL;
  void *p = handle == RTLD_NEXT ? dl_next(real, __builtin_return_address(0), symbol)
                                : real(handle, symbol);
  if (!p || dl_busy || vx_tls_busy || !dl_maybe_hooked(symbol)) return p;
  dl_busy = 1;
  p = dl_substitute(symbol, p);
  dl_busy = 0;
  return p;
}
