#!/usr/bin/env bash
# For sanitizer builds only: `vx bench hooks` sets LD_PRELOAD=libvx.so for its
# vx run, dropping the sanitizer runtime that must be preloaded first, so this
# runs its two children itself and prints the same two figures as JSON.
#   hooks_children.sh VX PRELOAD [ITERS]      (PRELOAD: "runtime.so:libvx.so")
set -uo pipefail
vx=$1 preload=$2 iters=${3:-30000}
plain=$(env -u LD_PRELOAD VX_STATS=0 "$vx" bench hooks --child --iters "$iters") || exit 1
with=$(env LD_PRELOAD="$preload" VX_STATS=0 "$vx" bench hooks --child --iters "$iters") || exit 1
read -r lp ap <<<"$plain"
read -r lw aw <<<"$with"
[ -n "${ap:-}" ] && [ -n "${aw:-}" ] || { echo "unexpected child output: '$plain' / '$with'" >&2; exit 1; }
awk -v lp="$lp" -v ap="$ap" -v lw="$lw" -v aw="$aw" -v n="$iters" 'BEGIN {
  printf "{\"launch_ns_added\":%.1f,\"alloc_free_ns_added\":%.1f,\"launch_ns_plain\":%.1f,", lw - lp, aw - ap, lp
  printf "\"launch_ns_vx\":%.1f,\"alloc_free_ns_plain\":%.1f,\"alloc_free_ns_vx\":%.1f,", lw, ap, aw
  printf "\"iters\":%d,\"sanitizer_build\":true}\n", n }'
