/* vx_fail: a driver failure injected (SIMCUDA_FAIL) into each hooked entry
 * point reaches the application exactly as it would without vx, and
 * nothing crashes; an injected OOM on cuMemAlloc_v2 becomes a managed
 * fallback under vx. */
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "vxt.h"

#define MB (1ULL << 20)
#define INJECTED 999 /* CUDA_ERROR_UNKNOWN: no fallback applies to it */

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, unsigned, CUstream, void **);
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);

static const char *const hooks[] = {
#define VX_HOOK(fam, name, stream, base, ret, params) #name,
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
};

static CUfunction k_fill, k_add, k_nop;
static CUdeviceptr nop_args[8];
static void *nop_params[8];

static void setup(void) {
  vxt_api_t a;
  vxt_api_load(&a, "linked", 0);
  vxt_ctx(&a, 0);
  vxt_module(&a, &k_fill, &k_add, &k_nop);
  for (int i = 0; i < 8; i++)
    nop_params[i] = &nop_args[i];
}

/* Entry points the simulator may lack, found the way an application would
 * (dlsym on libcuda.so.1, which hands out vx's hook under vx). */
static void *entry(const char *name) {
  static void *h;
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
  return h ? dlsym(h, name) : NULL;
}

typedef CUresult (*gran_fn)(size_t *, const CUmemAllocationProp *,
                            CUmemAllocationGranularity_flags);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*vafree_fn)(CUdeviceptr, size_t);

