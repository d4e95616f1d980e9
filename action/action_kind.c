/*
 * action_kind.c — the Action kind's descriptor and RPC methods (see
 * action_kind.h).  Actions are not applied: they are submitted
 * (action_submit), so their manifest entry refuses, naming the way.
 */
#include "action/action_kind.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "action/action_mgr.h"
#include "action/action_phase.h"
#include "common/tank_kinds.h"
#include "common/tank_map.h"
#include "pod/pod_spec.h"

static int act_validate(const msgpack_object *o, void **obj, const char **name,
			kit_errors_t *errs)
{
	(void)o; (void)obj; (void)name;
	kit_errors_add(errs, "actions are submitted, not applied: tankctl action run POD KIND "
		       "(RPC action_submit)");
	return TANK_EINVALID;
}

static const mf_kind_t act_mf = { .name = "Action", .validate = act_validate, .free_obj = free };


static int act_encode(const void *obj, char **buf, size_t *len)
{
	(void)obj; (void)buf; (void)len;
	return TANK_EINVALID;
}

static const char *act_name_of(const void *obj)
{
	(void)obj;
	return "";
}

static action_mgr_t *mgr_of(const kind_env_t *env, tank_error_t *e)
{
	action_mgr_t *m = kind_inst(env, &action_kind);
	if (!m)
		tank_error_set(e, -ESRCH, "actions are not served by this daemon");
	return m;
}

/* An action's map has its own created_at, and actions are submitted,
 * never applied, so their stored records have no labels: nothing of
 * KIND_STATUS_META to add (flags unused). */
static int act_pack_status(const kind_env_t *env, const st_pod_t *p, msgpack_packer *pk,
			   unsigned flags)
{
	action_mgr_t *m = kind_inst(env, &action_kind);
	(void)flags;
	return m ? action_mgr_get(m, p->name, pk, NULL) : -ESRCH;
}

static int act_status_all(const kind_env_t *env, msgpack_packer *pk, unsigned flags,
			  tank_error_t *e)
{
	action_mgr_t *m = mgr_of(env, e);
	(void)flags;
	return m ? action_mgr_list(m, "", "", pk, e) : -ESRCH;
}

static int act_status_one(const kind_env_t *env, const char *name, msgpack_packer *pk,
			  unsigned flags, tank_error_t *e)
{
	action_mgr_t *m = mgr_of(env, e);
	(void)flags;
	return m ? action_mgr_get(m, name, pk, e) : -ESRCH;
}

