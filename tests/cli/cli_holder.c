/* cli_holder.c: a CUDA driver-API test program for the end-to-end tests: it
 * allocates N buffers of M MiB, says "ready PID", and waits for EOF on stdin. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define LOAD(name) name##_t name = (name##_t)dlsym(h, #name)
typedef CUresult (*cuInit_t)(unsigned);
typedef CUresult (*cuDeviceGet_t)(CUdevice *, int);
typedef CUresult (*cuDevicePrimaryCtxRetain_t)(CUcontext *, CUdevice);
typedef CUresult (*cuCtxSetCurrent_t)(CUcontext);
typedef CUresult (*cuMemAlloc_v2_t)(CUdeviceptr *, size_t);
typedef CUresult (*cuMemFree_v2_t)(CUdeviceptr);
typedef CUresult (*cuMemsetD8_v2_t)(CUdeviceptr, unsigned char, size_t);

/* usage: cli_holder N MIB.  Exit 77 without a driver, 1 on a CUDA error. */
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4;
  size_t bytes = (size_t)(argc > 2 ? atoi(argv[2]) : 32) << 20;
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h || n < 1 || n > 64)
    return fprintf(stderr, "cli_holder: %s\n", h ? "bad N" : dlerror()), 77;
  LOAD(cuInit);
  LOAD(cuDeviceGet);
  LOAD(cuDevicePrimaryCtxRetain);
  LOAD(cuCtxSetCurrent);
  LOAD(cuMemAlloc_v2);
  LOAD(cuMemFree_v2);
  LOAD(cuMemsetD8_v2);
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr p[64];
  if (!cuInit || !cuMemsetD8_v2 || cuInit(0) || cuDeviceGet(&dev, 0) ||
      cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
    return fprintf(stderr, "cli_holder: no usable device\n"), 77;
  for (int i = 0; i < n; i++) {
    CUresult rc = cuMemAlloc_v2(&p[i], bytes);
    if (rc || cuMemsetD8_v2(p[i], (unsigned char)i, bytes))
      return fprintf(stderr, "cli_holder: allocation %d failed (%d)\n", i, (int)rc), 1;
  }
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  char b[64];
  while (read(0, b, sizeof b) > 0)
    ;
  for (int i = 0; i < n; i++)
    cuMemFree_v2(p[i]);
  return 0;
}
