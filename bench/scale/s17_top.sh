#!/bin/bash
# s17_top.sh [N R]: round 14 (issue 38): N pods, then `top` of every pod
# R times in a row (raw RPC, each answer read whole) while another client
# pings every 20 ms.  Prints each top's time, tankd's CPU for the R tops,
# and the pings' p50, p99 and worst.  Under flock /work/bench.lock when
# N > 2000.  B: the build/bin whose tankd to run (default: this tree's).
set -u
N=${1:-9700}; R=${2:-5}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-top} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19617}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
scale_apply_running "$N" >/dev/null || exit 1
sleep 2
python3 - "$TANK_SOCKET" "$R" "$SCALE_PID" <<'PY'
import os, socket, struct, sys, threading, time
sock, r, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def req(i, m):
    return bytes([0x94, 0x00, 0xce]) + struct.pack('>I', i) + bytes([0xa0 | len(m)]) + m + b'\x90'
def cpu():
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
def skip(b, i):
    # the end of the msgpack object at b[i:] (enough of the format for an answer)
    t = b[i]
    if t <= 0x7f or t >= 0xe0 or t in (0xc0, 0xc2, 0xc3): return i + 1
    if 0xa0 <= t <= 0xbf: return i + 1 + (t & 0x1f)
    if 0x90 <= t <= 0x9f: n, i = t & 0x0f, i + 1; m = 1
    elif 0x80 <= t <= 0x8f: n, i = (t & 0x0f) * 2, i + 1; m = 1
    elif t == 0xdc: n, i = struct.unpack('>H', b[i+1:i+3])[0], i + 3
    elif t == 0xdd: n, i = struct.unpack('>I', b[i+1:i+5])[0], i + 5
    elif t == 0xde: n, i = struct.unpack('>H', b[i+1:i+3])[0] * 2, i + 3
    elif t == 0xdf: n, i = struct.unpack('>I', b[i+1:i+5])[0] * 2, i + 5
    else:
        fixed = {0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8, 0xca: 4, 0xcb: 8}
        if t in fixed: return i + 1 + fixed[t]
        if t == 0xd9: return i + 2 + b[i+1]
        if t == 0xda: return i + 3 + struct.unpack('>H', b[i+1:i+3])[0]
        if t == 0xdb: return i + 5 + struct.unpack('>I', b[i+1:i+5])[0]
        raise ValueError(hex(t))
    for _ in range(n): i = skip(b, i)
    return i
pings, stop = [], False
def pinger():
    p = socket.socket(socket.AF_UNIX); p.connect(sock)
    while not stop:
        a = time.time(); p.sendall(req(1, b'ping')); p.recv(100); pings.append(time.time() - a)
        time.sleep(0.02)
t = threading.Thread(target=pinger); t.start()
time.sleep(0.5)
c = socket.socket(socket.AF_UNIX); c.connect(sock)
c0 = cpu(); tops = []
for j in range(r):
    a = time.time(); c.sendall(req(j, b'top')); buf = b''
    while True:
        buf += c.recv(1 << 20)
        try:
            if skip(buf, 0) <= len(buf): break
        except (IndexError, struct.error):
            pass
    tops.append(time.time() - a)
c1 = cpu()
time.sleep(0.3); stop = True; t.join()
pings.sort()
print('tops (s): ' + ' '.join(f'{x:.3f}' for x in tops) + f', answer {len(buf)} bytes')
print(f'tankd CPU for {r} tops: {c1 - c0:.2f} s')
print(f'pings: {len(pings)}, p50 {1000 * pings[len(pings) // 2]:.1f} ms, p99 {1000 * pings[int(len(pings) * 0.99)]:.1f} ms, worst {1000 * pings[-1]:.1f} ms')
PY
scale_stop
rm -rf "$SCALE_DIR"
