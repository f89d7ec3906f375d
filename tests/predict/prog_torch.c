/* prog_torch: a PyTorch-like training loop in plain driver API, verified exactly
 * against a host shadow of every tensor.  What it imitates, and why each part
 * matters to vx:
 *
 * - A caching allocator like PyTorch's CUDACachingAllocator: tensors of
 *   1-10 MiB are blocks carved (best fit, split, merged on free) out of
 *   T_SEG_MB (20) MiB segments taken with cuMemAlloc_v2 and never freed;
 *   tensors under 1 MiB come from a small pool of 2 MiB segments.  Blocks are
 *   reused every iteration, so kernels get interior pointers (block starts
 *   inside segments) and vx must bound a tensor's extent within its segment.
 * - Every driver entry point is looked up with cuGetProcAddress_v2 (at
 *   T_CUDA_VERSION, 12080), as libcudart and PyTorch do, not linked directly.
 * - Each iteration copies an input batch in from pinned host memory with
 *   cuMemcpyHtoDAsync (a ring of two pinned buffers, each reused after its
 *   event), runs forward (per layer: out = f(weight, in)), the loss and its
 *   gradient, backward (gradient of the input and of the weight, per layer,
 *   freeing saved activations as it goes), and a momentum SGD step (momentum
 *   buffers made lazily at the first step, as torch.optim.SGD does; gradients
 *   freed afterwards, as zero_grad(set_to_none=True)); then loss.item(), a
 *   4-byte synchronous read.  All on the legacy NULL stream.
 *
 * Every op is one or two add_u32 launches (exact u32 arithmetic); the host
 * computes the same on its shadow copies.  At the end every byte of every
 * weight and momentum buffer is read back and compared, and each iteration's
 * loss was compared when it was read.  Prints the simulator's counters as one
 * JSON line (the keys of prog_train's, plus the allocator's footprint); exits 1
 * if anything differs.
 *
 * Environment: T_LAYERS (8), T_ITERS (8), T_SEG_MB (20), T_MIN_MB (1),
 * T_MAX_MB (10): layer i's tensors are T_MIN_MB..T_MAX_MB in 256 KiB steps,
 * varied per layer by a fixed hash; T_CUDA_VERSION (12080). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

#define MIB ((size_t)1 << 20)
#define MAXL 64
#define MAXSEG 1024
#define MAXBLK 8192
#define SMALL_MAX MIB       /* PyTorch's kSmallSize: smaller requests use the small pool */
#define SMALL_SEG (2 * MIB) /* kSmallBuffer */
#define ROUND 512           /* kMinBlockSize */
#define LOSS_WORDS 128

static int env_int(const char *name, int def, int lo, int hi) {
  const char *s = getenv(name);
  int v = s && *s ? atoi(s) : def;
  return v < lo ? lo : v > hi ? hi : v;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "prog_torch: out of host memory (%zu bytes)\n", n);
    exit(3);
  }
  return p;
}

// ---- the caching allocator ----

/* A block is a piece of one segment; the blocks of a segment form a list in
 * address order (prev/next), free neighbours merged on free. */
typedef struct block {
  int seg, prev, next, used; /* used: 0 free block, 1 tensor, -1 slot unused */
  size_t off, size;
} block_t;

static struct {
  CUdeviceptr base[MAXSEG];
  size_t size[MAXSEG];
  int small[MAXSEG];
  int nseg;
  size_t seg_bytes, large_seg;
  block_t b[MAXBLK];
} ca;

static int new_slot(void) {
  for (int i = 0; i < MAXBLK; i++)
    if (ca.b[i].used < 0) return i;
  fprintf(stderr, "prog_torch: out of allocator blocks\n");
  exit(3);
}

