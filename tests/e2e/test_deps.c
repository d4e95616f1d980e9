/*
 * depends_on end to end (DESIGN.md §8): checked at apply against the batch
 * and the store, gating every start, and ordering stops.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

Test(deps, an_unknown_dependency_or_a_cycle_is_refused_and_nothing_is_applied)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "cycle.yaml",
		   "name: web\ndepends_on: [{pod: api, condition: ready}]\n"
		   "containers: [{name: c, command: [sleep, '100']}]\n---\n"
		   "name: api\ndepends_on: [{pod: db}]\ncontainers: [{name: c, command: [sleep, '100']}]\n---\n"
		   "name: db\ndepends_on: [{pod: web}]\ncontainers: [{name: c, command: [sleep, '100']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/cycle.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "cycle.yaml: document 1: web: depends_on: cycle: web -> api -> db -> web"), "%s", out);
	write_file(d, "unknown.yaml",
		   "name: web\ndepends_on: [{pod: nosuch}]\ncontainers: [{name: c, command: [sleep, '100']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/unknown.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "unknown.yaml: document 1: web: depends_on[0].pod: no pod named \"nosuch\" in this "
			 "apply or stored"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "ps"), 0, "%s", out);
	cr_assert_null(strstr(out, "web"), "a refused apply applies nothing: %s", out);

	/* A cycle through a stored pod is found too: db (stored) needs
	 * web, and web now asks for db. */
	write_file(d, "db.yaml", "name: db\ndepends_on: [{pod: web}]\nrestart: never\n"
		   "containers: [{name: c, command: ['true']}]\n---\n"
		   "name: web\ncontainers: [{name: c, command: [sleep, '100']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/db.yaml", d->dir), 0, "%s", out);
	write_file(d, "web.yaml", "name: web\ndepends_on: [{pod: db}]\n"
		   "containers: [{name: c, command: [sleep, '100']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "depends_on: cycle: web -> db -> web"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get web -o yaml"), 0, "%s", out);
	cr_assert_null(strstr(out, "depends_on"), "the stored web is unchanged: %s", out);
	teardown(d);
}

/* web needs init completed and db started.  Run with restart: never, web
 * fails for good if it starts before init has written its file. */
Test(deps, a_pod_waits_for_its_dependencies_then_starts)
{
	d_t *d = setup();
	char y[1600], out[8192], flag[128];

	snprintf(flag, sizeof flag, "%s/init-done", d->dir);
	snprintf(y, sizeof y,
		 "name: web\nrestart: never\n"
		 "depends_on: [{pod: init, condition: completed}, {pod: db, condition: ready}]\n"
		 "containers: [{name: c, command: [/bin/sh, -c, 'test -f %s || exit 7; exec sleep 100']}]\n"
		 "---\n"
		 "name: init\nrestart: never\n"
		 "containers: [{name: c, command: [/bin/sh, -c, 'sleep 1; touch %s']}]\n"
		 "---\n"
		 "name: db\ncontainers: [{name: c, command: [sleep, '100']}]\n", flag, flag);
	write_file(d, "app.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/app.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "web", "waiting", 10), "web waits while init runs");
	cr_assert_eq(ctl(d, out, sizeof out, "status web -o json"), 0, "%s", out);
	cr_assert(strstr(out, "waiting for init (completed)"), "the reason names it: %s", out);
	cr_assert(wait_phase(d, "web", "running", 20));
	cr_assert(phase_is(d, "init", "terminal"));
	cr_assert_eq(ctl(d, out, sizeof out, "status web -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"ready\": true"), "%s", out);

	/* Its dependency gone, web keeps running; a restart waits for it. */
	cr_assert_eq(ctl(d, out, sizeof out, "delete db"), 0, "%s", out);
	/* The delete is stored; sync waits until the pods' manager saw it. */
	cr_assert_eq(ctl(d, out, sizeof out, "sync"), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "restart web"), 0, "%s", out);
	cr_assert(wait_phase(d, "web", "waiting", 20));
	cr_assert_eq(ctl(d, out, sizeof out, "status web -o json"), 0, "%s", out);
	cr_assert(strstr(out, "waiting for db (ready): it does not exist"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/app.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "web", "running", 20), "db back: web starts");
	teardown(d);
}

/* Each container writes its name to a file when told to stop; web takes
 * 300 ms about it.  web depends on db, so db is stopped only after web is
 * gone: on a delete of both, and on tankd's own stop. */
Test(deps, dependents_stop_before_what_they_depend_on)
{
	d_t *d = setup();
	char y[1600], out[8192], order[128], got[256];

	snprintf(order, sizeof order, "%s/order", d->dir);
	snprintf(y, sizeof y,
		 "name: web\ndepends_on: [{pod: db}]\n"
		 "containers: [{name: c, command: [/bin/sh, -c, \"trap 'sleep 0.3; echo web >> %s; "
		 "exit 0' TERM; while :; do sleep 0.05; done\"]}]\n"
		 "---\n"
		 "name: db\n"
		 "containers: [{name: c, command: [/bin/sh, -c, \"trap 'echo db >> %s; exit 0' TERM; "
		 "while :; do sleep 0.05; done\"]}]\n", order, order);
	write_file(d, "app.yaml", y);
	for (int round = 0; round < 2; round++) {
		unlink(order);
		cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/app.yaml --wait --timeout 30s",
				 d->dir), 0, "%s", out);
		if (round == 0) {
			cr_assert_eq(ctl(d, out, sizeof out, "delete -f %s/app.yaml", d->dir), 0,
				     "%s", out);
			for (int t = 0; t < 400 && (read_text(order, got, sizeof got),
						    strcmp(got, "web\ndb\n") != 0); t++)
				sleep_ms(25);
		} else {
			cr_assert_eq(stop(d, SIGTERM), 0);
			read_text(order, got, sizeof got);
			start(d);
		}
		cr_assert_str_eq(got, "web\ndb\n", "round %d: web stops first", round);
	}
	teardown(d);
}