static CUresult vmm(const char *probe) {
  gran_fn gran_get = (gran_fn)entry("cuMemGetAllocationGranularity");
  create_fn create = (create_fn)entry("cuMemCreate");
  release_fn release = (release_fn)entry("cuMemRelease");
  reserve_fn reserve = (reserve_fn)entry("cuMemAddressReserve");
  map_fn map = (map_fn)entry("cuMemMap");
  unmap_fn unmap = (unmap_fn)entry("cuMemUnmap");
  vafree_fn vafree = (vafree_fn)entry("cuMemAddressFree");
  if (!create || !release || !reserve || !map || !unmap || !vafree) return (CUresult)-77;
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  size_t gran = 2 * MB;
  if (gran_get) gran_get(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CUmemGenericAllocationHandle h;
  CUresult r = create(&h, gran, &prop, 0);
  if (!strcmp(probe, "cuMemCreate") || r != CUDA_SUCCESS) {
    if (r == CUDA_SUCCESS) release(h);
    return r;
  }
  if (!strcmp(probe, "cuMemRelease")) return release(h);
  CUdeviceptr va;
  VXT_CU(reserve(&va, gran, 0, 0, 0));
  r = map(va, gran, 0, h, 0);
  if (!strcmp(probe, "cuMemMap")) {
    if (r == CUDA_SUCCESS) unmap(va, gran);
  } else {
    VXT_CU(r);
    r = unmap(va, gran);
  }
  vafree(va, gran);
  release(h);
  return r;
}

static CUresult graph_launch(int ptsz) {
  CUstream s;
  CUgraph g;
  CUgraphExec e;
  VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  VXT_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  VXT_CU(cuLaunchKernel(k_nop, 1, 1, 1, 32, 1, 1, 0, s, nop_params, NULL));
  VXT_CU(cuStreamEndCapture(s, &g));
  VXT_CU(cuGraphInstantiateWithFlags(&e, g, 0));
  CUresult r = ptsz ? cuGraphLaunch_ptsz(e, s) : cuGraphLaunch(e, s);
  VXT_CU(cuStreamSynchronize(s));
  return r;
}

/* cuGraphInstantiateWithFlags / cuGraphExecDestroy on a captured graph. */
static CUresult graph_make(const char *e) {
  CUstream s;
  CUgraph g;
  CUgraphExec x;
  VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  VXT_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  VXT_CU(cuLaunchKernel(k_nop, 1, 1, 1, 32, 1, 1, 0, s, nop_params, NULL));
  VXT_CU(cuStreamEndCapture(s, &g));
  CUresult r = cuGraphInstantiateWithFlags(&x, g, 0);
  if (!strcmp(e, "cuGraphInstantiateWithFlags") || r != CUDA_SUCCESS) return r;
  return cuGraphExecDestroy(x);
}

/* The capture hooks: a begin in the form named (through dlsym on the
 * driver: vx's dlsym hands out its hook), then an end; or the end named. */
static CUresult capture_probe(const char *e) {
  CUstream s;
  CUgraph g;
  VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  int ptsz = strstr(e, "_ptsz") != NULL;
  CUstream h = ptsz ? NULL : s; /* NULL: the per-thread stream */
  const CUstreamCaptureMode gm = CU_STREAM_CAPTURE_MODE_GLOBAL;
  if (!strncmp(e, "cuStreamBeginCapture", 20)) {
    void *f = entry(e);
    if (!f) return (CUresult)-77;
    CUgraph into;
    VXT_CU(cuGraphCreate(&into, 0));
    typedef CUresult (*to_graph_fn)(CUstream, CUgraph, const CUgraphNode *, const CUgraphEdgeData *,
                                    size_t, CUstreamCaptureMode);
    CUresult r = strstr(e, "ToGraph") ? ((to_graph_fn)f)(h, into, NULL, NULL, 0, gm)
                 : strstr(e, "_v2")   ? ((CUresult(*)(CUstream, CUstreamCaptureMode))f)(h, gm)
                                      : ((CUresult(*)(CUstream))f)(h);
    if (r == CUDA_SUCCESS)
      VXT_CU(ptsz ? cuStreamEndCapture_ptsz(h, &g) : cuStreamEndCapture(h, &g));
    return r;
  }
  VXT_CU(ptsz ? cuStreamBeginCapture_v2_ptsz(h, gm) : cuStreamBeginCapture_v2(h, gm));
  return ptsz ? cuStreamEndCapture_ptsz(h, &g) : cuStreamEndCapture(h, &g);
}

typedef struct {
  unsigned long long total, free, used;
} nvml_mem_t;

static CUresult nvml(int v2) {
  void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!nv) return (CUresult)-77;
  int (*init)(void) = (int (*)(void))dlsym(nv, "nvmlInit_v2");
  int (*handle)(unsigned, void **) =
      (int (*)(unsigned, void **))dlsym(nv, "nvmlDeviceGetHandleByIndex_v2");
  int (*mem)(void *, void *) = (int (*)(void *, void *))dlsym(nv, v2 ? "nvmlDeviceGetMemoryInfo_v2"
                                                                     : "nvmlDeviceGetMemoryInfo");
  void *h;
  unsigned long long buf[5] = {(unsigned)40 | (2u << 24)};
  VXT_ASSERT(init && handle && mem && init() == 0 && handle(0, &h) == 0);
  return (CUresult)mem(h, buf);
}

