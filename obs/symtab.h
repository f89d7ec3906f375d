/* symtab: function names from a module's own ELF symbol table (.symtab,
 * else .dynsym), read from its file on disk, for the report's call sites. */
#ifndef VX_INTERPOSE_SYMTAB_H
#define VX_INTERPOSE_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

#define SYMTAB_MODULES 16 /* files kept mapped; the least recently used goes */

/* Pure: the function of the ELF image img (len bytes, a whole file as on
 * disk, any alignment) that covers link-time address vaddr: an STT_FUNC or
 * STT_GNU_IFUNC symbol whose [value, value + size) holds it, else a sized
 * STT_NOTYPE one, else the nearest preceding function (or untyped) symbol in
 * the same executable section.  .symtab first, .dynsym when .symtab has no
 * answer.  Returns 0 with the NUL-terminated name in name (cut to namelen)
 * and *off = vaddr - the symbol's value; -ENOENT when no symbol covers
 * vaddr; -EINVAL when img is not a 64-bit ELF of this machine's byte order.
 * Every offset and size is checked against len: a truncated or corrupt image
 * is an answer, never a read outside [img, img + len). */
int symtab_find(const void *img, size_t len, uint64_t vaddr, char *name, size_t namelen,
                uint64_t *off);

/* The function holding addr in the module whose file is path, loaded at
 * bias (run-time address minus link-time address: 0 for a non-PIE
 * executable, the load base for a PIE or a shared object).  The file is
 * mapped read-only once and kept (at most SYMTAB_MODULES files; a file that
 * cannot be read is remembered as such).  Thread-safe, no malloc; never
 * waits for a lock (a busy cache maps the file for this one answer).  For
 * report time, not for a hook path.  Returns as symtab_find, or -errno
 * when the file cannot be opened or mapped. */
int symtab_lookup(const char *path, uintptr_t bias, uintptr_t addr, char *name, size_t namelen,
                  uint64_t *off);

#endif
