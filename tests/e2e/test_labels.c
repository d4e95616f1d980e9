/*
 * `labels:` and `-l SELECTOR` (issue 36 item 4) against a real tankd:
 * labels are checked once for every kind (the error names the field and
 * the rule), stored with the spec (get -o yaml shows them and applies
 * back unchanged), a labels-only change is "configured" but restarts no
 * container, and each selector form picks exactly its objects on ps,
 * get, delete, restart and logs; a malformed selector exits 2.  Every
 * kind's `status` map, of all and of one, carries created_at and labels.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <msgpack.h>

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "tests/e2e/e2e.h"

/* The first container's pid of pod name, from `status -o json`. */
static long pid_of(d_t *d, const char *name)
{
	char out[16384];
	const char *p;
	if (ctl(d, out, sizeof out, "status %s -o json", name) != 0 ||
	    !(p = strstr(out, "\"pid\": ")))
		return -1;
	return strtol(p + strlen("\"pid\": "), NULL, 10);
}

static void three_pods(d_t *d)
{
	char out[4096];
	write_file(d, "three.yaml",
		   "name: web\nlabels: {app: web, tier: front, example.com/owner: ann}\n"
		   "containers: [{name: c, command: [/bin/sleep, '7301']}]\n"
		   "---\nname: db\nlabels: {app: db, tier: back}\n"
		   "containers: [{name: c, command: [/bin/sleep, '7302']}]\n"
		   "---\nname: plain\n"
		   "containers: [{name: c, command: [/bin/sleep, '7303']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/three.yaml", d->dir), 0, "%s", out);
}

/* The names (first column) of a table, space-separated, header skipped. */
static const char *names_of(const char *table, char *buf, size_t cap)
{
	const char *p = strchr(table, '\n');
	size_t n = 0;
	buf[0] = '\0';
	while (p && *++p) {
		size_t l = strcspn(p, " \n");
		if (l && n + l + 2 < cap) {
			n += (size_t)snprintf(buf + n, cap - n, "%s%.*s", n ? " " : "", (int)l, p);
		}
		p = strchr(p, '\n');
	}
	return buf;
}

Test(e2e, bad_labels_are_refused_naming_the_field_and_the_rule_for_every_kind)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "bad.yaml",
		   "name: p\nlabels: {\"bad key\": x, ok: \"no good!\", \"-a.com/b\": c}\n"
		   "containers: [{name: c, command: [/bin/sleep, '1']}]\n"
		   "---\nkind: Stack\nname: s\nlabels: {good: \"\", \"x/\": y}\n"
		   "pods: [{name: sp, containers: [{name: c, command: [/bin/sleep, '1']}]}]\n"
		   "---\nkind: Task\nname: t\nlabels: [a]\n"
		   "templates: [{name: run, contents: \"echo\\n\"}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/bad.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "document 1: labels[\"bad key\"]: a key is an optional "
			 "DNS-subdomain prefix and '/', then a name of at most 63"), "%s", out);
	cr_assert(strstr(out, "labels[\"ok\"]: a value is empty or at most 63"), "%s", out);
	cr_assert(strstr(out, "labels[\"-a.com/b\"]"), "%s", out);
	/* Another kind, the same check: an empty value is fine, an empty
	 * name after the prefix is not. */
	cr_assert(strstr(out, "document 2: labels[\"x/\"]"), "%s", out);
	cr_assert(!strstr(out, "labels[\"good\"]"), "%s", out);
	cr_assert(strstr(out, "document 3: labels: must be a map"), "%s", out);
	/* All or nothing. */
	cr_assert_neq(ctl(d, out, sizeof out, "get p"), 0, "%s", out);
	/* A name of 64 characters is one too many; 63 is fine. */
	char y[1024], n63[64];
	memset(n63, 'a', 63);
	n63[63] = '\0';
	snprintf(y, sizeof y, "name: q\nlabels: {%sb: x}\n"
		 "containers: [{name: c, command: [/bin/sleep, '1']}]\n", n63);
	write_file(d, "long.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/long.yaml", d->dir), 1, "%s", out);
	snprintf(y, sizeof y, "name: q\nlabels: {%s: x, kind: Task, %s/%s: %s}\n"
		 "containers: [{name: c, command: [/bin/sleep, '1']}]\n", n63,
		 "sub.example.com", n63, n63);
	write_file(d, "long.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/long.yaml", d->dir), 0, "%s", out);
	teardown(d);
}

