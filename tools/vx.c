/* vx: the command-line tool.  Dispatches to the subcommands listed in
 * commands.def; `vx help` lists them. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

#ifndef VX_VERSION
#define VX_VERSION "unknown"
#endif

struct vx_command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
};

static const struct vx_command commands[] = {
#define VX_COMMAND(name, fn, help) {#name, fn, help},
#include "commands.def"
#undef VX_COMMAND
};

static int usage(FILE *out) {
  fprintf(out, "usage: vx COMMAND [ARGS...]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
  fprintf(out, "\n`vx COMMAND --help` describes one command; `vx --version` prints the version.\n");
  return out == stdout ? 0 : 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage(stderr);
  if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
    return usage(stdout);
  if (!strcmp(argv[1], "--version")) {
    printf("vx %s\n", VX_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "vx: unknown command '%s'\nTry 'vx help'.\n", argv[1]);
  return 2;
}
