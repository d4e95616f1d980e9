#!/usr/bin/env bash
# Draws the restart-storm plots (PNG) into docs/bench/ from
# bench/results/latest.jsonl and bench/results/latency.dat, as written by
# bench/run.  Needs gnuplot and jq (scripts/bench-deps.sh); without them it
# says so and draws nothing — plots are a report, not a gate.
set -euo pipefail
cd "$(dirname "$0")/.."
in=${1:-bench/results/latest.jsonl}
out=${PLOT_DIR:-docs/bench}
for tool in gnuplot jq; do
	command -v "$tool" >/dev/null || { echo "plot: $tool not installed: no plots" >&2; exit 0; }
done
[ -s "$in" ] || { echo "plot: $in is empty: no plots" >&2; exit 0; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

series() { # series METRIC SYSTEM -> "n value" lines sorted by n
	jq -r --arg m "$1" --arg s "$2" \
		'select(.bench=="storm" and .metric==$m and .system==$s and (.n // 0) > 0) | "\(.n) \(.value)"' \
		"$in" | sort -n
}

plots=()
for s in spawn tank s6 runit supervisord; do
	m=recovery_time; [ "$s" = spawn ] && m=physical_time
	series "$m" "$s" > "$tmp/rec-$s.dat"
	series pss_per_service "$s" > "$tmp/mem-$s.dat"
	[ -s "$tmp/rec-$s.dat" ] && plots+=("'$tmp/rec-$s.dat' using 1:2 with linespoints lw 2 title '$s'")
done
if [ ${#plots[@]} -gt 0 ]; then
	gnuplot <<GP
set terminal pngcairo size 800,500 font ",10" noenhanced
set output "$out/storm.png"
set title "Mass-kill storm: time until all N services run again (lower is better)"
set xlabel "N services killed at once (SIGKILL)"
set ylabel "seconds"
set logscale xy
set grid
set key top left
plot $(IFS=,; echo "${plots[*]}" | sed "s/spawn'/physical limit (posix_spawn)'/")
GP
	echo "plot: $out/storm.png" >&2
fi

plots=()
for s in tank s6 runit supervisord; do
	[ -s "$tmp/mem-$s.dat" ] && plots+=("'$tmp/mem-$s.dat' using 1:2 with linespoints lw 2 title '$s'")
done
if [ ${#plots[@]} -gt 0 ]; then
	gnuplot <<GP
set terminal pngcairo size 800,500 font ",10" noenhanced
set output "$out/memory.png"
set title "Supervisor-side PSS per service (tank: above the empty daemon; lower is better)"
set xlabel "N services"
set ylabel "KiB per service"
set logscale x
set yrange [0:*]
set grid
set key top right
plot $(IFS=,; echo "${plots[*]}"), 4 with lines dt 2 lc rgb "black" title "tank target (4 KiB)"
GP
	echo "plot: $out/memory.png" >&2
fi

lat=$(dirname "$in")/latency.dat
if [ -s "$lat" ]; then
	gnuplot <<GP
set terminal pngcairo size 800,500 font ",10" noenhanced
set output "$out/latency.png"
set title "tank restart latency: container exit -> replacement's exec (CDF)"
set xlabel "microseconds"
set ylabel "fraction of restarts"
set logscale x
set grid
set key bottom right
plot "$lat" using 1:2 with lines lw 2 title "tank, backoff base 0"
GP
	echo "plot: $out/latency.png" >&2
fi