/* Copies, sets and prefetches (interpose/copy.c), reached by dlsym like an
 * application would; -77 where the simulator lacks the entry point. */
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*dtod_fn)(CUdeviceptr, CUdeviceptr, size_t);
typedef CUresult (*peer_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
typedef CUresult (*set8_fn)(CUdeviceptr, unsigned char, size_t);
typedef CUresult (*set16_fn)(CUdeviceptr, unsigned short, size_t);
typedef CUresult (*set32_fn)(CUdeviceptr, unsigned int, size_t);
static CUresult copy_probe(const char *e) {
  static char host[1 << 16];
  void *f = entry(e);
  if (!f) return (CUresult)-77;
  CUdeviceptr d, d2, m;
  CUcontext ctx;
  VXT_CU(cuMemAlloc_v2(&d, MB));
  VXT_CU(cuMemAlloc_v2(&d2, MB));
  VXT_CU(cuCtxGetCurrent(&ctx));
  int async = strstr(e, "Async") != NULL;
  CUstream s = NULL;
  if (!strncmp(e, "cuMemcpyHtoD", 12))
    return async ? ((CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))f)(d, host, 4096, s)
                 : ((htod_fn)f)(d, host, 4096);
  if (!strncmp(e, "cuMemcpyDtoH", 12))
    return async ? ((CUresult(*)(void *, CUdeviceptr, size_t, CUstream))f)(host, d, 4096, s)
                 : ((dtoh_fn)f)(host, d, 4096);
  if (!strncmp(e, "cuMemcpyPeer", 12))
    return async ? ((CUresult(*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
                                 CUstream))f)(d2, ctx, d, ctx, 4096, s)
                 : ((peer_fn)f)(d2, ctx, d, ctx, 4096);
  if (!strncmp(e, "cuMemcpy2D", 10)) {
    CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = 1024,
                       .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = host, .dstPitch = 1024,
                       .WidthInBytes = 1024, .Height = 4};
    return async ? ((CUresult(*)(const CUDA_MEMCPY2D *, CUstream))f)(&c, s)
                 : ((CUresult(*)(const CUDA_MEMCPY2D *))f)(&c);
  }
  if (!strncmp(e, "cuMemcpy3D", 10)) {
    CUDA_MEMCPY3D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = 1024,
                       .srcHeight = 4, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = host,
                       .dstPitch = 1024, .dstHeight = 4, .WidthInBytes = 1024, .Height = 4,
                       .Depth = 1};
    return async ? ((CUresult(*)(const CUDA_MEMCPY3D *, CUstream))f)(&c, s)
                 : ((CUresult(*)(const CUDA_MEMCPY3D *))f)(&c);
  }
  if (!strncmp(e, "cuMemcpy", 8)) /* DtoD, cuMemcpy, cuMemcpyAsync */
    return async ? ((CUresult(*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))f)(d2, d, 4096, s)
                 : ((dtod_fn)f)(d2, d, 4096);
  if (!strncmp(e, "cuMemsetD8", 10))
    return async ? ((CUresult(*)(CUdeviceptr, unsigned char, size_t, CUstream))f)(d, 1, 64, s)
                 : ((set8_fn)f)(d, 1, 64);
  if (!strncmp(e, "cuMemsetD16", 11))
    return async ? ((CUresult(*)(CUdeviceptr, unsigned short, size_t, CUstream))f)(d, 1, 64, s)
                 : ((set16_fn)f)(d, 1, 64);
  if (!strncmp(e, "cuMemsetD32", 11))
    return async ? ((CUresult(*)(CUdeviceptr, unsigned int, size_t, CUstream))f)(d, 1, 64, s)
                 : ((set32_fn)f)(d, 1, 64);
  VXT_CU(cuMemAllocManaged(&m, MB, CU_MEM_ATTACH_GLOBAL));
  CUmemLocation dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  if (!strncmp(e, "cuMemPrefetchBatchAsync", 23)) {
    size_t n = MB, idx = 0;
    return ((CUresult(*)(CUdeviceptr *, size_t *, size_t, CUmemLocation *, size_t *, size_t,
                         unsigned long long, CUstream))f)(&m, &n, 1, &dev, &idx, 1, 0, s);
  }
  if (!strncmp(e, "cuMemPrefetchAsync", 18))
    return ((CUresult(*)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream))f)(m, MB, dev, 0,
                                                                                    s);
  return (CUresult)-1;
}

/* The library hooks (CUkernel handles): a library loaded, then each call,
 * the earlier ones made first, then the CUkernel launched. */
static CUresult library_probe(const char *e) {
  CUlibrary lib;
  CUkernel k;
  CUfunction f;
  CUresult r = cuLibraryLoadData(&lib, vxt_ptx, NULL, NULL, 0, NULL, NULL, 0);
  if (r != CUDA_SUCCESS) return r;
  if (!strcmp(e, "cuLibraryEnumerateKernels")) {
    CUkernel ks[3];
    return cuLibraryEnumerateKernels(ks, 3, lib);
  }
  r = cuLibraryGetKernel(&k, lib, "vxt_nop8");
  if (r != CUDA_SUCCESS || !strcmp(e, "cuLibraryGetKernel")) return r;
  r = cuKernelGetFunction(&f, k);
  if (r != CUDA_SUCCESS) return r;
  return cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, nop_params, NULL);
}

/* The entry points of issue #12 point 8/9 (interpose/copy_batch.c,
 * graph_update.c, ipc.c), each called with its own signature. */
