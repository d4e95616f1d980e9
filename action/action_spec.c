/*
 * action_spec.c — an action's request validated, its canonical bytes.
 */
#include "action/action_spec.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/kit_units.h"
#include "kinds/kind.h"
#include "pod/pod_req.h"

static const char *const op_names[] = { "restart", "signal", "exec", "stop", "start", "custom" };

const char *act_op_name(enum act_op op)
{
	return (unsigned)op <= ACT_OP_CUSTOM ? op_names[op] : "?";
}

bool act_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > ACT_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  (i > 0 && (c == '-' || c == '_' || c == '.'));
		if (!ok)
			return false;
	}
	return true;
}

void act_uuid(char *id)
{
	unsigned char b[16];

	if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
		/* No entropy yet (early boot): time and address bits still
		 * make a collision unlikely; the conflict rule catches one. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uintptr_t)id;
		for (size_t i = 0; i < sizeof b; i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			b[i] = (unsigned char)(x >> 56);
		}
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);   /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);   /* variant 10 */
	snprintf(id, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
		 b[12], b[13], b[14], b[15]);
}

static const char *type_name(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: return "nil";
	case MSGPACK_OBJECT_BOOLEAN: return "a boolean";
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "an integer";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: return "a number";
	case MSGPACK_OBJECT_STR: return "a string";
	case MSGPACK_OBJECT_ARRAY: return "a list";
	case MSGPACK_OBJECT_MAP: return "a map";
	default: return "binary";
	}
}

static bool key_is(const msgpack_object *k, const char *s)
{
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
	       !memcmp(k->via.str.ptr, s, k->via.str.size);
}

/* Every key of map is in known, else an error naming the first other. */
static int known_keys(const msgpack_object *map, const char *const *known, const char *where,
		      const char *what, tank_error_t *e)
{
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		bool ok = false;
		for (size_t j = 0; known[j]; j++)
			ok |= key_is(k, known[j]);
		if (!ok) {
			char kb[64] = "?";
			kind_str(k, kb, sizeof kb);
			char list[160] = "";
			for (size_t j = 0; known[j]; j++) {
				size_t l = strlen(list);
				snprintf(list + l, sizeof list - l, "%s%s", j ? ", " : "", known[j]);
			}
			return tank_error_set(e, TANK_EINVALID, "%s: unknown field \"%s\" for %s "
					      "(known: %s)", where, kb, what, list[0] ? list : "none");
		}
	}
	return 0;
}

static int get_str(const msgpack_object *o, const char *where, char *buf, size_t cap,
		   tank_error_t *e)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return tank_error_set(e, TANK_EINVALID, "%s: expected a string, not %s", where,
				      type_name(o));
	if (o->via.str.size == 0 || o->via.str.size >= cap)
		return tank_error_set(e, TANK_EINVALID, "%s: expected 1 to %zu bytes", where,
				      cap - 1);
	memcpy(buf, o->via.str.ptr, o->via.str.size);
	buf[o->via.str.size] = '\0';
	return 0;
}

static int get_argv(const msgpack_object *o, const char *where, bool nonempty, char ***argv,
		    size_t *argc, tank_error_t *e)
{
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return tank_error_set(e, TANK_EINVALID, "%s: expected a list of strings, not %s",
				      where, type_name(o));
	if (nonempty && o->via.array.size == 0)
		return tank_error_set(e, TANK_EINVALID, "%s: must not be empty", where);
	if (o->via.array.size > 256)
		return tank_error_set(e, TANK_EINVALID, "%s: at most 256 words", where);
	char **v = calloc(o->via.array.size + 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *s = &o->via.array.ptr[i];
		if (s->type != MSGPACK_OBJECT_STR) {
			for (uint32_t j = 0; j < i; j++)
				free(v[j]);
			free(v);
			return tank_error_set(e, TANK_EINVALID, "%s[%u]: expected a string, not %s",
					      where, i, type_name(s));
		}
		if (!(v[i] = strndup(s->via.str.ptr, s->via.str.size))) {
			for (uint32_t j = 0; j < i; j++)
				free(v[j]);
			free(v);
			return -ENOMEM;
		}
	}
	*argv = v;
	*argc = o->via.array.size;
	return 0;
}

/* Words a client submits (an exec's command, a custom action's args):
 * each is handed to execve as a C string, so a NUL inside one would run
 * another word than the one stored and shown (an array get_argv took). */
static int check_words(const msgpack_object *o, const char *where, tank_error_t *e)
{
	for (uint32_t i = 0; i < o->via.array.size; i++)
		if (memchr(o->via.array.ptr[i].via.str.ptr, '\0', o->via.array.ptr[i].via.str.size))
			return tank_error_set(e, TANK_EINVALID, "%s[%u]: contains a NUL byte",
					      where, i);
	return 0;
}

