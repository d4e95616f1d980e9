/*
 * bench_start — what a start of tankd and tankctl costs before they do
 * anything (issue 38, items 6 (a) and 2: the dynamic loader, the
 * libraries' constructors, their mapped pages).
 *
 * Runs, each R times (default 30; QUICK=1: 10), alternated so that a
 * change in the machine's load falls on all of them alike:
 *   true      /bin/true: the machine's floor for an exec
 *   version   `tankd --version`: exec, the loader, the libraries'
 *             constructors, main, exit
 *   ctl       `tankctl --version`: the same for the client every
 *             command line pays
 *   start     `tankd` on an empty data dir: spawn until its first ping
 *             is answered (wall), then SIGTERM; its CPU from exec to
 *             exit (wait4's rusage: the start, one ping, the drain)
 *   keeper    the same for `tankd --keeper` (the keeper, then the tankd
 *             it starts: two loads; CPU of both, the keeper reaps tankd)
 * For each: the median and the spread (min, max) of CPU ms (user +
 * system) and of minor page faults; for start and keeper also the median
 * wall time to the first ping.  Once: the idle tankd's PSS and how many
 * shared libraries it maps, after its first ping.
 *
 *   BUILD=DIR   the build whose bin/tankd and bin/tankctl run (default
 *               build): a before and an after are two runs of this
 *               program with two BUILDs.
 *
 * JSON lines on stdout, progress on stderr.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_util.h"

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bench_vnote("start", fmt, ap);
	va_end(ap);
}

static void emit(const char *metric, double value, const char *unit, long n)
{
	bench_emit("start", metric, value, unit, n);
}

enum { R_TRUE, R_VERSION, R_CTL, R_START, R_KEEPER, R_KINDS };
static const char *const run_names[R_KINDS] = { "true", "version", "ctl", "start", "keeper" };

typedef struct sample {
	double cpu_ms, wall_ms;
	long minflt;
} sample_t;

static double ru_ms(const struct rusage *ru)
{
	return (double)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1e3 +
	       (double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e3;
}

/* argv run to its end, stdout and stderr to /dev/null. */
static int run_once(char *const argv[], sample_t *s)
{
	struct rusage ru;
	uint64_t t0 = bench_now_ns();
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	if (wait4(pid, &st, 0, &ru) != pid)
		return -errno;
	s->wall_ms = (double)(bench_now_ns() - t0) / 1e6;
	s->cpu_ms = ru_ms(&ru);
	s->minflt = ru.ru_minflt;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -ECHILD;
}

/* PSS (KiB) of pid and the shared libraries it maps. */
static void mem_of(pid_t pid, long *pss_kib, long *libs)
{
	char path[64], line[512], last[512] = "";
	FILE *f;

	*pss_kib = 0;
	*libs = 0;
	snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
	if ((f = fopen(path, "re"))) {
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "Pss: %ld kB", pss_kib) == 1)
				break;
		fclose(f);
	}
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof line, f)) {
		char *p = strchr(line, '/');
		if (!p || !strstr(p, ".so"))
			continue;
		if (strcmp(p, last) != 0)
			(*libs)++;           /* each library's mappings are adjacent */
		snprintf(last, sizeof last, "%s", p);
	}
	fclose(f);
}

/* tankd (keeper: under `--keeper`) on a fresh data dir in top: spawn
 * until the first answered ping, then SIGTERM and its rusage.  With
 * pss/libs non-NULL, the idle daemon's memory once it answered. */
