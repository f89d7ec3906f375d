#!/usr/bin/env bash
# fault_matrix.sh: every driver entry point libvx calls (core/hooks.def) fails at its 1st, 2nd and Nth
# call (SIMCUDA_FAIL); prog_fault runs without and with vx; vx must give the same error or succeed with data verified.
#
#   fault_matrix.sh APP LIBVX HOOKS_DEF [SANITIZER_RUNTIME]
# Prints a table (entry, N, without vx, with vx, verdict) and the totals;
# exits 1 on any bad verdict: a different error, corrupt data, a crash
# (signal or sanitizer report), or a hang (timeout).  Cases listed in
# fault_matrix.xfail (known libvx bugs, with the reason) print XFAIL instead.
# With VX_MATRIX_FAILMALLOC=path/to/failmalloc.so, allocations libvx makes
# fail too (the 1st, 2nd, ... and all of them: "malloc:N", "malloc:1+").
set -uo pipefail
app=$1 libvx=$2 hooks=$3 san=${4:-}
nth=${VX_MATRIX_NTH:-"1 2 4"}
limit=${VX_MATRIX_TIMEOUT:-20}
[ -x "$app" ] && [ -f "$libvx" ] && [ -f "$hooks" ] || { echo "usage: $0 APP LIBVX HOOKS_DEF [SAN_RUNTIME]" >&2; exit 2; }
xfail_file=$(dirname "$0")/fault_matrix.xfail
# xfail_reason CASE OUTCOME: the reason of the first matching line, if any.
xfail_reason() {
  local glob out reason
  [ -f "$xfail_file" ] || return 0
  while read -r glob out reason; do
    case "$glob" in ''|'#'*) continue ;; esac
    # shellcheck disable=SC2053
    if [[ $1 == $glob ]] && [ "$2" = "$out" ]; then echo "$reason"; return 0; fi
  done <"$xfail_file"
}
preload=$libvx
[ -n "$san" ] && preload="$san:$libvx"
mapfile -t entries < <(sed -nE 's/^VX_(HOOK|REAL)\(CU, *([A-Za-z0-9_]+),.*/\2/p' "$hooks")
[ ${#entries[@]} -gt 0 ] || { echo "fault matrix: no CU entries in $hooks" >&2; exit 1; }
export SIMCUDA_VRAM=16M
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# The native/movable split fixed (2M of the 4M budget movable: the first two
# buffers native), so which call of an entry point is the app's and which
# vx's does not follow the default share.
vxenv=(VX_DEVICE_LIMIT=4M VX_MOVABLE=2M VX_RESERVE=0 VX_NATIVE_MAX=64K VX_STATS=0
  VX_REPORT=$tmp/report.json)

# run OUT [env...]: the app's outcome word, or CRASH(sig)/HANG/EXIT(rc)
run() {
  local out=$1; shift
  env "$@" timeout -k 2 "$limit" "$app" >"$out" 2>"$out.err"
  local rc=$? word
  word=$(sed -n 's/^outcome: \([^ ]*\).*/\1/p' "$out" | head -1)
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo HANG
  elif [ $rc -gt 128 ] && [ $rc -le 192 ]; then echo "CRASH(sig$((rc - 128)))"
  elif [ -z "$word" ]; then echo "EXIT($rc)"
  elif grep -q "Sanitizer\|runtime error:" "$out.err"; then echo "SANITIZER"
  else echo "$word"
  fi
}

# counters REPORT OUTCOME: empty when vx's exit report is consistent: no
# underflow ever, and after a run that freed everything ("ok") nothing is
# still tracked or counted as current bytes; else what is wrong.  A run that
# failed before vx started (lazily, at the first allocation) has no report.
counters() {
  local r=$1 bad="" c v
  if [ ! -s "$r" ]; then
    [ "$2" = ok ] && echo "no exit report"
    return
  fi
  v=$(grep -o '"underflows":[0-9]*' "$r" | grep -v ':0$' | head -1)
  [ -n "$v" ] && bad="$v"
  if [ "$2" = ok ]; then
    for c in tracked native_bytes managed_bytes vmm_bytes host_pinned_bytes host_tier_bytes nvme_bytes \
             app_managed_bytes; do
      v=$(grep -o "\"$c\":[0-9]*" "$r" | grep -v ':0$' | head -1)
      [ -n "$v" ] && bad="$bad $v"
    done
  fi
  echo "$bad"
}

# judge CASE LABEL N WITHOUT WITH VERDICT: adds the counters check and the
# xfail lookup to a verdict, tallies it, prints its table row.
cases=0 survived=0 bad=0 xfail=0
judge() {
  local case=$1 label=$2 n=$3 wo=$4 wi=$5 verdict=$6 ctr known
  ctr=$(counters "$tmp/report.json" "$wi")
  if [ -n "$ctr" ] && [ "${verdict#BAD}" = "$verdict" ]; then
    verdict="BAD: counters:$ctr"
    wi="$wi,counters"
  fi
  cases=$((cases + 1))
  known=$(xfail_reason "$case" "$wi")
  if [ "${verdict#BAD}" = "$verdict" ]; then
    survived=$((survived + 1))
    [ -n "$known" ] && verdict="$verdict; XPASS (drop it from fault_matrix.xfail)"
  elif [ -n "$known" ]; then
    xfail=$((xfail + 1))
    verdict="XFAIL (${verdict#BAD: }): $known"
  else
    bad=$((bad + 1))
    sed 's/^/    | /' "$tmp/wi" "$tmp/wi.err" | head -8
  fi
  printf '%-34s %2s  %-30s %-30s %s\n' "$label" "$n" "$wo" "$wi" "$verdict"
}

base=$(run "$tmp/base" LD_PRELOAD=)
[ "$base" = ok ] || { echo "fault matrix: the app fails without faults: $base"; cat "$tmp/base" "$tmp/base.err"; exit 1; }
vbase=$(run "$tmp/vbase" LD_PRELOAD="$preload" "${vxenv[@]}")
[ "$vbase" = ok ] || { echo "fault matrix: the app fails under vx without faults: $vbase"; cat "$tmp/vbase.err"; exit 1; }
ctr=$(counters "$tmp/report.json" ok)
[ -z "$ctr" ] || { echo "fault matrix: vx's counters are off without faults:$ctr"; exit 1; }
grep -q '"alloc_managed":[1-9]' "$tmp/report.json" || { echo "fault matrix: nothing spilled under vx"; exit 1; }

printf '%-34s %2s  %-30s %-30s %s\n' entry N "without vx" "with vx" verdict
for e in "${entries[@]}"; do
  for n in $nth; do
    spec="$e:$n"
    wo=$(run "$tmp/wo" LD_PRELOAD= SIMCUDA_FAIL="$spec")
    rm -f "$tmp/report.json"
    wi=$(run "$tmp/wi" LD_PRELOAD="$preload" "${vxenv[@]}" SIMCUDA_FAIL="$spec")
    case "$wi" in
      ok) verdict=$([ "$wo" = ok ] && echo "ok (unaffected)" || echo "ok (fallback, verified)") ;;
      CORRUPT|HANG|CRASH*|EXIT*|SANITIZER) verdict="BAD: $wi" ;;
      *) if [ "$wi" = "$wo" ]; then verdict="same error"; else verdict="BAD: different error"; fi ;;
    esac
    judge "$spec" "$e" "$n" "$wo" "$wi" "$verdict"
  done
