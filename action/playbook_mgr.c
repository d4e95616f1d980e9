/*
 * playbook_mgr.c — see playbook_mgr.h.
 */
#include "action/playbook_mgr.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "action/action_kind.h"
#include "action/action_mgr.h"
#include "action/action_phase.h"
#include "common/tank_kinds.h"
#include "common/tank_map.h"
#include "reconciler/rc_fsm.h"
#include "manifest/mf_labels.h"

const st_coll_decl_t playbook_coll_decl = { .name = "playbooks", .noun = "playbook" };

/* ---- spec ----------------------------------------------------------------------------------- */

void pb_spec_free(void *obj)
{
	pb_spec_t *s = obj;
	if (!s)
		return;
	for (size_t i = 0; i < s->nstages; i++) {
		for (size_t j = 0; j < s->stages[i].nt; j++) {
			pb_template_t *t = &s->stages[i].t[j];
			for (size_t k = 0; k < t->npods; k++)
				free(t->pods[k]);
			free(t->pods);
			free(t->kind);
			free(t->args);
		}
		free(s->stages[i].t);
	}
	free(s->stages);
	free(s);
}

static bool key_in(const msgpack_object *map, const char *const *known, char *bad, size_t cap)
{
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		bool ok = false;
		for (size_t j = 0; known[j]; j++)
			ok |= k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(known[j]) &&
			      !memcmp(k->via.str.ptr, known[j], k->via.str.size);
		if (!ok) {
			if (!kind_str(k, bad, cap))
				snprintf(bad, cap, "?");
			return false;
		}
	}
	return true;
}

static char *pack_copy(const msgpack_object *o, size_t *len)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (msgpack_pack_object(&pk, *o) != 0) {
		msgpack_sbuffer_destroy(&sb);
		return NULL;
	}
	*len = sb.size;
	return sb.data;
}

static bool name_ok(const char *s)
{
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      (p > s && (*p == '.' || *p == '_'))))
			return false;
	return s[0] != '\0' && strlen(s) <= 63;
}

