/*
 * stack_kind.c — the Stack kind's descriptor.  See stack_kind.h.
 */
#include "stack/stack_kind.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tank_kinds.h"
#include "common/tank_map.h"
#include "manifest/mf_labels.h"
#include "pod/pod_kind.h"
#include "stack/stack_mgr.h"
#include "stack/stack_phase.h"
#include "stack/stack_spec.h"

static int pk_key(msgpack_packer *pk, const char *k)
{
	return kind_pack_str(pk, k);
}

static const char *stack__name_of(const void *obj)
{
	return ((const stack_spec_t *)obj)->name;
}

static int stack__encode(const void *obj, char **buf, size_t *len)
{
	return stack_spec_encode(obj, buf, len);
}

/* ---- inline pods, batch checks ---------------------------------------------------- */

static size_t stack__ninline(const void *obj)
{
	const stack_spec_t *s = obj;
	size_t n = 0;
	for (size_t k = 0; k < s->npods; k++)
		n += s->pods[k].inline_spec != NULL;
	return n;
}

static void *stack__inline_at(const void *obj, size_t i, const kind_t **k)
{
	const stack_spec_t *s = obj;
	*k = &pod_kind;
	for (size_t m = 0; m < s->npods; m++)
		if (s->pods[m].inline_spec && i-- == 0)
			return s->pods[m].inline_spec;
	return NULL;
}

/* Where the i-th inline pod is: its index in `pods`, which counts the
 * pods named there too. */
static void stack__inline_where(const void *obj, size_t i, char *buf, size_t cap)
{
	const stack_spec_t *s = obj;
	size_t m = 0;
	for (; m < s->npods; m++)
		if (s->pods[m].inline_spec && i-- == 0)
			break;
	snprintf(buf, cap, "pods[%zu]", m);
}

/* Stacks against the batch and the store: a pod given twice (once
 * inline), a stack given twice, a named member that exists nowhere, a pod
 * in two stacks.  Problems go to errs. */
static int stack__check(const kind_env_t *env, const kind_batch_t *b, kit_errors_t *errs,
			tank_error_t *e)
{
	tank_map_t pods, owner, stacks;
	const stack_mgr_t *mgr = kind_inst(env, &stack_kind);
	size_t nstacks = 0;
	char q[96];
	int rc = 0;

	(void)e;
	for (size_t i = 0; i < b->n; i++)
		nstacks += b->items[i].kind == &stack_kind;
	if (!nstacks)
		return 0;               /* a pods-only batch: the store refuses doubles */
	tank_map_init(&pods);
	tank_map_init(&owner);
	tank_map_init(&stacks);
	for (size_t i = 0; i < b->n && !rc; i++) {
		const kind_item_t *it = &b->items[i];
		if (it->kind != &pod_kind)
			continue;
		if (tank_map_get(&pods, it->name))
			kit_errors_add(errs, "pod %s is given twice in this apply "
				       "(inline in a stack counts)",
				       kit_quote(it->name, strlen(it->name), q));
		else
			rc = tank_map_put(&pods, it->name, it->obj, NULL);
	}
	for (size_t j = 0; j < b->n && !rc; j++) {
		const kind_item_t *it = &b->items[j];
		const stack_spec_t *s = it->obj;
		char at[KIND_WHERE_MAX];
		if (it->kind != &stack_kind)
			continue;
		kind_item_where(it, at, sizeof at);
		if (tank_map_get(&stacks, s->name)) {
			kit_errors_add(errs, "%sstack %s is given twice", at,
				       kit_quote(s->name, strlen(s->name), q));
			continue;
		}
		if ((rc = tank_map_put(&stacks, s->name, (void *)s, NULL)) < 0)
			break;
		for (size_t k = 0; k < s->npods && !rc; k++) {
			const char *pod = s->pods[k].name;
			const stack_spec_t *other = tank_map_get(&owner, pod);
			if (other) {
				kit_errors_add(errs, "%s%s: pods[%zu]: pod %s is also "
					       "in stack %s of this apply", at, s->name, k,
					       kit_quote(pod, strlen(pod), q), other->name);
				continue;
			}
			if ((rc = tank_map_put(&owner, pod, (void *)s, NULL)) < 0)
				break;
			if (!s->pods[k].inline_spec && !tank_map_get(&pods, pod)) {
				st_pod_t sp;
				if (kind_get(env, &pod_kind, pod, &sp, NULL) == 0)
					st_pod_clear(&sp);
				else
					kit_errors_add(errs, "%s%s: pods[%zu]: no pod "
						       "named %s in this apply or stored", at,
						       s->name, k, kit_quote(pod, strlen(pod), q));
			}
		}
	}
	/* Stored stacks not re-applied here keep their pods. */
	for (size_t j = 0; j < b->n && !rc && mgr; j++) {
		const kind_item_t *it = &b->items[j];
		const stack_spec_t *s = it->obj;
		char at[KIND_WHERE_MAX];
		if (it->kind != &stack_kind)
			continue;
		kind_item_where(it, at, sizeof at);
		for (size_t k = 0; k < s->npods; k++) {
			const char *held = stack_mgr_stack_of(mgr, s->pods[k].name);
			if (held && strcmp(held, s->name) != 0 && !tank_map_get(&stacks, held))
				kit_errors_add(errs, "%s%s: pods[%zu]: pod %s is "
					       "already in stack %s", at, s->name, k,
					       kit_quote(s->pods[k].name, strlen(s->pods[k].name), q),
					       held);
		}
	}
	tank_map_destroy(&pods);
	tank_map_destroy(&owner);
	tank_map_destroy(&stacks);
	return rc;
}

