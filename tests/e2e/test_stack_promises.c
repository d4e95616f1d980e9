/*
 * Stacks keep their promises (issue 40 items 5, 6, 7, 10), end to end: a
 * real tankd and real processes, driven by tankctl.  A pod named into a
 * down stack stops; a `completed` dependency is met by this run, not the
 * last one; nothing of a stack outlives its deadline; reasons and the
 * history say what happened, and a flapping probe does not wipe it.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

static bool wait_stack(d_t *d, const char *name, const char *phase, int secs)
{
	char want[96];
	snprintf(want, sizeof want, "\"phase\": \"%s\"", phase);
	return wait_says(d, secs, want, "status stack %s -o json", name);
}

/* The file reads `want`, within secs. */
static bool file_becomes(const char *path, const char *want, char *got, size_t cap, int secs)
{
	for (int i = 0; i < secs * 20; i++) {
		read_text(path, got, cap);
		if (strcmp(got, want) == 0)
			return true;
		sleep_ms(50);
	}
	return false;
}

/* Item 5: a stack is down; a pod that runs on its own is added to it by
 * name.  The stack's decision did not change (still down), but its new
 * member must hear it: it stops.  Dropped from the list again, it is
 * released and runs again. */
Test(stacks, a_running_pod_named_into_a_down_stack_stops)
{
	d_t *d = setup();
	char out[8192];
	const char *const argv[] = { "/bin/sleep", "40511", NULL };

	write_file(d, "solo.yaml", "name: solo\ncontainers: [{name: c, command: [/bin/sleep, '40511']}]\n");
	write_file(d, "s0.yaml",
		   "kind: Stack\nname: dn\ndesired: down\npods:\n"
		   "  - name: dn-a\n    containers: [{name: c, command: [/bin/sleep, '40512']}]\n");
	write_file(d, "s1.yaml",
		   "kind: Stack\nname: dn\ndesired: down\npods:\n"
		   "  - name: dn-a\n    containers: [{name: c, command: [/bin/sleep, '40512']}]\n"
		   "  - solo\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/solo.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/s0.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "solo", "running", 10));
	cr_assert(wait_stack(d, "dn", "down", 10));
	for (int i = 0; i < 100 && count_procs(argv) != 1; i++)
		sleep_ms(50);
	cr_assert_eq(count_procs(argv), 1);

	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/s1.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "sync"), 0, "%s", out);
	cr_assert(wait_phase(d, "solo", "waiting", 10), "the new member hears the stack is down");
	for (int i = 0; i < 100 && count_procs(argv); i++)
		sleep_ms(50);
	cr_assert_eq(count_procs(argv), 0, "its process is stopped");
	cr_assert_eq(ctl(d, out, sizeof out, "status solo -o json"), 0, "%s", out);
	cr_assert(strstr(out, "stack dn is down"), "%s", out);
	cr_assert(wait_stack(d, "dn", "down", 10));

	/* Released again: it runs on its own. */
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/s0.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "sync"), 0, "%s", out);
	cr_assert(wait_phase(d, "solo", "running", 10), "released, it runs again");
	for (int i = 0; i < 100 && count_procs(argv) != 1; i++)
		sleep_ms(50);
	cr_assert_eq(count_procs(argv), 1);
	teardown(d);
}

/* Item 6: app depends on job completing.  After down and up, job runs
 * again, and app waits for that run: the old completion does not count.
 * job takes 1 s; each notes its start in one file. */
