#!/bin/bash
# s15_pipeline.sh [N K]: round 13 (issue 38): N pods, then one client
# writes K `status` requests (METHOD=top: `top`s) in one send and never
# reads, while another
# connects and pings 20 times, 250 ms apart.  Prints each ping's time and
# tankd's RSS, then the worst ping.  Under flock /work/bench.lock when
# N > 2000.  B: the build/bin whose tankd to run (default: this tree's).
set -u
N=${1:-9700}; K=${2:-5000}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-pipe} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19614}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
scale_apply_running "$N" >/dev/null || exit 1
sleep 2
python3 - "$TANK_SOCKET" "$K" "$SCALE_PID" "${METHOD:-status}" <<'PY'
import sys, time
sys.path.insert(0, 'bench/scale'); import rpc
sock, k, pid, method = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def rss():
    for l in open(f'/proc/{pid}/status'):
        if l.startswith('VmRSS'):
            return l.split()[1]
payload = b''.join(rpc.request(i, method, id32=True) for i in range(k))
h = rpc.connect(sock)
h.setblocking(False)
try:
    sent = h.send(payload)
except BlockingIOError:
    sent = 0
print(f'sent {sent} bytes of {len(payload)} ({k} {method} requests, never read)', flush=True)
worst = 0
for j in range(20):
    d = rpc.ping(sock, 900, id32=True)
    worst = max(worst, d)
    print(f'ping {j}: {1000 * d:.1f} ms, tankd RSS {rss()} kB', flush=True)
    time.sleep(0.25)
print(f'worst ping {1000 * worst:.0f} ms')
h.close()
PY
scale_stop
rm -rf "$SCALE_DIR"
