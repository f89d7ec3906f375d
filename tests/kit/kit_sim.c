/* kit_sim.c: the simulator's extras found at run time (dlsym), so kit
 * programs also run on a real driver; kernel registration glue. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "kit.h"

static void *sim_sym(const char *name) {
  void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return NULL;
  void *p = dlsym(h, name);
  dlclose(h);
  return p;
}

int kit_is_sim(void) { return sim_sym("simcuda_get_stats") != NULL; }

int kit_sim_stats(int dev, simcuda_stats_t *st) {
  int (*fn)(int, simcuda_stats_t *);
  *(void **)&fn = sim_sym("simcuda_get_stats");
  return fn ? fn(dev, st) : -ENOSYS;
}

int kit_sim_reset_stats(void) {
  void (*fn)(void);
  *(void **)&fn = sim_sym("simcuda_reset_stats");
  if (!fn) return -ENOSYS;
  fn();
  return 0;
}

int kit_sim_residency(CUdeviceptr p) {
  int (*fn)(CUdeviceptr);
  *(void **)&fn = sim_sym("simcuda_chunk_residency");
  return fn ? fn(p) : -ENOSYS;
}

int kit_sim_print_stats(FILE *out, int dev) {
  simcuda_stats_t st;
  int err = kit_sim_stats(dev, &st);
  if (err) return err;
  fprintf(out, "sim: dev=%d", dev);
#define KIT_PRINT(n) fprintf(out, " " #n "=%llu", (unsigned long long)st.n);
  SIMCUDA_COUNTERS(KIT_PRINT)
#undef KIT_PRINT
  fprintf(out, "\n");
  return 0;
}

void *kit_access(simcuda_kctx_t *k, CUdeviceptr p, size_t bytes, int mode) {
  static void *(*fn)(simcuda_kctx_t *, CUdeviceptr, size_t, int);
  void *(*f)(simcuda_kctx_t *, CUdeviceptr, size_t, int) = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
  if (!f) {
    *(void **)&f = sim_sym("simcuda_access");
    if (!f) return NULL;
    __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
  }
  return f(k, p, bytes, mode);
}

// ---- registration: remembered here, forwarded whenever the simulator is loaded ----

typedef struct kit_kernel {
  const char *name;
  simcuda_kernel_fn fn;
} kit_kernel;

static pthread_mutex_t kmu = PTHREAD_MUTEX_INITIALIZER;
static kit_kernel kernels[256];
static int nkernels;

static int forward(const char *name, simcuda_kernel_fn fn) {
  simcuda_register_kernel_fn_t reg;
  *(void **)&reg = sim_sym("simcuda_register_kernel");
  return reg ? reg(name, fn) : -ENOSYS;
}

static int kit_register_kernel(const char *name, simcuda_kernel_fn fn) {
  pthread_mutex_lock(&kmu);
  if (nkernels < (int)(sizeof kernels / sizeof kernels[0]))
    kernels[nkernels++] = (kit_kernel){name, fn};
  pthread_mutex_unlock(&kmu);
  forward(name, fn);
  return 0;
}

void kit_sim_register_all(void) {
  pthread_mutex_lock(&kmu);
  for (int i = 0; i < nkernels; i++) forward(kernels[i].name, kernels[i].fn);
  pthread_mutex_unlock(&kmu);
}

/* SIMCUDA_KERNEL's hook (simcuda.h): registrations are kept and replayed by
 * kit_module(), so programs that dlopen the driver late get them too. */
simcuda_register_kernel_fn_t simcuda_find_register(void) { return kit_register_kernel; }
