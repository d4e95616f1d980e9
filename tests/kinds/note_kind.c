/*
 * note_kind — a test kind, end to end, in this folder only (the "Show
 * it" of issue 32, docs/architecture.md "Adding a kind"): a Note is a
 * line of text that becomes `ready` once the loop has seen it, or
 * `failed` when it says `fail: true`.
 *
 *   kind: Note
 *   name: hello
 *   text: hi there
 *   fail: false          # optional
 *
 * Everything a kind is: its names (note/notes/nt), its manifest
 * validator, its collection ("notes"), its canonical encoding, its status
 * map, its table, how a wait observes it, its manager on the loop (a
 * transition table: pending → ready | failed, and back to pending when
 * the spec changes), its history and its events.  It is registered only
 * in the test build of tankd and tankctl (tests/kinds/kinds_test.c: the
 * shipped list plus one line).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kit_errors.h"
#include "common/tank_kinds.h"
#include "common/tank_map.h"
#include "kinds/kind.h"
#include "reconciler/rc_fsm.h"

#define NOTE_TEXT_MAX 200

extern const kind_t note_kind;

typedef struct note {
	char name[ST_NAME_MAX + 1];
	char text[NOTE_TEXT_MAX + 1];
	bool fail;
} note_t;

/* ---- spec: validation, canonical encoding ---------------------------------------- */

static bool str_of(const msgpack_object *o, char *buf, size_t cap)
{
	if (!o || o->type != MSGPACK_OBJECT_STR || !o->via.str.size || o->via.str.size >= cap)
		return false;
	memcpy(buf, o->via.str.ptr, o->via.str.size);
	buf[o->via.str.size] = '\0';
	return true;
}

static bool name_ok(const char *s)
{
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			return false;
	return s[0] != '\0';
}

/* From a manifest object (its `kind` removed) or the stored bytes:
 * `generation`, `uid` and `status` (what `get` adds) are ignored. */
static int note_from(const msgpack_object *o, note_t **out, kit_errors_t *errs)
{
	note_t *n;
	size_t before = errs->count;

	*out = NULL;
	if (!o || o->type != MSGPACK_OBJECT_MAP) {
		kit_errors_add(errs, "a note is a map");
		return TANK_EINVALID;
	}
	if (!(n = calloc(1, sizeof *n)))
		return -ENOMEM;
	if (!str_of(kind_map_get(o, "name"), n->name, sizeof n->name) || !name_ok(n->name))
		kit_errors_add(errs, "name: required, [a-z0-9-]+");
	if (!str_of(kind_map_get(o, "text"), n->text, sizeof n->text))
		kit_errors_add(errs, "%s: text: required, a string of 1 to %d bytes",
			       n->name[0] ? n->name : "?", NOTE_TEXT_MAX);
	const msgpack_object *f = kind_map_get(o, "fail");
	if (f && f->type != MSGPACK_OBJECT_BOOLEAN && f->type != MSGPACK_OBJECT_NIL)
		kit_errors_add(errs, "%s: fail: expected a boolean", n->name);
	n->fail = f && f->type == MSGPACK_OBJECT_BOOLEAN && f->via.boolean;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;
		static const char *const known[] = { "name", "text", "fail", "generation", "uid",
						     "created_at", "status", NULL };
		bool ok = false;
		for (size_t j = 0; known[j] && k->type == MSGPACK_OBJECT_STR; j++)
			ok |= k->via.str.size == strlen(known[j]) &&
			      !memcmp(k->via.str.ptr, known[j], k->via.str.size);
		if (!ok)
			kit_errors_add(errs, "%s: unknown field", n->name[0] ? n->name : "?");
	}
	if (errs->count > before) {
		free(n);
		return TANK_EINVALID;
	}
	*out = n;
	return 0;
}

static int note_validate(const msgpack_object *o, void **obj, const char **name,
			 kit_errors_t *errs)
{
	note_t *n;
	int err = note_from(o, &n, errs);
	if (err < 0)
		return err;
	*obj = n;
	*name = n->name;
	return 0;
}

static const mf_kind_t note_mf = { .name = "Note", .validate = note_validate, .free_obj = free };

