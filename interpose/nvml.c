/* NVML memory queries: nvmlDeviceGetMemoryInfo(_v2) report like the
 * driver's (VX_REPORT_MEMORY), the NVML device matched to its CUDA ordinal. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "meminfo.h"
#include "vx.h"

#define VX_NVML_CALL(name, ...)                                                                    \
  (VX_REAL_FN(name) ? VX_REAL_FN(name)(__VA_ARGS__) : VX_NVML_ERROR_FUNCTION_NOT_FOUND)

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as NVML prints a UUID. */
static void uuid_text(const CUuuid *u, char *buf, size_t len) {
  const unsigned char *b = (const unsigned char *)u->bytes;
  snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
}

/* CUDA ordinal with the same UUID, or -1 (driver not initialised...). */
static int ordinal_by_uuid(vx_nvml_device_t device) {
  char want[96], have[96];
  int n = 0;
  if (VX_NVML_CALL(nvmlDeviceGetUUID, device, want, sizeof want) != VX_NVML_SUCCESS ||
      VX_CALL(cuDeviceGetCount, &n) != CUDA_SUCCESS)
    return -1;
  for (int i = 0; i < n; i++) {
    CUuuid u;
    if (VX_CALL(cuDeviceGetUuid_v2, &u, i) != CUDA_SUCCESS) return -1;
    uuid_text(&u, have, sizeof have);
    if (!strcasecmp(have, want)) return i;
  }
  return -1;
}

/* NVML index of the handle (NVML and CUDA both count in PCI order when
 * CUDA_DEVICE_ORDER=PCI_BUS_ID; the UUID match above is preferred). */
static int ordinal_by_index(vx_nvml_device_t device) {
  unsigned n = 0;
  if (VX_NVML_CALL(nvmlDeviceGetCount_v2, &n) != VX_NVML_SUCCESS) return -1;
  for (unsigned i = 0; i < n; i++) {
    vx_nvml_device_t d;
    if (VX_NVML_CALL(nvmlDeviceGetHandleByIndex_v2, i, &d) == VX_NVML_SUCCESS && d == device)
      return (int)i;
  }
  return -1;
}

static int nvml_ordinal(vx_nvml_device_t device) {
  int dev = ordinal_by_uuid(device);
  return dev >= 0 ? dev : ordinal_by_index(device);
}

static int nvml_start(void) {
  int on = vx_active();
  if (on) ctr_add(vx_tls_dev, VX_CTR_hook_calls, 1);
  return vx_real_nvml_init() == 0 ? on : -1;
}

vx_nvml_return_t nvmlDeviceGetMemoryInfo(vx_nvml_device_t device, vx_nvml_memory_t *memory) {
  int on = nvml_start();
  if (on < 0) return VX_NVML_ERROR_LIBRARY_NOT_FOUND;
  vx_nvml_return_t r = VX_NVML_CALL(nvmlDeviceGetMemoryInfo, device, memory);
  int dev;
  if (!on || r != VX_NVML_SUCCESS || !memory || (dev = nvml_ordinal(device)) < 0) return r;
  uint64_t f = memory->free, t = memory->total;
  if (vx_meminfo_rewrite(dev, &f, &t) == 0) {
    memory->total = t;
    memory->free = f;
    memory->used = t - f;
  }
  return r;
}

vx_nvml_return_t nvmlDeviceGetMemoryInfo_v2(vx_nvml_device_t device, vx_nvml_memory_v2_t *memory) {
  int on = nvml_start();
  if (on < 0) return VX_NVML_ERROR_LIBRARY_NOT_FOUND;
  vx_nvml_return_t r = VX_NVML_CALL(nvmlDeviceGetMemoryInfo_v2, device, memory);
  int dev;
  if (!on || r != VX_NVML_SUCCESS || !memory || (dev = nvml_ordinal(device)) < 0) return r;
  uint64_t f = memory->free, t = memory->total;
  if (vx_meminfo_rewrite(dev, &f, &t) == 0) {
    memory->total = t;
    memory->free = f;
    memory->used = t - f > memory->reserved ? t - f - memory->reserved : 0;
  }
  return r;
}
