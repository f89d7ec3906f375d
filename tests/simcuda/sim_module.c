/* sim_module.c: modules are PTX text: each .entry's name and parameter layout
 * is parsed from it; its body is the host function registered by name. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define FUNC_MAGIC 0x46554e43u

typedef struct sim_module {
  sim_func *funcs;
  size_t nfuncs;
  sim_ctx *ctx;
  struct sim_module *next_all;
} sim_module;

// ---- kernel registry ----

typedef struct kreg {
  char name[128];
  simcuda_kernel_fn fn;
} kreg;

static pthread_mutex_t kmu = PTHREAD_MUTEX_INITIALIZER;
static kreg kernels[1024];
static int nkernels;
/* Modules are never freed: queued launches may still name their functions. */
static sim_module *all_modules;

SIM_API int simcuda_register_kernel(const char *name, simcuda_kernel_fn fn) {
  if (!name || !fn || strlen(name) >= sizeof kernels[0].name) return -1;
  pthread_mutex_lock(&kmu);
  int i = 0;
  while (i < nkernels && strcmp(kernels[i].name, name) != 0) i++;
  if (i == nkernels && nkernels < (int)(sizeof kernels / sizeof kernels[0])) nkernels++;
  if (i < nkernels) {
    strcpy(kernels[i].name, name);
    kernels[i].fn = fn;
  }
  pthread_mutex_unlock(&kmu);
  return 0;
}

static simcuda_kernel_fn find_kernel(const char *name) {
  simcuda_kernel_fn fn = NULL;
  pthread_mutex_lock(&kmu);
  for (int i = 0; i < nkernels && !fn; i++)
    if (strcmp(kernels[i].name, name) == 0) fn = kernels[i].fn;
  pthread_mutex_unlock(&kmu);
  return fn;
}

// ---- PTX parsing ----

static const char *skip_ws(const char *p) {
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') p++;
    } else if (p[0] == '/' && p[1] == '*') {
      const char *e = strstr(p + 2, "*/");
      p = e ? e + 2 : p + strlen(p);
    } else {
      return p;
    }
  }
}

/* Copies the next token (identifier, directive, or one punctuation char). */
static const char *token(const char *p, char *out, size_t cap) {
  p = skip_ws(p);
  size_t n = 0;
  if (isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '$' || *p == '%') {
    while ((isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '$' || *p == '%') &&
           n + 1 < cap)
      out[n++] = *p++;
  } else if (*p) {
    out[n++] = *p++;
  }
  out[n] = '\0';
  return p;
}

static size_t type_size(const char *t) {
  size_t bits = (size_t)atoi(t + 2);
  if ((t[1] == 'u' || t[1] == 's' || t[1] == 'b' || t[1] == 'f') && bits >= 8) return bits / 8;
  return 0;
}

/* Parses one ".param ..." up to its name; returns the position after it or
 * NULL on a syntax error. */
static const char *parse_param(const char *p, size_t *align, size_t *size) {
  char tok[128];
  size_t elem = 0, al = 0;
  int ptr = 0;
  for (;;) {
    p = token(p, tok, sizeof tok);
    if (!tok[0]) return NULL;
    if (strcmp(tok, ".ptr") == 0) ptr = 1;
    else if (strcmp(tok, ".align") == 0) {
      p = token(p, tok, sizeof tok);
      if (!ptr) al = (size_t)atoi(tok);
    } else if (tok[0] == '.') {
      size_t s = type_size(tok);
      if (s) elem = s;
    } else {
      break; /* the name */
    }
  }
  if (!elem) return NULL;
  size_t count = 1;
  const char *q = skip_ws(p);
  if (*q == '[') {
    count = (size_t)strtoul(q + 1, NULL, 10);
    q = strchr(q, ']');
    if (!q) return NULL;
    p = q + 1;
  }
  *align = al ? al : elem;
  *size = elem * count;
  return p;
}

