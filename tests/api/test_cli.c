/*
 * Unit tests of tankctl's pure logic (cmd/lib): socket path rule, ages,
 * tables, ps rows, reconcile_wait and the apply --wait loop decisions.
 *
 * The test binary links only build/libtank.a, not cmd/lib, so the modules
 * are compiled into this file (see docs/cli.md; the build change that
 * would avoid it is noted there).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/lib/cli_fmt.c"
#include "cmd/lib/cli_describe.c"
#include "cmd/lib/cli_paths.c"
#include "cmd/lib/cli_wait.c"
#include "pod/pod_spec.h"

Test(api, cli_socket_path_rule)
{
	char out[256];
	cli_env_t env = { .home = "/home/u", .euid = 1000 };

	cr_assert_eq(cli_socket_path(NULL, NULL, &env, out, sizeof out), 0);
	cr_assert_str_eq(out, "/home/u/.local/state/tank/tank.sock");
	env.xdg_state_home = "/xdg";
	cli_socket_path(NULL, NULL, &env, out, sizeof out);
	cr_assert_str_eq(out, "/xdg/tank/tank.sock");
	env.tank_data_dir = "/data";
	cli_socket_path(NULL, NULL, &env, out, sizeof out);
	cr_assert_str_eq(out, "/data/tank.sock");
	cli_socket_path(NULL, "/flagdir", &env, out, sizeof out);
	cr_assert_str_eq(out, "/flagdir/tank.sock");
	env.tank_socket = "/env.sock";
	cli_socket_path(NULL, NULL, &env, out, sizeof out);
	cr_assert_str_eq(out, "/env.sock");
	cli_socket_path("/flag.sock", NULL, &env, out, sizeof out);
	cr_assert_str_eq(out, "/flag.sock");

	cli_env_t root = { .home = "/root", .xdg_state_home = "/x", .euid = 0 };
	cli_socket_path(NULL, NULL, &root, out, sizeof out);
	cr_assert_str_eq(out, "/var/lib/tank/tank.sock");
	cli_env_t none = { .euid = 1000 };
	cr_assert_eq(cli_socket_path(NULL, NULL, &none, out, sizeof out), -ENOENT);
	char *tiny = malloc(8);
	cr_assert_eq(cli_socket_path("/a/long/path.sock", NULL, &env, tiny, 8),
		     -ENAMETOOLONG);
	free(tiny);
}

Test(api, cli_age_format)
{
	struct { uint64_t ms; const char *s; } c[] = {
		{ 0, "0s" }, { 999, "0s" }, { 5000, "5s" }, { 59999, "59s" },
		{ 60000, "1m" }, { 3 * 60000 + 59000, "3m" }, { 3600000 - 1, "59m" },
		{ 3600000, "1h" }, { 2 * 3600000 + 5, "2h" }, { 86400000 - 1, "23h" },
		{ 86400000, "1d" }, { 4 * 86400000ull + 7, "4d" },
	};
	char buf[16];
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		cli_format_age(c[i].ms, buf, sizeof buf);
		cr_assert_str_eq(buf, c[i].s, "%llu ms", (unsigned long long)c[i].ms);
	}
	cli_format_time(0, buf, sizeof buf);   /* too small: falls back, no overflow */
	char t[32];
	cli_format_time(1000, t, sizeof t);
	cr_assert_str_eq(t, "1970-01-01T00:00:01Z");
}

/* Builds status maps: name, phase, reason, restarts, since, containers. */
typedef struct st { const char *name, *phase, *reason; int restarts; uint64_t since;
		    int ncont, nrunning, pid; } st_t;

