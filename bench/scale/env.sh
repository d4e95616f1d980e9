# env.sh: sourced by the scale attack's steps (issue 38 round 8).
# A private tankd: its own data dir (so its own cgroup root tank-XXXXXXXX,
# derived from the path), socket and http port; never another's.
# Usage: . bench/scale/env.sh; scale_start [extra tankd flags]; ...; scale_stop
: "${SCALE_DIR:=/tmp/scale10}"
: "${SCALE_HTTP:=127.0.0.1:19410}"
B=${B:-$(pwd)/build/bin}
export TANK_SOCKET="$SCALE_DIR/tank.sock"
T() { "$B/tankctl" --socket "$TANK_SOCKET" "$@"; }
scale_start() {
	mkdir -p "$SCALE_DIR"
	"$B/tankd" --data-dir "$SCALE_DIR" --socket "$TANK_SOCKET" \
		--http "$SCALE_HTTP" "$@" 2>>"$SCALE_DIR/tankd.err" &
	SCALE_PID=$!
	echo "$SCALE_PID" >"$SCALE_DIR/tankd.pid"
	i=0; while ! T ping >/dev/null 2>&1 && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
}
# scale_start on a copy of a store kept by `BULK_TOP=KEPT BULK_KEEP=1
# build/bench/bench_bulk` (KEPT/data), then a sync and 5 s to settle.
scale_start_kept() {
	rm -rf "$SCALE_DIR"; mkdir -p "$SCALE_DIR"
	cp -a "$1/data/." "$SCALE_DIR/"
	scale_start
	T sync >/dev/null 2>&1; sleep 5
}
scale_stop() {
	[ -f "$SCALE_DIR/tankd.pid" ] && kill "$(cat "$SCALE_DIR/tankd.pid")" 2>/dev/null
	while [ -f "$SCALE_DIR/tankd.pid" ] && kill -0 "$(cat "$SCALE_DIR/tankd.pid")" 2>/dev/null; do sleep 0.2; done
}
# the pods' processes, groups, duplicates and orphans (count.py)
scale_count() {
	python3 "$(dirname "$0")/count.py" ${SCALE_HASH:-} 2>/dev/null ||
		python3 bench/scale/count.py ${SCALE_HASH:-}
}

# Applies N generated pods (gen_pods.sh) and waits up to 180 s until all
# run; says how many and the load.  Returns 1 (tankd stopped) when the
# apply is refused.
scale_apply_running() {
	local n=$1 i=0
	bench/scale/gen_pods.sh "$n" | T apply -f - >/dev/null ||
		{ echo apply failed; scale_stop; return 1; }
	while [ "$(T ps --no-headers | grep -c ' running ')" -lt "$n" ] && [ $i -lt 180 ]; do
		sleep 1; i=$((i+1))
	done
	echo "$(T ps --no-headers | grep -c ' running ') running after ${i}s, load $(cat /proc/loadavg)"
}
