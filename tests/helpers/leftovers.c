/*
 * leftovers — runs a command (make test's runner, bench/run, the soak)
 * and then checks that it left nothing behind; docs/testing.md.
 *
 *   leftovers CMD [ARG...]     exit status: CMD's when it failed, else 1
 *                              when something was left, else 0
 *   leftovers --guard FD       the guardian of one test process
 *                              (tests/support/tsupport.h)
 *
 * Before CMD starts: a fresh run dir /tmp/tank-run-XXXXXX is exported as
 * TANK_TEST_RUN_DIR (tests make their data dirs in it and list the cgroup
 * roots they own in it), our own path as TANK_TEST_GUARD, and this process
 * becomes a child subreaper: an orphan of this run (a container whose
 * tankd was killed) comes to us, never to init, so "what this run
 * started" is exactly our descendants.  Runs of other checkouts on the
 * same machine, and unrelated tank processes, are never looked at.
 *
 * Once CMD ended: guardians still cleaning after a test that crashed are
 * waited for (up to 30 s), processes still exiting get 2 s, and then
 * ts_leftovers names each process, cgroup root and data dir the run left
 * ("leftovers: ..." lines on stderr), kills and removes them, and one
 * line says the verdict.
 */
#include <errno.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/tsupport.h"

static volatile sig_atomic_t child;

/* SIGTERM/SIGINT/SIGHUP go to CMD; we stay to check what it left. */
static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

static void nap_ms(int ms)
{
	struct timespec t = { 0, ms * 1000000L };
	nanosleep(&t, NULL);
}

/* Whether a descendant of ours is alive: with comm == name (NULL: any). */
static bool descendant_alive(const char *name)
{
	/* Orphans are our children (subreaper); a live guardian or process
	 * of the run is our child or a child's descendant: our children
	 * suffice to tell whether anything runs, and /proc/PID/task/PID/children
	 * would need CONFIG_PROC_CHILDREN, so walk /proc by ppid. */
	DIR *d = opendir("/proc");
	struct dirent *e;
	bool found = false;
	pid_t self = getpid();

	while (d && !found && (e = readdir(d))) {
		char path[64], buf[512], comm[64] = "", *p;
		int ppid;
		char st;
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t r = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[r] = '\0';
		if (!(p = strrchr(buf, ')')) || sscanf(p + 2, "%c %d", &st, &ppid) != 2)
			continue;
		if (ppid != self || st == 'Z')
			continue;
		char *o = strchr(buf, '(');
		if (o)
			snprintf(comm, sizeof comm, "%.*s", (int)(p - o - 1), o + 1);
		found = !name || !strcmp(comm, name);
	}
	if (d)
		closedir(d);
	return found;
}

static void reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(int argc, char **argv)
{
	char run[64] = "/tmp/tank-run-XXXXXX", self[4096];
	int st = 0, rc;

	if (argc == 3 && !strcmp(argv[1], "--guard"))
		return ts_guard_main(atoi(argv[2]));
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: leftovers CMD [ARG...]\n");
		return 2;
	}
	if (!mkdtemp(run)) {
		perror("leftovers: mkdtemp");
		return 2;
	}
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = '\0';
	setenv(TS_RUN_DIR_ENV, run, 1);
	if (n > 0)
		setenv(TS_GUARD_ENV, self, 1);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		perror("leftovers: PR_SET_CHILD_SUBREAPER");
		return 2;
	}
	struct sigaction sa = { .sa_handler = forward };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	pid_t pid = fork();
	if (pid < 0) {
		perror("leftovers: fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		fprintf(stderr, "leftovers: %s: %s\n", argv[1], strerror(errno));
		_exit(127);
	}
	child = pid;
	/* A reader of our output gone (^C took tee with it) must not stop
	 * the check and the cleanup: CMD keeps the default disposition. */
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		pid_t r = waitpid(-1, &st, 0);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			break;
	}
	child = 0;
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);

	/* Guardians clean after a test process that ended without doing it. */
	for (int i = 0; i < 600 && descendant_alive(TS_GUARD_COMM); i++) {
		reap();
		nap_ms(50);
	}
	/* A daemon killed with its test (PDEATHSIG) may still be exiting. */
	for (int i = 0; i < 40 && descendant_alive(NULL); i++) {
		reap();
		nap_ms(50);
	}
	int left = ts_leftovers(run, stderr);
	if (left)
		fprintf(stderr, "leftovers: %d left by this run (named above; now killed and "
			"removed): failing\n", left);
	else
		fprintf(stderr, "leftovers: none: no process, cgroup root or data dir of "
			"this run is left\n");
	return rc ? rc : left ? 1 : 0;
}
