#!/bin/sh
# Runs each libFuzzer program of `make fuzz` for FUZZ_SECONDS over its seed
# corpus (tests/fuzz/corpus/T) and past failures (tests/fuzz/regress/T);
# new inputs go to BUILD/corpus/T (not committed), crashes to
# BUILD/crashes/T/.  Prints, per target: executions, executions a second,
# new corpus inputs and crashes; exits 1 if any target crashed.
#   usage: scripts/fuzz.sh BUILD TARGET...
set -u
build=$1
shift
secs=${FUZZ_SECONDS:-60}
# Leaks inside third-party libraries we cannot fix: see the file.
export LSAN_OPTIONS="suppressions=$(pwd)/tests/fuzz/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fail=0
summary=""
for t in "$@"; do
	mkdir -p "$build/corpus/$t" "$build/crashes/$t" "tests/fuzz/regress/$t"
	log="$build/$t.log"
	echo "== fuzz $t for ${secs}s" >&2
	"$build/fuzz-$t" -max_total_time="$secs" -print_final_stats=1 -timeout=10 \
		-rss_limit_mb=2048 -artifact_prefix="$build/crashes/$t/" \
		"$build/corpus/$t" "tests/fuzz/corpus/$t" "tests/fuzz/regress/$t" \
		>"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	newc=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)
	crashes=$(ls "$build/crashes/$t" | wc -l)
	if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
		fail=1
		echo "fuzz $t: FAILED (exit $rc); see $log and $build/crashes/$t/" >&2
		tail -30 "$log" >&2
	fi
	summary="$summary
$(printf '%-10s %12s execs %8s/s %6s new inputs %4s crashes' "$t" "${execs:-?}" "${rate:-?}" "${newc:-?}" "$crashes")"
done
echo "$summary"
[ "$fail" -eq 0 ] && echo "fuzz: $# targets, no crash" || echo "fuzz: crashes found (move each input to tests/fuzz/regress/<target>/ with its fix)"
exit "$fail"