/* A new segment holding one free block; returns the block. */
static int new_segment(size_t bytes, int small) {
  if (ca.nseg == MAXSEG) {
    fprintf(stderr, "prog_torch: out of segments\n");
    exit(3);
  }
  /* kLargeBuffer for requests under kMinLargeAlloc (half of it), else the
   * request rounded up to kRoundLarge (2 MiB). */
  size_t seg = small                      ? SMALL_SEG
               : bytes < ca.large_seg / 2 ? ca.large_seg
                                          : (bytes + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
  int s = ca.nseg++;
  CHECK_CU(kit_cu.cuMemAlloc_v2(&ca.base[s], seg));
  ca.size[s] = seg, ca.small[s] = small;
  ca.seg_bytes += seg;
  int i = new_slot();
  ca.b[i] = (block_t){s, -1, -1, 0, 0, seg};
  return i;
}

/* Best fit among the free blocks of the pool (smallest, then lowest
 * address), split when the rest is worth keeping, as PyTorch does. */
static int ca_alloc(size_t bytes, CUdeviceptr *p) {
  size_t want = (bytes + ROUND - 1) / ROUND * ROUND;
  int small = want <= SMALL_MAX, best = -1;
  for (int i = 0; i < MAXBLK; i++) {
    block_t *b = &ca.b[i];
    if (b->used != 0 || ca.small[b->seg] != small || b->size < want) continue;
    if (best < 0 || b->size < ca.b[best].size ||
        (b->size == ca.b[best].size &&
         ca.base[b->seg] + b->off < ca.base[ca.b[best].seg] + ca.b[best].off))
      best = i;
  }
  if (best < 0) best = new_segment(want, small);
  block_t *b = &ca.b[best];
  size_t rest = b->size - want;
  if (small ? rest >= ROUND : rest > SMALL_MAX) {
    int r = new_slot();
    ca.b[r] = (block_t){b->seg, best, b->next, 0, b->off + want, rest};
    if (b->next >= 0) ca.b[b->next].prev = r;
    b->next = r, b->size = want;
  }
  b->used = 1;
  *p = ca.base[b->seg] + b->off;
  return best;
}

static void merge_next(int i) {
  block_t *b = &ca.b[i];
  int n = b->next;
  if (n < 0 || ca.b[n].used != 0) return;
  b->size += ca.b[n].size;
  b->next = ca.b[n].next;
  if (b->next >= 0) ca.b[b->next].prev = i;
  ca.b[n].used = -1;
}

/* The block goes back to the pool at once: everything runs on one stream,
 * so later work that reuses it is ordered after the work that used it. */
static void ca_free(int i) {
  ca.b[i].used = 0;
  merge_next(i);
  int p = ca.b[i].prev;
  if (p >= 0 && ca.b[p].used == 0) merge_next(p);
}

// ---- tensors: a device block and its host shadow ----

typedef struct tensor {
  int blk;
  CUdeviceptr p;
  size_t n; /* u32 words */
  uint32_t *h;
} tensor_t;

static tensor_t t_new(size_t words) {
  tensor_t t = {0, 0, words, xmalloc(words * 4)};
  t.blk = ca_alloc(words * 4, &t.p);
  return t;
}

static void t_free(tensor_t *t) {
  ca_free(t->blk);
  free(t->h);
  t->h = NULL, t->p = 0;
}

static void add_range(const tensor_t *d, const tensor_t *a, const tensor_t *b, size_t off,
                      size_t n) {
  if (!n) return;
  CHECK_CU(kit_add(d->p + off * 4, a->p + off * 4, b->p + off * 4, n, NULL));
  for (size_t j = off; j < off + n; j++)
    d->h[j] = a->h[j] + b->h[j];
}

/* d[0:m] = x[0:m] + y[0:m] with m the smallest of the three sizes, and the
 * rest of d from z alone (d[j] = z[j] + z[j]; z is at least as big as d):
 * a layer whose input and output differ in size. */
static void op(const tensor_t *d, const tensor_t *x, const tensor_t *y, const tensor_t *z) {
  size_t m = d->n < x->n ? d->n : x->n;
  if (y->n < m) m = y->n;
  add_range(d, x, y, 0, m);
  if (m < d->n) add_range(d, z, z, m, d->n - m);
}

// ---- the model ----

static int layers, iters;
static size_t lw[MAXL], in_words;
static tensor_t w[MAXL], mom[MAXL], gw[MAXL], act[MAXL + 1], gact[MAXL + 1];
static int have_mom;

static size_t layer_words(int i, int lo_mb, int hi_mb) {
  uint32_t steps = (uint32_t)(hi_mb - lo_mb) * 4 + 1;
  size_t bytes = (size_t)lo_mb * MIB + (size_t)(kit_hash(77, (uint64_t)i) % steps) * (MIB / 4);
  return bytes / 4;
}

static void init_weights(void) {
  for (int i = 0; i < layers; i++) {
    w[i] = t_new(lw[i]);
    CHECK_CU(kit_fill(w[i].p, lw[i], 100 + (uint32_t)i, NULL));
    for (size_t j = 0; j < lw[i]; j++)
      w[i].h[j] = kit_hash(100 + (uint32_t)i, j);
  }
}

/* Pinned staging buffers, as a DataLoader with pin_memory hands them over;
 * each is refilled only after the copy out of it has completed. */
static uint32_t *pinned[2];
static CUevent copied[2];

static void load_batch(int it) {
  int k = it % 2;
  if (it >= 2) CHECK_CU(kit_cu.cuEventSynchronize(copied[k]));
  for (size_t j = 0; j < in_words; j++)
    pinned[k][j] = kit_hash(1000 + (uint32_t)it, j);
  act[0] = t_new(in_words);
  CHECK_CU(kit_cu.cuMemcpyHtoDAsync_v2(act[0].p, pinned[k], in_words * 4, NULL));
  CHECK_CU(kit_cu.cuEventRecord(copied[k], NULL));
  memcpy(act[0].h, pinned[k], in_words * 4);
}

static void forward(tensor_t *loss) {
  for (int i = 0; i < layers; i++) {
    act[i + 1] = t_new(lw[i]);
    op(&act[i + 1], &w[i], &act[i], &w[i]);
  }
  *loss = t_new(LOSS_WORDS);
  op(loss, &act[layers], &act[layers], &act[layers]);
}

static void backward(void) {
  gact[layers] = t_new(lw[layers - 1]);
  op(&gact[layers], &act[layers], &act[layers], &act[layers]);
  t_free(&act[layers]);
  for (int i = layers - 1; i >= 0; i--) {
    if (i > 0) { /* the input of layer 0 needs no gradient */
      gact[i] = t_new(act[i].n);
      op(&gact[i], &w[i], &gact[i + 1], &act[i]);
    }
    gw[i] = t_new(lw[i]);
    op(&gw[i], &gact[i + 1], &act[i], &gact[i + 1]);
    t_free(&gact[i + 1]);
    t_free(&act[i]); /* the saved input (the batch itself at layer 0) */
  }
}

/* momentum_buffer = momentum_buffer + grad; weight = weight + momentum_buffer
 * (momentum 1 and lr -1 in u32 arithmetic: exact).  The first step makes
 * each buffer (zeroed, then the first add: the gradient's clone). */
static void step(void) {
  for (int i = 0; i < layers; i++) {
    if (!have_mom) {
      mom[i] = t_new(lw[i]);
      CHECK_CU(kit_cu.cuMemsetD32Async(mom[i].p, 0, lw[i], NULL));
      memset(mom[i].h, 0, lw[i] * 4);
    }
    op(&mom[i], &mom[i], &gw[i], &gw[i]);
    op(&w[i], &w[i], &mom[i], &mom[i]);
  }
  have_mom = 1;
  for (int i = 0; i < layers; i++)
    t_free(&gw[i]); /* zero_grad(set_to_none=True) */
}

/* loss.item(): the first word, read synchronously; 1 if it differs. */
static size_t loss_item(tensor_t *loss) {
  uint32_t v;
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(&v, loss->p, sizeof v));
  size_t bad = v != loss->h[0];
  t_free(loss);
  return bad;
}

