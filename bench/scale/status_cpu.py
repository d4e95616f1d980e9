# status_cpu.py SOCKET TANKD_PID [N]: issue 38 round 13 (docs/bench.md).
# 20 raw `status []` requests to tankd, each answer read whole; prints
# tankd's CPU (utime+stime, /proc/PID/stat) for them and the answers' size.
import os, socket, sys, time

def obj_end(b, st):
    """Walks b from state st = [i, todo]; the end index once whole, else
    None with st kept at the first item not whole (resumable)."""
    i, todo = st
    n = len(b)
    while todo:
        st[0], st[1] = i, todo
        if i >= n: return None
        c = b[i]; todo -= 1
        def be(k):
            if i + 1 + k > n: raise IndexError
            return int.from_bytes(b[i+1:i+1+k], 'big')
        try:
            if c <= 0x7f or c >= 0xe0 or c in (0xc0, 0xc2, 0xc3): i += 1
            elif 0x80 <= c <= 0x8f: todo += 2 * (c & 0xf); i += 1
            elif 0x90 <= c <= 0x9f: todo += c & 0xf; i += 1
            elif 0xa0 <= c <= 0xbf: i += 1 + (c & 0x1f)
            elif c in (0xc4, 0xd9): i += 2 + be(1)
            elif c in (0xc5, 0xda): i += 3 + be(2)
            elif c in (0xc6, 0xdb): i += 5 + be(4)
            elif c == 0xdc: todo += be(2); i += 3
            elif c == 0xdd: todo += be(4); i += 5
            elif c == 0xde: todo += 2 * be(2); i += 3
            elif c == 0xdf: todo += 2 * be(4); i += 5
            elif c in (0xcc, 0xd0): i += 2
            elif c in (0xcd, 0xd1): i += 3
            elif c in (0xca, 0xce, 0xd2): i += 5
            elif c in (0xcb, 0xcf, 0xd3): i += 9
            elif c == 0xd4: i += 3
            elif c == 0xd5: i += 4
            elif c == 0xd6: i += 6
            elif c == 0xd7: i += 10
            elif c == 0xd8: i += 18
            elif c == 0xc7: i += 3 + be(1)
            elif c == 0xc8: i += 4 + be(2)
            elif c == 0xc9: i += 6 + be(4)
            else: raise ValueError(hex(c))
        except IndexError:
            return None
    if i > n:
        return None   # a payload not all in: st is at its header
    return i

def cpu(pid):
    f = open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')

sock_path, pid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 20
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock_path)
c0, t0 = cpu(pid), time.monotonic()
size = 0
for k in range(n):
    s.sendall(bytes([0x94, 0x00, k, 0xa6]) + b'status' + bytes([0x90]))
    buf = bytearray()
    st = [0, 1]
    while True:
        chunk = s.recv(1 << 20)
        if not chunk: sys.exit('closed')
        buf += chunk
        e = obj_end(buf, st)
        if e is not None: break
    assert buf[0] == 0x94 and buf[1] == 0x01 and buf[2] == k and buf[3] == 0xc0, buf[:8]
    size = len(buf)
c1, t1 = cpu(pid), time.monotonic()
time.sleep(0)
ci = cpu(pid); time.sleep(t1 - t0); ci = cpu(pid) - ci   # idle tankd over as long
print('tankd_cpu_ms_per_status=%.1f idle_cpu_ms_same_span=%.0f wall_ms_per_status=%.1f answer_bytes=%d n=%d' %
      ((c1 - c0) * 1000 / n, ci * 1000, (t1 - t0) * 1000 / n, size, n))
