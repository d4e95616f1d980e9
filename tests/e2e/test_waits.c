/*
 * apply --wait and the verbs' --wait through the kinds' observations
 * (kinds/kind.h, docs/cli.md): a real tankd, real processes, tankctl.
 * A run-once pod converges only when it completed, and its failure fails
 * the wait; an applied stack is observed as its kind says; `up --wait`
 * and `down --wait` follow the events stream.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/e2e/e2e.h"

#include <time.h>

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* A restart: never pod that fails 0.3 s after it starts was seen running
 * at two passes and the wait said converged: it must say failed. */
Test(waits, a_run_once_pod_that_fails_soon_fails_the_wait)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "once.yaml",
		   "name: once\nrestart: never\n"
		   "containers: [{name: c, command: [/bin/sh, -c, 'sleep 0.3; exit 3']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/once.yaml --wait --timeout 20s", d->dir),
		     1, "%s", out);
	cr_assert(strstr(out, "apply: failed: once ("), "%s", out);
	cr_assert(strstr(out, "require_re_run: false"), "%s", out);
	cr_assert(phase_is(d, "once", "terminal"));
	teardown(d);
}

/* … and one that completes converges only then: the wait returns after
 * its exit, never while it runs. */
Test(waits, a_run_once_pod_converges_when_it_completes)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "once.yaml",
		   "name: once\nrestart: on_failure\n"
		   "containers: [{name: c, command: [/bin/sh, -c, 'sleep 1; exit 0']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/once.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert(strstr(out, "require_re_run: false"), "%s", out);
	cr_assert(says(d, "completed", "status once"), "done when the wait returns");
	teardown(d);
}

/* An applied stack is waited for through its kind: one past its
 * deadline is failed, and the wait names it. */
Test(waits, apply_wait_observes_the_stack)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "grp.yaml",
		   "kind: Stack\nname: grp\ndeadline: 2020-01-01T00:00:00Z\npods:\n"
		   "  - name: late\n"
		   "    containers: [{name: c, command: [/bin/sleep, '1010']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/grp.yaml --wait --timeout 30s", d->dir),
		     1, "%s", out);
	cr_assert(strstr(out, "stack/grp created"), "%s", out);
	cr_assert(strstr(out, "apply: grp failed: failed"), "the stack's own verdict: %s", out);

	/* A good one converges, stack and pod. */
	write_file(d, "ok.yaml",
		   "kind: Stack\nname: ok\npods:\n"
		   "  - name: svc\n    containers: [{name: c, command: [/bin/sleep, '1011']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/ok.yaml --wait --timeout 30s", d->dir),
		     0, "%s", out);
	cr_assert(says(d, "\"phase\": \"up\"", "status stack ok -o json"));
	teardown(d);
}

/* `down --wait` and `up --wait` end when the stack's events bring it
 * there (the subscribe stream), each printing the phase reached. */
Test(waits, up_and_down_wait_follow_the_events)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "ok.yaml",
		   "kind: Stack\nname: ok\npods:\n"
		   "  - name: svc\n    containers: [{name: c, command: [/bin/sleep, '1012']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/ok.yaml --wait --timeout 30s", d->dir),
		     0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "down ok --wait --timeout 30s"), 0, "%s", out);
	cr_assert(strstr(out, "stack/ok configured\nstack/ok down\n"), "%s", out);
	cr_assert(phase_is(d, "svc", "waiting"), "its pod is held");
	cr_assert_eq(ctl(d, out, sizeof out, "up ok --wait --timeout 30s"), 0, "%s", out);
	cr_assert(strstr(out, "stack/ok configured\nstack/ok up\n"), "%s", out);
	cr_assert(phase_is(d, "svc", "running"));
	/* An unknown stack: named, exit 1, no wait. */
	cr_assert_eq(ctl(d, out, sizeof out, "up nope --wait"), 1, "%s", out);
	cr_assert(strstr(out, "stack \"nope\" not found"), "%s", out);
	cr_assert_null(strstr(out, " is a "), "no other kind has it: %s", out);
	/* A pod's name: the message says what it is (it said only not found). */
	cr_assert_eq(ctl(d, out, sizeof out, "down svc"), 1, "%s", out);
	cr_assert(strstr(out, "stack \"svc\" not found\ntankctl: down: svc is a pod; "
			 "down acts on stacks\n"), "%s", out);
	/* A verb of two words is named whole (it said "workflow acts on"). */
	cr_assert_eq(ctl(d, out, sizeof out, "workflow status ok"), 1, "%s", out);
	cr_assert(strstr(out, "ok is a stack; workflow status acts on pods\n"), "%s", out);
	teardown(d);
}

