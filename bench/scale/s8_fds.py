#!/usr/bin/env python3
"""s8_fds.py SOCK TANKD_PID HASH [IDLE HALF NOREAD HOLD KILLS]: round 11,
scenario 1 (issue 38): tankd near its descriptor limit, then client
connections at once on its socket: IDLE that connect and say nothing, HALF
that send half a `status` frame and stall, NOREAD that ask `status` of
every pod and never read the answer.  Meanwhile, every 2 s: tankd's
descriptors, its CPU (from /proc/PID/stat), `tankctl get pods` (time, rc,
lines); KILLS container processes killed -9 after 4 s, and whether their
pods got a new process.  Then the clients go, and the same once more.
TANKCTL names the binary (default build/bin/tankctl)."""
import os, subprocess, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procs, rpc

sock, tpid, h = sys.argv[1], int(sys.argv[2]), sys.argv[3]
idle, half, noread, hold, kills = (int(x) for x in (sys.argv[4:9] + ['300', '300', '300', '30', '5'][len(sys.argv[4:9]):]))
tankctl = os.environ.get('TANKCTL', 'build/bin/tankctl')
STATUS = rpc.request(1, 'status')


def load():
    return open('/proc/loadavg').read().split()[0]


def getpods(timeout=10):
    t0 = time.time()
    try:
        r = subprocess.run([tankctl, '--socket', sock, 'get', 'pods'], capture_output=True,
                           timeout=timeout)
        nl = r.stdout.count(b'\n')
        return f'get pods rc={r.returncode} {time.time() - t0:.2f}s lines={nl}' + \
            (f' err={r.stderr.decode().strip()[:120]}' if r.returncode else '')
    except subprocess.TimeoutExpired:
        return f'get pods TIMEOUT after {timeout}s'


last = [procs.cpu_ticks(tpid), time.time()]


def sample(tag):
    c, t = procs.cpu_ticks(tpid), time.time()
    cpu = (c - last[0]) / procs.TICK / (t - last[1]) * 100 if c is not None else -1
    last[0], last[1] = c, t
    print(f'[{tag}] fds={procs.fds(tpid)} rss={procs.rss_mb(tpid)}M cpu={cpu:.0f}% load={load()} {getpods()}', flush=True)


conns = []
refused = 0


def connect(payload):
    global refused
    s = None
    try:
        s = rpc.connect(sock, timeout=3)
        if payload:
            s.sendall(payload)
    except OSError:
        refused += 1
        if s:
            s.close()
        return
    conns.append(s)


sample('before')
before = procs.pods(h)
t0 = time.time()
for _ in range(idle):
    connect(b'')
for _ in range(half):
    connect(STATUS[:5])
for _ in range(noread):
    connect(STATUS)
print(f'opened {len(conns)} connections ({refused} failed) in {time.time() - t0:.1f}s, load={load()}', flush=True)
victims = {}
stop_probe = [False]


def probe():
    # tankctl get pods, again and again, in its own thread: the samples
    # below go on whether it answers or not
    while not stop_probe[0]:
        print(f'   [{time.time() - t0:5.1f}s] {getpods()}', flush=True)
        time.sleep(1)


th = threading.Thread(target=probe)
th.start()
end = time.time() + hold
i = 0
while time.time() < end:
    if i == 2 and kills:
        now = procs.pods(h)
        for pod in sorted(now)[:kills]:
            victims[pod] = now[pod]
            for p in now[pod]:
                os.kill(p, 9)
        print(f'   [{time.time() - t0:5.1f}s] killed -9 the processes of {sorted(victims)}', flush=True)
    c, t = procs.cpu_ticks(tpid), time.time()
    cpu = (c - last[0]) / procs.TICK / (t - last[1]) * 100
    last[0], last[1] = c, t
    back = ''
    if victims:
        now = procs.pods(h)
        back = 'restarted %d/%d' % (len([p for p in victims if now.get(p) and set(now[p]).isdisjoint(victims[p])]), len(victims))
    print(f'   [{t - t0:5.1f}s] fds={procs.fds(tpid)} rss={procs.rss_mb(tpid)}M cpu={cpu:.0f}% load={load()} {back}', flush=True)
    i += 1
    time.sleep(1)
stop_probe[0] = True
th.join()
# what each kind of client got: the idle and half ones read what is there
got = {'eof': 0, 'data': 0, 'nothing': 0, 'reset': 0}
for s in conns:
    s.setblocking(False)
    try:
        d = s.recv(65536)
        got['data' if d else 'eof'] += 1
    except BlockingIOError:
        got['nothing'] += 1
    except OSError:
        got['reset'] += 1
print(f'clients saw: {got}', flush=True)
for s in conns:
    s.close()
conns.clear()
print('clients closed', flush=True)
for j in range(5):
    time.sleep(2)
    sample(f'after {j * 2 + 2}s')
now = procs.pods(h)
back = [p for p in victims if now.get(p) and set(now[p]).isdisjoint(victims[p])]
dups = [p for p, v in now.items() if len(v) > 1]
print(f'end: pods with a process {len(now)} (before {len(before)}), victims restarted {len(back)}/{len(victims)}, '
      f'dups {len(dups)}, zombies of tankd {len(procs.zombies(tpid))}', flush=True)
