#!/bin/bash
# s20_reexec_top.sh [N]: round 14 (issue 38): N pods; ten times, `tankctl
# top` and, 0.01-0.10 s later, `tankctl daemon reexec`; says how many
# tops failed (their connection closed by the exec).  Under flock
# /work/bench.lock when N > 2000.  B: the build/bin to run.
N=${1:-2000}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-rxtop} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19621}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
scale_apply_running "$N" >/dev/null || exit 1
sleep 2
fails=0
for i in 1 2 3 4 5 6 7 8 9 10; do
	(T top >/dev/null 2>&1; echo $? > "$SCALE_DIR.rc") & tp=$!; sleep 0.0$i; T daemon reexec >/dev/null 2>&1; wait $tp
	[ "$(cat "$SCALE_DIR.rc")" = 0 ] || fails=$((fails + 1))
	for t in $(seq 50); do T ping >/dev/null 2>&1 && break; sleep 0.1; done
done
echo "tops lost to a reexec: $fails of 10"
scale_stop; rm -rf "$SCALE_DIR" "$SCALE_DIR.rc"
