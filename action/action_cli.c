/*
 * action_cli.c — tankctl's commands of the Action and Playbook kinds,
 * through tankctl's services (kind.h, kind_cli_t); docs/cli.md:
 *
 *   action run POD KIND [ARG…] [--id ID] [--approve-first] [--wait] [-o F]
 *   action approve|cancel|get ID [-o F]
 *   action ls [--pod P] [--state S] [-o F]
 *   exec POD [-c C] [--timeout D] -- CMD…
 *   playbook apply -f FILE | get NAME [-o F] | ls [-o F]
 *
 * ARGs of `action run`: KEY=VALUE sets args.KEY (container=, signal=,
 * timeout=); a bare word is the signal of `signal`, else one of a custom
 * action's args; `--` ends the options, what follows is exec's command.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "action/action_kind.h"
#include "action/action_spec.h"

#define WAIT_POLL_MS 100

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int pk_s(msgpack_packer *pk, const char *s)
{
	return kind_pack_str(pk, s);
}

/* ---- action run -------------------------------------------------------------------------- */

typedef struct run_req {
	const char *id, *pod, *kind;
	bool approve_first;
	char **kv;           /* KEY=VALUE */
	size_t nkv;
	char **words;        /* bare words */
	size_t nwords;
	char **cmd;          /* after -- */
	size_t ncmd;
} run_req_t;

static int pack_run(msgpack_packer *pk, void *arg)
{
	const run_req_t *r = arg;
	bool sig = !strcmp(r->kind, "signal");
	bool builtin = sig || !strcmp(r->kind, "exec") || !strcmp(r->kind, "restart") ||
		       !strcmp(r->kind, "stop") || !strcmp(r->kind, "start");
	size_t nargs = r->nkv + (r->ncmd > 0) + (sig && r->nwords > 0) +
		       (!builtin && r->nwords > 0);
	int rc = msgpack_pack_array(pk, 1);

	rc |= msgpack_pack_map(pk, 4 + (r->id != NULL));
	if (r->id) {
		rc |= pk_s(pk, "id");
		rc |= pk_s(pk, r->id);
	}
	rc |= pk_s(pk, "pod");  rc |= pk_s(pk, r->pod);
	rc |= pk_s(pk, "kind"); rc |= pk_s(pk, r->kind);
	rc |= pk_s(pk, "approve_first");
	rc |= r->approve_first ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	rc |= pk_s(pk, "args");
	rc |= msgpack_pack_map(pk, nargs);
	for (size_t i = 0; i < r->nkv; i++) {
		const char *eq = strchr(r->kv[i], '=');
		rc |= msgpack_pack_str(pk, (size_t)(eq - r->kv[i]));
		rc |= msgpack_pack_str_body(pk, r->kv[i], (size_t)(eq - r->kv[i]));
		rc |= pk_s(pk, eq + 1);
	}
	if (r->ncmd) {
		rc |= pk_s(pk, "command");
		rc |= msgpack_pack_array(pk, r->ncmd);
		for (size_t i = 0; i < r->ncmd; i++)
			rc |= pk_s(pk, r->cmd[i]);
	}
	if (sig && r->nwords) {
		rc |= pk_s(pk, "signal");
		rc |= pk_s(pk, r->words[0]);
	} else if (!builtin && r->nwords) {
		rc |= pk_s(pk, "args");
		rc |= msgpack_pack_array(pk, r->nwords);
		for (size_t i = 0; i < r->nwords; i++)
			rc |= pk_s(pk, r->words[i]);
	}
	return rc ? -ENOMEM : 0;
}

typedef struct rec {
	char id[ACT_ID_MAX + 1];
	char state[32];
	char reason[160];
	char error[160];
	int64_t exit_code, signal;
	bool has_exit, has_signal;
	const char *format;
	const kind_cli_t *cli;
	bool print;
	int emit_rc;
} rec_t;

