/* capture_probe: which driver calls a stream capture forbids, measured.
 * For each call and scenario a fresh capture is begun on the main thread,
 * a second thread makes the call, and the probe records what the call
 * returned and whether the capture survived (cuStreamEndCapture).  The
 * simulator's rules are the table below (tests/simcuda/README.md); on a
 * real driver the probe flags every cell where the driver is stricter than
 * the table (a simulator more lenient than the driver is a defect), and
 * prints the cells where it is more lenient (deliberate differences).
 *   capture_probe           run, print the table, compare, exit 1 on a defect
 *   capture_probe --exact   also exit 1 on a more lenient cell (the simulator
 *                           itself must match its table exactly)
 * Reaches the driver by dlopen("libcuda.so.1") only: the same binary runs
 * on the simulator (CTest) and on a GPU. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P(name, ret, params) static ret(*p_##name) params;
#define DRIVER(X)                                                                                  \
  X(cuInit, CUresult, (unsigned))                                                                  \
  X(cuDeviceGet, CUresult, (CUdevice *, int))                                                      \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))                                   \
  X(cuCtxSetCurrent, CUresult, (CUcontext))                                                        \
  X(cuCtxSynchronize, CUresult, (void))                                                            \
  X(cuStreamCreate, CUresult, (CUstream *, unsigned))                                              \
  X(cuStreamDestroy_v2, CUresult, (CUstream))                                                      \
  X(cuStreamSynchronize, CUresult, (CUstream))                                                     \
  X(cuStreamQuery, CUresult, (CUstream))                                                           \
  X(cuStreamBeginCapture_v2, CUresult, (CUstream, CUstreamCaptureMode))                            \
  X(cuStreamEndCapture, CUresult, (CUstream, CUgraph *))                                           \
  X(cuThreadExchangeStreamCaptureMode, CUresult, (CUstreamCaptureMode *))                          \
  X(cuGraphDestroy, CUresult, (CUgraph))                                                           \
  X(cuEventCreate, CUresult, (CUevent *, unsigned))                                                \
  X(cuEventDestroy_v2, CUresult, (CUevent))                                                        \
  X(cuEventRecord, CUresult, (CUevent, CUstream))                                                  \
  X(cuEventQuery, CUresult, (CUevent))                                                             \
  X(cuEventSynchronize, CUresult, (CUevent))                                                       \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                                              \
  X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                         \
  X(cuMemAllocManaged, CUresult, (CUdeviceptr *, size_t, unsigned))                                \
  X(cuMemAdvise_v2, CUresult, (CUdeviceptr, size_t, CUmem_advise, CUmemLocation))                  \
  X(cuMemAllocHost_v2, CUresult, (void **, size_t))                                                \
  X(cuMemFreeHost, CUresult, (void *))                                                             \
  X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr, const void *, size_t))                                \
  X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void *, size_t, CUstream))                 \
  X(cuMemsetD8_v2, CUresult, (CUdeviceptr, unsigned char, size_t))                                 \
  X(cuMemPrefetchAsync_v2, CUresult, (CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream))
DRIVER(P)

#define MB (1ULL << 20)
#define NPRE 64

/* Memory made before each capture, so that a call has what it needs. */
static CUcontext ctx;
static CUstream own; /* the calling thread's own non-blocking stream */
static CUevent ev;   /* recorded on `own` before the capture */
static CUdeviceptr dev_pre, man_pre, scratch[NPRE];
static void *host_pre;
static int nscratch;
static char hbuf[4096];

enum {
  C_ALLOC,
  C_FREE,
  C_MANAGED,
  C_ADVISE,
  C_HOST_ALLOC,
  C_HOST_FREE,
  C_HTOD,
  C_SET,
  C_HTOD_ASYNC,
  C_EV_QUERY,
  C_EV_SYNC,
  C_EV_CREATE,
  C_SYNC_OTHER,
  C_QUERY_OTHER,
  C_CTX_SYNC,
  C_STREAM_CREATE,
  C_PREFETCH,
  C_COUNT
};
static const char *const names[C_COUNT] = {
    "cuMemAlloc",          "cuMemFree",     "cuMemAllocManaged",  "cuMemAdvise",
    "cuMemAllocHost",      "cuMemFreeHost", "cuMemcpyHtoD",       "cuMemsetD8",
    "cuMemcpyHtoDAsync",   "cuEventQuery",  "cuEventSynchronize", "cuEventCreate",
    "cuStreamSynchronize", "cuStreamQuery", "cuCtxSynchronize",   "cuStreamCreate",
    "cuMemPrefetchAsync"};

