#!/usr/bin/env bash
# gpu_check_nogpu: on a machine without a GPU, scripts/gpu-check.sh says so
# plainly, writes {"gpu": null, "ran": false} and exits 0 without building.
set -uo pipefail
src=${VX_TEST_SRC_DIR:?run through ctest}
if compgen -G "/dev/nvidia[0-9]*" >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is present: this test is for machines without one"
  exit 77
fi
had_build=0
[ ! -e "$src/build-gpu" ] || had_build=1
out=$(mktemp -d /tmp/gpu_check_nogpu.XXXXXX) || exit 1
trap 'rm -rf "$out"' EXIT
bash "$src/scripts/gpu-check.sh" "$out" >"$out/stdout.txt" 2>"$out/stderr.txt"
rc=$?
fail() { echo "gpu_check_nogpu: $*"; cat "$out/stdout.txt" "$out/stderr.txt"; exit 1; }
[ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
grep -q "no NVIDIA GPU here" "$out/stderr.txt" || fail "it did not say that there is no GPU"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s == {"gpu": None, "ran": False}, s' \
  "$out/summary.json" || fail "summary.json is not {\"gpu\": null, \"ran\": false}"
[ "$had_build" -eq 1 ] || [ ! -e "$src/build-gpu" ] || fail "it configured build-gpu"
echo "gpu_check_nogpu: ok"
