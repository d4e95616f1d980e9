#!/bin/bash
# s9_sigstop.sh N [STOPPED_S]: round 11, scenario 2: N pods, tankd
# SIGSTOPped for STOPPED_S seconds, every container's process killed -9
# meanwhile, then SIGCONT: do all come back, once each, with RESTARTS 1?
# Under flock /work/bench.lock when N > 2000.  B= the binaries' dir.
set -u
N=${1:-5000}; STOPPED=${2:-25}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/attack11-s9}
export SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19512}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
tpid=$(cat "$SCALE_DIR/lock")
scale_apply_running "$N" || exit 1
h=$(python3 bench/scale/procs.py hash "$tpid"); echo "groups tank-$h"
kill -STOP "$tpid"; echo "tankd $tpid stopped"
python3 - "$tpid" <<'PY'
import os, sys, time
sys.path.insert(0, 'bench/scale'); import procs
tpid = int(sys.argv[1])
kids = [int(p) for p in os.listdir('/proc') if p.isdigit() and (procs._stat(p) or ['', '0'])[1] == str(tpid)]
for p in kids:
    if procs._is_container(p, b'sleep'):
        os.kill(p, 9)
time.sleep(1)
print(f'killed -9 {len(kids)} children of tankd; zombies of tankd now: {len(procs.zombies(tpid))}, state {procs.state(tpid)}')
PY
sleep "$STOPPED"
t0=$(date +%s.%N); kill -CONT "$tpid"; echo "SIGCONT, load $(cat /proc/loadavg)"
python3 - "$tpid" "$N" "$h" <<'PY'
import os, sys, time
sys.path.insert(0, 'bench/scale'); import procs
tpid, n = int(sys.argv[1]), int(sys.argv[2])
t0 = time.time()
while time.time() - t0 < 180:
    pods = procs.pods(sys.argv[3])
    z = len(procs.zombies(tpid))
    print(f'  +{time.time() - t0:5.1f}s pods with a process {len(pods)}, dups {sum(1 for v in pods.values() if len(v) > 1)}, zombies {z}, tankd {procs.state(tpid)} fds {procs.fds(tpid)}', flush=True)
    if len(pods) >= n and z == 0:
        break
    time.sleep(3)
PY
sleep 2
echo "ps: $(T ps --no-headers | awk '{print $2 " restarts=" $4}' | sort | uniq -c | sort -rn | head -5 | tr '\n' ';')"
T ps --no-headers | awk '$4 != 1' | head -3
echo "count: $(python3 bench/scale/count.py "$h")"
T history p00007 | tail -6
T delete -l app=scale >/dev/null; sleep 3
scale_stop
echo "after delete and stop: $(python3 bench/scale/count.py "$h")"
grep -v ': info:' "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head
