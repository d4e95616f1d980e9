#!/bin/bash
# s7_ahead.sh BIN [N]: with N (30,000) one-shot pods stored, all
# completed, the time of a one-pod apply right after another one-pod
# apply (the loop not caught up, so the descriptor check counts what is
# stored ahead of it), ten times, `tankctl apply` with its own start.
# Issue 38 round 9 (docs/bench.md).  The store is built once in
# $AHEAD_DIR (/tmp/ahead-store) and reused, so two builds can be
# compared on the same store: s7_ahead.sh OLD/build/bin; s7_ahead.sh build/bin.
BIN=${1:?usage: s7_ahead.sh BIN [N]}; N=${2:-30000}; D=${AHEAD_DIR:-/tmp/ahead-store}
S=$D/tank.sock
T() { "$BIN/tankctl" --socket "$S" "$@"; }
if [ ! -f $D/built ]; then
  rm -rf $D; mkdir -p $D
  "$BIN/tankd" --data-dir $D --socket $S 2>>$D/tankd.err & echo $! > $D/pid
  while ! T ping >/dev/null 2>&1; do sleep 0.1; done
  for b in $(seq 0 $((N/1000-1))); do
    awk -v b=$b 'BEGIN{for(i=0;i<1000;i++) printf "---\nname: s%03d%04d\nrestart: never\ncontainers: [{name: c, command: [/bin/true]}]\n", b, i}' > $D/b.yaml
    T apply -f $D/b.yaml >/dev/null || exit 1
    T sync >/dev/null 2>&1
  done
  sleep 3
  kill $(cat $D/pid); while kill -0 $(cat $D/pid) 2>/dev/null; do sleep 0.2; done
  touch $D/built
fi
"$BIN/tankd" --data-dir $D --socket $S 2>>$D/tankd.err & echo $! > $D/pid
while ! T ping >/dev/null 2>&1; do sleep 0.1; done
T sync >/dev/null 2>&1; sleep 2
for i in $(seq 1 10); do
  printf -- "---\nname: x%02da\ncontainers: [{name: c, command: [/bin/sleep, '1000']}]\n" $i > $D/a.yaml
  printf -- "---\nname: x%02db\ncontainers: [{name: c, command: [/bin/sleep, '1000']}]\n" $i > $D/b2.yaml
  T apply -f $D/a.yaml >/dev/null
  s=$(date +%s%N); T apply -f $D/b2.yaml >/dev/null; e=$(date +%s%N)
  echo "second apply: $(( (e-s)/1000 )) us"
  sleep 0.5
done
names=$(for i in $(seq 1 10); do printf "x%02da x%02db " $i $i; done)
T delete $names >/dev/null
T sync >/dev/null 2>&1
kill $(cat $D/pid); while kill -0 $(cat $D/pid) 2>/dev/null; do sleep 0.2; done