static int start_once(const char *tankd, const char *top, bool keeper, sample_t *s,
		      long *pss, long *libs)
{
	char data[300], sock[320], log[320];
	char *argv[8];
	int n = 0, st, rc = -ETIMEDOUT;
	struct rusage ru;
	api_client_t *c = NULL;
	pid_t pid;
	uint64_t t0, deadline;

	snprintf(data, sizeof data, "%s/data", top);
	snprintf(sock, sizeof sock, "%s/tank.sock", top);
	snprintf(log, sizeof log, "%s/tankd.log", top);
	bench_rm_rf(data);
	argv[n++] = (char *)tankd;
	if (keeper)
		argv[n++] = "--keeper";
	argv[n++] = "--data-dir";
	argv[n++] = data;
	argv[n++] = "--socket";
	argv[n++] = sock;
	argv[n] = NULL;
	t0 = bench_now_ns();
	if ((pid = bench_spawn(log, argv)) < 0)
		return -errno;
	deadline = t0 + 60ull * 1000000000u;
	while (bench_now_ns() < deadline) {
		tank_error_t e;
		api_incoming_t in;
		if (api_client_connect(sock, &c, &e) == 0) {
			if (api_client_call(c, "ping", NULL, NULL, 60000, &in, &e) == 0) {
				api_incoming_free(&in);
				s->wall_ms = (double)(bench_now_ns() - t0) / 1e6;
				rc = 0;
				break;
			}
			api_client_close(c);
			c = NULL;
		}
		if (waitpid(pid, &st, WNOHANG) == pid) {
			note("tankd exited at start: see %s", log);
			return -ECHILD;
		}
		/* A short pause: the poll must not take the core tankd starts on. */
		bench_sleep_ms(1);
	}
	if (c)
		api_client_close(c);
	if (rc == 0 && pss)
		mem_of(pid, pss, libs);
	kill(pid, SIGTERM);
	if (wait4(pid, &st, 0, &ru) != pid)
		return -errno;
	s->cpu_ms = ru_ms(&ru);
	s->minflt = ru.ru_minflt;
	return rc;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(void)
{
	char tankd[PATH_MAX], tankctl[PATH_MAX], top[256];
	bool quick = getenv("QUICK") && strcmp(getenv("QUICK"), "0");
	int runs = quick ? 10 : 30, err;
	sample_t *s[R_KINDS];
	long pss = 0, libs = 0;

	if (bench_setup("start", tankd, top) < 0)
		return 111;
	snprintf(tankctl, sizeof tankctl, "%.*sctl", (int)(strlen(tankd) - 1), tankd);
	for (int k = 0; k < R_KINDS; k++)
		if (!(s[k] = calloc((size_t)runs, sizeof *s[k])))
			return 111;
	note("%s, %d runs of each, alternated", tankd, runs);
	for (int i = 0; i < runs; i++) {
		char *t_argv[] = { "/bin/true", NULL };
		char *v_argv[] = { tankd, "--version", NULL };
		char *c_argv[] = { tankctl, "--version", NULL };

		if ((err = run_once(t_argv, &s[R_TRUE][i])) < 0 ||
		    (err = run_once(v_argv, &s[R_VERSION][i])) < 0 ||
		    (err = run_once(c_argv, &s[R_CTL][i])) < 0 ||
		    (err = start_once(tankd, top, false, &s[R_START][i], i == 0 ? &pss : NULL,
				      &libs)) < 0 ||
		    (err = start_once(tankd, top, true, &s[R_KEEPER][i], NULL, NULL)) < 0) {
			note("fatal: run %d: %s", i, strerror(-err));
			return 111;
		}
	}
	for (int k = 0; k < R_KINDS; k++) {
		double cpu[runs], flt[runs], wall[runs];
		char m[64];
		for (int i = 0; i < runs; i++) {
			cpu[i] = s[k][i].cpu_ms;
			flt[i] = (double)s[k][i].minflt;
			wall[i] = s[k][i].wall_ms;
		}
		double mc = median(cpu, runs), mf = median(flt, runs), mw = median(wall, runs);
		note("%-8s cpu %.2f ms (%.2f–%.2f), %.0f minor faults, wall %.2f ms (%.2f–%.2f)",
		     run_names[k], mc, cpu[0], cpu[runs - 1], mf, mw, wall[0], wall[runs - 1]);
		snprintf(m, sizeof m, "%s_cpu_ms_p50", run_names[k]);
		emit(m, mc, "ms", runs);
		snprintf(m, sizeof m, "%s_minflt_p50", run_names[k]);
		emit(m, mf, "faults", runs);
		if (k == R_START || k == R_KEEPER) {
			snprintf(m, sizeof m, "%s_first_ping_ms_p50", run_names[k]);
			emit(m, mw, "ms", runs);
		}
	}
	note("idle tankd: PSS %ld KiB, %ld shared libraries mapped", pss, libs);
	emit("idle_pss", (double)pss, "KiB", 1);
	emit("idle_libs", (double)libs, "libraries", 1);
	return 0;
}
