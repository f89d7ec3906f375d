/* Per-device budget: limit resolved once per device, bytes charged with a
 * compare-and-swap so concurrent allocations never overshoot the limit, and
 * reserved in the per-GPU ledger shared with other vx processes. */
#include "budget.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ctr.h"
#include "hooks.h"
#include "ledger.h"
#include "vx.h"

struct budget {
  int ready;
  uint64_t physical, limit, used;
  vx_ledger_t *ledger; /* shared with other processes; NULL = private accounting */
  uint64_t owed;       /* atomic: charged bytes the ledger refused (forced charges) */
};

static struct budget budgets[VX_MAX_DEVICES];
static pthread_mutex_t budget_init_lock = PTHREAD_MUTEX_INITIALIZER;

static struct budget *budget_of(int dev) {
  return dev >= 0 && dev < VX_MAX_DEVICES ? &budgets[dev] : NULL;
}

/* Physical minus VX_RESERVE, the reserve being at most a quarter of the
 * device: a fixed default sized for data-centre GPUs must not leave a small
 * one (or a small simulated one) with no native budget at all. */
static uint64_t physical_less_reserve(uint64_t physical, const vx_options_t *o) {
  uint64_t reserve = vx_size_resolve(&o->RESERVE, physical);
  if (reserve > physical / 4) reserve = physical / 4;
  return physical - reserve;
}

uint64_t budget_usable(int dev) {
  struct budget *b = budget_of(dev);
  return b && budget_ready(dev) ? physical_less_reserve(b->physical, &vx_opt) : 0;
}

/* Limit: VX_DEVICE_LIMIT for this device (bytes or % of physical), else
 * physical minus VX_RESERVE. */
static uint64_t budget_resolve(int dev, uint64_t physical, const vx_options_t *o) {
  const vx_size_t *lim = vx_sizes_for(&o->DEVICE_LIMIT, dev);
  if (lim && lim->set) return vx_size_resolve(lim, physical);
  return physical_less_reserve(physical, o);
}

// ---- the ledger shared with other vx processes ----

/* The ledger's name for device dev from VX_LEDGER: 0, 1 for none ("off"),
 * or -1 with err filled when the device's UUID cannot be read. */
static int ledger_key_for(int dev, const char *mode, char *key, size_t n, char *err, size_t en) {
  if (!strcmp(mode, "off")) return 1;
  if (*mode && strcmp(mode, "uuid")) {
    /* A name too long for the ledger is cut here and refused there. */
    snprintf(key, n, "%.*s-%d", (int)(n - 16), mode, dev);
    return 0;
  }
  CUuuid u;
  vx_pfn_cuDeviceGetUuid_v2 uuid = VX_REAL_FN(cuDeviceGetUuid_v2);
  CUresult r = uuid ? uuid(&u, dev) : CUDA_ERROR_NOT_FOUND;
  if (r != CUDA_SUCCESS) {
    snprintf(err, en, "cannot read device %d's UUID (%d)", dev, (int)r);
    return -1;
  }
  char hex[33];
  snprintf(key, n, "%s", ledger_key_uuid((const unsigned char *)u.bytes, hex));
  return 0;
}

/* Capacity all processes share: physical minus VX_RESERVE, or this
 * process's own limit (at most physical) when VX_DEVICE_LIMIT asks more. */
static uint64_t ledger_capacity_for(uint64_t physical, uint64_t limit, const vx_options_t *o) {
  uint64_t cap = physical_less_reserve(physical, o);
  if (limit > cap) cap = limit < physical ? limit : physical;
  return cap;
}

/* Opens device dev's ledger; NULL for private accounting (said once). */
static vx_ledger_t *budget_ledger_open(int dev, uint64_t capacity, const vx_options_t *o) {
  char key[80], err[256] = "";
  int rc = ledger_key_for(dev, o->LEDGER.s, key, sizeof key, err, sizeof err);
  if (rc > 0) return NULL;
  vx_ledger_t *l = rc ? NULL : ledger_open_key(key, capacity, err, sizeof err);
  if (l && !ledger_is_shared(l)) {
    ledger_close(l);
    l = NULL;
  }
  if (!l)
    VX_LOG_ONCE(VX_LOG_WARN, "device %d: %s; VRAM is budgeted for this process alone", dev,
                err[0] ? err : "no shared ledger");
  return l;
}

// ---- set-up ----

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
  uint64_t limit = budget_resolve(dev, physical, o);
  /* Opened before the lock: the UUID query is a driver call. */
  vx_ledger_t *l = budget_ledger_open(dev, ledger_capacity_for(physical, limit, o), o);
  pthread_mutex_lock(&budget_init_lock);
  if (!b->ready) {
    b->physical = physical;
    b->limit = limit;
    b->ledger = l;
    l = NULL;
    __atomic_store_n(&b->ready, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&budget_init_lock);
  ledger_close(l); /* another thread set the device up first */
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

int budget_shared(int dev) {
  return budget_ready(dev) && budgets[dev].ledger;
}

/* Saturating subtraction of n from *v; returns what was taken. */
static uint64_t sub_sat(uint64_t *v, uint64_t n) {
  uint64_t cur = __atomic_load_n(v, __ATOMIC_RELAXED), take;
  do {
    take = cur < n ? cur : n;
  } while (
      !__atomic_compare_exchange_n(v, &cur, cur - take, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return take;
}

int budget_try_charge(int dev, uint64_t n) {
  struct budget *b = budget_of(dev);
  if (!b || !budget_ready(dev)) return 0;
  uint64_t cur = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
  do {
    if (n > b->limit || cur > b->limit - n) return 0;
  } while (
      !__atomic_compare_exchange_n(&b->used, &cur, cur + n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  if (b->ledger && ledger_reserve(b->ledger, n)) {
    /* Other live vx processes hold the rest of this GPU. */
    sub_sat(&b->used, n);
    VX_LOG_ONCE(VX_LOG_INFO,
                "device %d: other vx processes hold the rest of its memory: "
                "allocations beyond this process's share go to managed memory",
                dev);
    return 0;
  }
  return 1;
}

void budget_charge(int dev, uint64_t n) {
  struct budget *b = budget_of(dev);
  if (!b) return;
  __atomic_fetch_add(&b->used, n, __ATOMIC_RELAXED);
  if (budget_ready(dev) && b->ledger && ledger_reserve(b->ledger, n))
    __atomic_fetch_add(&b->owed, n, __ATOMIC_RELAXED);
}

void budget_release(int dev, uint64_t n) {
  struct budget *b = budget_of(dev);
  if (!b) return;
  sub_sat(&b->used, n);
  if (!budget_ready(dev) || !b->ledger) return;
  /* Bytes the ledger never granted are paid back first. */
  uint64_t rest = n - sub_sat(&b->owed, n);
  if (rest) ledger_release(b->ledger, rest);
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