/* What a submitted exec or custom action will run fits its request to
 * the pods' layer (pod_req.h: POD_REQ_ARGV_MAX bytes, each word with its
 * NUL) and names a program: refused at submit, naming it, instead of
 * accepted and then FAILED when its turn came ("the command does not
 * fit a request"). */
static int check_run(const act_spec_t *s, tank_error_t *e)
{
	const char *where = s->op == ACT_OP_CUSTOM ? "args.args" : "args.command";
	size_t n = 0;

	if (!s->argv[0][0])
		return tank_error_set(e, TANK_EINVALID, "%s[0]: must not be empty (the "
				      "program to run)", where);
	for (size_t i = 0; i < s->argc; i++)
		n += strlen(s->argv[i]) + 1;
	if (n > POD_REQ_ARGV_MAX)
		return tank_error_set(e, TANK_EINVALID, "%s: %s is %zu bytes, at most %u (each "
				      "word and a byte more)", where, s->op == ACT_OP_CUSTOM ?
				      "the declared command with these args" : "the command", n,
				      (unsigned)POD_REQ_ARGV_MAX);
	return 0;
}

static int get_duration(const msgpack_object *o, const char *where, uint64_t *ms,
			tank_error_t *e)
{
	int64_t n;

	if (kind_int(o, &n) && n > 0) {
		*ms = (uint64_t)n;
		return 0;
	}
	if (o->type == MSGPACK_OBJECT_STR &&
	    kit_parse_duration(o->via.str.ptr, o->via.str.size, ms) == 0 && *ms > 0)
		return 0;
	return tank_error_set(e, TANK_EINVALID, "%s: expected a duration (\"30s\", \"5m\") or "
			      "milliseconds, not %s", where, type_name(o));
}

static int check_container(const pod_spec_t *pod, const char *c, tank_error_t *e)
{
	if (!pod || !c[0])
		return 0;
	for (size_t i = 0; i < pod->container_count; i++)
		if (!strcmp(pod->containers[i].name, c))
			return 0;
	return tank_error_set(e, TANK_ENOTFOUND, "args.container: pod %s has no container \"%s\"",
			      pod->name, c);
}

/* args of op from map a (NULL: none); pod NULL when decoding (stored). */
static int parse_args(act_spec_t *s, const msgpack_object *a, const pod_spec_t *pod,
		      tank_error_t *e)
{
	static const char *const k_ctr[] = { "container", NULL };
	static const char *const k_sig[] = { "signal", "container", NULL };
	static const char *const k_exec[] = { "command", "container", "timeout", NULL };
	static const char *const k_custom[] = { "args", NULL };
	static const char *const *const keys[] = { k_ctr, k_sig, k_exec, k_ctr, k_ctr, k_custom };
	msgpack_object none = { .type = MSGPACK_OBJECT_MAP };
	char what[96];
	int err;

	if (!a || a->type == MSGPACK_OBJECT_NIL)
		a = &none;
	if (a->type != MSGPACK_OBJECT_MAP)
		return tank_error_set(e, TANK_EINVALID, "args: expected a map, not %s", type_name(a));
	snprintf(what, sizeof what, "%s%s", s->op == ACT_OP_CUSTOM ? "the custom action " : "",
		 s->kind);
	if ((err = known_keys(a, keys[s->op], "args", what, e)) < 0)
		return err;
	const msgpack_object *c = kind_map_get(a, "container");
	if (c && s->op != ACT_OP_CUSTOM &&
	    ((err = get_str(c, "args.container", s->container, sizeof s->container, e)) < 0 ||
	     (err = check_container(pod, s->container, e)) < 0))
		return err;
	switch (s->op) {
	case ACT_OP_SIGNAL: {
		const msgpack_object *g = kind_map_get(a, "signal");
		int64_t n;
		int sig;
		if (!g)
			return tank_error_set(e, TANK_EINVALID, "args.signal: required (a name like "
					      "HUP or a number)");
		if (kind_int(g, &n) && n > 0 && n <= SIGRTMAX)
			s->signal = (int32_t)n;
		else if (g->type == MSGPACK_OBJECT_STR &&
			 kit_parse_signal(g->via.str.ptr, g->via.str.size, &sig) == 0)
			s->signal = sig;
		else if (g->type == MSGPACK_OBJECT_STR)
			return tank_error_set(e, TANK_EINVALID, "args.signal: unknown signal \"%.*s\"",
					      (int)(g->via.str.size > 32 ? 32 : g->via.str.size),
					      g->via.str.ptr);
		else
			return tank_error_set(e, TANK_EINVALID, "args.signal: expected a signal "
					      "name or number, not %s", type_name(g));
		break;
	}
	case ACT_OP_EXEC: {
		const msgpack_object *cmd = kind_map_get(a, "command"), *t = kind_map_get(a, "timeout");
		if (!cmd)
			return tank_error_set(e, TANK_EINVALID, "args.command: required (a list of "
					      "strings)");
		if ((err = get_argv(cmd, "args.command", true, &s->argv, &s->argc, e)) < 0 ||
		    (pod && (err = check_words(cmd, "args.command", e)) < 0))
			return err;
		if (t && (err = get_duration(t, "args.timeout", &s->timeout_ms, e)) < 0)
			return err;
		break;
	}
	case ACT_OP_CUSTOM: {
		const msgpack_object *g = kind_map_get(a, "args");
		if (g && ((err = get_argv(g, "args.args", false, &s->argv, &s->argc, e)) < 0 ||
			  (pod && (err = check_words(g, "args.args", e)) < 0)))
			return err;
		break;
	}
	default:
		break;
	}
	return 0;
}

