/* cli_static.c: a statically linked program (built with -static): LD_PRELOAD
 * cannot reach it, so `vx run` must warn, and it runs under any libvx build.
 * `env` prints LD_PRELOAD and VX_*; `exit N` exits N; `kill S` raises S;
 * `pid` prints its pid (vx run must exec it, keeping its own pid). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  if (!strcmp(what, "env")) {
    for (char **e = environ; *e; e++)
      if (!strncmp(*e, "VX_", 3) || !strncmp(*e, "LD_PRELOAD=", 11) || !strncmp(*e, "OTHER=", 6))
        puts(*e);
  } else if (!strcmp(what, "exit") && argc > 2) {
    return atoi(argv[2]);
  } else if (!strcmp(what, "kill") && argc > 2) {
    fflush(stdout);
    raise(atoi(argv[2]));
    return 99;
  } else if (!strcmp(what, "pid")) {
    printf("%d\n", (int)getpid());
  }
  return 0;
}
