#!/bin/bash
# s25_kill_during_reexec.sh [N] [TWICE]: N pods (default 300) with
# `restart: never`, a `daemon reexec`, and a kill -9 of every container
# 50 ms into it (TWICE=1: a second reexec 50 ms after the kill, during
# the first one's adoption).  Prints the phases and how the containers'
# ends read: "killed by signal 9" (their real status) or "exit status
# unknown" (what a kill during the adoption read before: the runtime
# reaped the exit and nobody asked it).  B= picks the build.
N=${1:-300}; TWICE=${2:-0}
cd "$(dirname "$0")/../.." || exit 1
export SCALE_DIR=${SCALE_DIR:-/tmp/scale25} SCALE_HTTP=${SCALE_HTTP:-127.0.0.1:19425}
. bench/scale/env.sh
rm -rf "$SCALE_DIR"; scale_start
awk -v n="$N" 'BEGIN { for (i = 0; i < n; i++)
	printf "---\nname: g%05d\nrestart: never\nstop: {grace: 1s}\ncontainers:\n  - name: c\n    command: [/bin/busybox, sleep, \"100000\"]\n", i }' |
	T apply -f - >/dev/null
i=0; while [ "$(T ps --no-headers | grep -c ' running ')" -lt "$N" ] && [ $i -lt 100 ]; do sleep 0.3; i=$((i+1)); done
pids=$(T ps --no-headers | awk '{print $6}')
T daemon reexec >/dev/null & rx=$!
sleep 0.05
kill -9 $pids 2>/dev/null
[ "$TWICE" = 1 ] && { sleep 0.05; T daemon reexec >/dev/null; }
wait $rx
sleep 4
echo "phases: $(T ps --no-headers | awk '{print $2}' | sort | uniq -c | tr -s ' \n' ' ')"
T ps --no-headers | awk '{print $1}' | while read -r p; do T status "$p" | grep -m1 -o 'killed by signal 9\|exit status unknown'; done | sort | uniq -c
scale_stop
rm -rf "$SCALE_DIR"
