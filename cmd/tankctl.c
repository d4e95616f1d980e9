/*
 * tankctl — the command-line client of tankd (docs/cli.md).
 *
 * Flags, wiring and printing only: the decisions worth testing live in
 * cmd/lib (socket path rule, tables, the apply --wait loop) and the wire
 * in api/api_client.  Exit codes: 0 success, 1 an error (reported by the
 * daemon, or the daemon unreachable, or a manifest rejected), 2 bad usage.
 * Diagnostics follow one grammar on stderr: `tankctl: VERB: message`.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api_client.h"
#include "cmd/lib/cli_fmt.h"
#include "cmd/lib/cli_paths.h"
#include "cmd/lib/cli_wait.h"
#include "pod/pod_doc.h"
#include "pod/pod_manifest.h"
#include "manifest/mf.h"
#include "stack/stack_spec.h"
#include "common/kit_units.h"

#define CTL_VERSION "0.1.0"
#define CTL_TIMEOUT_MS 30000
#define CTL_SYNC_TIMEOUT_MS 300000

enum { EXIT_OK = 0, EXIT_ERR = 1, EXIT_USAGE = 2 };

typedef struct ctl {
	const char *verb;
	const char *socket_flag;
	char socket[4096];
	api_client_t *c;
} ctl_t;

typedef struct verb {
	const char *name;
	int (*run)(ctl_t *x, int argc, char **argv);
	const char *usage;    /* after "tankctl VERB " */
	const char *help;     /* one paragraph */
} verb_t;

static const verb_t *ctl_find(const char *name);

/* --- plumbing --------------------------------------------------------------- */

static int ctl_usage_error(ctl_t *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int ctl_usage_error(ctl_t *x, const char *fmt, ...)
{
	const verb_t *v = x->verb ? ctl_find(x->verb) : NULL;
	va_list ap;

	fprintf(stderr, "tankctl: %s%s", x->verb ? x->verb : "", x->verb ? ": " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (v)
		fprintf(stderr, "\nusage: tankctl %s %s\n", v->name, v->usage);
	else
		fprintf(stderr, "\nrun 'tankctl --help' for the verbs\n");
	return EXIT_USAGE;
}

static int ctl_fail(ctl_t *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int ctl_fail(ctl_t *x, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tankctl: %s: ", x->verb);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_ERR;
}

static int ctl_connect(ctl_t *x)
{
	cli_env_t env;
	tank_error_t e;
	int r;

	if (x->c)
		return 0;
	cli_env_read(&env);
	if ((r = cli_socket_path(x->socket_flag, NULL, &env, x->socket, sizeof x->socket)) < 0)
		return ctl_fail(x, "cannot tell where the socket is (%s): use --socket or TANK_SOCKET",
				tank_strerror(r));
	if (api_client_connect(x->socket, &x->c, &e) < 0)
		return ctl_fail(x, "%s", e.msg);
	return 0;
}

/* Prints a daemon-reported error with its details: a list of strings (a
 * manifest's validation messages) one per line, anything else as YAML. */
static void ctl_print_remote_error(ctl_t *x, const api_incoming_t *in)
{
	fprintf(stderr, "tankctl: %s: %s\n", x->verb, in->message);
	const msgpack_object *d = in->details;
	if (!d || d->type == MSGPACK_OBJECT_NIL)
		return;
	if (d->type == MSGPACK_OBJECT_ARRAY) {
		bool all_str = true;
		for (uint32_t i = 0; i < d->via.array.size; i++)
			all_str &= d->via.array.ptr[i].type == MSGPACK_OBJECT_STR;
		if (all_str) {
			for (uint32_t i = 0; i < d->via.array.size; i++)
				fprintf(stderr, "  %.*s\n", (int)d->via.array.ptr[i].via.str.size,
					d->via.array.ptr[i].via.str.ptr);
			return;
		}
	}
	pod_doc_emit(d, POD_DOC_YAML, stderr);
}

/* Calls method; 0 with *in holding the result, or an exit code (the
 * error already printed). */
static int ctl_call(ctl_t *x, const char *method, api_pack_fn params, void *arg,
		    int timeout_ms, api_incoming_t *in)
{
	tank_error_t e;
	int r;

	memset(in, 0, sizeof *in);
	if ((r = ctl_connect(x)) != 0)
		return r;
	if (api_client_call(x->c, method, params, arg, timeout_ms, in, &e) < 0)
		return ctl_fail(x, "%s", e.msg);
	if (in->code != API_OK) {
		ctl_print_remote_error(x, in);
		api_incoming_free(in);
		return EXIT_ERR;
	}
	return 0;
}

static int ctl_emit(ctl_t *x, const msgpack_object *o, enum pod_doc_format fmt)
{
	int r = pod_doc_emit(o, fmt, stdout);
	if (r < 0)
		return ctl_fail(x, "cannot print the answer: %s", tank_strerror(r));
	return 0;
}

/* -o yaml|json; returns -1 for an unknown format. */
static int ctl_format(const char *s, enum pod_doc_format *fmt)
{
	if (strcmp(s, "yaml") == 0)
		*fmt = POD_DOC_YAML;
	else if (strcmp(s, "json") == 0)
		*fmt = POD_DOC_JSON;
	else
		return -1;
	return 0;
}

static uint64_t ctl_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void ctl_sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Common verb options: --help, -o; returns -1 to continue parsing. */
enum { OPT_HELP = 0x100, OPT_TAIL, OPT_WAIT, OPT_LIMIT, OPT_TIMEOUT, OPT_IGNORE_NF };

static int ctl_help(const verb_t *v)
{
	printf("usage: tankctl %s %s\n\n%s\n", v->name, v->usage, v->help);
	return EXIT_OK;
}

/* Param packers. */
static int pack_name(msgpack_packer *pk, void *arg)
{
	msgpack_pack_array(pk, 1);
	return api_pack_cstr(pk, arg);
}

typedef struct name_kind { const char *name; bool stack; } name_kind_t;

/* [name, {kind: "stack"}] for a stack, [name] for a pod; name NULL: nil. */
static int pack_name_kind(msgpack_packer *pk, void *arg)
{
	name_kind_t *nk = arg;
	msgpack_pack_array(pk, nk->stack ? 2 : 1);
	if (nk->name)
		api_pack_cstr(pk, nk->name);
	else
		msgpack_pack_nil(pk);
	if (!nk->stack)
		return 0;
	msgpack_pack_map(pk, 1);
	api_pack_cstr(pk, "kind");
	return api_pack_cstr(pk, "stack");
}

/* [{kind: "stack"}]: `list` of stacks. */
static int pack_kind_stack(msgpack_packer *pk, void *arg)
{
	(void)arg;
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 1);
	api_pack_cstr(pk, "kind");
	return api_pack_cstr(pk, "stack");
}

/* An optional kind word before the names (`get stack shop`, kubectl's
 * habit): consumed when at least `min` arguments follow it.  Pod when
 * absent.  (A pod named "stack" is `get pod stack`.) */
static bool ctl_kind_word(int argc, char **argv, int min)
{
	bool stack = false;

	if (argc - optind >= 1 + min &&
	    (!strcmp(argv[optind], "stack") || !strcmp(argv[optind], "stacks") ||
	     !strcmp(argv[optind], "pod") || !strcmp(argv[optind], "pods"))) {
		stack = argv[optind][0] == 's';
		optind++;
	}
	return stack;
}

/* --- verbs ------------------------------------------------------------------ */

static int v_simple(ctl_t *x, int argc, char **argv, const char *method, int timeout)
{
	static const struct option opts[] = { { "help", no_argument, NULL, OPT_HELP }, { 0 } };
	api_incoming_t in;
	int o, r;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		return ctl_usage_error(x, "unknown option");
	}
	if (optind != argc)
		return ctl_usage_error(x, "takes no arguments");
	if ((r = ctl_call(x, method, NULL, NULL, timeout, &in)) != 0)
		return r;
	if (strcmp(method, "ping") == 0) {
		char s[64];
		api_obj_strcpy(in.result, s, sizeof s);
		printf("%s\n", s);
	}
	api_incoming_free(&in);
	return EXIT_OK;
}

static int v_ping(ctl_t *x, int argc, char **argv) { return v_simple(x, argc, argv, "ping", CTL_TIMEOUT_MS); }
static int v_nudge(ctl_t *x, int argc, char **argv) { return v_simple(x, argc, argv, "nudge", CTL_TIMEOUT_MS); }
static int v_sync(ctl_t *x, int argc, char **argv) { return v_simple(x, argc, argv, "sync", CTL_SYNC_TIMEOUT_MS); }

static int v_version(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, OPT_HELP }, { 0 } };
	api_incoming_t in;
	int o, r;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		return ctl_usage_error(x, "unknown option");
	}
	if (optind != argc)
		return ctl_usage_error(x, "takes no arguments");
	printf("tankctl %s\n", CTL_VERSION);
	fflush(stdout);
	if ((r = ctl_call(x, "version", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	char v[128];
	if (!api_obj_strcpy(api_map_get(in.result, "version"), v, sizeof v))
		snprintf(v, sizeof v, "unknown");
	printf("tankd %s\n", v);
	const msgpack_object *st = api_map_get(in.result, "store");
	if (st && st->type == MSGPACK_OBJECT_MAP) {
		/* How full the store is: what an operator sizes the data dir by. */
		const char *keys[] = { "used", "total", "reserve", "flush_failures", "history_dropped" };
		uint64_t val[5] = { 0 };
		for (int i = 0; i < 5; i++) {
			const msgpack_object *o = api_map_get(st, keys[i]);
			if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				val[i] = o->via.u64;
		}
		printf("store %.1f of %.1f MiB used (%.1f MiB kept for status and deletes)",
		       val[0] / 1048576.0, val[1] / 1048576.0, val[2] / 1048576.0);
		if (val[3])
			printf(", %llu failed status commits", (unsigned long long)val[3]);
		if (val[4])
			printf(", %llu history entries not written (store full)",
			       (unsigned long long)val[4]);
		printf("\n");
	}
	api_incoming_free(&in);
	return EXIT_OK;
}

/* Options of the verbs that print a document: --help and -o yaml|json.
 * Returns -1 to go on, or the exit status to return (help, usage). */
static int ctl_output_opts(ctl_t *x, int argc, char **argv, enum pod_doc_format *fmt)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "output", required_argument, NULL, 'o' }, { 0 } };
	int o;

	while ((o = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == 'o' && ctl_format(optarg, fmt) == 0)
			continue;
		return ctl_usage_error(x, o == 'o' ? "-o takes yaml or json" : "unknown option");
	}
	return -1;
}

