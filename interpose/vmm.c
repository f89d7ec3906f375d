/* VMM hooks (cuMemCreate/Release/Map/Unmap): the calls pass through; the
 * physical memory they create is counted against the budget. */
#include "budget.h"
#include "sidetab.h"
#include "vx.h"

static sidetab_t vmm_handles = SIDETAB_INIT(VX_RANK_VMM);

void vmm_atfork_prepare(void) {
  sidetab_atfork_prepare(&vmm_handles);
}
void vmm_atfork_parent(void) {
  sidetab_atfork_parent(&vmm_handles);
}
void vmm_atfork_child(void) {
  sidetab_atfork_child(&vmm_handles);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuMemCreate, handle, size, prop, flags);
  if (!on || r != CUDA_SUCCESS || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return r;
  int dev = prop->location.id;
  if (budget_device_init(dev, 0, &vx_opt) == 0) budget_charge(dev, size);
  if (sidetab_add(&vmm_handles, (uint64_t)*handle, size, dev) == 0) {
    ctr_add(dev, VX_CTR_alloc_vmm, 1);
    ctr_cur_add(dev, VX_CTR_vmm_bytes, size);
  }
  return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuMemRelease, handle);
  size_t size;
  int dev;
  if (on && r == CUDA_SUCCESS && sidetab_remove(&vmm_handles, (uint64_t)handle, &size, &dev) == 0) {
    budget_release(dev, size);
    ctr_cur_sub(dev, VX_CTR_vmm_bytes, size);
  }
  return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  VX_ENTER(on);
  (void)on; /* the physical memory was counted by cuMemCreate */
  return VX_CALL(cuMemMap, ptr, size, offset, handle, flags);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  VX_ENTER(on);
  (void)on;
  return VX_CALL(cuMemUnmap, ptr, size);
}
