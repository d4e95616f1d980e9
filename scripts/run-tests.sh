#!/bin/sh
# Runs the Criterion test binary under the leftovers check, and fails when
# a test failed, a sanitizer reported anything, or the run left something
# behind.
#
# Sanitizers: Criterion counts a test as passed once its body returned,
# even if LeakSanitizer reports a leak when the test's process exits.
#
# Leftovers (docs/testing.md): the binary runs under
# tests/helpers/leftovers, which gives this run its own directory
# (TANK_TEST_RUN_DIR: tests make their data dirs in it and list the cgroup
# roots they own in it) and is the child subreaper of everything the run
# starts.  When the binary has ended it names ("leftovers: ..." lines)
# every process, cgroup root and data dir THIS run left, removes them, and
# says its verdict in one line.  Other runs on the same machine (other
# checkouts, CI jobs, a real tankd) are never looked at.
#
# The last line: CI wants the run to end with Criterion's synthesis line.
# The check can only run once the binary (which prints that line) has
# ended, so the synthesis line is held back from the live output and
# printed, unchanged, after the check's verdict: printed once, last.  The
# exit status fails the run on leftovers even when the synthesis line
# says every test passed; the verdict line just above it says why.
set -u
bin=$1; shift
log=$(mktemp)
st=$(mktemp)
build=${TANK_BUILD_DIR:-build}
# No per-test `.timeout`: Criterion 2.4's runner leaks its timeout
# bookkeeping, which LeakSanitizer would report against us.  Every test
# waits on conditions with its own deadline; this bounds the whole run in
# case one still hangs (inside the check, so a hung run is checked too).
{ "$build/tests/helpers/leftovers" timeout "${TANK_TEST_TIMEOUT:-1200}" "$bin" "$@" 2>&1
  echo $? > "$st"; } | tee "$log" | grep --line-buffered -v 'Synthesis:'
# POSIX sh has no PIPESTATUS: recover the runner's status from its summary.
if grep -q 'Failing: [1-9]\|Crashing: [1-9]' "$log"; then rc=1; else rc=0; fi
grep -q 'Synthesis:' "$log" || rc=1
if grep -Eq 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (Address|Undefined)' "$log"; then
	echo "run-tests: sanitizer reports above: failing" >&2
	rc=1
fi
# leftovers' status: the binary's when it failed, 1 when something was left.
[ "$(cat "$st")" = 0 ] || rc=1
grep 'Synthesis:' "$log" | tail -n 1
rm -f "$log" "$st"
exit $rc
