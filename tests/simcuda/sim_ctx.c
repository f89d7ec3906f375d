/* sim_ctx.c: contexts: primary contexts, ordinary contexts, the per-thread
 * current-context stack, context synchronisation and sticky errors. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define CTX_MAGIC 0x43545853u
#define STACK_MAX 32

static __thread sim_ctx *stack[STACK_MAX];
static __thread int depth;
static unsigned long long next_ctx_id = 1;
/* Contexts are never freed (a stale handle stays safe to check). */
static sim_ctx *all_ctx[4096];
static int nall;

static sim_ctx *ctx_new(int dev, unsigned flags, int primary) {
  sim_ctx *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->magic = CTX_MAGIC;
  c->dev = dev;
  c->flags = flags;
  c->is_primary = primary;
  pthread_mutex_init(&c->mu, NULL);
  c->id = __atomic_fetch_add(&next_ctx_id, 1, __ATOMIC_RELAXED);
  c->legacy = sim_stream_new(c, 0, ST_LEGACY, 0);
  if (!c->legacy) {
    free(c);
    return NULL;
  }
  sim_lock();
  if (nall < (int)(sizeof all_ctx / sizeof all_ctx[0])) all_ctx[nall++] = c;
  sim_unlock();
  sim_handle_add(SIM_H_CTX, c);
  return c;
}

