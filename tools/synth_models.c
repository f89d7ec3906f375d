/* synth_models.c: the synthetic workloads' launch sequences: transformer
 * training and inference, a CNN, a mixture-of-experts layer. */
#include "synth_int.h"

enum { R = POL_ACCESS_READ, W = POL_ACCESS_WRITE, RW = POL_ACCESS_RW };

static void init_launch(struct sb *b, uint64_t id) {
  sb_arg(b, id, W);
  sb_launch(b, "init_fill", 0);
}

// ---- transformer training ----

struct tlayer {
  uint64_t wa, wm, ma, va, mm, vm; /* weights and optimizer states */
  uint64_t x, aa, am, ga, gm;      /* per iteration */
};

static void train_forward(struct sb *b, struct tlayer *L, int n, double T, double h, double seq) {
  for (int l = 0; l < n; l++) {
    L[l].aa = sb_alloc(b, (uint64_t)(3 * T * h * 2));
    sb_arg(b, L[l].wa, R), sb_arg(b, L[l].x, R), sb_arg(b, L[l].aa, W);
    sb_launch(b, "fwd_attn", 2 * T * 4 * h * h + 4 * T * seq * h);
    L[l].am = sb_alloc(b, (uint64_t)(4 * T * h * 2));
    L[l + 1].x = sb_alloc(b, (uint64_t)(T * h * 2));
    sb_arg(b, L[l].wm, R), sb_arg(b, L[l].aa, R), sb_arg(b, L[l].am, W), sb_arg(b, L[l + 1].x, W);
    sb_launch(b, "fwd_mlp", 2 * T * 8 * h * h);
  }
}

static void train_backward(struct sb *b, struct tlayer *L, int n, double T, double h, double seq) {
  uint64_t dx = sb_alloc(b, (uint64_t)(T * h * 2));
  sb_arg(b, L[n].x, R), sb_arg(b, dx, W);
  sb_launch(b, "loss", 0);
  for (int l = n - 1; l >= 0; l--) {
    L[l].gm = sb_alloc(b, (uint64_t)(8 * h * h * 2));
    uint64_t daa = sb_alloc(b, (uint64_t)(3 * T * h * 2));
    sb_arg(b, L[l].wm, R), sb_arg(b, L[l].aa, R), sb_arg(b, L[l].am, R), sb_arg(b, dx, R);
    sb_arg(b, L[l].gm, W), sb_arg(b, daa, W);
    sb_launch(b, "bwd_mlp", 4 * T * 8 * h * h);
    sb_free(b, L[l].am), sb_free(b, dx), sb_free(b, L[l + 1].x);
    L[l].ga = sb_alloc(b, (uint64_t)(4 * h * h * 2));
    dx = sb_alloc(b, (uint64_t)(T * h * 2));
    sb_arg(b, L[l].wa, R), sb_arg(b, L[l].x, R), sb_arg(b, L[l].aa, R), sb_arg(b, daa, R);
    sb_arg(b, L[l].ga, W), sb_arg(b, dx, W);
    sb_launch(b, "bwd_attn", 4 * T * 4 * h * h + 8 * T * seq * h);
    sb_free(b, L[l].aa), sb_free(b, daa);
  }
  sb_free(b, dx), sb_free(b, L[0].x);
}

static void train_step(struct sb *b, struct tlayer *L, int n) {
  for (int l = 0; l < n; l++) {
    sb_arg(b, L[l].wa, RW), sb_arg(b, L[l].ga, R), sb_arg(b, L[l].ma, RW), sb_arg(b, L[l].va, RW);
    sb_launch(b, "adam", 0);
    sb_arg(b, L[l].wm, RW), sb_arg(b, L[l].gm, R), sb_arg(b, L[l].mm, RW), sb_arg(b, L[l].vm, RW);
    sb_launch(b, "adam", 0);
    sb_free(b, L[l].ga), sb_free(b, L[l].gm);
  }
}

