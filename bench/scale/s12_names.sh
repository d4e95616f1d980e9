#!/bin/bash
# s12_names.sh N: round 11, scenario 5: N pods whose names are at the
# limit (63 characters: pod, container, 4 label keys and values), then
# the verbs that list them all (time, size), a restart of tankd on them,
# and a delete.  Under flock when N > 2000.
set -u
N=${1:-9000}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/attack11-s12}
export SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19515}
. bench/scale/env.sh
OUT=${OUT:-/tmp/attack11-out/s12-$N}; mkdir -p "$OUT"
rm -rf "$SCALE_DIR"; scale_start
awk -v n="$N" 'BEGIN {
	pad = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	for (i = 0; i < n; i++) {
		name = sprintf("%s%05d", substr(pad, 1, 58), i)
		printf "---\nname: %s\nlabels:\n", name
		for (l = 0; l < 4; l++)
			printf "  %s%d: %s\n", substr(pad, 1, 62), l, substr(pad, 1, 63)
		printf "restart: always\nstop: {signal: TERM, grace: 2s}\n"
		printf "containers:\n  - name: %s\n    command: [/bin/busybox, sleep, \"100000\"]\n", substr(pad, 1, 63)
	}
}' >"$OUT/pods.yaml"
echo "manifest: $(wc -c <"$OUT/pods.yaml") bytes"
step() { # step NAME CMD...: times tankctl CMD, keeps its output
	local name=$1; shift
	local t0 t1 rc
	t0=$(date +%s.%N)
	timeout 300 "$B/tankctl" --socket "$TANK_SOCKET" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; rc=$?
	t1=$(date +%s.%N)
	printf '%-16s rc=%-3s %6.2fs lines=%-6s bytes=%-9s load=%s %s\n' "$name" "$rc" \
		"$(echo "$t1 - $t0" | bc)" "$(wc -l <"$OUT/$name.out")" \
		"$(wc -c <"$OUT/$name.out")" "$(cut -d' ' -f1 /proc/loadavg)" "$(head -c 200 "$OUT/$name.err")"
}
step apply apply -f "$OUT/pods.yaml"
i=0; while [ "$(T ps --no-headers 2>/dev/null | grep -c ' running ')" -lt "$N" ] && [ $i -lt 180 ]; do sleep 1; i=$((i+1)); done
echo "$(T ps --no-headers | grep -c ' running ') running after ${i}s"
step ps ps
step ps_json ps -o json
step get_json get pods -o json
step status status
step sel ps -l aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa0=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
step top top
step describe describe "$(head -c 58 /dev/zero | tr '\0' a)00007"
step logs logs "$(head -c 58 /dev/zero | tr '\0' a)00007"
curl -s -o "$OUT/metrics" -w "metrics %{http_code} %{size_download} bytes %{time_total}s\n" "http://$SCALE_HTTP/metrics"
scale_stop; scale_start
i=0; while [ "$(T ps --no-headers 2>/dev/null | grep -c ' running ')" -lt "$N" ] && [ $i -lt 180 ]; do sleep 1; i=$((i+1)); done
sleep 2; echo "after a restart of tankd: $(T ps --no-headers | grep -c ' running ') running after ${i}s, $(python3 bench/scale/count.py "$(python3 bench/scale/procs.py hash "$(cat "$SCALE_DIR/lock")")")"
step delete delete -l aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa0=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
sleep 3
scale_stop
echo "after delete and stop: $(python3 bench/scale/count.py)"
grep -v ': info:' "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head