static void pack_status(msgpack_packer *pk, const st_t *s)
{
	bool terminal = strcmp(s->phase, "terminal") == 0;
	msgpack_pack_map(pk, 7);
	api_pack_cstr(pk, "name"); api_pack_cstr(pk, s->name);
	api_pack_cstr(pk, "phase"); api_pack_cstr(pk, s->phase);
	/* As tankd packs it: a terminal pod's outcome is what decides (its
	 * reason here names it too). */
	api_pack_cstr(pk, "outcome");
	if (terminal && s->reason) api_pack_cstr(pk, s->reason); else msgpack_pack_nil(pk);
	api_pack_cstr(pk, "reason");
	if (s->reason) api_pack_cstr(pk, s->reason); else msgpack_pack_nil(pk);
	api_pack_cstr(pk, "restarts"); msgpack_pack_int(pk, s->restarts);
	api_pack_cstr(pk, "since"); msgpack_pack_uint64(pk, s->since);
	api_pack_cstr(pk, "containers");
	msgpack_pack_array(pk, (size_t)s->ncont);
	for (int i = 0; i < s->ncont; i++) {
		msgpack_pack_map(pk, 3);
		api_pack_cstr(pk, "name"); api_pack_cstr(pk, "c");
		api_pack_cstr(pk, "phase");
		api_pack_cstr(pk, i < s->nrunning ? "running" : "backing_off");
		api_pack_cstr(pk, "pid");
		if (i == 0 && s->pid) msgpack_pack_int(pk, s->pid); else msgpack_pack_nil(pk);
	}
}

/* Unpacks a list of statuses into *up (caller destroys). */
static const msgpack_object *statuses(msgpack_unpacked *up, const st_t *s, int n)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, (size_t)n);
	for (int i = 0; i < n; i++)
		pack_status(&pk, &s[i]);
	/* The objects borrow their strings from the bytes: keep the bytes in
	 * the same zone, so msgpack_unpacked_destroy frees everything. */
	msgpack_unpacked_init(up);
	up->zone = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	char *bytes = msgpack_zone_malloc(up->zone, sb.size);
	memcpy(bytes, sb.data, sb.size);
	size_t off = 0;
	cr_assert_eq(msgpack_unpack(bytes, sb.size, &off, up->zone, &up->data),
		     MSGPACK_UNPACK_SUCCESS);
	msgpack_sbuffer_destroy(&sb);
	return &up->data;
}

Test(api, cli_ps_table_aligned)
{
	uint64_t now = 1000000000;
	st_t s[] = {
		{ "web", "running", NULL, 0, now - 5000, 2, 2, 4242 },
		{ "batch-job", "backing_off", "crashed", 12, now - 3 * 3600000, 1, 0, 0 },
	};
	msgpack_unpacked up;
	cli_table_t t;
	cr_assert_eq(cli_table_init(&t, CLI_PS_COLS, cli_ps_headers), 0);
	cr_assert_eq(cli_ps_table(statuses(&up, s, 2), now, &t), 0);
	char *out = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&out, &len);
	cr_assert_eq(cli_table_print(&t, fp), 0);
	fclose(fp);
	cr_assert_str_eq(out,
		"NAME        PHASE         READY   RESTARTS   AGE   PID    REASON\n"
		"batch-job   backing_off   0/1     12         3h    -      crashed\n"
		"web         running       2/2     0          5s    4242   \n");
	free(out);
	cli_table_free(&t);
	msgpack_unpacked_destroy(&up);
	cr_assert_eq(cli_ps_table(NULL, now, &t), -EINVAL);
}

