/* play_child.c: the player inside `vx play`'s child: the trace as a driver-API
 * program (libvx.so preloaded, the simulated driver underneath, all entry
 * points through dlsym as frameworks do), one kernel per launch record. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <uthash.h>

#include "costs.h"
#include "play.h"
#include "replay.h"
#include "simcuda.h"

/* The driver entry points the player calls. */
#define PLAY_ENTRIES(X)                                                                            \
  X(cuInit, CUresult (*)(unsigned))                                                                \
  X(cuDeviceGet, CUresult (*)(CUdevice *, int))                                                    \
  X(cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext *, CUdevice))                                 \
  X(cuCtxSetCurrent, CUresult (*)(CUcontext))                                                      \
  X(cuCtxSynchronize, CUresult (*)(void))                                                          \
  X(cuModuleLoadData, CUresult (*)(CUmodule *, const void *))                                      \
  X(cuModuleGetFunction, CUresult (*)(CUfunction *, CUmodule, const char *))                       \
  X(cuStreamCreate, CUresult (*)(CUstream *, unsigned))                                            \
  X(cuMemAlloc_v2, CUresult (*)(CUdeviceptr *, size_t))                                            \
  X(cuMemFree_v2, CUresult (*)(CUdeviceptr))                                                       \
  X(cuMemAllocHost_v2, CUresult (*)(void **, size_t))                                              \
  X(cuMemcpyHtoDAsync_v2, CUresult (*)(CUdeviceptr, const void *, size_t, CUstream))               \
  X(cuMemcpyDtoHAsync_v2, CUresult (*)(void *, CUdeviceptr, size_t, CUstream))                     \
  X(cuStreamSynchronize, CUresult (*)(CUstream))                                                   \
  X(cuEventCreate, CUresult (*)(CUevent *, unsigned))                                              \
  X(cuEventRecord, CUresult (*)(CUevent, CUstream))                                                \
  X(cuEventSynchronize, CUresult (*)(CUevent))                                                     \
  X(cuLaunchKernel, CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,     \
                                 unsigned, unsigned, CUstream, void **, void **))                  \
  X(simcuda_register_kernel, int (*)(const char *, simcuda_kernel_fn))                             \
  X(simcuda_access, void *(*)(simcuda_kctx_t *, CUdeviceptr, size_t, int))                         \
  X(simcuda_kernel_stream, CUstream (*)(const simcuda_kctx_t *))                                   \
  X(simcuda_kernel_time, void (*)(simcuda_kctx_t *, uint64_t))                                     \
  X(simcuda_reset_stats, void (*)(void))                                                           \
  X(simcuda_get_stats, int (*)(int, simcuda_stats_t *))

static struct {
#define PLAY_FIELD(name, type) __typeof__(type) name;
  PLAY_ENTRIES(PLAY_FIELD)
#undef PLAY_FIELD
} drv;

static int load_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    fprintf(stderr, "vx play: cannot load libcuda.so.1: %s\n", dlerror());
    return -1;
  }
