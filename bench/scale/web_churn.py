# web_churn.py PORT SECS: 40 threads that open /events?snapshot=1, /state,
# /metrics or /events, read 0 B to 10 MB of the answer (pausing now and
# then), and close or reset; prints the connections, snapshots seen and
# errors by kind (issue 38 round 19: a connection refused means tankd is gone).
import os, random, socket, sys, time, threading
host, port, secs = '127.0.0.1', int(sys.argv[1]), float(sys.argv[2])
end = time.time() + secs
stats = {'conn': 0, 'snap': 0, 'err': 0}
def worker(seed):
    r = random.Random(seed)
    while time.time() < end:
        try:
            c = socket.create_connection((host, port), timeout=5)
            path = r.choice(['/events?snapshot=1', '/events?snapshot=1', '/state', '/metrics', '/events'])
            c.sendall(f'GET {path} HTTP/1.1\r\nHost: x\r\n\r\n'.encode())
            stats['conn'] += 1
            want = r.choice([0, 100, 50000, 400000, 10**7])
            got = 0
            while got < want:
                d = c.recv(65536)
                if not d: break
                if b'event: snapshot' in d: stats['snap'] += 1
                got += len(d)
                if r.random() < 0.01: time.sleep(0.2)
            if r.random() < 0.5:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b'\x01\x00\x00\x00\x00\x00\x00\x00')  # RST
            c.close()
        except Exception as e:
            stats['err'] += 1
            k = type(e).__name__ + ':' + str(getattr(e, 'errno', ''))
            stats[k] = stats.get(k, 0) + 1
            time.sleep(0.05)
ts = [threading.Thread(target=worker, args=(i,)) for i in range(40)]
[t.start() for t in ts]; [t.join() for t in ts]
print(stats)