int pb_spec_from(const msgpack_object *o, pb_spec_t **out, kit_errors_t *errs)
{
	static const char *const k_top[] = { "name", "stages", "generation", "uid", "created_at", "status",
					     NULL };
	static const char *const k_stage[] = { "actions", "max_parallel", NULL };
	static const char *const k_t[] = { "pods", "kind", "args", NULL };
	size_t before = errs->count;
	char bad[64];
	pb_spec_t *s;

	*out = NULL;
	if (!o || o->type != MSGPACK_OBJECT_MAP) {
		kit_errors_add(errs, "a playbook is a map {name, stages}");
		return TANK_EINVALID;
	}
	if (!(s = calloc(1, sizeof *s)))
		return -ENOMEM;
	if (!kind_str(kind_map_get(o, "name"), s->name, sizeof s->name) || !name_ok(s->name))
		kit_errors_add(errs, "name: required, [a-z0-9][a-z0-9-_.]{0,62}");
	const char *who = s->name[0] ? s->name : "playbook";
	if (!key_in(o, k_top, bad, sizeof bad))
		kit_errors_add(errs, "%s: unknown field \"%s\"", who, bad);
	const msgpack_object *st = kind_map_get(o, "stages");
	if (!st || st->type != MSGPACK_OBJECT_ARRAY || !st->via.array.size ||
	    st->via.array.size > PB_STAGES_MAX) {
		kit_errors_add(errs, "%s: stages: required, a list of 1 to %d stages", who,
			       PB_STAGES_MAX);
		goto out;
	}
	if (!(s->stages = calloc(st->via.array.size, sizeof *s->stages))) {
		pb_spec_free(s);
		return -ENOMEM;
	}
	s->nstages = st->via.array.size;
	for (uint32_t i = 0; i < st->via.array.size; i++) {
		const msgpack_object *g = &st->via.array.ptr[i];
		pb_stage_t *sg = &s->stages[i];
		if (g->type != MSGPACK_OBJECT_MAP) {
			kit_errors_add(errs, "%s: stages[%u]: expected a map {actions, max_parallel}",
				       who, i);
			continue;
		}
		if (!key_in(g, k_stage, bad, sizeof bad))
			kit_errors_add(errs, "%s: stages[%u]: unknown field \"%s\"", who, i, bad);
		const msgpack_object *mp = kind_map_get(g, "max_parallel");
		int64_t n = 0;
		if (mp && mp->type != MSGPACK_OBJECT_NIL && (!kind_int(mp, &n) || n < 0 || n > 100000))
			kit_errors_add(errs, "%s: stages[%u]: max_parallel: expected a count >= 0",
				       who, i);
		sg->max_parallel = (uint32_t)(n > 0 ? n : 0);
		const msgpack_object *as = kind_map_get(g, "actions");
		if (!as || as->type != MSGPACK_OBJECT_ARRAY || !as->via.array.size ||
		    as->via.array.size > PB_TEMPLATES_MAX) {
			kit_errors_add(errs, "%s: stages[%u]: actions: required, a list of 1 to %d",
				       who, i, PB_TEMPLATES_MAX);
			continue;
		}
		if (!(sg->t = calloc(as->via.array.size, sizeof *sg->t))) {
			pb_spec_free(s);
			return -ENOMEM;
		}
		sg->nt = as->via.array.size;
		for (uint32_t j = 0; j < as->via.array.size; j++) {
			const msgpack_object *a = &as->via.array.ptr[j], *v;
			pb_template_t *t = &sg->t[j];
			char kb[64];
			if (a->type != MSGPACK_OBJECT_MAP) {
				kit_errors_add(errs, "%s: stages[%u].actions[%u]: expected a map {pods, "
					       "kind, args}", who, i, j);
				continue;
			}
			if (!key_in(a, k_t, bad, sizeof bad))
				kit_errors_add(errs, "%s: stages[%u].actions[%u]: unknown field \"%s\"",
					       who, i, j, bad);
			if (!kind_str(kind_map_get(a, "kind"), kb, sizeof kb) || !kb[0])
				kit_errors_add(errs, "%s: stages[%u].actions[%u].kind: required, a string",
					       who, i, j);
			else
				t->kind = strdup(kb);
			v = kind_map_get(a, "pods");
			if (!v || v->type != MSGPACK_OBJECT_ARRAY || !v->via.array.size ||
			    v->via.array.size > PB_PODS_MAX) {
				kit_errors_add(errs, "%s: stages[%u].actions[%u].pods: required, a list "
					       "of pod names or globs", who, i, j);
			} else {
				t->pods = calloc(v->via.array.size, sizeof *t->pods);
				for (uint32_t k = 0; t->pods && k < v->via.array.size; k++) {
					char pb[128];
					if (!kind_str(&v->via.array.ptr[k], pb, sizeof pb) || !pb[0]) {
						kit_errors_add(errs, "%s: stages[%u].actions[%u].pods[%u]: "
							       "expected a name or glob", who, i, j, k);
						continue;
					}
					t->pods[t->npods++] = strdup(pb);
				}
			}
			v = kind_map_get(a, "args");
			if (v && v->type != MSGPACK_OBJECT_NIL) {
				if (v->type != MSGPACK_OBJECT_MAP)
					kit_errors_add(errs, "%s: stages[%u].actions[%u].args: expected a "
						       "map", who, i, j);
				else
					t->args = pack_copy(v, &t->args_len);
			}
		}
	}
out:
	if (errs->count > before) {
		pb_spec_free(s);
		return TANK_EINVALID;
	}
	*out = s;
	return 0;
}

static int pb_validate(const msgpack_object *o, void **obj, const char **name,
		       kit_errors_t *errs)
{
	pb_spec_t *s;
	int err = pb_spec_from(o, &s, errs);
	if (err < 0)
		return err;
	*obj = s;
	*name = s->name;
	return 0;
}

const mf_kind_t playbook_mf = { .name = "Playbook", .validate = pb_validate,
				.free_obj = pb_spec_free };

