/* sim_clock.c: the virtual clock (per device: engines busy-until, the host's
 * notion of time) and the counters test programs read through simcuda.h. */
#include <errno.h>
#include <string.h>

#include "sim_internal.h"

uint64_t sim_ns_for_bytes(uint64_t bytes, double gbps) {
  return (uint64_t)((double)bytes / gbps + 0.5);
}

// ---- engines ----

/* Index of the first interval ending after t. */
static uint32_t eng_after(const sim_engine *g, uint64_t t) {
  uint32_t lo = 0, hi = g->n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (g->e[mid] <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

uint64_t sim_eng_fit(const sim_engine *g, uint64_t t, uint64_t dur) {
  if (t < g->floor) t = g->floor;
  for (uint32_t i = eng_after(g, t); i < g->n; i++) {
    if (g->s[i] >= t + dur) return t; /* the gap before interval i holds it */
    if (g->e[i] > t) t = g->e[i];
  }
  return t;
}

void sim_eng_take(sim_engine *g, uint64_t start, uint64_t dur) {
  if (!dur) return;
  uint64_t end = start + dur;
  uint32_t i = eng_after(g, start); /* intervals before i end at or before start */
  int join_prev = i > 0 && g->e[i - 1] == start;
  int join_next = i < g->n && g->s[i] == end;
  if (join_prev && join_next) { /* fills the gap exactly */
    g->e[i - 1] = g->e[i];
    memmove(&g->s[i], &g->s[i + 1], (g->n - i - 1) * sizeof g->s[0]);
    memmove(&g->e[i], &g->e[i + 1], (g->n - i - 1) * sizeof g->e[0]);
    g->n--;
    return;
  }
  if (join_prev) {
    g->e[i - 1] = end;
    return;
  }
  if (join_next) {
    g->s[i] = start;
    return;
  }
  if (g->n == SIM_ENG_SLOTS) { /* forget the oldest: its gaps are busy from now on */
    if (i == 0) {                /* the new one is the oldest */
      if (end > g->floor) g->floor = end;
      return;
    }
    g->floor = g->e[0];
    memmove(&g->s[0], &g->s[1], (g->n - 1) * sizeof g->s[0]);
    memmove(&g->e[0], &g->e[1], (g->n - 1) * sizeof g->e[0]);
    g->n--;
    i--;
  }
  memmove(&g->s[i + 1], &g->s[i], (g->n - i) * sizeof g->s[0]);
  memmove(&g->e[i + 1], &g->e[i], (g->n - i) * sizeof g->e[0]);
  g->s[i] = start;
  g->e[i] = end;
  g->n++;
}

/* When g is busy until: the end of its last interval (they are sorted),
 * or its floor (the time before it counts as busy). */
static uint64_t eng_until(const sim_engine *g) {
  return g->n && g->e[g->n - 1] > g->floor ? g->e[g->n - 1] : g->floor;
}

uint64_t sim_eng_run(sim_engine *g, uint64_t t, uint64_t dur) {
  uint64_t start = sim_eng_fit(g, t, dur);
  sim_eng_take(g, start, dur);
  return start + dur;
}

void sim_stat_gauges_locked(sim_dev *d) {
  d->st.device_used_bytes = sim_dev_used_locked(d);
  if (d->st.device_used_bytes > d->st.device_used_peak)
    d->st.device_used_peak = d->st.device_used_bytes;
}

void sim_note_end_locked(sim_dev *d, uint64_t end) {
  if (end > d->max_end) d->max_end = end;
}

void sim_host_sync(int dev, uint64_t t) {
  sim_lock();
  sim_dev *d = &sim_g.dev[dev];
  if (t > d->host_now) d->host_now = t;
  sim_note_end_locked(d, t);
  sim_unlock();
}

uint64_t sim_host_now(int dev) {
  sim_lock();
  uint64_t t = sim_g.dev[dev].host_now;
  sim_unlock();
  return t;
}

SIM_API int simcuda_get_stats(int dev, simcuda_stats_t *out) {
  if (!out || !sim_dev_get(dev)) return -EINVAL;
  sim_lock();
  sim_dev *d = &sim_g.dev[dev];
  *out = d->st;
  out->total_ns = d->max_end > d->epoch ? d->max_end - d->epoch : 0;
  sim_unlock();
  return 0;
}

/* The migrations the driver made on its own (faults in, evictions out), as
 * a driver that reported them would: libvx's exit report counts them beside
 * its own prefetches (NVIDIA's driver has no such entry point: there the
 * report says "not measured"). */
SIM_API int simcuda_demand_migration(int dev, uint64_t *up, uint64_t *down) {
  if (!up || !down || !sim_dev_get(dev)) return -EINVAL;
  sim_lock();
  *up = sim_g.dev[dev].st.bytes_fault_htod;
  *down = sim_g.dev[dev].st.bytes_evict_dtoh;
  sim_unlock();
  return 0;
}

/* Counters restart from zero; gauges (bytes in use now) keep their value and
 * their peaks restart from it. */
SIM_API void simcuda_reset_stats(void) {
  if (sim_boot() != 0) return;
  sim_lock();
  for (int i = 0; i < sim_g.ndev; i++) {
    simcuda_stats_t *st = &sim_g.dev[i].st;
    simcuda_stats_t keep = *st;
    memset(st, 0, sizeof *st);
    st->host_backing_bytes = st->host_backing_peak = keep.host_backing_bytes;
    st->device_used_bytes = st->device_used_peak = keep.device_used_bytes;
    /* total_ns measures from the reset on: work issued later starts no
     * earlier than everything seen so far. */
    sim_dev *d = &sim_g.dev[i];
    uint64_t now = d->max_end > d->host_now ? d->max_end : d->host_now;
    const sim_engine *eng[] = {&d->compute, &d->h2d, &d->d2h};
    for (int k = 0; k < 3; k++)
      if (eng_until(eng[k]) > now) now = eng_until(eng[k]);
    d->epoch = d->host_now = d->max_end = now;
    d->compute.floor = d->h2d.floor = d->d2h.floor = now;
  }
  sim_unlock();
}

SIM_API int simcuda_chunk_residency(CUdeviceptr p) {
  if (sim_boot() != 0) return -2;
  sim_lock();
  sim_alloc *a = sim_map_find_locked((uintptr_t)p);
  int r = -2;
  if (a && a->kind == SIM_MANAGED) {
    sim_chunk *c = &a->chunks[(p - a->base) / SIM_CHUNK];
    r = c->state == CH_DEVICE ? 1 : c->state == CH_HOST ? 0 : -1;
  }
  sim_unlock();
  return r;
}

/* For the simulated NVML: capacity and bytes in use of device dev. */
SIM_API int simcuda_nvml_memory(int dev, unsigned long long *total, unsigned long long *used) {
  if (sim_entry_check("simcuda_nvml_memory") != CUDA_SUCCESS) return -EINVAL;
  sim_dev *d = sim_dev_get(dev);
  if (!d || !total || !used) return -EINVAL;
  sim_lock();
  *total = d->capacity;
  *used = sim_dev_used_locked(d);
  sim_unlock();
  return 0;
}

SIM_API int simcuda_device_count(void) { return sim_boot() == 0 ? sim_g.ndev : 0; }
