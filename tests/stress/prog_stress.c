/* prog_stress.c: a driver-API stress program: threads and streams allocating, filling, copying,
 * launching and freeing at random sizes, every write verified by a read-back; the seed is printed
 * first to replay a failure.
 *
 * The patterns the NVMe tier cannot see by looking at one launch (issue #13) are opt-in:
 * --contexts N spreads the threads over N contexts (the primary context of each device, then
 * more contexts made with cuCtxCreate), --graphs adds captured graphs of memset and copy nodes,
 * and --segment-mib M gives each thread one segment of M MiB that kernels reach tensor by
 * tensor, as a caching allocator's segments are (hotter than any host limit). */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kit.h"

/* Every call goes through kit_cu, bound in the lookup style --lookup names
 * (linked symbols, dlsym, or cuGetProcAddress_v2 at a version). */
#define CU(fn) kit_cu.fn

// ---- settings and totals ----

static struct {
  long ops;
  int threads, streams, live, max_kib, managed_pct, no_oom;
  int contexts, graphs, segment_mib;
  uint64_t seed;
  const char *lookup;
} cfg = {2000, 4, 2, 12, 2048, 10, 0, 1, 0, 0, 0, "linked"};

static atomic_long n_ops, n_allocs, n_frees, n_launches, n_copies, n_memsets, n_oom, n_verify;
static atomic_long n_graphs, n_segment_ops;
static atomic_ullong n_bytes_verified;

#define MAX_CONTEXTS 16
static CUcontext ctxs[MAX_CONTEXTS];
static int ctx_made[MAX_CONTEXTS]; /* made with cuCtxCreate: destroyed at the end */

#define SEG_TENSOR_WORDS (256 * 1024) /* 1 MiB tensors in a segment */

// ---- per-thread state ----

enum { B_NATIVE, B_ASYNC, B_MANAGED };

/* Content of a buffer: word i = kit_hash(seed, i) << shift (each add_u32 of
 * the buffer with itself doubles it). */
typedef struct buf {
  CUdeviceptr p;
  uint64_t words;
  uint32_t seed, shift;
  int kind;
} buf_t;

typedef struct worker {
  int id;
  uint64_t rng;
  long ops, op;
  CUstream *streams;
  buf_t *bufs;
  int nbufs;
  uint32_t *host; /* pinned staging, max size */
  CUdeviceptr seg; /* --segment-mib: the thread's segment, 0 = none */
  int ntensors;
  uint32_t *tseed; /* content of each tensor: kit_hash(tseed[t], i) */
  char why[256];   /* the first failure */
} worker_t;