static int got_rec(void *arg, const msgpack_object *o)
{
	rec_t *r = arg;
	const msgpack_object *res;

	if (!o || o->type != MSGPACK_OBJECT_MAP)
		return -EPROTO;
	kind_str(kind_map_get(o, "id"), r->id, sizeof r->id);
	kind_str(kind_map_get(o, "state"), r->state, sizeof r->state);
	kind_str(kind_map_get(o, "reason"), r->reason, sizeof r->reason);
	r->has_exit = r->has_signal = false;
	if ((res = kind_map_get(o, "result")) && res->type == MSGPACK_OBJECT_MAP) {
		r->has_exit = kind_int(kind_map_get(res, "exit"), &r->exit_code);
		r->has_signal = kind_int(kind_map_get(res, "signal"), &r->signal);
		kind_str(kind_map_get(res, "error"), r->error, sizeof r->error);
	}
	if (r->print && r->format)
		r->emit_rc = r->cli->emit(r->cli, o, r->format);
	return 0;
}

static int pack_id(msgpack_packer *pk, void *arg)
{
	int rc = msgpack_pack_array(pk, 1);
	rc |= pk_s(pk, arg);
	return rc ? -ENOMEM : 0;
}

static bool finished(const char *state)
{
	return !strcmp(state, "DONE") || !strcmp(state, "FAILED") ||
	       !strcmp(state, "CANCELLED") || !strcmp(state, "LOST");
}

/* Polls the record until it is finished (the client's wait; the daemon
 * moves actions reactively). */
static int wait_done(const kind_cli_t *cli, rec_t *r)
{
	int rc;

	r->print = false;
	while (!finished(r->state)) {
		sleep_ms(WAIT_POLL_MS);
		if ((rc = cli->call(cli, "action_get", pack_id, r->id, 0, got_rec, r)) != 0)
			return rc;
	}
	return 0;
}

static int get_opt_value(const kind_cli_t *cli, int argc, char **argv, int *i, const char **v)
{
	if (*i + 1 >= argc)
		return cli->usage(cli, "option '%s' needs a value", argv[*i]);
	*v = argv[++*i];
	return 0;
}

static int a_run(const kind_cli_t *cli, int argc, char **argv)
{
	run_req_t r = { 0 };
	bool wait = false;
	const char *fmt = NULL;
	char **kv = calloc((size_t)argc + 1, sizeof *kv), **words = calloc((size_t)argc + 1,
									   sizeof *words);
	int rc = 0, npos = 0;

	if (!kv || !words) {
		free(kv);
		free(words);
		return cli->fail(cli, "out of memory");
	}
	r.kv = kv;
	r.words = words;
	for (int i = 1; i < argc && !rc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			r.cmd = &argv[i + 1];
			r.ncmd = (size_t)(argc - i - 1);
			break;
		} else if (!strcmp(a, "--id")) {
			rc = get_opt_value(cli, argc, argv, &i, &r.id);
		} else if (!strcmp(a, "--approve-first")) {
			r.approve_first = true;
		} else if (!strcmp(a, "--wait")) {
			wait = true;
		} else if (!strcmp(a, "-o")) {
			rc = get_opt_value(cli, argc, argv, &i, &fmt);
		} else if (a[0] == '-' && a[1]) {
			rc = cli->usage(cli, "run: unknown option '%s'", a);
		} else if (npos == 0) {
			r.pod = a;
			npos++;
		} else if (npos == 1) {
			r.kind = a;
			npos++;
		} else if (strchr(a, '=') && strchr(a, '=') != a) {
			r.kv[r.nkv++] = argv[i];
		} else {
			r.words[r.nwords++] = argv[i];
		}
	}
	if (!rc && (!r.pod || !r.kind))
		rc = cli->usage(cli, "run: POD and KIND are required");
	rec_t rec = { .cli = cli, .format = fmt, .print = !wait };
	if (!rc)
		rc = cli->call(cli, "action_submit", pack_run, &r, 0, got_rec, &rec);
	free(kv);
	free(words);
	if (rc)
		return rc;
	if (!wait) {
		if (!fmt)
			printf("action %s %s\n", rec.id, rec.state);
		return rec.emit_rc;
	}
	if ((rc = wait_done(cli, &rec)) != 0)
		return rc;
	if (fmt) {
		rec.print = true;
		if ((rc = cli->call(cli, "action_get", pack_id, rec.id, 0, got_rec, &rec)) != 0)
			return rc;
	} else {
		printf("action %s %s: %s\n", rec.id, rec.state, rec.reason);
	}
	return strcmp(rec.state, "DONE") ? 1 : rec.emit_rc;
}

