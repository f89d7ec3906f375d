/* fuzz_trace.c: libFuzzer target for the launch trace reader (policy/trace.c).
 * Every record decoded from arbitrary bytes re-encodes to its stated size and decodes back the
 * same. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

static pol_range_t ranges[POL_TRACE_MAX_RANGES], again_ranges[POL_TRACE_MAX_RANGES];

static int same_rec(const pol_trace_rec_t *a, const pol_trace_rec_t *b) {
  if (a->type != b->type || a->time != b->time) return 0;
  if (a->type == POL_TREC_LAUNCH)
    return a->device == b->device && a->kernel == b->kernel && a->stream == b->stream &&
           a->dur_ns == b->dur_ns && a->nranges == b->nranges &&
           memcmp(a->ranges, b->ranges, sizeof *a->ranges * a->nranges) == 0;
  if (a->type == POL_TREC_COPY)
    return a->device == b->device && a->stream == b->stream && a->alloc_id == b->alloc_id &&
           a->offset == b->offset && a->bytes == b->bytes && a->dir == b->dir &&
           a->flags == b->flags;
  return a->alloc_id == b->alloc_id &&
         (a->type == POL_TREC_FREE || (a->addr == b->addr && a->size == b->size &&
                                       a->flags == b->flags && a->device == b->device));
}

/* A record the reader accepted, written again, reads back identically. */
static void reencode(const pol_trace_header_t *h, const pol_trace_rec_t *r) {
  static uint8_t buf[POL_TRACE_MAX_RECORD + 8192];
  int hl = pol_trace_write_header(buf, sizeof buf, h);
  if (hl < 0) __builtin_trap(); /* the reader validated this header */
  int n = pol_trace_encode(buf + hl, sizeof buf - (size_t)hl, r);
  if (n < 0) return; /* the writer may be stricter than the reader */
  if ((size_t)n != pol_trace_rec_size(r)) __builtin_trap();
  pol_trace_reader_t rd;
  pol_trace_rec_t back;
  if (pol_trace_open(&rd, buf, (size_t)hl + (size_t)n) != 0) __builtin_trap();
  if (pol_trace_next(&rd, &back, again_ranges, POL_TRACE_MAX_RANGES) != 1) __builtin_trap();
  if (!same_rec(r, &back)) __builtin_trap();
  if (pol_trace_next(&rd, &back, again_ranges, POL_TRACE_MAX_RANGES) != 0) __builtin_trap();
}

static int on_launch_after_skips(const pol_trace_reader_t *rd, size_t pos) {
  while (pos < rd->pos) {
    uint8_t t = rd->buf[pos];
    if (t == POL_TREC_ALLOC || t == POL_TREC_FREE || t == POL_TREC_LAUNCH || t == POL_TREC_COPY)
      return 0;
    uint32_t len = (uint32_t)rd->buf[pos + 4] | (uint32_t)rd->buf[pos + 5] << 8 |
                   (uint32_t)rd->buf[pos + 6] << 16 | (uint32_t)rd->buf[pos + 7] << 24;
    pos += 8 + (size_t)len;
  }
  return pos == rd->pos && rd->pos + 8 <= rd->len && rd->buf[rd->pos] == POL_TREC_LAUNCH;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *buf = malloc(size ? size : 1); /* exact size: ASan sees overreads */
  if (!buf) return 0;
  memcpy(buf, data, size);
  pol_trace_reader_t rd;
  if (pol_trace_open(&rd, buf, size) == 0) {
    if (rd.hdr.device_count < 1 || rd.hdr.device_count > POL_TRACE_MAX_DEVICES) __builtin_trap();
    pol_trace_rec_t rec;
    uint32_t cap = size & 1 ? 4 : POL_TRACE_MAX_RANGES; /* small caps exercise -E2BIG */
    for (int i = 0; i < 100000; i++) {
      size_t pos = rd.pos;
      int rc = pol_trace_next(&rd, &rec, ranges, cap);
      if (rc == 1) {
        if (rd.pos <= pos || rd.pos > size) __builtin_trap(); /* progress, in bounds */
        if (rec.nranges > cap && rec.type == POL_TREC_LAUNCH) __builtin_trap();
        reencode(&rd.hdr, &rec);
        continue;
      }
      if (rc == -E2BIG) {
        /* stays on the LAUNCH that did not fit: only records of unknown
         * types (skipped) lie between where it started and there */
        if (!on_launch_after_skips(&rd, pos)) __builtin_trap();
        cap = POL_TRACE_MAX_RANGES;
        continue;
      }
      break;
    }
  }
  free(buf);
  return 0;
}