#define PLAY_SYM(name, type)                                                                       \
  *(void **)&drv.name = dlsym(h, #name);                                                           \
  if (!drv.name) {                                                                                 \
    fprintf(stderr, "vx play: libcuda.so.1 has no %s: not the simulated driver\n", #name);         \
    return -1;                                                                                     \
  }
  PLAY_ENTRIES(PLAY_SYM)
#undef PLAY_SYM
  return 0;
}

// ---- out-of-band launch descriptions: what each kernel touches, how long ----

/* A launch as the kernel body needs it: the byte ranges (the kernel's
 * parameters are only their start pointers) and the compute time. */
typedef struct pdesc {
  struct pdesc *next;
  uint64_t ns;
  uint32_t n;
  struct {
    CUdeviceptr p;
    size_t bytes;
    int mode;
  } r[];
} pdesc;

/* Descriptions wait in a FIFO per stream: a stream runs its kernels in order. */
typedef struct pqueue {
  CUstream s;
  pdesc *head, *tail;
  UT_hash_handle hh;
} pqueue;

static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static pqueue *queues;

static void q_push(pqueue *q, pdesc *d) {
  pthread_mutex_lock(&qmu);
  d->next = NULL;
  if (q->tail)
    q->tail->next = d;
  else
    q->head = d;
  q->tail = d;
  pthread_mutex_unlock(&qmu);
}

/* Takes back the newest description of q (its launch was refused). */
static void q_unpush(pqueue *q, pdesc *d) {
  pthread_mutex_lock(&qmu);
  pdesc **pp = &q->head, *prev = NULL;
  while (*pp && *pp != d)
    prev = *pp, pp = &(*pp)->next;
  if (*pp) {
    *pp = d->next;
    if (q->tail == d) q->tail = prev;
  }
  pthread_mutex_unlock(&qmu);
}

static pdesc *q_pop(CUstream s) {
  pthread_mutex_lock(&qmu);
  pqueue *q = NULL;
  HASH_FIND_PTR(queues, &s, q);
  pdesc *d = q ? q->head : NULL;
  if (d) {
    q->head = d->next;
    if (!q->head) q->tail = NULL;
  }
  pthread_mutex_unlock(&qmu);
  return d;
}

/* The body of every player kernel. */
static void play_kernel(void **params, simcuda_kctx_t *k) {
  (void)params;
  pdesc *d = q_pop(drv.simcuda_kernel_stream(k));
  if (!d) return; /* cannot happen: a launch always queues its description first */
  for (uint32_t i = 0; i < d->n; i++)
    if (!drv.simcuda_access(k, d->r[i].p, d->r[i].bytes, d->r[i].mode)) break;
  drv.simcuda_kernel_time(k, d->ns);
  free(d);
}

// ---- kernels: one PTX entry per (trace kernel, range count) ----

typedef struct pkern {
  uint64_t key[2]; /* kernel hash, nranges */
  char name[64];
  CUfunction f;
  UT_hash_handle hh;
} pkern;

#define MAX_ENTRIES 1000 /* the simulator registers up to 1024 bodies */

static void entry_name(char *out, size_t len, uint64_t kernel, uint32_t n, size_t idx) {
  if (idx < MAX_ENTRIES)
    snprintf(out, len, "vxplay_%016" PRIx64 "_%u", kernel, n);
  else /* past the registry: share an entry, still one per range count */
    snprintf(out, len, "vxplay_shared%zu_%u", idx % 8, n);
}

static int add_ptx(char **ptx, size_t *len, size_t *cap, const char *name, uint32_t n) {
  size_t need = *len + 128 + (size_t)n * 64;
  if (need > *cap) {
    size_t nc = *cap * 2 > need ? *cap * 2 : need;
    char *p = realloc(*ptx, nc);
    if (!p) return -ENOMEM;
    *ptx = p, *cap = nc;
  }
  *len += (size_t)sprintf(*ptx + *len, ".visible .entry %s(", name);
  for (uint32_t i = 0; i < n; i++)
    *len += (size_t)sprintf(*ptx + *len, "%s\n\t.param .u64 %s_param_%u", i ? "," : "", name, i);
  *len += (size_t)sprintf(*ptx + *len, "\n)\n{\n\tret;\n}\n\n");
  return 0;
}

/* Makes the module of every kernel the trace launches. */
static int make_kernels(const rp_trace_t *t, pkern **kerns) {
  size_t cap = 4096, len = 0, idx = 0;
  char *ptx = malloc(cap);
  if (!ptx) return -ENOMEM;
  len = (size_t)sprintf(ptx, ".version 8.0\n.target sm_80\n.address_size 64\n\n");
  for (size_t i = 0; i < t->nev; i++) {
    const rp_event_t *ev = &t->ev[i];
    if (ev->type != POL_TREC_LAUNCH) continue;
    uint64_t key[2] = {ev->kernel, ev->nr};
    pkern *k;
    HASH_FIND(hh, *kerns, key, sizeof key, k);
    if (k) continue;
    k = calloc(1, sizeof *k);
    if (!k) return -ENOMEM;
    memcpy(k->key, key, sizeof key);
    entry_name(k->name, sizeof k->name, ev->kernel, ev->nr, idx++);
    pkern *same = NULL;
    for (pkern *o = *kerns; o && !same; o = o->hh.next)
      if (!strcmp(o->name, k->name)) same = o;
    HASH_ADD(hh, *kerns, key, sizeof k->key, k);
    if (same) continue;
    if (add_ptx(&ptx, &len, &cap, k->name, ev->nr) < 0 ||
        drv.simcuda_register_kernel(k->name, play_kernel) != 0)
      return -ENOMEM;
  }
  CUmodule m;
  CUresult r = drv.cuModuleLoadData(&m, ptx);
  free(ptx);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "vx play: cuModuleLoadData failed (%d)\n", (int)r);
    return -EINVAL;
  }
  for (pkern *k = *kerns; k; k = k->hh.next)
    if ((r = drv.cuModuleGetFunction(&k->f, m, k->name)) != CUDA_SUCCESS) {
      fprintf(stderr, "vx play: cuModuleGetFunction(%s) failed (%d)\n", k->name, (int)r);
      return -EINVAL;
    }
  return 0;
}

