/* sim_internal.h: shared state and module interfaces of the simulated driver.
 * One global lock (sim_g.lock) guards memory state, accounting, clock and stats. */
#ifndef VX_SIM_INTERNAL_H
#define VX_SIM_INTERNAL_H

/* The driver's own view of cuda.h: every variant (v1, _v2, _ptds, _ptsz) is
 * declared under its exact name and no name is macro-renamed. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "simcuda.h"

#define SIM_API __attribute__((visibility("default")))
#define SIM_MAXDEV 8
#define SIM_CHUNK ((size_t)2 << 20)
#define SIM_RING 256

/* Every exported entry point starts with SIM_ENTER(its exact symbol name):
 * the fault-injection check (SIMCUDA_FAIL). */
#define SIM_ENTER(sym)                                                         \
  do {                                                                         \
    CUresult sim_r_ = sim_entry_check(#sym);                                   \
    if (sim_r_ != CUDA_SUCCESS) return sim_r_;                                 \
  } while (0)
/* ... plus "cuInit has been called". */
#define SIM_ENTER_INIT(sym)                                                    \
  do {                                                                         \
    SIM_ENTER(sym);                                                            \
    if (!sim_initialized()) return CUDA_ERROR_NOT_INITIALIZED;                 \
  } while (0)

/* ---- configuration and devices (sim_init.c) ---- */
typedef struct sim_chunk sim_chunk;
typedef struct sim_ctx sim_ctx;

/* One engine of a device (compute, H2D copy, D2H copy) in virtual time: the
 * intervals it is busy, sorted and disjoint.  Stream workers run on their
 * own threads, so operations reach an engine in the real-time order the
 * threads get there, not in the virtual-time order they become ready; a
 * busy-until time served them in the first order, and an operation ready
 * early on one stream waited behind one ready later on another while the
 * engine sat idle (two streams: ~70 ms of 1.4 s).  A GPU's engine takes
 * whatever work is ready when it is free, so an operation goes into the
 * first idle gap at or after its ready time that holds it.  Intervals past
 * SIM_ENG_SLOTS are forgotten oldest first, and the time before `floor`
 * (the end of the last one forgotten) counts as busy. */
#define SIM_ENG_SLOTS 512
typedef struct sim_engine {
  uint64_t floor;
  uint32_t n;
  uint64_t s[SIM_ENG_SLOTS], e[SIM_ENG_SLOTS];
} sim_engine;

typedef struct sim_dev {
  int ord;
  size_t capacity;
  size_t native_bytes;   /* rounded sizes of live cuMemAlloc* allocations */
  size_t resident_bytes; /* managed chunk bytes resident on this device */
  sim_chunk *lru_head, *lru_tail; /* resident managed chunks, LRU first */
  sim_engine compute, h2d, d2h; /* engines (virtual ns) */
  uint64_t host_now; /* the host's notion of virtual time */
  uint64_t max_end;  /* latest completion seen */
  uint64_t epoch;    /* max_end at the last simcuda_reset_stats */
  simcuda_stats_t st;
  sim_ctx *primary;
  /* ---- reserve / concurrent managed access (issue 12, points 3 and 4) ---- */
  size_t ctx_bytes; /* VRAM held by live contexts (SIMCUDA_CTX_OVERHEAD each) */
} sim_dev;

typedef struct sim_global {
  pthread_mutex_t lock;
  int ndev;
  sim_dev dev[SIM_MAXDEV];
  double link_gbps, dev_gbps; /* bytes per ns */
  uint64_t fault_ns, launch_ns;
  int log_procaddr;
  /* ---- reserve / concurrent managed access (issue 12, points 3 and 4) ---- */
  size_t ctx_overhead;   /* SIMCUDA_CTX_OVERHEAD: VRAM each context takes */
  int concurrent_managed; /* SIMCUDA_CONCURRENT_MANAGED (default 1) */
  /* ---- timing-only mode (issue 11, vx play) ---- */
  int timing_only; /* SIMCUDA_TIMING_ONLY=1: device and managed bytes are not kept */
  /* SIMCUDA_JITTER_US: a stream worker waits up to this long (real time,
   * random) before each operation, so that tests meet the orders a real
   * GPU's engines run streams in; 0 = none */
  unsigned jitter_us;
  /* SIMCUDA_ALLOC_PAUSE_US: cuMemAlloc waits this long (real time) after
   * the memory is taken, before it returns; 0 = none */
  unsigned alloc_pause_us;
} sim_global;

extern sim_global sim_g;

/* Parses the environment and reserves the address space once; returns 0 or
 * -errno (bad SIMCUDA_* value).  Safe from any thread, any number of times. */
int sim_boot(void);
int sim_initialized(void);
void sim_lock(void);
void sim_unlock(void);
/* Device of ordinal d, or NULL. */
sim_dev *sim_dev_get(int d);
/* Parses "1G", "256M", "4096" into bytes; returns 0 or -EINVAL. */
int sim_parse_size(const char *s, size_t *out);

/* CUDA_ERROR_NOT_INITIALIZED in a child forked after cuInit (the driver
 * cannot be used across fork), else sim_fail_check(sym). */
CUresult sim_entry_check(const char *sym);

/* ---- fault injection (sim_fail.c) ---- */
CUresult sim_fail_check(const char *sym);
int sim_fail_parse(const char *spec); /* 0 or -EINVAL */

/* ---- contexts (sim_ctx.c) ---- */
typedef struct sim_stream sim_stream;

struct sim_ctx {
  uint32_t magic;
  int dev;
  int is_primary;
  int active;          /* primary: retained at least once and not reset */
  int prim_refs;
  unsigned flags;
  int destroyed;
  int sticky;          /* CUresult of a sticky error, 0 if none (atomic) */
  pthread_mutex_t mu;  /* guards the stream list */
  sim_stream *streams; /* every stream of this context, legacy included */
  sim_stream *legacy;
  unsigned long long id;
};

/* The calling thread's current context: CUDA_SUCCESS, or
 * CUDA_ERROR_INVALID_CONTEXT / the context's sticky error. */
CUresult sim_ctx_current(sim_ctx **out);
/* Checks a user-given context handle (as sim_ctx_current does). */
CUresult sim_ctx_check(sim_ctx *c);
void sim_ctx_set_sticky(sim_ctx *c, CUresult err);
CUresult sim_ctx_sync(sim_ctx *c);

/* ---- handles (sim_handle.c): live-handle registry ---- */
enum { SIM_H_CTX = 1, SIM_H_STREAM, SIM_H_EVENT, SIM_H_MODULE, SIM_H_FUNC,
       SIM_H_GRAPH, SIM_H_EXEC, SIM_H_NODE, SIM_H_VMM };
void sim_handle_add(int kind, const void *p);
void sim_handle_del(int kind, const void *p);
int sim_handle_ok(int kind, const void *p);

/* ---- address space and allocations (sim_va.c) ---- */
enum { SIM_NATIVE = 1, SIM_MANAGED, SIM_HOST_PINNED, SIM_HOST_REG, SIM_VMM };
enum { CH_UNPOP = 0, CH_HOST, CH_DEVICE, CH_DISCARDED };
enum { PREF_NONE = 0, PREF_HOST, PREF_DEV };

struct sim_chunk {
  struct sim_alloc *a;
  size_t idx;
  uint8_t state, dup, pref, read_mostly;
  int8_t dev, pref_dev;
  int8_t pf_type, pf_dev; /* last prefetch location: CUmemLocationType */
  uint32_t accessed_by;   /* bit d: device d */
  sim_chunk *prev, *next; /* device LRU */
  /* movement: thrash resolution (sim_managed.c) */
  uint8_t evicted;    /* pushed off a device by memory pressure since it came */
  uint8_t refaults;   /* faults back in after such an eviction (saturates) */
  uint8_t thrash_pin; /* the driver pinned it to host memory: mapped, not migrated */
};

typedef struct sim_alloc {
  CUdeviceptr base;
  size_t size;     /* requested */
  size_t span;     /* VA length reserved, or accounted length */
  int kind;
  int dev;
  sim_ctx *ctx;
  void *backing;   /* native: host copy of the bytes; host kinds: the memory */
  unsigned flags;
  unsigned long long id;
  sim_chunk *chunks;
  size_t nchunks;
  void *owner;     /* SIM_VMM: the physical allocation mapped here */
} sim_alloc;

/* All under sim_lock(). */
int sim_va_init(void);
CUdeviceptr sim_va_alloc_locked(size_t len, size_t align);
void sim_va_free_locked(CUdeviceptr p, size_t len);
int sim_map_insert_locked(sim_alloc *a);
void sim_map_remove_locked(sim_alloc *a);
/* Allocation holding p, or NULL. */
sim_alloc *sim_map_find_locked(uintptr_t p);
sim_alloc *sim_map_find_base_locked(uintptr_t p);
/* Frees every allocation of context c (context destruction). */
void sim_map_release_ctx_locked(sim_ctx *c);
void sim_alloc_destroy_locked(sim_alloc *a);

/* SIM_VMM: a mapping of owner went away (sim_vmm.c). */
void sim_vmm_unmapped_locked(void *owner);

/* ---- device memory accounting (sim_mem.c) ---- */
size_t sim_native_round(size_t n);
/* Makes `need` bytes free on the device by evicting managed chunks; returns
 * the eviction cost in ns, or -1 when it cannot. */
int64_t sim_make_room_locked(sim_dev *d, size_t need);

/* ---- managed memory (sim_managed.c) ---- */
size_t sim_chunk_bytes(const sim_chunk *c);
void sim_chunk_to_host_locked(sim_chunk *c);
void sim_chunk_drop_locked(sim_chunk *c);     /* free: leave LRU, no charge */
void sim_lru_touch_locked(sim_dev *d, sim_chunk *c);
/* Kernel access of [off, off+n) of managed allocation a from device dev:
 * faults, accounting, stall; 0 or -EFAULT (discarded chunk read). */
typedef struct sim_kcost {
  uint64_t bytes, link_bytes, stall_ns;
  uint64_t link_h2d, link_d2h; /* of link_bytes: read (host to device), written */
} sim_kcost;
/* n bytes the kernel reaches over the link: reads cross host to device,
 * writes device to host (both for a read-write access). */
static inline void sim_link_add(sim_kcost *kc, uint64_t n, int mode) {
  kc->link_bytes += n;
  if (mode & SIMCUDA_WRITE) kc->link_d2h += n;
  if (!(mode & SIMCUDA_WRITE) || (mode & SIMCUDA_READ)) kc->link_h2d += n;
}
int sim_managed_touch_locked(sim_alloc *a, size_t off, size_t n, int mode,
                             int dev, sim_kcost *kc);
/* Copy access (memcpy/memset) to managed memory: -EFAULT on a discarded read. */
int sim_managed_copy_touch_locked(sim_alloc *a, size_t off, size_t n, int write);
void sim_free_now(CUdeviceptr p); /* OP_FREE on the worker */
/* Prefetch executed on a stream worker from `ready` on the copy engines of
 * the devices involved (sdev: the stream's); returns when it is done. */
uint64_t sim_prefetch_locked(CUdeviceptr p, size_t n, CUmemLocation loc, int sdev, uint64_t ready);
void sim_discard_locked(CUdeviceptr p, size_t n);

/* ---- clock and stats (sim_clock.c) ---- */
uint64_t sim_ns_for_bytes(uint64_t bytes, double gbps);
/* The earliest time >= t at which engine g is idle for dur ns. */
uint64_t sim_eng_fit(const sim_engine *g, uint64_t t, uint64_t dur);
/* Marks [start, start + dur) busy on g (it must be idle: sim_eng_fit). */
void sim_eng_take(sim_engine *g, uint64_t start, uint64_t dur);
/* Both: runs dur ns on g from the first gap at or after t; returns the end. */
uint64_t sim_eng_run(sim_engine *g, uint64_t t, uint64_t dur);
void sim_stat_gauges_locked(sim_dev *d);
void sim_note_end_locked(sim_dev *d, uint64_t end);
/* Host synchronised with a completion at virtual time t. */
void sim_host_sync(int dev, uint64_t t);
uint64_t sim_host_now(int dev);

/* ---- streams, events, ops (sim_stream.c, sim_event.c, sim_exec.c) ---- */
typedef struct sim_tl {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t enq, done;
  uint64_t t;              /* completion time of the last done item */
  uint64_t ring[SIM_RING]; /* completion time of item seq, by seq % SIM_RING */
  int refs;
  void (*release)(struct sim_tl *);
} sim_tl;

typedef struct sim_dep {
  sim_tl *tl;
  uint64_t seq;
} sim_dep;

enum { OP_KERNEL = 1, OP_COPY, OP_SET, OP_HOSTFN, OP_RECORD, OP_NOP,
       OP_PREFETCH, OP_DISCARD, OP_FREE };
enum { CP_HTOD = 1, CP_DTOH, CP_DTOD, CP_HTOH };

struct sim_func;
typedef struct sim_op {
  struct sim_op *next;
  int kind;
  uint64_t issue_t;
  int ndeps;
  sim_dep *deps;
  union {
    struct { struct sim_func *f; unsigned grid[3], block[3]; unsigned char *pbuf; size_t psize;
             struct sim_kernel *kern; /* launched as this CUkernel, else NULL */ } k;
    struct { int dir; CUdeviceptr dst, src; void *hdst; const void *hsrc; size_t n; } cp;
    struct { CUdeviceptr dst; uint32_t val; int elsize; size_t n; } set;
    struct { CUhostFn fn; void *ud; CUstreamCallback cb; CUstream h; } fn;
    struct { struct sim_event *ev; uint64_t gen; } rec;
    struct { CUdeviceptr p; size_t n; CUmemLocation loc; } pf;
    struct { CUdeviceptr p; } fr;
  } u;
} sim_op;

enum { ST_USER = 0, ST_LEGACY, ST_PERTHREAD };

struct sim_graph;
struct sim_stream {
  sim_tl tl; /* first: a stream is a timeline */
  uint32_t magic;
  sim_ctx *ctx;
  unsigned flags;
  int kind;
  int priority;
  sim_op *head, *tail;
  pthread_t thr;
  int stop;
  int cap_status; /* CUstreamCaptureStatus */
  struct sim_graph *cap_graph;
  unsigned long long cap_id, id;
  sim_stream *next_in_ctx;
};

typedef struct sim_event {
  sim_tl tl;
  uint32_t magic;
  unsigned flags;
  sim_ctx *ctx;
  uint64_t gen; /* records issued; tl.done = records completed */
  int captured; /* last recorded in a capturing stream (capture helper) */
} sim_event;

void sim_tl_init(sim_tl *tl, void (*release)(sim_tl *));
void sim_tl_ref(sim_tl *tl);
void sim_tl_unref(sim_tl *tl);
/* Waits until tl->done >= seq; returns the completion time of seq. */
uint64_t sim_tl_wait(sim_tl *tl, uint64_t seq);

/* Resolves a stream handle (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or
 * a created stream); ptds: the entry point was a _ptsz/_ptds variant. */
CUresult sim_stream_resolve(CUstream h, int ptds, sim_stream **out);
sim_stream *sim_stream_new(sim_ctx *c, unsigned flags, int kind, int prio);
void sim_stream_destroy(sim_stream *s);
/* Takes ownership of op; records it when the stream is capturing. */
CUresult sim_enqueue(sim_stream *s, sim_op *op);
/* Enqueues one set of n elements of el bytes to v at dst on s.  sim_copy.c. */
CUresult sim_set_enqueue(sim_stream *s, CUdeviceptr dst, uint32_t v, int el, size_t n);
/* Enqueues one copy of n bytes on s (dir: a CP_* direction; device
 * addresses, or host pointers where hdst/hsrc are set).  sim_copy.c. */
CUresult sim_copy_enqueue(sim_stream *s, int dir, CUdeviceptr dst, CUdeviceptr src, void *hdst,
                          const void *hsrc, size_t n);
CUresult sim_stream_sync(sim_stream *s);
sim_op *sim_op_new(int kind);
void sim_op_free(sim_op *op);
sim_op *sim_op_clone(const sim_op *op);
/* Runs op on the stream's worker; returns its completion time. */
uint64_t sim_op_exec(sim_op *op, sim_stream *s, uint64_t ready);

/* ---- modules and launches (sim_module.c, sim_launch.c) ---- */
typedef struct sim_func {
  uint32_t magic;
  char name[128];
  size_t nparams;
  size_t *off, *sz;
  size_t pbytes;
  simcuda_kernel_fn body;
  struct sim_module *mod;
  sim_ctx *ctx;
} sim_func;

uint64_t sim_kernel_run(sim_op *op, sim_stream *s, uint64_t ready);
/* Builds the packed parameter buffer of a launch. */
CUresult sim_pack_params(sim_func *f, void **params, void **extra,
                         unsigned char **buf, size_t *len);

/* ---- graphs (sim_graph.c) ---- */
typedef struct sim_node {
  uint32_t magic;
  sim_op *op;
  struct sim_graph *g;
  void **kparams; /* kernel nodes: pointers into op->u.k.pbuf */
} sim_node;

typedef struct sim_graph {
  uint32_t magic;
  sim_node **nodes;
  size_t n, cap;
} sim_graph;

sim_graph *sim_graph_new(void);
int sim_graph_append(sim_graph *g, sim_op *op);
void sim_graph_free(sim_graph *g);

/* ---- entry points of issue #12 points 8 and 9 (entry-points helper) ---- */
/* Handle kinds of sim_copy_batch.c, sim_pool.c and sim_ipc.c. */
enum { SIM_H_ARRAY = 64, SIM_H_POOL };

/* An executable graph: clones of the graph's ops, and the graph nodes they
 * came from (src[i]: what cuGraphExec*SetParams names; it may be gone). */
typedef struct sim_exec {
  sim_op **ops;
  size_t n;
  sim_node **src;
} sim_exec;
CUresult sim_graph_instantiate(CUgraphExec *pe, CUgraph hg);

/* sim_alloc.flags bits (sim_mem.c keeps 0x80000000 for a pending free). */
#define SIM_AF_POOL 0x20000000u       /* stream-ordered: owner = its pool */
#define SIM_AF_IPC_SHARED 0x10000000u /* exported: bytes in a memfd (sim_ipc.c) */
#define SIM_AF_IPC_OPEN 0x08000000u   /* an opened IPC handle: cuIpcCloseMemHandle frees it */
/* sim_ipc.c: an exported allocation is being destroyed (under sim_lock). */
void sim_ipc_forget_locked(sim_alloc *a);
/* sim_pool.c, under sim_lock: the pool a stream-ordered allocation on dev
 * comes from (h NULL: the device's current pool; *r = INVALID_VALUE for a
 * bad handle), and the pool's accounting of its blocks. */
void *sim_pool_for_alloc_locked(int dev, CUmemoryPool h, CUresult *r);
void sim_pool_allocated_locked(void *pool, size_t bytes);
void sim_pool_freed_locked(void *pool, size_t bytes);
int sim_pool_dev(CUmemoryPool h); /* -1 for a bad handle */
/* sim_peer.c: ctx may access memory of peer's device (cuCtxEnablePeerAccess).
 * Takes only its own lock: callable under sim_lock. */
int sim_peer_enabled(const sim_ctx *ctx, const sim_ctx *peer);

/* ---- driver release (sim_driver.c; movement) ---- */
/* The CUDA version the simulator imitates (SIMCUDA_DRIVER_VERSION or the
 * driver-V variant; 13000 by default): cuDriverGetVersion returns it and
 * cuGetProcAddress hides every entry point newer than it. */
int sim_driver_version(void);
/* -EINVAL when SIMCUDA_DRIVER_VERSION is bad (said on stderr), else 0. */
int sim_driver_check(void);
/* The release a driver-V variant was linked for; 0 in the full library. */
int sim_variant_version(void);

/* ---- logging ---- */
void sim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- reserve / concurrent managed access (issue 12, points 3 and 4) ---- */
/* Device bytes in use: native + resident managed + contexts. */
size_t sim_dev_used_locked(const sim_dev *d);
/* A context of device dev comes to life: takes SIMCUDA_CTX_OVERHEAD of its
 * VRAM (evicting managed chunks if needed).  0, or -ENOMEM when native
 * memory and other contexts leave no room (creation fails with OOM). */
int sim_ctx_charge(int dev);
/* The context is destroyed (or the primary context's last reference went). */
void sim_ctx_uncharge(int dev);

/* ---- libraries and CUkernels (sim_library.c; issue 12, CUkernel handles) ----
 * A CUlibrary is context-less: its CUkernels are objects of their own, not
 * CUfunctions; each context gets its own module of the library (made on
 * first use) whose CUfunctions cuKernelGetFunction and launches use. */
enum { SIM_H_LIBRARY = 64, SIM_H_KERNEL };
struct sim_module;
typedef struct sim_kernel sim_kernel;

/* Parses PTX image into a module of context c, its functions live handles;
 * c == NULL: a template holding names and layouts only, no handles. */
CUresult sim_module_new(sim_ctx *c, const void *image, struct sim_module **out);
/* Invalidates m's handles (modules are never freed). */
void sim_module_unload(struct sim_module *m);
/* m's function `name` with its registered body bound; CUDA_ERROR_NOT_FOUND
 * when there is no such entry or no body. */
CUresult sim_module_function(struct sim_module *m, const char *name, sim_func **out);
size_t sim_module_count(const struct sim_module *m);
const sim_func *sim_module_entry(const struct sim_module *m, size_t i);
/* What cuFuncGetAttribute and cuKernelGetAttribute report. */
int sim_func_attribute(CUfunction_attribute attrib);
/* The CUfunction of kernel k in context c (its module made on first use). */
CUresult sim_kernel_func(sim_kernel *k, sim_ctx *c, sim_func **out);
/* The kernel behind handle h when it is a live CUkernel, else NULL. */
sim_kernel *sim_kernel_of(const void *h);

/* ---- capture modes (capture helper, issue 12 point 7; sim_graph.c) ---- */
/* The rule for "potentially unsafe" calls (cuThreadExchangeStreamCaptureMode
 * in cuda.h): CUDA_SUCCESS when the calling thread may make one, else
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED after invalidating every capture
 * that prohibits it.  One relaxed load while nothing captures. */
CUresult sim_capture_check_unsafe(void);
/* A call that synchronises context c (cuCtxSynchronize, cuMemFree): refused
 * with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating them, while any
 * stream of c captures, in any mode; then the unsafe-call rule. */
CUresult sim_capture_check_ctx(sim_ctx *c);
/* Work on, or a wait for, stream s: when s is the legacy stream and a
 * blocking stream of its context captures, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
 * (invalidate: those captures are invalidated too). */
CUresult sim_capture_check_legacy(sim_stream *s, int invalidate);
/* s is being destroyed: its capture, if any, is forgotten. */
void sim_capture_forget(sim_stream *s);
/* First line of an unsafe entry point (after SIM_ENTER_INIT). */
#define SIM_CAPTURE_UNSAFE()                                                                       \
  do {                                                                                             \
    CUresult sim_c_ = sim_capture_check_unsafe();                                                  \
    if (sim_c_ != CUDA_SUCCESS) return sim_c_;                                                     \
  } while (0)

/* ---- timing-only mode (issue 11, vx play; sim_init.c) ---- */
/* mmap protection for memory holding device or managed bytes: read/write
 * normally; read-only in timing-only mode, so those bytes are never backed
 * by host RAM (reads see zero pages, a write is a SIGSEGV: nothing is kept). */
int sim_data_prot(void);

/* ---- graph node parameters (issue #13, h13-launch) ---- */
/* cuGraphExecKernelNodeSetParams_v2's work, for cuGraphExecNodeSetParams
 * too (sim_graph_exec.c). */
CUresult sim_graph_exec_set_kernel(CUgraphExec he, CUgraphNode node,
                                   const CUDA_KERNEL_NODE_PARAMS *p);

#endif
