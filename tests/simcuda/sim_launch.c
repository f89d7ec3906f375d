/* sim_launch.c: kernel launches: parameter packing, running the registered
 * host body on the stream's worker, simcuda_access() checks, kernel time. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

struct simcuda_kctx {
  sim_stream *s;
  int dev;
  unsigned grid[3], block[3];
  sim_kcost kc;
  int bad;
  int timed;       /* simcuda_kernel_time was called */
  uint64_t time_ns; /* its value */
};

SIM_API void *simcuda_access(simcuda_kctx_t *k, CUdeviceptr dptr, size_t bytes, int mode) {
  if (!k || k->bad) return NULL;
  size_t n = bytes ? bytes : 1;
  void *p = NULL;
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)dptr);
  size_t off = a ? (size_t)(dptr - a->base) : 0;
  if (a && off + n <= a->size) {
    switch (a->kind) {
    case SIM_NATIVE:
    case SIM_VMM:
      if (a->dev == k->dev || sim_peer_enabled(k->s->ctx, a->ctx)) { /* peer: sim_peer.c */
        p = (char *)a->backing + off;
        k->kc.bytes += bytes;
      }
      break;
    case SIM_MANAGED:
      if (sim_managed_touch_locked(a, off, n, mode, k->dev, &k->kc) == 0) p = (void *)(uintptr_t)dptr;
      break;
    default: /* pinned or registered host memory: over the link */
      p = (void *)(uintptr_t)dptr;
      sim_link_add(&k->kc, bytes, mode);
      break;
    }
  }
  sim_unlock();
  if (!p) k->bad = 1;
  return p;
}

SIM_API void simcuda_dims(const simcuda_kctx_t *k, unsigned grid[3], unsigned block[3]) {
  for (int i = 0; i < 3; i++) {
    if (grid) grid[i] = k->grid[i];
    if (block) block[i] = k->block[i];
  }
}

SIM_API CUstream simcuda_kernel_stream(const simcuda_kctx_t *k) {
  if (!k) return NULL;
  if (k->s->kind == ST_LEGACY) return CU_STREAM_LEGACY;
  if (k->s->kind != ST_USER) return CU_STREAM_PER_THREAD;
  return (CUstream)k->s;
}

SIM_API void simcuda_kernel_time(simcuda_kctx_t *k, uint64_t ns) {
  if (!k) return;
  k->timed = 1;
  k->time_ns = ns;
}

uint64_t sim_kernel_run(sim_op *op, sim_stream *s, uint64_t ready) {
  sim_func *f = op->u.k.f;
  simcuda_kctx_t k = {.s = s, .dev = s->ctx->dev};
  memcpy(k.grid, op->u.k.grid, sizeof k.grid);
  memcpy(k.block, op->u.k.block, sizeof k.block);
  void *stackp[32];
  void **params = f->nparams <= 32 ? stackp : malloc(f->nparams * sizeof *params);
  if (!params) return ready;
  for (size_t i = 0; i < f->nparams; i++) params[i] = op->u.k.pbuf + f->off[i];
  simcuda_kernel_fn body = __atomic_load_n(&f->body, __ATOMIC_ACQUIRE);
  body(params, &k);
  if (params != stackp) free(params);
  if (k.bad) sim_ctx_set_sticky(s->ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
  sim_lock();
  sim_dev *d = &sim_g.dev[k.dev];
  uint64_t compute = k.timed ? k.time_ns
                             : sim_g.launch_ns + sim_ns_for_bytes(k.kc.bytes, sim_g.dev_gbps);
  uint64_t link = sim_ns_for_bytes(k.kc.link_bytes, sim_g.link_gbps);
  uint64_t work = compute + link;
  /* What the kernel reads or writes in host memory crosses the same link
   * as the copy engines' transfers, in its direction: reads wait for the
   * H2D engine and hold it while they cross, writes the D2H engine, where
   * they meet the write-backs (a zero-copy access gets no second link).
   * The kernel starts once all the engines it holds are idle together. */
  uint64_t up = sim_ns_for_bytes(k.kc.link_h2d, sim_g.link_gbps);
  uint64_t down = sim_ns_for_bytes(k.kc.link_d2h, sim_g.link_gbps);
  uint64_t hold = work + k.kc.stall_ns, start = ready;
  for (;;) {
    uint64_t t = sim_eng_fit(&d->compute, start, hold);
    if (up) t = sim_eng_fit(&d->h2d, t, up);
    if (down) t = sim_eng_fit(&d->d2h, t, down);
    if (t == start) break;
    start = t;
  }
  sim_eng_take(&d->compute, start, hold);
  sim_eng_take(&d->h2d, start, up);
  sim_eng_take(&d->d2h, start, down);
  uint64_t end = start + hold;
  d->st.launches++;
  d->st.kernel_ns += work;
  d->st.bytes_link_htod += k.kc.link_h2d;
  d->st.bytes_link_dtoh += k.kc.link_d2h;
  d->st.stall_ns += k.kc.stall_ns;
  sim_note_end_locked(d, end);
  sim_unlock();
  return end;
}

CUresult sim_pack_params(sim_func *f, void **params, void **extra, unsigned char **buf,
                         size_t *len) {
  unsigned char *b = malloc(f->pbytes ? f->pbytes : 1);
  if (!b) return CUDA_ERROR_OUT_OF_MEMORY;
  memset(b, 0, f->pbytes);
  if (params && extra) goto bad;
  if (params) {
    for (size_t i = 0; i < f->nparams; i++) {
      if (!params[i]) goto bad;
      memcpy(b + f->off[i], params[i], f->sz[i]);
    }
  } else if (extra) {
    void *src = NULL;
    size_t n = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) src = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) n = *(size_t *)extra[i + 1];
      else goto bad;
    }
    if (!src || n < f->pbytes) goto bad;
    memcpy(b, src, f->pbytes);
  } else if (f->nparams) {
    goto bad;
  }
  *buf = b;
  *len = f->pbytes;
  return CUDA_SUCCESS;
