/* test_trace.c: the VXTRACE encoder/decoder: round trips, and rejection of
 * truncated, mis-versioned, out-of-range and randomly corrupted input. */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

static uint8_t buf[1 << 16];
static pol_range_t ranges[8];

/* A small trace: header, ALLOC, LAUNCH with 3 ranges, FREE.  Returns its length. */
static size_t make_trace(size_t *rec_end) {
  pol_trace_header_t h = {
      .device_count = 2, .chunk_size = 2u << 20, .flags = POL_TRACE_MEASURED};
  h.capacity[0] = 8ull << 30;
  h.capacity[1] = 4ull << 30;
  int n = pol_trace_write_header(buf, sizeof buf, &h);
  ck_assert_int_eq(n, 48);
  size_t pos = (size_t)n;
  pol_range_t r[3] = {{.alloc_id = 7, .first = 0, .count = 4, .mode = POL_ACCESS_READ},
                      {.alloc_id = 7, .first = 9, .count = 1, .mode = POL_ACCESS_RW},
                      {.alloc_id = 8, .first = 2, .count = 3, .mode = POL_ACCESS_UNKNOWN}};
  pol_trace_rec_t recs[3] = {
      {.type = POL_TREC_ALLOC,
       .time = 10,
       .alloc_id = 7,
       .addr = 0x7f0000200000ull,
       .size = 20u << 20,
       .device = 1,
       .flags = 3},
      {.type = POL_TREC_LAUNCH,
       .time = 20,
       .kernel = 0xabcdef,
       .stream = 0x55,
       .dur_ns = 999,
       .device = 0,
       .nranges = 3,
       .ranges = r},
      {.type = POL_TREC_FREE, .time = 30, .alloc_id = 7},
  };
  for (int i = 0; i < 3; i++) {
    n = pol_trace_encode(buf + pos, sizeof buf - pos, &recs[i]);
    ck_assert_int_eq(n, (int)pol_trace_rec_size(&recs[i]));
    pos += (size_t)n;
    if (rec_end) rec_end[i] = pos;
  }
  return pos;
}

START_TEST(round_trip) {
  size_t len = make_trace(NULL);
  pol_trace_reader_t rd;
  pol_trace_rec_t rec;
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0);
  ck_assert_uint_eq(rd.hdr.device_count, 2);
  ck_assert_uint_eq(rd.hdr.chunk_size, 2u << 20);
  ck_assert_uint_eq(rd.hdr.capacity[1], 4ull << 30);
  ck_assert_uint_eq(rd.hdr.flags, POL_TRACE_MEASURED);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_uint_eq(rec.type, POL_TREC_ALLOC);
  ck_assert_uint_eq(rec.addr, 0x7f0000200000ull);
  ck_assert_uint_eq(rec.size, 20u << 20);
  ck_assert_uint_eq(rec.device, 1);
  ck_assert_uint_eq(rec.flags, 3);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_uint_eq(rec.type, POL_TREC_LAUNCH);
  ck_assert_uint_eq(rec.kernel, 0xabcdef);
  ck_assert_uint_eq(rec.stream, 0x55);
  ck_assert_uint_eq(rec.dur_ns, 999);
  ck_assert_uint_eq(rec.nranges, 3);
  ck_assert_uint_eq(ranges[1].first, 9);
  ck_assert_uint_eq(ranges[2].count, 3);
  ck_assert_uint_eq(ranges[2].alloc_id, 8);
  ck_assert_uint_eq(ranges[1].mode, POL_ACCESS_RW);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_uint_eq(rec.type, POL_TREC_FREE);
  ck_assert_uint_eq(rec.time, 30);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 0);
}
END_TEST

/* A duration measured after its LAUNCH was encoded is patched in place
 * (VX_TRACE's event timing), and decodes as if encoded with it. */
START_TEST(duration_patched_in_place) {
  size_t end[3];
  size_t len = make_trace(end);
  pol_trace_set_dur(buf + end[0], 123456789012ull);
  pol_trace_reader_t rd;
  pol_trace_rec_t rec;
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_uint_eq(rec.type, POL_TREC_LAUNCH);
  ck_assert_uint_eq(rec.dur_ns, 123456789012ull);
  ck_assert_uint_eq(rec.kernel, 0xabcdef);
  ck_assert_uint_eq(rec.device, 0);
  ck_assert_uint_eq(rec.nranges, 3);
}
END_TEST