static int act_observe(const void *obj, const msgpack_object *s, const char *want,
		       rc_observed_t *out)
{
	char state[32] = "", reason[128] = "";

	(void)obj; (void)want;
	memset(out, 0, sizeof *out);
	if (!s || s->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	kind_str(kind_map_get(s, "state"), state, sizeof state);
	kind_str(kind_map_get(s, "reason"), reason, sizeof reason);
	out->progress = tank_hash64(state, strlen(state));
	out->state = !strcmp(state, "DONE") ? RC_OBS_DONE
		   : !strcmp(state, "FAILED") || !strcmp(state, "CANCELLED") ||
		     !strcmp(state, "LOST") ? RC_OBS_FAILED : RC_OBS_PENDING;
	snprintf(out->why, sizeof out->why, "%s: %s", state, reason);
	return 0;
}

static void c_pod(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(s, "pod", out, cap, "-");
}

static void c_kind(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(s, "action", out, cap, "-");
}

static void c_state(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(s, "state", out, cap, "-");
}

static void c_user(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(kind_map_get(s, "requester"), "name", out, cap, "-");
}

/* ---- RPC methods ----------------------------------------------------------------------- */

static int m_submit(const kind_env_t *env, const kind_caller_t *who,
		    const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	action_mgr_t *m = mgr_of(env, e);
	const msgpack_object *req = &params->via.array.ptr[0];
	char pod[POD_NAME_MAX + 1];
	pod_spec_t *ps = NULL;
	act_spec_t *s = NULL;
	st_pod_t p;
	bool created;
	int err;

	if (!m)
		return -ESRCH;
	if ((err = action_spec_pod_of(req, pod, sizeof pod, e)) < 0)
		return err;
	if (st_pod_get(env->store, pod, &p, NULL) == 0) {
		err = pod_spec_decode(p.spec, p.spec_len, &ps, e);
		st_pod_clear(&p);
		if (err < 0)
			return err;
	}
	err = action_spec_from_request(req, ps, &s, e);
	pod_spec_free(ps);
	if (err < 0)
		return err;
	s->req_uid = who->uid;
	snprintf(s->req_user, sizeof s->req_user, "%s", who->user);
	return action_mgr_submit(m, s, pk, &created, e);
}

static int id_of(const msgpack_object *params, char *id, tank_error_t *e)
{
	if (!kind_str(&params->via.array.ptr[0], id, ACT_ID_MAX + 1) || !id[0])
		return tank_error_set(e, TANK_EINVALID, "params[0]: an action id");
	return 0;
}

static int m_approve(const kind_env_t *env, const kind_caller_t *who,
		     const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	action_mgr_t *m = mgr_of(env, e);
	char id[ACT_ID_MAX + 1];
	int err;

	if (!m)
		return -ESRCH;
	if ((err = id_of(params, id, e)) < 0)
		return err;
	return action_mgr_approve(m, id, who, pk, e);
}

static int m_cancel(const kind_env_t *env, const kind_caller_t *who,
		    const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	action_mgr_t *m = mgr_of(env, e);
	char id[ACT_ID_MAX + 1], by[96];
	int err;

	if (!m)
		return -ESRCH;
	if ((err = id_of(params, id, e)) < 0)
		return err;
	snprintf(by, sizeof by, "%s (uid %u)", who->user, (unsigned)who->uid);
	return action_mgr_cancel(m, id, by, pk, e);
}

static int m_get(const kind_env_t *env, const kind_caller_t *who,
		 const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	action_mgr_t *m = mgr_of(env, e);
	char id[ACT_ID_MAX + 1];
	int err;

	(void)who;
	if (!m)
		return -ESRCH;
	if ((err = id_of(params, id, e)) < 0)
		return err;
	return action_mgr_get(m, id, pk, e);
}

static int m_list(const kind_env_t *env, const kind_caller_t *who,
		  const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	action_mgr_t *m = mgr_of(env, e);
	char pod[POD_NAME_MAX + 1] = "", state[32] = "";

	(void)who;
	if (!m)
		return -ESRCH;
	if (params->via.array.size > 0 && params->via.array.ptr[0].type == MSGPACK_OBJECT_MAP) {
		const msgpack_object *o = &params->via.array.ptr[0], *v;
		if ((v = kind_map_get(o, "pod")) && v->type != MSGPACK_OBJECT_NIL &&
		    !kind_str(v, pod, sizeof pod))
			return tank_error_set(e, TANK_EINVALID, "pod: expected a string");
		if ((v = kind_map_get(o, "state")) && v->type != MSGPACK_OBJECT_NIL &&
		    !kind_str(v, state, sizeof state))
			return tank_error_set(e, TANK_EINVALID, "state: expected a string");
	}
	return action_mgr_list(m, pod, state, pk, e);
}

static int m_output(const kind_env_t *env, const kind_caller_t *who,
		    const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	action_mgr_t *m = mgr_of(env, e);
	char id[ACT_ID_MAX + 1];
	int64_t off = 0, max = 0;
	int err;

	(void)who;
	if (!m)
		return -ESRCH;
	if ((err = id_of(params, id, e)) < 0)
		return err;
	if (params->via.array.size > 1 && params->via.array.ptr[1].type == MSGPACK_OBJECT_MAP) {
		const msgpack_object *o = &params->via.array.ptr[1], *v;
		if ((v = kind_map_get(o, "offset")) && (!kind_int(v, &off) || off < 0))
			return tank_error_set(e, TANK_EINVALID, "offset: expected a byte offset");
		if ((v = kind_map_get(o, "max")) && (!kind_int(v, &max) || max < 0))
			return tank_error_set(e, TANK_EINVALID, "max: expected a byte count");
	}
	return action_mgr_output(m, id, (uint64_t)off, (uint32_t)(max > UINT32_MAX ? 0 : max),
				 pk, e);
}

static const kind_method_t act_methods[] = {
	{ .name = "action_submit", .types = "m", .fn = m_submit, .after_loop = true,
	  .route = kind_route_pod_key },
	{ .name = "action_approve", .types = "s", .fn = m_approve, .after_loop = true },
	{ .name = "action_cancel", .types = "s", .fn = m_cancel, .after_loop = true },
	{ .name = "action_get", .types = "s", .fn = m_get, .after_loop = false },
	{ .name = "action_list", .types = "?m", .fn = m_list, .after_loop = false,
	  .route = kind_route_pod_key },
	{ .name = "action_output", .types = "s?m", .fn = m_output, .after_loop = false },
};

/* ---- the descriptor ------------------------------------------------------------------------ */

static int act_open(kind_env_t *env, void **inst, tank_error_t *e)
{
	action_mgr_t *m;
	int err = action_mgr_open(env, &m, e);
	if (err == 0)
		*inst = m;
	return err;
}

static void act_close(void *inst)
{
	action_mgr_close(inst);
}

static void act_record(void *inst, const rc_transition_t *t)
{
	action_mgr_record(inst, t);
}

const kind_t action_kind = {
	.cluster_place = KIND_PLACE_NONE,
	.id = TANK_KIND_ACTION,
	.name = "action", .plural = "actions", .short_name = "act",
	.mf = &act_mf,
	.coll = &action_coll_decl,
	.encode = act_encode,
	.name_of = act_name_of,
	.get_with_status = true,
	.pack_status = act_pack_status,
	.status_one = act_status_one,
	.status_all = act_status_all,
	.observe = act_observe,
	.cols = { { "ID", kind_col_name }, { "POD", c_pod }, { "KIND", c_kind },
		  { "STATE", c_state }, { "BY", c_user }, { "AGE", kind_col_age } },
	.ncols = 6,
	.methods = act_methods,
	.nmethods = sizeof act_methods / sizeof act_methods[0],
	.cmds = action_cmds,
	.ncmds = ACTION_NCMDS,
	.open = act_open,
	.close = act_close,
	.managers = { &action_manager },
	.record = act_record,
};
