#!/bin/bash
# s27_pages.sh KEPT [P]: round 19 (issue 38): tankd --http on a copy of a
# store kept by `BULK_TOP=KEPT BULK_KEEP=1 build/bench/bench_bulk`
# (100,000 stored one-shot pods); once settled, P live pages
# (/events?snapshot=1) connect and each reads until its snapshot begins,
# then nothing more.  Prints tankd's resident memory before and with the
# pages, tank_http_snapshot_bytes, the snapshot's size and the pings
# (every 10 ms) meanwhile.  Under flock /work/bench.lock.  B: the
# build/bin whose tankd to run.
set -u
KEPT=${1:?usage: s27_pages.sh KEPT_DIR [P]}; P=${2:-60}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-pages} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19627}
. bench/scale/env.sh
scale_start_kept "$KEPT"
python3 - "$TANK_SOCKET" "$P" "$SCALE_HTTP" "$SCALE_PID" <<'PY'
import os, re, signal, socket, subprocess, sys, time, urllib.request
sys.path.insert(0, 'bench/scale'); import rpc
sock, pages, addr, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
host, port = addr.rsplit(':', 1)
def rss():
    return int(re.search(r'VmRSS:\s+(\d+)', open(f'/proc/{pid}/status').read()).group(1))
def gauge():
    m = urllib.request.urlopen(f'http://{addr}/metrics', timeout=600).read().decode()
    g = re.search(r'^tank_http_snapshot_bytes (\S+)', m, re.M)
    return float(g.group(1)) if g else float('nan')    # not before round 19
size = len(urllib.request.urlopen(f'http://{addr}/state', timeout=600).read())
r0 = rss()
# The pinger in a process of its own: this one's recv loops would hold
# the GIL and make the pings look slow.
pinger = subprocess.Popen([sys.executable, '-c', '''
import signal, sys; sys.path.insert(0, "bench/scale"); import rpc
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
p = rpc.Pinger(sys.argv[1], 0.01, id32=True)
signal.sigwait([signal.SIGTERM]); print(rpc.pings_line(p.stop()))
''', sock], stdout=subprocess.PIPE, text=True)
time.sleep(0.5)
a = time.time()
cs = []
for i in range(pages):
    c = socket.create_connection((host, int(port)))
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.sendall(b'GET /events?snapshot=1 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n')
    cs.append(c)
for c in cs:
    got = b''
    c.settimeout(120)
    while b'event: snapshot' not in got:
        d = c.recv(4096)
        if not d: print('page cut'); break
        got += d
t = time.time() - a
r1, peak = rss(), int(re.search(r'VmHWM:\s+(\d+)', open(f'/proc/{pid}/status').read()).group(1))
g = gauge()
pinger.send_signal(signal.SIGTERM)
pings = pinger.communicate()[0].strip()
print(f'{pages} pages, snapshot {size / 1e6:.1f} MB: all began in {t:.1f} s; tankd RSS '
      f'{r0 / 1024:.0f} -> {r1 / 1024:.0f} MiB (peak {peak / 1024:.0f}); '
      f'snapshot bytes held {g / 1e6:.1f} MB ({g / size:.1f} snapshots); ' + pings)
for c in cs: c.close()
PY
scale_stop
rm -rf "$SCALE_DIR"
