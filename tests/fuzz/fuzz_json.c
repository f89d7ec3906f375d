/* fuzz_json.c: libFuzzer target for the report JSON parser (tools/json.c).
 * Every input is a tree or an error with an offset; trees are walked and freed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"

/* Walks a tree checking what the header promises; returns the node count. */
static size_t walk(const vx_json_t *v, int depth, int in_object) {
  if (depth > VX_JSON_MAX_DEPTH + 1) __builtin_trap();
  if (in_object && !v->key) __builtin_trap();
  size_t n = 1, kids = 0;
  switch (v->type) {
  case VX_JSON_STR:
    if (!v->str) __builtin_trap();
    (void)strlen(v->str);
    break;
  case VX_JSON_ARR:
  case VX_JSON_OBJ:
    for (const vx_json_t *c = v->child; c; c = c->next, kids++)
      n += walk(c, depth + 1, v->type == VX_JSON_OBJ);
    if (kids != v->count) __builtin_trap();
    if (v->type == VX_JSON_OBJ && v->child && vx_json_get(v, v->child->key) != v->child)
      __builtin_trap();
    break;
  default:
    break;
  }
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size ? size : 1); /* exact size: no NUL after the input */
  if (!buf) return 0;
  memcpy(buf, data, size);
  char err[128] = "";
  vx_json_t *root = vx_json_parse(buf, size, err, sizeof err);
  if (root) {
    (void)walk(root, 0, 0);
    (void)vx_json_num(vx_json_get(root, "version"), 0);
    (void)vx_json_str_or(vx_json_get(root, "command"), "");
    vx_json_free(root);
  } else if (strncmp(err, "offset ", 7) != 0) {
    __builtin_trap(); /* errors say where */
  }
  free(buf);
  return 0;
}