static int a_by_id(const kind_cli_t *cli, int argc, char **argv, const char *method)
{
	const char *id = NULL, *fmt = NULL;
	int rc = 0;

	for (int i = 2; i < argc && !rc; i++) {
		if (!strcmp(argv[i], "-o"))
			rc = get_opt_value(cli, argc, argv, &i, &fmt);
		else if (argv[i][0] == '-')
			rc = cli->usage(cli, "%s: unknown option '%s'", argv[1], argv[i]);
		else if (!id)
			id = argv[i];
		else
			rc = cli->usage(cli, "%s: one ID", argv[1]);
	}
	if (!rc && !id)
		rc = cli->usage(cli, "%s: ID is required", argv[1]);
	if (rc)
		return rc;
	bool is_get = !strcmp(method, "action_get");
	rec_t rec = { .cli = cli, .format = fmt ? fmt : is_get ? "yaml" : NULL, .print = true };
	if ((rc = cli->call(cli, method, pack_id, (void *)id, 0, got_rec, &rec)) != 0)
		return rc;
	if (!rec.format)
		printf("action %s %s\n", rec.id, rec.state);
	return rec.emit_rc;
}

/* ---- action ls ----------------------------------------------------------------------------- */

typedef struct ls_req {
	const char *pod, *state;
} ls_req_t;

static int pack_ls(msgpack_packer *pk, void *arg)
{
	const ls_req_t *q = arg;
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_map(pk, (q->pod != NULL) + (q->state != NULL));
	if (q->pod) {
		rc |= pk_s(pk, "pod");
		rc |= pk_s(pk, q->pod);
	}
	if (q->state) {
		rc |= pk_s(pk, "state");
		rc |= pk_s(pk, q->state);
	}
	return rc ? -ENOMEM : 0;
}

typedef struct ls_out {
	const kind_cli_t *cli;
	const char *format;
	int rc;
} ls_out_t;

static void age(int64_t since, char *buf, size_t cap)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	kind_age(since, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000, buf, cap);
}

/* ID POD KIND STATE BY AGE, in submit order (the list's). */
static int got_ls(void *arg, const msgpack_object *o)
{
	ls_out_t *x = arg;
	static const char *const heads[] = { "ID", "POD", "KIND", "STATE", "BY", "AGE" };
	enum { NC = 6 };
	size_t w[NC];

	if (!o || o->type != MSGPACK_OBJECT_ARRAY)
		return -EPROTO;
	if (x->format) {
		x->rc = x->cli->emit(x->cli, o, x->format);
		return 0;
	}
	uint32_t n = o->via.array.size;
	char (*cells)[NC][64] = calloc(n ? n : 1, sizeof *cells);
	if (!cells)
		return -ENOMEM;
	for (size_t c = 0; c < NC; c++)
		w[c] = strlen(heads[c]);
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *s = &o->via.array.ptr[i];
		int64_t since = 0;
		kind_cell(s, "id", cells[i][0], 64, "-");
		kind_cell(s, "pod", cells[i][1], 64, "-");
		kind_cell(s, "action", cells[i][2], 64, "-");
		kind_cell(s, "state", cells[i][3], 64, "-");
		kind_cell(kind_map_get(s, "requester"), "name", cells[i][4], 64, "-");
		kind_int(kind_map_get(s, "created_at"), &since);
		age(since, cells[i][5], 64);
		for (size_t c = 0; c < NC; c++)
			if (strlen(cells[i][c]) > w[c])
				w[c] = strlen(cells[i][c]);
	}
	for (size_t c = 0; c < NC; c++)
		printf("%-*s%s", c + 1 < NC ? (int)w[c] : 0, heads[c], c + 1 < NC ? "  " : "\n");
	for (uint32_t i = 0; i < n; i++)
		for (size_t c = 0; c < NC; c++)
			printf("%-*s%s", c + 1 < NC ? (int)w[c] : 0, cells[i][c],
			       c + 1 < NC ? "  " : "\n");
	free(cells);
	return 0;
}

