/* Tables generated from hooks.def: names, base names, families, stream
 * variants and vx's hook addresses, plus the lookups dlsym and cuGetProcAddress use. */
#include "hooks.h"

#include <string.h>

static const struct {
  const char *name, *base;
  int family;
  void *fn;
} hook_table[VX_HOOK_COUNT] = {
#define VX_HOOK(fam, name, stream, base, ret, params) {#name, base, VX_FAMILY_##fam, (void *)&name},
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
};

const unsigned char vx_hook_ptds_v[VX_HOOK_COUNT] = {
#define VX_HOOK(fam, name, stream, base, ret, params) VX_HOOK_PTDS(name),
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
};

static int hook_ok(int id) {
  return id >= 0 && id < VX_HOOK_COUNT;
}

int vx_hook_family(int id) {
  return hook_ok(id) ? hook_table[id].family : -1;
}
void *vx_hook_fn(int id) {
  return hook_ok(id) ? hook_table[id].fn : NULL;
}

int vx_hook_find(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < VX_HOOK_COUNT; i++)
    if (!strcmp(hook_table[i].name, name)) return i;
  return -1;
}

/* Names whose lookup the driver answers with another entry point:
 * cudart asks for "cuGraphInstantiate" and, at 12000+, gets
 * cuGraphInstantiateWithFlags.  Safe, since the match is by pointer too. */
static const char *base_alias(const char *base) {
  return !strcmp(base, "cuGraphInstantiate") ? "cuGraphInstantiateWithFlags" : base;
}

void *vx_hook_for_real(const char *base, const void *real) {
  if (!base || !real) return NULL;
  base = base_alias(base);
  for (int i = 0; i < VX_HOOK_COUNT; i++)
    if (hook_table[i].family == VX_FAMILY_CU && vx_real_v[i] == real &&
        !strcmp(hook_table[i].base, base))
      return hook_table[i].fn;
  return NULL;
}