// ---- the program ----

/* Where a range's pointer goes inside a chunk it shares with the range
 * before it: PyTorch's caching allocator rounds blocks to 512 bytes. */
#define SHARED_IN 512

typedef struct player {
  const rp_trace_t *t;
  CUdeviceptr *ptr; /* per dense allocation index, 0 when not live */
  pkern *kerns;
  uint64_t nstreams;
  uint64_t sid[64];
  pqueue *q[64];
  void **pv; /* parameter array scratch */
  CUdeviceptr *pval;
  unsigned ahead; /* launches the host may run ahead of the device (0: unbounded) */
  CUevent *done;  /* ring of ahead events, one recorded after each launch */
  size_t nlaunched;
  uint64_t compute_ns; /* the kernel times declared, summed */
  void *host;          /* pinned bounce buffer of the trace's copies */
  size_t host_len;
  uint8_t *shared; /* per chunk of the trace: the last chunk of a range that starts before it */
} player;

static pqueue *stream_of(player *P, uint64_t id) {
  for (uint64_t i = 0; i < P->nstreams; i++)
    if (P->sid[i] == id) return P->q[i];
  if (P->nstreams == 64) return P->q[63]; /* more streams than that: share the last */
  pqueue *q = calloc(1, sizeof *q);
  if (!q || drv.cuStreamCreate(&q->s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    free(q);
    return NULL;
  }
  pthread_mutex_lock(&qmu);
  HASH_ADD_PTR(queues, s, q);
  pthread_mutex_unlock(&qmu);
  P->sid[P->nstreams] = id;
  return P->q[P->nstreams++] = q;
}

static int play_launch(player *P, const rp_event_t *ev) {
  const rp_trace_t *t = P->t;
  pdesc *d = malloc(sizeof *d + (size_t)ev->nr * sizeof d->r[0]);
  if (!d) return -ENOMEM;
  uint64_t touched = 0;
  d->n = 0;
  for (uint32_t i = 0; i < ev->nr; i++) {
    const pol_range_t *rg = &t->rg[ev->r0 + i];
    uint32_t a = t->rg_alloc[ev->r0 + i];
    uint64_t off = (uint64_t)rg->first * t->chunk, size = t->al[a].size;
    CUdeviceptr base = P->ptr[a];
    /* A chunk two tensors share (a caching allocator's blocks are not
     * chunk-aligned) ends one range and starts the next: this one's pointer
     * goes inside it, so that libvx, which ends the range before at the
     * next pointer it sees, gives that range the shared chunk too. */
    uint64_t in = P->shared[t->al[a].base + rg->first] && off + SHARED_IN < size ? SHARED_IN : 0;
    P->pval[i] = base + (off < size ? off + in : 0);
    P->pv[i] = &P->pval[i];
    if (!base || off >= size) continue; /* not live, or past the end: nothing touched */
    uint64_t bytes = (uint64_t)rg->count * t->chunk;
    if (bytes > size - off) bytes = size - off;
    int mode = rg->mode == POL_ACCESS_READ ? SIMCUDA_READ : SIMCUDA_RW; /* unknown: a write */
    d->r[d->n].p = base + off;
    d->r[d->n].bytes = bytes;
    d->r[d->n++].mode = mode;
    touched += bytes;
  }
  /* as vx replay: the recorded duration, else the bytes at device bandwidth */
  d->ns = ev->dur ? ev->dur : (uint64_t)((double)touched / VX_COST_DEV_GBPS + 0.5);
  uint64_t key[2] = {ev->kernel, ev->nr};
  pkern *k;
  HASH_FIND(hh, P->kerns, key, sizeof key, k);
  pqueue *q = stream_of(P, ev->stream);
  if (!k || !q) {
    free(d);
    return -ENOMEM;
  }
  /* pace the host as vx replay does: launch i is issued when launch i-ahead is done */
  if (P->ahead && P->nlaunched >= P->ahead &&
      drv.cuEventSynchronize(P->done[P->nlaunched % P->ahead]) != CUDA_SUCCESS) {
    free(d);
    fprintf(stderr, "vx play: cuEventSynchronize failed\n");
    return -EIO;
  }
  uint64_t d_ns = d->ns; /* d belongs to the kernel once queued */
  q_push(q, d);
  CUresult r = drv.cuLaunchKernel(k->f, 1, 1, 1, 1, 1, 1, 0, q->s, ev->nr ? P->pv : NULL, NULL);
  if (r != CUDA_SUCCESS) {
    q_unpush(q, d);
    free(d);
    fprintf(stderr, "vx play: cuLaunchKernel failed (%d)\n", (int)r);
    return -EIO;
  }
  if (P->ahead && drv.cuEventRecord(P->done[P->nlaunched % P->ahead], q->s) != CUDA_SUCCESS) {
    fprintf(stderr, "vx play: cuEventRecord failed\n");
    return -EIO;
  }
  P->nlaunched++;
  P->compute_ns += d_ns;
  return 0;
}

/* The copies go through one pinned buffer of at most PLAY_HOST_MAX bytes, a
 * bigger copy as several back to back on its stream (the link time is the
 * same, and a trace's weight loads need not fit in host memory). */
#define PLAY_HOST_MAX ((size_t)64 << 20)

static int make_host(player *P) {
  const rp_trace_t *t = P->t;
  size_t want = 0;
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].type == POL_TREC_COPY && t->ev[i].bytes > want) want = t->ev[i].bytes;
  if (!want) return 0;
  P->host_len = want < PLAY_HOST_MAX ? want : PLAY_HOST_MAX;
  if (drv.cuMemAllocHost_v2(&P->host, P->host_len) != CUDA_SUCCESS) {
    fprintf(stderr, "vx play: cuMemAllocHost_v2(%zu) failed\n", P->host_len);
    return -ENOMEM;
  }
  return 0;
}

