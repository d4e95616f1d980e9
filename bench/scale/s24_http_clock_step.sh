#!/bin/sh
# s24_http_clock_step.sh: issue 38 round 15 (an attack, not part of `make test`): the web side's request deadline (obs_http.c,
# OBS_HTTP_ASK_S) under a step of the wall clock.  tankd runs with an
# LD_PRELOAD shim that adds an offset, read from a file, to
# CLOCK_REALTIME; a connection drips half a request a byte every 0.5 s and
# the clock is stepped back an hour, then forward a minute.  Each must be
# closed at 10 s, not after the hour, not at once.
#   sh bench/scale/s24_http_clock_step.sh [BUILD_DIR]    (default build)
set -eu
B=${1:-build}
T=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$T"' EXIT
cat > "$T/shim.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
static double off(void)
{
	const char *p = getenv("SHIM_OFFSET_FILE");
	double o = 0;
	FILE *f = p ? fopen(p, "re") : NULL;
	if (f) { if (fscanf(f, "%lf", &o) != 1) o = 0; fclose(f); }
	return o;
}
int clock_gettime(clockid_t c, struct timespec *ts)
{
	static int (*real)(clockid_t, struct timespec *);
	if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
	int rc = real(c, ts);
	if (!rc && (c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE)) {
		long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec +
			       (long long)(off() * 1e9);
		ts->tv_sec = ns / 1000000000LL;
		ts->tv_nsec = ns % 1000000000LL;
	}
	return rc;
}
int gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec ts;
	(void)tz;
	clock_gettime(CLOCK_REALTIME, &ts);
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}
C
cc -O2 -shared -fPIC -o "$T/shim.so" "$T/shim.c" -ldl
echo 0 > "$T/offset"
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
mkdir "$T/d"
SHIM_OFFSET_FILE="$T/offset" LD_PRELOAD="$T/shim.so" "$B/bin/tankd" --data-dir "$T/d" \
	--http "127.0.0.1:$PORT" > "$T/tankd.log" 2>&1 &
PID=$!
sleep 1.5
python3 - "$PORT" "$T/offset" <<'PY'
import socket, sys, time
port, offset = int(sys.argv[1]), sys.argv[2]
def run(jump, at, dur):
    open(offset, "w").write("0")
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    t0, jumped = time.time(), False
    while time.time() - t0 < dur:
        if not jumped and time.time() - t0 >= at:
            open(offset, "w").write(str(jump))
            jumped = True
        s.setblocking(False)
        try:
            if s.recv(100) == b"":
                break
        except BlockingIOError:
            pass
        except OSError:
            break
        s.setblocking(True)
        try:
            s.send(b"a")
        except OSError:
            break
        time.sleep(0.5)
    open(offset, "w").write("0")
    return time.time() - t0
bad = 0
for jump, at, dur in ((0, 99, 30), (-3600, 2, 30), (60, 1, 30)):
    t = run(jump, at, dur)
    ok = 9 <= t <= 12
    bad += not ok
    print("%s: clock stepped %+d s: the dripping connection closed at %.1f s%s"
          % ("ok" if ok else "FAIL", jump, t, "" if ok else " (want 10 s)"))
sys.exit(1 if bad else 0)
PY
