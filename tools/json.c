/* json.c: a strict, bounded JSON parser (RFC 8259) building a small tree.
 * Built to be fuzzed: every byte is checked, depth is capped, no recursion past it. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"

struct parser {
  const char *s;
  size_t len, pos;
  char *err;
  size_t errlen;
  int failed;
};

static void *fail(struct parser *p, const char *why) {
  if (!p->failed && p->err && p->errlen) snprintf(p->err, p->errlen, "offset %zu: %s", p->pos, why);
  p->failed = 1;
  return NULL;
}

static void skip_ws(struct parser *p) {
  while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos])
    p->pos++;
}

static int peek(struct parser *p) {
  return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static vx_json_t *node(struct parser *p, vx_json_type_t t) {
  vx_json_t *v = calloc(1, sizeof *v);
  if (!v) return fail(p, "out of memory");
  v->type = t;
  return v;
}

static int literal(struct parser *p, const char *word) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n)) return 0;
  p->pos += n;
  return 1;
}

// ---- numbers ----

static size_t digits(struct parser *p) {
  size_t n = 0;
  while (peek(p) >= '0' && peek(p) <= '9')
    p->pos++, n++;
  return n;
}

static vx_json_t *number(struct parser *p) {
  size_t start = p->pos;
  if (peek(p) == '-') p->pos++;
  if (peek(p) == '0')
    p->pos++;
  else if (!digits(p))
    return fail(p, "bad number");
  if (peek(p) == '.' && (p->pos++, !digits(p))) return fail(p, "bad fraction");
  if (peek(p) == 'e' || peek(p) == 'E') {
    p->pos++;
    if (peek(p) == '+' || peek(p) == '-') p->pos++;
    if (!digits(p)) return fail(p, "bad exponent");
  }
  char buf[64];
  size_t n = p->pos - start;
  if (n >= sizeof buf) return fail(p, "number too long");
  memcpy(buf, p->s + start, n);
  buf[n] = 0;
  vx_json_t *v = node(p, VX_JSON_NUM);
  if (v) v->num = strtod(buf, NULL);
  return v;
}

// ---- strings ----

static int hex4(struct parser *p, unsigned *out) {
  *out = 0;
  for (int i = 0; i < 4; i++) {
    int c = peek(p);
    unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                 : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                 : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                        : 16u;
    if (d == 16) return -1;
    *out = *out * 16 + d;
    p->pos++;
  }
  return 0;
}

static size_t utf8(unsigned cp, char *o) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3f)),
           o[2] = (char)(0x80 | (cp & 0x3f)), 3;
  o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* \uXXXX, with a surrogate pair when needed; 0 or -1. */
static int unicode(struct parser *p, char *o, size_t *n) {
  unsigned cp, lo;
  if (hex4(p, &cp)) return -1;
  if (cp >= 0xdc00 && cp <= 0xdfff) return -1;
  if (cp >= 0xd800 && cp <= 0xdbff) {
    if (!literal(p, "\\u") || hex4(p, &lo) || lo < 0xdc00 || lo > 0xdfff) return -1;
    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
  }
  if (cp == 0) return -1;
  *n += utf8(cp, o + *n);
  return 0;
}

static int escape(struct parser *p, char *o, size_t *n) {
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  int c = peek(p);
  p->pos++;
  const char *k = c > 0 ? strchr(from, c) : NULL;
  if (k && *k) {
    o[(*n)++] = to[k - from];
    return 0;
  }
  return c == 'u' ? unicode(p, o, n) : -1;
}

/* A UTF-8 sequence starting with lead byte c (already consumed): shortest
 * form, no surrogates, at most U+10FFFF.  Copied to o; 0 or -1. */
static int utf8_seq(struct parser *p, int c, char *o, size_t *n) {
  int more = c >= 0xc2 && c <= 0xdf   ? 1
             : c >= 0xe0 && c <= 0xef ? 2
             : c >= 0xf0 && c <= 0xf4 ? 3
                                      : -1;
  if (more < 0 || p->len - p->pos < (size_t)more) return -1;
  const unsigned char *u = (const unsigned char *)p->s + p->pos;
  for (int i = 0; i < more; i++)
    if ((u[i] & 0xc0) != 0x80) return -1;
  if ((c == 0xe0 && u[0] < 0xa0) || (c == 0xed && u[0] > 0x9f) || (c == 0xf0 && u[0] < 0x90) ||
      (c == 0xf4 && u[0] > 0x8f))
    return -1;
  o[(*n)++] = (char)c;
  memcpy(o + *n, u, (size_t)more);
  *n += (size_t)more;
  p->pos += (size_t)more;
  return 0;
}