static uint64_t rnd(worker_t *w) { /* splitmix64 */
  uint64_t z = (w->rng += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static uint32_t expect(const buf_t *b, uint64_t i) {
  return b->shift >= 32 ? 0 : kit_hash(b->seed, i) << b->shift;
}

static int fail(worker_t *w, const char *what, CUresult r) {
  snprintf(w->why, sizeof w->why, "seed=%" PRIu64 " thread=%d op=%ld: %s%s%s", cfg.seed, w->id,
           w->op, what, r ? ": " : "", r ? kit_err_name(r) : "");
  return -1;
}

#define CK(w, call)                                                                                \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) return fail(w, #call, r_);                                             \
  } while (0)

static CUstream any_stream(worker_t *w) {
  return w->streams[rnd(w) % (uint64_t)cfg.streams];
}

// ---- verification ----

static int verify_host(worker_t *w, const buf_t *b) {
  CUstream s = any_stream(w);
  if (rnd(w) & 1) {
    CK(w, CU(cuMemcpyDtoHAsync_v2)(w->host, b->p, b->words * 4, s));
    CK(w, CU(cuStreamSynchronize)(s));
  } else {
    CK(w, CU(cuMemcpyDtoH_v2)(w->host, b->p, b->words * 4));
  }
  for (uint64_t i = 0; i < b->words; i++) {
    if (w->host[i] != expect(b, i)) {
      char what[160];
      snprintf(what, sizeof what,
               "word %" PRIu64 " of %" PRIu64 " (kind %d) is %08x, expected %08x", i, b->words,
               b->kind, w->host[i], expect(b, i));
      return fail(w, what, CUDA_SUCCESS);
    }
  }
  return 0;
}

/* check_u32 compares with the plain pattern: only for undoubled content. */
static int verify_device(worker_t *w, const buf_t *b) {
  unsigned long long bad = 1;
  CK(w, kit_check(b->p, b->words, b->seed, any_stream(w), &bad));
  atomic_fetch_add(&n_launches, 1);
  if (bad) return fail(w, "check_u32 found mismatching words", CUDA_SUCCESS);
  return 0;
}

static int verify(worker_t *w, const buf_t *b) {
  atomic_fetch_add(&n_verify, 1);
  atomic_fetch_add(&n_bytes_verified, b->words * 4);
  return b->shift == 0 && rnd(w) % 4 == 0 ? verify_device(w, b) : verify_host(w, b);
}

// ---- writes: each is verified at once ----

static int fill(worker_t *w, buf_t *b) {
  b->seed = (uint32_t)rnd(w);
  b->shift = 0;
  CUstream s = any_stream(w);
  if (rnd(w) & 1) {
    CK(w, kit_fill(b->p, b->words, b->seed, s));
    atomic_fetch_add(&n_launches, 1);
  } else {
    for (uint64_t i = 0; i < b->words; i++)
      w->host[i] = kit_hash(b->seed, i);
    CK(w, CU(cuMemcpyHtoDAsync_v2)(b->p, w->host, b->words * 4, s));
    atomic_fetch_add(&n_copies, 1);
  }
  CK(w, CU(cuStreamSynchronize)(s));
  return verify(w, b);
}

static int double_it(worker_t *w, buf_t *b) {
  CUstream s = any_stream(w);
  CK(w, kit_add(b->p, b->p, b->p, b->words, s));
  atomic_fetch_add(&n_launches, 1);
  CK(w, CU(cuStreamSynchronize)(s));
  b->shift++;
  return verify(w, b);
}

/* A memset (constant content) verified, then a fill restores a pattern. */
static int memset_then_fill(worker_t *w, buf_t *b) {
  uint32_t c = (uint32_t)rnd(w);
  if (rnd(w) & 1) {
    CK(w, CU(cuMemsetD32_v2)(b->p, c, b->words));
  } else {
    CUstream s = any_stream(w);
    CK(w, CU(cuMemsetD32Async)(b->p, c, b->words, s));
    CK(w, CU(cuStreamSynchronize)(s));
  }
  atomic_fetch_add(&n_memsets, 1);
  CK(w, CU(cuMemcpyDtoH_v2)(w->host, b->p, b->words * 4));
  for (uint64_t i = 0; i < b->words; i++)
    if (w->host[i] != c) return fail(w, "memset content differs", CUDA_SUCCESS);
  atomic_fetch_add(&n_bytes_verified, b->words * 4);
  return fill(w, b);
}

// ---- allocation ----

static CUresult alloc_kind(worker_t *w, buf_t *b) {
  uint64_t r = rnd(w) % 100;
  if (r < (uint64_t)cfg.managed_pct) {
    b->kind = B_MANAGED;
    return CU(cuMemAllocManaged)(&b->p, b->words * 4, CU_MEM_ATTACH_GLOBAL);
  }
  if (r < 40) {
    b->kind = B_ASYNC;
    CUstream s = any_stream(w);
    CUresult rc = CU(cuMemAllocAsync)(&b->p, b->words * 4, s);
    return rc == CUDA_SUCCESS ? CU(cuStreamSynchronize)(s) : rc;
  }
  b->kind = B_NATIVE;
  return CU(cuMemAlloc_v2)(&b->p, b->words * 4);
}

/* 1 when an out-of-memory result is acceptable (counted), 0 when fine, -1 on failure. */
static int alloc_result(worker_t *w, CUresult rc, const char *what) {
  if (rc == CUDA_ERROR_OUT_OF_MEMORY && !cfg.no_oom) {
    atomic_fetch_add(&n_oom, 1);
    return 1;
  }
  if (rc != CUDA_SUCCESS) return fail(w, what, rc);
  atomic_fetch_add(&n_allocs, 1);
  return 0;
}

static int alloc_buf(worker_t *w) {
  if (w->nbufs == cfg.live) return 0;
  uint64_t max_words = (uint64_t)cfg.max_kib * 256;
  uint64_t words = 1 + rnd(w) % (rnd(w) & 3 ? max_words / 16 : max_words); /* mostly small */
  buf_t b = {.words = words};
  int r = alloc_result(w, alloc_kind(w, &b), "allocation");
  if (r) return r < 0 ? r : 0;
  w->bufs[w->nbufs++] = b;
  return fill(w, &w->bufs[w->nbufs - 1]);
}

static int free_buf(worker_t *w, int i) {
  buf_t b = w->bufs[i];
  w->bufs[i] = w->bufs[--w->nbufs];
  if (b.kind == B_ASYNC) {
    CUstream s = any_stream(w);
    CK(w, CU(cuMemFreeAsync)(b.p, s));
    CK(w, CU(cuStreamSynchronize)(s));
  } else {
    CK(w, CU(cuMemFree_v2)(b.p));
  }
  atomic_fetch_add(&n_frees, 1);
  return 0;
}

/* A device-to-device clone into a new allocation of the same size. */
static int clone_buf(worker_t *w, int i) {
  if (w->nbufs == cfg.live) return free_buf(w, i);
  buf_t c = w->bufs[i];
  c.kind = B_NATIVE;
  int r = alloc_result(w, CU(cuMemAlloc_v2)(&c.p, c.words * 4), "cuMemAlloc (clone)");
  if (r) return r < 0 ? r : 0;
  w->bufs[w->nbufs++] = c;
  CK(w, CU(cuMemcpyDtoD_v2)(c.p, w->bufs[i].p, c.words * 4));
  atomic_fetch_add(&n_copies, 1);
  return verify(w, &w->bufs[w->nbufs - 1]);
}

// ---- graphs of memset and copy nodes ----

/* A capture excludes the other threads' operations: their frees and
 * synchronous calls would be illegal while it lasts (the driver refuses
 * them, or invalidates the capture).  Every operation holds it shared;
 * graph_op takes it exclusively from BeginCapture to EndCapture only, so
 * the graph's launches still run beside everything else. */
static pthread_rwlock_t capture_rw = PTHREAD_RWLOCK_INITIALIZER;

/* Captured in thread-local mode (other threads go on working), launched,
 * checked: a memset node then a DtoH copy node of the same buffer, or an
 * HtoD copy node of a fresh pattern.  The buffer may be in the NVMe swap
 * at cuGraphLaunch: the nodes must find it whole. */
static int graph_op(worker_t *w, buf_t *b) {
  CUstream s = any_stream(w);
  CUgraph g;
  CUgraphExec e;
  int memset_node = rnd(w) & 1;
  uint32_t c = (uint32_t)rnd(w), seed = (uint32_t)rnd(w);
  if (!memset_node)
    for (uint64_t i = 0; i < b->words; i++)
      w->host[i] = kit_hash(seed, i);
  pthread_rwlock_unlock(&capture_rw);
  pthread_rwlock_wrlock(&capture_rw);
  CUresult rc = CU(cuStreamBeginCapture_v2)(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (rc == CUDA_SUCCESS) {
    rc = memset_node ? CU(cuMemsetD32Async)(b->p, c, b->words, s)
                     : CU(cuMemcpyHtoDAsync_v2)(b->p, w->host, b->words * 4, s);
    if (rc == CUDA_SUCCESS && memset_node)
      rc = CU(cuMemcpyDtoHAsync_v2)(w->host, b->p, b->words * 4, s);
  }
  CUresult end = rc == CUDA_SUCCESS ? CU(cuStreamEndCapture)(s, &g) : CUDA_SUCCESS;
  if (rc != CUDA_SUCCESS) { /* end a capture that began, whatever state it is in */
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (CU(cuStreamIsCapturing)(s, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE &&
        CU(cuStreamEndCapture)(s, &g) == CUDA_SUCCESS && g)
      CU(cuGraphDestroy)(g);
  }
  pthread_rwlock_unlock(&capture_rw);
  pthread_rwlock_rdlock(&capture_rw);
  if (rc != CUDA_SUCCESS) return fail(w, "enqueue during capture", rc);
  if (end != CUDA_SUCCESS) return fail(w, "cuStreamEndCapture", end);
  CK(w, CU(cuGraphInstantiateWithFlags)(&e, g, 0));
  CK(w, CU(cuGraphDestroy)(g));
  if (memset_node) memset(w->host, 0, b->words * 4);
  CK(w, CU(cuGraphLaunch)(e, s));
  CK(w, CU(cuStreamSynchronize)(s));
  CK(w, CU(cuGraphExecDestroy)(e));
  atomic_fetch_add(&n_graphs, 1);
  if (!memset_node) {
    b->seed = seed, b->shift = 0;
    return verify(w, b);
  }
  for (uint64_t i = 0; i < b->words; i++)
    if (w->host[i] != c) return fail(w, "graph memset/copy content differs", CUDA_SUCCESS);
  atomic_fetch_add(&n_bytes_verified, b->words * 4);
  return fill(w, b);
}

// ---- a hot segment ----

static int segment_setup(worker_t *w) {
  w->ntensors = cfg.segment_mib;
  w->tseed = calloc((size_t)w->ntensors, sizeof *w->tseed);
  if (!w->tseed) return fail(w, "out of host memory", CUDA_SUCCESS);
  CK(w, CU(cuMemAlloc_v2)(&w->seg, (size_t)w->ntensors * SEG_TENSOR_WORDS * 4));
  for (int t = 0; t < w->ntensors; t++) {
    w->tseed[t] = (uint32_t)rnd(w);
    CK(w, kit_fill(w->seg + (size_t)t * SEG_TENSOR_WORDS * 4, SEG_TENSOR_WORDS, w->tseed[t],
                   w->streams[0]));
  }
  return 0;
}

/* One tensor checked by a kernel (the launch reaches the segment through
 * an interior pointer), then written anew, sometimes read back by a copy.
 * All on the thread's first stream: a tensor's check must follow its last
 * fill (the streams are non-blocking: nothing else orders them). */
static int segment_op(worker_t *w) {
  int t = (int)(rnd(w) % (uint64_t)w->ntensors);
  CUdeviceptr p = w->seg + (size_t)t * SEG_TENSOR_WORDS * 4;
  CUstream s = w->streams[0];
  unsigned long long bad = 1;
  CK(w, kit_check(p, SEG_TENSOR_WORDS, w->tseed[t], s, &bad));
  if (bad) return fail(w, "segment tensor: check_u32 found mismatching words", CUDA_SUCCESS);
  w->tseed[t] = (uint32_t)rnd(w);
  CK(w, kit_fill(p, SEG_TENSOR_WORDS, w->tseed[t], s));
  atomic_fetch_add(&n_launches, 2);
  atomic_fetch_add(&n_segment_ops, 1);
  atomic_fetch_add(&n_bytes_verified, SEG_TENSOR_WORDS * 4);
  if (rnd(w) % 4) return 0;
  CK(w, CU(cuStreamSynchronize)(s));
  size_t words = SEG_TENSOR_WORDS < (size_t)cfg.max_kib * 256 ? SEG_TENSOR_WORDS
                                                               : (size_t)cfg.max_kib * 256;
  CK(w, CU(cuMemcpyDtoH_v2)(w->host, p, words * 4));
  if (kit_verify_host(w->host, words, w->tseed[t], 0))
    return fail(w, "segment tensor: copy found mismatching words", CUDA_SUCCESS);
  return 0;
}

static int one_op(worker_t *w) {
  uint64_t r = rnd(w) % 100;
  if (w->seg && r < 10) return segment_op(w);
  if (cfg.graphs && w->nbufs && r >= 10 && r < 15)
    return graph_op(w, &w->bufs[rnd(w) % (uint64_t)w->nbufs]);
  if (w->nbufs == 0 || r < 25) return alloc_buf(w);
  int i = (int)(rnd(w) % (uint64_t)w->nbufs);
  if (r < 45) return verify(w, &w->bufs[i]); /* idle data may have moved tiers */
  if (r < 60) return double_it(w, &w->bufs[i]);
  if (r < 68) return fill(w, &w->bufs[i]);
  if (r < 73) return memset_then_fill(w, &w->bufs[i]);
  if (r < 82) return clone_buf(w, i);
  return free_buf(w, i);
}

// ---- threads ----

static int worker_setup(worker_t *w) {
  CK(w, CU(cuCtxSetCurrent)(ctxs[w->id % cfg.contexts]));
  w->streams = calloc((size_t)cfg.streams, sizeof *w->streams);
  w->bufs = calloc((size_t)cfg.live, sizeof *w->bufs);
  if (!w->streams || !w->bufs) return fail(w, "out of host memory", CUDA_SUCCESS);
  for (int s = 0; s < cfg.streams; s++)
    CK(w, CU(cuStreamCreate)(&w->streams[s], CU_STREAM_NON_BLOCKING));
  CK(w, CU(cuMemAllocHost_v2)((void **)&w->host, (size_t)cfg.max_kib * 1024));
  return cfg.segment_mib ? segment_setup(w) : 0;
}

static int worker_teardown(worker_t *w) {
  while (w->nbufs)
    if (free_buf(w, w->nbufs - 1)) return -1;
  for (int t = 0; w->seg && t < w->ntensors; t++) { /* the segment's last contents */
    unsigned long long bad = 1;
    CK(w, kit_check(w->seg + (size_t)t * SEG_TENSOR_WORDS * 4, SEG_TENSOR_WORDS, w->tseed[t],
                    w->streams[0], &bad));
    if (bad) return fail(w, "segment tensor at exit: mismatching words", CUDA_SUCCESS);
  }
  if (w->seg) CK(w, CU(cuMemFree_v2)(w->seg));
  free(w->tseed);
  if (w->host) CK(w, CU(cuMemFreeHost)(w->host));
  for (int s = 0; w->streams && s < cfg.streams; s++)
    if (w->streams[s]) CK(w, CU(cuStreamDestroy_v2)(w->streams[s]));
  return 0;
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  pthread_rwlock_rdlock(&capture_rw);
  int rc = worker_setup(w);
  pthread_rwlock_unlock(&capture_rw);
  for (w->op = 0; rc == 0 && w->op < w->ops; w->op++) {
    pthread_rwlock_rdlock(&capture_rw);
    rc = one_op(w);
    pthread_rwlock_unlock(&capture_rw);
    atomic_fetch_add(&n_ops, 1);
  }
  pthread_rwlock_rdlock(&capture_rw);
  if (rc == 0) rc = worker_teardown(w);
  pthread_rwlock_unlock(&capture_rw);
  free(w->streams);
  free(w->bufs);
  return rc ? w : NULL;
}

// ---- main ----

static int set_num(const char *a, unsigned long long n) {
  if (strcmp(a, "--ops") == 0)
    cfg.ops = (long)n;
  else if (strcmp(a, "--threads") == 0)
    cfg.threads = (int)n;
  else if (strcmp(a, "--seed") == 0)
    cfg.seed = n;
  else if (strcmp(a, "--streams") == 0)
    cfg.streams = (int)n;
  else if (strcmp(a, "--live") == 0)
    cfg.live = (int)n;
  else if (strcmp(a, "--max-kib") == 0)
    cfg.max_kib = (int)n;
  else if (strcmp(a, "--managed-pct") == 0)
    cfg.managed_pct = (int)n;
  else if (strcmp(a, "--contexts") == 0)
    cfg.contexts = (int)n;
  else if (strcmp(a, "--segment-mib") == 0)
    cfg.segment_mib = (int)n;
  else
    return -1;
  return 0;
}

static int parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = NULL;
    if (strcmp(a, "--no-oom") == 0) {
      cfg.no_oom = 1;
      continue;
    }
    if (strcmp(a, "--graphs") == 0) {
      cfg.graphs = 1;
      continue;
    }
    if (!v) return -1;
    i++;
    if (strcmp(a, "--lookup") == 0) {
      cfg.lookup = v;
      continue;
    }
    unsigned long long n = strtoull(v, &end, 0);
    if (*end || !*v || set_num(a, n)) return -1;
  }
  if (cfg.threads < 1 || cfg.threads > 256 || cfg.streams < 1 || cfg.live < 1 || cfg.max_kib < 1 ||
      cfg.max_kib > (1 << 20) || cfg.ops < 0 || cfg.managed_pct > 100 || cfg.contexts < 1 ||
      cfg.contexts > MAX_CONTEXTS || cfg.segment_mib < 0 || cfg.segment_mib > 4096)
    return -1;
  return 0;
}

/* cuCtxCreate_v4 (12.5), else _v2, from the driver the program runs on. */
static CUresult ctx_create(CUcontext *c, CUdevice d) {
  CUresult (*v4)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice);
  CUresult (*v2)(CUcontext *, unsigned, CUdevice);
  *(void **)&v4 = dlsym(RTLD_DEFAULT, "cuCtxCreate_v4");
  if (v4) return v4(c, NULL, 0, d);
  *(void **)&v2 = dlsym(RTLD_DEFAULT, "cuCtxCreate_v2");
  return v2 ? v2(c, 0, d) : CUDA_ERROR_NOT_FOUND;
}

