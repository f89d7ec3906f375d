#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with warnings as
# errors, runs every test through CTest, then again under ASan+UBSan, and the
# threaded tests under TSan.  Non-zero exit on any failure.
#
#   scripts/test.sh            everything
#   VX_TEST_QUICK=1 scripts/test.sh    plain build only (no sanitizer passes)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/deps.sh
vx_install_deps clang python3-venv
# The real clients tests/clients runs (pip into .venv-clients/, Debian's
# libcuda1 into .clients/), cached; what cannot be had makes its test skip.
bash scripts/clients.sh all || echo "vx: some real clients could not be installed; their tests skip"

jobs=$(nproc 2>/dev/null || echo 2)
cuda_inc=${VX_CUDA_INCLUDE:-/usr/local/cuda/include}
status=0

run_pass() { # name builddir ctest-args... -- cmake-args...
  local name=$1 dir=$2; shift 2
  local ctest_args=() cmake_args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do ctest_args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  cmake_args=("$@")
  echo "==== vx test pass: $name ($dir)"
  cmake -S . -B "$dir" -DVX_CUDA_INCLUDE="$cuda_inc" "${cmake_args[@]}" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; echo "vx: configure failed ($name)"; return 1; }
  cmake --build "$dir" -j "$jobs" 2>&1 | grep -vE '^\[ *[0-9]+%\]' || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "vx: build failed ($name)"; return 1; }
  (cd "$dir" && ctest --output-on-failure -j "$jobs" "${ctest_args[@]}") \
    || { echo "vx: tests failed ($name)"; return 1; }
}

# Production sources are clang-formatted (STYLE.md); a difference fails the run.
echo "==== vx test pass: format (clang-format)"
bash scripts/format.sh --check || status=1
mkdir -p build
run_pass plain build -- || status=1
if [ "${VX_TEST_QUICK:-0}" != 1 ]; then
  run_pass "asan+ubsan" build-asan -LE nosan -- -DVX_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug || status=1
  run_pass tsan build-tsan -L threaded -LE nosan -- -DVX_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug || status=1
fi
# libFuzzer on every parser, briefly (clang; scripts/fuzz.sh SECONDS for longer).
if [ "${VX_TEST_QUICK:-0}" != 1 ]; then
  echo "==== vx test pass: fuzz (build-fuzz)"
  bash scripts/fuzz.sh 15 || { echo "vx: fuzzing found a failure"; status=1; }
fi
if [ $status -eq 0 ]; then echo "vx: all test passes succeeded"; else echo "vx: SOME TEST PASSES FAILED"; fi
exit $status
