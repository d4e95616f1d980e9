#!/usr/bin/env python3
"""count.py [TANKHASH]: the pods' processes (argv busybox sleep 100000)
on the machine, read from /proc: how many, how many in tank's cgroups
(pids hierarchy, tank-HASH/POD.UID/CONTAINER), how many pods have more
than one (duplicates), and how many run outside any tank group (orphans).
Also the tank-HASH/* groups left with no process (empty cgroups)."""
import os, sys, collections
want = sys.argv[1] if len(sys.argv) > 1 else None
total = 0; ingroup = 0; outside = 0
per_pod = collections.Counter()
for pid in os.listdir('/proc'):
    if not pid.isdigit():
        continue
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            cmd = f.read()
        if cmd != b'/bin/busybox\0sleep\x00100000\0':
            continue
        with open(f'/proc/{pid}/cgroup') as f:
            cg = f.read()
    except OSError:
        continue
    total += 1
    path = None
    for line in cg.splitlines():
        _, ctl, p = line.split(':', 2)
        if ctl == 'pids' or (ctl == '' and path is None and '/tank-' in p):
            path = p
    parts = [x for x in (path or '').split('/') if x]
    hit = [i for i, x in enumerate(parts) if x.startswith('tank-')]
    if hit and (want is None or parts[hit[0]] == 'tank-' + want) and len(parts) > hit[0] + 1:
        ingroup += 1
        per_pod[parts[hit[0] + 1].rsplit('.', 1)[0]] += 1
    else:
        outside += 1
dups = sum(1 for v in per_pod.values() if v > 1)
empty = 0; groups = 0
root = '/sys/fs/cgroup/pids'
for t in os.listdir(root):
    if not t.startswith('tank-') or (want and t != 'tank-' + want):
        continue
    for pod in os.listdir(f'{root}/{t}'):
        d = f'{root}/{t}/{pod}'
        if not os.path.isdir(d):
            continue
        groups += 1
        procs = 0
        for dp, dn, fn in os.walk(d):
            if 'cgroup.procs' in fn:
                try:
                    with open(f'{dp}/cgroup.procs') as f:
                        procs += len(f.read().split())
                except OSError:
                    pass    # removed while walked (its tankd deleting it)
        if procs == 0:
            empty += 1
print(f'procs={total} in_tank_groups={ingroup} outside={outside} '
      f'pods_with_procs={len(per_pod)} pods_with_dups={dups} '
      f'pod_groups={groups} empty_pod_groups={empty}')