Test(stacks, a_rerun_resets_a_completed_dependency)
{
	d_t *d = setup();
	char y[1600], out[8192], log[128], got[512];

	snprintf(log, sizeof log, "%s/order", d->dir);
	snprintf(y, sizeof y,
		 "kind: Stack\nname: rr\npods:\n"
		 "  - name: rr-app\n"
		 "    depends_on: [{pod: rr-job, condition: completed}]\n"
		 "    containers: [{name: c, command: [/bin/sh, -c, \"echo app >> %s; exec sleep 40513\"]}]\n"
		 "  - name: rr-job\n    restart: never\n"
		 "    containers: [{name: c, command: [/bin/sh, -c, \"sleep 1; echo job >> %s\"]}]\n",
		 log, log);
	write_file(d, "rr.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/rr.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_stack(d, "rr", "up", 20));
	cr_assert(file_becomes(log, "job\napp\n", got, sizeof got, 10), "%s", got);
	cr_assert_eq(ctl(d, out, sizeof out, "down rr --wait --timeout 20s"), 0, "%s", out);
	cr_assert(wait_stack(d, "rr", "down", 20));
	cr_assert_eq(ctl(d, out, sizeof out, "up rr"), 0, "%s", out);
	cr_assert(wait_stack(d, "rr", "up", 20));
	cr_assert(file_becomes(log, "job\napp\njob\napp\n", got, sizeof got, 10),
		  "app waits for the new run of job: %s", got);
	teardown(d);
}

/* Item 10: a pod whose container used up backoff.max_retries says so in
 * its own reason (ps, status), not just `failed`. */
Test(stacks, a_pod_given_up_says_so)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "gu.yaml",
		   "name: gu\nbackoff: {base: 20ms, cap: 50ms, max_retries: 2}\n"
		   "containers: [{name: c, command: [/bin/sh, -c, 'exit 7']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/gu.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "gu", "terminal", 20));
	cr_assert_eq(ctl(d, out, sizeof out, "status gu -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"reason\": \"container c failed: gave up after 2 restarts in a row "
			 "(backoff.max_retries): exited with code 7\""), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "ps"), 0, "%s", out);
	cr_assert(strstr(out, "container c failed: gave up after 2"), "%s", out);
	/* It holds across a restart of tankd (read back from the status). */
	stop(d, SIGKILL);
	start(d);
	cr_assert_eq(ctl(d, out, sizeof out, "sync"), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status gu -o json"), 0, "%s", out);
	cr_assert(strstr(out, "container c failed: gave up after 2 restarts"), "%s", out);
	teardown(d);
}

/* Item 10: after a kill -9 of tankd, the new one stops what the old one
 * left running and starts it again; the history says that, not "spec
 * changed" (nothing changed). */
Test(stacks, a_restart_after_kill_9_is_not_called_a_spec_change)
{
	d_t *d = setup();
	char out[16384];
	const char *const argv[] = { "/bin/sleep", "40514", NULL };

	write_file(d, "k9.yaml", "name: k9\ncontainers: [{name: c, command: [/bin/sleep, '40514']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/k9.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "k9", "running", 10));
	stop(d, SIGKILL);
	start(d);
	cr_assert_eq(ctl(d, out, sizeof out, "sync"), 0, "%s", out);
	cr_assert(wait_says(d, 20, "pending    running", "history k9"), "started again");
	cr_assert_eq(ctl(d, out, sizeof out, "history k9"), 0, "%s", out);
	cr_assert_null(strstr(out, "spec changed"), "nothing changed: %s", out);
	cr_assert(strstr(out, "stopping what a previous tankd left running"), "%s", out);
	for (int i = 0; i < 100 && count_procs(argv) != 1; i++)
		sleep_ms(50);
	cr_assert_eq(count_procs(argv), 1, "one, not two");
	teardown(d);
}

/* Item 10: in a chain of twelve pods, each waiting for the one before to
 * be ready, the last names the first missing link (the head, running but
 * not ready), not its neighbour's reason nested eleven times and cut. */
Test(deps, a_chain_names_its_first_missing_link)
{
	d_t *d = setup();
	char y[8192], out[8192], flag[128];
	size_t n = 0;

	snprintf(flag, sizeof flag, "%s/head-ready", d->dir);
	n += (size_t)snprintf(y + n, sizeof y - n,
			      "name: ch0\ncontainers:\n  - name: c\n    command: [/bin/sleep, '40515']\n"
			      "    readiness: {exec: [/bin/sh, -c, 'test -f %s'], period: 100ms}\n",
			      flag);
	for (int i = 1; i < 12; i++)
		n += (size_t)snprintf(y + n, sizeof y - n,
				      "---\nname: ch%d\ndepends_on: [{pod: ch%d, condition: ready}]\n"
				      "containers: [{name: c, command: [/bin/sleep, '40516']}]\n", i, i - 1);
	write_file(d, "chain.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/chain.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "ch0", "running", 10));
	cr_assert(wait_says(d, 10, "\"reason\": \"waiting for ch10 (ready), which waits for ch0 "
			    "(ready): it is running, not ready yet\"", "status ch11 -o json"),
		  "the head is named");
	cr_assert(wait_says(d, 10, "\"reason\": \"waiting for ch0 (ready): it is running, not "
			    "ready yet\"", "status ch1 -o json"), "a direct link is named as before");
	write_file(d, "head-ready", "");
	cr_assert(wait_phase(d, "ch11", "running", 30), "the chain comes up");
	teardown(d);
}

/* Wall-clock time in ms, and an RFC 3339 time with milliseconds. */
static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void rfc3339_ms(long long ms, char *buf, size_t cap)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char base[32];
	gmtime_r(&s, &tm);
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, cap, "%s.%03lldZ", base, ms % 1000);
}

