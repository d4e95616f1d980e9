/*
 * tankctl end to end against tests/helpers/api_fakedaemon (the method
 * contract of DESIGN.md §6 over the real api_server), until the lead's
 * tests against the real tankd exist.  Runs the built programs found
 * through TANK_BUILD_DIR.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api_client.h"
#include "manifest/mf_doc.h"
#include "tests/support/tsupport.h"

typedef struct env {
	char dir[64];
	char sock[128];
	char ctl[512];
	pid_t daemon;
} env_t;

static void env_up(env_t *e)
{
	const char *b = getenv("TANK_BUILD_DIR");
	char helper[512];
	cr_assert_not_null(b, "TANK_BUILD_DIR is set by make test");
	/* Owned (tsupport.h): it goes, with the fake daemon, on every path. */
	cr_assert_not_null(ts_mkdtemp(e->dir, sizeof e->dir, "tank-ctl"));
	snprintf(e->sock, sizeof e->sock, "%s/tank.sock", e->dir);
	snprintf(e->ctl, sizeof e->ctl, "%s/bin/tankctl", b);
	snprintf(helper, sizeof helper, "%s/tests/helpers/api_fakedaemon", b);
	e->daemon = fork();
	cr_assert(e->daemon >= 0);
	if (e->daemon == 0) {
		/* Dies with the test, and leaves the runner's pipes alone (an
		 * orphan holding them would stall the whole run). */
		char log[160];
		snprintf(log, sizeof log, "%s/daemon.log", e->dir);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(helper, helper, e->sock, (char *)NULL);
		_exit(127);
	}
	ts_own_pid(e->daemon);
	/* Ready when it answers. */
	for (int i = 0; i < 1000; i++) {
		api_client_t *c;
		tank_error_t err;
		if (api_client_connect(e->sock, &c, &err) == 0) {
			api_client_close(c);
			return;
		}
		usleep(10000);
	}
	cr_assert_fail("fake daemon did not come up");
}

static void env_down(env_t *e)
{
	int st;
	kill(e->daemon, SIGTERM);
	cr_assert_eq(waitpid(e->daemon, &st, 0), e->daemon);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fake daemon exited cleanly");
	cr_assert(access(e->sock, F_OK) < 0, "socket removed");
	ts_cleanup();
	cr_assert(access(e->dir, F_OK) < 0, "%s was not removed", e->dir);
}

/* Runs tankctl with args (NULL-terminated), stdin from `input` (or
 * /dev/null); returns the exit code, output in out/err (malloc'd). */
