/* What memory queries report (VX_REPORT_MEMORY), shared by the driver
 * hooks (cuMemGetInfo_v2, cuDeviceTotalMem_v2) and NVML's. */
#ifndef VX_INTERPOSE_MEMINFO_H
#define VX_INTERPOSE_MEMINFO_H

#include <stdint.h>

/* Rewrites a device's (free, total), given the driver's physical figures:
 *  physical: unchanged;
 *  limit:    total = the device limit, free = limit minus the bytes vx
 *            charged to it (native + VMM), at least 0;
 *  extended: total = limit + what backs managed data beyond it
 *            (budget_host_capacity: host RAM up to VX_HOST_MAX, plus
 *            VX_NVME_LIMIT when the NVMe tier is on and spills above a
 *            VX_HOST_LIMIT within the cap; nothing on a device without
 *            concurrent managed access); free = total
 *            minus everything vx holds for the device (native, VMM,
 *            managed, host tier).
 * Returns 0, or -1 (figures untouched) when the device is unknown. */
int vx_meminfo_rewrite(int dev, uint64_t *free, uint64_t *total);

#endif
