/*
 * tankd under a service manager (obs/obs_notify.h): the sd_notify
 * datagrams a real tankd sends to NOTIFY_SOCKET (READY=1 after its first
 * pass, STATUS=, WATCHDOG=1 with WATCHDOG_USEC, STOPPING=1 at SIGTERM),
 * read from a datagram socket the test binds; and the journal's
 * priorities on stderr when JOURNAL_STREAM names it.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/obs/obs_t.h"

/* Reads datagrams into all (appended, one per line) until needle is in
 * one or secs pass. */
static bool wait_dgram(int fd, char *all, size_t cap, const char *needle, int secs)
{
	for (int i = 0; i < secs * 20; i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 50) <= 0)
			continue;
		char buf[1024];
		ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		size_t l = strlen(all);
		snprintf(all + l, cap - l, "%s\n", buf);
		if (strstr(buf, needle))
			return true;
	}
	return strstr(all, needle) != NULL;
}

/* needle already in all, or in a datagram within secs. */
static bool saw_or_wait(int fd, char *all, size_t cap, const char *needle, int secs)
{
	return strstr(all, needle) || wait_dgram(fd, all, cap, needle, secs);
}

/* A datagram socket at DIR/notify for tankd's NOTIFY_SOCKET; env gets
 * "NOTIFY_SOCKET=<path>".  The socket, owned by the caller. */
static int notify_listen(const d_t *d, char *env, size_t cap)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	snprintf(a.sun_path, sizeof a.sun_path, "%s/notify", d->dir);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	snprintf(env, cap, "NOTIFY_SOCKET=%s", a.sun_path);
	return fd;
}

Test(obs_notify, ready_status_watchdog_and_stopping_reach_notify_socket)
{
	d_t *d = d_new();
	static char env_sock[200], all[16384];
	char out[4096];
	int fd = notify_listen(d, env_sock, sizeof env_sock);

	/* A stored pod first: READY=1 comes once the first pass saw it. */
	obs_tankd(d, NULL, (const char *const[]){ env_sock, "WATCHDOG_USEC=400000", NULL });
	all[0] = '\0';
	cr_assert(wait_dgram(fd, all, sizeof all, "READY=1", 20), "no READY=1: %s", all);
	/* With READY=1 (or after it, READY=1 saying "counting the objects",
	 * when the first count took more than one slice: a loaded CI). */
	cr_assert(saw_or_wait(fd, all, sizeof all, "STATUS=0 pods", 15), "no STATUS: %s", all);
	cr_assert(wait_dgram(fd, all, sizeof all, "WATCHDOG=1", 5), "no WATCHDOG=1: %s", all);
	/* The socket answers by then: READY means served. */
	cr_assert(up(d));
	write_file(d, "p.yaml", "name: p\ncontainers:\n  - name: s\n    command: [/bin/sleep, \"1000\"]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/p.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_dgram(fd, all, sizeof all, "STATUS=1 pod (1 running)", 15),
		  "the summary did not follow: %s", all);
	kill(d->pid, SIGTERM);
	cr_assert(wait_dgram(fd, all, sizeof all, "STOPPING=1", 10), "no STOPPING=1: %s", all);
	obs_exits_clean(d);
	close(fd);
	teardown(d);
}

/* From STOPPING=1 on, STATUS= says "stopping" until tankd exits: the
 * summary every 5 s (or one whose walk was in its slices) went on during
 * a drain and replaced it with the pods' counts. */
Test(obs_notify, no_summary_replaces_stopping_during_a_drain)
{
	d_t *d = d_new();
	static char env_sock[200], all[16384];
	char out[4096];
	int fd = notify_listen(d, env_sock, sizeof env_sock);

	obs_tankd(d, NULL, (const char *const[]){ env_sock, NULL });
	all[0] = '\0';
	cr_assert(wait_dgram(fd, all, sizeof all, "READY=1", 20), "no READY=1: %s", all);
	/* A pod that ignores SIGTERM: the drain lasts its grace, 8 s. */
	write_file(d, "p.yaml", "name: p\nstop: {signal: TERM, grace: 8s}\ncontainers:\n"
		   "  - name: s\n    command: [/bin/sh, -c, \"trap '' TERM; sleep 1000\"]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/p.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_dgram(fd, all, sizeof all, "STATUS=1 pod (1 running)", 15),
		  "no summary of the running pod: %s", all);
	kill(d->pid, SIGTERM);
	all[0] = '\0';
	cr_assert(wait_dgram(fd, all, sizeof all, "STOPPING=1", 10), "no STOPPING=1: %s", all);
	/* 6 s of the drain: more than one period of the summary. */
	(void)wait_dgram(fd, all, sizeof all, "STATUS=1 pod", 6);
	cr_assert_not(strstr(all, "STATUS=1 pod"), "a summary after STOPPING=1: %s", all);
	obs_exits_clean(d);
	close(fd);
	teardown(d);
}

/* A first summary that takes several slices (many stored objects; here
 * one object a slice) comes after READY=1: READY=1 carries a STATUS= of
 * its own, so `systemctl status` does not show nothing meanwhile.  Before,
 * READY=1 came alone and the counts some turns later. */
