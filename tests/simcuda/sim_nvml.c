/* sim_nvml.c: the simulated libnvidia-ml.so.1: device count, handles, names,
 * UUIDs and memory info, read from the simulated driver's device state. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim_nvml.h"

#define NVML_API __attribute__((visibility("default")))

/* A handle is 1 + the device ordinal, as a pointer value. */
static int (*drv_memory)(int, unsigned long long *, unsigned long long *);
static int (*drv_count)(void);
static int inited; /* init count (atomic) */

static nvmlReturn_t load_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) return NVML_ERROR_DRIVER_NOT_LOADED;
  *(void **)&drv_memory = dlsym(h, "simcuda_nvml_memory");
  *(void **)&drv_count = dlsym(h, "simcuda_device_count");
  return drv_memory && drv_count ? NVML_SUCCESS : NVML_ERROR_DRIVER_NOT_LOADED;
}

NVML_API nvmlReturn_t nvmlInit_v2(void) {
  nvmlReturn_t r = load_driver();
  if (r == NVML_SUCCESS) __atomic_add_fetch(&inited, 1, __ATOMIC_ACQ_REL);
  return r;
}

NVML_API nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

NVML_API nvmlReturn_t nvmlShutdown(void) {
  int n = __atomic_load_n(&inited, __ATOMIC_ACQUIRE);
  while (n > 0 && !__atomic_compare_exchange_n(&inited, &n, n - 1, 0, __ATOMIC_ACQ_REL,
                                               __ATOMIC_ACQUIRE)) {
  }
  return n > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static int ready(void) { return __atomic_load_n(&inited, __ATOMIC_ACQUIRE) > 0; }

static nvmlReturn_t dev_of(nvmlDevice_t d, int *ord) {
  if (!ready()) return NVML_ERROR_UNINITIALIZED;
  long v = (long)(uintptr_t)d - 1;
  if (!d || v < 0 || v >= drv_count()) return NVML_ERROR_INVALID_ARGUMENT;
  *ord = (int)v;
  return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  if (!ready()) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = (unsigned)drv_count();
  return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  if (!ready()) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= (unsigned)drv_count()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = (nvmlDevice_t)(uintptr_t)(index + 1);
  return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
  int d;
  nvmlReturn_t r = dev_of(device, &d);
  if (r == NVML_SUCCESS && !index) r = NVML_ERROR_INVALID_ARGUMENT;
  if (r == NVML_SUCCESS) *index = (unsigned)d;
  return r;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *m) {
  int d;
  nvmlReturn_t r = dev_of(device, &d);
  if (r != NVML_SUCCESS) return r;
  if (!m) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long total, used;
  if (drv_memory(d, &total, &used) != 0) return NVML_ERROR_UNKNOWN;
  m->total = total;
  m->used = used;
  m->free = total - used;
  return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *m) {
  int d;
  nvmlReturn_t r = dev_of(device, &d);
  if (r != NVML_SUCCESS) return r;
  if (!m) return NVML_ERROR_INVALID_ARGUMENT;
  if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  unsigned long long total, used;
  if (drv_memory(d, &total, &used) != 0) return NVML_ERROR_UNKNOWN;
  m->total = total;
  m->reserved = 0;
  m->used = used;
  m->free = total - used;
  return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  int d;
  nvmlReturn_t r = dev_of(device, &d);
  if (r != NVML_SUCCESS) return r;
  if (!name) return NVML_ERROR_INVALID_ARGUMENT;
  int n = snprintf(name, length, "simcuda GPU %d", d);
  return n < 0 || (unsigned)n >= length ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

/* Same bytes as cuDeviceGetUuid, in NVML's "GPU-8-4-4-4-12" text form. */
NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
  int d;
  nvmlReturn_t r = dev_of(device, &d);
  if (r != NVML_SUCCESS) return r;
  if (!uuid) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned char b[16];
  for (int i = 0; i < 16; i++) b[i] = (unsigned char)(0x5c + i * 7 + d * 31);
  int n = snprintf(uuid, length,
                   "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                   b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                   b[12], b[13], b[14], b[15]);
  return n < 0 || (unsigned)n >= length ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

NVML_API const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
  case NVML_SUCCESS: return "Success";
  case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
  case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
  case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
  case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
  case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
  case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
  default: return "Unknown Error";
  }
}