static CUgraph capture_nop(CUstream s) {
  CUgraph g;
  VXT_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  VXT_CU(cuLaunchKernel(k_nop, 1, 1, 1, 32, 1, 1, 0, s, nop_params, NULL));
  VXT_CU(cuStreamEndCapture(s, &g));
  return g;
}

static CUresult graph_change(const char *e, void *f, CUstream s) {
  CUgraph g = capture_nop(s);
  CUgraphExec x;
  if (!strncmp(e, "cuGraphInstantiateWithParams", 28)) {
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = 0};
    return ((CUresult(*)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *))f)(&x, g, &ip);
  }
  VXT_CU(cuGraphInstantiateWithFlags(&x, g, 0));
  if (!strncmp(e, "cuGraphExecUpdate", 17)) {
    CUgraph g2 = capture_nop(s);
    CUgraphExecUpdateResultInfo info;
    CUgraphNode bad;
    CUgraphExecUpdateResult res;
    return strstr(e, "_v2")
               ? ((CUresult(*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *))f)(x, g2, &info)
               : ((CUresult(*)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *))f)(
                     x, g2, &bad, &res);
  }
  CUgraphNode node;
  size_t nn = 1;
  CUDA_KERNEL_NODE_PARAMS p;
  void *get_nodes = entry("cuGraphGetNodes"), *get_params = entry("cuGraphKernelNodeGetParams_v2");
  if (!get_nodes || !get_params) return (CUresult)-77;
  VXT_CU(((CUresult(*)(CUgraph, CUgraphNode *, size_t *))get_nodes)(g, &node, &nn));
  VXT_CU(((CUresult(*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *))get_params)(node, &p));
  return ((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *))f)(x, node, &p);
}

/* cuGraphExec{Memset,Memcpy}NodeSetParams and cuGraphExecNodeSetParams
 * (issue #13): an exec of one captured set or copy, changed to the other
 * buffer. */
static CUresult graph_mem_change(const char *e, void *f, CUstream s, CUdeviceptr d,
                                 CUdeviceptr d2, CUcontext ctx) {
  int generic = !strcmp(e, "cuGraphExecNodeSetParams");
  int set = generic || !strncmp(e, "cuGraphExecMemset", 17);
  CUgraph g;
  CUgraphExec x;
  CUgraphNode node;
  size_t nn = 1;
  VXT_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  if (set) VXT_CU(cuMemsetD32Async(d, 1, 1024, s));
  else VXT_CU(cuMemcpyDtoDAsync_v2(d2, d, 4096, s));
  VXT_CU(cuStreamEndCapture(s, &g));
  VXT_CU(cuGraphInstantiateWithFlags(&x, g, 0));
  void *get_nodes = entry("cuGraphGetNodes");
  void *get = entry(set ? "cuGraphMemsetNodeGetParams" : "cuGraphMemcpyNodeGetParams");
  if (!get_nodes || !get) return (CUresult)-77;
  VXT_CU(((CUresult(*)(CUgraph, CUgraphNode *, size_t *))get_nodes)(g, &node, &nn));
  if (set) {
    CUDA_MEMSET_NODE_PARAMS p;
    VXT_CU(((CUresult(*)(CUgraphNode, CUDA_MEMSET_NODE_PARAMS *))get)(node, &p));
    p.dst = d2;
    if (generic) {
      CUgraphNodeParams np;
      memset(&np, 0, sizeof np);
      np.type = CU_GRAPH_NODE_TYPE_MEMSET;
      np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){
          p.dst, p.pitch, p.value, p.elementSize, p.width, p.height, ctx};
      return ((CUresult(*)(CUgraphExec, CUgraphNode, CUgraphNodeParams *))f)(x, node, &np);
    }
    return ((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *, CUcontext))f)(
        x, node, &p, ctx);
  }
  CUDA_MEMCPY3D p;
  VXT_CU(((CUresult(*)(CUgraphNode, CUDA_MEMCPY3D *))get)(node, &p));
  p.srcDevice = d2, p.dstDevice = d;
  return ((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_MEMCPY3D *, CUcontext))f)(x, node, &p,
                                                                                     ctx);
}

