/* test_sim_library.c: context-less libraries and their CUkernels: handles
 * distinct from CUfunctions (cuFunc* on one fails), per-context functions,
 * launches of a CUkernel in every form, unload, and captured graph nodes. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim_test.h"

#define N (1u << 16)

static CUlibrary setup_library(void) {
  CUlibrary lib;
  ck_cu(kit_init(0, NULL));
  ck_cu(kit_library(&lib));
  return lib;
}

static CUkernel kernel(CUlibrary lib, const char *name) {
  CUkernel k;
  ck_cu(cuLibraryGetKernel(&k, lib, name));
  return k;
}

START_TEST(kernel_is_not_a_function) {
  CUlibrary lib = setup_library();
  CUkernel k = kernel(lib, "fill_u32");
  CUfunction f, f2;
  ck_cu(cuKernelGetFunction(&f, k));
  ck_assert_ptr_ne((void *)f, (void *)k);
  ck_cu(cuKernelGetFunction(&f2, k));
  ck_assert_ptr_eq((void *)f, (void *)f2); /* one per context */
  size_t off, sz;
  const char *name;
  int v;
  /* Strict: the CUfunction queries refuse a CUkernel, and the other way round. */
  ck_cu_is(cuFuncGetParamInfo((CUfunction)k, 0, &off, &sz), CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuFuncGetName(&name, (CUfunction)k), CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)k),
           CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuFuncSetCacheConfig((CUfunction)k, CU_FUNC_CACHE_PREFER_NONE),
           CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuKernelGetParamInfo((CUkernel)f, 0, &off, &sz), CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuKernelGetName(&name, (CUkernel)f), CUDA_ERROR_INVALID_HANDLE);
  /* The CUkernel queries. */
  size_t want_off[] = {0, 8, 16}, want_sz[] = {8, 8, 4};
  for (int i = 0; i < 3; i++) {
    ck_cu(cuKernelGetParamInfo(k, i, &off, &sz));
    ck_assert_uint_eq(off, want_off[i]);
    ck_assert_uint_eq(sz, want_sz[i]);
    ck_cu(cuFuncGetParamInfo(f, i, &off, &sz)); /* the function: same layout */
    ck_assert_uint_eq(off, want_off[i]);
  }
  ck_cu_is(cuKernelGetParamInfo(k, 3, &off, &sz), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuKernelGetName(&name, k));
  ck_assert_str_eq(name, "fill_u32");
  ck_cu_is(cuKernelGetName(NULL, k), CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, 0));
  ck_assert_int_eq(v, 1024);
  ck_cu_is(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 99), CUDA_ERROR_INVALID_DEVICE);
  CUlibrary back;
  ck_cu(cuKernelGetLibrary(&back, k));
  ck_assert_ptr_eq((void *)back, (void *)lib);
}
END_TEST

START_TEST(enumerate_and_module) {
  CUlibrary lib = setup_library();
  unsigned n = 0;
  ck_cu(cuLibraryGetKernelCount(&n, lib));
  ck_assert_uint_ge(n, 6);
  CUkernel ks[64];
  ck_assert_uint_le(n, 64);
  ck_cu(cuLibraryEnumerateKernels(ks, n, lib));
  int seen_fill = 0;
  for (unsigned i = 0; i < n; i++) {
    const char *name;
    ck_cu(cuKernelGetName(&name, ks[i]));
    CUkernel again = kernel(lib, name);
    ck_assert_ptr_eq((void *)again, (void *)ks[i]);
    seen_fill += !strcmp(name, "fill_u32");
  }
  ck_assert_int_eq(seen_fill, 1);
  ck_cu_is(cuLibraryEnumerateKernels(ks, 0, lib), CUDA_ERROR_INVALID_VALUE);
  CUkernel k;
  ck_cu_is(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);
  ck_cu_is(cuLibraryGetKernel(&k, (CUlibrary)&n, "fill_u32"), CUDA_ERROR_INVALID_HANDLE);
  /* The context's module holds the same functions cuKernelGetFunction gives. */
  CUmodule m;
  CUfunction f, g;
  ck_cu(cuLibraryGetModule(&m, lib));
  ck_cu(cuModuleGetFunction(&f, m, "check_u32"));
  ck_cu(cuKernelGetFunction(&g, kernel(lib, "check_u32")));
  ck_assert_ptr_eq((void *)f, (void *)g);
}
END_TEST

