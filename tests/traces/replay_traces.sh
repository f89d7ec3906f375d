#!/bin/sh
# replay_traces.sh VX DIR: every committed model trace (DIR/*.vxt, made by
# scripts/model-traces.sh) decodes with vx's decoder and replays through
# demand, predict and bound; at the header's capacity (half the peak
# footprint) demand paging must move data up, the bound is below demand and
# predict in time and in bytes each way (it once counted a miss for every
# kernel output a caching allocator's reuse re-places, above predict's own
# bytes up on four traces of six), and predict gets at least 40% of the gain from demand toward the
# bound, (demand - predict) / (demand - bound): decode traces whose KV cache
# is re-placed every token got 3-29% while the predictor lost the period.  Each trace stays small enough to commit (< 2 MiB).
# replay_traces.sh VX DIR [NAME...]: only the traces named (DIR/NAME.vxt),
# with the same checks: the sanitizer builds replay two (each replay is
# about ten times slower there; the plain build replays all six).
set -eu
vx=$1 dir=$2
shift 2
n=0
if [ $# -gt 0 ]; then
  set -- $(for t in "$@"; do echo "$dir/$t.vxt"; done)
  want=$#
else
  set -- "$dir"/*.vxt
  want=6
fi
for t in "$@"; do
  [ -e "$t" ] || { echo "FAIL: $t: no such trace"; exit 1; }
  n=$((n + 1))
  size=$(wc -c <"$t")
  [ "$size" -lt 2097152 ] || { echo "FAIL: $t is $size bytes (>= 2 MiB)"; exit 1; }
  out=$("$vx" replay "$t" --policy demand,predict,bound --json) || { echo "FAIL: vx replay $t"; exit 1; }
  echo "$out"
  printf '%s\n' "$out" | awk -v t="$t" '
    function num(key,   m) {
      if (!match($0, "\"" key "\":-?[0-9.eE+-]+")) { print "FAIL: " t ": " key " missing: " $0; bad = 1; return 0 }
      m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m + 0
    }
    {
      n++
      if (match($0, /"policy":"[a-z]+"/)) p = substr($0, RSTART + 10, RLENGTH - 11); else p = "?"
      tot[p] = num("total_s"); up[p] = num("bytes_up"); dn[p] = num("bytes_down")
      if (tot[p] <= 0) { print "FAIL: " t ": " p " total_s <= 0"; bad = 1 }
    }
    END {
      if (n != 3 || !("demand" in tot) || !("predict" in tot) || !("bound" in tot)) {
        print "FAIL: " t ": expected demand, predict and bound, got " n " lines"; exit 1
      }
      if (up["demand"] <= 0) { print "FAIL: " t ": demand moved nothing up at half the peak"; bad = 1 }
      split("demand predict", ps, " ")
      for (i in ps) {
        q = ps[i]
        if (tot["bound"] > tot[q]) { print "FAIL: " t ": bound slower than " q; bad = 1 }
        if (up["bound"] > up[q]) { print "FAIL: " t ": bound moves up more than " q; bad = 1 }
        if (dn["bound"] > dn[q]) { print "FAIL: " t ": bound writes back more than " q; bad = 1 }
      }
      g = tot["demand"] - tot["bound"]
      if (g > 0 && (tot["demand"] - tot["predict"]) < 0.4 * g) {
        printf "FAIL: %s: predict gets %.1f%% of the gain toward the bound (< 40%%)\n", t,
          100 * (tot["demand"] - tot["predict"]) / g; bad = 1
      }
      exit bad
    }' || exit 1
done
[ "$n" -ge "$want" ] || { echo "FAIL: expected $want model traces in $dir, found $n"; exit 1; }
echo "traces_replay: $n traces ok"
