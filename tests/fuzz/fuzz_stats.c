/* fuzz_stats.c: libFuzzer target for the live stats segment reader (obs/stats_shm.c).
 * A corrupt or foreign segment must be refused by vx_stats_validate, never read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stats_shm.h"

/* What `vx stat`/`vx top` do with a segment that validated (as map_checked
 * builds the view): read every limit and counter of every device. */
static void read_view(void *map, size_t len, const vx_stats_hdr_t *h) {
  vx_stats_view_t v = {.hdr = *h, .map = map, .map_len = len};
  v.limits = (const uint64_t *)((const char *)map + h->header_size);
  v.counters = v.limits + (size_t)h->ndev * VX_LIMIT_COUNT;
  uint64_t sum = vx_stats_heartbeat(&v);
  for (unsigned d = 0; d <= h->ndev; d++) { /* one past the end: must return 0 */
    sum += (uint64_t)vx_stats_dev_active(&v, d);
    for (unsigned w = 0; w <= VX_LIMIT_COUNT; w++)
      sum += vx_stats_limit(&v, d, w);
    for (unsigned i = 0; i <= h->ncounters; i++)
      sum += vx_stats_get(&v, d, i);
  }
  if (vx_stats_get(&v, h->ndev, 0) || vx_stats_limit(&v, 0, VX_LIMIT_COUNT)) __builtin_trap();
  __asm__ volatile("" : : "r"(sum));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size copy, so ASan sees any read past the segment's end */
  void *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  vx_stats_hdr_t h;
  char err[128] = "";
  int rc = vx_stats_validate(buf, size, &h, err, sizeof err);
  if (rc == 0) {
    if (h.total_size > size || !memchr(h.cmdline, 0, sizeof h.cmdline)) __builtin_trap();
    read_view(buf, size, &h);
  } else if (err[0] == '\0') {
    __builtin_trap(); /* a refusal says why */
  }
  if (size >= sizeof(struct stat)) {
    struct stat st;
    memcpy(&st, data, sizeof st);
    rc = vx_stats_check_owner(&st, st.st_uid);
    if (rc == 0 && (st.st_mode & 07777) != 0600) __builtin_trap();
  }
  free(buf);
  return 0;
}
