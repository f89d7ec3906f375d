/* prog_stream_lag: one buffer read by launches of two streams, one of
 * which lags.  Stream 1 sleeps in a host function, then reads W; stream 2
 * reads W right after it was planned (so W's latest planned use is
 * stream 2's), then needs room: W is the victim.  Its eviction must wait
 * for stream 1's launch too, not only for the latest one that reached it:
 * gone down first, W's chunk faults back when stream 1 reads it, and the
 * device holds more than the policy counts (simulator device_used_peak
 * above VX_DEVICE_LIMIT).  Prints {"bad","device_used_peak",
 * "bytes_prefetch_htod","faults","bytes_fault_htod"}; exit 1 on a wrong
 * result.
 * Environment: P_ITERS (3), P_LAG_MS (20). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kit.h"

#define BUF_WORDS ((size_t)2 << 20) /* 8 MiB */
#define SINK_BYTES ((size_t)1 << 20)

static void CUDA_CB lag(void *arg) {
  long ms = (long)(intptr_t)arg;
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Words of p that differ from times * fill(seed). */
static size_t check(CUdeviceptr p, uint32_t seed, uint32_t times, uint32_t *host) {
  size_t bad = 0;
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(host, p, BUF_WORDS * 4));
  for (size_t j = 0; j < BUF_WORDS; j++) bad += host[j] != times * kit_hash(seed, (uint32_t)j);
  return bad;
}

int main(void) {
  const char *e = getenv("P_ITERS");
  int iters = e && atoi(e) > 0 ? atoi(e) : 3;
  e = getenv("P_LAG_MS");
  long lag_ms = e && atoi(e) >= 0 ? atoi(e) : 20;
  CUcontext ctx;
  CUmodule m;
  CUstream s1, s2;
  CUdeviceptr sink, w, a, b, c;
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&m));
  CHECK_CU(kit_cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CHECK_CU(kit_cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&sink, SINK_BYTES)); /* <= VX_NATIVE_MAX: native */
  CHECK_CU(kit_cu.cuMemAlloc_v2(&w, BUF_WORDS * 4));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&a, BUF_WORDS * 4));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&b, BUF_WORDS * 4));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&c, BUF_WORDS * 4));
  CHECK_CU(kit_fill(w, BUF_WORDS, 11, s2));
  CHECK_CU(kit_fill(c, BUF_WORDS, 13, s2));
  CHECK_CU(kit_cu.cuStreamSynchronize(s2));
  for (int i = 0; i < iters; i++) {
    CUdeviceptr t[8] = {sink, w};
    CHECK_CU(kit_cu.cuLaunchHostFunc(s1, lag, (void *)(intptr_t)lag_ms));
    CHECK_CU(kit_touch8(t, SINK_BYTES, s1)); /* reads W's first MiB, late */
    CHECK_CU(kit_add(a, w, w, BUF_WORDS, s2)); /* W's latest planned use */
    CHECK_CU(kit_add(a, a, a, BUF_WORDS, s2));
    CHECK_CU(kit_add(b, c, c, BUF_WORDS, s2)); /* needs room: W goes */
    CHECK_CU(kit_cu.cuStreamSynchronize(s2));
    CHECK_CU(kit_cu.cuStreamSynchronize(s1));
  }
  uint32_t *host = malloc(BUF_WORDS * 4);
  if (!host) return 3;
  size_t bad = check(w, 11, 1, host) + check(a, 11, 4, host) + check(b, 13, 2, host);
  free(host);
  simcuda_stats_t st;
  if (kit_sim_stats(0, &st) != 0) memset(&st, 0, sizeof st);
  printf("{\"bad\":%zu,\"device_used_peak\":%" PRIu64 ",\"bytes_prefetch_htod\":%" PRIu64
         ",\"faults\":%" PRIu64 ",\"bytes_fault_htod\":%" PRIu64 "}\n",
         bad, st.device_used_peak, st.bytes_prefetch_htod, st.faults, st.bytes_fault_htod);
  return bad ? 1 : 0;
}
