/* sim_va.c: the device address space (one reserved PROT_NONE region, first-fit
 * with a quarantine for freed ranges) and the map from address to allocation. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim_internal.h"

#define QUAR_MAX 128
#define QUAR_BYTES ((size_t)4 << 30)

typedef struct vrange {
  uintptr_t p;
  size_t len;
} vrange;

static uintptr_t region;
static size_t region_len;
static vrange *freel; /* sorted by address, coalesced */
static size_t nfree, capfree;
static vrange quar[QUAR_MAX];
static size_t qhead, qlen, qbytes;

static sim_alloc **amap; /* sorted by base */
static size_t nmap, capmap;

int sim_va_init(void) {
  size_t len = (size_t)256 << 30;
  for (; len >= ((size_t)8 << 30); len /= 2) {
    void *p = mmap(NULL, len + SIM_CHUNK, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) continue;
    uintptr_t a = ((uintptr_t)p + SIM_CHUNK - 1) & ~(uintptr_t)(SIM_CHUNK - 1);
    region = a;
    region_len = len;
    capfree = 64;
    freel = malloc(capfree * sizeof *freel);
    if (!freel) return -1;
    freel[0].p = region;
    freel[0].len = region_len;
    nfree = 1;
    return 0;
  }
  return -1;
}

static void free_insert(uintptr_t p, size_t len) {
  size_t i = 0;
  while (i < nfree && freel[i].p < p) i++;
  if (i > 0 && freel[i - 1].p + freel[i - 1].len == p) {
    freel[i - 1].len += len;
    if (i < nfree && p + len == freel[i].p) {
      freel[i - 1].len += freel[i].len;
      memmove(&freel[i], &freel[i + 1], (nfree - i - 1) * sizeof *freel);
      nfree--;
    }
    return;
  }
  if (i < nfree && p + len == freel[i].p) {
    freel[i].p = p;
    freel[i].len += len;
    return;
  }
  if (nfree == capfree) {
    vrange *n = realloc(freel, capfree * 2 * sizeof *freel);
    if (!n) return; /* the range is lost to the allocator, never reused */
    freel = n;
    capfree *= 2;
  }
  memmove(&freel[i + 1], &freel[i], (nfree - i) * sizeof *freel);
  freel[i].p = p;
  freel[i].len = len;
  nfree++;
}

CUdeviceptr sim_va_alloc_locked(size_t len, size_t align) {
  for (size_t i = 0; i < nfree; i++) {
    uintptr_t a = (freel[i].p + align - 1) & ~(uintptr_t)(align - 1);
    size_t pad = a - freel[i].p;
    if (freel[i].len < pad + len) continue;
    vrange r = freel[i];
    memmove(&freel[i], &freel[i + 1], (nfree - i - 1) * sizeof *freel);
    nfree--;
    if (pad) free_insert(r.p, pad);
    if (r.len > pad + len) free_insert(a + len, r.len - pad - len);
    return (CUdeviceptr)a;
  }
  return 0;
}

/* A freed range waits in the quarantine before it can be handed out again,
 * so that a stale pointer meets PROT_NONE / "unknown address". */
void sim_va_free_locked(CUdeviceptr p, size_t len) {
  mmap((void *)(uintptr_t)p, len, PROT_NONE,
       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  while (qlen == QUAR_MAX || (qlen && qbytes + len > QUAR_BYTES)) {
    vrange old = quar[qhead];
    qhead = (qhead + 1) % QUAR_MAX;
    qlen--;
    qbytes -= old.len;
    free_insert(old.p, old.len);
  }
  quar[(qhead + qlen) % QUAR_MAX] = (vrange){(uintptr_t)p, len};
  qlen++;
  qbytes += len;
}

// ---- allocation map ----

static size_t lower_bound(uintptr_t p) { /* first index with base > p */
  size_t lo = 0, hi = nmap;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if ((uintptr_t)amap[mid]->base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int sim_map_insert_locked(sim_alloc *a) {
  if (nmap == capmap) {
    size_t nc = capmap ? capmap * 2 : 256;
    sim_alloc **n = realloc(amap, nc * sizeof *n);
    if (!n) return -1;
    amap = n;
    capmap = nc;
  }
  size_t i = lower_bound((uintptr_t)a->base);
  memmove(&amap[i + 1], &amap[i], (nmap - i) * sizeof *amap);
  amap[i] = a;
  nmap++;
  return 0;
}

void sim_map_remove_locked(sim_alloc *a) {
  size_t i = lower_bound((uintptr_t)a->base);
  if (i == 0 || amap[i - 1] != a) return;
  memmove(&amap[i - 1], &amap[i], (nmap - i) * sizeof *amap);
  nmap--;
}

sim_alloc *sim_map_find_locked(uintptr_t p) {
  size_t i = lower_bound(p);
  if (i == 0) return NULL;
  sim_alloc *a = amap[i - 1];
  size_t len = a->size ? a->size : 1;
  return p < (uintptr_t)a->base + len ? a : NULL;
}

sim_alloc *sim_map_find_base_locked(uintptr_t p) {
  sim_alloc *a = sim_map_find_locked(p);
  return a && (uintptr_t)a->base == p ? a : NULL;
}

void sim_map_release_ctx_locked(sim_ctx *c) {
  for (size_t i = nmap; i-- > 0;) {
    if (i >= nmap) continue;
    sim_alloc *a = amap[i];
    if (a->ctx != c) continue;
    sim_map_remove_locked(a);
    sim_alloc_destroy_locked(a);
  }
}
