/* symtab: function names from ELF symbol tables on disk (dladdr sees only
 * exported symbols); a bounds-checked reader and a small cache of mappings. */
#include "symtab.h"
#include "locks.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- the reader (pure) ----

/* [off, off + size) lies inside a file of len bytes (no overflow). */
static int in_file(size_t len, uint64_t off, uint64_t size) {
  return off <= len && size <= len - off;
}

struct image {
  const unsigned char *p;
  size_t len;
  uint64_t shoff; /* the section headers, checked to lie inside */
  uint64_t shnum;
};

/* Section i's header (copied: the image may be unaligned). */
static void section(const struct image *im, uint64_t i, Elf64_Shdr *sh) {
  memcpy(sh, im->p + im->shoff + i * sizeof *sh, sizeof *sh);
}

static int open_image(const void *img, size_t len, struct image *im) {
  Elf64_Ehdr eh;
  if (!img || len < sizeof eh) return -EINVAL;
  memcpy(&eh, img, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64) return -EINVAL;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return -EINVAL;
#else
  if (eh.e_ident[EI_DATA] != ELFDATA2MSB) return -EINVAL;
#endif
  *im = (struct image){.p = img, .len = len, .shoff = eh.e_shoff, .shnum = eh.e_shnum};
  if (!eh.e_shoff || eh.e_shentsize != sizeof(Elf64_Shdr)) return -ENOENT; /* no sections */
  if (!in_file(len, eh.e_shoff, sizeof(Elf64_Shdr))) return -ENOENT;
  if (im->shnum == 0) { /* more than SHN_LORESERVE sections: the count is in section 0 */
    Elf64_Shdr s0;
    section(im, 0, &s0);
    im->shnum = s0.sh_size;
  }
  if (im->shnum > (len - eh.e_shoff) / sizeof(Elf64_Shdr)) return -ENOENT;
  return 0;
}

enum { RANK_NONE, RANK_NEAR_NOTYPE, RANK_NEAR_FUNC, RANK_IN_NOTYPE, RANK_IN_FUNC };

struct pick {
  int rank;
  uint64_t value;
  uint64_t name; /* offset of the name in the image */
};

/* How well symbol s answers for vaddr (RANK_NONE: not at all). */
static int rank_of(const struct image *im, const Elf64_Sym *s, uint64_t vaddr) {
  int type = ELF64_ST_TYPE(s->st_info);
  int func = type == STT_FUNC || type == STT_GNU_IFUNC;
  if ((!func && type != STT_NOTYPE) || s->st_shndx == SHN_UNDEF || s->st_shndx >= SHN_LORESERVE ||
      s->st_value > vaddr || s->st_name == 0)
    return RANK_NONE;
  if (s->st_size && vaddr - s->st_value < s->st_size) return func ? RANK_IN_FUNC : RANK_IN_NOTYPE;
  /* Preceding only: then it must be in the same executable section. */
  if (s->st_shndx >= im->shnum) return RANK_NONE;
  Elf64_Shdr sec;
  section(im, s->st_shndx, &sec);
  if (!(sec.sh_flags & SHF_EXECINSTR) || vaddr < sec.sh_addr || vaddr - sec.sh_addr >= sec.sh_size)
    return RANK_NONE;
  return func ? RANK_NEAR_FUNC : RANK_NEAR_NOTYPE;
}

/* Raises *best with the symbols of table tab that answer for vaddr. */
static void scan_table(const struct image *im, const Elf64_Shdr *tab, uint64_t vaddr,
                       struct pick *best) {
  if (tab->sh_entsize != sizeof(Elf64_Sym) || !in_file(im->len, tab->sh_offset, tab->sh_size) ||
      tab->sh_link >= im->shnum)
    return;
  Elf64_Shdr str;
  section(im, tab->sh_link, &str);
  if (str.sh_type != SHT_STRTAB || !in_file(im->len, str.sh_offset, str.sh_size)) return;
  const unsigned char *names = im->p + str.sh_offset;
  uint64_t n = tab->sh_size / sizeof(Elf64_Sym);
  for (uint64_t i = 1; i < n; i++) { /* symbol 0 is the null symbol */
    Elf64_Sym s;
    memcpy(&s, im->p + tab->sh_offset + i * sizeof s, sizeof s);
    int r = rank_of(im, &s, vaddr);
    /* the best kind of answer; among equals the closest, and the first of aliases */
    if (r == RANK_NONE || r < best->rank || (r == best->rank && s.st_value <= best->value))
      continue;
    /* the name must end inside its string table, and not be a mapping symbol */
    if (s.st_name >= str.sh_size || names[s.st_name] == '$' ||
        !memchr(names + s.st_name, 0, str.sh_size - s.st_name))
      continue;
    *best = (struct pick){.rank = r, .value = s.st_value, .name = str.sh_offset + s.st_name};
  }
}