/* ---- status, cascade ------------------------------------------------------------- */

/* The status map of a stack: the stored one (already in the contract's
 * shape), or pending when the reconciler has not reached it yet. */
static int stack__pack_status(const kind_env_t *env, const st_pod_t *p, msgpack_packer *pk,
			      unsigned flags)
{
	kind_meta_t meta;
	st_coll_t *c;
	void *buf;
	size_t len;
	int rc;

	if ((rc = kind_coll(env, &stack_kind, &c, NULL)) < 0)
		return rc;
	size_t nmeta = kind_meta_of(p, flags, &meta);
	if (st_coll_status_get(c, p->name, &buf, &len, NULL) == 0) {
		rc = kind_meta_pack_raw(pk, buf, len, &meta);    /* stored in the answer's shape */
		free(buf);
		return rc;
	}
	rc = msgpack_pack_map(pk, 6 + nmeta);
	rc |= pk_key(pk, "name");       rc |= kind_pack_str(pk, p->name);
	rc |= pk_key(pk, "kind");       rc |= kind_pack_str(pk, "stack");
	rc |= pk_key(pk, "phase");      rc |= kind_pack_str(pk, "pending");
	rc |= pk_key(pk, "reason");     rc |= kind_pack_str(pk, "not reconciled yet");
	rc |= pk_key(pk, "generation"); rc |= msgpack_pack_uint64(pk, p->generation);
	rc |= pk_key(pk, "uid");        rc |= kind_pack_str(pk, p->uid);
	return rc ? -ENOMEM : kind_meta_pack(pk, &meta);
}

/* The pods a stack owns go with it, in the same transaction. */
static int stack__cascade(const kind_env_t *env, const st_pod_t *p, kind_names_t *out)
{
	stack_spec_t *s = NULL;
	int err = 0;

	(void)env;
	if (stack_spec_decode(p->spec, p->spec_len, &s, NULL) < 0)
		return 0;               /* undecodable: the stack alone goes */
	for (size_t k = 0; k < s->npods && !err; k++)
		if (s->pods[k].owned)
			err = kind_names_add(out, &pod_kind, s->pods[k].name);
	stack_spec_free(s);
	return err;
}

/* ---- waits ------------------------------------------------------------------------- */

/* up (an apply, or `up`): done when up; `down`: when down; failed is a
 * failure either way. */