static size_t verify_one(const tensor_t *t) {
  uint32_t *got = xmalloc(t->n * 4);
  size_t bad = 0;
  CHECK_CU(kit_cu.cuMemcpyDtoH_v2(got, t->p, t->n * 4));
  for (size_t j = 0; j < t->n; j++)
    bad += got[j] != t->h[j];
  free(got);
  return bad;
}

static size_t verify(void) {
  size_t bad = 0;
  for (int i = 0; i < layers; i++)
    bad += verify_one(&w[i]) + verify_one(&mom[i]);
  return bad;
}

static void print_stats(size_t bad, int seg_mb) {
  simcuda_stats_t st;
  const char *pol = getenv("VX_POLICY");
  if (kit_sim_stats(0, &st) != 0) memset(&st, 0, sizeof st);
  printf("{\"policy\":\"%s\",\"layers\":%d,\"iters\":%d,\"seg_mb\":%d,\"segments\":%d,"
         "\"footprint_mb\":%zu,\"bad\":%zu,"
         "\"total_ns\":%" PRIu64 ",\"stall_ns\":%" PRIu64 ",\"kernel_ns\":%" PRIu64
         ",\"faults\":%" PRIu64 ",\"fault_batches\":%" PRIu64 ",\"bytes_prefetch_htod\":%" PRIu64
         ",\"bytes_fault_htod\":%" PRIu64 ",\"bytes_prefetch_dtoh\":%" PRIu64
         ",\"bytes_evict_dtoh\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"device_used_peak\":%" PRIu64
         ",\"bytes_link_htod\":%" PRIu64 ",\"bytes_link_dtoh\":%" PRIu64 ",\"thrash_pins\":%" PRIu64
         "}\n",
         pol && *pol ? pol : "none", layers, iters, seg_mb, ca.nseg, ca.seg_bytes >> 20, bad,
         st.total_ns, st.stall_ns, st.kernel_ns, st.faults, st.fault_batches,
         st.bytes_prefetch_htod, st.bytes_fault_htod, st.bytes_prefetch_dtoh, st.bytes_evict_dtoh,
         st.evictions, st.device_used_peak, st.bytes_link_htod, st.bytes_link_dtoh, st.thrash_pins);
}

