/* Launch observation: per-handle (CUfunction or CUkernel) parameter layouts
 * (a lock-free table filled on first sight), argument values, allocations. */
#include "observe.h"

#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "driver.h"

// ---- per-function layout cache ----

/* Immutable once published, except `kernel` (set once, atomically).  A
 * parameter list longer than this is not a layout vx believes. */
#define OBS_PARAMS_MAX 32769 /* CUDA 12.1: 32 KiB of parameters, 1 byte each */

typedef struct obs_param {
  uint32_t idx;   /* parameter index */
  uint32_t words; /* 8-byte words in it */
} obs_param_t;

typedef struct obs_fn {
  CUfunction f;
  uint64_t kernel;
  int np;        /* parameters of 8 bytes or more; -1 = the driver gave no layout */
  int nall;      /* parameters of any size (0: the driver said none) */
  size_t pbytes; /* the layout's size: the end of its last parameter */
  obs_param_t p[];
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

/* A layout being built: grows on the heap. */
typedef struct layout {
  int np;
  size_t pbytes;
  obs_param_t *p;
  int cap;
} layout_t;

/* The parameters of h that can hold a pointer, asked with one family, into
 * *l.  Returns the number of parameters (any size), or -1 when the driver
 * gave no layout (or more parameters than CUDA allows, or no memory). */
static int layout_with(CUfunction h, param_fn q, layout_t *l) {
  l->np = 0;
  l->pbytes = 0;
  for (size_t i = 0; i < OBS_PARAMS_MAX; i++) {
    size_t off, size;
    CUresult r = q(h, i, &off, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) return (int)i; /* past the last parameter */
    if (r != CUDA_SUCCESS) return -1;
    if (off + size > l->pbytes) l->pbytes = off + size;
    if (size < 8) continue;
    if (l->np == l->cap) {
      int nc = l->cap ? 2 * l->cap : 64;
      obs_param_t *np = realloc(l->p, (size_t)nc * sizeof *np);
      if (!np) return -1;
      l->p = np, l->cap = nc;
    }
    l->p[l->np++] = (obs_param_t){(uint32_t)i, (uint32_t)(size / 8)};
  }
  return -1;
}

/* f's layout, in a new entry (NULL without memory): the first family that
 * gives one with parameters; a layout of no parameters is believed only
 * when no other family gives more (a driver may answer a handle of the
 * other family "past the last parameter"). */
static obs_fn_t *fn_make(CUfunction f) {
  query_t q;
  query_plan(f, &q);
  layout_t best = {0}, t = {0};
  int have = -1;
  for (int i = 0; i < q.n && have <= 0; i++) {
    int got = layout_with(q.h[i], q.kern[i] ? kern_param : func_param, &t);
    if (got > have) { /* the first answer, or a real layout after an empty one */
      layout_t x = best;
      best = t, t = x;
      have = got;
    }
  }
  int np = have < 0 ? 0 : best.np;
  obs_fn_t *e = malloc(sizeof *e + (size_t)np * sizeof *e->p);
  if (e) {
    e->f = f;
    e->kernel = 0;
    e->np = have < 0 ? -1 : np;
    e->nall = have;
    e->pbytes = best.pbytes;
    if (np) memcpy(e->p, best.p, (size_t)np * sizeof *e->p);
  }
  free(best.p);
  free(t.p);
  return e;
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

/* Publishes e: e, the entry another thread published first, or NULL when
 * the table is full there. */
static obs_fn_t *fn_insert(obs_fn_t *e) {
  CUfunction f = e->f;
  unsigned s = fn_slot(f);
  for (int i = 0; i < OBS_FN_PROBE; i++) {
    obs_fn_t **slot = &fn_tab[(s + i) & (OBS_FN_SLOTS - 1)], *cur = NULL;
    if (__atomic_compare_exchange_n(slot, &cur, e, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return e;
    if (cur->f == f) return cur; /* another thread won: the caller frees e */
  }
  return NULL;
}

/* f's entry; *tmp set when it could not be published (the table is full
 * there): the caller frees it after use.  NULL without memory. */
static obs_fn_t *fn_get(CUfunction f, obs_fn_t **tmp) {
  *tmp = NULL;
  obs_fn_t *e = fn_find(f);
  if (e) return e;
  if (!(e = fn_make(f))) return NULL;
  obs_fn_t *in = fn_insert(e);
  if (!in) { /* no slot: for this call only */
    *tmp = e;
    return e;
  }
  if (in != e) free(e); /* another thread won */
  return in;
}

// ---- values ----

/* The packed buffer of an `extra` launch, bounded by the layout's size
 * (and by the size claimed, when smaller: the driver refuses that launch).
 * -1 when the array is malformed (no END within 64 entries, no buffer). */
static int scan_extra(void **extra, size_t pbytes, CUdeviceptr *vals, int cap) {
  const unsigned char *buf = NULL;
  size_t len = 0;
  int i = 0;
  for (; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) len = *(size_t *)extra[i + 1];
  }
  if (i >= 64) return -1;
  if (!buf) return pbytes ? -1 : 0;
  if (!pbytes) return -1; /* a buffer for a kernel said to take nothing: see obs_values */
  if (len > pbytes) len = pbytes;
  int n = 0;
  for (size_t off = 0; off + 8 <= len; off += 8, n++)
    if (n < cap) memcpy(&vals[n], buf + off, 8);
  return n;
}

int obs_values(CUfunction f, void **params, void **extra, CUdeviceptr *vals, int cap) {
  if (!params && !extra) return 0;
  obs_fn_t *tmp, *e = fn_get(f, &tmp);
  if (!e) return -1; /* no memory for the layout: unseen */
  int n = 0;
  if (e->np < 0) { /* no layout from either family: unseen */
    n = -1;
  } else if (e->nall == 0 && params) {
    /* "No parameters" is also what a failing query says (INVALID_VALUE at
     * index 0): with arguments passed, vx cannot prove it sees them. */
    n = -1;
  } else if (!params) {
    n = scan_extra(extra, e->pbytes, vals, cap);
  } else {
    for (int i = 0; i < e->np; i++) {
      const unsigned char *p = params[e->p[i].idx];
      for (unsigned w = 0; p && w < e->p[i].words; w++, n++)
        if (n < cap) memcpy(&vals[n], p + 8 * w, 8);
    }
  }
  free(tmp);
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
  obs_fn_t *tmp, *e = fn_get(f, &tmp);
  if (!e || tmp) {
    free(tmp);
    return name_id(f);
  }
  uint64_t k = __atomic_load_n(&e->kernel, __ATOMIC_RELAXED);
  if (!k) {
    k = name_id(f);
    __atomic_store_n(&e->kernel, k, __ATOMIC_RELAXED);
  }
  return k;
}

// ---- allocations ----

void obs_set_init(obs_set_t *s) {
  s->n = s->nonnative = s->oom = 0;
  s->cap = OBS_MAX_ALLOCS;
  s->lo = s->lo0;
  s->a = s->a0;
  s->hidx = NULL;
  s->hcap = 0;
}

void obs_set_fini(obs_set_t *s) {
  if (s->lo != s->lo0) free(s->lo);
  if (s->a != s->a0) free(s->a);
  free(s->hidx);
  obs_set_init(s);
}

static unsigned base_slot(CUdeviceptr base, int hcap) {
  return (unsigned)((base * 0x9E3779B97F4A7C15ull) >> 32) & (unsigned)(hcap - 1);
}

static void hidx_put(obs_set_t *s, int i) {
  unsigned h = base_slot(s->a[i].base, s->hcap);
  while (s->hidx[h] >= 0)
    h = (h + 1) & (unsigned)(s->hcap - 1);
  s->hidx[h] = i;
}

/* Room for one more: the arrays doubled on the heap, the index rebuilt at
 * twice their size.  0, or -1 (no memory: s->oom). */
static int set_grow(obs_set_t *s) {
  int nc = 2 * s->cap, hc = 2 * nc;
  CUdeviceptr *lo = malloc((size_t)nc * sizeof *lo);
  vx_alloc_info_t *a = malloc((size_t)nc * sizeof *a);
  int *hi = malloc((size_t)hc * sizeof *hi);
  if (!lo || !a || !hi) {
    free(lo), free(a), free(hi);
    s->oom = 1;
    return -1;
  }
  memcpy(lo, s->lo, (size_t)s->n * sizeof *lo);
  memcpy(a, s->a, (size_t)s->n * sizeof *a);
  if (s->lo != s->lo0) free(s->lo);
  if (s->a != s->a0) free(s->a);
  free(s->hidx);
  s->lo = lo, s->a = a, s->cap = nc;
  s->hidx = hi, s->hcap = hc;
  memset(hi, 0xff, (size_t)hc * sizeof *hi);
  for (int i = 0; i < s->n; i++)
    hidx_put(s, i);
  return 0;
}

/* The index of a->base in s, or -1. */
static int set_find(const obs_set_t *s, CUdeviceptr base) {
  if (s->n && s->a[s->n - 1].base == base) return s->n - 1; /* runs of one buffer */
  if (!s->hidx) {
    for (int i = 0; i < s->n; i++)
      if (s->a[i].base == base) return i;
    return -1;
  }
  for (unsigned h = base_slot(base, s->hcap);; h = (h + 1) & (unsigned)(s->hcap - 1)) {
    int i = s->hidx[h];
    if (i < 0 || s->a[i].base == base) return i;
  }
}

static void set_add(obs_set_t *s, CUdeviceptr v, const vx_alloc_info_t *a) {
  int i = set_find(s, a->base);
  if (i >= 0) {
    if (v < s->lo[i]) s->lo[i] = v;
    return;
  }
  if (s->n == s->cap && set_grow(s)) return;
  s->lo[s->n] = v;
  s->a[s->n] = *a;
  if (s->hidx) hidx_put(s, s->n);
  s->n++;
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
