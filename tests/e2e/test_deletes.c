/*
 * delete through tankctl (issue 40 item 9, docs/cli.md): every -f counts,
 * a directory is read as apply reads it, what went with its owner is not
 * looked for again, and a pod whose dependency was deleted waits for it
 * when it starts again.  A real tankd, real processes.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <msgpack.h>

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "tests/e2e/e2e.h"

/* `delete -f a -f b` deleted only b and exited 0; `delete -f DIR` failed. */
Test(e2e, delete_takes_every_file_and_directories)
{
	d_t *d = setup();
	char out[8192];
	const char *a_argv[] = { "/bin/sleep", "1040", NULL };
	const char *b_argv[] = { "/bin/sleep", "1041", NULL };

	write_file(d, "a.yaml", "name: del-a\ncontainers: [{name: c, command: [/bin/sleep, '1040']}]\n");
	write_file(d, "b.yaml", "name: del-b\ncontainers: [{name: c, command: [/bin/sleep, '1041']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a.yaml -f %s/b.yaml --wait --timeout 20s",
			 d->dir, d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete -f %s/a.yaml -f %s/b.yaml", d->dir, d->dir), 0,
		     "%s", out);
	cr_assert(strstr(out, "del-a deleted\n") && strstr(out, "del-b deleted\n"), "%s", out);
	cr_assert(!says(d, "del-", "ps"), "both gone");
	for (int i = 0; i < 50 && count_procs(a_argv) + count_procs(b_argv); i++)
		sleep_ms(100);
	cr_assert_eq(count_procs(a_argv) + count_procs(b_argv), 0);

	/* A directory: its manifests, as apply reads it. */
	char dir[128];
	snprintf(dir, sizeof dir, "%s/m", d->dir);
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a.yaml -f %s/b.yaml", d->dir, d->dir), 0,
		     "%s", out);
	write_file(d, "m/a.yaml", "name: del-a\ncontainers: [{name: c, command: [/bin/sleep, '1040']}]\n");
	write_file(d, "m/b.yaml", "name: del-b\ncontainers: [{name: c, command: [/bin/sleep, '1041']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "delete -f %s", dir), 0, "%s", out);
	cr_assert(strstr(out, "del-a deleted\n") && strstr(out, "del-b deleted\n"), "%s", out);
	/* Again: nothing left, each named. */
	cr_assert_eq(ctl(d, out, sizeof out, "delete -f %s", dir), 1, "%s", out);
	cr_assert(strstr(out, "pod \"del-a\" not found") && strstr(out, "pod \"del-b\" not found"),
		  "%s", out);
	teardown(d);
}

/* A file holding a stack that owns a named pod, and that pod: the stack
 * takes the pod with it, and the pod is not looked for again (it said
 * `pod "md-p" not found`, exit 1, with everything deleted). */
Test(e2e, delete_of_a_stack_and_its_owned_pod_from_one_file)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "md.yaml",
		   "kind: Stack\nname: md\npods: [md-p]\nowns: [md-p]\n---\n"
		   "name: md-p\ncontainers: [{name: c, command: [/bin/sleep, '1042']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/md.yaml --wait --timeout 20s", d->dir), 0,
		     "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete -f %s/md.yaml", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "stack/md deleted\n") && strstr(out, "md-p deleted\n"), "%s", out);
	cr_assert(!strstr(out, "not found"), "%s", out);
	teardown(d);
}

/* A pod whose dependency was deleted keeps running (depends_on orders
 * starts); restarted, it waits, saying its dependency is missing. */
Test(e2e, a_restart_after_its_dependency_was_deleted_waits)
{
	d_t *d = setup();
	char out[8192];
	const char *argv[] = { "/bin/sleep", "1044", NULL };

	write_file(d, "dep.yaml",
		   "name: ddb\ncontainers: [{name: c, command: [/bin/sleep, '1043']}]\n---\n"
		   "name: dweb\ndepends_on: [{pod: ddb, condition: ready}]\n"
		   "containers: [{name: c, command: [/bin/sleep, '1044']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dep.yaml --wait --timeout 20s", d->dir), 0,
		     "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete ddb"), 0, "%s", out);
	cr_assert(phase_is(d, "dweb", "running"), "a dependency gates starts only");
	cr_assert_eq(ctl(d, out, sizeof out, "restart dweb"), 0, "%s", out);
	cr_assert(wait_says(d, 10, "waiting for ddb (ready): it does not exist", "status dweb"));
	sleep_ms(1000);
	cr_assert(phase_is(d, "dweb", "waiting"), "still waiting");
	cr_assert_eq(count_procs(argv), 0, "not started");
	teardown(d);
}

/* A delete is answered once one fsync covers it (its chunks commit
 * without one, the fsync runs on the store's thread): a client told
 * "deleted" finds the names deleted after a kill -9 right after the
 * answer.  1,200 names go through the bulk path (chunks of 500), one
 * through the small one.  The pods wait for one that never completes:
 * one process is started, not 1,200. */
