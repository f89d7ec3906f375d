/* Launch observation: per-handle (CUfunction or CUkernel) parameter layouts
 * (a lock-free table filled on first sight), argument values, allocations. */
#include "observe.h"

#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "vx.h"

// ---- per-function layout cache ----

/* Immutable once published, except `kernel` (set once, atomically). */
#define OBS_MAX_PARAMS 256

typedef struct obs_fn {
  CUfunction f;
  uint64_t kernel;
  int np;   /* parameters of 8 bytes or more; -1 = the driver gave no layout */
  int nall; /* parameters of any size (0: the driver said none) */
  uint16_t idx[OBS_MAX_PARAMS];
  uint16_t words[OBS_MAX_PARAMS]; /* 8-byte words in each */
} obs_fn_t;

#define OBS_FN_SLOTS 4096 /* power of two */
#define OBS_FN_PROBE 16

static obs_fn_t *fn_tab[OBS_FN_SLOTS];

static unsigned fn_slot(CUfunction f) {
  uint64_t h = (uint64_t)(uintptr_t)f * 0x9E3779B97F4A7C15ull;
  return (unsigned)(h >> 40) & (OBS_FN_SLOTS - 1);
}

// ---- the two query families ----

/* Since CUDA 12 a launch handle is a CUfunction or a CUkernel (libcudart 13
 * launches every <<<>>> kernel with the CUkernel of cuLibraryGetKernel);
 * cuFunc* is documented for the first, cuKernel* for the second.  Handles
 * vx saw made as CUkernels (kernels.c) are asked with cuKernel* first; any
 * other handle with cuFunc* first; either way the other family is tried
 * when the first gives nothing. */
typedef CUresult (*param_fn)(CUfunction f, size_t i, size_t *off, size_t *size);

static CUresult func_param(CUfunction f, size_t i, size_t *off, size_t *size) {
  return VX_CALL(cuFuncGetParamInfo, f, i, off, size);
}
static CUresult kern_param(CUfunction f, size_t i, size_t *off, size_t *size) {
  return VX_CALL(cuKernelGetParamInfo, (CUkernel)f, i, off, size);
}
static CUresult func_name(CUfunction f, const char **name) {
  return VX_CALL(cuFuncGetName, name, f);
}
static CUresult kern_name(CUfunction f, const char **name) {
  return VX_CALL(cuKernelGetName, name, (CUkernel)f);
}

/* The handle to ask with each family, in the order to ask: the handle
 * itself, and for a CUfunction of a known CUkernel, that kernel last. */
typedef struct query {
  CUfunction h[3];
  int kern[3]; /* 1: ask h[i] with cuKernel* */
  int n;
} query_t;

static void query_plan(CUfunction f, query_t *q) {
  int k = kern_is_kernel(f);
  q->h[0] = q->h[1] = f;
  q->kern[0] = k;
  q->kern[1] = !k;
  q->n = 2;
  CUkernel of = k ? NULL : kern_of_function(f);
  if (of) {
    q->h[2] = (CUfunction)of;
    q->kern[2] = 1;
    q->n = 3;
  }
}

// ---- layouts ----

/* The parameters of h that can hold a pointer, asked with one family.
 * Returns the number of parameters (any size), or -1 when the driver gave
 * no layout (e->np is then -1). */
static int layout_with(CUfunction h, param_fn q, obs_fn_t *e) {
  e->np = 0;
  size_t i = 0;
  for (; i < 4096 && e->np < OBS_MAX_PARAMS; i++) {
    size_t off, size;
    CUresult r = q(h, i, &off, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break; /* past the last parameter */
    if (r != CUDA_SUCCESS) {
      e->np = -1;
      return -1;
    }
    if (size < 8) continue;
    e->idx[e->np] = (uint16_t)i;
    e->words[e->np++] = (uint16_t)(size / 8 < 0xffff ? size / 8 : 0xffff);
  }
  return (int)i;
}

/* f's layout: the first family that gives one with parameters; a layout of
 * no parameters is believed only when no other family gives more (a driver
 * may answer a handle of the other family "past the last parameter"). */
static void fn_layout(CUfunction f, obs_fn_t *e) {
  query_t q;
  query_plan(f, &q);
  e->f = f;
  e->kernel = 0;
  int have = -1;
  obs_fn_t t;
  for (int i = 0; i < q.n && have <= 0; i++) {
    int got = layout_with(q.h[i], q.kern[i] ? kern_param : func_param, have < 0 ? e : &t);
    if (got > 0 && have == 0) { /* a real layout after an empty answer */
      e->np = t.np;
      memcpy(e->idx, t.idx, sizeof t.idx);
      memcpy(e->words, t.words, sizeof t.words);
    }
    if (got > have) have = got;
  }
  if (have < 0) e->np = -1;
  e->nall = have;
}

static obs_fn_t *fn_find(CUfunction f) {
  unsigned s = fn_slot(f);
  for (int i = 0; i < OBS_FN_PROBE; i++) {
    obs_fn_t *e = __atomic_load_n(&fn_tab[(s + i) & (OBS_FN_SLOTS - 1)], __ATOMIC_ACQUIRE);
    if (!e) return NULL;
    if (e->f == f) return e;
  }
  return NULL;
}

/* Publishes a new entry; NULL when the table is full there or out of memory. */
static obs_fn_t *fn_insert(CUfunction f) {
  obs_fn_t *e = malloc(sizeof *e);
  if (!e) return NULL;
  fn_layout(f, e);
  unsigned s = fn_slot(f);
  for (int i = 0; i < OBS_FN_PROBE; i++) {
    obs_fn_t **slot = &fn_tab[(s + i) & (OBS_FN_SLOTS - 1)], *cur = NULL;
    if (__atomic_compare_exchange_n(slot, &cur, e, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return e;
    if (cur->f == f) { /* another thread won */
      free(e);
      return cur;
    }
  }
  free(e);
  return NULL;
}

static obs_fn_t *fn_get(CUfunction f) {
  obs_fn_t *e = fn_find(f);
  return e ? e : fn_insert(f);
}

// ---- values ----

static int scan_extra(void **extra, CUdeviceptr *vals, int cap) {
  const unsigned char *buf = NULL;
  size_t len = 0;
  for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) len = *(size_t *)extra[i + 1];
  }
  int n = 0;
  for (size_t off = 0; buf && off + 8 <= len && n < cap; off += 8)
    memcpy(&vals[n++], buf + off, 8);
  return n;
}

int obs_values(CUfunction f, void **params, void **extra, CUdeviceptr *vals, int cap) {
  if (!params) return extra ? scan_extra(extra, vals, cap) : 0;
  obs_fn_t tmp, *e = fn_get(f);
  if (!e) { /* table full: work it out for this launch only */
    fn_layout(f, &tmp);
    e = &tmp;
  }
  if (e->np < 0) return -1; /* no layout from either family: unseen */
  /* "No parameters" is also what a failing query says (INVALID_VALUE at
   * index 0): with arguments passed, vx cannot prove it sees them. */
  if (e->nall == 0) return -1;
  int n = 0;
  for (int i = 0; i < e->np && n < cap; i++) {
    const unsigned char *p = params[e->idx[i]];
    for (unsigned w = 0; p && w < e->words[i] && n < cap; w++)
      memcpy(&vals[n++], p + 8 * w, 8);
  }
  return n;
}

// ---- kernel ids ----

uint64_t obs_hash_name(const char *name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *name; name++)
    h = (h ^ (unsigned char)*name) * 0x100000001b3ull;
  return h ? h : 1;
}