static char *string(struct parser *p) {
  if (peek(p) != '"') return fail(p, "expected a string");
  p->pos++;
  size_t cap = 16, n = 0;
  char *o = malloc(cap);
  while (o) {
    int c = peek(p);
    if (c < 0 || c < 0x20) break;
    if (n + 8 > cap) {
      char *g = realloc(o, cap *= 2);
      if (!g) break;
      o = g;
    }
    p->pos++;
    if (c == '"') {
      o[n] = 0;
      return o;
    }
    if (c == '\\') {
      if (escape(p, o, &n)) break;
    } else if (c < 0x80) {
      o[n++] = (char)c;
    } else if (utf8_seq(p, c, o, &n)) {
      break;
    }
  }
  const char *why = o ? "bad string" : "out of memory";
  free(o);
  return fail(p, why);
}

// ---- values ----

static vx_json_t *value(struct parser *p, int depth);

static int append(vx_json_t *parent, vx_json_t **tail, vx_json_t *v) {
  if (*tail)
    (*tail)->next = v;
  else
    parent->child = v;
  *tail = v;
  parent->count++;
  return 0;
}

/* An object member's name and the ':' after it; NULL on error. */
static char *member_key(struct parser *p) {
  skip_ws(p);
  char *key = string(p);
  skip_ws(p);
  if (key && peek(p) != ':') {
    free(key);
    return fail(p, "expected ':'");
  }
  p->pos += key != NULL;
  return key;
}

/* Array or object after its opening bracket. */
static vx_json_t *container(struct parser *p, int depth, int obj) {
  vx_json_t *c = node(p, obj ? VX_JSON_OBJ : VX_JSON_ARR), *tail = NULL;
  char close = obj ? '}' : ']';
  skip_ws(p);
  if (c && peek(p) == close) return p->pos++, c;
  while (c) {
    char *key = NULL;
    if (obj && !(key = member_key(p))) break;
    vx_json_t *v = value(p, depth + 1);
    if (!v) {
      free(key);
      break;
    }
    v->key = key;
    append(c, &tail, v);
    skip_ws(p);
    int ch = peek(p);
    p->pos++;
    if (ch == close) return c;
    if (ch != ',') {
      p->pos--;
      fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
      break;
    }
  }
  vx_json_free(c);
  return NULL;
}

static vx_json_t *value(struct parser *p, int depth) {
  if (depth > VX_JSON_MAX_DEPTH) return fail(p, "nested too deeply");
  skip_ws(p);
  int c = peek(p);
  vx_json_t *v;
  switch (c) {
  case '{':
  case '[':
    p->pos++;
    return container(p, depth, c == '{');
  case '"':
    if (!(v = node(p, VX_JSON_STR))) return NULL;
    if (!(v->str = string(p))) return vx_json_free(v), NULL;
    return v;
  case 't':
  case 'f':
    if (!literal(p, c == 't' ? "true" : "false")) return fail(p, "bad literal");
    if ((v = node(p, VX_JSON_BOOL))) v->boolean = c == 't';
    return v;
  case 'n':
    return literal(p, "null") ? node(p, VX_JSON_NULL) : fail(p, "bad literal");
  default:
    return c == '-' || (c >= '0' && c <= '9') ? number(p) : fail(p, "unexpected character");
  }
}

vx_json_t *vx_json_parse(const char *buf, size_t len, char *err, size_t errlen) {
  struct parser p = {buf, len, 0, err, errlen, 0};
  vx_json_t *v = value(&p, 0);
  skip_ws(&p);
  if (v && p.pos != len) {
    fail(&p, "trailing characters");
    vx_json_free(v);
    return NULL;
  }
  return v;
}

void vx_json_free(vx_json_t *v) {
  while (v) {
    vx_json_t *next = v->next;
    vx_json_free(v->child);
    free(v->str);
    free(v->key);
    free(v);
    v = next;
  }
}

const vx_json_t *vx_json_get(const vx_json_t *v, const char *key) {
  if (!v || v->type != VX_JSON_OBJ) return NULL;
  for (const vx_json_t *c = v->child; c; c = c->next)
    if (!strcmp(c->key, key)) return c;
  return NULL;
}

double vx_json_num(const vx_json_t *v, double def) {
  return v && v->type == VX_JSON_NUM ? v->num : def;
}

const char *vx_json_str_or(const vx_json_t *v, const char *def) {
  return v && v->type == VX_JSON_STR ? v->str : def;
}