/* ---- issue 40 item 2: a pod converges when it is ready -------------------- */

/* A readiness probe that never passes: running is not ready, and the
 * wait says so (it said converged, READY 0/1). */
Test(waits, a_pod_whose_readiness_never_passes_does_not_converge)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "nr.yaml",
		   "name: nr\nreconcile_wait: {static: 300ms}\n"
		   "containers:\n  - name: c\n    command: [/bin/sleep, '1020']\n"
		   "    readiness: {exec: [/bin/false], period: 100ms, failure_threshold: 2}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/nr.yaml --wait", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "require_re_run: true"), "%s", out);
	cr_assert(strstr(out, "not converged: nr (running, not ready: c: readiness: failed"),
		  "%s", out);
	/* ps's REASON says why READY is 0/1 (it was empty; only describe
	 * showed the probe). */
	cr_assert_eq(ctl(d, out, sizeof out, "ps nr"), 0, "%s", out);
	cr_assert(strstr(out, "0/1") && strstr(out, "c: readiness: failed: exit code 1"), "%s", out);
	teardown(d);
}

/* A startup probe that gives up is a failure of the wait, named at once
 * (the pod was running while its probe ran, and the wait said
 * converged). */
Test(waits, a_startup_probe_giving_up_fails_the_wait)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "sp.yaml",
		   "name: sp\nreconcile_wait: {static: 300ms}\nbackoff: {base: 10s}\n"
		   "containers:\n  - name: c\n    command: [/bin/sleep, '1021']\n"
		   "    startup: {exec: [/bin/false], period: 400ms, failure_threshold: 3}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/sp.yaml --wait --timeout 30s", d->dir),
		     1, "%s", out);
	cr_assert(strstr(out, "apply: sp failed: c: startup probe gave up"), "%s", out);
	cr_assert(strstr(out, "require_re_run: false"), "failed, not stuck: %s", out);
	teardown(d);
}

/* A readiness probe that passes after a while inside its window: the
 * wait goes on while the probe may still pass, and converges then. */
Test(waits, a_pod_converges_once_its_readiness_passes)
{
	d_t *d = setup();
	char out[8192];
	char yaml[1024];

	snprintf(yaml, sizeof yaml,
		 "name: slow\nreconcile_wait: {static: 300ms}\n"
		 "containers:\n  - name: c\n"
		 "    command: [/bin/sh, -c, 'sleep 3; : > %s/slow.ok; exec /bin/sleep 1022']\n"
		 "    readiness: {exec: [/bin/sh, -c, 'test -f %s/slow.ok'], period: 200ms,"
		 " failure_threshold: 25}\n", d->dir, d->dir);
	write_file(d, "slow.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/slow.yaml --wait", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "inside its probe window"), "%s", out);
	cr_assert(says(d, "\"ready\": true", "status slow -o json"), "ready when the wait ends");
	teardown(d);
}

/* ---- issue 40 item 3: what still moves is progress ------------------------- */

/* A dependant waits on a dependency whose probe is inside its window:
 * progress (the wait gave up after 3 passes: 3 s apart, the stack's
 * default, the dependency ready after 13 s).  Then the case: a
 * dependency ready only after its window, with a --timeout: the user's
 * deadline bounds the wait, the no-progress rule only ends what is truly
 * stuck. */
Test(waits, a_dependant_of_a_slow_dependency_is_progress)
{
	d_t *d = setup();
	char out[8192];
	char yaml[2048];
	const char *thr[] = { "80", "2" };
	const char *args[] = { "", " --timeout 40s" };

	for (int i = 0; i < 2; i++) {
		snprintf(yaml, sizeof yaml,
			 "kind: Stack\nname: st%d\npods:\n"
			 "  - name: db%d\n    reconcile_wait: {static: 300ms}\n"
			 "    containers:\n      - name: c\n"
			 "        command: [/bin/sh, -c, 'sleep 13; : > %s/db%d.ok; exec /bin/sleep 1023']\n"
			 "        readiness: {exec: [/bin/sh, -c, 'test -f %s/db%d.ok'], period: 200ms,"
			 " failure_threshold: %s}\n"
			 "  - name: web%d\n    reconcile_wait: {static: 300ms}\n"
			 "    depends_on: [{pod: db%d, condition: ready}]\n"
			 "    containers: [{name: c, command: [/bin/sleep, '1024']}]\n",
			 i, i, d->dir, i, d->dir, i, thr[i], i, i);
		char name[32];
		snprintf(name, sizeof name, "st%d.yaml", i);
		write_file(d, name, yaml);
		cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/%s --wait%s", d->dir, name,
				 args[i]), 0, "case %d: %s", i, out);
		cr_assert(strstr(out, "require_re_run: false"), "%s", out);
		char web[16];
		snprintf(web, sizeof web, "web%d", i);
		cr_assert(phase_is(d, web, "running"), "case %d", i);
	}
	teardown(d);
}

