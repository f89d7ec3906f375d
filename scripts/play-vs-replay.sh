#!/usr/bin/env bash
# play-vs-replay.sh: every synthetic workload played live (`vx play`: libvx.so
# over the simulated driver) and replayed offline (`vx replay`), same trace,
# same cost model (policy/costs.h); prints total_s of each and play/replay.
# The target (issue 11): within 15% for predict on every workload.
#
#   scripts/play-vs-replay.sh [oversub] [policies] [place]
#     (default: 2 demand,predict live; place is vx replay's --place: live
#     places allocations as libvx does, as vx play's run does; movable
#     makes every allocation managed memory)
#   VX_BUILD=build-x scripts/play-vs-replay.sh
# Exit status 0, or 2 when a tool fails.  It judges nothing: figures only.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VX_BUILD:-$root/build}
oversub=${1:-2}
policies=${2:-demand,predict}
place=${3:-live}
if [ ! -x "$build/vx" ]; then
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" >/dev/null
fi
cmake --build "$build" --target vx-cli vx simcuda -j2 >/dev/null || { echo "play-vs-replay: build failed"; exit 2; }
vx=$build/vx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { sed -n "s/.*\"policy\":\"$2\".*\"$3\":\\([0-9.e+-]*\\).*/\\1/p" "$1"; }
printf "%-18s %-8s %10s %10s %7s\n" workload policy play_s replay_s ratio
for w in transformer-train transformer-infer cnn moe two-stream; do
  t=$tmp/$w.vxt
  "$vx" replay --synth "$w,oversub=$oversub" --save "$t" --place "$place" --policy "$policies" --json >"$tmp/rep" || exit 2
  "$vx" play "$t" --policy "$policies" --json >"$tmp/play" || exit 2
  for p in ${policies//,/ }; do
    l=$(field "$tmp/play" "$p" total_s)
    r=$(field "$tmp/rep" "$p" total_s)
    awk -v w="$w" -v p="$p" -v l="$l" -v r="$r" \
      'BEGIN { printf "%-18s %-8s %10.4f %10.4f %7.2f\n", w, p, l, r, (r > 0 ? l / r : 0) }'
  done
done
