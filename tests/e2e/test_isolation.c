/*
 * End to end, isolated pods (issue 40): a sandbox init (PID 1 of a pod's
 * pid namespace) outlives a tankd killed with SIGKILL, so it must be where
 * the next tankd's sweep looks, in tank's cgroups, and be stopped there;
 * and its name must say which pod it serves, not read as a second tankd.
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
#include <sys/wait.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

#define NPODS 3

/* Whether this process may make pid, uts and ipc namespaces (a child
 * tries, so nothing here changes). */
static bool namespaces_work(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0)
		_exit(unshare(CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC) == 0 ? 0 : 1);
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

static ssize_t read_all(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* The group of pid in the tracking hierarchy: v1's pids line, else v2's
 * "0::" line; "" when unknown. */
static void cgroup_of(pid_t pid, char *out, size_t cap)
{
	char path[64], buf[4096], *line, *save = NULL;

	out[0] = '\0';
	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
	if (read_all(path, buf, sizeof buf) < 0)
		return;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *p = strstr(line, ":pids:");
		if (p) {
			snprintf(out, cap, "%s", p + 6);
			return;
		}
		if (strncmp(line, "0::", 3) == 0)
			snprintf(out, cap, "%s", line + 3);
	}
}

typedef struct tank_procs {
	int n;                    /* processes of tank's found, tankd aside */
	int sandboxes;            /* of them, sandboxes named after our pods */
	int outside;              /* of them, not in a group under root */
	char first_outside[512];
} tank_procs_t;

/* Every live process that belongs to this test's tank: a command line
 * naming its data dir (tankd, or a copy of it), a sandbox naming one of
 * its pods, or a container (sleep ARG). */
