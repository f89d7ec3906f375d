/* synth_int.h: the builder the synthetic workloads are written with
 * (synth_build.c) and the workload generators (synth_*.c). */
#ifndef VX_TOOLS_SYNTH_INT_H
#define VX_TOOLS_SYNTH_INT_H

#include <stdint.h>

#include "synth.h"
#include "trace.h"

#define SB_MAX_ARGS 512
#define SB_FLOPS 400e12 /* modelled device: dense fp16 throughput, flop/s */
#define SB_DEV_BPS 3e12 /* modelled device memory bandwidth, bytes/s */

struct sb_op {
  uint32_t type; /* POL_TREC_* */
  uint32_t nr;
  uint64_t id, addr, size, kernel, stream, dur;
  size_t r0;
};
struct sb_live {
  uint64_t addr, size;
};
struct sb_hole {
  uint64_t addr, size;
};

struct sb {
  struct sb_op *ops;
  size_t n, ops_cap;
  pol_range_t *rg;
  size_t nrg, rg_cap;
  struct sb_live *live; /* by id - id_base */
  size_t live_cap;
  struct sb_hole *holes;
  size_t nholes, holes_cap;
  uint64_t next_id, id_base, bump, rng, stream;
  int drift, err;
  pol_range_t args[SB_MAX_ARGS];
  uint32_t nargs;
};

void sb_init(struct sb *b, uint64_t stream, uint64_t id_base, uint64_t seed, int drift);
void sb_fini(struct sb *b);
uint64_t sb_rand(struct sb *b);
uint64_t sb_kernel(const char *name);
uint64_t sb_alloc(struct sb *b, uint64_t size);
void sb_free(struct sb *b, uint64_t id);
uint64_t sb_size(const struct sb *b, uint64_t id);
/* Arguments of the next launch: a whole allocation. */
void sb_arg(struct sb *b, uint64_t id, uint32_t mode);
uint64_t sb_dur(double flops, double bytes);
/* Emits a launch of `kernel` with the pending arguments and `flops` of work. */
void sb_launch(struct sb *b, const char *kernel, double flops);
int sb_copy_op(struct sb *to, const struct sb *from, const struct sb_op *o);
/* Encodes the ops with capacity = peak footprint / oversub; *out is malloc'd. */
int sb_encode(struct sb *b, double oversub, void **out, size_t *len);

/* Workload parameters: name=value pairs with defaults. */
struct synth_params {
  double layers, hidden, batch, seq, iters, oversub, seed, drift;
  double tokens, prompt, experts, active;
  double kvcat; /* transformer-infer: 1 = one KV cache per layer, re-made 1 token bigger
                 * each token (torch.cat style) instead of 2 MiB pages */
};

void synth_train(struct sb *b, const struct synth_params *p);
void synth_infer(struct sb *b, const struct synth_params *p);
void synth_cnn(struct sb *b, const struct synth_params *p);
void synth_moe(struct sb *b, const struct synth_params *p);

#endif