static int note_encode(const void *obj, char **buf, size_t *len)
{
	const note_t *n = obj;
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	int rc = msgpack_pack_map(&pk, 3);
	rc |= kind_pack_str(&pk, "name"); rc |= kind_pack_str(&pk, n->name);
	rc |= kind_pack_str(&pk, "text"); rc |= kind_pack_str(&pk, n->text);
	rc |= kind_pack_str(&pk, "fail");
	rc |= n->fail ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	if (rc) {
		msgpack_sbuffer_destroy(&sb);
		return -ENOMEM;
	}
	*buf = sb.data;             /* the sbuffer's malloc'ed bytes, handed over */
	*len = sb.size;
	return 0;
}

static const char *note_name_of(const void *obj)
{
	return ((const note_t *)obj)->name;
}

static int note_decode(const st_pod_t *p, note_t **out)
{
	msgpack_unpacked u;
	size_t off = 0;
	kit_errors_t errs;
	int err = TANK_ECORRUPT;

	*out = NULL;
	kit_errors_init(&errs);
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, p->spec, p->spec_len, &off) == MSGPACK_UNPACK_SUCCESS)
		err = note_from(&u.data, out, &errs);
	msgpack_unpacked_destroy(&u);
	kit_errors_free(&errs);
	return err;
}

static const st_coll_decl_t note_coll = { .name = "notes", .noun = "note" };

/* ---- the manager: pending → ready | failed ---------------------------------------- */

enum { NP_PENDING, NP_READY, NP_FAILED, NP_COUNT };
enum { NE_SEEN, NE_REFUSED, NE_CHANGED, NE_COUNT };

static const char *const note_phases[NP_COUNT] = { "pending", "ready", "failed" };
static const char *const note_events[NE_COUNT] = { "seen", "refused", "changed" };
static const rc_fsm_edge_t note_edges[] = {
	{ NP_PENDING, NE_SEEN, NP_READY },
	{ NP_PENDING, NE_REFUSED, NP_FAILED },
	{ NP_READY, NE_CHANGED, NP_PENDING },
	{ NP_FAILED, NE_CHANGED, NP_PENDING },
};
static const rc_fsm_t note_fsm = {
	.kind = "note", .phases = note_phases, .nphases = NP_COUNT,
	.events = note_events, .nevents = NE_COUNT,
	.edges = note_edges, .nedges = sizeof note_edges / sizeof note_edges[0],
};

typedef struct note_trk {
	char name[ST_NAME_MAX + 1];
	char uid[ST_UID_LEN + 1];
	uint64_t generation, seen;      /* stored; last reconciled */
	note_t *spec;
	rc_fsm_state_t st;
} note_trk_t;

typedef struct note_mgr {
	kind_env_t *env;
	st_coll_t *coll;
	tank_map_t notes;
} note_mgr_t;

static int note_enqueue(void *ctx, const st_pod_t *p)
{
	return rc_enqueue(ctx, TANK_KIND_TEST, p->name) < 0 ? -ENOMEM : 0;
}

/* The stored notes and the tracked ones (a deleted one is forgotten). */
static int note_list(void *ctx, rc_loop_t *loop)
{
	note_mgr_t *m = ctx;
	const char *name;
	size_t it = 0;

	while (tank_map_next(&m->notes, &it, &name, NULL))
		rc_enqueue(loop, TANK_KIND_TEST, name);
	return st_coll_scan(m->coll, note_enqueue, loop, NULL);
}

static void note_forget(note_mgr_t *m, note_trk_t *t)
{
	tank_map_del(&m->notes, t->name);
	free(t->spec);
	rc_fsm_clear(&t->st);
	free(t);
}

static int note_observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	note_mgr_t *m = ctx;
	note_trk_t *t = tank_map_get(&m->notes, key);
	st_pod_t p;

	(void)loop;
	if (st_coll_get(m->coll, key, &p, NULL) < 0) {
		if (t)
			note_forget(m, t);
		return TANK_ENOTFOUND;
	}
	if (t && strcmp(t->uid, p.uid) != 0) {
		note_forget(m, t);      /* deleted and created again: a new object */
		t = NULL;
	}
	if (!t) {
		if (!(t = calloc(1, sizeof *t)) || tank_map_put(&m->notes, key, t, NULL) < 0) {
			free(t);
			st_pod_clear(&p);
			return -ENOMEM;
		}
		snprintf(t->name, sizeof t->name, "%s", key);
		snprintf(t->uid, sizeof t->uid, "%s", p.uid);
		rc_fsm_restore(&t->st, NP_PENDING, 0, "not reconciled yet");
	}
	if (t->generation != p.generation || !t->spec) {
		note_t *n = NULL;
		if (note_decode(&p, &n) == 0) {
			free(t->spec);
			t->spec = n;
		}
		t->generation = p.generation;
	}
	st_pod_clear(&p);
	view->obj = t;
	return 0;
}