static void scan(const d_t *d, const char *const *pods, const char *arg, const char *root,
		 tank_procs_t *tp)
{
	DIR *dp = opendir("/proc");
	struct dirent *e;

	memset(tp, 0, sizeof *tp);
	cr_assert_not_null(dp);
	while ((e = readdir(dp))) {
		char path[300], cmd[1024], comm[64], grp[512];
		pid_t pid = (pid_t)atoi(e->d_name);
		ssize_t n;
		bool mine = false, sbx = false;

		if (pid <= 0 || pid == d->pid || pid == getpid())
			continue;
		snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
		if ((n = read_all(path, cmd, sizeof cmd)) <= 0)
			continue;         /* gone, or a zombie */
		/* Arguments joined by spaces; a title written over a longer
		 * argv leaves NULs at its end. */
		while (n > 0 && cmd[n - 1] == '\0')
			n--;
		cmd[n] = '\0';
		for (ssize_t i = 0; i < n; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
		if (read_all(path, comm, sizeof comm) < 0)
			continue;
		if (strstr(cmd, d->dir) || strstr(cmd, arg))
			mine = true;
		for (int i = 0; i < NPODS; i++) {
			char want[128];
			snprintf(want, sizeof want, "tank-sandbox %s", pods[i]);
			if (strcmp(cmd, want) == 0) {
				mine = sbx = true;
				/* comm holds what fits of "sbx:<pod>". */
				char c[64];
				snprintf(c, sizeof c, "sbx:%.11s\n", pods[i]);
				cr_expect_str_eq(comm, c, "pid %d", (int)pid);
			}
		}
		if (!mine)
			continue;
		tp->n++;
		tp->sandboxes += sbx;
		cgroup_of(pid, grp, sizeof grp);
		if (strncmp(grp, root, strlen(root)) != 0 || grp[strlen(root)] != '/') {
			if (!tp->outside++)
				snprintf(tp->first_outside, sizeof tp->first_outside,
					 "pid %d (%.200s) in %.200s", (int)pid, cmd,
					 grp[0] ? grp : "?");
		}
	}
	closedir(dp);
}

Test(e2e, isolated_pods_leave_no_process_outside_tanks_cgroups_across_kill9s, .timeout = 240)
{
	if (!namespaces_work())
		cr_skip_test("pid/uts/ipc namespaces are not available here");
	d_t *d = setup();
	char out[8192], yaml[4096], arg[32], pods[NPODS][32], root[512], grp[512];
	const char *names[NPODS];
	size_t off = 0;
	long pids[NPODS];
	tank_procs_t tp;

	snprintf(arg, sizeof arg, "4245.%d", (int)getpid());
	for (int i = 0; i < NPODS; i++) {
		snprintf(pods[i], sizeof pods[i], "iso%d-%d", i, (int)getpid());
		names[i] = pods[i];
		off += (size_t)snprintf(yaml + off, sizeof yaml - off,
					"%sname: %s\nstop: {grace: 2s}\n"
					"isolation: {namespaces: [pid, uts, ipc]}\n"
					"containers:\n  - name: s\n    command: [/bin/sleep, \"%s\"]\n",
					i ? "---\n" : "", pods[i], arg);
	}
	write_file(d, "iso.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/iso.yaml", d->dir), 0, "%s", out);
	for (int i = 0; i < NPODS; i++) {
		cr_assert(wait_phase(d, pods[i], "running", 20), "%s", pods[i]);
		pids[i] = status_num(d, pods[i], "pid");
		cr_assert_gt(pids[i], 0);
	}
	/* tank's root group: the first component of a container's group. */
	cgroup_of((pid_t)pids[0], grp, sizeof grp);
	if (!strstr(grp, "/s")) {
		teardown(d);
		cr_skip_test("tankd runs without cgroups here (container %ld in %s)", pids[0],
			     grp);
	}
	snprintf(root, sizeof root, "%s", grp);
	char *slash = strchr(root + 1, '/');
	cr_assert_not_null(slash, "%s", grp);
	*slash = '\0';

	for (int round = 0; round < 10; round++) {
		sleep_ms(200);          /* the starts reach the store */
		stop(d, SIGKILL);
		start(d);
		/* Each pod's container is replaced (the old one stopped by the
		 * new tankd, through its cgroup). */
		for (int i = 0; i < NPODS; i++) {
			long now = 0;
			for (int k = 0; k < 400; k++) {
				now = status_num(d, pods[i], "pid");
				if (now > 0 && now != pids[i] && phase_is(d, pods[i], "running"))
					break;
				sleep_ms(50);
			}
			cr_assert(now > 0 && now != pids[i], "round %d: %s pid %ld -> %ld",
				  round, pods[i], pids[i], now);
			pids[i] = now;
		}
		/* Every process of tank's is in its cgroups, the old sandboxes
		 * too (until the sweep stops them). */
		scan(d, names, arg, root, &tp);
		cr_assert_eq(tp.outside, 0, "round %d: %d of %d processes outside %s, e.g. %s",
			     round, tp.outside, tp.n, root, tp.first_outside);
	}
	/* The sweep stops the sandboxes of the killed daemons: one per pod
	 * is left, and one container each. */
	for (int k = 0; k < 200; k++) {
		scan(d, names, arg, root, &tp);
		if (tp.sandboxes == NPODS && tp.n == 2 * NPODS)
			break;
		sleep_ms(50);
	}
	cr_assert_eq(tp.sandboxes, NPODS, "%d sandboxes after 10 kill -9s", tp.sandboxes);
	cr_assert_eq(tp.n, 2 * NPODS, "%d processes (a sandbox and a container per pod)", tp.n);
	cr_assert_eq(tp.outside, 0, "%s", tp.first_outside);

	/* A stop leaves nothing. */
	int st = stop(d, SIGTERM);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	for (int k = 0; k < 100; k++) {
		scan(d, names, arg, root, &tp);
		if (!tp.n)
			break;
		sleep_ms(50);
	}
	cr_assert_eq(tp.n, 0, "%d processes of tank's outlive its stop (%d sandboxes)", tp.n,
		     tp.sandboxes);
	teardown(d);
}
