/*
 * `tankctl stop` / `tankctl start` (issue 36 item 2) against a real
 * tankd: a pod's desired state down and up again without deleting it —
 * stored, so a kill -9 of tankd and a re-apply of its manifest leave it
 * stopped —, a stack's down/up, and a clear error for a kind that has no
 * such verb.  Also the object's age (created_at) in -o json and in ps.
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

/* The status's created_at as -o json prints it (RFC 3339), into buf. */
static const char *created_of(d_t *d, const char *name, char *buf, size_t cap)
{
	char out[16384];
	const char *p, *q;

	buf[0] = '\0';
	if (ctl(d, out, sizeof out, "status %s -o json", name) != 0 ||
	    !(p = strstr(out, "\"created_at\": \"")))
		return buf;
	p += strlen("\"created_at\": \"");
	if ((q = strchr(p, '"')))
		snprintf(buf, cap, "%.*s", (int)(q - p), p);
	return buf;
}

Test(e2e, stop_keeps_a_pod_stopped_across_kill_9_and_apply_until_start)
{
	d_t *d = setup();
	char runs[160], y[600], out[16384], mark[32];

	snprintf(runs, sizeof runs, "%s/runs", d->dir);
	snprintf(mark, sizeof mark, "9500.%d", (int)getpid());
	snprintf(y, sizeof y, "name: sp\nstop: {grace: 5s}\n"
		 "containers: [{name: c, command: [/bin/sh, -c, "
		 "\"echo x >> %s; exec /bin/sleep %s\"]}]\n", runs, mark);
	write_file(d, "sp.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/sp.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "sp", "running", 20));
	const char *argv[] = { "/bin/sleep", mark, NULL };
	cr_assert_eq(count_procs(argv), 1);
	char created[64], now[64];
	created_of(d, "sp", created, sizeof created);
	cr_assert(strlen(created) >= 20 && created[4] == '-' && created[10] == 'T',
		  "RFC 3339: '%s'", created);

	cr_assert_eq(ctl(d, out, sizeof out, "stop sp"), 0, "%s", out);
	cr_assert(strstr(out, "sp stopped"), "%s", out);
	/* Killed the moment `stop` answered: the answer comes once the stop
	 * is stored, so the next tankd keeps it. */
	stop(d, SIGKILL);
	start(d);
	cr_assert(wait_phase(d, "sp", "stopped", 20), "stopped after the restart");
	for (int t = 0; t < 300 && count_procs(argv); t++)
		sleep_ms(20);
	cr_assert_eq(count_procs(argv), 0, "its container is stopped");
	/* Shown as stopped, kept in the store. */
	cr_assert_eq(ctl(d, out, sizeof out, "ps"), 0, "%s", out);
	cr_assert(strstr(out, "stopped"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status sp -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"stopped\": true"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "describe sp"), 0, "%s", out);
	cr_assert(strstr(out, "stopped"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get sp"), 0, "still stored: %s", out);

	/* A re-apply of the same manifest does not start it (systemd's
	 * stopped unit), nor does one more kill -9. */
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/sp.yaml", d->dir), 0, "%s", out);
	stop(d, SIGKILL);
	start(d);
	sleep_ms(1500);
	cr_assert(phase_is(d, "sp", "stopped"));
	cr_assert_eq(count_procs(argv), 0);
	cr_assert_eq(lines_of(runs), 1, "not run again");
	cr_assert_str_eq(created_of(d, "sp", now, sizeof now), created, "the same object's age");

	/* start: runs again; a stop is not a crash, so no restart counted. */
	cr_assert_eq(ctl(d, out, sizeof out, "start pod/sp --wait --timeout 20s"), 0, "%s", out);
	cr_assert(wait_phase(d, "sp", "running", 20));
	cr_assert_eq(lines_of(runs), 2);
	cr_assert_eq(count_procs(argv), 1);
	long restarts = status_num(d, "sp", "restarts");
	cr_assert(restarts >= 0 && restarts <= 1, "restarts %ld", restarts);
	cr_assert_eq(ctl(d, out, sizeof out, "status sp -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"stopped\": false"), "%s", out);

	/* KIND NAME form, and --wait until nothing of it runs. */
	cr_assert_eq(ctl(d, out, sizeof out, "stop pod sp --wait --timeout 20s"), 0, "%s", out);
	/* Said once: the wait's verdict repeats the verb's line only when
	 * it is news ("sp stopped" came twice). */
	cr_assert_str_eq(out, "sp stopped\n");
	cr_assert(phase_is(d, "sp", "stopped"));
	cr_assert_eq(count_procs(argv), 0);
	cr_assert_eq(ctl(d, out, sizeof out, "start sp"), 0, "%s", out);
	cr_assert(wait_phase(d, "sp", "running", 20));

	/* Deleted and applied again: a new object, not stopped, younger. */
	cr_assert_eq(ctl(d, out, sizeof out, "stop sp"), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete sp"), 0, "%s", out);
	for (int t = 0; t < 300 && count_procs(argv); t++)
		sleep_ms(20);
	sleep_ms(1100);             /* a later second, whatever the precision */
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/sp.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "sp", "running", 20), "a new pod runs");
	cr_assert_gt(strcmp(created_of(d, "sp", now, sizeof now), created), 0, "%s after %s",
		     now, created);

	/* Nothing to stop: the errors name the pod and the kind. */
	cr_assert_eq(ctl(d, out, sizeof out, "stop nosuch"), 1, "%s", out);
	cr_assert(strstr(out, "nosuch"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "stop action/x"), 1, "%s", out);
	cr_assert(strstr(out, "the action kind has no stop (it is for: pod, stack)"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "stop bogus/x"), 2, "%s", out);
	teardown(d);
}

Test(e2e, stop_and_start_of_a_stack_are_its_down_and_up)
{
	d_t *d = setup();
	char y[600], out[16384];

	snprintf(y, sizeof y, "kind: Stack\nname: shop\npods:\n"
		 "  - name: shop-a\n"
		 "    containers: [{name: c, command: [/bin/sleep, '1002']}]\n");
	write_file(d, "shop.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/shop.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "stop stack/shop --wait --timeout 20s"), 0, "%s", out);
	cr_assert(strstr(out, "stack/shop"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status stack shop -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"phase\": \"down\""), "%s", out);
	cr_assert(strstr(out, "\"created_at\": \""), "RFC 3339: %s", out);
	cr_assert(!phase_is(d, "shop-a", "running"));
	cr_assert_eq(ctl(d, out, sizeof out, "start stack shop --wait --timeout 20s"), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status stack shop -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"phase\": \"up\""), "%s", out);
	cr_assert(wait_phase(d, "shop-a", "running", 20));
	/* The stack's table shows its age from created_at. */
	cr_assert_eq(ctl(d, out, sizeof out, "get stacks"), 0, "%s", out);
	cr_assert(strstr(out, "AGE"), "%s", out);
	teardown(d);
}

/* A stop right after the apply, before the loop's pass has seen the pod,
 * holds: the request's tracking was forgotten as "not stored" by the
 * pod's reconcile, and the pod ran though `stop` had said "stopped". */
Test(e2e, a_stop_right_after_the_apply_holds)
{
	d_t *d = setup();
	char out[8192];
	const char *const argv[] = { "/bin/sleep", "7314", NULL };

	write_file(d, "early.yaml", "name: early\ncontainers: [{name: c, command: [/bin/sleep, '7314']}]\n");
	for (int round = 0; round < 5; round++) {
		cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/early.yaml", d->dir), 0, "%s", out);
		cr_assert_eq(ctl(d, out, sizeof out, "stop early"), 0, "%s", out);
		cr_assert(wait_phase(d, "early", "stopped", 20), "round %d: not stopped", round);
		cr_assert(says(d, "\"stopped\": true", "status early -o json"), "round %d", round);
		sleep_ms(300);
		cr_assert(phase_is(d, "early", "stopped"), "round %d: ran again", round);
		cr_assert_eq(count_procs(argv), 0, "round %d: its container runs", round);
		cr_assert_eq(ctl(d, out, sizeof out, "delete early"), 0, "%s", out);
		for (int i = 0; i < 100 && ctl(d, out, sizeof out, "get early") == 0; i++)
			sleep_ms(50);
	}
	teardown(d);
}

/* Pods a, b (labels ab, "" for none) and c (labels c_labels), each a
 * sleep of `secs`, applied and running. */
static void apply_three(d_t *d, const char *a, const char *b, const char *c, const char *ab,
			const char *c_labels, const char *secs)
{
	char y[1024], out[16384];

	snprintf(y, sizeof y,
		 "name: %s\n%scontainers: [{name: c, command: [/bin/sleep, '%s']}]\n"
		 "---\nname: %s\n%scontainers: [{name: c, command: [/bin/sleep, '%s']}]\n"
		 "---\nname: %s\n%scontainers: [{name: c, command: [/bin/sleep, '%s']}]\n",
		 a, ab, secs, b, ab, secs, c, c_labels, secs);
	write_file(d, "three.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/three.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
}

/* stop_args, printing exactly `stopped`: a and b stop, other runs on;
 * then start_args, printing exactly `started`: a and b run again. */
static void stop_then_start(d_t *d, const char *stop_args, const char *stopped,
			    const char *start_args, const char *started, const char *a,
			    const char *b, const char *other)
{
	char out[16384];

	cr_assert_eq(ctl(d, out, sizeof out, "%s", stop_args), 0, "%s", out);
	cr_assert_str_eq(out, stopped);
	cr_assert(wait_phase(d, a, "stopped", 20));
	cr_assert(wait_phase(d, b, "stopped", 20));
	cr_assert(phase_is(d, other, "running"), "%s was not asked for", other);
	cr_assert_eq(ctl(d, out, sizeof out, "%s", start_args), 0, "%s", out);
	cr_assert_str_eq(out, started);
	cr_assert(wait_phase(d, a, "running", 20));
	cr_assert(wait_phase(d, b, "running", 20));
}

/* stop and start take -l SELECTOR as restart does: every pod whose labels
 * match, one call each, in name order; the others are left alone.  At
 * 9,000 pods there was no way but 9,000 tankctl processes (docs/bench.md,
 * issue 38 round 8). */
Test(e2e, stop_and_start_by_selector_act_on_the_matching_pods_only)
{
	d_t *d = setup();
	char out[16384];

	apply_three(d, "sa", "sb", "sc", "labels: {tier: x}\n", "labels: {tier: y}\n", "1003");
	stop_then_start(d, "stop -l tier=x", "sa stopped\nsb stopped\n", "start pod -l tier=x",
			"sa started\nsb started\n", "sa", "sb", "sc");
	/* None: kubectl's words, exit 0. */
	cr_assert_eq(ctl(d, out, sizeof out, "stop -l tier=z"), 0, "%s", out);
	cr_assert(strstr(out, "No resources found"), "%s", out);
	/* A wait watches one object; names and -l do not mix. */
	cr_assert_eq(ctl(d, out, sizeof out, "stop -l tier=x --wait"), 2, "%s", out);
	cr_assert(strstr(out, "-l does not take --wait"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "stop sa -l tier=x"), 2, "%s", out);
	cr_assert(phase_is(d, "sa", "running"), "a refused stop stops nothing");
	teardown(d);
}

/* Several names, as `systemctl stop a b` and `docker stop a b` take them:
 * one call each in their order, a missing one named while the others
 * still go (exit 1); restart alike.  `stop web worker` said "unknown
 * kind 'web'" before.  --wait watches one object: not with several. */
Test(e2e, stop_start_and_restart_take_several_names)
{
	d_t *d = setup();
	char out[16384];

	apply_three(d, "na", "nb", "nc", "", "", "1004");
	stop_then_start(d, "stop nb na", "nb stopped\nna stopped\n", "start pod na pod/nb",
			"na started\nnb started\n", "na", "nb", "nc");

	/* A name that is no pod: named, exit 1, the others still stopped. */
	cr_assert_eq(ctl(d, out, sizeof out, "stop nosuch nc"), 1, "%s", out);
	cr_assert(strstr(out, "pod \"nosuch\" not found") && strstr(out, "nc stopped"), "%s", out);
	cr_assert(wait_phase(d, "nc", "stopped", 20));

	/* restart NAME…: each, a stopped one started. */
	long before = status_num(d, "na", "restarts");
	cr_assert_eq(ctl(d, out, sizeof out, "restart na nc"), 0, "%s", out);
	cr_assert_str_eq(out, "na restarted\nnc restarted\n");
	cr_assert(wait_phase(d, "nc", "running", 20));
	cr_assert_eq(ctl(d, out, sizeof out, "restart na nosuch"), 1, "%s", out);
	cr_assert(strstr(out, "na restarted") && strstr(out, "pod \"nosuch\" not found"), "%s", out);
	cr_assert_geq(status_num(d, "na", "restarts"), before);

	/* One wait watches one object; names of one kind at a time. */
	cr_assert_eq(ctl(d, out, sizeof out, "stop na nb --wait"), 2, "%s", out);
	cr_assert(strstr(out, "--wait watches one object"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "stop pod/na stack/x"), 2, "%s", out);
	cr_assert(strstr(out, "names of one kind at a time"), "%s", out);
	cr_assert(wait_phase(d, "na", "running", 20), "a refused stop stops nothing");
	cr_assert(!says(d, "stopped: true", "status na"), "a refused stop stops nothing");
	teardown(d);
}
