#!/bin/bash
# s26_scrape_stored.sh KEPT [R]: round 17 (issue 38): tankd --http on a
# copy of a store kept by `BULK_TOP=KEPT BULK_KEEP=1 build/bench/bench_bulk`
# (100,000 stored one-shot pods); once it settled, R GETs of /metrics,
# then R of /state, one after another, while a client pings tankd's RPC
# socket every 10 ms.  Prints each phase's answer size, time a GET and
# tankd's CPU a GET, and the pings during it (p50, p99, worst).  Under
# flock /work/bench.lock.  B: the build/bin whose tankd to run.
set -u
KEPT=${1:?usage: s26_scrape_stored.sh KEPT_DIR [R]}; R=${2:-5}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-scrape} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19626}
. bench/scale/env.sh
scale_start_kept "$KEPT"
python3 - "$TANK_SOCKET" "$R" "$SCALE_HTTP" "$SCALE_PID" <<'PY'
import os, sys, time, urllib.request
sys.path.insert(0, 'bench/scale'); import rpc
sock, r, addr, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def cpu():
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
for path in ('/metrics', '/state'):
    p = rpc.Pinger(sock, 0.01, id32=True)
    time.sleep(0.2)
    c0, a = cpu(), time.time()
    for i in range(r):
        size = len(urllib.request.urlopen(f'http://{addr}{path}', timeout=600).read())
    t, c = (time.time() - a) / r, (cpu() - c0) / r
    time.sleep(0.2)
    print(f'{path}: {size} bytes, {1000 * t:.0f} ms a GET, tankd CPU {1000 * c:.0f} ms a GET; '
          + rpc.pings_line(p.stop()))
PY
scale_stop
cp "$SCALE_DIR/tankd.err" /tmp/s26-tankd.err 2>/dev/null; rm -rf "$SCALE_DIR"
