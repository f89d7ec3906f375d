/* sim_exec.c: stream operations: allocation, copying (for graph replay), and
 * execution on the worker against the engines of the virtual clock. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

void sim_event_complete(sim_event *e, uint64_t gen, uint64_t t);
uint64_t sim_copy_run(sim_op *op, sim_stream *s, uint64_t ready);
uint64_t sim_set_run(sim_op *op, sim_stream *s, uint64_t ready);

sim_op *sim_op_new(int kind) {
  sim_op *op = calloc(1, sizeof *op);
  if (op) op->kind = kind;
  return op;
}

void sim_op_free(sim_op *op) {
  if (!op) return;
  for (int i = 0; i < op->ndeps; i++) sim_tl_unref(op->deps[i].tl);
  free(op->deps);
  if (op->kind == OP_KERNEL) free(op->u.k.pbuf);
  if (op->kind == OP_RECORD) sim_tl_unref(&op->u.rec.ev->tl);
  free(op);
}

/* A copy for graph replay: dependencies are not copied (a graph's nodes run
 * in capture order on the launch stream). */
sim_op *sim_op_clone(const sim_op *src) {
  sim_op *op = sim_op_new(src->kind);
  if (!op) return NULL;
  op->u = src->u;
  if (src->kind == OP_KERNEL) {
    op->u.k.pbuf = malloc(src->u.k.psize ? src->u.k.psize : 1);
    if (!op->u.k.pbuf) {
      free(op);
      return NULL;
    }
    memcpy(op->u.k.pbuf, src->u.k.pbuf, src->u.k.psize);
  }
  if (src->kind == OP_RECORD) sim_tl_ref(&op->u.rec.ev->tl);
  return op;
}

static uint64_t prefetch_run(sim_op *op, sim_stream *s, uint64_t ready) {
  sim_lock();
  uint64_t end = sim_prefetch_locked(op->u.pf.p, op->u.pf.n, op->u.pf.loc, s->ctx->dev, ready);
  sim_unlock();
  return end;
}

/* After a sticky error the context runs no more device work; host-side
 * items (callbacks, event records, frees) still complete so nobody hangs. */
uint64_t sim_op_exec(sim_op *op, sim_stream *s, uint64_t ready) {
  int sticky = __atomic_load_n(&s->ctx->sticky, __ATOMIC_ACQUIRE), dead = sticky != 0;
  switch (op->kind) {
  case OP_KERNEL: return dead ? ready : sim_kernel_run(op, s, ready);
  case OP_COPY: return dead ? ready : sim_copy_run(op, s, ready);
  case OP_SET: return dead ? ready : sim_set_run(op, s, ready);
  case OP_PREFETCH: return dead ? ready : prefetch_run(op, s, ready);
  case OP_DISCARD:
    if (!dead) {
      sim_lock();
      sim_discard_locked(op->u.pf.p, op->u.pf.n);
      sim_unlock();
    }
    return ready;
  case OP_HOSTFN:
    if (op->u.fn.fn) op->u.fn.fn(op->u.fn.ud);
    else op->u.fn.cb(op->u.fn.h, (CUresult)sticky, op->u.fn.ud);
    return ready;
  case OP_RECORD: sim_event_complete(op->u.rec.ev, op->u.rec.gen, ready); return ready;
  case OP_FREE: sim_free_now(op->u.fr.p); return ready;
  default: return ready;
  }
}
