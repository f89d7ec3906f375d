/* trace_check [--copies] TRACE EXPECTED: decodes a VX_TRACE file and checks
 * that its launches reach exactly the chunk sets listed in EXPECTED (lines
 * "L order:first+count ...", allocations named by their order of
 * appearance), in order, each with a duration measured on the device
 * (POL_TRACE_MEASURED, dur_ns > 0); with --copies its COPY records too, in
 * the same order ("C order:offset+bytes dir flags").  Exit 0 = equal, 1 = different,
 * 2 = bad input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define MAXA 100000

static uint64_t ids[MAXA];
static int nids;

static void *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 20, n = 0, got;
  char *b = malloc(cap);
  while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) b = realloc(b, cap *= 2);
  }
  fclose(f);
  *len = n;
  return b;
}

static int order_of(uint64_t id) {
  for (int i = nids - 1; i >= 0; i--)
    if (ids[i] == id) return i;
  return -1;
}

static int cmp_int(const void *a, const void *b) {
  return *(const int *)a - *(const int *)b;
}

/* "L o:f+c ..." of one launch record, sorted by order. */
static void launch_line(const pol_trace_rec_t *r, char *out, size_t cap) {
  int key[POL_TRACE_MAX_RANGES];
  size_t n = 0;
  for (uint32_t i = 0; i < r->nranges; i++) key[i] = order_of(r->ranges[i].alloc_id) * 4096 + (int)i;
  qsort(key, r->nranges, sizeof key[0], cmp_int);
  n += (size_t)snprintf(out, cap, "L");
  for (uint32_t k = 0; k < r->nranges && n < cap; k++) {
    const pol_range_t *g = &r->ranges[key[k] % 4096];
    n += (size_t)snprintf(out + n, cap - n, " %d:%u+%u", order_of(g->alloc_id), g->first, g->count);
  }
}

static int check(pol_trace_reader_t *rd, FILE *exp, int copies) {
  static pol_range_t ranges[POL_TRACE_MAX_RANGES];
  pol_trace_rec_t r;
  char got[8192], want[8192];
  int rc, launches = 0, frees = 0, ncopies = 0;
  while ((rc = pol_trace_next(rd, &r, ranges, POL_TRACE_MAX_RANGES)) == 1) {
    if (r.type == POL_TREC_ALLOC && nids < MAXA) ids[nids++] = r.alloc_id;
    if (r.type == POL_TREC_FREE) frees += order_of(r.alloc_id) >= 0;
    if (r.type == POL_TREC_COPY && copies) {
      snprintf(got, sizeof got, "C %d:%llu+%llu %u %u", order_of(r.alloc_id),
               (unsigned long long)r.offset, (unsigned long long)r.bytes, r.dir, r.flags);
      ncopies++;
    } else if (r.type == POL_TREC_LAUNCH) {
      if (!r.dur_ns) { /* timed on the device (trace_rec_launched) */
        fprintf(stderr, "launch %d: no measured duration (dur_ns 0)\n", launches);
        return 1;
      }
      launch_line(&r, got, sizeof got);
    } else {
      continue;
    }
    if (!fgets(want, sizeof want, exp)) {
      fprintf(stderr, "launch %d: not expected: %s\n", launches, got);
      return 1;
    }
    want[strcspn(want, "\n")] = 0;
    if (strcmp(got, want)) {
      fprintf(stderr, "launch %d: trace has '%s', program passed '%s'\n", launches, got, want);
      return 1;
    }
    launches++;
  }
  if (rc != 0) {
    fprintf(stderr, "trace decode error %d after %d launches\n", rc, launches);
    return 1;
  }
  if (fgets(want, sizeof want, exp)) {
    fprintf(stderr, "trace ends after %d launches; expected more: %s", launches, want);
    return 1;
  }
  printf("ok: %d launches, %d copies, %d allocations, %d frees match\n", launches, ncopies, nids,
         frees);
  return launches > 0 && frees > 0 && (!copies || ncopies > 0) ? 0 : 1;
}

int main(int argc, char **argv) {
  int copies = argc > 1 && !strcmp(argv[1], "--copies");
  argv += copies, argc -= copies;
  if (argc != 3) {
    fprintf(stderr, "usage: trace_check [--copies] TRACE EXPECTED\n");
    return 2;
  }
  size_t len = 0;
  void *buf = slurp(argv[1], &len);
  FILE *exp = fopen(argv[2], "r");
  pol_trace_reader_t rd;
  int rc = buf && exp ? pol_trace_open(&rd, buf, len) : -ENOENT;
  if (rc) {
    fprintf(stderr, "cannot open the trace or the list: %d\n", rc);
    return 2;
  }
  if (rd.hdr.chunk_size != 2u << 20 || rd.hdr.capacity[0] == 0 ||
      !(rd.hdr.flags & POL_TRACE_MEASURED)) {
    fprintf(stderr, "header: chunk %llu capacity %llu flags %llu\n",
            (unsigned long long)rd.hdr.chunk_size, (unsigned long long)rd.hdr.capacity[0],
            (unsigned long long)rd.hdr.flags);
    return 1;
  }
  rc = check(&rd, exp, copies);
  fclose(exp);
  free(buf);
  return rc;
}
