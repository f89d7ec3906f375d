#!/usr/bin/env bash
# oversub_test.sh PROGRAM native|managed|stats: vx_oversub at 4x SIMCUDA_VRAM.
# native: exit 2 with CUDA_ERROR_OUT_OF_MEMORY; managed: exit 0, verified, and
# the counters show migrations; stats: SIMCUDA_STATS=1 prints them at exit.
set -u
prog=$1 mode=$2
export SIMCUDA_VRAM=${SIMCUDA_VRAM:-64M}
case $mode in
native)
  out=$("$prog" 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 2 ] || { echo "FAIL: exit $rc, expected 2"; exit 1; }
  grep -q 'FAILED: cuMemAlloc_v2.*CUDA_ERROR_OUT_OF_MEMORY' <<<"$out" || { echo "FAIL: no OOM message"; exit 1; }
  ;;
managed)
  out=$("$prog" --managed 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 0 ] || { echo "FAIL: exit $rc"; exit 1; }
  grep -q '^vx_oversub: OK: .*4.00x' <<<"$out" || { echo "FAIL: no OK line"; exit 1; }
  faults=$(grep -o ' faults=[0-9]*' <<<"$out" | cut -d= -f2)
  evictions=$(grep -o ' evictions=[0-9]*' <<<"$out" | cut -d= -f2)
  [ "${faults:-0}" -gt 0 ] && [ "${evictions:-0}" -gt 0 ] || { echo "FAIL: no migrations"; exit 1; }
  ;;
stats)
  err=$(SIMCUDA_STATS=1 "$prog" --managed --bytes 8M 2>&1 >/dev/null); rc=$?
  echo "$err"
  [ $rc -eq 0 ] || { echo "FAIL: exit $rc"; exit 1; }
  grep -q '^simcuda: stats dev=0 faults=[0-9]* fault_batches=' <<<"$err" || { echo "FAIL: no stats"; exit 1; }
  grep -q ' launches=[1-9]' <<<"$err" || { echo "FAIL: no launches counted"; exit 1; }
  ;;
lookups)
  for l in linked dlsym procaddr:12000 procaddr:13000:ptds; do
    out=$("$prog" --managed --bytes 16M --lookup "$l" 2>&1); rc=$?
    [ $rc -eq 0 ] && grep -q '^vx_oversub: OK' <<<"$out" || { echo "FAIL with --lookup $l:"; echo "$out"; exit 1; }
    echo "--lookup $l: OK"
  done
  out=$("$prog" --lookup procaddr:9000 2>&1); rc=$?
  [ $rc -eq 2 ] || { echo "FAIL: bad --lookup accepted"; exit 1; }
  ;;
*) exit 2 ;;
esac
