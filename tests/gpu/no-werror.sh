#!/bin/sh
# Compiler launcher for scripts/gpu-check.sh's build: runs the compile with
# -Wno-error last, so another compiler's new warnings stay warnings there.
exec "$@" -Wno-error
