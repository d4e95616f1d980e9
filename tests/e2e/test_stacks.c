/*
 * Stacks end to end (DESIGN.md §8): a real tankd, real processes, driven
 * by tankctl — cascade up and down in dependency order, abort on an
 * escalated failure, schedule triggers, what apply refuses, what delete
 * takes, and what survives a restart of tankd.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "manifest/mf_doc.h"
#include "tests/e2e/e2e.h"

/* The file reads `want`, within secs: a pod is running from its exec on,
 * a moment before its shell has written its first line. */
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

static bool stack_phase_is(d_t *d, const char *name, const char *phase)
{
	char want[96];
	snprintf(want, sizeof want, "\"phase\": \"%s\"", phase);
	return says(d, want, "status stack %s -o json", name);
}

static bool wait_stack(d_t *d, const char *name, const char *phase, int secs)
{
	char want[96];
	snprintf(want, sizeof want, "\"phase\": \"%s\"", phase);
	return wait_says(d, secs, want, "status stack %s -o json", name);
}

/* db becomes ready 0.5 s after it starts (its readiness probe looks for
 * the file); web depends on it.  Each notes its start and its stop in one
 * file, so the order of both is visible. */
Test(stacks, up_and_down_cascade_in_dependency_order)
{
	d_t *d = setup();
	char y[2400], out[8192], log[128], got[512], flag[128];

	snprintf(log, sizeof log, "%s/order", d->dir);
	snprintf(flag, sizeof flag, "%s/db-ready", d->dir);
	snprintf(y, sizeof y,
		 "kind: Stack\nname: shop\npods:\n"
		 "  - name: db\n"
		 "    containers:\n"
		 "      - name: c\n"
		 "        command: [/bin/sh, -c, \"echo start db >> %s; trap 'rm -f %s; echo stop db >> %s; exit 0' TERM; "
		 "sleep 0.5; touch %s; while :; do sleep 0.05; done\"]\n"
		 "        readiness: {exec: [/bin/sh, -c, 'test -f %s'], period: 100ms}\n"
		 "  - name: web\n"
		 "    depends_on: [{pod: db, condition: ready}]\n"
		 "    containers:\n"
		 "      - name: c\n"
		 "        command: [/bin/sh, -c, \"echo start web >> %s; trap 'sleep 0.3; echo stop web >> %s; exit 0' TERM; "
		 "while :; do sleep 0.05; done\"]\n",
		 log, flag, log, flag, flag, log, log);
	write_file(d, "shop.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/shop.yaml", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "stack/shop created"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "up shop --wait --timeout 30s"), 0, "%s", out);
	cr_assert(strstr(out, "stack/shop up"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status stack shop -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"ready\": 2") && strstr(out, "\"total\": 2"), "%s", out);
	cr_assert(file_becomes(log, "start db\nstart web\n", got, sizeof got, 10),
		  "web starts once db is ready: %s", got);

	/* ps groups the pods under their stack. */
	cr_assert_eq(ctl(d, out, sizeof out, "ps"), 0, "%s", out);
	cr_assert(strstr(out, "STACK") && strstr(out, "stack shop:") && strstr(out, "web"),
		  "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status web -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"stack\": \"shop\""), "%s", out);

	/* Down: web stops first, then db; both wait, naming the stack. */
	cr_assert_eq(ctl(d, out, sizeof out, "down shop --wait --timeout 30s"), 0, "%s", out);
	read_text(log, got, sizeof got);
	cr_assert_str_eq(got, "start db\nstart web\nstop web\nstop db\n");
	cr_assert(wait_phase(d, "db", "waiting", 10));
	cr_assert_eq(ctl(d, out, sizeof out, "status db -o json"), 0, "%s", out);
	cr_assert(strstr(out, "stack shop is down"), "%s", out);

	/* It stays down across a restart of tankd. */
	cr_assert_eq(stop(d, SIGTERM), 0);
	start(d);
	cr_assert_eq(ctl(d, out, sizeof out, "sync"), 0, "%s", out);
	sleep_ms(500);
	read_text(log, got, sizeof got);
	cr_assert_str_eq(got, "start db\nstart web\nstop web\nstop db\n", "nothing started");
	cr_assert(stack_phase_is(d, "shop", "down"));

	/* Up again: the same order. */
	cr_assert_eq(ctl(d, out, sizeof out, "up shop --wait --timeout 30s"), 0, "%s", out);
	cr_assert(file_becomes(log, "start db\nstart web\nstop web\nstop db\nstart db\nstart web\n",
			       got, sizeof got, 10), "%s", got);
	cr_assert_eq(ctl(d, out, sizeof out, "history stack shop"), 0, "%s", out);
	cr_assert(strstr(out, "stopping") && strstr(out, "down") && strstr(out, "up"), "%s", out);
	cr_assert(strstr(out, "stack/shop "), "%s", out);

	/* tankd restarted under an up stack: its pods start again, and it
	 * says so rather than calling itself degraded. */
	cr_assert_eq(stop(d, SIGTERM), 0);
	start(d);
	cr_assert(wait_stack(d, "shop", "up", 30));
	cr_assert_eq(ctl(d, out, sizeof out, "history stack shop"), 0, "%s", out);
	cr_assert(strstr(out, "starting (tankd restarted)"), "%s", out);
	cr_assert_null(strstr(out, "degraded"), "%s", out);
	teardown(d);
}

