#!/bin/sh
# predict_torch_ratios: prog_torch (a PyTorch-like caching-allocator loop) under
# VX_POLICY=demand, static (VX_STATIC_MIN=4M) and predict, at whatever vx
# settings the environment gives; prints each run's JSON line, then
# total_ns/demand, faults and bytes moved per run.  Asserts only that every
# run verifies (prog_torch exits 1 on a wrong byte): the figures are for tuning
# vx (tests/predict/README.md), not a gate.
# Usage: torch_ratios.sh P_TORCH
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
torch=$1
field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"; }
ratio() { awk "BEGIN{printf \"%.3f\", $1/$2}"; }
mb() { awk "BEGIN{printf \"%.0f\", $1/1048576}"; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
run() {
  name=$1
  shift
  if ! env "$@" LD_PRELOAD="$P_PRELOAD" "$torch" > "$dir/$name"; then
    echo "$name: FAIL: prog_torch did not verify (exit status non-zero)"
    fail=1
  fi
  cat "$dir/$name"
}
run demand VX_POLICY=demand
run static VX_POLICY=static VX_STATIC_MIN=4M
run predict VX_POLICY=predict
[ $fail = 0 ] || exit 1
dt=$(field "$dir/demand" total_ns)
echo "device limit: ${VX_DEVICE_LIMIT:-default}, SIMCUDA_VRAM=${SIMCUDA_VRAM:-default}"
for r in demand static predict; do
  f="$dir/$r"
  up=$(($(field "$f" bytes_fault_htod) + $(field "$f" bytes_prefetch_htod)))
  down=$(($(field "$f" bytes_prefetch_dtoh) + $(field "$f" bytes_evict_dtoh)))
  echo "$r: total_ns/demand = $(ratio "$(field "$f" total_ns)" "$dt")" \
    "($(field "$f" total_ns) ns), faults $(field "$f" faults)," \
    "up $(mb "$up") MiB (fault $(mb "$(field "$f" bytes_fault_htod)")), down $(mb "$down") MiB"
done
echo "predict_torch_ratios: ok (all verify)"
