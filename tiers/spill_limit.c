/* The host limit: how many managed bytes vx holds on the host (published
 * as host_held_bytes), and the coldest chunks spilled while that is over
 * VX_HOST_LIMIT.  Every function here runs under the spill lock. */
#include <errno.h>
#include <stdlib.h>

#include "budget.h"
#include "spill_int.h"
#include "ctr.h"
#include "log.h"

/* Managed bytes vx holds that cannot be on the device: resident bytes of
 * the allocations vx has seen used, minus the room the device budgets have
 * left after native allocations, at least 0. */
static uint64_t host_held_locked(void) {
  uint64_t room = 0;
  for (int d = 0; d < ctr_devices(); d++) {
    uint64_t lim = budget_limit(d), used = budget_used(d);
    room += lim > used ? lim - used : 0;
  }
  return spill_g.resident > room ? spill_g.resident - room : 0;
}

void spill_publish_locked(void) {
  uint64_t now = host_held_locked(), was = spill_g.published;
  if (spill_g.nspilled && vx_log_level() >= VX_LOG_INFO) {
    /* Every spill path publishes after it: the first time data is out. */
    char t[3][VX_SIZE_TEXT];
    VX_LOG_ONCE(VX_LOG_INFO,
                "first NVMe spill: %s moved to the swap file and released from host RAM "
                "(vx holds %s there now; VX_HOST_LIMIT %s)",
                vx_size_text(spill_g.nspilled * SPILL_CHUNK, t[0]), vx_size_text(now, t[1]),
                vx_size_text(spill_g.host_limit, t[2]));
  }
  if (now > was) ctr_cur_add(0, VX_CTR_host_held_bytes, now - was);
  if (now < was) ctr_cur_sub(0, VX_CTR_host_held_bytes, was - now);
  spill_g.published = now;
}

static int victim_cmp(const void *a, const void *b) {
  uint64_t x = ((const victim_t *)a)->stamp, y = ((const victim_t *)b)->stamp;
  return x < y ? -1 : x > y;
}

/* Resident chunks used at least once (never-used ones hold no memory) and
 * not pinned, coldest first.  *n = count. */
static victim_t *victims_locked(size_t *n) {
  size_t cap = 0, k = 0;
  spill_rec_t *r, *tmp;
  HASH_ITER(hh, spill_g.recs, r, tmp) cap += r->nchunks;
  victim_t *v = cap ? malloc(cap * sizeof *v) : NULL;
  if (!v) {
    *n = 0;
    return NULL;
  }
  HASH_ITER(hh, spill_g.recs, r, tmp)
  for (uint32_t i = 0; i < r->nchunks; i++)
    if (r->slot[i] < 0 && r->stamp[i] && !r->pins[i]) v[k++] = (victim_t){r, i, r->stamp[i]};
  qsort(v, k, sizeof *v, victim_cmp);
  *n = k;
  return v;
}

int spill_enforce_locked(void) {
  uint64_t held = host_held_locked();
  if (!spill_g.host_limit || held <= spill_g.host_limit) return 0;
  if (spill_g.full_at && spill_g.nspilled >= spill_g.full_at) return -ENOSPC;
  if (spill_g.no_discard || spill_g.unseen) return -ENOTSUP;
  size_t n, take = 0;
  victim_t *v = victims_locked(&n);
  uint64_t need = held - spill_g.host_limit, got = 0;
  for (; take < n && got < need; take++)
    got += spill_chunk_len(v[take].r, v[take].i);
  int rc = 0;
  for (size_t at = 0; at < take && rc != -ENOSPC;) {
    size_t batch = take - at < SPILL_BATCH ? take - at : SPILL_BATCH;
    int r = spill_batch_locked(v + at, batch);
    if (r && !rc) rc = r;
    at += batch;
  }
  free(v);

  spill_publish_locked();
  held = host_held_locked();
  if (!rc && take == n && held > spill_g.host_limit)
    /* Every chunk left is pinned by operations not yet enqueued: one
     * operation reaches more managed memory than the limit and the
     * devices' room together.  vx cannot know which bytes a kernel reads,
     * so it keeps them all; the limit holds again once the operation is
     * enqueued and its chunks are cold enough to be chosen. */
    VX_LOG_ONCE(VX_LOG_WARN,
                "VX_HOST_LIMIT cannot hold while one operation runs: it reaches %llu MiB of "
                "managed memory that must stay in host RAM (over the limit of %llu MiB); "
                "allocations reached by one launch are restored whole",
                (unsigned long long)((held + ((1u << 20) - 1)) >> 20),
                (unsigned long long)(spill_g.host_limit >> 20));
  return rc;
}