static int a_ls(const kind_cli_t *cli, int argc, char **argv)
{
	ls_req_t q = { 0 };
	ls_out_t x = { .cli = cli };
	int rc = 0;

	for (int i = 2; i < argc && !rc; i++) {
		if (!strcmp(argv[i], "--pod"))
			rc = get_opt_value(cli, argc, argv, &i, &q.pod);
		else if (!strcmp(argv[i], "--state"))
			rc = get_opt_value(cli, argc, argv, &i, &q.state);
		else if (!strcmp(argv[i], "-o"))
			rc = get_opt_value(cli, argc, argv, &i, &x.format);
		else
			rc = cli->usage(cli, "ls: unexpected '%s'", argv[i]);
	}
	if (rc)
		return rc;
	if ((rc = cli->call(cli, "action_list", pack_ls, &q, 0, got_ls, &x)) != 0)
		return rc;
	return x.rc;
}

static int c_action(const kind_cli_t *cli, int argc, char **argv)
{
	if (argc < 2)
		return cli->usage(cli, "run, approve, cancel, get or ls?");
	if (!strcmp(argv[1], "run"))
		return a_run(cli, argc - 1, argv + 1);
	if (!strcmp(argv[1], "approve"))
		return a_by_id(cli, argc, argv, "action_approve");
	if (!strcmp(argv[1], "cancel"))
		return a_by_id(cli, argc, argv, "action_cancel");
	if (!strcmp(argv[1], "get"))
		return a_by_id(cli, argc, argv, "action_get");
	if (!strcmp(argv[1], "ls") || !strcmp(argv[1], "list"))
		return a_ls(cli, argc, argv);
	return cli->usage(cli, "unknown subcommand '%s' (run, approve, cancel, get, ls)", argv[1]);
}

/* ---- exec ------------------------------------------------------------------------------------ */

typedef struct out_req {
	const char *id;
	uint64_t offset;
} out_req_t;

static int pack_out(msgpack_packer *pk, void *arg)
{
	const out_req_t *q = arg;
	int rc = msgpack_pack_array(pk, 2);
	rc |= pk_s(pk, q->id);
	rc |= msgpack_pack_map(pk, 1);
	rc |= pk_s(pk, "offset");
	rc |= msgpack_pack_uint64(pk, q->offset);
	return rc ? -ENOMEM : 0;
}

typedef struct out_got {
	uint64_t next;
	bool eof, cut;
	size_t n;
} out_got_t;

static int got_out(void *arg, const msgpack_object *o)
{
	out_got_t *g = arg;
	const msgpack_object *d, *e;
	int64_t next = 0;

	if (!o || o->type != MSGPACK_OBJECT_MAP)
		return -EPROTO;
	d = kind_map_get(o, "data");
	g->n = 0;
	if (d && (d->type == MSGPACK_OBJECT_BIN || d->type == MSGPACK_OBJECT_STR)) {
		g->n = d->via.bin.size;
		if (g->n && fwrite(d->via.bin.ptr, 1, g->n, stdout) != g->n)
			return -EIO;
		fflush(stdout);
	}
	if (kind_int(kind_map_get(o, "next"), &next))
		g->next = (uint64_t)next;
	e = kind_map_get(o, "eof");
	g->eof = e && e->type == MSGPACK_OBJECT_BOOLEAN && e->via.boolean;
	e = kind_map_get(o, "cut");
	g->cut = e && e->type == MSGPACK_OBJECT_BOOLEAN && e->via.boolean;
	return 0;
}

typedef struct pod_look {
	char phase[32], reason[160];
} pod_look_t;

