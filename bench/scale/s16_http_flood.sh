#!/bin/bash
# s16_http_flood.sh [N K PATH]: round 14 (issue 38): tankd --http with N
# pods; K clients connect at once and each asks for PATH (/state or
# /metrics, or /events?snapshot=1: read until its first snapshot ends)
# without reading yet, while another client pings tankd's RPC socket 20
# times, 250 ms apart.  Prints the time until every answer is read, how
# many distinct bodies came back, tankd's CPU meanwhile, each ping's time
# and the worst.  Under flock /work/bench.lock when N > 2000.  B: the build/bin
# whose tankd to run (default: this tree's).
set -u
N=${1:-9700}; K=${2:-64}; P=${3:-/state}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-httpflood} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19615}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
scale_apply_running "$N" >/dev/null || exit 1
sleep 2
python3 - "$TANK_SOCKET" "$K" "$SCALE_HTTP" "$P" "$SCALE_PID" <<'PY'
import hashlib, os, socket, sys, threading, time
sys.path.insert(0, 'bench/scale'); import rpc
sock, k, addr, path, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def cpu():
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
host, port = addr.rsplit(':', 1)
pings = []
def pinger():
    for j in range(20):
        pings.append(rpc.ping(sock, 900, id32=True))
        time.sleep(0.25)
conns = []
for i in range(k):
    c = socket.create_connection((host, int(port)))
    conns.append(c)
t = threading.Thread(target=pinger)
a = time.time()
c0 = cpu()
for c in conns:
    c.sendall(f'GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'.encode())
t.start()
bodies = set()
for c in conns:
    c.settimeout(900)
    data = b''
    while True:
        d = c.recv(1 << 20)
        if not d:
            break
        data += d
        i = data.find(b'event: snapshot')
        if i >= 0 and data.find(b'\n\n', i) >= 0:
            data = data[i:data.find(b'\n\n', i)]
            break
    c.close()
    bodies.add(hashlib.sha1(data.split(b'\r\n\r\n', 1)[-1]).hexdigest())
b = time.time()
c1 = cpu()
t.join()
print(f'{k} x GET {path}: all read after {b - a:.2f} s, {len(bodies)} distinct bodies, tankd CPU {c1 - c0:.2f} s')
print('pings (ms): ' + ' '.join(f'{1000 * x:.0f}' for x in pings))
print(f'worst ping {1000 * max(pings):.0f} ms')
PY
scale_stop
rm -rf "$SCALE_DIR"
