/* prog_train: a training loop in plain driver API (weights, activations and
 * gradients; forward then backward; activations re-allocated each
 * iteration), verified exactly against a host reference.  Prints the
 * simulator's counters as one JSON line; with --launches also each launch's
 * expected chunk set (for the trace test).
 *
 * Environment: P_LAYERS (8), P_ITERS (8), P_BUF_MB (6: each buffer).
 * P_LOAD=library: the kernels are CUkernels of cuLibraryLoadData, launched
 * as libcudart 13 launches them (default: a module's CUfunctions). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

#define CHUNK (2u << 20)
#define MAXL 32

static int layers, iters, print_launches;
static size_t words;
static CUdeviceptr w[MAXL], act[MAXL + 1], grad[MAXL + 1];
/* Allocation order of each live buffer (the trace names allocations so). */
static int order_w[MAXL], order_act[MAXL + 1], order_grad[MAXL + 1];
static int allocs;

static int env_int(const char *name, int def, int lo, int hi) {
  const char *s = getenv(name);
  int v = s && *s ? atoi(s) : def;
  return v < lo ? lo : v > hi ? hi : v;
}

static CUdeviceptr alloc_buf(int *order) {
  CUdeviceptr p;
  CHECK_CU(kit_cu.cuMemAlloc_v2(&p, words * 4));
  *order = allocs++;
  return p;
}

/* dst = a + b, with the chunk set the launch reaches printed when asked:
 * one entry per distinct allocation, "order:chunks", sorted by order. */
static void add(CUdeviceptr dst, int od, CUdeviceptr a, int oa, CUdeviceptr b, int ob) {
  CHECK_CU(kit_add(dst, a, b, words, NULL));
  if (!print_launches) return;
  int o[3] = {od, oa, ob}, n = 3;
  for (int i = 0; i < n; i++) /* sort and dedupe three ints */
    for (int j = i + 1; j < n; j++)
      if (o[j] < o[i]) {
        int t = o[i];
        o[i] = o[j], o[j] = t;
      }
  unsigned chunks = (unsigned)((words * 4 + CHUNK - 1) / CHUNK);
  printf("L");
  for (int i = 0; i < n; i++)
    if (i == 0 || o[i] != o[i - 1]) printf(" %d:0+%u", o[i], chunks);
  printf("\n");
}

/* fill_u32 through the `extra` form (a packed parameter buffer): what vx
 * must scan conservatively, with no kernelParams to read a layout from. */
static CUresult fill_extra(CUdeviceptr p, uint32_t seed) {
  struct {
    CUdeviceptr p;
    size_t n;
    uint32_t seed, pad;
  } buf = {p, words, seed, 0};
  size_t size = sizeof buf;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CUfunction f = kit_fn("fill_u32");
  if (!f) return CUDA_ERROR_NOT_FOUND;
  return kit_cu.cuLaunchKernel(f, 256, 1, 1, 256, 1, 1, 0, NULL, NULL, extra);
}

static void fill(CUdeviceptr p, int order, uint32_t seed) {
  CHECK_CU(order % 2 ? fill_extra(p, seed) : kit_fill(p, words, seed, NULL));
  if (print_launches) printf("L %d:0+%u\n", order, (unsigned)((words * 4 + CHUNK - 1) / CHUNK));
}

static void forward(void) {
  for (int i = 0; i < layers; i++) {
    act[i + 1] = alloc_buf(&order_act[i + 1]);
    add(act[i + 1], order_act[i + 1], w[i], order_w[i], act[i], order_act[i]);
  }
}

static void backward(void) {
  grad[layers] = alloc_buf(&order_grad[layers]);
  add(grad[layers], order_grad[layers], act[layers], order_act[layers], act[layers],
      order_act[layers]);
  for (int i = layers - 1; i >= 0; i--) {
    grad[i] = alloc_buf(&order_grad[i]);
    add(grad[i], order_grad[i], act[i + 1], order_act[i + 1], grad[i + 1], order_grad[i + 1]);
    add(w[i], order_w[i], w[i], order_w[i], grad[i], order_grad[i]);
  }
}

static void free_temps(void) {
  for (int i = 1; i <= layers; i++) CHECK_CU(kit_cu.cuMemFree_v2(act[i]));
  for (int i = 0; i <= layers; i++) CHECK_CU(kit_cu.cuMemFree_v2(grad[i]));
}

