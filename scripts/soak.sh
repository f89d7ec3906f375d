#!/usr/bin/env bash
# The long form of the hardening tests: the stress program under libvx.so on the simulator for many
# operations and several seeds, per tier (managed, host, nvme) and under injected driver faults; prints the totals.
#
#   scripts/soak.sh [BUILD_DIR]      (default: build; built if needed)
# Environment: VX_SOAK_OPS (default 100000 per run), VX_SOAK_SEEDS (default
# "1 2 3"), VX_SOAK_THREADS (default 8).  Non-zero exit on any failure; each
# failure prints its seed: rerun `prog_stress --seed S ...` with the same settings.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
ops=${VX_SOAK_OPS:-100000}
seeds=${VX_SOAK_SEEDS:-"1 2 3"}
threads=${VX_SOAK_THREADS:-8}

if [ ! -x "$build/tests/stress/prog_stress" ] || [ ! -f "$build/libvx.so" ] ||
   [ ! -f "$build/tests/stress/failmalloc.so" ]; then
  cmake -S . -B "$build" >/dev/null && cmake --build "$build" -j 2 --target prog_stress vx simcuda prog_fault \
    vx_failmalloc \
    >/dev/null || { echo "vx soak: build failed"; exit 1; }
fi
stress=$build/tests/stress/prog_stress
nvme_dir=$(mktemp -d "${TMPDIR:-/tmp}/vx-soak-nvme.XXXXXX") || exit 1
trap 'rm -rf "$nvme_dir"' EXIT
common=(LD_LIBRARY_PATH="$build/tests/simcuda" LD_PRELOAD="$build/libvx.so" SIMCUDA_VRAM=32M
        VX_RESERVE=0 VX_NATIVE_MAX=64K VX_STATS=0)
args=(--threads "$threads" --streams 3 --live 24 --max-kib 8192 --ops "$ops")

# Tier settings: name|extra environment|extra stress arguments
configs=(
  "managed||--no-oom"
  "host|VX_POLICY=static VX_STATIC_MIN=512K|--no-oom"
  "nvme|VX_HOST_LIMIT=32M VX_NVME_DIR=$nvme_dir|--no-oom"
  "patterns|VX_HOST_LIMIT=32M VX_NVME_DIR=$nvme_dir SIMCUDA_DEVICES=2|--no-oom --contexts 4 --graphs --segment-mib 16"
  "faults|SIMCUDA_FAIL=cuMemAlloc_v2:50+,cuMemAllocAsync:20+|--no-oom"
)
status=0 runs=0 total_ops=0 total_bytes=0 total_verifies=0
printf '%-8s %6s %10s %12s %16s %8s  %s\n' config seed ops verifies bytes_verified seconds result
for c in "${configs[@]}"; do
  IFS='|' read -r name extra sargs <<<"$c"
  for seed in $seeds; do
    start=$(date +%s)
    # shellcheck disable=SC2086
    out=$(env "${common[@]}" $extra "$stress" "${args[@]}" --seed "$seed" $sargs 2>&1)
    rc=$?
    secs=$(( $(date +%s) - start ))
    line=$(grep '^stress: \(ok\|FAILED\)' <<<"$out" | tail -1)
    o=$(sed -n 's/.* ops=\([0-9]*\).*/\1/p' <<<"$line")
    v=$(sed -n 's/.* verifies=\([0-9]*\).*/\1/p' <<<"$line")
    b=$(sed -n 's/.* bytes_verified=\([0-9]*\).*/\1/p' <<<"$line")
    runs=$((runs + 1))
    total_ops=$((total_ops + ${o:-0})); total_verifies=$((total_verifies + ${v:-0}))
    total_bytes=$((total_bytes + ${b:-0}))
    result=ok
    if [ $rc -ne 0 ]; then result="FAILED (exit $rc)"; status=1; grep -v '^stress: seed' <<<"$out" | tail -5; fi
    printf '%-8s %6s %10s %12s %16s %8s  %s\n' "$name" "$seed" "${o:-?}" "${v:-?}" "${b:-?}" "$secs" "$result"
  done
done
echo "vx soak: $runs runs, $total_ops operations, $total_verifies verifications, $total_bytes bytes verified"

# The fault matrix again, with more call numbers than the CI form.
echo "==== vx soak: fault matrix"
VX_MATRIX_NTH=${VX_SOAK_MATRIX_NTH:-"1 2 3 4 8 16 64"} LD_LIBRARY_PATH="$build/tests/simcuda" \
  VX_MATRIX_FAILMALLOC="$build/tests/stress/failmalloc.so" \
  bash tests/stress/fault_matrix.sh "$build/tests/stress/prog_fault" "$build/libvx.so" core/hooks.def \
  | grep -E "BAD|XFAIL|XPASS|^fault matrix:" || status=1
[ $status -eq 0 ] && echo "vx soak: nothing lost" || echo "vx soak: FAILURES (replay with the seed shown)"
exit $status