static int setup(void) {
  CUmodule mod;
  CUresult r;
  if (kit_bind_spec(cfg.lookup) != 0) {
    fprintf(stderr, "stress: cannot bind the driver entry points (--lookup %s)\n", cfg.lookup);
    return -1;
  }
  /* Several contexts: kernels from a library (CUkernel handles work in
   * every context), contexts on every device in turn. */
  int ndev = 1;
  if ((r = kit_init(0, &ctxs[0])) || (r = CU(cuDeviceGetCount)(&ndev)) ||
      (r = cfg.contexts > 1 ? kit_library(NULL) : kit_module(&mod))) {
    fprintf(stderr, "stress: setup failed: %s\n", kit_err_name(r));
    return -1;
  }
  for (int k = 1; k < cfg.contexts; k++) {
    CUdevice d;
    if ((r = CU(cuDeviceGet)(&d, k % ndev))) break;
    if (k < ndev) {
      r = CU(cuDevicePrimaryCtxRetain)(&ctxs[k], d);
    } else {
      r = ctx_create(&ctxs[k], d);
      ctx_made[k] = r == CUDA_SUCCESS;
    }
    if (r) break;
  }
  if (r || (r = CU(cuCtxSetCurrent)(ctxs[0]))) {
    fprintf(stderr, "stress: cannot make %d contexts: %s\n", cfg.contexts, kit_err_name(r));
    return -1;
  }
  return kit_fn("fill_u32") && kit_fn("check_u32") && kit_fn("add_u32") ? 0 : -1;
}

