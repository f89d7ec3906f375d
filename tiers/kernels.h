/* Which launch handles are CUkernels (cuLibraryGetKernel and friends) and
 * which CUfunctions stand for one (cuKernelGetFunction): a hint table. */
#ifndef VX_TIERS_KERNELS_H
#define VX_TIERS_KERNELS_H

#include <cuda.h>

/* Records that k is a CUkernel.  Lock-free, no allocation; a full table
 * drops the record (the observer then finds out by trying both families).
 * Called by the library hooks when the driver hands a kernel out. */
void kern_note(CUkernel k);
/* Records that f is k's CUfunction in some context (and that k is a kernel). */
void kern_note_function(CUfunction f, CUkernel k);

/* 1 when h was recorded as a CUkernel, 0 otherwise (a CUfunction, or a
 * handle vx never saw made).  A hint only: after cuLibraryUnload the
 * address may come back as something else.  Lock-free: a few loads. */
int kern_is_kernel(const void *h);
/* The CUkernel whose CUfunction f is, or NULL. */
CUkernel kern_of_function(CUfunction f);

#endif
