/* trace.c: VXTRACE v1 encoder and decoder over memory buffers, little-endian,
 * every length checked before use (the reader is meant to survive fuzzing). */
#include <errno.h>
#include <string.h>

#include "trace.h"

static const uint8_t magic[8] = {'V', 'X', 'T', 'R', 'A', 'C', 'E', 0};

enum {
  HDR_FIXED = 32,
  REC_HEAD = 8,
  ALLOC_LEN = 40,
  FREE_LEN = 16,
  LAUNCH_LEN = 40,
  COPY_LEN = 56,
  RANGE_LEN = 24,
};

// ---- little-endian helpers ----

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) {
  return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static int chunk_ok(uint64_t c) {
  return c >= (64u << 10) && c <= (1u << 30) && !(c & (c - 1));
}

// ---- header ----

size_t pol_trace_header_size(const pol_trace_header_t *h) {
  return HDR_FIXED + 8 * (size_t)h->device_count;
}

int pol_trace_write_header(void *vbuf, size_t cap, const pol_trace_header_t *h) {
  if (!vbuf || !h || !h->device_count || h->device_count > POL_TRACE_MAX_DEVICES ||
      !chunk_ok(h->chunk_size))
    return -EINVAL;
  size_t n = pol_trace_header_size(h);
  if (cap < n) return -ENOSPC;
  uint8_t *b = vbuf;
  memcpy(b, magic, 8);
  put16(b + 8, POL_TRACE_VERSION);
  put16(b + 10, (uint16_t)n);
  put32(b + 12, h->device_count);
  put64(b + 16, h->chunk_size);
  put64(b + 24, h->flags);
  for (uint32_t d = 0; d < h->device_count; d++)
    put64(b + HDR_FIXED + 8 * d, h->capacity[d]);
  return (int)n;
}

int pol_trace_open(pol_trace_reader_t *rd, const void *vbuf, size_t len) {
  if (!rd || (!vbuf && len)) return -EINVAL;
  const uint8_t *b = vbuf;
  if (len < HDR_FIXED || memcmp(b, magic, 8)) return -EBADMSG;
  if (get16(b + 8) != POL_TRACE_VERSION) return -EPROTONOSUPPORT;
  uint32_t ndev = get32(b + 12);
  uint16_t hlen = get16(b + 10);
  if (!ndev || ndev > POL_TRACE_MAX_DEVICES || hlen < HDR_FIXED + 8 * ndev) return -ERANGE;
  if (hlen > len) return -EBADMSG;
  memset(rd, 0, sizeof *rd);
  rd->hdr.version = POL_TRACE_VERSION;
  rd->hdr.device_count = ndev;
  rd->hdr.chunk_size = get64(b + 16);
  rd->hdr.flags = get64(b + 24);
  if (!chunk_ok(rd->hdr.chunk_size)) return -ERANGE;
  for (uint32_t d = 0; d < ndev; d++)
    rd->hdr.capacity[d] = get64(b + HDR_FIXED + 8 * d);
  rd->buf = b;
  rd->len = len;
  rd->pos = hlen;
  return 0;
}

// ---- records ----

static int range_ok(const pol_range_t *r) {
  return r->count && (uint64_t)r->first + r->count <= UINT32_MAX && r->mode <= POL_ACCESS_RW;
}

static size_t payload_len(const pol_trace_rec_t *r) {
  switch (r->type) {
  case POL_TREC_ALLOC:
    return ALLOC_LEN;
  case POL_TREC_FREE:
    return FREE_LEN;
  case POL_TREC_LAUNCH:
    return LAUNCH_LEN + (size_t)RANGE_LEN * r->nranges;
  case POL_TREC_COPY:
    return COPY_LEN;
  default:
    return 0;
  }
}

_Static_assert(POL_TRACE_DUR_AT == REC_HEAD + 24, "dur_ns: offset 24 of the LAUNCH payload");

void pol_trace_set_dur(void *rec, uint64_t dur_ns) {
  put64((uint8_t *)rec + POL_TRACE_DUR_AT, dur_ns);
}

size_t pol_trace_rec_size(const pol_trace_rec_t *r) {
  return REC_HEAD + payload_len(r);
}

static int copy_ok(uint64_t bytes, uint32_t dir) {
  return bytes && (dir == POL_COPY_HTOD || dir == POL_COPY_DTOH);
}

static int rec_valid(const pol_trace_rec_t *r) {
  if (r->type == POL_TREC_ALLOC) return r->size != 0;
  if (r->type == POL_TREC_COPY) return copy_ok(r->bytes, r->dir);
  if (r->type == POL_TREC_FREE) return 1;
  if (r->type != POL_TREC_LAUNCH || r->nranges > POL_TRACE_MAX_RANGES || (r->nranges && !r->ranges))
    return 0;
  for (uint32_t i = 0; i < r->nranges; i++)
    if (!range_ok(&r->ranges[i])) return 0;
  return 1;
}

static void encode_launch(uint8_t *b, const pol_trace_rec_t *r) {
  put64(b, r->time);
  put64(b + 8, r->kernel);
  put64(b + 16, r->stream);
  put64(b + 24, r->dur_ns);
  put32(b + 32, r->device);
  put32(b + 36, r->nranges);
  for (uint32_t i = 0; i < r->nranges; i++) {
    uint8_t *g = b + LAUNCH_LEN + RANGE_LEN * i;
    put64(g, r->ranges[i].alloc_id);
    put32(g + 8, r->ranges[i].first);
    put32(g + 12, r->ranges[i].count);
    put32(g + 16, r->ranges[i].mode);
    put32(g + 20, 0);
  }
}

int pol_trace_encode(void *vbuf, size_t cap, const pol_trace_rec_t *r) {
  if (!vbuf || !r || !rec_valid(r)) return -EINVAL;
  size_t n = pol_trace_rec_size(r);
  if (cap < n) return -ENOSPC;
  uint8_t *b = vbuf, *d = b + REC_HEAD;
  memset(b, 0, n);
  b[0] = (uint8_t)r->type;
  put32(b + 4, (uint32_t)(n - REC_HEAD));
  if (r->type == POL_TREC_LAUNCH) {
    encode_launch(d, r);
    return (int)n;
  }
  if (r->type == POL_TREC_COPY) {
    put64(d, r->time);
    put64(d + 8, r->stream);
    put64(d + 16, r->alloc_id);
    put64(d + 24, r->offset);
    put64(d + 32, r->bytes);
    put32(d + 40, r->device);
    put32(d + 44, r->dir);
    put32(d + 48, r->flags);
    return (int)n;
  }
  put64(d, r->time);
  put64(d + 8, r->alloc_id);
  if (r->type == POL_TREC_ALLOC) {
    put64(d + 16, r->addr);
    put64(d + 24, r->size);
    put32(d + 32, r->device);
    put32(d + 36, r->flags);
  }
  return (int)n;
}

static int decode_launch(const pol_trace_reader_t *rd, const uint8_t *d, uint32_t len,
                         pol_trace_rec_t *rec, pol_range_t *ranges, uint32_t cap) {
  if (len < LAUNCH_LEN) return -ERANGE;
  uint32_t n = get32(d + 36);
  if (n > POL_TRACE_MAX_RANGES || len != LAUNCH_LEN + (uint64_t)RANGE_LEN * n) return -ERANGE;
  if (n > cap || (n && !ranges)) return -E2BIG;
  rec->time = get64(d);
  rec->kernel = get64(d + 8);
  rec->stream = get64(d + 16);
  rec->dur_ns = get64(d + 24);
  rec->device = get32(d + 32);
  rec->nranges = n;
  rec->ranges = ranges;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *g = d + LAUNCH_LEN + RANGE_LEN * i;
    ranges[i] = (pol_range_t){
        .alloc_id = get64(g), .first = get32(g + 8), .count = get32(g + 12), .mode = get32(g + 16)};
    if (!range_ok(&ranges[i])) return -ERANGE;
  }
  return rec->device < rd->hdr.device_count ? 1 : -ERANGE;
}

