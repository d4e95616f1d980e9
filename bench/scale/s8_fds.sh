#!/bin/bash
# s8_fds.sh N [IDLE HALF NOREAD HOLD KILLS]: round 11, scenario 1: N pods
# (tankd near its descriptor limit at 9,700), then s8_fds.py's clients.
# Under flock /work/bench.lock when N > 2000.
set -u
N=${1:-9700}; shift
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/attack11-s8}
export SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19511}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
tpid=$(cat "$SCALE_DIR/lock")
scale_apply_running "$N" || exit 1
h=$(python3 -c "
import os
for p in os.listdir('/proc'):
    try:
        if p.isdigit() and open(f'/proc/{p}/stat').read().rsplit(')',1)[1].split()[1] == '$tpid':
            for l in open(f'/proc/{p}/cgroup'):
                if ':pids:' in l and '/tank-' in l: print(l.split('/tank-')[1].split('/')[0]); raise SystemExit
    except OSError: pass")
echo "tankd $tpid, groups tank-$h"
TANKCTL=$B/tankctl python3 bench/scale/s8_fds.py "$TANK_SOCKET" "$tpid" "$h" "$@"
T delete -l app=scale >/dev/null; sleep 3
scale_stop
echo "after delete and stop: $(python3 bench/scale/count.py "$h")"
grep -v ': info:' "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head
