#!/usr/bin/env bash
# demo.sh: installs what is missing, builds vx, then runs the main job: an
# unmodified CUDA driver-API program that needs 4x the device's memory,
# first without vx (it fails: out of memory), then with LD_PRELOAD=libvx.so.
# On a real GPU it uses the real driver (VX_DEVICE_LIMIT=2G for the vx run);
# otherwise the simulated driver from tests/simcuda (SIMCUDA_VRAM=256M).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
vx_install_deps

jobs=$(nproc 2>/dev/null || echo 2)
[ "$jobs" -gt 8 ] && jobs=8
build=${VX_BUILD_DIR:-build}
echo "== building ($build/)"
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$jobs" >/dev/null
prog=$build/tests/kit/vx_oversub

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1 && [ -e /dev/nvidia0 ]; then
  where="the real GPU ($(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1))"
  base=(env)
  plain_args=()               # 4x the physical memory
  vx_env=(VX_DEVICE_LIMIT=2G)
  vx_args=(--bytes 8G)        # 4x the limit vx enforces
else
  where="the simulated driver (no GPU here): SIMCUDA_VRAM=256M"
  base=(env LD_LIBRARY_PATH="$PWD/$build/tests/simcuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SIMCUDA_VRAM=256M)
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
"${base[@]}" "${vx_env[@]}" LD_PRELOAD="$PWD/$build/libvx.so" VX_REPORT=stderr "$prog" "${vx_args[@]}"
rc=$?
set -e
if [ $rc -eq 0 ]; then
  echo "=> with vx the program completed and its data verified (exit 0)."
else
  echo "=> with vx the program failed (exit $rc)."
  exit 1
fi
