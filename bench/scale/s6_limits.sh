#!/bin/bash
# s6_limits.sh: scenario 6 and what came of it: 10,000 pods at once
# (refused whole), 9,000 then 1,000 at once (the second must be refused
# too), the time of a one-pod apply with 9,000 stored (the descriptor
# check walks the store), stop -l and start -l of all 9,000.  Under flock.
set -u
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale10-s6}
. bench/scale/env.sh
OUT=${OUT:-/tmp/scale10-out/s6}; mkdir -p "$OUT"
rm -rf "$SCALE_DIR"; scale_start
bench/scale/gen_pods.sh 10000 >"$OUT/10k.yaml"
bench/scale/gen_pods.sh 9000 >"$OUT/9k.yaml"
bench/scale/gen_pods.sh 1000 r >"$OUT/1k.yaml"
bench/scale/gen_pods.sh 1 one >"$OUT/one.yaml"
# ONLY_ONE=1: only the one-pod applies (for a before/after with B= another build)
[ "${ONLY_ONE:-0}" = 1 ] || { T apply -f "$OUT/10k.yaml" >/dev/null; echo "10,000 at once: rc=$?"; }
T apply -f "$OUT/9k.yaml" >/dev/null; echo "9,000: rc=$?"
[ "${ONLY_ONE:-0}" = 1 ] || T apply -f "$OUT/1k.yaml" >/dev/null 2>"$OUT/1k.err"; echo "then 1,000 at once: rc=$? $(cut -c1-160 "$OUT/1k.err")"
i=0; while [ "$(T ps --no-headers | grep -c ' running ')" -lt 9000 ] && [ $i -lt 120 ]; do sleep 1; i=$((i+1)); done
sleep 3
echo "running $(T ps --no-headers | grep -c ' running '); $(python3 bench/scale/count.py); tankd fds $(ls /proc/"$(cat "$SCALE_DIR/tankd.pid")"/fd | wc -l)"
for r in 1 2 3 4 5 6 7 8; do
	T delete one00000 >/dev/null 2>&1
	t0=$(date +%s%N); T apply -f "$OUT/one.yaml" >/dev/null; t1=$(date +%s%N)
	echo "one-pod apply with 9,000 stored: $(( (t1 - t0) / 1000000 )) ms (load $(cut -d' ' -f1 /proc/loadavg))"
done
if [ "${ONLY_ONE:-0}" != 1 ] && T stop --help 2>&1 | grep -q -- '-l SELECTOR'; then
	t0=$(date +%s%N); T stop -l app=scale | wc -l; t1=$(date +%s%N)
	echo "stop -l of 9,000: $(( (t1 - t0) / 1000000 )) ms (load $(cut -d' ' -f1 /proc/loadavg))"
	t0=$(date +%s%N); T start -l app=scale | wc -l; t1=$(date +%s%N)
	echo "start -l of 9,000: $(( (t1 - t0) / 1000000 )) ms (load $(cut -d' ' -f1 /proc/loadavg))"
	t0=$(date +%s%N); for p in $(T ps -q -l shard=s1); do T stop "$p" >/dev/null; done; t1=$(date +%s%N)
	echo "900 tankctl stop processes: $(( (t1 - t0) / 1000000 )) ms (load $(cut -d' ' -f1 /proc/loadavg))"
fi
T delete -l app=scale >/dev/null; T delete one00000 >/dev/null; sleep 3; scale_stop
echo "after: $(python3 bench/scale/count.py)"
