#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/: small valid inputs of
every surface (a request frame of each method, the example manifests, a
record of each kind).  Run from the repository root; the output is
committed, so this only needs running when a surface changes."""
import os, struct

def mp(o):
    if o is None: return b'\xc0'
    if o is True: return b'\xc3'
    if o is False: return b'\xc2'
    if isinstance(o, int):
        if 0 <= o < 128: return bytes([o])
        if -32 <= o < 0: return struct.pack('b', o)
        if 0 <= o < 2**32: return b'\xce' + struct.pack('>I', o)
        if o >= 0: return b'\xcf' + struct.pack('>Q', o)
        return b'\xd3' + struct.pack('>q', o)
    if isinstance(o, str): o = o.encode()
    if isinstance(o, bytes):
        if len(o) < 32: return bytes([0xa0 | len(o)]) + o
        if len(o) < 256: return b'\xd9' + bytes([len(o)]) + o
        return b'\xda' + struct.pack('>H', len(o)) + o
    if isinstance(o, bytearray):  # bin
        return b'\xc4' + bytes([len(o)]) + bytes(o)
    if isinstance(o, list):
        h = bytes([0x90 | len(o)]) if len(o) < 16 else b'\xdc' + struct.pack('>H', len(o))
        return h + b''.join(mp(x) for x in o)
    if isinstance(o, dict):
        h = bytes([0x80 | len(o)]) if len(o) < 16 else b'\xde' + struct.pack('>H', len(o))
        return h + b''.join(mp(k) + mp(v) for k, v in o.items())
    raise TypeError(o)

POD = {"name": "web", "restart": "always", "backoff": {"base": "1s", "cap": "30s"},
       "containers": [{"name": "c", "command": ["/bin/sleep", "100"], "env": {"A": "1"}}]}
PARAMS = {
    "ping": [], "version": [], "apply": [[POD, {"kind": "Pod", "name": "b", "containers": [{"name": "x", "command": ["/bin/true"]}]}]],
    "delete": [["web", "b"]], "get": ["web"], "list": [], "status": ["web"],
    "running": [], "restart": ["web"], "nudge": [], "sync": [],
    "logs": ["web", {"container": "c", "tail": 10, "follow": False}],
    "history": ["web", {"limit": 5}],
}
METHODS = ["ping", "version", "apply", "delete", "get", "list", "status", "running",
           "restart", "nudge", "sync", "logs", "history"]

def put(d, name, data):
    with open(os.path.join("tests/fuzz/corpus", d, name), "wb") as f:
        f.write(data)

for i, m in enumerate(METHODS):
    put("frame", m, mp([0, i + 1, m, PARAMS[m]]))
    put("params", m, bytes([i]) + mp(PARAMS[m]))
put("frame", "notification", mp([2, "event", [{}]]))
for ex in sorted(os.listdir("examples")):
    with open(os.path.join("examples", ex), "rb") as f:
        text = f.read()
    put("manifest", ex, bytes([1 if ex.endswith(".json") else 0]) + text)
put("manifest", "anchors.yaml", b"\x00x: &a [1, 2]\ny: *a\n---\nname: p\ncontainers: [{name: c, command: [/bin/true]}]\n")
put("record", "pod", b"\x00" + mp({"name": "web", "uid": "0f8b4c2e-1f0a-4c7e-9a55-8f1d2c3b4a59",
    "spec": bytearray(mp(POD)), "generation": 3, "hash": 12345, "created_at": 1, "updated_at": 2}))
put("record", "status", b"\x01" + mp({"uid": "u", "name": "web", "phase": "running", "reason": "",
    "retries": 0, "restarts": 2, "generation": 3, "since": 5, "next_restart_at": None,
    "last_exit": {"code": 1, "signal": 0}, "containers": [{"name": "c", "phase": "running",
    "reason": "", "pid": 42, "pid_start_time": 7, "restarts": 2, "retries": 0,
    "last_exit": None, "started_at": 9, "log_dropped": 3}]}))
put("record", "transition", b"\x02" + mp({"at": 5, "from": "pending", "to": "running", "reason": "started"}))
put("record", "schema", b"\x03" + mp(2))
