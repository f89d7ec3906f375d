#!/bin/sh
# predict-table.sh [VX]: offline table of predict against demand, deepum and bound on every
# synthetic workload at 1.5x/2x/3x, drift 1 and 0; share = (demand - predict)/(demand - bound).
VX=${1:-build/vx}
printf '%-18s %4s %5s %8s %8s %8s %8s %6s %6s\n' workload over drift demand predict deepum bound share dshare
for w in transformer-train transformer-infer cnn moe two-stream; do
  for o in 1.5 2 3; do
    for d in 1 0; do
      "$VX" replay --synth "$w,oversub=$o,drift=$d" --json --policy demand,predict,deepum,bound |
        awk -v w="$w" -v o="$o" -v d="$d" '
          { match($0, /"policy":"[a-z]+"/); p = substr($0, RSTART + 10, RLENGTH - 11)
            match($0, /"total_s":[0-9.e+-]+/); t[p] = substr($0, RSTART + 10, RLENGTH - 10) + 0 }
          END { g = t["demand"] - t["bound"]
                s = g > 0 ? (t["demand"] - t["predict"]) / g : 1
                ds = g > 0 ? (t["demand"] - t["deepum"]) / g : 1
                printf "%-18s %4s %5s %8.4f %8.4f %8.4f %8.4f %6.3f %6.3f\n", w, o, d,
                  t["demand"], t["predict"], t["deepum"], t["bound"], s, ds }'
    done
  done
done
