/*
 * End to end, live re-adoption (issue 35, DESIGN.md §11): pods survive a
 * kill -9 of tankd under its keeper (`tankd --keeper`) and a `daemon
 * reexec`, with the same pids and restart counts, every line written
 * meanwhile in `logs`, and an exit that happened while no tankd watched
 * recorded with its real status.  Real processes throughout: the keeper,
 * tankd, the containers, /proc.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

#define NTICK 4

/* The keeper (d->pid) on d's data dir: it starts tankd itself. */
static d_t *setup_keeper(void)
{
	d_t *d = d_new();
	char bin[600], logp[128];
	pid_t pid;

	snprintf(bin, sizeof bin, "%s/tankd", bindir());
	snprintf(logp, sizeof logp, "%s/tankd.log", d->dir);
	ts_own_daemon_root(d->dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, "tankd", "--keeper", "--data-dir", d->dir, "--resync", "300",
		      (char *)NULL);
		_exit(127);
	}
	ts_own_pid(pid);
	d->pid = pid;
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(50);
	cr_assert(up(d), "tankd under its keeper did not come up");
	return d;
}

/* The pid serving d's socket (from `version`), owned so that it goes
 * whatever way the test ends; 0 when none answers. */
static pid_t serving(d_t *d, pid_t *keeper)
{
	char out[4096], *p;
	long pid = 0, kp = 0;

	if (ctl(d, out, sizeof out, "version") != 0 || !(p = strstr(out, "\npid ")))
		return 0;
	pid = strtol(p + 5, NULL, 10);
	if ((p = strstr(out, "keeper pid ")))
		kp = strtol(p + 11, NULL, 10);
	if (keeper)
		*keeper = (pid_t)kp;
	if (pid > 0)
		ts_own_pid((pid_t)pid);
	return (pid_t)pid;
}

/* Waits until a tankd other than old serves d (up to secs). */
static pid_t wait_new_tankd(d_t *d, pid_t old, int secs)
{
	for (int i = 0; i < secs * 20; i++) {
		pid_t now = serving(d, NULL);
		if (now > 0 && now != old)
			return now;
		sleep_ms(50);
	}
	return 0;
}

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	if (!(dir = opendir(path)))
		return -1;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* Children of pid, whichever of its threads made them (the launcher's
 * threads clone the containers): /proc/PID/task/TID/children of each. */
static int count_children(pid_t pid)
{
	char path[96], buf[16384];
	int fd, n = 0;
	ssize_t r;
	DIR *dir;
	struct dirent *e;

	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	if (!(dir = opendir(path)))
		return -1;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid,
			 atoi(e->d_name));
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;         /* a thread that just ended */
		r = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (r < 0)
			continue;
		buf[r] = '\0';
		for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
			n++;
	}
	closedir(dir);
	return n;
}

/* A zombie (or gone): dead even while its parent is stopped. */
static bool dead(pid_t pid)
{
	char path[64], buf[512], *p;
	int fd;
	ssize_t r;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return true;
	r = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (r <= 0)
		return true;
	buf[r] = '\0';
	return (p = strrchr(buf, ')')) && (p[2] == 'Z' || p[2] == 'X');
}

/* Every "line N" of a ticker's log is there, from 1 to the last, once:
 * nothing lost, nothing twice.  Returns the last N. */
static long check_lines(d_t *d, const char *pod)
{
	static char out[1 << 20];
	long want = 1;
	char *p = out;

	cr_assert_eq(ctl(d, out, sizeof out, "logs %s -t --tail -1", pod), 0, "%s", out);
	while ((p = strstr(p, "stdout line "))) {
		long n = strtol(p + 12, &p, 10);
		cr_assert_eq(n, want, "%s: line %ld where line %ld was due (lost or twice)",
			     pod, n, want);
		want++;
	}
	return want - 1;
}

static void write_pods(d_t *d, bool never)
{
	char manifest[4096];
	size_t at = 0;

	for (int i = 0; i < NTICK; i++)
		at += (size_t)snprintf(manifest + at, sizeof manifest - at,
			"name: tick%d\ncontainers:\n  - name: t\n"
			"    command: [/bin/sh, -c, 'i=0; while :; do i=$((i+1)); "
			"echo \"line $i\"; sleep 0.05; done']\n---\n", i);
	/* Waits for a file, says so, and exits 7: it ends during the gap. */
	if (never)
		at += (size_t)snprintf(manifest + at, sizeof manifest - at,
			"name: seven\nrestart: never\ncontainers:\n  - name: s\n"
			"    command: [/bin/sh, -c, 'echo waiting; while [ ! -e %s/go ]; do "
			"sleep 0.05; done; echo gap-line; exit 7']\n", d->dir);
	write_file(d, "pods.yaml", manifest);
}

static void pids_of(d_t *d, long pids[NTICK])
{
	char name[32];
	for (int i = 0; i < NTICK; i++) {
		snprintf(name, sizeof name, "tick%d", i);
		cr_assert(wait_phase(d, name, "running", 20));
		pids[i] = status_num(d, name, "pid");
		cr_assert_gt(pids[i], 0);
	}
}

static void same_pids(d_t *d, const long pids[NTICK], const char *when)
{
	char name[32];
	for (int i = 0; i < NTICK; i++) {
		snprintf(name, sizeof name, "tick%d", i);
		cr_assert(wait_phase(d, name, "running", 20), "%s: %s not running", when, name);
		long now = status_num(d, name, "pid");
		cr_assert_eq(now, pids[i], "%s: %s's pid %ld became %ld (restarted)", when, name,
			     pids[i], now);
		cr_assert_eq(status_num(d, name, "restarts"), 0, "%s: %s restarted", when, name);
	}
}

Test(adopt, kill9_under_the_keeper_adopts_every_pod_with_its_output_and_exits)
{
	d_t *d = setup_keeper();
	char out[8192], path[128];
	long pids[NTICK];
	pid_t keeper = 0, old = serving(d, &keeper);

	cr_assert_eq(keeper, d->pid, "version names the keeper (%d, not %d)", (int)keeper,
		     (int)d->pid);
	write_pods(d, true);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/pods.yaml", d->dir), 0, "%s", out);
	pids_of(d, pids);
	cr_assert(wait_phase(d, "seven", "running", 20));
	long seven = status_num(d, "seven", "pid");
	cr_assert(wait_says(d, 10, "waiting", "logs seven"));
	sleep_ms(300);   /* the group commit reaches the disk */

	/* The gap: the keeper held still (so the restart waits), tankd
	 * killed; the tickers go on writing into their pipes, seven ends. */
	cr_assert_eq(kill(keeper, SIGSTOP), 0);
	cr_assert_eq(kill(old, SIGKILL), 0);
	snprintf(path, sizeof path, "%s/go", d->dir);
	write_file(d, "go", "");
	for (int i = 0; i < 200 && !dead((pid_t)seven); i++)
		sleep_ms(20);
	cr_assert(dead((pid_t)seven), "seven did not end in the gap");
	sleep_ms(500);   /* lines written while no tankd reads */
	cr_assert_eq(kill(keeper, SIGCONT), 0);

	pid_t now = wait_new_tankd(d, old, 20);
	cr_assert_gt(now, 0, "the keeper did not start a new tankd");
	same_pids(d, pids, "after kill -9");
	/* The exit of the gap, with its real status. */
	cr_assert(wait_phase(d, "seven", "terminal", 20));
	cr_assert(says(d, "\"code\": 7", "status seven -o json"));
	cr_assert(says(d, "while tankd was down", "history seven"));
	cr_assert(says(d, "gap-line", "logs seven"));
	/* Every ticker line, the gap's included, once. */
	sleep_ms(300);
	for (int i = 0; i < NTICK; i++) {
		char name[32];
		snprintf(name, sizeof name, "tick%d", i);
		cr_assert_gt(check_lines(d, name), 20);
	}
	cr_assert(says(d, "restarts   1", "daemon status"));
	cr_assert(says(d, "adopted    ", "daemon status"));

	/* Again, 20 times in a row: nothing piles up in the keeper or tankd. */
	sleep_ms(300);
	int kfds = count_fds(keeper), tfds = count_fds(now);
	for (int round = 0; round < 20; round++) {
		old = now;
		cr_assert_eq(kill(old, SIGKILL), 0);
		now = wait_new_tankd(d, old, 20);
		cr_assert_gt(now, 0, "round %d: no new tankd", round);
		same_pids(d, pids, "after another kill -9");
	}
	for (int i = 0; i < 100 && (count_fds(keeper) > kfds || count_fds(now) > tfds); i++)
		sleep_ms(20);
	cr_assert_leq(count_fds(keeper), kfds, "keeper fds %d -> %d", kfds, count_fds(keeper));
	cr_assert_leq(count_fds(now), tfds, "tankd fds %d -> %d", tfds, count_fds(now));
	for (int i = 0; i < NTICK; i++) {
		char name[32];
		snprintf(name, sizeof name, "tick%d", i);
		check_lines(d, name);
	}

	/* A graceful stop still stops the pods, and the keeper with it. */
	int st = stop(d, SIGTERM);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "keeper status %d", st);
	for (int i = 0; i < NTICK; i++)
		cr_assert_not(ts_alive((pid_t)pids[i]), "pod %d outlived a graceful stop", i);
	teardown(d);
}

