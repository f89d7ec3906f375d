/* Pointers stored in device memory, learned from host-to-device copies into
 * small allocations: each such allocation that received a pointer into a
 * tracked allocation keeps a host shadow of what the copies wrote, and the
 * words of it that are tracked pointers.  A launch reaching the allocation
 * reaches those too (ptrref_expand), so the spill tier restores them.
 *
 * Scanned: the 1D host-to-device forms (cuMemcpyHtoD(Async), every
 * variant) when enqueued, and a graph's 1D host-to-device memcpy nodes at
 * each launch of the graph (interpose/graph.c: the source as it is then).
 * What stays unseen: pointers a kernel writes on the device, copies into
 * the array from other device memory (DtoD), from cuMemcpy/cuMemcpyAsync with a host
 * source, from 2D/3D and batch copies (their source may be device memory
 * the CPU cannot read), a pointer split across two copies before the first
 * pointer was seen (the shadow starts at the first copy holding one), and
 * arrays bigger than PTRREF_MAX_ALLOC.  Such a program's kernels may read
 * discarded memory under the NVMe tier (see tiers/README.md). */
#include "ptrref.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "log.h"
#include "vxhash.h"
#include "locks.h"

typedef struct pref {
  CUdeviceptr base;
  size_t size;
  uint64_t id;           /* the allocation's id: a reused address is another one */
  unsigned char *shadow; /* size bytes: what host-to-device copies wrote */
  CUdeviceptr *ptrs;     /* the words of shadow that pointed into tracked memory */
  int nptrs;
  UT_hash_handle hh;
} pref_t;

static pthread_mutex_t pr_lock = PTHREAD_MUTEX_INITIALIZER;
static pref_t *pr_tab;
static int pr_count; /* atomic: entries in pr_tab (relaxed loads on the launch path) */

static void drop_locked(pref_t *e) {
  HASH_DEL(pr_tab, e);
  __atomic_store_n(&pr_count, pr_count - 1, __ATOMIC_RELAXED);
  obs_mark(e->base, e->size, 0);
  free(e->shadow);
  free(e->ptrs);
  free(e);
}

/* The words of w[0..n) that lie in tracked allocations, into out (room for
 * n).  Returns how many. */
static int tracked(const CUdeviceptr *w, int n, CUdeviceptr *out) {
  vx_alloc_info_t found[64];
  int hit[64], k = 0;
  for (int at = 0; at < n; at += 64) {
    int m = n - at < 64 ? n - at : 64, any = 0;
    for (int i = 0; i < m; i++)
      any |= w[at + i] != 0;
    if (!any || !reg_lookup_many(w + at, m, found, hit)) continue;
    for (int i = 0; i < m; i++)
      if (hit[i]) out[k++] = w[at + i];
  }
  return k;
}

static void say_no_memory(void) {
  VX_LOG_ONCE(VX_LOG_WARN, "no memory to remember the pointers a copy stored in device "
                           "memory: the buffers they name may not be restored");
}

/* Entries of arrays freed since (no free hook reaches this module: an
 * address reused by another allocation has another id) are dropped when
 * the table has doubled since the last sweep, so it stays in proportion to
 * the live arrays.  The registry's read lock is taken under pr_lock (the
 * order of this module). */
static int sweep_at = 1024;

static void sweep_locked(void) {
  pref_t *e, *tmp;
  HASH_ITER(hh, pr_tab, e, tmp) {
    vx_alloc_info_t a;
    if (reg_lookup(e->base, &a) || a.id != e->id || a.base != e->base) drop_locked(e);
  }
  sweep_at = 2 * pr_count > 1024 ? 2 * pr_count : 1024;
}

/* A new entry for a holding [off, off+n) of src, in the table; NULL
 * without memory (said once). */
static pref_t *add_locked(const vx_alloc_info_t *a, size_t off, const void *src, size_t n) {
  if (pr_count >= sweep_at) sweep_locked();
  pref_t *e = calloc(1, sizeof *e);
  unsigned char *sh = e ? calloc(1, a->size) : NULL;
  if (sh) {
    memcpy(sh + off, src, n);
    *e = (pref_t){.base = a->base, .size = a->size, .id = a->id, .shadow = sh};
    vxhash_oomed = 0;
    HASH_ADD(hh, pr_tab, base, sizeof e->base, e);
    if (vxhash_oomed) free(sh), sh = NULL;
  }
  if (!sh) {
    free(e);
    say_no_memory();
    return NULL;
  }
  __atomic_store_n(&pr_count, pr_count + 1, __ATOMIC_RELAXED);
  obs_mark(a->base, a->size, 1); /* launches reaching it leave the hot path */
  return e;
}