static int stack__observe(const void *obj, const msgpack_object *s, const char *want,
			  rc_observed_t *out)
{
	char phase[32], reason[160];
	const stack_spec_t *spec = obj;

	memset(out, 0, sizeof *out);
	if (!s || s->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	kind_str(kind_map_get(s, "phase"), phase, sizeof phase);
	kind_str(kind_map_get(s, "reason"), reason, sizeof reason);
	/* An applied stack is waited for as it is desired (up, or down); the
	 * phase is decided on as the table's enum, never as text. */
	bool down = want ? !strcmp(want, "down") || !strcmp(want, "stop")
			 : (spec && spec->desired == STACK_DOWN);
	int ph = rc_fsm_phase_of(&stack_fsm, phase);
	out->progress = tank_hash64(phase, strlen(phase)) ^ tank_hash64(reason, strlen(reason));
	int64_t since = 0;
	if (kind_int(kind_map_get(s, "since"), &since))
		out->since = since;
	if (ph == (down ? STACK_PP_DOWN : STACK_PP_UP))
		out->state = RC_OBS_DONE;
	else if (ph == STACK_PP_FAILED)
		out->state = RC_OBS_FAILED;
	else
		out->state = RC_OBS_PENDING;
	snprintf(out->why, sizeof out->why, "%s%s%s", phase, reason[0] ? ": " : "", reason);
	return 0;
}

/* ---- the `ps` table ------------------------------------------------------------------ */

static void c_ready(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	char rd[32], tot[32];
	(void)now;
	kind_cell(s, "ready", rd, sizeof rd, "0");
	kind_cell(s, "total", tot, sizeof tot, "?");
	snprintf(out, cap, "%s/%s", rd, tot);
}

/* A starting stack says what it waits for. */
static void c_reason(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	if (kind_str(kind_map_get(s, "waiting_for"), out, cap) && out[0])
		return;
	kind_cell(s, "reason", out, cap, "");
}

/* ---- verbs: up, down ------------------------------------------------------------------ */

static int updown(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		  tank_error_t *e, stack_desired_t want)
{
	static const char *const actions[] = { "unchanged", "created", "configured" };
	char name[ST_NAME_MAX + 1];
	st_coll_t *c;
	st_pod_t p;
	stack_spec_t *s = NULL;
	st_apply_result_t res;
	char *buf = NULL;
	size_t len;
	int err;

	kind_str(&params->via.array.ptr[0], name, sizeof name);
	if ((err = kind_coll(env, &stack_kind, &c, e)) < 0)
		return err;
	if ((err = st_coll_get(c, name, &p, e)) < 0)
		return err == TANK_ENOTFOUND
		       ? tank_error_set(e, err, "stack \"%s\" not found", name) : err;
	err = stack_spec_decode(p.spec, p.spec_len, &s, e);
	if (err < 0) {
		st_pod_clear(&p);
		return err;
	}
	s->desired = want;
	st_pod_in_t in;
	memset(&res, 0, sizeof res);
	if ((err = stack_spec_encode(s, &buf, &len)) < 0) {
		st_pod_clear(&p);
		goto out;
	}
	/* The stored labels stay: they are the object's, not the spec's
	 * (a cluster's node finds its stacks by them). */
	{
		msgpack_unpacked up;
		const msgpack_object *labels;
		char *with = NULL;
		size_t wlen = 0;

		msgpack_unpacked_init(&up);
		if (msgpack_unpack_next(&up, p.spec, p.spec_len, NULL) == MSGPACK_UNPACK_SUCCESS &&
		    (labels = mf_labels_of(&up.data)) &&
		    mf_labels_append(buf, len, labels, &with, &wlen) == 0) {
			free(buf);
			buf = with;
			len = wlen;
		}
		msgpack_unpacked_destroy(&up);
	}
	st_pod_clear(&p);
	in = (st_pod_in_t){ name, buf, len };
	if ((err = st_coll_put(c, &in, 1, &res, e)) < 0)
		goto out;
	/* An aborted stack brought up again: lifted even when desired was
	 * up already (the spec did not change, the operator's intent did).
	 * The lift is a message to the stack manager, which stores it. */
	stack_mgr_t *mgr = kind_inst(env, &stack_kind);
	rt_pid_t loop = rt_whereis(env->rt, env->loop_name);
	if (want == STACK_UP && mgr && stack_mgr_lift(mgr, env->rt, loop, name) &&
	    res.action == ST_UNCHANGED)
		res.action = ST_CONFIGURED;
	int rc = msgpack_pack_map(pk, 5);
	rc |= pk_key(pk, "kind");       rc |= kind_pack_str(pk, "stack");
	rc |= pk_key(pk, "name");       rc |= kind_pack_str(pk, name);
	rc |= pk_key(pk, "uid");        rc |= kind_pack_str(pk, res.uid);
	rc |= pk_key(pk, "action");     rc |= kind_pack_str(pk, actions[res.action]);
	rc |= pk_key(pk, "generation"); rc |= msgpack_pack_uint64(pk, res.generation);
	err = rc ? -ENOMEM : 0;
	/* The stack itself is looked at, not every object: a nudge runs a
	 * resync pass (every stored pod read, every cgroup swept), and an
	 * `up` of each of 1,000 stacks made it run a pass after nearly each
	 * one.  The watch has reloaded the stack (its commit above); its
	 * reconcile tells its pods. */
	if (loop)
		(void)rc_enqueue_from(env->rt, loop, TANK_KIND_STACK, name);
out:
	free(buf);
	stack_spec_free(s);
	return err;
}

static int v_up(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		tank_error_t *e)
{
	return updown(env, params, pk, e, STACK_UP);
}

static int v_down(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		  tank_error_t *e)
{
	return updown(env, params, pk, e, STACK_DOWN);
}

static const kind_verb_t stack__verbs[] = {
	{ "up", "s", v_up, "STACK [--wait [--timeout DURATION]]",
	  "Brings a stack up (desired: up), and lifts an abort: its pods start in\n"
	  "depends_on order.  --wait: until it is up (exit 1 if it fails).", .flags = 0 },
	{ "down", "s", v_down, "STACK [--wait [--timeout DURATION]]",
	  "Brings a stack down (desired: down): its pods stop, dependents first.\n"
	  "--wait: until it is down.", .flags = 0 },
	/* tankctl stop/start of a stack: its down/up (Pod's are its own). */
	{ "stop", "s?m", v_down, "[KIND] NAME... | KIND/NAME... [--wait [--timeout DURATION]] | [KIND] -l SELECTOR",
	  "stack: the same as `down`.", .flags = KIND_VERB_KINDED },
	{ "start", "s?m", v_up, "[KIND] NAME... | KIND/NAME... [--wait [--timeout DURATION]] | [KIND] -l SELECTOR",
	  "stack: the same as `up`.", .flags = KIND_VERB_KINDED },
};

/* ---- daemon ----------------------------------------------------------------------------- */

/* {type: "stack", stack, from, to, reason, at, generation} */
static int pack_event(msgpack_packer *pk, const void *arg)
{
	const stack_event_t *ev = arg;
	int rc = msgpack_pack_map(pk, 7);

	rc |= pk_key(pk, "type");
	rc |= kind_pack_str(pk, "stack");
	rc |= pk_key(pk, "stack");
	rc |= ev->stack ? kind_pack_str(pk, ev->stack) : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "from");
	rc |= ev->from ? kind_pack_str(pk, ev->from) : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "to");
	rc |= ev->to ? kind_pack_str(pk, ev->to) : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "reason");
	rc |= ev->reason ? kind_pack_str(pk, ev->reason) : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "at");
	rc |= msgpack_pack_int64(pk, ev->at);
	rc |= pk_key(pk, "generation");
	rc |= msgpack_pack_uint64(pk, ev->generation);
	return rc ? -ENOMEM : 0;
}

