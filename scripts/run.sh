#!/bin/sh
# tank's main job: start tankd on the default data dir (unless one already
# serves it), apply every manifest in examples/, and show them running.
# tankd keeps running afterwards; the last lines say how to stop it.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TANKD=$BUILD/bin/tankd
TANKCTL=$BUILD/bin/tankctl

# The same default as tankd and tankctl (docs/operations.md).
if [ -n "${TANK_DATA_DIR:-}" ]; then dir=$TANK_DATA_DIR
elif [ "$(id -u)" -eq 0 ]; then dir=/var/lib/tank
elif [ -n "${XDG_STATE_HOME:-}" ]; then dir=$XDG_STATE_HOME/tank
else dir=$HOME/.local/state/tank
fi
export TANK_DATA_DIR=$dir
export TANK_SOCKET=${TANK_SOCKET:-$dir/tank.sock}

if "$TANKCTL" ping >/dev/null 2>&1; then
	echo "run: tankd already serves $TANK_SOCKET"
else
	mkdir -p "$dir"
	echo "run: starting tankd (data dir $dir, log $dir/tankd.log)"
	# Under its keeper: pods survive a crash or an upgrade of tankd
	# (docs/operations.md, "Upgrades and crashes").
	nohup "$TANKD" --keeper >>"$dir/tankd.log" 2>&1 </dev/null &
	i=0
	until "$TANKCTL" ping >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 100 ]; then
			echo "run: tankd did not come up; its log says:" >&2
			tail -n 20 "$dir/tankd.log" >&2
			exit 1
		fi
		sleep 0.1
	done
fi

# Every manifest of examples/ in one batch (validated before any is
# applied).
"$TANKCTL" apply -f examples
# Then wait for the long-running ones to converge (idem's rule,
# docs/cli.md); the crash loop example never converges, by design: it
# shows backoff, so it is not waited for.
"$TANKCTL" apply --wait --timeout 60s -f examples/web.yaml -f examples/worker.yaml \
	-f examples/shop.yaml ||
	echo "run: web, worker and shop did not converge (see above); carrying on"
sleep 2   # long enough for the batch job to complete
echo
"$TANKCTL" ps
echo
echo "worker's log:"
"$TANKCTL" logs worker --tail 3
echo
echo "actions (docs/actions.md): $TANKCTL action run ledger backup nightly  # then another"
echo "user approves it: $TANKCTL action approve ID; $TANKCTL exec ledger -- /bin/ls /"
echo "tankctl: $TANKCTL (TANK_SOCKET=$TANK_SOCKET)"
echo "stop tankd and its pods: kill \$(cat $dir/lock)"