/* A chain c → b → a (c depends on b, b on a) whose processes ignore
 * SIGTERM, each with a 1 s grace: stopped one after another, dependents
 * first, it takes 3 s.  The scripts are told apart by a marker. */
static const char *dl_script[3] = {
	"trap '' TERM; while :; do sleep 0.05; done; : dl-a",
	"trap '' TERM; while :; do sleep 0.05; done; : dl-b",
	"trap '' TERM; while :; do sleep 0.05; done; : dl-c",
};

/* How many of the three run.  A shell that just forked its `sleep` has a
 * twin with its command line until the exec, so a count can read 4 for a
 * moment: a test waits until one read says 3 and asserts on that read. */
static int dl_procs(void)
{
	int n = 0;
	for (int i = 0; i < 3; i++) {
		const char *const argv[] = { "/bin/sh", "-c", dl_script[i], NULL };
		n += count_procs(argv);
	}
	return n;
}

/* Counts until none runs or the deadline is reached: the first scan
 * begun at or after the deadline must see none.  A scan of /proc is slow
 * on a machine running thousands of processes (hundreds of ms), so what
 * is asserted is the count of the scan that began at the deadline, not
 * the clock once a slow scan ended. */
static int dl_until_deadline(long long deadline)
{
	long long t0, t1;
	int n;

	for (;;) {
		t0 = now_ms();
		n = dl_procs();
		t1 = now_ms();
		if (!n || t0 >= deadline)
			break;
		sleep_ms(20);
	}
	cr_assert_eq(n, 0, "something still ran at the deadline (a scan begun %lld ms after "
		     "it, taking %lld ms, saw %d)", t0 - deadline, t1 - t0, n);
	return n;
}

static void dl_yaml(char *y, size_t cap, const char *deadline_line)
{
	snprintf(y, cap,
		 "kind: Stack\nname: dl\n%spods:\n"
		 "  - name: dl-a\n    stop: {grace: 1s}\n"
		 "    containers: [{name: c, command: [/bin/sh, -c, \"%s\"]}]\n"
		 "  - name: dl-b\n    stop: {grace: 1s}\n    depends_on: [{pod: dl-a}]\n"
		 "    containers: [{name: c, command: [/bin/sh, -c, \"%s\"]}]\n"
		 "  - name: dl-c\n    stop: {grace: 1s}\n    depends_on: [{pod: dl-b}]\n"
		 "    containers: [{name: c, command: [/bin/sh, -c, \"%s\"]}]\n",
		 deadline_line, dl_script[0], dl_script[1], dl_script[2]);
}

/* Item 7: nothing of a stack outlives its deadline.  The stop of the
 * chain starts early enough for the whole chain (not the longest single
 * grace); a deadline moved nearer than the chain needs stops every pod at
 * once, each within what is left; a deadline already inside a pod's grace
 * at apply does not start it. */
