#!/bin/bash
# s10_termkill.sh N [DELAY]: round 11, scenario 3: N pods, SIGTERM to
# tankd (its graceful stop), SIGKILL DELAY s later (default 0.5), then a
# new tankd on the same data dir: what runs (once each?), what the
# statuses say, processes outside tank's groups; then a clean stop and a
# delete: no process, no group left.  Under flock when N > 2000.
set -u
N=${1:-5000}; DELAY=${2:-0.5}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/attack11-s10}
export SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19513}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
tpid=$(cat "$SCALE_DIR/lock")
scale_apply_running "$N" || exit 1
h=$(python3 bench/scale/procs.py hash "$tpid"); echo "groups tank-$h"
kill -TERM "$tpid"; sleep "$DELAY"; kill -9 "$tpid"
while kill -0 "$tpid" 2>/dev/null; do sleep 0.1; done
echo "killed -9 ${DELAY}s into the stop: $(python3 bench/scale/count.py "$h")"
# a pod the stop had ended before the kill, and one it had not
gone=$(python3 -c "
import sys; sys.path.insert(0, 'bench/scale'); import procs
alive = procs.pods('$h')
names = ['p%05d' % i for i in range($N)]
print(next((n for n in names if n not in alive), ''), next((n for n in names if n in alive), ''))")
set -- $gone; stopped=${1:-}; alive=${2:-}
echo "ended by the stop before the kill: $stopped; still running at the kill: $alive"
sleep 1
scale_start
tpid=$(cat "$SCALE_DIR/lock")
echo "new tankd $tpid"
i=0; while [ "$(T ps --no-headers 2>/dev/null | grep -c ' running ')" -lt "$N" ] && [ $i -lt 180 ]; do sleep 1; i=$((i+1)); done
echo "$(T ps --no-headers | grep -c ' running ') running after ${i}s: $(python3 bench/scale/count.py "$h")"
echo "ps: $(T ps --no-headers | awk '{print $2 " restarts=" $4}' | sort | uniq -c | sort -rn | head -5 | tr '\n' ';')"
python3 -c "
import sys; sys.path.insert(0, 'bench/scale'); import procs
print('outside any tank group:', len(procs.outside()), ' zombies of tankd:', len(procs.zombies($tpid)))"
for p in $stopped $alive; do echo "$p: restarts $(T ps --no-headers | awk -v p=$p '$1 == p {print $4}')"; T history "$p" | tail -7; done
scale_stop
echo "after a clean stop: $(python3 bench/scale/count.py "$h")"
scale_start
T delete -l app=scale >/dev/null; sleep 3
scale_stop
echo "after start, delete and stop: $(python3 bench/scale/count.py "$h")"
echo "tank-$h left: $(ls -d /sys/fs/cgroup/*/tank-$h 2>/dev/null | tr '\n' ' ')"
grep -v ': info:' "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head
