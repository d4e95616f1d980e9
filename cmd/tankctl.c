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
#include <strings.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <spawn.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cl_cli.h"
#include "api/api_client.h"
#include "cmd/lib/cli_describe.h"
#include "cmd/lib/cli_fmt.h"
#include "cmd/lib/cli_paths.h"
#include "cmd/lib/cli_select.h"
#include "cmd/lib/cli_wait.h"
#include "manifest/mf_doc.h"
#include "manifest/mf.h"
#include "kinds/kind.h"
#include "common/kit_units.h"

#define CTL_VERSION "0.1.0"
#define CTL_TIMEOUT_MS 30000
#define CTL_SYNC_TIMEOUT_MS 300000

enum { EXIT_OK = 0, EXIT_ERR = 1, EXIT_USAGE = 2 };

typedef struct ctl {
	const char *verb;
	/* The first word of a two-word verb while its second runs as a verb
	 * of its own (`GROUP get`: kc_verb_run), else NULL: messages name
	 * both words, as the user typed them. */
	const char *group;
	const char *socket_flag;
	char socket[4096];
	api_client_t *c;
	/* Where object `at` of the request came from ("web.yaml: document
	 * 2"), to name it as local errors do; NULL: as tankd says. */
	bool (*where)(const void *arg, size_t at, char *buf, size_t cap);
	const void *where_arg;
} ctl_t;

/* "tankctl: VERB:" and then `after` on stderr ("tankctl: " and `after`
 * with no verb yet). */
static void ctl_who(const ctl_t *x, const char *after)
{
	fprintf(stderr, "tankctl: %s%s%s%s%s", x->group ? x->group : "", x->group ? " " : "",
		x->verb ? x->verb : "", x->verb ? ":" : "", x->verb ? after : "");
}

typedef struct verb {
	const char *name;
	int (*run)(ctl_t *x, int argc, char **argv);
	const char *usage;    /* after "tankctl VERB " */
	const char *help;     /* one paragraph */
} verb_t;

static const verb_t *ctl_find(const char *name);
static int ctl_cmp_str(const void *a, const void *b);
static const char *ctl_farewell(const api_incoming_t *in, char *why, size_t cap);

/* --- plumbing --------------------------------------------------------------- */

static int ctl_usage_error(ctl_t *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* getopt_long's ':' (an option without its value) or '?' (an unknown
 * one): one message naming the option.  Every optstring starts with ':'
 * and opterr is off, so getopt itself says nothing. */
static int ctl_bad_option(ctl_t *x, int o, char **argv)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "";

	if (o == ':')
		return ctl_usage_error(x, "option '%s' needs a value", arg);
	if (optopt)
		return ctl_usage_error(x, "unknown option '-%c'", optopt);
	return ctl_usage_error(x, "unknown option '%s'", arg);
}

