#!/bin/sh
# predict_rent: an allocation made on the device, pushed down, and wanted
# back by a launch the plan did not foresee is read over the link for that
# use instead of coming up (tiers/exec.c, EX_PIN_ONCE), and one used again
# moves from then on; the data stays exact either way.
#  1. vx_oversub (touch once: every buffer filled, then checked and copied
#     back once) at 4x the device, default settings: it verifies, and its
#     buffers never come back up (the simulator's bytes up by prefetch and
#     fault stay under 16 MiB of its 256; before this rule they were about
#     200), the check reading them in host memory over the link (the
#     simulator's bytes_link_htod: at least 128 MiB).
#  2. prog_train (activations re-made each iteration): it verifies every
#     word, and some allocations pinned for one use were used again and
#     unpinned (host_unpins > 0 in the exit report).
# Usage: rent.sh VX_OVERSUB PROG_TRAIN
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
SIMCUDA_VRAM=64M SIMCUDA_STATS=1 VX_POLICY=predict VX_REPORT="$dir/o.json" \
  LD_PRELOAD="$P_PRELOAD" "$1" --bytes 256M >"$dir/o.out" 2>"$dir/o.err" ||
  { cat "$dir/o.out" "$dir/o.err"; echo "FAIL: vx_oversub did not verify"; exit 1; }
stat() { grep 'simcuda: stats' "$dir/o.err" | tail -1 | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
up=$(($(stat bytes_fault_htod) + $(stat bytes_prefetch_htod)))
link=$(stat bytes_link_htod)
pins=$(sed -n 's/.*"host_pins":\([0-9]*\).*/\1/p' "$dir/o.json")
echo "vx_oversub: bytes up $up, read over the link $link, host_pins ${pins:-none}"
[ "$up" -le $((16 << 20)) ] || { echo "FAIL: touch-once buffers came back up"; exit 1; }
[ "$link" -ge $((128 << 20)) ] || { echo "FAIL: the check did not read them over the link"; exit 1; }
[ "${pins:-0}" -gt 0 ] || { echo "FAIL: nothing was pinned for its one use"; exit 1; }
SIMCUDA_VRAM=64M VX_POLICY=predict VX_REPORT="$dir/t.json" LD_PRELOAD="$P_PRELOAD" "$2" \
  >"$dir/t.out"
grep -q '"bad":0' "$dir/t.out" || { cat "$dir/t.out"; echo "FAIL: wrong results"; exit 1; }
unpins=$(sed -n 's/.*"host_unpins":\([0-9]*\).*/\1/p' "$dir/t.json")
echo "prog_train: host_unpins ${unpins:-none}"
[ "${unpins:-0}" -gt 0 ] || { echo "FAIL: no allocation pinned for one use moved again"; exit 1; }
echo "predict_rent: ok"