Test(obs_notify, ready_says_a_status_when_the_first_summary_takes_slices)
{
	d_t *d = d_new();
	static char env_sock[200], all[16384];
	char out[4096];
	int fd = notify_listen(d, env_sock, sizeof env_sock);
	const char *const env[] = { env_sock, "TANK_HTTP_SLICE_OBJECTS=1", NULL };

	obs_tankd(d, NULL, env);
	all[0] = '\0';
	cr_assert(wait_dgram(fd, all, sizeof all, "READY=1", 20), "no READY=1: %s", all);
	for (int i = 0; i < 3; i++) {
		char y[128], f[16];
		snprintf(f, sizeof f, "p%d.yaml", i);
		snprintf(y, sizeof y, "name: p%d\ncontainers: [{name: s, command: [/bin/sleep, "
			 "\"1000\"]}]\n", i);
		write_file(d, f, y);
		cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/%s", d->dir, f), 0, "%s", out);
	}
	cr_assert(wait_dgram(fd, all, sizeof all, "STATUS=3 pods", 15), "no summary: %s", all);
	kill(d->pid, SIGTERM);
	obs_exits_clean(d);
	/* Again, with the three stored. */
	obs_tankd(d, NULL, env);
	all[0] = '\0';
	cr_assert(wait_dgram(fd, all, sizeof all, "READY=1", 20), "no READY=1: %s", all);
	const char *ready = strstr(all, "READY=1");
	cr_assert(strstr(all, "STATUS=3 pods") ? strstr(all, "STATUS=3 pods") < ready
		  : strstr(ready, "READY=1\nSTATUS=serving; counting the objects") != NULL,
		  "READY=1 without a status: %s", all);
	cr_assert(wait_dgram(fd, all, sizeof all, "STATUS=3 pods", 15), "no summary: %s", all);
	kill(d->pid, SIGTERM);
	obs_exits_clean(d);
	close(fd);
	teardown(d);
}

/* NOTIFY_SOCKET "@name": the abstract socket "\0name" (sd_notify(3)),
 * written by tank itself since libsystemd is not linked. */
Test(obs_notify, an_abstract_notify_socket_gets_ready_and_stopping)
{
	d_t *d = d_new();
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	static char env_sock[200], all[16384];
	char name[64];
	int fd, n;

	n = snprintf(name, sizeof name, "tank-test-notify-%d", (int)getpid());
	memcpy(a.sun_path + 1, name, (size_t)n);        /* sun_path[0] = '\0' */
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a,
			  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)), 0);
	snprintf(env_sock, sizeof env_sock, "NOTIFY_SOCKET=@%s", name);
	obs_tankd(d, NULL, (const char *const[]){ env_sock, NULL });
	all[0] = '\0';
	cr_assert(wait_dgram(fd, all, sizeof all, "READY=1", 20), "no READY=1: %s", all);
	/* With READY=1, or after it when the first count took more than one
	 * slice of the loop (READY=1 then says "counting the objects"): a
	 * loaded machine's CI saw the second. */
	cr_assert(saw_or_wait(fd, all, sizeof all, "STATUS=0 pods", 15), "no summary: %s", all);
	kill(d->pid, SIGTERM);
	cr_assert(wait_dgram(fd, all, sizeof all, "STOPPING=1", 10), "no STOPPING=1: %s", all);
	obs_exits_clean(d);
	close(fd);
	teardown(d);
}

/* WATCHDOG_PID says whose watchdog WATCHDOG_USEC is (sd_watchdog_enabled
 * (3)): another process's is not petted; our parent's is (the keeper's,
 * which runs tankd as its child: here the test is the parent). */
Test(obs_notify, the_watchdog_is_petted_only_for_tankd_or_its_parent)
{
	static char env_sock[200], env_pid[64], all[16384];
	const long pids[2] = { 1, (long)getpid() };
	int fd;

	for (int i = 0; i < 2; i++) {
		d_t *d = d_new();
		fd = notify_listen(d, env_sock, sizeof env_sock);
		snprintf(env_pid, sizeof env_pid, "WATCHDOG_PID=%ld", pids[i]);
		obs_tankd(d, NULL, (const char *const[]){ env_sock, env_pid,
							  "WATCHDOG_USEC=200000", NULL });
		all[0] = '\0';
		cr_assert(wait_dgram(fd, all, sizeof all, "READY=1", 20), "no READY=1: %s", all);
		/* Ten periods of 100 ms. */
		bool petted = wait_dgram(fd, all, sizeof all, "WATCHDOG=1", 1);
		if (i == 0)
			cr_assert_not(petted, "petted for pid 1: %s", all);
		else
			cr_assert(petted, "not petted for its parent: %s", all);
		kill(d->pid, SIGTERM);
		obs_exits_clean(d);
		close(fd);
		teardown(d);
	}
}

