#!/usr/bin/env bash
# enter_test.sh SRCDIR: every exported cu* entry point of the simulator starts
# with SIM_ENTER(its own name), so SIMCUDA_FAIL counts the right symbol.
set -u
cd "$1"
awk '
  /SIM_API CUresult cu/ {
    if (want) { print FILENAME ": " name " has no SIM_ENTER"; bad = 1 }
    match($0, /cu[A-Za-z0-9_]+\(/); name = substr($0, RSTART, RLENGTH - 1); want = 1; n++; next
  }
  want && /SIM_ENTER/ {
    match($0, /\(cu[A-Za-z0-9_]+\)/); got = substr($0, RSTART + 1, RLENGTH - 2)
    if (got != name) { print FILENAME ": " name " enters as " got; bad = 1 }
    want = 0
  }
  END { print n " entry points checked"; if (n < 150) bad = 1; exit bad }
' sim_*.c
