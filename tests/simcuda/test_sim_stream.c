/* test_sim_stream.c: streams really run asynchronously and in order; legacy
 * default-stream semantics; events; host functions; several threads at once;
 * stream capture and graph replay.  Runs in one process (also under TSan). */
#include <pthread.h>
#include <string.h>

#include "costs.h"
#include "sim_test.h"

static CUcontext ctx;

typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
} gate;

static void gate_wait(void *arg) {
  gate *g = arg;
  pthread_mutex_lock(&g->mu);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void setup(void) {
  if (!ctx) ctx = sim_test_setup("256M");
  ck_cu(cuCtxSetCurrent(ctx));
}

START_TEST(async_and_in_order) {
  setup();
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  CUstream s;
  ck_cu(cuStreamCreate(&s, 0));
  CUdeviceptr p;
  size_t n = 1 << 18;
  ck_cu(cuMemAlloc(&p, n * 4));
  ck_cu(cuLaunchHostFunc(s, gate_wait, &g));
  ck_cu(kit_fill(p, n, 21, s));
  ck_cu(cuMemsetD32Async(p, 0, 1, s)); /* ordered after the fill */
  ck_cu_is(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  gate_open(&g);
  ck_cu(cuStreamSynchronize(s));
  ck_cu(cuStreamQuery(s));
  uint32_t h[2];
  ck_cu(cuMemcpyDtoH(h, p, sizeof h));
  ck_assert_uint_eq(h[0], 0);
  ck_assert_uint_eq(h[1], kit_hash(21, 1));
  ck_cu(cuStreamDestroy(s));
  ck_cu_is(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
  ck_cu_is(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
  ck_cu(cuMemFree(p));
}
END_TEST

START_TEST(legacy_stream_semantics) {
  setup();
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  CUstream blocking, nonblocking;
  ck_cu(cuStreamCreate(&blocking, 0));
  ck_cu(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p;
  ck_cu(cuMemAlloc(&p, 4096));
  ck_cu(cuLaunchHostFunc(blocking, gate_wait, &g));
  ck_cu(cuMemsetD32Async(p, 1, 16, NULL)); /* legacy: waits for `blocking` */
  ck_cu(cuMemsetD32Async(p + 64, 2, 16, nonblocking));
  ck_cu(cuStreamSynchronize(nonblocking)); /* does not wait for the legacy stream */
  ck_cu_is(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
  ck_cu_is(cuStreamQuery(CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY);
  gate_open(&g);
  ck_cu(cuStreamSynchronize(NULL));
  uint32_t h[32];
  ck_cu(cuMemcpyDtoH(h, p, sizeof h));
  ck_assert_uint_eq(h[0], 1);
  ck_assert_uint_eq(h[16], 2);
  ck_cu(cuStreamDestroy(blocking));
  ck_cu(cuStreamDestroy(nonblocking));
  ck_cu(cuMemFree(p));
}
END_TEST

static int order[8], norder;
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static void note(void *arg) {
  pthread_mutex_lock(&order_mu);
  order[norder++] = (int)(intptr_t)arg;
  pthread_mutex_unlock(&order_mu);
}

START_TEST(events_and_host_functions) {
  setup();
  CUstream a, b;
  ck_cu(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  ck_cu(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  CUevent e0, e1, never, notime;
  ck_cu(cuEventCreate(&e0, 0));
  ck_cu(cuEventCreate(&e1, 0));
  ck_cu(cuEventCreate(&never, 0));
  ck_cu(cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));
  ck_cu(cuEventRecord(e0, a));
  ck_cu(cuLaunchHostFunc(a, gate_wait, &g));
  ck_cu(cuLaunchHostFunc(a, note, (void *)1));
  ck_cu(cuEventRecord(e1, a));
  ck_cu(cuStreamWaitEvent(b, e1, 0));
  ck_cu(cuLaunchHostFunc(b, note, (void *)2));
  ck_cu(cuStreamWaitEvent(b, never, 0)); /* never recorded: no wait */
  ck_cu_is(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
  ck_cu_is(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
  gate_open(&g);
  ck_cu(cuStreamSynchronize(b));
  ck_assert_int_eq(norder, 2);
  ck_assert_int_eq(order[0], 1); /* b ran after a's record */
  ck_assert_int_eq(order[1], 2);
  ck_cu(cuEventSynchronize(e1));
  ck_cu(cuEventQuery(e1));
  float ms = -1;
  ck_cu(cuEventElapsedTime(&ms, e0, e1));
  ck_assert(ms >= 0.0f);
  ck_cu_is(cuEventElapsedTime(&ms, e0, never), CUDA_ERROR_INVALID_HANDLE);
  ck_cu(cuEventRecord(notime, a));
  ck_cu(cuEventSynchronize(notime));
  ck_cu_is(cuEventElapsedTime(&ms, e0, notime), CUDA_ERROR_INVALID_HANDLE);
  ck_cu(cuEventDestroy(e0));
  ck_cu_is(cuEventQuery(e0), CUDA_ERROR_INVALID_HANDLE);
  ck_cu(cuEventDestroy(e1));
  ck_cu(cuEventDestroy(never));
  ck_cu(cuEventDestroy(notime));
  ck_cu(cuStreamDestroy(a));
  ck_cu(cuStreamDestroy(b));
}
END_TEST

/* An engine takes work in virtual-time order, whatever order the stream
 * workers reach it in real time: a copy ready early on stream a that gets
 * to the H2D engine after a copy ready later on stream b runs in the idle
 * time before b's (a busy-until engine ran it after), and one too long for
 * that idle time runs after b's, never across it.  Times are the
 * simulator's virtual clock (cuEventElapsedTime), not the host's. */
static float gap_copy_ms(size_t n) {
  CUstream a, b;
  ck_cu(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  ck_cu(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUdeviceptr big, da, db;
  void *h;
  ck_cu(cuMemAlloc(&big, 64 * MiB));
  ck_cu(cuMemAlloc(&da, n));
  ck_cu(cuMemAlloc(&db, MiB));
  ck_cu(cuMemAllocHost(&h, 64 * MiB > n ? 64 * MiB : n));
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  CUevent e0, e1;
  ck_cu(cuEventCreate(&e0, 0));
  ck_cu(cuEventCreate(&e1, 0));
  ck_cu(cuEventRecord(e0, a));
  ck_cu(cuLaunchHostFunc(a, gate_wait, &g)); /* a's worker waits for b's to finish */
  ck_cu(cuMemcpyHtoDAsync(da, h, n, a));
  ck_cu(cuEventRecord(e1, a));
  ck_cu(cuMemcpyDtoHAsync(h, big, 64 * MiB, b)); /* the D2H engine, then */
  ck_cu(cuMemcpyHtoDAsync(db, (char *)h + 32 * MiB, MiB, b)); /* H2D after it */
  ck_cu(cuStreamSynchronize(b));
  gate_open(&g);
  ck_cu(cuStreamSynchronize(a));
  float ms = -1;
  ck_cu(cuEventElapsedTime(&ms, e0, e1));
  ck_cu(cuEventDestroy(e0));
  ck_cu(cuEventDestroy(e1));
  ck_cu(cuMemFreeHost(h));
  ck_cu(cuMemFree(big));
  ck_cu(cuMemFree(da));
  ck_cu(cuMemFree(db));
  ck_cu(cuStreamDestroy(a));
  ck_cu(cuStreamDestroy(b));
  return ms;
}

START_TEST(engines_fill_idle_gaps) {
  setup();
  double link_ms = 1.0 / (VX_COST_LINK_GBPS * 1e6); /* ms per byte at the default link */
  double b_wait = 64.0 * MiB * link_ms;              /* b's H2D copy starts after this */
  float fits = gap_copy_ms(MiB);
  ck_assert_msg(fits < b_wait / 2, "1 MiB copy took %.3f ms: it waited for stream b", fits);
  ck_assert_msg(fits >= MiB * link_ms * 0.99, "1 MiB copy took %.3f ms", fits);
  float too_long = gap_copy_ms(128 * MiB); /* longer than the idle time: after b's copy */
  ck_assert_msg(too_long >= (b_wait + 129.0 * MiB * link_ms) * 0.99,
                "128 MiB copy took %.3f ms: it overlapped stream b's", too_long);
}
END_TEST

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  long fails = 0;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return (void *)1;
  CUstream s;
  if (cuStreamCreate(&s, 0) != CUDA_SUCCESS) return (void *)1;
  for (int it = 0; it < 20; it++) {
    size_t n = (size_t)(64 + id * 1000 + it * 37) * 256;
    uint32_t seed = (uint32_t)(id * 100 + it);
    CUstream use = it % 2 ? s : CU_STREAM_PER_THREAD;
    CUdeviceptr p;
    unsigned long long bad = 1;
    if (cuMemAlloc(&p, n * 4) != CUDA_SUCCESS) return (void *)1;
    fails += kit_fill(p, n, seed, use) != CUDA_SUCCESS;
    fails += kit_check(p, n, seed, use, &bad) != CUDA_SUCCESS;
    fails += bad != 0;
    fails += cuMemFree(p) != CUDA_SUCCESS;
  }
  fails += cuStreamDestroy(s) != CUDA_SUCCESS;
  return (void *)fails;
}

START_TEST(threads_at_once) {
  setup();
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    ck_assert_ptr_null(r);
  }
}
END_TEST

/* Managed memory from several threads on a device smaller than their sum:
 * prefetches, faults, evictions and discards race; data stays exact. */
static void *managed_worker(void *arg) {
  int id = (int)(intptr_t)arg;
  long fails = 0;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return (void *)1;
  CUstream s;
  if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return (void *)1;
  size_t bytes = 72 * MiB, n = bytes / 4;
  CUdeviceptr p;
  if (cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS) return (void *)1;
  CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
  for (int it = 0; it < 2; it++) {
    uint32_t seed = (uint32_t)(id * 10 + it);
    unsigned long long bad = 1;
    fails += cuMemPrefetchAsync(p, bytes, dev0, 0, s) != CUDA_SUCCESS;
    fails += kit_fill(p, n, seed, s) != CUDA_SUCCESS;
    fails += cuMemPrefetchAsync(p, bytes / 2, host, 0, s) != CUDA_SUCCESS;
    fails += kit_check(p, n, seed, s, &bad) != CUDA_SUCCESS || bad != 0;
    size_t half = bytes / 2;
    fails += cuMemDiscardBatchAsync(&p, &half, 1, 0, s) != CUDA_SUCCESS;
  }
  fails += cuStreamSynchronize(s) != CUDA_SUCCESS;
  fails += cuMemFree(p) != CUDA_SUCCESS;
  fails += cuStreamDestroy(s) != CUDA_SUCCESS;
  return (void *)fails;
}

START_TEST(managed_from_threads) {
  setup(); /* 256M device, 4 x 72 MiB of managed memory */
  simcuda_stats_t before = sim_test_stats(0);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, managed_worker, (void *)(intptr_t)i);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    ck_assert_ptr_null(r);
  }
  simcuda_stats_t st = sim_test_stats(0);
  ck_assert_uint_gt(st.evictions, before.evictions);
  ck_assert_uint_gt(st.discards, before.discards);
  ck_assert_uint_gt(st.bytes_prefetch_htod, before.bytes_prefetch_htod);
}
END_TEST

START_TEST(capture_and_replay) {
  setup();
  CUstream s;
  ck_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  size_t n = 4096;
  CUdeviceptr p;
  ck_cu(cuMemAlloc(&p, n * 4));
  float ones[4096];
  for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
  ck_cu(cuMemcpyHtoD(p, ones, sizeof ones));
  CUstreamCaptureStatus cs;
  ck_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ck_cu(cuStreamIsCapturing(s, &cs));
  ck_assert_int_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ck_cu(kit_scale(p, n, 2.0f, s)); /* recorded, not run */
  CUgraph g;
  ck_cu(cuStreamEndCapture(s, &g));
  float h[4];
  ck_cu(cuMemcpyDtoH(h, p, sizeof h));
  ck_assert(h[0] == 1.0f);
  size_t nn = 0;
  ck_cu(cuGraphGetNodes(g, NULL, &nn));
  ck_assert_uint_eq(nn, 1);
  CUgraphNode node;
  ck_cu(cuGraphGetNodes(g, &node, &nn));
  CUgraphNodeType type;
  ck_cu(cuGraphNodeGetType(node, &type));
  ck_assert_int_eq(type, CU_GRAPH_NODE_TYPE_KERNEL);
  CUDA_KERNEL_NODE_PARAMS kp;
  ck_cu(cuGraphKernelNodeGetParams(node, &kp));
  ck_assert_ptr_eq(kp.func, kit_fn("scale_f32"));
  ck_assert_uint_eq(*(CUdeviceptr *)kp.kernelParams[0], p);
  ck_assert_uint_eq(*(size_t *)kp.kernelParams[1], n);
  CUgraphExec ge;
  ck_cu(cuGraphInstantiate(&ge, g, 0));
  ck_cu(cuGraphLaunch(ge, s));
  ck_cu(cuGraphLaunch(ge, s));
  ck_cu(cuStreamSynchronize(s));
  ck_cu(cuMemcpyDtoH(h, p, sizeof h));
  ck_assert(h[3] == 4.0f);
  /* synchronising a capturing stream is refused and kills the capture */
  ck_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ck_cu_is(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
  ck_cu(kit_scale(p, n, 2.0f, s));
  ck_cu_is(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ck_cu(cuStreamIsCapturing(s, &cs));
  ck_assert_int_eq(cs, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CUgraph g2 = (CUgraph)1;
  ck_cu_is(cuStreamEndCapture(s, &g2), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_assert_ptr_null(g2);
  ck_cu_is(cuStreamEndCapture(s, &g2), CUDA_ERROR_ILLEGAL_STATE);
  ck_cu_is(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
           CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ck_cu(cuGraphExecDestroy(ge));
  ck_cu(cuGraphDestroy(g));
  ck_cu(cuStreamDestroy(s));
  ck_cu(cuMemFree(p));
}
END_TEST

// ---- capture modes (capture helper) ----

/* One driver call made from another thread (in interaction mode `mode`). */
typedef struct other_call {
  int what; /* 0: cuMemAlloc, 1: cuEventQuery, 2: cuStreamEndCapture */
  CUstreamCaptureMode mode;
  CUstream s;
  CUevent ev;
  CUresult r;
} other_call;

static CUdeviceptr other_ptrs[16];
static int n_other;

static void *other_thread(void *arg) {
  other_call *c = arg;
  c->r = cuCtxSetCurrent(ctx);
  CUstreamCaptureMode m = c->mode;
  if (c->r == CUDA_SUCCESS) c->r = cuThreadExchangeStreamCaptureMode(&m);
  if (c->r != CUDA_SUCCESS) return NULL;
  CUdeviceptr p = 0;
  CUgraph g;
  switch (c->what) {
  case 0:
    c->r = cuMemAlloc(&p, 4096);
    if (c->r == CUDA_SUCCESS) other_ptrs[n_other++] = p; /* freed after the captures */
    break;
  case 1:
    c->r = cuEventQuery(c->ev);
    break;
  default:
    c->r = cuStreamEndCapture(c->s, &g);
    break;
  }
  return NULL;
}

static CUresult from_other(int what, CUstreamCaptureMode mode, CUstream s, CUevent ev) {
  other_call c = {.what = what, .mode = mode, .s = s, .ev = ev};
  pthread_t t;
  pthread_create(&t, NULL, other_thread, &c);
  pthread_join(t, NULL);
  return c.r;
}

static CUresult end_status(CUstream s) {
  CUgraph g = NULL;
  CUresult r = cuStreamEndCapture(s, &g);
  if (r == CUDA_SUCCESS)
    ck_cu(cuGraphDestroy(g));
  else
    ck_assert_ptr_null(g);
  return r;
}

START_TEST(capture_modes) {
  setup();
  CUstream s, nb;
  ck_cu(cuStreamCreate(&s, 0)); /* blocking: the legacy stream depends on it */
  ck_cu(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  ck_cu(cuEventCreate(&ev, 0));
  ck_cu(cuEventRecord(ev, nb));
  /* complete before the queries below expect CUDA_SUCCESS: nb's worker
   * records it in its own time, and under load it was still NOT_READY */
  ck_cu(cuEventSynchronize(ev));
  CUdeviceptr p;
  CUstreamCaptureStatus cs;
  const CUstreamCaptureMode G = CU_STREAM_CAPTURE_MODE_GLOBAL,
                            TL = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                            R = CU_STREAM_CAPTURE_MODE_RELAXED;

  /* global: another thread in global mode may not allocate or query an
   * event; the capture is invalidated and ends with an error */
  ck_cu(cuStreamBeginCapture(nb, G));
  ck_cu_is(from_other(0, G, NULL, NULL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ck_cu(cuStreamIsCapturing(nb, &cs));
  ck_assert_int_eq(cs, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  cuuint64_t id;
  ck_cu(cuStreamGetCaptureInfo(nb, &cs, &id, NULL, NULL, NULL, NULL));
  ck_assert_int_eq(cs, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  ck_cu_is(end_status(nb), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuStreamBeginCapture(nb, G));
  ck_cu_is(from_other(1, G, NULL, ev), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ck_cu_is(end_status(nb), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  /* ... unless that thread is relaxed (or thread-local), the documented tool */
  ck_cu(cuStreamBeginCapture(nb, G));
  ck_cu(from_other(0, R, NULL, NULL));
  ck_cu(from_other(0, TL, NULL, NULL));
  ck_cu(from_other(1, R, NULL, ev));
  /* the capturing thread itself is prohibited too, but relaxed is allowed */
  ck_cu_is(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ck_cu_is(end_status(nb), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuStreamBeginCapture(nb, G));
  CUstreamCaptureMode m = R;
  ck_cu(cuThreadExchangeStreamCaptureMode(&m));
  ck_assert_int_eq(m, G); /* the default */
  ck_cu(cuMemAlloc(&p, 4096));
  ck_cu(cuThreadExchangeStreamCaptureMode(&m));
  ck_assert_int_eq(m, R);
  ck_cu_is(cuMemAlloc(&p, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ck_cu_is(end_status(nb), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuMemFree(p));

  /* thread-local: other threads are free; this one is not */
  ck_cu(cuStreamBeginCapture(nb, TL));
  ck_cu(from_other(0, G, NULL, NULL));
  ck_cu_is(from_other(2, G, nb, NULL), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  ck_cu_is(cuEventQuery(ev), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ck_cu_is(end_status(nb), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuStreamBeginCapture(nb, TL));
  ck_cu(from_other(0, G, NULL, NULL));
  ck_cu(end_status(nb));

  /* relaxed: unsafe calls pass; what conflicts with the capture does not */
  ck_cu(cuStreamBeginCapture(nb, R));
  ck_cu(cuMemAlloc(&p, 4096));
  ck_cu(cuMemcpyHtoD(p, &id, sizeof id));
  ck_cu(cuEventRecord(ev, nb)); /* captured */
  ck_cu(from_other(0, G, NULL, NULL));
  ck_cu(from_other(2, G, nb, NULL)); /* ended by another thread: allowed */
  ck_cu_is(cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
  ck_cu_is(cuStreamWaitEvent(s, ev, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* no join */
  ck_cu(cuEventRecord(ev, nb));
  /* a capture may not wait for outside work, unless the wait is external */
  ck_cu(cuStreamBeginCapture(nb, R));
  ck_cu(cuStreamWaitEvent(nb, ev, CU_EVENT_WAIT_EXTERNAL));
  ck_cu(end_status(nb));
  ck_cu(cuStreamBeginCapture(nb, R));
  ck_cu_is(cuStreamWaitEvent(nb, ev, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  ck_cu_is(end_status(nb), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuEventSynchronize(ev));
  ck_cu(cuStreamBeginCapture(nb, R));
  ck_cu_is(cuMemFree(p), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* waits for the device */
  ck_cu_is(end_status(nb), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuStreamBeginCapture(nb, R));
  ck_cu_is(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ck_cu_is(end_status(nb), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuMemFree(p));

  /* a blocking stream captures: the legacy stream is unusable, in any mode */
  ck_cu(cuStreamBeginCapture(s, R));
  ck_cu_is(cuStreamIsCapturing(CU_STREAM_LEGACY, &cs), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  ck_cu(cuStreamIsCapturing(s, &cs)); /* that query does not invalidate */
  ck_assert_int_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ck_cu(cuMemAlloc(&p, 4096));
  ck_cu(cuMemsetD8Async(p, 1, 4096, nb)); /* a non-blocking stream is independent */
  ck_cu_is(cuMemsetD8Async(p, 1, 4096, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  ck_cu(cuStreamIsCapturing(s, &cs));
  ck_assert_int_eq(cs, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  ck_cu_is(end_status(s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuStreamBeginCapture(s, R));
  ck_cu_is(cuStreamSynchronize(NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  ck_cu_is(end_status(s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuStreamBeginCapture(s, R));
  ck_cu_is(cuMemcpyHtoD(p, &id, sizeof id), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  ck_cu_is(end_status(s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

  /* into an existing graph: the same rules; the graph stays the caller's */
  CUgraph into, got = NULL;
  ck_cu(cuGraphCreate(&into, 0));
  ck_cu(cuStreamBeginCaptureToGraph(nb, into, NULL, NULL, 0, G));
  ck_cu(kit_scale(p, 1024, 2.0f, nb));
  ck_cu(cuStreamEndCapture(nb, &got));
  ck_assert_ptr_eq(got, into);
  size_t nn = 0;
  ck_cu(cuGraphGetNodes(into, NULL, &nn));
  ck_assert_uint_eq(nn, 1);
  ck_cu(cuStreamBeginCaptureToGraph(nb, into, NULL, NULL, 0, G));
  ck_cu_is(from_other(0, G, NULL, NULL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ck_cu_is(end_status(nb), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ck_cu(cuGraphDestroy(into));

  /* bad arguments; and after all that nothing is left capturing */
  m = (CUstreamCaptureMode)7;
  ck_cu_is(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE);
  ck_cu_is(cuStreamBeginCapture(nb, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
  ck_cu(from_other(0, G, NULL, NULL));
  ck_cu(cuEventQuery(ev));
  ck_cu(cuStreamSynchronize(NULL));
  ck_cu(cuMemFree(p));
  while (n_other > 0)
    ck_cu(cuMemFree(other_ptrs[--n_other]));
  ck_cu(cuEventDestroy(ev));
  ck_cu(cuStreamDestroy(s));
  ck_cu(cuStreamDestroy(nb));
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim_stream");
  TCase *tc = tcase_create("stream");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, async_and_in_order);
  tcase_add_test(tc, legacy_stream_semantics);
  tcase_add_test(tc, events_and_host_functions);
  tcase_add_test(tc, engines_fill_idle_gaps);
  tcase_add_test(tc, threads_at_once);
  tcase_add_test(tc, managed_from_threads);
  tcase_add_test(tc, capture_and_replay);
  tcase_add_test(tc, capture_modes);
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