static int got_pod_look(void *arg, const msgpack_object *o)
{
	pod_look_t *l = arg;
	if (o && o->type == MSGPACK_OBJECT_MAP) {
		kind_str(kind_map_get(o, "phase"), l->phase, sizeof l->phase);
		kind_str(kind_map_get(o, "reason"), l->reason, sizeof l->reason);
	}
	return 0;
}

/* An exec still queued after its first second says why on stderr, once
 * (it waited silently on a crash-looping pod): its pod's phase, and that
 * an interrupt leaves it queued. */
static void say_queued(const kind_cli_t *cli, const char *id, const char *pod)
{
	rec_t rec = { .cli = cli };
	pod_look_t look = { "", "" };

	if (cli->call(cli, "action_get", pack_id, (void *)id, 0, got_rec, &rec) != 0 ||
	    !strcmp(rec.state, "RUNNING") || finished(rec.state))
		return;
	(void)cli->call(cli, "status", pack_id, (void *)pod, 0, got_pod_look, &look);
	fprintf(stderr, "tankctl: %s: waiting: action %s is %s, queued on pod %s%s%s%s%s%s; "
		"it runs once a container of it runs (an interrupt leaves it queued: "
		"tankctl action cancel %s)\n", cli->verb, id, rec.state, pod,
		look.phase[0] ? " (" : "", look.phase, look.reason[0] ? ": " : "", look.reason,
		look.phase[0] ? ")" : "", id);
}

/* Follows an action's output to its end: what tankctl exec streams.
 * pod: the exec's pod, told about if the action waits in its queue;
 * *cut: whether its output was cut (at its bound, or by a full disk). */
static int follow(const kind_cli_t *cli, const char *id, const char *pod, bool *cut)
{
	out_req_t q = { id, 0 };
	out_got_t g = { 0 };
	unsigned quiet = 0;
	int rc;

	for (;;) {
		if ((rc = cli->call(cli, "action_output", pack_out, &q, 0, got_out, &g)) != 0)
			return rc;
		q.offset = g.next;
		*cut = g.cut;
		if (g.eof)
			return 0;
		if (g.n || q.offset)
			quiet = UINT32_MAX;       /* it runs: nothing to say */
		else if (quiet < UINT32_MAX && ++quiet == 1000 / WAIT_POLL_MS && pod)
			say_queued(cli, id, pod);
		if (!g.n)
			sleep_ms(WAIT_POLL_MS);
	}
}

static int c_exec(const kind_cli_t *cli, int argc, char **argv)
{
	run_req_t r = { .kind = "exec" };
	char *kv[2];
	char ctr[POD_NAME_MAX + 16], tmo[64];
	int rc = 0;

	r.kv = kv;
	for (int i = 1; i < argc && !rc; i++) {
		const char *v = NULL;
		if (!strcmp(argv[i], "--")) {
			r.cmd = &argv[i + 1];
			r.ncmd = (size_t)(argc - i - 1);
			break;
		} else if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--container")) {
			if (!(rc = get_opt_value(cli, argc, argv, &i, &v))) {
				snprintf(ctr, sizeof ctr, "container=%s", v);
				kv[r.nkv++] = ctr;
			}
		} else if (!strcmp(argv[i], "--timeout")) {
			if (!(rc = get_opt_value(cli, argc, argv, &i, &v))) {
				snprintf(tmo, sizeof tmo, "timeout=%s", v);
				kv[r.nkv++] = tmo;
			}
		} else if (argv[i][0] == '-') {
			rc = cli->usage(cli, "unknown option '%s'", argv[i]);
		} else if (!r.pod) {
			r.pod = argv[i];
		} else {
			rc = cli->usage(cli, "the command goes after --: exec POD -- CMD...");
		}
	}
	if (!rc && !r.pod)
		rc = cli->usage(cli, "POD is required");
	if (!rc && !r.ncmd)
		rc = cli->usage(cli, "a command is required after --");
	if (rc)
		return rc;
	rec_t rec = { .cli = cli };
	if ((rc = cli->call(cli, "action_submit", pack_run, &r, 0, got_rec, &rec)) != 0)
		return rc;
	bool cut = false;
	if ((rc = follow(cli, rec.id, r.pod, &cut)) != 0)
		return rc;
	if ((rc = cli->call(cli, "action_get", pack_id, rec.id, 0, got_rec, &rec)) != 0)
		return rc;
	/* What was printed is not all it wrote: said, with why (a full
	 * disk leaves no note in the output itself). */
	if (cut)
		fprintf(stderr, "tankctl: %s: action %s: %s\n", cli->verb, rec.id, rec.reason);
	if (!strcmp(rec.state, "DONE"))
		return 0;
	if (rec.has_exit && rec.exit_code > 0 && rec.exit_code < 256)
		return (int)rec.exit_code;
	if (rec.has_signal && rec.signal > 0)
		return 128 + (int)rec.signal;
	return cli->fail(cli, "action %s %s: %s", rec.id, rec.state,
			 rec.error[0] ? rec.error : rec.reason);
}