static void on_event(void *ctx, const stack_event_t *ev)
{
	kind_env_t *env = ctx;
	if (env->publish)
		env->publish(env->publish_ctx, pack_event, ev);
}

static int stack__open(kind_env_t *env, void **inst, tank_error_t *e)
{
	stack_mgr_opts_t o = {
		.store = env->store, .pods = env->pods,
		.on_event = on_event, .event_ctx = env,
	};
	stack_mgr_t *m = NULL;
	int err;

	*inst = NULL;
	if ((err = stack_mgr_new(&o, &m, e)) < 0)
		return tank_error_set(e, err, "unable to load the stacks: %s",
				      e->msg[0] ? e->msg : tank_strerror(err));
	*inst = m;
	return 0;
}

static void stack__close(void *inst)
{
	stack_mgr_free(inst);
}

static void stack__record(void *inst, const rc_transition_t *t)
{
	stack_mgr_record(inst, t);
}

static const char *stack__owner_of(void *inst, const char *pod)
{
	return stack_mgr_stack_of(inst, pod);
}

const kind_t stack_kind = {
	.id = TANK_KIND_STACK,
	.name = "stack", .plural = "stacks", .short_name = "st",
	.mf = &stack_mf_kind,
	.coll = &stack_coll_decl,
	.encode = stack__encode,
	.name_of = stack__name_of,
	.ninline = stack__ninline,
	.inline_at = stack__inline_at,
	.inline_where = stack__inline_where,
	.check = stack__check,
	.get_with_status = true,
	.pack_status = stack__pack_status,
	.cascade = stack__cascade,
	.observe = stack__observe,
	.children = &pod_kind,
	.owner_of = stack__owner_of,
	.cols = {
		{ "STACK", kind_col_name }, { "PHASE", kind_col_phase }, { "READY", c_ready },
		{ "AGE", kind_col_age }, { "REASON", c_reason },
	},
	.ncols = 5,
	.verbs = stack__verbs,
	.nverbs = sizeof stack__verbs / sizeof stack__verbs[0],
	.open = stack__open,
	.close = stack__close,
	.managers = { &stack_manager },
	.record = stack__record,
};