int main(void) {
  layers = env_int("T_LAYERS", 8, 1, MAXL);
  iters = env_int("T_ITERS", 8, 1, 100);
  int seg_mb = env_int("T_SEG_MB", 20, 2, 1024);
  int lo = env_int("T_MIN_MB", 1, 1, 1024), hi = env_int("T_MAX_MB", 10, lo, 1024);
  for (int i = 0; i < MAXBLK; i++)
    ca.b[i].used = -1;
  ca.large_seg = (size_t)seg_mb * MIB;
  for (int i = 0; i < layers; i++)
    lw[i] = layer_words(i, lo, hi);
  in_words = layer_words(-1, lo, hi);
  if (kit_bind(KIT_PROCADDR, env_int("T_CUDA_VERSION", 12080, 11030, 99999),
               CU_GET_PROC_ADDRESS_DEFAULT) != 0)
    return 2;
  CHECK_CU(kit_init(0, NULL));
  CHECK_CU(kit_module(NULL));
  for (int k = 0; k < 2; k++) {
    CHECK_CU(kit_cu.cuMemAllocHost_v2((void **)&pinned[k], in_words * 4));
    CHECK_CU(kit_cu.cuEventCreate(&copied[k], CU_EVENT_DISABLE_TIMING));
  }
  init_weights();
  CHECK_CU(kit_cu.cuCtxSynchronize());
  kit_sim_reset_stats();
  size_t bad = 0;
  for (int it = 0; it < iters; it++) {
    tensor_t loss;
    load_batch(it);
    forward(&loss);
    backward();
    step();
    bad += loss_item(&loss);
  }
  CHECK_CU(kit_cu.cuCtxSynchronize());
  bad += verify();
  print_stats(bad, seg_mb);
  return bad ? 1 : 0;
}
