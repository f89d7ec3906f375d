#!/bin/sh
# predict_ratios: prog_train under VX_POLICY=demand, static and predict (with
# the default prefetch distance and with VX_PREFETCH_DISTANCE=4); all
# verify (prog_train exits 1 otherwise), and predict's simulated time and
# faults are well below demand's.  Figures and why: tests/predict/README.md.
# Usage: ratios.sh P_TRAIN
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
train=$1
field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"; }
ratio() { awk "BEGIN{printf \"%.3f\", $1/$2}"; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
VX_POLICY=demand LD_PRELOAD="$P_PRELOAD" "$train" > "$dir/demand"
VX_POLICY=static VX_STATIC_MIN=4M LD_PRELOAD="$P_PRELOAD" "$train" > "$dir/static"
VX_POLICY=predict LD_PRELOAD="$P_PRELOAD" "$train" > "$dir/predict"
VX_POLICY=predict VX_PREFETCH_DISTANCE=4 LD_PRELOAD="$P_PRELOAD" "$train" > "$dir/predict4"
cat "$dir/demand" "$dir/static" "$dir/predict" "$dir/predict4"
dt=$(field "$dir/demand" total_ns) df=$(field "$dir/demand" faults)
[ "$df" -gt 0 ] || { echo "demand took no faults: the test is not oversubscribed"; exit 1; }
fail=0
# check NAME TIME_PCT: total_ns <= TIME_PCT% and faults <= 30% of demand's
check() {
  t=$(field "$dir/$1" total_ns) f=$(field "$dir/$1" faults)
  echo "$1: total_ns/demand = $(ratio "$t" "$dt"), faults $f/$df = $(ratio "$f" "$df")"
  [ $((t * 100)) -le $((dt * $2)) ] || { echo "  FAIL: time above $2% of demand's"; fail=1; }
  [ $((f * 100)) -le $((df * 30)) ] || { echo "  FAIL: faults above 30% of demand's"; fail=1; }
}
echo "static: total_ns/demand = $(ratio "$(field "$dir/static" total_ns)" "$dt")"
# The gate asks what holds on any machine: predict beats demand (virtual
# time: the simulator's stream workers race, so the figure moves a few
# percent with the machine's load) and removes most faults.  The targets
# (80% and 72% of demand's time) are scripts/bench-predictor.sh's verdict:
# P_PREDICT_PCT / P_PREDICT4_PCT set them.
check predict "${P_PREDICT_PCT:-99}"
check predict4 "${P_PREDICT4_PCT:-99}"
[ $fail = 0 ] && echo "predict_ratios: ok"
exit $fail
