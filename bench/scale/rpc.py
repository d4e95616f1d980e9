"""rpc.py: tankd's msgpack-RPC over its unix socket, shared by the scripts
of bench/scale/ (standard library only: the little msgpack they need is
written here, no pip package).  A request is [0, msgid, method, params],
an answer [1, msgid, error, result] (docs/rpc.md).

  pack(obj)               msgpack of None, bool, int, str, bytes, list,
                          tuple, dict (the smallest form of each)
  request(msgid, method, params=(), id32=False)
                          a request's frame; id32: the id always a uint32
                          (0xce), every frame of a method one size
  answer_ok(buf, msgid)   buf begins with an answer to msgid, error nil
  obj_end(buf, st=None)   where the msgpack object at buf[0] ends, None
                          while not all of it is in; with st (a list, [0,
                          1] at first) given again, the walk goes on where
                          it stopped instead of from buf[0]
  connect(path, timeout=None)
                          an AF_UNIX stream socket connected to path
  read_answer(s)          reads s until one whole answer is in (obj_end,
                          resumed): its bytes; ConnectionError at EOF
  ping_on(s, id32=False)  a ping on connected socket s: seconds from its
                          send to the answer's first bytes (recv of 100)
  ping(path, timeout=900, id32=False)
                          the same on a connection of its own, then closed
  Pinger(path, every, id32=False)
                          a thread pinging on one connection of its own,
                          `every` s between an answer and the next ping,
                          until .stop() (which returns .pings: seconds each)
  pings_line(pings)       'pings: N, p50 .. ms, p99 .. ms, worst .. ms'

Import from a script in bench/scale/: sys.path.insert(0,
os.path.dirname(os.path.abspath(__file__))); from a heredoc run at the
tree's top: sys.path.insert(0, 'bench/scale'), or PYTHONPATH set to the
script's directory."""
import socket, struct, threading, time


def _head(n, fix, fixmax, c8, c16, c32):
    if n <= fixmax:
        return bytes([fix | n])
    if c8 is not None and n <= 0xff:
        return bytes([c8, n])
    if n <= 0xffff:
        return bytes([c16]) + struct.pack('>H', n)
    return bytes([c32]) + struct.pack('>I', n)


def _int(n):
    if 0 <= n <= 0x7f or -32 <= n < 0:
        return struct.pack('>b' if n < 0 else '>B', n)
    if n >= 0:
        for c, f, top in ((0xcc, '>B', 0xff), (0xcd, '>H', 0xffff), (0xce, '>I', 0xffffffff)):
            if n <= top:
                return bytes([c]) + struct.pack(f, n)
        return b'\xcf' + struct.pack('>Q', n)
    for c, f, low in ((0xd0, '>b', -0x80), (0xd1, '>h', -0x8000), (0xd2, '>i', -0x80000000)):
        if n >= low:
            return bytes([c]) + struct.pack(f, n)
    return b'\xd3' + struct.pack('>q', n)


def pack(o):
    if o is None:
        return b'\xc0'
    if o is True or o is False:
        return b'\xc3' if o else b'\xc2'
    if isinstance(o, int):
        return _int(o)
    if isinstance(o, str):
        b = o.encode()
        return _head(len(b), 0xa0, 0x1f, 0xd9, 0xda, 0xdb) + b
    if isinstance(o, (bytes, bytearray)):
        return _head(len(o), 0, -1, 0xc4, 0xc5, 0xc6) + bytes(o)
    if isinstance(o, (list, tuple)):
        return _head(len(o), 0x90, 0x0f, None, 0xdc, 0xdd) + b''.join(pack(x) for x in o)
    if isinstance(o, dict):
        return _head(len(o), 0x80, 0x0f, None, 0xde, 0xdf) + \
            b''.join(pack(k) + pack(v) for k, v in o.items())
    raise TypeError(type(o).__name__)


