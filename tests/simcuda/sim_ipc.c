/* sim_ipc.c: CUDA IPC between processes that each load the simulator.
 * cuIpcGetMemHandle moves a cuMemAlloc allocation's bytes into a memfd
 * (same address, now a shared mapping) and names it in the handle: the
 * exporter's pid, the fd, the allocation id and a nonce.  Another process
 * opens /proc/<pid>/fd/<fd>, checks the memfd's name, and maps the same
 * bytes: writes on either side are seen by the other, as with real IPC.
 * Refused as the driver refuses: managed, pool (stream-ordered), VMM and
 * host memory (CUDA_ERROR_INVALID_VALUE), and opening in the exporting
 * process (CUDA_ERROR_INVALID_CONTEXT).  Event handles: see the bottom. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim_internal.h"

#define IPC_MAGIC 0x53494d49u /* "SIMI" */
#define IPC_EV_MAGIC 0x53494d45u

typedef struct ipc_wire {
  uint32_t magic, pid;
  int32_t fd, dev;
  uint64_t id, nonce, size, span;
} ipc_wire;
_Static_assert(sizeof(ipc_wire) <= CU_IPC_HANDLE_SIZE, "handle too big");

static size_t page_round(size_t n) {
  return (n + 4095) & ~(size_t)4095;
}

// ---- the exporter's table: allocation id -> memfd (under sim_lock) ----

typedef struct exp_ent {
  uint64_t id, nonce;
  int fd;
} exp_ent;
static exp_ent *exps;
static size_t nexp, capexp;

static exp_ent *exp_find_locked(uint64_t id) {
  for (size_t i = 0; i < nexp; i++)
    if (exps[i].id == id) return &exps[i];
  return NULL;
}

void sim_ipc_forget_locked(sim_alloc *a) {
  exp_ent *e = exp_find_locked(a->id);
  if (!e) return;
  close(e->fd);
  *e = exps[--nexp];
}

static uint64_t nonce(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
}

/* The allocation's bytes into a memfd mapped where they were.  0 or -errno. */
static int share_locked(sim_alloc *a, exp_ent **out) {
  if ((*out = exp_find_locked(a->id))) return 0;
  if (nexp == capexp) {
    size_t nc = capexp ? capexp * 2 : 16;
    exp_ent *ne = realloc(exps, nc * sizeof *ne);
    if (!ne) return -ENOMEM;
    exps = ne, capexp = nc;
  }
  uint64_t n = nonce();
  char name[64];
  snprintf(name, sizeof name, "simcuda-ipc-%llu-%llx", (unsigned long long)a->id,
           (unsigned long long)n);
  size_t len = page_round(a->span);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -errno;
  if (ftruncate(fd, (off_t)len) != 0 || pwrite(fd, a->backing, len, 0) != (ssize_t)len ||
      mmap(a->backing, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
    int e = errno ? errno : EIO;
    close(fd);
    return -e;
  }
  a->flags |= SIM_AF_IPC_SHARED;
  exps[nexp] = (exp_ent){a->id, n, fd};
  *out = &exps[nexp++];
  return 0;
}

SIM_API CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
  SIM_ENTER_INIT(cuIpcGetMemHandle);
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  if (!h) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx_sync(c); /* no copy may be writing the bytes while they move */
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  /* cuMemAlloc memory only; an interior pointer names its allocation, as
   * on the driver. */
  if (!a || a->kind != SIM_NATIVE || (a->flags & (SIM_AF_POOL | SIM_AF_IPC_OPEN))) {
    sim_unlock();
    return CUDA_ERROR_INVALID_VALUE;
  }
  exp_ent *e;
  int err = share_locked(a, &e);
  ipc_wire w = {IPC_MAGIC, (uint32_t)getpid(), err ? -1 : e->fd, a->dev,
                a->id,     err ? 0 : e->nonce, a->size,          a->span};
  sim_unlock();
  if (err) return err == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_MAP_FAILED;
  memset(h, 0, sizeof *h);
  memcpy(h->reserved, &w, sizeof w);
  return CUDA_SUCCESS;
}

// ---- the importer's table: what this process opened ----

typedef struct imp_ent {
  uint32_t pid;
  uint64_t id;
  CUdeviceptr base;
  int refs;
} imp_ent;
static pthread_mutex_t imp_mu = PTHREAD_MUTEX_INITIALIZER;
static imp_ent imps[256];
static size_t nimp;

/* The exporter's memfd, if it is still the one the handle names. */
static int open_exported(const ipc_wire *w) {
  char path[64], link[256], want[64];
  snprintf(path, sizeof path, "/proc/%u/fd/%d", w->pid, w->fd);
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n < 0) return -1;
  link[n] = 0;
  snprintf(want, sizeof want, "/memfd:simcuda-ipc-%llu-%llx", (unsigned long long)w->id,
           (unsigned long long)w->nonce);
  if (strncmp(link, want, strlen(want)) != 0) return -1;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || (size_t)st.st_size != page_round(w->span))) {
    close(fd);
    fd = -1;
  }
  return fd;
}

