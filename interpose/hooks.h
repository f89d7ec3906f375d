/* The hooks of hooks.def turned into C: vx's exported definitions of the
 * driver's names, and the lookups by name for dlsym/cuGetProcAddress.  The
 * ids, types and the real table are core/driver.h's. */
#ifndef VX_INTERPOSE_HOOKS_H
#define VX_INTERPOSE_HOOKS_H

#include "driver.h"

/* vx's hooks, exported under the real names. */
#define VX_EXPORT __attribute__((visibility("default")))
#define VX_HOOK(fam, name, base, ret, params) VX_EXPORT ret name params;
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL

/* Static facts about each hook. */
int vx_hook_family(int id);
void *vx_hook_fn(int id);
/* Id of the hook exported under exactly `name`, or -1. */
int vx_hook_find(const char *name);
/* The hook of the variant whose real entry point is `real` among the hooks
 * of base name `base`; NULL if `real` is none of them (then the caller hands
 * out `real` unchanged). */
void *vx_hook_for_real(const char *base, const void *real);

#endif
