#!/bin/sh
# replay_json.sh VX: checks `vx replay --synth transformer-train,oversub=1.5 --json`:
# one JSON object per policy, with the contract keys and sane values.
set -eu
vx=$1
out=$("$vx" replay --synth transformer-train,oversub=1.5 --json)
echo "$out"
n=$(printf '%s\n' "$out" | wc -l)
[ "$n" -eq 7 ] || { echo "FAIL: expected 7 lines (one per policy), got $n"; exit 1; }
for p in demand deepum static predict clairvoyant bound infinite; do
  printf '%s\n' "$out" | grep -q "^{\"policy\":\"$p\"" || { echo "FAIL: no line for $p"; exit 1; }
done
printf '%s\n' "$out" | awk '
  function num(key,   m) {
    if (!match($0, "\"" key "\":-?[0-9.eE+-]+")) { print "FAIL: " key " missing: " $0; bad = 1; return 0 }
    m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m + 0
  }
  {
    if (substr($0, 1, 1) != "{" || substr($0, length($0), 1) != "}") { print "FAIL: not an object: " $0; bad = 1 }
    t = num("total_s"); s = num("stall_s"); u = num("bytes_up"); d = num("bytes_down")
    o = num("overhead"); g = num("oracle_gain_share"); bg = num("bound_gain_share")
    if (t <= 0 || s < 0 || s > t || u < 0 || d < 0 || o < -1e-9) { print "FAIL: insane values: " $0; bad = 1 }
    if ($0 ~ /"policy":"infinite"/ && (u != 0 || s != 0 || o != 0)) { print "FAIL: infinite moved data: " $0; bad = 1 }
    if ($0 ~ /"policy":"clairvoyant"/ && (g < 0.999 || g > 1.001)) { print "FAIL: clairvoyant share != 1: " $0; bad = 1 }
    if ($0 ~ /"policy":"bound"/ && (bg < 0.999 || bg > 1.001)) { print "FAIL: bound share != 1: " $0; bad = 1 }
    if ($0 ~ /"policy":"demand"/ && (bg < -0.001 || bg > 0.001)) { print "FAIL: demand bound share != 0: " $0; bad = 1 }
    if ($0 ~ /"policy":"bound"/) bt = t
    else if ($0 !~ /"policy":"infinite"/) { np++; tot[np] = t; line[np] = $0 }
    if ($0 ~ /"policy":"demand"/ && (g < -0.001 || g > 0.001)) { print "FAIL: demand share != 0: " $0; bad = 1 }
    dd = num("bytes_down_dead")
    if (dd < 0 || dd > d) { print "FAIL: bytes_down_dead outside 0..bytes_down: " $0; bad = 1 }
    if ($0 ~ /"policy":"(infinite|bound)"/ && dd != 0) { print "FAIL: dead write-backs without evictions: " $0; bad = 1 }
    au = num("ahead_used"); aw = num("ahead_wasted")
    if (au < 0 || aw < 0) { print "FAIL: negative ahead counts: " $0; bad = 1 }
    if ($0 ~ /"policy":"(demand|static|infinite|bound)"/ && (au != 0 || aw != 0)) { print "FAIL: ahead counts of a policy that plans nothing ahead: " $0; bad = 1 }
    if ($0 ~ /"policy":"predict"/ && au == 0) { print "FAIL: predict used nothing it brought up ahead: " $0; bad = 1 }
    vb = num("victims_back")
    if (vb < 0) { print "FAIL: negative victims_back: " $0; bad = 1 }
    if ($0 ~ /"policy":"(demand|static|infinite|bound)"/ && vb != 0) { print "FAIL: victims_back of a policy that evicts nothing ahead: " $0; bad = 1 }
    hb = num("h2d_busy_s"); db = num("d2h_busy_s"); bb = num("both_busy_s")
    if (hb < 0 || db < 0 || bb < 0 || bb > hb + 1e-9 || bb > db + 1e-9 || hb > t + 1e-9 || db > t + 1e-9) {
      print "FAIL: engine busy times outside 0..total, or both above either: " $0; bad = 1
    }
    if ($0 ~ /"policy":"(infinite|bound)"/ && (hb != 0 || db != 0)) { print "FAIL: busy engines without transfers: " $0; bad = 1 }
    if ($0 ~ /"policy":"(demand|predict)"/ && (hb <= 0 || db <= 0)) { print "FAIL: an engine idle in a run that moves data both ways: " $0; bad = 1 }
    if ($0 ~ /"policy":"predict"/) pt = t
    if ($0 ~ /"policy":"demand"/) dt = t
  }
  END {
    if (pt >= dt) { print "FAIL: predict (" pt " s) not faster than demand (" dt " s)"; bad = 1 }
    for (i = 1; i <= np; i++)
      if (tot[i] < bt) { print "FAIL: below the bound (" bt " s): " line[i]; bad = 1 }
    exit bad
  }'