/* The same arithmetic on the host, element by element. */
static uint32_t *reference(void) {
  uint32_t *ref = malloc((size_t)layers * words * 4), a[MAXL + 1], g[MAXL + 1];
  if (!ref) exit(3);
  for (size_t j = 0; j < words; j++) {
    uint32_t wj[MAXL];
    for (int i = 0; i < layers; i++) wj[i] = kit_hash(100 + (uint32_t)i, (uint32_t)j);
    a[0] = kit_hash(7, (uint32_t)j);
    for (int it = 0; it < iters; it++) {
      for (int i = 0; i < layers; i++) a[i + 1] = wj[i] + a[i];
      g[layers] = a[layers] + a[layers];
      for (int i = layers - 1; i >= 0; i--) {
        g[i] = a[i + 1] + g[i + 1];
        wj[i] += g[i];
      }
    }
    for (int i = 0; i < layers; i++) ref[(size_t)i * words + j] = wj[i];
  }
  return ref;
}

static size_t verify(void) {
  uint32_t *ref = reference(), *got = malloc(words * 4);
  size_t bad = 0;
  if (!got) exit(3);
  for (int i = 0; i < layers; i++) {
    CHECK_CU(kit_cu.cuMemcpyDtoH_v2(got, w[i], words * 4));
    if (print_launches) printf("C %d:0+%zu 2 1\n", order_w[i], words * 4); /* D2H, synchronous */
    for (size_t j = 0; j < words; j++) bad += got[j] != ref[(size_t)i * words + j];
  }
  free(ref);
  free(got);
  return bad;
}

static void print_stats(size_t bad) {
  simcuda_stats_t st;
  const char *pol = getenv("VX_POLICY");
  if (kit_sim_stats(0, &st) != 0) memset(&st, 0, sizeof st);
  printf("{\"policy\":\"%s\",\"layers\":%d,\"iters\":%d,\"buf_mb\":%zu,\"bad\":%zu,"
         "\"total_ns\":%" PRIu64 ",\"stall_ns\":%" PRIu64 ",\"kernel_ns\":%" PRIu64
         ",\"faults\":%" PRIu64 ",\"fault_batches\":%" PRIu64 ",\"bytes_prefetch_htod\":%" PRIu64
         ",\"bytes_fault_htod\":%" PRIu64 ",\"bytes_prefetch_dtoh\":%" PRIu64
         ",\"bytes_evict_dtoh\":%" PRIu64 ",\"evictions\":%" PRIu64
         ",\"device_used_peak\":%" PRIu64 "}\n",
         pol && *pol ? pol : "none", layers, iters, words * 4 >> 20, bad, st.total_ns,
         st.stall_ns, st.kernel_ns, st.faults, st.fault_batches, st.bytes_prefetch_htod,
         st.bytes_fault_htod, st.bytes_prefetch_dtoh, st.bytes_evict_dtoh, st.evictions,
         st.device_used_peak);
}

int main(int argc, char **argv) {
  print_launches = argc > 1 && !strcmp(argv[1], "--launches");
  layers = env_int("P_LAYERS", 8, 1, MAXL);
  iters = env_int("P_ITERS", 8, 1, 100);
  words = (size_t)env_int("P_BUF_MB", 6, 1, 1024) << 18;
  CUcontext ctx;
  CHECK_CU(kit_init(0, &ctx));
  CUmodule m;
  const char *load = getenv("P_LOAD");
  if (load && !strcmp(load, "library"))
    CHECK_CU(kit_library(NULL));
  else
    CHECK_CU(kit_module(&m));
  for (int i = 0; i < layers; i++) {
    w[i] = alloc_buf(&order_w[i]);
    fill(w[i], order_w[i], 100 + (uint32_t)i);
  }
  act[0] = alloc_buf(&order_act[0]);
  fill(act[0], order_act[0], 7);
  CHECK_CU(kit_cu.cuCtxSynchronize());
  kit_sim_reset_stats();
  for (int it = 0; it < iters; it++) {
    forward();
    backward();
    free_temps();
  }
  CHECK_CU(kit_cu.cuCtxSynchronize());
  size_t bad = verify();
  print_stats(bad);
  return bad ? 1 : 0;
}
