/* test_symtab: the ELF symbol-table reader (obs/symtab.c) on this test
 * program's own file, whole, truncated and with bogus offsets and sizes:
 * a static function is named; a broken file is a clean "no symbol". */
#include <check.h>

#include "vx_check.h"
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symtab.h"

/* Not exported: only the file's .symtab names it. */
static __attribute__((noinline)) int symtab_probe_fn(int x) {
  __asm__ volatile("" ::: "memory");
  return x * 3 + 1;
}

static unsigned char *self_img;
static size_t self_len;
static uintptr_t self_bias;

/* This program's file and load bias, before the tests (0 or -1). */
static int load_self(void) {
  FILE *f = fopen("/proc/self/exe", "rb");
  if (!f || fseek(f, 0, SEEK_END)) return -1;
  long n = ftell(f);
  rewind(f);
  self_len = n > 0 ? (size_t)n : 0;
  self_img = malloc(self_len ? self_len : 1);
  int ok = self_img && fread(self_img, 1, self_len, f) == self_len;
  fclose(f);
  Dl_info di;
  struct link_map *lm = NULL;
  if (!ok || !dladdr1((void *)symtab_probe_fn, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
    return -1;
  self_bias = (uintptr_t)lm->l_addr;
  return 0;
}

static uint64_t probe_vaddr(void) {
  return (uint64_t)((uintptr_t)symtab_probe_fn - self_bias) + 5;
}

/* symtab_find over an exact-size copy of img[0, len) (ASan sees overreads). */
static int find_in(const unsigned char *img, size_t len, char *name, size_t n, uint64_t *off) {
  unsigned char *copy = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(copy);
  memcpy(copy, img, len);
  int rc = symtab_find(copy, len, probe_vaddr(), name, n, off);
  free(copy);
  return rc;
}

static Elf64_Ehdr self_ehdr(void) {
  Elf64_Ehdr eh;
  memcpy(&eh, self_img, sizeof eh);
  return eh;
}

START_TEST(names_a_static_function) {
  char name[64];
  uint64_t off = 0;
  ck_assert_int_eq(symtab_probe_fn(1), 4);
  ck_assert_int_eq(find_in(self_img, self_len, name, sizeof name, &off), 0);
  ck_assert_str_eq(name, "symtab_probe_fn");
  ck_assert_uint_eq(off, 5);
  /* through the cache, twice, with the load bias */
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(symtab_lookup("/proc/self/exe", self_bias, (uintptr_t)symtab_probe_fn + 2,
                                   name, sizeof name, &off),
                     0);
    ck_assert_str_eq(name, "symtab_probe_fn");
    ck_assert_uint_eq(off, 2);
  }
  /* a short buffer gets a cut, terminated name */
  ck_assert_int_eq(find_in(self_img, self_len, name, 7, &off), 0);
  ck_assert_str_eq(name, "symtab");
}
END_TEST

START_TEST(truncated_is_no_symbol) {
  Elf64_Ehdr eh = self_ehdr();
  uint64_t shend = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
  ck_assert_uint_le(shend, self_len);
  char name[64] = "untouched";
  uint64_t off;
  const size_t cuts[] = {0, 1, 4, 16, 63, 64, 65, 1000, self_len / 4, self_len / 2,
                         eh.e_shoff, eh.e_shoff + 1, eh.e_shoff + 64, shend - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    if (cuts[i] >= shend) continue;
    int rc = find_in(self_img, cuts[i], name, sizeof name, &off);
    ck_assert_msg(rc == -ENOENT || rc == -EINVAL, "cut at %zu: %d", cuts[i], rc);
    ck_assert_str_eq(name, "untouched");
  }
  /* every length, near the section headers and the symbol table */
  for (size_t len = eh.e_shoff; len < shend; len += 7)
    ck_assert_int_ne(find_in(self_img, len, name, sizeof name, &off), 0);
  ck_assert_int_eq(symtab_find(NULL, 100, 0, name, sizeof name, &off), -EINVAL);
}
END_TEST

/* A copy of image from (self_len bytes) with every section of type `type`
 * changed by fn. */
static unsigned char *with_sections_of(const unsigned char *from, uint32_t type,
                                       void (*fn)(Elf64_Shdr *)) {
  unsigned char *img = malloc(self_len);
  ck_assert_ptr_nonnull(img);
  memcpy(img, from, self_len);
  Elf64_Ehdr eh = self_ehdr();
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, img + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type == type) fn(&sh);
    memcpy(img + eh.e_shoff + i * sizeof sh, &sh, sizeof sh);
  }
  return img;
}

static unsigned char *with_sections(uint32_t type, void (*fn)(Elf64_Shdr *)) {
  return with_sections_of(self_img, type, fn);
}

static void far_offset(Elf64_Shdr *sh) {
  sh->sh_offset = (uint64_t)self_len + 4096;
}
static void wrapping_size(Elf64_Shdr *sh) {
  sh->sh_size = UINT64_MAX - 100;
}
static void near_end(Elf64_Shdr *sh) {
  sh->sh_offset = (uint64_t)self_len - 8;
}
static void bad_link(Elf64_Shdr *sh) {
  sh->sh_link = 9999;
}
static void bad_entsize(Elf64_Shdr *sh) {
  sh->sh_entsize = 7;
}
static void empty(Elf64_Shdr *sh) {
  sh->sh_size = 0;
}

