#!/usr/bin/env bash
# gpu-check: proves vx on a real NVIDIA GPU (the driver's answers to the
# simulator's open questions, driver-API programs past a device limit,
# PyTorch training and KV-cache inference per policy, hook overhead).
#
#   scripts/gpu-check.sh OUTDIR [--debs DIR] [--quick] [--limit SIZE]
#   scripts/gpu-check.sh OUTDIR --sim [--build-dir DIR]     (CI: simulated driver)
#
# Writes OUTDIR/summary.json (one JSON object, also printed at the end),
# OUTDIR/log.txt (every step's command and output), OUTDIR/build.log and
# OUTDIR/losses.json: four files, so OUTDIR may be the device tool's $OUT.
#
#   --debs DIR       Debian packages from scripts/gpu-debs.sh: unpacked with
#                    dpkg -x into a private prefix (/tmp/vx-deps), never into /
#   --build-dir DIR  reuse an existing build instead of configuring build-gpu
#   --limit SIZE     VX_DEVICE_LIMIT for every vx leg (default 2G; --sim: 32M)
#   --quick          fewer iterations, no inference OOM leg
#   --sim            run against build/tests/simcuda (SIMCUDA_VRAM=256M) and
#                    leave out the PyTorch steps
# VX_CHECK_CMAKE_ARGS (environment): more arguments for configuring the build.
#
# Without a GPU (no /dev/nvidia0, or nvidia-smi fails) and without --sim it
# says so, writes {"gpu": null, "ran": false} and exits 0.  Otherwise it exits
# 0 when every step ran and every result is right, 1 when a result is wrong
# (data or loss mismatch, a vx leg that crashed) or a step could not run.
# Slowness alone never fails it.  The whole run keeps within 8 minutes: each
# step runs under `timeout`, and steps left when time runs out are skipped.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
gpu_dir="$root/tests/gpu"
budget_s=480
t_start=$(date +%s)

usage() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
  exit 2
}

# ---- arguments ----
out="" debs="" build_dir="" limit="" quick=0 sim=0
while [ $# -gt 0 ]; do
  case "$1" in
    --debs) debs=${2:?--debs needs a directory}; shift 2 ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --limit) limit=${2:?--limit needs a size}; shift 2 ;;
    --quick) quick=1; shift ;;
    --sim) sim=1; shift ;;
    -h|--help) usage ;;
    -*) echo "gpu-check: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || usage; out=$1; shift ;;
  esac
done
[ -n "$out" ] || usage
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/vx-gpu-check.XXXXXX) || exit 2
trap 'rm -rf "$work"' EXIT
log="$out/log.txt"
: >"$log"
: >"$work/steps.jsonl"
rm -f "$out/summary.json" "$out/losses.json" "$out/build.log"

say() { echo "gpu-check: $*" | tee -a "$log" >&2; }

# bytes SIZE: a size with K/M/G/T suffix (powers of 1024) in bytes.
bytes() {
  local n=${1%[KkMmGgTt]} s=${1: -1}
  case "$s" in
    [Kk]) echo $((n << 10)) ;; [Mm]) echo $((n << 20)) ;;
    [Gg]) echo $((n << 30)) ;; [Tt]) echo $((n << 40)) ;; *) echo "$1" ;;
  esac
}

# ---- is there a GPU? ----
# VX_CHECK_FAKE_GPU=1 (testing this script only): skip the test and go on as
# on a GPU machine, with whatever libcuda.so.1 the library path gives.
if [ "$sim" -eq 0 ] && [ "${VX_CHECK_FAKE_GPU:-0}" != 1 ]; then
  if ! compgen -G "/dev/nvidia[0-9]*" >/dev/null || ! nvidia-smi -L >"$work/smi-L.txt" 2>&1; then
    say "no NVIDIA GPU here (no /dev/nvidia0 or nvidia-smi failed): nothing was run"
    echo '{"gpu": null, "ran": false}' | tee "$out/summary.json"
    exit 0
  fi
fi

