#!/bin/bash
# s23_reexec_twice.sh [N]: issue 38 round 15: N pods; then (a) two
# `daemon reexec` in a row, (b) a reexec and at once an `exec` on the last
# pod, (c) under the keeper, a kill -9 of tankd and a reexec as soon as the
# next tankd answers.  Says after each how many pods restarted (ps's
# RESTARTS not 0) and what the exec said.  Before round 15: (a) 1,941 of
# 2,000 restarted, (b) "no pod", (c) 594 of 1,000.  Under flock
# /work/bench.lock.  B: the build/bin to run.
N=${1:-2000}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-rx2} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19663}
. bench/scale/env.sh
last=$(printf "p%05d" $((N - 1)))
restarted() { T ps --no-headers | awk '$4 != 0' | wc -l; }
rm -rf "$SCALE_DIR"; scale_start
scale_apply_running "$N" >/dev/null || exit 1
sleep 1
T daemon reexec >/dev/null 2>&1; T daemon reexec >/dev/null 2>&1
sleep 3; echo "(a) two reexecs in a row: $(restarted) of $N pods restarted"
T daemon reexec >/dev/null 2>&1
echo "(b) exec right after a reexec: $(T exec "$last" -- /bin/busybox echo ran 2>&1 | tail -1)"
scale_stop; rm -rf "$SCALE_DIR"
# (c) under the keeper
mkdir -p "$SCALE_DIR"
"$B/tankd" --keeper --data-dir "$SCALE_DIR" --socket "$TANK_SOCKET" 2>>"$SCALE_DIR/err" &
KP=$!
for i in $(seq 100); do T ping >/dev/null 2>&1 && break; sleep 0.1; done
bench/scale/gen_pods.sh "$N" | T apply -f - >/dev/null
for i in $(seq 180); do [ "$(T ps --no-headers | grep -c ' running ')" -ge "$N" ] && break; sleep 1; done
sleep 1
old=$(T version | awk '/^pid/{print $2}' | tr -d ,)
kill -9 "$old"
for i in $(seq 400); do
	new=$(T version 2>/dev/null | awk '/^pid/{print $2}' | tr -d ,)
	[ -n "$new" ] && [ "$new" != "$old" ] && break; sleep 0.05
done
T daemon reexec >/dev/null 2>&1
sleep 3; echo "(c) kill -9 under the keeper, then a reexec: $(restarted) of $N pods restarted"
kill "$KP"; while kill -0 "$KP" 2>/dev/null; do sleep 0.2; done
rm -rf "$SCALE_DIR"
