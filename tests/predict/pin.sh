#!/bin/sh
# predict_pin: allocations whose chunks come up about once per use are
# pinned to host memory (tiers/exec.c), and the data stays exact: prog_torch
# (the PyTorch-like loop, 2.5x the device at default settings) verifies
# every weight and momentum word, and its exit report counts host_pins.
# Usage: pin.sh P_TORCH
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
SIMCUDA_VRAM=96M VX_POLICY=predict VX_REPORT="$dir/r.json" LD_PRELOAD="$P_PRELOAD" "$1" >"$dir/out"
cat "$dir/out"
grep -q '"bad":0' "$dir/out" || { echo "FAIL: wrong results"; exit 1; }
pins=$(sed -n 's/.*"host_pins":\([0-9]*\).*/\1/p' "$dir/r.json")
echo "host_pins: ${pins:-none}"
[ "${pins:-0}" -gt 0 ] || { echo "FAIL: nothing was pinned to host memory"; exit 1; }
echo "predict_pin: ok"