static CUresult map_import(const ipc_wire *w, sim_ctx *c, CUdeviceptr *out) {
  int fd = open_exported(w);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE; /* gone: freed, or the process ended */
  size_t len = page_round(w->span);
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  sim_alloc *a = m == MAP_FAILED ? NULL : calloc(1, sizeof *a);
  if (!a) {
    if (m != MAP_FAILED) munmap(m, len);
    return CUDA_ERROR_MAP_FAILED;
  }
  static uint64_t next_id = (uint64_t)1 << 40;
  a->kind = SIM_NATIVE;
  a->flags = SIM_AF_IPC_OPEN;
  a->ctx = c;
  a->dev = c->dev;
  a->size = (size_t)w->size;
  a->span = (size_t)w->span;
  a->backing = m;
  a->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
  sim_lock();
  sim_dev *d = &sim_g.dev[c->dev];
  /* Per-process model: the importer's device counts the bytes too. */
  a->base = sim_va_alloc_locked(a->span, a->span >= SIM_CHUNK ? SIM_CHUNK : 256);
  if (!a->base || sim_map_insert_locked(a) != 0) {
    if (a->base) sim_va_free_locked(a->base, a->span);
    sim_unlock();
    munmap(m, len);
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  d->native_bytes += a->span;
  sim_stat_gauges_locked(d);
  sim_unlock();
  *out = a->base;
  return CUDA_SUCCESS;
}

static CUresult open_mem(CUdeviceptr *pd, CUipcMemHandle h, unsigned flags) {
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  ipc_wire w;
  memcpy(&w, h.reserved, sizeof w);
  /* "Must be specified as CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS" (cuda.h). */
  if (!pd || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS || w.magic != IPC_MAGIC)
    return CUDA_ERROR_INVALID_VALUE;
  if (w.pid == (uint32_t)getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&imp_mu);
  for (size_t i = 0; i < nimp; i++)
    if (imps[i].pid == w.pid && imps[i].id == w.id) {
      imps[i].refs++;
      *pd = imps[i].base;
      pthread_mutex_unlock(&imp_mu);
      return CUDA_SUCCESS;
    }
  r = nimp < sizeof imps / sizeof *imps ? map_import(&w, c, pd) : CUDA_ERROR_TOO_MANY_PEERS;
  if (r == CUDA_SUCCESS) imps[nimp++] = (imp_ent){w.pid, w.id, *pd, 1};
  pthread_mutex_unlock(&imp_mu);
  return r;
}

SIM_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pd, CUipcMemHandle h, unsigned int flags) {
  SIM_ENTER_INIT(cuIpcOpenMemHandle_v2);
  return open_mem(pd, h, flags);
}

SIM_API CUresult cuIpcOpenMemHandle(CUdeviceptr *pd, CUipcMemHandle h, unsigned int flags) {
  SIM_ENTER_INIT(cuIpcOpenMemHandle);
  return open_mem(pd, h, flags);
}

SIM_API CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  SIM_ENTER_INIT(cuIpcCloseMemHandle);
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&imp_mu);
  size_t i = 0;
  while (i < nimp && imps[i].base != p)
    i++;
  if (i == nimp) {
    pthread_mutex_unlock(&imp_mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  int last = --imps[i].refs == 0;
  if (last) imps[i] = imps[--nimp];
  pthread_mutex_unlock(&imp_mu);
  if (!last) return CUDA_SUCCESS;
  sim_ctx_sync(c); /* work in flight may still use the mapping */
  sim_lock();
  sim_alloc *a = sim_map_find_base_locked((uintptr_t)p);
  if (a && (a->flags & SIM_AF_IPC_OPEN)) {
    sim_map_remove_locked(a);
    sim_alloc_destroy_locked(a);
  }
  sim_unlock();
  return CUDA_SUCCESS;
}

// ---- events ----

/* An event handle names the exporter and its event.  Opening it in the
 * exporting process is refused as the driver refuses it; opening it in
 * another process is CUDA_ERROR_NOT_SUPPORTED: one process's simulator
 * cannot see another's streams, and an event that always reads complete
 * would be more lenient than the driver (a deliberate difference). */
typedef struct ipc_ev_wire {
  uint32_t magic, pid;
  uint64_t ev;
} ipc_ev_wire;

SIM_API CUresult cuIpcGetEventHandle(CUipcEventHandle *h, CUevent ev) {
  SIM_ENTER_INIT(cuIpcGetEventHandle);
  if (!h || !ev || !sim_handle_ok(SIM_H_EVENT, ev)) return CUDA_ERROR_INVALID_HANDLE;
  const sim_event *e = (const sim_event *)ev;
  /* cuda.h: created with CU_EVENT_INTERPROCESS and CU_EVENT_DISABLE_TIMING. */
  if ((e->flags & (CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)) !=
      (CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING))
    return CUDA_ERROR_INVALID_VALUE;
  ipc_ev_wire w = {IPC_EV_MAGIC, (uint32_t)getpid(), (uint64_t)(uintptr_t)ev};
  memset(h, 0, sizeof *h);
  memcpy(h->reserved, &w, sizeof w);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuIpcOpenEventHandle(CUevent *ph, CUipcEventHandle h) {
  SIM_ENTER_INIT(cuIpcOpenEventHandle);
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  ipc_ev_wire w;
  memcpy(&w, h.reserved, sizeof w);
  if (!ph || w.magic != IPC_EV_MAGIC) return CUDA_ERROR_INVALID_VALUE;
  if (w.pid == (uint32_t)getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_ERROR_NOT_SUPPORTED;
}
