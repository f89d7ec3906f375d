/* sim_fail.c: fault injection: SIMCUDA_FAIL=entry:N[+][:code],... makes the
 * Nth call (or every call from the Nth) of an exported entry point fail;
 * entry:after=trigger[:code] makes the first call of entry after the first
 * call of trigger fail, once (a wait right after a discard, say). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define SIM_FAIL_MAX 32

typedef struct fail_rule {
  char sym[96];
  unsigned long n;
  int every;
  CUresult code;
  unsigned long calls; /* atomic */
  char after[96];      /* entry:after=trigger: "" for a counted rule */
  int armed;           /* atomic: 0, 1 once trigger was called, 2 once fired */
} fail_rule;

static fail_rule rules[SIM_FAIL_MAX];
static int nrules; /* written once in sim_boot, before any reader can see it */

static CUresult default_code(const char *sym) {
  if (strstr(sym, "Alloc") || strstr(sym, "HostRegister") || strstr(sym, "MemCreate"))
    return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_ERROR_UNKNOWN;
}

static int parse_code(const char *s, CUresult *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s && *end == '\0' && v > 0) {
    *out = (CUresult)v;
    return 0;
  }
#define SIM_ERR(n)                                                             \
  if (strcmp(s, #n) == 0) {                                                    \
    *out = n;                                                                  \
    return 0;                                                                  \
  }
#include "sim_errors.def"
#undef SIM_ERR
  return -EINVAL;
}

static int parse_rule(char *tok, fail_rule *r) {
  char *c1 = strchr(tok, ':');
  if (!c1 || c1 == tok || (size_t)(c1 - tok) >= sizeof r->sym) return -EINVAL;
  memset(r, 0, sizeof *r);
  memcpy(r->sym, tok, (size_t)(c1 - tok));
  r->code = default_code(r->sym);
  if (!strncmp(c1 + 1, "after=", 6)) {
    const char *t = c1 + 7, *c2 = strchr(t, ':');
    size_t len = c2 ? (size_t)(c2 - t) : strlen(t);
    if (!len || len >= sizeof r->after) return -EINVAL;
    memcpy(r->after, t, len);
    return c2 ? parse_code(c2 + 1, &r->code) : 0;
  }
  char *end;
  unsigned long n = strtoul(c1 + 1, &end, 10);
  if (end == c1 + 1 || n == 0) return -EINVAL;
  r->n = n;
  if (*end == '+') {
    r->every = 1;
    end++;
  }
  r->code = default_code(r->sym);
  if (*end == ':') return parse_code(end + 1, &r->code);
  return *end == '\0' ? 0 : -EINVAL;
}

int sim_fail_parse(const char *spec) {
  char buf[1024];
  if (strlen(spec) >= sizeof buf) return -EINVAL;
  strcpy(buf, spec);
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (n == SIM_FAIL_MAX || parse_rule(tok, &rules[n]) != 0) return -EINVAL;
    n++;
  }
  if (n == 0) return -EINVAL;
  nrules = n;
  return 0;
}

CUresult sim_fail_check(const char *sym) {
  if (sim_boot() != 0 || nrules == 0) return CUDA_SUCCESS;
  for (int i = 0; i < nrules; i++) {
    fail_rule *r = &rules[i];
    if (r->after[0]) {
      int one = 1;
      if (!strcmp(r->after, sym) && !__atomic_load_n(&r->armed, __ATOMIC_ACQUIRE))
        __atomic_store_n(&r->armed, 1, __ATOMIC_RELEASE);
      else if (!strcmp(r->sym, sym) &&
               __atomic_compare_exchange_n(&r->armed, &one, 2, 0, __ATOMIC_ACQ_REL,
                                           __ATOMIC_ACQUIRE))
        return r->code;
      continue;
    }
    if (strcmp(r->sym, sym) != 0) continue;
    unsigned long k = __atomic_add_fetch(&r->calls, 1, __ATOMIC_RELAXED);
    if (k == r->n || (r->every && k > r->n)) return r->code;
  }
  return CUDA_SUCCESS;
}
