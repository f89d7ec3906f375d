/* Allocation sites (VX_SITES=1): libunwind stacks hashed into a fixed
 * open-addressing table (no lock, no malloc), symbolised at report time from
 * the modules' symbol tables (symtab.c), dladdr where those say nothing. */
#include "sites.h"

#include <dlfcn.h>
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "options.h"
#include "symtab.h"
#include "locks.h"

#define SITES_PROBE 64      /* bounded probing: a full table never stalls a hook */
#define PTRS_MAX (1u << 16) /* allocations whose site is remembered for the free */
#define PTR_EMPTY 0
#define PTR_TOMB 1

typedef struct site {
  uint64_t key; /* atomic: stack hash, 0 = empty slot */
  int ready;    /* atomic: frames written (release) */
  int nframes;
  void *frames[SITES_FRAMES];
  uint64_t count, bytes, live, spilled; /* atomic */
} site_t;

static site_t site_tab[SITES_MAX];
static uint64_t site_dropped; /* atomic */

/* base address -> site index + 1, for the free path */
static struct {
  uint64_t base; /* atomic: PTR_EMPTY, PTR_TOMB or the allocation's base */
  uint32_t site; /* atomic */
} ptr_tab[PTRS_MAX];

// ---- capture ----

static int in_vx(void *addr) {
  static void *self_base; /* atomic: racing threads store the same value */
  Dl_info di;
  void *self = __atomic_load_n(&self_base, __ATOMIC_RELAXED);
  if (!self) {
    if (!dladdr((void *)in_vx, &di)) return 0;
    self = di.dli_fbase;
    __atomic_store_n(&self_base, self, __ATOMIC_RELAXED);
  }
  return dladdr(addr, &di) && di.dli_fbase == self;
}

/* The caller's stack without vx's frames; returns the frame count. */
static int capture(void **out) {
  void *raw[SITES_FRAMES + 16];
  int n = unw_backtrace(raw, (int)(sizeof raw / sizeof *raw)), skip = 0;
  while (skip < n && in_vx(raw[skip]))
    skip++;
  int k = n - skip < SITES_FRAMES ? n - skip : SITES_FRAMES;
  memcpy(out, raw + skip, (size_t)(k > 0 ? k : 0) * sizeof *out);
  return k > 0 ? k : 0;
}

static uint64_t hash_frames(void *const *f, int n) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the addresses */
  for (int i = 0; i < n; i++) {
    h ^= (uint64_t)(uintptr_t)f[i];
    h *= 0x100000001b3ull;
  }
  h ^= h >> 29;
  return h ? h : 1; /* 0 marks an empty slot */
}

/* The slot of stack f (claimed if new), or -1 when the table is full. */
static int site_slot(void *const *f, int n) {
  uint64_t key = hash_frames(f, n);
  for (unsigned i = 0; i < SITES_PROBE; i++) {
    unsigned j = (unsigned)(key + i) % SITES_MAX;
    uint64_t cur = __atomic_load_n(&site_tab[j].key, __ATOMIC_ACQUIRE);
    if (cur == 0 && __atomic_compare_exchange_n(&site_tab[j].key, &cur, key, 0, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE)) {
      site_tab[j].nframes = n;
      memcpy(site_tab[j].frames, f, (size_t)n * sizeof *f);
      __atomic_store_n(&site_tab[j].ready, 1, __ATOMIC_RELEASE);
      return (int)j;
    }
    if (cur == key) return (int)j;
  }
  return -1;
}

// ---- allocation -> site ----

static unsigned ptr_hash(uint64_t base) {
  return (unsigned)((base >> 12) * 0x9e3779b97f4a7c15ull >> 48) % PTRS_MAX;
}

static void ptr_remember(uint64_t base, int site) {
  unsigned h = ptr_hash(base);
  for (unsigned i = 0; i < SITES_PROBE; i++) {
    unsigned j = (h + i) % PTRS_MAX;
    uint64_t cur = __atomic_load_n(&ptr_tab[j].base, __ATOMIC_ACQUIRE);
    /* The site is stored after the claim: the free of base comes after the
     * allocation returned, so after this store. */
    while (cur == PTR_EMPTY || cur == PTR_TOMB) {
      if (__atomic_compare_exchange_n(&ptr_tab[j].base, &cur, base, 0, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&ptr_tab[j].site, (uint32_t)site + 1, __ATOMIC_RELEASE);
        return;
      }
    }
  }
}

