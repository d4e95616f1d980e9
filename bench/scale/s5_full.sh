#!/bin/bash
# s5_full.sh STEP MAX: scenario 5: the data dir on an 8 MiB tmpfs; apply
# STEP pods at a time until an apply is refused (or MAX pods), then check
# the refusal, that nothing of the refused batch is stored or runs, that
# tankd still answers, and that deleting frees room for an apply again.
set -u
STEP=${1:-500}; MAX=${2:-9000}
cd "$(dirname "$0")/../.."
export SCALE_DIR=${SCALE_DIR:-/tmp/scale10-s5}
. bench/scale/env.sh
OUT=${OUT:-/tmp/scale10-out/s5}; mkdir -p "$OUT"
mkdir -p "$SCALE_DIR"; mount -t tmpfs -o size=8m tmpfs "$SCALE_DIR" || exit 1
trap 'scale_stop; umount "$SCALE_DIR"; rmdir "$SCALE_DIR"' EXIT
scale_start
n=0; b=0
while [ $n -lt "$MAX" ]; do
	bench/scale/gen_pods.sh "$STEP" "b${b}-" >"$OUT/batch.yaml"
	[ $b = 0 ] && cp "$OUT/batch.yaml" "$OUT/batch0.yaml"
	if ! T apply -f "$OUT/batch.yaml" >"$OUT/apply.out" 2>"$OUT/apply.err"; then
		echo "batch $b refused at $n pods: $(cat "$OUT/apply.err")"
		echo "  of the refused batch: $(T ps -q | grep -c "^b${b}-") stored"
		break
	fi
	n=$((n+STEP)); b=$((b+1))
	echo "batch $b: $n pods; $(df -k "$SCALE_DIR" | awk 'NR==2{print $3"k used of "$2"k"}'); $(T version | tail -1)"
done
sleep 5
echo "tankd answers: $(T ping) ; $(T version | tail -2 | tr '\n' ' ')"
# The first batch again, as it is: nothing to write, so not refused.
T apply -f "$OUT/batch0.yaml" | tail -1; echo "re-apply of batch 0 rc=${PIPESTATUS[0]}"
echo "running $(T ps --no-headers | grep -c ' running ') of $(T ps -q | wc -l); $(python3 bench/scale/count.py)"
T stop b0-00001 && T start b0-00001; echo "stop/start rc=$?"
T delete b0-00002; echo "delete one rc=$?"
T delete b0-00003 b0-00004 b0-00005 b0-00006 b0-00007 b0-00008 b0-00009 b0-00010 b0-00011 b0-00012 | wc -l
T delete -l shard=s1 | wc -l
T delete -l shard=s2 | wc -l
sleep 2
bench/scale/gen_pods.sh 50 "after-" | T apply -f - | tail -1; echo "apply after delete rc=${PIPESTATUS[1]}"
echo "$(T version | tail -2 | tr '\n' ' ')"
# A restart of tankd empties its in-memory status queue: does delete work then?
if [ "${S5_RESTART:-1}" = 1 ]; then
	scale_stop; scale_start
	echo "restarted: $(T version | tail -1)"
	T delete -l shard=s1 | wc -l; echo "delete of a tenth after the restart rc=${PIPESTATUS[0]}"
	sleep 2; echo "$(T version | tail -2 | tr '\n' ' ')"
fi
T delete -l app=scale | wc -l; sleep 3
echo "after delete: $(python3 bench/scale/count.py); $(df -k "$SCALE_DIR" | awk 'NR==2{print $3"k used"}')"
grep -v ': info:' "$SCALE_DIR/tankd.err" | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head
