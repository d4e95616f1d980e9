#!/bin/bash
# s13_probes.sh N [PERIOD]: round 11, scenario 5: N pods whose readiness
# probe connects (tcp) to a listener that never accepts (its backlog
# full: SYNs dropped, each connect waits for the probe's timeout), so
# every probe holds a socket in tankd for its whole timeout.  PROBE=http:
# an http probe of a server that answers (python's http.server) instead.  Then:
# tankd's descriptors, what the probes say, 5 containers killed -9 (do
# they start again?), `tankctl get pods`.  Under flock when N > 2000.
set -u
N=${1:-9000}; PERIOD=${2:-1s}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/attack11-s13}
export SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19516}
PORT=${PORT:-19598}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; mkdir -p "$SCALE_DIR"
if [ "${PROBE:-tcp}" = http ]; then
	(cd /tmp && exec python3 -m http.server "$PORT" --bind 127.0.0.1 >/dev/null 2>&1) &
	PSPEC="{http: {port: $PORT, path: /}, period: $PERIOD, timeout: 1s}"
else
	python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $PORT)); s.listen(0)
time.sleep(100000)" &
	PSPEC="{tcp: {port: $PORT}, period: $PERIOD, timeout: 1s}"
fi
lpid=$!
scale_start
tpid=$(cat "$SCALE_DIR/lock")
bench/scale/gen_pods.sh "$N" | awk -v spec="$PSPEC" '
	{ print } /^    command:/ { printf "    readiness: %s\n", spec }' |
	T apply -f - >/dev/null || { echo apply failed; kill $lpid; scale_stop; exit 1; }
h=""
for i in $(seq 1 40); do
	sleep 1
	[ -z "$h" ] && h=$(python3 bench/scale/procs.py hash "$tpid")
	if [ $((i % 5)) = 0 ]; then
		echo "+${i}s fds $(ls /proc/$tpid/fd | wc -l), running $(T ps --no-headers 2>/dev/null | grep -c ' running '), load $(cut -d' ' -f1 /proc/loadavg)"
	fi
	if [ $i = 20 ]; then
		python3 -c "
import os, sys; sys.path.insert(0, 'bench/scale'); import procs
p = procs.pods('$h'); v = sorted(p)[:5]
[os.kill(x, 9) for n in v for x in p[n]]
open('$SCALE_DIR/victims', 'w').write(' '.join('%s:%s' % (n, p[n][0]) for n in v))"
		echo "killed -9: $(cat "$SCALE_DIR/victims")"
	fi
done
echo "probe results: $(T ps -o json 2>/dev/null | grep -o '"probe": "[^"]*"' | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head -5 | tr '\n' ';')"
python3 -c "
import sys; sys.path.insert(0, 'bench/scale'); import procs
p = procs.pods('$h')
v = [x.split(':') for x in open('$SCALE_DIR/victims').read().split()]
print('victims started again:', sum(1 for n, pid in v if p.get(n) and str(p[n][0]) != pid), 'of', len(v))"
t0=$(date +%s.%N); T get pods >/dev/null; echo "get pods rc=$? $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5)s"
T ps --no-headers | awk '{print $2}' | sort | uniq -c
T delete -l app=scale >/dev/null; sleep 3
scale_stop; kill $lpid
echo "after delete and stop: $(python3 bench/scale/count.py "$h")"
grep -v ': info:' "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head