Test(api, cli_reconcile_wait_kinds)
{
	rc_wait_t st = { .kind = RC_WAIT_STATIC, .wait_ms = 3000 };
	rc_wait_t rnd = { .kind = RC_WAIT_RANDOM, .min_ms = 1000, .max_ms = 10000 };
	rc_wait_t ex = { .kind = RC_WAIT_EXPONENTIAL, .wait_ms = 2000, .multiplier = 10 };

	cr_assert_eq(cli_reconcile_wait_ms(NULL, 5, 0), 3000);
	cr_assert_eq(cli_reconcile_wait_ms(&st, 0, 77), 3000);
	cr_assert_eq(cli_reconcile_wait_ms(&st, 9, 77), 3000);
	cr_assert_eq(cli_reconcile_wait_ms(&rnd, 0, 0), 1000);
	cr_assert_eq(cli_reconcile_wait_ms(&rnd, 0, 9000), 10000);   /* max included */
	cr_assert_eq(cli_reconcile_wait_ms(&rnd, 0, 9001), 1000);
	for (uint64_t r = 0; r < 100000; r += 7919) {
		uint64_t w = cli_reconcile_wait_ms(&rnd, 3, r * 2654435761u);
		cr_assert(w >= 1000 && w <= 10000);
	}
	cr_assert_eq(cli_reconcile_wait_ms(&ex, 0, 0), 2000);
	cr_assert_eq(cli_reconcile_wait_ms(&ex, 1, 0), 20000);
	cr_assert_eq(cli_reconcile_wait_ms(&ex, 2, 0), 200000);
	cr_assert_eq(cli_reconcile_wait_ms(&ex, 60, 0), CLI_WAIT_MAX_MS);
}

/* The wait's decisions through the pod kind's observation and the generic
 * rule (docs/cli.md "apply --wait"). */
Test(api, cli_batch_converges_only_after_two_equal_running_passes)
{
	const char *names[] = { "a", "b" };
	rc_wait_t slow = { .kind = RC_WAIT_STATIC, .wait_ms = 7000 };
	const rc_wait_t *waits[] = { NULL, &slow };
	cli_batch_t b;
	msgpack_unpacked up;
	cr_assert_eq(cli_batch_init(&b, 2, names, waits), 0);

	st_t p1[] = { { "a", "starting", NULL, 0, 1, 1, 0, 0 },
		      { "b", "starting", NULL, 0, 1, 1, 0, 0 } };
	cr_assert_eq(cli_batch_observe(&b, statuses(&up, p1, 2)), RC_CONV_AGAIN);
	msgpack_unpacked_destroy(&up);
	cr_assert_eq(cli_batch_wait_ms(&b, 0), 7000, "the longest wait of the pending pods");
	/* a runs: seen once, not yet converged */
	st_t p2[] = { { "a", "running", NULL, 0, 1, 1, 1, 10 },
		      { "b", "pending", NULL, 0, 1, 1, 0, 0 } };
	cr_assert_eq(cli_batch_observe(&b, statuses(&up, p2, 2)), RC_CONV_AGAIN);
	msgpack_unpacked_destroy(&up);
	cr_assert(cli_batch_pending(&b, 0) && cli_batch_pending(&b, 1));
	/* a runs the same process again: converged; b completed; extra
	 * pods are ignored */
	st_t p3[] = { { "zzz", "pending", NULL, 0, 1, 1, 0, 0 },
		      { "b", "terminal", "completed", 0, 1, 1, 0, 0 },
		      { "a", "running", NULL, 0, 1, 1, 1, 10 } };
	cr_assert_eq(cli_batch_observe(&b, statuses(&up, p3, 3)), RC_CONV_DONE);
	msgpack_unpacked_destroy(&up);
	cr_assert_eq(b.conv.re_runs, 2);
	cr_assert(!rc_conv_any_failed(&b.conv));
	cli_batch_free(&b);
}

/* A crash loop: seen running, backing off, running again under another
 * pid — restarts and pids are not progress, so 3 passes end the wait. */
