/*
 * api_stacks.c — stack methods.  See api_stacks.h.
 */
#include "api/api_stacks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api_rpc.h"
#include "reconciler/rc_loop.h"
#include "stack/stack_mgr.h"
#include "stack/stack_spec.h"
#include "store/st_coll.h"

int api_kind_of(const msgpack_object *params, size_t at, api_kind_t *kind, tank_error_t *e)
{
	const msgpack_object *o;
	char buf[32];

	*kind = API_KIND_POD;
	if (params->via.array.size <= at || params->via.array.ptr[at].type != MSGPACK_OBJECT_MAP)
		return 0;
	o = api_map_get(&params->via.array.ptr[at], "kind");
	if (!o || o->type == MSGPACK_OBJECT_NIL)
		return 0;
	if (!api_obj_strcpy(o, buf, sizeof buf))
		return tank_error_set(e, -EPROTO, "params[%zu].kind: expected \"pod\" or \"stack\"",
				      at);
	if (strcasecmp(buf, "stack") == 0)
		*kind = API_KIND_STACK;
	else if (strcasecmp(buf, "pod") != 0)
		return tank_error_set(e, -EPROTO, "params[%zu].kind: unknown kind \"%s\": "
				      "expected \"pod\" or \"stack\"", at, buf);
	return 0;
}

static int pk_key(msgpack_packer *pk, const char *k)
{
	return api_pack_cstr(pk, k);
}