"$vx" replay --synth transformer-train,oversub=1.5 >/dev/null
# The old name of the clairvoyant planner still runs it, printed under that name.
"$vx" replay --synth cnn,iters=2 --policy oracle --json | grep -q '^{"policy":"oracle"' \
  || { echo "FAIL: --policy oracle"; exit 1; }
if "$vx" replay --synth nosuch 2>/dev/null; then echo "FAIL: unknown workload accepted"; exit 1; fi
# --watermark: 1-100 only; 100 is the movable default, so it changes nothing
# there; under --place live the default is libvx's 95, and another value
# changes the plan.
for w in 0 101 x 5x; do
  if "$vx" replay --synth cnn,iters=2 --watermark "$w" 2>/dev/null; then
    echo "FAIL: --watermark $w accepted"; exit 1
  fi
done
m0=$("$vx" replay --synth cnn,iters=3 --policy predict --json | sed 's/"source":"[^"]*",//')
m1=$("$vx" replay --synth cnn,iters=3 --policy predict --watermark 100 --json | sed 's/"source":"[^"]*",//')
[ "$m0" = "$m1" ] || { echo "FAIL: --watermark 100 changed the movable replay: $m0 / $m1"; exit 1; }
l0=$("$vx" replay --synth moe,oversub=2 --place live --policy predict --json)
l1=$("$vx" replay --synth moe,oversub=2 --place live --policy predict --watermark 95 --json)
l2=$("$vx" replay --synth moe,oversub=2 --place live --policy predict --watermark 50 --json)
[ "$l0" = "$l1" ] || { echo "FAIL: --place live's default watermark is not 95: $l0 / $l1"; exit 1; }
[ "$l0" != "$l2" ] || { echo "FAIL: --watermark 50 changed nothing under --place live"; exit 1; }
# --distance N: VX_PREFETCH_DISTANCE in the model, 1-4096; 4096 is the
# planner's own horizon, so it changes nothing; 1 changes predict's plan.
for n in 0 4097 x -1 2x; do
  if "$vx" replay --synth cnn,iters=2 --distance "$n" 2>/dev/null; then
    echo "FAIL: --distance $n accepted"; exit 1
  fi
done
d1=$("$vx" replay --synth moe,oversub=2 --place live --policy predict --distance 4096 --json)
d2=$("$vx" replay --synth moe,oversub=2 --place live --policy predict --distance 1 --json)
[ "$l0" = "$d1" ] || { echo "FAIL: --distance 4096 changed the plan: $l0 / $d1"; exit 1; }
[ "$l0" != "$d2" ] || { echo "FAIL: --distance 1 changed nothing"; exit 1; }
# --place recorded follows the trace's ALLOC flags: a synthetic trace has
# none, so everything is managed and the result differs from --place live
# (which keeps some allocations native) and from movable (no live stack).
if "$vx" replay --synth cnn,iters=2 --place bogus 2>/dev/null; then
  echo "FAIL: --place bogus accepted"; exit 1
fi
r0=$("$vx" replay --synth moe,oversub=2 --place recorded --policy predict --json)
[ -n "$r0" ] && [ "$r0" != "$l0" ] || { echo "FAIL: --place recorded equals live on a flagless trace: $r0"; exit 1; }
r1=$("$vx" replay --synth moe,oversub=2 --policy predict --json)
[ "$r0" != "$r1" ] || { echo "FAIL: --place recorded equals movable: $r0"; exit 1; }
if "$vx" replay --synth cnn --policy lru 2>/dev/null; then echo "FAIL: unknown policy accepted"; exit 1; fi
# A trace written to a file replays exactly as the in-memory one.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
a=$("$vx" replay --synth cnn,iters=3 --save "$tmp/cnn.vxt" --policy demand,predict --json | sed 's/"source":"[^"]*",//')
b=$("$vx" replay "$tmp/cnn.vxt" --policy demand,predict --json | sed 's/"source":"[^"]*",//')
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: file replay differs: $a / $b"; exit 1; }
head -c 100 "$tmp/cnn.vxt" >"$tmp/cut.vxt"
if "$vx" replay "$tmp/cut.vxt" 2>/dev/null; then echo "FAIL: truncated trace accepted"; exit 1; fi
echo "policy_replay_json: ok"
