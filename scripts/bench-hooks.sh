#!/usr/bin/env bash
# bench-hooks.sh: the hot-path benchmark.  Runs `vx bench hooks` (a launch
# whose 8 pointer arguments are all native, hook against the driver's own
# entry point, alternating in-process batches) RUNS times and prints each
# run, the medians, and the verdict against the target: launch_ns_added
# below 100 ns.  Not part of the CI gate (timings on a shared machine are
# noise); run it on a quiet machine.
#
#   scripts/bench-hooks.sh [RUNS]          (builds build/vx if needed)
#   VX_BUILD=build-x scripts/bench-hooks.sh 5
# Exit status 0 when the target holds, 1 when it does not, 2 on a failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VX_BUILD:-$root/build}
runs=${1:-5}
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" --target vx-cli vx simcuda -j2 >/dev/null || { echo "bench-hooks: build failed"; exit 2; }
# The simulated driver unless a real one is asked for (VX_BENCH_REAL=1: the
# libcuda.so.1 the dynamic linker finds).
sim=(--sim)
[ "${VX_BENCH_REAL:-0}" = 1 ] && sim=()
field() { sed -n "s/.*\"$1\":\([-0-9.eE+]*\)[,}].*/\1/p"; }
launch="" alloc=""
for i in $(seq "$runs"); do
  out=$("$build/vx" bench hooks "${sim[@]}" --iters 40000) || { echo "bench-hooks: run $i failed"; exit 2; }
  echo "run $i: $out"
  launch="$launch $(echo "$out" | field launch_ns_added)"
  alloc="$alloc $(echo "$out" | field alloc_free_ns_added)"
done
median() { echo "$@" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ml=$(median $launch) ma=$(median $alloc)
echo "launch_ns_added median $ml (runs:$launch)"
echo "alloc_free_ns_added median $ma (runs:$alloc)"
if awk "BEGIN { exit !($ml < 100) }"; then
  echo "bench-hooks: target holds (launch_ns_added $ml < 100 ns)"
else
  echo "bench-hooks: TARGET MISSED (launch_ns_added $ml >= 100 ns)"; exit 1
fi