/* One pod exhausts backoff.max_retries: with on_failure: abort the whole
 * stack goes down, failed, naming the pod; with continue it stays up,
 * degraded. */
Test(stacks, abort_brings_the_stack_down_and_continue_degrades_it)
{
	d_t *d = setup();
	char y[1600], out[8192];
	const char *const ok_argv[] = { "/bin/sleep", "1001", NULL };

	for (int round = 0; round < 2; round++) {
		snprintf(y, sizeof y,
			 "kind: Stack\nname: st\non_failure: %s\npods:\n"
			 "  - name: ok\n"
			 "    containers: [{name: c, command: [/bin/sleep, '1001']}]\n"
			 "  - name: bad\n"
			 "    backoff: {base: 20ms, cap: 50ms, max_retries: 2}\n"
			 "    containers: [{name: c, command: [/bin/sh, -c, 'sleep 0.2; exit 3']}]\n",
			 round == 0 ? "abort" : "continue");
		write_file(d, "st.yaml", y);
		cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/st.yaml", d->dir), 0, "%s", out);
		if (round == 0) {
			cr_assert(wait_stack(d, "st", "failed", 30), "the stack is aborted");
			cr_assert_eq(ctl(d, out, sizeof out, "status stack st -o json"), 0, "%s", out);
			cr_assert(strstr(out, "pod bad") && strstr(out, "backoff.max_retries"),
				  "the reason names the pod and why: %s", out);
			cr_assert(wait_phase(d, "ok", "waiting", 10), "ok is stopped");
			cr_assert_eq(count_procs(ok_argv), 0);
			cr_assert_eq(ctl(d, out, sizeof out, "status ok -o json"), 0, "%s", out);
			cr_assert(strstr(out, "stack st aborted: pod bad"), "%s", out);
		} else {
			/* The new generation lifts the abort; ok runs again. */
			cr_assert(wait_phase(d, "ok", "running", 20));
			cr_assert(wait_phase(d, "bad", "terminal", 30));
			cr_assert(wait_stack(d, "st", "degraded", 20));
			cr_assert_eq(ctl(d, out, sizeof out, "status stack st -o json"), 0, "%s", out);
			cr_assert(strstr(out, "pod bad"), "%s", out);
			sleep_ms(300);
			cr_assert(phase_is(d, "ok", "running"), "continue leaves the rest running");
			cr_assert_eq(wait_procs(ok_argv, 1, 10), 1);
		}
	}
	teardown(d);
}

