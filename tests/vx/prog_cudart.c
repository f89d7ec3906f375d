/* vx_cudart: the real libcudart's start-up lookups through
 * cuGetProcAddress_v2 (it cannot run further on the simulator) get vx's
 * hook for every hooked variant and the real entry for everything else,
 * as recorded by the libvxspy.so preload. */
#include <string.h>
#include <unistd.h>

#include "vxt.h"

int cudaGetDeviceCount(int *count); /* from libcudart: no runtime headers needed */

static int worker(void) {
  int n = -1;
  int r = cudaGetDeviceCount(&n); /* starts the runtime: its lookups happen here */
  printf("cudaGetDeviceCount = %d (%d devices)\n", r, n);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker();
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  const char *spy = getenv("VXT_SPY"), *pre = getenv("LD_PRELOAD");
  VXT_ASSERT(spy && pre);
  /* the spy goes right before libvx.so (after a sanitizer runtime) */
  char preload[4096] = "", tmp[4096], *save;
  snprintf(tmp, sizeof tmp, "%s", pre);
  for (char *t = strtok_r(tmp, ": ", &save); t; t = strtok_r(NULL, ": ", &save))
    snprintf(preload + strlen(preload), sizeof preload - strlen(preload), "%s%s%s%s",
             preload[0] ? ":" : "", strstr(t, "libvx.so") ? spy : "",
             strstr(t, "libvx.so") ? ":" : "", t);
  char env_pre[4200], log[256], env_log[300];
  snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", preload);
  vxt_tmpname(log, sizeof log, ".spy");
  snprintf(env_log, sizeof env_log, "VXSPY_LOG=%s", log);
  const char *env[] = {env_pre, env_log, NULL};
  static vxt_run_t r;
  VXT_ASSERT(vxt_run(&r, 1, env, NULL) == 0);
  VXT_ASSERT(r.status == 0, "status %d\n%s%s", r.status, r.out, r.err);
  char *text = vxt_read_file(log);
  VXT_ASSERT(text, "no spy log: %s%s", r.out, r.err);
  unlink(log);
  unsigned long lookups, hooked, mismatches;
  VXT_ASSERT(
      sscanf(text, "lookups %lu hooked %lu mismatches %lu", &lookups, &hooked, &mismatches) == 3);
  VXT_ASSERT(mismatches == 0, "%s", text);
  VXT_ASSERT(lookups >= 100 && hooked >= 10, "too few lookups observed: %s", text);
  printf("libcudart: %lu lookups, %lu handed vx's hook, all as expected (%s)", lookups, hooked,
         r.out);
  free(text);
  return 0;
}
