#!/bin/bash
# s4_recreate.sh N: scenario 4: N pods running; delete them all and apply
# the same names again at once, while a `tankctl get pods` loop runs;
# then count processes per pod (one each, the new uid's), orphans and
# empty groups.  Under flock when N > 2000.
set -u
N=${1:-5000}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale10-s4}
. bench/scale/env.sh
OUT=${OUT:-/tmp/scale10-out/s4-$N}; mkdir -p "$OUT"
rm -rf "$SCALE_DIR"; scale_start
bench/scale/gen_pods.sh "$N" >"$OUT/pods.yaml"
T apply -f "$OUT/pods.yaml" >/dev/null
i=0; while [ "$(T ps --no-headers | grep -c ' running ')" -lt "$N" ] && [ $i -lt 120 ]; do sleep 1; i=$((i+1)); done
echo "before: $(python3 bench/scale/count.py)"
( n=0; bad=0; while [ ! -f "$OUT/stop" ]; do
	if ! $B/tankctl --socket "$TANK_SOCKET" get pods >"$OUT/get.last" 2>"$OUT/get.err"; then bad=$((bad+1)); cp "$OUT/get.err" "$OUT/get.err.$bad"; fi
	n=$((n+1)); done; echo "get loop: $n calls, $bad failed" ) &
loop=$!
t0=$(date +%s.%N)
T delete -l app=scale >"$OUT/delete.out" 2>"$OUT/delete.err"; echo "delete rc=$? $(wc -l <"$OUT/delete.out") lines $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5)s"
t1=$(date +%s.%N)
T apply -f "$OUT/pods.yaml" >"$OUT/apply.out" 2>"$OUT/apply.err"; echo "apply rc=$? $(grep -c created "$OUT/apply.out") created $(echo "$(date +%s.%N) - $t1" | bc | cut -c1-5)s"
i=0; while [ "$(T ps --no-headers | grep -c ' running ')" -lt "$N" ] && [ $i -lt 180 ]; do sleep 1; i=$((i+1)); done
sleep 3
touch "$OUT/stop"; wait $loop
echo "after ${i}s: running $(T ps --no-headers | grep -c ' running ') $(python3 bench/scale/count.py)"
T ps --no-headers | awk '{print $2, $4}' | sort | uniq -c | sort -rn | head -5
T delete -l app=scale >/dev/null; sleep 3; scale_stop
echo "after delete and stop: $(python3 bench/scale/count.py)"
grep -v ': info:' "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head
