# rpc_churn.py SOCK SECS [reexec]: 24 threads of random RPC against tankd:
# applies, deletes, restarts, stop/start of 8 colliding names, logs
# followed and cut, subscribes cut, top, status, sync, history, actions,
# random bytes, partial frames, and with "reexec" a daemon.reexec now and
# then; closes and resets at random points.  Prints counts by outcome: a
# failure is expected only after garbage (the stream cannot be resynced)
# or, with reexec, a reset by the exec.  Issue 38 round 19: run against
# build/san/bin's tankd (bench/scale/env.sh), it found nothing.
import os, random, socket, struct, sys, time, threading
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpc
sock, secs = sys.argv[1], float(sys.argv[2])
reexec = len(sys.argv) > 3
end = time.time() + secs
names = [f'n{i}' for i in range(8)]
stats = {}
lock = threading.Lock()
def count(k):
    with lock: stats[k] = stats.get(k, 0) + 1
def pod(r, n):
    cmd = r.choice([['/bin/sleep', '1000'], ['/bin/false'], ['/bin/sh', '-c', 'echo hi; sleep 0.2'],
                    ['/bin/sh', '-c', 'while :; do echo x; sleep 0.05; done']])
    return {'name': n, 'backoff': {'base': '50ms', 'cap': '200ms'},
            'restart': r.choice(['always', 'on_failure', 'never']),
            'containers': [{'name': 'c', 'command': cmd}]}
def worker(seed):
    r = random.Random(seed)
    while time.time() < end:
        try:
            s = rpc.connect(sock, timeout=10)
        except OSError as e:
            count('connect:' + str(e.errno)); time.sleep(0.05); continue
        op, garbled = None, False
        try:
            for _ in range(r.randint(1, 6)):
                n = r.choice(names)
                op = r.choice(['apply', 'apply', 'delete', 'restart', 'stop', 'start', 'logs',
                               'subscribe', 'top', 'status', 'sync', 'history', 'action', 'garbage',
                               'reexec'])
                if op == 'reexec' and (not reexec or r.random() > 0.05):
                    op = 'status'
                p = {'apply': lambda: [[pod(r, x) for x in r.sample(names, r.randint(1, 4))]],
                     'delete': lambda: [[n]], 'restart': lambda: [n], 'stop': lambda: [n],
                     'start': lambda: [n], 'logs': lambda: [n, {'follow': True}],
                     'subscribe': lambda: [], 'top': lambda: [], 'status': lambda: [],
                     'sync': lambda: [], 'history': lambda: [n, {'limit': 5}],
                     'action': lambda: [{'pod': n, 'kind': 'exec', 'args': {'command': ['/bin/sleep', '0.3']}}],
                     'garbage': lambda: [], 'reexec': lambda: []}[op]()
                meth = {'action': 'action_submit', 'reexec': 'daemon.reexec'}.get(op, op)
                if op == 'garbage':
                    s.sendall(bytes(r.getrandbits(8) for _ in range(r.randint(1, 64))))
                    garbled = True
                else:
                    fr = rpc.request(r.randint(1, 1000), meth, p)
                    if r.random() < 0.05:
                        s.sendall(fr[:r.randint(1, len(fr))]); count('partial'); break
                    s.sendall(fr)
                if op in ('logs', 'subscribe'):
                    got = 0
                    t0 = time.time()
                    while time.time() - t0 < r.random() * 0.5:
                        s.settimeout(0.2)
                        try:
                            d = s.recv(65536)
                        except socket.timeout:
                            continue
                        if not d: break
                        got += len(d)
                    count(op); break
                s.settimeout(30)
                rpc.read_answer(s)
                count(op)
        except Exception as e:
            count(type(e).__name__ + ('/after-garbage' if garbled else '/' + str(op)))
        finally:
            if r.random() < 0.3:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
            s.close()
ts = [threading.Thread(target=worker, args=(i,)) for i in range(24)]
[t.start() for t in ts]; [t.join() for t in ts]
print(dict(sorted(stats.items())))