void synth_train(struct sb *b, const struct synth_params *p) {
  int n = (int)p->layers;
  double h = p->hidden, T = p->batch * p->seq;
  struct tlayer L[65] = {{0}};
  for (int l = 0; l < n; l++) {
    uint64_t *w[] = {&L[l].wa, &L[l].ma, &L[l].va, &L[l].wm, &L[l].mm, &L[l].vm};
    for (int k = 0; k < 6; k++) {
      *w[k] = sb_alloc(b, (uint64_t)((k < 3 ? 4 : 8) * h * h * 2));
      init_launch(b, *w[k]);
    }
  }
  for (int it = 0; it < (int)p->iters; it++) {
    L[0].x = sb_alloc(b, (uint64_t)(T * h * 2));
    sb_arg(b, L[0].x, W);
    sb_launch(b, "embed", 0);
    train_forward(b, L, n, T, h, p->seq);
    train_backward(b, L, n, T, h, p->seq);
    train_step(b, L, n);
  }
}

// ---- transformer inference with a paged, growing KV cache ----

struct ilayer {
  uint64_t wa, wm;
  uint64_t page[1024];
  int npages;
};

static void infer_pass(struct sb *b, struct ilayer *L, int n, uint64_t x, uint64_t y, double tok,
                       double ctx, double h) {
  for (int l = 0; l < n; l++) {
    sb_arg(b, L[l].wa, R), sb_arg(b, x, R);
    for (int k = 0; k < L[l].npages; k++)
      sb_arg(b, L[l].page[k], k == L[l].npages - 1 ? RW : R);
    sb_arg(b, y, W);
    sb_launch(b, "attn", 2 * tok * 4 * h * h + 4 * tok * ctx * h);
    sb_arg(b, L[l].wm, R), sb_arg(b, y, R), sb_arg(b, x, W);
    sb_launch(b, "mlp", 2 * tok * 8 * h * h);
  }
}

static void add_pages(struct sb *b, struct ilayer *L, int n, int upto) {
  for (int l = 0; l < n; l++)
    while (L[l].npages < upto && L[l].npages < 1024)
      L[l].page[L[l].npages++] = sb_alloc(b, 2u << 20);
}

/* Decode with a KV cache per layer that grows by one token each step as
 * torch.cat makes it: allocate the bigger cache, copy the old one in and
 * append (a kernel reading the old, writing the new), free the old. */
static void infer_cat(struct sb *b, const struct synth_params *p, const uint64_t *wa,
                      const uint64_t *wm) {
  int n = (int)p->layers;
  double h = p->hidden, bt = p->batch, per_tok = bt * 2 * h * 2;
  uint64_t kv[64];
  for (int req = 0; req < (int)p->iters; req++) {
    uint64_t x = sb_alloc(b, (uint64_t)(bt * p->prompt * h * 2));
    uint64_t y = sb_alloc(b, (uint64_t)(bt * p->prompt * h * 2));
    sb_arg(b, x, W);
    sb_launch(b, "embed", 0);
    for (int l = 0; l < n; l++) {
      kv[l] = sb_alloc(b, (uint64_t)(per_tok * p->prompt));
      sb_arg(b, wa[l], R), sb_arg(b, x, R), sb_arg(b, kv[l], W), sb_arg(b, y, W);
      sb_launch(b, "attn", 2 * bt * p->prompt * 4 * h * h + 4 * bt * p->prompt * p->prompt * h);
      sb_arg(b, wm[l], R), sb_arg(b, y, R), sb_arg(b, x, W);
      sb_launch(b, "mlp", 2 * bt * p->prompt * 8 * h * h);
    }
    sb_free(b, x), sb_free(b, y);
    x = sb_alloc(b, (uint64_t)(bt * h * 2));
    y = sb_alloc(b, (uint64_t)(bt * h * 2));
    for (int t = 0; t < (int)p->tokens; t++) {
      double ctx = p->prompt + t + 1;
      for (int l = 0; l < n; l++) {
        uint64_t grown = sb_alloc(b, (uint64_t)(per_tok * ctx));
        sb_arg(b, kv[l], R), sb_arg(b, x, R), sb_arg(b, grown, W);
        sb_launch(b, "cat", 0);
        sb_free(b, kv[l]);
        kv[l] = grown;
        sb_arg(b, wa[l], R), sb_arg(b, x, R), sb_arg(b, kv[l], R), sb_arg(b, y, W);
        sb_launch(b, "attn", 2 * bt * 4 * h * h + 4 * bt * ctx * h);
        sb_arg(b, wm[l], R), sb_arg(b, y, R), sb_arg(b, x, W);
        sb_launch(b, "mlp", 2 * bt * 8 * h * h);
      }
    }
    for (int l = 0; l < n; l++)
      sb_free(b, kv[l]);
    sb_free(b, x), sb_free(b, y);
  }
}