START_TEST(launch_kernel_every_form) {
  CUlibrary lib = setup_library();
  CUkernel fill = kernel(lib, "fill_u32");
  CUdeviceptr p;
  size_t n = N;
  uint32_t seed = 7;
  ck_cu(cuMemAlloc(&p, N * 4));
  void *args[] = {&p, &n, &seed};
  ck_cu(cuLaunchKernel((CUfunction)fill, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  unsigned long long bad = 1;
  ck_cu(kit_check(p, N, 7, NULL, &bad)); /* kit_check launches a CUkernel too */
  ck_assert_uint_eq(bad, 0);
  seed = 8;
  CUlaunchConfig cfg = {.gridDimX = 64,
                        .gridDimY = 1,
                        .gridDimZ = 1,
                        .blockDimX = 256,
                        .blockDimY = 1,
                        .blockDimZ = 1};
  ck_cu(cuLaunchKernelEx(&cfg, (CUfunction)fill, args, NULL));
  ck_cu(kit_check(p, N, 8, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  seed = 9;
  ck_cu(cuLaunchCooperativeKernel((CUfunction)fill, 64, 1, 1, 256, 1, 1, 0, NULL, args));
  ck_cu(kit_check(p, N, 9, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  /* A second context: the kernel runs there with a function of its own. */
  CUcontext c2;
  CUfunction f1, f2;
  ck_cu(cuKernelGetFunction(&f1, fill));
  ck_cu(cuCtxCreate(&c2, NULL, 0, 0));
  ck_cu(cuKernelGetFunction(&f2, fill));
  ck_assert_ptr_ne((void *)f1, (void *)f2);
  CUdeviceptr q;
  ck_cu(cuMemAlloc(&q, N * 4));
  void *args2[] = {&q, &n, &seed};
  ck_cu(cuLaunchKernel((CUfunction)fill, 64, 1, 1, 256, 1, 1, 0, NULL, args2, NULL));
  ck_cu(cuCtxSynchronize());
  ck_cu_is(cuLaunchKernel(f1, 64, 1, 1, 256, 1, 1, 0, NULL, args2, NULL),
           CUDA_ERROR_INVALID_HANDLE); /* the first context's function */
  ck_cu(cuCtxDestroy(c2));
}
END_TEST

START_TEST(unload) {
  CUlibrary lib = setup_library();
  CUkernel k = kernel(lib, "fill_u32");
  CUfunction f;
  ck_cu(cuKernelGetFunction(&f, k));
  ck_cu(cuLibraryUnload(lib));
  size_t off;
  ck_cu_is(cuKernelGetParamInfo(k, 0, &off, NULL), CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuKernelGetFunction(&f, k), CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuFuncGetParamInfo(f, 0, &off, NULL), CUDA_ERROR_INVALID_HANDLE);
  CUdeviceptr p = 0;
  size_t n = 0;
  uint32_t seed = 0;
  void *args[] = {&p, &n, &seed};
  ck_cu_is(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
           CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuLibraryUnload(lib), CUDA_ERROR_INVALID_VALUE);
  CUkernel k2;
  ck_cu_is(cuLibraryGetKernel(&k2, lib, "fill_u32"), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(load_errors_and_file) {
  ck_cu(kit_init(0, NULL));
  CUlibrary lib;
  ck_cu_is(cuLibraryLoadData(&lib, "not ptx", NULL, NULL, 0, NULL, NULL, 0),
           CUDA_ERROR_INVALID_PTX);
  ck_cu_is(cuLibraryLoadData(NULL, kit_kernels_ptx, NULL, NULL, 0, NULL, NULL, 0),
           CUDA_ERROR_INVALID_VALUE);
  char path[] = "/tmp/sim_library_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  size_t len = strlen(kit_kernels_ptx);
  ck_assert_int_eq(write(fd, kit_kernels_ptx, len), (ssize_t)len);
  close(fd);
  CUlibraryOption opt = CU_LIBRARY_BINARY_IS_PRESERVED;
  void *val = (void *)1;
  /* cuda.h: BINARY_IS_PRESERVED is invalid with cuLibraryLoadFromFile. */
  ck_cu_is(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, &opt, &val, 1),
           CUDA_ERROR_INVALID_VALUE);
  ck_cu(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0));
  unlink(path);
  ck_cu_is(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0),
           CUDA_ERROR_FILE_NOT_FOUND);
  CUkernel k;
  ck_cu(cuLibraryGetKernel(&k, lib, "check_u32"));
  ck_cu(cuLibraryLoadData(&lib, kit_kernels_ptx, NULL, NULL, 0, &opt, &val, 1));
}
END_TEST

/* A captured CUkernel launch is a kernel node with `kern` set and `func`
 * NULL; a captured CUfunction launch has `func`.  Both replay. */
START_TEST(graph_node_carries_kern) {
  CUlibrary lib = setup_library();
  CUkernel fill = kernel(lib, "fill_u32");
  CUfunction ffill;
  ck_cu(cuKernelGetFunction(&ffill, fill));
  CUstream s;
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p, q;
  ck_cu(cuMemAlloc(&p, N * 4));
  ck_cu(cuMemAlloc(&q, N * 4));
  size_t n = N;
  uint32_t seed = 21;
  void *a1[] = {&p, &n, &seed}, *a2[] = {&q, &n, &seed};
  ck_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ck_cu(cuLaunchKernel((CUfunction)fill, 64, 1, 1, 256, 1, 1, 0, s, a1, NULL));
  ck_cu(cuLaunchKernel(ffill, 64, 1, 1, 256, 1, 1, 0, s, a2, NULL));
  CUgraph g;
  ck_cu(cuStreamEndCapture(s, &g));
  CUgraphNode nodes[2];
  size_t nn = 2;
  ck_cu(cuGraphGetNodes(g, nodes, &nn));
  ck_assert_uint_eq(nn, 2);
  CUDA_KERNEL_NODE_PARAMS kp;
  ck_cu(cuGraphKernelNodeGetParams(nodes[0], &kp));
  ck_assert_ptr_null((void *)kp.func);
  ck_assert_ptr_eq((void *)kp.kern, (void *)fill);
  ck_assert_ptr_nonnull((void *)kp.ctx);
  ck_assert_uint_eq(*(CUdeviceptr *)kp.kernelParams[0], p);
  ck_cu(cuGraphKernelNodeGetParams(nodes[1], &kp));
  ck_assert_ptr_eq((void *)kp.func, (void *)ffill);
  ck_assert_ptr_null((void *)kp.kern);
  CUgraphExec e;
  ck_cu(cuGraphInstantiateWithFlags(&e, g, 0));
  ck_cu(cuGraphLaunch(e, s));
  ck_cu(cuStreamSynchronize(s));
  unsigned long long bad = 1;
  ck_cu(kit_check(p, N, 21, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
  ck_cu(kit_check(q, N, 21, NULL, &bad));
  ck_assert_uint_eq(bad, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_library");
  TCase *tc = tcase_create("library");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, kernel_is_not_a_function);
  tcase_add_test(tc, enumerate_and_module);
  tcase_add_test(tc, launch_kernel_every_form);
  tcase_add_test(tc, unload);
  tcase_add_test(tc, load_errors_and_file);
  tcase_add_test(tc, graph_node_carries_kern);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
