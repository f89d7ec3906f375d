/* fuzz_symtab.c: libFuzzer target for the ELF symbol-table reader (obs/symtab.c).
 * Any bytes are a name or a clean "no symbol", never a read outside the input. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symtab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size copy, so ASan sees any read past the file's end */
  void *img = malloc(size ? size : 1);
  if (!img) return 0;
  memcpy(img, data, size);
  uint64_t tail = 0;
  if (size >= 8) memcpy(&tail, data + size - 8, 8); /* an address the input chooses */
  const uint64_t at[] = {0, 0x40, 0x1000, 0x401000, tail, UINT64_MAX};
  for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
    char name[32];
    uint64_t off = 0;
    memset(name, 'x', sizeof name);
    int rc = symtab_find(img, size, at[i], name, sizeof name, &off);
    if (rc == 0 && (!memchr(name, 0, sizeof name) || off > at[i])) __builtin_trap();
    if (rc != 0 && rc != -ENOENT && rc != -EINVAL) __builtin_trap();
  }
  free(img);
  return 0;
}