static CUresult array_copy(const char *e, void *f, CUdeviceptr d) {
  void *create = entry("cuArrayCreate_v2");
  if (!create) return (CUresult)-77;
  CUarray a;
  CUDA_ARRAY_DESCRIPTOR desc = {
      .Width = 4096, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
  VXT_CU(((CUresult(*)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *))create)(&a, &desc));
  if (!strncmp(e, "cuMemcpyAtoD", 12))
    return ((CUresult(*)(CUdeviceptr, CUarray, size_t, size_t))f)(d, a, 0, 4096);
  return ((CUresult(*)(CUarray, size_t, CUdeviceptr, size_t))f)(a, 0, d, 4096);
}

static CUresult entry_probe(const char *e, void *f) {
  CUdeviceptr d, d2, m;
  CUcontext ctx;
  CUstream s;
  static char host[1 << 16];
  VXT_CU(cuMemAlloc_v2(&d, MB));
  VXT_CU(cuMemAlloc_v2(&d2, MB));
  VXT_CU(cuMemsetD32_v2(d, 0, MB / 4));
  VXT_CU(cuCtxGetCurrent(&ctx));
  VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  int v2 = strstr(e, "_v2") != NULL, async = strstr(e, "Async") != NULL;
  if (!strncmp(e, "cuMemcpyBatchAsync", 18)) {
    size_t n = 4096, idx = 0, fail;
    CUmemcpyAttributes at = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    return v2 ? ((CUresult(*)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *,
                              size_t *, size_t, CUstream))f)(&d2, &d, &n, 1, &at, &idx, 1, s)
              : ((CUresult(*)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *,
                              size_t *, size_t, size_t *, CUstream))f)(&d2, &d, &n, 1, &at, &idx, 1,
                                                                       &fail, s);
  }
  if (!strncmp(e, "cuMemcpy3DBatchAsync", 20)) {
    CUDA_MEMCPY3D_BATCH_OP op = {.extent = {4096, 1, 1},
                                 .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.src.op.ptr.ptr = d, op.dst.op.ptr.ptr = d2;
    size_t fail;
    return v2 ? ((CUresult(*)(size_t, CUDA_MEMCPY3D_BATCH_OP *, unsigned long long, CUstream))f)(
                    1, &op, 0, s)
              : ((CUresult(*)(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long,
                              CUstream))f)(1, &op, &fail, 0, s);
  }
  if (!strncmp(e, "cuMemcpy3DPeer", 14)) {
    CUDA_MEMCPY3D_PEER c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                            .srcDevice = d,
                            .srcContext = ctx,
                            .srcPitch = 1024,
                            .srcHeight = 4,
                            .dstMemoryType = CU_MEMORYTYPE_HOST,
                            .dstHost = host,
                            .dstContext = ctx,
                            .dstPitch = 1024,
                            .dstHeight = 4,
                            .WidthInBytes = 1024,
                            .Height = 4,
                            .Depth = 1};
    return async ? ((CUresult(*)(const CUDA_MEMCPY3D_PEER *, CUstream))f)(&c, NULL)
                 : ((CUresult(*)(const CUDA_MEMCPY3D_PEER *))f)(&c);
  }
  if (!strncmp(e, "cuMemsetD2D", 11)) {
    int el = strstr(e, "D2D8") ? 1 : strstr(e, "D2D16") ? 2 : 4;
    if (el == 1)
      return async ? ((CUresult(*)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream))f)(
                         d, 4096, 1, 64, 4, NULL)
                   : ((CUresult(*)(CUdeviceptr, size_t, unsigned char, size_t, size_t))f)(d, 4096,
                                                                                          1, 64, 4);
    if (el == 2)
      return async
                 ? ((CUresult(*)(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream))f)(
                       d, 4096, 1, 64, 4, NULL)
                 : ((CUresult(*)(CUdeviceptr, size_t, unsigned short, size_t, size_t))f)(d, 4096, 1,
                                                                                         64, 4);
    return async ? ((CUresult(*)(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream))f)(
                       d, 4096, 1, 64, 4, NULL)
                 : ((CUresult(*)(CUdeviceptr, size_t, unsigned int, size_t, size_t))f)(d, 4096, 1,
                                                                                       64, 4);
  }
  if (!strncmp(e, "cuMemcpyAtoD", 12) || !strncmp(e, "cuMemcpyDtoA", 12))
    return array_copy(e, f, d);
  if (!strncmp(e, "cuStreamWriteValue", 18) || !strncmp(e, "cuStreamWaitValue", 17)) {
    unsigned flags = strstr(e, "Wait") ? CU_STREAM_WAIT_VALUE_EQ : 0; /* d holds 0 */
    return strstr(e, "64")
               ? ((CUresult(*)(CUstream, CUdeviceptr, cuuint64_t, unsigned))f)(s, d, 0, flags)
               : ((CUresult(*)(CUstream, CUdeviceptr, cuuint32_t, unsigned))f)(s, d, 0, flags);
  }
  if (!strncmp(e, "cuStreamBatchMemOp", 18)) {
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof op);
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = d;
    return ((CUresult(*)(CUstream, unsigned, CUstreamBatchMemOpParams *, unsigned))f)(s, 1, &op, 0);
  }
  if (!strcmp(e, "cuMemPrefetchAsync") || !strcmp(e, "cuMemPrefetchAsync_ptsz")) {
    VXT_CU(cuMemAllocManaged(&m, MB, CU_MEM_ATTACH_GLOBAL));
    return ((CUresult(*)(CUdeviceptr, size_t, CUdevice, CUstream))f)(m, MB, 0, NULL);
  }
  if (!strncmp(e, "cuGraphExecMem", 14) || !strcmp(e, "cuGraphExecNodeSetParams"))
    return graph_mem_change(e, f, s, d, d2, ctx);
  if (!strncmp(e, "cuGraphInstantiateWithParams", 28) || !strncmp(e, "cuGraphExec", 11))
    return graph_change(e, f, s);
  if (!strcmp(e, "cuIpcGetMemHandle")) {
    CUipcMemHandle h;
    return ((CUresult(*)(CUipcMemHandle *, CUdeviceptr))f)(&h, d);
  }
  return (CUresult)-1;
}

