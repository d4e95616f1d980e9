#!/bin/bash
# s14_hogs.sh [N HOGS]: round 12 (issue 38): N pods at backoff.base 100ms,
# then HOGS clients that each ask `status` of every pod and never read;
# 2 s in, the process of pod p00000 is killed -9.  Prints that pod's
# events (`tankctl events -o json`): their `at`, from the kill, says when
# tankd saw the exit and when it started the container again.  Under flock
# /work/bench.lock when N > 2000.  SRC: the tree whose build/bin to run
# (default: this one), to compare two builds.
set -u
N=${1:-9700}; HOGS=${2:-400}
here=$(cd "$(dirname "$0")" && pwd)   # rpc.py: this script's, whichever SRC
cd "${SRC:-$(dirname "$0")/../..}"
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-hogs} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19611}
export SCALE_BACKOFF="base: 100ms"
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
scale_apply_running "$N" || exit 1
"$B/tankctl" --socket "$TANK_SOCKET" events pod/p00000 -o json >"$SCALE_DIR/events" 2>&1 &
ev=$!
sleep 1
PYTHONPATH="$here" python3 - "$TANK_SOCKET" "$HOGS" <<'PY'
import os, sys, time
import rpc
sock, hogs = sys.argv[1], int(sys.argv[2])
STATUS = rpc.request(1, 'status')
cs = []
for _ in range(hogs):
    s = rpc.connect(sock)
    s.sendall(STATUS)
    cs.append(s)
time.sleep(2)
for p in os.listdir('/proc'):
    try:
        if p.isdigit() and '/p00000.' in open(f'/proc/{p}/cgroup').read() and \
           b'sleep' in open(f'/proc/{p}/cmdline', 'rb').read():
            os.kill(int(p), 9)
            open(os.environ['SCALE_DIR'] + '/killed_at', 'w').write(repr(time.time()))
            print(f'killed -9 {p}, {hogs} clients asking status', flush=True)
            break
    except OSError:
        pass
time.sleep(3)
for s in cs:
    s.close()
PY
# Until the container started again (its event comes behind the answers
# queued before it), at most 90 s.
i=0; while ! grep -q '"reason": "started"' "$SCALE_DIR/events" && [ $i -lt 450 ]; do
	sleep 0.2; i=$((i+1))
done
kill "$ev" 2>/dev/null
python3 -c '
import json, sys
from datetime import datetime
seen = float(open(sys.argv[2]).read())
for l in open(sys.argv[1]):
    if not l.startswith("{"):
        continue
    e = json.loads(l)
    if e.get("container") is None:
        continue
    at = datetime.fromisoformat(e["at"].replace("Z", "+00:00")).timestamp()
    line = "%s -> %s (%s)" % (e["from"], e["to"], e["reason"])
    print(line + " %.3fs after the kill" % (at - seen))
' "$SCALE_DIR/events" "$SCALE_DIR/killed_at"
T delete -l app=scale >/dev/null; sleep 2
scale_stop
