/* cli_elf.h: can LD_PRELOAD reach a program?  ELF inspection and PATH lookup
 * for `vx run` and `vx doctor`. */
#ifndef VX_TOOLS_CLI_ELF_H
#define VX_TOOLS_CLI_ELF_H

#include <stddef.h>

typedef struct vx_elf_info {
  int is_elf;    /* a little-endian ELF file */
  int is_static; /* ELF without PT_INTERP: the dynamic linker never runs */
  int is_script; /* starts with #! */
  int setid; /* set-ID to another user or group: the loader's secure mode drops LD_PRELOAD paths */
} vx_elf_info_t;

/* Fills info for the file at path.  Returns 0 or -errno (cannot open). */
int vx_elf_inspect(const char *path, vx_elf_info_t *info);
/* Resolves cmd as execvp would (PATH search unless it has a '/') into out.
 * Returns 0 or -ENOENT/-errno. */
int vx_find_in_path(const char *cmd, char *out, size_t len);

#endif