static int op_of(const char *kind, enum act_op *op)
{
	for (unsigned i = 0; i < ACT_OP_CUSTOM; i++)
		if (!strcmp(op_names[i], kind)) {
			*op = (enum act_op)i;
			return 0;
		}
	*op = ACT_OP_CUSTOM;
	return 0;
}

int action_spec_pod_of(const msgpack_object *req, char *pod, size_t cap, tank_error_t *e)
{
	if (!req || req->type != MSGPACK_OBJECT_MAP)
		return tank_error_set(e, TANK_EINVALID, "an action is a map {pod, kind, args}");
	const msgpack_object *p = kind_map_get(req, "pod");
	if (!p)
		return tank_error_set(e, TANK_EINVALID, "pod: required");
	return get_str(p, "pod", pod, cap, e);
}

static int from_map(const msgpack_object *m, const pod_spec_t *pod, bool stored,
		    act_spec_t **out, tank_error_t *e)
{
	static const char *const k_req[] = { "id", "pod", "kind", "args", "approve_first", NULL };
	static const char *const k_st[] = { "id", "pod", "kind", "args", "approve_first",
					    "approval", "requester", "created_at", "seq",
					    "playbook", "playbook_uid", "run", NULL };
	act_spec_t *s;
	int err;

	*out = NULL;
	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return tank_error_set(e, TANK_EINVALID, "an action is a map {pod, kind, args}");
	if ((err = known_keys(m, stored ? k_st : k_req, "action", "an action", e)) < 0)
		return err;
	if (!(s = calloc(1, sizeof *s)))
		return -ENOMEM;
	const msgpack_object *o;
	if ((o = kind_map_get(m, "id")) && o->type != MSGPACK_OBJECT_NIL) {
		if ((err = get_str(o, "id", s->id, sizeof s->id, e)) < 0)
			goto fail;
		if (!act_id_valid(s->id)) {
			err = tank_error_set(e, TANK_EINVALID, "id: \"%s\" must match "
					     "[A-Za-z0-9][A-Za-z0-9._-]{0,47}", s->id);
			goto fail;
		}
	}
	if (!(o = kind_map_get(m, "pod"))) {
		err = tank_error_set(e, TANK_EINVALID, "pod: required");
		goto fail;
	}
	if ((err = get_str(o, "pod", s->pod, sizeof s->pod, e)) < 0)
		goto fail;
	if (!stored && !pod) {
		err = tank_error_set(e, TANK_ENOTFOUND, "pod \"%s\" not found", s->pod);
		goto fail;
	}
	if (!(o = kind_map_get(m, "kind"))) {
		err = tank_error_set(e, TANK_EINVALID, "kind: required (restart, signal, exec, "
				     "stop, start or a kind the pod declares)");
		goto fail;
	}
	if ((err = get_str(o, "kind", s->kind, sizeof s->kind, e)) < 0)
		goto fail;
	op_of(s->kind, &s->op);
	if ((o = kind_map_get(m, "approve_first")) && o->type != MSGPACK_OBJECT_NIL) {
		if (o->type != MSGPACK_OBJECT_BOOLEAN) {
			err = tank_error_set(e, TANK_EINVALID, "approve_first: expected a boolean, "
					     "not %s", type_name(o));
			goto fail;
		}
		s->approve_first = o->via.boolean;
	}
	const pod_action_decl_t *decl = NULL;
	if (!stored && s->op == ACT_OP_CUSTOM && !(decl = pod_spec_action(pod, s->kind))) {
		char list[256] = "";
		for (size_t i = 0; i < pod->action_count; i++) {
			size_t l = strlen(list);
			snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "",
				 pod->actions[i].name);
		}
		err = tank_error_set(e, TANK_EINVALID, "kind \"%s\": not an action kind of pod %s "
				     "(built in: restart, signal, exec, stop, start; it declares: %s)",
				     s->kind, s->pod, list[0] ? list : "none");
		goto fail;
	}
	if ((err = parse_args(s, kind_map_get(m, "args"), stored ? NULL : pod, e)) < 0)
		goto fail;
	if (!stored) {
		s->approval = s->approve_first ? POD_APPROVAL_REQUIRED : POD_APPROVAL_NONE;
		if (decl) {
			if (decl->approval != POD_APPROVAL_NONE)
				s->approval = decl->approval;
			/* The run is resolved now: a later change of the pod's
			 * declaration does not change what was submitted. */
			size_t n = decl->argc + s->argc;
			char **v = calloc(n + 1, sizeof *v);
			if (!v) {
				err = -ENOMEM;
				goto fail;
			}
			for (size_t i = 0; i < decl->argc; i++)
				v[i] = strdup(decl->argv[i]);
			for (size_t i = 0; i < s->argc; i++)
				v[decl->argc + i] = s->argv[i];
			free(s->argv);
			s->argv = v;
			s->argc = n;
			for (size_t i = 0; i < n; i++)
				if (!v[i]) {
					err = -ENOMEM;
					goto fail;
				}
			snprintf(s->container, sizeof s->container, "%s",
				 decl->container ? decl->container : "");
			s->timeout_ms = decl->timeout_ms;
		}
		if ((s->op == ACT_OP_EXEC || s->op == ACT_OP_CUSTOM) && (err = check_run(s, e)) < 0)
			goto fail;
		*out = s;
		return 0;
	}
	/* stored */
	if ((o = kind_map_get(m, "approval")) && o->type == MSGPACK_OBJECT_STR)
		for (unsigned a = 0; a < 3; a++)
			if (kind_map_get(m, "approval") && o->via.str.size == strlen(pod_approval_name(a)) &&
			    !memcmp(o->via.str.ptr, pod_approval_name(a), o->via.str.size))
				s->approval = (enum pod_approval)a;
	if ((o = kind_map_get(m, "requester")) && o->type == MSGPACK_OBJECT_MAP) {
		int64_t n = 0;
		kind_int(kind_map_get(o, "uid"), &n);
		s->req_uid = (uint32_t)n;
		kind_str(kind_map_get(o, "name"), s->req_user, sizeof s->req_user);
	}
	int64_t n = 0;
	if (kind_int(kind_map_get(m, "created_at"), &n))
		s->created_at = n;
	n = 0;
	if (kind_int(kind_map_get(m, "seq"), &n))
		s->seq = (uint64_t)n;
	kind_str(kind_map_get(m, "playbook"), s->playbook, sizeof s->playbook);
	kind_str(kind_map_get(m, "playbook_uid"), s->playbook_uid, sizeof s->playbook_uid);
	if (s->op == ACT_OP_CUSTOM && (o = kind_map_get(m, "run")) && o->type == MSGPACK_OBJECT_MAP) {
		const msgpack_object *c = kind_map_get(o, "command");
		for (size_t i = 0; i < s->argc; i++)
			free(s->argv[i]);
		free(s->argv);
		s->argv = NULL;
		s->argc = 0;
		if (c && (err = get_argv(c, "run.command", true, &s->argv, &s->argc, e)) < 0)
			goto fail;
		kind_str(kind_map_get(o, "container"), s->container, sizeof s->container);
		n = 0;
		if (kind_int(kind_map_get(o, "timeout_ms"), &n))
			s->timeout_ms = (uint64_t)n;
	}
	*out = s;
	return 0;
