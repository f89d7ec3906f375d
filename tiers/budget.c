/* Per-device budget: limit resolved once per device, bytes charged with a
 * compare-and-swap so concurrent allocations never overshoot the limit, and
 * reserved in the per-GPU ledger shared with other vx processes. */
#include "budget.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctr.h"
#include "ledger.h"
#include "spill.h"
#include "driver.h"
#include "log.h"
#include "options.h"
#include "locks.h"

struct budget {
  int ready;
  int settled;    /* atomic: limit sized from what the driver reported free */
  int managed_ok; /* CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS (or unknown) */
  uint64_t physical;
  uint64_t limit, usable; /* atomic: provisional until settled */
  uint64_t used;
  vx_ledger_t *ledger; /* shared with other processes; NULL = private accounting */
  uint64_t owed;       /* atomic: charged bytes the ledger refused (forced charges) */
};

static struct budget budgets[VX_MAX_DEVICES];
static pthread_mutex_t budget_init_lock = PTHREAD_MUTEX_INITIALIZER;

static struct budget *budget_of(int dev) {
  return dev >= 0 && dev < VX_MAX_DEVICES ? &budgets[dev] : NULL;
}

/* VX_RESERVE, the headroom, at most a sixteenth of the device: a default
 * sized for data-centre GPUs must not take a large part of a small one (or
 * of a small simulated one).  Managed pages may use the headroom under
 * plain demand paging (the driver evicts them when a library allocates)
 * but not under vx's budget, so a larger cap would hand the reference a
 * device vx itself cannot use: 1G is within the cap from 16 GB up.  Of the
 * physical size, not of what is free: what the libraries need does not
 * shrink because other processes fill the card. */
uint64_t budget_headroom(uint64_t physical, const vx_size_t *reserve) {
  uint64_t r = vx_size_resolve(reserve, physical);
  return r > physical / 16 ? physical / 16 : r;
}

void budget_size_from_free(uint64_t physical, uint64_t free, uint64_t held,
                           const vx_size_t *device_limit, const vx_size_t *reserve, uint64_t *limit,
                           uint64_t *usable) {
  uint64_t pool = free + held < free || free + held > physical ? physical : free + held;
  uint64_t head = budget_headroom(physical, reserve);
  *usable = pool > head ? pool - head : 0;
  *limit = *usable;
  if (device_limit && device_limit->set) {
    uint64_t want = vx_size_resolve(device_limit, physical);
    if (want < *limit) *limit = want;
  }
}

/* Before the first context use: physical minus the headroom (what
 * cuDeviceTotalMem before any context can be answered with). */
static uint64_t physical_less_reserve(uint64_t physical, const vx_options_t *o) {
  return physical - budget_headroom(physical, &o->RESERVE);
}

/* Provisional limit: VX_DEVICE_LIMIT for this device (bytes or % of
 * physical), else physical minus VX_RESERVE. */