Test(obs_notify, log_lines_carry_a_priority_when_stderr_is_the_journal)
{
	d_t *d = d_new();
	char path[128], log[8192];
	static char env_js[128];
	struct stat sb;
	int fd;

	/* The log file is stderr: JOURNAL_STREAM names its device and inode,
	 * as systemd does for the journal's stream. */
	snprintf(path, sizeof path, "%s/tankd.log", d->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &sb), 0);
	close(fd);
	snprintf(env_js, sizeof env_js, "JOURNAL_STREAM=%llu:%llu",
		 (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino);
	obs_tankd(d, NULL, (const char *const[]){ env_js, NULL });
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(25);
	cr_assert(up(d));
	stop(d, SIGTERM);
	read_text(path, log, sizeof log);
	cr_assert(strstr(log, "<6>tankd: info: serving "), "%s", log);
	cr_assert(strstr(log, "<6>tankd: info: stopped"), "%s", log);

	/* Without it (or naming another file), no prefix. */
	snprintf(env_js, sizeof env_js, "JOURNAL_STREAM=1:1");
	unlink(path);
	obs_tankd(d, NULL, (const char *const[]){ env_js, NULL });
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(25);
	stop(d, SIGTERM);
	read_text(path, log, sizeof log);
	cr_assert(strstr(log, "tankd: info: serving "), "%s", log);
	cr_assert_null(strstr(log, "<6>"), "%s", log);
	teardown(d);
}

/* The pid serving d (from `version`), owned by the test run; 0 when none. */
static pid_t serving_pid(d_t *d)
{
	char out[4096], *p;
	long pid = 0;

	if (ctl(d, out, sizeof out, "version") == 0 && (p = strstr(out, "\npid ")))
		pid = strtol(p + 5, NULL, 10);
	if (pid > 0)
		ts_own_pid((pid_t)pid);
	return (pid_t)pid;
}

/* Under systemd the unit's main process is the keeper (contrib/
 * tankd.service): its lines and its tankd's reach the journal with their
 * priorities, a warning as a warning — the keeper's "tankd killed by
 * signal 9" above all. */
Test(obs_notify, the_keeper_and_its_tankd_log_with_priorities_for_the_journal)
{
	d_t *d = d_new();
	char path[128];
	static char env_js[128], log[65536];
	struct stat sb;
	pid_t first, second = 0;
	int fd;

	snprintf(path, sizeof path, "%s/tankd.log", d->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &sb), 0);
	close(fd);
	snprintf(env_js, sizeof env_js, "JOURNAL_STREAM=%llu:%llu",
		 (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino);
	obs_tankd(d, (const char *const[]){ "--keeper", NULL }, (const char *const[]){ env_js, NULL });
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(50);
	cr_assert(up(d), "tankd under its keeper did not come up");
	first = serving_pid(d);
	cr_assert_gt(first, 0);
	cr_assert_neq(first, d->pid, "the keeper serves the socket itself");
	cr_assert_eq(kill(first, SIGKILL), 0);
	for (int i = 0; i < 400 && (second <= 0 || second == first); i++) {
		sleep_ms(50);
		second = serving_pid(d);
	}
	cr_assert(second > 0 && second != first, "the keeper did not start tankd again");
	stop(d, SIGTERM);     /* the keeper: tankd drains, then the keeper exits */
	read_text(path, log, sizeof log);
	cr_assert(strstr(log, "<6>tankd-keeper: info: started tankd"), "%s", log);
	cr_assert(strstr(log, "<4>tankd-keeper: warning: tankd killed by signal 9"), "%s", log);
	cr_assert(strstr(log, "<6>tankd: info: serving "), "%s", log);
	/* Every line has its priority: none reaches the journal bare. */
	for (char *l = log; *l; ) {
		size_t n = strcspn(l, "\n");
		cr_assert(n == 0 || (l[0] == '<' && l[2] == '>' && l[1] >= '0' && l[1] <= '7'),
			  "a line without a priority: %.*s", (int)n, l);
		l += n + (l[n] == '\n');
	}
	teardown(d);
}

/* s6's readiness protocol: --ready-fd N gets one newline once ready, then
 * is closed (s6-supervise reads to the end of the line). */
Test(obs_notify, ready_fd_gets_a_newline_for_s6)
{
	d_t *d = d_new();
	int p[2];
	char fdarg[16], buf[16];
	ssize_t n, total = 0;

	cr_assert_eq(pipe(p), 0);
	/* The write end as fd 5 in tankd: obs_tankd's child keeps every fd
	 * without close-on-exec. */
	snprintf(fdarg, sizeof fdarg, "%d", p[1]);
	fcntl(p[0], F_SETFD, FD_CLOEXEC);
	obs_tankd(d, (const char *const[]){ "--ready-fd", fdarg, NULL }, NULL);
	close(p[1]);
	while ((n = read(p[0], buf + total, sizeof buf - 1 - (size_t)total)) > 0)
		total += n;
	buf[total] = '\0';
	/* EOF came: tankd wrote its line and closed the fd (no container
	 * holds it). */
	cr_assert_str_eq(buf, "\n");
	cr_assert(up(d), "ready before the socket answers");
	close(p[0]);
	teardown(d);
}