/* Scenarios: the capture's mode and stream, the calling thread's mode. */
typedef struct scen {
  const char *name;
  CUstreamCaptureMode cap, caller;
  unsigned flags; /* of the capturing stream */
} scen_t;
static const scen_t scens[] = {
    {"global/global", CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_GLOBAL,
     CU_STREAM_NON_BLOCKING},
    {"global/relaxed", CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_RELAXED,
     CU_STREAM_NON_BLOCKING},
    {"thread-local/global", CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_GLOBAL,
     CU_STREAM_NON_BLOCKING},
    {"relaxed-blocking/relaxed", CU_STREAM_CAPTURE_MODE_RELAXED, CU_STREAM_CAPTURE_MODE_RELAXED, 0},
};
#define NSCEN (sizeof scens / sizeof *scens)

/* The simulator's table: 1 = the call is refused and the capture
 * invalidated, 0 = both fine.  Rows: calls; columns: scenarios. */
static const char sim_table[C_COUNT][NSCEN] = {
    [C_ALLOC] = {1, 0, 0, 0},         [C_FREE] = {1, 1, 1, 1},        [C_MANAGED] = {1, 0, 0, 0},
    [C_ADVISE] = {1, 0, 0, 0},        [C_HOST_ALLOC] = {1, 0, 0, 0},  [C_HOST_FREE] = {1, 0, 0, 0},
    [C_HTOD] = {1, 0, 0, 1},          [C_SET] = {1, 0, 0, 1},         [C_HTOD_ASYNC] = {0, 0, 0, 0},
    [C_EV_QUERY] = {1, 0, 0, 0},      [C_EV_SYNC] = {1, 0, 0, 0},     [C_EV_CREATE] = {0, 0, 0, 0},
    [C_SYNC_OTHER] = {1, 0, 0, 0},    [C_QUERY_OTHER] = {1, 0, 0, 0}, [C_CTX_SYNC] = {1, 1, 1, 1},
    [C_STREAM_CREATE] = {0, 0, 0, 0}, [C_PREFETCH] = {0, 0, 0, 0},
};

static CUresult make_call(int c) {
  CUmemLocation d0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUdeviceptr p = 0;
  void *h = NULL;
  CUevent e;
  CUstream s;
  CUresult r;
  switch (c) {
  case C_ALLOC:
    r = p_cuMemAlloc_v2(&p, MB);
    break;
  case C_FREE:
    r = p_cuMemFree_v2(dev_pre);
    if (r == CUDA_SUCCESS) dev_pre = 0;
    return r;
  case C_MANAGED:
    r = p_cuMemAllocManaged(&p, MB, CU_MEM_ATTACH_GLOBAL);
    break;
  case C_ADVISE:
    return p_cuMemAdvise_v2(man_pre, MB, CU_MEM_ADVISE_SET_READ_MOSTLY, d0);
  case C_HOST_ALLOC:
    r = p_cuMemAllocHost_v2(&h, MB);
    if (r == CUDA_SUCCESS) p_cuMemFreeHost(h); /* after the allocation's verdict */
    return r;
  case C_HOST_FREE: {
    r = p_cuMemFreeHost(host_pre);
    if (r == CUDA_SUCCESS) host_pre = NULL;
    return r;
  }
  case C_HTOD:
    return p_cuMemcpyHtoD_v2(man_pre, hbuf, sizeof hbuf);
  case C_SET:
    return p_cuMemsetD8_v2(man_pre, 1, 4096);
  case C_HTOD_ASYNC:
    return p_cuMemcpyHtoDAsync_v2(man_pre, hbuf, sizeof hbuf, own);
  case C_EV_QUERY:
    r = p_cuEventQuery(ev);
    return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
  case C_EV_SYNC:
    return p_cuEventSynchronize(ev);
  case C_EV_CREATE:
    r = p_cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) p_cuEventDestroy_v2(e);
    return r;
  case C_SYNC_OTHER:
    return p_cuStreamSynchronize(own);
  case C_QUERY_OTHER:
    r = p_cuStreamQuery(own);
    return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
  case C_CTX_SYNC:
    return p_cuCtxSynchronize();
  case C_STREAM_CREATE:
    r = p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) p_cuStreamDestroy_v2(s);
    return r;
  default:
    return p_cuMemPrefetchAsync_v2 ? p_cuMemPrefetchAsync_v2(man_pre, MB, d0, 0, own)
                                   : CUDA_ERROR_NOT_SUPPORTED;
  }
  if (r == CUDA_SUCCESS && nscratch < NPRE) scratch[nscratch++] = p;
  return r;
}

