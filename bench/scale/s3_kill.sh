#!/bin/bash
# s3_kill.sh N DELAY [KEEPER]: scenario 3: kill -9 tankd DELAY seconds into
# an apply of N pods, start it again, and count: pods stored (all or
# none), processes per pod (no duplicates), processes outside tank's
# groups (orphans), empty groups.  KEEPER=1 runs tankd under --keeper
# (and kills tankd, not the keeper).  Under flock when N > 2000.
set -u
N=${1:-9000}; DELAY=${2:-0.7}; KEEPER=${3:-0}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale10-s3}
. bench/scale/env.sh
OUT=${OUT:-/tmp/scale10-out/s3-$N-$DELAY-$KEEPER}; mkdir -p "$OUT"
rm -rf "$SCALE_DIR"
if [ "$KEEPER" = 1 ]; then scale_start --keeper; else scale_start; fi
bench/scale/gen_pods.sh "$N" >"$OUT/pods.yaml"
victim=$(cat "$SCALE_DIR/lock")   # tankd itself (not its keeper)
$B/tankctl --socket "$TANK_SOCKET" apply -f "$OUT/pods.yaml" >"$OUT/apply.out" 2>"$OUT/apply.err" &
ap=$!
sleep "$DELAY"
kill -9 "$victim"; t0=$(date +%s.%N)
wait $ap; echo "apply rc=$? printed $(wc -l <"$OUT/apply.out") lines; $(tail -1 "$OUT/apply.err")"
echo "at the kill: $(python3 bench/scale/count.py)"
if [ "$KEEPER" != 1 ]; then sleep 1; scale_start; fi
i=0; while ! T ping >/dev/null 2>&1 && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
stored=$(T ps -q | wc -l)
echo "restarted after $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5)s: stored pods $stored"
i=0; while [ "$(T ps --no-headers 2>/dev/null | grep -c ' running ')" -lt "$stored" ] && [ $i -lt 120 ]; do sleep 1; i=$((i+1)); done
echo "running $(T ps --no-headers | grep -c ' running ') after ${i}s: $(python3 bench/scale/count.py)"
T daemon status | grep -E 'adopted|restarts|keeper'
T ps --no-headers | awk '{print $2, $4}' | sort | uniq -c | sort -rn | head -5
T delete -l app=scale >/dev/null; sleep 3
scale_stop
[ "$KEEPER" = 1 ] && { kill "$(cat "$SCALE_DIR/tankd.pid")" 2>/dev/null; sleep 3; }
echo "after delete and stop: $(python3 bench/scale/count.py)"
grep -v ': info:' "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head