int pb_spec_encode(const void *obj, char **buf, size_t *len)
{
	const pb_spec_t *s = obj;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc = 0;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	rc |= msgpack_pack_map(&pk, 2);
	rc |= kind_pack_str(&pk, "name");
	rc |= kind_pack_str(&pk, s->name);
	rc |= kind_pack_str(&pk, "stages");
	rc |= msgpack_pack_array(&pk, s->nstages);
	for (size_t i = 0; i < s->nstages; i++) {
		const pb_stage_t *g = &s->stages[i];
		rc |= msgpack_pack_map(&pk, 2);
		rc |= kind_pack_str(&pk, "max_parallel");
		rc |= msgpack_pack_uint32(&pk, g->max_parallel);
		rc |= kind_pack_str(&pk, "actions");
		rc |= msgpack_pack_array(&pk, g->nt);
		for (size_t j = 0; j < g->nt; j++) {
			const pb_template_t *t = &g->t[j];
			rc |= msgpack_pack_map(&pk, 2 + (t->args != NULL));
			rc |= kind_pack_str(&pk, "pods");
			rc |= msgpack_pack_array(&pk, t->npods);
			for (size_t k = 0; k < t->npods; k++)
				rc |= kind_pack_str(&pk, t->pods[k]);
			rc |= kind_pack_str(&pk, "kind");
			rc |= kind_pack_str(&pk, t->kind ? t->kind : "");
			if (t->args) {
				rc |= kind_pack_str(&pk, "args");
				rc |= msgpack_sbuffer_write(&sb, t->args, t->args_len);
			}
		}
	}
	if (rc) {
		msgpack_sbuffer_destroy(&sb);
		return -ENOMEM;
	}
	*buf = sb.data;
	*len = sb.size;
	return 0;
}

static int pb_decode(const st_pod_t *p, pb_spec_t **out)
{
	msgpack_unpacked u;
	size_t off = 0;
	kit_errors_t errs;
	int err = TANK_ECORRUPT;

	*out = NULL;
	kit_errors_init(&errs);
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, p->spec, p->spec_len, &off) == MSGPACK_UNPACK_SUCCESS) {
		/* The labels every kind stores are not the kind's to read. */
		mf_labels_drop(&u.data);
		err = pb_spec_from(&u.data, out, &errs);
	}
	msgpack_unpacked_destroy(&u);
	kit_errors_free(&errs);
	return err;
}

/* ---- the manager ------------------------------------------------------------------------------ */

typedef struct pb_item {
	char id[ACT_ID_MAX + 1];
	char pod[POD_NAME_MAX + 1];
	size_t t;                      /* template */
	bool submitted;
} pb_item_t;

typedef struct pb_trk {
	char name[ST_NAME_MAX + 1];
	char uid[ST_UID_LEN + 1];
	uint64_t generation;           /* stored */
	uint64_t run_gen;              /* the run's */
	pb_spec_t *spec;               /* the run's */
	rc_fsm_state_t st;
	uint32_t stage;
	pb_item_t *items;              /* the current stage's */
	size_t nitems;
	bool expanded;
	char failed_action[ACT_ID_MAX + 1];
} pb_trk_t;

struct playbook_mgr {
	kind_env_t *env;
	st_coll_t *coll;
	tank_map_t pbs;
	int watch;                     /* st_coll_watch's id, 0 none */
};

static int put_status(playbook_mgr_t *m, const pb_trk_t *t);

static int enqueue_one(void *ctx, const st_pod_t *p)
{
	return rc_enqueue(ctx, TANK_KIND_PLAYBOOK, p->name) < 0 ? -ENOMEM : 0;
}

static void enqueue_owner(void *ctx, const char *name)
{
	(void)rc_enqueue(ctx, TANK_KIND_PLAYBOOK, name);
}

/* The stored playbooks, and the playbooks of unfinished actions: one of
 * those deleted while tankd did not run is seen by no watch, and its
 * pass (pb_observe: not stored) cancels what it started. */
static int pb_list(void *ctx, rc_loop_t *loop)
{
	playbook_mgr_t *m = ctx;
	action_mgr_t *am = kind_inst(m->env, &action_kind);

	if (am)
		action_mgr_playbooks(am, enqueue_owner, loop);
	return st_coll_scan(m->coll, enqueue_one, loop, NULL);
}

static void trk_free(pb_trk_t *t)
{
	pb_spec_free(t->spec);
	free(t->items);
	rc_fsm_clear(&t->st);
	free(t);
}