typedef struct job {
  int call;
  CUstreamCaptureMode mode;
  CUresult r;
} job_t;

static void *caller(void *arg) {
  job_t *j = arg;
  CUstreamCaptureMode m = j->mode;
  if (p_cuCtxSetCurrent(ctx) || p_cuThreadExchangeStreamCaptureMode(&m)) {
    j->r = (CUresult)-1;
    return NULL;
  }
  j->r = make_call(j->call);
  return NULL;
}

static int check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return 0;
  fprintf(stderr, "capture_probe: %s failed (%d)\n", what, (int)r);
  exit(2);
}

/* One cell: 1 when the call was refused or the capture did not survive. */
static int cell(int c, const scen_t *sc, CUresult *call_r, CUresult *end_r) {
  check(p_cuStreamCreate(&own, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(p_cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  check(p_cuEventRecord(ev, own), "cuEventRecord");
  if (!dev_pre) check(p_cuMemAlloc_v2(&dev_pre, MB), "cuMemAlloc");
  if (!man_pre) check(p_cuMemAllocManaged(&man_pre, MB, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
  if (!host_pre) check(p_cuMemAllocHost_v2(&host_pre, MB), "cuMemAllocHost");
  check(p_cuCtxSynchronize(), "cuCtxSynchronize");
  CUstream cs;
  check(p_cuStreamCreate(&cs, sc->flags), "cuStreamCreate");
  check(p_cuStreamBeginCapture_v2(cs, sc->cap), "cuStreamBeginCapture");
  job_t j = {.call = c, .mode = sc->caller};
  pthread_t t;
  pthread_create(&t, NULL, caller, &j);
  pthread_join(t, NULL);
  CUgraph g = NULL;
  *end_r = p_cuStreamEndCapture(cs, &g);
  if (g) p_cuGraphDestroy(g);
  *call_r = j.r;
  check(p_cuStreamSynchronize(own), "cuStreamSynchronize");
  p_cuStreamDestroy_v2(cs);
  p_cuEventDestroy_v2(ev);
  p_cuStreamDestroy_v2(own);
  while (nscratch > 0)
    p_cuMemFree_v2(scratch[--nscratch]);
  return j.r != CUDA_SUCCESS || *end_r != CUDA_SUCCESS;
}

int main(int argc, char **argv) {
  int exact = argc > 1 && !strcmp(argv[1], "--exact");
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    printf("capture_probe: no libcuda.so.1 (%s): skipped\n", dlerror());
    return 77;
  }
#define L(name, ret, params) p_##name = (ret(*) params)dlsym(lib, #name);
  DRIVER(L)
  CUdevice d;
  if (!p_cuInit || p_cuInit(0) != CUDA_SUCCESS || p_cuDeviceGet(&d, 0) != CUDA_SUCCESS) {
    printf("capture_probe: no CUDA device: skipped\n");
    return 77;
  }
  check(p_cuDevicePrimaryCtxRetain(&ctx, d), "cuDevicePrimaryCtxRetain");
  check(p_cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  memset(hbuf, 7, sizeof hbuf);
  int defects = 0, lenient = 0;
  printf("%-20s", "call \\ capture/caller");
  for (size_t s = 0; s < NSCEN; s++)
    printf(" %-26s", scens[s].name);
  printf("\n");
  for (int c = 0; c < C_COUNT; c++) {
    printf("%-20s", names[c]);
    for (size_t s = 0; s < NSCEN; s++) {
      CUresult cr, er;
      int bad = cell(c, &scens[s], &cr, &er);
      char buf[40];
      snprintf(buf, sizeof buf, "%s(%d/%d)", bad ? "refused" : "ok", (int)cr, (int)er);
      printf(" %-26s", buf);
      if (bad && !sim_table[c][s]) defects++;
      if (!bad && sim_table[c][s]) lenient++;
    }
    printf("\n");
  }
  printf("capture_probe: %d cells where the driver is stricter than the simulator's table, "
         "%d where it is more lenient (deliberate)\n",
         defects, lenient);
  return defects || (exact && lenient) ? 1 : 0;
}
