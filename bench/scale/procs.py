#!/usr/bin/env python3
"""procs.py: helpers the round-11 attack (issue 38) shares, read from /proc
only (the machine has no procps).

  pods(hash)        {pod: [pid, ...]} of the containers' processes
                    (argv busybox sleep ...) in tank-HASH's pids groups
  outside()         pids of busybox sleep processes in no tank group
  fds(pid)          descriptors open in pid
  cpu_ticks(pid)    utime + stime of pid (clock ticks)
  rss_mb(pid)       resident memory of pid (MiB)
  zombies(ppid)     pids in state Z whose parent is ppid
  state(pid)        the state letter of pid
"""
import os

TICK = os.sysconf('SC_CLK_TCK')


def _read(path, mode='r'):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


def _stat(pid):
    s = _read(f'/proc/{pid}/stat')
    if s is None:
        return None
    # comm may hold spaces and parens: split after the last ')'
    rest = s[s.rindex(')') + 2:].split()
    return rest   # rest[0] state, rest[1] ppid, rest[11] utime, rest[12] stime


def state(pid):
    r = _stat(pid)
    return r[0] if r else None


def cpu_ticks(pid):
    r = _stat(pid)
    return int(r[11]) + int(r[12]) if r else None


def fds(pid):
    try:
        return len(os.listdir(f'/proc/{pid}/fd'))
    except OSError:
        return None


def rss_mb(pid):
    for line in (_read(f'/proc/{pid}/status') or '').splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) // 1024
    return None


def zombies(ppid):
    out = []
    for p in os.listdir('/proc'):
        if p.isdigit():
            r = _stat(p)
            if r and r[0] == 'Z' and int(r[1]) == int(ppid):
                out.append(int(p))
    return out


def _tank_pod(cg, want):
    for line in (cg or '').splitlines():
        _, ctl, path = line.split(':', 2)
        if ctl == 'pids':
            parts = [x for x in path.split('/') if x]
            for i, x in enumerate(parts):
                if x.startswith('tank-') and (want is None or x == 'tank-' + want):
                    if len(parts) > i + 1:
                        return parts[i + 1].rsplit('.', 1)[0]
            return None
    return None


def _is_container(pid, marker):
    cmd = _read(f'/proc/{pid}/cmdline', 'rb')
    return cmd is not None and cmd.startswith(b'/bin/busybox\0') and marker in cmd


def pods(want=None, marker=b'sleep'):
    out = {}
    for p in os.listdir('/proc'):
        if not p.isdigit() or not _is_container(p, marker):
            continue
        pod = _tank_pod(_read(f'/proc/{p}/cgroup'), want)
        if pod:
            out.setdefault(pod, []).append(int(p))
    return out


def outside(marker=b'sleep'):
    out = []
    for p in os.listdir('/proc'):
        if p.isdigit() and _is_container(p, marker) and \
                _tank_pod(_read(f'/proc/{p}/cgroup'), None) is None:
            out.append(int(p))
    return out


def tank_hash(tpid):
    """The XXXXXXXX of tank-XXXXXXXX that tankd tpid's children run in."""
    for p in os.listdir('/proc'):
        r = _stat(p) if p.isdigit() else None
        if r and int(r[1]) == int(tpid):
            for line in (_read(f'/proc/{p}/cgroup') or '').splitlines():
                if ':pids:' in line and '/tank-' in line:
                    return line.split('/tank-')[1].split('/')[0]
    return None


if __name__ == '__main__':
    import sys
    if sys.argv[1:2] == ['hash']:
        print(tank_hash(int(sys.argv[2])) or '')
