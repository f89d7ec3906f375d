/* trace.h: the vx launch trace format (VXTRACE v1), a pure encoder/decoder
 * over memory buffers; file I/O is the caller's.  Format: policy/TRACE.md. */
#ifndef VX_POL_TRACE_H
#define VX_POL_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define POL_TRACE_VERSION 1
#define POL_TRACE_MAX_DEVICES 64
#define POL_TRACE_MAX_RANGES 4096 /* ranges of one LAUNCH record */
#define POL_TRACE_MAX_RECORD (1u << 20)

/* Header flags: dur_ns was measured on the device (VX_TRACE: a timing
 * event pair around each launch), so it includes the time the kernel
 * stalled on faults and spent reaching host memory over the link. */
#define POL_TRACE_MEASURED 1u

enum { POL_TREC_ALLOC = 1, POL_TREC_FREE = 2, POL_TREC_LAUNCH = 3, POL_TREC_COPY = 4 };

/* COPY: which way the bytes cross the link, and how the host waited. */
enum { POL_COPY_HTOD = 1, POL_COPY_DTOH = 2 };
#define POL_COPY_SYNC 1u /* flags: the host waited for the copy (a synchronous form) */

typedef struct pol_trace_header {
  uint32_t version;      /* POL_TRACE_VERSION (set by the reader; the writer writes its own) */
  uint32_t device_count; /* 1..POL_TRACE_MAX_DEVICES */
  uint64_t chunk_size;   /* power of two, 64 KiB..1 GiB */
  uint64_t flags;        /* POL_TRACE_MEASURED */
  uint64_t capacity[POL_TRACE_MAX_DEVICES]; /* device bytes available to the program */
} pol_trace_header_t;

typedef struct pol_trace_rec {
  uint32_t type;   /* POL_TREC_* */
  uint32_t device; /* < device_count */
  uint64_t time;   /* host nanoseconds, monotonic */
  /* ALLOC, FREE, COPY */
  uint64_t alloc_id;
  /* ALLOC */
  uint64_t addr, size;
  uint32_t flags; /* ALLOC: 1 = native; COPY: POL_COPY_SYNC */
  /* LAUNCH, COPY */
  uint64_t kernel, stream;
  /* COPY: bytes [offset, offset + bytes) of allocation alloc_id, direction dir */
  uint64_t offset, bytes;
  uint32_t dir;
  uint64_t dur_ns; /* measured or modelled kernel time, 0 = unknown */
  uint32_t nranges;
  pol_range_t *ranges;
} pol_trace_rec_t;

/* Bytes the header takes for h->device_count devices. */
size_t pol_trace_header_size(const pol_trace_header_t *h);
/* Writes the header.  Returns the bytes written, -EINVAL for a bad header
 * (device count or chunk size out of range), -ENOSPC if cap is too small. */
int pol_trace_write_header(void *buf, size_t cap, const pol_trace_header_t *h);

/* Bytes record r takes once encoded. */
size_t pol_trace_rec_size(const pol_trace_rec_t *r);
/* Appends one record.  Returns the bytes written, -EINVAL for an unknown type,
 * size 0 (ALLOC) or bytes 0 or an unknown dir (COPY), nranges > POL_TRACE_MAX_RANGES, a range with
 * count 0, first+count past 2^32 or mode > 3; -ENOSPC if cap is too small (nothing written). */
int pol_trace_encode(void *buf, size_t cap, const pol_trace_rec_t *r);

/* Overwrites the dur_ns field of the LAUNCH record that pol_trace_encode
 * wrote at rec (a duration measured after the record was written: VX_TRACE
 * times kernels with events).  POL_TRACE_DUR_AT: the field's offset from
 * the record's start, for a record already written out to a file. */
#define POL_TRACE_DUR_AT 32
void pol_trace_set_dur(void *rec, uint64_t dur_ns);

typedef struct pol_trace_reader {
  const uint8_t *buf;
  size_t len, pos;
  pol_trace_header_t hdr;
} pol_trace_reader_t;

/* Validates the header of buf[0..len) and positions the reader on the first
 * record.  buf must outlive the reader.  Returns 0; -EINVAL for NULL args;
 * -EBADMSG for a short buffer or bad magic; -EPROTONOSUPPORT for another
 * version; -ERANGE for a header field out of range. */
int pol_trace_open(pol_trace_reader_t *rd, const void *buf, size_t len);

/* Decodes the next record into *rec; a LAUNCH's ranges go to ranges[0..cap).
 * Records of unknown type are skipped (newer writers may add some).
 * Returns 1 (a record), 0 (clean end), -EBADMSG (truncated record),
 * -ERANGE (a length or field out of range: the reader stops there),
 * -E2BIG (more ranges than cap; the reader stays on this record). */
int pol_trace_next(pol_trace_reader_t *rd, pol_trace_rec_t *rec, pol_range_t *ranges, uint32_t cap);

#ifdef __cplusplus
}
#endif
#endif
