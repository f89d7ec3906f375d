/* synth_build.c: the trace builder under the synthetic workloads: allocations at
 * drifting (or caching-allocator-like reused) addresses, launches, encoding. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "synth_int.h"

#define SB_CHUNK (2ull << 20)

void sb_init(struct sb *b, uint64_t stream, uint64_t id_base, uint64_t seed, int drift) {
  memset(b, 0, sizeof *b);
  b->stream = stream;
  b->next_id = id_base + 1;
  b->id_base = id_base;
  b->bump = (id_base + 1) << 28; /* disjoint address spaces per builder */
  b->rng = seed * 0x9e3779b97f4a7c15ull + 0x1234567;
  b->drift = drift;
}

void sb_fini(struct sb *b) {
  free(b->ops);
  free(b->rg);
  free(b->live);
  free(b->holes);
  memset(b, 0, sizeof *b);
}

uint64_t sb_rand(struct sb *b) {
  b->rng ^= b->rng << 13;
  b->rng ^= b->rng >> 7;
  b->rng ^= b->rng << 17;
  return b->rng;
}

uint64_t sb_kernel(const char *name) {
  uint64_t h = 1469598103934665603ull;
  for (; *name; name++)
    h = (h ^ (uint8_t)*name) * 1099511628211ull;
  return h;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem, int *err) {
  if (need <= *cap) return p;
  size_t n = *cap ? *cap * 2 : 256;
  while (n < need)
    n *= 2;
  void *q = realloc(p, n * elem);
  if (!q) {
    *err = -ENOMEM;
    return NULL;
  }
  *cap = n;
  return q;
}

static struct sb_op *op_new(struct sb *b) {
  struct sb_op *o = grow(b->ops, &b->ops_cap, b->n + 1, sizeof *b->ops, &b->err);
  if (!o) return NULL;
  b->ops = o;
  o = &b->ops[b->n++];
  memset(o, 0, sizeof *o);
  return o;
}

/* Address of a new allocation: drifting (always fresh) or reused from a freed
 * block of the same size, as a caching allocator does. */
static uint64_t place(struct sb *b, uint64_t size) {
  uint64_t span = (size + SB_CHUNK - 1) / SB_CHUNK * SB_CHUNK;
  if (!b->drift) {
    for (size_t i = b->nholes; i-- > 0;) {
      if (b->holes[i].size == span) {
        uint64_t a = b->holes[i].addr;
        b->holes[i] = b->holes[--b->nholes];
        return a;
      }
    }
  }
  uint64_t a = b->bump;
  b->bump += span + (b->drift ? (sb_rand(b) % 4) * SB_CHUNK : 0);
  return a;
}

uint64_t sb_alloc(struct sb *b, uint64_t size) {
  uint64_t id = b->next_id++;
  size_t k = id - b->id_base;
  struct sb_live *l = grow(b->live, &b->live_cap, k + 1, sizeof *b->live, &b->err);
  struct sb_op *o = l ? (b->live = l, op_new(b)) : NULL;
  if (!o) return id;
  b->live[k] = (struct sb_live){.addr = place(b, size), .size = size};
  *o = (struct sb_op){.type = POL_TREC_ALLOC, .id = id, .addr = b->live[k].addr, .size = size};
  return id;
}

void sb_free(struct sb *b, uint64_t id) {
  size_t k = id - b->id_base;
  struct sb_op *o = op_new(b);
  if (!o || k >= b->live_cap) return;
  *o = (struct sb_op){.type = POL_TREC_FREE, .id = id, .size = b->live[k].size};
  struct sb_hole *h = grow(b->holes, &b->holes_cap, b->nholes + 1, sizeof *b->holes, &b->err);
  if (!h) return;
  b->holes = h;
  uint64_t span = (b->live[k].size + SB_CHUNK - 1) / SB_CHUNK * SB_CHUNK;
  b->holes[b->nholes++] = (struct sb_hole){.addr = b->live[k].addr, .size = span};
}

uint64_t sb_size(const struct sb *b, uint64_t id) {
  size_t k = id - b->id_base;
  return k < b->live_cap ? b->live[k].size : 0;
}

void sb_arg(struct sb *b, uint64_t id, uint32_t mode) {
  if (b->nargs >= SB_MAX_ARGS) return;
  uint64_t n = (sb_size(b, id) + SB_CHUNK - 1) / SB_CHUNK;
  b->args[b->nargs++] =
      (pol_range_t){.alloc_id = id, .first = 0, .count = (uint32_t)n, .mode = mode};
}

