/* prog_report_static: allocates over the device budget from a static function,
 * one that only the program's own symbol table names (no -rdynamic: dladdr
 * cannot), so that the report's sites show function names read from the
 * file (#14).  Built twice, as a PIE and not (load bias or none).  Run with
 * SIMCUDA_VRAM=64M VX_RESERVE=0 VX_DEVICE_LIMIT=8M VX_SITES=1. */
#include "kit.h"

#define MB ((size_t)1 << 20)

static CUdeviceptr buf[4];
/* Read at run time: the compiler can neither unroll the loop (one call
 * site) nor specialise the function (no .constprop clone). */
static volatile int nalloc = 2;
static volatile size_t alloc_bytes = 4 * MB;

/* Not exported, not inlined, not a tail call: its frame is the innermost. */
static __attribute__((noinline)) void report_static_site(void) {
  for (int i = 0; i < nalloc; i++)
    CHECK_CU(kit_cu.cuMemAlloc_v2(&buf[i], alloc_bytes));
  __asm__ volatile("" ::: "memory");
}

int main(void) {
  CUcontext ctx;
  CUdeviceptr fill;
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&fill, 8 * MB)); /* the whole budget: the rest spills */
  report_static_site();
  printf("prog_report_static: ok\n");
  return 0;
}
