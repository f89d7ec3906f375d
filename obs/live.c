/* libvx's live stats segment (stats_shm.h): its counters are vx's own
 * (core/ctr_live.c), and its per-device limits are read from the budgets
 * by the publisher thread itself, every period, so that tiers/ never calls
 * up into obs/. */
#include "live.h"

#include <string.h>

#include "budget.h"
#include "ctr.h"
#include "options.h"
#include "report.h"
#include "stats_shm.h"

/* Only the publisher thread runs this, with no lock held. */
static void refresh_limits(void) {
  static uint64_t shown[VX_MAX_DEVICES][VX_LIMIT_COUNT];
  uint64_t now[VX_MAX_DEVICES][VX_LIMIT_COUNT];
  /* The host and NVMe limits are the process's, shown beside each device
   * it uses: on the slots of unused devices they would make vx top and vx
   * stat list all sixteen. */
  for (int d = 0; d < VX_MAX_DEVICES; d++) {
    int used = budget_physical(d) != 0; /* set up: the program uses it */
    now[d][VX_LIMIT_DEVICE] = budget_limit(d);
    now[d][VX_LIMIT_HOST] = used ? vx_size_resolve(&vx_opt.HOST_LIMIT, 0) : 0;
    now[d][VX_LIMIT_NVME] =
        used && vx_opt.NVME_DIR.s[0] ? vx_size_resolve(&vx_opt.NVME_LIMIT, 0) : 0;
  }
  if (!memcmp(now, shown, sizeof now)) return;
  memcpy(shown, now, sizeof now);
  vx_stats_shm_set_limits(&now[0][0]);
}

/* Before each copy: what the segment shows besides vx's own counters. */
static void before_copy(void) {
  refresh_limits();
  vx_report_demand_publish(); /* vx stat and vx top with or without a report */
}

void obs_live_start(void) {
  vx_stats_shm_before_copy(before_copy);
  vx_stats_shm_publish(vx_ctr, VX_MAX_DEVICES);
}
