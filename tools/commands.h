/* Subcommands of the vx tool, declared from commands.def. */
#ifndef VX_TOOLS_COMMANDS_H
#define VX_TOOLS_COMMANDS_H

#define VX_COMMAND(name, fn, help) int fn(int argc, char **argv);
#include "commands.def"
#undef VX_COMMAND

#endif