/* Every "line N" of pod's log from 1 to the last, once, with a buffer
 * for a chatty pod; returns the last N. */
static long check_many_lines(d_t *d, const char *pod)
{
	size_t cap = 64u << 20;
	char *out = malloc(cap), *p = out;
	long want = 1;

	cr_assert_not_null(out);
	cr_assert_eq(ctl(d, out, cap, "logs %s -t --tail -1", pod), 0, "%.4000s", out);
	cr_assert_lt(strlen(out), cap - 1, "logs did not fit the buffer");
	while ((p = strstr(p, "stdout line "))) {
		long n = strtol(p + 12, &p, 10);
		if (n != want) {
			char ctx[400];
			const char *from = p - 200 > out ? p - 200 : out;
			snprintf(ctx, sizeof ctx, "%.300s", from);
			free(out);
			cr_assert_fail("%s: line %ld where line %ld was due (lost or twice), near:\n%s",
				       pod, n, want, ctx);
		}
		want++;
	}
	free(out);
	return want - 1;
}

/* How many times what occurs in the output of the tankctl command. */
static int count_in(d_t *d, const char *what, const char *cmd)
{
	static char out[1 << 22];
	int n = 0;

	cr_assert_eq(ctl(d, out, sizeof out, "%s", cmd), 0, "%s: %s", cmd, out);
	for (const char *p = out; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* The gap the spool closes (docs/operations.md, "Logs across a crash"):
 * a container writing fast, every 50th line in two writes 20 ms apart
 * (a partial line is pending most of the time), and tankd killed -9
 * under the keeper again and again at staggered moments.  Every line is
 * in `logs` once: with the writer that read the pipe into memory, a
 * partial line (or a read not yet written) died with tankd. */
Test(adopt, a_chatty_container_loses_no_line_and_doubles_none_across_kill9s, .timeout = 180)
{
	d_t *d = setup_keeper();
	char out[8192];
	pid_t old = serving(d, NULL);

	write_file(d, "fast.yaml",
		   "name: fast\ncontainers:\n  - name: t\n"
		   "    command: [/bin/sh, -c, 'i=0; while :; do i=$((i+1)); "
		   "if [ $((i % 50)) = 0 ]; then printf \"line $i\"; sleep 0.02; echo; "
		   "else echo \"line $i\"; fi; done']\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/fast.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "fast", "running", 20));
	long pid = status_num(d, "fast", "pid");
	/* the last records only: at this pace line N scrolls out at once */
	cr_assert(wait_says(d, 60, "stdout line ", "logs fast -t --tail 3"), "no output");
	sleep_ms(500);
	for (int round = 0; round < 8; round++) {
		sleep_ms(100 + (round * 137) % 400);
		cr_assert_eq(kill(old, SIGKILL), 0);
		pid_t now = wait_new_tankd(d, old, 30);
		cr_assert_gt(now, 0, "round %d: no new tankd", round);
		old = now;
		cr_assert(wait_phase(d, "fast", "running", 20));
		cr_assert_eq(status_num(d, "fast", "pid"), pid, "round %d: restarted", round);
	}
	sleep_ms(500);
	long last = check_many_lines(d, "fast");
	cr_assert_gt(last, 200, "only %ld lines", last);
	/* after a graceful stop too (the partial line at the end included) */
	int st = stop(d, SIGTERM);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "keeper status %d", st);
	teardown(d);
}

Test(adopt, reexec_twenty_times_keeps_pods_pids_output_and_no_leak)
{
	d_t *d = setup();
	char out[8192];
	long pids[NTICK];
	pid_t pid = serving(d, NULL);

	cr_assert_eq(pid, d->pid);
	write_pods(d, false);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/pods.yaml", d->dir), 0, "%s", out);
	pids_of(d, pids);
	sleep_ms(300);
	int pendings = count_in(d, "\"to\": \"pending\"", "history tick0 -o json");
	/* The first reexec settles what a first start leaves open (the
	 * slots, the store's files); from there nothing may grow. */
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	same_pids(d, pids, "after the first reexec");
	sleep_ms(300);
	int fds = count_fds(pid), kids = count_children(pid);
	cr_assert_gt(fds, 0);
	cr_assert_eq(kids, NTICK, "tankd has %d children", kids);
	for (int round = 0; round < 20; round++) {
		cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "round %d: %s", round,
			     out);
		cr_assert_eq(serving(d, NULL), pid, "round %d: another pid serves", round);
	}
	same_pids(d, pids, "after 20 reexecs");
	/* An adoption is no phase change: no running -> pending -> running
	 * in the pod's history (its events) at each upgrade. */
	cr_assert(says(d, "adopted", "history tick0"));
	cr_assert_eq(count_in(d, "\"to\": \"pending\"", "history tick0 -o json"), pendings,
		     "the pod went back to pending at a reexec");
	cr_assert(says(d, "reexecs    21", "daemon status"));
	/* A connection of the last call may still be closing on tankd's
	 * side: wait for it, then nothing may be left over. */
	for (int i = 0; i < 100 && count_fds(pid) > fds; i++)
		sleep_ms(20);
	cr_assert_leq(count_fds(pid), fds, "fds %d -> %d", fds, count_fds(pid));
	cr_assert_eq(count_children(pid), kids, "children %d -> %d", kids,
		     count_children(pid));
	for (int i = 0; i < NTICK; i++) {
		char name[32];
		snprintf(name, sizeof name, "tick%d", i);
		cr_assert_gt(check_lines(d, name), 20);
	}
	/* SIGUSR2 is the same. */
	cr_assert_eq(kill(pid, SIGUSR2), 0);
	cr_assert(wait_says(d, 10, "reexecs    22", "daemon status"));
	same_pids(d, pids, "after SIGUSR2");
	/* And a graceful stop still stops them. */
	int st = stop(d, SIGTERM);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (int i = 0; i < NTICK; i++)
		cr_assert_not(ts_alive((pid_t)pids[i]));
	teardown(d);
}

/* n pods t000.. of one sleeping container each, applied, all running. */
static void apply_running(d_t *d, int n)
{
	static char manifest[1000 * 80], out[1000 * 40];
	size_t at = 0;

	cr_assert_leq(n, 1000);
	for (int i = 0; i < n; i++)
		at += (size_t)snprintf(manifest + at, sizeof manifest - at,
				       "name: t%03d\ncontainers:\n  - name: c\n"
				       "    command: [/bin/sleep, \"1000\"]\n---\n", i);
	write_file(d, "pods.yaml", manifest);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/pods.yaml", d->dir), 0, "%s", out);
	for (int i = 0; i < 300 && count_in(d, "\"container\"", "top -o json") < n; i++)
		sleep_ms(100);
	cr_assert_eq(count_in(d, "\"container\"", "top -o json"), n, "not all running");
}

/* Every "pid": N of `ps -o json`, in its order (pods by name), into
 * pids (cap of them); how many. */
static int ps_pids(d_t *d, long *pids, int cap)
{
	static char out[1 << 22];
	int n = 0;

	cr_assert_eq(ctl(d, out, sizeof out, "ps -o json"), 0, "%s", out);
	for (const char *p = out; (p = strstr(p, "\"pid\": ")) && n < cap; p += 7)
		pids[n++] = strtol(p + 7, NULL, 10);
	return n;
}

/* ps_pids now gives the same n pids as before, in the same order. */
static void same_ps_pids(d_t *d, const long *before, int n, const char *when)
{
	static long now[1000 + 8];

	cr_assert_eq(ps_pids(d, now, n + 8), n, "%s: another number of pids", when);
	for (int i = 0; i < n; i++)
		cr_assert_eq(now[i], before[i], "pid %d of %d: %ld, then %ld %s", i, n, before[i],
			     now[i], when);
}

/* Right after a reexec, and after a kill -9 under the keeper, `top`
 * tells of every container, not of those adopted so far: it listed 0-75
 * of 500 running ones, and `top POD` of one still being adopted said it
 * had no running container.  A top now waits until what runs is known
 * (pod_mgr_settling). */
Test(adopt, top_right_after_a_reexec_or_a_kill9_lists_every_container, .timeout = 120)
{
	enum { N = 300 };
	d_t *d = setup_keeper();
	char out[8192], last[16];
	pid_t keeper = 0, old = serving(d, &keeper);

	apply_running(d, N);
	snprintf(last, sizeof last, "t%03d", N - 1);
	for (int round = 0; round < 3; round++) {
		cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
		int n = count_in(d, "\"container\"", "top -o json");
		cr_assert_eq(n, N, "reexec %d: top lists %d of %d containers", round, n, N);
		cr_assert_eq(ctl(d, out, sizeof out, "top %s", last), 0, "reexec %d: %s", round,
			     out);
		cr_assert(strstr(out, last), "reexec %d: top %s: %s", round, last, out);
	}
	/* Killed: the keeper starts another tankd, which adopts them. */
	cr_assert_eq(kill(old, SIGKILL), 0);
	cr_assert_gt(wait_new_tankd(d, old, 20), 0, "no tankd after the kill");
	cr_assert_eq(ctl(d, out, sizeof out, "top %s", last), 0, "kill -9: %s", out);
	cr_assert(strstr(out, last), "kill -9: top %s: %s", last, out);
	int n = count_in(d, "\"container\"", "top -o json");
	cr_assert_eq(n, N, "kill -9: top lists %d of %d containers", n, N);
	int st = stop(d, SIGTERM);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	teardown(d);
}

/* Two reexecs in a row (an upgrade, then another before the first one's
 * adoption ended): the second handed over only what the first had
 * adopted so far, and the new image stopped the rest as strangers and
 * started them again (1,941 of 2,000 pods; 300 of 300).  And an exec
 * right after a reexec ran in a container being adopted: it failed "no
 * pod" or "no container \"\" in pod t999" (pod_req.h: "not settled yet",
 * asked again). */
Test(adopt, reexecs_and_a_kill9_in_a_row_keep_every_pod_and_an_exec_right_after_runs, .timeout = 120)
{
	enum { N = 1000 };
	d_t *d = setup_keeper();
	char out[8192];
	static long before[N + 8];
	pid_t pid = serving(d, NULL);

	apply_running(d, N);
	int nb = ps_pids(d, before, N + 8);
	cr_assert_geq(nb, N);
	for (int round = 0; round < 2; round++) {
		cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
		cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
		cr_assert_eq(ctl(d, out, sizeof out, "exec t%03d -- /bin/echo here", N - 1), 0,
			     "round %d: exec right after a reexec: %s", round, out);
		cr_assert(strstr(out, "here"), "round %d: %s", round, out);
	}
	cr_assert_eq(serving(d, NULL), pid);
	/* Settled: the same processes, none restarted. */
	for (int i = 0; i < 100 && !says(d, "reexecs    4", "daemon status"); i++)
		sleep_ms(50);
	sleep_ms(500);
	same_ps_pids(d, before, nb, "after two reexecs in a row");
	cr_assert_eq(count_in(d, "\"restarts\": 0", "ps -o json"),
		     count_in(d, "\"restarts\": ", "ps -o json"), "a pod restarted");
	/* The same after a kill -9 under the keeper: the reexec hands on
	 * what the keeper gave back and is not taken over yet (594 of 1,000
	 * pods restarted). */
	cr_assert_eq(kill(pid, SIGKILL), 0);
	pid_t next = wait_new_tankd(d, pid, 20);
	cr_assert_gt(next, 0, "no tankd after the kill");
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	for (int i = 0; i < 100 && !says(d, "reexecs    1", "daemon status"); i++)
		sleep_ms(50);
	sleep_ms(500);
	same_ps_pids(d, before, nb, "after a kill -9 and a reexec");
	int st = stop(d, SIGTERM);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	teardown(d);
}

/* A reexec while the launcher threads are starting containers (an apply
 * of 40 pods, the reexec right behind it): a child cloned then is in no
 * list the reexec hands over, so it is killed (pod_launcher_settle), not
 * left to run untracked beside the one the new image starts.  Every pod
 * ends with exactly one process, a child of tankd. */
Test(adopt, a_reexec_while_containers_are_being_launched_leaves_no_stranger)
{
	enum { N = 40 };
	d_t *d = setup();
	char out[8192], manifest[8192], name[32];
	size_t at = 0;
	pid_t pid = serving(d, NULL);

	for (int i = 0; i < N; i++)
		at += (size_t)snprintf(manifest + at, sizeof manifest - at,
				       "name: l%02d\ncontainers:\n  - name: c\n"
				       "    command: [/bin/sleep, \"1000\"]\n---\n", i);
	write_file(d, "pods.yaml", manifest);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/pods.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(kill(pid, SIGUSR2), 0);
	cr_assert(wait_says(d, 20, "reexecs    1", "daemon status"));
	cr_assert_eq(serving(d, NULL), pid);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "l%02d", i);
		cr_assert(wait_phase(d, name, "running", 30), "%s not running", name);
	}
	/* Killed strangers are reaped by the new image: wait for that. */
	int kids = -1;
	for (int t = 0; t < 250 && (kids = count_children(pid)) != N; t++)
		sleep_ms(20);
	cr_assert_eq(kids, N, "tankd has %d children for %d pods", kids, N);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "l%02d", i);
		long p = status_num(d, name, "pid");
		cr_assert_gt(p, 0, "%s has no pid", name);
		cr_assert_not(dead((pid_t)p), "%s: pid %ld is not running", name, p);
	}
	int st = stop(d, SIGTERM);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	teardown(d);
}

