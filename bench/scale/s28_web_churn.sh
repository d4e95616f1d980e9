#!/bin/bash
# s28_web_churn.sh [SECS]: round 19 (issue 38): tankd --http with 3,000
# completed one-shot pods and 5 crash-looping ones; 40 web clients churn
# (web_churn.py) for SECS seconds.  Says whether tankd is still alive
# after, and its log.  Run with B=build/san/bin for the sanitizers: this
# found a use-after-free at the stop and a loop that ended by itself
# (docs/bench.md, round 19).  Under flock /work/bench.lock.
set -u
SECS=${1:-45}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-churn} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19628}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
awk 'BEGIN { for (i = 0; i < 3000; i++)
	printf "---\nname: w%04d\nrestart: never\ncontainers: [{name: c, command: [/bin/true]}]\n", i
	for (i = 0; i < 5; i++)
	printf "---\nname: crash%d\nbackoff: {base: 100ms, cap: 100ms}\ncontainers: [{name: c, command: [/bin/false]}]\n", i }' |
	T apply -f - >/dev/null
sleep 3
python3 bench/scale/web_churn.py "${SCALE_HTTP##*:}" "$SECS"
if kill -0 "$SCALE_PID" 2>/dev/null && T ping >/dev/null; then echo "tankd alive"; else echo "tankd GONE"; fi
scale_stop
grep -v '^tankd: info' "$SCALE_DIR/tankd.err" | head -20
rm -rf "$SCALE_DIR"
