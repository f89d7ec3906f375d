/* sim_library.c: context-less libraries (cuLibrary*) and their CUkernels,
 * handles distinct from every CUfunction; each context gets its own module.
 *
 * Stricter than a real driver where cuda.h is silent: a CUkernel is never a
 * CUfunction (cuFunc* on one fails with CUDA_ERROR_INVALID_HANDLE), and
 * cuKernel* on a CUfunction fails the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define LIB_MAGIC 0x4c494252u
#define KERN_MAGIC 0x4b45524eu

struct sim_kernel {
  uint32_t magic;
  struct sim_library *lib;
  size_t idx; /* entry index in lib->tmpl */
};

typedef struct lib_mod {
  sim_ctx *ctx;
  unsigned long long ctx_id; /* a context at a reused address is another one */
  struct sim_module *m;
} lib_mod;

typedef struct sim_library {
  uint32_t magic;
  char *image;
  struct sim_module *tmpl; /* names and layouts, no handles */
  sim_kernel *kerns;
  size_t nk;
  pthread_mutex_t mu; /* guards mods */
  lib_mod *mods;
  size_t nmods;
  struct sim_library *next_all;
} sim_library;

/* Libraries are never freed (queued launches may still run their
 * functions); the list keeps unloaded ones reachable. */
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_library *all_libs;

static sim_library *lib_get(CUlibrary h) {
  return h && sim_handle_ok(SIM_H_LIBRARY, h) ? (sim_library *)h : NULL;
}

sim_kernel *sim_kernel_of(const void *h) {
  return h && sim_handle_ok(SIM_H_KERNEL, h) ? (sim_kernel *)h : NULL;
}

static const sim_func *kern_entry(const sim_kernel *k) {
  return sim_module_entry(k->lib->tmpl, k->idx);
}

// ---- per-context modules ----

/* The library's module in context c, made on first use (lazy loading). */
static CUresult lib_module(sim_library *l, sim_ctx *c, struct sim_module **out) {
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&l->mu);
  size_t i = 0;
  while (i < l->nmods && (l->mods[i].ctx != c || l->mods[i].ctx_id != c->id))
    i++;
  if (i == l->nmods) {
    lib_mod *nm = realloc(l->mods, (l->nmods + 1) * sizeof *nm);
    struct sim_module *m = NULL;
    if (!nm)
      r = CUDA_ERROR_OUT_OF_MEMORY;
    else {
      l->mods = nm;
      r = sim_module_new(c, l->image, &m);
    }
    if (r == CUDA_SUCCESS) l->mods[l->nmods++] = (lib_mod){.ctx = c, .ctx_id = c->id, .m = m};
  }
  if (r == CUDA_SUCCESS) *out = l->mods[i].m;
  pthread_mutex_unlock(&l->mu);
  return r;
}

CUresult sim_kernel_func(sim_kernel *k, sim_ctx *c, sim_func **out) {
  struct sim_module *m;
  CUresult r = lib_module(k->lib, c, &m);
  return r == CUDA_SUCCESS ? sim_module_function(m, kern_entry(k)->name, out) : r;
}

// ---- loading ----

