/* replay_load.c: reads an encoded VXTRACE buffer into the replay's arrays,
 * numbering allocations densely and optionally re-chunking the ranges. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "replay.h"

struct idmap {
  uint64_t id;
  uint32_t idx;
  UT_hash_handle hh;
};

struct loader {
  rp_trace_t *t;
  struct idmap *live;
  size_t ev_cap, al_cap, rg_cap, ra_cap, le_cap;
  uint64_t src_chunk;
  char *err;
  size_t errlen;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap * 2 : 1024;
  while (n < need)
    n *= 2;
  void *q = realloc(*p, n * elem);
  if (!q) return -ENOMEM;
  *p = q;
  *cap = n;
  return 0;
}

static int fail(struct loader *L, int r, const char *what, uint64_t id) {
  snprintf(L->err, L->errlen, "trace: %s (allocation id %llu)", what, (unsigned long long)id);
  return r;
}

static struct idmap *find(struct loader *L, uint64_t id) {
  struct idmap *m = NULL;
  HASH_FIND(hh, L->live, &id, sizeof id, m);
  return m;
}

static rp_event_t *new_event(struct loader *L, const pol_trace_rec_t *rec) {
  rp_trace_t *t = L->t;
  if (grow((void **)&t->ev, &L->ev_cap, t->nev + 1, sizeof *t->ev)) return NULL;
  rp_event_t *e = &t->ev[t->nev++];
  *e = (rp_event_t){.type = rec->type, .time = rec->time};
  return e;
}

static int on_alloc(struct loader *L, const pol_trace_rec_t *rec) {
  rp_trace_t *t = L->t;
  if (find(L, rec->alloc_id)) return fail(L, -EINVAL, "ALLOC of a live id", rec->alloc_id);
  struct idmap *m = calloc(1, sizeof *m);
  rp_event_t *e = m ? new_event(L, rec) : NULL;
  if (!e || grow((void **)&t->al, &L->al_cap, t->nal + 1, sizeof *t->al)) {
    free(m);
    return -ENOMEM;
  }
  uint64_t n = (rec->size + t->chunk - 1) / t->chunk;
  t->al[t->nal] = (rp_alloc_t){.id = rec->alloc_id,
                               .addr = rec->addr,
                               .size = rec->size,
                               .base = t->nchunks,
                               .nchunks = (uint32_t)n,
                               .flags = rec->flags};
  t->nchunks += n;
  m->id = rec->alloc_id;
  m->idx = (uint32_t)t->nal;
  HASH_ADD(hh, L->live, id, sizeof m->id, m);
  e->alloc = (uint32_t)t->nal++;
  return 0;
}

static int on_free(struct loader *L, const pol_trace_rec_t *rec) {
  struct idmap *m = find(L, rec->alloc_id);
  if (!m) return fail(L, -EINVAL, "FREE of an unknown id", rec->alloc_id);
  rp_event_t *e = new_event(L, rec);
  if (!e) return -ENOMEM;
  e->alloc = m->idx;
  HASH_DEL(L->live, m);
  free(m);
  return 0;
}

static int on_launch(struct loader *L, const pol_trace_rec_t *rec) {
  rp_trace_t *t = L->t;
  if (grow((void **)&t->rg, &L->rg_cap, t->nrg + rec->nranges, sizeof *t->rg)) return -ENOMEM;
  if (grow((void **)&t->rg_alloc, &L->ra_cap, t->nrg + rec->nranges, sizeof *t->rg_alloc) ||
      grow((void **)&t->launch_ev, &L->le_cap, t->nlaunch + 1, sizeof *t->launch_ev))
    return -ENOMEM;
  size_t evi = t->nev;
  rp_event_t *e = new_event(L, rec);
  if (!e) return -ENOMEM;
  *e = (rp_event_t){.type = rec->type,
                    .time = rec->time,
                    .dur = rec->dur_ns,
                    .dur_own = rec->dur_ns,
                    .kernel = rec->kernel,
                    .stream = rec->stream,
                    .r0 = t->nrg};
  for (uint32_t i = 0; i < rec->nranges; i++) {
    const pol_range_t *r = &rec->ranges[i];
    struct idmap *m = find(L, r->alloc_id);
    if (!m) return fail(L, -EINVAL, "LAUNCH names an unknown id", r->alloc_id);
    const rp_alloc_t *a = &t->al[m->idx];
    uint64_t b0 = r->first * L->src_chunk, b1 = (r->first + (uint64_t)r->count) * L->src_chunk;
    if (b1 > a->size) b1 = a->size;
    if (b0 >= b1) continue;
    uint64_t f = b0 / t->chunk, l = (b1 + t->chunk - 1) / t->chunk;
    t->rg[t->nrg] = (pol_range_t){
        .alloc_id = r->alloc_id, .first = (uint32_t)f, .count = (uint32_t)(l - f), .mode = r->mode};
    t->rg_alloc[t->nrg++] = m->idx;
    e->nr++;
  }
  t->launch_ev[t->nlaunch++] = evi;
  return 0;
}

static int on_copy(struct loader *L, const pol_trace_rec_t *rec) {
  rp_trace_t *t = L->t;
  struct idmap *m = find(L, rec->alloc_id);
  if (!m) return fail(L, -EINVAL, "COPY names an unknown id", rec->alloc_id);
  const rp_alloc_t *a = &t->al[m->idx];
  if (rec->offset >= a->size || rec->bytes > a->size - rec->offset)
    return fail(L, -EINVAL, "COPY past its allocation's end", rec->alloc_id);
  rp_event_t *e = new_event(L, rec);
  if (!e) return -ENOMEM;
  e->alloc = m->idx;
  e->stream = rec->stream;
  e->dir = rec->dir;
  e->flags = rec->flags;
  e->off = rec->offset;
  e->bytes = rec->bytes;
  t->ncopy++;
  return 0;
}

/* A measured trace: each launch's device time includes what stalled it
 * (faults, the copy engines it waited for), which the cost model charges
 * itself.  Its compute is taken as the shortest time the same kernel took
 * on the same ranges (the same allocations, chunks and counts: its repeats
 * in a loop, where the stalls vary and the compute does not), or, where
 * the launch has no such repeat (its allocations made anew each time), on
 * ranges of the same total size; a launch seen once keeps its own.  The
 * same ranges first: a kernel's time also holds what it read over the link
 * past the ranges vx inferred (tiers/launch_plan.c reads a segment whose
 * extents are guesses in place), which no trace can show and which comes
 * back at every repeat of that launch; the shortest of all launches of the
 * same size had none of it (vx play of prog_torch: the replay of its
 * VX_TRACE took 0.85x of the run). */
