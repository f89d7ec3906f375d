/* gpu_facts: settles, on whatever driver it loads, the questions the simulator
 * cannot answer for itself; prints them as one JSON object for gpu-check.sh.
 *
 *   gpu_facts [--sizes 1G,4G]     managed sizes for the bandwidth figures
 *
 * Keys (null where the driver lacks what a question needs, with a reason):
 *   procaddr_equal_after_init  cuGetProcAddress_v2 answers the same before and
 *                              after cuInit (cudart looks up before cuInit)
 *   free_after_ctx_bytes       cuMemGetInfo free right after the primary context
 *   free_after_cublas_bytes    ... after cublasCreate and one SGEMM (dlopen'ed)
 *   cukernel_param_info        what cuFuncGetParamInfo returns for a CUkernel
 *   cukernel_func_name         what cuFuncGetName returns for a CUkernel
 *   batch_null_stream          both batch calls on NULL vs on a created stream
 *   graph_node_kind            a captured CUkernel launch's node: func, kern, both
 *   prefetch_gbps, fault_gbps  managed memory moved to the device by
 *                              cuMemPrefetchAsync vs by a kernel's faults
 * It never asks for more managed memory than half of what the device has free. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

static void *drv;

static void *sym(const char *name) {
  return drv ? dlsym(drv, name) : NULL;
}

static const char *rname(CUresult r) {
  return kit_err_name(r);
}

/* ---- JSON output: "key":value pairs, comma-separated ---- */
static int nkeys;

static void key(const char *k) {
  printf("%s\"%s\":", nkeys++ ? "," : "", k);
}

static void put_str(const char *k, const char *v) {
  key(k);
  if (v)
    printf("\"%s\"", v);
  else
    printf("null");
}

static void put_null(const char *k, const char *why) {
  key(k);
  printf("null");
  fprintf(stderr, "gpu_facts: %s: %s\n", k, why);
}

// ---- before cuInit ----

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);

static const char *const lookups[] = {"cuMemAlloc", "cuLaunchKernel", "cuGetProcAddress",
                                      "cuMemPrefetchAsync", "cuLibraryGetKernel"};
#define NLOOK (sizeof lookups / sizeof lookups[0])

static int lookup_all(gpa_fn gpa, void **out) {
  for (size_t i = 0; i < NLOOK; i++) {
    CUdriverProcAddressQueryResult st;
    out[i] = NULL;
    if (gpa(lookups[i], &out[i], 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS)
      out[i] = NULL;
  }
  return 0;
}

// ---- cuBLAS, found at run time ----

typedef int (*blas_create_fn)(void **);
typedef int (*blas_destroy_fn)(void *);
typedef int (*blas_sgemm_fn)(void *, int, int, int, int, int, const float *, const float *, int,
                             const float *, int, const float *, float *, int);

static int cublas_free_after(size_t *free_b) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  void *h = NULL;
  for (size_t i = 0; !h && i < 3; i++)
    h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
  blas_create_fn create = (blas_create_fn)dlsym(h, "cublasCreate_v2");
  blas_destroy_fn destroy = (blas_destroy_fn)dlsym(h, "cublasDestroy_v2");
  blas_sgemm_fn sgemm = (blas_sgemm_fn)dlsym(h, "cublasSgemm_v2");
  void *handle = NULL;
  if (!create || !destroy || !sgemm || create(&handle) != 0) return -2;
  enum { N = 256 };
  CUdeviceptr a = 0, b = 0, c = 0;
  const float one = 1.0f, zero = 0.0f;
  int ok =
      kit_cu.cuMemAlloc_v2(&a, N * N * 4) == CUDA_SUCCESS &&
      kit_cu.cuMemAlloc_v2(&b, N * N * 4) == CUDA_SUCCESS &&
      kit_cu.cuMemAlloc_v2(&c, N * N * 4) == CUDA_SUCCESS &&
      kit_cu.cuMemsetD32_v2(a, 0, N * N) == CUDA_SUCCESS &&
      kit_cu.cuMemsetD32_v2(b, 0, N * N) == CUDA_SUCCESS &&
      sgemm(handle, 0, 0, N, N, N, &one, (float *)a, N, (float *)b, N, &zero, (float *)c, N) == 0 &&
      kit_cu.cuCtxSynchronize() == CUDA_SUCCESS;
  size_t fr = 0, total = 0;
  /* The figure counts the workspace with the three matrices taken out. */
  if (ok) ok = kit_cu.cuMemGetInfo_v2(&fr, &total) == CUDA_SUCCESS;
  *free_b = fr + 3 * (size_t)N * N * 4;
  kit_cu.cuMemFree_v2(a), kit_cu.cuMemFree_v2(b), kit_cu.cuMemFree_v2(c);
  destroy(handle);
  return ok ? 0 : -3;
}

