#!/usr/bin/env bash
# clients_test.sh MODE LIBVX [ARGS]: real clients nobody here wrote, run
# unmodified with and without libvx.so preloaded (CTest sets LD_LIBRARY_PATH
# to the simulated driver).  scripts/clients.sh installs them, cached; where
# it cannot, the test says why and skips (77).
#   bindings LIBVX               cuda-bindings at 4x the device: OOM without
#                                vx, verified with vx
#   nvml LIBVX                   nvidia-ml-py sees the device, then the budget
#   route LIBVX SERIES CHECK RT13   vx's cuGetProcAddress over NVIDIA's libcuda
#                                of SERIES, for every lookup libcudart 13.0
#                                (RT13) and 12.8 (the venv's) make
set -u
mode=$1 libvx=$2
here=$(cd "$(dirname "$0")" && pwd)
clients=${VX_CLIENTS_SH:-$here/../../scripts/clients.sh}
cache=${VX_CLIENTS_DIR:-$(cd "$here/../.." && pwd)}
py=$cache/.venv-clients/bin/python
sim_path=${LD_LIBRARY_PATH:-}

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

need() { # what...: installs, or skips saying why
  local why
  why=$(bash "$clients" "$@" 2>&1) || skip "scripts/clients.sh $* could not install: ${why:-no reason given}"
  [ -n "$why" ] && echo "$why"
  return 0
}

run_py() { # with|without SCRIPT ARGS...: prints the output, returns its status
  local how=$1; shift
  if [ "$how" = with ]; then
    LD_PRELOAD=$libvx "$py" "$@" 2>&1
  else
    env -u LD_PRELOAD "$py" "$@" 2>&1
  fi
}

case $mode in
bindings)
  need venv
  export SIMCUDA_VRAM=64M
  vram=$((64 << 20))
  echo "== without vx (SIMCUDA_VRAM=$SIMCUDA_VRAM)"
  out=$(run_py without "$here/bindings_oversub.py" $vram); rc=$?
  echo "$out"
  [ $rc -eq 2 ] && grep -q 'CUDA_ERROR_OUT_OF_MEMORY' <<<"$out" ||
    fail "without vx: exit $rc, expected 2 with CUDA_ERROR_OUT_OF_MEMORY"
  echo "== with vx (VX_DEVICE_LIMIT=48M)"
  out=$(VX_DEVICE_LIMIT=48M run_py with "$here/bindings_oversub.py" $vram); rc=$?
  echo "$out"
  [ $rc -eq 0 ] && grep -q '^bindings_oversub: OK: .*4.00x' <<<"$out" || fail "with vx: exit $rc"
  ;;
nvml)
  need venv
  export SIMCUDA_VRAM=256M
  echo "== without vx: NVML reports the device"
  out=$(run_py without "$here/nvml_budget.py" $((256 << 20)) $((16 << 20))); rc=$?
  echo "$out"
  [ $rc -eq 0 ] || fail "without vx: exit $rc"
  echo "== with vx, VX_DEVICE_LIMIT=96M (VX_REPORT_MEMORY=limit): NVML reports the budget"
  out=$(VX_DEVICE_LIMIT=96M run_py with "$here/nvml_budget.py" $((96 << 20)) $((16 << 20))); rc=$?
  echo "$out"
  [ $rc -eq 0 ] || fail "with vx: exit $rc"
  ;;
route)
  series=$3 check=$4 rt13=${5:-}
  need venv
  # The other series failing to install must not skip this one.
  why=$(bash "$clients" debs 2>&1) || echo "$why"
  drv=$cache/.clients/libcuda-$series
  [ -e "$drv/libcuda.so.1" ] || skip "no libcuda1 of the $series series in $drv: ${why:-}"
  rt12=$(ls "$cache"/.venv-clients/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12 2>/dev/null | head -1)
  [ -n "$rt13" ] && [ -e "$rt13" ] || skip "no libcudart 13.0 (the CUDA toolkit's lib64)"
  [ -n "$rt12" ] || skip "no libcudart 12.8 in the venv (nvidia-cuda-runtime-cu12)"
  tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
  rc=0
  for rt in "$rt13" "$rt12"; do
    # The runtime's start-up lookups, logged by the simulator (the runtime
    # then stops at cuGetExportTable, which the simulator refuses).
    SIMCUDA_LOG=procaddr LD_LIBRARY_PATH=$sim_path env -u LD_PRELOAD "$py" "$here/cudart_lookups.py" "$rt" \
      2>"$tmp/log" >/dev/null
    awk '$1 == "simcuda:" && $2 == "procaddr" && $3 !~ /^version=/ {
           sub("version=", "", $4); sub("flags=", "", $5); print $3, $4, $5 }' "$tmp/log" |
      sort -u >"$tmp/lookups"
    n=$(wc -l <"$tmp/lookups")
    [ "$n" -ge 100 ] || { cat "$tmp/log" | head; fail "only $n lookups logged for $rt"; }
    echo "== libcuda $(cat "$drv/VERSION") vs the $n distinct lookups of $(basename "$(readlink -f "$rt")")"
    LD_LIBRARY_PATH=$drv LD_PRELOAD=$libvx "$check" "$drv/libcuda.so.1" "$tmp/lookups" || rc=1
  done
  [ $rc -eq 0 ] || fail "vx's cuGetProcAddress differs from the driver's routing"
  ;;
*) echo "usage: clients_test.sh bindings|nvml|route LIBVX ..." >&2; exit 2 ;;
esac
echo "PASS: $mode"
