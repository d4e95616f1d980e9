#!/bin/sh
# with-leftovers.sh CLOSING_RE CMD [ARG...]
#
# Runs CMD under tests/helpers/leftovers ($BUILD/tests/helpers/leftovers),
# which names and removes every process, cgroup root and data dir that
# this run of CMD left behind and fails the run when there was one
# (docs/testing.md).  Used by `make soak` and `make bench`; `make test`
# does the same in scripts/run-tests.sh.
#
# The closing line: the lines of CMD's output matching the extended
# regular expression CLOSING_RE (the soak's "N passed, M failed") are
# held back and printed, unchanged, after leftovers' verdict, so that
# CMD's closing line stays the last line of the run.  An empty CLOSING_RE
# holds nothing back.  Exit status: CMD's when it failed, else 1 when
# something was left, else 0.
set -u
re=$1; shift
build=${BUILD:-build}
out=$(mktemp)
st=$(mktemp)
trap 'rm -f "$out" "$st"' EXIT
if [ -n "$re" ]; then
	{ "$build/tests/helpers/leftovers" "$@" 2>&1; echo $? > "$st"; } |
		tee "$out" | grep -E --line-buffered -v "$re"
	grep -E "$re" "$out" | tail -n 1
else
	"$build/tests/helpers/leftovers" "$@"
	echo $? > "$st"
fi
exit "$(cat "$st")"