static int add_param(sim_func *f, size_t align, size_t size) {
  size_t *o = realloc(f->off, (f->nparams + 1) * sizeof *o);
  if (!o) return -1;
  f->off = o;
  size_t *s = realloc(f->sz, (f->nparams + 1) * sizeof *s);
  if (!s) return -1;
  f->sz = s;
  size_t off = (f->pbytes + align - 1) / align * align;
  f->off[f->nparams] = off;
  f->sz[f->nparams] = size;
  f->nparams++;
  f->pbytes = off + size;
  return 0;
}

/* Parses the entry whose name starts at p; returns the position after it. */
static const char *parse_entry(const char *p, sim_func *f) {
  char tok[128];
  p = token(p, f->name, sizeof f->name);
  p = token(p, tok, sizeof tok);
  if (strcmp(tok, "(") != 0) return p; /* no parameter list */
  for (;;) {
    p = token(p, tok, sizeof tok);
    if (strcmp(tok, ")") == 0 || !tok[0]) return p;
    if (strcmp(tok, ",") == 0) continue;
    if (strcmp(tok, ".param") != 0) return NULL;
    size_t align, size;
    p = parse_param(p, &align, &size);
    if (!p || add_param(f, align, size) != 0) return NULL;
  }
}

static CUresult parse_ptx(const char *img, sim_module *m) {
  const char *p = img;
  while ((p = strstr(p, ".entry")) != NULL) {
    const char *line = p;
    while (line > img && line[-1] != '\n') line--;
    const char *cm = strstr(line, "//");
    p += 6;
    if (!isspace((unsigned char)*p) || (cm && cm < p)) continue; /* commented out */
    sim_func *nf = realloc(m->funcs, (m->nfuncs + 1) * sizeof *nf);
    if (!nf) return CUDA_ERROR_OUT_OF_MEMORY;
    m->funcs = nf;
    sim_func *f = &m->funcs[m->nfuncs];
    memset(f, 0, sizeof *f);
    p = parse_entry(p, f);
    m->nfuncs++;
    if (!p) return CUDA_ERROR_INVALID_PTX;
  }
  return CUDA_SUCCESS;
}

// ---- entry points ----

CUresult sim_module_new(sim_ctx *c, const void *image, struct sim_module **out) {
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  const unsigned char *b = image;
  if (b[0] == 0x7f && b[1] == 'E') return CUDA_ERROR_INVALID_IMAGE; /* ELF cubin */
  if (b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba)
    return CUDA_ERROR_INVALID_IMAGE; /* fatbinary */
  if (!strstr(image, ".version") && !strstr(image, ".entry")) return CUDA_ERROR_INVALID_PTX;
  sim_module *m = calloc(1, sizeof *m);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  m->ctx = c;
  CUresult r = parse_ptx(image, m);
  pthread_mutex_lock(&kmu);
  m->next_all = all_modules;
  all_modules = m;
  pthread_mutex_unlock(&kmu);
  if (r != CUDA_SUCCESS) return r;
  /* Handles are valid from load on; only cuModuleGetFunction hands them out,
   * and only for entries with a body (so a launch always has one).  A
   * library's template (c == NULL) holds layouts only: no handles. */
  for (size_t i = 0; c && i < m->nfuncs; i++) {
    m->funcs[i].magic = FUNC_MAGIC;
    m->funcs[i].mod = m;
    m->funcs[i].ctx = c;
    sim_handle_add(SIM_H_FUNC, &m->funcs[i]);
  }
  if (c) sim_handle_add(SIM_H_MODULE, m);
  *out = m;
  return CUDA_SUCCESS;
}

static CUresult load(CUmodule *pm, const void *image) {
  if (!pm || !image) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  sim_module *m;
  r = sim_module_new(c, image, &m);
  if (r == CUDA_SUCCESS) *pm = (CUmodule)m;
  return r;
}

SIM_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  SIM_ENTER_INIT(cuModuleLoadData);
  return load(module, image);
}

