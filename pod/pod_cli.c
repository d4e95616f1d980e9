/*
 * pod_cli.c — tankctl's commands of the Pod kind, through tankctl's
 * services (kinds/kind.h, kind_cli_t); docs/cli.md:
 *
 *   restart NAME | -l SELECTOR
 *   logs NAME | -l SELECTOR [-c C] [-n N] [--since D] [-t] [-p] [-f]
 *
 * They call the Pod kind's methods (pod_methods.h) and print as tankctl
 * does: lines on stdout, errors through cli->fail and cli->usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/kit_units.h"
#include "pod/pod_kind.h"
#include "pod/pod_methods.h"
#include "store/st.h"

enum { OPT_HELP = 0x100, OPT_SINCE };

static void names_free(char **names)
{
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}

static int pack_name(msgpack_packer *pk, void *arg)
{
	int rc = msgpack_pack_array(pk, 1);
	rc |= kind_pack_str(pk, arg);
	return rc ? -ENOMEM : 0;
}

static bool obj_streq(const msgpack_object *o, const char *s)
{
	return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

/* ---- restart ---------------------------------------------------------------------------- */

static int restart_one(const kind_cli_t *cli, const char *name)
{
	int r = cli->call(cli, "restart", pack_name, (void *)name, 0, NULL, NULL);
	if (r == 0)
		printf("%s restarted\n", name);
	return r;
}

static int cmd_restart(const kind_cli_t *cli, int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, OPT_HELP },
		{ "selector", required_argument, NULL, 'l' }, { 0 } };
	const char *selector = NULL;
	char **names;
	int o, r = 0;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":l:", opts, NULL)) != -1) {
		if (o == 'l') {
			selector = optarg;
			continue;
		}
		return cli->bad_option(cli, o, argv);
	}
	if (!selector) {
		/* NAME… (as `docker restart a b`), one restart each in their
		 * order; a failure is printed and the others still go. */
		if (argc == optind)
			return cli->usage(cli, "needs a pod name");
		for (int i = optind; i < argc; i++)
			if (!kind_ref_name(&pod_kind, argv[i]))
				return cli->usage(cli, "'%s' is not a pod: restart acts on pods", argv[i]);
		for (int i = optind; i < argc; i++) {
			int r2 = restart_one(cli, kind_ref_name(&pod_kind, argv[i]));
			r = r ? r : r2;
		}
		return r;
	}
	/* Every pod whose labels match, one restart each. */
	if (argc != optind)
		return cli->usage(cli, "takes a pod name or -l SELECTOR, not both");
	if ((r = cli->selected(cli, &pod_kind, selector, &names)) != 0)
		return r;
	if (!names[0])
		fprintf(stderr, "No resources found\n");
	for (size_t i = 0; names[i]; i++) {
		int r2 = restart_one(cli, names[i]);
		r = r ? r : r2;
	}
	names_free(names);
	return r;
}

/* ---- logs ------------------------------------------------------------------------------- */

typedef struct logs_params {
	const char *name, *container;
	long tail;                   /* -2: tankd's default (100) */
	int64_t since, until;        /* ms since the epoch, -1: unbounded */
	bool follow;
} logs_params_t;

static int pack_logs(msgpack_packer *pk, void *arg)
{
	logs_params_t *p = arg;
	int rc = msgpack_pack_array(pk, 2);
	rc |= kind_pack_str(pk, p->name);
	rc |= msgpack_pack_map(pk, (p->container != NULL) + (p->tail >= -1) + p->follow +
				       (p->since >= 0) + (p->until >= 0));
	if (p->container) {
		rc |= kind_pack_str(pk, "container");
		rc |= kind_pack_str(pk, p->container);
	}
	if (p->tail >= -1) {
		rc |= kind_pack_str(pk, "tail");
		rc |= msgpack_pack_int64(pk, p->tail);
	}
	if (p->since >= 0) {
		rc |= kind_pack_str(pk, "since");
		rc |= msgpack_pack_int64(pk, p->since);
	}
	if (p->until >= 0) {
		rc |= kind_pack_str(pk, "until");
		rc |= msgpack_pack_int64(pk, p->until);
	}
	if (p->follow) {
		rc |= kind_pack_str(pk, "follow");
		rc |= msgpack_pack_true(pk);
	}
	return rc ? -ENOMEM : 0;
}