CUresult sim_ctx_check(sim_ctx *c) {
  if (!c || !sim_handle_ok(SIM_H_CTX, c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (__atomic_load_n(&c->destroyed, __ATOMIC_ACQUIRE)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (c->is_primary && !__atomic_load_n(&c->active, __ATOMIC_ACQUIRE))
    return CUDA_ERROR_INVALID_CONTEXT;
  int st = __atomic_load_n(&c->sticky, __ATOMIC_ACQUIRE);
  return st ? (CUresult)st : CUDA_SUCCESS;
}

CUresult sim_ctx_current(sim_ctx **out) {
  if (depth == 0 || !stack[depth - 1]) return CUDA_ERROR_INVALID_CONTEXT;
  *out = stack[depth - 1];
  return sim_ctx_check(*out);
}

void sim_ctx_set_sticky(sim_ctx *c, CUresult err) {
  int zero = 0;
  __atomic_compare_exchange_n(&c->sticky, &zero, (int)err, 0, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
}

/* Waits for all work issued so far on every stream of c. */
CUresult sim_ctx_sync(sim_ctx *c) {
  sim_stream *snap[1024];
  uint64_t seq[1024];
  int n = 0;
  pthread_mutex_lock(&c->mu);
  for (sim_stream *s = c->streams; s && n < 1024; s = s->next_in_ctx) {
    pthread_mutex_lock(&s->tl.mu);
    seq[n] = s->tl.enq;
    pthread_mutex_unlock(&s->tl.mu);
    sim_tl_ref(&s->tl);
    snap[n++] = s;
  }
  pthread_mutex_unlock(&c->mu);
  for (int i = 0; i < n; i++) {
    uint64_t t = sim_tl_wait(&snap[i]->tl, seq[i]);
    sim_host_sync(c->dev, t);
    sim_tl_unref(&snap[i]->tl);
  }
  int st = __atomic_load_n(&c->sticky, __ATOMIC_ACQUIRE);
  return st ? (CUresult)st : CUDA_SUCCESS;
}

/* Destroys the user streams of c and frees its memory (destroy or reset). */
static void ctx_teardown(sim_ctx *c) {
  sim_ctx_sync(c);
  for (;;) {
    pthread_mutex_lock(&c->mu);
    sim_stream *s = c->streams;
    while (s && s->kind == ST_LEGACY) s = s->next_in_ctx;
    pthread_mutex_unlock(&c->mu);
    if (!s) break;
    sim_stream_destroy(s);
  }
  sim_lock();
  sim_map_release_ctx_locked(c);
  sim_unlock();
  __atomic_store_n(&c->sticky, 0, __ATOMIC_RELEASE);
}

static void stack_remove(sim_ctx *c) {
  if (depth > 0 && stack[depth - 1] == c) depth--;
}

// ---- primary contexts ----

static sim_ctx *primary_of(CUdevice dev) {
  sim_dev *d = sim_dev_get(dev);
  if (!d) return NULL;
  sim_lock();
  sim_ctx *c = d->primary;
  sim_unlock();
  if (c) return c;
  c = ctx_new(dev, 0, 1);
  if (!c) return NULL;
  sim_lock();
  if (d->primary) { /* lost a race: keep the first (c stays unused) */
    sim_ctx *p = d->primary;
    sim_unlock();
    __atomic_store_n(&c->destroyed, 1, __ATOMIC_RELEASE);
    sim_handle_del(SIM_H_CTX, c);
    return p;
  }
  d->primary = c;
  sim_unlock();
  return c;
}

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  SIM_ENTER_INIT(cuDevicePrimaryCtxRetain);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  sim_ctx *c = primary_of(dev);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  /* The first reference creates the context: its VRAM is taken now. */
  sim_lock();
  int first = c->prim_refs == 0 && !__atomic_load_n(&c->active, __ATOMIC_ACQUIRE);
  sim_unlock();
  if (first && sim_ctx_charge(dev) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  sim_lock();
  if (first && (c->prim_refs || __atomic_load_n(&c->active, __ATOMIC_ACQUIRE))) {
    sim_unlock(); /* another thread created it meanwhile */
    sim_ctx_uncharge(dev);
    sim_lock();
  }
  c->prim_refs++;
  __atomic_store_n(&c->active, 1, __ATOMIC_RELEASE);
  sim_unlock();
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

static CUresult prim_release(CUdevice dev) {
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  sim_ctx *c = primary_of(dev);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  sim_lock();
  int last = c->prim_refs == 1;
  if (c->prim_refs == 0) {
    sim_unlock();
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  c->prim_refs--;
  sim_unlock();
  if (last) {
    ctx_teardown(c);
    __atomic_store_n(&c->active, 0, __ATOMIC_RELEASE);
    sim_ctx_uncharge(dev);
  }
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SIM_ENTER_INIT(cuDevicePrimaryCtxRelease_v2);
  return prim_release(dev);
}

SIM_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  SIM_ENTER_INIT(cuDevicePrimaryCtxRelease);
  return prim_release(dev);
}

static CUresult prim_reset(CUdevice dev) {
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  sim_ctx *c = primary_of(dev);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  ctx_teardown(c);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  SIM_ENTER_INIT(cuDevicePrimaryCtxReset_v2);
  return prim_reset(dev);
}

SIM_API CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  SIM_ENTER_INIT(cuDevicePrimaryCtxReset);
  return prim_reset(dev);
}

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  SIM_ENTER_INIT(cuDevicePrimaryCtxGetState);
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  sim_ctx *c = primary_of(dev);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  *flags = c->flags;
  *active = __atomic_load_n(&c->active, __ATOMIC_ACQUIRE);
  return CUDA_SUCCESS;
}

static CUresult prim_set_flags(CUdevice dev, unsigned flags) {
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  sim_ctx *c = primary_of(dev);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  c->flags = flags;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  SIM_ENTER_INIT(cuDevicePrimaryCtxSetFlags_v2);
  return prim_set_flags(dev, flags);
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  SIM_ENTER_INIT(cuDevicePrimaryCtxSetFlags);
  return prim_set_flags(dev, flags);
}

// ---- ordinary contexts and the stack ----

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_get(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (depth == STACK_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (sim_ctx_charge(dev) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  sim_ctx *c = ctx_new(dev, flags, 0);
  if (!c) {
    sim_ctx_uncharge(dev);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  stack[depth++] = c;
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *p, unsigned int flags,
                                CUdevice dev) {
  SIM_ENTER_INIT(cuCtxCreate_v4);
  (void)p;
  return ctx_create(pctx, flags, dev);
}

SIM_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *pa, int n,
                                unsigned int flags, CUdevice dev) {
  SIM_ENTER_INIT(cuCtxCreate_v3);
  (void)pa;
  (void)n;
  return ctx_create(pctx, flags, dev);
}

SIM_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  SIM_ENTER_INIT(cuCtxCreate_v2);
  return ctx_create(pctx, flags, dev);
}

SIM_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  SIM_ENTER_INIT(cuCtxCreate);
  return ctx_create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext h) {
  sim_ctx *c = (sim_ctx *)h;
  if (!c || !sim_handle_ok(SIM_H_CTX, c) || c->is_primary) return CUDA_ERROR_INVALID_CONTEXT;
  if (__atomic_load_n(&c->destroyed, __ATOMIC_ACQUIRE)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  ctx_teardown(c);
  __atomic_store_n(&c->destroyed, 1, __ATOMIC_RELEASE);
  sim_ctx_uncharge(c->dev);
  sim_handle_del(SIM_H_CTX, c);
  stack_remove(c);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
  SIM_ENTER_INIT(cuCtxDestroy_v2);
  return ctx_destroy(ctx);
}

SIM_API CUresult cuCtxDestroy(CUcontext ctx) {
  SIM_ENTER_INIT(cuCtxDestroy);
  return ctx_destroy(ctx);
}

SIM_API CUresult cuCtxGetCurrent(CUcontext *pctx) {
  SIM_ENTER_INIT(cuCtxGetCurrent);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = depth ? (CUcontext)stack[depth - 1] : NULL;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  SIM_ENTER_INIT(cuCtxSetCurrent);
  sim_ctx *c = (sim_ctx *)ctx;
  if (!c) {
    if (depth) depth--;
    return CUDA_SUCCESS;
  }
  if (!sim_handle_ok(SIM_H_CTX, c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (depth == 0) depth = 1;
  stack[depth - 1] = c;
  return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext ctx) {
  sim_ctx *c = (sim_ctx *)ctx;
  if (!c || !sim_handle_ok(SIM_H_CTX, c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (depth == STACK_MAX) return CUDA_ERROR_INVALID_VALUE;
  stack[depth++] = c;
  return CUDA_SUCCESS;
}

static CUresult ctx_pop(CUcontext *pctx) {
  if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  sim_ctx *c = stack[--depth];
  if (pctx) *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  SIM_ENTER_INIT(cuCtxPushCurrent_v2);
  return ctx_push(ctx);
}

SIM_API CUresult cuCtxPushCurrent(CUcontext ctx) {
  SIM_ENTER_INIT(cuCtxPushCurrent);
  return ctx_push(ctx);
}

SIM_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  SIM_ENTER_INIT(cuCtxPopCurrent_v2);
  return ctx_pop(pctx);
}

SIM_API CUresult cuCtxPopCurrent(CUcontext *pctx) {
  SIM_ENTER_INIT(cuCtxPopCurrent);
  return ctx_pop(pctx);
}

SIM_API CUresult cuCtxGetDevice(CUdevice *dev) {
  SIM_ENTER_INIT(cuCtxGetDevice);
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED) return r;
  *dev = c->dev;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetFlags(unsigned int *flags) {
  SIM_ENTER_INIT(cuCtxGetFlags);
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED) return r;
  *flags = c->flags;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
  SIM_ENTER_INIT(cuCtxGetApiVersion);
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c = (sim_ctx *)ctx;
  if (!c && sim_ctx_current(&c) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  if (!sim_handle_ok(SIM_H_CTX, c)) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 13000;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id) {
  SIM_ENTER_INIT(cuCtxGetId);
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  sim_ctx *c = (sim_ctx *)ctx;
  if (!c && sim_ctx_current(&c) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  if (!sim_handle_ok(SIM_H_CTX, c)) return CUDA_ERROR_INVALID_CONTEXT;
  *id = c->id;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSynchronize(void) {
  SIM_ENTER_INIT(cuCtxSynchronize);
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  /* Synchronising while a stream of the context captures is refused and
   * invalidates the capture, as the real driver does, in every mode. */
  r = sim_capture_check_ctx(c);
  return r != CUDA_SUCCESS ? r : sim_ctx_sync(c);
}