SIM_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                                    CUjit_option *options, void **values) {
  SIM_ENTER_INIT(cuModuleLoadDataEx);
  (void)n;
  (void)options;
  (void)values;
  return load(module, image);
}

SIM_API CUresult cuModuleUnload(CUmodule hmod) {
  SIM_ENTER_INIT(cuModuleUnload);
  sim_module *m = (sim_module *)hmod;
  if (!m || !sim_handle_ok(SIM_H_MODULE, m)) return CUDA_ERROR_INVALID_HANDLE;
  sim_module_unload(m);
  return CUDA_SUCCESS;
}

void sim_module_unload(struct sim_module *m) {
  sim_handle_del(SIM_H_MODULE, m);
  for (size_t i = 0; i < m->nfuncs; i++) sim_handle_del(SIM_H_FUNC, &m->funcs[i]);
}

SIM_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  SIM_ENTER_INIT(cuModuleGetFunction);
  if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
  sim_module *m = (sim_module *)hmod;
  if (!m || !sim_handle_ok(SIM_H_MODULE, m)) return CUDA_ERROR_INVALID_HANDLE;
  sim_func *f;
  CUresult r = sim_module_function(m, name, &f);
  if (r == CUDA_SUCCESS) *hfunc = (CUfunction)f;
  return r;
}

CUresult sim_module_function(struct sim_module *m, const char *name, sim_func **out) {
  for (size_t i = 0; i < m->nfuncs; i++) {
    sim_func *f = &m->funcs[i];
    if (strcmp(f->name, name) != 0) continue;
    simcuda_kernel_fn body = find_kernel(name);
    if (!body) return CUDA_ERROR_NOT_FOUND; /* an entry nobody registered a body for */
    __atomic_store_n(&f->body, body, __ATOMIC_RELEASE);
    *out = f;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_FOUND;
}

size_t sim_module_count(const struct sim_module *m) {
  return m->nfuncs;
}

const sim_func *sim_module_entry(const struct sim_module *m, size_t i) {
  return i < m->nfuncs ? &m->funcs[i] : NULL;
}

static CUresult func_get(CUfunction h, sim_func **out) {
  if (!h || !sim_handle_ok(SIM_H_FUNC, h)) return CUDA_ERROR_INVALID_HANDLE;
  *out = (sim_func *)h;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncGetParamInfo(CUfunction func, size_t idx, size_t *off, size_t *size) {
  SIM_ENTER_INIT(cuFuncGetParamInfo);
  sim_func *f;
  CUresult r = func_get(func, &f);
  if (r != CUDA_SUCCESS) return r;
  if (idx >= f->nparams) return CUDA_ERROR_INVALID_VALUE;
  if (off) *off = f->off[idx];
  if (size) *size = f->sz[idx];
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncGetName(const char **name, CUfunction hfunc) {
  SIM_ENTER_INIT(cuFuncGetName);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  sim_func *f;
  CUresult r = func_get(hfunc, &f);
  if (r == CUDA_SUCCESS) *name = f->name;
  return r;
}

SIM_API CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc) {
  SIM_ENTER_INIT(cuFuncGetAttribute);
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  sim_func *f;
  CUresult r = func_get(hfunc, &f);
  if (r != CUDA_SUCCESS) return r;
  *pi = sim_func_attribute(attrib);
  return CUDA_SUCCESS;
}

int sim_func_attribute(CUfunction_attribute attrib) {
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
  case CU_FUNC_ATTRIBUTE_NUM_REGS: return 32;
  case CU_FUNC_ATTRIBUTE_PTX_VERSION: case CU_FUNC_ATTRIBUTE_BINARY_VERSION: return 90;
  default: return 0;
  }
}

SIM_API CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  SIM_ENTER_INIT(cuFuncSetAttribute);
  (void)attrib;
  (void)value;
  sim_func *f;
  return func_get(hfunc, &f);
}

SIM_API CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  SIM_ENTER_INIT(cuFuncSetCacheConfig);
  (void)config;
  sim_func *f;
  return func_get(hfunc, &f);
}
