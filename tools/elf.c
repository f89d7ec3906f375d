/* elf.c: just enough ELF reading to tell whether LD_PRELOAD can reach a
 * program (a dynamic executable has PT_INTERP), and PATH resolution. */
#include "cli_elf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int vx_find_in_path(const char *cmd, char *out, size_t len) {
  if (strchr(cmd, '/')) {
    snprintf(out, len, "%s", cmd);
    return access(out, X_OK) ? -errno : 0;
  }
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path;;) {
    size_t n = strcspn(p, ":");
    if ((size_t)snprintf(out, len, "%.*s%s%s", (int)n, n ? p : ".", "/", cmd) < len) {
      struct stat st;
      if (!stat(out, &st) && S_ISREG(st.st_mode) && !access(out, X_OK)) return 0;
    }
    if (!p[n]) return -ENOENT;
    p += n + 1;
  }
}

/* Returns 1 if a PT_INTERP header exists, 0 if not, -EINVAL if unreadable. */
static int has_interp(int fd, const unsigned char *id) {
  int is64 = id[EI_CLASS] == ELFCLASS64;
  Elf64_Ehdr e64;
  Elf32_Ehdr e32;
  uint64_t phoff;
  unsigned phnum, phentsize;
  if (is64 ? pread(fd, &e64, sizeof e64, 0) != sizeof e64
           : pread(fd, &e32, sizeof e32, 0) != sizeof e32)
    return -EINVAL;
  phoff = is64 ? e64.e_phoff : e32.e_phoff;
  phnum = is64 ? e64.e_phnum : e32.e_phnum;
  phentsize = is64 ? e64.e_phentsize : e32.e_phentsize;
  if (phnum > 4096 || phentsize < (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr))) return -EINVAL;
  for (unsigned i = 0; i < phnum; i++) {
    uint32_t type;
    if (pread(fd, &type, sizeof type, (off_t)(phoff + (uint64_t)i * phentsize)) != sizeof type)
      return -EINVAL;
    if (type == PT_INTERP) return 1;
  }
  return 0;
}

int vx_elf_inspect(const char *path, vx_elf_info_t *info) {
  memset(info, 0, sizeof *info);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  unsigned char id[EI_NIDENT];
  int rc = 0;
  if (fstat(fd, &st))
    rc = -errno;
  else if (pread(fd, id, sizeof id, 0) == sizeof id && !memcmp(id, ELFMAG, SELFMAG) &&
           (id[EI_CLASS] == ELFCLASS64 || id[EI_CLASS] == ELFCLASS32) &&
           id[EI_DATA] == ELFDATA2LSB) {
    info->is_elf = 1;
    int r = has_interp(fd, id);
    info->is_static = r == 0;
  } else if (pread(fd, id, 2, 0) == 2 && id[0] == '#' && id[1] == '!') {
    info->is_script = 1;
  }
  /* the loader's secure-execution mode: an ID the program would switch to differs */
  info->setid = !rc && (((st.st_mode & S_ISUID) && st.st_uid != getuid()) ||
                        ((st.st_mode & S_ISGID) && st.st_gid != getgid()));
  close(fd);
  return rc;
}
