#!/usr/bin/env bash
# clients_probe_SERIES: vx started over NVIDIA's own libcuda.so.1 of the 535
# or 550 series (Debian non-free libcuda1, unpacked by scripts/clients.sh,
# loaded without a GPU) names exactly the entry points that release lacks,
# once each, as it does over the simulated driver of the same release
# (tests/simcuda/driver-12020 and driver-12040): the real driver keeps the
# simulator's driver-V symbol tables honest.
#   driver_probe.sh LIBVX SERIES ROUTE_CHECK
set -u
libvx=$1 series=$2 check=$3
here=$(cd "$(dirname "$0")" && pwd)
clients=${VX_CLIENTS_SH:-$here/../../scripts/clients.sh}
cache=${VX_CLIENTS_DIR:-$(cd "$here/../.." && pwd)}
why=$(bash "$clients" debs 2>&1) || echo "$why"
drv=$cache/.clients/libcuda-$series
[ -e "$drv/libcuda.so.1" ] || { echo "SKIP: no libcuda1 of the $series series in $drv: ${why:-}"; exit 77; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
echo "cuMemAlloc 12000 0" >"$tmp/lookups" # one lookup through vx's hook starts vx
VX_LOG=info LD_LIBRARY_PATH=$drv LD_PRELOAD=$libvx "$check" "$drv/libcuda.so.1" "$tmp/lookups" \
  >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: route_check"; exit 1; }
echo "== libcuda $(cat "$drv/VERSION")"
cat "$tmp/out"
case $series in
535) want="driver 12.2 lacks cuFuncGetParamInfo (12.4): launches are invisible, predictor and NVMe tier off
driver 12.2 lacks cuFuncGetName (12.3): kernels are named by their handles
driver 12.2 lacks cuMemPrefetchBatchAsync (13.0): prefetches go range by range" ;;
550) want="driver 12.4 lacks cuMemPrefetchBatchAsync (13.0): prefetches go range by range" ;;
*) echo "FAIL: no expectation for series $series"; exit 1 ;;
esac
got=$(sed -n 's/^vx: \(driver .* lacks .*\)$/\1/p' "$tmp/out")
[ "$got" = "$want" ] || { printf 'FAIL: vx said\n%s\nwant\n%s\n' "$got" "$want"; exit 1; }
echo "PASS: probe $series"