static int ctl_usage_error(ctl_t *x, const char *fmt, ...)
{
	const verb_t *v = x->verb ? ctl_find(x->verb) : NULL;
	va_list ap;

	ctl_who(x, " ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (v)
		fprintf(stderr, "\nusage: tankctl %s%s%s\n", v->name, v->usage[0] ? " " : "",
			v->usage);
	else
		fprintf(stderr, "\nrun 'tankctl --help' for the verbs\n");
	return EXIT_USAGE;
}

static int ctl_fail(ctl_t *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int ctl_fail(ctl_t *x, const char *fmt, ...)
{
	va_list ap;

	ctl_who(x, " ");
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

/* A detail of tankd's as local errors read: `KINDS[N]: rest` (`pods[2]:
 * `, `stacks[0]: `, any kind's plural: docs/rpc.md) becomes `FILE:
 * document D: rest` when the request says where object N came from. */
static void ctl_print_detail(ctl_t *x, const char *d, size_t len)
{
	char where[512], plural[32];
	unsigned long at;
	int used = 0;

	if (x->where && sscanf(d, "%31[a-z][%lu]: %n", plural, &at, &used) == 2 && used > 0 &&
	    (size_t)used <= len && x->where(x->where_arg, at, where, sizeof where)) {
		fprintf(stderr, "  %s: %.*s\n", where, (int)(len - (size_t)used), d + used);
		return;
	}
	fprintf(stderr, "  %.*s\n", (int)len, d);
}

/* Prints a daemon-reported error with its details: a list of strings (a
 * manifest's validation messages) one per line, anything else as YAML.
 * A message that ends with the first detail ("2 errors: pods[2]: …") is
 * printed without it: the detail follows on its own line. */
static void ctl_print_remote_error(ctl_t *x, const api_incoming_t *in)
{
	const msgpack_object *d = in->details;
	bool all_str = d && d->type == MSGPACK_OBJECT_ARRAY && d->via.array.size;

	for (uint32_t i = 0; all_str && i < d->via.array.size; i++)
		all_str &= d->via.array.ptr[i].type == MSGPACK_OBJECT_STR;
	if (all_str) {
		const msgpack_object *d0 = &d->via.array.ptr[0];
		size_t ml = strlen(in->message), dl = d0->via.str.size;
		size_t lead = ml;
		if (dl <= ml && !memcmp(in->message + ml - dl, d0->via.str.ptr, dl)) {
			lead = ml - dl;
			while (lead && (in->message[lead - 1] == ' ' || in->message[lead - 1] == ':'))
				lead--;
		}
		ctl_who(x, lead ? " " : "\n");
		if (lead)
			fprintf(stderr, "%.*s:\n", (int)lead, in->message);
		for (uint32_t i = 0; i < d->via.array.size; i++)
			ctl_print_detail(x, d->via.array.ptr[i].via.str.ptr,
					 d->via.array.ptr[i].via.str.size);
		return;
	}
	ctl_who(x, " ");
	fprintf(stderr, "%s\n", in->message);
	if (!d || d->type == MSGPACK_OBJECT_NIL)
		return;
	mf_doc_emit(d, MF_DOC_YAML, stderr);
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

/* -o yaml|json output: times as RFC 3339, as the tables print them. */
static int ctl_emit(ctl_t *x, const msgpack_object *o, enum mf_doc_format fmt)
{
	msgpack_zone *z = msgpack_zone_new(4096);
	msgpack_object t;
	int r = z ? cli_times_to_text(o, z, &t) : -ENOMEM;

	if (r == 0)
		r = mf_doc_emit(&t, fmt, stdout);
	if (z)
		msgpack_zone_free(z);
	if (r < 0)
		return ctl_fail(x, "cannot print the answer: %s", tank_strerror(r));
	return 0;
}

/* -o yaml|json; returns -1 for an unknown format. */
static int ctl_format(const char *s, enum mf_doc_format *fmt)
{
	if (strcmp(s, "yaml") == 0)
		*fmt = MF_DOC_YAML;
	else if (strcmp(s, "json") == 0)
		*fmt = MF_DOC_JSON;
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
enum { OPT_HELP = 0x100, OPT_TAIL, OPT_WAIT, OPT_LIMIT, OPT_TIMEOUT, OPT_IGNORE_NF, OPT_SINCE,
       OPT_DRY_RUN, OPT_NO_HEADERS };

static int ctl_help(const verb_t *v)
{
	printf("usage: tankctl %s%s%s\n\n%s\n", v->name, v->usage[0] ? " " : "", v->usage,
	       v->help);
	return EXIT_OK;
}

/* Param packers. */
/* [] */
static int pack_nothing(msgpack_packer *pk, void *arg)
{
	(void)arg;
	return msgpack_pack_array(pk, 0);
}

static int pack_name(msgpack_packer *pk, void *arg)
{
	msgpack_pack_array(pk, 1);
	return api_pack_cstr(pk, arg);
}

/* The kinds tankctl knows: the shipped list (the first is the default,
 * which requests do not name). */
static const kind_t *const *const ctl_kinds = tank_kinds;

static bool ctl_is_default(const kind_t *k)
{
	return !k || k == ctl_kinds[0];
}

/* {kind: NAME} for a kind other than the default (one more map entry when
 * extra is set, which the caller packs). */
static int pack_kind_opt(msgpack_packer *pk, const kind_t *k, size_t extra)
{
	bool named = !ctl_is_default(k);
	msgpack_pack_map(pk, named + extra);
	if (!named)
		return 0;
	api_pack_cstr(pk, "kind");
	return api_pack_cstr(pk, k->name);
}

typedef struct name_kind { const char *name; const kind_t *kind; } name_kind_t;

/* [name, {kind: K}] for a kind other than the default, [name] otherwise;
 * name NULL: nil. */
static int pack_name_kind(msgpack_packer *pk, void *arg)
{
	name_kind_t *nk = arg;
	bool named = !ctl_is_default(nk->kind);
	msgpack_pack_array(pk, named ? 2 : 1);
	if (nk->name)
		api_pack_cstr(pk, nk->name);
	else
		msgpack_pack_nil(pk);
	return named ? pack_kind_opt(pk, nk->kind, 0) : 0;
}

/* [{kind: K}]: `list` of a kind. */
static int pack_kind_only(msgpack_packer *pk, void *arg)
{
	msgpack_pack_array(pk, 1);
	return pack_kind_opt(pk, arg, 0);
}

/* An optional kind word before the names (`get KIND NAME`, kubectl's
 * habit): a kind's name, plural or short name, consumed when at least
 * `min` arguments follow it.  The default kind when absent.  (An object
 * named like a kind word is `get pod WORD`.) */
static const kind_t *ctl_kind_word(int argc, char **argv, int min)
{
	const kind_t *k;

	if (argc - optind >= 1 + min &&
	    (k = kind_find(ctl_kinds, argv[optind], strlen(argv[optind])))) {
		optind++;
		return k;
	}
	return ctl_kinds[0];
}

/* `[KIND] NAME` or kubectl's `KIND/NAME` at argv[optind]: *k the kind
 * (ctl_kind_word's rule for the first form, the default kind without
 * one); for the second, KIND is what comes before the first '/' (an
 * applied object's name has none; an id with a '/' of its own keeps it:
 * KIND/OWNER/N)
 * and argv[optind] becomes the rest.  -1 to go on, or a usage error's
 * exit code (an unknown KIND, no name after the '/'). */
static int ctl_kind_ref(ctl_t *x, int argc, char **argv, int min, const kind_t **k)
{
	const char *slash = optind < argc ? strchr(argv[optind], '/') : NULL;

	if (!slash) {
		*k = ctl_kind_word(argc, argv, min);
		return -1;
	}
	if (!(*k = kind_find(ctl_kinds, argv[optind], (size_t)(slash - argv[optind]))))
		return ctl_usage_error(x, "unknown kind '%.*s'", (int)(slash - argv[optind]),
				       argv[optind]);
	if (!slash[1])
		return ctl_usage_error(x, "'%s' names no object: KIND/NAME", argv[optind]);
	argv[optind] += slash + 1 - argv[optind];
	return -1;
}

/* The kind of a manifest object. */
static const kind_t *ctl_kind_of(const mf_object_t *o)
{
	for (size_t i = 0; ctl_kinds[i]; i++)
		if (ctl_kinds[i]->mf == o->kind)
			return ctl_kinds[i];
	return ctl_kinds[0];
}

/* "KIND/" before a name of a kind other than the default. */
static void ctl_print_ref(const char *kind, const char *name, const char *what)
{
	bool dflt = !kind || !kind[0] || !strcmp(kind, ctl_kinds[0]->name);
	printf("%s%s%s %s\n", dflt ? "" : kind, dflt ? "" : "/", name, what);
}

/* --- verbs ------------------------------------------------------------------ */

/* Parses the options of a verb whose only option is --help: -1 to go on
 * (optind at the first argument), else the verb's exit code (its help
 * printed, or a bad option named). */
static int ctl_only_help(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, OPT_HELP }, { 0 } };
	int o;

	while ((o = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		return ctl_bad_option(x, o, argv);
	}
	return -1;
}

static int v_simple(ctl_t *x, int argc, char **argv, const char *method, int timeout)
{
	api_incoming_t in;
	int r;

	if ((r = ctl_only_help(x, argc, argv)) >= 0)
		return r;
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
	api_incoming_t in;
	int r;

	if ((r = ctl_only_help(x, argc, argv)) >= 0)
		return r;
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
	{
		/* Which process serves, and its keeper: a reexec keeps the
		 * pid, a restart changes it. */
		const msgpack_object *pid = api_map_get(in.result, "pid");
		const msgpack_object *kp = api_map_get(in.result, "keeper_pid");
		if (pid && pid->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
			printf("pid %llu", (unsigned long long)pid->via.u64);
			if (kp && kp->type == MSGPACK_OBJECT_POSITIVE_INTEGER && kp->via.u64)
				printf(", keeper pid %llu", (unsigned long long)kp->via.u64);
			else
				printf(", no keeper");
			printf("\n");
		}
	}
	const msgpack_object *st = api_map_get(in.result, "store");
	if (st && st->type == MSGPACK_OBJECT_MAP) {
		/* How full the store is: what an operator sizes the data dir by. */
		const char *keys[] = { "used", "total", "reserve", "flush_failures",
				       "history_dropped", "history_trimmed" };
		uint64_t val[6] = { 0 };
		for (int i = 0; i < 6; i++) {
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
		if (val[5])
			printf(", %llu history entries trimmed for applies",
			       (unsigned long long)val[5]);
		printf("\n");
	}
	api_incoming_free(&in);
	return EXIT_OK;
}

static uint64_t ctl_u64(const msgpack_object *m, const char *key)
{
	const msgpack_object *o = api_map_get(m, key);
	return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
}

/* `daemon status`: the serving process; `daemon reexec`: re-executes it
 * in place (docs/operations.md, "Upgrades"). */
static int v_daemon(ctl_t *x, int argc, char **argv)
{
	api_incoming_t in;
	int r;

	if ((r = ctl_only_help(x, argc, argv)) >= 0)
		return r;
	if (optind == argc)
		return ctl_usage_error(x, "expected status or reexec");
	if (strcmp(argv[optind], "status") != 0 && strcmp(argv[optind], "reexec") != 0)
		return ctl_usage_error(x, "unknown subcommand '%s': expected status or reexec",
				       argv[optind]);
	if (optind != argc - 1)
		return ctl_usage_error(x, "unexpected '%s' after %s", argv[optind + 1],
				       argv[optind]);
	if (strcmp(argv[optind], "reexec") == 0) {
		uint64_t before, after;
		if ((r = ctl_call(x, "daemon.status", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0)
			return r;
		before = ctl_u64(in.result, "reexecs");
		api_incoming_free(&in);
		if ((r = ctl_call(x, "daemon.reexec", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0)
			return r;
		api_incoming_free(&in);
		/* Done once the new image answers (its count is one up): the
		 * connection made meanwhile waits in the socket's backlog. */
		for (int i = 0; i < 300; i++) {
			struct timespec ts = { 0, 20 * 1000000L };
			tank_error_t e;
			nanosleep(&ts, NULL);
			/* The exec closed our connection: a new one waits in
			 * the socket's backlog until the new image serves. */
			api_client_close(x->c);
			x->c = NULL;
			if (ctl_connect(x) != 0)
				continue;
			memset(&in, 0, sizeof in);
			if (api_client_call(x->c, "daemon.status", NULL, NULL, CTL_TIMEOUT_MS, &in,
					    &e) < 0)
				continue;
			after = in.code == API_OK ? ctl_u64(in.result, "reexecs") : 0;
			api_incoming_free(&in);
			if (after > before) {
				printf("tankd re-executed (reexec %llu)\n", (unsigned long long)after);
				return EXIT_OK;
			}
		}
		fprintf(stderr, "tankctl: tankd did not come back from its reexec\n");
		return EXIT_ERR;
	}
	if ((r = ctl_call(x, "daemon.status", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	char v[128], up[KIT_UNIT_BUF];
	if (!api_obj_strcpy(api_map_get(in.result, "version"), v, sizeof v))
		snprintf(v, sizeof v, "unknown");
	uint64_t kp = ctl_u64(in.result, "keeper_pid");
	printf("version    %s\n", v);
	printf("pid        %llu\n", (unsigned long long)ctl_u64(in.result, "pid"));
	if (kp)
		printf("keeper     %llu\n", (unsigned long long)kp);
	else
		printf("keeper     none\n");
	/* As systemctl status: how long, and since when (it printed the
	 * raw duration, "1342497ms"). */
	uint64_t up_ms = ctl_u64(in.result, "uptime_ms");
	struct timespec now;
	char since[40];
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t now_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	cli_format_age(up_ms, up, sizeof up);
	cli_format_time(now_ms > up_ms ? now_ms - up_ms : 0, since, sizeof since);
	printf("uptime     %s (since %s)\n", up, since);
	printf("reexecs    %llu\n", (unsigned long long)ctl_u64(in.result, "reexecs"));
	printf("restarts   %llu\n", (unsigned long long)ctl_u64(in.result, "restarts"));
	printf("adopted    %llu\n", (unsigned long long)ctl_u64(in.result, "adopted"));
	if (kp && api_map_get(in.result, "keeper_exits"))
		printf("kept       %llu processes' pipes, %llu exits not yet stored\n",
		       (unsigned long long)ctl_u64(in.result, "keeper_held"),
		       (unsigned long long)ctl_u64(in.result, "keeper_exits"));
	api_incoming_free(&in);
	return EXIT_OK;
}

/* Options of the verbs that print a document: --help and -o yaml|json
 * (and -o name where as_names is not NULL: KIND/NAME lines, as kubectl).
 * Returns -1 to go on, or the exit status to return (help, usage). */
static int ctl_output_opts(ctl_t *x, int argc, char **argv, enum mf_doc_format *fmt,
			   const char **selector, bool *as_names)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "selector", required_argument, NULL, 'l' },
		{ "output", required_argument, NULL, 'o' }, { 0 } };
	int o;

	while ((o = getopt_long(argc, argv, ":o:l:", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == 'l' && selector) {
			*selector = optarg;
			continue;
		}
		if (o == 'o' && ctl_format(optarg, fmt) == 0)
			continue;
		if (o == 'o' && as_names && !strcmp(optarg, "name")) {
			*as_names = true;
			continue;
		}
		if (o == 'o')
			return ctl_usage_error(x, as_names ? "-o takes yaml, json or name"
						       : "-o takes yaml or json");
		return ctl_bad_option(x, o, argv);
	}
	return -1;
}

/* `-o name`: a KIND/NAME line for each map of list `all` (or for the one
 * map `all`); k NULL: the bare names (`ps -q`). */
static void ctl_print_names(const kind_t *k, const msgpack_object *all)
{
	uint32_t n = all->type == MSGPACK_OBJECT_ARRAY ? all->via.array.size : 1;
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *o = all->type == MSGPACK_OBJECT_ARRAY
					  ? &all->via.array.ptr[i] : all;
		const msgpack_object *nm = api_map_get(o, "name");
		if (nm && nm->type == MSGPACK_OBJECT_STR)
			printf("%s%s%.*s\n", k ? k->name : "", k ? "/" : "",
			       (int)nm->via.str.size, nm->via.str.ptr);
	}
}

/* A table of one kind: its descriptor's columns, one row per status map
 * of `statuses` whose `owner` key (the name of the owning kind) is
 * `in` (NULL: in none; (char *)-1: every row), sorted by name. */
/* `ps --no-headers`: tables print their rows only (cmd/ may keep the
 * process's options in statics). */
static bool ctl_no_headers;

static int ctl_kind_table(const kind_t *k, const msgpack_object *statuses, const char *owner,
			  const char *in, uint64_t now, bool print)
{
	const char *heads[KIND_COLS_MAX];
	kind_col_t cols[KIND_COLS_MAX];
	size_t ncols = kind_table_cols(ctl_kinds, k, statuses, cols);
	cli_table_t t;
	int bad;

	for (size_t c = 0; c < ncols; c++)
		heads[c] = cols[c].header;
	bad = cli_table_init(&t, ncols, heads) < 0 ||
	      cli_kind_rows(k, statuses, owner, in, now, &t) < 0;
	t.headless = ctl_no_headers;
	t.colour = cli_colour_ok(stdout);
	int rows = (int)t.nrows;
	if (!bad && print)
		bad |= cli_table_print(&t, stdout) < 0;
	cli_table_free(&t);
	return bad ? -1 : rows;
}

/* `-l SELECTOR` (cmd/lib/cli_select.h): 0 with *s parsed, or exit 2
 * with a message naming it. */
static int ctl_selector(ctl_t *x, const char *text, cli_sel_t *s)
{
	char why[512];
	int err = cli_sel_parse(text, s, why, sizeof why);
	if (err == -ENOMEM)
		return ctl_fail(x, "out of memory");
	if (err < 0)
		return ctl_usage_error(x, "bad selector \"%s\": %s", text, why);
	return 0;
}

/* The names of k's objects whose labels match `selector` (one list
 * call), as a NULL-terminated array in *out (ctl_names_free).  0, or the
 * exit code with the error printed (a bad selector: 2). */
static void ctl_names_free(char **names)
{
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}

static int ctl_selected_all(ctl_t *x, const kind_t *k, const char *selector, char ***out,
			    char ***every);

static int ctl_selected(ctl_t *x, const kind_t *k, const char *selector, char ***out)
{
	return ctl_selected_all(x, k, selector, out, NULL);
}

/* ctl_selected, and when every is not NULL every name of the kind too
 * (matching or not), the same way. */
static int ctl_selected_all(ctl_t *x, const kind_t *k, const char *selector, char ***out,
			    char ***every)
{
	api_incoming_t in;
	cli_sel_t sel;
	char **names = NULL, **evn = NULL;
	size_t n = 0, ne = 0;
	int r;

	*out = NULL;
	if (every)
		*every = NULL;
	if ((r = ctl_selector(x, selector, &sel)) != 0)
		return r;
	if ((r = ctl_call(x, "list", pack_kind_only, (void *)k, CTL_TIMEOUT_MS, &in)) != 0) {
		cli_sel_free(&sel);
		return r;
	}
	const msgpack_object *all = in.result;
	uint32_t cap = all->type == MSGPACK_OBJECT_ARRAY ? all->via.array.size : 0;
	if (!(names = calloc(cap + 1, sizeof *names)) ||
	    (every && !(evn = calloc(cap + 1, sizeof *evn))))
		r = ctl_fail(x, "out of memory");
	for (uint32_t i = 0; !r && i < cap; i++) {
		const msgpack_object *o = &all->via.array.ptr[i];
		char nm[256];
		if (!api_obj_strcpy(api_map_get(o, "name"), nm, sizeof nm))
			continue;
		if (evn && !(evn[ne++] = strdup(nm)))
			r = ctl_fail(x, "out of memory");
		if (r || !cli_sel_match_obj(&sel, o))
			continue;
		if (!(names[n++] = strdup(nm)))
			r = ctl_fail(x, "out of memory");
	}
	cli_sel_free(&sel);
	api_incoming_free(&in);
	if (r) {
		ctl_names_free(names);
		ctl_names_free(evn);
		return r;
	}
	qsort(names, n, sizeof *names, ctl_cmp_str);
	*out = names;
	if (every)
		*every = evn;
	return 0;
}

/* One-name verbs with -o: get, status NAME. */
static int v_get(ctl_t *x, int argc, char **argv)
{
	enum mf_doc_format fmt = MF_DOC_YAML;
	bool structured = false;
	api_incoming_t in;
	const kind_t *k;
	int r;

	for (int i = 1; i < argc; i++)
		structured |= !strcmp(argv[i], "-o") || !strncmp(argv[i], "-o", 2) ||
			      !strncmp(argv[i], "--output", 8);
	const char *selector = NULL;
	bool as_names = false;
	if ((r = ctl_output_opts(x, argc, argv, &fmt, &selector, &as_names)) >= 0)
		return r;
	structured &= !as_names;
	if (argc - optind == 1 && (k = kind_find(ctl_kinds, argv[optind], strlen(argv[optind]))) &&
	    strcasecmp(argv[optind], k->name) != 0) {
		/* Every object of a kind (kubectl's `get KIND`): its table,
		 * or with -o its objects, spec and status; with -l those
		 * whose labels match. */
		cli_sel_t sel = { 0 };
		msgpack_object all;
		msgpack_zone *z;
		if (selector && (r = ctl_selector(x, selector, &sel)) != 0)
			return r;
		if (!structured && !as_names && k->ncols)
			r = ctl_call(x, "status", ctl_is_default(k) ? NULL : pack_name_kind,
				     &(name_kind_t){ NULL, k }, CTL_TIMEOUT_MS, &in);
		else
			r = ctl_call(x, "list", pack_kind_only, (void *)k, CTL_TIMEOUT_MS, &in);
		if (r) {
			cli_sel_free(&sel);
			return r;
		}
		if (!(z = msgpack_zone_new(1024)) || cli_sel_filter(&sel, in.result, z, &all) < 0)
			r = ctl_fail(x, "out of memory");
		else if (selector && all.type == MSGPACK_OBJECT_ARRAY && !all.via.array.size &&
			 !structured)
			fprintf(stderr, "No resources found\n");
		else if (as_names)
			ctl_print_names(k, &all);
		else if (!structured && k->ncols)
			r = ctl_kind_table(k, &all, NULL, (const char *)-1, ctl_now_ms(), true) < 0
				? ctl_fail(x, "unexpected answer from tankd") : 0;
		else
			r = ctl_emit(x, &all, fmt);
		if (z)
			msgpack_zone_free(z);
		cli_sel_free(&sel);
		api_incoming_free(&in);
		return r;
	}
	if (selector)
		return ctl_usage_error(x, "-l takes a kind's plural (get pods -l app=web), not a name");
	if (argc - optind == 1 && (k = kind_find(ctl_kinds, argv[optind], strlen(argv[optind]))))
		return ctl_usage_error(x, "needs a %s name (an object named %s: get %s %s)",
				       k->name, k->name, ctl_kinds[0]->name, k->name);
	if ((r = ctl_kind_ref(x, argc, argv, 1, &k)) >= 0)
		return r;
	if (argc - optind != 1)
		return ctl_usage_error(x, "needs one name (a %s's, or: KIND NAME, KIND/NAME; or: "
				       "KIND's plural)", ctl_kinds[0]->name);
	name_kind_t nk = { argv[optind], k };
	if ((r = ctl_call(x, "get", pack_name_kind, &nk, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	if (as_names)
		printf("%s/%s\n", k->name, argv[optind]);
	else
		r = ctl_emit(x, in.result, fmt);
	api_incoming_free(&in);
	return r;
}

static int v_status(ctl_t *x, int argc, char **argv)
{
	enum mf_doc_format fmt = MF_DOC_YAML;
	api_incoming_t in;
	int r;

	if ((r = ctl_output_opts(x, argc, argv, &fmt, NULL, NULL)) >= 0)
		return r;
	const kind_t *k;
	if ((r = ctl_kind_ref(x, argc, argv, 0, &k)) >= 0)
		return r;
	if (argc - optind > 1)
		return ctl_usage_error(x, "takes at most one name");
	name_kind_t nk = { argc > optind ? argv[optind] : NULL, k };
	r = ctl_call(x, "status", argc > optind || !ctl_is_default(k) ? pack_name_kind : NULL, &nk,
		     CTL_TIMEOUT_MS, &in);
	if (r)
		return r;
	r = ctl_emit(x, in.result, fmt);
	api_incoming_free(&in);
	return r;
}

/* `ps`: each kind that owns objects of another (its `children`) first,
 * one row each, then a table of the children per owner, then those in
 * none: grouped as `docker compose ls` and `ps`.  The default kind's
 * table alone when no owner has any. */
/* The maps of list `all` whose name is one of names[0..n) (zone z owns
 * the new list): `ps NAME…`. */
static int ctl_only_names(const msgpack_object *all, char **names, int n, msgpack_zone *z,
			  msgpack_object *out)
{
	*out = *all;
	if (all->type != MSGPACK_OBJECT_ARRAY || n <= 0)
		return 0;
	msgpack_object *a = msgpack_zone_malloc(z, (all->via.array.size + 1) * sizeof *a);
	uint32_t k = 0;
	if (!a)
		return -ENOMEM;
	for (uint32_t i = 0; i < all->via.array.size; i++)
		for (int j = 0; j < n; j++)
			if (api_obj_streq(api_map_get(&all->via.array.ptr[i], "name"), names[j])) {
				a[k++] = all->via.array.ptr[i];
				break;
			}
	out->via.array.ptr = a;
	out->via.array.size = k;
	return 0;
}

/* The rows `ps -w` printed last, by pod: a row is printed again only
 * when it changed (several events of one restart give one row). */
typedef struct ps_seen {
	char **name, **row;
	size_t n;
} ps_seen_t;

static void ctl_ps_row(ps_seen_t *seen, const char *name, const msgpack_object *one)
{
	const char *heads[KIND_COLS_MAX];
	const kind_t *k = ctl_kinds[0];
	cli_table_t t;
	char *buf = NULL;
	size_t len = 0, i;
	FILE *mem;

	for (size_t c = 0; c < k->ncols; c++)
		heads[c] = k->cols[c].header;
	if (cli_table_init(&t, k->ncols, heads) < 0)
		return;
	t.headless = true;
	if (cli_kind_rows(k, one, NULL, (const char *)-1, ctl_now_ms(), &t) < 0 ||
	    !(mem = open_memstream(&buf, &len))) {
		cli_table_free(&t);
		return;
	}
	(void)cli_table_print(&t, mem);
	fclose(mem);
	cli_table_free(&t);
	for (i = 0; i < seen->n && strcmp(seen->name[i], name); i++)
		;
	if (i < seen->n && buf && !strcmp(seen->row[i], buf)) {
		free(buf);
		return;
	}
	if (buf)
		fputs(buf, stdout);
	if (i < seen->n) {
		free(seen->row[i]);
		seen->row[i] = buf;
		return;
	}
	char **nn = realloc(seen->name, (seen->n + 1) * sizeof *nn);
	if (nn)
		seen->name = nn;
	char **nr = nn ? realloc(seen->row, (seen->n + 1) * sizeof *nr) : NULL;
	if (nr)
		seen->row = nr;
	if (!nn || !nr || !(seen->name[seen->n] = strdup(name))) {
		free(buf);
		return;
	}
	seen->row[seen->n++] = buf;
}

/* `ps -w`: after the table, one row for each pod whose news comes on the
 * events stream (no polling), until interrupted. */
static int ctl_ps_watch(ctl_t *x, char **names, int n)
{
	api_incoming_t in, st;
	ps_seen_t seen = { NULL, NULL, 0 };
	tank_error_t e;
	char why[256];
	int r;

	if ((r = ctl_call(x, "subscribe", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	api_incoming_free(&in);
	for (;;) {
		if ((r = api_client_next(x->c, -1, &in, &e)) < 0)
			break;
		if (ctl_farewell(&in, why, sizeof why)) {
			api_incoming_free(&in);
			r = -EPIPE;
			break;
		}
		for (uint32_t i = 0; in.type == API_NOTIFICATION && !strcmp(in.method, "event") &&
				     i < in.params->via.array.size; i++) {
			char name[256];
			if (!api_obj_strcpy(api_map_get(&in.params->via.array.ptr[i], ctl_kinds[0]->name),
					    name, sizeof name))
				continue;
			bool wanted = n <= 0;
			for (int j = 0; j < n && !wanted; j++)
				wanted = !strcmp(names[j], name);
			if (!wanted)
				continue;
			/* A row of that pod as it is now, asked on a second
			 * connection: this one carries the stream. */
			api_client_t *stream = x->c;
			x->c = NULL;
			memset(&st, 0, sizeof st);
			if (ctl_connect(x) != 0) {
				;                       /* said */
			} else if (api_client_call(x->c, "status", pack_name, name, CTL_TIMEOUT_MS,
						   &st, &e) < 0) {
				ctl_fail(x, "%s", e.msg);
				api_incoming_free(&st);
			} else if (st.code == API_NOT_FOUND) {
				/* Its news was its delete: a row saying so (once),
				 * not an error (kubectl's -w shows the object go). */
				char phase[] = "deleted";
				msgpack_object_kv kv[2] = {
					{ .key = { .type = MSGPACK_OBJECT_STR,
						   .via.str = { 4, "name" } },
					  .val = { .type = MSGPACK_OBJECT_STR,
						   .via.str = { (uint32_t)strlen(name), name } } },
					{ .key = { .type = MSGPACK_OBJECT_STR,
						   .via.str = { 5, "phase" } },
					  .val = { .type = MSGPACK_OBJECT_STR,
						   .via.str = { (uint32_t)strlen(phase), phase } } } };
				msgpack_object map = { .type = MSGPACK_OBJECT_MAP };
				map.via.map.size = 2;
				map.via.map.ptr = kv;
				msgpack_object one = { .type = MSGPACK_OBJECT_ARRAY };
				one.via.array.size = 1;
				one.via.array.ptr = &map;
				ctl_ps_row(&seen, name, &one);
				api_incoming_free(&st);
			} else if (st.code != API_OK) {
				ctl_print_remote_error(x, &st);
				api_incoming_free(&st);
			} else {
				msgpack_object one = { .type = MSGPACK_OBJECT_ARRAY };
				one.via.array.size = 1;
				one.via.array.ptr = (msgpack_object *)st.result;
				ctl_ps_row(&seen, name, &one);
				api_incoming_free(&st);
			}
			api_client_close(x->c);
			x->c = stream;
		}
		api_incoming_free(&in);
		fflush(stdout);
	}
	for (size_t i = 0; i < seen.n; i++) {
		free(seen.name[i]);
		free(seen.row[i]);
	}
	free(seen.name);
	free(seen.row);
	if (r == -EPIPE)
		return ctl_fail(x, "tankd: %s", why);
	return ctl_fail(x, "%s", r == -ECONNRESET ? "tankd closed the connection" : e.msg);
}

static int v_ps(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "quiet", no_argument, NULL, 'q' },
		{ "no-headers", no_argument, NULL, OPT_NO_HEADERS },
		{ "watch", no_argument, NULL, 'w' },
		{ "selector", required_argument, NULL, 'l' },
		{ "output", required_argument, NULL, 'o' }, { 0 } };
	int o, r = 0, bad = 0;
	bool grouped = false, quiet = false, watch = false, structured = false, as_names = false;
	enum mf_doc_format fmt = MF_DOC_YAML;
	const char *selector = NULL;
	cli_sel_t sel = { 0 };

	while ((o = getopt_long(argc, argv, ":qwo:l:", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == 'q')
			quiet = true;
		else if (o == OPT_NO_HEADERS)
			ctl_no_headers = true;
		else if (o == 'w')
			watch = true;
		else if (o == 'l')
			selector = optarg;
		else if (o == 'o' && !strcmp(optarg, "name"))
			as_names = true;
		else if (o == 'o' && ctl_format(optarg, &fmt) == 0)
			structured = true;
		else
			return o == 'o' ? ctl_usage_error(x, "-o takes yaml, json or name")
					: ctl_bad_option(x, o, argv);
	}
	if (watch && (quiet || structured || as_names))
		return ctl_usage_error(x, "-w prints the table: not with -q or -o");
	if (watch && selector)
		return ctl_usage_error(x, "-w is not yet with -l");
	if (selector && (r = ctl_selector(x, selector, &sel)) != 0)
		return r;
	char **names = argv + optind;
	int nnames = argc - optind;
	uint64_t now = ctl_now_ms();
	api_incoming_t in, pin;
	/* One status call for the pods: the table is one snapshot. */
	if ((r = ctl_call(x, "status", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0) {
		cli_sel_free(&sel);
		return r;
	}
	msgpack_zone *z = msgpack_zone_new(1024);
	msgpack_object pods, all;
	/* -l: the pods whose labels match, shown as named ones are (no
	 * grouping by owner). */
	if (!z || cli_sel_filter(&sel, in.result, z, &all) < 0 ||
	    ctl_only_names(&all, names, nnames, z, &pods) < 0) {
		if (z)
			msgpack_zone_free(z);
		api_incoming_free(&in);
		cli_sel_free(&sel);
		return ctl_fail(x, "out of memory");
	}
	cli_sel_free(&sel);
	for (int j = 0; j < nnames; j++) {
		bool seen = false;
		for (uint32_t i = 0; pods.type == MSGPACK_OBJECT_ARRAY && i < pods.via.array.size; i++)
			seen |= api_obj_streq(api_map_get(&pods.via.array.ptr[i], "name"), names[j]);
		if (!seen) {
			fprintf(stderr, "tankctl: ps: %s \"%s\" not found\n", ctl_kinds[0]->name, names[j]);
			r = EXIT_ERR;
		}
	}
	if (quiet || as_names || structured) {
		if (!structured && pods.type == MSGPACK_OBJECT_ARRAY)
			ctl_print_names(as_names ? ctl_kinds[0] : NULL, &pods);
		int er = structured ? ctl_emit(x, &pods, fmt) : 0;
		msgpack_zone_free(z);
		api_incoming_free(&in);
		return er ? er : r;
	}
	/* Named or selected pods: their rows, without the grouping by owner. */
	if (selector && !nnames) {
		grouped = true;
		if (pods.via.array.size)
			bad |= ctl_kind_table(ctl_kinds[0], &pods, NULL, (const char *)-1, now,
					      true) < 0;
		else
			fprintf(stderr, "No resources found\n");
	}
	if (nnames > 0 && pods.via.array.size) {
		grouped = true;
		bad |= ctl_kind_table(ctl_kinds[0], &pods, NULL, (const char *)-1, now, true) < 0;
	}
	/* --no-headers is for scripts: one row a pod, as -q lists them (the
	 * owners' table and the group titles are headers too). */
	if (ctl_no_headers && nnames <= 0 && !selector) {
		grouped = true;
		bad |= ctl_kind_table(ctl_kinds[0], &pods, NULL, (const char *)-1, now, true) < 0;
	}
	for (size_t i = 0; ctl_kinds[i] && !bad && nnames <= 0 && !selector && !ctl_no_headers;
	     i++) {

		const kind_t *p = ctl_kinds[i];
		if (!p->children || p->children != ctl_kinds[0])
			continue;
		if ((r = ctl_call(x, "status", pack_name_kind, &(name_kind_t){ NULL, p },
				  CTL_TIMEOUT_MS, &pin)) != 0)
			break;
		const msgpack_object *ps = pin.result;
		if (ps->type == MSGPACK_OBJECT_ARRAY && ps->via.array.size) {
			if (grouped)
				putchar('\n');
			grouped = true;
			bad |= ctl_kind_table(p, ps, NULL, (const char *)-1, now, true) < 0;
			/* The owners in the table's order (by name). */
			char **names = calloc(ps->via.array.size, sizeof *names);
			uint32_t nn = 0;
			for (uint32_t j = 0; names && j < ps->via.array.size; j++) {
				char nm[256];
				if (api_obj_strcpy(api_map_get(&ps->via.array.ptr[j], "name"), nm,
						   sizeof nm) && (names[nn] = strdup(nm)))
					nn++;
			}
			if (!names)
				bad = 1;
			else
				qsort(names, nn, sizeof *names, ctl_cmp_str);
			for (uint32_t j = 0; j < nn && !bad; j++) {
				printf("\n%s %s:\n", p->name, names[j]);
				bad |= ctl_kind_table(ctl_kinds[0], in.result, p->name, names[j],
						      now, true) < 0;
			}
			for (uint32_t j = 0; j < nn; j++)
				free(names[j]);
			free(names);
			int rest = bad ? -1 : ctl_kind_table(ctl_kinds[0], in.result, p->name, NULL,
							      now, false);
			if (rest > 0) {
				printf("\nno %s:\n", p->name);
				bad |= ctl_kind_table(ctl_kinds[0], in.result, p->name, NULL, now,
						      true) < 0;
			}
			bad |= rest < 0;
		}
		api_incoming_free(&pin);
	}
	if (!r && !bad && !grouped && nnames <= 0 && !selector)
		bad |= ctl_kind_table(ctl_kinds[0], in.result, NULL, (const char *)-1, now, true) < 0;
	if (bad)
		r = ctl_fail(x, "unexpected answer from tankd");
	msgpack_zone_free(z);
	api_incoming_free(&in);
	fflush(stdout);
	if (!r && watch)
		r = ctl_ps_watch(x, names, nnames);
	return r;
}

/* The ms left before deadline (0: none), as a poll timeout: at most
 * CTL_WAIT_QUIET_MS, so that a wait looks again now and then even when no
 * event comes (an event lost to a full connection buffer). */
#define CTL_WAIT_QUIET_MS 5000
static int ctl_wait_timeout(uint64_t deadline)
{
	if (!deadline)
		return CTL_WAIT_QUIET_MS;
	uint64_t now = ctl_now_ms();
	uint64_t left = deadline > now ? deadline - now : 0;
	return left < CTL_WAIT_QUIET_MS ? (int)left : CTL_WAIT_QUIET_MS;
}

/* The children of (k, name) (the objects it is the parent of: each child's status
 * map names its parent under k's name), each observed through its kind
 * and remembered in w: whether one of them moved since the last look (a
 * looped one did not), and whether one failed. */
static int ctl_children_moved(ctl_t *x, const kind_t *k, const char *name, cli_watch_t *w,
			      unsigned pass, bool *moved, bool *failed)
{
	const kind_t *ck = k->children;
	api_incoming_t in;
	int r;

	*moved = *failed = false;
	if (!ck || !ck->observe)
		return 0;
	if ((r = ctl_call(x, "status", ctl_is_default(ck) ? NULL : pack_name_kind,
			  &(name_kind_t){ NULL, ck }, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	for (uint32_t i = 0; in.result->type == MSGPACK_OBJECT_ARRAY &&
			     i < in.result->via.array.size; i++) {
		const msgpack_object *s = &in.result->via.array.ptr[i];
		char cname[256];
		rc_observed_t ob;
		bool looped;
		if (!api_obj_streq(api_map_get(s, k->name), name) ||
		    !api_obj_strcpy(api_map_get(s, "name"), cname, sizeof cname) ||
		    ck->observe(NULL, s, NULL, &ob) < 0)
			continue;
		*moved |= cli_watch_moved(w, ck, cname, pass, &ob, &looped) && !looped;
		*failed |= ob.state == RC_OBS_FAILED;
	}
	api_incoming_free(&in);
	return 0;
}

/* A wait for one object (a verb's --wait): subscribed to the events
 * first, then its status passed through its kind's observation, again at
 * each event that names it (an event map whose key of the kind's name is
 * the object's) and after CTL_WAIT_QUIET_MS without one, each look a pass
 * of the generic rule (rc_converge.h), as `apply --wait`'s: done or
 * failed, or no progress in 3 looks (of the object and of the objects
 * it is the parent of), or the timeout.  A verdict read from a status older
 * than the verb (its `since` before it, when the verb changed something)
 * is not one: that is the state the verb was asked to change. */
static int ctl_wait_one(ctl_t *x, const kind_t *k, const char *name, const char *want,
			uint64_t timeout_ms, uint64_t t0, bool changed, const char *said)
{
	uint64_t deadline = timeout_ms ? ctl_now_ms() + timeout_ms : 0;
	name_kind_t nk = { name, k };
	api_incoming_t in;
	rc_observed_t ob;
	const rc_observed_t *have[1] = { &ob };
	rc_conv_t conv;
	cli_watch_t kids = { 0 };
	tank_error_t e;
	char phase[64], why[256];
	int r;

	if ((r = ctl_call(x, "subscribe", NULL, NULL, CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	api_incoming_free(&in);
	if (rc_conv_init(&conv, 1) < 0)
		return ctl_fail(x, "out of memory");
	conv.bounded = deadline != 0;
	for (bool look = true;;) {
		if (look) {
			bool kmoved, kfailed;
			if ((r = ctl_call(x, "status", pack_name_kind, &nk, CTL_TIMEOUT_MS, &in)) != 0)
				goto out;
			memset(&ob, 0, sizeof ob);
			if (k->observe)
				k->observe(NULL, in.result, want, &ob);
			else
				ob.state = RC_OBS_DONE;
			api_obj_strcpy(api_map_get(in.result, "phase"), phase, sizeof phase);
			api_incoming_free(&in);
			if (changed && ob.state != RC_OBS_PENDING && ob.since > 0 &&
			    (uint64_t)ob.since < t0) {
				ob.state = RC_OBS_PENDING;
				snprintf(why, sizeof why, "%.200s (from before %.20s)", ob.why, x->verb);
				snprintf(ob.why, sizeof ob.why, "%s", why);
			}
			if ((r = ctl_children_moved(x, k, name, &kids, conv.passes, &kmoved,
						    &kfailed)) != 0)
				goto out;
			if (ob.state == RC_OBS_PENDING) {
				ob.moving |= kmoved;
				ob.blocked |= kfailed && !kmoved;
			}
			rc_conv_verdict_t v = rc_conv_pass(&conv, have);
			if (conv.objs[0].verdict == RC_CONV_OBJ_CONVERGED ||
			    (v == RC_CONV_DONE && !rc_conv_any_failed(&conv))) {
				/* The verb's own line said it already ("web
				 * stopped" twice): only news is printed. */
				if (!said || strcmp(said, phase[0] ? phase : "done") != 0)
					ctl_print_ref(k->name, name, phase[0] ? phase : "done");
				r = EXIT_OK;
				goto out;
			}
			if (rc_conv_any_failed(&conv)) {
				r = ctl_fail(x, "%s %s failed: %s", k->name, name, ob.why);
				goto out;
			}
			if (v == RC_CONV_STUCK) {
				r = ctl_fail(x, "no progress in %d looks: %s %s is %s", RC_CONV_PATIENCE,
					     k->name, name, ob.why);
				goto out;
			}
		}
		if (deadline && ctl_now_ms() >= deadline) {
			r = ctl_fail(x, "timed out: %s %s is %s", k->name, name, ob.why);
			goto out;
		}
		r = api_client_next(x->c, ctl_wait_timeout(deadline), &in, &e);
		if (r == -ETIMEDOUT) {
			look = true;            /* quiet: look once more */
			continue;
		}
		if (r < 0) {
			r = ctl_fail(x, "%s", e.msg);
			goto out;
		}
		if (ctl_farewell(&in, why, sizeof why)) {
			api_incoming_free(&in);
			r = ctl_fail(x, "tankd: %s", why);
			goto out;
		}
		look = false;
		if (in.type == API_NOTIFICATION && strcmp(in.method, "event") == 0)
			for (uint32_t i = 0; i < in.params->via.array.size; i++)
				look |= api_obj_streq(api_map_get(&in.params->via.array.ptr[i],
								  k->name), name);
		api_incoming_free(&in);
	}
out:
	rc_conv_free(&conv);
	cli_watch_free(&kids);
	return r;
}

/* A kind's own verb (`up`, `down`): VERB NAME [--wait [--timeout D]]; with
 * --wait, the object as its kind observes it for that verb. */
/* A document verb's result (KIND_VERB_DOC): its table when it is an
 * array of maps and the verb has columns, else a document. */
static int ctl_verb_doc(ctl_t *x, const kind_verb_t *kv, const msgpack_object *res,
			enum mf_doc_format fmt, bool structured)
{
	if (!structured && kv->ncols && res->type == MSGPACK_OBJECT_ARRAY) {
		const char *heads[KIND_COLS_MAX];
		char cells[KIND_COLS_MAX][256];
		const char *row[KIND_COLS_MAX];
		uint64_t now = ctl_now_ms();
		cli_table_t t;
		int bad;
		size_t nc = kv->ncols < KIND_COLS_MAX ? kv->ncols : KIND_COLS_MAX;
		for (size_t c = 0; c < nc; c++)
			heads[c] = kv->cols[c].header;
		bad = cli_table_init(&t, nc, heads) < 0;
		t.headless = ctl_no_headers;
		for (uint32_t i = 0; !bad && i < res->via.array.size; i++) {
			for (size_t c = 0; c < nc; c++) {
				kind_col_cell(&kv->cols[c], &res->via.array.ptr[i], now, cells[c],
					      sizeof cells[c]);
				row[c] = cells[c];
			}
			bad = cli_table_add(&t, row) < 0;
		}
		if (!bad)
			bad = cli_table_print(&t, stdout) < 0;
		cli_table_free(&t);
		return bad ? ctl_fail(x, "cannot print the answer") : EXIT_OK;
	}
	return ctl_emit(x, res, fmt) ? EXIT_ERR : EXIT_OK;
}

typedef struct follow_arg {
	const char *name;
	uint64_t offset;
} follow_arg_t;

static int pack_follow_arg(msgpack_packer *pk, void *arg)
{
	const follow_arg_t *f = arg;
	int rc = msgpack_pack_array(pk, 2);
	rc |= api_pack_cstr(pk, f->name);
	rc |= msgpack_pack_map(pk, 1);
	rc |= api_pack_cstr(pk, "offset");
	rc |= msgpack_pack_uint64(pk, f->offset);
	return rc;
}

#define CTL_FOLLOW_MS 200

/* A text verb (KIND_VERB_FOLLOW): {text, next, done} printed; with -f
 * called again from `next`, every CTL_FOLLOW_MS, until done. */
static int ctl_verb_follow(ctl_t *x, const kind_verb_t *kv, const char *name, bool follow)
{
	follow_arg_t f = { name, 0 };
	api_incoming_t in;
	int r;

	for (;;) {
		int64_t next = 0;
		if ((r = ctl_call(x, kv->name, pack_follow_arg, &f, CTL_TIMEOUT_MS, &in)) != 0)
			return r;
		const msgpack_object *t = api_map_get(in.result, "text");
		const msgpack_object *d = api_map_get(in.result, "done");
		if (t && t->type == MSGPACK_OBJECT_STR)
			fwrite(t->via.str.ptr, 1, t->via.str.size, stdout);
		bool done = !d || d->type != MSGPACK_OBJECT_BOOLEAN || d->via.boolean;
		bool moved = api_obj_int(api_map_get(in.result, "next"), &next) &&
			     (uint64_t)next > f.offset;
		if (moved)
			f.offset = (uint64_t)next;
		api_incoming_free(&in);
		fflush(stdout);
		if (!follow || (done && !moved))
			return EXIT_OK;
		if (!moved)
			ctl_sleep_ms(CTL_FOLLOW_MS);
	}
}

/* Whether an object `name` of kind k exists, asked without printing
 * anything (a `get`). */
static bool ctl_exists_quietly(ctl_t *x, const kind_t *k, const char *name)
{
	name_kind_t nk = { name, k };
	api_incoming_t in;
	tank_error_t e;

	memset(&in, 0, sizeof in);
	if (!x->c || api_client_call(x->c, "get", pack_name_kind, &nk, CTL_TIMEOUT_MS, &in, &e) < 0)
		return false;
	bool found = in.code == API_OK;
	api_incoming_free(&in);
	return found;
}

/* After a kind's verb failed on `name`: when no object of that kind has
 * the name but one of another kind has, says so (the verb said only that
 * its kind had no such object). */
static void ctl_hint_other_kind(ctl_t *x, const kind_verb_t *kv, const kind_t *k,
				const char *name)
{
	if (!name || ctl_exists_quietly(x, k, name))
		return;
	for (size_t i = 0; ctl_kinds[i]; i++)
		if (ctl_kinds[i] != k && ctl_exists_quietly(x, ctl_kinds[i], name)) {
			/* A verb of two words is named whole, not by its first. */
			fprintf(stderr, "tankctl: %s: %s is %s %s; %s acts on %ss\n", x->verb, name,
				strchr("aeiou", ctl_kinds[i]->name[0]) ? "an" : "a",
				ctl_kinds[i]->name, kv->words ? kv->words : x->verb, k->name);
			return;
		}
}

/* Verb v of kind k on each of the NULL-terminated names, one call each
 * in their order, each printed as it is answered (`NAME stopped`); a
 * failure is printed and the others still go.  0, or the first
 * failure's exit code. */
static int ctl_verb_each(ctl_t *x, const kind_t *k, const kind_verb_t *v, char *const *names)
{
	char action[64];
	int r = 0;

	for (size_t i = 0; names[i]; i++) {
		name_kind_t nk = { names[i], k };
		api_incoming_t in;
		int r2 = ctl_call(x, v->name, pack_name_kind, &nk, CTL_TIMEOUT_MS, &in);
		if (r2 == 0) {
			action[0] = '\0';
			api_obj_strcpy(api_map_get(in.result, "action"), action, sizeof action);
			ctl_print_ref(k->name, names[i], action[0] ? action : "done");
			api_incoming_free(&in);
		}
		r = r ? r : r2;
	}
	fflush(stdout);
	return r;
}

/* `stop -l SELECTOR`, `start [KIND] -l SELECTOR`: a kinded verb of every
 * object of KIND (pods by default) whose labels match, one call each in
 * name order, as `restart -l`; each printed as the verb prints one.  At
 * 9,000 pods a user otherwise ran 9,000 tankctl processes (docs/bench.md,
 * issue 38 round 8).  Not with --wait: a wait watches one object.  The
 * first error is the exit status; the others are still acted on. */
static int ctl_verb_selected(ctl_t *x, const kind_verb_t *kv, const char *selector, bool wait,
			     int nargs, char **args)
{
	const kind_t *k = ctl_kinds[0];
	const kind_verb_t *v = NULL;
	char **names, word[64], action[64];
	int r = 0;

	if (wait)
		return ctl_usage_error(x, "-l does not take --wait (a wait watches one object)");
	if (nargs > 1)
		return ctl_usage_error(x, "takes [KIND] -l SELECTOR, not names");
	if (nargs == 1 && !(k = kind_find(ctl_kinds, args[0], strlen(args[0]))))
		return ctl_usage_error(x, "unknown kind '%s' (-l selects, names are not taken)",
				       args[0]);
	for (size_t i = 0; !v && i < k->nverbs; i++)
		if (!strcmp(kind_verb_word(&k->verbs[i], word, sizeof word),
			    kind_verb_word(kv, action, sizeof action)))
			v = &k->verbs[i];
	if (!v)
		return ctl_fail(x, "the %s kind has no %s", k->name, x->verb);
	if ((r = ctl_selected(x, k, selector, &names)) != 0)
		return r;
	if (!names[0])
		fprintf(stderr, "No resources found\n");
	r = ctl_verb_each(x, k, v, names);
	ctl_names_free(names);
	return r;
}

/* A kind's verb (kind.h's kind_verb_t): by its words (two words: the
 * second picks among the verbs of the first), its flags say how its
 * arguments are read and its result printed. */
static int v_kind_verb(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "wait", no_argument, NULL, OPT_WAIT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "output", required_argument, NULL, 'o' },
		{ "follow", no_argument, NULL, 'f' },
		{ "no-headers", no_argument, NULL, OPT_NO_HEADERS },
		{ "selector", required_argument, NULL, 'l' }, { 0 } };
	const kind_t *k = NULL;
	const kind_verb_t *kv = NULL;
	const char *selector = NULL;
	bool wait = false, follow = false, structured = false, grouped = false;
	enum mf_doc_format fmt = MF_DOC_YAML;
	uint64_t timeout_ms = 0;
	api_incoming_t in;
	char action[64] = "", word[64];
	int o, r;

	/* The verb: its first word is x->verb; a second word picks. */
	for (size_t i = 0; ctl_kinds[i]; i++)
		for (size_t v = 0; v < ctl_kinds[i]->nverbs; v++) {
			const kind_verb_t *c = &ctl_kinds[i]->verbs[v];
			if (strcmp(kind_verb_word(c, word, sizeof word), x->verb) != 0)
				continue;
			const char *sub = kind_verb_subword(c);
			grouped |= sub[0] != '\0';
			if (!sub[0] || (argc > 1 && !strcmp(argv[1], sub))) {
				k = ctl_kinds[i];
				kv = c;
			}
		}
	if (grouped) {
		if (!kv) {
			if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
				return ctl_help(ctl_find(x->verb));
			char subs[128] = "";
			for (size_t i = 0; ctl_kinds[i]; i++)
				for (size_t v = 0; v < ctl_kinds[i]->nverbs; v++) {
					const kind_verb_t *c = &ctl_kinds[i]->verbs[v];
					size_t n = strlen(subs);
					if (!strcmp(kind_verb_word(c, word, sizeof word), x->verb))
						snprintf(subs + n, sizeof subs - n, "%s%s", n ? ", " : "",
							 kind_verb_subword(c));
				}
			if (argc > 1)
				return ctl_usage_error(x, "unknown word '%s' (one of: %s)", argv[1], subs);
			return ctl_usage_error(x, "needs one of: %s", subs);
		}
		argc--;
		argv++;
	}
	if (!kv)
		return ctl_usage_error(x, "no such verb");
	/* ':' first: getopt silent, ctl_bad_option names a bad option once. */
	const char *shorts = kv->flags & KIND_VERB_FOLLOW ? ":f" : kv->flags & KIND_VERB_DOC ? ":o:"
			     : kv->flags & KIND_VERB_KINDED ? ":l:" : ":";
	while ((o = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == OPT_WAIT && !(kv->flags & (KIND_VERB_DOC | KIND_VERB_FOLLOW))) {
			wait = true;
		} else if (o == OPT_TIMEOUT && !(kv->flags & (KIND_VERB_DOC | KIND_VERB_FOLLOW))) {
			if (kit_parse_duration(optarg, strlen(optarg), &timeout_ms) < 0 || !timeout_ms)
				return ctl_usage_error(x, "--timeout: invalid duration '%s'", optarg);
		} else if (o == 'o' && (kv->flags & KIND_VERB_DOC)) {
			if (ctl_format(optarg, &fmt) < 0)
				return ctl_usage_error(x, "-o takes yaml or json");
			structured = true;
		} else if (o == 'f' && (kv->flags & KIND_VERB_FOLLOW)) {
			follow = true;
		} else if (o == OPT_NO_HEADERS && (kv->flags & KIND_VERB_DOC) && kv->ncols) {
			ctl_no_headers = true;     /* a table's rows only, as ps */
		} else if (o == 'l' && (kv->flags & KIND_VERB_KINDED) &&
			   !(kv->flags & (KIND_VERB_DOC | KIND_VERB_FOLLOW))) {
			selector = optarg;
		} else {
			return ctl_bad_option(x, o, argv);
		}
	}
	if (selector)
		return ctl_verb_selected(x, kv, selector, wait, argc - optind, argv + optind);
	name_kind_t nk = { NULL, NULL };
	if (kv->flags & KIND_VERB_KINDED) {
		/* [KIND] NAME | KIND/NAME: the verb of that kind (kind.h). */
		const char *slash = optind < argc ? strchr(argv[optind], '/') : NULL;
		const kind_t *want = NULL;
		if (slash) {
			want = kind_find(ctl_kinds, argv[optind], (size_t)(slash - argv[optind]));
			if (!want)
				return ctl_usage_error(x, "unknown kind '%.*s'",
						       (int)(slash - argv[optind]), argv[optind]);
		} else if (argc - optind >= 2 &&
			   (want = kind_find(ctl_kinds, argv[optind], strlen(argv[optind])))) {
			optind++;
		}
		if (argc - optind < 1 || (slash && !slash[1]))
			return ctl_usage_error(x, "needs an object: NAME (a %s), KIND NAME or "
					       "KIND/NAME", ctl_kinds[0]->name);
		if (argc - optind > 1 && wait)
			return ctl_usage_error(x, "--wait watches one object (several names: "
					       "without --wait, one %s after another)", x->verb);
		char have[128] = "";
		k = NULL;
		kv = NULL;
		for (size_t i = 0; ctl_kinds[i]; i++)
			for (size_t v = 0; v < ctl_kinds[i]->nverbs; v++) {
				const kind_verb_t *c = &ctl_kinds[i]->verbs[v];
				if (strcmp(kind_verb_word(c, word, sizeof word), x->verb) != 0)
					continue;
				size_t n = strlen(have);
				snprintf(have + n, sizeof have - n, "%s%s", n ? ", " : "",
					 ctl_kinds[i]->name);
				if (!kv && (!want || want == ctl_kinds[i])) {
					k = ctl_kinds[i];
					kv = c;
				}
			}
		if (!kv)
			return ctl_fail(x, "the %s kind has no %s (it is for: %s)", want->name,
					x->verb, have);
		/* Several names (`stop web worker`, as systemctl and docker
		 * take them): each KIND/NAME of the same kind, one call each. */
		for (int i = optind; i < argc; i++) {
			const char *n = kind_ref_name(k, argv[i]);
			if (!n)
				return ctl_usage_error(x, "'%s' is not a %s: names of one kind at a "
						       "time (KIND NAME… or KIND/NAME…)", argv[i], k->name);
			argv[i] += n - argv[i];
		}
		if (argc - optind > 1)
			return ctl_verb_each(x, k, kv, argv + optind);  /* argv is NULL-terminated */
		nk = (name_kind_t){ argv[optind], k };
	} else if (argc - optind != 1 && !((kv->flags & KIND_VERB_ANY) && argc == optind)) {
		return ctl_usage_error(x, "needs one %s name", k->name);
	} else if (optind < argc) {
		/* NAME, or KIND/NAME of the kind the verb acts on (the
		 * verb's `of` when it has one, else its own kind). */
		const kind_t *of = kv->of ? kind_find(ctl_kinds, kv->of, strlen(kv->of)) : k;
		const char *n = kind_ref_name(of ? of : k, argv[optind]);
		if (!n)
			return ctl_usage_error(x, "'%s' is not a %s: %s acts on %s", argv[optind],
					       (of ? of : k)->name, x->verb, (of ? of : k)->plural);
		argv[optind] += n - argv[optind];
	}
	if (timeout_ms && !wait)
		return ctl_usage_error(x, "--timeout bounds --wait: use both");
	const char *name = nk.name ? nk.name : optind < argc ? argv[optind] : NULL;
	if (kv->flags & KIND_VERB_FOLLOW)
		return ctl_verb_follow(x, kv, name, follow);
	uint64_t t0 = ctl_now_ms();
	if (nk.name)
		r = ctl_call(x, kv->name, pack_name_kind, &nk, CTL_TIMEOUT_MS, &in);
	else
		r = ctl_call(x, kv->name, name ? pack_name : pack_nothing, (void *)name,
			     CTL_TIMEOUT_MS, &in);
	if (r == EXIT_ERR && !nk.name && x->c) {
		const kind_t *of = kv->of ? kind_find(ctl_kinds, kv->of, strlen(kv->of)) : k;
		ctl_hint_other_kind(x, kv, of ? of : k, name);
	}
	if (r != 0)
		return r;
	if (kv->flags & KIND_VERB_DOC) {
		r = ctl_verb_doc(x, kv, in.result, fmt, structured);
		api_incoming_free(&in);
		return r;
	}
	api_obj_strcpy(api_map_get(in.result, "action"), action, sizeof action);
	ctl_print_ref(k->name, name, action[0] ? action : "done");
	api_incoming_free(&in);
	fflush(stdout);
	return wait ? ctl_wait_one(x, k, name, kv->name, timeout_ms, t0,
				   strcmp(action, "unchanged") != 0, action[0] ? action : "done")
		    : EXIT_OK;
}

/* Loads a manifest of objects of any kind of the list, printing every
 * problem.  0 or EXIT_ERR. */
static int ctl_load(ctl_t *x, const char *path, mf_manifest_t **m)
{
	kit_errors_t errs;
	char *text = NULL;
	size_t len = 0;
	int r;

	*m = NULL;
	kit_errors_init(&errs);
	mf_registry_t reg;
	kind_registry(ctl_kinds, &reg);
	if ((r = mf_read_file(path, &text, &len, &errs)) == 0)
		r = mf_parse(&reg, text, len, path, m, &errs);
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
		return ctl_fail(x, "%s: no objects in the manifest", path);
	}
	return 0;
}

/* Every manifest of one apply, validated before anything is sent. */
typedef struct ctl_batch {
	mf_manifest_t **ms;
	char **sources;              /* the file each manifest came from */
	size_t n, cap;
	size_t nobjs;                /* objects sent */
	size_t npods;                /* pods applied: given, and inline in others */
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
		const kind_t *k = ctl_kind_of(&m->objs[i]);
		if (ctl_is_default(k))
			bt->npods++;
		else if (k->ninline)
			bt->npods += k->ninline(m->objs[i].obj);
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
	/* Every file is read, a bad one's problems do not hide the next's
	 * (each is printed as it is read); the first failure is the result. */
	for (size_t i = 0; i < n; i++) {
		int fr = ctl_batch_add(x, bt, names[i]);
		if (!r)
			r = fr;
		free(names[i]);
	}
	free(names);
	return r;
}

/* Two files of one batch must not name the same object of a kind (within one
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
							     ctl_kind_of(a)->name,
							     bt->sources[j]);
				}
	return r;
}

/* Where object `at` of the apply came from: its file and document (and
 * item, in a list), as mf_parse names them. */
static bool ctl_batch_where(const void *arg, size_t at, char *buf, size_t cap)
{
	const ctl_batch_t *bt = arg;

	for (size_t i = 0; i < bt->n; i++) {
		const mf_manifest_t *m = bt->ms[i];
		if (at >= m->count) {
			at -= m->count;
			continue;
		}
		const msgpack_object *raw = m->objs[at].raw;
		for (size_t k = 0; m->docs && k < m->docs->count; k++) {
			const msgpack_object *doc = &m->docs->docs[k];
			if (raw == doc) {
				snprintf(buf, cap, "%s: document %u", bt->sources[i], m->docs->index[k]);
				return true;
			}
			if (doc->type == MSGPACK_OBJECT_ARRAY && raw >= doc->via.array.ptr &&
			    raw < doc->via.array.ptr + doc->via.array.size) {
				snprintf(buf, cap, "%s: document %u, item %zu", bt->sources[i],
					 m->docs->index[k], (size_t)(raw - doc->via.array.ptr) + 1);
				return true;
			}
		}
		snprintf(buf, cap, "%s", bt->sources[i]);
		return true;
	}
	return false;
}

/* apply's params: [objects] or, with an option (dry_run, diff), [objects,
 * {option: true}]. */
static int pack_pods_opt(msgpack_packer *pk, const ctl_batch_t *bt, const char *option)
{
	msgpack_pack_array(pk, option ? 2 : 1);
	msgpack_pack_array(pk, bt->nobjs);
	for (size_t i = 0; i < bt->n; i++)
		for (size_t j = 0; j < bt->ms[i]->count; j++)
			if (msgpack_pack_object(pk, *bt->ms[i]->objs[j].raw))
				return -ENOMEM;
	if (!option)
		return 0;
	return msgpack_pack_map(pk, 1) || api_pack_cstr(pk, option) || msgpack_pack_true(pk)
	       ? -ENOMEM : 0;
}

static int pack_pods(msgpack_packer *pk, void *arg)
{
	return pack_pods_opt(pk, arg, NULL);
}

static int pack_pods_dry(msgpack_packer *pk, void *arg)
{
	return pack_pods_opt(pk, arg, "dry_run");
}

/* Reads and validates every file (all before anything is sent; files is
 * freed), then calls `apply` with the params pack makes of the batch; a
 * refusal names the file and document of each object.  0 with *in, or
 * an exit code. */
static int ctl_apply_files(ctl_t *x, ctl_batch_t *bt, const char **files, size_t nfiles,
			   api_pack_fn pack, api_incoming_t *in)
{
	int r = 0;

	/* Every -f is read and checked, each one's problems printed, before
	 * the first failure ends the verb: one run names them all. */
	for (size_t i = 0; i < nfiles; i++) {
		int fr = ctl_batch_path(x, bt, files[i]);
		if (!r)
			r = fr;
	}
	free(files);
	if (!r)
		r = ctl_batch_unique(x, bt);
	x->where = ctl_batch_where;
	x->where_arg = bt;
	if (!r)
		r = ctl_call(x, "apply", pack, bt, CTL_TIMEOUT_MS, in);
	x->where = NULL;
	return r;
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
	size_t cap = bt->nobjs + bt->npods + 1;
	const char **names = calloc(cap, sizeof *names);
	const rc_wait_t **waits = calloc(cap, sizeof *waits);
	const kind_t **kinds = calloc(cap, sizeof *kinds);
	const void **objs = calloc(cap, sizeof *objs);
	long *owners = calloc(cap, sizeof *owners);
	uint64_t deadline = timeout_ms ? ctl_now_ms() + timeout_ms : 0;
	cli_batch_t b;
	rc_conv_verdict_t verdict = RC_CONV_AGAIN;
	bool timed_out = false;
	int r = EXIT_ERR;
	size_t k = 0;

	memset(&b, 0, sizeof b);
	if (!names || !waits || !kinds || !objs || !owners) {
		r = ctl_fail(x, "out of memory");
		goto out;
	}
	/* Every object applied, of every kind, and the pods brought inline
	 * by others (their named pods are given elsewhere, or were there):
	 * each observed through its kind. */
	for (size_t i = 0; i < bt->n; i++)
		for (size_t j = 0; j < bt->ms[i]->count; j++) {
			const mf_object_t *o = &bt->ms[i]->objs[j];
			const kind_t *ok = ctl_kind_of(o);
			names[k] = o->name;
			kinds[k] = ok;
			objs[k] = o->obj;
			owners[k] = -1;
			long self = (long)k;
			waits[k++] = ok->reconcile_wait ? ok->reconcile_wait(o->obj) : NULL;
			size_t ni = ok->ninline ? ok->ninline(o->obj) : 0;
			for (size_t m = 0; m < ni && k < cap; m++) {
				const kind_t *ck = NULL;
				const void *co = ok->inline_at(o->obj, m, &ck);
				if (!co || !ck)
					continue;
				owners[k] = self;
				names[k] = ck->name_of(co);
				kinds[k] = ck;
				objs[k] = co;
				waits[k++] = ck->reconcile_wait ? ck->reconcile_wait(co) : NULL;
			}
		}
	if (cli_batch_init(&b, k, names, waits) < 0) {
		r = ctl_fail(x, "out of memory");
		goto out;
	}
	cli_batch_kinds(&b, kinds, objs);
	cli_batch_owners(&b, owners);
	/* The user's deadline bounds the wait: only what is truly stuck ends
	 * it before (rc_converge.h). */
	b.conv.bounded = deadline != 0;
	for (;;) {
		api_incoming_t in;
		/* sync makes each pass look at a reconciled state rather than
		 * at one the reconciler has not reached yet. */
		if ((r = ctl_call(x, "sync", NULL, NULL, CTL_SYNC_TIMEOUT_MS, &in)) != 0)
			goto out;
		api_incoming_free(&in);
		/* One status call per kind the batch holds. */
		for (size_t ki = 0; ctl_kinds[ki]; ki++) {
			bool any = false;
			for (size_t i = 0; i < b.n && !any; i++)
				any = kinds[i] == ctl_kinds[ki];
			if (!any)
				continue;
			/* The default kind's as before: no params at all. */
			if ((r = ctl_call(x, "status",
					  ctl_is_default(ctl_kinds[ki]) ? NULL : pack_name_kind,
					  &(name_kind_t){ NULL, ctl_kinds[ki] }, CTL_TIMEOUT_MS,
					  &in)) != 0)
				goto out;
			cli_batch_see(&b, ctl_kinds[ki], in.result);
			api_incoming_free(&in);
		}
		verdict = cli_batch_pass(&b);
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
	free(kinds);
	free(objs);
	free(owners);
	return r;
}

static int v_apply(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "filename", required_argument, NULL, 'f' },
		{ "wait", no_argument, NULL, OPT_WAIT },
		{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT }, { 0 } };
	const char **files = calloc((size_t)argc + 1, sizeof *files);
	size_t nfiles = 0;
	bool wait = false, dry_run = false;
	uint64_t timeout_ms = 0;
	ctl_batch_t bt;
	api_incoming_t in;
	int o, r = 0;

	memset(&bt, 0, sizeof bt);
	if (!files)
		return ctl_fail(x, "out of memory");
	while ((o = getopt_long(argc, argv, ":f:", opts, NULL)) != -1) {
		if (o == OPT_HELP) {
			free(files);
			return ctl_help(ctl_find(x->verb));
		}
		if (o == 'f') {
			files[nfiles++] = optarg;
		} else if (o == OPT_WAIT) {
			wait = true;
		} else if (o == OPT_DRY_RUN) {
			dry_run = true;
		} else if (o == OPT_TIMEOUT) {
			if (kit_parse_duration(optarg, strlen(optarg), &timeout_ms) < 0 || !timeout_ms) {
				free(files);
				return ctl_usage_error(x, "--timeout: invalid duration '%s' "
						       "(like 30s, 5m, or milliseconds)", optarg);
			}
		} else {
			free(files);
			return ctl_bad_option(x, o, argv);
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
	if (dry_run && wait) {
		free(files);
		return ctl_usage_error(x, "--dry-run applies nothing: nothing to --wait for");
	}
	r = ctl_apply_files(x, &bt, files, nfiles, dry_run ? pack_pods_dry : pack_pods, &in);
	if (r) {
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
			char kind[64] = "";
			api_obj_strcpy(api_map_get(e, "kind"), kind, sizeof kind);
			if (dry_run)
				strncat(action, " (dry run)", sizeof action - strlen(action) - 1);
			ctl_print_ref(kind, name, action);
		}
	api_incoming_free(&in);
	fflush(stdout);
	r = wait ? ctl_wait(x, &bt, timeout_ms) : EXIT_OK;
	ctl_batch_free(&bt);
	return r;
}

/* apply's params with {diff: true}: a dry run answering both specs. */
static int pack_pods_diff(msgpack_packer *pk, void *arg)
{
	return pack_pods_opt(pk, arg, "diff");
}

/* Writes o as YAML into a new temporary file (nil: an empty one); its
 * path in path (cap bytes).  0 or an exit code. */
static int ctl_yaml_tmp(ctl_t *x, const msgpack_object *o, char *path, size_t cap)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, cap, "%s/tankctl-diff-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0)
		return ctl_fail(x, "cannot make a file in %s: %s", dir && *dir ? dir : "/tmp",
				strerror(errno));
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(path);
		return ctl_fail(x, "out of memory");
	}
	int r = o && o->type != MSGPACK_OBJECT_NIL ? mf_doc_emit(o, MF_DOC_YAML, f) : 0;
	if (fclose(f) != 0 || r < 0) {
		unlink(path);
		return ctl_fail(x, "cannot write %s", path);
	}
	return 0;
}

/* `diff -f FILE…`: what apply would change, object by object, as a
 * unified diff of the canonical YAML (the stored spec against the one the
 * files would give it), through diff(1) as kubectl does.  Exit 0: no
 * difference, 1: differences, 2 and more: trouble. */
/* diff's own outcome beside 0 and the exit codes: something would change. */
#define CTL_DIFFERS 100

static int ctl_diff(ctl_t *x, int argc, char **argv);

/* `diff`: 0 no difference, 1 differences, 2 trouble (bad usage, a
 * manifest refused, tankd unreachable or refusing, diff(1) failing) —
 * diff(1)'s and kubectl diff's rule, so a script's `diff || apply` does
 * not read a typo in a manifest as a change to apply. */
static int v_diff(ctl_t *x, int argc, char **argv)
{
	int r = ctl_diff(x, argc, argv);

	return r == CTL_DIFFERS ? EXIT_ERR : r == EXIT_OK ? EXIT_OK : EXIT_USAGE;
}

static int ctl_diff(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "filename", required_argument, NULL, 'f' }, { 0 } };
	const char **files = calloc((size_t)argc + 1, sizeof *files);
	size_t nfiles = 0;
	ctl_batch_t bt;
	api_incoming_t in;
	int o, r = 0, differ = 0;

	memset(&bt, 0, sizeof bt);
	if (!files)
		return ctl_fail(x, "out of memory");
	while ((o = getopt_long(argc, argv, ":f:", opts, NULL)) != -1) {
		if (o == OPT_HELP) {
			free(files);
			return ctl_help(ctl_find(x->verb));
		}
		if (o != 'f') {
			free(files);
			return ctl_bad_option(x, o, argv);
		}
		files[nfiles++] = optarg;
	}
	if (!nfiles || optind != argc) {
		free(files);
		return ctl_usage_error(x, "needs -f FILE (a file, a directory or - for stdin)");
	}
	r = ctl_apply_files(x, &bt, files, nfiles, pack_pods_diff, &in);
	ctl_batch_free(&bt);
	if (r)
		return r;
	fflush(stdout);
	const msgpack_object *res = in.result;
	for (uint32_t i = 0; res->type == MSGPACK_OBJECT_ARRAY && i < res->via.array.size && !r;
	     i++) {
		const msgpack_object *e = &res->via.array.ptr[i];
		char name[256] = "", kind[64] = "", a[PATH_MAX], b[PATH_MAX], la[400], lb[400];
		if (api_obj_streq(api_map_get(e, "action"), "unchanged"))
			continue;
		api_obj_strcpy(api_map_get(e, "name"), name, sizeof name);
		api_obj_strcpy(api_map_get(e, "kind"), kind, sizeof kind);
		if ((r = ctl_yaml_tmp(x, api_map_get(e, "current"), a, sizeof a)) != 0)
			break;
		if ((r = ctl_yaml_tmp(x, api_map_get(e, "proposed"), b, sizeof b)) != 0) {
			unlink(a);
			break;
		}
		snprintf(la, sizeof la, "%s/%s (stored)", kind, name);
		snprintf(lb, sizeof lb, "%s/%s (applied)", kind, name);
		char *dargv[] = { "diff", "-u", "--label", la, "--label", lb, a, b, NULL };
		pid_t pid;
		int st = 0, se = posix_spawnp(&pid, "diff", NULL, NULL, dargv, environ);
		if (se == 0)
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
		unlink(a);
		unlink(b);
		if (se != 0)
			r = ctl_fail(x, "cannot run diff(1): %s (install diffutils)", strerror(se));
		else if (!WIFEXITED(st) || WEXITSTATUS(st) > 1)
			r = ctl_fail(x, "diff(1) failed on %s/%s", kind, name);
		else
			differ |= WEXITSTATUS(st) == 1;
	}
	api_incoming_free(&in);
	fflush(stdout);
	return r ? r : differ ? CTL_DIFFERS : EXIT_OK;
}

typedef struct names_kind { char **names; const kind_t *kind; } names_kind_t;

static int pack_names_kind(msgpack_packer *pk, void *arg)
{
	names_kind_t *nk = arg;
	bool named = !ctl_is_default(nk->kind);
	size_t n = 0;
	while (nk->names[n])
		n++;
	msgpack_pack_array(pk, named ? 2 : 1);
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		if (api_pack_cstr(pk, nk->names[i]) < 0)
			return -ENOMEM;
	return named ? pack_kind_opt(pk, nk->kind, 0) : 0;
}

/* Sends one delete of one kind and prints what it did (and what went
 * with it: the answer names every object's kind). */
/* "kind/name" of what a delete took, to tell a later one of a file not to
 * look for it again. */
typedef struct ctl_gone {
	char **v;
	size_t n, cap;
} ctl_gone_t;

static bool ctl_gone_has(const ctl_gone_t *g, const char *kind, const char *name)
{
	size_t kl = strlen(kind);
	for (size_t i = 0; g && i < g->n; i++)
		if (!strncmp(g->v[i], kind, kl) && g->v[i][kl] == '/' && !strcmp(g->v[i] + kl + 1, name))
			return true;
	return false;
}

static void ctl_gone_add(ctl_gone_t *g, const char *kind, const char *name)
{
	char *s;
	if (!g || ctl_gone_has(g, kind, name))
		return;
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 16;
		char **v = realloc(g->v, cap * sizeof *v);
		if (!v)
			return;
		g->v = v;
		g->cap = cap;
	}
	if (asprintf(&s, "%s/%s", kind, name) >= 0)
		g->v[g->n++] = s;
}

static void ctl_gone_free(ctl_gone_t *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->v[i]);
	free(g->v);
}

/* Deletes names of kind k; what was deleted (the cascade included) goes
 * into gone when given. */
static int ctl_delete(ctl_t *x, char **names, const kind_t *k, bool ignore_nf, ctl_gone_t *gone)
{
	names_kind_t nk = { names, k };
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
			char name[256], kind[64];
			if (!api_obj_strcpy(api_map_get(e, "kind"), kind, sizeof kind))
				snprintf(kind, sizeof kind, "%s", k->name);
			api_obj_strcpy(api_map_get(e, "name"), name, sizeof name);
			if (d && d->type == MSGPACK_OBJECT_BOOLEAN && d->via.boolean) {
				ctl_print_ref(kind, name, "deleted");
				ctl_gone_add(gone, kind, name);
			} else if (!ignore_nf && !strcmp(kind, k->name)) {
				/* As get and restart: a name that names
				 * nothing is an error (kubectl's habit). */
				fprintf(stderr, "tankctl: delete: %s \"%s\" not found\n", kind, name);
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
		{ "ignore-not-found", no_argument, NULL, OPT_IGNORE_NF },
		{ "selector", required_argument, NULL, 'l' }, { 0 } };
	const char **files = calloc((size_t)argc + 1, sizeof *files);
	const char *selector = NULL;
	size_t nfiles = 0;
	ctl_batch_t bt;
	ctl_gone_t gone = { 0 };
	bool ignore_nf = false;
	int o, r = 0;

	memset(&bt, 0, sizeof bt);
	if (!files)
		return ctl_fail(x, "out of memory");
	while ((o = getopt_long(argc, argv, ":f:l:", opts, NULL)) != -1) {
		if (o == OPT_HELP) {
			free(files);
			return ctl_help(ctl_find(x->verb));
		}
		if (o == 'l') {
			selector = optarg;
		} else if (o == 'f') {
			files[nfiles++] = optarg;
		} else if (o == OPT_IGNORE_NF) {
			ignore_nf = true;
		} else {
			free(files);
			return ctl_bad_option(x, o, argv);
		}
	}
	if (selector) {
		/* `delete [KIND] -l SELECTOR`: every object of the kind whose
		 * labels match (none: kubectl's "No resources found", 0). */
		const kind_t *k = ctl_kinds[0];
		char **names;
		free(files);
		if (nfiles || argc - optind > 1 ||
		    (argc - optind == 1 && !(k = kind_find(ctl_kinds, argv[optind],
							   strlen(argv[optind])))))
			return ctl_usage_error(x, "-l takes at most a kind, no names and no -f");
		if ((r = ctl_selected(x, k, selector, &names)) != 0)
			return r;
		if (!names[0])
			fprintf(stderr, "No resources found\n");
		else
			r = ctl_delete(x, names, k, true, NULL);
		ctl_names_free(names);
		return r;
	}
	if (!nfiles == (optind == argc)) {
		free(files);
		return ctl_usage_error(x, "needs [KIND] names or -f FILE|DIR|- [-f …] (not both)");
	}
	if (!nfiles) {
		free(files);
		const kind_t *k;
		if ((r = ctl_kind_ref(x, argc, argv, 1, &k)) >= 0)
			return r;
		/* KIND/NAME… (kubectl's): of one kind, each name stripped. */
		for (int i = optind + 1; i < argc; i++) {
			const char *n = kind_ref_name(k, argv[i]);
			if (!n)
				return ctl_usage_error(x, "'%s' is not a %s: names of one kind at a time "
						       "(KIND NAME… or KIND/NAME…)", argv[i], k->name);
			argv[i] += n - argv[i];
		}
		return ctl_delete(x, argv + optind, k, ignore_nf, NULL);   /* argv is NULL-terminated */
	}
	/* Every -f (files, directories, as apply reads them) is read before
	 * anything is deleted. */
	for (size_t i = 0; i < nfiles; i++) {
		int fr = ctl_batch_path(x, &bt, files[i]);
		if (!r)
			r = fr;
	}
	free(files);
	if (r) {
		ctl_batch_free(&bt);
		return r;
	}
	size_t total = 0, nk = 0;
	for (size_t i = 0; i < bt.n; i++)
		total += bt.ms[i]->count;
	while (ctl_kinds[nk])
		nk++;
	char **names = calloc(total + 1, sizeof *names);
	if (!names) {
		r = ctl_fail(x, "out of memory");
	} else {
		/* The kinds that take others with them first (the list's
		 * order reversed: owners come after what they own); what went
		 * with its owner is not looked for again. */
		for (size_t ki = nk; ki-- > 0;) {
			size_t n = 0;
			for (size_t f = 0; f < bt.n; f++)
				for (size_t i = 0; i < bt.ms[f]->count; i++) {
					const mf_object_t *ob = &bt.ms[f]->objs[i];
					bool twice = false;
					for (size_t j = 0; j < n && !twice; j++)
						twice = !strcmp(names[j], ob->name);
					if (ctl_kind_of(ob) == ctl_kinds[ki] && !twice &&
					    !ctl_gone_has(&gone, ctl_kinds[ki]->name, ob->name))
						names[n++] = (char *)ob->name;
				}
			names[n] = NULL;
			int r2 = ctl_delete(x, names, ctl_kinds[ki], ignore_nf, &gone);
			if (!r)
				r = r2;
		}
	}
	free(names);
	ctl_gone_free(&gone);
	ctl_batch_free(&bt);
	return r;
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

/* A value of key=value (logfmt's rule): as it is when it is one plain
 * word, else in double quotes with \" \\ \n \t escaped. */
static void ctl_print_value(const char *p, size_t n)
{
	bool plain = n > 0;
	for (size_t i = 0; i < n && plain; i++)
		plain = (unsigned char)p[i] > ' ' && p[i] != '"' && p[i] != '=' && p[i] != '\\' &&
			p[i] != 0x7f;
	if (plain) {
		fwrite(p, 1, n, stdout);
		return;
	}
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", stdout);
		else if (ch == '\t')
			fputs("\\t", stdout);
		else if (ch < ' ' || ch == 0x7f)
			printf("\\x%02x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* An event on one line: its time first, then key=value for each scalar. */
static void ctl_print_event(const msgpack_object *ev)
{
	int64_t at;
	char buf[64];

	if (ev->type != MSGPACK_OBJECT_MAP) {
		mf_doc_emit(ev, MF_DOC_JSON, stdout);
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
			ctl_print_value(v->via.str.ptr, v->via.str.size);
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

/* `events` options: which object, how far back. */
typedef struct events_params {
	int64_t since_ms;            /* -1: live only */
} events_params_t;

static int pack_subscribe(msgpack_packer *pk, void *arg)
{
	const events_params_t *p = arg;
	if (p->since_ms < 0)
		return msgpack_pack_array(pk, 0);
	return msgpack_pack_array(pk, 1) || msgpack_pack_map(pk, 1) ||
	       api_pack_cstr(pk, "since") || msgpack_pack_uint64(pk, (uint64_t)p->since_ms)
	       ? -ENOMEM : 0;
}

/* Whether ev is news of object `name` of kind k: an event names its
 * object under its kind's name (`pod: web`, `stack: shop`). */
static bool ctl_event_of(const msgpack_object *ev, const kind_t *k, const char *name)
{
	return !k || api_obj_streq(api_map_get(ev, k->name), name);
}

/* `events -l`: per kind, the names whose labels match and every name,
 * from one list call each at the start; an object named by an event and
 * in neither (made since) has its kind listed again, on a second
 * connection (the first carries the stream). */
typedef struct ev_sel {
	const char *selector;
	char **match[KIND_MAX], **every[KIND_MAX];
} ev_sel_t;

static bool ctl_in_names(char **names, const char *name)
{
	for (size_t i = 0; names && names[i]; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

static int ctl_ev_sel_load(ctl_t *x, ev_sel_t *es, size_t ki)
{
	char **m, **ev;
	int r = ctl_selected_all(x, ctl_kinds[ki], es->selector, &m, &ev);
	if (r)
		return r;
	ctl_names_free(es->match[ki]);
	ctl_names_free(es->every[ki]);
	es->match[ki] = m;
	es->every[ki] = ev;
	return 0;
}

static void ctl_ev_sel_free(ev_sel_t *es)
{
	for (size_t i = 0; i < KIND_MAX; i++) {
		ctl_names_free(es->match[i]);
		ctl_names_free(es->every[i]);
	}
}

/* Whether an object the event names (under its kind's name) matches. */
static bool ctl_ev_sel_match(ctl_t *x, ev_sel_t *es, const msgpack_object *ev)
{
	for (size_t ki = 0; ctl_kinds[ki] && ki < KIND_MAX; ki++) {
		char name[256];
		if (!api_obj_strcpy(api_map_get(ev, ctl_kinds[ki]->name), name, sizeof name))
			continue;
		if (!ctl_in_names(es->every[ki], name)) {
			api_client_t *stream = x->c;
			x->c = NULL;
			(void)ctl_ev_sel_load(x, es, ki);
			api_client_close(x->c);
			x->c = stream;
		}
		if (ctl_in_names(es->match[ki], name))
			return true;
	}
	return false;
}

static int v_events(ctl_t *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "since", required_argument, NULL, OPT_SINCE },
		{ "selector", required_argument, NULL, 'l' },
		{ "output", required_argument, NULL, 'o' }, { 0 } };
	enum mf_doc_format fmt = MF_DOC_YAML;
	bool structured = false;
	events_params_t p = { .since_ms = -1 };
	const kind_t *k = NULL;
	const char *name = NULL;
	api_incoming_t in;
	tank_error_t e;
	char why[256];
	uint64_t ms;
	ev_sel_t es = { 0 };
	int o, r;

	while ((o = getopt_long(argc, argv, ":o:l:", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == 'l') {
			es.selector = optarg;
			continue;
		}
		if (o == 'o' && ctl_format(optarg, &fmt) == 0) {
			structured = true;
			continue;
		}
		if (o == OPT_SINCE) {
			if (kit_parse_duration(optarg, strlen(optarg), &ms) < 0)
				return ctl_usage_error(x, "--since takes a duration (30s, 10m, 1h)");
			p.since_ms = (int64_t)ms;
			continue;
		}
		return o == 'o' ? ctl_usage_error(x, "-o takes yaml or json") : ctl_bad_option(x, o, argv);
	}
	if (argc - optind > 1)
		return ctl_usage_error(x, "takes at most one KIND/NAME");
	if (optind < argc) {
		/* KIND/NAME, or a NAME of the default kind (a pod). */
		const char *w = argv[optind], *slash = strchr(w, '/');
		k = slash ? kind_find(ctl_kinds, w, (size_t)(slash - w)) : ctl_kinds[0];
		if (!k)
			return ctl_usage_error(x, "unknown kind '%.*s'", (int)(slash - w), w);
		name = slash ? slash + 1 : w;
		if (!*name)
			return ctl_usage_error(x, "'%s' names no object", w);
	}
	/* An object not applied (yet): its events come once it is, and a
	 * stream that waits in silence reads as a hang (a typo'd name).
	 * Said, as journalctl says "-- No entries --", and the stream goes
	 * on. */
	if (name) {
		name_kind_t nk = { name, k };
		if ((r = ctl_connect(x)) != 0)
			return r;
		if (api_client_call(x->c, "status", pack_name_kind, &nk, CTL_TIMEOUT_MS, &in, &e) < 0)
			return ctl_fail(x, "%s", e.msg);
		if (in.code == API_NOT_FOUND)
			fprintf(stderr, "tankctl: events: no %s named %s (yet): waiting for its "
				"events\n", k->name, name);
		api_incoming_free(&in);
	}
	/* JSON is JSON Lines here: one event a line, a stream a program can
	 * read line by line. */
	if (structured && fmt == MF_DOC_JSON)
		fmt = MF_DOC_JSON_LINE;
	/* -l: the objects' labels, looked up before the stream starts. */
	for (size_t ki = 0; es.selector && ctl_kinds[ki] && ki < KIND_MAX; ki++)
		if ((r = ctl_ev_sel_load(x, &es, ki)) != 0) {
			ctl_ev_sel_free(&es);
			return r;
		}
	if ((r = ctl_call(x, "subscribe", pack_subscribe, &p, CTL_TIMEOUT_MS, &in)) != 0) {
		ctl_ev_sel_free(&es);
		return r;
	}
	api_incoming_free(&in);
	for (;;) {
		if ((r = api_client_next(x->c, -1, &in, &e)) < 0) {
			ctl_ev_sel_free(&es);
			return r == -ECONNRESET ? ctl_fail(x, "tankd closed the connection")
						: ctl_fail(x, "%s", e.msg);
		}
		if (ctl_farewell(&in, why, sizeof why)) {
			api_incoming_free(&in);
			ctl_ev_sel_free(&es);
			fflush(stdout);
			return ctl_fail(x, "tankd: %s", why);
		}
		if (in.type == API_NOTIFICATION && strcmp(in.method, "event") == 0)
			for (uint32_t i = 0; i < in.params->via.array.size; i++) {
				const msgpack_object *ev = &in.params->via.array.ptr[i];
				if (!ctl_event_of(ev, k, name) ||
				    (es.selector && !ctl_ev_sel_match(x, &es, ev)))
					continue;
				if (structured) {
					if (fmt == MF_DOC_YAML)
						fputs("---\n", stdout);
					if ((r = ctl_emit(x, ev, fmt)) != 0) {
						api_incoming_free(&in);
						ctl_ev_sel_free(&es);
						return r;
					}
				} else {
					ctl_print_event(ev);
				}
			}
		api_incoming_free(&in);
		fflush(stdout);
	}
}

typedef struct hist_params { const char *name; long limit; const kind_t *kind; } hist_params_t;

static int pack_history(msgpack_packer *pk, void *arg)
{
	hist_params_t *p = arg;
	msgpack_pack_array(pk, 2);
	api_pack_cstr(pk, p->name);
	pack_kind_opt(pk, p->kind, p->limit >= 0);
	if (p->limit >= 0) {
		api_pack_cstr(pk, "limit");
		msgpack_pack_int64(pk, p->limit);
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
	enum mf_doc_format fmt = MF_DOC_YAML;
	bool structured = false;
	hist_params_t p = { .limit = -1 };
	api_incoming_t in;
	char *end;
	int o, r;

	while ((o = getopt_long(argc, argv, ":o:", opts, NULL)) != -1) {
		if (o == OPT_HELP)
			return ctl_help(ctl_find(x->verb));
		if (o == 'o' && ctl_format(optarg, &fmt) == 0) {
			structured = true;
		} else if (o == OPT_LIMIT) {
			errno = 0;
			p.limit = strtol(optarg, &end, 10);
			/* 0 would be tankd's "no limit": every entry for a
			 * request of none (leave --limit out for them all). */
			if (errno || *end || end == optarg || p.limit < 1)
				return ctl_usage_error(x, "--limit takes a number from 1 (the last N "
						       "entries; without it, every one)");
		} else {
			return o == 'o' ? ctl_usage_error(x, "-o takes yaml or json") : ctl_bad_option(x, o, argv);
		}
	}
	if ((r = ctl_kind_ref(x, argc, argv, 1, &p.kind)) >= 0)
		return r;
	if (argc - optind != 1)
		return ctl_usage_error(x, "needs one name (a %s's, or: KIND NAME, KIND/NAME)",
				       ctl_kinds[0]->name);
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

/* --- a kind's own commands (kind.h's kind_cmd_t) ---------------------------------- */

static int kc_call(const kind_cli_t *cli, const char *method, kind_pack_fn pack, void *arg,
		   int timeout_ms, kind_got_fn got, void *garg)
{
	ctl_t *x = cli->ctx;
	api_incoming_t in;
	int r;

	if ((r = ctl_call(x, method, pack, arg,
			  timeout_ms > 0 ? timeout_ms : CTL_TIMEOUT_MS, &in)) != 0)
		return r;
	r = got ? got(garg, in.result) : 0;
	api_incoming_free(&in);
	if (r < 0)
		return ctl_fail(x, "%s", tank_strerror(r));
	return r;
}

static int kc_emit(const kind_cli_t *cli, const msgpack_object *o, const char *format)
{
	enum mf_doc_format fmt;

	if (ctl_format(format, &fmt) < 0)
		return ctl_usage_error(cli->ctx, "-o: expected yaml or json, not '%s'", format);
	return ctl_emit(cli->ctx, o, fmt);
}

static int kc_fail(const kind_cli_t *cli, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return ctl_fail(cli->ctx, "%s", buf);
}

static int kc_usage(const kind_cli_t *cli, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return ctl_usage_error(cli->ctx, "%s", buf);
}

static int kc_bad_option(const kind_cli_t *cli, int o, char **argv)
{
	return ctl_bad_option(cli->ctx, o, argv);
}

static int kc_verb_run(const kind_cli_t *cli, int argc, char **argv)
{
	ctl_t *x = cli->ctx;
	const verb_t *v = argc > 0 ? ctl_find(argv[0]) : NULL;
	const char *was = x->verb;

	if (!v)
		return ctl_usage_error(x, "unknown verb '%s'", argc > 0 ? argv[0] : "");
	x->group = was;
	x->verb = v->name;
	optind = 0;
	int r = v->run(x, argc, argv);
	x->verb = was;
	x->group = NULL;
	return r;
}

static int kc_selected(const kind_cli_t *cli, const kind_t *k, const char *selector,
		       char ***names)
{
	return ctl_selected(cli->ctx, k, selector, names);
}

static int kc_follow(const kind_cli_t *cli,
		     int (*note)(void *arg, const char *event, const msgpack_object *params),
		     void *arg)
{
	ctl_t *x = cli->ctx;
	api_incoming_t in;
	tank_error_t e;
	char why[256];
	int r;

	for (;;) {
		fflush(stdout);
		if ((r = api_client_next(x->c, -1, &in, &e)) < 0)
			return r == -ECONNRESET ? EXIT_OK : ctl_fail(x, "%s", e.msg);
		if (ctl_farewell(&in, why, sizeof why)) {
			api_incoming_free(&in);
			return ctl_fail(x, "tankd: %s", why);
		}
		r = in.type == API_NOTIFICATION ? note(arg, in.method, in.params) : 0;
		api_incoming_free(&in);
		if (r < 0)
			return ctl_fail(x, "%s", tank_strerror(r));
		if (r > 0) {
			fflush(stdout);
			return EXIT_OK;
		}
	}
}

static int v_kind_cmd(ctl_t *x, int argc, char **argv)
{
	for (size_t k = 0; ctl_kinds[k]; k++)
		for (size_t c = 0; c < ctl_kinds[k]->ncmds; c++)
			if (!strcmp(ctl_kinds[k]->cmds[c].name, x->verb)) {
				kind_cli_t cli = { .ctx = x, .verb = x->verb, .call = kc_call,
						   .emit = kc_emit, .fail = kc_fail,
						   .usage = kc_usage, .bad_option = kc_bad_option,
						   .verb_run = kc_verb_run,
						   .selected = kc_selected, .follow = kc_follow };
				for (int i = 1; i < argc; i++) {
					if (!strcmp(argv[i], "--"))
						break;
					if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
						return ctl_help(ctl_find(x->verb));
				}
				return ctl_kinds[k]->cmds[c].run(&cli, argc, argv);
			}
	return ctl_usage_error(x, "unknown verb '%s'", x->verb);
}

/* `describe [KIND] NAME | KIND/NAME`: a person's view of one object of
 * any kind — its status, its spec, its last history — from `status`,
 * `get` and `history`, laid out by cli_describe (no kind's fields here). */
static int v_describe(ctl_t *x, int argc, char **argv)
{
	static const char *const heads[] = { "AGE", "OBJECT", "FROM", "TO", "REASON" };
	static const char *const spec_skip[] = { "name", "kind", "status", "labels", NULL };
	static const char *const status_skip[] = { "name", "kind", "labels", NULL };
	api_incoming_t st, spec, hist;
	int r;

	if ((r = ctl_only_help(x, argc, argv)) >= 0)
		return r;
	const kind_t *k = ctl_kinds[0];
	const char *slash = optind < argc ? strchr(argv[optind], '/') : NULL;
	if (slash) {
		k = kind_find(ctl_kinds, argv[optind], (size_t)(slash - argv[optind]));
		if (!k)
			return ctl_usage_error(x, "unknown kind '%.*s'", (int)(slash - argv[optind]),
					       argv[optind]);
	} else {
		k = ctl_kind_word(argc, argv, 1);
	}
	if (argc - optind != 1 || (slash && !slash[1]))
		return ctl_usage_error(x, "needs one object: NAME (a pod), KIND NAME or KIND/NAME");
	name_kind_t nk = { slash ? slash + 1 : argv[optind], k };
	if ((r = ctl_call(x, "status", pack_name_kind, &nk, CTL_TIMEOUT_MS, &st)) != 0)
		return r;
	if ((r = ctl_call(x, "get", pack_name_kind, &nk, CTL_TIMEOUT_MS, &spec)) != 0) {
		api_incoming_free(&st);
		return r;
	}
	hist_params_t hp = { .name = nk.name, .limit = 10, .kind = k };
	if ((r = ctl_call(x, "history", pack_history, &hp, CTL_TIMEOUT_MS, &hist)) != 0) {
		api_incoming_free(&st);
		api_incoming_free(&spec);
		return r;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	printf("Name:    %s\nKind:    %s\n", nk.name, k->name);
	/* Labels as kubectl shows them: k=v, one a line, <none> when none. */
	const msgpack_object *lb = api_map_get(spec.result, "labels");
	if (!lb || lb->type != MSGPACK_OBJECT_MAP || !lb->via.map.size) {
		puts("Labels:  <none>");
	} else {
		for (uint32_t i = 0; i < lb->via.map.size; i++) {
			const msgpack_object *lk = &lb->via.map.ptr[i].key, *lv = &lb->via.map.ptr[i].val;
			if (lk->type != MSGPACK_OBJECT_STR || lv->type != MSGPACK_OBJECT_STR)
				continue;
			printf("%s%.*s=%.*s\n", i ? "         " : "Labels:  ", (int)lk->via.str.size,
			       lk->via.str.ptr, (int)lv->via.str.size, lv->via.str.ptr);
		}
	}
	r = cli_describe_map(stdout, st.result, 0, now, status_skip);
	if (r == 0 && spec.result->type == MSGPACK_OBJECT_MAP) {
		puts("Spec:");
		r = cli_describe_map(stdout, spec.result, 2, now, spec_skip);
	}
	cli_table_t t;
	if (r == 0 && hist.result->type == MSGPACK_OBJECT_ARRAY && hist.result->via.array.size) {
		puts("Events:");
		r = cli_table_init(&t, 5, heads);
		for (uint32_t i = 0; i < hist.result->via.array.size && r == 0; i++) {
			const msgpack_object *h = &hist.result->via.array.ptr[i];
			char age[32] = "-", from[64], to[64], reason[256], kind[32], key[160], obj[200];
			int64_t ms;
			if (api_obj_int(api_map_get(h, "at"), &ms) && ms >= 0 && (uint64_t)ms <= now)
				cli_format_age(now - (uint64_t)ms, age, sizeof age);
			if (!api_obj_strcpy(api_map_get(h, "from"), from, sizeof from))
				snprintf(from, sizeof from, "-");
			if (!api_obj_strcpy(api_map_get(h, "to"), to, sizeof to))
				snprintf(to, sizeof to, "-");
			if (!api_obj_strcpy(api_map_get(h, "reason"), reason, sizeof reason) || !reason[0])
				snprintf(reason, sizeof reason, "-");
			if (!api_obj_strcpy(api_map_get(h, "kind"), kind, sizeof kind) ||
			    !api_obj_strcpy(api_map_get(h, "key"), key, sizeof key))
				snprintf(obj, sizeof obj, "-");
			else
				snprintf(obj, sizeof obj, "%s/%s", kind, key);
			const char *row[] = { age, obj, from, to, reason };
			r = cli_table_add(&t, row);
		}
		if (r == 0)
			r = cli_table_print_indented(&t, stdout, 2);   /* as the other sections */
		cli_table_free(&t);
	}
	api_incoming_free(&st);
	api_incoming_free(&spec);
	api_incoming_free(&hist);
	return r ? ctl_fail(x, "cannot print the description") : EXIT_OK;
}

/* --- main ------------------------------------------------------------------- */

static int v_complete(ctl_t *x, int argc, char **argv);
static int v_completion(ctl_t *x, int argc, char **argv);

static const verb_t ctl_verbs[] = {
	{ "apply", v_apply, "-f FILE|DIR|- [-f …] [--dry-run | --wait [--timeout DURATION]]",
	  "Sends the pods of every -f (files, - for stdin, directories of *.yaml,\n"
	  "*.yml and *.json in name order) to tankd as one batch.  All are validated\n"
	  "first: any problem is printed with its path and nothing is applied.\n"
	  "--wait then re-checks every object until none is pending (see\n"
	  "docs/cli.md): a pod converged when seen running and ready (its probes\n"
	  "passed) at two passes with the same start times, or completed, or held\n"
	  "by its owner; a failure (a startup probe giving up too) is named at\n"
	  "once.  A probe inside its window, a job running and a dependency that\n"
	  "moves are progress; 3 passes in a row without progress end the wait,\n"
	  "under --timeout only when everything pending is truly stuck (a crash\n"
	  "loop, a failed or missing dependency).  It prints re_runs_count and\n"
	  "require_re_run; exit 1 if any object failed or did not converge (or at\n"
	  "the --timeout).  --dry-run: tankd checks everything as for an apply\n"
	  "and says what each object would be (created, configured, unchanged),\n"
	  "writing nothing." },
	{ "diff", v_diff, "-f FILE|DIR|- [-f …]",
	  "Shows what apply -f would change: for each object it would create or\n"
	  "configure, a unified diff (diff -u) of its stored spec against the one\n"
	  "the files give it, both in tank's canonical YAML.  Exit 0: no\n"
	  "difference; 1: differences; 2: trouble (bad usage, a manifest refused,\n"
	  "tankd unreachable; said on stderr), as diff(1) and kubectl diff." },
	{ "delete", v_delete,
	  "[KIND] NAME... | KIND/NAME... | -f FILE|DIR|- [-f …] | [KIND] -l SELECTOR [--ignore-not-found]",
	  "Deletes the named pods, or the named objects of KIND (a kind's name,\n"
	  "plural or short name) with what they own (or what the manifests of\n"
	  "every -f hold, read as apply reads them); their containers are\n"
	  "stopped.  A name that names nothing is an error (exit 1) unless\n"
	  "--ignore-not-found; what went with its owner is not looked for again.\n"
	  "-l SELECTOR: every object of KIND (pods by default) whose labels match\n"
	  "(none: \"No resources found\", exit 0)." },
	{ "get", v_get, "[KIND] NAME | KIND/NAME | KINDS [-l SELECTOR] [-o yaml|json|name]",
	  "Prints a pod's (or an object of KIND's) desired spec with its\n"
	  "generation (YAML by default), and its status for kinds above pods.\n"
	  "`get KINDS` (a kind's plural or short name, pods too): the kind's\n"
	  "table, or with -o every object; -l: those whose labels match." },
	{ "ps", v_ps, "[NAME...] [-l SELECTOR] [-q] [--no-headers] [-o yaml|json|name] [-w]",
	  "Lists the objects that own pods (one table per owning kind), then the\n"
	  "pods of each and the pods in none: NAME PHASE READY RESTARTS AGE PID\n"
	  "REASON, from one status snapshot.  NAME...: those pods only (exit 1\n"
	  "naming any that does not exist); -q: their names only; -o name:\n"
	  "pod/NAME; -o yaml|json: their status maps; --no-headers: one row a\n"
	  "pod, ungrouped, no header or title; -w: then one row for each pod\n"
	  "as its news comes (events, no polling), until interrupted.\n"
	  "-l SELECTOR: the pods whose labels match, in one table (k=v, k==v,\n"
	  "k!=v, k, !k; a comma is AND)." },
	{ "status", v_status, "[KIND] [NAME] | KIND/NAME [-o yaml|json]",
	  "Prints the status of one pod or of all pods (with KIND: of that kind)." },
	{ "events", v_events, "[KIND/NAME|NAME] [-l SELECTOR] [--since DURATION] [-o yaml|json]",
	  "Prints the daemon's events as they happen (until interrupted): one per\n"
	  "line, its time then key=value (values with spaces quoted); -o json is\n"
	  "JSON Lines, -o yaml a document each.  KIND/NAME (or a pod's NAME): only\n"
	  "that object's.  --since 10m first replays the last 10 minutes that tankd\n"
	  "still holds (its last 1,000 events).  -l SELECTOR: only the events of\n"
	  "objects whose labels match." },
	{ "describe", v_describe, "[KIND] NAME | KIND/NAME",
	  "Describes one object for a person: its status (times as RFC 3339 with\n"
	  "their age; a pod's containers as a table with pid, restarts, last exit,\n"
	  "readiness and probe), its spec, and its last 10 history entries." },
	{ "history", v_history, "[KIND] NAME | KIND/NAME [--limit N] [-o yaml|json]",
	  "Prints a pod's (or an object of KIND's) recorded state transitions." },
	{ "sync", v_sync, "", "Runs a full reconciliation pass and returns when it is done." },
	{ "nudge", v_nudge, "", "Asks for a reconciliation pass soon, without waiting." },
	{ "ping", v_ping, "", "Checks that tankd answers (prints pong)." },
	{ "version", v_version, "", "Prints the versions of tankctl and tankd, tankd's pid and its keeper's." },
	{ "daemon", v_daemon, "status|reexec",
	  "status: the serving tankd's pid, keeper, uptime, reexecs, restarts by\n"
	  "its keeper and processes adopted.  reexec: re-executes tankd in place\n"
	  "(an upgrade): the same pid, every pod kept running; returns once the\n"
	  "new image answers." },
	{ "completion", v_completion, "bash|zsh",
	  "Prints a shell completion script: verbs, kinds, -o's formats, files\n"
	  "after -f, and the names tankd has (asked when completing).  bash:\n"
	  "source <(tankctl completion bash); make install installs both." },
	{ "__complete", v_complete, "WORD...", "(for the completion scripts)" },
};
#define CTL_NSTATIC (sizeof ctl_verbs / sizeof ctl_verbs[0])
#define CTL_NKIND_VERBS 32

/* The verbs: tankctl's own, then each kind's (kind.h's verbs). */
static verb_t ctl_all[CTL_NSTATIC + CTL_NKIND_VERBS];
static size_t CTL_NVERBS;

/* A usage line with the kind words of the list: [KIND] becomes the
 * names of the kinds other than the default, KINDS their plurals, so the
 * help names what this tankctl knows. */
static const char *ctl_usage_kinds(const char *u, char *buf, size_t cap)
{
	char names[128] = "", plurals[128] = "";
	size_t at = 0;

	for (size_t k = 1; ctl_kinds[k]; k++) {
		size_t ln = strlen(names), lp = strlen(plurals);
		snprintf(names + ln, sizeof names - ln, "%s%s", ln ? "|" : "", ctl_kinds[k]->name);
		snprintf(plurals + lp, sizeof plurals - lp, "%s%s", lp ? "|" : "",
			 ctl_kinds[k]->plural);
	}
	buf[0] = '\0';
	while (*u && at + 1 < cap) {
		/* KIND/NAME stays a form (the kinds' names joined before
		 * "/NAME" would read as the last kind's only). */
		const char *w = !strncmp(u, "KIND/", 5) ? NULL : !strncmp(u, "KINDS", 5) ? plurals
				: !strncmp(u, "KIND", 4) ? names : NULL;
		if (!w && !strncmp(u, "KIND/", 5)) {
			at += (size_t)snprintf(buf + at, cap - at, "KIND/");
			u += 5;
			if (at >= cap)
				at = cap - 1;
			continue;
		}
		if (w) {
			at += (size_t)snprintf(buf + at, cap - at, "%s", w);
			u += strncmp(u, "KINDS", 5) ? 4 : 5;
			if (at >= cap)
				at = cap - 1;
		} else {
			buf[at++] = *u++;
			buf[at] = '\0';
		}
	}
	return buf;
}

static void ctl_verbs_init(void)
{
	static char usage[CTL_NSTATIC][256];
	CTL_NVERBS = 0;
	for (size_t i = 0; i < CTL_NSTATIC; i++) {
		ctl_all[CTL_NVERBS] = ctl_verbs[i];
		ctl_all[CTL_NVERBS++].usage = ctl_usage_kinds(ctl_verbs[i].usage, usage[i],
							       sizeof usage[i]);
	}
	/* Each kind's verbs by their first word; verbs of one first word
	 * (`workflow status`, `workflow retry`) are one verb whose usage and
	 * help list them. */
	static char words[CTL_NKIND_VERBS][64], kusage[CTL_NKIND_VERBS][512];
	static char khelp[CTL_NKIND_VERBS][2048];
	size_t nk = 0;
	for (size_t k = 0; ctl_kinds[k]; k++)
		for (size_t v = 0; v < ctl_kinds[k]->nverbs && nk < CTL_NKIND_VERBS; v++) {
			const kind_verb_t *kv = &ctl_kinds[k]->verbs[v];
			const char *sub = kind_verb_subword(kv);
			kind_verb_word(kv, words[nk], sizeof words[nk]);
			verb_t *have = (verb_t *)ctl_find(words[nk]);
			if (have && have->run == v_kind_verb && sub[0]) {
				size_t i = (size_t)(have - &ctl_all[CTL_NSTATIC]);
				size_t lu = strlen(kusage[i]), lh = strlen(khelp[i]);
				snprintf(kusage[i] + lu, sizeof kusage[i] - lu, "\n       tankctl %s %s %s",
					 words[i], sub, kv->usage);
				snprintf(khelp[i] + lh, sizeof khelp[i] - lh, "\n\n%s %s: %s", words[i],
					 sub, kv->help);
				continue;
			}
			if (have && have->run == v_kind_verb && (kv->flags & KIND_VERB_KINDED)) {
				/* The same verb of another kind: its help added. */
				size_t i = (size_t)(have - &ctl_all[CTL_NSTATIC]);
				size_t lh = strlen(khelp[i]);
				snprintf(khelp[i] + lh, sizeof khelp[i] - lh, "\n%s", kv->help);
				continue;
			}
			if (have)
				continue;
			snprintf(kusage[nk], sizeof kusage[nk], "%s%s%s", sub, sub[0] ? " " : "",
				 kv->usage);
			snprintf(khelp[nk], sizeof khelp[nk], "%s%s%s%s%s", sub[0] ? words[nk] : "",
				 sub[0] ? " " : "", sub, sub[0] ? ": " : "", kv->help);
			ctl_all[CTL_NVERBS++] = (verb_t){ words[nk], v_kind_verb, kusage[nk], khelp[nk] };
			nk++;
		}
	for (size_t k = 0; ctl_kinds[k]; k++)
		for (size_t c = 0; c < ctl_kinds[k]->ncmds &&
				   CTL_NVERBS < CTL_NSTATIC + CTL_NKIND_VERBS; c++) {
			const kind_cmd_t *kc = &ctl_kinds[k]->cmds[c];
			ctl_all[CTL_NVERBS++] = (verb_t){ kc->name, v_kind_cmd, kc->usage, kc->help };
		}
}

/* [{kind: K}] or [] for `list`. */
static int pack_list_kind(msgpack_packer *pk, void *arg)
{
	const kind_t *k = arg;
	msgpack_pack_array(pk, ctl_is_default(k) ? 0 : 1);
	return ctl_is_default(k) ? 0 : pack_kind_opt(pk, k, 0);
}

/* `__complete WORD…`: the candidates for the word after WORD… (the words
 * typed so far, verb first), one per line, for the completion scripts;
 * "__files__" asks the shell for file names.  Quiet on every error: a
 * completion without tankd completes verbs and kinds only. */
static int v_complete(ctl_t *x, int argc, char **argv)
{
	const char *prev = argc > 1 ? argv[argc - 1] : "";
	api_incoming_t in;

	if (argc <= 1) {
		for (size_t i = 0; i < CTL_NVERBS; i++)
			if (ctl_all[i].name[0] != '_')
				puts(ctl_all[i].name);
		puts("help");
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "completion")) {
		if (argc == 2 && !strcmp(argv[1], "help"))
			for (size_t i = 0; i < CTL_NVERBS; i++)
				if (ctl_all[i].name[0] != '_')
					puts(ctl_all[i].name);
		if (argc == 2 && !strcmp(argv[1], "completion"))
			puts("bash\nzsh");
		return EXIT_OK;
	}
	/* A kind verb of two words (`workflow status`): its second words. */
	if (argc == 2) {
		char word[64];
		bool any = false;
		for (size_t i = 0; ctl_kinds[i]; i++)
			for (size_t v = 0; v < ctl_kinds[i]->nverbs; v++) {
				const kind_verb_t *c = &ctl_kinds[i]->verbs[v];
				if (!strcmp(kind_verb_word(c, word, sizeof word), argv[1]) &&
				    kind_verb_subword(c)[0]) {
					puts(kind_verb_subword(c));
					any = true;
				}
			}
		if (any)
			return EXIT_OK;
	}
	if (!strcmp(prev, "-f") || !strcmp(prev, "--filename")) {
		puts("__files__");
		return EXIT_OK;
	}
	if (!strcmp(prev, "-o") || !strcmp(prev, "--output")) {
		puts("yaml\njson");
		return EXIT_OK;
	}
	/* A kind word right after the verb lists that kind's objects; else
	 * the kinds and the default kind's objects. */
	const kind_t *k = argc == 3 ? kind_find(ctl_kinds, argv[2], strlen(argv[2])) : NULL;
	if (!k) {
		if (argc == 2)
			for (size_t i = 0; ctl_kinds[i]; i++)
				if (!ctl_is_default(ctl_kinds[i]))
					printf("%s\n%s\n", ctl_kinds[i]->name, ctl_kinds[i]->plural);
		k = ctl_kinds[0];
	}
	/* Not found errors and the like stay off the terminal. */
	if (freopen("/dev/null", "w", stderr) == NULL)
		return EXIT_OK;
	if (ctl_call(x, "list", pack_list_kind, (void *)k, 2000, &in) != 0)
		return EXIT_OK;
	for (uint32_t i = 0; in.result->type == MSGPACK_OBJECT_ARRAY && i < in.result->via.array.size;
	     i++) {
		const msgpack_object *o = &in.result->via.array.ptr[i];
		const msgpack_object *nm = o->type == MSGPACK_OBJECT_STR ? o : api_map_get(o, "name");
		if (nm && nm->type == MSGPACK_OBJECT_STR)
			printf("%.*s\n", (int)nm->via.str.size, nm->via.str.ptr);
	}
	api_incoming_free(&in);
	return EXIT_OK;
}

/* `completion bash|zsh`: a script that asks `tankctl __complete`, so the
 * verbs and kinds of this tankctl and the objects of the running tankd
 * are what completes. */
static int v_completion(ctl_t *x, int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return ctl_help(ctl_find(x->verb));
	if (argc != 2 || (strcmp(argv[1], "bash") && strcmp(argv[1], "zsh")))
		return ctl_usage_error(x, "takes bash or zsh");
	if (!strcmp(argv[1], "bash")) {
		fputs("# tankctl completion for bash: source it, or install it as\n"
		      "# /usr/share/bash-completion/completions/tankctl (make install does).\n"
		      "_tankctl() {\n"
		      "\tlocal cur=${COMP_WORDS[COMP_CWORD]} IFS=$'\\n' out\n"
		      "\tout=$(\"${COMP_WORDS[0]}\" __complete \"${COMP_WORDS[@]:1:COMP_CWORD-1}\" 2>/dev/null)\n"
		      "\tif [ \"$out\" = __files__ ]; then\n"
		      "\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
		      "\telse\n"
		      "\t\tCOMPREPLY=($(compgen -W \"$out\" -- \"$cur\"))\n"
		      "\tfi\n"
		      "}\n"
		      "complete -o default -F _tankctl tankctl\n", stdout);
	} else {
		fputs("#compdef tankctl\n"
		      "# tankctl completion for zsh: install it as _tankctl in a directory of\n"
		      "# $fpath (make install puts it in share/zsh/site-functions).\n"
		      "local -a c\n"
		      "c=(${(f)\"$(${words[1]} __complete \"${(@)words[2,CURRENT-1]}\" 2>/dev/null)\"})\n"
		      "if [[ \"${c[1]}\" == __files__ ]]; then\n"
		      "\t_files\n"
		      "else\n"
		      "\tcompadd -- $c\n"
		      "fi\n", stdout);
	}
	return EXIT_OK;
}

static const verb_t *ctl_find(const char *name)
{
	for (size_t i = 0; i < CTL_NVERBS; i++)
		if (strcmp(ctl_all[i].name, name) == 0)
			return &ctl_all[i];
	return NULL;
}

static void ctl_main_help(FILE *fp)
{
	fprintf(fp, "usage: tankctl [--socket PATH] VERB [ARGS...]\n"
		"   or: tankctl --cluster URL VERB [ARGS...]  (a cluster's etcd: docs/cluster.md)\n\n"
		"Talks to tankd over its socket: --socket PATH, else $TANK_SOCKET, else\n"
		"DATA_DIR/tank.sock (DATA_DIR: $TANK_DATA_DIR, /var/lib/tank for root,\n"
		"$XDG_STATE_HOME/tank or ~/.local/state/tank otherwise).\n\nverbs:\n");
	for (size_t i = 0; i < CTL_NVERBS; i++) {
		const char *u = ctl_all[i].usage, *nl;
		if (ctl_all[i].name[0] == '_')
			continue;
		/* A verb of several forms (a kind's verbs of one first word,
		 * above) has its usage's other lines as "\n       tankctl VERB
		 * …", for its own help: here each is a line of the list. */
		do {
			nl = strchr(u, '\n');
			int len = nl ? (int)(nl - u) : (int)strlen(u);
			if (len)
				fprintf(fp, "  %-8s %.*s\n", ctl_all[i].name, len, u);
			else
				fprintf(fp, "  %s\n", ctl_all[i].name);
			if (nl) {
				u = nl + 1 + strspn(nl + 1, " ");
				if (strncmp(u, "tankctl ", 8) == 0)
					u += 8;
				if (strncmp(u, ctl_all[i].name, strlen(ctl_all[i].name)) == 0)
					u += strlen(ctl_all[i].name) + (u[strlen(ctl_all[i].name)] == ' ');
			}
		} while (nl);
	}
	fprintf(fp, "\n'tankctl VERB --help' describes a verb.  Exit status: 0 success,\n"
		"1 error (reported by tankd, or tankd unreachable), 2 bad usage.\n");
}

int main(int argc, char **argv)
{
	ctl_t x = { .verb = NULL };
	int i = 1, r;

	ctl_verbs_init();
	opterr = 0;   /* ctl_bad_option says it, once */
	/* Global options come before the verb (or anywhere after it, below). */
	while (i < argc && argv[i][0] == '-') {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			ctl_main_help(stdout);
			return EXIT_OK;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("tankctl %s\n", CTL_VERSION);
			return EXIT_OK;
		}
		/* The cluster's verbs talk to etcd, not to a tankd: all of
		 * them are cluster/'s (cl_cli.h). */
		if (strcmp(argv[i], "--cluster") == 0 && i + 1 < argc)
			return cl_cli_main(argv[i + 1], argc - i - 2, argv + i + 2, stdout, stderr);
		if (strncmp(argv[i], "--cluster=", 10) == 0)
			return cl_cli_main(argv[i] + 10, argc - i - 1, argv + i + 1, stdout, stderr);
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
	/* `help VERB` is `VERB --help`. */
	char *help_argv[3];
	if (strcmp(argv[i], "help") == 0) {
		if (i + 1 >= argc) {
			ctl_main_help(stdout);
			return EXIT_OK;
		}
		help_argv[0] = argv[i + 1];
		help_argv[1] = (char *)"--help";
		help_argv[2] = NULL;
		argv = help_argv;
		argc = 2;
		i = 0;
	}
	const verb_t *v = ctl_find(argv[i]);
	if (!v)
		return ctl_usage_error(&x, "unknown verb '%s'", argv[i]);
	x.verb = v->name;
	/* The global options may also follow the verb, as kubectl's do: taken
	 * out of the verb's words (up to a `--`, after which all is the
	 * command's). */
	int n = 0;
	char **vargv = calloc((size_t)(argc - i) + 1, sizeof *vargv);
	if (!vargv)
		return ctl_fail(&x, "out of memory");
	for (int k = i, dashes = 0; k < argc; k++) {
		if (!dashes && k > i && strcmp(argv[k], "--") == 0)
			dashes = 1;
		if (!dashes && k > i && strcmp(argv[k], "--socket") == 0) {
			if (k + 1 >= argc) {
				free(vargv);
				return ctl_usage_error(&x, "option '--socket' needs a value");
			}
			x.socket_flag = argv[++k];
			continue;
		}
		if (!dashes && k > i && strncmp(argv[k], "--socket=", 9) == 0) {
			x.socket_flag = argv[k] + 9;
			continue;
		}
		vargv[n++] = argv[k];
	}
	optind = 0;   /* GNU: full re-initialisation for the verb's argv */
	r = v->run(&x, n, vargv);
	free(vargv);
	api_client_close(x.c);
	if (fflush(stdout) != 0 && r == EXIT_OK)
		r = EXIT_ERR;
	return r;
}
