/* prog_fault.c: the small, deterministic CUDA program the fault matrix runs with and without vx.
 * Prints one line, "outcome: ok ..." (exit 0), "outcome: <CUDA error> step=..." (3) or "outcome:
 * CORRUPT ..." (4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

static const char *step = "start";
static CUfunction k_fill, k_add;

static void outcome_error(CUresult r) {
  const char *name = NULL;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_?";
  printf("outcome: %s step=%s\n", name, step);
  exit(3);
}

#define CK(call)                                                                                   \
  do {                                                                                             \
    step = #call;                                                                                  \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) outcome_error(r_);                                                     \
  } while (0)

/* Content: word i = kit_hash(seed, i) << shift (add_u32 of a buffer with
 * itself doubles it). */
typedef struct {
  CUdeviceptr p;
  size_t words;
  uint32_t seed, shift;
} buf_t;

static uint32_t expect(const buf_t *b, size_t i) {
  return kit_hash(b->seed, i) << b->shift;
}

static void fill_kernel(buf_t *b, uint32_t seed, CUstream s) {
  b->seed = seed;
  void *args[] = {&b->p, &b->words, &b->seed};
  CK(cuLaunchKernel(k_fill, 64, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

static void double_ex(buf_t *b, CUstream s) {
  CUlaunchConfig cfg = {.gridDimX = 64,
                        .gridDimY = 1,
                        .gridDimZ = 1,
                        .blockDimX = 256,
                        .blockDimY = 1,
                        .blockDimZ = 1,
                        .hStream = s};
  void *args[] = {&b->p, &b->p, &b->p, &b->words};
  CK(cuLaunchKernelEx(&cfg, k_add, args, NULL));
  b->shift++;
}

static void double_coop(buf_t *b, CUstream s) {
  void *args[] = {&b->p, &b->p, &b->p, &b->words};
  CK(cuLaunchCooperativeKernel(k_add, 4, 1, 1, 256, 1, 1, 0, s, args));
  b->shift++;
}

static void fill_host(buf_t *b, uint32_t seed, uint32_t *host, CUstream s) {
  b->seed = seed;
  for (size_t i = 0; i < b->words; i++)
    host[i] = kit_hash(seed, i);
  if (s)
    CK(cuMemcpyHtoDAsync(b->p, host, b->words * 4, s));
  else
    CK(cuMemcpyHtoD(b->p, host, b->words * 4));
}

/* Captures one doubling of `a` into a graph and launches it twice. */
static void graph_double(buf_t *a, CUstream s) {
  CUgraph g;
  CUgraphExec ge;
  void *args[] = {&a->p, &a->p, &a->p, &a->words};
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuLaunchKernel(k_add, 64, 1, 1, 256, 1, 1, 0, s, args, NULL));
  CK(cuStreamEndCapture(s, &g));
  CK(cuGraphInstantiateWithFlags(&ge, g, 0));
  CK(cuGraphLaunch(ge, s));
  CK(cuGraphLaunch(ge, s));
  CK(cuStreamSynchronize(s));
  CK(cuGraphExecDestroy(ge));
  CK(cuGraphDestroy(g));
  a->shift += 2;
}

/* Fails with CORRUPT unless the n bytes at host all equal v. */
static void expect_bytes(const char *name, const uint8_t *host, size_t n, uint8_t v) {
  for (size_t i = 0; i < n; i++) {
    if (host[i] != v) {
      printf("outcome: CORRUPT buffer=%s byte=%zu\n", name, i);
      exit(4);
    }
  }
}

/* Byte and 16-bit sets, async read-backs, and the generic (unified
 * addressing) copies, on g; ends with g a copy of c. */
static void sets_and_generic_copies(buf_t *g, const buf_t *c, uint32_t *host, CUstream s) {
  size_t bytes = g->words * 4;
  CK(cuMemsetD8(g->p, 0xab, bytes));
  CK(cuMemcpyDtoHAsync(host, g->p, bytes, s));
  CK(cuStreamSynchronize(s));
  expect_bytes("g (memset 8)", (const uint8_t *)host, bytes, 0xab);
  CK(cuMemsetD16Async(g->p, 0x3c3c, bytes / 2, s));
  CK(cuStreamSynchronize(s));
  CK(cuMemcpy((CUdeviceptr)(uintptr_t)host, g->p, bytes));
  expect_bytes("g (memset 16)", (const uint8_t *)host, bytes, 0x3c);
  CK(cuMemcpyAsync(g->p, c->p, bytes, s));
  CK(cuStreamSynchronize(s));
  g->seed = c->seed;
  g->shift = c->shift;
}

static uint64_t verify(const char *name, const buf_t *b, uint32_t *host) {
  step = name;
  CK(cuMemcpyDtoH(host, b->p, b->words * 4));
  for (size_t i = 0; i < b->words; i++) {
    if (host[i] != expect(b, i)) {
      printf("outcome: CORRUPT buffer=%s word=%llu\n", name, (unsigned long long)i);
      exit(4);
    }
  }
  return b->words * 4;
}

int main(void) {
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUstream s;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(kit_bind(KIT_LINKED, 0, 0) ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS);
  CK(kit_module(&mod));
  CK(cuModuleGetFunction(&k_fill, mod, "fill_u32"));
  CK(cuModuleGetFunction(&k_add, mod, "add_u32"));
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  size_t free_b = 0, total_b = 0, tm = 0;
  CK(cuMemGetInfo(&free_b, &total_b));
  CK(cuDeviceTotalMem(&tm, dev));

  uint32_t *host;
  CK(cuMemAllocHost((void **)&host, 4 << 20));
  buf_t a = {.words = 256 << 10}, c = {.words = 512 << 10}, d = {.words = 768 << 10};
  buf_t e = {.words = 1 << 20}, f = {.words = 256 << 10}, g = {.words = 512 << 10}, p = {0};
  size_t pitch = 0;
  CK(cuMemAlloc(&a.p, a.words * 4));
  CK(cuMemAllocPitch(&p.p, &pitch, 1000, 300, 4));
  p.words = pitch * 300 / 4;
  CK(cuMemAllocManaged(&c.p, c.words * 4, CU_MEM_ATTACH_GLOBAL));
  CK(cuMemAllocAsync(&d.p, d.words * 4, s));
  CK(cuMemAlloc(&e.p, e.words * 4));
  CK(cuMemAlloc(&f.p, f.words * 4));
  CK(cuMemAlloc(&g.p, g.words * 4));

  fill_kernel(&a, 11, NULL);
  CK(cuMemsetD32(p.p, 0x5a5a5a5a, p.words));
  fill_host(&c, 33, host, NULL);
  fill_kernel(&d, 44, s);
  double_ex(&d, s);
  CK(cuStreamSynchronize(s));
  fill_host(&e, 55, host, s);
  CK(cuStreamSynchronize(s));
  double_coop(&e, s);
  CK(cuCtxSynchronize());
  CK(cuMemcpyDtoD(f.p, a.p, a.words * 4));
  f.seed = a.seed;
  f.shift = a.shift;
  graph_double(&a, s);
  sets_and_generic_copies(&g, &c, host, s);

  CUdeviceptr base = 0;
  size_t size = 0;
  CK(cuMemGetAddressRange(&base, &size, a.p + 100));
  if (base != a.p || size != a.words * 4) {
    printf("outcome: CORRUPT address range of a\n");
    return 4;
  }
  unsigned managed = 0;
  CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, c.p));

  uint64_t bytes = verify("a", &a, host) + verify("c", &c, host) + verify("d", &d, host) +
                   verify("e", &e, host) + verify("f", &f, host) + verify("g", &g, host);
  CK(cuMemcpyDtoH(host, p.p, p.words * 4));
  for (uint64_t i = 0; i < p.words; i++)
    if (host[i] != 0x5a5a5a5a) {
      printf("outcome: CORRUPT buffer=pitch word=%llu\n", (unsigned long long)i);
      return 4;
    }
  bytes += p.words * 4;

  CK(cuMemFreeAsync(d.p, s));
  CK(cuStreamSynchronize(s));
  CK(cuMemFree(a.p));
  CK(cuMemFree(p.p));
  CK(cuMemFree(c.p));
  CK(cuMemFree(e.p));
  CK(cuMemFree(f.p));
  CK(cuMemFree(g.p));
  CK(cuMemFreeHost(host));
  CK(cuStreamDestroy(s));
  printf("outcome: ok bytes=%llu managed=%u\n", (unsigned long long)bytes, managed);
  return 0;
}