/* From its stored status at start-up: phase, stage, the run's generation. */
static void trk_restore(playbook_mgr_t *m, pb_trk_t *t)
{
	void *buf;
	size_t len, off = 0;
	msgpack_unpacked u;

	if (st_coll_status_get(m->coll, t->name, &buf, &len, NULL) < 0)
		return;
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, buf, len, &off) == MSGPACK_UNPACK_SUCCESS) {
		char phase[32] = "", reason[RC_REASON_MAX] = "", uid[ST_UID_LEN + 1] = "";
		int64_t v = 0, since = 0;
		kind_str(kind_map_get(&u.data, "uid"), uid, sizeof uid);
		kind_str(kind_map_get(&u.data, "phase"), phase, sizeof phase);
		kind_str(kind_map_get(&u.data, "reason"), reason, sizeof reason);
		kind_int(kind_map_get(&u.data, "since"), &since);
		int ph = rc_fsm_phase_of(&playbook_fsm, phase);
		if (ph >= 0 && !strcmp(uid, t->uid)) {
			rc_fsm_restore(&t->st, (uint8_t)ph, since, reason);
			if (kind_int(kind_map_get(&u.data, "stage"), &v))
				t->stage = (uint32_t)v;
			if (kind_int(kind_map_get(&u.data, "run_generation"), &v))
				t->run_gen = (uint64_t)v;
		}
	}
	msgpack_unpacked_destroy(&u);
	free(buf);
}

/* A playbook deleted (or deleted and applied again: another uid) stops
 * what it started, as a deleted Job's pods go and `systemctl stop` stops
 * a unit's processes: its unfinished actions are cancelled (a running
 * exec stopped), the reason naming the deletion.  By the actions' own
 * record of their playbook, not by the tracker's items, which hold the
 * current stage only and are empty before a pass after a restart.
 * Rejected: letting them run on, owned by nothing — the one way to stop
 * a roll gone wrong would be to cancel each action by hand. */
static void pb_deleted(playbook_mgr_t *m, const char *name, const char *keep_uid)
{
	action_mgr_t *am = kind_inst(m->env, &action_kind);
	char by[ST_NAME_MAX + 32];

	snprintf(by, sizeof by, "the deletion of playbook %s", name);
	if (am)
		(void)action_mgr_cancel_playbook(am, name, keep_uid, by, NULL);
}

static int pb_observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	playbook_mgr_t *m = ctx;
	pb_trk_t *t = tank_map_get(&m->pbs, key);
	st_pod_t p;

	(void)loop;
	if (st_coll_get(m->coll, key, &p, NULL) < 0) {
		if (t) {
			tank_map_del(&m->pbs, key);
			trk_free(t);
		}
		pb_deleted(m, key, NULL);
		return TANK_ENOTFOUND;
	}
	if (t && strcmp(t->uid, p.uid)) {
		tank_map_del(&m->pbs, key);
		trk_free(t);
		t = NULL;
	}
	if (!t) {
		/* What a namesake with another uid started (deleted and
		 * applied again, also while tankd did not run, when no watch
		 * saw it) is cancelled: the new run's ids differ. */
		pb_deleted(m, key, p.uid);
		if (!(t = calloc(1, sizeof *t)) || tank_map_put(&m->pbs, key, t, NULL) < 0) {
			free(t);
			st_pod_clear(&p);
			return -ENOMEM;
		}
		snprintf(t->name, sizeof t->name, "%s", key);
		snprintf(t->uid, sizeof t->uid, "%s", p.uid);
		rc_fsm_restore(&t->st, PB_PENDING, 0, "not started yet");
		trk_restore(m, t);
	}
	t->generation = p.generation;
	/* A running playbook keeps the spec it started with; otherwise the
	 * stored one (a changed one runs again: reconcile). */
	if (!t->spec || t->st.phase != PB_RUNNING) {
		pb_spec_t *sp = NULL;
		if (pb_decode(&p, &sp) == 0) {
			pb_spec_free(t->spec);
			t->spec = sp;
		}
	}
	st_pod_clear(&p);
	view->obj = t;
	return 0;
}

/* The id of a stage's action: stable across restarts of tankd. */
static void item_id(const pb_trk_t *t, uint32_t stage, size_t tmpl, const char *pod, char *out)
{
	char buf[512];
	int n = snprintf(buf, sizeof buf, "%s/%llu/%u/%zu/%s", t->uid,
			 (unsigned long long)t->run_gen, stage, tmpl, pod);
	snprintf(out, ACT_ID_MAX + 1, "pb-%016llx",
		 (unsigned long long)tank_hash64(buf, (size_t)n));
}