/* The text of a log record "2026-11-22T03:04:05.123Z stdout text": what
 * follows its time and stream (the whole line when it has not that
 * shape). */
static const char *log_text(const char *p, size_t n, size_t *len)
{
	/* 24 bytes of time ("…T03:04:05.123Z"), a space, the stream. */
	const char *sp = n > 25 && p[23] == 'Z' && p[24] == ' ' && p[10] == 'T' ?
			 memchr(p + 25, ' ', n - 25) : NULL;
	if (!sp) {
		*len = n;
		return p;
	}
	*len = n - (size_t)(sp + 1 - p);
	return sp + 1;
}

/* A log line arrives as a string or as a map with `line` (and maybe
 * `container`); with prefix, a map's line is printed after `[container] `
 * (the lines of several containers, as kubectl logs --prefix). */
static void print_line(const msgpack_object *o, const char *pod, bool prefix, bool timestamps)
{
	const msgpack_object *l = o->type == MSGPACK_OBJECT_MAP ? kind_map_get(o, "line") : o;
	const msgpack_object *c = o->type == MSGPACK_OBJECT_MAP ? kind_map_get(o, "container") : NULL;
	if (pod)
		printf("[%s] ", pod);
	if (prefix && c && c->type == MSGPACK_OBJECT_STR)
		printf("[%.*s] ", (int)c->via.str.size, c->via.str.ptr);
	if (l && l->type == MSGPACK_OBJECT_STR) {
		size_t n = l->via.str.size;
		const char *t = timestamps ? l->via.str.ptr : log_text(l->via.str.ptr, n, &n);
		fwrite(t, 1, n, stdout);
		if (!n || t[n - 1] != '\n')
			fputc('\n', stdout);
	}
}

/* --previous: what the pod's status says of the container asked for. */
typedef struct prev_ctr {
	const char *want;            /* -c, or NULL */
	char ctr[ST_NAME_MAX + 1];
	bool running;
	int nctr;
	int64_t starts[2];           /* the last two starts, oldest first */
	char key[2 * ST_NAME_MAX + 2];
} prev_ctr_t;

static int got_containers(void *arg, const msgpack_object *res)
{
	prev_ctr_t *pc = arg;
	const msgpack_object *cs = kind_map_get(res, "containers");
	for (uint32_t i = 0; cs && cs->type == MSGPACK_OBJECT_ARRAY && i < cs->via.array.size; i++) {
		const msgpack_object *c = &cs->via.array.ptr[i], *nm = kind_map_get(c, "name");
		pc->nctr++;
		if (!nm || nm->type != MSGPACK_OBJECT_STR || (pc->want && !obj_streq(nm, pc->want)))
			continue;
		kind_str(nm, pc->ctr, sizeof pc->ctr);
		pc->running = obj_streq(kind_map_get(c, "phase"), "running");
	}
	return 0;
}

static int got_starts(void *arg, const msgpack_object *res)
{
	prev_ctr_t *pc = arg;
	int64_t at;
	for (uint32_t i = 0; res->type == MSGPACK_OBJECT_ARRAY && i < res->via.array.size; i++) {
		const msgpack_object *t = &res->via.array.ptr[i];
		if (obj_streq(kind_map_get(t, "key"), pc->key) &&
		    obj_streq(kind_map_get(t, "to"), "running") && kind_int(kind_map_get(t, "at"), &at)) {
			pc->starts[0] = pc->starts[1];
			pc->starts[1] = at;
		}
	}
	return 0;
}

/* The window of the container's run before its current one (or of its
 * last run, when it does not run now), from the starts in its history.
 * 0, or an exit code (the error printed). */
