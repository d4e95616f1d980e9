#!/bin/sh
# gen_pods.sh N [PREFIX] [FIRST]: N pod documents on stdout, one container
# each running an idle static process (busybox sleep 100000; SCALE_CMD
# replaces "/bin/busybox, sleep"), labelled
# app=scale and shard=N%10 so selectors pick all or a tenth.  SCALE_BACKOFF
# (the inside of a flow map: "base: 1s" or "base: 100ms, cap: 1s") sets
# the pods' backoff; SCALE_ARG replaces the command's last argument.
# Used by bench/scale/scale_attack.sh (issue 38 round 8: tank as a user
# meets it at 9,000 pods).
n=${1:?usage: gen_pods.sh N [PREFIX] [FIRST]}
prefix=${2:-p}
first=${3:-0}
cmd=${SCALE_CMD:-/bin/busybox, sleep}
awk -v n="$n" -v p="$prefix" -v f="$first" -v cmd="$cmd" -v bo="${SCALE_BACKOFF:-}" -v arg="${SCALE_ARG:-100000}" 'BEGIN {
	for (i = f; i < f + n; i++) {
		printf "---\nname: %s%05d\nlabels: {app: scale, shard: \"s%d\"}\n", p, i, i % 10
		printf "restart: always\nstop: {signal: TERM, grace: 2s}\n"
		if (bo != "") printf "backoff: {%s}\n", bo
		printf "containers:\n  - name: c\n    command: [%s, \"%s\"]\n", cmd, arg
	}
}'