Test(adopt, a_never_pod_running_at_a_reexec_records_its_real_exit)
{
	d_t *d = setup();
	char out[4096], manifest[512];

	snprintf(manifest, sizeof manifest,
		 "name: once\nrestart: never\ncontainers:\n  - name: o\n"
		 "    command: [/bin/sh, -c, 'while [ ! -e %s/go ]; do sleep 0.05; done; "
		 "echo done; exit 3']\n", d->dir);
	write_file(d, "once.yaml", manifest);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/once.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "once", "running", 20));
	long pid = status_num(d, "once", "pid");
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	cr_assert(wait_phase(d, "once", "running", 10));
	cr_assert_eq(status_num(d, "once", "pid"), pid);
	write_file(d, "go", "");
	cr_assert(wait_phase(d, "once", "terminal", 20));
	cr_assert(says(d, "\"code\": 3", "status once -o json"));
	cr_assert(says(d, "done", "logs once"));
	cr_assert_not(says(d, "not run again", "history once"));
	teardown(d);
}

/* Whether this process may make pid, uts and ipc namespaces. */
static bool namespaces_work(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0)
		_exit(unshare(CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC) == 0 ? 0 : 1);
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

Test(adopt, isolated_pods_are_adopted_with_their_sandbox)
{
	if (!namespaces_work())
		cr_skip_test("no pid namespaces here");
	d_t *d = setup_keeper();
	char out[8192];
	pid_t old = serving(d, NULL);

	write_file(d, "iso.yaml",
		   "name: iso\nisolation: {namespaces: [pid, uts, ipc], hostname: boxed}\n"
		   "containers:\n  - name: c\n    command: [/bin/sh, -c, 'i=0; while :; do "
		   "i=$((i+1)); echo \"line $i\"; sleep 0.05; done']\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/iso.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "iso", "running", 20));
	long pid = status_num(d, "iso", "pid");
	cr_assert_gt(pid, 0);
	sleep_ms(300);
	cr_assert_eq(kill(old, SIGKILL), 0);
	pid_t now = wait_new_tankd(d, old, 20);
	cr_assert_gt(now, 0);
	cr_assert(wait_phase(d, "iso", "running", 20));
	cr_assert_eq(status_num(d, "iso", "pid"), pid, "kill -9: the isolated pod restarted");
	cr_assert(says(d, "adopted", "history iso"));
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	cr_assert(wait_phase(d, "iso", "running", 20));
	cr_assert_eq(status_num(d, "iso", "pid"), pid, "reexec: the isolated pod restarted");
	sleep_ms(300);
	cr_assert_gt(check_lines(d, "iso"), 10);
	/* Its sandbox is still the pod's: a restart by hand starts the
	 * container in it again. */
	cr_assert_eq(ctl(d, out, sizeof out, "restart iso"), 0, "%s", out);
	for (int i = 0; i < 100 && status_num(d, "iso", "pid") == pid; i++)
		sleep_ms(50);
	cr_assert(wait_phase(d, "iso", "running", 20));
	cr_assert_neq(status_num(d, "iso", "pid"), pid);
	teardown(d);
}

/* Issue 35 item 5: a container still running an older generation of its
 * pod (the pod was applied again, and the old container's stop grace is
 * under way) when tankd re-executes or is killed -9 is adopted as it is
 * (same pid, its own generation) and then replaced by the usual rule, as
 * if tankd had never gone away: not stopped as a stranger. */
Test(adopt, an_older_generation_still_running_is_adopted_then_replaced)
{
	d_t *d = setup_keeper();
	char out[16384], v[1024];
	pid_t old = serving(d, NULL);

	/* v1 ignores its stop signal and ends when told (a file): its stop
	 * grace outlasts the reexec and the kill -9 below. */
	snprintf(v, sizeof v,
		 "name: gen\nstop: {grace: 120s}\ncontainers:\n  - name: c\n"
		 "    command: [/bin/sh, -c, 'trap \"\" TERM; i=0; while [ ! -e %s/go ]; do "
		 "i=$((i+1)); echo \"v1 $i\"; sleep 0.05; done; echo v1-end; exit 5']\n", d->dir);
	write_file(d, "v1.yaml", v);
	write_file(d, "v2.yaml",
		   "name: gen\nstop: {grace: 120s}\ncontainers:\n  - name: c\n"
		   "    command: [/bin/sh, -c, 'while :; do echo v2; sleep 0.05; done']\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/v1.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "gen", "running", 20));
	long pid = status_num(d, "gen", "pid");
	cr_assert_gt(pid, 0);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/v2.yaml", d->dir), 0, "%s", out);
	/* The replace began: v1 is being stopped, still at generation 1. */
	cr_assert(wait_says(d, 20, "\"phase\": \"stopping\"", "status gen -o json"));
	cr_assert_eq(status_num(d, "gen", "generation"), 1);
	sleep_ms(300);   /* the group commit reaches the disk */

	/* A reexec: the same process, adopted as it is. */
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	char adopted[64];
	snprintf(adopted, sizeof adopted, "adopted: pid %ld", pid);
	cr_assert(wait_says(d, 20, adopted, "history gen"), "reexec: pid %ld not adopted", pid);
	cr_assert_eq(status_num(d, "gen", "pid"), pid);
	cr_assert_eq(status_num(d, "gen", "generation"), 1, "adopted at its own generation");
	cr_assert_not(says(d, "left by a previous tankd", "history gen"));

	/* A kill -9: the keeper's next tankd adopts it again. */
	sleep_ms(300);
	cr_assert_eq(kill(old, SIGKILL), 0);
	pid_t now = wait_new_tankd(d, old, 20);
	cr_assert_gt(now, 0, "the keeper did not start a new tankd");
	for (int i = 0; i < 200; i++) {
		cr_assert_eq(ctl(d, out, sizeof out, "history gen"), 0, "%s", out);
		char *first = strstr(out, adopted);
		if (first && strstr(first + 1, adopted))
			break;
		sleep_ms(50);
	}
	{
		char *first = strstr(out, adopted);
		cr_assert(first && strstr(first + 1, adopted), "kill -9: not adopted again: %s",
			  out);
	}
	cr_assert_eq(status_num(d, "gen", "pid"), pid);
	cr_assert_eq(status_num(d, "gen", "generation"), 1);
	cr_assert(ts_alive((pid_t)pid));
	cr_assert_not(says(d, "left by a previous tankd", "history gen"));

	/* Then the usual rule: once v1 ends, v2 runs in its place. */
	write_file(d, "go", "");
	for (int i = 0; i < 400 && status_num(d, "gen", "generation") != 2; i++)
		sleep_ms(50);
	cr_assert(wait_phase(d, "gen", "running", 20));
	cr_assert_eq(status_num(d, "gen", "generation"), 2);
	long pid2 = status_num(d, "gen", "pid");
	cr_assert_gt(pid2, 0);
	cr_assert_neq(pid2, pid, "v2 runs in a new process");
	cr_assert(wait_says(d, 10, "v2", "logs gen --tail 5"));
	/* v1's last words, written after the adoption, are in its log. */
	cr_assert(says(d, "v1-end", "logs gen --tail -1"));
	teardown(d);
}

/* The keeper forgets an exit only once tankd has STORED it: tankd killed
 * -9 after it heard of the exit but before its group commit loses
 * nothing.  The group commit is stretched to 30 s (TANK_GROUP_COMMIT_MS)
 * so that the kill -9 lands in that window every time: before the ack
 * came after the commit, the keeper had forgotten the exit by then and
 * the next tankd reported the pod "not run again, exit status unknown". */
Test(adopt, an_exit_heard_but_not_yet_stored_survives_a_kill_9)
{
	setenv("TANK_GROUP_COMMIT_MS", "30000", 1);
	d_t *d = setup_keeper();
	unsetenv("TANK_GROUP_COMMIT_MS");
	char out[8192], m[512];
	pid_t old = serving(d, NULL);

	snprintf(m, sizeof m,
		 "name: seven\nrestart: never\ncontainers:\n  - name: s\n"
		 "    command: [/bin/sh, -c, 'while [ ! -e %s/go ]; do sleep 0.05; done; "
		 "echo gone; exit 7']\n", d->dir);
	write_file(d, "seven.yaml", m);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/seven.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "seven", "running", 20));
	long pid = status_num(d, "seven", "pid");
	/* A reexec commits what is queued (its pid), then a kill -9 makes the
	 * container the keeper's child: its exit is the keeper's to reap. */
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	cr_assert(wait_phase(d, "seven", "running", 20));
	cr_assert_eq(kill(old, SIGKILL), 0);
	pid_t now = wait_new_tankd(d, old, 20);
	cr_assert_gt(now, 0);
	cr_assert(wait_says(d, 20, "adopted", "history seven"));
	cr_assert_eq(status_num(d, "seven", "pid"), pid);

	/* It ends; tankd hears of it (its status says so) and dies at once,
	 * well inside the 30 s before its group commit. */
	write_file(d, "go", "");
	cr_assert(wait_says(d, 20, "\"code\": 7", "status seven -o json"));
	cr_assert_eq(kill(now, SIGKILL), 0);
	pid_t next = wait_new_tankd(d, now, 20);
	cr_assert_gt(next, 0);
	cr_assert(wait_phase(d, "seven", "terminal", 20));
	cr_assert(says(d, "\"code\": 7", "status seven -o json"),
		  "the exit was lost by the kill -9");
	cr_assert_not(says(d, "not run again", "history seven"));
	teardown(d);
}

