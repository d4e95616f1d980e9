/*
 * What docs/cli.md promises of logs and of tankd's errors (issue 40 item
 * 11): every container's lines, each prefixed with its name; `logs -f`
 * returning once the pod ended and its log is drained; an error of
 * tankd's naming the file and document as local errors do, once.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <msgpack.h>

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "tests/e2e/e2e.h"

/* `logs POD` of a two-container pod showed the first container only. */
Test(e2e, logs_of_a_pod_shows_every_container_prefixed)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "two.yaml",
		   "name: two\ncontainers:\n"
		   "  - {name: a, command: [/bin/sh, -c, 'echo from-a; exec /bin/sleep 1050']}\n"
		   "  - {name: b, command: [/bin/sh, -c, 'sleep 0.2; echo from-b; exec /bin/sleep 1051']}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/two.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert(wait_says(d, 10, "from-b", "logs two"));
	cr_assert_eq(ctl(d, out, sizeof out, "logs two"), 0, "%s", out);
	char *a = strstr(out, "[a] "), *b = strstr(out, "[b] ");
	cr_assert(a && b && a < b, "both, in time order: %s", out);
	cr_assert(strstr(a, "[a] from-a\n") && strstr(b, "[b] from-b\n"),
		  "the lines as written: %s", out);
	/* -t: as tank stored them, with their time and stream. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs two -t"), 0, "%s", out);
	cr_assert(strstr(out, "[a] 20") && strstr(out, "Z stdout from-a\n"), "%s", out);
	/* -c: that container's, unprefixed, as before. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs two -c b"), 0, "%s", out);
	cr_assert(!strncmp(out, "from-b\n", 7) && !strstr(out, "from-a") && !strstr(out, "[b]"),
		  "%s", out);
	/* A name the running pod has not: said, as for a pod not reconciled
	 * yet (logs_of_a_pod_applied_a_moment_ago). */
	cr_assert_eq(ctl(d, out, sizeof out, "logs two -c nope"), 1, "%s", out);
	cr_assert(strstr(out, "pod \"two\" has no container \"nope\""), "%s", out);
	teardown(d);
}

/* `logs -f` of a pod that ended returns (it never did), with every line;
 * of one that ends while followed, once it ended and its log is drained. */
Test(e2e, logs_follow_returns_once_the_pod_ended)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "job.yaml",
		   "name: once\nrestart: never\ncontainers:\n"
		   "  - {name: c, command: [/bin/sh, -c, 'echo one; sleep 1; echo two']}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/job.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 10, "once", "ps"));
	sleep_ms(300);
	/* While it runs: -f returns after its last line. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs once -f"), 0, "%s", out);
	cr_assert(!strcmp(out, "one\ntwo\n"), "%s", out);
	cr_assert(phase_is(d, "once", "terminal"));
	/* Ended already: returns at once, with everything. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs once -f"), 0, "%s", out);
	cr_assert(!strcmp(out, "one\ntwo\n"), "%s", out);
	teardown(d);
}

/* `apply && logs -f`, as `kubectl apply && kubectl logs -f` is typed: the
 * logs were looked up in the pod's status, which the loop writes a moment
 * after the apply, so a pod applied a moment ago was `pod "x" not found`
 * (exit 1) to `logs` and to `logs -f`, which get, describe and ps showed.
 * Its spec names its containers: `logs` is empty, `logs -f` follows from
 * the first line until the pod ended. */
Test(e2e, logs_of_a_pod_applied_a_moment_ago)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "job.yaml",
		   "name: fresh\nrestart: never\ncontainers:\n"
		   "  - {name: c, command: [/bin/sh, -c, 'echo one; sleep 1; echo two']}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/job.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "logs fresh -f"), 0, "%s", out);
	cr_assert(!strcmp(out, "one\ntwo\n"), "%s", out);
	cr_assert(phase_is(d, "fresh", "terminal"));

	/* Deleted and applied again at once: a new object, whose log does not
	 * begin with its namesake's lines (still on disk until the loop takes
	 * the new one up). */
	cr_assert_eq(ctl(d, out, sizeof out, "delete fresh"), 0, "%s", out);
	write_file(d, "job2.yaml",
		   "name: fresh\nrestart: never\ncontainers:\n"
		   "  - {name: c, command: [/bin/sh, -c, 'echo three']}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/job2.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "logs fresh"), 0, "%s", out);
	cr_assert(!strstr(out, "one") && !strstr(out, "two"), "the old object's lines: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "logs fresh -c nope"), 1, "%s", out);
	cr_assert(strstr(out, "pod \"fresh\" has no container \"nope\""), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "logs fresh -f"), 0, "%s", out);
	cr_assert(!strcmp(out, "three\n"), "%s", out);
	/* A name that is no pod is still not found. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs nosuch -f"), 1, "%s", out);
	cr_assert(strstr(out, "pod \"nosuch\" not found"), "%s", out);
	teardown(d);
}

/* tankd's refusal named `pods[2]` and printed its first line twice;
 * local errors name the file and the document. */
Test(e2e, errors_from_tankd_name_the_file_and_document_once)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "ok.yaml", "name: e0\ncontainers: [{name: c, command: [/bin/sleep, '1052']}]\n");
	write_file(d, "err.yaml",
		   "name: e1\ncontainers: [{name: c, command: [/bin/sleep, '1053']}]\n---\n"
		   "name: e2\ncontainers: [{name: c, command: [/nope]}]\n---\n"
		   "name: e3\ndepends_on: [{pod: ghost}]\n"
		   "containers: [{name: c, command: [/bin/sleep, '1054']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/ok.yaml -f %s/err.yaml", d->dir, d->dir),
		     1, "%s", out);
	cr_assert(strstr(out, "tankctl: apply: 2 errors:\n"), "%s", out);
	cr_assert(strstr(out, "err.yaml: document 2: e2: containers[0].command[0]: /nope: not found"),
		  "%s", out);
	cr_assert(strstr(out, "err.yaml: document 3: e3: depends_on[0].pod: no pod named \"ghost\""),
		  "%s", out);
	cr_assert(!strstr(out, "pods["), "%s", out);
	char *first = strstr(out, "/nope: not found");
	cr_assert(first && !strstr(first + 1, "/nope: not found"), "once: %s", out);
	teardown(d);
}

