/* Live per-device counters (counters.def), updated with relaxed atomics:
 * CUR counters saturate at zero (counting underflows) and keep their PEAK. */
#ifndef VX_TIERS_CTR_H
#define VX_TIERS_CTR_H

#include "counters.h"
#include "options.h"

extern vx_counters_t vx_ctr[VX_MAX_DEVICES];

/* Slot of device `dev` (out-of-range ordinals share slot 0). */
static inline int ctr_slot(int dev) {
  return dev >= 0 && dev < VX_MAX_DEVICES ? dev : 0;
}

/* Adds to a SUM counter.  Lock-free, no syscall: safe on the hot path. */
static inline void ctr_add(int dev, int id, uint64_t n) {
  __atomic_fetch_add(&vx_ctr[ctr_slot(dev)].v[id], n, __ATOMIC_RELAXED);
}
/* Adds to a CUR counter and raises its PEAK (if it is a gauge's value);
 * marks the device as seen. */
void ctr_cur_add(int dev, int id, uint64_t n);
/* Subtracts from a CUR counter, saturating at 0 (then `underflows`++). */
void ctr_cur_sub(int dev, int id, uint64_t n);
/* Records that device `dev` was used (for the report's device count). */
void ctr_note_device(int dev);
/* Highest device ordinal used plus one, at least 1. */
int ctr_devices(void);
/* Copies the counters of devices [0, ndev) with atomic loads. */
void ctr_snapshot(vx_counters_t *out, int ndev);

#endif
