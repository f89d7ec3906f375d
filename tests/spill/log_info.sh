#!/bin/sh
# vx_log_info: at VX_LOG=info vx says, in words and units, that it is
# active (policy, tiers), each device's budget when it settles, the first
# allocation past the budget and the first NVMe spill: once each, and no
# size as a raw byte count (#14 point 4).
# Usage: log_info.sh SPILL_HOT_PROGRAM SWAP_DIR
set -eu
prog=$1 dir=$2
mkdir -p "$dir"
err=$(VX_LOG=info VX_NVME_DIR="$dir" VX_HOST_LIMIT=24M VX_MOVABLE=0 SIMCUDA_VRAM=64M \
      "$prog" --worker segments 2>&1 >/dev/null) || { echo "$err"; echo "FAIL: the program failed"; exit 1; }
echo "$err"
expect() { # REGEX: exactly one line matches
  n=$(printf '%s\n' "$err" | grep -cE "$1" || true)
  [ "$n" -eq 1 ] || { echo "FAIL: $n lines match: $1"; exit 1; }
}
expect '^vx: active: policy predict; past each device.s budget, managed memory backed by host RAM \(at most [0-9.]+ [KMGT]iB\); NVMe swap in .*, up to 64 GiB, past 24 MiB of host RAM; memory reported to the program: limit$'
expect '^vx: device 0 \(64 MiB\): budget 60 MiB \(64 MiB free at first use, 0 B held by vx processes, reserve 4 MiB\)$'
expect '^vx: device 0: 40 MiB native of a 60 MiB budget: this 40 MiB allocation and the next ones past it are managed memory, staged on the device ahead of use by the predictor$'
expect '^vx: first NVMe spill: [0-9.]+ [KMG]iB moved to the swap file and released from host RAM \(vx holds [0-9.]+ [KMG]?i?B there now; VX_HOST_LIMIT 24 MiB\)$'
if printf '%s\n' "$err" | grep -E '[0-9]{7,}'; then
  echo "FAIL: a raw byte count in a message"; exit 1
fi
echo "vx_log_info: ok"