/* One-name verbs with -o: get, status NAME. */
static int v_get(ctl_t *x, int argc, char **argv)
{
	enum pod_doc_format fmt = POD_DOC_YAML;
	api_incoming_t in;
	int r;

	if ((r = ctl_output_opts(x, argc, argv, &fmt)) >= 0)
		return r;
	if (argc - optind == 1 && strcmp(argv[optind], "stacks") == 0) {
		/* Every stack, spec and status (kubectl's `get KIND`). */
		if ((r = ctl_call(x, "list", pack_kind_stack, NULL, CTL_TIMEOUT_MS, &in)) != 0)
			return r;
		r = ctl_emit(x, in.result, fmt);
		api_incoming_free(&in);
		return r;
	}
	if (argc - optind == 1 && strcmp(argv[optind], "stack") == 0)
		return ctl_usage_error(x, "needs a stack name (a pod named stack: get pod stack)");
	bool stack = ctl_kind_word(argc, argv, 1);
	if (argc - optind != 1)
		return ctl_usage_error(x, "needs one name (a pod's, or: stack NAME; or: stacks)");
	name_kind_t nk = { argv[optind], stack };
	if ((r = ctl_call(x, "get", pack_name_kind, &nk, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	r = ctl_emit(x, in.result, fmt);
	api_incoming_free(&in);
	return r;
}

static int v_status(ctl_t *x, int argc, char **argv)
{
	enum pod_doc_format fmt = POD_DOC_YAML;
	api_incoming_t in;
	int r;

	if ((r = ctl_output_opts(x, argc, argv, &fmt)) >= 0)
		return r;
	bool stack = ctl_kind_word(argc, argv, 0);
	if (argc - optind > 1)
		return ctl_usage_error(x, "takes at most one name");
	name_kind_t nk = { argc > optind ? argv[optind] : NULL, stack };
	r = ctl_call(x, "status", argc > optind || stack ? pack_name_kind : NULL, &nk,
		     CTL_TIMEOUT_MS, &in);
	if (r)
		return r;
	r = ctl_emit(x, in.result, fmt);
	api_incoming_free(&in);
	return r;
}

/* `ps`: the stacks first (one row each), then a table of pods per stack,
 * then the pods in no stack: grouped as `docker compose ls` and `ps`. */
static int v_ps(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, OPT_HELP }, { 0 } };
	api_incoming_t in, sin;
	name_kind_t all = { NULL, true };
	cli_table_t t;
	int o, r;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		return ctl_usage_error(x, "unknown option");
	}
	if (optind != argc)
		return ctl_usage_error(x, "takes no arguments");
	if ((r = ctl_call(x, "status", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	if ((r = ctl_call(x, "status", pack_name_kind, &all, CTL_TIMEOUT_MS, &sin)) != 0) {
		api_incoming_free(&in);
		return r;
	}
	uint64_t now = ctl_now_ms();
	const msgpack_object *stacks = sin.result;
	uint32_t ns = stacks->type == MSGPACK_OBJECT_ARRAY ? stacks->via.array.size : 0;
	int bad = 0;
	if (ns) {
		/* One table of the stacks, printed, then walked for their names. */
		cli_table_t st;
		bad |= cli_table_init(&st, CLI_STACK_COLS, cli_stack_headers) < 0 ||
		       cli_stack_table(stacks, now, &st) < 0 || cli_table_print(&st, stdout) < 0;
		for (size_t i = 1; i <= st.nrows && !bad; i++) {
			const char *name = st.cells[i * st.ncols];
			printf("\nstack %s:\n", name);
			bad |= cli_table_init(&t, CLI_PS_COLS, cli_ps_headers) < 0 ||
			       cli_ps_table_in(in.result, name, now, &t) < 0 ||
			       cli_table_print(&t, stdout) < 0;
			cli_table_free(&t);
		}
		cli_table_free(&st);
		if (!bad) {
			bad |= cli_table_init(&t, CLI_PS_COLS, cli_ps_headers) < 0 ||
			       cli_ps_table_in(in.result, NULL, now, &t) < 0;
			if (!bad && t.nrows) {
				printf("\nno stack:\n");
				bad |= cli_table_print(&t, stdout) < 0;
			}
			cli_table_free(&t);
		}
	} else {
		bad |= cli_table_init(&t, CLI_PS_COLS, cli_ps_headers) < 0 ||
		       cli_ps_table(in.result, now, &t) < 0 || cli_table_print(&t, stdout) < 0;
		cli_table_free(&t);
	}
	if (bad)
		r = ctl_fail(x, "unexpected answer from tankd");
	api_incoming_free(&in);
	api_incoming_free(&sin);
	return r;
}

/* `up` and `down`: the stack's desired state, and with --wait its phase
 * polled until it is what was asked (up; down), or failed, or --timeout. */
static int ctl_updown(ctl_t *x, int argc, char **argv, const char *method)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "wait", no_argument, NULL, OPT_WAIT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT }, { 0 } };
	bool wait = false, up = method[0] == 'u';
	uint64_t timeout_ms = 0;
	api_incoming_t in;
	char action[64] = "", phase[64] = "", reason[256] = "";
	int o, r;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == OPT_WAIT) {
			wait = true;
		} else if (o == OPT_TIMEOUT) {
			if (kit_parse_duration(optarg, strlen(optarg), &timeout_ms) < 0 || !timeout_ms)
				return ctl_usage_error(x, "--timeout: invalid duration '%s'", optarg);
		} else {
			return ctl_usage_error(x, "unknown option");
		}
	}
	if (argc - optind != 1)
		return ctl_usage_error(x, "needs one stack name");
	if (timeout_ms && !wait)
		return ctl_usage_error(x, "--timeout bounds --wait: use both");
	const char *name = argv[optind];
	if ((r = ctl_call(x, method, pack_name, (void *)name, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	api_obj_strcpy(api_map_get(in.result, "action"), action, sizeof action);
	printf("stack/%s %s\n", name, action[0] ? action : "done");
	api_incoming_free(&in);
	fflush(stdout);
	if (!wait)
		return EXIT_OK;
	uint64_t deadline = timeout_ms ? ctl_now_ms() + timeout_ms : 0;
	name_kind_t nk = { name, true };
	for (;;) {
		if ((r = ctl_call(x, "status", pack_name_kind, &nk, CTL_TIMEOUT_MS, &in)) != 0)
			return r;
		api_obj_strcpy(api_map_get(in.result, "phase"), phase, sizeof phase);
		reason[0] = '\0';
		api_obj_strcpy(api_map_get(in.result, "reason"), reason, sizeof reason);
		api_incoming_free(&in);
		if (!strcmp(phase, up ? "up" : "down")) {
			printf("stack/%s %s\n", name, phase);
			return EXIT_OK;
		}
		if (!strcmp(phase, "failed"))
			return ctl_fail(x, "stack %s failed: %s", name, reason);
		if (deadline && ctl_now_ms() >= deadline)
			return ctl_fail(x, "timed out: stack %s is %s%s%s", name, phase,
					reason[0] ? ": " : "", reason);
		ctl_sleep_ms(200);
	}
}

static int v_up(ctl_t *x, int argc, char **argv) { return ctl_updown(x, argc, argv, "up"); }
static int v_down(ctl_t *x, int argc, char **argv) { return ctl_updown(x, argc, argv, "down"); }

static int v_restart(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, OPT_HELP }, { 0 } };
	api_incoming_t in;
	int o, r;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		return ctl_usage_error(x, "unknown option");
	}
	if (argc - optind != 1)
		return ctl_usage_error(x, "needs one pod name");
	if ((r = ctl_call(x, "restart", pack_name, argv[optind], CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	printf("%s restarted\n", argv[optind]);
	api_incoming_free(&in);
	return EXIT_OK;
}

/* The kinds tankctl reads from manifests. */
static const mf_registry_t ctl_kinds = { .kinds = { &pod_mf_kind, &stack_mf_kind }, .n = 2 };

static bool ctl_is_stack(const mf_object_t *o)
{
	return o->kind == &stack_mf_kind;
}

/* Loads a manifest of pods and stacks, printing every problem.  0 or
 * EXIT_ERR. */
static int ctl_load(ctl_t *x, const char *path, mf_manifest_t **m)
{
	kit_errors_t errs;
	char *text = NULL;
	size_t len = 0;
	int r;

	*m = NULL;
	kit_errors_init(&errs);
	if ((r = mf_read_file(path, &text, &len, &errs)) == 0)
		r = mf_parse(&ctl_kinds, text, len, path, m, &errs);
	free(text);
	if (r < 0) {
		for (size_t i = 0; i < errs.stored; i++)
			fprintf(stderr, "tankctl: %s: %s\n", x->verb, errs.msgs[i]);
		if (errs.oom || !errs.stored)
			fprintf(stderr, "tankctl: %s: %s: invalid manifest\n", x->verb, path);
		kit_errors_free(&errs);
		return EXIT_ERR;
	}
	kit_errors_free(&errs);
	if (!(*m)->count) {
		mf_free(*m);
		*m = NULL;
		return ctl_fail(x, "%s: no pods or stacks in the manifest", path);
	}
	return 0;
}

/* Every manifest of one apply, validated before anything is sent. */
typedef struct ctl_batch {
	mf_manifest_t **ms;
	char **sources;              /* the file each manifest came from */
	size_t n, cap;
	size_t nobjs;                /* objects sent */
	size_t npods;                /* pods applied: given, and inline in stacks */
} ctl_batch_t;

static void ctl_batch_free(ctl_batch_t *bt)
{
	for (size_t i = 0; i < bt->n; i++) {
		mf_free(bt->ms[i]);
		free(bt->sources[i]);
	}
	free(bt->ms);
	free(bt->sources);
	memset(bt, 0, sizeof *bt);
}

static int ctl_batch_add(ctl_t *x, ctl_batch_t *bt, const char *path)
{
	mf_manifest_t *m;
	int r;

	if ((r = ctl_load(x, path, &m)) != 0)
		return r;
	if (bt->n == bt->cap) {
		size_t nc = bt->cap ? bt->cap * 2 : 8;
		mf_manifest_t **nm = realloc(bt->ms, nc * sizeof *nm);
		char **ns = nm ? realloc(bt->sources, nc * sizeof *ns) : NULL;
		if (nm)
			bt->ms = nm;
		if (!nm || !ns) {
			mf_free(m);
			return ctl_fail(x, "out of memory");
		}
		bt->sources = ns;
		bt->cap = nc;
	}
	if (!(bt->sources[bt->n] = strdup(path))) {
		mf_free(m);
		return ctl_fail(x, "out of memory");
	}
	bt->ms[bt->n++] = m;
	bt->nobjs += m->count;
	for (size_t i = 0; i < m->count; i++) {
		if (!ctl_is_stack(&m->objs[i])) {
			bt->npods++;
			continue;
		}
		const stack_spec_t *st = m->objs[i].obj;
		for (size_t k = 0; k < st->npods; k++)
			bt->npods += st->pods[k].inline_spec != NULL;
	}
	return 0;
}

static int ctl_cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ctl_manifest_name(const char *n)
{
	size_t l = strlen(n);
	return n[0] != '.' &&
	       ((l > 5 && !strcmp(n + l - 5, ".yaml")) || (l > 4 && !strcmp(n + l - 4, ".yml")) ||
		(l > 5 && !strcmp(n + l - 5, ".json")));
}

/* -f PATH: a file, `-`, or a directory whose *.yaml, *.yml and *.json
 * files are read in name order (not recursively, as kubectl without -R). */
static int ctl_batch_path(ctl_t *x, ctl_batch_t *bt, const char *path)
{
	struct stat sb;
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	if (strcmp(path, "-") == 0 || stat(path, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return ctl_batch_add(x, bt, path);      /* reports a missing file */
	if (!(d = opendir(path)))
		return ctl_fail(x, "%s: %s", path, strerror(errno));
	while ((de = readdir(d))) {
		if (!ctl_manifest_name(de->d_name))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			char **nn = realloc(names, nc * sizeof *nn);
			if (!nn) {
				r = ctl_fail(x, "out of memory");
				break;
			}
			names = nn;
			cap = nc;
		}
		if (asprintf(&names[n], "%s/%s", path, de->d_name) < 0) {
			r = ctl_fail(x, "out of memory");
			break;
		}
		n++;
	}
	closedir(d);
	if (!r && !n)
		r = ctl_fail(x, "%s: no *.yaml, *.yml or *.json files in the directory", path);
	qsort(names, n, sizeof *names, ctl_cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (!r)
			r = ctl_batch_add(x, bt, names[i]);
		free(names[i]);
	}
	free(names);
	return r;
}

/* Two files of one batch must not name the same pod or stack (within one
 * file the manifest reader already refuses it).  0 or EXIT_ERR, every
 * clash named. */
static int ctl_batch_unique(ctl_t *x, const ctl_batch_t *bt)
{
	int r = 0;

	for (size_t i = 0; i < bt->n; i++)
		for (size_t k = 0; k < bt->ms[i]->count; k++)
			for (size_t j = 0; j < i; j++)
				for (size_t l = 0; l < bt->ms[j]->count; l++) {
					const mf_object_t *a = &bt->ms[i]->objs[k];
					const mf_object_t *b = &bt->ms[j]->objs[l];
					if (a->kind == b->kind && !strcmp(a->name, b->name))
						r = ctl_fail(x, "%s: %s: duplicate %s name (first in %s)",
							     bt->sources[i], a->name,
							     ctl_is_stack(a) ? "stack" : "pod",
							     bt->sources[j]);
				}
	return r;
}

static int pack_pods(msgpack_packer *pk, void *arg)
{
	const ctl_batch_t *bt = arg;
	msgpack_pack_array(pk, 1);
	msgpack_pack_array(pk, bt->nobjs);
	for (size_t i = 0; i < bt->n; i++)
		for (size_t j = 0; j < bt->ms[i]->count; j++)
			if (msgpack_pack_object(pk, *bt->ms[i]->objs[j].raw))
				return -ENOMEM;
	return 0;
}

/* Names the pending objects of b on stderr and ends the line: the first
 * CTL_LIST_MAX, then how many more (a batch of 10,000 would otherwise
 * print one line of half a megabyte at every pass). */
#define CTL_LIST_MAX 10
static void ctl_list_pending(const cli_batch_t *b, const char *none)
{
	size_t shown = 0, more = 0;

	for (size_t i = 0; i < b->n; i++) {
		if (!cli_batch_pending(b, i))
			continue;
		if (shown == CTL_LIST_MAX) {
			more++;
			continue;
		}
		fprintf(stderr, "%s %s (%s)", shown ? "," : "", b->names[i],
			b->have[i] ? b->have[i]->why : none);
		shown++;
	}
	if (more)
		fprintf(stderr, " and %zu more", more);
	fputc('\n', stderr);
}

/* The idem batch loop (DESIGN.md §4, docs/cli.md "apply --wait"): pass
 * after pass, observe the applied pods and let the generic rule
 * (reconciler/rc_converge.h) say converged, failed or pending, until none
 * is pending, 3 passes made no progress, or the timeout. */
static int ctl_wait(ctl_t *x, const ctl_batch_t *bt, uint64_t timeout_ms)
{
	const char **names = calloc(bt->npods ? bt->npods : 1, sizeof *names);
	const pod_reconcile_wait_t **waits = calloc(bt->npods ? bt->npods : 1, sizeof *waits);
	uint64_t deadline = timeout_ms ? ctl_now_ms() + timeout_ms : 0;
	cli_batch_t b;
	rc_conv_verdict_t verdict = RC_CONV_AGAIN;
	bool timed_out = false;
	int r = EXIT_ERR;
	size_t k = 0;

	if (!names || !waits || cli_batch_init(&b, bt->npods, names, waits) < 0) {
		free(names);
		free(waits);
		return ctl_fail(x, "out of memory");
	}
	for (size_t i = 0; i < bt->n; i++)
		for (size_t j = 0; j < bt->ms[i]->count; j++) {
			const mf_object_t *o = &bt->ms[i]->objs[j];
			if (!ctl_is_stack(o)) {
				const pod_spec_t *ps = o->obj;
				names[k] = ps->name;
				waits[k++] = &ps->reconcile_wait;
				continue;
			}
			/* A stack's inline pods are waited for like the others
			 * (its named pods are given elsewhere, or were there). */
			const stack_spec_t *st = o->obj;
			for (size_t m = 0; m < st->npods; m++)
				if (st->pods[m].inline_spec) {
					names[k] = st->pods[m].inline_spec->name;
					waits[k++] = &st->pods[m].inline_spec->reconcile_wait;
				}
		}
	for (;;) {
		api_incoming_t in;
		/* sync makes each pass look at a reconciled state rather than
		 * at one the reconciler has not reached yet. */
		if ((r = ctl_call(x, "sync", NULL, NULL, CTL_SYNC_TIMEOUT_MS, &in)) != 0)
			goto out;
		api_incoming_free(&in);
		if ((r = ctl_call(x, "status", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0)
			goto out;
		verdict = cli_batch_observe(&b, in.result);
		api_incoming_free(&in);
		/* A failed pod is named at once, with its reason and last exit. */
		for (size_t i = 0; i < b.n; i++)
			if (b.conv.objs[i].newly_failed)
				fprintf(stderr, "tankctl: apply: %s failed: %s\n", b.names[i],
					b.have[i] ? b.have[i]->why : "?");
		if (verdict != RC_CONV_AGAIN)
			break;
		uint64_t rnd = 0;
		if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
			rnd = (uint64_t)ctl_now_ms();
		uint64_t w = cli_batch_wait_ms(&b, rnd);
		if (deadline) {
			uint64_t now = ctl_now_ms();
			if (now >= deadline) {
				timed_out = true;
				break;
			}
			if (now + w > deadline)
				w = deadline - now;
		}
		fprintf(stderr, "tankctl: apply: waiting %" PRIu64 " ms for", w);
		ctl_list_pending(&b, "no status yet");
		ctl_sleep_ms(w);
	}
	bool failed = rc_conv_any_failed(&b.conv);
	bool pending = verdict != RC_CONV_DONE;
	printf("re_runs_count: %u\nrequire_re_run: %s\n", b.conv.re_runs,
	       pending ? "true" : "false");
	if (pending) {
		fprintf(stderr, "tankctl: apply: %s after %u re-runs; not converged:",
			timed_out ? "timed out" : "no progress in 3 passes", b.conv.re_runs);
		ctl_list_pending(&b, "no status");
	}
	if (failed) {
		fprintf(stderr, "tankctl: apply: failed:");
		for (size_t i = 0, first = 1; i < b.n; i++)
			if (b.conv.objs[i].verdict == RC_CONV_OBJ_FAILED) {
				fprintf(stderr, "%s %s (%s)", first ? "" : ",", b.names[i],
					b.conv.objs[i].last.why);
				first = 0;
			}
		fputc('\n', stderr);
	}
	r = pending || failed ? EXIT_ERR : EXIT_OK;
out:
	cli_batch_free(&b);
	free(names);
	free(waits);
	return r;
}

static int v_apply(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "filename", required_argument, NULL, 'f' },
		{ "wait", no_argument, NULL, OPT_WAIT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT }, { 0 } };
	const char **files = calloc((size_t)argc + 1, sizeof *files);
	size_t nfiles = 0;
	bool wait = false;
	uint64_t timeout_ms = 0;
	ctl_batch_t bt;
	api_incoming_t in;
	int o, r = 0;

	memset(&bt, 0, sizeof bt);
	if (!files)
		return ctl_fail(x, "out of memory");
	while ((o = getopt_long(argc, argv, "f:", opts, NULL)) != -1) {
		if (o == OPT_HELP) {
			free(files);
			return ctl_help(ctl_find(x->verb));
		}
		if (o == 'f') {
			files[nfiles++] = optarg;
		} else if (o == OPT_WAIT) {
			wait = true;
		} else if (o == OPT_TIMEOUT) {
			if (kit_parse_duration(optarg, strlen(optarg), &timeout_ms) < 0 || !timeout_ms) {
				free(files);
				return ctl_usage_error(x, "--timeout: invalid duration '%s' "
						       "(like 30s, 5m, or milliseconds)", optarg);
			}
		} else {
			free(files);
			return ctl_usage_error(x, "unknown option");
		}
	}
	if (!nfiles || optind != argc) {
		free(files);
		return !nfiles ? ctl_usage_error(x, "needs -f FILE (a file, a directory or - for stdin)")
			       : ctl_usage_error(x, "unexpected argument '%s'", argv[optind]);
	}
	if (timeout_ms && !wait) {
		free(files);
		return ctl_usage_error(x, "--timeout bounds --wait: use both");
	}
	/* Every file is read and validated before anything is applied. */
	for (size_t i = 0; i < nfiles && !r; i++)
		r = ctl_batch_path(x, &bt, files[i]);
	free(files);
	if (!r)
		r = ctl_batch_unique(x, &bt);
	if (r || (r = ctl_call(x, "apply", pack_pods, &bt, CTL_TIMEOUT_MS, &in)) != 0) {
		ctl_batch_free(&bt);
		return r;
	}
	const msgpack_object *res = in.result;
	if (res->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < res->via.array.size; i++) {
			char name[256], action[64];
			const msgpack_object *e = &res->via.array.ptr[i];
			api_obj_strcpy(api_map_get(e, "name"), name, sizeof name);
			if (!api_obj_strcpy(api_map_get(e, "action"), action, sizeof action))
				snprintf(action, sizeof action, "applied");
			printf("%s%s %s\n", api_obj_streq(api_map_get(e, "kind"), "stack")
			       ? "stack/" : "", name, action);
		}
	api_incoming_free(&in);
	fflush(stdout);
	r = wait ? ctl_wait(x, &bt, timeout_ms) : EXIT_OK;
	ctl_batch_free(&bt);
	return r;
}

typedef struct names_kind { char **names; bool stack; } names_kind_t;

static int pack_names_kind(msgpack_packer *pk, void *arg)
{
	names_kind_t *nk = arg;
	size_t n = 0;
	while (nk->names[n])
		n++;
	msgpack_pack_array(pk, nk->stack ? 2 : 1);
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		if (api_pack_cstr(pk, nk->names[i]) < 0)
			return -ENOMEM;
	if (!nk->stack)
		return 0;
	msgpack_pack_map(pk, 1);
	api_pack_cstr(pk, "kind");
	return api_pack_cstr(pk, "stack");
}

/* Sends one delete of one kind and prints what it did. */
static int ctl_delete(ctl_t *x, char **names, bool stack, bool ignore_nf)
{
	names_kind_t nk = { names, stack };
	api_incoming_t in;
	int r;

	if (!names[0])
		return 0;
	if ((r = ctl_call(x, "delete", pack_names_kind, &nk, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	const msgpack_object *res = in.result;
	if (res->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < res->via.array.size; i++) {
			const msgpack_object *e = &res->via.array.ptr[i];
			const msgpack_object *d = api_map_get(e, "deleted");
			bool is_stack = api_obj_streq(api_map_get(e, "kind"), "stack");
			char name[256];
			api_obj_strcpy(api_map_get(e, "name"), name, sizeof name);
			if (d && d->type == MSGPACK_OBJECT_BOOLEAN && d->via.boolean) {
				printf("%s%s deleted\n", is_stack ? "stack/" : "", name);
			} else if (!ignore_nf && (is_stack || !stack)) {
				/* As get and restart: a name that names
				 * nothing is an error (kubectl's habit). */
				fprintf(stderr, "tankctl: delete: %s \"%s\" not found\n",
					is_stack ? "stack" : "pod", name);
				r = EXIT_ERR;
			}
		}
	api_incoming_free(&in);
	return r;
}

static int v_delete(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "filename", required_argument, NULL, 'f' },
		{ "ignore-not-found", no_argument, NULL, OPT_IGNORE_NF }, { 0 } };
	const char *file = NULL;
	mf_manifest_t *m = NULL;
	bool ignore_nf = false;
	int o, r;

	while ((o = getopt_long(argc, argv, "f:", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == 'f')
			file = optarg;
		else if (o == OPT_IGNORE_NF)
			ignore_nf = true;
		else
			return ctl_usage_error(x, "unknown option");
	}
	if (!file == (optind == argc))
		return ctl_usage_error(x, "needs [stack] names or -f FILE (not both)");
	if (!file) {
		bool stack = ctl_kind_word(argc, argv, 1);
		return ctl_delete(x, argv + optind, stack, ignore_nf);   /* argv is NULL-terminated */
	}
	if ((r = ctl_load(x, file, &m)) != 0)
		return r;
	char **pods = calloc(m->count + 1, sizeof *pods);
	char **stacks = calloc(m->count + 1, sizeof *stacks);
	size_t np = 0, ns = 0;
	if (!pods || !stacks) {
		r = ctl_fail(x, "out of memory");
	} else {
		for (size_t i = 0; i < m->count; i++) {
			if (ctl_is_stack(&m->objs[i]))
				stacks[ns++] = (char *)m->objs[i].name;
			else
				pods[np++] = (char *)m->objs[i].name;
		}
		/* The stacks first: they take the pods they own with them. */
		r = ctl_delete(x, stacks, true, ignore_nf);
		int r2 = ctl_delete(x, pods, false, ignore_nf);
		if (!r)
			r = r2;
	}
	free(pods);
	free(stacks);
	mf_free(m);
	return r;
}

typedef struct logs_params {
	const char *name, *container;
	long tail;
	bool follow;
} logs_params_t;

static int pack_logs(msgpack_packer *pk, void *arg)
{
	logs_params_t *p = arg;
	msgpack_pack_array(pk, 2);
	api_pack_cstr(pk, p->name);
	msgpack_pack_map(pk, (p->container != NULL) + (p->tail >= 0) + p->follow);
	if (p->container) {
		api_pack_cstr(pk, "container");
		api_pack_cstr(pk, p->container);
	}
	if (p->tail >= 0) {
		api_pack_cstr(pk, "tail");
		msgpack_pack_int64(pk, p->tail);
	}
	if (p->follow) {
		api_pack_cstr(pk, "follow");
		msgpack_pack_true(pk);
	}
	return 0;
}

/* A log line arrives as a string or as a map with `line` (and maybe
 * `container`). */
static void ctl_print_line(const msgpack_object *o)
{
	const msgpack_object *l = o->type == MSGPACK_OBJECT_MAP ? api_map_get(o, "line") : o;
	if (l && l->type == MSGPACK_OBJECT_STR) {
		fwrite(l->via.str.ptr, 1, l->via.str.size, stdout);
		if (!l->via.str.size || l->via.str.ptr[l->via.str.size - 1] != '\n')
			fputc('\n', stdout);
	}
}

/* An "error" notification: tankd says why it is closing this connection
 * (a subscriber that read too slowly, the connection cap).  Returns the
 * message, or NULL for any other message. */
static const char *ctl_farewell(const api_incoming_t *in, char *buf, size_t cap)
{
	if (in->type != API_NOTIFICATION || strcmp(in->method, "error") != 0 ||
	    !in->params || in->params->type != MSGPACK_OBJECT_ARRAY ||
	    !in->params->via.array.size)
		return NULL;
	const msgpack_object *m = api_map_get(&in->params->via.array.ptr[0], "message");
	if (m && m->type == MSGPACK_OBJECT_STR)
		snprintf(buf, cap, "%.*s", (int)m->via.str.size, m->via.str.ptr);
	else
		snprintf(buf, cap, "closed by tankd");
	return buf;
}

static int v_logs(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "container", required_argument, NULL, 'c' },
		{ "tail", required_argument, NULL, OPT_TAIL },
		{ "follow", no_argument, NULL, 'f' }, { 0 } };
	logs_params_t p = { .tail = -1 };
	api_incoming_t in;
	tank_error_t e;
	char why[256];
	char *end;
	int o, r;

	while ((o = getopt_long(argc, argv, "c:f", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == 'c') {
			p.container = optarg;
		} else if (o == 'f') {
			p.follow = true;
		} else if (o == OPT_TAIL) {
			errno = 0;
			p.tail = strtol(optarg, &end, 10);
			if (errno || *end || p.tail < 0)
				return ctl_usage_error(x, "--tail takes a number of lines");
		} else {
			return ctl_usage_error(x, "unknown option");
		}
	}
	if (argc - optind != 1)
		return ctl_usage_error(x, "needs one pod name");
	p.name = argv[optind];
	if ((r = ctl_call(x, "logs", pack_logs, &p, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	if (in.result->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < in.result->via.array.size; i++)
			ctl_print_line(&in.result->via.array.ptr[i]);
	api_incoming_free(&in);
	fflush(stdout);
	while (p.follow) {
		if ((r = api_client_next(x->c, -1, &in, &e)) < 0)
			return r == -ECONNRESET ? EXIT_OK : ctl_fail(x, "%s", e.msg);
		if (ctl_farewell(&in, why, sizeof why)) {
			api_incoming_free(&in);
			fflush(stdout);
			return ctl_fail(x, "tankd: %s", why);
		}
		if (in.type == API_NOTIFICATION && strcmp(in.method, "log") == 0)
			for (uint32_t i = 0; i < in.params->via.array.size; i++)
				ctl_print_line(&in.params->via.array.ptr[i]);
		api_incoming_free(&in);
		fflush(stdout);
	}
	return EXIT_OK;
}

/* An event on one line: its time first, then key=value for each scalar. */
static void ctl_print_event(const msgpack_object *ev)
{
	int64_t at;
	char buf[64];

	if (ev->type != MSGPACK_OBJECT_MAP) {
		pod_doc_emit(ev, POD_DOC_JSON, stdout);
		return;
	}
	if (api_obj_int(api_map_get(ev, "at"), &at) && at >= 0) {
		cli_format_time((uint64_t)at, buf, sizeof buf);
		fputs(buf, stdout);
	}
	for (uint32_t i = 0; i < ev->via.map.size; i++) {
		const msgpack_object *k = &ev->via.map.ptr[i].key, *v = &ev->via.map.ptr[i].val;
		if (api_obj_streq(k, "at") || k->type != MSGPACK_OBJECT_STR)
			continue;
		printf(" %.*s=", (int)k->via.str.size, k->via.str.ptr);
		switch (v->type) {
		case MSGPACK_OBJECT_STR:
			printf("%.*s", (int)v->via.str.size, v->via.str.ptr);
			break;
		case MSGPACK_OBJECT_POSITIVE_INTEGER:
			printf("%" PRIu64, v->via.u64);
			break;
		case MSGPACK_OBJECT_NEGATIVE_INTEGER:
			printf("%" PRId64, v->via.i64);
			break;
		case MSGPACK_OBJECT_BOOLEAN:
			fputs(v->via.boolean ? "true" : "false", stdout);
			break;
		case MSGPACK_OBJECT_NIL:
			fputs("-", stdout);
			break;
		default:
			fputs("…", stdout);
		}
	}
	fputc('\n', stdout);
}

static int v_events(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "output", required_argument, NULL, 'o' }, { 0 } };
	enum pod_doc_format fmt = POD_DOC_YAML;
	bool structured = false;
	api_incoming_t in;
	tank_error_t e;
	char why[256];
	int o, r;

	while ((o = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == 'o' && ctl_format(optarg, &fmt) == 0) {
			structured = true;
			continue;
		}
		return ctl_usage_error(x, o == 'o' ? "-o takes yaml or json" : "unknown option");
	}
	if (optind != argc)
		return ctl_usage_error(x, "takes no arguments");
	if ((r = ctl_call(x, "subscribe", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	api_incoming_free(&in);
	for (;;) {
		if ((r = api_client_next(x->c, -1, &in, &e)) < 0)
			return r == -ECONNRESET ? ctl_fail(x, "tankd closed the connection")
						: ctl_fail(x, "%s", e.msg);
		if (ctl_farewell(&in, why, sizeof why)) {
			api_incoming_free(&in);
			fflush(stdout);
			return ctl_fail(x, "tankd: %s", why);
		}
		if (in.type == API_NOTIFICATION && strcmp(in.method, "event") == 0)
			for (uint32_t i = 0; i < in.params->via.array.size; i++) {
				if (structured) {
					if (fmt == POD_DOC_YAML)
						fputs("---\n", stdout);
					pod_doc_emit(&in.params->via.array.ptr[i], fmt, stdout);
				} else {
					ctl_print_event(&in.params->via.array.ptr[i]);
				}
			}
		api_incoming_free(&in);
		fflush(stdout);
	}
}

typedef struct hist_params { const char *name; long limit; bool stack; } hist_params_t;

static int pack_history(msgpack_packer *pk, void *arg)
{
	hist_params_t *p = arg;
	msgpack_pack_array(pk, 2);
	api_pack_cstr(pk, p->name);
	msgpack_pack_map(pk, (p->limit >= 0) + p->stack);
	if (p->limit >= 0) {
		api_pack_cstr(pk, "limit");
		msgpack_pack_int64(pk, p->limit);
	}
	if (p->stack) {
		api_pack_cstr(pk, "kind");
		api_pack_cstr(pk, "stack");
	}
	return 0;
}

static int v_history(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "limit", required_argument, NULL, OPT_LIMIT },
		{ "output", required_argument, NULL, 'o' }, { 0 } };
	static const char *const heads[] = { "AT", "OBJECT", "FROM", "TO", "REASON" };
	enum pod_doc_format fmt = POD_DOC_YAML;
	bool structured = false;
	hist_params_t p = { .limit = -1 };
	api_incoming_t in;
	char *end;
	int o, r;

	while ((o = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == 'o' && ctl_format(optarg, &fmt) == 0) {
			structured = true;
		} else if (o == OPT_LIMIT) {
			errno = 0;
			p.limit = strtol(optarg, &end, 10);
			if (errno || *end || p.limit < 0)
				return ctl_usage_error(x, "--limit takes a number");
		} else {
			return ctl_usage_error(x, o == 'o' ? "-o takes yaml or json" : "unknown option");
		}
	}
	p.stack = ctl_kind_word(argc, argv, 1);
	if (argc - optind != 1)
		return ctl_usage_error(x, "needs one name (a pod's, or: stack NAME)");
	p.name = argv[optind];
	if ((r = ctl_call(x, "history", pack_history, &p, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	if (structured) {
		r = ctl_emit(x, in.result, fmt);
		api_incoming_free(&in);
		return r;
	}
	cli_table_t t;
	r = cli_table_init(&t, 5, heads);
	if (in.result->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < in.result->via.array.size && r == 0; i++) {
			const msgpack_object *h = &in.result->via.array.ptr[i];
			char at[64] = "-", from[64], to[64], reason[256], kind[32], key[160];
			char obj[200];
			int64_t ms;
			if (api_obj_int(api_map_get(h, "at"), &ms) && ms >= 0)
				cli_format_time((uint64_t)ms, at, sizeof at);
			if (!api_obj_strcpy(api_map_get(h, "from"), from, sizeof from))
				snprintf(from, sizeof from, "-");
			if (!api_obj_strcpy(api_map_get(h, "to"), to, sizeof to))
				snprintf(to, sizeof to, "-");
			api_obj_strcpy(api_map_get(h, "reason"), reason, sizeof reason);
			/* Whose entry: kind/key ("pod/web", "container/web/httpd"). */
			if (!api_obj_strcpy(api_map_get(h, "kind"), kind, sizeof kind) ||
			    !api_obj_strcpy(api_map_get(h, "key"), key, sizeof key))
				snprintf(obj, sizeof obj, "-");
			else
				snprintf(obj, sizeof obj, "%s/%s", kind, key);
			const char *row[] = { at, obj, from, to, reason };
			r = cli_table_add(&t, row);
		}
	if (r == 0)
		r = cli_table_print(&t, stdout);
	cli_table_free(&t);
	api_incoming_free(&in);
	return r ? ctl_fail(x, "cannot print the history") : EXIT_OK;
}

/* --- main ------------------------------------------------------------------- */

static const verb_t ctl_verbs[] = {
	{ "apply", v_apply, "-f FILE|DIR|- [-f …] [--wait [--timeout DURATION]]",
	  "Sends the pods of every -f (files, - for stdin, directories of *.yaml,\n"
	  "*.yml and *.json in name order) to tankd as one batch.  All are validated\n"
	  "first: any problem is printed with its path and nothing is applied.\n"
	  "--wait then re-checks the pods until none is pending or 3 passes in a\n"
	  "row made no progress (see docs/cli.md): a pod converged when it was seen\n"
	  "running at two passes with the same start times, or completed; a pod\n"
	  "terminal with a failure is named at once.  It prints re_runs_count and\n"
	  "require_re_run; exit 1 if any pod failed or did not converge (or at the\n"
	  "--timeout)." },
	{ "delete", v_delete, "[stack] NAME... | -f FILE [--ignore-not-found]",
	  "Deletes the named pods, or with `stack` the named stacks and the pods\n"
	  "they own (or what a manifest holds); their containers are stopped.  A\n"
	  "name that names nothing is an error (exit 1) unless --ignore-not-found." },
	{ "get", v_get, "[stack] NAME | stacks [-o yaml|json]",
	  "Prints a pod's (or a stack's) desired spec with its generation (YAML\n"
	  "by default); a stack's comes with its status.  `get stacks`: every\n"
	  "stack's." },
	{ "ps", v_ps, "",
	  "Lists the stacks (STACK PHASE READY AGE REASON), then the pods of each\n"
	  "stack and the pods in none: NAME PHASE READY RESTARTS AGE PID REASON." },
	{ "status", v_status, "[stack] [NAME] [-o yaml|json]",
	  "Prints the status of one pod or of all pods (with `stack`: of stacks)." },
	{ "up", v_up, "STACK [--wait [--timeout DURATION]]",
	  "Brings a stack up (desired: up), and lifts an abort: its pods start in\n"
	  "depends_on order.  --wait returns once it is up (exit 1 if it fails)." },
	{ "down", v_down, "STACK [--wait [--timeout DURATION]]",
	  "Brings a stack down (desired: down): its pods stop, dependents first.\n"
	  "--wait returns once nothing of it runs." },
	{ "restart", v_restart, "NAME",
	  "Restarts a pod and resets its retries, also when it is terminal." },
	{ "logs", v_logs, "NAME [-c CONTAINER] [--tail N] [-f]",
	  "Prints a pod's captured output; -f keeps printing new lines." },
	{ "events", v_events, "[-o yaml|json]",
	  "Prints the daemon's events as they happen, one per line (until interrupted)." },
	{ "history", v_history, "[stack] NAME [--limit N] [-o yaml|json]",
	  "Prints a pod's (or a stack's) recorded state transitions." },
	{ "sync", v_sync, "", "Runs a full reconciliation pass and returns when it is done." },
	{ "nudge", v_nudge, "", "Asks for a reconciliation pass soon, without waiting." },
	{ "ping", v_ping, "", "Checks that tankd answers (prints pong)." },
	{ "version", v_version, "", "Prints the versions of tankctl and tankd." },
};
#define CTL_NVERBS (sizeof ctl_verbs / sizeof ctl_verbs[0])

static const verb_t *ctl_find(const char *name)
{
	for (size_t i = 0; i < CTL_NVERBS; i++)
		if (strcmp(ctl_verbs[i].name, name) == 0)
			return &ctl_verbs[i];
	return NULL;
}

static void ctl_main_help(FILE *fp)
{
	fprintf(fp, "usage: tankctl [--socket PATH] VERB [ARGS...]\n\n"
		"Talks to tankd over its socket: --socket PATH, else $TANK_SOCKET, else\n"
		"DATA_DIR/tank.sock (DATA_DIR: $TANK_DATA_DIR, /var/lib/tank for root,\n"
		"$XDG_STATE_HOME/tank or ~/.local/state/tank otherwise).\n\nverbs:\n");
	for (size_t i = 0; i < CTL_NVERBS; i++)
		fprintf(fp, "  %-8s %s\n", ctl_verbs[i].name, ctl_verbs[i].usage);
	fprintf(fp, "\n'tankctl VERB --help' describes a verb.  Exit status: 0 success,\n"
		"1 error (reported by tankd, or tankd unreachable), 2 bad usage.\n");
}

int main(int argc, char **argv)
{
	ctl_t x = { .verb = NULL };
	int i = 1, r;

	/* Global options come before the verb. */
	while (i < argc && argv[i][0] == '-') {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			ctl_main_help(stdout);
			return EXIT_OK;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("tankctl %s\n", CTL_VERSION);
			return EXIT_OK;
		}
		if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
			x.socket_flag = argv[i + 1];
			i += 2;
		} else if (strncmp(argv[i], "--socket=", 9) == 0) {
			x.socket_flag = argv[i] + 9;
			i++;
		} else {
			return ctl_usage_error(&x, "unknown option '%s'", argv[i]);
		}
	}
	if (i >= argc) {
		ctl_main_help(stderr);
		return EXIT_USAGE;
	}
	const verb_t *v = ctl_find(argv[i]);
	if (!v)
		return ctl_usage_error(&x, "unknown verb '%s'", argv[i]);
	x.verb = v->name;
	optind = 0;   /* GNU: full re-initialisation for the verb's argv */
	r = v->run(&x, argc - i, argv + i);
	api_client_close(x.c);
	if (fflush(stdout) != 0 && r == EXIT_OK)
		r = EXIT_ERR;
	return r;
}