static int play_copy(player *P, const rp_event_t *ev) {
  CUdeviceptr base = P->ptr[ev->alloc];
  pqueue *q = stream_of(P, ev->stream);
  if (!base || !q) return -EIO;
  for (uint64_t done = 0; done < ev->bytes;) {
    size_t n = ev->bytes - done < P->host_len ? (size_t)(ev->bytes - done) : P->host_len;
    CUdeviceptr d = base + ev->off + done;
    CUresult r = ev->dir == POL_COPY_HTOD ? drv.cuMemcpyHtoDAsync_v2(d, P->host, n, q->s)
                                          : drv.cuMemcpyDtoHAsync_v2(P->host, d, n, q->s);
    if (r != CUDA_SUCCESS) {
      fprintf(stderr, "vx play: a copy of %zu bytes failed (%d)\n", n, (int)r);
      return -EIO;
    }
    done += n;
  }
  if (ev->flags & POL_COPY_SYNC && drv.cuStreamSynchronize(q->s) != CUDA_SUCCESS) {
    fprintf(stderr, "vx play: cuStreamSynchronize failed\n");
    return -EIO;
  }
  return 0;
}

static int play_events(player *P) {
  const rp_trace_t *t = P->t;
  for (size_t i = 0; i < t->nev; i++) {
    const rp_event_t *ev = &t->ev[i];
    CUresult r = CUDA_SUCCESS;
    if (ev->type == POL_TREC_ALLOC) {
      r = drv.cuMemAlloc_v2(&P->ptr[ev->alloc], t->al[ev->alloc].size);
      if (r != CUDA_SUCCESS) {
        fprintf(stderr, "vx play: cuMemAlloc_v2(%" PRIu64 ") failed (%d)\n", t->al[ev->alloc].size,
                (int)r);
        return -ENOMEM;
      }
    } else if (ev->type == POL_TREC_FREE) {
      if (P->ptr[ev->alloc]) r = drv.cuMemFree_v2(P->ptr[ev->alloc]);
      P->ptr[ev->alloc] = 0;
      if (r != CUDA_SUCCESS) {
        fprintf(stderr, "vx play: cuMemFree_v2 failed (%d)\n", (int)r);
        return -EIO;
      }
    } else if (ev->type == POL_TREC_COPY) {
      if (play_copy(P, ev) < 0) return -EIO;
    } else if (play_launch(P, ev) < 0) {
      return -EIO;
    }
  }
  CUresult r = drv.cuCtxSynchronize();
  if (r != CUDA_SUCCESS) fprintf(stderr, "vx play: the launches failed (%d)\n", (int)r);
  return r == CUDA_SUCCESS ? 0 : -EIO;
}