static int previous_window(const kind_cli_t *cli, logs_params_t *p)
{
	prev_ctr_t pc = { .want = p->container, .starts = { -1, -1 } };
	int r;

	if ((r = cli->call(cli, "status", pack_name, (void *)p->name, 0, got_containers, &pc)) != 0)
		return r;
	if (!p->container && pc.nctr > 1)
		return cli->usage(cli, "--previous needs -c CONTAINER: pod %s has %d", p->name,
				  pc.nctr);
	if (!pc.ctr[0])
		return cli->fail(cli, "pod \"%s\" has no container \"%s\"", p->name,
				 p->container ? p->container : "");
	/* Its whole history (the default), oldest first. */
	snprintf(pc.key, sizeof pc.key, "%s/%s", p->name, pc.ctr);
	if ((r = cli->call(cli, "history", pack_name, (void *)p->name, 0, got_starts, &pc)) != 0)
		return r;
	if (pc.starts[1] < 0)
		return cli->fail(cli, "container %s of pod %s has not run yet", pc.ctr, p->name);
	if (pc.running && pc.starts[0] < 0)
		return cli->fail(cli, "container %s of pod %s has no previous run", pc.ctr, p->name);
	p->since = pc.running ? pc.starts[0] : pc.starts[1];
	p->until = pc.running ? pc.starts[1] : -1;
	return 0;
}

typedef struct printing {
	const char *pod;             /* a [POD] prefix, or NULL */
	bool prefix, timestamps, none;
	bool several;                /* got: the pod has several containers */
} printing_t;

/* Without -c, a pod of several containers answers with maps: every
 * container's lines, each prefixed with its container's name. */
static int got_lines(void *arg, const msgpack_object *res)
{
	printing_t *pr = arg;
	pr->none = res->type != MSGPACK_OBJECT_ARRAY || !res->via.array.size;
	for (uint32_t i = 0; res->type == MSGPACK_OBJECT_ARRAY && i < res->via.array.size; i++) {
		const msgpack_object *l = &res->via.array.ptr[i];
		pr->prefix |= l->type == MSGPACK_OBJECT_MAP;
		print_line(l, pr->pod, pr->prefix, pr->timestamps);
	}
	return 0;
}

static int got_several(void *arg, const msgpack_object *res)
{
	const msgpack_object *c = kind_map_get(res, "containers");
	((printing_t *)arg)->several = c && c->type == MSGPACK_OBJECT_ARRAY && c->via.array.size > 1;
	return 0;
}

/* -f: the lines tankd sends, until the pod ended and its log is drained
 * (log_end). */
static int note_line(void *arg, const char *event, const msgpack_object *params)
{
	printing_t *pr = arg;
	if (!strcmp(event, "log_end"))
		return 1;
	if (!strcmp(event, "log") && params && params->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < params->via.array.size; i++)
			print_line(&params->via.array.ptr[i], NULL, pr->prefix, pr->timestamps);
	return 0;
}

/* `logs -l SELECTOR`: the logs of every pod whose labels match, one pod
 * after the other (sorted by name), each line prefixed with `[NAME] `
 * (kubectl's --prefix) and, in a pod of several containers, its
 * container's name.  Not with -f (one stream per call). */
static int logs_selected(const kind_cli_t *cli, const char *selector, logs_params_t *p,
			 bool timestamps)
{
	char **names;
	int r;

	if ((r = cli->selected(cli, &pod_kind, selector, &names)) != 0)
		return r;
	if (!names[0])
		fprintf(stderr, "No resources found\n");
	for (size_t i = 0; names[i]; i++) {
		printing_t pr = { .pod = names[i], .timestamps = timestamps };
		p->name = names[i];
		int r2 = cli->call(cli, "logs", pack_logs, p, 0, got_lines, &pr);
		r = r ? r : r2;
	}
	names_free(names);
	fflush(stdout);
	return r;
}

