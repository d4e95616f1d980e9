# status_cpu.py SOCKET TANKD_PID [N]: issue 38 round 13 (docs/bench.md).
# 20 raw `status []` requests to tankd, each answer read whole; prints
# tankd's CPU (utime+stime, /proc/PID/stat) for them and the answers' size.
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpc

def cpu(pid):
    f = open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')

sock_path, pid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 20
s = rpc.connect(sock_path)
c0, t0 = cpu(pid), time.monotonic()
size = 0
for k in range(n):
    s.sendall(rpc.request(k, 'status'))
    try:
        buf = rpc.read_answer(s)
    except ConnectionError:
        sys.exit('closed')
    assert rpc.answer_ok(buf, k), buf[:8]
    size = len(buf)
c1, t1 = cpu(pid), time.monotonic()
time.sleep(0)
ci = cpu(pid); time.sleep(t1 - t0); ci = cpu(pid) - ci   # idle tankd over as long
print('tankd_cpu_ms_per_status=%.1f idle_cpu_ms_same_span=%.0f wall_ms_per_status=%.1f answer_bytes=%d n=%d' %
      ((c1 - c0) * 1000 / n, ci * 1000, (t1 - t0) * 1000 / n, size, n))