/* Site index + 1 of base (forgotten), or 0. */
static int ptr_take(uint64_t base) {
  unsigned h = ptr_hash(base);
  for (unsigned i = 0; i < SITES_PROBE; i++) {
    unsigned j = (h + i) % PTRS_MAX;
    uint64_t cur = __atomic_load_n(&ptr_tab[j].base, __ATOMIC_ACQUIRE);
    if (cur == PTR_EMPTY) return 0;
    if (cur != base) continue;
    int s = (int)__atomic_load_n(&ptr_tab[j].site, __ATOMIC_ACQUIRE);
    if (__atomic_compare_exchange_n(&ptr_tab[j].base, &cur, PTR_TOMB, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      return s;
    return 0;
  }
  return 0;
}

// ---- public ----

void sites_record(const vx_alloc_info_t *a) {
  if (!vx_opt.SITES || a->tier > VX_TIER_HOST) return;
  void *f[SITES_FRAMES];
  int n = capture(f);
  int j = site_slot(f, n);
  if (j < 0) {
    __atomic_fetch_add(&site_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  site_t *s = &site_tab[j];
  __atomic_fetch_add(&s->count, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->bytes, a->size, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->live, a->size, __ATOMIC_RELAXED);
  if (a->tier != VX_TIER_NATIVE) __atomic_fetch_add(&s->spilled, a->size, __ATOMIC_RELAXED);
  ptr_remember(a->base, j);
}

void sites_forget(const vx_alloc_info_t *a) {
  if (!vx_opt.SITES || a->tier > VX_TIER_HOST) return;
  int s = ptr_take(a->base);
  if (s) __atomic_fetch_sub(&site_tab[s - 1].live, a->size, __ATOMIC_RELAXED);
}

size_t sites_copy(site_stat_t *out, size_t max, uint64_t *dropped) {
  size_t n = 0;
  for (int j = 0; j < SITES_MAX && n < max; j++) {
    const site_t *s = &site_tab[j];
    if (!__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE)) continue;
    site_stat_t *o = &out[n++];
    o->count = __atomic_load_n(&s->count, __ATOMIC_RELAXED);
    o->bytes = __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
    o->live = __atomic_load_n(&s->live, __ATOMIC_RELAXED);
    o->spilled = __atomic_load_n(&s->spilled, __ATOMIC_RELAXED);
    o->nframes = s->nframes;
    memcpy(o->frames, s->frames, sizeof o->frames);
  }
  *dropped = __atomic_load_n(&site_dropped, __ATOMIC_RELAXED);
  return n;
}

/* The file of module lm (the main program: /proc/self/exe, as dladdr
 * names it by argv[0], which need not be a path). */
static const char *module_file(const struct link_map *lm, const Dl_info *di) {
  return lm && lm->l_name && lm->l_name[0] ? lm->l_name : lm ? "/proc/self/exe" : di->dli_fname;
}

/* The frame's text, computed: symbol tables, else dladdr. */
static void symbolize(void *addr, char *buf, size_t len) {
  Dl_info di;
  struct link_map *lm = NULL;
  /* addr is a return address: look up the call instruction before it */
  if (!dladdr1((char *)addr - 1, &di, (void **)&lm, RTLD_DL_LINKMAP) || !di.dli_fname) {
    snprintf(buf, len, "%p", addr);
    return;
  }
  const char *mod = strrchr(di.dli_fname, '/');
  mod = mod ? mod + 1 : di.dli_fname;
  if (!mod[0]) mod = "?";
  /* The module's own symbol table names its static functions too; the load
   * bias is the link map's (0 for a non-PIE executable). */
  char fn[192];
  uint64_t off;
  uintptr_t bias = lm ? (uintptr_t)lm->l_addr : (uintptr_t)di.dli_fbase;
  if (!symtab_lookup(module_file(lm, &di), bias, (uintptr_t)addr - 1, fn, sizeof fn, &off))
    snprintf(buf, len, "%s(%s+0x%llx)", mod, fn, (unsigned long long)off + 1);
  else if (di.dli_sname && di.dli_saddr)
    snprintf(buf, len, "%s(%s+0x%lx)", mod, di.dli_sname,
             (unsigned long)((char *)addr - (char *)di.dli_saddr));
  else
    snprintf(buf, len, "%s+0x%lx", mod, (unsigned long)((char *)addr - (char *)di.dli_fbase));
}

/* Frames already named: every report rewrite names the same frames again,
 * and a scan of a large .dynsym is not free.  Direct-mapped, fixed size;
 * never waited for (a busy memo is skipped). */
#define SYM_MEMO 512
#define SYM_TEXT 256
static struct {
  void *addr;
  char text[SYM_TEXT];
} sym_memo[SYM_MEMO];
static pthread_mutex_t sym_memo_lock = PTHREAD_MUTEX_INITIALIZER;

void sites_symbol(void *addr, char *buf, size_t len) {
  char text[SYM_TEXT];
  unsigned h = (unsigned)(((uintptr_t)addr * 0x9e3779b97f4a7c15ull) >> 40) % SYM_MEMO;
  int hit = 0;
  if (!vx_mutex_trylock(&sym_memo_lock, VX_RANK_SITES_MEMO)) {
    if ((hit = addr && sym_memo[h].addr == addr)) memcpy(text, sym_memo[h].text, sizeof text);
    vx_mutex_unlock(&sym_memo_lock, VX_RANK_SITES_MEMO);
  }
  if (!hit) {
    symbolize(addr, text, sizeof text);
    if (!vx_mutex_trylock(&sym_memo_lock, VX_RANK_SITES_MEMO)) {
      sym_memo[h].addr = addr;
      memcpy(sym_memo[h].text, text, sizeof text);
      vx_mutex_unlock(&sym_memo_lock, VX_RANK_SITES_MEMO);
    }
  }
  snprintf(buf, len, "%s", text);
}
