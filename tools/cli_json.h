/* cli_json.h: a small strict JSON parser (RFC 8259) for `vx report`: bounded
 * depth and size, no extensions; every input is either a tree or an error. */
#ifndef VX_TOOLS_CLI_JSON_H
#define VX_TOOLS_CLI_JSON_H

#include <stddef.h>

#define VX_JSON_MAX_DEPTH 64

typedef enum {
  VX_JSON_NULL,
  VX_JSON_BOOL,
  VX_JSON_NUM,
  VX_JSON_STR,
  VX_JSON_ARR,
  VX_JSON_OBJ
} vx_json_type_t;

typedef struct vx_json {
  vx_json_type_t type;
  int boolean;
  double num;
  char *str;                    /* STR: UTF-8, NUL-terminated (\u0000 is rejected) */
  char *key;                    /* name of this member when the parent is an object */
  struct vx_json *child, *next; /* ARR/OBJ: first element; siblings */
  size_t count;                 /* ARR/OBJ: number of elements */
} vx_json_t;

/* Parses exactly one JSON value (surrounding whitespace allowed) from
 * buf[0..len).  Returns the tree (free with vx_json_free), or NULL with
 * "offset N: reason" in err.  Nesting deeper than VX_JSON_MAX_DEPTH fails. */
vx_json_t *vx_json_parse(const char *buf, size_t len, char *err, size_t errlen);
void vx_json_free(vx_json_t *v);
/* Member key of an object (the first one), or NULL (also if v is no object). */
const vx_json_t *vx_json_get(const vx_json_t *v, const char *key);
/* The number v holds, or def if v is NULL or not a number. */
double vx_json_num(const vx_json_t *v, double def);
/* The string v holds, or def. */
const char *vx_json_str_or(const vx_json_t *v, const char *def);

#endif
