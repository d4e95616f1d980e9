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
import os, sys, time
sys.path.insert(0, 'bench/scale'); import rpc
sock, r, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def cpu():
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
pinger = rpc.Pinger(sock, 0.02, id32=True)
time.sleep(0.5)
c = rpc.connect(sock)
c0 = cpu(); tops = []
for j in range(r):
    # the answer walked from its start after each read, as this script
    # always did (its times include that; rpc.read_answer resumes instead)
    a = time.time(); c.sendall(rpc.request(j, 'top', id32=True)); buf = b''
    while True:
        d = c.recv(1 << 20)
        if not d: sys.exit('tankd closed the connection')
        buf += d
        if rpc.obj_end(buf) is not None: break
    tops.append(time.time() - a)
c1 = cpu()
time.sleep(0.3); pings = pinger.stop()
print('tops (s): ' + ' '.join(f'{x:.3f}' for x in tops) + f', answer {len(buf)} bytes')
print(f'tankd CPU for {r} tops: {c1 - c0:.2f} s')
print(rpc.pings_line(pings))
PY
scale_stop
rm -rf "$SCALE_DIR"