Test(e2e, labels_round_trip_and_a_labels_only_change_restarts_nothing)
{
	d_t *d = setup();
	char out[16384], y[512];

	write_file(d, "lp.yaml", "name: lp\nlabels: {tier: front, app: lp}\n"
		   "containers: [{name: c, command: [/bin/sleep, '7311']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/lp.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "lp", "running", 20));
	long pid = pid_of(d, "lp");
	cr_assert_gt(pid, 0);
	/* Stored, sorted by key: what get prints applies back unchanged. */
	cr_assert_eq(ctl(d, out, sizeof out, "get lp -o yaml"), 0, "%s", out);
	cr_assert(strstr(out, "labels:\n  app: lp\n  tier: front\n"), "%s", out);
	write_file(d, "back.yaml", out);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/back.yaml", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "lp unchanged"), "%s", out);
	/* In the status map too (every kind's, packed by its kind). */
	cr_assert_eq(ctl(d, out, sizeof out, "status lp -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"labels\": {"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "describe lp"), 0, "%s", out);
	cr_assert(strstr(out, "Labels:  app=lp\n         tier=front\n"), "%s", out);

	/* A labels-only change: configured, generation 2, the same process. */
	snprintf(y, sizeof y, "name: lp\nlabels: {tier: back}\n"
		 "containers: [{name: c, command: [/bin/sleep, '7311']}]\n");
	write_file(d, "lp.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/lp.yaml", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "lp configured"), "%s", out);
	cr_assert(wait_says(d, 10, "generation: 2", "get lp"));
	cr_assert_eq(ctl(d, NULL, 0, "sync"), 0);
	sleep_ms(1000);    /* three resync periods */
	cr_assert(phase_is(d, "lp", "running"));
	cr_assert_eq(pid_of(d, "lp"), pid, "a labels-only change restarted the container");
	cr_assert_eq(status_num(d, "lp", "restarts"), 0);
	cr_assert(says(d, "tier: back", "get lp -o yaml"));
	/* Without labels: none stored, describe says so. */
	write_file(d, "lp.yaml", "name: lp\n"
		   "containers: [{name: c, command: [/bin/sleep, '7311']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/lp.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get lp -o yaml"), 0, "%s", out);
	cr_assert(!strstr(out, "labels"), "%s", out);
	cr_assert(says(d, "Labels:  <none>", "describe lp"));
	/* A kind's objects of its own kind keep theirs too (a Stack's). */
	write_file(d, "st.yaml", "kind: Stack\nname: st\nlabels: {team: a}\n"
		   "pods: [{name: sp, containers: [{name: c, command: [/bin/sleep, '7312']}]}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/st.yaml", d->dir), 0, "%s", out);
	cr_assert(says(d, "labels:\n  team: a\n", "get stack st -o yaml"));
	cr_assert(says(d, "st ", "get stacks -l team=a"));
	teardown(d);
}

Test(e2e, each_selector_form_picks_its_pods_on_ps_and_get)
{
	d_t *d = setup();
	char out[16384], names[256];
	static const struct { const char *sel, *want; } cases[] = {
		{ "app=web", "web" },
		{ "app==db", "db" },
		{ "tier!=back", "plain web" },       /* absent counts as not equal */
		{ "tier", "db web" },
		{ "'!tier'", "plain" },
		{ "app=web,tier=front", "web" },
		{ "app=web,tier=back", "" },
		{ "example.com/owner=ann", "web" },
		{ "' app = db , tier '", "db" },
	};

	three_pods(d);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cr_assert_eq(ctl(d, out, sizeof out, "ps -l %s", cases[i].sel), 0, "%s", out);
		if (!cases[i].want[0]) {
			cr_assert(strstr(out, "No resources found"), "%s: %s", cases[i].sel, out);
			continue;
		}
		cr_assert_str_eq(names_of(out, names, sizeof names), cases[i].want, "ps -l %s: %s",
				 cases[i].sel, out);
		cr_assert_eq(ctl(d, out, sizeof out, "get pods -l %s", cases[i].sel), 0, "%s", out);
		cr_assert_str_eq(names_of(out, names, sizeof names), cases[i].want,
				 "get pods -l %s: %s", cases[i].sel, out);
	}
	/* With -o and -q: the same filter. */
	cr_assert_eq(ctl(d, out, sizeof out, "get pods -l app -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"name\": \"web\"") && strstr(out, "\"name\": \"db\"") &&
		  !strstr(out, "\"name\": \"plain\""), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "ps -q -l tier=back"), 0, "%s", out);
	cr_assert_str_eq(out, "db\n");
	/* -o name: KIND/NAME lines, as kubectl's (it was refused). */
	cr_assert_eq(ctl(d, out, sizeof out, "get pods -l app -o name"), 0, "%s", out);
	cr_assert_str_eq(out, "pod/db\npod/web\n");
	cr_assert_eq(ctl(d, out, sizeof out, "get pods -o name"), 0, "%s", out);
	cr_assert_str_eq(out, "pod/db\npod/plain\npod/web\n");
	cr_assert_eq(ctl(d, out, sizeof out, "get web -oname"), 0, "%s", out);
	cr_assert_str_eq(out, "pod/web\n");
	cr_assert_eq(ctl(d, out, sizeof out, "get nosuch -o name"), 1, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get pods -o wide"), 2, "%s", out);
	cr_assert(strstr(out, "-o takes yaml, json or name"), "%s", out);
	teardown(d);
}

