/* prog_graph: a chain of kernels captured into a CUDA graph and launched
 * several times over more data than the device holds; the result is
 * verified exactly.  With --launches prints, per graph launch, the union of
 * chunk sets it reaches (allocations named by order), for the trace test.
 *
 * Environment: P_BUFS (8), P_BUF_MB (12), P_LAUNCHES (4).
 * P_LOAD=library: the kernels are CUkernels of cuLibraryLoadData, launched
 * as libcudart 13 launches them (default: a module's CUfunctions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

#define MAXB 32
#define CHUNK (2u << 20)

static int env_int(const char *name, int def, int lo, int hi) {
  const char *s = getenv(name);
  int v = s && *s ? atoi(s) : def;
  return v < lo ? lo : v > hi ? hi : v;
}

/* Launch i of the chain: b[i+1] = b[i] + b[i+1]. */
static void capture(CUstream s, const CUdeviceptr *b, int nb, size_t words, CUgraph *g) {
  CHECK_CU(kit_cu.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int i = 0; i + 1 < nb; i++) CHECK_CU(kit_add(b[i + 1], b[i], b[i + 1], words, s));
  CHECK_CU(kit_cu.cuStreamEndCapture(s, g));
}

static size_t verify(const CUdeviceptr *b, int nb, size_t words, int launches) {
  uint32_t *got = malloc(words * 4);
  size_t bad = 0;
  if (!got) exit(3);
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(got, b[nb - 1], words * 4));
  for (size_t j = 0; j < words; j++) {
    uint32_t v[MAXB];
    for (int i = 0; i < nb; i++) v[i] = kit_hash(50 + (uint32_t)i, (uint32_t)j);
    for (int l = 0; l < launches; l++)
      for (int i = 0; i + 1 < nb; i++) v[i + 1] = v[i] + v[i + 1];
    bad += got[j] != v[nb - 1];
  }
  free(got);
  return bad;
}

int main(int argc, char **argv) {
  int print = argc > 1 && !strcmp(argv[1], "--launches");
  int nb = env_int("P_BUFS", 8, 2, MAXB), launches = env_int("P_LAUNCHES", 4, 1, 100);
  size_t words = (size_t)env_int("P_BUF_MB", 12, 1, 1024) << 18;
  CUcontext ctx;
  CUmodule m;
  CUstream s;
  CHECK_CU(kit_init(0, &ctx));
  const char *load = getenv("P_LOAD");
  if (load && !strcmp(load, "library"))
    CHECK_CU(kit_library(NULL));
  else
    CHECK_CU(kit_module(&m));
  CHECK_CU(kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr b[MAXB];
  for (int i = 0; i < nb; i++) {
    CHECK_CU(kit_cu.cuMemAlloc_v2(&b[i], words * 4));
    CHECK_CU(kit_fill(b[i], words, 50 + (uint32_t)i, s));
    if (print) printf("L %d:0+%zu\n", i, (words * 4 + CHUNK - 1) / CHUNK);
  }
  CUgraph g;
  CUgraphExec e;
  capture(s, b, nb, words, &g);
  CHECK_CU(kit_cu.cuGraphInstantiateWithFlags(&e, g, 0));
  for (int l = 0; l < launches; l++) {
    CHECK_CU(kit_cu.cuGraphLaunch(e, s));
    if (!print) continue;
    printf("L");
    for (int i = 0; i < nb; i++) printf(" %d:0+%zu", i, (words * 4 + CHUNK - 1) / CHUNK);
    printf("\n");
  }
  CHECK_CU(kit_cu.cuStreamSynchronize(s));
  size_t bad = verify(b, nb, words, launches);
  simcuda_stats_t st;
  if (kit_sim_stats(0, &st) != 0) memset(&st, 0, sizeof st);
  printf("{\"bad\":%zu,\"launches\":%llu,\"faults\":%llu,\"total_ns\":%llu}\n", bad,
         (unsigned long long)st.launches, (unsigned long long)st.faults,
         (unsigned long long)st.total_ns);
  CHECK_CU(kit_cu.cuGraphExecDestroy(e));
  CHECK_CU(kit_cu.cuGraphDestroy(g));
  for (int i = 0; i < nb; i++) CHECK_CU(kit_cu.cuMemFree_v2(b[i]));
  return bad ? 1 : 0;
}