/* Issue 35 item 6: a stack whose pods are adopted stays `up` through a
 * kill -9 of tankd and a reexec (never `starting`, never down), and a
 * graceful stop of tankd under its keeper still stops the pods and the
 * keeper. */
Test(adopt, a_stack_stays_up_through_kill_9_and_reexec)
{
	d_t *d = setup_keeper();
	char out[16384];
	pid_t keeper = 0, old = serving(d, &keeper);

	write_file(d, "shop.yaml",
		   "kind: Stack\nname: shop\npods:\n"
		   "  - name: db\n    containers: [{name: c, command: [/bin/sleep, '1001']}]\n"
		   "  - name: web\n    depends_on: [{pod: db}]\n"
		   "    containers: [{name: c, command: [/bin/sleep, '1002']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/shop.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "up shop --wait --timeout 30s"), 0, "%s", out);
	cr_assert(wait_says(d, 20, "\"phase\": \"up\"", "status stack shop -o json"));
	cr_assert(wait_phase(d, "web", "running", 20));
	long db = status_num(d, "db", "pid"), web = status_num(d, "web", "pid");
	sleep_ms(300);
	cr_assert_eq(ctl(d, out, sizeof out, "history stack shop"), 0, "%s", out);
	size_t hist = strlen(out);

	for (int round = 0; round < 2; round++) {
		if (round == 0) {
			cr_assert_eq(kill(old, SIGKILL), 0);
		} else {
			cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
		}
		/* Every answer meanwhile says up (none while nobody serves). */
		for (int i = 0; i < 60; i++) {
			if (ctl(d, out, sizeof out, "status stack shop -o json") == 0)
				cr_assert(strstr(out, "\"phase\": \"up\""), "round %d: %s", round,
					  out);
			sleep_ms(50);
		}
		if (round == 0)
			cr_assert_gt(wait_new_tankd(d, old, 20), 0);
		cr_assert_eq(status_num(d, "db", "pid"), db, "round %d: db restarted", round);
		cr_assert_eq(status_num(d, "web", "pid"), web, "round %d: web restarted", round);
		cr_assert_eq(ctl(d, out, sizeof out, "history stack shop"), 0, "%s", out);
		cr_assert_eq(strlen(out), hist, "round %d: the stack moved: %s", round, out);
		cr_assert_null(strstr(out, "tankd restarted"), "%s", out);
	}

	/* A graceful stop of tankd itself (not of the keeper): the pods stop,
	 * and the keeper, seeing a clean stop, exits 0 instead of restarting
	 * it. */
	pid_t cur = serving(d, NULL);
	cr_assert_gt(cur, 0);
	cr_assert_eq(kill(cur, SIGTERM), 0);
	int st = -1;
	for (int i = 0; i < 400; i++) {
		pid_t w = waitpid(keeper, &st, WNOHANG);
		if (w == keeper)
			break;
		st = -1;
		sleep_ms(50);
	}
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "keeper status %d", st);
	d->pid = 0;
	cr_assert_not(ts_alive((pid_t)db), "db outlived a graceful stop");
	cr_assert_not(ts_alive((pid_t)web), "web outlived a graceful stop");
	teardown(d);
}

/* --- running actions and workflow jobs (issues 33 item 7, 34 item 7, 35 item 4) --- */

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "2026-11-26T02:30:24.597Z" in ms since the epoch (0 when not that). */
static int64_t rfc3339_ms(const char *s)
{
	struct tm tm;
	int ms = 0;
	const char *p;

	memset(&tm, 0, sizeof tm);
	if (!(p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)))
		return 0;
	if (*p == '.')
		ms = atoi(p + 1);
	return (int64_t)timegm(&tm) * 1000 + ms;
}