// ---- CUkernel questions ----

typedef CUresult (*lib_load_fn)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
                                CUlibraryOption *, void **, unsigned);
typedef CUresult (*lib_kernel_fn)(CUkernel *, CUlibrary, const char *);
typedef CUresult (*func_param_fn)(CUfunction, size_t, size_t *, size_t *);
typedef CUresult (*func_name_fn)(const char **, CUfunction);
typedef CUresult (*graph_nodes_fn)(CUgraph, CUgraphNode *, size_t *);
typedef CUresult (*node_params_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);

static CUkernel load_kernel(const char *name) {
  lib_load_fn load = (lib_load_fn)sym("cuLibraryLoadData");
  lib_kernel_fn get = (lib_kernel_fn)sym("cuLibraryGetKernel");
  CUlibrary lib;
  CUkernel k = NULL;
  if (!load || !get) return NULL;
  if (load(&lib, kit_kernels_ptx, NULL, NULL, 0, NULL, NULL, 0) != CUDA_SUCCESS) return NULL;
  if (get(&k, lib, name) != CUDA_SUCCESS) return NULL;
  return k;
}

static void cukernel_facts(CUkernel k) {
  func_param_fn fpi = (func_param_fn)sym("cuFuncGetParamInfo");
  func_name_fn fname = (func_name_fn)sym("cuFuncGetName");
  size_t off = 0, size = 0;
  const char *name = NULL;
  if (fpi)
    put_str("cukernel_param_info", rname(fpi((CUfunction)k, 0, &off, &size)));
  else
    put_null("cukernel_param_info", "the driver has no cuFuncGetParamInfo");
  if (fname)
    put_str("cukernel_func_name", rname(fname(&name, (CUfunction)k)));
  else
    put_null("cukernel_func_name", "the driver has no cuFuncGetName");
}

/* Captures one launch of k on a created stream; which field its node fills. */
static const char *graph_kind(CUkernel k) {
  graph_nodes_fn nodes = (graph_nodes_fn)sym("cuGraphGetNodes");
  node_params_fn params = (node_params_fn)sym("cuGraphKernelNodeGetParams_v2");
  static char err[64];
  CUstream s;
  CUgraph g = NULL;
  CUdeviceptr p = 0;
  size_t n = 1024, count = 1;
  uint32_t seed = 1;
  CUgraphNode node;
  CUDA_KERNEL_NODE_PARAMS np;
  if (!nodes || !params) return NULL;
  if (kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return NULL;
  if (kit_cu.cuMemAlloc_v2(&p, n * 4) != CUDA_SUCCESS) return NULL;
  void *args[] = {&p, &n, &seed};
  CUresult r = kit_cu.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r == CUDA_SUCCESS)
    r = kit_cu.cuLaunchKernel((CUfunction)k, 1, 1, 1, 64, 1, 1, 0, s, args, NULL);
  CUresult e = kit_cu.cuStreamEndCapture(s, &g);
  if (r == CUDA_SUCCESS) r = e;
  if (r == CUDA_SUCCESS) r = nodes(g, &node, &count);
  memset(&np, 0, sizeof np);
  if (r == CUDA_SUCCESS && count == 1) r = params(node, &np);
  if (g) kit_cu.cuGraphDestroy(g);
  kit_cu.cuMemFree_v2(p);
  kit_cu.cuStreamDestroy_v2(s);
  if (r != CUDA_SUCCESS) {
    snprintf(err, sizeof err, "error:%s", rname(r));
    return err;
  }
  if (np.func && np.kern) return "both";
  return np.kern ? "kern" : np.func ? "func" : "neither";
}

// ---- batch calls on the legacy stream ----

typedef CUresult (*pf_batch_fn)(CUdeviceptr *, size_t *, size_t, CUmemLocation *, size_t *, size_t,
                                unsigned long long, CUstream);
