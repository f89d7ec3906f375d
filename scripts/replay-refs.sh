#!/bin/sh
# replay-refs.sh [VX]: the references of `vx replay` on every synthetic workload at
# 1.5x/2x/3x, drifting and stable addresses: total_s of demand, deepum, static,
# predict, clairvoyant and bound, and predict's share of the gain toward the bound,
# (demand - predict) / (demand - bound).  Checks bound <= every policy's total.
# Exit status 0 when it holds everywhere, 1 when not, 2 on a failure to run.
vx=${1:-build/vx}
[ -x "$vx" ] || { echo "replay-refs: no $vx (build vx-cli first)"; exit 2; }
printf "%-18s %5s %5s %9s %9s %9s %9s %9s %9s %7s\n" workload x drift demand deepum static \
  predict clairv bound share
bad=0
for d in 1 0; do
  for w in transformer-train transformer-infer cnn moe two-stream; do
    for o in 1.5 2 3; do
      out=$("$vx" replay --synth "$w,oversub=$o,drift=$d" \
        --policy demand,deepum,static,predict,clairvoyant,bound --json) || exit 2
      printf '%s\n' "$out" | awk -v w="$w" -v o="$o" -v d="$d" '
        function field(k,   m) {
          if (!match($0, "\"" k "\":\"?[^,\"}]*")) return ""
          m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:"?/, "", m); return m
        }
        { t[field("policy")] = field("total_s") + 0 }
        END {
          b = t["bound"]; bad = 0
          for (p in t) if (t[p] < b - 1e-9) bad = 1
          s = t["demand"] - b > 1e-12 ? (t["demand"] - t["predict"]) / (t["demand"] - b) : 1
          printf "%-18s %5s %5s %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %6.1f%%%s\n", w, o, d,
                 t["demand"], t["deepum"], t["static"], t["predict"], t["clairvoyant"], b,
                 100 * s, bad ? "  BELOW BOUND" : ""
          exit bad
        }' || bad=1
    done
  done
done
exit $bad