typedef struct glob_ctx {
	const pb_template_t *t;
	size_t ti;
	pb_trk_t *trk;
	size_t cap;
	int err;
} glob_ctx_t;

static int add_item(pb_trk_t *t, size_t *cap, size_t ti, const char *pod)
{
	for (size_t i = 0; i < t->nitems; i++)
		if (t->items[i].t == ti && !strcmp(t->items[i].pod, pod))
			return 0;
	if (t->nitems == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		pb_item_t *ni = realloc(t->items, nc * sizeof *ni);
		if (!ni)
			return -ENOMEM;
		t->items = ni;
		*cap = nc;
	}
	pb_item_t *it = &t->items[t->nitems++];
	memset(it, 0, sizeof *it);
	snprintf(it->pod, sizeof it->pod, "%s", pod);
	it->t = ti;
	item_id(t, t->stage, ti, pod, it->id);
	return 0;
}

static int glob_pod(void *ctx, const st_pod_t *p)
{
	glob_ctx_t *g = ctx;
	for (size_t k = 0; k < g->t->npods; k++)
		if (fnmatch(g->t->pods[k], p->name, 0) == 0) {
			if ((g->err = add_item(g->trk, &g->cap, g->ti, p->name)) < 0)
				return 1;
			break;
		}
	return 0;
}

/* The current stage's actions: each template over its pods (a plain name
 * as given, even when no such pod exists: its submit then fails the
 * playbook naming it; a glob over the stored pods, in name order). */
static int expand(playbook_mgr_t *m, pb_trk_t *t)
{
	const pb_stage_t *sg = &t->spec->stages[t->stage];
	size_t cap = 0;

	free(t->items);
	t->items = NULL;
	t->nitems = 0;
	for (size_t ti = 0; ti < sg->nt; ti++) {
		const pb_template_t *tp = &sg->t[ti];
		bool glob = false;
		for (size_t k = 0; k < tp->npods; k++)
			glob |= strpbrk(tp->pods[k], "*?[") != NULL;
		if (glob) {
			glob_ctx_t g = { tp, ti, t, cap, 0 };
			(void)st_pod_foreach(m->env->store, glob_pod, &g, NULL);
			cap = g.cap;
			if (g.err)
				return g.err;
		}
		for (size_t k = 0; k < tp->npods; k++)
			if (!strpbrk(tp->pods[k], "*?[") && add_item(t, &cap, ti, tp->pods[k]) < 0)
				return -ENOMEM;
	}
	t->expanded = true;
	return 0;
}

/* Submits one action of the stage: action_submit's path, as the
 * playbook. */
static int submit(playbook_mgr_t *m, pb_trk_t *t, pb_item_t *it, char *why, size_t cap)
{
	action_mgr_t *am = kind_inst(m->env, &action_kind);
	const pb_template_t *tp = &t->spec->stages[t->stage].t[it->t];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked u;
	pod_spec_t *ps = NULL;
	act_spec_t *s = NULL;
	tank_error_t e;
	st_pod_t p;
	int err;

	if (!am)
		return -ESRCH;
	tank_error_clear(&e);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	int rc = msgpack_pack_map(&pk, 3 + (tp->args != NULL));
	rc |= kind_pack_str(&pk, "id");   rc |= kind_pack_str(&pk, it->id);
	rc |= kind_pack_str(&pk, "pod");  rc |= kind_pack_str(&pk, it->pod);
	rc |= kind_pack_str(&pk, "kind"); rc |= kind_pack_str(&pk, tp->kind);
	if (tp->args) {
		rc |= kind_pack_str(&pk, "args");
		rc |= msgpack_sbuffer_write(&sb, tp->args, tp->args_len);
	}
	if (rc) {
		msgpack_sbuffer_destroy(&sb);
		return -ENOMEM;
	}
	msgpack_unpacked_init(&u);
	size_t off = 0;
	msgpack_unpack_next(&u, sb.data, sb.size, &off);
	if (st_pod_get(m->env->store, it->pod, &p, NULL) == 0) {
		(void)pod_spec_decode(p.spec, p.spec_len, &ps, NULL);
		st_pod_clear(&p);
	}
	err = action_spec_from_request(&u.data, ps, &s, &e);
	pod_spec_free(ps);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
	if (err == 0) {
		s->req_uid = (uint32_t)geteuid();
		snprintf(s->req_user, sizeof s->req_user, "playbook/%.50s", t->name);
		snprintf(s->playbook, sizeof s->playbook, "%s", t->name);
		snprintf(s->playbook_uid, sizeof s->playbook_uid, "%s", t->uid);
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		bool created;
		err = action_mgr_submit(am, s, &pk, &created, &e);
		msgpack_sbuffer_destroy(&sb);
	}
	if (err < 0) {
		char tmp[TANK_ERROR_MSG + 128];
		int n = snprintf(tmp, sizeof tmp, "%s on %s: %s", tp->kind, it->pod,
				 e.msg[0] ? e.msg : tank_strerror(err));
		size_t l = n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
		memcpy(why, tmp, l);      /* cut to the reason's size */
		why[l] = '\0';
	}
	return err;
}