typedef CUresult (*dc_batch_fn)(CUdeviceptr *, size_t *, size_t, unsigned long long, CUstream);

static void batch_facts(CUdevice dev) {
  pf_batch_fn pf = (pf_batch_fn)sym("cuMemPrefetchBatchAsync");
  dc_batch_fn dc = (dc_batch_fn)sym("cuMemDiscardBatchAsync");
  if (!pf || !dc) {
    put_null("batch_null_stream", "the driver has no batch calls (CUDA 13)");
    return;
  }
  CUdeviceptr p = 0;
  size_t n = 2 << 20;
  CUstream s;
  if (kit_cu.cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS ||
      kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    put_null("batch_null_stream", "no managed memory or stream");
    return;
  }
  CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
  size_t idx = 0;
  CUresult pn = pf(&p, &n, 1, &loc, &idx, 1, 0, NULL);
  CUresult ps = pf(&p, &n, 1, &loc, &idx, 1, 0, s);
  CUresult dn = dc(&p, &n, 1, 0, NULL);
  CUresult ds = dc(&p, &n, 1, 0, s);
  kit_cu.cuStreamSynchronize(s);
  kit_cu.cuCtxSynchronize();
  key("batch_null_stream");
  printf("{\"prefetch_null\":\"%s\",", rname(pn));
  printf("\"prefetch_stream\":\"%s\",", rname(ps));
  printf("\"discard_null\":\"%s\",", rname(dn));
  printf("\"discard_stream\":\"%s\"}", rname(ds));
  kit_cu.cuStreamDestroy_v2(s);
  kit_cu.cuMemFree_v2(p);
}

// ---- managed bandwidth: prefetch vs faults ----

static int parse_size(const char *s, size_t *out) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  int shift = *end == 'G' ? 30 : *end == 'M' ? 20 : *end == 'K' ? 10 : 0;
  if (end == s || (shift && end[1] && end[1] != ',') || (!shift && *end && *end != ',')) return -1;
  *out = (size_t)v << shift;
  return 0;
}