/* start_at a few seconds ahead: nothing runs before it; then the stack
 * comes up by itself (a timer on the loop, no operator). */
Test(stacks, start_at_starts_the_stack_on_time)
{
	d_t *d = setup();
	char y[1600], out[8192], when[64];
	const char *const argv[] = { "/bin/sleep", "1002", NULL };
	time_t at = time(NULL) + 3;
	struct tm tm;

	gmtime_r(&at, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(y, sizeof y,
		 "kind: Stack\nname: later\nstart_at: %s\npods:\n"
		 "  - name: once\n    containers: [{name: c, command: [/bin/sleep, '1002']}]\n", when);
	write_file(d, "later.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/later.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "once", "waiting", 10));
	cr_assert_eq(ctl(d, out, sizeof out, "status once -o json"), 0, "%s", out);
	cr_assert(strstr(out, "stack later starts at"), "%s", out);
	cr_assert_eq(count_procs(argv), 0);
	cr_assert(stack_phase_is(d, "later", "down"));
	cr_assert(wait_stack(d, "later", "up", 20), "up after start_at");
	cr_assert(time(NULL) >= at, "not before start_at");
	cr_assert_eq(wait_procs(argv, 1, 10), 1);
	teardown(d);
}

Test(stacks, a_bad_stack_is_refused_naming_the_problem_and_nothing_is_applied)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "one.yaml",
		   "kind: Stack\nname: one\npods:\n"
		   "  - name: a\n    containers: [{name: c, command: [/bin/sleep, '100']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/one.yaml", d->dir), 0, "%s", out);

	/* A missing member, a pod of another stack, a bad time, and an
	 * inline pod with an error of its own: all named, nothing applied. */
	write_file(d, "bad.yaml",
		   "kind: Stack\nname: two\nstart_at: tomorrow\npods:\n"
		   "  - nosuch\n  - a\n"
		   "  - name: b\n    containers: [{name: c}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/bad.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "two: start_at: invalid time \"tomorrow\""), "%s", out);
	cr_assert(strstr(out, "two: pods[2]: b: containers[0].command: required"), "%s", out);
	write_file(d, "bad2.yaml",
		   "kind: Stack\nname: two\npods: [nosuch, a]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/bad2.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "two: pods[0]: no pod named \"nosuch\" in this apply or stored"),
		  "%s", out);
	cr_assert(strstr(out, "two: pods[1]: pod \"a\" is already in stack one"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get stack two"), 1, "%s", out);
	cr_assert(strstr(out, "stack \"two\" not found"), "%s", out);
	teardown(d);
}

/* Deleting a stack deletes the pods it owns (inline) and releases the
 * ones it only named. */
Test(stacks, delete_takes_the_owned_pods_and_releases_the_named)
{
	d_t *d = setup();
	char out[8192];
	const char *const own_argv[] = { "/bin/sleep", "1003", NULL };
	const char *const named_argv[] = { "/bin/sleep", "1004", NULL };

	write_file(d, "all.yaml",
		   "name: named\ncontainers: [{name: c, command: [/bin/sleep, '1004']}]\n---\n"
		   "kind: Stack\nname: grp\npods:\n"
		   "  - name: own\n    containers: [{name: c, command: [/bin/sleep, '1003']}]\n"
		   "  - named\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/all.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_stack(d, "grp", "up", 20));
	cr_assert_eq(ctl(d, out, sizeof out, "get stack grp"), 0, "%s", out);
	cr_assert(strstr(out, "owns:\n- own\n"), "%s", out);
	/* What get prints applies back unchanged (status and all). */
	write_file(d, "grp.yaml", out);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/grp.yaml", d->dir), 0, "%s", out);
	cr_assert_str_eq(out, "stack/grp unchanged\n");
	cr_assert_eq(ctl(d, out, sizeof out, "get stack"), 2, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get stacks -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"name\": \"grp\""), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete stack grp"), 0, "%s", out);
	cr_assert(strstr(out, "stack/grp deleted") && strstr(out, "own deleted"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "sync"), 0, "%s", out);
	for (int i = 0; i < 200 && count_procs(own_argv); i++)
		sleep_ms(50);
	cr_assert_eq(count_procs(own_argv), 0, "the owned pod is gone");
	cr_assert(phase_is(d, "named", "running"), "the named one stays");
	cr_assert_eq(wait_procs(named_argv, 1, 10), 1);
	cr_assert_eq(ctl(d, out, sizeof out, "status named -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"stack\": null"), "released: %s", out);

	/* Deleted and created again at once, without waiting: a new object
	 * that starts afresh. */
	cr_assert_eq(ctl(d, out, sizeof out, "delete stack grp --ignore-not-found"), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/all.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete stack grp"), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/all.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_stack(d, "grp", "up", 20));
	cr_assert_eq(wait_procs(own_argv, 1, 10), 1, "one, not two");
	cr_assert_eq(ctl(d, out, sizeof out, "history stack grp"), 0, "%s", out);
	cr_assert_null(strstr(out, "deleted"), "the history is the new object's: %s", out);
	teardown(d);
}

/* stop_at stops a stack (down); a deadline stops it early enough for its
 * pods' stop grace to end by then, and fails it. */
Test(stacks, stop_at_and_deadline_stop_the_pods)
{
	d_t *d = setup();
	char y[1600], out[8192], stop_at[64], deadline[64];
	const char *const brief_argv[] = { "/bin/sleep", "1005", NULL };
	const char *const bound_argv[] = { "/bin/sleep", "1006", NULL };
	time_t t1 = time(NULL) + 2, t2 = time(NULL) + 4;
	struct tm tm;

	gmtime_r(&t1, &tm);
	strftime(stop_at, sizeof stop_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
	gmtime_r(&t2, &tm);
	strftime(deadline, sizeof deadline, "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(y, sizeof y,
		 "kind: Stack\nname: brief\nstop_at: %s\npods:\n"
		 "  - name: brief-p\n    containers: [{name: c, command: [/bin/sleep, '1005']}]\n"
		 "---\n"
		 "kind: Stack\nname: bound\ndeadline: %s\npods:\n"
		 "  - name: bound-p\n    stop: {grace: 1s}\n"
		 "    containers: [{name: c, command: [/bin/sleep, '1006']}]\n", stop_at, deadline);
	write_file(d, "timed.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/timed.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_stack(d, "brief", "up", 10) || time(NULL) >= t1);
	cr_assert(wait_stack(d, "brief", "down", 20), "down at stop_at");
	cr_assert_eq(ctl(d, out, sizeof out, "status stack brief -o json"), 0, "%s", out);
	cr_assert(strstr(out, "(stop_at)"), "%s", out);
	cr_assert_eq(count_procs(brief_argv), 0);

	cr_assert(wait_stack(d, "bound", "failed", 20), "failed at its deadline");
	cr_assert_eq(ctl(d, out, sizeof out, "status stack bound -o json"), 0, "%s", out);
	cr_assert(strstr(out, "deadline"), "%s", out);
	cr_assert_eq(count_procs(bound_argv), 0, "nothing of it outlives the deadline");
	cr_assert_eq(ctl(d, out, sizeof out, "status bound-p -o json"), 0, "%s", out);
	cr_assert(strstr(out, "stack bound: deadline"), "%s", out);
	teardown(d);
}

/* [[doc, …]]: the documents of a YAML text, as the apply RPC takes them. */
static int pack_docs(msgpack_packer *pk, void *arg)
{
	const mf_docs_t *docs = arg;
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, docs->count);
	for (size_t i = 0; i < docs->count; i++)
		rc |= msgpack_pack_object(pk, docs->docs[i]);
	return rc ? -ENOMEM : 0;
}

/* The apply RPC of the documents of y, refused: its details, one a line. */
static void apply_refused(d_t *d, const char *y, char *all, size_t cap)
{
	mf_docs_t *docs = NULL;
	kit_errors_t errs;
	api_client_t *c = NULL;
	api_incoming_t in;
	tank_error_t e;

	kit_errors_init(&errs);
	cr_assert_eq(mf_docs_load(y, strlen(y), "t.yaml", &docs, &errs), 0);
	kit_errors_free(&errs);
	cr_assert_eq(api_client_connect(d->sock, &c, &e), 0, "%s", e.msg);
	memset(&in, 0, sizeof in);
	cr_assert_eq(api_client_call(c, "apply", pack_docs, docs, 30000, &in, &e), 0, "%s", e.msg);
	cr_assert_eq(in.code, API_INVALID, "%d %s", in.code, in.message);
	cr_assert(in.details && in.details->type == MSGPACK_OBJECT_ARRAY);
	all[0] = '\0';
	for (uint32_t i = 0; i < in.details->via.array.size; i++) {
		const msgpack_object *o = &in.details->via.array.ptr[i];
		size_t n = strlen(all);
		if (o->type == MSGPACK_OBJECT_STR)
			snprintf(all + n, cap - n, "%.*s\n", (int)o->via.str.size, o->via.str.ptr);
	}
	api_incoming_free(&in);
	api_client_close(c);
	mf_docs_free(docs);
}

/* The apply RPC names a problem where it is in the user's terms: a
 * Stack's as `stacks[N]: NAME: …` (it said `pods[N]`, N its index in
 * the request), a pod inline in it as the stack's field, and a pod after
 * a stack by its own index in the request (depends_on's check counted
 * the pods only); tankctl turns each into its file and document. */
Test(stacks, the_apply_rpc_names_a_stack_s_problems_by_its_kind_and_place)
{
	d_t *d = setup();
	char all[4096], out[4096];
	const char *refs =
		"name: rp-p0\ncontainers: [{name: c, command: [/bin/sleep, '1078']}]\n"
		"---\nkind: Stack\nname: rp-two\npods: [rp-p0, rp-nosuch]\n";
	const char *deps =
		"name: rp-p0\ncontainers: [{name: c, command: [/bin/sleep, '1078']}]\n"
		"---\nkind: Stack\nname: rp-two\npods:\n  - rp-p0\n"
		"  - name: rp-inl\n    depends_on: [{pod: rp-ghost}]\n"
		"    containers: [{name: c, command: [/bin/sleep, '1078']}]\n"
		"---\nname: rp-p2\ndepends_on: [{pod: rp-ghost2}]\n"
		"containers: [{name: c, command: [/bin/sleep, '1078']}]\n";

	apply_refused(d, refs, all, sizeof all);
	cr_assert(strstr(all, "stacks[1]: rp-two: pods[1]: no pod named \"rp-nosuch\" in this "
			 "apply or stored\n"), "%s", all);
	cr_assert(!strstr(all, "pods[1]: rp-two"), "%s", all);
	apply_refused(d, deps, all, sizeof all);
	cr_assert(strstr(all, "stacks[1]: rp-two: pods[1]: rp-inl: depends_on[0].pod: no pod "
			 "named \"rp-ghost\""), "%s", all);
	cr_assert(strstr(all, "pods[2]: rp-p2: depends_on[0].pod: no pod named \"rp-ghost2\""),
		  "%s", all);

	write_file(d, "refs.yaml", refs);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/refs.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "refs.yaml: document 2: rp-two: pods[1]: no pod named"), "%s", out);
	write_file(d, "deps.yaml", deps);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/deps.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "deps.yaml: document 2: rp-two: pods[1]: rp-inl: depends_on[0]"),
		  "%s", out);
	cr_assert(strstr(out, "deps.yaml: document 3: rp-p2: depends_on[0]"), "%s", out);
	teardown(d);
}