/* A pod to run commands in. */
static void exec_pod(d_t *d)
{
	char out[4096];

	write_file(d, "web.yaml", "name: web\nstop: {grace: 1s}\ncontainers:\n  - name: main\n"
		   "    command: [/bin/sleep, \"3600\"]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "web", "running", 20));
}

/* `action run web exec -- /bin/sh -c SCRIPT`: its id. */
static void exec_run(d_t *d, char *id, const char *script)
{
	char out[4096];

	cr_assert_eq(ctl(d, out, sizeof out, "action run web exec -- /bin/sh -c '%s'", script), 0,
		     "%s", out);
	cr_assert_eq(sscanf(out, "action %48s", id), 1, "%s", out);
}

/* A field of `action get ID` ("  key: value" lines), into out. */
static bool act_field(d_t *d, const char *id, const char *key, char *val, size_t cap)
{
	char out[8192], pat[64], *p;

	if (ctl(d, out, sizeof out, "action get %s", id) != 0)
		return false;
	snprintf(pat, sizeof pat, "%s: ", key);
	if (!(p = strstr(out, pat)))
		return false;
	p += strlen(pat);
	size_t n = strcspn(p, "\n");
	if (n >= cap)
		n = cap - 1;
	memcpy(val, p, n);
	val[n] = '\0';
	return true;
}

static void act_assert_state(d_t *d, const char *id, const char *state, int secs)
{
	char pat[64], out[8192];

	snprintf(pat, sizeof pat, "state: %s\n", state);
	bool ok = wait_says(d, secs, pat, "action get %s", id);
	if (!ok)
		ctl(d, out, sizeof out, "action get %s", id);
	cr_assert(ok, "action %s is not %s:\n%s", id, state, ok ? "" : out);
}

/* The output file an action's record names. */
static void act_output(d_t *d, const char *id, char *text, size_t cap)
{
	char path[512];

	cr_assert(act_field(d, id, "path", path, sizeof path), "no output path");
	read_text(path, text, cap);
}

/* Waits until the action's output holds needle. */
static bool act_output_has(d_t *d, const char *id, const char *needle, int secs)
{
	char text[8192];

	for (int i = 0; i < secs * 20; i++) {
		act_output(d, id, text, sizeof text);
		if (strstr(text, needle))
			return true;
		sleep_ms(50);
	}
	return false;
}

/* Kill -9 of the serving tankd under its keeper, then the keeper's next
 * one: the exec keeps running (same pid), its output keeps going to its
 * file, its real exit (3: FAILED, as the seed's rules say) is recorded,
 * never LOST. */
Test(adopt, a_running_action_survives_a_kill9_under_the_keeper)
{
	d_t *d = setup_keeper();
	char id[64], text[8192], pid[32], pid2[32], out[8192];
	pid_t old = serving(d, NULL);

	exec_pod(d);
	exec_run(d, id, "echo first-line; /bin/sleep 2; echo second-line; exit 3");
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert(act_output_has(d, id, "first-line", 10), "no first line");
	cr_assert(act_field(d, id, "pid", pid, sizeof pid));
	sleep_ms(200);                  /* its pid is committed */
	cr_assert_eq(kill(old, SIGKILL), 0);
	pid_t now = wait_new_tankd(d, old, 20);
	cr_assert_gt(now, 0, "the keeper did not start a new tankd");
	act_assert_state(d, id, "FAILED", 20);
	cr_assert(says(d, "exit: 3", "action get %s", id));
	cr_assert(act_field(d, id, "pid", pid2, sizeof pid2));
	cr_assert_str_eq(pid, pid2, "the same process, not run again");
	act_output(d, id, text, sizeof text);
	cr_assert(strstr(text, "first-line\n") && strstr(text, "second-line\n"),
		  "both lines in its output:\n%s", text);
	cr_assert_eq(ctl(d, out, sizeof out, "history action %s", id), 0, "%s", out);
	cr_assert_null(strstr(out, "LOST"), "never LOST:\n%s", out);
	cr_assert(says(d, "adopted    ", "daemon status"));
	/* Its exit, reaped by the keeper, is acked once stored. */
	cr_assert(wait_says(d, 10, ", 0 exits", "daemon status"),
		  "the keeper still holds the action's exit");
	teardown(d);
}

/* The same through `tankctl daemon reexec` (no keeper needed: the same
 * pid, the exec still its child, the pipe handed over). */
Test(adopt, a_running_action_survives_a_reexec)
{
	d_t *d = setup();
	char id[64], text[8192], out[8192];

	exec_pod(d);
	exec_run(d, id, "echo first-line; /bin/sleep 2; echo second-line; exit 3");
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert(act_output_has(d, id, "first-line", 10), "no first line");
	sleep_ms(200);
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	cr_assert(wait_says(d, 20, "reexecs    1", "daemon status"), "no reexec");
	act_assert_state(d, id, "FAILED", 20);
	cr_assert(says(d, "exit: 3", "action get %s", id));
	act_output(d, id, text, sizeof text);
	cr_assert(strstr(text, "first-line\n") && strstr(text, "second-line\n"),
		  "both lines in its output:\n%s", text);
	cr_assert_eq(ctl(d, out, sizeof out, "history action %s", id), 0, "%s", out);
	cr_assert_null(strstr(out, "LOST"), "never LOST:\n%s", out);
	teardown(d);
}

/* A command that ends while no tankd runs: the keeper reaped it, its
 * real exit and time are recorded, and what it wrote in the gap (it
 * waited in the pipe the keeper held) is in its output. */
Test(adopt, an_action_that_ends_in_the_gap_keeps_its_real_exit_and_output)
{
	d_t *d = setup_keeper();
	char id[64], text[8192], pid[32], script[512], ended[64];
	pid_t keeper = 0, old = serving(d, &keeper);

	exec_pod(d);
	snprintf(script, sizeof script, "echo first-line; while [ ! -e %s/go ]; do /bin/sleep "
		 "0.05; done; echo gap-line; exit 3", d->dir);
	exec_run(d, id, script);
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert(act_output_has(d, id, "first-line", 10), "no first line");
	cr_assert(act_field(d, id, "pid", pid, sizeof pid));
	sleep_ms(200);
	cr_assert_eq(kill(keeper, SIGSTOP), 0);
	cr_assert_eq(kill(old, SIGKILL), 0);
	write_file(d, "go", "");
	for (int i = 0; i < 200 && !dead((pid_t)atol(pid)); i++)
		sleep_ms(20);
	cr_assert(dead((pid_t)atol(pid)), "the command did not end in the gap");
	int64_t died = wall_ms();
	sleep_ms(500);
	cr_assert_eq(kill(keeper, SIGCONT), 0);    /* it reaps the command now */
	cr_assert_gt(wait_new_tankd(d, old, 20), 0, "no new tankd");
	int64_t back = wall_ms();
	act_assert_state(d, id, "FAILED", 20);
	cr_assert(says(d, "exit: 3", "action get %s", id));
	act_output(d, id, text, sizeof text);
	cr_assert(strstr(text, "first-line\n") && strstr(text, "gap-line\n"),
		  "the gap's line in its output:\n%s", text);
	/* Its time is the end's, not the new tankd's look at it. */
	cr_assert(act_field(d, id, "ended_at", ended, sizeof ended));
	int64_t at = rfc3339_ms(ended);
	/* (the keeper, held still, reaped it once continued: before the
	 * new tankd came, not when that one looked) */
	cr_assert(at > died - 1000 && at < back, "ended_at %s is not when it ended "
		  "(%lld ms after it died, %lld ms before the new tankd)", ended,
		  (long long)(at - died), (long long)(back - at));
	char hist[8192];
	cr_assert_eq(ctl(d, hist, sizeof hist, "history action %s -o json", id), 0, "%s", hist);
	cr_assert_null(strstr(hist, "LOST"), "never LOST:\n%s", hist);
	teardown(d);
}

/* Cancel of an adopted running action stops its process. */
Test(adopt, an_adopted_action_can_be_cancelled)
{
	d_t *d = setup_keeper();
	char id[64], pid[32], out[4096];
	pid_t old = serving(d, NULL);

	exec_pod(d);
	exec_run(d, id, "echo started; exec /bin/sleep 300");
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert(act_output_has(d, id, "started", 10));
	cr_assert(act_field(d, id, "pid", pid, sizeof pid));
	sleep_ms(200);
	cr_assert_eq(kill(old, SIGKILL), 0);
	cr_assert_gt(wait_new_tankd(d, old, 20), 0, "no new tankd");
	/* Adopted: still RUNNING, the same process alive. */
	cr_assert(wait_says(d, 10, "adopted    ", "daemon status"));
	sleep_ms(500);
	act_assert_state(d, id, "RUNNING", 1);
	cr_assert(ts_alive((pid_t)atol(pid)), "the command died with tankd");
	cr_assert_eq(ctl(d, out, sizeof out, "action cancel %s", id), 0, "%s", out);
	act_assert_state(d, id, "CANCELLED", 20);
	for (int i = 0; i < 200 && !dead((pid_t)atol(pid)); i++)
		sleep_ms(20);
	cr_assert(dead((pid_t)atol(pid)), "cancel did not stop the adopted process");
	teardown(d);
}

/* An exec whose process started but whose pid was not committed yet
 * when tankd was killed -9 under its keeper: the next tankd cannot know
 * the process is its (the action is LOST, never run again), so nobody
 * may keep it running either.  The group commit is stretched to 30 s
 * (TANK_GROUP_COMMIT_MS) to put the kill -9 in that window every time;
 * a reexec first commits the pod's own pid, so that the pod is adopted
 * (not restarted, which would end the command with its cgroup).  Before,
 * the action said "its process was never started" while its command
 * went on running unwatched, for ever: no timeout, no cancel (LOST is
 * final), its output pipe closed. */
Test(adopt, an_exec_whose_pid_was_not_stored_is_lost_and_its_process_stopped)
{
	setenv("TANK_GROUP_COMMIT_MS", "30000", 1);
	d_t *d = setup_keeper();
	unsetenv("TANK_GROUP_COMMIT_MS");
	char id[64], pid[32], out[8192];

	exec_pod(d);
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	cr_assert(wait_says(d, 20, "reexecs    1", "daemon status"), "no reexec");
	pid_t old = serving(d, NULL);
	exec_run(d, id, "echo started; exec /bin/sleep 300");
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert(act_output_has(d, id, "started", 10));
	cr_assert(act_field(d, id, "pid", pid, sizeof pid));
	pid_t cmd = (pid_t)atol(pid);
	cr_assert_gt(cmd, 0);
	cr_assert_eq(kill(old, SIGKILL), 0);
	cr_assert_gt(wait_new_tankd(d, old, 20), 0, "no new tankd");
	act_assert_state(d, id, "LOST", 20);
	cr_assert_not(says(d, "never started", "action get %s", id),
		      "its process did start");
	cr_assert(wait_says(d, 20, "adopted    ", "daemon status"), "the pod was not adopted");
	/* The pods' layer gives up on what nobody claimed at its third
	 * pass (a resync; nudged here, as --resync is 300 s). */
	for (int i = 0; i < 100 && !dead(cmd); i++) {
		ctl(d, out, sizeof out, "nudge");
		sleep_ms(200);
	}
	cr_assert(dead(cmd), "the LOST action's command %d still runs, unwatched", (int)cmd);
	cr_assert(says(d, "pid was not stored yet", "action get %s", id));
	teardown(d);
}

/* /proc/PID/stat's state is Z: ended, not reaped yet. */
static bool zombie(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return false;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return (p = strrchr(buf, ')')) && p[1] == ' ' && p[2] == 'Z';
}

/* Holds pid a zombie across a `daemon reexec`: traces it (PTRACE_SEIZE),
 * so tankd, its parent, cannot reap it until the test, its tracer, has;
 * waits until it has ended, re-executes tankd and gives the new image a
 * second to look at it.  The caller checks what it made of it, then
 * reap_traced lets tankd hear of the exit. */
static void reexec_holding_zombie(d_t *d, pid_t pid)
{
	char out[4096];

	cr_assert_eq(ptrace(PTRACE_SEIZE, pid, NULL, NULL), 0, "seize %d: %s", (int)pid,
		     strerror(errno));
	for (int i = 0; i < 1000 && !zombie(pid); i++)
		sleep_ms(20);
	cr_assert(zombie(pid), "pid %d did not end", (int)pid);
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	cr_assert(wait_says(d, 20, "reexecs    1", "daemon status"), "no reexec");
	sleep_ms(1000);
}

/* The tracer reaps it first; then tankd, its parent, hears its exit. */
static void reap_traced(pid_t pid)
{
	int st;
	cr_assert_eq(waitpid(pid, &st, __WALL), pid);
}

/* A command that ended just before a reexec's new image looked at it,
 * not reaped yet (a zombie: out of its container's cgroup.procs, its pid
 * and start time still its own), is taken over and ends by its real
 * exit (held a zombie by reexec_holding_zombie).  Before, the new image
 * found it "not in container web/main's group" and made the action LOST,
 * its exit known and dropped (1 in about 150 execs ending around a
 * reexec at 150 pods). */
Test(adopt, an_exec_that_ended_unreaped_at_a_reexec_keeps_its_real_exit)
{
	d_t *d = setup();
	char id[64], pid[32], script[128], out[8192];

	exec_pod(d);
	/* No child and no signal of its own: a tracee stops at every
	 * signal it gets (a shell's SIGCHLD) until its tracer resumes it. */
	snprintf(script, sizeof script, "exec /bin/sleep 4");
	exec_run(d, id, script);
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert(act_field(d, id, "pid", pid, sizeof pid));
	pid_t cmd = (pid_t)atol(pid);
	sleep_ms(200);                  /* its pid is committed */
	reexec_holding_zombie(d, cmd);
	/* The new image has looked at it (its adoption is asked at its
	 * start): still RUNNING, never LOST. */
	act_assert_state(d, id, "RUNNING", 1);
	reap_traced(cmd);
	act_assert_state(d, id, "DONE", 20);
	cr_assert(says(d, "exit: 0", "action get %s", id));
	cr_assert_eq(ctl(d, out, sizeof out, "history action %s", id), 0, "%s", out);
	cr_assert_null(strstr(out, "LOST"), "never LOST:\n%s", out);
	teardown(d);
}

/* A `restart: never` container that ended just before a reexec and is
 * not reaped yet (held by a tracer here, as a zombie is in the moments
 * before its parent's reap): the new image adopts it and records its
 * real exit.  Before, a zombie is in no cgroup, so its adoption took it
 * for a stranger, stopped it as a leftover and started the container
 * afresh: a run-once pod ran twice (bench/scale/s25_kill_during_reexec.sh:
 * 1 to 157 of 300 a run). */
Test(adopt, a_container_ended_unreaped_at_a_reexec_is_not_started_again)
{
	d_t *d = setup();
	char out[4096];

	write_file(d, "z.yaml", "name: z\nrestart: never\ncontainers:\n  - name: c\n"
		   "    command: [/bin/sleep, \"3\"]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/z.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "z", "running", 20));
	pid_t pid = (pid_t)status_num(d, "z", "pid");
	cr_assert_gt(pid, 0);
	reexec_holding_zombie(d, pid);
	reap_traced(pid);
	cr_assert(wait_phase(d, "z", "terminal", 20));
	cr_assert(says(d, "\"code\": 0", "status z -o json"));
	cr_assert_eq(ctl(d, out, sizeof out, "history z"), 0, "%s", out);
	cr_assert_null(strstr(out, "unknown"), "its exit is known:\n%s", out);
	/* started once: by the first image, adopted by the second */
	int starts = 0;
	for (const char *at = out; (at = strstr(at, " started\n")); at++)
		starts++;
	cr_assert_eq(starts, 1, "started again:\n%s", out);
	teardown(d);
}

/* A cancel answered "cancelling" (the command ignores SIGTERM: its
 * SIGKILL is 2 s away) and then a kill -9 of tankd under its keeper, or
 * a reexec, before the command ended: the next tankd adopts the command
 * and cancels it again; the action ends CANCELLED, the command stopped.
 * Before, the pending cancel lived in the dead tankd's memory only: the
 * adopted command ran to its end and the action was DONE. */
static void cancel_across(bool reexec)
{
	d_t *d = reexec ? setup() : setup_keeper();
	char id[64], pid[32], out[4096], text[8192];
	pid_t old = serving(d, NULL);

	exec_pod(d);
	exec_run(d, id, "trap \"\" TERM; echo started; /bin/sleep 30; echo finished");
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert(act_output_has(d, id, "started", 10));
	cr_assert(act_field(d, id, "pid", pid, sizeof pid));
	sleep_ms(200);                  /* its pid is committed */
	cr_assert_eq(ctl(d, out, sizeof out, "action cancel %s", id), 0, "%s", out);
	cr_assert(strstr(out, "cancelling"), "%s", out);
	if (reexec) {
		cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	} else {
		cr_assert_eq(kill(old, SIGKILL), 0);
		cr_assert_gt(wait_new_tankd(d, old, 20), 0, "no new tankd");
	}
	act_assert_state(d, id, "CANCELLED", 20);
	for (int i = 0; i < 250 && !dead((pid_t)atol(pid)); i++)
		sleep_ms(20);
	cr_assert(dead((pid_t)atol(pid)), "the cancelled command still runs");
	act_output(d, id, text, sizeof text);
	cr_assert_null(strstr(text, "finished"), "it ran to its end:\n%s", text);
	teardown(d);
}

Test(adopt, a_pending_cancel_survives_a_kill9_under_the_keeper)
{
	cancel_across(false);
}

Test(adopt, a_pending_cancel_survives_a_reexec)
{
	cancel_across(true);
}

/* A workflow job running at a kill -9 under the keeper (or a reexec):
 * its process goes on, the job ends finished, the workflow goes on to the
 * next task, and no new job is made for the task that ran. */
static void job_across(bool reexec)
{
	d_t *d = reexec ? setup() : setup_keeper();
	char y[2048], out[8192], path[256], text[4096];
	pid_t old = serving(d, NULL);

	snprintf(y, sizeof y,
		 "kind: Task\nname: long\ntemplates:\n"
		 "  - name: s\n    contents: |\n"
		 "      echo run >> %s/long.log\n"
		 "      echo job-first\n"
		 "      /bin/sleep 2\n"
		 "      echo job-second\n"
		 "---\nkind: Task\nname: after\ntemplates:\n"
		 "  - name: s\n    contents: echo ran >> %s/after.log\n"
		 "---\nkind: Stage\nname: one\ntasks: [long, after]\n"
		 "---\nkind: Workflow\nname: w\nstages: [one]\n"
		 "---\nname: web\nworkflow: w\ncontainers:\n  - name: app\n"
		 "    command: [/bin/sleep, \"3600\"]\n",
		 d->dir, d->dir);
	write_file(d, "wf.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/wf.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 20, "state: running", "status job web/2"));
	snprintf(path, sizeof path, "%s/long.log", d->dir);
	for (int i = 0; i < 100; i++) {
		read_text(path, text, sizeof text);
		if (strstr(text, "run"))
			break;
		sleep_ms(50);
	}
	sleep_ms(300);                  /* the job's pid committed */
	if (reexec) {
		cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
		cr_assert(wait_says(d, 20, "reexecs    1", "daemon status"), "no reexec");
	} else {
		cr_assert_eq(kill(old, SIGKILL), 0);
		cr_assert_gt(wait_new_tankd(d, old, 20), 0, "no new tankd");
	}
	cr_assert(wait_says(d, 20, "state: finished", "status job web/2"),
		  "the adopted job did not finish");
	cr_assert(wait_says(d, 20, "state: finished", "status job web/3"), "the next task");
	snprintf(path, sizeof path, "%s/after.log", d->dir);
	read_text(path, text, sizeof text);
	cr_assert_str_eq(text, "ran\n");
	snprintf(path, sizeof path, "%s/long.log", d->dir);
	read_text(path, text, sizeof text);
	cr_assert_str_eq(text, "run\n", "the task ran once, not again");
	cr_assert_neq(ctl(d, out, sizeof out, "status job web/4"), 0,
		      "no job beyond the two tasks' (and the stage's):\n%s", out);
	cr_assert(says(d, "job-second", "job log web/2"),
		  "the job's output after the gap is in its log");
	/* The keeper reaped the adopted part's process: the agent acks its
	 * exit once the job's record is committed, so the keeper holds it
	 * no longer (before, it held it until the next tankd). */
	if (!reexec)
		cr_assert(wait_says(d, 10, ", 0 exits", "daemon status"),
			  "the keeper still holds the adopted job's exit");
	teardown(d);
}

Test(adopt, a_running_workflow_job_survives_a_kill9_under_the_keeper)
{
	job_across(false);
}

Test(adopt, a_running_workflow_job_survives_a_reexec)
{
	job_across(true);
}

/* An adopted command's timeout counts from its start, not from the
 * adoption: killed at 3 s of its own life although tankd died at 1.5 s. */
Test(adopt, an_adopted_action_keeps_its_timeout_from_its_start)
{
	d_t *d = setup_keeper();
	char id[64], out[4096], started[64], ended[64];
	pid_t old = serving(d, NULL);

	exec_pod(d);
	cr_assert_eq(ctl(d, out, sizeof out, "action run web exec timeout=3s -- /bin/sh -c "
			 "'echo t; exec /bin/sleep 300'"), 0, "%s", out);
	cr_assert_eq(sscanf(out, "action %48s", id), 1, "%s", out);
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert(act_output_has(d, id, "t", 10));
	sleep_ms(1500);
	cr_assert_eq(kill(old, SIGKILL), 0);
	cr_assert_gt(wait_new_tankd(d, old, 20), 0, "no new tankd");
	act_assert_state(d, id, "FAILED", 20);
	cr_assert(says(d, "timeout", "action get %s", id), "killed at its timeout");
	cr_assert(act_field(d, id, "started_at", started, sizeof started));
	cr_assert(act_field(d, id, "ended_at", ended, sizeof ended));
	int64_t ran = rfc3339_ms(ended) - rfc3339_ms(started);
	cr_assert(ran >= 2900 && ran < 4300, "ran %lld ms, not its 3 s timeout", (long long)ran);
	teardown(d);
}

/* Descriptors of pid that are pidfds. */
static int count_pidfds(pid_t pid)
{
	char path[64], link[400], target[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	if (!(dir = opendir(path)))
		return -1;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof link, "%s/%s", path, e->d_name);
		ssize_t r = readlink(link, target, sizeof target - 1);
		if (r > 0) {
			target[r] = '\0';
			n += strstr(target, "pidfd") != NULL;
		}
	}
	closedir(dir);
	return n;
}

/* Gone for good: no /proc entry (a zombie still has one). */
static bool reaped(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	return access(path, F_OK) < 0;
}

/* The keeper killed -9 while processes it reaps for tankd run (adopted
 * after a kill -9 of tankd, so the keeper's children): they are
 * re-parented to a subreaper above (here the test runner's) or init, so
 * neither tankd nor a next keeper can wait(2) for them.  tankd follows
 * each one with a pidfd from the keeper's loss, and records its end when
 * it comes, its status unknown: a container restarts by its policy (an
 * `always` one runs again, a `never` one is failed with the reason), an
 * action is LOST with the reason.  Nothing is left: no zombie, no pidfd,
 * the descriptors back to their count; a graceful stop of tankd then
 * still stops the orphan still running. */
static void keeper_killed(bool fallback)
{
	if (fallback)
		setenv("TANK_NO_PIDFD", "1", 1);
	d_t *d = setup_keeper();
	unsetenv("TANK_NO_PIDFD");
	int want = fallback ? 0 : 4;   /* pidfds: none in the /proc fallback */
	char out[16384], y[2048], id[64], pid[32], script[512];
	pid_t keeper = 0, old = serving(d, &keeper);

	snprintf(y, sizeof y,
		 "name: again\nrestart: always\ncontainers:\n  - name: c\n"
		 "    command: [/bin/sh, -c, 'echo up; while [ ! -e %s/go1 ]; do sleep 0.05; "
		 "done; rm -f %s/go1; exit 3']\n---\n"
		 "name: once\nrestart: never\ncontainers:\n  - name: c\n"
		 "    command: [/bin/sh, -c, 'while [ ! -e %s/go2 ]; do sleep 0.05; done; "
		 "exit 0']\n", d->dir, d->dir, d->dir);
	write_file(d, "pods.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/pods.yaml", d->dir), 0, "%s", out);
	exec_pod(d);
	cr_assert(wait_phase(d, "again", "running", 20));
	cr_assert(wait_phase(d, "once", "running", 20));
	long again = status_num(d, "again", "pid"), once = status_num(d, "once", "pid");
	long web = status_num(d, "web", "pid");
	snprintf(script, sizeof script, "echo first-line; while [ ! -e %s/go3 ]; do "
		 "/bin/sleep 0.05; done; exit 0", d->dir);
	exec_run(d, id, script);
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert(act_output_has(d, id, "first-line", 10), "no first line");
	cr_assert(act_field(d, id, "pid", pid, sizeof pid));
	long act = atol(pid);
	sleep_ms(300);                  /* the group commit reaches the disk */

	/* A kill -9 of tankd: everything is adopted, the keeper's children. */
	cr_assert_eq(kill(old, SIGKILL), 0);
	pid_t now = wait_new_tankd(d, old, 20);
	cr_assert_gt(now, 0, "the keeper did not start a new tankd");
	cr_assert(wait_says(d, 20, "adopted    4", "daemon status"), "not all adopted");
	cr_assert_eq(status_num(d, "again", "pid"), again);
	cr_assert_eq(status_num(d, "once", "pid"), once);
	act_assert_state(d, id, "RUNNING", 1);
	cr_assert_eq(count_pidfds(now), 0, "pidfds while a keeper reaps");

	/* The keeper killed -9: tankd runs on, keeper-less, and follows the
	 * four processes with pidfds. */
	cr_assert_eq(kill(keeper, SIGKILL), 0);
	cr_assert_eq(waitpid(keeper, NULL, 0), keeper);
	d->pid = 0;
	cr_assert(wait_says(d, 10, "keeper     none", "daemon status"),
		  "tankd did not notice its keeper's end");
	for (int i = 0; i < 100 && count_pidfds(now) != want; i++)
		sleep_ms(50);
	cr_assert_eq(count_pidfds(now), want, "one pidfd per adopted process");
	if (fallback) {
		static char log[1 << 16];
		char lp[160];
		snprintf(lp, sizeof lp, "%s/tankd.log", d->dir);
		read_text(lp, log, sizeof log);
		cr_assert(strstr(log, "looked at in /proc once a second"),
			  "the fallback's reason is not logged:\n%s", log);
	}
	/* A reexec now (no keeper: nothing may take the stale keeper fd
	 * number for one) hands them over as not its children: the new
	 * image follows them with pidfds again. */
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	cr_assert(wait_says(d, 20, "reexecs    1", "daemon status"), "no reexec");
	cr_assert_eq(serving(d, NULL), now);
	cr_assert(says(d, "keeper     none", "daemon status"));
	for (int i = 0; i < 100 && count_pidfds(now) != want; i++)
		sleep_ms(50);
	cr_assert_eq(count_pidfds(now), want, "one pidfd per adopted process after the reexec");
	act_assert_state(d, id, "RUNNING", 10);
	cr_assert_eq(status_num(d, "again", "pid"), again);
	cr_assert_eq(status_num(d, "once", "pid"), once);
	sleep_ms(300);
	int fds = count_fds(now);

	/* They end now, with nobody to wait(2) for them but the subreaper. */
	write_file(d, "go1", "");
	write_file(d, "go2", "");
	write_file(d, "go3", "");
	cr_assert(wait_says(d, 20, "ended while no keeper held its status", "history again"),
		  "again's end was not recorded");
	cr_assert(wait_phase(d, "again", "running", 20), "again did not run again");
	for (int i = 0; i < 200 && status_num(d, "again", "pid") == again; i++)
		sleep_ms(50);
	cr_assert_neq(status_num(d, "again", "pid"), again, "again was not restarted");
	cr_assert_eq(status_num(d, "again", "restarts"), 1);
	cr_assert(wait_phase(d, "once", "terminal", 20), "once's end was not recorded");
	cr_assert(says(d, "ended while no keeper held its status", "history once"));
	cr_assert(says(d, "\"outcome\": \"failed\"", "status once -o json"),
		  "a never pod whose end is unknown is failed");
	act_assert_state(d, id, "LOST", 20);
	cr_assert(says(d, "ended while no keeper held its status", "action get %s", id));

	/* Nothing left: no zombie, no pidfd but web's (still running), the
	 * descriptors back to their count (the three pidfds gone; again's
	 * new pipes take its old ones' place). */
	for (int i = 0; i < 200 && !(reaped((pid_t)again) && reaped((pid_t)once) &&
				     reaped((pid_t)act)); i++)
		sleep_ms(20);
	cr_assert(reaped((pid_t)again) && reaped((pid_t)once) && reaped((pid_t)act),
		  "an ended process is left (a zombie?)");
	for (int i = 0; i < 100 && count_pidfds(now) != want / 4; i++)
		sleep_ms(50);
	cr_assert_eq(count_pidfds(now), want / 4, "web's pidfd only");
	for (int i = 0; i < 100 && count_fds(now) > fds - want * 3 / 4; i++)
		sleep_ms(50);
	cr_assert_leq(count_fds(now), fds - want * 3 / 4, "fds %d -> %d", fds, count_fds(now));

	/* A graceful stop of tankd stops the orphan too. */
	cr_assert(ts_alive((pid_t)web));
	cr_assert_eq(kill(now, SIGTERM), 0);
	for (int i = 0; i < 400 && !reaped(now); i++)
		sleep_ms(50);
	cr_assert(reaped(now), "tankd did not stop");
	for (int i = 0; i < 100 && !reaped((pid_t)web); i++)
		sleep_ms(50);
	cr_assert(reaped((pid_t)web), "web's container outlived tankd's graceful stop");
	teardown(d);
}

Test(adopt, a_keeper_killed_9_leaves_no_adopted_end_unrecorded)
{
	keeper_killed(false);
}

/* The same without pidfds (a kernel before 5.3): /proc once a second. */
Test(adopt, a_keeper_killed_9_without_pidfds_polls_proc)
{
	keeper_killed(true);
}

/* A workflow job adopted after a kill -9 of tankd, whose keeper is then
 * killed -9: its template ends with nobody to wait(2) for it, and the job
 * is failed with the reason (its exit unknown). */
Test(adopt, a_job_adopted_then_left_by_its_keeper_is_failed_with_the_reason)
{
	d_t *d = setup_keeper();
	char y[2048], out[8192];
	pid_t keeper = 0, old = serving(d, &keeper);

	snprintf(y, sizeof y,
		 "kind: Task\nname: long\ntemplates:\n"
		 "  - name: s\n    contents: |\n"
		 "      echo job-first\n"
		 "      while [ ! -e %s/go ]; do /bin/sleep 0.05; done\n"
		 "      exit 0\n"
		 "---\nkind: Stage\nname: one\ntasks: [long]\n"
		 "---\nkind: Workflow\nname: w\nstages: [one]\n"
		 "---\nname: web\nworkflow: w\ncontainers:\n  - name: app\n"
		 "    command: [/bin/sleep, \"3600\"]\n", d->dir);
	write_file(d, "wf.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/wf.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 20, "state: running", "status job web/2"));
	cr_assert(wait_says(d, 20, "job-first", "job log web/2"));
	sleep_ms(300);                  /* the job's pid committed */
	cr_assert_eq(kill(old, SIGKILL), 0);
	pid_t now = wait_new_tankd(d, old, 20);
	cr_assert_gt(now, 0, "no new tankd");
	cr_assert(wait_says(d, 20, "adopted    2", "daemon status"), "the job was not adopted");
	cr_assert(says(d, "state: running", "status job web/2"));

	cr_assert_eq(kill(keeper, SIGKILL), 0);
	cr_assert_eq(waitpid(keeper, NULL, 0), keeper);
	d->pid = 0;
	cr_assert(wait_says(d, 10, "keeper     none", "daemon status"));
	for (int i = 0; i < 100 && count_pidfds(now) != 2; i++)
		sleep_ms(50);
	cr_assert_eq(count_pidfds(now), 2, "the container's and the job's pidfds");
	write_file(d, "go", "");
	cr_assert(wait_says(d, 20, "state: failed", "status job web/2"),
		  "the job's end was not recorded");
	cr_assert(says(d, "ended while no keeper held its status", "status job web/2"));
	for (int i = 0; i < 100 && count_pidfds(now) != 1; i++)
		sleep_ms(50);
	cr_assert_eq(count_pidfds(now), 1, "the job's pidfd is closed");
	/* tankd is nobody's child now: stopped by hand (the test's cleanup
	 * would too). */
	cr_assert_eq(kill(now, SIGTERM), 0);
	for (int i = 0; i < 400 && !reaped(now); i++)
		sleep_ms(50);
	teardown(d);
}

/* Asserts that every object's entries in NAME's history chain: each
 * FROM is the previous TO of the same OBJECT (docs/store.md). */
static void expect_chained(d_t *d, const char *name)
{
	static char out[1 << 16];
	char objs[8][96], tos[8][32];
	int nobj = 0;

	cr_assert_eq(ctl(d, out, sizeof out, "history %s", name), 0, "%s", out);
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		char at[64], obj[96], from[32], to[32];
		if (sscanf(line, "%63s %95s %31s %31s", at, obj, from, to) != 4 ||
		    strcmp(at, "AT") == 0)
			continue;
		int i = 0;
		while (i < nobj && strcmp(objs[i], obj))
			i++;
		if (i == nobj) {
			cr_assert_lt(nobj, 8);
			snprintf(objs[nobj++], sizeof objs[0], "%s", obj);
		} else {
			cr_assert_str_eq(from, tos[i], "%s: from %s, its last entry went to %s:\n%s",
					 obj, from, tos[i], line);
		}
		snprintf(tos[i], sizeof tos[0], "%s", to);
	}
	cr_assert_gt(nobj, 0);
}

/* A container's history chains across a restart of tankd: the next
 * tankd's first entry for it starts from the phase the stored status
 * had, not from pending (before: `running -> stopping (stop)`, then
 * `pending -> running (started)`; and under the keeper `pending ->
 * running (started)` then `pending -> running (adopted …)`; seen at
 * 5,000 pods, docs/bench.md issue 38 round 11).  Three ways: a kill -9
 * under the keeper (adopted), a reexec (adopted), a kill -9 without one
 * (the process stopped and started again), and a kill -9 in the middle
 * of a graceful stop (a process ignoring SIGTERM still stopping). */
Test(adopt, a_containers_history_chains_across_restarts_of_tankd)
{
	d_t *d = setup_keeper();
	char out[8192];
	pid_t old = serving(d, NULL);

	write_file(d, "p.yaml", "name: hc\ncontainers: [{name: c, command: [/bin/sleep, \"1000\"]}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/p.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "hc", "running", 20));
	sleep_ms(300);   /* the group commit */
	cr_assert_eq(kill(old, SIGKILL), 0);
	pid_t now = wait_new_tankd(d, old, 30);
	cr_assert_gt(now, 0);
	cr_assert(wait_says(d, 20, "adopted", "history hc"));
	expect_chained(d, "hc");
	cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	for (int i = 0; i < 100 && ctl(d, out, sizeof out, "ping") != 0; i++)
		sleep_ms(50);
	cr_assert(wait_phase(d, "hc", "running", 20));
	expect_chained(d, "hc");
	teardown(d);

	/* Without a keeper: the process left is stopped, then started again. */
	d = setup();
	write_file(d, "p.yaml", "name: hc\nstop: {grace: 10s}\ncontainers: [{name: c, command: "
		   "[/bin/sh, -c, \"trap '' TERM; while :; do sleep 1; done\"]}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/p.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "hc", "running", 20));
	sleep_ms(300);
	cr_assert_eq(kill(d->pid, SIGKILL), 0);
	waitpid(d->pid, NULL, 0);
	start(d);
	cr_assert(wait_says(d, 30, "started", "history hc"));
	cr_assert(wait_phase(d, "hc", "running", 30));
	expect_chained(d, "hc");
	/* Killed -9 while its graceful stop waits for the container, which
	 * ignores SIGTERM: its stored phase is stopping. */
	cr_assert_eq(kill(d->pid, SIGTERM), 0);
	sleep_ms(500);
	cr_assert_eq(kill(d->pid, SIGKILL), 0);
	waitpid(d->pid, NULL, 0);
	start(d);
	cr_assert(wait_phase(d, "hc", "running", 30));
	expect_chained(d, "hc");
	teardown(d);
}