struct shortest {
  uint64_t key[2]; /* kernel, and the ranges (exact) or the chunks they reach (size) */
  uint64_t ns, seen;
  UT_hash_handle hh;
};

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static int note_min(struct shortest **all, const uint64_t key[2], uint64_t ns) {
  struct shortest *s;
  HASH_FIND(hh, *all, key, 2 * sizeof key[0], s);
  if (s) {
    if (ns < s->ns) s->ns = ns;
    s->seen++;
    return 0;
  }
  if (!(s = malloc(sizeof *s))) return -ENOMEM;
  memcpy(s->key, key, sizeof s->key);
  s->ns = ns;
  s->seen = 1;
  HASH_ADD(hh, *all, key, sizeof s->key, s);
  return 0;
}

static void drop_all(struct shortest **all) {
  struct shortest *s, *tmp;
  HASH_ITER(hh, *all, s, tmp) {
    HASH_DEL(*all, s);
    free(s);
  }
}

static int shortest_durations(rp_trace_t *t) {
  struct shortest *exact = NULL, *size = NULL, *s;
  int r = 0;
  for (int pass = 0; pass < 2 && !r; pass++) {
    for (size_t i = 0; i < t->nlaunch && !r; i++) {
      rp_event_t *e = &t->ev[t->launch_ev[i]];
      if (!e->dur) continue;
      uint64_t ke[2] = {e->kernel, e->nr}, ks[2] = {e->kernel, 0};
      for (uint32_t k = 0; k < e->nr; k++) {
        const pol_range_t *g = &t->rg[e->r0 + k];
        ks[1] += g->count;
        ke[1] = mix(mix(mix(ke[1], t->rg_alloc[e->r0 + k]), g->first), g->count);
      }
      if (pass == 0) {
        r = note_min(&exact, ke, e->dur);
        if (!r) r = note_min(&size, ks, e->dur);
        continue;
      }
      HASH_FIND(hh, exact, ke, sizeof ke, s);
      if (!s || s->seen < 2) HASH_FIND(hh, size, ks, sizeof ks, s);
      e->dur = s->ns;
    }
  }
  drop_all(&exact);
  drop_all(&size);
  return r;
}

