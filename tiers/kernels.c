/* The CUkernel hint table: an insert-only open-addressing table of handles,
 * each slot's key claimed by one CAS and its value published after. */
#include "kernels.h"

#include <stdint.h>

#define KERN_SLOTS 16384 /* power of two */
#define KERN_PROBE 32
#define KERN_TAG ((uintptr_t)1) /* value of a CUkernel's slot; else its kernel */

static uintptr_t keys[KERN_SLOTS];
static uintptr_t vals[KERN_SLOTS]; /* 0 while the slot's insert is under way */

static unsigned slot_of(uintptr_t h) {
  uint64_t x = (uint64_t)h * 0x9E3779B97F4A7C15ull;
  return (unsigned)(x >> 40) & (KERN_SLOTS - 1);
}

/* The slot of h: found, or claimed (create); -1 when absent or full. */
static int slot_find(uintptr_t h, int create) {
  unsigned s = slot_of(h);
  for (int i = 0; i < KERN_PROBE; i++) {
    unsigned at = (s + (unsigned)i) & (KERN_SLOTS - 1);
    uintptr_t cur = __atomic_load_n(&keys[at], __ATOMIC_ACQUIRE);
    if (cur == h) return (int)at;
    if (cur) continue;
    if (!create) return -1;
    if (__atomic_compare_exchange_n(&keys[at], &cur, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
        cur == h)
      return (int)at;
  }
  return -1;
}

static void put(uintptr_t h, uintptr_t v) {
  if (!h) return;
  int at = slot_find(h, 1);
  if (at >= 0) __atomic_store_n(&vals[at], v, __ATOMIC_RELEASE);
}

static uintptr_t get(const void *h) {
  int at = h ? slot_find((uintptr_t)h, 0) : -1;
  return at < 0 ? 0 : __atomic_load_n(&vals[at], __ATOMIC_ACQUIRE);
}

void kern_note(CUkernel k) {
  put((uintptr_t)k, KERN_TAG);
}

void kern_note_function(CUfunction f, CUkernel k) {
  kern_note(k);
  if (k && (uintptr_t)f != (uintptr_t)k) put((uintptr_t)f, (uintptr_t)k);
}

int kern_is_kernel(const void *h) {
  return get(h) == KERN_TAG;
}

CUkernel kern_of_function(CUfunction f) {
  uintptr_t v = get(f);
  return v > KERN_TAG ? (CUkernel)v : NULL;
}
