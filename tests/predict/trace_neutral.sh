#!/bin/sh
# predict_trace_neutral: recording a VX_TRACE must not change the run it
# records.  prog_torch under predict, untraced then traced: the faults and
# the bytes prefetched up must agree within a factor of 1.5 (runs differ
# by a few percent with the threads' timing).  The ranges of a launch were
# once computed twice when traced, and exec_extent learns from every call:
# the traced run took 35 faults against 184 untraced.  Counts, not time.
# Usage: trace_neutral.sh P_TORCH
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
torch=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"; }
VX_POLICY=predict LD_PRELOAD="$P_PRELOAD" "$torch" > "$dir/plain"
VX_POLICY=predict VX_TRACE="$dir/t.vxt" LD_PRELOAD="$P_PRELOAD" "$torch" > "$dir/traced"
cat "$dir/plain" "$dir/traced"
test -s "$dir/t.vxt"
fail=0
for k in faults bytes_prefetch_htod; do
  a=$(field "$dir/plain" $k) b=$(field "$dir/traced" $k)
  echo "$k: untraced $a, traced $b"
  [ "$a" -gt 0 ] || { echo "$k: 0 untraced: the check would prove nothing"; fail=1; }
  # within 1.5x either way: 2a <= 3b and 2b <= 3a
  if [ $((2 * a)) -gt $((3 * b)) ] || [ $((2 * b)) -gt $((3 * a)) ]; then
    echo "$k: the traced run differs from the untraced one by more than 1.5x"
    fail=1
  fi
done
[ $fail = 0 ] && echo "predict_trace_neutral: ok"
exit $fail
