#!/usr/bin/env bash
# cudart_test.sh PROBE LIBCUDA: runs the libcudart probe over the simulator
# with SIMCUDA_LOG=procaddr and checks that the runtime's lookups were logged
# and that every looked-up symbol the simulator exports was answered "found".
# The runtime itself then fails (cuGetExportTable is refused): expected.
set -u
probe=$1 lib=$2
log=$(SIMCUDA_LOG=procaddr "$probe" 2>&1 >/dev/null)
lookups=$(grep '^simcuda: procaddr ' <<<"$log")
n=$(grep -c . <<<"$lookups")
if [ -z "$lookups" ] || [ "$n" -lt 20 ]; then
  echo "FAIL: only $n lookups logged; output was:"; echo "$log" | head -20
  exit 1
fi
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
bad=0 answered=0
while read -r _ _ name _ _ _ result; do
  if grep -qx -- "$name" <<<"$exported"; then
    answered=$((answered + 1))
    if [ "$result" != found ]; then echo "FAIL: $name is exported but was answered $result"; bad=1; fi
  fi
done <<<"$lookups"
found=$(grep -c -- '-> found$' <<<"$lookups")
echo "cudart: $n lookups logged, $found found, $answered of them for symbols the simulator exports"
[ "$answered" -gt 20 ] || { echo "FAIL: too few lookups of exported symbols"; bad=1; }
exit $bad