# ---- steps ----
# run_step NAME TIMEOUT_S CMD...: CMD's stdout goes to $work/NAME.out, stderr to
# $work/NAME.err, both to log.txt; rc and seconds to steps.jsonl.  A step is
# skipped (rc -1) when the 8-minute budget has no room left for it.
run_step() {
  local name=$1 limit=$2; shift 2
  local left=$((t_start + budget_s - $(date +%s)))
  if [ "$left" -lt 10 ]; then
    say "$name: skipped, the time budget is spent"
    echo "{\"step\":\"$name\",\"rc\":-1,\"secs\":0,\"skipped\":true}" >>"$work/steps.jsonl"
    return 255
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "==== $name (timeout ${limit}s): $*" >>"$log"
  local t0 rc secs
  t0=$(date +%s%N)
  timeout -k 10 "$limit" "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
  { echo "-- stdout"; tail -c 60000 "$work/$name.out"; echo "-- stderr"; tail -c 60000 "$work/$name.err"
    echo "==== $name: rc=$rc in ${secs}s"; } >>"$log"
  echo "{\"step\":\"$name\",\"rc\":$rc,\"secs\":$secs,\"skipped\":false}" >>"$work/steps.jsonl"
  echo "gpu-check: $name rc=$rc (${secs}s)" >&2
  return $rc
}

# ---- environment ----
# The check decides what is preloaded and which driver is found.
unset LD_PRELOAD
case ",${PYTORCH_CUDA_ALLOC_CONF:-}," in
  *expandable_segments:[Tt]rue*)
    say "warning: PYTORCH_CUDA_ALLOC_CONF=$PYTORCH_CUDA_ALLOC_CONF asks for expandable_segments; cleared for this check (VMM segments are only counted by vx, not spilled)"
    echo "PYTORCH_CUDA_ALLOC_CONF had expandable_segments:True; cleared" >>"$work/warnings.txt"
    unset PYTORCH_CUDA_ALLOC_CONF ;;
esac
# Drop the simulated driver from the search path: the real one must be found.
strip_sim_path() {
  local IFS=: p kept=()
  for p in ${LD_LIBRARY_PATH:-}; do
    case "$p" in */tests/simcuda|*/tests/simcuda/) ;; "") ;; *) kept+=("$p") ;; esac
  done
  echo "${kept[*]:-}"
}
LD_LIBRARY_PATH=$(strip_sim_path)

