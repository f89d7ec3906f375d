/* sim_handle.c: registry of live handles (contexts, streams, events, ...), so
 * that a destroyed or made-up handle is refused without being dereferenced. */
#include <stdlib.h>

#include "sim_internal.h"

typedef struct hslot {
  uintptr_t p; /* 0 empty, 1 tombstone */
  int kind;
} hslot;

static pthread_mutex_t hmu = PTHREAD_MUTEX_INITIALIZER;
static hslot *tab;
static size_t cap, used;

static size_t hash(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull); }

/* Rehashes, dropping tombstones; doubles only when live handles need it. */
static void grow(void) {
  size_t live = 0;
  for (size_t i = 0; i < cap; i++) live += tab[i].p > 1;
  size_t ncap = cap == 0 ? 1024 : live * 4 < cap ? cap : cap * 2;
  hslot *nt = calloc(ncap, sizeof *nt);
  if (!nt) return;
  for (size_t i = 0; i < cap; i++) {
    if (tab[i].p <= 1) continue;
    size_t j = hash(tab[i].p) & (ncap - 1);
    while (nt[j].p) j = (j + 1) & (ncap - 1);
    nt[j] = tab[i];
  }
  free(tab);
  tab = nt;
  cap = ncap;
  used = live;
}

void sim_handle_add(int kind, const void *p) {
  pthread_mutex_lock(&hmu);
  if ((used + 1) * 2 > cap) grow();
  if (cap) {
    size_t j = hash((uintptr_t)p) & (cap - 1);
    while (tab[j].p > 1) j = (j + 1) & (cap - 1);
    tab[j].p = (uintptr_t)p;
    tab[j].kind = kind;
    used++;
  }
  pthread_mutex_unlock(&hmu);
}

static hslot *find_locked(const void *p) {
  if (!cap || (uintptr_t)p <= 1) return NULL;
  size_t j = hash((uintptr_t)p) & (cap - 1);
  for (size_t n = 0; n < cap && tab[j].p; n++, j = (j + 1) & (cap - 1))
    if (tab[j].p == (uintptr_t)p) return &tab[j];
  return NULL;
}

void sim_handle_del(int kind, const void *p) {
  pthread_mutex_lock(&hmu);
  hslot *s = find_locked(p);
  if (s && s->kind == kind) s->p = 1; /* tombstone: counted in used until grow */
  pthread_mutex_unlock(&hmu);
}

int sim_handle_ok(int kind, const void *p) {
  pthread_mutex_lock(&hmu);
  hslot *s = find_locked(p);
  int ok = s && s->kind == kind;
  pthread_mutex_unlock(&hmu);
  return ok;
}
