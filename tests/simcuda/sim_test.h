/* sim_test.h: shared helpers of the simulator's Check tests: environment,
 * a current context, CUresult assertions with error names.  Each suite
 * ends with vx_check_run(s, 1), as every unit test does. */
#ifndef VX_SIM_TEST_H
#define VX_SIM_TEST_H

#include <check.h>

#include "vx_check.h"
#include <cuda.h>
#include <stdlib.h>

#include "kit.h"
#include "simcuda.h"

#define MiB ((size_t)1 << 20)

/* Asserts that call returns `want`, printing both names otherwise. */
#define ck_cu_is(call, want)                                                   \
  do {                                                                         \
    CUresult ck_r_ = (call);                                                   \
    const char *ck_a_ = "?", *ck_b_ = "?";                                     \
    cuGetErrorName(ck_r_, &ck_a_);                                             \
    cuGetErrorName((want), &ck_b_);                                            \
    ck_assert_msg(ck_r_ == (want), "%s returned %s, expected %s", #call,       \
                  ck_a_ ? ck_a_ : "?", ck_b_ ? ck_b_ : "?");                    \
  } while (0)
#define ck_cu(call) ck_cu_is(call, CUDA_SUCCESS)

/* Sets SIMCUDA_* (before the simulator's first call in this process), then
 * cuInit + primary context of device 0 current + kit module. */
static inline CUcontext sim_test_setup(const char *vram) {
  if (vram) setenv("SIMCUDA_VRAM", vram, 1);
  CUcontext c;
  ck_cu(kit_init(0, &c));
  ck_cu(kit_module(NULL));
  return c;
}

static inline simcuda_stats_t sim_test_stats(int dev) {
  simcuda_stats_t st;
  ck_assert_int_eq(simcuda_get_stats(dev, &st), 0);
  return st;
}
#endif
