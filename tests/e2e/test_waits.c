/*
 * apply --wait and the verbs' --wait through the kinds' observations
 * (kinds/kind.h, docs/cli.md): a real tankd, real processes, tankctl.
 * A run-once pod converges only when it completed, and its failure fails
 * the wait; an applied stack is observed as its kind says; `up --wait`
 * and `down --wait` follow the events stream.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/e2e/e2e.h"

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
	teardown(d);
}
