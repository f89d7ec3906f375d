/* failmalloc.c: an LD_PRELOAD shim that makes the Nth malloc/calloc/realloc *called from libvx.so*
 * return NULL. FAILMALLOC_NTH=N (0 = never), FAILMALLOC_EVERY=1 fails every call from the Nth;
 * FAILMALLOC_REPORT=1 prints the count at exit. */
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* glibc's own allocator entry points: no dlsym bootstrap needed. */
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);

static uintptr_t lo, hi;   /* libvx.so's mapped segments */
static atomic_int state;   /* 0 unknown, 1 looking, 2 known */
static atomic_ulong calls; /* allocations libvx made so far */
static unsigned long nth = (unsigned long)-1;
static int every;

static int find_vx(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  if (!info->dlpi_name || !strstr(info->dlpi_name, "libvx.so")) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
    if (!lo || a < lo) lo = a;
    if (b > hi) hi = b;
  }
  return 1;
}

static void learn(void) {
  int expect = 0;
  if (!atomic_compare_exchange_strong(&state, &expect, 1)) return;
  dl_iterate_phdr(find_vx, NULL);
  const char *n = getenv("FAILMALLOC_NTH"), *e = getenv("FAILMALLOC_EVERY");
  if (n && *n) nth = strtoul(n, NULL, 10);
  if (nth == 0) nth = (unsigned long)-1;
  every = e && *e == '1';
  atomic_store(&state, 2);
}

/* 1 when this allocation (made from `caller`) must fail. */
static int should_fail(void *caller) {
  if (atomic_load(&state) != 2) learn();
  if (atomic_load(&state) != 2 || (uintptr_t)caller < lo || (uintptr_t)caller >= hi) return 0;
  unsigned long k = atomic_fetch_add(&calls, 1) + 1;
  return every ? k >= nth : k == nth;
}

void *malloc(size_t n) {
  return should_fail(__builtin_return_address(0)) ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t m) {
  return should_fail(__builtin_return_address(0)) ? NULL : __libc_calloc(n, m);
}

void *realloc(void *p, size_t n) {
  return should_fail(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n);
}

__attribute__((destructor)) static void report(void) {
  const char *r = getenv("FAILMALLOC_REPORT");
  if (r && *r == '1')
    fprintf(stderr, "failmalloc: libvx made %lu allocations\n", atomic_load(&calls));
}
