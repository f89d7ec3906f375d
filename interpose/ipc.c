/* cuIpcGetMemHandle: the driver makes handles for cuMemAlloc memory only.
 * On an allocation vx moved to managed memory it would fail with a bare
 * CUDA_ERROR_INVALID_VALUE; vx says which allocation and the way out. */
#include "registry.h"
#include "sites.h"
#include "vx.h"

static const char *tier_name(int tier) {
  switch (tier) {
  case VX_TIER_MANAGED:
    return "managed memory (over the device budget)";
  case VX_TIER_HOST:
    return "host memory (VX_POLICY=static)";
  default:
    return "the application's own managed memory";
  }
}

/* One line per refused call (a program asks once per buffer it shares). */
static void refuse(const vx_alloc_info_t *a, CUdeviceptr p, void *caller) {
  char site[160];
  sites_symbol(caller, site, sizeof site);
  if (a->tier == VX_TIER_APP_MANAGED) {
    vx_log(VX_LOG_ERROR,
           "cuIpcGetMemHandle(0x%llx) from %s: the allocation at 0x%llx (%zu bytes) is the "
           "program's own cuMemAllocManaged memory, which CUDA IPC cannot share",
           (unsigned long long)p, site, (unsigned long long)a->base, a->size);
    return;
  }
  vx_log(VX_LOG_ERROR,
         "cuIpcGetMemHandle(0x%llx) from %s: allocation 0x%llx (%zu bytes, id %llu) lives in "
         "%s, which CUDA IPC cannot share; set VX_IPC=native (cuMemAlloc memory stays native "
         "while the device has room) or VX_NATIVE_MAX=%zu (allocations up to that size stay "
         "native)",
         (unsigned long long)p, site, (unsigned long long)a->base, a->size,
         (unsigned long long)a->id, tier_name(a->tier), a->size);
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
  VX_ENTER(on);
  vx_alloc_info_t a;
  if (on && p && reg_lookup(p, &a) == 0 && a.tier != VX_TIER_NATIVE) {
    refuse(&a, p, __builtin_return_address(0));
    return CUDA_ERROR_INVALID_VALUE; /* what the driver says for managed memory */
  }
  return VX_CALL(cuIpcGetMemHandle, h, p);
}