/* kubectl's logs habits (issue 36): --tail 0 prints nothing and -1
 * everything, -n is --tail, --since keeps the recent lines, --previous
 * the run before the current one. */
Test(e2e, logs_tail_since_and_previous)
{
	d_t *d = setup();
	char out[65536], y[1024], runs[160];

	/* Each run prints its number (the count of lines in runs), 150 lines
	 * of it, then waits; run 1 exits after a second, run 2 stays. */
	snprintf(runs, sizeof runs, "%s/runs", d->dir);
	snprintf(y, sizeof y,
		 "name: lg\nrestart: always\nbackoff: {base: 100ms, cap: 100ms}\n"
		 "containers:\n  - name: c\n    command: [/bin/sh, -c, \"echo x >> %s; "
		 "r=$(wc -l < %s); i=0; while [ $i -lt 150 ]; do echo run$r-$i; i=$((i+1)); done; "
		 "[ $r -ge 2 ] && exec /bin/sleep 1062; sleep 1; exit 1\"]\n", runs, runs);
	write_file(d, "lg.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/lg.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 30, "run2-149", "logs lg"), "the second run logged");

	/* The default: the last 100 lines. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs lg"), 0, "%s", out);
	int n = 0;
	for (char *q = out; (q = strchr(q, '\n')); q++)
		n++;
	cr_assert_eq(n, 100, "%s", out);
	cr_assert(!strncmp(out, "run2-50\n", 8), "%s", out);
	/* 0: nothing; -1: all (both runs, 300 lines); -n is --tail. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs lg --tail 0"), 0, "%s", out);
	cr_assert_str_eq(out, "");
	cr_assert_eq(ctl(d, out, sizeof out, "logs lg --tail -1"), 0);
	cr_assert(!strncmp(out, "run1-0\n", 7) && strstr(out, "run2-149\n"), "%.200s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "logs lg -n 2"), 0, "%s", out);
	cr_assert_str_eq(out, "run2-148\nrun2-149\n");
	cr_assert_neq(ctl(d, out, sizeof out, "logs lg --tail -2"), 0);
	/* --previous: the first run, whole. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs lg --previous"), 0, "%s", out);
	cr_assert(!strncmp(out, "run1-0\n", 7) && strstr(out, "run1-149\n") &&
		  !strstr(out, "run2-"), "%.300s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "logs lg -p -n 1"), 0, "%s", out);
	cr_assert_str_eq(out, "run1-149\n");
	/* --since: the lines of the last moments only (none in 1 ms, all in
	 * a minute). */
	sleep_ms(300);
	cr_assert_eq(ctl(d, out, sizeof out, "logs lg --since 1ms"), 0, "%s", out);
	cr_assert_str_eq(out, "");
	cr_assert_eq(ctl(d, out, sizeof out, "logs lg --since 1m --tail -1"), 0, "%s", out);
	cr_assert(strstr(out, "run1-0\n") && strstr(out, "run2-149\n"), "%.200s", out);
	teardown(d);
}

typedef struct logs_call {
	const char *pod, *key;
	bool str;                 /* the value a string "x", else true */
} logs_call_t;

/* ["POD", {KEY: true|"x"}] */
static int pack_logs_opt(msgpack_packer *pk, void *arg)
{
	const logs_call_t *l = arg;
	int rc = msgpack_pack_array(pk, 2);
	rc |= api_pack_cstr(pk, l->pod);
	rc |= msgpack_pack_map(pk, 1);
	rc |= api_pack_cstr(pk, l->key);
	rc |= l->str ? api_pack_cstr(pk, "x") : msgpack_pack_true(pk);
	return rc ? -ENOMEM : 0;
}

/* apply's [[], {key: …}] or subscribe's [{key: …}]: the value a
 * string "x" when str, else true. */
typedef struct api_opt_call { bool apply; const char *key; bool str; } api_opt_call_t;

static int pack_opt_call(msgpack_packer *pk, void *arg)
{
	const api_opt_call_t *x = arg;
	int rc = msgpack_pack_array(pk, x->apply ? 2 : 1);
	if (x->apply)
		rc |= msgpack_pack_array(pk, 0);
	rc |= msgpack_pack_map(pk, 1);
	rc |= api_pack_cstr(pk, x->key);
	rc |= x->str ? api_pack_cstr(pk, "x") : msgpack_pack_true(pk);
	return rc ? -ENOMEM : 0;
}

/* The logs RPC (and status, history) refuses an option it does not know, naming it (it was
 * ignored: `folow: true` answered at once as if nothing was asked), and
 * a follow that is not a boolean, as other options' bad values. */
Test(e2e, logs_rpc_refuses_an_unknown_option_naming_it)
{
	d_t *d = setup();
	char out[4096];
	api_client_t *c = NULL;
	api_incoming_t in;
	tank_error_t e;

	write_file(d, "lo.yaml", "name: lo\ncontainers: [{name: c, command: [/bin/sh, -c, "
		   "'echo hi; exec sleep 1079']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/lo.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(api_client_connect(d->sock, &c, &e), 0, "%s", e.msg);
	static const struct { logs_call_t call; int code; const char *says; } c_[] = {
		{ { "lo", "folow", false }, API_BAD_REQUEST,
		  "params[1]: unknown option \"folow\" (the options are container, tail, since, "
		  "until, follow)" },
		{ { "lo", "follow", true }, API_BAD_REQUEST, "params[1].follow: expected a boolean" },
		{ { "lo", "tail", true }, API_BAD_REQUEST, "params[1].tail: expected an integer" },
		{ { "lo", "container", true }, API_NOT_FOUND, "has no container \"x\"" },
	};
	for (size_t i = 0; i < sizeof c_ / sizeof c_[0]; i++) {
		memset(&in, 0, sizeof in);
		cr_assert_eq(api_client_call(c, "logs", pack_logs_opt, (void *)&c_[i].call, 30000,
					     &in, &e), 0, "%s", e.msg);
		cr_assert_eq(in.code, c_[i].code, "%s: %d %s", c_[i].call.key, in.code, in.message);
		if (c_[i].says)
			cr_assert(strstr(in.message, c_[i].says), "%s", in.message);
		api_incoming_free(&in);
	}
	/* status and history the same: a misspelt `kind` read the pods. */
	static const struct { const char *method; logs_call_t call; const char *says; } o_[] = {
		{ "status", { "lo", "knid", true }, "params[1]: unknown option \"knid\" (the options "
		  "are kind)" },
		{ "history", { "lo", "limt", true }, "params[1]: unknown option \"limt\" (the options "
		  "are kind, limit)" },
	};
	for (size_t i = 0; i < sizeof o_ / sizeof o_[0]; i++) {
		memset(&in, 0, sizeof in);
		cr_assert_eq(api_client_call(c, o_[i].method, pack_logs_opt, (void *)&o_[i].call,
					     30000, &in, &e), 0, "%s", e.msg);
		cr_assert_eq(in.code, API_BAD_REQUEST, "%s: %d %s", o_[i].method, in.code,
			     in.message);
		cr_assert(strstr(in.message, o_[i].says), "%s", in.message);
		api_incoming_free(&in);
	}
	/* apply and subscribe name the option too (they said "the options
	 * are …" whatever was wrong). */
	static const struct { const char *method; const char *key; bool str; const char *says; } a_[] = {
		{ "apply", "dryrun", false, "params[1]: unknown option \"dryrun\" (the options are "
		  "dry_run, diff)" },
		{ "apply", "diff", true, "params[1].diff: expected a boolean" },
		{ "subscribe", "sinse", false, "params[0]: unknown option \"sinse\" (the option is "
		  "since)" },
		{ "subscribe", "since", true, "params[0].since: expected milliseconds" },
	};
	for (size_t i = 0; i < sizeof a_ / sizeof a_[0]; i++) {
		api_opt_call_t x = { a_[i].method[0] == 'a', a_[i].key, a_[i].str };
		memset(&in, 0, sizeof in);
		cr_assert_eq(api_client_call(c, a_[i].method, pack_opt_call, &x, 30000, &in, &e), 0,
			     "%s", e.msg);
		cr_assert_eq(in.code, API_BAD_REQUEST, "%s %s: %d %s", a_[i].method, a_[i].key,
			     in.code, in.message);
		cr_assert(strstr(in.message, a_[i].says), "%s", in.message);
		api_incoming_free(&in);
	}
	api_client_close(c);
	teardown(d);
}