static CUresult check_options(unsigned nj, CUjit_option *jo, void **jv, unsigned nl,
                              CUlibraryOption *lo, void **lv, int from_file) {
  if (nj && (!jo || !jv)) return CUDA_ERROR_INVALID_VALUE;
  if (nl && (!lo || !lv)) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < nl; i++) {
    if ((int)lo[i] < 0 || lo[i] >= CU_LIBRARY_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
    /* cuda.h: "Specifying this option with cuLibraryLoadFromFile() is invalid" */
    if (from_file && lo[i] == CU_LIBRARY_BINARY_IS_PRESERVED) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

static CUresult lib_load(CUlibrary *out, const char *image) {
  sim_library *l = calloc(1, sizeof *l);
  if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = sim_module_new(NULL, image, &l->tmpl);
  if (r != CUDA_SUCCESS) {
    free(l);
    return r;
  }
  l->magic = LIB_MAGIC;
  l->image = strdup(image); /* the simulator always keeps its own copy */
  l->nk = sim_module_count(l->tmpl);
  l->kerns = calloc(l->nk ? l->nk : 1, sizeof *l->kerns);
  if (!l->image || !l->kerns) {
    free(l->image);
    free(l->kerns);
    free(l);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_init(&l->mu, NULL);
  for (size_t i = 0; i < l->nk; i++) {
    l->kerns[i] = (sim_kernel){.magic = KERN_MAGIC, .lib = l, .idx = i};
    sim_handle_add(SIM_H_KERNEL, &l->kerns[i]);
  }
  pthread_mutex_lock(&all_mu);
  l->next_all = all_libs;
  all_libs = l;
  pthread_mutex_unlock(&all_mu);
  sim_handle_add(SIM_H_LIBRARY, l);
  *out = (CUlibrary)l;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jo,
                                   void **jv, unsigned int nj, CUlibraryOption *lo, void **lv,
                                   unsigned int nl) {
  SIM_ENTER_INIT(cuLibraryLoadData);
  if (!library || !code) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = check_options(nj, jo, jv, nl, lo, lv, 0);
  return r == CUDA_SUCCESS ? lib_load(library, code) : r;
}

SIM_API CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jo,
                                       void **jv, unsigned int nj, CUlibraryOption *lo, void **lv,
                                       unsigned int nl) {
  SIM_ENTER_INIT(cuLibraryLoadFromFile);
  if (!library || !fileName) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = check_options(nj, jo, jv, nl, lo, lv, 1);
  if (r != CUDA_SUCCESS) return r;
  FILE *f = fopen(fileName, "rb");
  if (!f) return CUDA_ERROR_FILE_NOT_FOUND;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      char *nb = realloc(buf, cap = cap ? cap * 2 : 65536);
      if (!nb) {
        free(buf);
        fclose(f);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (!got) break;
  }
  fclose(f);
  buf[n] = '\0';
  r = n ? lib_load(library, buf) : CUDA_ERROR_INVALID_IMAGE;
  free(buf);
  return r;
}

SIM_API CUresult cuLibraryUnload(CUlibrary library) {
  SIM_ENTER_INIT(cuLibraryUnload);
  sim_library *l = lib_get(library);
  if (!l) return CUDA_ERROR_INVALID_VALUE;
  sim_handle_del(SIM_H_LIBRARY, l); /* never freed: see all_libs */
  for (size_t i = 0; i < l->nk; i++)
    sim_handle_del(SIM_H_KERNEL, &l->kerns[i]);
  pthread_mutex_lock(&l->mu);
  for (size_t i = 0; i < l->nmods; i++)
    sim_module_unload(l->mods[i].m);
  pthread_mutex_unlock(&l->mu);
  return CUDA_SUCCESS;
}

// ---- kernels of a library ----

SIM_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name) {
  SIM_ENTER_INIT(cuLibraryGetKernel);
  if (!pKernel || !name) return CUDA_ERROR_INVALID_VALUE;
  sim_library *l = lib_get(library);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; i < l->nk; i++)
    if (strcmp(kern_entry(&l->kerns[i])->name, name) == 0) {
      *pKernel = (CUkernel)&l->kerns[i];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

SIM_API CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib) {
  SIM_ENTER_INIT(cuLibraryGetKernelCount);
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  sim_library *l = lib_get(lib);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  *count = (unsigned)l->nk;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
                                           CUlibrary lib) {
  SIM_ENTER_INIT(cuLibraryEnumerateKernels);
  if (!kernels || !numKernels) return CUDA_ERROR_INVALID_VALUE;
  sim_library *l = lib_get(lib);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  for (unsigned i = 0; i < numKernels && i < l->nk; i++)
    kernels[i] = (CUkernel)&l->kerns[i];
  return CUDA_SUCCESS;
}

SIM_API CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library) {
  SIM_ENTER_INIT(cuLibraryGetModule);
  if (!pMod) return CUDA_ERROR_INVALID_VALUE;
  sim_library *l = lib_get(library);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  struct sim_module *m;
  if (r == CUDA_SUCCESS) r = lib_module(l, c, &m);
  if (r == CUDA_SUCCESS) *pMod = (CUmodule)m;
  return r;
}

// ---- kernel queries ----

SIM_API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel) {
  SIM_ENTER_INIT(cuKernelGetFunction);
  if (!pFunc) return CUDA_ERROR_INVALID_VALUE;
  sim_kernel *k = sim_kernel_of(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  sim_ctx *c;
  sim_func *f;
  CUresult r = sim_ctx_current(&c);
  if (r == CUDA_SUCCESS) r = sim_kernel_func(k, c, &f);
  if (r == CUDA_SUCCESS) *pFunc = (CUfunction)f;
  return r;
}

SIM_API CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel) {
  SIM_ENTER_INIT(cuKernelGetLibrary);
  if (!pLib) return CUDA_ERROR_INVALID_VALUE;
  sim_kernel *k = sim_kernel_of(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  *pLib = (CUlibrary)k->lib;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuKernelGetName(const char **name, CUkernel hfunc) {
  SIM_ENTER_INIT(cuKernelGetName);
  if (!name || !hfunc) return CUDA_ERROR_INVALID_VALUE;
  sim_kernel *k = sim_kernel_of(hfunc);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  *name = kern_entry(k)->name;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                      size_t *paramSize) {
  SIM_ENTER_INIT(cuKernelGetParamInfo);
  sim_kernel *k = sim_kernel_of(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  const sim_func *f = kern_entry(k);
  if (paramIndex >= f->nparams || !paramOffset) return CUDA_ERROR_INVALID_VALUE;
  *paramOffset = f->off[paramIndex];
  if (paramSize) *paramSize = f->sz[paramIndex];
  return CUDA_SUCCESS;
}

SIM_API CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                      CUdevice dev) {
  SIM_ENTER_INIT(cuKernelGetAttribute);
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  sim_kernel *k = sim_kernel_of(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pi = sim_func_attribute(attrib);
  return CUDA_SUCCESS;
}