static int ctl(env_t *e, const char *input, char **out, char **err, ...)
{
	char *argv[32];
	int n = 0;
	va_list ap;
	argv[n++] = e->ctl;
	argv[n++] = "--socket";
	argv[n++] = e->sock;
	va_start(ap, err);
	while (n < 31 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;

	char fo[128], fe[128], fi[128];
	snprintf(fo, sizeof fo, "%s/out", e->dir);
	snprintf(fe, sizeof fe, "%s/err", e->dir);
	snprintf(fi, sizeof fi, "%s/in", e->dir);
	FILE *in = fopen(fi, "w");
	if (input)
		fputs(input, in);
	fclose(in);
	pid_t p = fork();
	cr_assert(p >= 0);
	if (p == 0) {
		int i = open(fi, O_RDONLY), o = open(fo, O_WRONLY | O_CREAT | O_TRUNC, 0600),
		    r = open(fe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(i, 0); dup2(o, 1); dup2(r, 2);
		unsetenv("TANK_SOCKET");
		execv(e->ctl, argv);
		_exit(127);
	}
	int st;
	cr_assert_eq(waitpid(p, &st, 0), p);
	const char *files[2] = { fo, fe };
	char **dst[2] = { out, err };
	for (int k = 0; k < 2; k++) {
		FILE *f = fopen(files[k], "r");
		size_t cap = 1 << 16, len = 0;
		char *buf = calloc(1, cap);
		len = fread(buf, 1, cap - 1, f);
		buf[len] = '\0';
		fclose(f);
		*dst[k] = buf;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#define CTL(e, in, ...) ctl(e, in, &out, &err, __VA_ARGS__, (char *)NULL)
#define FREE() do { free(out); free(err); out = err = NULL; } while (0)

static const char *manifest =
	"name: web\n"
	"containers: [{name: app, command: [/bin/sleep, '100']}]\n"
	"---\n"
	"name: slow-1\n"
	"reconcile_wait: {static: 50ms}\n"
	"containers: [{name: app, command: [/bin/true]}]\n";

Test(api, tankctl_verbs_against_fake_daemon)
{
	env_t e;
	char *out, *err;
	env_up(&e);

	cr_assert_eq(CTL(&e, NULL, "ping"), 0);
	cr_assert_str_eq(out, "pong\n");
	FREE();
	cr_assert_eq(CTL(&e, NULL, "version"), 0);
	cr_assert(strstr(out, "tankd fake-1"), "%s", out);
	FREE();
	cr_assert_eq(CTL(&e, manifest, "apply", "-f", "-"), 0, "%s", err);
	cr_assert_str_eq(out, "web created\nslow-1 created\n");
	FREE();
	cr_assert_eq(CTL(&e, manifest, "apply", "-f", "-"), 0);
	cr_assert_str_eq(out, "web unchanged\nslow-1 unchanged\n");
	FREE();

	cr_assert_eq(CTL(&e, NULL, "ps"), 0);
	cr_assert(!strncmp(out, "NAME     PHASE      READY   RESTARTS   AGE", 41), "%s", out);
	cr_assert(strstr(out, "\nweb      running    1/1     0 "), "%s", out);
	cr_assert(strstr(out, "   4242   \n"), "%s", out);
	FREE();

	/* -o json is valid JSON, read back by a strict JSON parser. */
	cr_assert_eq(CTL(&e, NULL, "get", "web", "-o", "json"), 0);
	mf_docs_t *docs;
	kit_errors_t perrs;
	kit_errors_init(&perrs);
	cr_assert_eq(mf_docs_load(out, strlen(out), "get.json", &docs, &perrs), 0, "%s", out);
	cr_assert_eq(docs->count, 1);
	const msgpack_object *gen = api_map_get(&docs->docs[0], "generation");
	cr_assert(gen && gen->via.u64 == 1);
	mf_docs_free(docs);
	kit_errors_free(&perrs);
	FREE();

	cr_assert_eq(CTL(&e, NULL, "status", "web", "-o", "json"), 0);
	cr_assert(strstr(out, "\"phase\": \"running\""), "%s", out);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "history", "web"), 0);
	cr_assert(strstr(out, "1970-01-01T00:00:01Z   pod/web   starting   running   started"), "%s", out);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "logs", "web", "-c", "app", "--tail", "2"), 0);
	cr_assert_str_eq(out, "line one\nline two\n");
	FREE();
	cr_assert_eq(CTL(&e, NULL, "restart", "web"), 0);
	cr_assert_str_eq(out, "web restarted\n");
	FREE();
	cr_assert_eq(CTL(&e, NULL, "sync"), 0);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "nudge"), 0);
	FREE();

	/* An unknown name is an error (exit 1, on stderr); the known one is
	 * still deleted. */
	cr_assert_eq(CTL(&e, NULL, "delete", "web", "ghost"), 1);
	cr_assert_str_eq(out, "web deleted\n");
	cr_assert_str_eq(err, "tankctl: delete: pod \"ghost\" not found\n");
	FREE();
	cr_assert_eq(CTL(&e, NULL, "delete", "--ignore-not-found", "ghost"), 0);
	FREE();
	/* A daemon-reported error: exit 1, its message on stderr. */
	cr_assert_eq(CTL(&e, NULL, "get", "web"), 1);
	cr_assert_str_eq(err, "tankctl: get: pod \"web\" not found\n");
	FREE();
	env_down(&e);
}

