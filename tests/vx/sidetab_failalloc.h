/* Force-included into tiers/sidetab.c by the vx_sidetab test: uthash's own
 * allocations (tables, buckets) go through a counter that can fail them. */
#ifndef VX_TESTS_SIDETAB_FAILALLOC_H
#define VX_TESTS_SIDETAB_FAILALLOC_H
#include <stddef.h>
void *vxt_uthash_malloc(size_t n);
#define uthash_malloc(sz) vxt_uthash_malloc(sz)
#endif
