#!/bin/sh
# predict_trace_neutral: recording a VX_TRACE must not change the run it
# records.  prog_torch under predict, untraced then traced: the bytes
# prefetched up and down and the bytes its kernels read over the link must
# agree within 10% (runs differ by under 1% with the threads' timing).  The
# ranges of a launch were once computed twice when traced, and exec_extent
# learns from every call: the traced run took 35 faults against 184
# untraced then; with segments read in place (no faults) the same mistake
# prefetches 1.29x the bytes up.  Counts, not time.
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
for k in bytes_prefetch_htod bytes_prefetch_dtoh bytes_link_htod; do
  a=$(field "$dir/plain" $k) b=$(field "$dir/traced" $k)
  echo "$k: untraced $a, traced $b"
  [ "$a" -gt 0 ] || { echo "$k: 0 untraced: the check would prove nothing"; fail=1; }
  # within 10% either way: 10a <= 11b and 10b <= 11a
  if [ $((10 * a)) -gt $((11 * b)) ] || [ $((10 * b)) -gt $((11 * a)) ]; then
    echo "$k: the traced run differs from the untraced one by more than 10%"
    fail=1
  fi
done
[ $fail = 0 ] && echo "predict_trace_neutral: ok"
exit $fail
