/* sim_nvml.c: the simulated libnvidia-ml.so.1: device count, handles, names,
 * UUIDs, memory info, versions, utilization and process lists, read from the
 * simulated driver's device state. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "costs.h" /* policy/costs.h */
#include "simcuda.h"
#include "sim_nvml.h"

#define NVML_API __attribute__((visibility("default")))

/* A handle is 1 + the device ordinal, as a pointer value. */
static int (*drv_memory)(int, unsigned long long *, unsigned long long *);
static int (*drv_count)(void);
static int (*drv_stats)(int, simcuda_stats_t *);
static CUresult (*drv_version)(int *);
static CUresult (*drv_primary_state)(CUdevice, unsigned *, int *);
static int inited; /* init count (atomic) */

static nvmlReturn_t load_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) return NVML_ERROR_DRIVER_NOT_LOADED;
  *(void **)&drv_memory = dlsym(h, "simcuda_nvml_memory");
  *(void **)&drv_count = dlsym(h, "simcuda_device_count");
  *(void **)&drv_stats = dlsym(h, "simcuda_get_stats");
  *(void **)&drv_version = dlsym(h, "cuDriverGetVersion");
  *(void **)&drv_primary_state = dlsym(h, "cuDevicePrimaryCtxGetState");
  return drv_memory && drv_count && drv_stats && drv_version && drv_primary_state
             ? NVML_SUCCESS
             : NVML_ERROR_DRIVER_NOT_LOADED;
}

NVML_API nvmlReturn_t nvmlInit_v2(void) {
  nvmlReturn_t r = load_driver();
  if (r == NVML_SUCCESS) __atomic_add_fetch(&inited, 1, __ATOMIC_ACQ_REL);
  return r;
}

NVML_API nvmlReturn_t nvmlInit(void) {
  return nvmlInit_v2();
}

/* Flags nvml.h does not define are refused (stricter than guessing). */
NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  if (flags & ~(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH))
    return NVML_ERROR_INVALID_ARGUMENT;
  return nvmlInit_v2();
}