static void cancel_stage(playbook_mgr_t *m, pb_trk_t *t)
{
	action_mgr_t *am = kind_inst(m->env, &action_kind);
	char by[ST_NAME_MAX + 32];

	snprintf(by, sizeof by, "playbook %s failed", t->name);
	for (size_t i = 0; am && i < t->nitems; i++) {
		int ph = action_mgr_phase(am, t->items[i].id);
		if (ph >= 0 && !act_phase_finished(ph)) {
			msgpack_sbuffer sb;
			msgpack_packer pk;
			msgpack_sbuffer_init(&sb);
			msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
			(void)action_mgr_cancel(am, t->items[i].id, by, &pk, NULL);
			msgpack_sbuffer_destroy(&sb);
		}
	}
}

static void pb_move(playbook_mgr_t *m, rc_loop_t *loop, pb_trk_t *t, uint8_t ev,
		    const char *why)
{
	if (rc_fsm_apply(loop, TANK_KIND_PLAYBOOK, t->name, &playbook_fsm, &t->st, ev, why) >= 0)
		(void)put_status(m, t);
}

static rc_result_t pb_reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	playbook_mgr_t *m = ctx;
	pb_trk_t *t = view->obj;
	action_mgr_t *am = kind_inst(m->env, &action_kind);
	char why[RC_REASON_MAX];

	if (!t->spec)
		return rc_converged();
	if (t->st.phase >= PB_DONE) {
		if (t->run_gen == t->generation)
			return rc_converged();
		/* A changed spec: a new run. */
		t->run_gen = t->generation;
		t->stage = 0;
		t->expanded = false;
		pb_move(m, loop, t, PB_EV_RERUN, "spec changed");
		rc_enqueue(loop, TANK_KIND_PLAYBOOK, t->name);
		return rc_converged();
	}
	if (t->st.phase == PB_PENDING) {
		t->stage = 0;
		t->expanded = false;
		t->run_gen = t->generation;
		pb_move(m, loop, t, PB_EV_START, "started");
	}
	if (!am)
		return rc_failed(-ESRCH, "actions are not served");
	for (;;) {
		if (t->stage >= t->spec->nstages) {
			pb_move(m, loop, t, PB_EV_SUCCEED, "every stage done");
			return rc_converged();
		}
		if (!t->expanded && expand(m, t) < 0)
			return rc_failed(-ENOMEM, "out of memory");
		const pb_stage_t *sg = &t->spec->stages[t->stage];
		size_t done = 0, inflight = 0;
		for (size_t i = 0; i < t->nitems; i++) {
			pb_item_t *it = &t->items[i];
			int ph = action_mgr_phase(am, it->id);
			if (ph == ACT_DONE) {
				done++;
			} else if (ph == ACT_FAILED || ph == ACT_CANCELLED || ph == ACT_LOST) {
				snprintf(t->failed_action, sizeof t->failed_action, "%s", it->id);
				snprintf(why, sizeof why, "stage %u: action %s on %.40s is %s", t->stage + 1,
					 it->id, it->pod, rc_fsm_phase_name(&action_fsm, (uint8_t)ph));
				cancel_stage(m, t);
				pb_move(m, loop, t, PB_EV_FAIL, why);
				return rc_converged();
			} else if (ph >= 0 || it->submitted) {
				inflight++;
			}
		}
		if (done == t->nitems) {
			t->stage++;
			t->expanded = false;
			(void)put_status(m, t);
			continue;
		}
		for (size_t i = 0; i < t->nitems; i++) {
			pb_item_t *it = &t->items[i];
			if (sg->max_parallel && inflight >= sg->max_parallel)
				break;
			if (it->submitted || action_mgr_phase(am, it->id) >= 0)
				continue;
			if (submit(m, t, it, why, sizeof why) < 0) {
				cancel_stage(m, t);
				pb_move(m, loop, t, PB_EV_FAIL, why);
				return rc_converged();
			}
			it->submitted = true;
			inflight++;
		}
		(void)put_status(m, t);
		return rc_converged();     /* its actions finishing move it */
	}
}