void synth_infer(struct sb *b, const struct synth_params *p) {
  static struct ilayer L[64];
  int n = (int)p->layers;
  double h = p->hidden, bt = p->batch;
  double per_page = (double)(2u << 20) / (bt * 2 * h * 2); /* tokens per KV page */
  if (per_page < 1) per_page = 1;
  for (int l = 0; l < n; l++) {
    L[l] = (struct ilayer){.wa = sb_alloc(b, (uint64_t)(4 * h * h * 2)),
                           .wm = sb_alloc(b, (uint64_t)(8 * h * h * 2))};
    init_launch(b, L[l].wa), init_launch(b, L[l].wm);
  }
  if (p->kvcat) {
    uint64_t wa[64], wm[64];
    for (int l = 0; l < n; l++)
      wa[l] = L[l].wa, wm[l] = L[l].wm;
    infer_cat(b, p, wa, wm);
    return;
  }
  for (int req = 0; req < (int)p->iters; req++) {
    uint64_t x = sb_alloc(b, (uint64_t)(bt * p->prompt * h * 2));
    uint64_t y = sb_alloc(b, (uint64_t)(bt * p->prompt * h * 2));
    sb_arg(b, x, W);
    sb_launch(b, "embed", 0);
    add_pages(b, L, n, (int)((p->prompt + per_page - 1) / per_page));
    infer_pass(b, L, n, x, y, bt * p->prompt, p->prompt, h);
    sb_free(b, x), sb_free(b, y);
    x = sb_alloc(b, (uint64_t)(bt * h * 2));
    y = sb_alloc(b, (uint64_t)(bt * h * 2));
    for (int t = 0; t < (int)p->tokens; t++) {
      add_pages(b, L, n, (int)((p->prompt + t + per_page) / per_page));
      infer_pass(b, L, n, x, y, bt, p->prompt + t, h);
    }
    for (int l = 0; l < n; l++) {
      for (int k = 0; k < L[l].npages; k++)
        sb_free(b, L[l].page[k]);
      L[l].npages = 0;
    }
    sb_free(b, x), sb_free(b, y);
  }
}

// ---- CNN training ----

static const int cnn_c[] = {64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512};
static const int cnn_s[] = {112, 112, 56, 56, 28, 28, 28, 14, 14, 14, 7, 7};
#define CNN_LAYERS 12

