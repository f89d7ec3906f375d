#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang, VX_FUZZ=ON) in build-fuzz and
# runs each for SECONDS (default 20); prints executions per target and a summary.
#
#   scripts/fuzz.sh [SECONDS]     non-zero exit when any target crashes
# New corpus entries go to build-fuzz/corpus/<target> (the tree's seeds are
# only read); a crashing input is saved as build-fuzz/artifacts/<target>-*.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
secs=${1:-20}
case "$secs" in ''|*[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;; esac
cc=${VX_FUZZ_CC:-clang}
command -v "$cc" >/dev/null || { echo "vx fuzz: $cc not found (apt-get install clang)" >&2; exit 1; }
dir=${VX_FUZZ_BUILD:-build-fuzz}
jobs=${VX_FUZZ_JOBS:-2}

echo "==== vx fuzz: configure $dir ($cc)"
mkdir -p "$dir"
cmake -S . -B "$dir" -DCMAKE_C_COMPILER="$cc" -DVX_FUZZ=ON -DVX_SANITIZE= \
  -DVX_CUDA_INCLUDE="${VX_CUDA_INCLUDE:-/usr/local/cuda/include}" >"$dir/fuzz-configure.log" 2>&1 \
  || { cat "$dir/fuzz-configure.log"; echo "vx fuzz: configure failed" >&2; exit 1; }
mapfile -t targets < <(grep -v '^$' "$dir/tests/fuzz/targets.txt" 2>/dev/null)
[ ${#targets[@]} -gt 0 ] || { echo "vx fuzz: no fuzz targets configured" >&2; exit 1; }
echo "==== vx fuzz: build ${targets[*]}"
cmake --build "$dir" -j "$jobs" --target "${targets[@]}" >"$dir/fuzz-build.log" 2>&1 \
  || { tail -40 "$dir/fuzz-build.log"; echo "vx fuzz: build failed" >&2; exit 1; }

mkdir -p "$dir/artifacts"
status=0
summary=()
for t in "${targets[@]}"; do
  work="$dir/corpus/$t"
  mkdir -p "$work"
  log="$dir/$t.log"
  echo "==== vx fuzz: $t for ${secs}s"
  "$dir/tests/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" \
    "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  [ -n "$execs" ] || execs=0
  if [ $rc -eq 0 ]; then verdict=ok; else verdict="CRASH (exit $rc)"; status=1; tail -30 "$log"; fi
  printf '%-14s %12s executions  %s\n' "$t" "$execs" "$verdict"
  summary+=("$(printf '%-14s %12s %8s  %s' "$t" "$execs" "${secs}s" "$verdict")")
done

echo "==== vx fuzz: summary"
printf '%-14s %12s %8s  %s\n' target executions time verdict
printf '%s\n' "${summary[@]}"
[ $status -eq 0 ] && echo "vx fuzz: no crash" || echo "vx fuzz: CRASHES (inputs in $dir/artifacts)"
exit $status