static int is_entry_probe(const char *e) {
  static const char *const pre[] = {"cuMemcpyBatchAsync",
                                    "cuMemcpy3DBatchAsync",
                                    "cuMemcpy3DPeer",
                                    "cuMemsetD2D",
                                    "cuMemcpyAtoD",
                                    "cuMemcpyDtoA",
                                    "cuStreamWriteValue",
                                    "cuStreamWaitValue",
                                    "cuStreamBatchMemOp",
                                    "cuGraphInstantiateWithParams",
                                    "cuGraphExecKernelNodeSetParams",
                                    "cuGraphExecUpdate",
                                    "cuIpcGetMemHandle",
                                    "cuGraphExecMem",
                                    "cuGraphExecNodeSetParams"};
  for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
    if (!strncmp(e, pre[i], strlen(pre[i]))) return 1;
  return !strcmp(e, "cuMemPrefetchAsync") || !strcmp(e, "cuMemPrefetchAsync_ptsz");
}

static CUresult probe(const char *e) {
  CUdeviceptr p = 0;
  size_t x, y;
  void *hp;
  CUstream s = NULL;
  if (is_entry_probe(e)) {
    void *f = entry(e);
    return f ? entry_probe(e, f) : (CUresult)-77;
  }
  if (!strcmp(e, "cuDeviceTotalMem_v2")) return cuDeviceTotalMem_v2(&x, 0);
  if (!strcmp(e, "cuMemGetInfo_v2")) return cuMemGetInfo_v2(&x, &y);
  if (!strcmp(e, "cuMemAlloc_v2")) return cuMemAlloc_v2(&p, MB);
  if (!strcmp(e, "cuMemAllocPitch_v2")) return cuMemAllocPitch_v2(&p, &x, 1000, 100, 4);
  if (!strcmp(e, "cuMemAllocManaged")) return cuMemAllocManaged(&p, MB, CU_MEM_ATTACH_GLOBAL);
  if (!strcmp(e, "cuMemFree_v2")) {
    VXT_CU(cuMemAlloc_v2(&p, MB));
    return cuMemFree_v2(p);
  }
  if (!strcmp(e, "cuMemGetAddressRange_v2")) {
    VXT_CU(cuMemAlloc_v2(&p, MB));
    return cuMemGetAddressRange_v2(&p, &x, p + 10);
  }
  if (!strncmp(e, "cuMemAllocAsync", 15)) {
    VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return strstr(e, "_ptsz") ? cuMemAllocAsync_ptsz(&p, MB, NULL) : cuMemAllocAsync(&p, MB, s);
  }
  if (!strncmp(e, "cuMemAllocFromPoolAsync", 23)) {
    CUmemoryPool pool;
    CUresult (*getpool)(CUmemoryPool *, CUdevice) =
        (CUresult(*)(CUmemoryPool *, CUdevice))entry("cuDeviceGetDefaultMemPool");
    CUresult (*from_pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream) =
        (CUresult(*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream))entry(e);
    if (!getpool || !from_pool || getpool(&pool, 0) != CUDA_SUCCESS) return (CUresult)-77;
    VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return from_pool(&p, MB, pool, strstr(e, "_ptsz") ? NULL : s);
  }
  if (!strncmp(e, "cuMemFreeAsync", 14)) {
    VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    VXT_CU(cuMemAllocAsync(&p, MB, s)); /* native: vx hands the free to the driver */
    return strstr(e, "_ptsz") ? cuMemFreeAsync_ptsz(p, s) : cuMemFreeAsync(p, s);
  }
  if (!strcmp(e, "cuMemCreate") || !strcmp(e, "cuMemRelease") || !strcmp(e, "cuMemMap") ||
      !strcmp(e, "cuMemUnmap"))
    return vmm(e);
  if (!strcmp(e, "cuMemHostAlloc")) return cuMemHostAlloc(&hp, MB, 0);
  if (!strcmp(e, "cuMemAllocHost_v2")) return cuMemAllocHost_v2(&hp, MB);
  if (!strcmp(e, "cuMemFreeHost")) {
    VXT_CU(cuMemAllocHost_v2(&hp, MB));
    return cuMemFreeHost(hp);
  }
  if (!strcmp(e, "cuLaunchKernel"))
    return cuLaunchKernel(k_nop, 1, 1, 1, 32, 1, 1, 0, NULL, nop_params, NULL);
  if (!strcmp(e, "cuLaunchKernel_ptsz"))
    return cuLaunchKernel_ptsz(k_nop, 1, 1, 1, 32, 1, 1, 0, NULL, nop_params, NULL);
  if (!strncmp(e, "cuLaunchKernelEx", 16)) {
    CUlaunchConfig cfg = {.gridDimX = 1,
                          .gridDimY = 1,
                          .gridDimZ = 1,
                          .blockDimX = 32,
                          .blockDimY = 1,
                          .blockDimZ = 1};
    return strstr(e, "_ptsz") ? cuLaunchKernelEx_ptsz(&cfg, k_nop, nop_params, NULL)
                              : cuLaunchKernelEx(&cfg, k_nop, nop_params, NULL);
  }
  if (!strcmp(e, "cuLaunchCooperativeKernel"))
    return cuLaunchCooperativeKernel(k_nop, 1, 1, 1, 32, 1, 1, 0, NULL, nop_params);
  if (!strcmp(e, "cuLaunchCooperativeKernel_ptsz"))
    return cuLaunchCooperativeKernel_ptsz(k_nop, 1, 1, 1, 32, 1, 1, 0, NULL, nop_params);
  if (!strcmp(e, "cuGraphLaunch")) return graph_launch(0);
  if (!strcmp(e, "cuGraphLaunch_ptsz")) return graph_launch(1);
  if (!strcmp(e, "cuGetProcAddress")) return cuGetProcAddress("cuInit", &hp, 12000, 0);
  if (!strcmp(e, "cuGetProcAddress_v2")) return cuGetProcAddress_v2("cuInit", &hp, 12000, 0, NULL);
  if (!strcmp(e, "nvmlDeviceGetMemoryInfo")) return nvml(0);
  if (!strcmp(e, "nvmlDeviceGetMemoryInfo_v2")) return nvml(1);
  if (!strncmp(e, "cuGraphInstantiate", 18) || !strcmp(e, "cuGraphExecDestroy")) return graph_make(e);
  if (!strncmp(e, "cuMemcpy", 8) || !strncmp(e, "cuMemset", 8) || !strncmp(e, "cuMemPrefetch", 13))
    return copy_probe(e);
  if (!strncmp(e, "cuLibrary", 9) || !strcmp(e, "cuKernelGetFunction")) return library_probe(e);

  if (!strncmp(e, "cuStreamBeginCapture", 20) || !strncmp(e, "cuStreamEndCapture", 18))
    return capture_probe(e);
  return (CUresult)-1;
}

