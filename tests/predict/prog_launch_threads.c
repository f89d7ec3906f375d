/* prog_launch_threads: several threads, each with its own stream and buffers, launch
 * over oversubscribed memory at once (the predictor's lock, the side
 * streams, the trace buffer shared between them); every thread's result is
 * verified exactly.  Threads allocate while others launch: the room a
 * native allocation takes must be held before another thread's plan fills
 * it (tiers/exec.c, exec_native_claim).  Prints the simulator's peak device
 * occupancy too.  With P_SHARED=1 every thread's second operand is one
 * buffer all of them read, on their own streams: a chunk whose uses are
 * launches of several streams.  Environment: P_THREADS (4), P_BUF_MB (8),
 * P_ITERS (6), P_SHARED (0). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

#define MAXT 16

static CUcontext ctx;
static size_t words;
static int iters;
static CUdeviceptr shared; /* P_SHARED: every thread's b[1], filled with SHARED_SEED */
#define SHARED_SEED 7u
static size_t bad_total;
static pthread_mutex_t bad_lock = PTHREAD_MUTEX_INITIALIZER;

/* b[2] = b[0] + b[1]; b[0] = b[2] + b[1], iters times. */
static size_t check(const CUdeviceptr *b, uint32_t seed, uint32_t seed1) {
  uint32_t *got = malloc(words * 4);
  size_t bad = 0;
  if (!got) exit(3);
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(got, b[0], words * 4));
  for (size_t j = 0; j < words; j++) {
    uint32_t x = kit_hash(seed, (uint32_t)j), y = kit_hash(seed1, (uint32_t)j), z;
    for (int i = 0; i < iters; i++) {
      z = x + y;
      x = z + y;
    }
    bad += got[j] != x;
  }
  free(got);
  return bad;
}

static void *worker(void *arg) {
  uint32_t seed = 1000 + 10 * (uint32_t)(uintptr_t)arg;
  CUstream s;
  CUdeviceptr b[3];
  CHECK_CU(kit_cu.cuCtxSetCurrent(ctx));
  CHECK_CU(kit_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 3; i++)
    if (i != 1 || !shared) CHECK_CU(kit_cu.cuMemAlloc_v2(&b[i], words * 4));
  if (shared) b[1] = shared;
  CHECK_CU(kit_fill(b[0], words, seed, s));
  if (!shared) CHECK_CU(kit_fill(b[1], words, seed + 1, s));
  for (int i = 0; i < iters; i++) {
    CHECK_CU(kit_add(b[2], b[0], b[1], words, s));
    CHECK_CU(kit_add(b[0], b[2], b[1], words, s));
  }
  CHECK_CU(kit_cu.cuStreamSynchronize(s));
  size_t bad = check(b, seed, shared ? SHARED_SEED : seed + 1);
  for (int i = 0; i < 3; i++)
    if (b[i] != shared) CHECK_CU(kit_cu.cuMemFree_v2(b[i]));
  CHECK_CU(kit_cu.cuStreamDestroy_v2(s));
  pthread_mutex_lock(&bad_lock);
  bad_total += bad;
  pthread_mutex_unlock(&bad_lock);
  return NULL;
}

int main(void) {
  const char *e = getenv("P_THREADS");
  int nt = e && atoi(e) > 0 && atoi(e) <= MAXT ? atoi(e) : 4;
  e = getenv("P_BUF_MB");
  words = (size_t)(e && atoi(e) > 0 ? atoi(e) : 8) << 18;
  e = getenv("P_ITERS");
  iters = e && atoi(e) > 0 ? atoi(e) : 6;
  CUmodule m;
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&m));
  e = getenv("P_SHARED");
  if (e && atoi(e) > 0) {
    CHECK_CU(kit_cu.cuMemAlloc_v2(&shared, words * 4));
    CHECK_CU(kit_fill(shared, words, SHARED_SEED, NULL));
    CHECK_CU(kit_cu.cuCtxSynchronize());
  }
  pthread_t t[MAXT];
  for (int i = 0; i < nt; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
  for (int i = 0; i < nt; i++) pthread_join(t[i], NULL);
  if (shared) CHECK_CU(kit_cu.cuMemFree_v2(shared));
  simcuda_stats_t st;
  if (kit_sim_stats(0, &st) != 0) memset(&st, 0, sizeof st);
  printf("{\"threads\":%d,\"bad\":%zu,\"device_used_peak\":%" PRIu64
         ",\"bytes_prefetch_htod\":%" PRIu64 ",\"faults\":%" PRIu64 "}\n",
         nt, bad_total, st.device_used_peak, st.bytes_prefetch_htod, st.faults);
  return bad_total ? 1 : 0;
}
