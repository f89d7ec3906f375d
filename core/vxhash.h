/* uthash for code that runs inside the application: an allocation failure
 * in HASH_ADD is reported through vxhash_oomed instead of exit(-1). */
#ifndef VX_POLICY_VXHASH_H
#define VX_POLICY_VXHASH_H

/* Usage:  vxhash_oomed = 0; HASH_ADD(...); if (vxhash_oomed) { the element
 * is NOT in the table: undo, free it, return -ENOMEM; }
 * (uthash's non-fatal mode leaves the table as it was before the add.) */
static _Thread_local int vxhash_oomed __attribute__((unused));
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) ((void)(obj), vxhash_oomed = 1)
#include <uthash.h>

#endif