static int worker(const char *entry) {
  setup();
  CUresult r = probe(entry);
  cuCtxSynchronize();
  printf("result %d\n", (int)r);
  return 0;
}

static int result_of(const vxt_run_t *r, const char *entry, const char *who) {
  const char *p = strstr(r->out, "result ");
  VXT_ASSERT(r->status == 0 && p, "%s %s: status %d\n%s%s", entry, who, r->status, r->out, r->err);
  return atoi(p + 7);
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "--worker")) return worker(argv[2]);
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  static vxt_run_t r;
  int tested = 0;
  for (size_t i = 0; i < sizeof hooks / sizeof *hooks; i++) {
    if (!strcmp(hooks[i], "dlsym")) continue; /* libc's, not the driver's: nothing to inject */
    char fail[160];
    snprintf(fail, sizeof fail, "SIMCUDA_FAIL=%s:1:%d", hooks[i], INJECTED);
    const char *env[] = {"SIMCUDA_VRAM=64M", "VX_DEVICE_LIMIT=16M", fail, NULL};
    const char *args[] = {hooks[i], NULL};
    VXT_ASSERT(vxt_run(&r, 0, env, args) == 0);
    int plain = result_of(&r, hooks[i], "without vx");
    VXT_ASSERT(plain != -1, "%s: no scenario in prog_fail.c for this hook", hooks[i]);
    if (plain == 0 && !strncmp(hooks[i], "nvml", 4)) {
      printf("%-32s skipped (the simulated NVML cannot inject failures)\n", hooks[i]);
      continue;
    }
    if (plain == -77) {
      printf("%-32s skipped (the simulator lacks what it needs)\n", hooks[i]);
      continue;
    }
    VXT_ASSERT(plain == INJECTED, "%s: the injected failure did not reach the probe (%d)", hooks[i],
               plain);
    VXT_ASSERT(vxt_run(&r, 1, env, args) == 0);
    int with = result_of(&r, hooks[i], "with vx");
    VXT_ASSERT(with == plain, "%s: with vx %d, without %d", hooks[i], with, plain);
    printf("%-32s error %d, with and without vx\n", hooks[i], with);
    tested++;
  }
  /* an OOM from the native allocation becomes a managed fallback */
  char report[256], env_report[300];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(env_report, sizeof env_report, "VX_REPORT=%s", report);
  const char *env[] = {"SIMCUDA_VRAM=64M", "SIMCUDA_FAIL=cuMemAlloc_v2:1", env_report, NULL};
  const char *args[] = {"cuMemAlloc_v2", NULL};
  VXT_ASSERT(vxt_run(&r, 0, env, args) == 0 &&
             result_of(&r, "oom", "without vx") == CUDA_ERROR_OUT_OF_MEMORY);
  VXT_ASSERT(vxt_run(&r, 1, env, args) == 0 && result_of(&r, "oom", "with vx") == CUDA_SUCCESS);
  char *json = vxt_read_file(report);
  VXT_ASSERT(json);
  unlink(report);
  VXT_ASSERT(vxt_json_u64(json, 0, "managed_fallbacks") == 1 &&
                 vxt_json_u64(json, 0, "alloc_managed") == 1,
             "%s", json);
  free(json);
  printf("%d entry points: injected errors reach the application unchanged; OOM falls back\n",
         tested);
  VXT_ASSERT(tested >= 20, "only %d entry points tested", tested);
  return 0;
}