def request(msgid, method, params=(), id32=False):
    mid = b'\xce' + struct.pack('>I', msgid) if id32 else _int(msgid)
    return b'\x94\x00' + mid + pack(method) + pack(params)


def answer_ok(buf, msgid):
    return bytes(buf[:2]) == b'\x94\x01' and bytes(buf[2:]).startswith(_int(msgid) + b'\xc0')


# obj_end's tables, by an item's first byte: _FIXED its whole size; _SIZED
# (str8-32, bin, ext) the bytes of its length and its header's size, the
# payload after it; _MANY (array16/32, map16/32) the bytes of its count and
# the items a count is
_FIXED = {0xc0: 1, 0xc2: 1, 0xc3: 1, 0xcc: 2, 0xd0: 2, 0xcd: 3, 0xd1: 3, 0xd4: 3,
          0xd5: 4, 0xca: 5, 0xce: 5, 0xd2: 5, 0xd6: 6, 0xcb: 9, 0xcf: 9, 0xd3: 9,
          0xd7: 10, 0xd8: 18}
_SIZED = {0xc4: (1, 2), 0xd9: (1, 2), 0xc5: (2, 3), 0xda: (2, 3), 0xc6: (4, 5),
          0xdb: (4, 5), 0xc7: (1, 3), 0xc8: (2, 4), 0xc9: (4, 6)}
_MANY = {0xdc: (2, 1), 0xdd: (4, 1), 0xde: (2, 2), 0xdf: (4, 2)}


def obj_end(b, st=None):
    """Walks b from state st = [i, todo] (None: one object from b[0]): the
    end index once whole, else None, st (when given) left where the walk
    stopped, so that a call with more of b goes on from there."""
    i, todo = st if st else (0, 1)
    n = len(b)
    while todo:
        if i >= n:
            break
        c = b[i]
        todo -= 1
        if c < 0x80 or c >= 0xe0:
            i += 1
        elif c < 0x90:
            todo += 2 * (c & 0xf); i += 1
        elif c < 0xa0:
            todo += c & 0xf; i += 1
        elif c < 0xc0:
            i += 1 + (c & 0x1f)
        elif c in _FIXED:
            i += _FIXED[c]
        else:
            k, h = _SIZED.get(c) or _MANY.get(c) or (None, None)
            if k is None:
                raise ValueError(hex(c))
            if i + 1 + k > n:
                todo += 1
                break
            v = int.from_bytes(b[i + 1:i + 1 + k], 'big')
            if c in _MANY:
                todo += h * v; i += 1 + k
            else:
                i += h + v
    if st is not None:
        st[0], st[1] = i, todo
    return None if todo or i > n else i


def connect(path, timeout=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
    except OSError:
        s.close()
        raise
    return s


def read_answer(s):
    buf, st = bytearray(), [0, 1]
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError('tankd closed the connection')
        buf += chunk
        if obj_end(buf, st) is not None:
            return buf


def ping_on(s, id32=False):
    frame = request(1, 'ping', id32=id32)
    a = time.time()
    s.sendall(frame)
    s.recv(100)
    return time.time() - a


def ping(path, timeout=900, id32=False):
    s = connect(path)
    s.settimeout(timeout)
    try:
        return ping_on(s, id32)
    finally:
        s.close()


class Pinger:
    def __init__(self, path, every, id32=False):
        self.pings, self._stop = [], False
        self._s = connect(path)
        self._t = threading.Thread(target=self._run, args=(every, id32))
        self._t.start()

    def _run(self, every, id32):
        while not self._stop:
            self.pings.append(ping_on(self._s, id32))
            time.sleep(every)

    def stop(self):
        self._stop = True
        self._t.join()
        self._s.close()
        return self.pings


def pings_line(pings):
    p = sorted(pings)
    return (f'pings: {len(p)}, p50 {1000 * p[len(p) // 2]:.1f} ms, '
            f'p99 {1000 * p[int(len(p) * 0.99)]:.1f} ms, worst {1000 * p[-1]:.1f} ms')
