#!/usr/bin/env bash
# Makes the launch traces of real PyTorch models that tests/traces holds
# (committed, so that CI and `vx replay` need no torch):
#
#   scripts/model-traces.sh [OUTDIR]        default: tests/traces
#   scripts/model-traces.sh --table [DIR]   replays DIR's traces (no torch):
#       total_s of demand deepum predict oracle bound and the share of the
#       gain from demand toward bound, (demand - predict) / (demand - bound);
#       VX names the vx binary (default build/vx)
#
# Installs torch (CPU is enough: the models run on the meta device) into a
# private venv, .venv-models/ (git-ignored; VX_MODELS_VENV moves it), trying
# PyTorch's CPU-only wheel index first and plain PyPI after; then runs
# tools/torch_trace.py for each model. The traces are deterministic: a rerun
# with the same torch writes the same bytes. Exit 0 when every trace was
# written; 1 (saying why) otherwise.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/tests/traces}
venv=${VX_MODELS_VENV:-$root/.venv-models}
MODELS=(gpt2-medium bert-base resnet50 moe llama-decode mixtral-decode)
say() { echo "model-traces: $*" >&2; }

if [ "${1:-}" = --table ]; then
  dir=${2:-$root/tests/traces} vx=${VX:-$root/build/vx}
  [ -x "$vx" ] || { say "no $vx: build first (cmake --build build --target vx-cli)"; exit 1; }
  printf '%-16s %9s %9s %9s %9s %9s %7s\n' trace demand deepum predict oracle bound share
  for t in "$dir"/*.vxt; do
    "$vx" replay "$t" --policy demand,deepum,predict,oracle,bound --json | awk -v n="$(basename "$t" .vxt)" '
      { match($0, /"policy":"[a-z]+"/); p = substr($0, RSTART + 10, RLENGTH - 11)
        match($0, /"total_s":[0-9.eE+-]+/); v[p] = substr($0, RSTART + 10, RLENGTH - 10) + 0 }
      END { s = v["demand"] > v["bound"] ? (v["demand"] - v["predict"]) / (v["demand"] - v["bound"]) : 0
            printf "%-16s %9.3f %9.3f %9.3f %9.3f %9.3f %6.1f%%\n", n, v["demand"], v["deepum"],
                   v["predict"], v["oracle"], v["bound"], 100 * s }' || exit 1
  done
  exit 0
fi

if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  command -v python3 >/dev/null || { say "no python3: cannot make the venv"; exit 1; }
  rm -rf "$venv"
  python3 -m venv "$venv" || { say "python3 -m venv failed (python3-venv missing?)"; exit 1; }
  log=$venv/pip.log
  pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
  if ! "${pip[@]}" torch --index-url https://download.pytorch.org/whl/cpu >"$log" 2>&1; then
    say "CPU-only wheel index unreachable; installing torch from PyPI (large: CUDA libraries too)"
    "${pip[@]}" torch >>"$log" 2>&1 || { say "pip install torch failed:"; tail -3 "$log" >&2; exit 1; }
  fi
fi
"$venv/bin/python" -c 'import torch; print("model-traces: torch", torch.__version__)' 2>/dev/null >&2

mkdir -p "$out"
rc=0
for m in "${MODELS[@]}"; do
  # torch warns that numpy is missing; nothing here needs it.
  if ! "$venv/bin/python" -W ignore "$root/tools/torch_trace.py" "$m" "$out/$m.vxt" 2> >(grep -v -i numpy >&2); then
    say "$m failed"
    rc=1
  fi
done
exit $rc
