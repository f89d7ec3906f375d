/* Per-device budget: limit resolved once per device, bytes charged with a
 * compare-and-swap so concurrent allocations never overshoot the limit. */
#include "budget.h"

#include <errno.h>
#include <pthread.h>

#include "ctr.h"
#include "hooks.h"
#include "vx.h"

struct budget {
  int ready;
  uint64_t physical, limit, used;
};

static struct budget budgets[VX_MAX_DEVICES];
static pthread_mutex_t budget_init_lock = PTHREAD_MUTEX_INITIALIZER;

static struct budget *budget_of(int dev) {
  return dev >= 0 && dev < VX_MAX_DEVICES ? &budgets[dev] : NULL;
}

/* Limit: VX_DEVICE_LIMIT for this device (bytes or % of physical), else
 * physical minus VX_RESERVE (at least 0). */
static uint64_t budget_resolve(int dev, uint64_t physical, const vx_options_t *o) {
  const vx_size_t *lim = vx_sizes_for(&o->DEVICE_LIMIT, dev);
  if (lim && lim->set) return vx_size_resolve(lim, physical);
  uint64_t reserve = vx_size_resolve(&o->RESERVE, physical);
  return physical > reserve ? physical - reserve : 0;
}

int budget_device_init(int dev, uint64_t physical, const vx_options_t *o) {
  struct budget *b = budget_of(dev);
  if (!b) return -EINVAL;
  if (__atomic_load_n(&b->ready, __ATOMIC_ACQUIRE)) return 0;
  if (!physical) {
    size_t bytes = 0;
    vx_pfn_cuDeviceTotalMem_v2 total = VX_REAL_FN(cuDeviceTotalMem_v2);
    if (!total || total(&bytes, dev) != CUDA_SUCCESS || !bytes) return -EIO;
    physical = bytes;
  }
  ctr_note_device(dev);
  pthread_mutex_lock(&budget_init_lock);
  if (!b->ready) {
    b->physical = physical;
    b->limit = budget_resolve(dev, physical, o);
    __atomic_store_n(&b->ready, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&budget_init_lock);
  vx_stats_limits_changed();
  return 0;
}

int budget_ready(int dev) {
  struct budget *b = budget_of(dev);
  return b && __atomic_load_n(&b->ready, __ATOMIC_ACQUIRE);
}

uint64_t budget_limit(int dev) {
  return budget_ready(dev) ? budgets[dev].limit : 0;
}
uint64_t budget_physical(int dev) {
  return budget_ready(dev) ? budgets[dev].physical : 0;
}
uint64_t budget_used(int dev) {
  struct budget *b = budget_of(dev);
  return b ? __atomic_load_n(&b->used, __ATOMIC_RELAXED) : 0;
}

int budget_try_charge(int dev, uint64_t n) {
  struct budget *b = budget_of(dev);
  if (!b || !budget_ready(dev)) return 0;
  uint64_t cur = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
  do {
    if (n > b->limit || cur > b->limit - n) return 0;
  } while (
      !__atomic_compare_exchange_n(&b->used, &cur, cur + n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return 1;
}

void budget_charge(int dev, uint64_t n) {
  struct budget *b = budget_of(dev);
  if (b) __atomic_fetch_add(&b->used, n, __ATOMIC_RELAXED);
}

void budget_release(int dev, uint64_t n) {
  struct budget *b = budget_of(dev);
  if (!b) return;
  uint64_t cur = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(&b->used, &cur, cur >= n ? cur - n : 0, 1, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED))
    ;
}

void budget_atfork_prepare(void) {
  pthread_mutex_lock(&budget_init_lock);
}
void budget_atfork_parent(void) {
  pthread_mutex_unlock(&budget_init_lock);
}
void budget_atfork_child(void) {
  pthread_mutex_init(&budget_init_lock, NULL);
}
