/* vx_threads: 8 threads allocate, fill, verify, launch and free at once for
 * about 2 seconds, and at least MIN_ITERS rounds each however slow the
 * machine is (a busy CI machine or TSan makes the run longer, never the test
 * weaker); afterwards nothing is left tracked and the counters are exactly
 * the calls the threads made. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "vxt.h"

#define MB (1ULL << 20)
enum { THREADS = 8, LIVE = 3, MIN_ITERS = 8 };

static vxt_api_t api;
static CUfunction k_fill, k_add, k_nop;
static CUcontext ctx;
static double deadline;

struct tstats {
  unsigned long allocs, frees, launches;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *thread_main(void *arg) {
  struct tstats *st = arg;
  static const size_t sizes[] = {256 << 10, 2 * MB, 5 * MB + 4096, 9 * MB};
  unsigned seed = (unsigned)(uintptr_t)st * 7919u + 1;
  CUstream s;
  CUdeviceptr live[LIVE] = {0};
  size_t live_size[LIVE] = {0};
  VXT_CU(cuCtxSetCurrent(ctx));
  VXT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (unsigned long it = 0; it < MIN_ITERS || now_s() < deadline; it++) {
    int slot = (int)(it % LIVE);
    if (live[slot]) {
      VXT_CU(cuMemFree_v2(live[slot]));
      st->frees++;
    }
    size_t size = sizes[rand_r(&seed) % 4];
    VXT_CU(cuMemAlloc_v2(&live[slot], size));
    live_size[slot] = size;
    st->allocs++;
    uint64_t words = size / 4;
    uint32_t tag = (uint32_t)it;
    void *fargs[] = {&live[slot], &words, &tag};
    VXT_CU(cuLaunchKernel(k_fill, 1, 1, 1, 64, 1, 1, 0, s, fargs, NULL));
    void *nargs[8];
    for (int i = 0; i < 8; i++)
      nargs[i] = &live[i % LIVE];
    VXT_CU(cuLaunchKernel(k_nop, 1, 1, 1, 32, 1, 1, 0, s, nargs, NULL));
    st->launches += 2;
    if (it % 4 == 0) {
      uint32_t *h = malloc(size);
      VXT_CU(cuStreamSynchronize(s));
      VXT_CU(cuMemcpyDtoH_v2(h, live[slot], size));
      for (uint64_t i = 0; i < words; i += 97)
        VXT_ASSERT(h[i] == vxt_pattern(i, tag), "thread data at word %llu", (unsigned long long)i);
      free(h);
    }
  }
  VXT_CU(cuStreamSynchronize(s));
  for (int i = 0; i < LIVE; i++)
    if (live[i]) {
      VXT_CU(cuMemFree_v2(live[i]));
      st->frees++;
    }
  VXT_CU(cuStreamDestroy_v2(s));
  (void)live_size;
  return NULL;
}

static int worker(void) {
  vxt_api_load(&api, "linked", 0);
  vxt_ctx(&api, 0);
  VXT_CU(cuCtxGetCurrent(&ctx));
  vxt_module(&api, &k_fill, &k_add, &k_nop);
  const char *secs = getenv("VXT_SECONDS");
  deadline = now_s() + (secs ? atof(secs) : 2.0);
  pthread_t t[THREADS];
  static struct tstats st[THREADS];
  for (int i = 0; i < THREADS; i++)
    VXT_ASSERT(pthread_create(&t[i], NULL, thread_main, &st[i]) == 0);
  struct tstats sum = {0};
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    sum.allocs += st[i].allocs;
    sum.frees += st[i].frees;
    sum.launches += st[i].launches;
  }
  printf("allocs %lu frees %lu launches %lu\n", sum.allocs, sum.frees, sum.launches);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker();
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  char report[256], env_report[300];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(env_report, sizeof env_report, "VX_REPORT=%s", report);
  const char *env[] = {"SIMCUDA_VRAM=64M", "VX_DEVICE_LIMIT=32M", "VX_NATIVE_MAX=0", env_report,
                       NULL};
  vxt_run_t *r = malloc(sizeof *r);
  VXT_ASSERT(vxt_run(r, 1, env, NULL) == 0);
  VXT_ASSERT(r->status == 0, "status %d\n%s%s", r->status, r->out, r->err);
  unsigned long allocs, frees, launches;
  VXT_ASSERT(sscanf(r->out, "allocs %lu frees %lu launches %lu", &allocs, &frees, &launches) == 3);
  VXT_ASSERT(allocs >= MIN_ITERS * THREADS && allocs == frees, "allocs %lu frees %lu", allocs,
             frees);
  char *json = vxt_read_file(report);
  VXT_ASSERT(json);
  unlink(report);
  uint64_t native = vxt_json_u64(json, 0, "alloc_native"),
           managed = vxt_json_u64(json, 0, "alloc_managed");
  VXT_ASSERT(native + managed == allocs && managed > 0 && native > 0, "%lu allocs: %s", allocs,
             json);
  VXT_ASSERT(vxt_json_u64(json, 0, "frees") == frees, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "launches") == launches, "%lu launches: %s", launches, json);
  VXT_ASSERT(vxt_json_u64(json, 0, "native_bytes") == 0 &&
             vxt_json_u64(json, 0, "managed_bytes") == 0);
  VXT_ASSERT(vxt_json_u64(json, 0, "native_bytes_peak") <= 32 * MB, "%s", json);
  VXT_ASSERT(vxt_json_u64(json, 0, "underflows") == 0 && vxt_json_u64(json, -1, "tracked") == 0);
  printf("%lu allocations (%llu native, %llu managed), %lu launches, counters exact\n", allocs,
         (unsigned long long)native, (unsigned long long)managed, launches);
  free(json);
  free(r);
  return 0;
}
