# slow_http.py HOST:PORT N MODE: N connections to tankd --http, then how
# long until /healthz is answered (120 s at most).  MODE: half (half a
# request, then nothing), drip (half a request, then a byte a second),
# idle (a whole request answered, kept alive), noread (/state asked, never read).
import socket, sys, time, urllib.request
host, port = sys.argv[1].split(':'); port = int(port)
n = int(sys.argv[2]) if len(sys.argv) > 2 else 64
mode = sys.argv[3] if len(sys.argv) > 3 else 'half'
socks = []
for i in range(n):
    s = socket.create_connection((host, port))
    if mode in ('half', 'drip'):
        s.sendall(b"GET /state HTTP/1.1\r\nHost: x\r\n")
    elif mode == 'noread':
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /state HTTP/1.1\r\nHost: x\r\n\r\n")
    elif mode == 'idle':
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); s.recv(4096)
    socks.append(s)
time.sleep(0.5)
t0 = time.time()
while time.time() - t0 < 120:
    if mode == 'drip':
        for s in socks:
            try: s.send(b"a")
            except Exception: pass
    try:
        urllib.request.urlopen("http://%s:%d/healthz" % (host, port), timeout=1).read()
        print("%s x%d: /healthz answered after %.1f s" % (mode, n, time.time() - t0))
        break
    except Exception:
        time.sleep(0.5)
else:
    print("%s x%d: /healthz not answered in %.0f s" % (mode, n, time.time() - t0))
