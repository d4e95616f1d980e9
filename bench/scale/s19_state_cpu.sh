#!/bin/bash
# s19_state_cpu.sh [N R]: round 14 (issue 38): tankd --http with N pods;
# R sequential GETs of /state, then of /metrics; prints tankd's CPU per
# answer (utime+stime of /proc/PID/stat over the R) and the sizes.
# Under flock /work/bench.lock when N > 2000.  B: the build/bin to run.
set -u
N=${1:-9700}; R=${2:-20}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-statecpu} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19620}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
scale_apply_running "$N" >/dev/null || exit 1
sleep 2
cpu() { awk '{ print $14 + $15 }' "/proc/$SCALE_PID/stat"; }
for p in state metrics; do
	a=$(cpu)
	for i in $(seq "$R"); do size=$(curl -s -o /dev/null -w '%{size_download}' "http://$SCALE_HTTP/$p"); done
	b=$(cpu)
	echo "/$p: $size bytes, tankd CPU $(( (b - a) * 1000 / $(getconf CLK_TCK) / R )) ms an answer ($R in a row)"
done
scale_stop
rm -rf "$SCALE_DIR"
