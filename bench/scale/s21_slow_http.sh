#!/bin/bash
# s21_slow_http.sh [N]: issue 38 round 15: N pods and tankd --http; 64
# connections that each send half a request (then nothing, or a byte a
# second), keep an answered connection alive, or ask for /state and read
# nothing; says how long until /healthz is answered again (120 s at most,
# slow_http.py).  MODES picks the cases.  B: the build/bin to run.
N=${1:-100}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale-slow} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19641}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
scale_apply_running "$N" >/dev/null || exit 1
for m in ${MODES:-half drip idle noread}; do
	python3 bench/scale/slow_http.py "$SCALE_HTTP" 64 "$m"
	sleep 12      # the last mode's connections go
done
scale_stop; rm -rf "$SCALE_DIR"