static int cmd_logs(const kind_cli_t *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ "container", required_argument, NULL, 'c' },
		{ "tail", required_argument, NULL, 'n' },
		{ "since", required_argument, NULL, OPT_SINCE },
		{ "timestamps", no_argument, NULL, 't' },
		{ "previous", no_argument, NULL, 'p' },
		{ "selector", required_argument, NULL, 'l' },
		{ "follow", no_argument, NULL, 'f' }, { 0 } };
	logs_params_t p = { .tail = -2, .since = -1, .until = -1 };
	bool timestamps = false, previous = false;
	const char *selector = NULL;
	char *end;
	uint64_t ms;
	int o, r;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":c:fn:tpl:", opts, NULL)) != -1) {
		if (o == 'c') {
			p.container = optarg;
		} else if (o == 'f') {
			p.follow = true;
		} else if (o == 't') {
			timestamps = true;
		} else if (o == 'p') {
			previous = true;
		} else if (o == 'l') {
			selector = optarg;
		} else if (o == 'n') {
			errno = 0;
			p.tail = strtol(optarg, &end, 10);
			if (errno || *end || !*optarg || p.tail < -1 || p.tail > POD_LOG_TAIL_MAX)
				return cli->usage(cli, "--tail takes a number of lines, 0 to 100000 "
						  "(-1: every line)");
		} else if (o == OPT_SINCE) {
			if (kit_parse_duration(optarg, strlen(optarg), &ms) < 0)
				return cli->usage(cli, "--since takes a duration (30s, 10m, 1h)");
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
			p.since = now > (int64_t)ms ? now - (int64_t)ms : 0;
		} else {
			return cli->bad_option(cli, o, argv);
		}
	}
	if (selector) {
		if (argc != optind)
			return cli->usage(cli, "takes a pod name or -l SELECTOR, not both");
		if (p.follow || previous)
			return cli->usage(cli, "-l is not with -f or --previous");
		return logs_selected(cli, selector, &p, timestamps);
	}
	if (argc - optind != 1)
		return cli->usage(cli, "needs one pod name");
	if (!(p.name = kind_ref_name(&pod_kind, argv[optind])))
		return cli->usage(cli, "'%s' is not a pod: logs acts on pods", argv[optind]);
	if (previous && p.follow)
		return cli->usage(cli, "--previous and -f: a previous run does not grow");
	if (previous) {
		int64_t since = p.since;
		if ((r = previous_window(cli, &p)) != 0)
			return r;
		if (since > p.since)
			p.since = since;
		if (p.tail == -2)
			p.tail = -1;     /* the whole previous run */
	}
	printing_t pr = { .timestamps = timestamps };
	if ((r = cli->call(cli, "logs", pack_logs, &p, 0, got_lines, &pr)) != 0)
		return r;
	fflush(stdout);
	if (!p.follow)
		return 0;
	/* Nothing logged yet: its status says whether it has several. */
	if (!p.container && pr.none &&
	    cli->call(cli, "status", pack_name, (void *)p.name, 0, got_several, &pr) == 0)
		pr.prefix = pr.several;
	return cli->follow(cli, note_line, &pr);
}

const kind_cmd_t pod_cmds[POD_NCMDS] = {
	{ "restart", cmd_restart, "NAME... | -l SELECTOR",
	  "Restarts a pod and resets its retries, also when it is terminal.\n"
	  "NAME...: each, one after another.  -l SELECTOR: every pod whose\n"
	  "labels match." },
	{ "logs", cmd_logs,
	  "NAME|-l SELECTOR [-c CONTAINER] [-n|--tail N] [--since DURATION] [-t] [-p|--previous] [-f]",
	  "Prints a pod's captured output, the lines as the container wrote them:\n"
	  "without -c, every container's in time order, each prefixed with\n"
	  "[CONTAINER] when it has several.  The last 100 lines unless --tail N\n"
	  "(0: none, -1: all); --since 10m: only the last 10 minutes'; -t: each\n"
	  "line with its time and stream (stdout, stderr) as tank stored it;\n"
	  "--previous: the container's run before the current one (or its last\n"
	  "run when it does not run now), whole unless --tail; -f keeps printing\n"
	  "new lines until the pod has ended (or is deleted) and its log is drained.\n"
	  "-l SELECTOR (not with -f, -p): every matching pod's, pod by pod, each\n"
	  "line prefixed with [POD]." },
};
