/* Allocation sites (VX_SITES=1): the call stack of each vx-placed allocation,
 * hashed into a bounded lock-free table of counts, bytes and bytes spilled. */
#ifndef VX_INTERPOSE_SITES_H
#define VX_INTERPOSE_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "registry.h"

#define SITES_MAX 1024  /* distinct stacks kept; later ones are counted as dropped */
#define SITES_FRAMES 16 /* frames kept per stack, vx's own frames skipped */

/* One site as the report sees it. */
typedef struct site_stat {
  uint64_t count;   /* allocations */
  uint64_t bytes;   /* bytes allocated (cumulative) */
  uint64_t live;    /* bytes allocated and not yet freed */
  uint64_t spilled; /* bytes placed beyond the device budget (managed/host tiers) */
  int nframes;
  void *frames[SITES_FRAMES]; /* return addresses, innermost first */
} site_stat_t;

/* Records allocation a (tiers native, managed, host; others ignored) at the
 * caller's stack when VX_SITES=1; otherwise only a relaxed load.  No lock, no
 * malloc: safe on any hook path. */
void sites_record(const vx_alloc_info_t *a);
/* The allocation a is gone: its bytes leave its site's live bytes. */
void sites_forget(const vx_alloc_info_t *a);
/* Copies every recorded site into out (at most max), unsorted; returns how
 * many.  *dropped = allocations whose stack did not fit the table. */
size_t sites_copy(site_stat_t *out, size_t max, uint64_t *dropped);
/* "module(func+0x12)" for a return address, the function found in the
 * module's symbol table (static functions too: symtab.h), else in its
 * dynamic symbols (dladdr); "module+0x1234" when neither names it.  Maps
 * files: report time only, never on a hook path. */
void sites_symbol(void *addr, char *buf, size_t len);

#endif
