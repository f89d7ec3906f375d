#!/bin/sh
# predict_graph: graph launches are observed like the launches they stand
# for: the trace shows each cuGraphLaunch with the union of its kernels'
# chunks (captured launches themselves are not recorded: they did not run),
# the predictor moves data for them, and the result verifies.
# Usage: graph.sh P_GRAPH P_TRACECHECK
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
graph=$1 check=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
VX_POLICY=predict VX_TRACE="$dir/t.vxt" VX_REPORT="$dir/r.json" LD_PRELOAD="$P_PRELOAD" "$graph" --launches > "$dir/out"
cat "$dir/out" | grep -v '^L'
grep '^L' "$dir/out" > "$dir/expected"
"$check" "$dir/t.vxt" "$dir/expected"
grep -q '"graph_launches":4,' "$dir/r.json" || { echo "graph launches not counted"; cat "$dir/r.json"; exit 1; }
grep -q '"bytes_up":[1-9]' "$dir/r.json" || { echo "nothing prefetched for graph launches"; cat "$dir/r.json"; exit 1; }
echo "predict_graph: ok"