static int note_put_status(note_mgr_t *m, const note_trk_t *t)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	int rc = msgpack_pack_map(&pk, 8);
	rc |= kind_pack_str(&pk, "name");       rc |= kind_pack_str(&pk, t->name);
	rc |= kind_pack_str(&pk, "kind");       rc |= kind_pack_str(&pk, "note");
	rc |= kind_pack_str(&pk, "phase");
	rc |= kind_pack_str(&pk, rc_fsm_phase_name(&note_fsm, t->st.phase));
	rc |= kind_pack_str(&pk, "reason");     rc |= kind_pack_str(&pk, rc_fsm_reason(&t->st));
	rc |= kind_pack_str(&pk, "text");
	rc |= kind_pack_str(&pk, t->spec ? t->spec->text : "");
	rc |= kind_pack_str(&pk, "generation"); rc |= msgpack_pack_uint64(&pk, t->generation);
	rc |= kind_pack_str(&pk, "uid");        rc |= kind_pack_str(&pk, t->uid);
	rc |= kind_pack_str(&pk, "since");      rc |= msgpack_pack_int64(&pk, t->st.since);
	if (!rc)
		rc = st_coll_status_put(m->coll, t->name, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return rc ? -ENOMEM : 0;
}

static rc_result_t note_reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	note_mgr_t *m = ctx;
	note_trk_t *t = view->obj;

	if (t->seen == t->generation)
		return rc_converged();
	if (t->st.phase != NP_PENDING)
		rc_fsm_apply(loop, TANK_KIND_TEST, t->name, &note_fsm, &t->st, NE_CHANGED,
			     "spec changed");
	if (!t->spec)
		rc_fsm_apply(loop, TANK_KIND_TEST, t->name, &note_fsm, &t->st, NE_REFUSED,
			     "stored spec unreadable");
	else if (t->spec->fail)
		rc_fsm_apply(loop, TANK_KIND_TEST, t->name, &note_fsm, &t->st, NE_REFUSED,
			     "asked to fail");
	else
		rc_fsm_apply(loop, TANK_KIND_TEST, t->name, &note_fsm, &t->st, NE_SEEN,
			     "written");
	t->seen = t->generation;
	if (note_put_status(m, t) < 0)
		return rc_failed(-ENOMEM, "status not queued");
	return rc_converged();
}

static const rc_manager_t note_manager = {
	.kind = TANK_KIND_TEST,
	.name = "note",
	.list = note_list,
	.observe = note_observe,
	.reconcile = note_reconcile,
};

/* {type: "note", note, from, to, reason, at, generation} */
static int note_pack_event(msgpack_packer *pk, const void *arg)
{
	const rc_transition_t *t = ((const void *const *)arg)[0];
	const note_trk_t *n = ((const void *const *)arg)[1];
	int rc = msgpack_pack_map(pk, 7);
	rc |= kind_pack_str(pk, "type");       rc |= kind_pack_str(pk, "note");
	rc |= kind_pack_str(pk, "note");       rc |= kind_pack_str(pk, t->key);
	rc |= kind_pack_str(pk, "from");       rc |= kind_pack_str(pk, t->from);
	rc |= kind_pack_str(pk, "to");         rc |= kind_pack_str(pk, t->to);
	rc |= kind_pack_str(pk, "reason");     rc |= kind_pack_str(pk, t->reason ? t->reason : "");
	rc |= kind_pack_str(pk, "at");         rc |= msgpack_pack_int64(pk, (int64_t)t->at_ms);
	rc |= kind_pack_str(pk, "generation");
	rc |= msgpack_pack_uint64(pk, n ? n->generation : 0);
	return rc ? -ENOMEM : 0;
}