Test(api, cli_batch_gives_up_on_a_crash_loop_after_three_passes)
{
	const char *names[] = { "a" };
	cli_batch_t b;
	msgpack_unpacked up;
	cr_assert_eq(cli_batch_init(&b, 1, names, NULL), 0);
	st_t s[] = { { "a", "running", NULL, 1, 1, 1, 1, 10 },
		     { "a", "backing_off", "c: exited with code 1", 2, 1, 1, 0, 0 },
		     { "a", "running", NULL, 3, 1, 1, 1, 11 },
		     { "a", "backing_off", "c: exited with code 1", 4, 1, 1, 0, 0 } };
	rc_conv_verdict_t v[4];
	for (int i = 0; i < 4; i++) {
		v[i] = cli_batch_observe(&b, statuses(&up, &s[i], 1));
		msgpack_unpacked_destroy(&up);
	}
	cr_assert_eq(v[0], RC_CONV_AGAIN);      /* first sighting: progress */
	cr_assert_eq(v[1], RC_CONV_AGAIN);      /* stale 1 */
	cr_assert_eq(v[2], RC_CONV_AGAIN);      /* stale 2: another pid is not progress */
	cr_assert_eq(v[3], RC_CONV_STUCK, "three passes without progress");
	cr_assert(cli_batch_pending(&b, 0));
	cr_assert_eq(cli_batch_wait_ms(&b, 0), RC_WAIT_DEFAULT_MS);
	cli_batch_free(&b);
}

/* A pod terminal with a failure is not pending: failed at once. */
Test(api, cli_batch_reports_a_failed_pod_at_once)
{
	const char *names[] = { "a", "b" };
	cli_batch_t b;
	msgpack_unpacked up;
	cr_assert_eq(cli_batch_init(&b, 2, names, NULL), 0);
	st_t p1[] = { { "a", "terminal", "failed", 0, 1, 1, 0, 0 },
		      { "b", "starting", NULL, 0, 1, 1, 0, 0 } };
	cr_assert_eq(cli_batch_observe(&b, statuses(&up, p1, 2)), RC_CONV_AGAIN);
	msgpack_unpacked_destroy(&up);
	cr_assert(b.conv.objs[0].newly_failed);
	cr_assert(!cli_batch_pending(&b, 0));
	cr_assert(rc_conv_any_failed(&b.conv));
	/* b missing altogether for three passes: pending, no progress */
	st_t none[] = { { "zzz", "pending", NULL, 0, 1, 1, 0, 0 } };
	rc_conv_verdict_t v = RC_CONV_AGAIN;
	for (int i = 0; i < 3; i++) {
		v = cli_batch_observe(&b, statuses(&up, none, 1));
		msgpack_unpacked_destroy(&up);
	}
	cr_assert(!b.conv.objs[0].newly_failed, "reported once");
	cr_assert_eq(v, RC_CONV_STUCK);
	cli_batch_free(&b);
}

/* A pod whose first container ended while another runs shows the live
 * container's pid. */
Test(api, cli_ps_pid_of_the_first_live_container)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked up;
	cli_table_t t;
	size_t off = 0;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 3);
	api_pack_cstr(&pk, "name"); api_pack_cstr(&pk, "two");
	api_pack_cstr(&pk, "phase"); api_pack_cstr(&pk, "running");
	api_pack_cstr(&pk, "containers");
	msgpack_pack_array(&pk, 2);
	msgpack_pack_map(&pk, 2);
	api_pack_cstr(&pk, "phase"); api_pack_cstr(&pk, "terminal");
	api_pack_cstr(&pk, "pid"); msgpack_pack_int(&pk, 0);
	msgpack_pack_map(&pk, 2);
	api_pack_cstr(&pk, "phase"); api_pack_cstr(&pk, "running");
	api_pack_cstr(&pk, "pid"); msgpack_pack_int(&pk, 777);
	msgpack_unpacked_init(&up);
	cr_assert_eq(msgpack_unpack_next(&up, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
	cr_assert_eq(cli_table_init(&t, CLI_PS_COLS, cli_ps_headers), 0);
	cr_assert_eq(cli_ps_table(&up.data, 1000, &t), 0);
	char *out = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&out, &len);
	cr_assert_eq(cli_table_print(&t, fp), 0);
	fclose(fp);
	cr_assert(strstr(out, "two") && strstr(out, " 777 "), "%s", out);
	cr_assert(strstr(out, "1/2"), "%s", out);
	free(out);
	cli_table_free(&t);
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
}

