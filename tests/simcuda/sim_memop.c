/* sim_memop.c: stream memory operations: cuStreamWriteValue32/64,
 * cuStreamWaitValue32/64 and cuStreamBatchMemOp (v1 and _v2, _ptsz).
 * A write is a stream set of the value; a wait is a stream callback that
 * polls the word until its condition holds (reading a discarded managed
 * chunk is an illegal address, as for any other read). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "sim_internal.h"

/* The word at addr must be simulated memory of any kind, aligned (cuda.h:
 * "addr must be aligned"), in bounds. */
static CUresult check_word(CUdeviceptr addr, size_t n) {
  if (!addr || addr % n) return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)addr);
  int ok = a && (size_t)(addr - a->base) + n <= a->size;
  sim_unlock();
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult write_value(sim_stream *s, CUdeviceptr addr, uint64_t v, int wide) {
  CUresult r = check_word(addr, wide ? 8 : 4);
  for (int half = 0; r == CUDA_SUCCESS && half <= wide; half++) {
    sim_op *op = sim_op_new(OP_SET);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.set.dst = addr + 4 * (CUdeviceptr)half; /* little endian: low word first */
    op->u.set.val = (uint32_t)(v >> (32 * half));
    op->u.set.elsize = 4;
    op->u.set.n = 1;
    r = sim_enqueue(s, op);
  }
  return r;
}

// ---- waits ----

/* Reads the word; 0, or -EFAULT (gone or discarded: *ctx = the owner's
 * context when known). */
static int read_word(CUdeviceptr addr, int wide, uint64_t *out, sim_ctx **ctx) {
  size_t n = wide ? 8 : 4;
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)addr);
  const void *p = NULL;
  if (a && (size_t)(addr - a->base) + n <= a->size) {
    size_t off = (size_t)(addr - a->base);
    if (a->kind == SIM_NATIVE || a->kind == SIM_VMM)
      p = (char *)a->backing + off;
    else if (a->kind != SIM_MANAGED || sim_managed_copy_touch_locked(a, off, n, 0) == 0)
      p = (const void *)(uintptr_t)addr;
  }
  uint64_t v = 0;
  *ctx = a ? a->ctx : NULL;
  if (p) {
    if (wide)
      v = __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
    else
      v = __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE);
  }
  sim_unlock();
  *out = v;
  return p ? 0 : -EFAULT;
}

static int holds(uint64_t cur, uint64_t v, unsigned cond, int wide) {
  switch (cond) {
  case CU_STREAM_WAIT_VALUE_GEQ:
    return wide ? (int64_t)(cur - v) >= 0 : (int32_t)(uint32_t)(cur - v) >= 0;
  case CU_STREAM_WAIT_VALUE_EQ:
    return cur == v;
  case CU_STREAM_WAIT_VALUE_AND:
    return (cur & v) != 0;
  default:
    return (wide ? ~(cur | v) : (uint32_t) ~(cur | v)) != 0; /* NOR */
  }
}

/* The wait as a stream callback: the address in ud, the value in the
 * stream-handle slot, condition and width by which callback runs. */
static void poll(CUstream value, void *ud, unsigned cond, int wide, CUresult status) {
  CUdeviceptr addr = (CUdeviceptr)(uintptr_t)ud;
  uint64_t v = (uint64_t)(uintptr_t)value, cur;
  struct timespec ts = {0, 50 * 1000};
  if (status != CUDA_SUCCESS) return; /* the context is dead: nothing to wait for */
  sim_ctx *c = NULL;
  for (;;) {
    if (read_word(addr, wide, &cur, &c) != 0) {
      if (c) sim_ctx_set_sticky(c, CUDA_ERROR_ILLEGAL_ADDRESS);
      return;
    }
    if (holds(cur, v, cond, wide)) return;
    if (c && __atomic_load_n(&c->sticky, __ATOMIC_ACQUIRE)) return; /* nothing will write it */
    nanosleep(&ts, NULL);
  }
}

#define POLL_FN(cond, wide)                                                                        \
  static void poll_##cond##_##wide(CUstream h, CUresult st, void *ud) {                            \
    poll(h, ud, cond, wide, st);                                                                   \
  }
POLL_FN(0, 0)
POLL_FN(1, 0)
POLL_FN(2, 0)
POLL_FN(3, 0)
POLL_FN(0, 1)
POLL_FN(1, 1)
POLL_FN(2, 1)
POLL_FN(3, 1)
static const CUstreamCallback polls[2][4] = {{poll_0_0, poll_1_0, poll_2_0, poll_3_0},
                                             {poll_0_1, poll_1_1, poll_2_1, poll_3_1}};

static CUresult wait_value(sim_stream *s, CUdeviceptr addr, uint64_t v, unsigned flags, int wide) {
  unsigned cond = flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH;
  if (cond > CU_STREAM_WAIT_VALUE_NOR) return CUDA_ERROR_INVALID_VALUE;
  if (!wide && (v >> 32)) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = check_word(addr, wide ? 8 : 4);
  if (r != CUDA_SUCCESS) return r;
  sim_op *op = sim_op_new(OP_HOSTFN);
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.fn.cb = polls[wide][cond];
  op->u.fn.h = (CUstream)(uintptr_t)v;
  op->u.fn.ud = (void *)(uintptr_t)addr;
  return sim_enqueue(s, op);
}