void synth_cnn(struct sb *b, const struct synth_params *p) {
  double bt = p->batch;
  uint64_t w[CNN_LAYERS], m[CNN_LAYERS], a[CNN_LAYERS + 1], gw[CNN_LAYERS];
  double fl[CNN_LAYERS];
  for (int l = 0; l < CNN_LAYERS; l++) {
    double cin = l ? cnn_c[l - 1] : 3;
    w[l] = sb_alloc(b, (uint64_t)(9 * cin * cnn_c[l] * 2));
    m[l] = sb_alloc(b, (uint64_t)(9 * cin * cnn_c[l] * 2));
    init_launch(b, w[l]), init_launch(b, m[l]);
    fl[l] = 2 * bt * cnn_s[l] * cnn_s[l] * 9 * cin * cnn_c[l];
  }
  for (int it = 0; it < (int)p->iters; it++) {
    a[0] = sb_alloc(b, (uint64_t)(bt * 3 * 224 * 224 * 2));
    sb_arg(b, a[0], W);
    sb_launch(b, "load_images", 0);
    for (int l = 0; l < CNN_LAYERS; l++) {
      a[l + 1] = sb_alloc(b, (uint64_t)(bt * cnn_c[l] * cnn_s[l] * cnn_s[l] * 2));
      sb_arg(b, w[l], R), sb_arg(b, a[l], R), sb_arg(b, a[l + 1], W);
      sb_launch(b, "conv_fwd", fl[l]);
    }
    uint64_t g = sb_alloc(b, sb_size(b, a[CNN_LAYERS]));
    sb_arg(b, a[CNN_LAYERS], R), sb_arg(b, g, W);
    sb_launch(b, "loss", 0);
    for (int l = CNN_LAYERS - 1; l >= 0; l--) {
      gw[l] = sb_alloc(b, sb_size(b, w[l]));
      uint64_t gp = sb_alloc(b, sb_size(b, a[l]));
      sb_arg(b, w[l], R), sb_arg(b, a[l], R), sb_arg(b, g, R), sb_arg(b, gw[l], W),
          sb_arg(b, gp, W);
      sb_launch(b, "conv_bwd", 2 * fl[l]);
      sb_free(b, a[l + 1]), sb_free(b, g);
      g = gp;
    }
    sb_free(b, g), sb_free(b, a[0]);
    for (int l = 0; l < CNN_LAYERS; l++) {
      sb_arg(b, w[l], RW), sb_arg(b, gw[l], R), sb_arg(b, m[l], RW);
      sb_launch(b, "sgd", 0);
      sb_free(b, gw[l]);
    }
  }
}

// ---- mixture of experts: data-dependent expert choice ----

/* Skewed popularity: expert e chosen with weight 1/(e+1). */
static int pick_expert(struct sb *b, int ne, const int *taken, int ntaken) {
  for (;;) {
    double total = 0, u;
    for (int e = 0; e < ne; e++)
      total += 1.0 / (e + 1);
    u = (double)(sb_rand(b) % 1000000) / 1e6 * total;
    int e = 0;
    for (; e < ne - 1; e++) {
      u -= 1.0 / (e + 1);
      if (u <= 0) break;
    }
    int dup = 0;
    for (int k = 0; k < ntaken; k++)
      dup |= taken[k] == e;
    if (!dup) return e;
  }
}

void synth_moe(struct sb *b, const struct synth_params *p) {
  int n = (int)p->layers, ne = (int)p->experts, act = (int)p->active;
  double h = p->hidden, tok = p->tokens;
  static uint64_t wa[64], wr[64], we[64][256];
  for (int l = 0; l < n; l++) {
    wa[l] = sb_alloc(b, (uint64_t)(4 * h * h * 2)), init_launch(b, wa[l]);
    wr[l] = sb_alloc(b, (uint64_t)(h * ne * 2)), init_launch(b, wr[l]);
    for (int e = 0; e < ne; e++)
      we[l][e] = sb_alloc(b, (uint64_t)(2 * h * 4 * h * 2)), init_launch(b, we[l][e]);
  }
  uint64_t route = sb_alloc(b, (uint64_t)(tok * 8));
  for (int it = 0; it < (int)p->iters; it++) {
    uint64_t x = sb_alloc(b, (uint64_t)(tok * h * 2)), y = sb_alloc(b, (uint64_t)(tok * h * 2));
    sb_arg(b, x, W);
    sb_launch(b, "embed", 0);
    for (int l = 0; l < n; l++) {
      sb_arg(b, wa[l], R), sb_arg(b, x, R), sb_arg(b, y, W);
      sb_launch(b, "attn", 2 * tok * 4 * h * h);
      sb_arg(b, wr[l], R), sb_arg(b, y, R), sb_arg(b, route, W);
      sb_launch(b, "router", 2 * tok * h * ne);
      int taken[256], nt = 0;
      for (int k = 0; k < act && nt < ne; k++) {
        taken[nt] = pick_expert(b, ne, taken, nt);
        sb_arg(b, we[l][taken[nt]], R), sb_arg(b, y, R), sb_arg(b, route, R), sb_arg(b, x, RW);
        sb_launch(b, "expert", 2 * (tok / act) * 16 * h * h);
        nt++;
      }
    }
    sb_free(b, x), sb_free(b, y);
  }
}
