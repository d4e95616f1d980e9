#!/bin/bash
# s1_user.sh N: scenario 1 of the scale attack: N pods in one manifest,
# then every verb a user would try, each timed; output sizes and tails
# kept under $OUT. Run under flock /work/bench.lock when N > 2000.
set -u
N=${1:-5000}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale10-s1}
. bench/scale/env.sh
OUT=${OUT:-/tmp/scale10-out/s1-$N}; mkdir -p "$OUT"
rm -rf "$SCALE_DIR"; scale_start
bench/scale/gen_pods.sh "$N" >"$OUT/pods.yaml"
step() { # step NAME CMD...: times CMD, keeps its stdout/stderr
	local name=$1; shift
	local t0 t1 rc
	t0=$(date +%s.%N)
	if [ "$1" = T ]; then shift; set -- "$B/tankctl" --socket "$TANK_SOCKET" "$@"; fi
	timeout 300 "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; rc=$?
	t1=$(date +%s.%N)
	printf '%-22s rc=%-3s %6.2fs lines=%-6s bytes=%-9s load=%s\n' "$name" "$rc" \
		"$(echo "$t1 - $t0" | bc)" "$(wc -l <"$OUT/$name.out")" \
		"$(wc -c <"$OUT/$name.out")" "$(cut -d' ' -f1 /proc/loadavg)"
}
step apply T apply -f "$OUT/pods.yaml"
step apply_again T apply -f "$OUT/pods.yaml"
i=0; while [ "$(T ps -o name 2>/dev/null | wc -l)" -lt "$N" ] && [ $i -lt 600 ]; do sleep 1; i=$((i+1)); done
sleep 5
echo "running: $(T ps --no-headers | grep -c ' running ')  $(scale_count)"
step ps T ps
step ps_q T ps -q
step ps_json T ps -o json
step get_pods T get pods
step get_pods_yaml T get pods -o yaml
step get_pods_json T get pods -o json
step get_pods_name T get pods -o name
step get_sel T get pods -l shard=s3
step ps_sel T ps -l shard=s3
step status T status
step describe T describe p00007
step top_one T top p00007
step top_all T top
step top_json T top -o json
step events_since bash -c "timeout 5 $B/tankctl --socket $TANK_SOCKET events --since 10m; true"
step logs_one T logs p00007
step logs_sel T logs -l shard=s3 --tail 1
step history T history p00007
step version T version
step daemon_status T daemon status
step apply_wait T apply -f "$OUT/pods.yaml" --wait --timeout 120s
step stop_one T stop p00007 --wait --timeout 60s
step start_one T start p00007 --wait --timeout 60s
step restart_sel T restart -l shard=s3
step delete_all T delete -l app=scale
i=0; while [ "$(T ps -q 2>/dev/null | wc -l)" -gt 0 ] && [ $i -lt 300 ]; do sleep 1; i=$((i+1)); done
sleep 3
echo "after delete: $(scale_count)"
scale_stop
echo "tankd stderr:"; sort "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head -20