/* Kernel time of a device doing SB_FLOPS and SB_DEV_BPS, with a 2 us floor. */
uint64_t sb_dur(double flops, double bytes) {
  double t = flops / SB_FLOPS;
  if (bytes / SB_DEV_BPS > t) t = bytes / SB_DEV_BPS;
  return (uint64_t)(t * 1e9) + 2000;
}

void sb_launch(struct sb *b, const char *kernel, double flops) {
  double bytes = 0;
  for (uint32_t i = 0; i < b->nargs; i++)
    bytes += (double)b->args[i].count * SB_CHUNK;
  pol_range_t *rg = grow(b->rg, &b->rg_cap, b->nrg + b->nargs, sizeof *b->rg, &b->err);
  struct sb_op *o = rg ? (b->rg = rg, op_new(b)) : NULL;
  if (o) {
    *o = (struct sb_op){.type = POL_TREC_LAUNCH,
                        .kernel = sb_kernel(kernel),
                        .stream = b->stream,
                        .dur = sb_dur(flops, bytes),
                        .r0 = b->nrg,
                        .nr = b->nargs};
    memcpy(b->rg + b->nrg, b->args, b->nargs * sizeof *b->args);
    b->nrg += b->nargs;
  }
  b->nargs = 0;
}

/* Appends op `o` of builder `from` to `to` (ranges copied). */
int sb_copy_op(struct sb *to, const struct sb *from, const struct sb_op *o) {
  struct sb_op *n = op_new(to);
  if (!n) return to->err;
  *n = *o;
  if (o->type != POL_TREC_LAUNCH) return 0;
  pol_range_t *rg = grow(to->rg, &to->rg_cap, to->nrg + o->nr, sizeof *to->rg, &to->err);
  if (!rg) return to->err;
  to->rg = rg;
  memcpy(to->rg + to->nrg, from->rg + o->r0, o->nr * sizeof *rg);
  n->r0 = to->nrg;
  to->nrg += o->nr;
  return 0;
}

// ---- encoding ----

static uint64_t peak_bytes(const struct sb *b) {
  uint64_t live = 0, peak = 0;
  for (size_t i = 0; i < b->n; i++) {
    const struct sb_op *o = &b->ops[i];
    uint64_t span = (o->size + SB_CHUNK - 1) / SB_CHUNK * SB_CHUNK;
    if (o->type == POL_TREC_ALLOC) {
      live += span;
      peak = live > peak ? live : peak;
    } else if (o->type == POL_TREC_FREE) {
      live -= span;
    }
  }
  return peak;
}

static size_t encoded_size(const struct sb *b) {
  size_t n = 32 + 8;
  for (size_t i = 0; i < b->n; i++)
    n += 8 + (b->ops[i].type == POL_TREC_LAUNCH  ? 40 + 24 * (size_t)b->ops[i].nr
              : b->ops[i].type == POL_TREC_ALLOC ? 40
                                                 : 16);
  return n;
}

int sb_encode(struct sb *b, double oversub, void **out, size_t *len) {
  if (b->err) return b->err;
  size_t cap = encoded_size(b), pos = 0;
  uint8_t *buf = malloc(cap);
  if (!buf) return -ENOMEM;
  pol_trace_header_t h = {.device_count = 1, .chunk_size = SB_CHUNK};
  h.capacity[0] = (uint64_t)((double)peak_bytes(b) / oversub) / SB_CHUNK * SB_CHUNK;
  if (h.capacity[0] < SB_CHUNK) h.capacity[0] = SB_CHUNK;
  int r = pol_trace_write_header(buf, cap, &h);
  uint64_t t = 1000;
  for (size_t i = 0; r >= 0 && i < b->n; i++) {
    pos += (size_t)r;
    const struct sb_op *o = &b->ops[i];
    pol_trace_rec_t rec = {.type = o->type,
                           .time = t,
                           .alloc_id = o->id,
                           .addr = o->addr,
                           .size = o->size,
                           .kernel = o->kernel,
                           .stream = o->stream,
                           .dur_ns = o->dur,
                           .nranges = o->nr,
                           .ranges = b->rg + o->r0};
    t += o->type == POL_TREC_LAUNCH ? o->dur : 100;
    r = pol_trace_encode(buf + pos, cap - pos, &rec);
  }
  if (r < 0) {
    free(buf);
    return r;
  }
  *out = buf;
  *len = pos + (size_t)r;
  return 0;
}
