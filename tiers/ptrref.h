/* Pointers stored in device memory: what host-to-device copies wrote into
 * small allocations that points into tracked allocations (a batched GEMM's
 * pointer array), so that a launch reaching the array restores them too. */
#ifndef VX_TIERS_PTRREF_H
#define VX_TIERS_PTRREF_H

#include <cuda.h>
#include <stddef.h>

#include "observe.h"

/* Allocations up to this size have their host-to-device copies scanned. */
#define PTRREF_MAX_ALLOC ((size_t)64 << 10)

/* A host-to-device copy of n bytes from src to dst has been enqueued (it
 * succeeded): when dst lies in a tracked allocation of at most
 * PTRREF_MAX_ALLOC bytes, its contents as written so far are kept, and the
 * 8-byte words among them that point into tracked allocations become that
 * allocation's references.  Reads src[0..n) (the driver has read it too);
 * takes the registry read lock, then the module's lock. */
void ptrref_note(CUdeviceptr dst, const void *src, size_t n);

/* Adds to *s the allocations the references of s's allocations reach, and
 * theirs in turn (a pointer array of pointer arrays).  One relaxed load
 * when no allocation holds references.  s->oom is set when memory ran out
 * (the set is then incomplete). */
void ptrref_expand(obs_set_t *s);

/* fork: prepare takes the lock, the parent releases it, the child
 * re-creates it (init.c's fork list). */
void ptrref_atfork_prepare(void);
void ptrref_atfork_parent(void);
void ptrref_atfork_child(void);

#endif