static void note_record(void *inst, const rc_transition_t *t)
{
	note_mgr_t *m = inst;
	st_transition_t tr;

	memset(&tr, 0, sizeof tr);
	tr.at = (int64_t)t->at_ms;
	snprintf(tr.from, sizeof tr.from, "%s", t->from);
	snprintf(tr.to, sizeof tr.to, "%s", t->to);
	snprintf(tr.reason, sizeof tr.reason, "%s", t->reason ? t->reason : "");
	(void)st_coll_history_add(m->coll, t->key, &tr);
	const void *arg[2] = { t, tank_map_get(&m->notes, t->key) };
	if (m->env->publish)
		m->env->publish(m->env->publish_ctx, note_pack_event, arg);
}

static int note_open(kind_env_t *env, void **inst, tank_error_t *e)
{
	note_mgr_t *m = calloc(1, sizeof *m);
	int err;

	if (!m)
		return -ENOMEM;
	m->env = env;
	tank_map_init(&m->notes);
	if ((err = st_coll_open(env->store, &note_coll, &m->coll, e)) < 0) {
		free(m);
		return err;
	}
	*inst = m;
	return 0;
}

static void note_close(void *inst)
{
	note_mgr_t *m = inst;
	const char *name;
	void *v;
	size_t it = 0;

	while (tank_map_next(&m->notes, &it, &name, &v)) {
		note_trk_t *t = v;
		free(t->spec);
		rc_fsm_clear(&t->st);
		free(t);
	}
	tank_map_destroy(&m->notes);
	free(m);
}

/* ---- reading: status, table, waits ------------------------------------------------- */

static int note_pack_status(const kind_env_t *env, const st_pod_t *p, msgpack_packer *pk,
			    unsigned flags)
{
	kind_meta_t meta;
	st_coll_t *c;
	void *buf;
	size_t len;
	int rc;

	if ((rc = kind_coll(env, &note_kind, &c, NULL)) < 0)
		return rc;
	/* `status` wants the object's created_at and labels in its map. */
	size_t nmeta = kind_meta_of(p, flags, &meta);
	if (st_coll_status_get(c, p->name, &buf, &len, NULL) == 0) {
		rc = kind_meta_pack_raw(pk, buf, len, &meta);
		free(buf);
		return rc;
	}
	rc = msgpack_pack_map(pk, 5 + nmeta);
	rc |= kind_pack_str(pk, "name");       rc |= kind_pack_str(pk, p->name);
	rc |= kind_pack_str(pk, "kind");       rc |= kind_pack_str(pk, "note");
	rc |= kind_pack_str(pk, "phase");      rc |= kind_pack_str(pk, "pending");
	rc |= kind_pack_str(pk, "reason");     rc |= kind_pack_str(pk, "not reconciled yet");
	rc |= kind_pack_str(pk, "generation"); rc |= msgpack_pack_uint64(pk, p->generation);
	return rc ? -ENOMEM : kind_meta_pack(pk, &meta);
}

static int note_observe_wait(const void *obj, const msgpack_object *s, const char *want,
			     rc_observed_t *out)
{
	char phase[32], reason[128];

	(void)obj; (void)want;
	memset(out, 0, sizeof *out);
	if (!s || s->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	kind_str(kind_map_get(s, "phase"), phase, sizeof phase);
	kind_str(kind_map_get(s, "reason"), reason, sizeof reason);
	out->progress = tank_hash64(phase, strlen(phase));
	out->state = !strcmp(phase, "ready") ? RC_OBS_DONE
		   : !strcmp(phase, "failed") ? RC_OBS_FAILED : RC_OBS_PENDING;
	snprintf(out->why, sizeof out->why, "%s: %s", phase, reason);
	return 0;
}

static void c_str(const msgpack_object *s, const char *key, char *out, size_t cap)
{
	if (!kind_str(kind_map_get(s, key), out, cap) || !out[0])
		snprintf(out, cap, "-");
}

static void c_text(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	c_str(s, "text", out, cap);
}

const kind_t note_kind = {
	.id = TANK_KIND_TEST,
	.name = "note", .plural = "notes", .short_name = "nt",
	.mf = &note_mf,
	.coll = &note_coll,
	.encode = note_encode,
	.name_of = note_name_of,
	.get_with_status = true,
	.pack_status = note_pack_status,
	.observe = note_observe_wait,
	.cols = { { "NAME", kind_col_name }, { "PHASE", kind_col_phase }, { "TEXT", c_text },
		  { "AGE", kind_col_age } },
	.ncols = 4,
	.open = note_open,
	.close = note_close,
	.managers = { &note_manager },
	.record = note_record,
};