static const char *pb_phase(const pb_trk_t *t)
{
	return rc_fsm_phase_name(&playbook_fsm, t->st.phase);
}

static int pack_trk(playbook_mgr_t *m, const pb_trk_t *t, const kind_meta_t *meta,
		    msgpack_packer *pk)
{
	action_mgr_t *am = kind_inst(m->env, &action_kind);
	int rc = msgpack_pack_map(pk, 11 + kind_meta_n(meta));
	rc |= kind_pack_str(pk, "name");       rc |= kind_pack_str(pk, t->name);
	rc |= kind_pack_str(pk, "kind");       rc |= kind_pack_str(pk, "playbook");
	rc |= kind_pack_str(pk, "phase");      rc |= kind_pack_str(pk, pb_phase(t));
	rc |= kind_pack_str(pk, "reason");     rc |= kind_pack_str(pk, rc_fsm_reason(&t->st));
	rc |= kind_pack_str(pk, "since");      rc |= msgpack_pack_int64(pk, t->st.since);
	rc |= kind_pack_str(pk, "stage");      rc |= msgpack_pack_uint32(pk, t->stage);
	rc |= kind_pack_str(pk, "stages");
	rc |= msgpack_pack_uint64(pk, t->spec ? t->spec->nstages : 0);
	rc |= kind_pack_str(pk, "generation"); rc |= msgpack_pack_uint64(pk, t->generation);
	rc |= kind_pack_str(pk, "run_generation"); rc |= msgpack_pack_uint64(pk, t->run_gen);
	rc |= kind_pack_str(pk, "uid");        rc |= kind_pack_str(pk, t->uid);
	rc |= kind_pack_str(pk, "actions");
	rc |= msgpack_pack_array(pk, t->nitems);
	for (size_t i = 0; i < t->nitems; i++) {
		int ph = am ? action_mgr_phase(am, t->items[i].id) : -1;
		rc |= msgpack_pack_map(pk, 3);
		rc |= kind_pack_str(pk, "id");    rc |= kind_pack_str(pk, t->items[i].id);
		rc |= kind_pack_str(pk, "pod");   rc |= kind_pack_str(pk, t->items[i].pod);
		rc |= kind_pack_str(pk, "state");
		rc |= kind_pack_str(pk, ph >= 0 ? rc_fsm_phase_name(&action_fsm, (uint8_t)ph)
						: "not submitted");
	}
	return rc ? -ENOMEM : kind_meta_pack(pk, meta);
}

static int put_status(playbook_mgr_t *m, const pb_trk_t *t)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	int rc = pack_trk(m, t, NULL, &pk);
	if (!rc)
		rc = st_coll_status_put(m->coll, t->name, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return rc ? -ENOMEM : 0;
}

const rc_manager_t playbook_manager = {
	.kind = TANK_KIND_PLAYBOOK,
	.name = "playbook",
	.list = pb_list,
	.observe = pb_observe,
	.reconcile = pb_reconcile,
};