done
# malloc failures inside libvx (failmalloc.so fails the Nth allocation made
# from libvx.so; not under a sanitizer, whose allocator comes first).  Without
# vx nothing fails, so with vx the app must succeed or see an honest OOM.
fm=${VX_MATRIX_FAILMALLOC:-}
if [ -n "$fm" ] && [ -z "$san" ]; then
  run "$tmp/count" LD_PRELOAD="$fm:$libvx" "${vxenv[@]}" FAILMALLOC_REPORT=1 >/dev/null
  total=$(sed -n 's/^failmalloc: libvx made \([0-9]*\) allocations/\1/p' "$tmp/count.err")
  total=${total:-0}
  [ "$total" -gt 40 ] && total=40
  for spec in $(seq 1 "$total") "1+"; do
    n=${spec%+}; every=0; [ "$spec" != "$n" ] && every=1
    rm -f "$tmp/report.json"
    wi=$(run "$tmp/wi" LD_PRELOAD="$fm:$libvx" "${vxenv[@]}" FAILMALLOC_NTH="$n" FAILMALLOC_EVERY="$every")
    case "$wi" in
      ok) verdict="ok (fallback, verified)" ;;
      CUDA_ERROR_OUT_OF_MEMORY) verdict="ok (OOM reported)" ;;
      *) verdict="BAD: $wi" ;;
    esac
    judge "malloc:$spec" "malloc in libvx" "$spec" ok "$wi" "$verdict"
  done
elif [ -n "$fm" ]; then
  echo "fault matrix: malloc failures skipped (the sanitizer's allocator cannot be interposed)"
fi
echo "fault matrix: $cases cases run, $survived survived, $xfail known failures (fault_matrix.xfail), $bad bad (${#entries[@]} entry points x N in {$nth})"
[ $bad -eq 0 ]