Test(e2e, delete_and_restart_l_act_on_exactly_the_matches)
{
	d_t *d = setup();
	char out[16384], names[256];

	three_pods(d);
	cr_assert(wait_phase(d, "db", "running", 20));
	cr_assert(wait_phase(d, "web", "running", 20));
	long web = pid_of(d, "web"), db = pid_of(d, "db");
	cr_assert_eq(ctl(d, out, sizeof out, "restart -l app=db"), 0, "%s", out);
	cr_assert_str_eq(out, "db restarted\n");
	cr_assert(wait_phase(d, "db", "running", 20));
	for (int t = 0; t < 100 && pid_of(d, "db") == db; t++)
		sleep_ms(50);
	cr_assert_neq(pid_of(d, "db"), db, "db was restarted");
	cr_assert_eq(pid_of(d, "web"), web, "web was not");

	cr_assert_eq(ctl(d, out, sizeof out, "delete -l nothing=here"), 0, "%s", out);
	cr_assert(strstr(out, "No resources found"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete -l tier"), 0, "%s", out);
	cr_assert(strstr(out, "db deleted") && strstr(out, "web deleted"), "%s", out);
	/* A deleted pod is listed, "stopping" with reason "deleted", until
	 * its processes are gone (as kubectl's "Terminating"): wait for it
	 * (seen under SAN: ps came before the two sleeps were reaped). */
	for (int t = 0; t < 400; t++) {
		cr_assert_eq(ctl(d, out, sizeof out, "ps"), 0, "%s", out);
		if (!strcmp(names_of(out, names, sizeof names), "plain"))
			break;
		cr_assert(strstr(out, "deleted"), "%s", out);
		sleep_ms(50);
	}
	cr_assert_str_eq(names_of(out, names, sizeof names), "plain", "%s", out);
	teardown(d);
}

Test(e2e, logs_l_prefixes_each_line_with_its_pod)
{
	d_t *d = setup();
	char out[16384];

	write_file(d, "echo.yaml",
		   "name: ea\nlabels: {app: echo}\n"
		   "containers: [{name: c, command: [/bin/sh, -c, 'echo hello-a; exec /bin/sleep 7321']}]\n"
		   "---\nname: eb\nlabels: {app: echo}\n"
		   "containers: [{name: c, command: [/bin/sh, -c, 'echo hello-b; exec /bin/sleep 7322']}]\n"
		   "---\nname: ec\n"
		   "containers: [{name: c, command: [/bin/sh, -c, 'echo hello-c; exec /bin/sleep 7323']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/echo.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 20, "hello-b", "logs eb"));
	cr_assert(wait_says(d, 20, "hello-a", "logs ea"));
	cr_assert(wait_says(d, 20, "hello-c", "logs ec"));
	cr_assert_eq(ctl(d, out, sizeof out, "logs -l app=echo"), 0, "%s", out);
	cr_assert_str_eq(out, "[ea] hello-a\n[eb] hello-b\n");
	teardown(d);
}

Test(e2e, a_malformed_selector_exits_2_naming_it)
{
	d_t *d = setup();
	char out[4096];
	static const char *const verbs[] = { "ps", "get pods", "delete", "restart", "logs",
					     "events" };
	static const char *const bad[] = { "'bad key=x'", "a=b=c", "''", "a,,b", "'-x'",
					   "'a in (b)'" };

	three_pods(d);
	for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++)
		for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
			cr_assert_eq(ctl(d, out, sizeof out, "%s -l %s", verbs[v], bad[b]), 2,
				     "%s -l %s: %s", verbs[v], bad[b], out);
			cr_assert(strstr(out, "bad selector"), "%s -l %s: %s", verbs[v], bad[b],
				  out);
		}
	/* Nothing was deleted on the way. */
	cr_assert(says(d, "plain", "ps"));
	cr_assert(says(d, "web", "ps"));
	teardown(d);
}

Test(e2e, events_l_shows_only_the_matching_objects_also_those_made_since)
{
	d_t *d = setup();
	char out[65536], cmd[1024];
	size_t n = 0;

	write_file(d, "a.yaml", "name: eva\nlabels: {app: ev}\n"
		   "containers: [{name: c, command: [/bin/sleep, '7331']}]\n"
		   "---\nname: evb\ncontainers: [{name: c, command: [/bin/sleep, '7332']}]\n");
	write_file(d, "b.yaml", "name: evc\nlabels: {app: ev}\n"
		   "containers: [{name: c, command: [/bin/sleep, '7333']}]\n"
		   "---\nname: evd\nlabels: {app: other}\n"
		   "containers: [{name: c, command: [/bin/sleep, '7334']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "eva", "running", 20));
	cr_assert(wait_phase(d, "evb", "running", 20));
	/* The replay (objects known at the start), then evc and evd, made
	 * while the stream runs (looked up when their first event comes). */
	snprintf(cmd, sizeof cmd, "timeout 4 %s/tankctl --socket %s events -l app=ev --since 5m 2>&1",
		 bindir(), d->sock);
	FILE *p = popen(cmd, "r");
	cr_assert(p);
	sleep_ms(1000);
	cr_assert_eq(ctl(d, NULL, 0, "apply -f %s/b.yaml", d->dir), 0);
	while (n + 1 < sizeof out) {
		size_t k = fread(out + n, 1, sizeof out - 1 - n, p);
		if (!k)
			break;
		n += k;
	}
	out[n] = '\0';
	pclose(p);
	cr_assert(strstr(out, "pod=eva "), "%s", out);
	cr_assert(strstr(out, "pod=evc "), "made since: %s", out);
	cr_assert(!strstr(out, "pod=evb "), "no labels: %s", out);
	cr_assert(!strstr(out, "pod=evd "), "another value: %s", out);
	teardown(d);
}

/* ---- `status` answers: created_at and labels in every kind's map ---- */

typedef struct st_q { const char *name, *kind; } st_q_t;

/* [name|nil, {kind}] ([] for neither). */
static int pack_status_q(msgpack_packer *pk, void *arg)
{
	const st_q_t *q = arg;
	if (!q->name && !q->kind)
		return msgpack_pack_array(pk, 0);
	int rc = msgpack_pack_array(pk, 2);
	rc |= q->name ? api_pack_cstr(pk, q->name) : msgpack_pack_nil(pk);
	rc |= msgpack_pack_map(pk, 1);
	rc |= api_pack_cstr(pk, "kind");
	rc |= api_pack_cstr(pk, q->kind ? q->kind : "pod");
	return rc;
}

static const msgpack_object *key_of(const msgpack_object *m, const char *key, uint32_t *at)
{
	for (uint32_t i = 0; m->type == MSGPACK_OBJECT_MAP && i < m->via.map.size; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
		    !memcmp(k->via.str.ptr, key, k->via.str.size)) {
			if (at)
				*at = i;
			return &m->via.map.ptr[i].val;
		}
	}
	return NULL;
}

/* Status map m of an object created after t0 (ms): its created_at and,
 * when label is "k=v", that one label, both last and in that order;
 * label NULL: created_at last and no labels. */
static void meta_is(const msgpack_object *m, int64_t t0, const char *label)
{
	uint32_t at_i = 0, l_i = 0, n = m->via.map.size;
	const msgpack_object *at = key_of(m, "created_at", &at_i), *l = key_of(m, "labels", &l_i);
	cr_assert(at && at->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
		  (int64_t)at->via.u64 >= t0 && (int64_t)at->via.u64 < t0 + 600000,
		  "created_at: the object's creation");
	if (!label) {
		cr_assert_null(l, "an object without labels has no key");
		cr_assert_eq(at_i, n - 1, "created_at last");
		return;
	}
	cr_assert(l && l->type == MSGPACK_OBJECT_MAP && l->via.map.size == 1, "its labels");
	cr_assert(at_i == n - 2 && l_i == n - 1, "created_at, then labels, last");
	const char *eq = strchr(label, '=');
	char k[32];
	snprintf(k, sizeof k, "%.*s", (int)(eq - label), label);
	const msgpack_object *v = key_of(l, k, NULL);
	cr_assert(v && v->type == MSGPACK_OBJECT_STR && v->via.str.size == strlen(eq + 1) &&
		  !memcmp(v->via.str.ptr, eq + 1, v->via.str.size), "label %s", label);
}

/* The map named name in an array of status maps. */
static const msgpack_object *named(const msgpack_object *a, const char *name)
{
	cr_assert_eq(a->type, MSGPACK_OBJECT_ARRAY);
	for (uint32_t i = 0; i < a->via.array.size; i++) {
		const msgpack_object *n = key_of(&a->via.array.ptr[i], "name", NULL);
		if (n && n->type == MSGPACK_OBJECT_STR && n->via.str.size == strlen(name) &&
		    !memcmp(n->via.str.ptr, name, n->via.str.size))
			return &a->via.array.ptr[i];
	}
	cr_assert_fail("no status map named %s", name);
	return NULL;
}

static void ask(api_client_t *c, const char *method, st_q_t q, api_incoming_t *in)
{
	tank_error_t e;
	api_incoming_free(in);
	memset(in, 0, sizeof *in);
	cr_assert_eq(api_client_call(c, method, pack_status_q, &q, 10000, in, &e), 0, "%s", e.msg);
	cr_assert_eq(in->code, API_OK, "%s %s: %s", method, q.name ? q.name : "[]", in->message);
}

/* Every kind's status map, of `status` all and `status NAME`, carries
 * the object's created_at and labels (its kind packs them, once); the
 * status nested in `get` of a stack does not (it never did). */
Test(e2e, status_all_and_one_carry_created_at_and_labels_for_every_kind)
{
	d_t *d = setup();
	char out[4096];
	api_client_t *c = NULL;
	api_incoming_t in = { 0 };
	tank_error_t e;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t t0 = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - 1000;
	write_file(d, "m.yaml",
		   "name: sm-l\nlabels: {app: sm}\n"
		   "containers: [{name: c, command: [/bin/sleep, '7321']}]\n"
		   "---\nname: sm-n\n"
		   "containers: [{name: c, command: [/bin/sleep, '7322']}]\n"
		   "---\nkind: Stack\nname: sm-st\nlabels: {team: b}\n"
		   "pods: [{name: sm-sp, containers: [{name: c, command: [/bin/sleep, '7323']}]}]\n"
		   "---\nkind: Task\nname: sm-t\nlabels: {step: one}\n"
		   "templates:\n  - name: x\n    contents: \"true\\n\"\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/m.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "sm-l", "running", 20));
	cr_assert(wait_phase(d, "sm-n", "running", 20));
	cr_assert(wait_says(d, 20, "sm-st", "get stacks"));
	cr_assert_eq(api_client_connect(d->sock, &c, &e), 0, "%s", e.msg);

	ask(c, "status", (st_q_t){ NULL, NULL }, &in);
	meta_is(named(in.result, "sm-l"), t0, "app=sm");
	meta_is(named(in.result, "sm-n"), t0, NULL);
	meta_is(named(in.result, "sm-sp"), t0, NULL);
	ask(c, "status", (st_q_t){ "sm-l", NULL }, &in);
	meta_is(in.result, t0, "app=sm");
	ask(c, "status", (st_q_t){ "sm-n", NULL }, &in);
	meta_is(in.result, t0, NULL);

	ask(c, "status", (st_q_t){ NULL, "stack" }, &in);
	meta_is(named(in.result, "sm-st"), t0, "team=b");
	ask(c, "status", (st_q_t){ "sm-st", "stack" }, &in);
	meta_is(in.result, t0, "team=b");
	ask(c, "get", (st_q_t){ "sm-st", "stack" }, &in);
	const msgpack_object *nested = key_of(in.result, "status", NULL);
	cr_assert(nested && nested->type == MSGPACK_OBJECT_MAP);
	cr_assert(!key_of(nested, "created_at", NULL) && !key_of(nested, "labels", NULL),
		  "get's nested status is the kind's map alone");

	ask(c, "status", (st_q_t){ NULL, "task" }, &in);
	meta_is(named(in.result, "sm-t"), t0, "step=one");
	ask(c, "status", (st_q_t){ "sm-t", "task" }, &in);
	meta_is(in.result, t0, "step=one");

	api_incoming_free(&in);
	api_client_close(c);
	teardown(d);
}
