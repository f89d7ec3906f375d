/* cli_seg.c: test helper publishing a stats segment with known values through
 * the stats_shm API, so `vx stat`/`vx top` can be checked against them. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "stats_shm.h"

#define GiB (1ull << 30)

/* The values the tests expect: counter i of device d is (d+1)*1000+i, except
 * the tier bytes, which are set to fill the bars visibly. */
static void fill(uint64_t *c, int ndev, uint64_t *limits) {
  for (int d = 0; d < ndev; d++) {
    uint64_t *row = c + (size_t)d * VX_STATS_NCOUNTERS;
    for (unsigned i = 0; i < VX_STATS_NCOUNTERS; i++)
      row[i] = (uint64_t)(d + 1) * 1000 + i;
    row[VX_STATS_native_bytes] = 6 * GiB / (uint64_t)(d + 1);
    row[VX_STATS_host_tier_bytes] = 4 * GiB;
    row[VX_STATS_nvme_bytes] = 16 * GiB;
    /* CLI_SEG_NO_DEMAND=1: as under a driver that does not report its own
     * migrations (NVIDIA's) */
    if (getenv("CLI_SEG_NO_DEMAND")) row[VX_STATS_demand_measured] = 0;
    limits[d * VX_LIMIT_COUNT + VX_LIMIT_DEVICE] = 8 * GiB;
    limits[d * VX_LIMIT_COUNT + VX_LIMIT_HOST] = 16 * GiB;
    limits[d * VX_LIMIT_COUNT + VX_LIMIT_NVME] = 64 * GiB;
  }
}

static volatile sig_atomic_t done;
static void on_term(int sig) {
  (void)sig;
  done = 1;
}

/* usage: cli_seg NDEV [tick]: prints "ready PID", then (with tick) adds
 * 100 MiB to bytes_up and 50 MiB to demand_up_bytes every 10 ms until stdin
 * reaches EOF or SIGTERM. */
int main(int argc, char **argv) {
  int ndev = argc > 1 ? atoi(argv[1]) : 1, tick = argc > 2 && !strcmp(argv[2], "tick");
  uint64_t limits[VX_STATS_MAX_DEV * VX_LIMIT_COUNT] = {0};
  char err[256];
  uint64_t *c = vx_stats_shm_create(ndev, limits, err, sizeof err);
  if (!c) {
    fprintf(stderr, "cli_seg: %s\n", err);
    return 1;
  }
  fill(c, ndev, limits);
  vx_stats_shm_set_limits(limits);
  signal(SIGTERM, on_term);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  while (!done) {
    struct timeval tv = {0, 10000};
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(0, &fds);
    char b[64];
    if (select(1, &fds, NULL, NULL, &tv) > 0 && read(0, b, sizeof b) <= 0) break;
    if (tick) __atomic_fetch_add(&c[VX_STATS_bytes_up], 100u << 20, __ATOMIC_RELAXED);
    if (tick) __atomic_fetch_add(&c[VX_STATS_demand_up_bytes], 50u << 20, __ATOMIC_RELAXED);
    vx_stats_shm_heartbeat();
  }
  vx_stats_shm_destroy();
  return 0;
}
