#!/bin/sh
# Installs what the restart-storm benchmarks compare against and draw with:
# s6, runit, supervisor (the peers) and gnuplot (the plots).  Safe to run
# repeatedly: it does nothing when every tool is present.  The benchmarks
# still run without them (a missing peer is skipped, a missing gnuplot
# leaves the plots out), so a failed install is reported, not fatal.
set -u

need=""
check() { # check FILE PACKAGE
	[ -e "$1" ] || need="$need $2"
}
check /usr/bin/s6-svscan    s6
check /usr/bin/runsvdir     runit
check /usr/bin/supervisord  supervisor
check /usr/bin/gnuplot      gnuplot-nox
check /usr/bin/jq           jq

[ -z "$need" ] && exit 0

echo "bench-deps: installing:$need" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || echo "bench-deps: apt-get update failed" >&2
# --no-install-recommends: runit would otherwise pull runit-init and
# supervisor its docs; the service managers must not start anything here.
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $need >&2 ||
	echo "bench-deps: could not install:$need (those scenarios are skipped)" >&2
exit 0