NVML_API nvmlReturn_t nvmlShutdown(void) {
  int n = __atomic_load_n(&inited, __ATOMIC_ACQUIRE);
  while (n > 0 &&
         !__atomic_compare_exchange_n(&inited, &n, n - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
  }
  return n > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static int ready(void) {
  return __atomic_load_n(&inited, __ATOMIC_ACQUIRE) > 0;
}

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

NVML_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) {
  return nvmlDeviceGetCount_v2(count);
}

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
  for (int i = 0; i < 16; i++)
    b[i] = (unsigned char)(0x5c + i * 7 + d * 31);
  int n = snprintf(uuid, length,
                   "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                   b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                   b[14], b[15]);
  return n < 0 || (unsigned)n >= length ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
  if (!ready()) return NVML_ERROR_UNINITIALIZED;
  if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
  for (int d = 0; d < drv_count(); d++) {
    char have[96];
    nvmlDevice_t h = (nvmlDevice_t)(uintptr_t)(d + 1);
    if (nvmlDeviceGetUUID(h, have, sizeof have) == NVML_SUCCESS && !strcmp(have, uuid)) {
      *device = h;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

// ---- versions ----

static nvmlReturn_t cuda_version(int *v) {
  if (!ready()) return NVML_ERROR_UNINITIALIZED;
  if (!v) return NVML_ERROR_INVALID_ARGUMENT;
  return drv_version(v) == CUDA_SUCCESS ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
  return cuda_version(v);
}
NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
  return cuda_version(v);
}

/* The first driver branch that shipped the simulated CUDA version. */
static int driver_branch(int cuda) {
  static const int map[][2] = {{13000, 580}, {12090, 575}, {12080, 570}, {12060, 560},
                               {12050, 555}, {12040, 550}, {12030, 545}, {12020, 535},
                               {12010, 530}, {12000, 525}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (cuda >= map[i][0]) return map[i][1];
  return 520;
}

static nvmlReturn_t put_text(char *buf, unsigned len, const char *fmt, int a, int b) {
  if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
  int n = snprintf(buf, len, fmt, a, b);
  return n < 0 || (unsigned)n >= len ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

/* "580.00.00": the branch of the simulated CUDA version, no real release. */
NVML_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  int v;
  nvmlReturn_t r = cuda_version(&v);
  return r != NVML_SUCCESS ? r : put_text(version, length, "%d.00.%02d", driver_branch(v), 0);
}

/* "13.580.00.00": NVML's form, CUDA major then the driver version. */
NVML_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
  int v;
  nvmlReturn_t r = cuda_version(&v);
  return r != NVML_SUCCESS ? r
                           : put_text(version, length, "%d.%d.00.00", v / 1000, driver_branch(v));
}

NVML_API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
  if (!ready()) return NVML_ERROR_UNINITIALIZED;
  if (!name || !length) return NVML_ERROR_INVALID_ARGUMENT;
  char path[64], comm[256];
  snprintf(path, sizeof path, "/proc/%u/comm", pid);
  FILE *f = fopen(path, "r");
  if (!f) return NVML_ERROR_NOT_FOUND;
  size_t n = fread(comm, 1, sizeof comm - 1, f);
  fclose(f);
  while (n > 0 && comm[n - 1] == '\n')
    n--;
  comm[n] = 0;
  if (n >= length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(name, comm, n + 1);
  return NVML_SUCCESS;
}

// ---- utilization ----

/* Share of virtual time since the previous query (since start at the first)
 * that kernels ran / that copies and migrations moved data, per device. */
static struct { uint64_t total, kernel, bytes; } util_last[8];

NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u) {
  int d;
  nvmlReturn_t r = dev_of(device, &d);
  if (r != NVML_SUCCESS) return r;
  if (!u) return NVML_ERROR_INVALID_ARGUMENT;
  simcuda_stats_t st;
  if (d >= 8 || drv_stats(d, &st) != 0) return NVML_ERROR_UNKNOWN;
  uint64_t bytes = st.bytes_memcpy_dtod + st.bytes_memcpy_htod + st.bytes_memcpy_dtoh +
                   st.bytes_fault_htod + st.bytes_prefetch_htod + st.bytes_prefetch_dtoh +
                   st.bytes_evict_dtoh;
  uint64_t dt = st.total_ns - util_last[d].total, dk = st.kernel_ns - util_last[d].kernel;
  uint64_t db = bytes - util_last[d].bytes;
  util_last[d].total = st.total_ns;
  util_last[d].kernel = st.kernel_ns;
  util_last[d].bytes = bytes;
  /* device bandwidth (SIMCUDA_DEV_GBPS default, policy/costs.h): bytes per ns at full use */
  const uint64_t bw = (uint64_t)VX_COST_DEV_GBPS;
  u->gpu = dt ? (unsigned)(dk >= dt ? 100 : dk * 100 / dt) : 0;
  u->memory = dt ? (unsigned)(db / bw >= dt ? 100 : db / bw * 100 / dt) : 0;
  return NVML_SUCCESS;
}

// ---- process lists ----

/* Simulated devices belong to this process alone: it is listed as a compute
 * process of a device where it has an active primary context or memory in
 * use, with the device's bytes in use; never as a graphics or MPS process. */
static nvmlReturn_t this_process(int d, unsigned *n, unsigned long long *used) {
  unsigned long long total;
  unsigned flags;
  int active = 0;
  if (drv_memory(d, &total, used) != 0) return NVML_ERROR_UNKNOWN;
  if (drv_primary_state(d, &flags, &active) != CUDA_SUCCESS) active = 0;
  *n = active || *used ? 1 : 0;
  return NVML_SUCCESS;
}

/* Fills `count` entries of `size` bytes (v1: pid + memory; v2/v3 add the
 * MIG instance ids, 0xFFFFFFFF without MIG). */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned *count, void *infos, size_t size,
                              int graphics) {
  int d;
  nvmlReturn_t r = dev_of(device, &d);
  if (r != NVML_SUCCESS) return r;
  if (!count || (!infos && *count)) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned n = 0;
  unsigned long long used = 0;
  if (!graphics && (r = this_process(d, &n, &used)) != NVML_SUCCESS) return r;
  unsigned room = *count;
  *count = n;
  if (n > room) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (!n) return NVML_SUCCESS;
  nvmlProcessInfo_v2_t p = {.pid = (unsigned)getpid(),
                            .usedGpuMemory = used,
                            .gpuInstanceId = 0xFFFFFFFFu,
                            .computeInstanceId = 0xFFFFFFFFu};
  if (size == sizeof(nvmlProcessInfo_v1_t)) {
    nvmlProcessInfo_v1_t *v1 = infos;
    v1->pid = p.pid;
    v1->usedGpuMemory = p.usedGpuMemory;
  } else {
    memcpy(infos, &p, sizeof p);
  }
  return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned *count,
                                                           nvmlProcessInfo_v1_t *infos) {
  return processes(device, count, infos, sizeof *infos, 0);
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned *count,
                                                              nvmlProcessInfo_v2_t *infos) {
  return processes(device, count, infos, sizeof *infos, 0);
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned *count,
                                                              nvmlProcessInfo_t *infos) {
  return processes(device, count, infos, sizeof *infos, 0);
}

NVML_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned *count,
                                                            nvmlProcessInfo_v1_t *infos) {
  return processes(device, count, infos, sizeof *infos, 1);
}

NVML_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned *count,
                                                               nvmlProcessInfo_v2_t *infos) {
  return processes(device, count, infos, sizeof *infos, 1);
}

NVML_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned *count,
                                                               nvmlProcessInfo_t *infos) {
  return processes(device, count, infos, sizeof *infos, 1);
}

NVML_API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                 unsigned *count,
                                                                 nvmlProcessInfo_t *infos) {
  return processes(device, count, infos, sizeof *infos, 1);
}

NVML_API const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
  case NVML_SUCCESS:
    return "Success";
  case NVML_ERROR_UNINITIALIZED:
    return "Uninitialized";
  case NVML_ERROR_INVALID_ARGUMENT:
    return "Invalid Argument";
  case NVML_ERROR_NOT_SUPPORTED:
    return "Not Supported";
  case NVML_ERROR_NOT_FOUND:
    return "Not Found";
  case NVML_ERROR_INSUFFICIENT_SIZE:
    return "Insufficient Size";
  case NVML_ERROR_DRIVER_NOT_LOADED:
    return "Driver Not Loaded";
  case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
    return "Argument Version Mismatch";
  default:
    return "Unknown Error";
  }
}