/* A run-once pod (restart: never or on_failure) observed through its
 * kind with the applied spec: running at two equal passes is not
 * converged, it is done only once completed; its failure fails it. A
 * pod that runs until stopped converges as before, in the same batch. */
Test(api, cli_batch_run_once_pods_converge_only_when_completed)
{
	const char *names[] = { "once", "fails", "svc" };
	pod_spec_t never = { .restart = POD_RESTART_NEVER };
	pod_spec_t on_failure = { .restart = POD_RESTART_ON_FAILURE };
	pod_spec_t always = { .restart = POD_RESTART_ALWAYS };
	const void *objs[] = { &never, &on_failure, &always };
	const kind_t *kinds[] = { tank_kinds[0], tank_kinds[0], tank_kinds[0] };
	cli_batch_t b;
	msgpack_unpacked up;
	cr_assert_eq(cli_batch_init(&b, 3, names, NULL), 0);
	cli_batch_kinds(&b, kinds, objs);

	st_t run[] = { { "once", "running", NULL, 0, 1, 1, 1, 10 },
		       { "fails", "running", NULL, 0, 1, 1, 1, 20 },
		       { "svc", "running", NULL, 0, 1, 1, 1, 30 } };
	for (int pass = 0; pass < 2; pass++) {
		cli_batch_see(&b, tank_kinds[0], statuses(&up, run, 3));
		cr_assert_eq(cli_batch_pass(&b), RC_CONV_AGAIN);
		msgpack_unpacked_destroy(&up);
	}
	cr_assert(cli_batch_pending(&b, 0) && cli_batch_pending(&b, 1),
		  "run-once pods seen running twice are still pending");
	cr_assert(!cli_batch_pending(&b, 2), "the service converged");
	cr_assert(strstr(b.obs[0].why, "restart never"), "%s", b.obs[0].why);

	st_t end[] = { { "once", "terminal", "completed", 0, 1, 1, 0, 0 },
		       { "fails", "terminal", "failed", 0, 1, 1, 0, 0 },
		       { "svc", "running", NULL, 0, 1, 1, 1, 30 } };
	cli_batch_see(&b, tank_kinds[0], statuses(&up, end, 3));
	cr_assert_eq(cli_batch_pass(&b), RC_CONV_DONE);
	msgpack_unpacked_destroy(&up);
	cr_assert_eq(b.conv.objs[0].verdict, RC_CONV_OBJ_CONVERGED);
	cr_assert_eq(b.conv.objs[1].verdict, RC_CONV_OBJ_FAILED);
	cr_assert(rc_conv_any_failed(&b.conv));
	cli_batch_free(&b);
}

/* The descriptors' tables: the stack kind's columns for stacks, the
 * pods' filtered by the owner key their status carries. */