static int decode_alloc_free(const pol_trace_reader_t *rd, const uint8_t *d, uint32_t len,
                             uint32_t type, pol_trace_rec_t *rec) {
  if (len != (type == POL_TREC_ALLOC ? ALLOC_LEN : FREE_LEN)) return -ERANGE;
  rec->time = get64(d);
  rec->alloc_id = get64(d + 8);
  if (type == POL_TREC_FREE) return 1;
  rec->addr = get64(d + 16);
  rec->size = get64(d + 24);
  rec->device = get32(d + 32);
  rec->flags = get32(d + 36);
  return rec->size && rec->device < rd->hdr.device_count ? 1 : -ERANGE;
}

static int decode_copy(const pol_trace_reader_t *rd, const uint8_t *d, uint32_t len,
                       pol_trace_rec_t *rec) {
  if (len != COPY_LEN) return -ERANGE;
  rec->time = get64(d);
  rec->stream = get64(d + 8);
  rec->alloc_id = get64(d + 16);
  rec->offset = get64(d + 24);
  rec->bytes = get64(d + 32);
  rec->device = get32(d + 40);
  rec->dir = get32(d + 44);
  rec->flags = get32(d + 48);
  return copy_ok(rec->bytes, rec->dir) && rec->device < rd->hdr.device_count ? 1 : -ERANGE;
}

int pol_trace_next(pol_trace_reader_t *rd, pol_trace_rec_t *rec, pol_range_t *ranges,
                   uint32_t cap) {
  if (!rd || !rec || !rd->buf) return -EINVAL;
  for (;;) {
    if (rd->pos == rd->len) return 0;
    if (rd->len - rd->pos < REC_HEAD) return -EBADMSG;
    const uint8_t *h = rd->buf + rd->pos;
    uint32_t type = h[0], len = get32(h + 4);
    if (len > POL_TRACE_MAX_RECORD) return -ERANGE;
    if (rd->len - rd->pos - REC_HEAD < len) return -EBADMSG;
    memset(rec, 0, sizeof *rec);
    rec->type = type;
    int r = 1;
    if (type == POL_TREC_LAUNCH)
      r = decode_launch(rd, h + REC_HEAD, len, rec, ranges, cap);
    else if (type == POL_TREC_ALLOC || type == POL_TREC_FREE)
      r = decode_alloc_free(rd, h + REC_HEAD, len, type, rec);
    else if (type == POL_TREC_COPY)
      r = decode_copy(rd, h + REC_HEAD, len, rec);
    else
      r = 2; /* unknown: skip */
    if (r < 0) return r;
    rd->pos += REC_HEAD + len;
    if (r == 1) return 1;
  }
}