fail:
	action_spec_free(s);
	return err;
}

int action_spec_from_request(const msgpack_object *req, const pod_spec_t *pod,
			     act_spec_t **out, tank_error_t *e)
{
	return from_map(req, pod, false, out, e);
}

void action_spec_free(act_spec_t *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->argc; i++)
		free(s->argv[i]);
	free(s->argv);
	free(s);
}

static int pk_str(msgpack_packer *pk, const char *s)
{
	return kind_pack_str(pk, s);
}

/* The user's args (for custom: the words after the declared command are
 * not kept apart, so a custom action's args are its resolved run). */
int action_spec_pack_args(const act_spec_t *s, msgpack_packer *pk)
{
	int rc = 0;
	char b[KIT_UNIT_BUF];

	switch (s->op) {
	case ACT_OP_SIGNAL:
		rc |= msgpack_pack_map(pk, 1 + (s->container[0] != 0));
		rc |= pk_str(pk, "signal");
		rc |= pk_str(pk, kit_format_signal(s->signal, b));
		break;
	case ACT_OP_EXEC:
		rc |= msgpack_pack_map(pk, 1 + (s->container[0] != 0) + (s->timeout_ms != 0));
		rc |= pk_str(pk, "command");
		rc |= msgpack_pack_array(pk, s->argc);
		for (size_t i = 0; i < s->argc; i++)
			rc |= pk_str(pk, s->argv[i]);
		if (s->timeout_ms) {
			rc |= pk_str(pk, "timeout");
			rc |= msgpack_pack_uint64(pk, s->timeout_ms);
		}
		break;
	case ACT_OP_CUSTOM:
		rc |= msgpack_pack_map(pk, 0);
		return rc ? -ENOMEM : 0;
	default:
		rc |= msgpack_pack_map(pk, s->container[0] != 0);
		break;
	}
	if (s->container[0]) {
		rc |= pk_str(pk, "container");
		rc |= pk_str(pk, s->container);
	}
	return rc ? -ENOMEM : 0;
}

