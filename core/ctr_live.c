/* Live per-device counters: relaxed atomics, saturating CUR counters with
 * their PEAK partners, a device high-water mark for the report. */
#include "ctr.h"

vx_counters_t vx_ctr[VX_MAX_DEVICES];
static int ctr_ndev = 1;

void ctr_note_device(int dev) {
  int want = ctr_slot(dev) + 1;
  int cur = __atomic_load_n(&ctr_ndev, __ATOMIC_RELAXED);
  while (cur < want &&
         !__atomic_compare_exchange_n(&ctr_ndev, &cur, want, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
}

int ctr_devices(void) {
  return __atomic_load_n(&ctr_ndev, __ATOMIC_RELAXED);
}

static void ctr_raise_peak(uint64_t *peak, uint64_t v) {
  uint64_t cur = __atomic_load_n(peak, __ATOMIC_RELAXED);
  while (cur < v &&
         !__atomic_compare_exchange_n(peak, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
}

void ctr_cur_add(int dev, int id, uint64_t n) {
  vx_counters_t *c = &vx_ctr[ctr_slot(dev)];
  uint64_t v = __atomic_add_fetch(&c->v[id], n, __ATOMIC_RELAXED);
  int p = vx_counter_peak_of(id); /* a constant table (counters.def's gauges) */
  if (p >= 0) ctr_raise_peak(&c->v[p], v);
  ctr_note_device(dev);
}

void ctr_cur_sub(int dev, int id, uint64_t n) {
  vx_counters_t *c = &vx_ctr[ctr_slot(dev)];
  uint64_t cur = __atomic_load_n(&c->v[id], __ATOMIC_RELAXED);
  for (;;) {
    uint64_t next = cur >= n ? cur - n : 0;
    if (__atomic_compare_exchange_n(&c->v[id], &cur, next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      break;
  }
  if (cur < n) ctr_add(dev, VX_CTR_underflows, 1);
}

void ctr_snapshot(vx_counters_t *out, int ndev) {
  for (int d = 0; d < ndev && d < VX_MAX_DEVICES; d++)
    for (int i = 0; i < VX_CTR_COUNT; i++)
      out[d].v[i] = __atomic_load_n(&vx_ctr[d].v[i], __ATOMIC_RELAXED);
}