START_TEST(bogus_offsets_are_no_symbol) {
  static void (*const sym_bugs[])(Elf64_Shdr *) = {far_offset, wrapping_size, near_end, bad_link,
                                                   bad_entsize};
  static void (*const str_bugs[])(Elf64_Shdr *) = {far_offset, wrapping_size, near_end, empty};
  char name[64];
  uint64_t off;
  for (size_t b = 0; b < sizeof sym_bugs / sizeof *sym_bugs; b++) {
    /* both tables broken: .dynsym would otherwise answer (or not) for .symtab */
    unsigned char *img = with_sections(SHT_SYMTAB, sym_bugs[b]);
    unsigned char *both = with_sections_of(img, SHT_DYNSYM, sym_bugs[b]);
    ck_assert_msg(find_in(both, self_len, name, sizeof name, &off) == -ENOENT, "symtab bug %zu", b);
    free(img);
    free(both);
  }
  for (size_t b = 0; b < sizeof str_bugs / sizeof *str_bugs; b++) {
    unsigned char *img = with_sections(SHT_STRTAB, str_bugs[b]);
    ck_assert_msg(find_in(img, self_len, name, sizeof name, &off) == -ENOENT, "strtab bug %zu", b);
    free(img);
  }
  /* the header's own offsets and counts */
  unsigned char *img = malloc(self_len);
  const uint64_t shoffs[] = {self_len - 8, self_len, UINT64_MAX - 10};
  for (size_t i = 0; i < sizeof shoffs / sizeof *shoffs; i++) {
    memcpy(img, self_img, self_len);
    Elf64_Ehdr eh = self_ehdr();
    eh.e_shoff = shoffs[i];
    memcpy(img, &eh, sizeof eh);
    int rc = find_in(img, self_len, name, sizeof name, &off);
    ck_assert_msg(rc == -ENOENT, "e_shoff %llu: %d", (unsigned long long)shoffs[i], rc);
  }
  memcpy(img, self_img, self_len); /* 0 sections here: the count in section 0, made huge */
  Elf64_Ehdr eh = self_ehdr();
  eh.e_shnum = 0;
  memcpy(img, &eh, sizeof eh);
  Elf64_Shdr s0;
  memcpy(&s0, img + eh.e_shoff, sizeof s0);
  s0.sh_size = UINT64_MAX / 2;
  memcpy(img + eh.e_shoff, &s0, sizeof s0);
  ck_assert_int_eq(find_in(img, self_len, name, sizeof name, &off), -ENOENT);
  memcpy(img, self_img, self_len);
  eh = self_ehdr();
  eh.e_shentsize = 32;
  memcpy(img, &eh, sizeof eh);
  ck_assert_int_eq(find_in(img, self_len, name, sizeof name, &off), -ENOENT);
  memcpy(img, self_img, self_len); /* not an ELF, or not a 64-bit one */
  img[1] = 'X';
  ck_assert_int_eq(find_in(img, self_len, name, sizeof name, &off), -EINVAL);
  memcpy(img, self_img, self_len);
  img[EI_CLASS] = ELFCLASS32;
  ck_assert_int_eq(find_in(img, self_len, name, sizeof name, &off), -EINVAL);
  free(img);
}
END_TEST

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(p, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

START_TEST(files_broken_missing_and_many) {
  char dir[] = "/tmp/vx-symtab-XXXXXX", path[64], name[64];
  uint64_t off;
  uintptr_t at = (uintptr_t)symtab_probe_fn + 5;
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/half", dir);
  write_file(path, self_img, self_len / 2);
  ck_assert_int_eq(symtab_lookup(path, self_bias, at, name, sizeof name, &off), -ENOENT);
  unlink(path);
  snprintf(path, sizeof path, "%s/tiny", dir);
  write_file(path, self_img, 10);
  ck_assert_int_lt(symtab_lookup(path, self_bias, at, name, sizeof name, &off), 0);
  unlink(path);
  snprintf(path, sizeof path, "%s/none", dir);
  ck_assert_int_eq(symtab_lookup(path, self_bias, at, name, sizeof name, &off), -ENOENT);
  ck_assert_int_lt(symtab_lookup(dir, self_bias, at, name, sizeof name, &off), 0);
  ck_assert_int_lt(symtab_lookup("/dev/null", self_bias, at, name, sizeof name, &off), 0);
  ck_assert_int_eq(symtab_lookup("", 0, at, name, sizeof name, &off), -ENOENT);
  ck_assert_int_eq(symtab_lookup("/proc/self/exe", at + 1, at, name, sizeof name, &off), -ENOENT);
  /* more files than the cache keeps: each still answers, the first again at the end */
  enum { N = SYMTAB_MODULES + 4 };
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < N; i++) {
      snprintf(path, sizeof path, "%s/copy%d", dir, i);
      if (!round) write_file(path, self_img, self_len);
      memset(name, 0, sizeof name);
      ck_assert_int_eq(symtab_lookup(path, self_bias, at, name, sizeof name, &off), 0);
      ck_assert_str_eq(name, "symtab_probe_fn");
      ck_assert_uint_eq(off, 5);
    }
  for (int i = 0; i < N; i++) {
    snprintf(path, sizeof path, "%s/copy%d", dir, i);
    unlink(path);
  }
  rmdir(dir);
}
END_TEST

int main(void) {
  if (load_self()) {
    fprintf(stderr, "test_symtab: cannot read /proc/self/exe\n");
    return 1;
  }
  Suite *s = suite_create("symtab");
  TCase *tc = tcase_create("reader");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, names_a_static_function);
  tcase_add_test(tc, truncated_is_no_symbol);
  tcase_add_test(tc, bogus_offsets_are_no_symbol);
  tcase_add_test(tc, files_broken_missing_and_many);
  suite_add_tcase(s, tc);
  int rc = vx_check_run(s, 0);
  free(self_img);
  return rc;
}
