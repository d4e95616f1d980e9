/*
 * workload — the process every restart-storm benchmark supervises, the same
 * binary under tank, s6, runit and supervisord, so that the supervisors are
 * compared and not the programs they run.
 *
 *   workload noop            exits 0 at once (the physical-limit probe)
 *   workload exit1           exits 1 at once (the crash loop)
 *   workload sleep [SOCK]    reports "S pid t" to SOCK, then blocks forever
 *   workload stamp [SOCK]    reports "S pid t", then "E pid t", exits 1
 *   workload deaf [SOCK]     as sleep, but ignores SIGTERM (a stop ends it
 *                            only by SIGKILL after its grace: bench_storm's
 *                            stop scenario)
 *
 * t is CLOCK_MONOTONIC in nanoseconds, so the bench (same boot, same clock)
 * can subtract its own stamps.  SOCK is a Unix datagram socket the bench
 * listens on; without the argument it comes from $BENCH_NOTIFY.  Run as
 * `run` (the service dirs' `run` of s6 and runit is a symlink to this
 * binary, so the peers pay for no shell either) the arguments are ignored
 * and the mode comes from $BENCH_MODE (default sleep): s6-supervise passes
 * arguments of its own to ./run.
 *
 * Why a datagram per start rather than polling each supervisor's status:
 * one mechanism for all four systems, exact exec-side timestamps, and no
 * polling load competing with the supervisor for the two cores.  The send
 * blocks when the bench's queue is full, which only delays the report, never
 * loses it.  Nothing here uses stdio: the binary must cost little to exec.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Decimal into buf, returns the length; no snprintf, keep it cheap. */
static size_t put_u64(char *buf, uint64_t v)
{
	char tmp[24];
	size_t n = 0, i;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

static void report(int fd, const struct sockaddr_un *sa, char kind, uint64_t t)
{
	char msg[64];
	size_t n = 0;

	if (fd < 0)
		return;
	msg[n++] = kind;
	msg[n++] = ' ';
	n += put_u64(msg + n, (uint64_t)getpid());
	msg[n++] = ' ';
	n += put_u64(msg + n, t);
	/* A bench that went away (ECONNREFUSED, ENOENT) is not our problem. */
	while (sendto(fd, msg, n, 0, (const struct sockaddr *)sa, sizeof *sa) < 0 && errno == EINTR)
		;
}

static int open_notify(const char *path, struct sockaddr_un *sa)
{
	int fd;

	if (!path || !*path || strlen(path) >= sizeof sa->sun_path)
		return -1;
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	return fd;
}

int main(int argc, char **argv)
{
	uint64_t t0 = now_ns();
	const char *base = argv[0] ? strrchr(argv[0], '/') : NULL;
	bool as_run = !strcmp(base ? base + 1 : argv[0] ? argv[0] : "", "run");
	const char *mode = argc > 1 && !as_run ? argv[1] : getenv("BENCH_MODE");
	const char *sock = argc > 2 && !as_run ? argv[2] : getenv("BENCH_NOTIFY");
	struct sockaddr_un sa;
	int fd;

	if (!mode || !*mode)
		mode = "sleep";
	if (!strcmp(mode, "noop"))
		_exit(0);
	if (!strcmp(mode, "exit1"))
		_exit(1);
	fd = open_notify(sock, &sa);
	if (!strcmp(mode, "stamp")) {
		report(fd, &sa, 'S', t0);
		report(fd, &sa, 'E', now_ns());
		_exit(1);
	}
	if (!strcmp(mode, "deaf"))
		signal(SIGTERM, SIG_IGN);
	if (!strcmp(mode, "sleep") || !strcmp(mode, "deaf")) {
		report(fd, &sa, 'S', t0);
		if (fd >= 0)
			close(fd);
		for (;;)
			pause();
	}
	_exit(2);
}