START_TEST(truncated_anywhere) {
  size_t ends[3];
  size_t len = make_trace(ends);
  for (size_t cut = 0; cut < len; cut++) {
    pol_trace_reader_t rd;
    pol_trace_rec_t rec;
    uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees any over-read */
    memcpy(copy, buf, cut);
    int r = pol_trace_open(&rd, copy, cut);
    if (cut < 48) {
      ck_assert_int_eq(r, -EBADMSG);
      free(copy);
      continue;
    }
    ck_assert_int_eq(r, 0);
    int got = 0;
    while ((r = pol_trace_next(&rd, &rec, ranges, 8)) == 1)
      got++;
    int boundary = cut == 48 || cut == ends[0] || cut == ends[1];
    ck_assert_int_eq(r, boundary ? 0 : -EBADMSG);
    ck_assert_int_eq(got, cut >= ends[1] ? 2 : cut >= ends[0] ? 1 : 0);
    free(copy);
  }
}
END_TEST

START_TEST(bad_headers) {
  size_t len = make_trace(NULL);
  pol_trace_reader_t rd;
  buf[0] = 'W';
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), -EBADMSG);
  buf[0] = 'V';
  buf[8] = 2; /* version 2 */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), -EPROTONOSUPPORT);
  buf[8] = 1;
  buf[12] = 0; /* no devices */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), -ERANGE);
  buf[12] = 200; /* too many devices */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), -ERANGE);
  buf[12] = 2;
  buf[18] = 0x30; /* chunk size 0x302000...: not a power of two */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), -ERANGE);
  buf[18] = 0x20;
  buf[10] = 0xff; /* header length past the buffer */
  ck_assert_int_eq(pol_trace_open(&rd, buf, 100), -EBADMSG);
  buf[10] = 48;
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0);
  ck_assert_int_eq(pol_trace_open(NULL, buf, len), -EINVAL);
}
END_TEST

START_TEST(bad_records) {
  size_t ends[3];
  size_t len = make_trace(ends);
  pol_trace_reader_t rd;
  pol_trace_rec_t rec;
  uint8_t *launch = buf + ends[0]; /* the LAUNCH record */

  launch[8 + 36] = 200; /* nranges disagrees with the record length */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), -ERANGE);
  launch[8 + 36] = 3;

  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0); /* caller's array too small */
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 2), -E2BIG);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 3), 1);

  launch[8 + 40 + 12] = 0; /* first range: count 0 */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), -ERANGE);
  launch[8 + 40 + 12] = 4;

  launch[8 + 40 + 16] = 9; /* access mode 9 */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), -ERANGE);
  launch[8 + 40 + 16] = POL_ACCESS_READ;

  launch[8 + 32] = 5; /* device 5 of 2 */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), -ERANGE);
  launch[8 + 32] = 0;

  launch[7] = 0x40; /* record length 1 GiB: over the limit */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), -ERANGE);
  launch[7] = 0;

  memset(buf + 48 + 8 + 24, 0, 8); /* ALLOC of size 0 */
  ck_assert_int_eq(pol_trace_open(&rd, buf, len), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), -ERANGE);
}
END_TEST

START_TEST(unknown_records_skipped) {
  pol_trace_header_t h = {.device_count = 1, .chunk_size = 1u << 20};
  size_t pos = (size_t)pol_trace_write_header(buf, sizeof buf, &h);
  memset(buf + pos, 0, 8 + 5); /* type 0x77, 5 bytes of payload */
  buf[pos] = 0x77;
  buf[pos + 4] = 5;
  pos += 13;
  pol_trace_rec_t f = {.type = POL_TREC_FREE, .time = 1, .alloc_id = 42};
  pos += (size_t)pol_trace_encode(buf + pos, sizeof buf - pos, &f);
  pol_trace_reader_t rd;
  pol_trace_rec_t rec;
  ck_assert_int_eq(pol_trace_open(&rd, buf, pos), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_uint_eq(rec.alloc_id, 42);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 0);
}
END_TEST

START_TEST(encoder_rejects) {
  pol_trace_header_t h = {.device_count = 0, .chunk_size = 2u << 20};
  ck_assert_int_eq(pol_trace_write_header(buf, sizeof buf, &h), -EINVAL);
  h.device_count = 1;
  ck_assert_int_eq(pol_trace_write_header(buf, 39, &h), -ENOSPC);
  h.chunk_size = 12345;
  ck_assert_int_eq(pol_trace_write_header(buf, sizeof buf, &h), -EINVAL);
  pol_trace_rec_t a = {.type = POL_TREC_ALLOC, .size = 0};
  ck_assert_int_eq(pol_trace_encode(buf, sizeof buf, &a), -EINVAL);
  a.size = 1;
  ck_assert_int_eq(pol_trace_encode(buf, 10, &a), -ENOSPC);
  pol_range_t r = {.alloc_id = 1, .first = UINT32_MAX, .count = 2};
  pol_trace_rec_t l = {.type = POL_TREC_LAUNCH, .nranges = 1, .ranges = &r};
  ck_assert_int_eq(pol_trace_encode(buf, sizeof buf, &l), -EINVAL);
  l.nranges = POL_TRACE_MAX_RANGES + 1;
  ck_assert_int_eq(pol_trace_encode(buf, sizeof buf, &l), -EINVAL);
  pol_trace_rec_t bad = {.type = 9};
  ck_assert_int_eq(pol_trace_encode(buf, sizeof buf, &bad), -EINVAL);
}
END_TEST

