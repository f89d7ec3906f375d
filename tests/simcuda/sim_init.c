/* sim_init.c: start-up of the simulated driver: environment, devices, cuInit,
 * version, device queries and error names. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "costs.h" /* policy/costs.h: the cost model shared with vx replay */
#include "sim_internal.h"

sim_global sim_g = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;
static int boot_err;
static int inited; /* atomic */
static int stats_at_exit;
static int forked; /* a child forked after cuInit */

static void atfork_child(void) {
  if (__atomic_load_n(&inited, __ATOMIC_ACQUIRE)) forked = 1;
}

CUresult sim_entry_check(const char *sym) {
  if (forked) return CUDA_ERROR_NOT_INITIALIZED;
  return sim_fail_check(sym);
}

void sim_lock(void) { pthread_mutex_lock(&sim_g.lock); }
void sim_unlock(void) { pthread_mutex_unlock(&sim_g.lock); }
int sim_initialized(void) { return __atomic_load_n(&inited, __ATOMIC_ACQUIRE); }

sim_dev *sim_dev_get(int d) {
  if (sim_boot() != 0 || d < 0 || d >= sim_g.ndev) return NULL;
  return &sim_g.dev[d];
}

void sim_log(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof buf - 2) n = sizeof buf - 2;
  buf[n++] = '\n';
  fwrite(buf, 1, (size_t)n, stderr);
}

int sim_parse_size(const char *s, size_t *out) {
  char *end;
  if (!s || !isdigit((unsigned char)*s)) return -EINVAL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return -EINVAL;
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
  case 'K': shift = 10; end++; break;
  case 'M': shift = 20; end++; break;
  case 'G': shift = 30; end++; break;
  case 'T': shift = 40; end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0' || v == 0 || (shift && v > (~0ULL >> shift))) return -EINVAL;
  *out = (size_t)(v << shift);
  return 0;
}

static int env_num(const char *name, double dflt, double *out) {
  const char *s = getenv(name);
  *out = dflt;
  if (!s || !*s) return 0;
  char *end;
  double v = strtod(s, &end);
  if (*end != '\0' || !(v > 0)) {
    sim_log("simcuda: bad %s='%s' (a positive number)", name, s);
    return -EINVAL;
  }
  *out = v;
  return 0;
}

static int parse_devices(void) {
  const char *nd = getenv("SIMCUDA_DEVICES");
  int n = 1;
  if (nd && *nd) {
    char *end;
    long v = strtol(nd, &end, 10);
    if (*end || v < 1 || v > SIM_MAXDEV) {
      sim_log("simcuda: bad SIMCUDA_DEVICES='%s' (1..%d)", nd, SIM_MAXDEV);
      return -EINVAL;
    }
    n = (int)v;
  }
  const char *vr = getenv("SIMCUDA_VRAM");
  char buf[256];
  snprintf(buf, sizeof buf, "%s", vr && *vr ? vr : "1G");
  size_t last = (size_t)1 << 30;
  char *save = NULL, *tok = strtok_r(buf, ",", &save);
  for (int d = 0; d < n; d++) {
    if (tok) {
      if (sim_parse_size(tok, &last) != 0) {
        sim_log("simcuda: bad SIMCUDA_VRAM='%s' (sizes with K/M/G, comma list)", vr);
        return -EINVAL;
      }
      tok = strtok_r(NULL, ",", &save);
    }
    sim_g.dev[d].ord = d;
    sim_g.dev[d].capacity = last;
  }
  sim_g.ndev = n;
  return 0;
}

/* SIMCUDA_CTX_OVERHEAD=SIZE (0 or unset: none) and SIMCUDA_CONCURRENT_MANAGED=0|1. */
static int parse_reserve_env(void) {
  const char *o = getenv("SIMCUDA_CTX_OVERHEAD");
  sim_g.ctx_overhead = 0;
  if (o && *o && strcmp(o, "0") != 0 && sim_parse_size(o, &sim_g.ctx_overhead) != 0) {
    sim_log("simcuda: bad SIMCUDA_CTX_OVERHEAD='%s' (a size with K/M/G, or 0)", o);
    return -EINVAL;
  }
  const char *m = getenv("SIMCUDA_CONCURRENT_MANAGED");
  sim_g.concurrent_managed = 1;
  if (m && *m) {
    if (strcmp(m, "0") != 0 && strcmp(m, "1") != 0) {
      sim_log("simcuda: bad SIMCUDA_CONCURRENT_MANAGED='%s' (0 or 1)", m);
      return -EINVAL;
    }
    sim_g.concurrent_managed = m[0] == '1';
  }
  return 0;
}