const kind_cmd_t action_cmds[ACTION_NCMDS] = {
	{ "action", c_action,
	  "run POD KIND [ARG...] [--id ID] [--approve-first] [--wait] [-o yaml|json] | "
	  "approve|cancel|get ID [-o yaml|json] | ls [--pod P] [--state S] [-o yaml|json]",
	  "Actions: imperative operations on one pod, queued and run one at a time\n"
	  "per pod in submit order (docs/actions.md).  KIND is restart, signal,\n"
	  "exec, stop, start or a kind the pod declares under `actions:`.  ARGs:\n"
	  "KEY=VALUE (container=C, signal=HUP, timeout=30s), a bare word (the\n"
	  "signal of `signal`; a custom kind's extra args), and after -- exec's\n"
	  "command.  --approve-first holds it until `action approve ID`; a kind\n"
	  "declared with approval: other needs another user's approve.  --wait:\n"
	  "until it finished (exit 1 unless DONE).  `cancel` stops a running exec." },
	{ "exec", c_exec, "POD [-c CONTAINER] [--timeout DURATION] -- CMD...",
	  "Runs CMD inside the pod's container (its namespaces, cgroup, user and\n"
	  "root) as an exec action, prints its output while it runs and exits\n"
	  "with its status (128+N when killed by signal N)." },
};

/* ---- playbook ------------------------------------------------------------------------------------ */

static int c_playbook(const kind_cli_t *cli, int argc, char **argv)
{
	char *av[8];
	int n = 0;

	if (argc < 2)
		return cli->usage(cli, "apply, get or ls?");
	if (!strcmp(argv[1], "apply")) {
		/* A playbook is an object like any: `apply -f` stores it. */
		char **v = calloc((size_t)argc, sizeof *v);
		if (!v)
			return cli->fail(cli, "out of memory");
		v[0] = (char *)"apply";
		for (int i = 2; i < argc; i++)
			v[i - 1] = argv[i];
		int rc = cli->verb_run(cli, argc - 1, v);
		free(v);
		return rc;
	}
	if (!strcmp(argv[1], "get") || !strcmp(argv[1], "ls") || !strcmp(argv[1], "list")) {
		bool ls = strcmp(argv[1], "get") != 0;
		av[n++] = (char *)"get";
		av[n++] = (char *)(ls ? "playbooks" : "playbook");
		for (int i = 2; i < argc && n < 7; i++)
			av[n++] = argv[i];
		av[n] = NULL;
		return cli->verb_run(cli, n, av);
	}
	return cli->usage(cli, "unknown subcommand '%s' (apply, get, ls)", argv[1]);
}

const kind_cmd_t playbook_cmds[PLAYBOOK_NCMDS] = {
	{ "playbook", c_playbook, "apply -f FILE | get NAME [-o yaml|json] | ls [-o yaml|json]",
	  "Playbooks: stages of actions over pods (names or globs), each stage\n"
	  "after the previous one finished with every action DONE, at most\n"
	  "max_parallel at once (docs/actions.md).  `apply -f` is tankctl apply;\n"
	  "get and ls print a playbook's spec and progress, or the table." },
};
