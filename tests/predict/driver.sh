#!/bin/sh
# predict_driver_V: prog_train against the simulated driver of release V
# (SIMCUDA_DRIVER_VERSION, tests/simcuda/driver-V/libcuda.so.1 first on
# LD_LIBRARY_PATH: what the release lacks, dlsym cannot find either).  Under
# predict and static every result verifies, and each entry point the release
# lacks is named once on stderr with what it costs; what is still there
# works: prefetches land (range by range before 13.0) and none fails, on the
# legacy default stream prog_train launches on (the batch call refuses it, so
# vx must use its own streams); before 12.4 the predictor is off, said so.
# Usage: driver.sh P_TRAIN
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
: "${SIMCUDA_DRIVER_VERSION:?run with vx_add_test(... DRIVER V)}"
train=$1
v=$SIMCUDA_DRIVER_VERSION
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1" | head -1; }
fail=0
# said FILE COUNT TEXT: TEXT appears COUNT times in FILE
said() {
  n=$(grep -c -F -- "$3" "$1" || true)
  [ "$n" = "$2" ] || { echo "FAIL: '$3' said $n times, want $2"; fail=1; }
}
for pol in predict static demand; do
  VX_POLICY=$pol VX_STATIC_MIN=4M VX_LOG=info VX_REPORT="$dir/$pol.json" \
    LD_PRELOAD="$P_PRELOAD" "$train" > "$dir/$pol.out" 2> "$dir/$pol.err" ||
    { echo "FAIL: $pol: prog_train exited $?"; cat "$dir/$pol.err"; exit 1; }
  echo "== $pol"; cat "$dir/$pol.out"; grep 'lacks' "$dir/$pol.err" || true
  e=$dir/$pol.err
  name=$(awk -v v="$v" 'BEGIN{printf "driver %d.%d lacks", v/1000, (v%1000)/10}')
  if [ "$v" -lt 12020 ]; then n=1; else n=0; fi
  said "$e" $n "$name cuMemPrefetchAsync_v2 (12.2): prefetches use cuMemPrefetchAsync"
  said "$e" $n "$name cuMemAdvise_v2 (12.2): advice uses cuMemAdvise"
  if [ "$v" -lt 12030 ]; then n=1; else n=0; fi
  said "$e" $n "$name cuFuncGetName (12.3)"
  if [ "$v" -lt 12040 ]; then n=1; else n=0; fi
  said "$e" $n "$name cuFuncGetParamInfo (12.4): launches are invisible, predictor and NVMe tier off"
  if [ "$v" -lt 13000 ]; then n=1; else n=0; fi
  said "$e" $n "$name cuMemPrefetchBatchAsync (13.0): prefetches go range by range"
  [ "$v" -lt 13000 ] || said "$e" 0 "lacks"
  said "$e" 0 "cuMemAdvise failed"
  said "$e" 0 "cuMemAdvise_v2 failed"
  [ "$(field "$dir/$pol.json" prefetch_failures)" = 0 ] || { echo "FAIL: $pol: prefetches failed"; fail=1; }
done
# the host tier's advice took (v1 cuMemAdvise before 12.2): read over the link, no fault
[ "$(field "$dir/static.out" faults)" = 0 ] || { echo "FAIL: static: host-tier memory faulted"; fail=1; }
up=$(field "$dir/predict.json" bytes_up) misses=$(field "$dir/predict.json" prefetch_misses)
if [ "$v" -lt 12040 ]; then
  [ "$up" = 0 ] || { echo "FAIL: the predictor moved $up bytes without launch layouts"; fail=1; }
else
  [ "$up" -gt 0 ] || { echo "FAIL: no prefetch landed"; fail=1; }
  # required prefetches (a launch's own chunks) were issued for launches on the legacy stream
  [ "$misses" -gt 0 ] || { echo "FAIL: no required prefetch was planned"; fail=1; }
  # and they landed before their launches: few faults left (on the legacy
  # stream the batch call failed and the data faulted in: 104 times, demand 138)
  pf=$(field "$dir/predict.out" faults) df=$(field "$dir/demand.out" faults)
  echo "faults: predict $pf, demand $df"
  [ $((pf * 4)) -le "$df" ] || { echo "FAIL: predict faulted $pf times, demand $df"; fail=1; }
fi
[ $fail = 0 ] && echo "predict_driver_$v: ok"
exit $fail