Test(api, tankctl_usage_and_connection_errors)
{
	env_t e;
	char *out, *err;
	env_up(&e);
	cr_assert_eq(CTL(&e, NULL, "frobnicate"), 2);
	cr_assert(strstr(err, "unknown verb 'frobnicate'"));
	FREE();
	cr_assert_eq(CTL(&e, NULL, "get"), 2);
	cr_assert(strstr(err, "usage: tankctl get [stack|"), "%s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "get", "x", "-o", "xml"), 2);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "apply"), 2);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "logs", "--help"), 0);
	cr_assert(strstr(out, "usage: tankctl logs NAME"));
	FREE();
	/* A wrong word is named; a verb without arguments has no trailing
	 * blank in its usage line. */
	cr_assert_eq(CTL(&e, NULL, "daemon", "bogus"), 2);
	cr_assert(strstr(err, "unknown subcommand 'bogus'"), "%s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "daemon", "status", "extra"), 2);
	cr_assert(strstr(err, "unexpected 'extra' after status"), "%s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "version", "-x"), 2);
	cr_assert(strstr(err, "usage: tankctl version\n"), "%s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "version", "--help"), 0);
	cr_assert(strstr(out, "usage: tankctl version\n"), "%s", out);
	FREE();
	/* Validation: every problem with its path, nothing sent. */
	cr_assert_eq(CTL(&e, "name: Bad!\ncontainers: [{name: a}]\n", "apply", "-f", "-"), 1);
	cr_assert(strstr(err, "containers[0].command: required"), "%s", err);
	cr_assert(strstr(err, "name:"), "%s", err);
	FREE();
	/* No daemon: the socket is named, exit 1. */
	env_t gone = e;
	snprintf(gone.sock, sizeof gone.sock, "%s/none.sock", e.dir);
	cr_assert_eq(ctl(&gone, NULL, &out, &err, "ping", (char *)NULL), 1);
	cr_assert(strstr(err, gone.sock), "%s", err);
	cr_assert(strstr(err, "is tankd running?"), "%s", err);
	FREE();
	/* The global option also after the verb (kubectl's habit): the last
	 * --socket wins, in either spelling. */
	cr_assert_eq(ctl(&gone, NULL, &out, &err, "ping", "--socket", e.sock, (char *)NULL), 0,
		     "%s", err);
	FREE();
	cr_assert_eq(ctl(&gone, NULL, &out, &err, "ping", "--socket=x", (char *)NULL), 1);
	cr_assert(strstr(err, "x"), "%s", err);
	FREE();
	/* One message for a bad option, naming it; and what lacks a value. */
	cr_assert_eq(CTL(&e, NULL, "ps", "--bogus"), 2);
	cr_assert(strstr(err, "unknown option '--bogus'"), "%s", err);
	cr_assert(!strstr(err, "unrecognized"), "getopt's own message too: %s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "get", "x", "-o"), 2);
	cr_assert(strstr(err, "option '-o' needs a value"), "%s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "ps", "-z"), 2);
	cr_assert(strstr(err, "unknown option '-z'"), "%s", err);
	FREE();
	/* The same words from a kind's own commands (pod_cli.c, through
	 * kind_cli_t.bad_option) and from the verbs that take only --help. */
	cr_assert_eq(CTL(&e, NULL, "logs", "x", "--bogus"), 2);
	cr_assert(strstr(err, "logs: unknown option '--bogus'"), "%s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "restart", "-z", "x"), 2);
	cr_assert(strstr(err, "restart: unknown option '-z'"), "%s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "logs", "x", "--since"), 2);
	cr_assert(strstr(err, "option '--since' needs a value"), "%s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "describe", "--bogus", "x"), 2);
	cr_assert(strstr(err, "describe: unknown option '--bogus'"), "%s", err);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "ping", "extra"), 2);
	cr_assert(strstr(err, "takes no arguments"), "%s", err);
	FREE();
	/* The verb list: one line per form, no trailing blanks. */
	cr_assert_eq(CTL(&e, NULL, "help"), 0);
	cr_assert(strstr(out, "\n  workflow status POD"), "%s", out);
	cr_assert(strstr(out, "\n  workflow retry POD"), "%s", out);
	cr_assert(!strstr(out, "       tankctl"), "a form's line kept its own-help indent: %s", out);
	cr_assert(strstr(out, "\n  ping\n"), "%s", out);
	cr_assert(!strstr(out, " \n"), "a line ends in a blank: %s", out);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "version", "--help"), 0);
	cr_assert(strstr(out, "usage: tankctl version"), "%s", out);
	FREE();
	/* `help VERB` is `VERB --help`; `help` alone the verbs. */
	cr_assert_eq(CTL(&e, NULL, "help", "logs"), 0);
	cr_assert(strstr(out, "usage: tankctl logs NAME"), "%s", out);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "help"), 0);
	cr_assert(strstr(out, "verbs:"), "%s", out);
	FREE();
	cr_assert_eq(CTL(&e, NULL, "help", "nope"), 2);
	cr_assert(strstr(err, "unknown verb 'nope'"), "%s", err);
	env_down(&e);
	free(out);
	free(err);
}

Test(api, tankctl_apply_wait_converges_or_not)
{
	env_t e;
	char *out, *err;
	env_up(&e);
	cr_assert_eq(CTL(&e, manifest, "apply", "-f", "-", "--wait"), 0, "%s", err);
	/* slow-1 starts for two status calls, then must be seen running at
	 * two passes: three re-runs. */
	cr_assert(strstr(out, "re_runs_count: 3\nrequire_re_run: false\n"), "%s", out);
	FREE();
	/* Terminal with a failure: not pending but failed, named at once. */
	cr_assert_eq(CTL(&e, "name: fail-x\nreconcile_wait: 10ms\n"
			 "containers: [{name: a, command: [/bin/false]}]\n",
			 "apply", "-f", "-", "--wait"), 1);
	cr_assert(strstr(out, "re_runs_count: 0\nrequire_re_run: false\n"), "%s", out);
	cr_assert(strstr(err, "fail-x failed: failed"), "%s", err);
	FREE();
	env_down(&e);
}
