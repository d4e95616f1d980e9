/*
 * The test kind, Note (tests/kinds/note_kind.c), end to end: a kind that
 * is its folder plus one line in the list of kinds, served by the test
 * build of tankd and driven by the test build of tankctl (the same
 * programs linked with tests/kinds/kinds_test.c).  Nothing in api/,
 * daemon/ or cmd/ knows it: apply, get, list, status, history, delete,
 * events, the `get notes` table and `apply --wait` come from its
 * descriptor.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_client.h"
#include "tests/e2e/e2e.h"

/* tankd and tankctl of the test build: bindir() reads TANK_BUILD_DIR. */
static void use_test_build(void)
{
	static char dir[512];
	const char *b = getenv("TANK_BUILD_DIR");
	snprintf(dir, sizeof dir, "%s/tests/kinds", b ? b : "build");
	setenv("TANK_BUILD_DIR", dir, 1);
}

/* The next event of the stream whose `type` is type and `field` is
 * value, within ms; false when none came. */
static bool event_seen(api_client_t *c, const char *type, const char *field,
		       const char *value, const char *to, int ms)
{
	api_incoming_t in;
	tank_error_t e;

	for (int waited = 0; waited < ms; waited += 100) {
		if (api_client_next(c, 100, &in, &e) < 0)
			continue;
		bool hit = false;
		if (in.type == API_NOTIFICATION && !strcmp(in.method, "event"))
			for (uint32_t i = 0; i < in.params->via.array.size; i++) {
				const msgpack_object *ev = &in.params->via.array.ptr[i];
				hit |= api_obj_streq(api_map_get(ev, "type"), type) &&
				       api_obj_streq(api_map_get(ev, field), value) &&
				       api_obj_streq(api_map_get(ev, "to"), to);
			}
		api_incoming_free(&in);
		if (hit)
			return true;
	}
	return false;
}

Test(note, a_kind_from_its_folder_and_one_line, .timeout = 60)
{
	use_test_build();
	d_t *d = setup();
	char out[8192];
	api_client_t *c;
	api_incoming_t in;
	tank_error_t e;

	/* The events stream, subscribed before anything happens. */
	cr_assert_eq(api_client_connect(d->sock, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(api_client_call(c, "subscribe", NULL, NULL, 5000, &in, &e), 0, "%s", e.msg);
	api_incoming_free(&in);

	/* apply --wait: validated by tankctl and tankd through its manifest
	 * entry, stored in its collection, reconciled by its manager, and
	 * observed for the wait through its descriptor. */
	write_file(d, "hello.yaml", "kind: Note\nname: hello\ntext: hi there\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/hello.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert(strstr(out, "note/hello created\n"), "%s", out);
	cr_assert(strstr(out, "require_re_run: false"), "%s", out);
	cr_assert(event_seen(c, "note", "note", "hello", "ready", 5000), "its event");

	/* get (its spec, kind and status), its names, its table. */
	cr_assert_eq(ctl(d, out, sizeof out, "get note hello"), 0, "%s", out);
	cr_assert(strstr(out, "kind: Note\n") && strstr(out, "text: hi there\n") &&
		  strstr(out, "phase: ready\n"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get nt hello -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"generation\": 1"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get notes"), 0, "%s", out);
	cr_assert(strstr(out, "NAME    PHASE   TEXT       AGE\n") &&
		  strstr(out, "hello   ready   hi there   "), "the table: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get notes -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"name\": \"hello\""), "list: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status note hello -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"phase\": \"ready\""), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get note"), 2, "a kind word alone: %s", out);

	/* A change goes back through pending; a note asked to fail fails the
	 * wait (exit 1), named with its reason. */
	write_file(d, "hello.yaml", "kind: Note\nname: hello\ntext: hi again\nfail: true\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/hello.yaml --wait --timeout 20s", d->dir),
		     1, "%s", out);
	cr_assert(strstr(out, "note/hello configured\n"), "%s", out);
	cr_assert(strstr(out, "apply: hello failed: failed: asked to fail"), "%s", out);
	cr_assert(event_seen(c, "note", "note", "hello", "failed", 5000), "its event");

	/* history: its transitions, through its collection. */
	cr_assert_eq(ctl(d, out, sizeof out, "history note hello"), 0, "%s", out);
	cr_assert(strstr(out, "pending   ready     written") &&
		  strstr(out, "ready     pending   spec changed") &&
		  strstr(out, "pending   failed    asked to fail"), "%s", out);

	/* Refused like any kind's manifest: all or nothing, the item named. */
	write_file(d, "bad.yaml", "kind: Note\nname: bad\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/bad.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "bad: text: required"), "%s", out);

	/* delete, then it is gone. */
	cr_assert_eq(ctl(d, out, sizeof out, "delete note hello"), 0, "%s", out);
	cr_assert_str_eq(out, "note/hello deleted\n");
	cr_assert_eq(ctl(d, out, sizeof out, "get note hello"), 1, "%s", out);
	cr_assert(strstr(out, "note \"hello\" not found"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete note hello"), 1, "%s", out);

	/* Pods and stacks are served as before beside it. */
	write_file(d, "p.yaml", "name: p\ncontainers: [{name: c, command: [/bin/sleep, '1013']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/p.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get pods"), 0, "%s", out);
	cr_assert(strstr(out, "NAME   PHASE     READY") && strstr(out, "\np      running   1/1"),
		  "%s", out);
	api_client_close(c);
	teardown(d);
}
