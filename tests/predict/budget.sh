#!/bin/sh
# A VX_DEVICE_LIMIT below physical memory behaves like a smaller device
# under VX_POLICY=predict: the program verifies, the predictor moves data,
# and the simulator's peak device occupancy (native + resident managed +
# contexts) never exceeds the limit, at 40, 48 and 64M on a 128M device.
# Each limit runs twice, the second time with the simulator's stream
# workers pausing at random (SIMCUDA_JITTER_US): vx's side streams then run
# in the orders a loaded host or a real GPU gives, and a missing wait
# between them shows (before the fixes in tiers/exec.c and tiers/place.c,
# 18 of 20 jittered runs of prog_torch went a chunk or two past the limit).
#
# predict_budget: prog_train, whose extents are exact.  The limits hold the
# native part plus the largest launch's chunks (3 buffers of 6 MiB): below
# that no policy can keep a launch's data inside the budget.
#
# predict_in_place (--no-faults): prog_torch's kernels get pointers into
# caching-allocator segments, and the extents vx infers fall short now and
# then.  A segment whose range was cut short is advised PreferredLocation
# host (tiers/launch_plan.c: advise_in_place), so what a guess misses is
# read in place over the link and never faults onto the device behind the
# policy's back: every run also takes no fault (before: 55-80 faults, and
# peaks of 54, 60 and 80 MiB).
#
# predict_budget_threads: prog_launch_threads, 4 threads each launching on
# a stream of its own over 3 buffers of 8 MiB, at 24/32/48M.  A plan names
# the marks of earlier plans; before plans were issued one thread at a
# time (tiers/exec.c, order_take), another thread's plan not yet issued
# left them unrecorded, and 6 to 10 runs of 10 per limit went one buffer
# over.  Whether data moves there depends on how the threads' runs overlap
# (on a busy machine they may take turns, and then each thread's buffers
# fit), so B_MOVES=0 leaves that check out.  predict_budget_shared
# (P_SHARED=1): one buffer all threads read.
# predict_budget_first_native: the same with SIMCUDA_ALLOC_PAUSE_US, the
# simulator's cuMemAlloc holding the call 200 ms after it took the memory:
# the device's first allocation is native, and the threads plan meanwhile.
# Before its hold was counted from the claim (tiers/exec.c,
# exec_native_claim made no residency manager yet), every run went one
# buffer over (without the pause, 1 run in about 250).
# predict_budget_demand_threads: the same under VX_POLICY=demand.
#
# predict_budget_lag (--no-faults): prog_stream_lag, a buffer read by two
# streams, one lagging behind a host function; its eviction waits for
# both streams' launches (tiers/exec.c, other_use).  Before, it waited for
# the latest only: the lagging read faulted a chunk back at every limit,
# 1 MiB past it at 26M.
#
# predict_budget_demand (B_POLICY=demand): prog_train and prog_torch under
# VX_POLICY=demand with the limit: the launches fault what they miss and
# the policy evicts the least recently used chunks for them
# (pol_config_t.demand_budget), so demand pages as on a smaller device;
# it moves nothing ahead, so the check is that it prefetched nothing and
# paged (faults > 0; B_FAULTS=0: not asserted).  Before, the driver's
# paging filled the whole 128M device.
# predict_budget_static_*: the same under VX_POLICY=static (its allocations
# of VX_STATIC_MIN and more stay in host memory, read in place; the rest
# pages so).
# Usage: [B_LIMITS="MiB ..."] [B_POLICY=predict|demand|static] [B_FAULTS=0] [B_MOVES=0] budget.sh PROGRAM [--no-faults]
set -eu
: "${P_PRELOAD:?set P_PRELOAD to the libvx.so preload list}"
prog=$1
no_faults=${2:-}
policy=${B_POLICY:-predict}
name="predict_budget ($(basename "$prog"), $policy)"
field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
for lim in ${B_LIMITS:-40 48 64}; do
  for jit in 0 100; do
    SIMCUDA_JITTER_US=$jit SIMCUDA_VRAM=128M VX_DEVICE_LIMIT=${lim}M VX_POLICY=$policy \
      LD_PRELOAD="$P_PRELOAD" "$prog" >"$out"
    f=$(field "$out" faults) fb=$(field "$out" bytes_fault_htod) up=$(field "$out" bytes_prefetch_htod)
    peak=$(field "$out" device_used_peak)
    echo "limit ${lim}M, jitter ${jit} us: faults $f ($fb bytes), bytes_prefetch_htod $up," \
      "device_used_peak $peak of $((lim << 20))"
    [ "$(field "$out" bad)" = 0 ] || { echo "  FAIL: wrong results"; fail=1; }
    [ "$peak" -le $((lim << 20)) ] || { echo "  FAIL: device occupancy above the limit"; fail=1; }
    if [ "$policy" != predict ]; then
      [ "$up" = 0 ] || { echo "  FAIL: demand prefetched"; fail=1; }
      [ "${B_FAULTS:-1}" = 0 ] || [ "$f" -gt 0 ] ||
        { echo "  FAIL: demand paged nothing (the limit is below the data)"; fail=1; }
    elif [ "${B_MOVES:-1}" != 0 ]; then
      [ "$up" -gt 0 ] || { echo "  FAIL: the predictor moved nothing"; fail=1; }
    fi
    if [ "$no_faults" = --no-faults ]; then
      [ "$f" = 0 ] && [ "$fb" = 0 ] || { echo "  FAIL: pages faulted onto the device behind the policy"; fail=1; }
    fi
  done
done
[ $fail = 0 ] && echo "$name: ok"
exit $fail
