#!/bin/sh
# predict_prefetch_fail: plans are hints.  When every prefetch fails, batched
# and range by range, the policy is told (pol_chunk_state), nothing counts
# as moved, and the program still verifies (the driver serves the data: it
# faults it in, or the kernels read it over the link where vx pinned it to
# host memory, as it does what its prefetches never brought up: EX_PIN_ONCE);
# when the driver lacks cuMemPrefetchBatchAsync (NOT_SUPPORTED) or the batch
# call fails with any error, vx prefetches range by range.
# Usage: fail.sh P_TRAIN
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1" | head -1; }
VX_POLICY=predict VX_REPORT="$dir/r1.json" \
  SIMCUDA_FAIL=cuMemPrefetchBatchAsync:1+:CUDA_ERROR_UNKNOWN,cuMemPrefetchAsync_v2:1+:CUDA_ERROR_UNKNOWN \
  LD_PRELOAD="$P_PRELOAD" "$train" > "$dir/o1"
cat "$dir/o1"
[ "$(field "$dir/r1.json" bytes_up)" = 0 ] || { echo "failed prefetches counted as moved"; exit 1; }
[ $(($(field "$dir/o1" faults) + $(field "$dir/r1.json" host_pins))) -gt 0 ] ||
  { echo "no faults and no pins to host memory although no prefetch succeeded"; exit 1; }
[ "$(field "$dir/r1.json" prefetch_failures)" -gt 0 ] || { echo "failed prefetches not counted"; exit 1; }
VX_POLICY=predict SIMCUDA_FAIL=cuMemPrefetchBatchAsync:1+:CUDA_ERROR_NOT_SUPPORTED VX_REPORT="$dir/r2.json" \
  LD_PRELOAD="$P_PRELOAD" "$train" > "$dir/o2"
cat "$dir/o2"
[ "$(field "$dir/r2.json" bytes_up)" -gt 0 ] || { echo "no fallback to cuMemPrefetchAsync_v2"; exit 1; }
[ "$(field "$dir/o2" bytes_prefetch_htod)" -gt 0 ] || { echo "the fallback moved nothing"; exit 1; }
VX_POLICY=predict SIMCUDA_FAIL=cuMemPrefetchBatchAsync:1+:CUDA_ERROR_UNKNOWN VX_REPORT="$dir/r3.json" \
  LD_PRELOAD="$P_PRELOAD" "$train" > "$dir/o3"
cat "$dir/o3"
[ "$(field "$dir/r3.json" bytes_up)" -gt 0 ] || { echo "no range-by-range retry after a batch error"; exit 1; }
[ "$(field "$dir/r3.json" prefetch_failures)" = 0 ] || { echo "the retry did not take"; exit 1; }
echo "predict_prefetch_fail: ok"
