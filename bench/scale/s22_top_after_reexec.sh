#!/bin/bash
# s22_top_after_reexec.sh [N]: issue 38 round 15: N pods; three times,
# `tankctl daemon reexec`, then at once `tankctl top` of the last pod and
# `tankctl top` of every pod: what each says and how long it took (before
# round 15 a top listed the containers adopted so far, and a pod not yet
# known was "no pod").  Under flock /work/bench.lock when N > 2000.
# B: the build/bin to run.
N=${1:-2000}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-rx} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19631}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
scale_apply_running "$N" >/dev/null || exit 1
last=$(printf "p%05d" $((N - 1)))
sleep 1
for i in 1 2 3; do
	T daemon reexec >/dev/null 2>&1
	t0=$(date +%s.%N); one=$(T top --no-headers "$last" 2>&1 | tail -1); t1=$(date +%s.%N)
	n=$(T top --no-headers 2>&1 | grep -c ' c '); t2=$(date +%s.%N)
	echo "reexec $i: top $last ($(echo "$t1 - $t0" | bc) s): $one | top lists $n of $N" \
		"($(echo "$t2 - $t1" | bc) s)"
	sleep 1
done
scale_stop; rm -rf "$SCALE_DIR"