int rp_trace_load(rp_trace_t *t, const void *buf, size_t len, uint64_t chunk, char *err,
                  size_t errlen) {
  memset(t, 0, sizeof *t);
  if (errlen) err[0] = 0;
  pol_trace_reader_t rd;
  int r = pol_trace_open(&rd, buf, len);
  if (r < 0) {
    snprintf(err, errlen, "trace: bad header (%s)", strerror(-r));
    return r;
  }
  struct loader L = {.t = t, .src_chunk = rd.hdr.chunk_size, .err = err, .errlen = errlen};
  t->chunk = chunk ? chunk : rd.hdr.chunk_size;
  t->capacity = rd.hdr.capacity[0];
  pol_range_t *ranges = malloc(POL_TRACE_MAX_RANGES * sizeof *ranges);
  pol_trace_rec_t rec;
  if (!ranges) r = -ENOMEM;
  while (ranges && (r = pol_trace_next(&rd, &rec, ranges, POL_TRACE_MAX_RANGES)) == 1) {
    if (rec.device != 0) continue;
    r = rec.type == POL_TREC_ALLOC  ? on_alloc(&L, &rec)
        : rec.type == POL_TREC_FREE ? on_free(&L, &rec)
        : rec.type == POL_TREC_COPY ? on_copy(&L, &rec)
                                    : on_launch(&L, &rec);
    if (r < 0) break;
  }
  if (r < 0 && !err[0])
    snprintf(err, errlen, "trace: corrupt record at byte %zu (%s)", rd.pos, strerror(-r));
  t->measured = (rd.hdr.flags & POL_TRACE_MEASURED) != 0;
  if (r >= 0 && t->measured) r = shortest_durations(t);
  free(ranges);
  struct idmap *m, *tmp;
  HASH_ITER(hh, L.live, m, tmp) {
    HASH_DEL(L.live, m);
    free(m);
  }
  if (r < 0) rp_trace_free(t);
  return r < 0 ? r : 0;
}

void rp_trace_free(rp_trace_t *t) {
  free(t->ev);
  free(t->al);
  free(t->rg);
  free(t->rg_alloc);
  free(t->launch_ev);
  memset(t, 0, sizeof *t);
}

// ---- shared by vx replay and vx play ----

int rp_read_file(const char *path, void **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return -errno;
  size_t cap = 1 << 20, n = 0;
  char *b = malloc(cap);
  while (b) {
    n += fread(b + n, 1, cap - n, f);
    if (n < cap) break;
    char *nb = realloc(b, cap *= 2);
    if (!nb) free(b);
    b = nb;
  }
  int err = ferror(f);
  fclose(f);
  if (!b || err) {
    free(b);
    return b ? -EIO : -ENOMEM;
  }
  *buf = b;
  *len = n;
  return 0;
}

int rp_parse_size(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  double mul = 1;
  switch (*end) {
  case 'K':
  case 'k':
    mul = 1024.0, end++;
    break;
  case 'M':
  case 'm':
    mul = 1048576.0, end++;
    break;
  case 'G':
  case 'g':
    mul = 1073741824.0, end++;
    break;
  case 'T':
  case 't':
    mul = 1099511627776.0, end++;
    break;
  }
  if (end == s || *end || errno || !(v > 0) || v * mul < 1 || v * mul > 1e18) return -EINVAL;
  *out = (uint64_t)(v * mul);
  return 0;
}