/* GB/s of moving n managed bytes to dev: by prefetch, then by a kernel's faults. */
static int bandwidth(CUdevice dev, size_t n, double *pf_gbps, double *ft_gbps) {
  CUdeviceptr p = 0;
  CUstream s;
  CUevent a, b;
  float ms = 0;
  if (kit_cu.cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS) return -1;
  if (kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return -1;
  kit_cu.cuEventCreate(&a, CU_EVENT_DEFAULT), kit_cu.cuEventCreate(&b, CU_EVENT_DEFAULT);
  CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
  int ok = 1;
  memset((void *)p, 1, n); /* pages on the host */
  ok &= kit_cu.cuEventRecord(a, s) == CUDA_SUCCESS;
  ok &= kit_cu.cuMemPrefetchAsync_v2(p, n, loc, 0, s) == CUDA_SUCCESS;
  ok &= kit_cu.cuEventRecord(b, s) == CUDA_SUCCESS && kit_cu.cuEventSynchronize(b) == CUDA_SUCCESS;
  ok &= kit_cu.cuEventElapsedTime_v2(&ms, a, b) == CUDA_SUCCESS;
  *pf_gbps = ok && ms > 0 ? (double)n / (ms * 1e6) : 0;
  /* Back on the host: a host touch migrates pages back on a GPU, but the
   * simulator does not observe host accesses, so move them explicitly. */
  memset((void *)p, 2, n);
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  ok &= kit_cu.cuMemPrefetchAsync_v2(p, n, host, 0, s) == CUDA_SUCCESS &&
        kit_cu.cuStreamSynchronize(s) == CUDA_SUCCESS;
  ok &= kit_cu.cuEventRecord(a, s) == CUDA_SUCCESS;
  ok &= kit_fill(p, n / 4, 7, s) == CUDA_SUCCESS;
  ok &= kit_cu.cuEventRecord(b, s) == CUDA_SUCCESS && kit_cu.cuEventSynchronize(b) == CUDA_SUCCESS;
  ok &= kit_cu.cuEventElapsedTime_v2(&ms, a, b) == CUDA_SUCCESS;
  *ft_gbps = ok && ms > 0 ? (double)n / (ms * 1e6) : 0;
  /* The fill must really have run: the figure counts nothing otherwise. */
  ok &= kit_cu.cuCtxSynchronize() == CUDA_SUCCESS &&
        kit_verify_host((const uint32_t *)p, n / 4 < 4096 ? n / 4 : 4096, 7, 0) == 0;
  kit_cu.cuEventDestroy_v2(a), kit_cu.cuEventDestroy_v2(b);
  kit_cu.cuStreamDestroy_v2(s);
  kit_cu.cuMemFree_v2(p);
  return ok ? 0 : -1;
}

static void bandwidth_facts(CUdevice dev, const char *sizes) {
  size_t fr = 0, total = 0;
  double best_pf = -1, best_ft = -1;
  kit_cu.cuMemGetInfo_v2(&fr, &total);
  key("managed_gbps");
  printf("[");
  int first = 1;
  for (const char *s = sizes; s && *s;) {
    size_t n;
    if (parse_size(s, &n) != 0) break;
    const char *comma = strchr(s, ',');
    s = comma ? comma + 1 : NULL;
    if (n > fr / 2) { /* never more managed memory than the card has free */
      fprintf(stderr, "gpu_facts: %zu bytes skipped: only %zu free\n", n, fr);
      continue;
    }
    double pf = 0, ft = 0;
    if (bandwidth(dev, n, &pf, &ft) != 0) {
      fprintf(stderr, "gpu_facts: bandwidth at %zu bytes failed\n", n);
      continue;
    }
    printf("%s{\"bytes\":%zu,\"prefetch_gbps\":%.3f,\"fault_gbps\":%.3f}", first ? "" : ",", n, pf,
           ft);
    first = 0;
    best_pf = pf, best_ft = ft; /* the largest size measured */
  }
  printf("]");
  if (best_pf < 0) {
    put_null("prefetch_gbps", "no size could be measured");
    put_null("fault_gbps", "no size could be measured");
    return;
  }
  key("prefetch_gbps");
  printf("%.3f", best_pf);
  key("fault_gbps");
  printf("%.3f", best_ft);
}

int main(int argc, char **argv) {
  const char *sizes = "1G,4G";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
      sizes = argv[++i];
    else {
      fprintf(stderr, "usage: gpu_facts [--sizes 1G,4G]\n");
      return 2;
    }
  }
  drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  gpa_fn gpa = (gpa_fn)sym("cuGetProcAddress_v2");
  if (!gpa) {
    fprintf(stderr, "gpu_facts: no libcuda.so.1 with cuGetProcAddress_v2\n");
    return 2;
  }
  void *before[NLOOK], *after[NLOOK];
  lookup_all(gpa, before);
  CUcontext ctx;
  CHECK_CU(kit_init(0, &ctx));
  lookup_all(gpa, after);
  CUdevice dev;
  CHECK_CU(kit_cu.cuDeviceGet(&dev, 0));
  size_t fr = 0, total = 0;
  CHECK_CU(kit_cu.cuMemGetInfo_v2(&fr, &total));

  printf("{");
  key("procaddr_equal_after_init");
  printf("%s", memcmp(before, after, sizeof before) ? "false" : "true");
  key("total_bytes");
  printf("%zu", total);
  key("free_after_ctx_bytes");
  printf("%zu", fr);
  size_t fb = 0;
  int rb = cublas_free_after(&fb);
  if (rb == 0) {
    key("free_after_cublas_bytes");
    printf("%zu", fb);
  } else {
    put_null("free_after_cublas_bytes",
             rb == -1 ? "no libcublas found" : "cublasCreate or the SGEMM failed");
  }
  CUmodule m;
  CHECK_CU(kit_module(&m)); /* registers the simulator's kernel bodies too */
  CUkernel k = load_kernel("fill_u32");
  if (k) {
    cukernel_facts(k);
    put_str("graph_node_kind", graph_kind(k));
  } else {
    put_null("cukernel_param_info", "no cuLibraryLoadData/cuLibraryGetKernel");
    put_null("cukernel_func_name", "no cuLibraryLoadData/cuLibraryGetKernel");
    put_null("graph_node_kind", "no cuLibraryLoadData/cuLibraryGetKernel");
  }
  batch_facts(dev);
  bandwidth_facts(dev, sizes);
  printf("}\n");
  return 0;
}