/* A dependency outside the batch (applied earlier) that is still inside
 * its probe window makes its dependant's wait go on. */
Test(waits, a_dependency_outside_the_batch_is_looked_at)
{
	d_t *d = setup();
	char out[8192];
	char yaml[1024];

	snprintf(yaml, sizeof yaml,
		 "name: odb\n"
		 "containers:\n  - name: c\n"
		 "    command: [/bin/sh, -c, 'sleep 3; : > %s/odb.ok; exec /bin/sleep 1025']\n"
		 "    readiness: {exec: [/bin/sh, -c, 'test -f %s/odb.ok'], period: 200ms,"
		 " failure_threshold: 25}\n", d->dir, d->dir);
	write_file(d, "odb.yaml", yaml);
	write_file(d, "oweb.yaml",
		   "name: oweb\nreconcile_wait: {static: 300ms}\n"
		   "depends_on: [{pod: odb, condition: ready}]\n"
		   "containers: [{name: c, command: [/bin/sleep, '1026']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/odb.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/oweb.yaml --wait", d->dir), 0, "%s", out);
	cr_assert(phase_is(d, "oweb", "running"));
	teardown(d);
}

/* A crash loop under a --timeout still ends early: it is truly stuck. */
Test(waits, a_crash_loop_ends_a_bounded_wait_early)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "cl.yaml",
		   "name: cl\nreconcile_wait: {static: 300ms}\nbackoff: {base: 100ms, cap: 100ms}\n"
		   "containers: [{name: c, command: [/bin/sh, -c, 'exit 5']}]\n");
	uint64_t t0 = now_ms();
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/cl.yaml --wait --timeout 60s", d->dir),
		     1, "%s", out);
	cr_assert(strstr(out, "no progress in 3 passes"), "%s", out);
	cr_assert_lt(now_ms() - t0, 20000, "long before the timeout");
	teardown(d);
}

/* ---- issue 40 item 4: stack waits tell the truth --------------------------- */

/* `up --wait` of an aborted stack waits for the lift: it read the
 * status from before (failed) and exited 1 in 2 ms. */
Test(waits, up_wait_of_an_aborted_stack_waits_for_the_lift)
{
	d_t *d = setup();
	char out[8192];
	char yaml[1024];

	snprintf(yaml, sizeof yaml,
		 "kind: Stack\nname: ab\non_failure: abort\npods:\n"
		 "  - name: ab-ok\n    containers: [{name: c, command: [/bin/sleep, '1027']}]\n"
		 "  - name: ab-bad\n    backoff: {base: 100ms, max_retries: 1}\n"
		 "    containers: [{name: c, command: [/bin/sh, -c,"
		 " 'test -f %s/ab.ok || exit 4; exec /bin/sleep 1028']}]\n", d->dir);
	write_file(d, "ab.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/ab.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 20, "\"phase\": \"failed\"", "status stack ab -o json"));
	write_file(d, "ab.ok", "");
	cr_assert_eq(ctl(d, out, sizeof out, "up ab --wait --timeout 30s"), 0, "%s", out);
	cr_assert(strstr(out, "stack/ab up\n"), "%s", out);
	cr_assert(phase_is(d, "ab-bad", "running"));
	teardown(d);
}

/* `down` of a failed stack (aborted, or past its deadline) is down: down
 * is what was asked. */
Test(waits, down_of_a_failed_stack_reaches_down)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "dl.yaml",
		   "kind: Stack\nname: dl\ndeadline: 2020-01-01T00:00:00Z\npods:\n"
		   "  - name: dl-a\n    containers: [{name: c, command: [/bin/sleep, '1029']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dl.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 20, "\"phase\": \"failed\"", "status stack dl -o json"));
	cr_assert_eq(ctl(d, out, sizeof out, "down dl --wait --timeout 20s"), 0, "%s", out);
	cr_assert(strstr(out, "stack/dl down\n"), "%s", out);
	cr_assert(says(d, "\"phase\": \"down\"", "status stack dl -o json"));
	/* up again: the deadline still holds, and the wait says so at once. */
	cr_assert_eq(ctl(d, out, sizeof out, "up dl --wait --timeout 20s"), 1, "%s", out);
	cr_assert(strstr(out, "deadline 2020-01-01T00:00:00Z passed"), "%s", out);
	teardown(d);
}

/* `down --wait` returns once the members' processes are gone, not while
 * one runs out its stop grace. */
