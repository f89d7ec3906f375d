/* Library hooks: where the driver hands out CUkernels (kernels looked up or
 * enumerated, their per-context functions), vx notes them, so that the
 * launch observer asks each handle the right way.  Loads are not hooked: vx
 * makes no call of its own there (a handle it never saw made is still asked
 * both ways, tiers/observe.c). */
#include "kernels.h"
#include "vx.h"

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuLibraryGetKernel, pKernel, library, name);
  if (on && r == CUDA_SUCCESS && pKernel) kern_note(*pKernel);
  return r;
}

CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuLibraryEnumerateKernels, kernels, numKernels, lib);
  if (on && r == CUDA_SUCCESS && kernels)
    for (unsigned i = 0; i < numKernels; i++)
      kern_note(kernels[i]);
  return r;
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuKernelGetFunction, pFunc, kernel);
  if (on && r == CUDA_SUCCESS && pFunc) kern_note_function(*pFunc, kernel);
  return r;
}
