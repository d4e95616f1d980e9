/*
 * playbook_kind.c — the Playbook kind's descriptor and RPC methods
 * (action_kind.h); the spec and manager are playbook_mgr.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "action/action_kind.h"
#include "action/action_phase.h"
#include "action/playbook_mgr.h"
#include "common/tank_kinds.h"
#include "common/tank_map.h"

static const char *pb_name_of(const void *obj)
{
	return ((const pb_spec_t *)obj)->name;
}

static int pb_pack_status(const kind_env_t *env, const st_pod_t *p, msgpack_packer *pk,
			  unsigned flags)
{
	playbook_mgr_t *m = kind_inst(env, &playbook_kind);
	kind_meta_t meta;
	kind_meta_of(p, flags, &meta);
	return m ? playbook_mgr_status(m, p->name, &meta, pk, NULL) : -ESRCH;
}

static int pb_observe_wait(const void *obj, const msgpack_object *s, const char *want,
			   rc_observed_t *out)
{
	char phase[32] = "", reason[128] = "";
	int64_t stage = 0;

	(void)obj; (void)want;
	memset(out, 0, sizeof *out);
	if (!s || s->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	kind_str(kind_map_get(s, "phase"), phase, sizeof phase);
	kind_str(kind_map_get(s, "reason"), reason, sizeof reason);
	kind_int(kind_map_get(s, "stage"), &stage);
	out->progress = tank_hash64(phase, strlen(phase)) ^ (uint64_t)stage;
	out->state = !strcmp(phase, "done") ? RC_OBS_DONE
		   : !strcmp(phase, "failed") || !strcmp(phase, "cancelled") ? RC_OBS_FAILED
		   : RC_OBS_PENDING;
	snprintf(out->why, sizeof out->why, "%s: %s", phase, reason);
	return 0;
}

static void c_stage(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	int64_t st = 0, n = 0;
	(void)now;
	kind_int(kind_map_get(s, "stage"), &st);
	kind_int(kind_map_get(s, "stages"), &n);
	snprintf(out, cap, "%lld/%lld", (long long)(st < n ? st + 1 : n), (long long)n);
}

static void c_reason(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(s, "reason", out, cap, "-");
}

/* ---- RPC methods ----------------------------------------------------------------------- */

static int m_apply(const kind_env_t *env, const kind_caller_t *who,
		   const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	static const char *const actions[] = { "unchanged", "created", "configured" };
	kit_errors_t errs;
	pb_spec_t *s = NULL;
	st_coll_t *c;
	char *buf = NULL;
	size_t len;
	int err;

	(void)who;
	kit_errors_init(&errs);
	err = pb_spec_from(&params->via.array.ptr[0], &s, &errs);
	if (err < 0) {
		char *j = kit_errors_join(&errs);
		tank_error_set(e, err, "%s", j ? j : "invalid playbook");
		free(j);
		kit_errors_free(&errs);
		return err;
	}
	kit_errors_free(&errs);
	if ((err = kind_coll(env, &playbook_kind, &c, e)) < 0 ||
	    (err = pb_spec_encode(s, &buf, &len)) < 0) {
		pb_spec_free(s);
		return err;
	}
	st_pod_in_t in = { s->name, buf, len };
	st_apply_result_t res;
	memset(&res, 0, sizeof res);
	err = st_coll_put(c, &in, 1, &res, e);
	free(buf);
	if (err == 0) {
		rt_pid_t loop = rt_whereis(env->rt, env->loop_name);
		if (loop)
			rc_nudge(env->rt, loop);
		int rc = msgpack_pack_map(pk, 5);
		rc |= kind_pack_str(pk, "kind");       rc |= kind_pack_str(pk, "playbook");
		rc |= kind_pack_str(pk, "name");       rc |= kind_pack_str(pk, s->name);
		rc |= kind_pack_str(pk, "uid");        rc |= kind_pack_str(pk, res.uid);
		rc |= kind_pack_str(pk, "action");     rc |= kind_pack_str(pk, actions[res.action]);
		rc |= kind_pack_str(pk, "generation"); rc |= msgpack_pack_uint64(pk, res.generation);
		err = rc ? -ENOMEM : 0;
	}
	pb_spec_free(s);
	return err;
}