/* SIMCUDA_TIMING_ONLY=0|1 (issue 11, vx play). */
static int parse_timing_only(void) {
  const char *t = getenv("SIMCUDA_TIMING_ONLY");
  sim_g.timing_only = 0;
  if (!t || !*t) return 0;
  if (strcmp(t, "0") != 0 && strcmp(t, "1") != 0) {
    sim_log("simcuda: bad SIMCUDA_TIMING_ONLY='%s' (0 or 1)", t);
    return -EINVAL;
  }
  sim_g.timing_only = t[0] == '1';
  return 0;
}

/* A count of real-time microseconds, 0..1000000, from `name` (0 or unset:
 * none). */
static int parse_us(const char *name, unsigned *out) {
  const char *j = getenv(name);
  *out = 0;
  if (!j || !*j) return 0;
  char *end;
  unsigned long v = strtoul(j, &end, 10);
  if (*end || end == j || v > 1000000) {
    sim_log("simcuda: bad %s='%s' (microseconds, 0..1000000)", name, j);
    return -EINVAL;
  }
  *out = (unsigned)v;
  return 0;
}

int sim_data_prot(void) {
  return sim_g.timing_only ? PROT_READ : PROT_READ | PROT_WRITE;
}

static void print_stats(void) {
  for (int d = 0; d < sim_g.ndev; d++) {
    simcuda_stats_t st;
    if (simcuda_get_stats(d, &st) != 0) continue;
    char line[2048];
    int off = snprintf(line, sizeof line, "simcuda: stats dev=%d", d);
#define SIM_PRINT(n)                                                           \
  if (off < (int)sizeof line)                                                  \
    off += snprintf(line + off, sizeof line - (size_t)off, " " #n "=%llu",     \
                    (unsigned long long)st.n);
    SIMCUDA_COUNTERS(SIM_PRINT)
#undef SIM_PRINT
    sim_log("%s", line);
  }
}

static void boot(void) {
  double link, devbw, fault, launch;
  int err = parse_devices();
  /* defaults: the cost model vx replay uses (policy/costs.h) */
  err |= env_num("SIMCUDA_LINK_GBPS", VX_COST_LINK_GBPS, &link);
  err |= env_num("SIMCUDA_DEV_GBPS", VX_COST_DEV_GBPS, &devbw);
  err |= env_num("SIMCUDA_FAULT_NS", VX_COST_FAULT_NS, &fault);
  err |= env_num("SIMCUDA_LAUNCH_NS", VX_COST_LAUNCH_NS, &launch);
  err |= parse_reserve_env();
  err |= parse_timing_only();
  err |= parse_us("SIMCUDA_JITTER_US", &sim_g.jitter_us);
  err |= parse_us("SIMCUDA_ALLOC_PAUSE_US", &sim_g.alloc_pause_us);
  err |= sim_driver_check(); /* SIMCUDA_DRIVER_VERSION */
  const char *f = getenv("SIMCUDA_FAIL");
  if (f && *f && sim_fail_parse(f) != 0) {
    sim_log("simcuda: bad SIMCUDA_FAIL='%s' (entry:N[+][:code],...)", f);
    err = -EINVAL;
  }
  sim_g.link_gbps = link;
  sim_g.dev_gbps = devbw;
  sim_g.fault_ns = (uint64_t)fault;
  sim_g.launch_ns = (uint64_t)launch;
  const char *lg = getenv("SIMCUDA_LOG");
  sim_g.log_procaddr = lg && strstr(lg, "procaddr") != NULL;
  if (!err && sim_va_init() != 0) {
    sim_log("simcuda: cannot reserve the device address space");
    err = -ENOMEM;
  }
  const char *st = getenv("SIMCUDA_STATS");
  if (!err && st && strcmp(st, "1") == 0) {
    stats_at_exit = 1;
    atexit(print_stats);
  }
  pthread_atfork(NULL, NULL, atfork_child);
  boot_err = err ? -EINVAL : 0;
}

