/* cli_libpath.h: locating libvx.so for `vx run` and `vx doctor`. */
#ifndef VX_TOOLS_CLI_LIBPATH_H
#define VX_TOOLS_CLI_LIBPATH_H

#include <stddef.h>

/* The real path of libvx.so into out: <dir of vx>/libvx.so, then
 * <dir of vx>/../lib{,64,x32}/libvx.so and ../lib/<multiarch>/libvx.so, then the
 * install libdir compiled in.  Returns 0 or -ENOENT. */
int vx_find_libvx(char *out, size_t len);
/* The install libdir compiled in (CMAKE_INSTALL_FULL_LIBDIR). */
const char *vx_install_libdir(void);

/* LD_PRELOAD value with lib in it once: after any sanitizer runtime of old
 * (which must stay first), before everything else of old (kept in order).
 * Returns a malloc'd string, or NULL on ENOMEM. */
char *vx_preload_value(const char *lib, const char *old);

#endif
