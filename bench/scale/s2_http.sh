#!/bin/bash
# s2_http.sh N: scenario 2: tankd --http with N pods: /metrics, /state,
# the page, and /events?snapshot=1 (what the page reads) and /events
# while 3 x N/10 pods restart; says whether the stream was cut
# (tank_http_sse_dropped_total).  B= another build for a before/after.
set -u
N=${1:-9000}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale10-s2}
. bench/scale/env.sh
OUT=${OUT:-/tmp/scale10-out/s2-$N}; mkdir -p "$OUT"
rm -rf "$SCALE_DIR"; scale_start
bench/scale/gen_pods.sh "$N" | T apply -f - >/dev/null
i=0; while [ "$(T ps --no-headers | grep -c ' running ')" -lt "$N" ] && [ $i -lt 120 ]; do sleep 1; i=$((i+1)); done
sleep 3
for u in metrics state ""; do
	curl -s -o "$OUT/http-$u.out" -w "/$u %{http_code} %{size_download} bytes %{time_total}s (load $(cut -d' ' -f1 /proc/loadavg))\n" "http://$SCALE_HTTP/$u"
done
echo "metrics: $(grep -c '^tank_container_ready{' "$OUT/http-metrics.out") tank_container_ready series"
(timeout 15 curl -s -N "http://$SCALE_HTTP/events?snapshot=1" >"$OUT/sse-page.txt"; echo "page stream: rc=$? (124: ran its 15 s; 18: cut)") &
c1=$!
(timeout 15 curl -s -N "http://$SCALE_HTTP/events" >"$OUT/sse-events.txt"; echo "events stream: rc=$? (124: ran its 15 s)") &
c2=$!
sleep 1
for s in s1 s2 s3; do T restart -l shard=$s >/dev/null; sleep 2; done
wait $c1 $c2
echo "page stream: $(wc -c <"$OUT/sse-page.txt") bytes, $(grep -c '^event: snapshot' "$OUT/sse-page.txt") snapshots, $(grep -c '^data: {"type"' "$OUT/sse-page.txt") events"
echo "events stream: $(grep -c '^data' "$OUT/sse-events.txt") events"
curl -s "http://$SCALE_HTTP/metrics" | grep -E '^tank_http_sse_dropped_total'
T delete -l app=scale >/dev/null; sleep 3; scale_stop
echo "after: $(python3 bench/scale/count.py)"
