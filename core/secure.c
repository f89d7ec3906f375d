/* Secure-execution detection (setuid programs are left alone): the kernel's
 * AT_SECURE auxiliary-vector entry, the same test glibc uses for LD_PRELOAD. */
#include "secure.h"

#include <sys/auxv.h>

int vx_secure_exec(void) {
  return getauxval(AT_SECURE) != 0;
}
