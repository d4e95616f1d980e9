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
scale_stop() {
	[ -f "$SCALE_DIR/tankd.pid" ] && kill "$(cat "$SCALE_DIR/tankd.pid")" 2>/dev/null
	while [ -f "$SCALE_DIR/tankd.pid" ] && kill -0 "$(cat "$SCALE_DIR/tankd.pid")" 2>/dev/null; do sleep 0.2; done
}
# processes whose argv is busybox sleep 100000 (the pods' containers)
scale_count() {
	n=0
	for d in /proc/[0-9]*; do
		c=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
		case "$c" in "/bin/busybox sleep 100000 ") n=$((n+1));; esac
	done
	echo "$n"
}