static uint64_t name_id(CUfunction f) {
  query_t q;
  query_plan(f, &q);
  for (int i = 0; i < q.n; i++) {
    const char *name = NULL;
    if ((q.kern[i] ? kern_name : func_name)(q.h[i], &name) == CUDA_SUCCESS && name)
      return obs_hash_name(name);
  }
  uint64_t h = (uint64_t)(uintptr_t)f * 0x9E3779B97F4A7C15ull;
  return h ? h : 1;
}

uint64_t obs_kernel_id(CUfunction f) {
  obs_fn_t *e = fn_get(f);
  if (!e) return name_id(f);
  uint64_t k = __atomic_load_n(&e->kernel, __ATOMIC_RELAXED);
  if (!k) {
    k = name_id(f);
    __atomic_store_n(&e->kernel, k, __ATOMIC_RELAXED);
  }
  return k;
}

// ---- allocations ----

static void set_add(obs_set_t *s, CUdeviceptr v, const vx_alloc_info_t *a) {
  for (int i = 0; i < s->n; i++)
    if (s->a[i].base == a->base) {
      if (v < s->lo[i]) s->lo[i] = v;
      return;
    }
  if (s->n == OBS_MAX_ALLOCS) {
    s->overflow = 1;
    return;
  }
  s->lo[s->n] = v;
  s->a[s->n++] = *a;
  if (a->tier != VX_TIER_NATIVE) s->nonnative++;
}

#define OBS_BATCH 64

void obs_resolve(const CUdeviceptr *vals, int n, obs_set_t *s) {
  vx_alloc_info_t found[OBS_BATCH];
  int hit[OBS_BATCH];
  for (int at = 0; at < n; at += OBS_BATCH) {
    int k = n - at < OBS_BATCH ? n - at : OBS_BATCH;
    if (!reg_lookup_many(vals + at, k, found, hit)) continue;
    for (int i = 0; i < k; i++)
      if (hit[i]) set_add(s, vals[at + i], &found[i]);
  }
}

// ---- the hot path's filter ----

#define OBS_FILTER_BITS 16
#define OBS_SAT 0xffff

static uint16_t filter[1u << OBS_FILTER_BITS];

static unsigned filter_slot(uint64_t chunk) {
  return (unsigned)((chunk * 0x9E3779B97F4A7C15ull) >> (64 - OBS_FILTER_BITS));
}

static void filter_step(uint16_t *c, int add) {
  uint16_t v = __atomic_load_n(c, __ATOMIC_RELAXED), to;
  do {
    if (v == OBS_SAT || (!add && v == 0)) return;
    to = (uint16_t)(add ? v + 1 : v - 1);
  } while (!__atomic_compare_exchange_n(c, &v, to, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

void obs_mark(CUdeviceptr base, size_t size, int add) {
  if (!size) return;
  uint64_t first = base >> VX_CHUNK_SHIFT, last = (base + size - 1) >> VX_CHUNK_SHIFT;
  for (uint64_t k = first; k <= last; k++)
    filter_step(&filter[filter_slot(k)], add);
}

int obs_maybe_nonnative(const CUdeviceptr *vals, int n) {
  for (int i = 0; i < n; i++)
    if (__atomic_load_n(&filter[filter_slot(vals[i] >> VX_CHUNK_SHIFT)], __ATOMIC_ACQUIRE))
      return 1;
  return 0;
}
