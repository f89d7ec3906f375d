/* libpath.c: where libvx.so is: next to the vx binary (build tree), in
 * ../lib, ../lib64 or ../lib/<multiarch> of an installed vx, or the install libdir compiled in. */
#include "cli_libpath.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef VX_INSTALL_LIBDIR
#define VX_INSTALL_LIBDIR "/usr/local/lib"
#endif

static int try_path(const char *p, char *out, size_t len) {
  char real[PATH_MAX];
  if (access(p, R_OK) || !realpath(p, real) || strlen(real) >= len) return -ENOENT;
  strcpy(out, real);
  return 0;
}

static int try_glob(const char *pattern, char *out, size_t len) {
  glob_t g;
  int rc = -ENOENT;
  if (glob(pattern, 0, NULL, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc && rc; i++)
      rc = try_path(g.gl_pathv[i], out, len);
    globfree(&g);
  }
  return rc;
}

int vx_find_libvx(char *out, size_t len) {
  char exe[PATH_MAX], p[PATH_MAX + 32];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    *slash = 0;
    snprintf(p, sizeof p, "%s/libvx.so", exe);
    if (!try_path(p, out, len)) return 0;
    snprintf(p, sizeof p, "%s/../lib*/libvx.so", exe);
    if (!try_glob(p, out, len)) return 0;
    snprintf(p, sizeof p, "%s/../lib/*/libvx.so", exe);
    if (!try_glob(p, out, len)) return 0;
  }
  return try_path(VX_INSTALL_LIBDIR "/libvx.so", out, len);
}

const char *vx_install_libdir(void) {
  return VX_INSTALL_LIBDIR;
}

static int is_sanitizer(const char *path) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  return !strncmp(base, "libasan", 7) || !strncmp(base, "libtsan", 7) ||
         !strncmp(base, "libubsan", 8) || !strncmp(base, "libclang_rt.", 12);
}

char *vx_preload_value(const char *lib, const char *old) {
  size_t cap = strlen(lib) + (old ? strlen(old) : 0) + 4;
  char *out = calloc(1, cap), *san = calloc(1, cap), *rest = calloc(1, cap);
  char *copy = strdup(old ? old : ""), *save = NULL;
  if (!out || !san || !rest || !copy) {
    free(out), free(san), free(rest), free(copy);
    return NULL;
  }
  for (char *t = strtok_r(copy, ": ", &save); t; t = strtok_r(NULL, ": ", &save)) {
    char real[PATH_MAX];
    if (!strcmp(t, lib) || (realpath(t, real) && !strcmp(real, lib)))
      continue; /* already there: added once below */
    char *dst = is_sanitizer(t) ? san : rest;
    if (*dst) strcat(dst, ":");
    strcat(dst, t);
  }
  snprintf(out, cap, "%s%s%s%s%s", san, *san ? ":" : "", lib, *rest ? ":" : "", rest);
  free(copy), free(san), free(rest);
  return out;
}
