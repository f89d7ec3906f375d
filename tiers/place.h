/* Placement: where an allocation goes (native while it fits the budget,
 * managed beyond, host for the static policy) and how frees are routed by
 * what the pointer is (managed memory freed through cuMemFreeAsync is
 * released later by the deferred-free queue, defer.h).  Calls the driver
 * only through the real table. */
#ifndef VX_TIERS_PLACE_H
#define VX_TIERS_PLACE_H

#include <cuda.h>
#include <stddef.h>

#include "registry.h"

/* How to make the native allocation the application asked for: the real
 * call with its own arguments (cuMemAlloc_v2, cuMemAllocAsync, ...). */
typedef CUresult (*place_native_fn)(CUdeviceptr *dptr, void *ctx);

/* Allocates `size` bytes for the current context's device.  `native` makes
 * the application's own call; when vx cannot work out the device it is
 * called untouched.  Over budget, or when `native` fails with
 * CUDA_ERROR_OUT_OF_MEMORY, the memory is managed.  If vx's managed
 * allocation fails too, the application gets exactly what `native` returns.
 * Returns the CUresult the application sees.  *placed is the record vx
 * keeps of the allocation (size 0: none, it is the driver's alone), for the
 * hooks to hand on (allocation sites, obs/sites.h). */
CUresult place_alloc(CUdeviceptr *dptr, size_t size, place_native_fn native, void *ctx,
                     vx_alloc_info_t *placed);
/* The application's own cuMemAllocManaged: made and tracked. */
CUresult place_alloc_app_managed(CUdeviceptr *dptr, size_t size, unsigned flags);

/* cuMemFree_v2: tracked pointers are freed and accounted; unknown ones go
 * to the driver untouched, so the application gets the driver's own error.
 * *freed is the record of the allocation the call freed (size 0: none). */
CUresult place_free(CUdeviceptr p, vx_alloc_info_t *freed);
/* cuMemFreeAsync(_ptsz): native pointers go to `real`; vx's managed ones
 * (which the driver rejects) are released once the stream's prior work is
 * done, without synchronising it; inside a capture they are kept. */
typedef CUresult (*place_free_async_fn)(CUdeviceptr, CUstream);
CUresult place_free_async(CUdeviceptr p, CUstream s, int ptsz, place_free_async_fn real,
                          vx_alloc_info_t *freed);
/* Releases deferred frees whose stream work is done.  Cheap when none. */
void place_drain(void);

#endif
