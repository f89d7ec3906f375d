/* cuGetProcAddress hooks: ask the real driver, then map the pointer it
 * returns back to the exact variant (never by base name alone) and hand
 * out vx's hook for that variant; anything else is returned untouched. */
#include "vx.h"

static void *procaddr_map(const char *symbol, void *real) {
  void *hook = vx_hook_for_real(symbol, real);
  return hook ? hook : real;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGetProcAddress, symbol, pfn, cudaVersion, flags);
  if (on && r == CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = procaddr_map(symbol, *pfn);
  return r;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuGetProcAddress_v2, symbol, pfn, cudaVersion, flags, symbolStatus);
  if (on && r == CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = procaddr_map(symbol, *pfn);
  return r;
}