Test(waits, down_wait_outlasts_the_grace)
{
	d_t *d = setup();
	char out[8192];
	const char *argv[] = { "/bin/sleep", "1030", NULL };

	write_file(d, "gr.yaml",
		   "kind: Stack\nname: gr\npods:\n"
		   "  - name: gr-a\n    stop: {grace: 2s}\n"
		   "    containers: [{name: c, command: [/bin/sh, -c,"
		   " 'trap \"\" TERM; /bin/sleep 1030']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/gr.yaml --wait --timeout 30s", d->dir),
		     0, "%s", out);
	cr_assert_eq(count_procs(argv), 1);
	uint64_t t0 = now_ms();
	cr_assert_eq(ctl(d, out, sizeof out, "down gr --wait --timeout 30s"), 0, "%s", out);
	cr_assert_geq(now_ms() - t0, 1500, "the grace ran out first: %s", out);
	cr_assert_eq(count_procs(argv), 0, "nothing of it runs when down --wait returns");
	teardown(d);
}

/* `apply --wait` of a stack desired down converges: its pods are held,
 * which is what was asked (it exited 1, the pods "waiting"). */
Test(waits, apply_wait_of_a_stack_desired_down_converges)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "sd.yaml",
		   "kind: Stack\nname: sd\ndesired: down\npods:\n"
		   "  - name: sd-a\n    reconcile_wait: {static: 300ms}\n"
		   "    containers: [{name: c, command: [/bin/sleep, '1031']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/sd.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert(strstr(out, "require_re_run: false"), "%s", out);
	cr_assert(phase_is(d, "sd-a", "waiting"));
	teardown(d);
}

/* `up --wait` of a stack degraded for good (a run-once member failed)
 * ends: no progress in 3 looks (it waited forever, or to the timeout). */
Test(waits, up_wait_of_a_stack_degraded_for_good_ends)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "dg.yaml",
		   "kind: Stack\nname: dg\npods:\n"
		   "  - name: dg-ok\n    containers: [{name: c, command: [/bin/sleep, '1032']}]\n"
		   "  - name: dg-once\n    restart: never\n"
		   "    containers: [{name: c, command: [/bin/sh, -c, 'exit 6']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dg.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 20, "\"phase\": \"degraded\"", "status stack dg -o json"));
	uint64_t t0 = now_ms();
	cr_assert_eq(ctl(d, out, sizeof out, "up dg --wait --timeout 90s"), 1, "%s", out);
	cr_assert(strstr(out, "no progress in 3 looks: stack dg is degraded"), "%s", out);
	cr_assert_lt(now_ms() - t0, 60000, "long before the timeout");
	teardown(d);
}

/* A crash loop is truly stuck, and so is what waits on it: a dependant
 * waiting for it and a stack it is a member of end a bounded wait before
 * the deadline ("no progress"), where they waited the whole --timeout. */
Test(waits, what_waits_on_a_crash_loop_is_stuck_too)
{
	d_t *d = setup();
	char out[16384];

	write_file(d, "dep.yaml",
		   "name: cl-db\nbackoff: {base: 100ms, cap: 200ms}\nreconcile_wait: {static: 300ms}\n"
		   "containers:\n  - name: c\n    command: [/bin/sh, -c, 'exit 4']\n"
		   "    readiness: {exec: [/bin/false], period: 1s}\n"
		   "---\nname: cl-api\nreconcile_wait: {static: 300ms}\n"
		   "depends_on: [{pod: cl-db, condition: ready}]\n"
		   "containers: [{name: c, command: [/bin/sleep, '1031']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dep.yaml --wait --timeout 120s", d->dir),
		     1, "%s", out);
	cr_assert(strstr(out, "no progress in 3 passes"), "ended by the deadline: %s", out);
	cr_assert(strstr(out, "cl-api (waiting: waiting for cl-db"), "%s", out);

	write_file(d, "st.yaml",
		   "kind: Stack\nname: cl\npods:\n"
		   "  - name: cl-s-db\n    backoff: {base: 100ms, cap: 200ms}\n"
		   "    containers: [{name: c, command: [/bin/sh, -c, 'exit 4']}]\n"
		   "  - name: cl-s-web\n    containers: [{name: c, command: [/bin/sleep, '1032']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/st.yaml --wait --timeout 120s", d->dir),
		     1, "%s", out);
	/* (The stack itself may read up in the instant its member runs:
	 * what counts is that the wait ends before its deadline.) */
	cr_assert(strstr(out, "no progress in 3 passes"), "ended by the deadline: %s", out);
	cr_assert_null(strstr(out, "timed out"), "%s", out);
	teardown(d);
}