static int m_get(const kind_env_t *env, const kind_caller_t *who,
		 const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	playbook_mgr_t *m = kind_inst(env, &playbook_kind);
	char name[ST_NAME_MAX + 1];

	(void)who;
	if (!m)
		return tank_error_set(e, -ESRCH, "playbooks are not served by this daemon");
	kind_str(&params->via.array.ptr[0], name, sizeof name);
	return playbook_mgr_status(m, name, NULL, pk, e);
}

typedef struct list_ctx {
	playbook_mgr_t *m;
	char (*names)[ST_NAME_MAX + 1];
	size_t n, cap;
} list_ctx_t;

static int collect(void *ctx, const st_pod_t *p)
{
	list_ctx_t *l = ctx;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		void *nn = realloc(l->names, nc * sizeof *l->names);
		if (!nn)
			return -ENOMEM;
		l->names = nn;
		l->cap = nc;
	}
	snprintf(l->names[l->n++], ST_NAME_MAX + 1, "%s", p->name);
	return 0;
}

static int m_list(const kind_env_t *env, const kind_caller_t *who,
		  const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	playbook_mgr_t *m = kind_inst(env, &playbook_kind);
	list_ctx_t l = { m, NULL, 0, 0 };
	int err;

	(void)who; (void)params;
	if (!m)
		return tank_error_set(e, -ESRCH, "playbooks are not served by this daemon");
	if ((err = kind_scan(env, &playbook_kind, collect, &l, e)) < 0) {
		free(l.names);
		return err;
	}
	err = msgpack_pack_array(pk, l.n) ? -ENOMEM : 0;
	for (size_t i = 0; i < l.n && !err; i++)
		err = playbook_mgr_status(m, l.names[i], NULL, pk, e);
	free(l.names);
	return err;
}

static const kind_method_t pb_methods[] = {
	{ .name = "playbook_apply", .types = "m", .fn = m_apply, .after_loop = false },
	{ .name = "playbook_get", .types = "s", .fn = m_get, .after_loop = false },
	{ .name = "playbook_list", .types = "", .fn = m_list, .after_loop = false },
};

/* ---- descriptor -------------------------------------------------------------------------------- */

static int pb_open(kind_env_t *env, void **inst, tank_error_t *e)
{
	playbook_mgr_t *m;
	int err = playbook_mgr_open(env, &m, e);
	if (err == 0)
		*inst = m;
	return err;
}

static void pb_close(void *inst)
{
	playbook_mgr_close(inst);
}

static void pb_record(void *inst, const rc_transition_t *t)
{
	playbook_mgr_record(inst, t);
}

const kind_t playbook_kind = {
	.cluster_place = KIND_PLACE_EVERY,
	.id = TANK_KIND_PLAYBOOK,
	.name = "playbook", .plural = "playbooks", .short_name = "pb",
	.mf = &playbook_mf,
	.coll = &playbook_coll_decl,
	.encode = pb_spec_encode,
	.name_of = pb_name_of,
	.get_with_status = true,
	.pack_status = pb_pack_status,
	.observe = pb_observe_wait,
	.cols = { { "NAME", kind_col_name }, { "PHASE", kind_col_phase }, { "STAGE", c_stage },
		  { "REASON", c_reason }, { "AGE", kind_col_age } },
	.ncols = 5,
	.methods = pb_methods,
	.nmethods = sizeof pb_methods / sizeof pb_methods[0],
	.cmds = playbook_cmds,
	.ncmds = PLAYBOOK_NCMDS,
	.open = pb_open,
	.close = pb_close,
	.managers = { &playbook_manager },
	.record = pb_record,
};
