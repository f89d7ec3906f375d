#!/usr/bin/env bash
# demo_test: scripts/demo.sh on this build tree (no rebuild: it is built)
# tells its three acts: without vx out of memory, with vx verified, and the
# repeating loop under plain Unified Memory and vx's predictor with a ratio.
# Usage: demo_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
rc=0
out=$(VX_BUILD_DIR="$2" bash "$1/scripts/demo.sh" 2>&1) || rc=$?
[ "$rc" -eq 0 ] || { echo "$out"; echo "FAIL: demo exited $rc"; exit 1; }
echo "$out" | grep -v '^  \|^sim:'
for want in "=> as expected without vx: the program ran out of device memory" \
            "=> with vx the program completed and its data verified" \
            "   plain Unified Memory " "   vx (predict, default) "; do
  grep -qF -- "$want" <<<"$out" || { echo "FAIL: missing: $want"; exit 1; }
done
grep -qE '^=> vx takes [0-9]+\.[0-9]+x the time of plain Unified Memory' <<<"$out" ||
  { echo "FAIL: no ratio"; exit 1; }
grep -qE '^   \.\.\. [0-9]+%$' <<<"$out" || { echo "FAIL: no build progress"; exit 1; }
echo "demo_test: ok"