/* Under pr_lock throughout (the registry's read lock is taken inside it,
 * never the other way round), so that racing copies into one array each
 * see the other's bytes. */
void ptrref_note(CUdeviceptr dst, const void *src, size_t n) {
  vx_alloc_info_t a;
  if (!n || !src || reg_lookup(dst, &a) || a.size > PTRREF_MAX_ALLOC) return;
  size_t off = dst - a.base;
  if (n > a.size - off) n = a.size - off;
  int nw = (int)(a.size / 8);
  CUdeviceptr *w = calloc(nw ? (size_t)nw : 1, 2 * sizeof *w);
  if (!w) {
    say_no_memory();
    return;
  }
  CUdeviceptr *ptrs = w + nw;
  vx_mutex_lock(&pr_lock, VX_RANK_PTRREF);
  pref_t *e;
  HASH_FIND(hh, pr_tab, &a.base, sizeof a.base, e);
  if (e && (e->id != a.id || e->size != a.size)) { /* freed behind vx's back, reused */
    drop_locked(e);
    e = NULL;
  }
  /* The allocation's words after this copy: the shadow's where one is
   * kept, else this copy's whole words (nothing else is known yet). */
  if (e) {
    memcpy(e->shadow + off, src, n);
    memcpy(w, e->shadow, (size_t)nw * 8);
  } else {
    for (size_t i = (off + 7) / 8; i < (off + n) / 8; i++)
      memcpy(&w[i], (const unsigned char *)src + (8 * i - off), 8);
  }
  int k = tracked(w, nw, ptrs);
  if (!e && k) e = add_locked(&a, off, src, n); /* the first pointer stored here */
  if (e) {
    CUdeviceptr *p = k ? malloc((size_t)k * sizeof *p) : NULL;
    if (p || !k) {
      if (k) memcpy(p, ptrs, (size_t)k * sizeof *p);
      free(e->ptrs);
      e->ptrs = p;
      e->nptrs = k;
    } else {
      say_no_memory(); /* the old list stays */
    }
  }
  vx_mutex_unlock(&pr_lock, VX_RANK_PTRREF);
  free(w);
}

/* The references of allocation a, copied out (NULL and 0 when none);
 * *oom set when they could not be copied. */
static CUdeviceptr *refs_of(const vx_alloc_info_t *a, int *n, int *oom) {
  CUdeviceptr *out = NULL;
  *n = 0;
  vx_mutex_lock(&pr_lock, VX_RANK_PTRREF);
  pref_t *e;
  HASH_FIND(hh, pr_tab, &a->base, sizeof a->base, e);
  if (e && e->id == a->id && e->nptrs) {
    out = malloc((size_t)e->nptrs * sizeof *out);
    if (out) {
      memcpy(out, e->ptrs, (size_t)e->nptrs * sizeof *out);
      *n = e->nptrs;
    } else {
      *oom = 1;
    }
  }
  vx_mutex_unlock(&pr_lock, VX_RANK_PTRREF);
  return out;
}

void ptrref_expand(obs_set_t *s) {
  if (!__atomic_load_n(&pr_count, __ATOMIC_RELAXED)) return;
  for (int i = 0; i < s->n; i++) { /* s->n grows: what the references reach is walked too */
    if (s->a[i].size > PTRREF_MAX_ALLOC) continue;
    int n;
    CUdeviceptr *r = refs_of(&s->a[i], &n, &s->oom);
    if (r) obs_resolve(r, n, s);
    free(r);
  }
}

void ptrref_atfork_prepare(void) {
  vx_mutex_lock(&pr_lock, VX_RANK_PTRREF);
}
void ptrref_atfork_parent(void) {
  vx_mutex_unlock(&pr_lock, VX_RANK_PTRREF);
}
void ptrref_atfork_child(void) {
  pthread_mutex_init(&pr_lock, NULL);
}
