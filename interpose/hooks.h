/* The hooks of hooks.def turned into C: vx's exported definitions of the
 * driver's names, and the lookups by name for dlsym/cuGetProcAddress.  The
 * ids, types and the real table are core/driver.h's. */
#ifndef VX_INTERPOSE_HOOKS_H
#define VX_INTERPOSE_HOOKS_H

#include "driver.h"

/* vx's hooks, exported under the real names. */
#define VX_EXPORT __attribute__((visibility("default")))
#define VX_HOOK(fam, name, stream, base, ret, params) VX_EXPORT ret name params;
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL

/* Whether hook `id` is a per-thread-default-stream variant (hooks.def's
 * stream column, VX_HOOK_PTDS in driver.h for a name), from the table. */
extern const unsigned char vx_hook_ptds_v[VX_HOOK_COUNT];
static inline int vx_hook_ptds(int id) {
  return id >= 0 && id < VX_HOOK_COUNT && vx_hook_ptds_v[id];
}
/* The stream a hook's call means: CU_STREAM_PER_THREAD for a NULL stream
 * passed to a PTDS variant, else s as passed (VX_HOOK_STREAM for a name). */
static inline CUstream vx_hook_stream(int id, CUstream s) {
  return !s && vx_hook_ptds(id) ? CU_STREAM_PER_THREAD : s;
}

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
