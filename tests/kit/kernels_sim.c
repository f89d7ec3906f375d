/* kernels_sim.c: the simulator's host bodies of the kit kernels (same hash as
 * kernels.cu); each declares the byte ranges it touches via kit_access(). */
#include <string.h>

#include "kit.h"

#define ARG(T, i) (*(T *)params[i])

SIMCUDA_KERNEL(fill_u32) {
  size_t n = ARG(size_t, 1);
  uint32_t seed = ARG(uint32_t, 2);
  uint32_t *p = kit_access(k, ARG(CUdeviceptr, 0), n * 4, SIMCUDA_WRITE);
  if (!p) return;
  for (size_t i = 0; i < n; i++) p[i] = kit_hash(seed, i);
}

SIMCUDA_KERNEL(check_u32) {
  size_t n = ARG(size_t, 1);
  uint32_t seed = ARG(uint32_t, 2);
  const uint32_t *p = kit_access(k, ARG(CUdeviceptr, 0), n * 4, SIMCUDA_READ);
  if (!p) return;
  unsigned long long *bad = kit_access(k, ARG(CUdeviceptr, 3), sizeof *bad, SIMCUDA_RW);
  if (!bad) return;
  unsigned long long mine = 0;
  for (size_t i = 0; i < n; i++) mine += p[i] != kit_hash(seed, i);
  *bad += mine;
}

SIMCUDA_KERNEL(add_u32) {
  size_t n = ARG(size_t, 3);
  const uint32_t *a = kit_access(k, ARG(CUdeviceptr, 1), n * 4, SIMCUDA_READ);
  const uint32_t *b = a ? kit_access(k, ARG(CUdeviceptr, 2), n * 4, SIMCUDA_READ) : NULL;
  uint32_t *d = b ? kit_access(k, ARG(CUdeviceptr, 0), n * 4, SIMCUDA_WRITE) : NULL;
  if (!d) return;
  for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
}

SIMCUDA_KERNEL(scale_f32) {
  size_t n = ARG(size_t, 1);
  float s = ARG(float, 2);
  float *p = kit_access(k, ARG(CUdeviceptr, 0), n * 4, SIMCUDA_RW);
  if (!p) return;
  for (size_t i = 0; i < n; i++) p[i] *= s;
}

SIMCUDA_KERNEL(axpy_f32) {
  float a = ARG(float, 2);
  size_t n = ARG(size_t, 3);
  const float *x = kit_access(k, ARG(CUdeviceptr, 1), n * 4, SIMCUDA_READ);
  float *y = x ? kit_access(k, ARG(CUdeviceptr, 0), n * 4, SIMCUDA_RW) : NULL;
  if (!y) return;
  for (size_t i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}

SIMCUDA_KERNEL(touch8) {
  size_t n = ARG(size_t, 8);
  unsigned s = 0;
  unsigned char *first = NULL;
  for (int i = 0; i < 8; i++) {
    CUdeviceptr p = ARG(CUdeviceptr, i);
    if (!p) continue;
    unsigned char *h = kit_access(k, p, n ? n : 1, i == 0 ? SIMCUDA_RW : SIMCUDA_READ);
    if (!h) return;
    if (i == 0) first = h;
    if (n) s += h[0];
  }
  if (first && n) first[0] = (unsigned char)s;
}

/* Referenced by kit_module() so that this object (and its registering
 * constructors) is always linked from the static library. */
void kit_kernels_sim_anchor(void) {}