Test(stacks, nothing_of_a_stack_outlives_its_deadline)
{
	d_t *d = setup();
	char y[2400], out[8192], when[48], line[96];
	/* 12 s: the chain starts in order (a, then b, then c) and its stop
	 * begins about 3.5 s before the deadline; 7 s left a loaded machine
	 * too little to see all three run first. */
	long long deadline = now_ms() + 12000;

	/* Round 1: in time, stopped in order, done by the deadline. */
	rfc3339_ms(deadline, when, sizeof when);
	snprintf(line, sizeof line, "deadline: %s\n", when);
	dl_yaml(y, sizeof y, line);
	write_file(d, "dl.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dl.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "dl-c", "running", 10));
	int n = 0;
	for (int i = 0; i < 100 && (n = dl_procs()) != 3; i++)
		sleep_ms(50);
	cr_assert_eq(n, 3);
	n = dl_until_deadline(deadline);
	cr_assert(wait_stack(d, "dl", "failed", 10));
	cr_assert_eq(ctl(d, out, sizeof out, "history dl-b"), 0, "%s", out);
	cr_assert(strstr(out, "stack dl: deadline"), "%s", out);

	/* Round 2: running without a deadline; then one 2 s away, nearer
	 * than the 3 s the chain needs: all stop at once, in time. */
	dl_yaml(y, sizeof y, "");
	write_file(d, "dl.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dl.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_stack(d, "dl", "up", 20));
	for (int i = 0; i < 100 && (n = dl_procs()) != 3; i++)
		sleep_ms(50);
	cr_assert_eq(n, 3);
	deadline = now_ms() + 2000;
	rfc3339_ms(deadline, when, sizeof when);
	snprintf(line, sizeof line, "deadline: %s\n", when);
	dl_yaml(y, sizeof y, line);
	write_file(d, "dl.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dl.yaml", d->dir), 0, "%s", out);
	n = dl_until_deadline(deadline);
	cr_assert_eq(dl_procs(), 0);

	/* Round 3: a deadline 3 s away and a grace of 5 s: never started. */
	const char *const argv[] = { "/bin/sleep", "40517", NULL };
	rfc3339_ms(now_ms() + 3000, when, sizeof when);
	snprintf(y, sizeof y,
		 "kind: Stack\nname: dl2\ndeadline: %s\npods:\n"
		 "  - name: dl2-p\n    stop: {grace: 5s}\n"
		 "    containers: [{name: c, command: [/bin/sleep, '40517']}]\n", when);
	write_file(d, "dl2.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dl2.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "sync"), 0, "%s", out);
	cr_assert(wait_phase(d, "dl2-p", "waiting", 10));
	cr_assert_eq(ctl(d, out, sizeof out, "history dl2-p"), 0, "%s", out);
	cr_assert_null(strstr(out, "started"), "never started: %s", out);
	cr_assert_eq(count_procs(argv), 0);
	teardown(d);
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Item 10: a readiness probe flipping every 0.2 s (a probe every 10 ms,
 * one failure enough) moves its stack between up and degraded five times
 * a second, fifty a window, far past a burst even on a loaded machine.  The history keeps the
 * first changes of a window, counts the rest and writes them as one
 * entry ("flapping: N changes in 10s") instead of wiping itself; once the
 * flapping stops, the history ends on the phase the stack is in. */
Test(stacks, a_flapping_probe_is_coalesced_in_the_history)
{
	d_t *d = setup();
	char y[2000], out[65536], flag[128], calm[128];

	snprintf(flag, sizeof flag, "%s/flag", d->dir);
	snprintf(calm, sizeof calm, "%s/calm", d->dir);
	snprintf(y, sizeof y,
		 "kind: Stack\nname: fl\npods:\n"
		 "  - name: fl-p\n    containers:\n      - name: c\n"
		 "        command: [/bin/sh, -c, \"while :; do touch %s; if [ -f %s ]; then sleep 0.1; "
		 "continue; fi; sleep 0.2; rm -f %s; sleep 0.2; done\"]\n"
		 "        readiness: {exec: [/bin/sh, -c, 'test -f %s'], period: 10ms, "
		 "failure_threshold: 1}\n",
		 flag, calm, flag, flag);
	write_file(d, "fl.yaml", y);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/fl.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 25, "flapping: ", "history stack fl"), "the flips are counted");
	cr_assert_eq(ctl(d, out, sizeof out, "history stack fl"), 0, "%s", out);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* At most a burst of 10 and one counted entry a 10 s window (a loaded
	 * machine flips slower, over more windows); uncoalesced, a flip every
	 * 10 ms would have written hundreds by now. */
	long windows = (long)(t1.tv_sec - t0.tv_sec) / 10 + 2;
	cr_assert_lt(count_lines(out), 4 + 11 * windows, "a burst, then one entry a window: %s",
		     out);

	/* Calm again: the window's end says where it ended. */
	write_file(d, "calm", "");
	cr_assert(wait_stack(d, "fl", "up", 10));
	bool settled = false;
	for (int i = 0; i < 250 && !settled; i++) {
		cr_assert_eq(ctl(d, out, sizeof out, "history stack fl"), 0, "%s", out);
		size_t n = strlen(out);
		while (n && out[n - 1] == '\n')
			out[--n] = '\0';
		const char *last = strrchr(out, '\n');
		last = last ? last + 1 : out;
		/* "AT  OBJECT  FROM  TO  REASON": the last entry goes to up (the
		 * window's counted entry, or, when the last window held fewer
		 * changes than a burst, its last change). */
		char at[64], obj[64], from[32], to[32];
		settled = sscanf(last, "%63s %63s %31s %31s", at, obj, from, to) == 4 &&
			  strcmp(to, "up") == 0 && phase_is(d, "fl-p", "running");
		if (!settled)
			sleep_ms(100);
	}
	cr_assert(settled, "the last entry ends up: %s", out);
	teardown(d);
}
