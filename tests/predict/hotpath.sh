#!/bin/sh
# predict_hotpath: `vx bench hooks` (8 native pointer arguments, nothing to
# move) runs through libvx.so and prints every figure it promises, each a
# finite number, with the hook's and the driver's own launch cost both
# measured (positive).  How fast the hot path is, is the benchmark's verdict
# (scripts/bench-hooks.sh), never this test's: a busy CI machine must not
# fail the suite.
# Usage: hotpath.sh VX
set -eu
out=$("$1" bench hooks --sim --iters 4000)
echo "$out"
for key in launch_ns_added alloc_free_ns_added launch_ns_plain launch_ns_vx \
           alloc_free_ns_plain alloc_free_ns_vx iters rounds pointer_args; do
  v=$(echo "$out" | sed -n "s/.*\"$key\":\([-0-9.eE+]*\)[,}].*/\1/p")
  [ -n "$v" ] || { echo "FAIL: no numeric $key in the output"; exit 1; }
done
field() { echo "$out" | sed -n "s/.*\"$1\":\([-0-9.eE+]*\)[,}].*/\1/p"; }
awk -v p="$(field launch_ns_plain)" -v v="$(field launch_ns_vx)" -v n="$(field pointer_args)" \
  'BEGIN { exit !(p > 0 && v > 0 && n == 8) }' \
  || { echo "FAIL: launch costs not measured (plain/vx must be > 0, 8 pointer args)"; exit 1; }
echo "predict_hotpath: ok (figures printed; judged by scripts/bench-hooks.sh)"
