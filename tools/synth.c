/* synth.c: `--synth NAME[,key=value...]`: parameter parsing and dispatch to the
 * workload generators; two-stream merges two workloads on two streams. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth_int.h"

const char *const synth_names[] = {
    "transformer-train", "transformer-infer", "cnn", "moe", "two-stream", NULL};

struct key {
  const char *name;
  size_t off;
  double lo, hi;
};

#define K(n, lo, hi)                                                                               \
  { #n, offsetof(struct synth_params, n), lo, hi }
static const struct key keys[] = {
    K(layers, 1, 64),    K(hidden, 64, 16384), K(batch, 1, 4096),  K(seq, 1, 65536),
    K(iters, 1, 1000),   K(oversub, 1, 3),     K(seed, 0, 1e9),    K(drift, 0, 1),
    K(tokens, 1, 65536), K(prompt, 1, 65536),  K(experts, 1, 256), K(active, 1, 256),
    K(kvcat, 0, 1),
};

static struct synth_params defaults(int w) {
  struct synth_params p = {.oversub = 1.5, .seed = 1, .drift = 1};
  switch (w) {
  case 0: /* transformer-train */
  case 4: /* two-stream (per stream, halved below) */
    p.layers = 8, p.hidden = 2048, p.batch = 8, p.seq = 1024, p.iters = 10;
    break;
  case 1: /* transformer-infer: iters = requests */
    p.layers = 16, p.hidden = 2048, p.batch = 8, p.prompt = 256, p.tokens = 32, p.iters = 3;
    break;
  case 2:
    p.batch = 128, p.iters = 10;
    break;
  case 3:
    p.layers = 4, p.hidden = 2048, p.experts = 16, p.active = 4, p.tokens = 4096, p.iters = 12;
    break;
  }
  return p;
}

static int set_key(struct synth_params *p, const char *kv, char *err, size_t errlen) {
  const char *eq = strchr(kv, '=');
  size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    if (strlen(keys[i].name) != klen || strncmp(kv, keys[i].name, klen)) continue;
    char *end;
    double v = eq ? strtod(eq + 1, &end) : 0;
    if (!eq || end == eq + 1 || *end || v < keys[i].lo || v > keys[i].hi) {
      snprintf(err, errlen, "--synth: %.*s wants a number in [%g, %g]", (int)klen, kv, keys[i].lo,
               keys[i].hi);
      return -EINVAL;
    }
    *(double *)((char *)p + keys[i].off) = v;
    return 0;
  }
  snprintf(err, errlen,
           "--synth: unknown key '%.*s' (layers hidden batch seq iters oversub "
           "seed drift tokens prompt experts active kvcat)",
           (int)klen, kv);
  return -EINVAL;
}

/* Two streams: a training loop and an inference loop, interleaved at random. */
static int two_stream(struct sb *out, const struct synth_params *p) {
  struct sb a, b;
  struct synth_params pa = *p, pb = defaults(1);
  pa.layers = p->layers / 2 >= 1 ? p->layers / 2 : 1;
  pb.layers = pa.layers, pb.iters = p->iters / 3 >= 1 ? p->iters / 3 : 1, pb.tokens = 16;
  sb_init(&a, 1, 0, (uint64_t)p->seed, (int)p->drift);
  sb_init(&b, 2, 1ull << 40, (uint64_t)p->seed + 7, (int)p->drift);
  synth_train(&a, &pa);
  synth_infer(&b, &pb);
  int r = a.err ? a.err : b.err;
  size_t i = 0, j = 0;
  while (!r && (i < a.n || j < b.n)) {
    int from_a = j >= b.n || (i < a.n && sb_rand(out) % (a.n + b.n) < a.n);
    r = from_a ? sb_copy_op(out, &a, &a.ops[i++]) : sb_copy_op(out, &b, &b.ops[j++]);
  }
  sb_fini(&a);
  sb_fini(&b);
  return r;
}

static int generate(int w, struct synth_params *p, void **buf, size_t *len) {
  struct sb b;
  sb_init(&b, 1, 0, (uint64_t)p->seed, (int)p->drift);
  int r = 0;
  switch (w) {
  case 0:
    synth_train(&b, p);
    break;
  case 1:
    synth_infer(&b, p);
    break;
  case 2:
    synth_cnn(&b, p);
    break;
  case 3:
    synth_moe(&b, p);
    break;
  default:
    r = two_stream(&b, p);
    break;
  }
  if (!r) r = sb_encode(&b, p->oversub, buf, len);
  sb_fini(&b);
  return r;
}

int synth_generate(const char *spec, void **buf, size_t *len, char *err, size_t errlen) {
  char tmp[512];
  if (!spec || strlen(spec) >= sizeof tmp) {
    snprintf(err, errlen, "--synth: spec missing or too long");
    return -EINVAL;
  }
  strcpy(tmp, spec);
  char *save = NULL, *name = strtok_r(tmp, ",", &save);
  int w = -1;
  for (int i = 0; name && synth_names[i]; i++)
    if (!strcmp(name, synth_names[i])) w = i;
  if (w < 0) {
    snprintf(err, errlen,
             "--synth: unknown workload '%s' (transformer-train transformer-infer "
             "cnn moe two-stream)",
             name ? name : "");
    return -EINVAL;
  }
  struct synth_params p = defaults(w);
  for (char *kv = strtok_r(NULL, ",", &save); kv; kv = strtok_r(NULL, ",", &save))
    if (set_key(&p, kv, err, errlen) < 0) return -EINVAL;
  if (p.active > p.experts && w == 3) {
    snprintf(err, errlen, "--synth: active must not exceed experts");
    return -EINVAL;
  }
  int r = generate(w, &p, buf, len);
  if (r < 0)
    snprintf(err, errlen, "--synth: %s", r == -ENOMEM ? "out of memory" : "generation failed");
  return r;
}