static st_coll_t *coll(const api_call_t *call, api_daemon_t *d)
{
	st_coll_t *c = NULL;
	tank_error_t e;
	int err;

	tank_error_clear(&e);
	if ((err = st_coll_open(d->store, &stack_coll_decl, &c, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
		return NULL;
	}
	return c;
}

static void reply_stack_error(const api_call_t *call, int err, const char *name,
			      const tank_error_t *e)
{
	api_reply_object_error(call, err, "stack", name, e);
}

/* The status map of a stack: the stored one (already in the contract's
 * shape), or pending when the reconciler has not reached it yet. */
static int pack_status(msgpack_packer *pk, st_coll_t *c, const st_pod_t *p)
{
	void *buf;
	size_t len;
	int rc;

	if (st_coll_status_get(c, p->name, &buf, &len, NULL) == 0) {
		rc = api_pack_raw(pk, buf, len);    /* stored in the answer's shape */
		free(buf);
		return rc;
	}
	rc = msgpack_pack_map(pk, 6);
	rc |= pk_key(pk, "name");       rc |= api_pack_cstr(pk, p->name);
	rc |= pk_key(pk, "kind");       rc |= api_pack_cstr(pk, "stack");
	rc |= pk_key(pk, "phase");      rc |= api_pack_cstr(pk, "pending");
	rc |= pk_key(pk, "reason");     rc |= api_pack_cstr(pk, "not reconciled yet");
	rc |= pk_key(pk, "generation"); rc |= msgpack_pack_uint64(pk, p->generation);
	rc |= pk_key(pk, "uid");        rc |= api_pack_cstr(pk, p->uid);
	return rc ? -ENOMEM : 0;
}

typedef struct stack_rec { st_coll_t *c; const st_pod_t *p; } stack_rec_t;

static int pack_status_kv(msgpack_packer *pk, void *arg)
{
	stack_rec_t *r = arg;
	int rc = pk_key(pk, "status");
	return rc ? rc : pack_status(pk, r->c, r->p);
}

/* The canonical spec with kind, generation, uid and status added. */
static int pack_stack(msgpack_packer *pk, st_coll_t *c, const st_pod_t *p)
{
	stack_rec_t r = { c, p };
	return api_pack_record(pk, p, "Stack", 1, pack_status_kv, &r);
}

typedef struct one { st_coll_t *c; const st_pod_t *p; bool status_only; } one_t;

static int pack_one(msgpack_packer *pk, void *arg)
{
	one_t *o = arg;
	return o->status_only ? pack_status(pk, o->c, o->p) : pack_stack(pk, o->c, o->p);
}

static void get_one(const api_call_t *call, api_daemon_t *d, const char *name, bool status)
{
	st_coll_t *c = coll(call, d);
	st_pod_t p;
	tank_error_t e;
	int err;

	if (!c)
		return;
	tank_error_clear(&e);
	if ((err = st_coll_get(c, name, &p, &e)) < 0) {
		reply_stack_error(call, err, name, &e);
		return;
	}
	one_t o = { c, &p, status };
	api_reply(call->rt, call->token, pack_one, &o);
	st_pod_clear(&p);
}

void api_stacks_get(const api_call_t *call, api_daemon_t *d, const char *name)
{
	get_one(call, d, name, false);
}

/* Every stack, packed into a buffer of its own while scanning (the scan
 * borrows each record for its callback only). */
typedef struct all {
	st_coll_t *c;
	bool status_only;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	size_t n;
} all_t;

static int all_one(void *ctx, const st_pod_t *p)
{
	all_t *a = ctx;
	int rc = a->status_only ? pack_status(&a->pk, a->c, p) : pack_stack(&a->pk, a->c, p);
	a->n += rc == 0;
	return rc;
}

static int pack_all(msgpack_packer *pk, void *arg)
{
	all_t *a = arg;
	int rc = msgpack_pack_array(pk, a->n);
	return rc ? -ENOMEM : api_pack_raw(pk, a->sb.data, a->sb.size);
}

static void get_all(const api_call_t *call, api_daemon_t *d, bool status)
{
	all_t a = { .c = coll(call, d), .status_only = status };
	tank_error_t e;
	int err;

	if (!a.c)
		return;
	msgpack_sbuffer_init(&a.sb);
	msgpack_packer_init(&a.pk, &a.sb, msgpack_sbuffer_write);
	tank_error_clear(&e);
	if ((err = st_coll_scan(a.c, all_one, &a, &e)) < 0)
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
	else
		api_reply(call->rt, call->token, pack_all, &a);
	msgpack_sbuffer_destroy(&a.sb);
}

void api_stacks_list(const api_call_t *call, api_daemon_t *d)
{
	get_all(call, d, false);
}

void api_stacks_status(const api_call_t *call, api_daemon_t *d, const char *name)
{
	if (name)
		get_one(call, d, name, true);
	else
		get_all(call, d, true);
}

/* ---- delete ---------------------------------------------------------------------- */

typedef struct del_out {
	char *const *stacks;
	const bool *sdel;
	size_t ns;
	char **pods;
	const bool *pdel;
	size_t np;
} del_out_t;

static int pack_del(msgpack_packer *pk, void *arg)
{
	del_out_t *o = arg;
	int rc = msgpack_pack_array(pk, o->ns + o->np);
	for (size_t i = 0; i < o->ns + o->np; i++) {
		bool st = i < o->ns;
		rc |= msgpack_pack_map(pk, 3);
		rc |= pk_key(pk, "kind");
		rc |= api_pack_cstr(pk, st ? "stack" : "pod");
		rc |= pk_key(pk, "name");
		rc |= api_pack_cstr(pk, st ? o->stacks[i] : o->pods[i - o->ns]);
		rc |= pk_key(pk, "deleted");
		rc |= (st ? o->sdel[i] : o->pdel[i - o->ns]) ? msgpack_pack_true(pk)
							   : msgpack_pack_false(pk);
	}
	return rc ? -ENOMEM : 0;
}

void api_stacks_delete(const api_call_t *call, api_daemon_t *d, char *const *names, size_t n)
{
	st_coll_t *c = coll(call, d);
	char **pods = NULL;
	bool *sdel = NULL, *pdel = NULL;
	size_t np = 0, cap = 0;
	tank_error_t e;
	int err = 0;

	if (!c)
		return;
	/* The pods each stack owns go with it, in the same transaction. */
	for (size_t i = 0; i < n && !err; i++) {
		st_pod_t p;
		stack_spec_t *s = NULL;
		if (st_coll_get(c, names[i], &p, NULL) < 0)
			continue;
		if (stack_spec_decode(p.spec, p.spec_len, &s, NULL) == 0) {
			for (size_t k = 0; k < s->npods && !err; k++) {
				if (!s->pods[k].owned)
					continue;
				if (np == cap) {
					size_t nc = cap ? cap * 2 : 16;
					char **g = realloc(pods, nc * sizeof *g);
					if (!g) {
						err = -ENOMEM;
						break;
					}
					pods = g;
					cap = nc;
				}
				if (!(pods[np] = strdup(s->pods[k].name)))
					err = -ENOMEM;
				else
					np++;
			}
		}
		stack_spec_free(s);
		st_pod_clear(&p);
	}
	if (!err && (!(sdel = calloc(n + 1, sizeof *sdel)) || !(pdel = calloc(np + 1, sizeof *pdel))))
		err = -ENOMEM;
	if (err) {
		api_reply_err(call->rt, call->token, err, NULL);
		goto out;
	}
	st_coll_op_t ops[2] = {
		{ .c = c, .del = (const char *const *)names, .ndel = n, .deleted = sdel },
		{ .c = NULL, .del = (const char *const *)pods, .ndel = np, .deleted = pdel },
	};
	tank_error_clear(&e);
	if ((err = st_coll_commit(d->store, ops, 2, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
		goto out;
	}
	del_out_t o = { names, sdel, n, pods, pdel, np };
	api_reply(call->rt, call->token, pack_del, &o);
	rt_pid_t loop = rt_whereis(d->rt, API_RECONCILER_NAME);
	if (loop)
		rc_nudge(d->rt, loop);
out:
	for (size_t i = 0; i < np; i++)
		free(pods[i]);
	free(pods);
	free(sdel);
	free(pdel);
}

/* ---- history ------------------------------------------------------------------------ */

typedef struct hist { st_transition_t *t; size_t n; } hist_t;

static int pack_hist(msgpack_packer *pk, void *arg)
{
	hist_t *h = arg;
	return api_pack_history(pk, h->t, h->n);
}

void api_stacks_history(const api_call_t *call, api_daemon_t *d, const char *name,
			size_t limit)
{
	st_coll_t *c = coll(call, d);
	st_pod_t p;
	hist_t h = { NULL, 0 };
	tank_error_t e;
	int err;

	if (!c)
		return;
	tank_error_clear(&e);
	if ((err = st_coll_get(c, name, &p, &e)) < 0) {
		reply_stack_error(call, err, name, &e);
		return;
	}
	st_pod_clear(&p);
	if ((err = st_coll_history(c, name, limit, &h.t, &h.n, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
		return;
	}
	api_reply(call->rt, call->token, pack_hist, &h);
	free(h.t);
}

/* ---- up, down --------------------------------------------------------------------------- */

typedef struct updown_out {
	const char *name;
	st_apply_result_t res;
} updown_out_t;

static int pack_updown(msgpack_packer *pk, void *arg)
{
	static const char *const actions[] = { "unchanged", "created", "configured" };
	updown_out_t *o = arg;
	int rc = msgpack_pack_map(pk, 5);
	rc |= pk_key(pk, "kind");       rc |= api_pack_cstr(pk, "stack");
	rc |= pk_key(pk, "name");       rc |= api_pack_cstr(pk, o->name);
	rc |= pk_key(pk, "uid");        rc |= api_pack_cstr(pk, o->res.uid);
	rc |= pk_key(pk, "action");     rc |= api_pack_cstr(pk, actions[o->res.action]);
	rc |= pk_key(pk, "generation"); rc |= msgpack_pack_uint64(pk, o->res.generation);
	return rc ? -ENOMEM : 0;
}

static void updown(const api_call_t *call, const msgpack_object *params, api_daemon_t *d,
		   stack_desired_t want)
{
	char name[ST_NAME_MAX + 1];
	st_coll_t *c;
	st_pod_t p;
	stack_spec_t *s = NULL;
	char *buf = NULL;
	size_t len;
	tank_error_t e;
	int err;

	tank_error_clear(&e);
	if (api_params_check(params, "s", &e) < 0) {
		api_reply_error(call->rt, call->token, API_BAD_REQUEST, e.msg, NULL, NULL);
		return;
	}
	api_obj_strcpy(&params->via.array.ptr[0], name, sizeof name);
	if (!(c = coll(call, d)))
		return;
	if ((err = st_coll_get(c, name, &p, &e)) < 0) {
		reply_stack_error(call, err, name, &e);
		return;
	}
	err = stack_spec_decode(p.spec, p.spec_len, &s, &e);
	st_pod_clear(&p);
	if (err < 0) {
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
		return;
	}
	s->desired = want;
	if ((err = stack_spec_encode(s, &buf, &len)) < 0) {
		api_reply_err(call->rt, call->token, err, NULL);
		goto out;
	}
	updown_out_t o = { name, { 0 } };
	st_pod_in_t in = { name, buf, len };
	if ((err = st_coll_put(c, &in, 1, &o.res, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
		goto out;
	}
	/* An aborted stack brought up again: lifted even when desired was
	 * up already (the spec did not change, the operator's intent did).
	 * The lift is a message to the stack manager, which stores it. */
	rt_pid_t loop = rt_whereis(d->rt, API_RECONCILER_NAME);
	if (want == STACK_UP && d->stacks && stack_mgr_lift(d->stacks, d->rt, loop, name) &&
	    o.res.action == ST_UNCHANGED)
		o.res.action = ST_CONFIGURED;
	api_reply(call->rt, call->token, pack_updown, &o);
	if (loop)
		rc_nudge(d->rt, loop);
out:
	free(buf);
	stack_spec_free(s);
}

void api_stacks_up(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	updown(call, params, ctx, STACK_UP);
}

void api_stacks_down(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	updown(call, params, ctx, STACK_DOWN);
}
