#!/bin/bash
# s18_page.sh [N SECS]: round 14 (issue 38): tankd --http holding N
# stored one-shot pods, completed (no process: N may pass the descriptor
# limit) and 10 pods that crash every 0.1 s (an event every
# few ms); the live page (/events?snapshot=1) is read for SECS seconds
# while a client pings every 100 ms.  Prints the snapshots the page got,
# tankd's CPU over those seconds and the pings' p50, p99 and worst.
# Under flock /work/bench.lock.  B: the build/bin whose tankd to run.
set -u
N=${1:-30000}; SECS=${2:-20}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-page} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19618}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
for ((f = 0; f < N; f += 9000)); do   # under the descriptor check's count
	awk -v f="$f" -v n="$N" 'BEGIN { for (i = f; i < f + 9000 && i < n; i++)
		printf "---\nname: w%06d\nrestart: never\ncontainers: [{name: c, command: [/bin/true]}]\n", i }' |
		T apply -f - --wait --timeout 300s >/dev/null 2>&1 || { echo apply failed; scale_stop; exit 1; }
done
awk 'BEGIN { for (i = 0; i < 10; i++)
	printf "---\nname: crash%d\nbackoff: {base: 100ms, cap: 100ms}\ncontainers: [{name: c, command: [/bin/false]}]\n", i }' |
	T apply -f - >/dev/null
sleep 3
python3 - "$TANK_SOCKET" "$SCALE_HTTP" "$SCALE_PID" "$SECS" <<'PY'
import os, socket, sys, time
sys.path.insert(0, 'bench/scale'); import rpc
sock, addr, pid, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
host, port = addr.rsplit(':', 1)
def cpu():
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
c = socket.create_connection((host, int(port)))
c.sendall(b'GET /events?snapshot=1 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n')
pinger = rpc.Pinger(sock, 0.1)
c0, a, snaps, got = cpu(), time.time(), 0, b''
c.settimeout(1)
while time.time() - a < secs:
    try:
        d = c.recv(1 << 20)
    except socket.timeout:
        continue
    if not d: print('page cut'); break
    got = got[-14:] + d     # the marker is 15 bytes: none lies in 14
    snaps += got.count(b'event: snapshot')
c1 = cpu(); pings = pinger.stop(); c.close()
print(f'{secs:.0f} s: the page got {snaps} snapshots; tankd CPU {c1 - c0:.2f} s')
print(rpc.pings_line(pings))
PY
scale_stop
rm -rf "$SCALE_DIR"
