#!/usr/bin/env bash
# gpu_check_sim: runs scripts/gpu-check.sh --sim on the build tree under test,
# then checks the summary it wrote (ok, and the figures a GPU run reports).
set -uo pipefail
src=${VX_TEST_SRC_DIR:?run through ctest} bin=${VX_TEST_BIN_DIR:?run through ctest}
py=${VX_PYTHON3:-python3}
out=$(mktemp -d /tmp/gpu_check_sim.XXXXXX) || exit 1
trap 'rm -rf "$out"' EXIT
bash "$src/scripts/gpu-check.sh" "$out" --sim --build-dir "$bin" >"$out/stdout.txt" 2>&1
rc=$?
"$py" "$src/tests/gpu/check_summary.py" "$out" --mode sim --rc "$rc"
