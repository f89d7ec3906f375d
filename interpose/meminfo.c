/* Memory queries through the driver: cuMemGetInfo_v2 and cuDeviceTotalMem_v2
 * report physical, limit or extended capacity as VX_REPORT_MEMORY says. */
#include "meminfo.h"

#include <unistd.h>

#include "budget.h"
#include "vx.h"

static uint64_t host_capacity(void) {
  if (vx_opt.HOST_LIMIT.set) return vx_size_resolve(&vx_opt.HOST_LIMIT, 0);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2 : 0;
}

static uint64_t nvme_capacity(void) {
  return vx_opt.NVME_DIR.s[0] ? vx_size_resolve(&vx_opt.NVME_LIMIT, 0) : 0;
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
  uint64_t limit = budget_limit(dev), used;
  if (vx_opt.REPORT_MEMORY == VX_REPORT_MEMORY_LIMIT) {
    *total = limit;
    used = budget_used(dev);
  } else {
    *total = limit + host_capacity() + nvme_capacity();
    used = held_bytes(dev);
  }
  *free = *total > used ? *total - used : 0;
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