Test(e2e, a_delete_answered_survives_a_kill9_right_after_the_answer)
{
	d_t *d = setup();
	enum { N = 1200 };
	size_t cap = (size_t)N * 256 + 512;
	char *text = malloc(cap), out[8192];
	size_t at = 0;

	cr_assert_not_null(text);
	for (int i = 0; i < N; i++)
		at += (size_t)snprintf(text + at, cap - at,
				       "name: k9-%04d\nlabels: {grp: k9}\n"
				       "depends_on: [{pod: k9-dep, condition: completed}]\n"
				       "containers: [{name: c, command: [/bin/true]}]\n---\n", i);
	at += (size_t)snprintf(text + at, cap - at,
			       "name: k9-one\ndepends_on: [{pod: k9-dep, condition: completed}]\n"
			       "containers: [{name: c, command: [/bin/true]}]\n---\n"
			       "name: k9-dep\ncontainers: [{name: c, command: [/bin/sleep, '1046']}]\n");
	write_file(d, "k9.yaml", text);
	free(text);
	size_t bcap = (size_t)N * 64 + 1024;
	char *big = malloc(bcap);
	cr_assert_not_null(big);
	int rc = ctl(d, big, bcap, "apply -f %s/k9.yaml", d->dir);
	cr_assert_eq(rc, 0, "%s", strlen(big) > 400 ? big + strlen(big) - 400 : big);
	cr_assert(says(d, "k9-1199", "get pods k9-1199"), "applied");

	/* The bulk delete's answer (packed a chunk at a time: every name
	 * in it, in order), then kill -9 at once. */
	rc = ctl(d, big, bcap, "delete -l grp=k9");
	cr_assert_eq(rc, 0, "%s", strlen(big) > 400 ? big + strlen(big) - 400 : big);
	stop(d, SIGKILL);
	char *first = strstr(big, "k9-0000 deleted\n"), *last = strstr(big, "k9-1199 deleted\n");
	cr_assert(first && last && first < last, "%.400s", big);
	free(big);
	start(d);
	cr_assert_eq(ctl(d, out, sizeof out, "get pods -l grp=k9"), 0, "%s", out);
	cr_assert(!strstr(out, "k9-0"), "no deleted name came back:\n%.400s", out);
	cr_assert(says(d, "k9-one", "get pods k9-one"), "the other pod is kept");

	/* The small one likewise. */
	cr_assert_eq(ctl(d, out, sizeof out, "delete k9-one"), 0, "%s", out);
	cr_assert(strstr(out, "k9-one deleted"), "%s", out);
	stop(d, SIGKILL);
	start(d);
	cr_assert_eq(ctl(d, out, sizeof out, "get pods k9-one"), 1, "%s", out);
	cr_assert(strstr(out, "not found"), "%s", out);
	teardown(d);
}

static int pack_one_name_list(msgpack_packer *pk, void *arg)
{
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, 1);
	return rc | api_pack_cstr(pk, arg);
}

static int pack_one_name(msgpack_packer *pk, void *arg)
{
	return msgpack_pack_array(pk, 1) | api_pack_cstr(pk, arg);
}

/* A delete waits for its fsync before it answers, but it is committed in
 * the call (its first chunk: all of a small one): a `get` the same client
 * sends right behind it, without waiting for the answer, finds the pod
 * gone; the delete's answer says it was deleted. */
Test(e2e, a_request_sent_behind_a_delete_reads_it_deleted)
{
	d_t *d = setup();
	char out[4096];
	api_client_t *c = NULL;
	api_incoming_t in;
	tank_error_t e;
	uint32_t del_id, get_id;

	write_file(d, "p.yaml", "name: pipe-a\ncontainers: [{name: c, command: [/bin/sleep, '1047']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/p.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(api_client_connect(d->sock, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(api_client_send(c, "delete", pack_one_name_list, "pipe-a", 2000, &del_id, &e),
		     0, "%s", e.msg);
	cr_assert_eq(api_client_send(c, "get", pack_one_name, "pipe-a", 2000, &get_id, &e), 0,
		     "%s", e.msg);
	memset(&in, 0, sizeof in);
	cr_assert_eq(api_client_wait(c, get_id, 5000, &in, &e), 0, "%s", e.msg);
	cr_assert_eq(in.code, API_NOT_FOUND, "get answered %d", in.code);
	api_incoming_free(&in);
	memset(&in, 0, sizeof in);
	cr_assert_eq(api_client_wait(c, del_id, 5000, &in, &e), 0, "%s", e.msg);
	cr_assert_eq(in.code, API_OK, "delete answered %d", in.code);
	api_incoming_free(&in);
	api_client_close(c);
	teardown(d);
}