static uint64_t budget_resolve(int dev, uint64_t physical, const vx_options_t *o) {
  const vx_size_t *lim = vx_sizes_for(&o->DEVICE_LIMIT, dev);
  if (!lim || !lim->set) return physical_less_reserve(physical, o);
  /* A limit past what the device has would be reported to the program
   * (cuMemGetInfo, NVML) as memory it cannot get until the budget settles
   * (which says so: budget_settle). */
  uint64_t want = vx_size_resolve(lim, physical);
  return want > physical ? physical_less_reserve(physical, o) : want;
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

/* A ledger that leaves its truncated or re-created segment says so here. */
static void ledger_warn_line(const char *line) {
  vx_log(VX_LOG_WARN, "%s", line);
}

/* Opens device dev's ledger; NULL for private accounting (said once). */
static vx_ledger_t *budget_ledger_open(int dev, uint64_t capacity, const vx_options_t *o) {
  char key[80], err[256] = "";
  ledger_set_warn(ledger_warn_line);
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

/* CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS of dev: 1 when set or when
 * the driver cannot say (vx then behaves as it always did). */
static int probe_managed(int dev) {
  int v = 1;
  CUresult r =
      VX_CALL(cuDeviceGetAttribute, &v, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev);
  return r != CUDA_SUCCESS || v != 0;
}

/* Physical size, provisional limit, capability, ledger: once per device. */
static int budget_setup(struct budget *b, int dev, uint64_t physical, const vx_options_t *o) {
  if (!physical) {
    size_t bytes = 0;
    vx_pfn_cuDeviceTotalMem_v2 total = VX_REAL_FN(cuDeviceTotalMem_v2);
    if (!total || total(&bytes, dev) != CUDA_SUCCESS || !bytes) return -EIO;
    physical = bytes;
  }
  ctr_note_device(dev);
  uint64_t limit = budget_resolve(dev, physical, o);
  int managed_ok = probe_managed(dev);
  /* Opened before the lock: the UUID query is a driver call. */
  vx_ledger_t *l = budget_ledger_open(dev, ledger_capacity_for(physical, limit, o), o);
  vx_mutex_lock(&budget_init_lock, VX_RANK_BUDGET);
  int won = !b->ready;
  if (won) {
    b->physical = physical;
    b->limit = limit;
    b->usable = physical_less_reserve(physical, o);
    b->managed_ok = managed_ok;
    b->ledger = l;
    l = NULL;
    __atomic_store_n(&b->ready, 1, __ATOMIC_RELEASE);
  }
  vx_mutex_unlock(&budget_init_lock, VX_RANK_BUDGET);
  ledger_close(l); /* another thread set the device up first */
  if (won && !managed_ok)
    VX_LOG_ONCE(VX_LOG_WARN,
                "device %d has no concurrent managed access "
                "(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0): no managed memory, "
                "prediction or NVMe tier there; allocations beyond its budget stay native, "
                "as without vx",
                dev);
  return 0;
}

/* The budget from what the driver reports free, once a context of dev is
 * current (first vx allocation or memory query there): the context, the
 * modules already loaded and other processes' memory are then gone from
 * it.  Bytes this process and other vx processes already hold (the
 * ledger's shares) are added back: they are budgeted, not lost. */
static void budget_settle(struct budget *b, int dev, const vx_options_t *o) {
  CUdevice cur;
  size_t free = 0, total = 0;
  if (VX_CALL(cuCtxGetDevice, &cur) != CUDA_SUCCESS || cur != dev) return;
  CUresult r = VX_CALL(cuMemGetInfo_v2, &free, &total);
  uint64_t limit = __atomic_load_n(&b->limit, __ATOMIC_RELAXED);
  uint64_t usable = __atomic_load_n(&b->usable, __ATOMIC_RELAXED);
  const vx_size_t *lim = vx_sizes_for(&o->DEVICE_LIMIT, dev);
  uint64_t held = 0;
  if (r == CUDA_SUCCESS) {
    held = budget_used(dev) + (b->ledger ? ledger_others(b->ledger) : 0);
    budget_size_from_free(b->physical, free, held, lim, &o->RESERVE, &limit, &usable);
  }
  vx_mutex_lock(&budget_init_lock, VX_RANK_BUDGET);
  int won = !b->settled;
  if (won) {
    __atomic_store_n(&b->limit, limit, __ATOMIC_RELAXED);
    __atomic_store_n(&b->usable, usable, __ATOMIC_RELAXED);
    if (b->ledger) ledger_set_capacity(b->ledger, usable);
    __atomic_store_n(&b->settled, 1, __ATOMIC_RELEASE);
  }
  vx_mutex_unlock(&budget_init_lock, VX_RANK_BUDGET);
  if (!won) return;
  if (r != CUDA_SUCCESS) {
    char eb[VX_CU_ERR_TEXT];
    VX_LOG_ONCE(VX_LOG_WARN, "device %d: cuMemGetInfo_v2 failed (%s): budget from its total size",
                dev, vx_cu_err(r, eb));
  } else {
    char t[5][VX_SIZE_TEXT];
    vx_log(VX_LOG_INFO,
           "device %d (%s): budget %s (%s free at first use, %s held by vx processes, "
           "reserve %s)%s",
           dev, vx_size_text(b->physical, t[0]), vx_size_text(limit, t[1]),
           vx_size_text(free, t[2]), vx_size_text(held, t[3]),
           vx_size_text(budget_headroom(b->physical, &o->RESERVE), t[4]),
           b->managed_ok ? "" : "; no managed memory there (no concurrent managed access)");
    if (lim && lim->set && vx_size_resolve(lim, b->physical) > limit)
      VX_LOG_ONCE(VX_LOG_WARN,
                  "device %d: VX_DEVICE_LIMIT asks %llu MiB, more than the device has free "
                  "(%llu MiB of %llu) less VX_RESERVE: budget %llu MiB",
                  dev, (unsigned long long)(vx_size_resolve(lim, b->physical) >> 20),
                  (unsigned long long)(free >> 20), (unsigned long long)(b->physical >> 20),
                  (unsigned long long)(limit >> 20));
  }
}

int budget_device_init(int dev, uint64_t physical, const vx_options_t *o) {
  struct budget *b = budget_of(dev);
  if (!b) return -EINVAL;
  if (__atomic_load_n(&b->settled, __ATOMIC_ACQUIRE)) return 0;
  if (!__atomic_load_n(&b->ready, __ATOMIC_ACQUIRE)) {
    int rc = budget_setup(b, dev, physical, o);
    if (rc) return rc;
  }
  budget_settle(b, dev, o);
  return 0;
}

int budget_managed_ok(int dev) {
  return !budget_ready(dev) || budgets[dev].managed_ok;
}

int budget_ready(int dev) {
  struct budget *b = budget_of(dev);
  return b && __atomic_load_n(&b->ready, __ATOMIC_ACQUIRE);
}

uint64_t budget_limit(int dev) {
  return budget_ready(dev) ? __atomic_load_n(&budgets[dev].limit, __ATOMIC_RELAXED) : 0;
}
uint64_t budget_physical(int dev) {
  return budget_ready(dev) ? budgets[dev].physical : 0;
}
uint64_t budget_used(int dev) {
  struct budget *b = budget_of(dev);
  return b ? __atomic_load_n(&b->used, __ATOMIC_RELAXED) : 0;
}

uint64_t budget_room(int dev) {
  struct budget *b = budget_of(dev);
  if (!b || !budget_ready(dev)) return 0;
  uint64_t limit = budget_limit(dev), used = budget_used(dev);
  uint64_t room = limit > used ? limit - used : 0;
  if (b->ledger) {
    uint64_t shared = ledger_room(b->ledger); /* less every live vx process's share */
    if (shared < room) room = shared;
  }
  return room;
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

int budget_try_charge_below(int dev, uint64_t n, uint64_t keep) {
  struct budget *b = budget_of(dev);
  if (!b || !budget_ready(dev)) return 0;
  uint64_t cur = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
  uint64_t limit = __atomic_load_n(&b->limit, __ATOMIC_RELAXED);
  limit = limit > keep ? limit - keep : 0;
  do {
    if (n > limit || cur > limit - n) return 0;
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

// ---- the host-memory cap (VX_HOST_MAX) ----

static uint64_t host_max;       /* the cap in bytes, set once by budget_host_init */
static uint64_t host_committed; /* atomic: bytes of vx's managed allocations */
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

/* MemAvailable now (0 when /proc/meminfo cannot be read). */
static uint64_t mem_available(void) {
  char text[8192];
  FILE *f = fopen("/proc/meminfo", "re");
  if (!f) return 0;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  uint64_t bytes = 0;
  return vx_meminfo_available(text, &bytes) ? 0 : bytes;
}

static void host_init_once(void) {
  uint64_t avail = mem_available();
  long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t fallback =
      pages > 0 && page > 0 ? vx_host_max_default((uint64_t)pages * (uint64_t)page) : 0;
  if (!avail && !vx_opt.HOST_MAX.set) {
    char t[VX_SIZE_TEXT];
    vx_log(VX_LOG_WARN, "cannot read MemAvailable from /proc/meminfo: VX_HOST_MAX is %s",
           vx_size_text(fallback, t));
  }
  host_max = vx_host_max_resolve(&vx_opt.HOST_MAX, avail, fallback); /* said by init's line */
}

void budget_host_init(void) {
  pthread_once(&host_once, host_init_once);
}

uint64_t budget_host_max(void) {
  budget_host_init();
  return host_max;
}

void budget_host_capacity(uint64_t *host, uint64_t *nvme) {
  *host = budget_host_max();
  *nvme = 0;
  /* The swap file takes data only when the NVMe tier spills above
   * VX_HOST_LIMIT; a VX_HOST_LIMIT above the cap is never reached (the cap
   * refuses first), so the tier then backs nothing more.  When the swap
   * file is full, spilled-to-be data stays in host RAM: the cap still
   * bounds it, since the swap file is counted at most once. */
  if (!spill_armed() || !vx_opt.HOST_LIMIT.set) return;
  if (vx_size_resolve(&vx_opt.HOST_LIMIT, 0) > *host) return;
  *nvme = vx_size_resolve(&vx_opt.NVME_LIMIT, 0);
}

/* Device bytes the budgets leave to managed data: limit minus native use. */
static uint64_t device_room(void) {
  uint64_t room = 0;
  for (int d = 0; d < VX_MAX_DEVICES; d++) {
    uint64_t lim = budget_limit(d), used = budget_used(d);
    room += lim > used ? lim - used : 0;
  }
  return room;
}

int budget_host_try_commit(uint64_t n) {
  uint64_t host, nvme;
  budget_host_capacity(&host, &nvme);
  uint64_t cap = device_room() + host, cur = __atomic_load_n(&host_committed, __ATOMIC_RELAXED);
  cap = cap + nvme < cap ? UINT64_MAX : cap + nvme;
  do {
    if (n > cap || cur > cap - n) return 0;
  } while (!__atomic_compare_exchange_n(&host_committed, &cur, cur + n, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
  return 1;
}

void budget_host_uncommit(uint64_t n) {
  sub_sat(&host_committed, n);
}

void budget_atfork_prepare(void) {
  vx_mutex_lock(&budget_init_lock, VX_RANK_BUDGET);
}
void budget_atfork_parent(void) {
  vx_mutex_unlock(&budget_init_lock, VX_RANK_BUDGET);
}
void budget_atfork_child(void) {
  pthread_mutex_init(&budget_init_lock, NULL);
  for (int d = 0; d < VX_MAX_DEVICES; d++)
    if (budget_ready(d)) ledger_atfork_child(budgets[d].ledger);
}