// ---- entry points ----

static CUresult one(CUstream h, int ptds, CUdeviceptr addr, uint64_t v, unsigned flags, int wide,
                    int write) {
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) return r;
  if (write && (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER))
    return CUDA_ERROR_INVALID_VALUE;
  return write ? write_value(s, addr, v, wide) : wait_value(s, addr, v, flags, wide);
}

#define VALUE_FN(name, T, PT, WIDE, WRITE)                                                         \
  SIM_API CUresult name(CUstream h, CUdeviceptr addr, T v, unsigned int flags) {                   \
    SIM_ENTER_INIT(name);                                                                          \
    return one(h, PT, addr, v, flags, WIDE, WRITE);                                                \
  }

VALUE_FN(cuStreamWriteValue32, cuuint32_t, 0, 0, 1)
VALUE_FN(cuStreamWriteValue32_ptsz, cuuint32_t, 1, 0, 1)
VALUE_FN(cuStreamWriteValue32_v2, cuuint32_t, 0, 0, 1)
VALUE_FN(cuStreamWriteValue32_v2_ptsz, cuuint32_t, 1, 0, 1)
VALUE_FN(cuStreamWriteValue64, cuuint64_t, 0, 1, 1)
VALUE_FN(cuStreamWriteValue64_ptsz, cuuint64_t, 1, 1, 1)
VALUE_FN(cuStreamWriteValue64_v2, cuuint64_t, 0, 1, 1)
VALUE_FN(cuStreamWriteValue64_v2_ptsz, cuuint64_t, 1, 1, 1)
VALUE_FN(cuStreamWaitValue32, cuuint32_t, 0, 0, 0)
VALUE_FN(cuStreamWaitValue32_ptsz, cuuint32_t, 1, 0, 0)
VALUE_FN(cuStreamWaitValue32_v2, cuuint32_t, 0, 0, 0)
VALUE_FN(cuStreamWaitValue32_v2_ptsz, cuuint32_t, 1, 0, 0)
VALUE_FN(cuStreamWaitValue64, cuuint64_t, 0, 1, 0)
VALUE_FN(cuStreamWaitValue64_ptsz, cuuint64_t, 1, 1, 0)
VALUE_FN(cuStreamWaitValue64_v2, cuuint64_t, 0, 1, 0)
VALUE_FN(cuStreamWaitValue64_v2_ptsz, cuuint64_t, 1, 1, 0)

/* All operations are checked before any is enqueued; barriers exist only
 * in the _v2 API (cuda.h). */
static CUresult batch(CUstream h, int ptds, unsigned count, CUstreamBatchMemOpParams *ops,
                      unsigned flags, int v2) {
  if (flags || count >= 256 || (count && !ops)) return CUDA_ERROR_INVALID_VALUE;
  sim_stream *s;
  CUresult r = sim_stream_resolve(h, ptds, &s);
  for (unsigned i = 0; r == CUDA_SUCCESS && i < count; i++) {
    const CUstreamBatchMemOpParams *o = &ops[i];
    switch (o->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
      r = check_word(o->waitValue.address, o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64 ? 8 : 4);
      break;
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
      r = check_word(o->writeValue.address,
                     o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64 ? 8 : 4);
      break;
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
      r = o->flushRemoteWrites.flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
      break;
    case CU_STREAM_MEM_OP_BARRIER:
      r = v2 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      break;
    default:
      r = CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (unsigned i = 0; r == CUDA_SUCCESS && i < count; i++) {
    const CUstreamBatchMemOpParams *o = &ops[i];
    int wide = o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64 ||
               o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
    if (o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ||
        o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64)
      r = write_value(s, o->writeValue.address, wide ? o->writeValue.value64 : o->writeValue.value,
                      wide);
    else if (o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ||
             o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64)
      r = wait_value(s, o->waitValue.address, wide ? o->waitValue.value64 : o->waitValue.value,
                     o->waitValue.flags, wide);
  }
  return r;
}

SIM_API CUresult cuStreamBatchMemOp(CUstream h, unsigned int count, CUstreamBatchMemOpParams *ops,
                                    unsigned int flags) {
  SIM_ENTER_INIT(cuStreamBatchMemOp);
  return batch(h, 0, count, ops, flags, 0);
}
SIM_API CUresult cuStreamBatchMemOp_ptsz(CUstream h, unsigned int count,
                                         CUstreamBatchMemOpParams *ops, unsigned int flags) {
  SIM_ENTER_INIT(cuStreamBatchMemOp_ptsz);
  return batch(h, 1, count, ops, flags, 0);
}
SIM_API CUresult cuStreamBatchMemOp_v2(CUstream h, unsigned int count,
                                       CUstreamBatchMemOpParams *ops, unsigned int flags) {
  SIM_ENTER_INIT(cuStreamBatchMemOp_v2);
  return batch(h, 0, count, ops, flags, 1);
}
SIM_API CUresult cuStreamBatchMemOp_v2_ptsz(CUstream h, unsigned int count,
                                            CUstreamBatchMemOpParams *ops, unsigned int flags) {
  SIM_ENTER_INIT(cuStreamBatchMemOp_v2_ptsz);
  return batch(h, 1, count, ops, flags, 1);
}
