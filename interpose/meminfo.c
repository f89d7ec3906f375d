/* Memory queries through the driver: cuMemGetInfo_v2 and cuDeviceTotalMem_v2
 * report physical, limit or extended capacity as VX_REPORT_MEMORY says. */
#include "meminfo.h"

#include "budget.h"
#include "vx.h"

/* What vx can back beyond the device budget: host RAM up to VX_HOST_MAX
 * and the swap file when the NVMe tier spills into it.  Exactly what
 * allocations can get before out of memory; nothing unbacked. */
static uint64_t backed_beyond_device(void) {
  uint64_t host, nvme;
  budget_host_capacity(&host, &nvme);
  return host + nvme < host ? UINT64_MAX : host + nvme;
}

static uint64_t held_bytes(int dev) {
  const vx_counters_t *c = &vx_ctr[ctr_slot(dev)];
  return __atomic_load_n(&c->native_bytes, __ATOMIC_RELAXED) +
         __atomic_load_n(&c->vmm_bytes, __ATOMIC_RELAXED) +
         __atomic_load_n(&c->managed_bytes, __ATOMIC_RELAXED) +
         __atomic_load_n(&c->host_tier_bytes, __ATOMIC_RELAXED);
}

int vx_meminfo_rewrite(int dev, uint64_t *free, uint64_t *total) {
  if (vx_opt.REPORT_MEMORY == VX_REPORT_MEMORY_PHYSICAL) return 0;
  if (budget_device_init(dev, *total, &vx_opt)) return -1;
  uint64_t limit = budget_limit(dev), used = budget_used(dev);
  /* What this process can still have natively: its budget less its use and
   * less what other vx processes hold on the GPU (the shared ledger), so
   * that two jobs never both see the same free bytes. */
  uint64_t room = budget_room(dev);
  if (vx_opt.REPORT_MEMORY == VX_REPORT_MEMORY_LIMIT) {
    *total = limit;
    if (room < *free) *free = room; /* never more than the driver has free */
    return 0;
  }
  /* Without concurrent managed access nothing spills off the device. */
  uint64_t beyond = budget_managed_ok(dev) ? backed_beyond_device() : 0;
  *total = limit + beyond < limit ? UINT64_MAX : limit + beyond;
  uint64_t held = held_bytes(dev);
  uint64_t f = *total > held ? *total - held : 0;
  /* the part of the device budget other vx processes' shares take */
  uint64_t taken = limit > used && limit - used > room ? limit - used - room : 0;
  *free = f > taken ? f - taken : 0;
  return 0;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuMemGetInfo_v2, free, total);
  int dev;
  if (!on || r != CUDA_SUCCESS || !free || !total || vx_current_device(&dev)) return r;
  uint64_t f = *free, t = *total;
  if (vx_meminfo_rewrite(dev, &f, &t) == 0) {
    *free = (size_t)f;
    *total = (size_t)t;
  }
  return r;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuDeviceTotalMem_v2, bytes, dev);
  if (!on || r != CUDA_SUCCESS || !bytes) return r;
  uint64_t f = 0, t = *bytes;
  if (vx_meminfo_rewrite(dev, &f, &t) == 0) *bytes = (size_t)t;
  return r;
}
