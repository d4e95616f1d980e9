/*
 * A big apply's commit runs on the store's thread (docs/store.md
 * "Threads", api_methods.c "apply"): its answer still means durable, and
 * a tankd killed -9 while it commits keeps all of the batch or none of
 * it.  A real tankd; the pods wait for a dependency that never
 * completes, so one process runs, not thousands.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "tests/e2e/e2e.h"

enum { BATCH = 1200 };     /* past API_APPLY_CHUNK: the worker's path */

typedef struct batch {
	const char *prefix;
	int n;
} batch_t;

/* [[{name, labels: {grp}, depends_on: [{pod: ap-dep, condition:
 * completed}], containers: [{name: c, command: [/bin/true]}]} …]] */
static int pack_batch(msgpack_packer *pk, void *arg)
{
	const batch_t *b = arg;
	char name[64];
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, (size_t)b->n);
	for (int i = 0; i < b->n; i++) {
		snprintf(name, sizeof name, "%s-%04d", b->prefix, i);
		rc |= msgpack_pack_map(pk, 4);
		rc |= api_pack_cstr(pk, "name");
		rc |= api_pack_cstr(pk, name);
		rc |= api_pack_cstr(pk, "labels");
		rc |= msgpack_pack_map(pk, 1);
		rc |= api_pack_cstr(pk, "grp");
		rc |= api_pack_cstr(pk, b->prefix);
		rc |= api_pack_cstr(pk, "depends_on");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "pod");
		rc |= api_pack_cstr(pk, "ap-dep");
		rc |= api_pack_cstr(pk, "condition");
		rc |= api_pack_cstr(pk, "completed");
		rc |= api_pack_cstr(pk, "containers");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");
		rc |= api_pack_cstr(pk, "c");
		rc |= api_pack_cstr(pk, "command");
		rc |= msgpack_pack_array(pk, 1);
		rc |= api_pack_cstr(pk, "/bin/true");
	}
	return rc ? -ENOMEM : 0;
}

/* How many pods of group prefix tankd has stored. */
static int count_group(d_t *d, const char *prefix)
{
	size_t cap = (size_t)BATCH * 160 + 4096;
	char *out = malloc(cap), want[64];
	int n = 0;

	cr_assert_not_null(out);
	cr_assert_eq(ctl(d, out, cap, "get pods -l grp=%s", prefix), 0, "%.400s", out);
	snprintf(want, sizeof want, "\n%s-", prefix);
	for (const char *p = out; (p = strstr(p, want)); p++)
		n++;
	free(out);
	return n;
}

static void apply_dep(d_t *d)
{
	char out[4096];
	write_file(d, "dep.yaml", "name: ap-dep\ncontainers: [{name: c, command: [/bin/sleep, '1048']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dep.yaml", d->dir), 0, "%s", out);
}

/* The answer of a big apply comes once its commit (on the store's
 * thread) is durable: a kill -9 right after it finds every pod. */
Test(e2e, a_big_apply_answered_survives_a_kill9_right_after_the_answer)
{
	d_t *d = setup();
	api_client_t *c = NULL;
	api_incoming_t in;
	tank_error_t e;
	uint32_t id;
	batch_t b = { "apk", BATCH };

	apply_dep(d);
	cr_assert_eq(api_client_connect(d->sock, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(api_client_send(c, "apply", pack_batch, &b, 30000, &id, &e), 0, "%s", e.msg);
	memset(&in, 0, sizeof in);
	cr_assert_eq(api_client_wait(c, id, 30000, &in, &e), 0, "%s", e.msg);
	cr_assert_eq(in.code, API_OK, "apply answered %d", in.code);
	api_incoming_free(&in);
	api_client_close(c);
	stop(d, SIGKILL);
	start(d);
	cr_assert_eq(count_group(d, "apk"), BATCH, "every answered pod is stored");
	teardown(d);
}

/* A tankd killed -9 at some point of a big apply (while it validates,
 * while its commit runs on the store's thread, after): after a restart
 * the batch is all there or not at all, and all there if it was
 * answered.  The points are spread over the apply's few milliseconds;
 * which one a round hits depends on the machine, the property must hold
 * at each. */
Test(e2e, a_big_apply_killed_at_any_point_is_all_or_nothing)
{
	d_t *d = setup();
	static const int delay_ms[] = { 0, 3, 8, 15, 30 };
	int whole = 0, none = 0;

	apply_dep(d);
	for (size_t r = 0; r < sizeof delay_ms / sizeof delay_ms[0]; r++) {
		char prefix[16];
		api_client_t *c = NULL;
		api_incoming_t in;
		tank_error_t e;
		uint32_t id;
		snprintf(prefix, sizeof prefix, "apn%zu", r);
		batch_t b = { prefix, BATCH };
		cr_assert_eq(api_client_connect(d->sock, &c, &e), 0, "%s", e.msg);
		cr_assert_eq(api_client_send(c, "apply", pack_batch, &b, 30000, &id, &e), 0, "%s",
			     e.msg);
		if (delay_ms[r])
			sleep_ms(delay_ms[r]);
		stop(d, SIGKILL);
		/* An answer that came before the kill means durable. */
		memset(&in, 0, sizeof in);
		bool answered = api_client_wait(c, id, 100, &in, &e) == 0 && in.code == API_OK;
		api_incoming_free(&in);
		api_client_close(c);
		start(d);
		int n = count_group(d, prefix);
		cr_assert(n == 0 || n == BATCH, "round %zu (kill after %d ms): %d of %d stored", r,
			  delay_ms[r], n, BATCH);
		if (answered)
			cr_assert_eq(n, BATCH, "round %zu: answered, then lost", r);
		whole += n == BATCH;
		none += n == 0;
	}
	cr_log_info("all-or-nothing: %d rounds whole, %d none", whole, none);
	teardown(d);
}

/* A client that leaves before its big apply is answered: the apply is
 * still committed whole (nothing half-done, nobody to answer), and tankd
 * goes on serving. */
Test(e2e, a_big_apply_whose_client_left_is_committed_whole)
{
	d_t *d = setup();
	api_client_t *c = NULL;
	tank_error_t e;
	uint32_t id;
	char out[4096];
	batch_t b = { "apl", BATCH };

	apply_dep(d);
	cr_assert_eq(api_client_connect(d->sock, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(api_client_send(c, "apply", pack_batch, &b, 30000, &id, &e), 0, "%s", e.msg);
	api_client_close(c);
	/* Stored whole (polled: nobody is told when), then tankd goes on. */
	bool whole = false;
	for (int i = 0; i < 200 && !whole; i++) {
		whole = count_group(d, "apl") == BATCH;
		if (!whole)
			sleep_ms(50);
	}
	cr_assert(whole, "the batch was not committed whole");
	cr_assert_eq(ctl(d, out, sizeof out, "delete apl-0000"), 0, "%s", out);
	cr_assert(strstr(out, "apl-0000 deleted"), "%s", out);
	cr_assert_eq(count_group(d, "apl"), BATCH - 1);
	teardown(d);
}