int sim_boot(void) {
  pthread_once(&boot_once, boot);
  return boot_err;
}

SIM_API CUresult cuInit(unsigned int flags) {
  SIM_ENTER(cuInit);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (sim_boot() != 0) return CUDA_ERROR_NO_DEVICE;
  __atomic_store_n(&inited, 1, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDriverGetVersion(int *v) {
  SIM_ENTER(cuDriverGetVersion);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = sim_driver_version();
  return CUDA_SUCCESS;
}

// ---- devices ----

static CUresult dev_ok(CUdevice d) {
  return (d >= 0 && d < sim_g.ndev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

SIM_API CUresult cuDeviceGetCount(int *count) {
  SIM_ENTER_INIT(cuDeviceGetCount);
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = sim_g.ndev;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  SIM_ENTER_INIT(cuDeviceGet);
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceGetName);
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "simcuda GPU %d", dev);
  return CUDA_SUCCESS;
}

static void fill_uuid(CUuuid *u, CUdevice dev) {
  for (int i = 0; i < 16; i++) u->bytes[i] = (char)(0x5c + i * 7 + dev * 31);
}

SIM_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceGetUuid_v2);
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fill_uuid(uuid, dev);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceGetUuid);
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fill_uuid(uuid, dev);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceTotalMem_v2);
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = sim_g.dev[dev].capacity;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceTotalMem);
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  size_t c = sim_g.dev[dev].capacity;
  *bytes = c > 0xffffffffu ? 0xffffffffu : (unsigned)c;
  return CUDA_SUCCESS;
}

static int attr_value(CUdevice_attribute a, int *v) {
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *v = 65535; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 52428800; break;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: *v = sim_g.concurrent_managed; break;
  case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *v = 2; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *v = CU_COMPUTEMODE_DEFAULT; break;
  case CU_DEVICE_ATTRIBUTE_INTEGRATED: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *v = 1; break;
  case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *v = 0; break;
  default: return -1;
  }
  return 0;
}

SIM_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceGetAttribute);
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (attr_value(attrib, pi) != 0) {
    if ((int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    *pi = 0; /* an attribute the simulator does not model: "not supported" */
  }
  if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) *pi = 1 + dev;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceComputeCapability);
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *major = 9;
  *minor = 0;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
  SIM_ENTER_INIT(cuDeviceCanAccessPeer);
  if (!can) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(dev) || dev_ok(peer)) return CUDA_ERROR_INVALID_DEVICE;
  *can = dev != peer; /* distinct devices can (sim_peer.c) */
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
  SIM_ENTER_INIT(cuDeviceGetPCIBusId);
  if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 1 + dev);
  return CUDA_SUCCESS;
}

// ---- errors ----

static CUresult error_name(CUresult error, const char **pStr) {
  switch (error) {
#define SIM_ERR(n) case n: *pStr = #n; return CUDA_SUCCESS;
#include "sim_errors.def"
#undef SIM_ERR
  default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
  }
}

SIM_API CUresult cuGetErrorName(CUresult error, const char **pStr) {
  SIM_ENTER(cuGetErrorName);
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  return error_name(error, pStr);
}

SIM_API CUresult cuGetErrorString(CUresult error, const char **pStr) {
  SIM_ENTER(cuGetErrorString);
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
  case CUDA_SUCCESS: *pStr = "no error"; return CUDA_SUCCESS;
  case CUDA_ERROR_OUT_OF_MEMORY: *pStr = "out of memory"; return CUDA_SUCCESS;
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    *pStr = "an illegal memory access was encountered";
    return CUDA_SUCCESS;
  default: break;
  }
  /* Elsewhere the name is the message: the simulator is not a catalogue. */
  return error_name(error, pStr);
}

SIM_API CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId) {
  SIM_ENTER(cuGetExportTable);
  (void)pExportTableId;
  if (ppExportTable) *ppExportTable = NULL;
  return CUDA_ERROR_NOT_SUPPORTED;
}