bad:
  free(b);
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult launch(CUfunction hf, const unsigned grid[3], const unsigned block[3],
                       CUstream h, void **params, void **extra, int ptds) {
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  /* cuda.h: f is a CUfunction, or a CUkernel cast to one, which runs in the
   * stream's context (the current one for the NULL stream). */
  sim_kernel *kern = sim_kernel_of(hf);
  sim_func *f = (sim_func *)hf;
  if (kern) {
    r = sim_kernel_func(kern, s->ctx, &f);
    if (r != CUDA_SUCCESS) return r;
  } else if (!hf || !sim_handle_ok(SIM_H_FUNC, hf)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (f->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE;
  unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
  if (!grid[0] || !grid[1] || !grid[2] || !threads || threads > 1024 || block[2] > 64 ||
      grid[1] > 65535 || grid[2] > 65535)
    return CUDA_ERROR_INVALID_VALUE;
  sim_op *op = sim_op_new(OP_KERNEL);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  r = sim_pack_params(f, params, extra, &op->u.k.pbuf, &op->u.k.psize);
  if (r != CUDA_SUCCESS) {
    sim_op_free(op);
    return r;
  }
  op->u.k.f = f;
  op->u.k.kern = kern;
  memcpy(op->u.k.grid, grid, sizeof op->u.k.grid);
  memcpy(op->u.k.block, block, sizeof op->u.k.block);
  return sim_enqueue(s, op);
}

#define DIMS                                                                   \
  unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};                           \
  (void)shm

SIM_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int shm, CUstream h, void **params, void **extra) {
  SIM_ENTER_INIT(cuLaunchKernel);
  DIMS;
  return launch(f, g, b, h, params, extra, 0);
}

SIM_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int shm, CUstream h,
                                     void **params, void **extra) {
  SIM_ENTER_INIT(cuLaunchKernel_ptsz);
  DIMS;
  return launch(f, g, b, h, params, extra, 1);
}

SIM_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                           unsigned int gz, unsigned int bx, unsigned int by,
                                           unsigned int bz, unsigned int shm, CUstream h,
                                           void **params) {
  SIM_ENTER_INIT(cuLaunchCooperativeKernel);
  DIMS;
  return launch(f, g, b, h, params, NULL, 0);
}

SIM_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                unsigned int gz, unsigned int bx, unsigned int by,
                                                unsigned int bz, unsigned int shm, CUstream h,
                                                void **params) {
  SIM_ENTER_INIT(cuLaunchCooperativeKernel_ptsz);
  DIMS;
  return launch(f, g, b, h, params, NULL, 1);
}

/* Launch attributes do not change what the simulator does: all are accepted. */
static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra,
                          int ptds) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  unsigned g[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
  unsigned b[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
  return launch(f, g, b, c->hStream, params, extra, ptds);
}

SIM_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                  void **extra) {
  SIM_ENTER_INIT(cuLaunchKernelEx);
  return launch_ex(config, f, params, extra, 0);
}

SIM_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                       void **params, void **extra) {
  SIM_ENTER_INIT(cuLaunchKernelEx_ptsz);
  return launch_ex(config, f, params, extra, 1);
}