/* COPY (a program's own copy): every field back, and what the encoder and
 * the reader refuse (no bytes, no direction, a device out of range). */
START_TEST(copy_round_trip_and_rejects) {
  pol_trace_header_t h = {.device_count = 2, .chunk_size = 2u << 20};
  size_t pos = (size_t)pol_trace_write_header(buf, sizeof buf, &h);
  pol_trace_rec_t c = {.type = POL_TREC_COPY,
                       .time = 77,
                       .stream = 0x99,
                       .alloc_id = 5,
                       .offset = 3u << 20,
                       .bytes = 12345,
                       .device = 1,
                       .dir = POL_COPY_DTOH,
                       .flags = POL_COPY_SYNC};
  ck_assert_uint_eq(pol_trace_rec_size(&c), 8 + 56);
  int n = pol_trace_encode(buf + pos, sizeof buf - pos, &c);
  ck_assert_int_eq(n, 64);
  size_t rec0 = pos;
  pos += (size_t)n;
  pol_trace_reader_t rd;
  pol_trace_rec_t rec;
  ck_assert_int_eq(pol_trace_open(&rd, buf, pos), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 1);
  ck_assert_uint_eq(rec.type, POL_TREC_COPY);
  ck_assert_uint_eq(rec.time, 77);
  ck_assert_uint_eq(rec.stream, 0x99);
  ck_assert_uint_eq(rec.alloc_id, 5);
  ck_assert_uint_eq(rec.offset, 3u << 20);
  ck_assert_uint_eq(rec.bytes, 12345);
  ck_assert_uint_eq(rec.device, 1);
  ck_assert_uint_eq(rec.dir, POL_COPY_DTOH);
  ck_assert_uint_eq(rec.flags, POL_COPY_SYNC);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), 0);
  pol_trace_rec_t bad = c;
  bad.bytes = 0;
  ck_assert_int_eq(pol_trace_encode(buf + pos, sizeof buf - pos, &bad), -EINVAL);
  bad = c;
  bad.dir = 3;
  ck_assert_int_eq(pol_trace_encode(buf + pos, sizeof buf - pos, &bad), -EINVAL);
  buf[rec0 + 8 + 40] = 2; /* device 2 of 2 */
  ck_assert_int_eq(pol_trace_open(&rd, buf, pos), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), -ERANGE);
  buf[rec0 + 8 + 40] = 1;
  buf[rec0 + 8 + 44] = 0; /* no direction */
  ck_assert_int_eq(pol_trace_open(&rd, buf, pos), 0);
  ck_assert_int_eq(pol_trace_next(&rd, &rec, ranges, 8), -ERANGE);
}
END_TEST

START_TEST(random_corruption_never_crashes) {
  size_t len = make_trace(NULL);
  static uint8_t orig[1 << 16];
  memcpy(orig, buf, len);
  srand(11);
  int ok = 0, bad = 0;
  for (int i = 0; i < 20000; i++) {
    memcpy(buf, orig, len);
    for (int k = 0; k < 1 + rand() % 4; k++)
      buf[rand() % len] ^= (uint8_t)(1 + rand() % 255);
    size_t n = len - (size_t)(rand() % 8);
    uint8_t *copy = malloc(n);
    memcpy(copy, buf, n);
    pol_trace_reader_t rd;
    pol_trace_rec_t rec;
    int r = pol_trace_open(&rd, copy, n);
    while (r == 0 && (r = pol_trace_next(&rd, &rec, ranges, 8)) == 1) {
      ck_assert_uint_le(rd.pos, n);
      ck_assert_uint_le(rec.nranges, 8);
      r = 0;
    }
    ck_assert(r == 0 || r == -EBADMSG || r == -ERANGE || r == -EPROTONOSUPPORT || r == -E2BIG);
    if (r == 0)
      ok++;
    else
      bad++;
    free(copy);
  }
  ck_assert_int_gt(bad, 1000);
  ck_assert_int_gt(ok, 10);
}
END_TEST

int main(void) {
  Suite *s = suite_create("policy_trace");
  TCase *t = tcase_create("trace");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, round_trip);
  tcase_add_test(t, duration_patched_in_place);
  tcase_add_test(t, truncated_anywhere);
  tcase_add_test(t, bad_headers);
  tcase_add_test(t, bad_records);
  tcase_add_test(t, unknown_records_skipped);
  tcase_add_test(t, encoder_rejects);
  tcase_add_test(t, copy_round_trip_and_rejects);
  tcase_add_test(t, random_corruption_never_crashes);
  suite_add_tcase(s, t);
  return vx_check_run(s, 1);
}
