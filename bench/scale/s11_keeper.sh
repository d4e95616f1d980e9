#!/bin/bash
# s11_keeper.sh N [STORM_S] [STEADY]: round 11, scenario 4: tankd under
# its keeper with N pods that crash-loop (q*: busybox sleep 0.1, restart:
# always, backoff 100ms..1s) and STEADY (default 500) that do not (p*:
# sleep 100000); after STORM_S s a `daemon reexec`, then a kill -9 of
# tankd (its keeper starts another).  After each: one process per
# container (the steady ones keep their pid: adopted), every RESTARTS
# count monotonic, no zombie of tankd or its keeper, one tankd.  Then the keeper's SIGTERM: nothing left.  Under flock when
# N > 2000 (the storm starts ~N processes a second).
set -u
N=${1:-2000}; STORM=${2:-10}; STEADY=${3:-500}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/attack11-s11}
export SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19514}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start --keeper
kpid=$SCALE_PID
{ bench/scale/gen_pods.sh "$STEADY" p
  SCALE_BACKOFF="base: 100ms, cap: 1s" SCALE_ARG=0.1 bench/scale/gen_pods.sh "$N" q; } |
	T apply -f - >/dev/null || { echo apply failed; scale_stop; exit 1; }
sleep "$STORM"
tpid=$(cat "$SCALE_DIR/lock")
h=$(python3 bench/scale/procs.py hash "$tpid")
echo "keeper $kpid, tankd $tpid, storm of $N for ${STORM}s, load $(cat /proc/loadavg)"
check() { # check TAG: restarts monotonic against the last snapshot, one process each, zombies
	local tag=$1
	T ps --no-headers >"$SCALE_DIR/ps.$tag" 2>"$SCALE_DIR/ps.$tag.err" || { echo "[$tag] ps failed: $(cat "$SCALE_DIR/ps.$tag.err")"; return; }
	python3 - "$tag" "$SCALE_DIR" "$kpid" "$(cat "$SCALE_DIR/lock")" "$h" <<'PY'
import glob, os, sys
sys.path.insert(0, 'bench/scale'); import procs
tag, d, kpid, tpid, h = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def load(path):
    r = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 4 and f[0] != 'NAME':
            r[f[0]] = int(f[3])
    return r
now = load(f'{d}/ps.{tag}')
prev_path = f'{d}/ps.prev'
back = []
if os.path.exists(prev_path):
    prev = load(prev_path)
    back = [n for n in now if n in prev and now[n] < prev[n]]
os.replace(f'{d}/ps.{tag}', prev_path)
steady = procs.pods(h, b'sleep\x00100000')
prev_pids = {}
if os.path.exists(f'{d}/pids.prev'):
    prev_pids = dict(l.split() for l in open(f'{d}/pids.prev'))
moved = [p for p, v in steady.items() if p in prev_pids and str(v[0]) != prev_pids[p]]
with open(f'{d}/pids.prev', 'w') as f:
    for p, v in steady.items():
        f.write(f'{p} {v[0]}\n')
dups, seen = {}, set()
import time
for _ in range(25):      # the storm's processes live 0.1 s: look for 2.5 s
    pods = procs.pods(h, b'sleep\x000.1')
    time.sleep(0.1)
    seen |= set(pods)
    dups.update({p: v for p, v in pods.items() if len(v) > 1})
sdups = {p: v for p, v in steady.items() if len(v) > 1}
tankds = [p for p in os.listdir('/proc') if p.isdigit() and procs._read(f'/proc/{p}/comm') == 'tankd\n'
          and (procs._stat(p) or ['', '0'])[1] == str(kpid)]
print(f'[{tag}] pods {len(now)}, restarts total {sum(now.values())}, went back {len(back)} {back[:3]}, '
      f'steady with a process {len(steady)} (dups {len(sdups)}, new pid {len(moved)}), storm pods seen running {len(seen)} (dups {len(dups)} {list(dups.items())[:2]}), '
      f'zombies tankd {len(procs.zombies(tpid))} keeper {len(procs.zombies(kpid))}, '
      f'tankds under the keeper {len(tankds)}, fds tankd {procs.fds(tpid)} keeper {procs.fds(kpid)}, '
      f'load {open("/proc/loadavg").read().split()[0]}', flush=True)
PY
}
check storm
sleep 3; check storm2
T daemon reexec; echo "reexec rc=$?"
i=0; while ! T ping >/dev/null 2>&1 && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
echo "serving again after ~$((i / 10)) s"
check reexec; sleep 5; check reexec+5
kill -9 "$(cat "$SCALE_DIR/lock")"; echo "tankd killed -9"
sleep 1
i=0; while ! T ping >/dev/null 2>&1 && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
echo "serving again after ~$((i / 10 + 1)) s, tankd $(cat "$SCALE_DIR/lock")"
check kill9; sleep 5; check kill9+5
T daemon status
T delete -l app=scale >/dev/null; sleep 3
kill "$kpid"; while kill -0 "$kpid" 2>/dev/null; do sleep 0.2; done
echo "after delete and the keeper's stop: $(python3 bench/scale/count.py "$h")"
grep -v ': info:' "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head