Test(api, cli_kind_rows_use_the_descriptors_columns)
{
	const kind_t *stack = kind_find(tank_kinds, "st", 2);
	cr_assert_not_null(stack);
	cr_assert_not_null(kind_find(tank_kinds, "PODS", 4), "any case");
	cr_assert_null(kind_find(tank_kinds, "stacksx", 7));
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked u;
	size_t off = 0;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 5);
	api_pack_cstr(&pk, "name");        api_pack_cstr(&pk, "shop");
	api_pack_cstr(&pk, "phase");       api_pack_cstr(&pk, "starting");
	api_pack_cstr(&pk, "ready");       msgpack_pack_uint32(&pk, 1);
	api_pack_cstr(&pk, "total");       msgpack_pack_uint32(&pk, 2);
	api_pack_cstr(&pk, "waiting_for"); api_pack_cstr(&pk, "pod web is starting");
	msgpack_unpacked_init(&u);
	cr_assert_eq(msgpack_unpack_next(&u, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
	const char *heads[KIND_COLS_MAX];
	for (size_t c = 0; c < stack->ncols; c++)
		heads[c] = stack->cols[c].header;
	cli_table_t t;
	cr_assert_eq(cli_table_init(&t, stack->ncols, heads), 0);
	cr_assert_eq(cli_kind_rows(stack, &u.data, NULL, (const char *)-1, 1000, &t), 0);
	cr_assert_eq(t.nrows, 1);
	cr_assert_str_eq(t.cells[0], "STACK");
	cr_assert_str_eq(t.cells[t.ncols + 2], "1/2");
	cr_assert_str_eq(t.cells[t.ncols + 4], "pod web is starting", "what it waits for");
	cli_table_free(&t);
	/* Pods in stack "shop" only: none of these says so. */
	cr_assert_eq(cli_table_init(&t, CLI_PS_COLS, cli_ps_headers), 0);
	cr_assert_eq(cli_kind_rows(tank_kinds[0], &u.data, stack->name, "shop", 1000, &t), 0);
	cr_assert_eq(t.nrows, 0);
	cli_table_free(&t);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
}

/* Colour: the PHASE column's cells, by meaning, only when asked (a
 * terminal without NO_COLOR), the columns still aligned on the text. */
Test(api, cli_table_colours_the_phase_only_on_a_terminal)
{
	static const char *const heads[] = { "NAME", "PHASE", "AGE" };
	cli_table_t t;
	char *buf = NULL;
	size_t len = 0;

	cr_assert_eq(cli_table_init(&t, 3, heads), 0);
	cr_assert_eq(cli_table_add(&t, (const char *[]){ "web", "running", "5s" }), 0);
	cr_assert_eq(cli_table_add(&t, (const char *[]){ "db", "backing_off", "1m" }), 0);
	FILE *f = open_memstream(&buf, &len);
	cr_assert_eq(cli_table_print(&t, f), 0);
	fclose(f);
	cr_assert(!strchr(buf, '\033'), "no colour unless asked: %s", buf);
	free(buf);
	t.colour = true;
	f = open_memstream(&buf, &len);
	cr_assert_eq(cli_table_print(&t, f), 0);
	fclose(f);
	cr_assert(strstr(buf, "\033[32mrunning\033[0m    "), "green, padded after: %s", buf);
	cr_assert(strstr(buf, "\033[31mbacking_off\033[0m   1m"), "red: %s", buf);
	cr_assert(!strstr(buf, "\033[32mPHASE"), "the header stays plain");
	free(buf);
	cli_table_free(&t);

	/* When: a pipe never; a terminal unless NO_COLOR or TERM=dumb. */
	int p[2];
	cr_assert_eq(pipe(p), 0);
	FILE *pf = fdopen(p[1], "w");
	cr_assert(!cli_colour_ok(pf));
	fclose(pf);
	close(p[0]);
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) || unlockpt(m)) {
		cr_log_warn("no pseudo-terminal here: the terminal half is not checked");
		return;
	}
	int sfd = open(ptsname(m), O_RDWR | O_NOCTTY);
	cr_assert_geq(sfd, 0);
	FILE *tf = fdopen(sfd, "w");
	unsetenv("NO_COLOR");
	setenv("TERM", "xterm", 1);
	cr_assert(cli_colour_ok(tf));
	setenv("NO_COLOR", "1", 1);
	cr_assert(!cli_colour_ok(tf));
	unsetenv("NO_COLOR");
	setenv("TERM", "dumb", 1);
	cr_assert(!cli_colour_ok(tf));
	fclose(tf);
	close(m);
}

/* A command written as a YAML block scalar (`- |` then lines) broke
 * describe's containers table: each row stays one line, its newlines
 * and tabs shown as `\n` and `\t` (docs/cli.md "describe"), and so does
 * a `Key: value` line. */