int symtab_find(const void *img, size_t len, uint64_t vaddr, char *name, size_t namelen,
                uint64_t *off) {
  struct image im;
  int rc = open_image(img, len, &im);
  if (rc) return rc;
  static const uint32_t order[2] = {SHT_SYMTAB, SHT_DYNSYM};
  for (int k = 0; k < 2; k++) {
    struct pick best = {.rank = RANK_NONE};
    for (uint64_t i = 0; i < im.shnum; i++) {
      Elf64_Shdr sh;
      section(&im, i, &sh);
      if (sh.sh_type == order[k]) scan_table(&im, &sh, vaddr, &best);
    }
    if (best.rank == RANK_NONE) continue;
    if (name && namelen) {
      const char *s = (const char *)im.p + best.name; /* NUL-terminated inside: checked */
      size_t n = strlen(s);
      if (n >= namelen) n = namelen - 1;
      memcpy(name, s, n);
      name[n] = 0;
    }
    if (off) *off = vaddr - best.value;
    return 0;
  }
  return -ENOENT;
}

// ---- mapped files ----

#define SYMTAB_PATH_MAX 512

struct module {
  char path[SYMTAB_PATH_MAX]; /* "" = free slot */
  const void *map;            /* NULL: the file could not be used (err) */
  size_t len;
  int err;
  int refs;           /* atomic: lookups reading map now */
  unsigned long used; /* under cache_lock: when last looked up */
};

static struct module cache[SYMTAB_MODULES];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long cache_clock;

/* path mapped read-only into *map, *len; 0 or -errno. */
static int map_file(const char *path, const void **map, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return -errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st))
    rc = -errno;
  else if (!S_ISREG(st.st_mode))
    rc = -ENOEXEC;
  else if (st.st_size < (off_t)sizeof(Elf64_Ehdr))
    rc = -ENOEXEC;
  if (!rc) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
      rc = -errno;
    else
      *map = m, *len = (size_t)st.st_size;
  }
  close(fd);
  return rc;
}

static struct module *find_locked(const char *path) {
  for (int i = 0; i < SYMTAB_MODULES; i++)
    if (cache[i].path[0] && !strcmp(cache[i].path, path)) return &cache[i];
  return NULL;
}

/* A slot for a new module: a free one, else the least recently used one
 * nobody reads now (unmapped here); NULL when all are being read. */
static struct module *slot_locked(void) {
  struct module *victim = NULL;
  for (int i = 0; i < SYMTAB_MODULES; i++) {
    if (!cache[i].path[0]) return &cache[i];
    if (__atomic_load_n(&cache[i].refs, __ATOMIC_ACQUIRE)) continue;
    if (!victim || cache[i].used < victim->used) victim = &cache[i];
  }
  if (victim && victim->map) munmap((void *)victim->map, victim->len);
  if (victim) victim->path[0] = 0;
  return victim;
}

/* Takes a reference on m and marks it used.  Caller holds cache_lock. */
static struct module *take_locked(struct module *m) {
  __atomic_add_fetch(&m->refs, 1, __ATOMIC_ACQ_REL);
  m->used = ++cache_clock;
  return m;
}

/* The cached module of path, with a reference taken, or NULL (cache busy,
 * or full of modules being read): then the caller maps the file itself.
 * Never waits for the lock: a thread that forked while holding it would
 * otherwise stop the child's report. */
static struct module *acquire(const char *path) {
  size_t plen = strlen(path);
  if (plen >= SYMTAB_PATH_MAX || vx_mutex_trylock(&cache_lock, VX_RANK_SYMTAB)) return NULL;
  struct module *m = find_locked(path);
  if (m) m = take_locked(m);
  vx_mutex_unlock(&cache_lock, VX_RANK_SYMTAB);
  if (m) return m;
  /* Opened and mapped with the lock released; a racing lookup of the same
   * file may map it too: the second to insert unmaps its copy. */
  const void *map = NULL;
  size_t len = 0;
  int err = map_file(path, &map, &len);
  if (!vx_mutex_trylock(&cache_lock, VX_RANK_SYMTAB)) {
    m = find_locked(path);
    if (!m && (m = slot_locked())) {
      memcpy(m->path, path, plen + 1);
      m->map = map, m->len = len, m->err = err;
      map = NULL; /* the cache's now */
    }
    if (m) m = take_locked(m);
    vx_mutex_unlock(&cache_lock, VX_RANK_SYMTAB);
  }
  if (map) munmap((void *)map, len);
  return m;
}

int symtab_lookup(const char *path, uintptr_t bias, uintptr_t addr, char *name, size_t namelen,
                  uint64_t *off) {
  if (!path || !path[0] || addr < bias) return -ENOENT;
  uint64_t vaddr = (uint64_t)(addr - bias);
  struct module *m = acquire(path);
  if (m) {
    int rc = m->map ? symtab_find(m->map, m->len, vaddr, name, namelen, off) : m->err;
    __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL);
    return rc;
  }
  const void *map;
  size_t len;
  int rc = map_file(path, &map, &len);
  if (rc) return rc;
  rc = symtab_find(map, len, vaddr, name, namelen, off);
  munmap((void *)map, len);
  return rc;
}
