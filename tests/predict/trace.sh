#!/bin/sh
# predict_trace: record a VX_TRACE of prog_train, check its launches against
# the chunk sets the program says it passed and its copies against the ones
# it made (COPY records, in order with the launches), check the file is private,
# and replay it with `vx replay --json`.
# Usage: trace.sh P_TRAIN P_TRACECHECK VX
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
train=$1 check=$2 vx=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
VX_POLICY=predict VX_TRACE="$dir/t.vxt" LD_PRELOAD="$P_PRELOAD" "$train" --launches > "$dir/out"
grep '^[LC]' "$dir/out" > "$dir/expected"
grep -q '^C' "$dir/expected"
test -s "$dir/expected"
mode=$(stat -c %a "$dir/t.vxt")
[ "$mode" = 600 ] || { echo "trace mode $mode, want 600"; exit 1; }
"$check" --copies "$dir/t.vxt" "$dir/expected"
"$vx" replay "$dir/t.vxt" --json > "$dir/replay"
cat "$dir/replay"
for p in demand predict clairvoyant; do
  grep -q "\"policy\":\"$p\".*\"total_s\":" "$dir/replay" || { echo "no $p row"; exit 1; }
done
echo "predict_trace: ok"