static void print_totals(int failed) {
  printf("stress: %s seed=%" PRIu64 " ops=%ld allocs=%ld frees=%ld launches=%ld copies=%ld "
         "memsets=%ld graphs=%ld segment_ops=%ld verifies=%ld bytes_verified=%llu oom=%ld\n",
         failed ? "FAILED" : "ok", cfg.seed, atomic_load(&n_ops), atomic_load(&n_allocs),
         atomic_load(&n_frees), atomic_load(&n_launches), atomic_load(&n_copies),
         atomic_load(&n_memsets), atomic_load(&n_graphs), atomic_load(&n_segment_ops),
         atomic_load(&n_verify), atomic_load(&n_bytes_verified), atomic_load(&n_oom));
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv)) {
    fprintf(stderr, "usage: stress [--ops N] [--threads T] [--seed S] [--streams K] [--live L] "
                    "[--max-kib K] [--managed-pct P] [--lookup linked|dlsym|procaddr:V[:ptds]] "
                    "[--no-oom] [--contexts N] [--graphs] [--segment-mib M]\n");
    return 2;
  }
  if (cfg.seed == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    cfg.seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
  }
  printf("stress: seed=%" PRIu64 " ops=%ld threads=%d streams=%d live=%d max-kib=%d lookup=%s "
         "contexts=%d graphs=%d segment-mib=%d\n",
         cfg.seed, cfg.ops, cfg.threads, cfg.streams, cfg.live, cfg.max_kib, cfg.lookup,
         cfg.contexts, cfg.graphs, cfg.segment_mib);
  fflush(stdout);
  if (setup()) return 1;
  worker_t *w = calloc((size_t)cfg.threads, sizeof *w);
  pthread_t *t = calloc((size_t)cfg.threads, sizeof *t);
  if (!w || !t) return 1;
  for (int i = 0; i < cfg.threads; i++) {
    w[i] = (worker_t){.id = i,
                      .rng = cfg.seed * 1000003u + (uint64_t)i,
                      .ops = cfg.ops / cfg.threads + (i < cfg.ops % cfg.threads)};
    if (pthread_create(&t[i], NULL, worker_main, &w[i])) return 1;
  }
  int failed = 0;
  for (int i = 0; i < cfg.threads; i++) {
    void *r;
    pthread_join(t[i], &r);
    if (r) {
      fprintf(stderr, "stress: FAIL %s\n", w[i].why);
      failed = 1;
    }
  }
  print_totals(failed);
  for (int k = 0; k < cfg.contexts; k++)
    if (ctx_made[k]) CU(cuCtxDestroy_v2)(ctxs[k]);
  free(w);
  free(t);
  return failed;
}