Test(api, cli_describe_keeps_a_multi_line_command_on_one_row)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str_with_body(&pk, "reason", 6);
	msgpack_pack_str_with_body(&pk, "two\nlines\r", 10);
	msgpack_pack_str_with_body(&pk, "containers", 10);
	msgpack_pack_array(&pk, 3);
	/* The third: 150 bytes, cut at the cell's 127 with "…" (it looked
	 * whole), not in the middle of the é at the cut. */
	static char longer[160];
	memset(longer, 'x', 150);
	memcpy(longer + 110, "\xc3\xa9", 2);
	static const char *const cmd[][3] = {
		{ "/bin/sh", "-c", "echo hi\n\tsleep 1000\n" },
		{ "/bin/sleep", "5", "\x01" },
		{ "/bin/echo", "-n", longer },
	};
	for (int i = 0; i < 3; i++) {
		msgpack_pack_map(&pk, 2);
		msgpack_pack_str_with_body(&pk, "name", 4);
		msgpack_pack_str_with_body(&pk, i == 2 ? "c" : i ? "b" : "a", 1);
		msgpack_pack_str_with_body(&pk, "command", 7);
		msgpack_pack_array(&pk, 3);
		for (int j = 0; j < 3; j++)
			msgpack_pack_str_with_body(&pk, cmd[i][j], strlen(cmd[i][j]));
	}
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	cr_assert_eq(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);

	char *out = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&out, &len);
	cr_assert_eq(cli_describe_map(fp, &u.data, 0, 0, NULL), 0);
	fclose(fp);
	/* c's cell: "/bin/echo -n " (13 bytes) and 110 x; the é's two bytes
	 * would be bytes 124 and 125 of 127, the last that "…" (3) and the
	 * NUL leave is 124: the é goes whole, not its first byte. */
	char c_row[200];
	snprintf(c_row, sizeof c_row, "  c      /bin/echo -n %.110s…\n", longer);
	char want[1024];
	snprintf(want, sizeof want, "%s%s",
		 "Reason:      two\\nlines\\r\n"
		 "Containers:\n"
		 "  NAME   COMMAND\n"
		 "  a      /bin/sh -c echo hi\\n\\tsleep 1000\\n\n"
		 "  b      /bin/sleep 5 \\x01\n", c_row);
	cr_assert_str_eq(out, want);
	free(out);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
}

/* kubectl's KIND/NAME for a verb of kind k (kind_ref_name): a name
 * alone, the kind's own words before the '/', another kind or nothing
 * after it refused; a job's id (POD/N) is its own path unless job/ comes
 * before it. */
Test(api, kind_ref_name_takes_kind_slash_name_and_keeps_a_jobs_path)
{
	const kind_t *pod = kind_find(tank_kinds, "pod", 3);
	const kind_t *stack = kind_find(tank_kinds, "stack", 5);
	const kind_t *job = kind_find(tank_kinds, "job", 3);
	cr_assert(pod && stack && job);

	cr_assert_str_eq(kind_ref_name(pod, "web"), "web");
	cr_assert_str_eq(kind_ref_name(pod, "pod/web"), "web");
	cr_assert_str_eq(kind_ref_name(pod, "po/web"), "web");
	cr_assert_str_eq(kind_ref_name(pod, "Pod/web"), "web", "the manifest kind, any case");
	cr_assert_str_eq(kind_ref_name(stack, "st/shop"), "shop");
	cr_assert_null(kind_ref_name(stack, "pod/web"), "another kind's");
	cr_assert_null(kind_ref_name(pod, "nokind/web"));
	cr_assert_null(kind_ref_name(pod, "pod/"), "no name");

	cr_assert_str_eq(kind_ref_name(job, "web/2"), "web/2");
	cr_assert_str_eq(kind_ref_name(job, "jb/2"), "jb/2", "a pod named jb, its job 2");
	cr_assert_str_eq(kind_ref_name(job, "job/web/2"), "web/2");
	cr_assert_str_eq(kind_ref_name(job, "stack/3"), "stack/3", "a pod named stack");
}
