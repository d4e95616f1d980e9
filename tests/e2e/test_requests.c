/*
 * Requests that must survive a kill -9 of tankd (DESIGN.md §7 "Requests
 * to pods"): a restart by hand and the lift of a stack's abort are stored
 * before they are acted on, and an exit is counted in the store before
 * its restart, all driven through tankctl against a real tankd.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

static int lines_of(const char *path)
{
	char buf[4096];
	int n = 0;

	read_text(path, buf, sizeof buf);
	for (const char *p = buf; *p; p++)
		n += *p == '\n';
	return n;
}

/* A run-once pod, restarted by hand while its process ignores the stop
 * signal (its grace runs), and tankd killed -9 right after `restart`
 * answered: the next tankd stops the leftover and runs the pod again,
 * rather than taking it for a run-once start it must not repeat. */
Test(e2e, a_restart_by_hand_survives_a_kill_9_of_tankd)
{
	d_t *d = setup();
	char runs[160], y[600], out[8192], mark[32];

	snprintf(runs, sizeof runs, "%s/runs", d->dir);
	snprintf(mark, sizeof mark, "9400.%d", (int)getpid());
	snprintf(y, sizeof y, "name: again\nrestart: never\nstop: {grace: 2s}\n"
		 "containers: [{name: c, command: [/bin/sh, -c, "
		 "\"echo x >> %s; trap '' TERM; exec /bin/sleep %s\"]}]\n", runs, mark);
	write_file(d, "again.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/again.yaml", d->dir), 0, "%s", out);
	const char *argv[] = { "/bin/sleep", mark, NULL };
	for (int t = 0; t < 600 && (count_procs(argv) != 1 || lines_of(runs) != 1); t++)
		sleep_ms(20);
	cr_assert_eq(count_procs(argv), 1);
	cr_assert_eq(lines_of(runs), 1);
	long pid = status_num(d, "again", "pid");
	cr_assert_gt(pid, 1);

	cr_assert_eq(ctl(d, out, sizeof out, "restart again"), 0, "%s", out);
	/* Killed the moment `restart` answered: the answer comes once the
	 * manager has stored the request (the API waits for the loop's
	 * echo), so nothing is in memory only. */
	stop(d, SIGKILL);
	cr_assert_eq(count_procs(argv), 1, "the old run ignores TERM: still there");
	start(d);
	/* The leftover is stopped (grace, then SIGKILL), then the pod runs
	 * again: the restart asked before the kill was not forgotten. */
	for (int t = 0; t < 750 && lines_of(runs) < 2; t++)
		sleep_ms(20);
	cr_assert_eq(lines_of(runs), 2, "restarted after tankd came back");
	cr_assert(wait_phase(d, "again", "running", 10));
	long pid2 = status_num(d, "again", "pid");
	cr_assert(pid2 > 1 && pid2 != pid, "a new process: %ld, was %ld", pid2, pid);
	cr_assert_eq(wait_procs(argv, 1, 10), 1, "the old run is gone, the new one runs");
	/* The request is done, and stays done: a later start of tankd does
	 * not restart the pod for it again. */
	sleep_ms(300);
	stop(d, SIGKILL);
	start(d);
	/* Long enough for a restart to stop the old run (its 2 s grace) and
	 * start a new one, were the request still stored. */
	sleep_ms(3500);
	cr_assert_eq(lines_of(runs), 2, "not run again for the same request");
	stop(d, SIGTERM);
	for (int t = 0; t < 300 && count_procs(argv); t++)
		sleep_ms(20);
	start(d);
	teardown(d);
}

/* backoff.max_retries counts every run, also one that exited a moment
 * before a kill -9 of tankd: the exit is in the store before its restart
 * is scheduled.  1 run + 3 restarts, not one more. */
Test(e2e, an_exit_just_before_a_kill_9_counts_toward_max_retries)
{
	d_t *d = setup();
	char runs[160], y[600], out[8192];

	snprintf(runs, sizeof runs, "%s/runs", d->dir);
	snprintf(y, sizeof y, "name: flaky\nbackoff: {base: 400ms, cap: 400ms, max_retries: 3}\n"
		 "containers: [{name: c, command: [/bin/sh, -c, 'echo x >> %s; exit 3']}]\n", runs);
	write_file(d, "flaky.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/flaky.yaml", d->dir), 0, "%s", out);
	for (int t = 0; t < 2000 && lines_of(runs) < 1; t++)
		sleep_ms(5);
	cr_assert_eq(lines_of(runs), 1);
	/* The exit is seen by tankd within a few ms; the group commit would
	 * have written it only 100 ms later. */
	sleep_ms(30);
	stop(d, SIGKILL);
	start(d);
	cr_assert(wait_phase(d, "flaky", "terminal", 30));
	sleep_ms(600);
	cr_assert_eq(lines_of(runs), 4, "1 run + max_retries restarts");
	cr_assert_eq(ctl(d, out, sizeof out, "status flaky -o json"), 0, "%s", out);
	cr_assert(strstr(out, "gave up after 3 restarts"), "%s", out);
	teardown(d);
}

/* `up` lifts a stack's abort; tankd killed -9 right after `up` answered
 * does not find the stack aborted again. */
Test(e2e, lifting_an_abort_survives_a_kill_9_of_tankd)
{
	d_t *d = setup();
	char y[1600], out[8192], flag[160], m1[32], m2[32];

	snprintf(flag, sizeof flag, "%s/fixed", d->dir);
	snprintf(m1, sizeof m1, "9401.%d", (int)getpid());
	snprintf(m2, sizeof m2, "9402.%d", (int)getpid());
	/* bad fails until the operator fixes it (the flag file). */
	snprintf(y, sizeof y,
		 "kind: Stack\nname: st\non_failure: abort\npods:\n"
		 "  - name: ok\n"
		 "    containers: [{name: c, command: [/bin/sleep, '%s']}]\n"
		 "  - name: bad\n"
		 "    backoff: {base: 20ms, cap: 50ms, max_retries: 1}\n"
		 "    containers: [{name: c, command: [/bin/sh, -c, "
		 "'[ -f %s ] && exec /bin/sleep %s; exit 3']}]\n", m1, flag, m2);
	write_file(d, "st.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/st.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 30, "\"phase\": \"failed\"", "status stack st -o json"),
		  "aborted");
	cr_assert(wait_phase(d, "ok", "waiting", 10));

	write_file(d, "fixed", "");
	cr_assert_eq(ctl(d, out, sizeof out, "up st"), 0, "%s", out);
	/* Killed the moment `up` answered: it answers once the manager
	 * stored the lift (the API waits for the loop's echo). */
	stop(d, SIGKILL);
	start(d);
	bool came_up = wait_says(d, 30, "\"phase\": \"up\"", "status stack st -o json");
	ctl(d, out, sizeof out, "status stack st -o json");
	cr_assert(came_up, "the lift held: the stack comes up: %s", out);
	cr_assert(wait_phase(d, "ok", "running", 10));
	cr_assert(wait_phase(d, "bad", "running", 10));
	teardown(d);
}
