/* Pinned host memory hooks (cuMemHostAlloc, cuMemAllocHost_v2,
 * cuMemFreeHost): the calls pass through; their bytes are counted. */
#include "sidetab.h"
#include "vx.h"

static sidetab_t host_allocs = SIDETAB_INIT(VX_RANK_PINNED);

void pinned_atfork_prepare(void) {
  sidetab_atfork_prepare(&host_allocs);
}
void pinned_atfork_parent(void) {
  sidetab_atfork_parent(&host_allocs);
}
void pinned_atfork_child(void) {
  sidetab_atfork_child(&host_allocs);
}

static void host_track(void *p, size_t size) {
  int dev = 0;
  vx_current_device(&dev);
  if (sidetab_add(&host_allocs, (uint64_t)(uintptr_t)p, size, dev) == 0) {
    ctr_add(dev, VX_CTR_alloc_host_pinned, 1);
    ctr_cur_add(dev, VX_CTR_host_pinned_bytes, size);
  }
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuMemHostAlloc, pp, bytesize, Flags);
  if (on && r == CUDA_SUCCESS && pp) host_track(*pp, bytesize);
  return r;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuMemAllocHost_v2, pp, bytesize);
  if (on && r == CUDA_SUCCESS && pp) host_track(*pp, bytesize);
  return r;
}

CUresult cuMemFreeHost(void *p) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuMemFreeHost, p);
  size_t size;
  int dev;
  if (on && r == CUDA_SUCCESS &&
      sidetab_remove(&host_allocs, (uint64_t)(uintptr_t)p, &size, &dev) == 0)
    ctr_cur_sub(dev, VX_CTR_host_pinned_bytes, size);
  return r;
}
