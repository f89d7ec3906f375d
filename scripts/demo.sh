#!/usr/bin/env bash
# demo.sh: installs what is missing, builds vx, then runs three acts:
#  1. an unmodified CUDA driver-API program that needs 4x the device's
#     memory, without vx: it fails, out of memory;
#  2. the same with LD_PRELOAD=libvx.so: it completes, data verified;
#  3. a repeating training-like loop (tests/predict/prog_train) at 2.4x a
#     64 MiB simulated device, under plain Unified Memory and under vx's
#     predictor: the time of each and their ratio (virtual time of the
#     simulator, always: on a real GPU of 141 GB the loop would fit).
# Acts 1 and 2 use the real driver on a GPU (VX_DEVICE_LIMIT=2G for the vx
# run), otherwise the simulated driver from tests/simcuda (SIMCUDA_VRAM=256M).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
vx_install_deps

jobs=$(nproc 2>/dev/null || echo 2)
[ "$jobs" -gt 8 ] && jobs=8
build=$(realpath -m "${VX_BUILD_DIR:-build}") # absolute: used with LD_PRELOAD
echo "== building ($build/; a minute or two the first time)"
cmake -S . -B "$build" >/dev/null
# The build's own percentages, a line at each tenth: a sign of life.
cmake --build "$build" -j"$jobs" 2>&1 | {
  shown=-1
  while IFS= read -r line; do
    case $line in
      \[*%\]*)
        pct=${line#[}; pct=${pct%%%*}; pct=${pct// /}
        if [[ $pct =~ ^[0-9]+$ ]] && [ $((pct / 10)) -gt "$shown" ]; then
          shown=$((pct / 10)); echo "   ... $pct%"
        fi ;;
      *error*|*Error*) echo "$line" ;;
    esac
  done
}
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "demo: the build failed"; exit 1; }
prog=$build/tests/kit/vx_oversub

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1 && [ -e /dev/nvidia0 ]; then
  where="the real GPU ($(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1))"
  base=(env)
  plain_args=()               # 4x the physical memory
  vx_env=(VX_DEVICE_LIMIT=2G)
  vx_args=(--bytes 8G)        # 4x the limit vx enforces
else
  where="the simulated driver (no GPU here): a 256 MiB device, 1 GiB of data (4x)"
  base=(env LD_LIBRARY_PATH="$build/tests/simcuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SIMCUDA_VRAM=256M)
  plain_args=(--bytes 1G)
  vx_env=()
  vx_args=(--bytes 1G)
fi

echo
echo "== 1. $prog on $where, without vx"
set +e
"${base[@]}" "$prog" "${plain_args[@]}"
rc=$?
set -e
case $rc in
  2) echo "=> as expected without vx: the program ran out of device memory (exit 2)." ;;
  0) echo "=> unexpected: the program fit without vx." ;;
  *) echo "=> the program failed with exit $rc." ;;
esac

echo
if [ ! -f "$build/libvx.so" ]; then
  echo "== 2. with vx: $build/libvx.so does not exist yet, so this step is skipped."
  exit 0
fi
echo "== 2. the same program with LD_PRELOAD=$build/libvx.so VX_REPORT=stderr ${vx_env[*]:-}"
set +e
"${base[@]}" "${vx_env[@]}" LD_PRELOAD="$build/libvx.so" VX_REPORT=stderr "$prog" "${vx_args[@]}"
rc=$?
set -e
if [ $rc -eq 0 ]; then
  echo "=> with vx the program completed and its data verified (exit 0); it prints its"
  echo "   data against the device's memory as vx reports it: the budget, a little less."
else
  echo "=> with vx the program failed (exit $rc)."
  exit 1
fi

echo
train=$build/tests/predict/prog_train
echo "== 3. a training-like loop that repeats (8 layers, forward, backward, update; 2.4x a"
echo "   64 MiB simulated device): plain Unified Memory against vx's predictor"
sim=(env LD_LIBRARY_PATH="$build/tests/simcuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
     SIMCUDA_VRAM=64M LD_PRELOAD="$build/libvx.so")
field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
um=$("${sim[@]}" VX_POLICY=demand VX_MOVABLE=100% VX_NATIVE_MAX=0 "$train")
vxp=$("${sim[@]}" "$train")
um_ns=$(echo "$um" | field total_ns) vx_ns=$(echo "$vxp" | field total_ns)
[ "$(echo "$um" | field bad)" = 0 ] && [ "$(echo "$vxp" | field bad)" = 0 ] ||
  { echo "=> a run came back with wrong data"; exit 1; }
awk -v u="$um_ns" -v p="$vx_ns" 'BEGIN {
  printf "   plain Unified Memory   %7.1f ms\n   vx (predict, default)  %7.1f ms\n", u / 1e6, p / 1e6
  printf "=> vx takes %.2fx the time of plain Unified Memory on this loop (virtual time)\n", p / u }'
