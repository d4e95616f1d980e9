/* e2e helpers (e2e.h). */
#include "tests/e2e/e2e.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *bindir(void)
{
	static char buf[512];
	const char *b = getenv("TANK_BUILD_DIR");
	snprintf(buf, sizeof buf, "%s/bin", b ? b : "build");
	return buf;
}

void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

pid_t spawn_tankd(d_t *d, const char *log)
{
	char bin[600], logp[128];
	pid_t pid;

	snprintf(bin, sizeof bin, "%s/tankd", bindir());
	snprintf(logp, sizeof logp, "%s/%s", d->dir, log);
	/* Owned before it starts: whatever way the test ends, its tankd, the
	 * containers in its cgroup root, the root and the data dir go. */
	ts_own_daemon_root(d->dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* A test that fails or times out must not leave its daemon. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		if (d->nofile) {
			struct rlimit rl = { (rlim_t)d->nofile, (rlim_t)d->nofile };
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		if (d->no_raise && prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0) < 0)
			_exit(126);
		if (d->group)
			execl(bin, "tankd", "--data-dir", d->dir, "--resync", "300ms",
			      "--socket-group", d->group, (char *)NULL);
		else
			execl(bin, "tankd", "--data-dir", d->dir, "--resync", "300ms", (char *)NULL);
		_exit(127);
	}
	ts_own_pid(pid);
	return pid;
}

/* Runs tankctl with printf-formatted arguments (split on spaces); returns
 * the exit status and the output (stdout+stderr) in out. */
int ctl(d_t *d, char *out, size_t cap, const char *fmt, ...)
{
	char args[1024], cmd[2048];
	va_list ap;
	FILE *p;
	size_t n = 0;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof args, fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof cmd, "%s/tankctl --socket %s %s 2>&1", bindir(), d->sock, args);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	if (out) {
		n = fread(out, 1, cap - 1, p);
		out[n] = '\0';
	} else {
		char sink[4096];
		while (fread(sink, 1, sizeof sink, p) > 0)
			;
	}
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool up(d_t *d)
{
	return ctl(d, NULL, 0, "ping") == 0;
}

void start(d_t *d)
{
	d->pid = spawn_tankd(d, "tankd.log");
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(25);
	cr_assert(up(d), "tankd did not come up");
}

d_t *d_new(void)
{
	d_t *d = calloc(1, sizeof *d);
	cr_assert_not_null(d);
	cr_assert_not_null(ts_mkdtemp(d->dir, sizeof d->dir, "tank-e2e"));
	snprintf(d->sock, sizeof d->sock, "%s/tank.sock", d->dir);
	return d;
}

d_t *setup(void)
{
	d_t *d = d_new();
	start(d);
	return d;
}

int stop(d_t *d, int sig)
{
	int st = 0;
	if (d->pid > 0) {
		kill(d->pid, sig);
		waitpid(d->pid, &st, 0);
		d->pid = 0;
	}
	return st;
}

void teardown(d_t *d)
{
	char dir[sizeof d->dir];
	stop(d, SIGTERM);
	snprintf(dir, sizeof dir, "%s", d->dir);
	free(d);
	ts_cleanup();
	cr_assert(access(dir, F_OK) < 0, "%s was not removed", dir);
}

void write_file(d_t *d, const char *name, const char *text)
{
	char path[128];
	snprintf(path, sizeof path, "%s/%s", d->dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

/* Processes whose command line is exactly argv (NUL-separated), of this
 * test (ts_mine: in its tankd's cgroup root or its descendants), not of
 * the same test run meanwhile from another checkout. */
int count_procs(const char *const *argv)
{
	char want[256], buf[256], path[300];
	size_t wl = 0;
	int n = 0;
	DIR *dp = opendir("/proc");
	struct dirent *e;

	for (size_t i = 0; argv[i]; i++) {
		size_t l = strlen(argv[i]) + 1;
		memcpy(want + wl, argv[i], l);
		wl += l;
	}
	while ((e = readdir(dp))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t r = read(fd, buf, sizeof buf);
		close(fd);
		if (r == (ssize_t)wl && memcmp(buf, want, wl) == 0 && ts_mine(atoi(e->d_name)))
			n++;
	}
	closedir(dp);
	return n;
}

int wait_procs(const char *const *argv, int n, int secs)
{
	int got = count_procs(argv);
	for (int i = 0; i < secs * 50 && got != n; i++) {
		sleep_ms(20);
		got = count_procs(argv);
	}
	return got;
}

/* A field of `tankctl status NAME -o json`, crudely: the text after
 * "key": up to the next comma. */
long status_num(d_t *d, const char *name, const char *key)
{
	char out[8192], pat[64], *p;
	if (ctl(d, out, sizeof out, "status %s -o json", name) != 0)
		return -1;
	snprintf(pat, sizeof pat, "\"%s\": ", key);
	if (!(p = strstr(out, pat)))
		return -1;
	return strtol(p + strlen(pat), NULL, 10);
}

/* says() with the arguments already formatted. */
static bool says_args(d_t *d, const char *needle, const char *args)
{
	static char out[65536];
	return ctl(d, out, sizeof out, "%s", args) == 0 && strstr(out, needle) != NULL;
}

bool says(d_t *d, const char *needle, const char *fmt, ...)
{
	char args[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof args, fmt, ap);
	va_end(ap);
	return says_args(d, needle, args);
}

bool wait_says(d_t *d, int secs, const char *needle, const char *fmt, ...)
{
	char args[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof args, fmt, ap);
	va_end(ap);
	for (int i = 0; i < secs * 20; i++) {
		if (says_args(d, needle, args))
			return true;
		sleep_ms(50);
	}
	return false;
}

bool phase_is(d_t *d, const char *name, const char *phase)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"phase\": \"%s\"", phase);
	return says(d, pat, "status %s -o json", name);
}

bool wait_phase(d_t *d, const char *name, const char *phase, int secs)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"phase\": \"%s\"", phase);
	return wait_says(d, secs, pat, "status %s -o json", name);
}

void read_text(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;
	if (f) {
		n = fread(buf, 1, cap - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
}