static int pack_event(msgpack_packer *pk, const void *arg)
{
	const rc_transition_t *t = arg;
	int rc = msgpack_pack_map(pk, 6);
	rc |= kind_pack_str(pk, "type");     rc |= kind_pack_str(pk, "playbook");
	rc |= kind_pack_str(pk, "playbook"); rc |= kind_pack_str(pk, t->key);
	rc |= kind_pack_str(pk, "from");     rc |= kind_pack_str(pk, t->from);
	rc |= kind_pack_str(pk, "to");       rc |= kind_pack_str(pk, t->to);
	rc |= kind_pack_str(pk, "reason");   rc |= kind_pack_str(pk, t->reason ? t->reason : "");
	rc |= kind_pack_str(pk, "at");       rc |= msgpack_pack_int64(pk, (int64_t)t->at_ms);
	return rc ? -ENOMEM : 0;
}

void playbook_mgr_record(playbook_mgr_t *m, const rc_transition_t *t)
{
	st_transition_t tr;

	memset(&tr, 0, sizeof tr);
	tr.at = (int64_t)t->at_ms;
	snprintf(tr.from, sizeof tr.from, "%s", t->from);
	snprintf(tr.to, sizeof tr.to, "%s", t->to);
	snprintf(tr.reason, sizeof tr.reason, "%s", t->reason ? t->reason : "");
	(void)st_coll_history_add(m->coll, t->key, &tr);
	if (m->env->publish)
		m->env->publish(m->env->publish_ctx, pack_event, t);
}

int playbook_mgr_status(playbook_mgr_t *m, const char *name, const kind_meta_t *meta,
			msgpack_packer *pk, tank_error_t *e)
{
	pb_trk_t *t = tank_map_get(&m->pbs, name);
	void *buf;
	size_t len;

	if (t)
		return pack_trk(m, t, meta, pk);
	if (st_coll_status_get(m->coll, name, &buf, &len, NULL) == 0) {
		int rc = kind_meta_pack_raw(pk, buf, len, meta);
		free(buf);
		return rc;
	}
	st_pod_t p;
	if (st_coll_get(m->coll, name, &p, NULL) < 0)
		return tank_error_set(e, TANK_ENOTFOUND, "playbook \"%s\" not found", name);
	int rc = msgpack_pack_map(pk, 5 + kind_meta_n(meta));
	rc |= kind_pack_str(pk, "name");       rc |= kind_pack_str(pk, name);
	rc |= kind_pack_str(pk, "kind");       rc |= kind_pack_str(pk, "playbook");
	rc |= kind_pack_str(pk, "phase");      rc |= kind_pack_str(pk, "pending");
	rc |= kind_pack_str(pk, "reason");     rc |= kind_pack_str(pk, "not started yet");
	rc |= kind_pack_str(pk, "generation"); rc |= msgpack_pack_uint64(pk, p.generation);
	st_pod_clear(&p);
	return rc ? -ENOMEM : kind_meta_pack(pk, meta);
}

/* Told the keys of the playbooks' collection that changed, right after
 * their commit (the api's delete): a deleted playbook is never listed
 * again, so its deletion is seen here, not by the loop's resync. */
static void pb_watch(void *ctx, const char *const *keys, size_t n)
{
	playbook_mgr_t *m = ctx;
	st_pod_t p;

	for (size_t i = 0; i < n; i++) {
		if (st_coll_get(m->coll, keys[i], &p, NULL) == 0) {
			st_pod_clear(&p);
			continue;
		}
		pb_deleted(m, keys[i], NULL);
	}
}

int playbook_mgr_open(kind_env_t *env, playbook_mgr_t **out, tank_error_t *e)
{
	playbook_mgr_t *m = calloc(1, sizeof *m);
	int err;

	if (!m)
		return -ENOMEM;
	m->env = env;
	tank_map_init(&m->pbs);
	if ((err = st_coll_open(env->store, &playbook_coll_decl, &m->coll, e)) < 0) {
		free(m);
		return err;
	}
	if ((m->watch = st_coll_watch(m->coll, pb_watch, m)) < 0) {
		free(m);
		return tank_error_set(e, -ENOMEM, "out of memory");
	}
	*out = m;
	return 0;
}

void playbook_mgr_close(playbook_mgr_t *m)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (!m)
		return;
	if (m->watch > 0)
		(void)st_coll_unwatch(m->coll, m->watch);
	while (tank_map_next(&m->pbs, &it, &k, &v))
		trk_free(v);
	tank_map_destroy(&m->pbs);
	free(m);
}