cmake_args=()
deb_extract() { # DEB PREFIX (DEB an absolute path)
  if command -v dpkg >/dev/null; then
    dpkg -x "$1" "$2"
    return
  fi
  local t rc # no dpkg: a .deb is an ar archive holding data.tar.*
  t=$(mktemp -d) || return 1
  (cd "$t" && ar x "$1") && tar -xf "$t"/data.tar.* -C "$2"
  rc=$?
  rm -rf "$t"
  return $rc
}
unpack_debs() { # DIR -> /tmp/vx-deps; sets PKG_CONFIG_PATH, LD_LIBRARY_PATH, cmake_args
  local dir prefix=/tmp/vx-deps f pc
  dir=$(cd "$1" 2>/dev/null && pwd) || { echo "no directory $1"; return 1; }
  compgen -G "$dir/*.deb" >/dev/null || { echo "no .deb files in $dir"; return 1; }
  rm -rf "$prefix" && mkdir -p "$prefix" || return 1
  for f in "$dir"/*.deb; do
    deb_extract "$f" "$prefix" || { echo "cannot unpack $f"; return 1; }
    echo "unpacked $(basename "$f")"
  done
  local lib="$prefix/usr/lib/x86_64-linux-gnu"
  for pc in "$lib"/pkgconfig/*.pc; do
    sed -i -E "s#^(prefix|exec_prefix|libdir|includedir)=/usr#\\1=$prefix/usr#" "$pc" || return 1
  done
  export PKG_CONFIG_PATH="$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  cmake_args+=("-DUTHASH_INCLUDE=$prefix/usr/include")
  if ! command -v pkg-config >/dev/null; then # the carried pkgconf (needs libpkgconf.so.3)
    "$prefix/usr/bin/pkg-config" --version >/dev/null || { echo "no usable pkg-config"; return 1; }
    cmake_args+=("-DPKG_CONFIG_EXECUTABLE=$prefix/usr/bin/pkg-config")
  fi
  echo "PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "pkg-config: $(command -v pkg-config || echo "$prefix/usr/bin/pkg-config")"
}

if [ -n "$debs" ]; then
  # In this shell, not through run_step, so that the exports stay.
  echo "==== debs: unpacking $debs into /tmp/vx-deps" >>"$log"
  if unpack_debs "$debs" >>"$log" 2>&1; then
    echo '{"step":"debs","rc":0,"secs":0,"skipped":false}' >>"$work/steps.jsonl"
  else
    say "debs: unpacking $debs failed (see log.txt)"
    echo '{"step":"debs","rc":1,"secs":0,"skipped":false}' >>"$work/steps.jsonl"
  fi
fi

# ---- build ----
# CMake targets of the programs below (libvx.so, vx, gpu_probe, gpu_facts,
# capture_probe, vx_oversub).
check_targets=(vx vx-cli gpu_probe gpu_facts capture_probe vx_oversub)
cuda_inc=${VX_CUDA_INCLUDE:-/usr/local/cuda/include}
if [ ! -f "$cuda_inc/cuda.h" ] && command -v nvcc >/dev/null; then
  cuda_inc=$(cd "$(dirname "$(command -v nvcc)")/../include" 2>/dev/null && pwd)
fi
if [ -n "$build_dir" ]; then
  build=$(cd "$build_dir" 2>/dev/null && pwd) || { say "no build directory $build_dir"; build=$build_dir; }
else
  build="$root/build-gpu"
  [ "$sim" -eq 0 ] || build="$root/build-gpu-sim"
  # No build RPATH: test programs linked against the simulated driver must
  # find the real libcuda.so.1 on a GPU machine.  The no-werror launcher: a
  # newer compiler's new warnings must not cost a GPU session (they stay in
  # build.log).
  gen=() keep=(-k)
  if ! command -v make >/dev/null && command -v ninja >/dev/null; then
    gen=(-G Ninja) keep=(-k 0)
  fi
  jobs=$(nproc 2>/dev/null || echo 4)
  # RelWithDebInfo (-O2, the project's default): the flags CI builds with.
  # The check's own targets first; if one of them fails, everything, going
  # on past errors, so that one broken test program costs only its own step.
  # shellcheck disable=SC2086 # VX_CHECK_CMAKE_ARGS is a list of arguments
  run_step configure 90 cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVX_CUDA_INCLUDE="$cuda_inc" -DCMAKE_SKIP_BUILD_RPATH=ON \
    -DCMAKE_C_COMPILER_LAUNCHER="sh;$gpu_dir/no-werror.sh" "${cmake_args[@]}" ${VX_CHECK_CMAKE_ARGS:-} &&
    { run_step build 200 cmake --build "$build" -j "$jobs" --target "${check_targets[@]}" ||
      run_step build_all 200 cmake --build "$build" -j "$jobs" -- "${keep[@]}"; }
  cat "$work"/configure.{out,err} "$work"/build.{out,err} "$work"/build_all.{out,err} \
    >"$out/build.log" 2>/dev/null
fi
# The programs this check runs, by their fixed paths in the build tree.
libvx="$build/libvx.so"
probe="$build/tests/gpu/gpu_probe"
oversub="$build/tests/kit/vx_oversub"
vxtool="$build/vx"
for f in "$libvx" "$probe" "$oversub" "$vxtool" "$build/tests/gpu/gpu_facts" "$build/tests/gpu/capture_probe"; do
  [ -e "$f" ] || { say "missing $f (not built)"; echo "$f" >>"$work/missing.txt"; }
done

# ---- which driver, which sizes ----
if [ "$sim" -eq 1 ]; then
  export SIMCUDA_VRAM=256M
  export LD_LIBRARY_PATH="$build/tests/simcuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  limit=${limit:-32M}
  oom_extra=$((64 << 20))
else
  limit=${limit:-2G}
  oom_extra=$((1 << 30))
fi
limit_b=$(bytes "$limit")
# Sanitizer builds (ctest passes VX_SAN_RUNTIME): that runtime must come first.
vx_preload="${VX_SAN_RUNTIME:+$VX_SAN_RUNTIME:}$libvx"
# vx_env NAME [POLICY]: sets VXE to the `env` prefix of a leg under vx at the
# device limit; VX_STRICT=1 so that a bad option or a failed start-up fails
# the leg instead of passing through; the exit summary goes to the work dir.
vx_env() {
  VXE=(env LD_PRELOAD="$vx_preload" VX_DEVICE_LIMIT="$limit" VX_STRICT=1
       VX_REPORT="$work/vxreport-$1.json")
  [ -z "${2:-}" ] || VXE+=(VX_POLICY="$2")
}

# ---- facts about the machine ----
{
  uname -r >"$work/uname.txt"
  if [ "$sim" -eq 0 ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$work/smi.txt"
    command -v nvcc >/dev/null && nvcc --version >"$work/nvcc.txt"
    timeout 60 python3 -c 'import torch; print(torch.__version__); print(torch.version.cuda)' \
      >"$work/torch.txt"
  fi
} >>"$log" 2>&1
# Which libcuda.so.1 each program gets (the real one, except under --sim).
ldd "$oversub" "$vxtool" "$probe" >"$work/ldd.txt" 2>&1
run_step probe 30 "$probe"
cp "$work/probe.out" "$work/probe.json" 2>/dev/null
vx_env probe
run_step probe_vx 30 "${VXE[@]}" "$probe"
# The card's memory as the driver reports it without vx.
probe_field() { # KEY: a field of the probe's JSON (devices[0]'s for total_mem)
  python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
print(p["devices"][0]["total_mem"] if sys.argv[2] == "total_mem" else p[sys.argv[2]])' \
    "$work/probe.json" "$1" 2>/dev/null
}
phys_b=$(probe_field total_mem || echo 0)
# The open questions first (issue 12): CUkernel queries, batch calls on the
# legacy stream, free memory after the context and after cuBLAS, the kind of
# a captured node, lookups before/after cuInit, managed bandwidth by prefetch
# and by faults.  gpu_facts never asks for more managed memory than half of
# what is free.
facts_sizes=1G,4G
[ "$sim" -eq 0 ] || facts_sizes=16M,64M
run_step facts 90 "$build/tests/gpu/gpu_facts" --sizes "$facts_sizes"
cp "$work/facts.out" "$work/facts.json" 2>/dev/null
# Which calls a stream capture forbids on this driver, against the
# simulator's table (exit 1: the driver is stricter somewhere, a defect of
# the simulator; the table and the count go to the summary either way).
run_step capture_table 60 "$build/tests/gpu/capture_probe"
libcuda_dir=$(dirname "$(probe_field libcuda)" 2>/dev/null)
[ "$libcuda_dir" != "." ] || libcuda_dir=""

# ---- 1. driver-API programs past the limit ----
# With vx in the three ways programs reach the driver: linked, dlopen+dlsym,
# and cuGetProcAddress_v2 (CUDA 13, per-thread default stream) as cudart does.
for lookup in linked dlsym procaddr:13000:ptds; do
  leg=oversub_vx_${lookup%%:*}
  vx_env "$leg"
  run_step "$leg" 120 "${VXE[@]}" "$oversub" --bytes $((4 * limit_b)) --lookup "$lookup"
done
# The NVMe tier where it has landed: host memory for spills capped at the
# limit, the rest in a private swap file (vx degrades, never fails, where
# io_uring or O_DIRECT is refused, as gVisor may).
mkdir -p "$work/swap" && chmod 700 "$work/swap"
vx_env oversub_vx_nvme
run_step oversub_vx_nvme 120 "${VXE[@]}" VX_NVME_DIR="$work/swap" VX_HOST_LIMIT="$limit" \
  "$oversub" --bytes $((4 * limit_b))
run_step oversub_native 120 "$oversub" --bytes $((4 * limit_b))
if [ "$phys_b" -gt 0 ]; then
  # Plain cuMemAlloc past the card's memory just fails: safe on a real GPU.
  run_step oversub_oom 120 "$oversub" --bytes $((phys_b + oom_extra))
else
  say "oversub_oom: skipped, the probe gave no device memory size"
fi

# ---- 2. the hooks benchmark on this driver ----
# `vx bench hooks` measures the libcuda.so.1 the dynamic linker finds, or
# with --sim the build tree's simulated driver; the probe's directory is
# named too, in case the real one is off the linker's paths.  On the
# simulator fewer iterations keep the CI test short.
hooks_env=(env) hooks_args=()
if [ "$sim" -eq 1 ]; then
  hooks_args=(--sim --iters 30000)
elif [ -n "$libcuda_dir" ]; then
  hooks_env=(env LD_LIBRARY_PATH="$libcuda_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
if [ -n "${VX_SAN_RUNTIME:-}" ]; then # sanitizer build (CI): see hooks_children.sh
  run_step hooks 120 bash "$gpu_dir/hooks_children.sh" "$vxtool" "$vx_preload" 10000
else
  run_step hooks 120 "${hooks_env[@]}" "$vxtool" bench hooks "${hooks_args[@]}"
fi

# ---- 3, 4. PyTorch training and inference ----
torch_leg() { # SCRIPT LEG ARGS...: one run of train_gpt.py / infer_kv.py
  local script=$1 leg=$2; shift 2
  local base=${script%%_*}
  local cmd=(python3 "$gpu_dir/$script.py" --out "$work/$base-$leg.json" "$@")
  case "$leg" in
    ref) run_step "$base-$leg" 90 "${cmd[@]}" ;;
    oom) run_step "$base-$leg" 90 "${cmd[@]}" --memory-limit-bytes "$limit_b" ;;
    *) vx_env "$base-$leg" "$leg"
       run_step "$base-$leg" 120 "${VXE[@]}" "${cmd[@]}" ;;
  esac
}
if [ "$sim" -eq 0 ]; then
  if [ -s "$work/torch.txt" ]; then
    export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
    if [ "$quick" -eq 1 ]; then
      train_args=(--warmup 2 --iters 5); infer_args=(--steps 248)
    else
      train_args=(--warmup 3 --iters 20); infer_args=(--steps 504)
    fi
    for leg in ref oom demand static; do
      torch_leg train_gpt "$leg" --target-bytes $((2 * limit_b)) "${train_args[@]}"
    done
    # residency_within_limit: the device's used memory, sampled from NVML
    # (nvidia-smi) every 200 ms while the predict leg trains at 2x the limit.
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 \
      >"$work/residency-base.txt" 2>/dev/null
    (while :; do
       nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null
       sleep 0.2
     done) >"$work/residency.txt" &
    sampler=$!
    torch_leg train_gpt predict --target-bytes $((2 * limit_b)) "${train_args[@]}"
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    infer_legs=(ref demand static predict)
    [ "$quick" -eq 1 ] || infer_legs+=(oom)
    for leg in "${infer_legs[@]}"; do
      torch_leg infer_kv "$leg" --target-bytes $((2 * limit_b)) "${infer_args[@]}"
    done
  else
    say "python3 cannot import torch: the PyTorch steps are not run"
  fi
fi

# ---- summary ----
python3 "$gpu_dir/summarize.py" --work "$work" --out "$out" --limit "$limit_b" \
  --mode "$([ "$sim" -eq 1 ] && echo sim || echo gpu)" --quick "$quick" \
  --elapsed "$(($(date +%s) - t_start))" 2>"$work/summarize.err"
rc=$?
tee -a "$log" <"$work/summarize.err" >&2
if [ -f "$out/summary.json" ]; then
  cat "$out/summary.json"
else
  say "summarize.py failed (rc $rc): see log.txt"
  rc=1
fi
exit $rc
