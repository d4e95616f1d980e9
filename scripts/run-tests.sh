#!/bin/sh
# Runs the Criterion test binary and fails when a sanitizer reported
# anything: Criterion counts a test as passed once its body returned, even
# if LeakSanitizer reports a leak when the test's process exits.
set -u
bin=$1; shift
log=$(mktemp)
# No per-test `.timeout`: Criterion 2.4's runner leaks its timeout
# bookkeeping, which LeakSanitizer would report against us.  Every test
# waits on conditions with its own deadline; this bounds the whole run in
# case one still hangs.
timeout "${TANK_TEST_TIMEOUT:-1200}" "$bin" "$@" 2>&1 | tee "$log"
rc=$?
# POSIX sh has no PIPESTATUS: recover the runner's status from its summary.
if grep -q 'Failing: [1-9]\|Crashing: [1-9]' "$log"; then rc=1; else rc=0; fi
grep -q 'Synthesis:' "$log" || rc=1
if grep -Eq 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (Address|Undefined)' "$log"; then
	echo "run-tests: sanitizer reports above: failing" >&2
	rc=1
fi
rm -f "$log"
exit $rc