int action_spec_encode(const act_spec_t *s, char **buf, size_t *len)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	bool run = s->op == ACT_OP_CUSTOM;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	int rc = msgpack_pack_map(&pk, 11 + run);
	rc |= pk_str(&pk, "id");            rc |= pk_str(&pk, s->id);
	rc |= pk_str(&pk, "pod");           rc |= pk_str(&pk, s->pod);
	rc |= pk_str(&pk, "kind");          rc |= pk_str(&pk, s->kind);
	rc |= pk_str(&pk, "args");          rc |= action_spec_pack_args(s, &pk);
	rc |= pk_str(&pk, "approve_first");
	rc |= s->approve_first ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	rc |= pk_str(&pk, "approval");      rc |= pk_str(&pk, pod_approval_name(s->approval));
	rc |= pk_str(&pk, "requester");
	rc |= msgpack_pack_map(&pk, 2);
	rc |= pk_str(&pk, "uid");           rc |= msgpack_pack_uint32(&pk, s->req_uid);
	rc |= pk_str(&pk, "name");          rc |= pk_str(&pk, s->req_user);
	rc |= pk_str(&pk, "created_at");    rc |= msgpack_pack_int64(&pk, s->created_at);
	rc |= pk_str(&pk, "seq");           rc |= msgpack_pack_uint64(&pk, s->seq);
	rc |= pk_str(&pk, "playbook");      rc |= pk_str(&pk, s->playbook);
	rc |= pk_str(&pk, "playbook_uid");  rc |= pk_str(&pk, s->playbook_uid);
	if (run) {
		rc |= pk_str(&pk, "run");
		rc |= msgpack_pack_map(&pk, 3);
		rc |= pk_str(&pk, "command");
		rc |= msgpack_pack_array(&pk, s->argc);
		for (size_t i = 0; i < s->argc; i++)
			rc |= pk_str(&pk, s->argv[i]);
		rc |= pk_str(&pk, "container");  rc |= pk_str(&pk, s->container);
		rc |= pk_str(&pk, "timeout_ms"); rc |= msgpack_pack_uint64(&pk, s->timeout_ms);
	}
	if (rc) {
		msgpack_sbuffer_destroy(&sb);
		return -ENOMEM;
	}
	*buf = sb.data;
	*len = sb.size;
	return 0;
}

int action_spec_decode(const void *buf, size_t len, act_spec_t **out, tank_error_t *e)
{
	msgpack_unpacked u;
	size_t off = 0;
	int err = tank_error_set(e, TANK_ECORRUPT, "corrupt action record");

	*out = NULL;
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, buf, len, &off) == MSGPACK_UNPACK_SUCCESS) {
		tank_error_clear(e);
		err = from_map(&u.data, NULL, true, out, e);
	}
	msgpack_unpacked_destroy(&u);
	return err;
}

bool action_spec_same(const act_spec_t *a, const act_spec_t *b)
{
	if (strcmp(a->pod, b->pod) || strcmp(a->kind, b->kind) ||
	    a->approve_first != b->approve_first || strcmp(a->container, b->container) ||
	    a->signal != b->signal || a->timeout_ms != b->timeout_ms || a->argc != b->argc)
		return false;
	for (size_t i = 0; i < a->argc; i++)
		if (strcmp(a->argv[i], b->argv[i]))
			return false;
	return true;
}