static int setup(void) {
  CUdevice dev;
  CUcontext ctx;
  CUresult r = drv.cuInit(0);
  if (r == CUDA_SUCCESS) r = drv.cuDeviceGet(&dev, 0);
  if (r == CUDA_SUCCESS) r = drv.cuDevicePrimaryCtxRetain(&ctx, dev);
  if (r == CUDA_SUCCESS) r = drv.cuCtxSetCurrent(ctx);
  if (r != CUDA_SUCCESS) fprintf(stderr, "vx play: no simulated device (%d)\n", (int)r);
  return r == CUDA_SUCCESS ? 0 : -ENODEV;
}

static int make_events(player *P) {
  if (!P->ahead) return 0;
  P->done = calloc(P->ahead, sizeof *P->done);
  if (!P->done) return -ENOMEM;
  for (unsigned i = 0; i < P->ahead; i++)
    if (drv.cuEventCreate(&P->done[i], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return -EIO;
  return 0;
}

/* After the last launch completed: every queue is empty.  The driver's
 * objects (module, streams, events) go with the process. */
static void free_player(player *P) {
  pkern *k, *kt;
  HASH_ITER(hh, P->kerns, k, kt) {
    HASH_DEL(P->kerns, k);
    free(k);
  }
  pqueue *q, *qt;
  pthread_mutex_lock(&qmu);
  HASH_ITER(hh, queues, q, qt) {
    HASH_DEL(queues, q);
    for (pdesc *d = q->head, *n; d; d = n)
      n = d->next, free(d);
    free(q);
  }
  pthread_mutex_unlock(&qmu);
  free(P->ptr);
  free(P->pv);
  free(P->pval);
  free(P->shared);
  free(P->done);
}

static uint8_t *shared_chunks(const rp_trace_t *t) {
  uint8_t *sh = calloc(t->nchunks + 1, 1);
  for (size_t i = 0; sh && i < t->nrg; i++) {
    const rp_alloc_t *a = &t->al[t->rg_alloc[i]];
    uint64_t last = (uint64_t)t->rg[i].first + t->rg[i].count - 1;
    if (t->rg[i].count > 1 && last < a->nchunks) sh[a->base + last] = 1;
  }
  return sh;
}

int vx_play_child(const char *path, unsigned ahead) {
  rp_trace_t t;
  char err[256] = "";
  if (vx_play_load(path, &t, err, sizeof err) < 0) {
    fprintf(stderr, "vx play: %s\n", err);
    return 1;
  }
  uint32_t maxr = 1;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].type == POL_TREC_LAUNCH && t.ev[i].nr > maxr) maxr = t.ev[i].nr;
  player P = {.t = &t, .ahead = ahead};
  P.ptr = calloc(t.nal + 1, sizeof *P.ptr);
  P.pv = calloc(maxr, sizeof *P.pv);
  P.pval = calloc(maxr, sizeof *P.pval);
  P.shared = shared_chunks(&t);
  int rc = 1;
  if (P.ptr && P.pv && P.pval && P.shared && load_driver() == 0 && setup() == 0 &&
      make_kernels(&t, &P.kerns) == 0 && make_events(&P) == 0 && make_host(&P) == 0) {
    drv.simcuda_reset_stats();
    simcuda_stats_t st;
    if (play_events(&P) == 0 && drv.simcuda_get_stats(0, &st) == 0) {
      /* stalls as vx replay counts them: waits for faults plus the time
       * kernels spent reading host memory over the link (the simulator puts
       * the latter in kernel_ns, on top of the declared compute time) */
      uint64_t link = st.kernel_ns > P.compute_ns ? st.kernel_ns - P.compute_ns : 0;
      printf(
          "vxplay total_ns=%" PRIu64 " stall_ns=%" PRIu64 " bytes_up=%" PRIu64
          " bytes_down=%" PRIu64 " faults=%" PRIu64 " compute_ns=%" PRIu64 "\n",
          st.total_ns, st.stall_ns + link,
          st.bytes_fault_htod + st.bytes_prefetch_htod + st.bytes_memcpy_htod + st.bytes_link_htod,
          st.bytes_prefetch_dtoh + st.bytes_evict_dtoh + st.bytes_memcpy_dtoh + st.bytes_link_dtoh,
          st.faults, P.compute_ns);
      fflush(stdout);
      rc = 0;
    }
  }
  free_player(&P);
  rp_trace_free(&t);
  return rc;
}
