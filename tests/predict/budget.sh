#!/bin/sh
# predict_budget: under VX_POLICY=predict a VX_DEVICE_LIMIT below physical
# memory behaves like a smaller device: prog_train verifies, the predictor
# moves data, and the simulator's peak device occupancy (native + resident
# managed + contexts) never exceeds the limit.  Limits that hold the native
# part plus the largest launch's chunks (3 buffers of 6 MiB): below that no
# policy can keep a launch's data inside the budget.  Each limit also runs
# with the stream workers pausing at random (SIMCUDA_JITTER_US, as
# in_place.sh).
# Usage: budget.sh P_TRAIN
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
train=$1
field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
for lim in 40 48 64; do
  for jit in 0 100; do
    SIMCUDA_JITTER_US=$jit SIMCUDA_VRAM=128M VX_DEVICE_LIMIT=${lim}M VX_POLICY=predict \
      LD_PRELOAD="$P_PRELOAD" "$train" >"$out"
    peak=$(field "$out" device_used_peak) up=$(field "$out" bytes_prefetch_htod)
    echo "limit ${lim}M, jitter ${jit} us: device_used_peak $peak, bytes_prefetch_htod $up"
    [ "$(field "$out" bad)" = 0 ] || { echo "  FAIL: wrong results"; fail=1; }
    [ "$peak" -le $((lim << 20)) ] || { echo "  FAIL: device occupancy above the limit"; fail=1; }
    [ "$up" -gt 0 ] || { echo "  FAIL: the predictor moved nothing"; fail=1; }
  done
done
[ $fail = 0 ] && echo "predict_budget: ok"
exit $fail
