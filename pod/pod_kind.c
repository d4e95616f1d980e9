/*
 * pod_kind.c — the Pod kind's descriptor.  See pod_kind.h.
 */
#include "pod/pod_kind.h"
#include "pod/pod_methods.h"
#include "pod/pod_top.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/tank_kinds.h"
#include "common/tank_map.h"
#include "pod/pod_adopt.h"
#include "pod/pod_deps.h"
#include "pod/pod_host.h"
#include "pod/pod_manifest.h"
#include "pod/pod_mgr.h"
#include "pod/pod_observe.h"
#include "pod/pod_phase.h"
#include "pod/pod_probe.h"
#include "pod/pod_req.h"
#include "pod/pod_spec.h"

static const char *pod__name_of(const void *obj)
{
	return ((const pod_spec_t *)obj)->name;
}

static int pod__encode(const void *obj, char **buf, size_t *len)
{
	return pod_spec_encode(obj, buf, len);
}

/* The pods of the batch (given and inline), in batch order: malloc'ed.
 * With where: also where each is in the request (kind_item_where), in
 * *where (malloc'ed, one block with the strings). */
static pod_spec_t **pod__specs(const kind_batch_t *b, size_t *n, char ***where)
{
	pod_spec_t **s = calloc(b->n + 1, sizeof *s);
	*n = 0;
	for (size_t i = 0; s && i < b->n; i++)
		if (b->items[i].kind == &pod_kind)
			s[(*n)++] = b->items[i].obj;
	if (!s || !where)
		return s;
	/* Only when a pod depends on something: a batch of 30,000 pods
	 * without depends_on does not pay for 30,000 strings. */
	bool any = false;
	for (size_t i = 0; i < *n && !any; i++)
		any = s[i]->dep_count > 0;
	*where = NULL;
	if (!any)
		return s;
	char **w = malloc(*n * (sizeof *w + KIND_WHERE_MAX) + 1);
	if (!w) {
		free(s);
		return NULL;
	}
	char *text = (char *)(w + *n);
	for (size_t i = 0, m = 0; i < b->n; i++)
		if (b->items[i].kind == &pod_kind) {
			w[m] = text + m * KIND_WHERE_MAX;
			kind_item_where(&b->items[i], w[m], KIND_WHERE_MAX);
			m++;
		}
	*where = w;
	return s;
}

/* What the host can tell of each pod (missing paths, commands, users:
 * pod_host.h), given or brought inline, after kind_item_where's
 * "pods[<at>]: " or "stacks[<at>]: <stack>: pods[<k>]: ", then "<pod>: …".  Here,
 * in tankd, not in the manifest's validation: tankctl validates the same
 * manifest on any machine. */
static void pod__check_item(const kind_env_t *env, const kind_item_t *it, kit_errors_t *errs)
{
	kit_errors_t one;
	char prefix[KIND_WHERE_MAX];

	(void)env;
	kit_errors_init(&one);
	kind_item_where(it, prefix, sizeof prefix);
	if (pod_host_check(it->obj, &one))
		kit_errors_move(errs, &one, prefix);
	kit_errors_free(&one);
}

/* depends_on needs the whole batch and the store: checked in the same
 * turn as the commit, so no other apply comes between. */
static int pod__check(const kind_env_t *env, const kind_batch_t *b, kit_errors_t *errs,
		      tank_error_t *e)
{
	size_t n;
	char **where = NULL;
	pod_spec_t **s = pod__specs(b, &n, &where);
	int err;

	if (!s)
		return -ENOMEM;
	err = pod_deps_check(s, (const char *const *)where, n, env->store, errs, e);
	free(where);
	free(s);
	return err;
}

/* Running out of descriptors or pids is tankd's problem, not its
 * containers': an apply whose pods would need more than the host allows
 * tankd is refused whole with the figures (pod_host_fit raises what tankd
 * may raise first), instead of accepted and then failing starts with
 * EMFILE or EAGAIN.  Counted against the pods tracked now and the ones
 * stored that the loop has not taken up yet (pod_mgr_ncontainers_ahead):
 * a pod the batch replaces counts once, with its new containers; new
 * processes are the containers added beyond the ones replaced. */
static int pod__admit(const kind_env_t *env, const kind_batch_t *b, tank_error_t *e)
{
	size_t now, ctrs, replaced = 0, added = 0;
	char group[512];

	if (!env->pods)
		return 0;
	now = ctrs = pod_mgr_ncontainers(env->pods, NULL);
	for (size_t i = 0; i < b->n; i++) {
		if (b->items[i].kind != &pod_kind)
			continue;
		const pod_spec_t *s = b->items[i].obj;
		size_t old = pod_mgr_ncontainers(env->pods, s->name);
		ctrs += s->container_count;
		replaced += old;
		added += s->container_count > old ? s->container_count - old : 0;
	}
	/* A name twice in the batch (refused earlier) must not wrap around. */
	ctrs = replaced < ctrs ? ctrs - replaced : 0;
	if (ctrs <= now && !added)
		return 0;
	/* What earlier applies stored and the loop has not taken up yet
	 * (an apply right after another): needed as much as what runs.  A
	 * walk of the store, so only while the loop may be behind it: with
	 * 100,000 pods stored it would hold the loop about 0.1 s an apply. */
	if (!pod_mgr_caught_up(env->pods)) {
		tank_map_t names;
		tank_map_init(&names);
		for (size_t i = 0; i < b->n; i++)
			if (b->items[i].kind == &pod_kind &&
			    tank_map_put(&names, ((const pod_spec_t *)b->items[i].obj)->name,
					 (void *)b->items[i].obj, NULL) < 0) {
				tank_map_destroy(&names);
				return -ENOMEM;
			}
		ctrs += pod_mgr_ncontainers_ahead(env->pods, &names);
		tank_map_destroy(&names);
	}
	pod_mgr_pids_group(env->pods, group, sizeof group);
	/* The pidfds held for orphans count while they are held. */
	return pod_host_fit(ctrs, added, pod_adopt_pidfds(env->adopt), group, e);
}

/* ---- status ---------------------------------------------------------------------- */

static int pk_key(msgpack_packer *pk, const char *k)
{
	return kind_pack_str(pk, k);
}

static int pack_exit(msgpack_packer *pk, const st_exit_t *x)
{
	int rc;
	if (!x->present)
		return msgpack_pack_nil(pk);
	rc = msgpack_pack_map(pk, 2);
	rc |= pk_key(pk, "code");
	rc |= msgpack_pack_int32(pk, x->code);
	rc |= pk_key(pk, "signal");
	rc |= msgpack_pack_int32(pk, x->signal);
	return rc;
}

static int pack_opt_ms(msgpack_packer *pk, int64_t v)
{
	return v ? msgpack_pack_int64(pk, v) : msgpack_pack_nil(pk);
}

/* The kinds that own pods (their `children` is Pod). */
static size_t pod__owners(const kind_env_t *env)
{
	size_t n = 0;
	for (size_t i = 0; env && env->kinds && env->kinds[i]; i++)
		n += env->kinds[i]->children == &pod_kind && env->kinds[i]->owner_of;
	return n;
}

/* The kinds that add a column to pods' tables (their `adds_to` is Pod). */
static size_t pod__adders(const kind_env_t *env)
{
	size_t n = 0;
	for (size_t i = 0; env && env->kinds && env->kinds[i]; i++)
		n += env->kinds[i]->adds_to == &pod_kind && env->kinds[i]->adds_value;
	return n;
}

int pod_kind_pack_status(const kind_env_t *env, msgpack_packer *pk, const st_status_t *s,
			 const kind_meta_t *meta)
{
	int rc = msgpack_pack_map(pk, 15 + pod__owners(env) + pod__adders(env) + kind_meta_n(meta));
	/* Each adding kind's key: its text about the pod, or nil. */
	for (size_t i = 0; env && env->kinds && env->kinds[i]; i++) {
		const kind_t *k = env->kinds[i];
		char val[128];
		if (k->adds_to != &pod_kind || !k->adds_value)
			continue;
		rc |= pk_key(pk, k->name);
		rc |= k->adds_value(env, s->name, val, sizeof val) ? kind_pack_str(pk, val)
								   : msgpack_pack_nil(pk);
	}
	rc |= pk_key(pk, "name");            rc |= kind_pack_str(pk, s->name);
	/* How a terminal pod ended (decisions read this, never the reason). */
	rc |= pk_key(pk, "outcome");
	rc |= s->outcome ? kind_pack_str(pk, pod_outcome_name(s->outcome)) : msgpack_pack_nil(pk);
	/* Each owner kind's key: the object the pod is in (the contract's
	 * `stack`), or nil. */
	for (size_t i = 0; env && env->kinds && env->kinds[i]; i++) {
		const kind_t *k = env->kinds[i];
		if (k->children != &pod_kind || !k->owner_of)
			continue;
		void *inst = kind_inst(env, k);
		const char *own = inst ? k->owner_of(inst, s->name) : NULL;
		rc |= pk_key(pk, k->name);
		rc |= own ? kind_pack_str(pk, own) : msgpack_pack_nil(pk);
	}
	rc |= pk_key(pk, "ready");           rc |= s->ready ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	/* Its owner does not let it run (a stack that is down): nothing
	 * of it should run, and a wait takes that as converged. */
	rc |= pk_key(pk, "held");            rc |= s->held ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	/* The operator stopped it (tankctl stop): kept until started. */
	rc |= pk_key(pk, "stopped");         rc |= s->stopped ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	rc |= pk_key(pk, "uid");             rc |= kind_pack_str(pk, s->uid);
	rc |= pk_key(pk, "phase");           rc |= kind_pack_str(pk, s->phase);
	rc |= pk_key(pk, "reason");          rc |= kind_pack_str(pk, s->reason);
	rc |= pk_key(pk, "retries");         rc |= msgpack_pack_uint32(pk, s->retries);
	rc |= pk_key(pk, "restarts");        rc |= msgpack_pack_uint32(pk, s->restarts);
	rc |= pk_key(pk, "generation");      rc |= msgpack_pack_uint64(pk, s->generation);
	rc |= pk_key(pk, "since");           rc |= pack_opt_ms(pk, s->since);
	rc |= pk_key(pk, "next_restart_at"); rc |= pack_opt_ms(pk, s->next_restart_at);
	rc |= pk_key(pk, "last_exit");       rc |= pack_exit(pk, &s->last_exit);
	rc |= pk_key(pk, "containers");
	rc |= msgpack_pack_array(pk, s->n_containers);
	for (size_t i = 0; i < s->n_containers; i++) {
		const st_container_status_t *c = &s->containers[i];
		rc |= msgpack_pack_map(pk, 13);
		rc |= pk_key(pk, "name");       rc |= kind_pack_str(pk, c->name);
		rc |= pk_key(pk, "ready");      rc |= c->ready ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
		rc |= pk_key(pk, "probe");
		rc |= c->probe[0] ? kind_pack_str(pk, c->probe) : msgpack_pack_nil(pk);
		rc |= pk_key(pk, "phase");      rc |= kind_pack_str(pk, c->phase);
		rc |= pk_key(pk, "reason");     rc |= kind_pack_str(pk, c->reason);
		rc |= pk_key(pk, "pid");
		rc |= c->pid > 0 ? msgpack_pack_int32(pk, c->pid) : msgpack_pack_nil(pk);
		rc |= pk_key(pk, "restarts");   rc |= msgpack_pack_uint32(pk, c->restarts);
		rc |= pk_key(pk, "retries");    rc |= msgpack_pack_uint32(pk, c->retries);
		rc |= pk_key(pk, "last_exit");  rc |= pack_exit(pk, &c->last_exit);
		rc |= pk_key(pk, "started_at"); rc |= pack_opt_ms(pk, c->started_at);
		rc |= pk_key(pk, "log_dropped"); rc |= msgpack_pack_uint64(pk, c->log_dropped);
		rc |= pk_key(pk, "probe_until"); rc |= pack_opt_ms(pk, c->probe_until);
		/* The probe that gave up on its last run ("startup",
		 * "liveness"), or nil: a wait fails on a startup that gave up. */
		rc |= pk_key(pk, "gave_up");
		rc |= c->gave_up && c->gave_up <= POD_PROBE_ROLES
		      ? kind_pack_str(pk, pod_probe_role_name((enum pod_probe_role)(c->gave_up - 1)))
		      : msgpack_pack_nil(pk);
	}
	return rc ? -ENOMEM : kind_meta_pack(pk, meta);
}

/* The status of a pod that is stored but has none yet. */
static void pending_status(st_status_t *s, const st_pod_t *p)
{
	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", p->name);
	snprintf(s->uid, sizeof s->uid, "%s", p->uid);
	snprintf(s->phase, sizeof s->phase, "pending");
	snprintf(s->reason, sizeof s->reason, "not reconciled yet");
	s->generation = p->generation;
	s->since = p->updated_at;
}

static int pod__pack_status(const kind_env_t *env, const st_pod_t *rec, msgpack_packer *pk,
			    unsigned flags)
{
	kind_meta_t meta;
	st_status_t s;
	int err;

	memset(&s, 0, sizeof s);
	if ((err = st_status_get(env->store, rec->name, &s, NULL)) == TANK_ENOTFOUND)
		pending_status(&s, rec);        /* stored, not reconciled yet */
	else if (err < 0)
		return err;
	kind_meta_of(rec, flags, &meta);
	err = pod_kind_pack_status(env, pk, &s, &meta);
	st_status_clear(&s);
	return err;
}

/* A pod's status, also while it is being deleted (no longer stored, its
 * status not yet forgotten: nothing to add then); pending when stored
 * but not reconciled. */
static int pod__status_one(const kind_env_t *env, const char *name, msgpack_packer *pk,
			   unsigned flags, tank_error_t *e)
{
	kind_meta_t meta;
	st_status_t s;
	st_pod_t p;
	int err;

	memset(&s, 0, sizeof s);
	memset(&p, 0, sizeof p);
	if ((err = st_status_get(env->store, name, &s, e)) == TANK_ENOTFOUND) {
		if ((err = st_pod_get(env->store, name, &p, e)) == 0)
			pending_status(&s, &p);
	} else if (err == 0 && (flags & KIND_STATUS_META) &&
		   st_pod_get(env->store, name, &p, NULL) < 0) {
		memset(&p, 0, sizeof p);
	}
	if (err < 0)
		return err;
	kind_meta_of(p.name[0] ? &p : NULL, flags, &meta);
	err = pod_kind_pack_status(env, pk, &s, &meta);
	st_status_clear(&s);
	st_pod_clear(&p);
	return err;
}

/* `status []` streams: the stored pods without a status (right after an
 * apply, a few) are collected as pending, then every status is packed in
 * name order as the store walks them, one unpacked at a time, with the
 * pending ones merged in at their place.  It unpacked every status into
 * one array first (1.2 KB a pod: 1.2 MB at 1,000, fresh pages at each
 * call, 120 MB at 100,000).
 *
 * With KIND_STATUS_META the walk of the stored pods, which that merge
 * takes anyway, also keeps each pod's created_at and labels (the labels'
 * bytes, rarely any, copied: the walk borrows the records for its
 * callback only) in name order, so that each status finds its own by
 * stepping along, not by a lookup: a status with no stored pod (being
 * deleted) is passed by, as the pending ones are packed. */
#define MERGE_HAS_STATUS SIZE_MAX

typedef struct merge_pod {
	size_t name;            /* offset in merge_t.text */
	size_t labels, labels_len;   /* in text; labels_len 0: none */
	int64_t created_at;
	size_t pend;            /* index in merge_t.pend; MERGE_HAS_STATUS: none */
} merge_pod_t;

typedef struct merge {
	const kind_env_t *env;
	msgpack_packer *pk;
	unsigned flags;
	st_status_t *pend;      /* sorted: the pods walk in name order */
	size_t npend, cap;
	merge_pod_t *pods;      /* the pending, and with META every stored pod */
	size_t npods, cap_pods, at;
	char *text;             /* names and labels */
	size_t ntext, cap_text;
} merge_t;

/* Appends len bytes to m->text: their offset, or (size_t)-1 on -ENOMEM. */
static size_t merge_text(merge_t *m, const void *b, size_t len)
{
	if (m->cap_text - m->ntext < len) {
		size_t nc = m->cap_text ? m->cap_text : 4096;
		while (nc - m->ntext < len)
			nc *= 2;
		char *t = realloc(m->text, nc);
		if (!t)
			return (size_t)-1;
		m->text = t;
		m->cap_text = nc;
	}
	memcpy(m->text + m->ntext, b, len);
	m->ntext += len;
	return m->ntext - len;
}

static int merge_pending(void *ctx, const st_pod_t *p)
{
	merge_t *m = ctx;
	bool has = st_status_has(m->env->store, p->name);
	kind_meta_t meta;

	if (has && !(m->flags & KIND_STATUS_META))
		return 0;
	if (!has && m->npend == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 16;
		st_status_t *no = realloc(m->pend, nc * sizeof *no);
		if (!no)
			return -ENOMEM;
		m->pend = no;
		m->cap = nc;
	}
	if (m->npods == m->cap_pods) {
		size_t nc = m->cap_pods ? m->cap_pods * 2 : 16;
		merge_pod_t *np = realloc(m->pods, nc * sizeof *np);
		if (!np)
			return -ENOMEM;
		m->pods = np;
		m->cap_pods = nc;
	}
	merge_pod_t *mp = &m->pods[m->npods];
	kind_meta_of(p, m->flags, &meta);
	memset(mp, 0, sizeof *mp);
	mp->created_at = meta.created_at;
	mp->pend = has ? MERGE_HAS_STATUS : m->npend;
	if ((mp->name = merge_text(m, p->name, strlen(p->name) + 1)) == (size_t)-1)
		return -ENOMEM;
	if (meta.labels) {
		if ((mp->labels = merge_text(m, meta.labels, meta.labels_len)) == (size_t)-1)
			return -ENOMEM;
		mp->labels_len = meta.labels_len;
	}
	if (!has)
		pending_status(&m->pend[m->npend++], p);
	m->npods++;
	return 0;
}

static void merge_meta(const merge_t *m, const merge_pod_t *mp, kind_meta_t *meta)
{
	memset(meta, 0, sizeof *meta);
	if (!(m->flags & KIND_STATUS_META))
		return;
	meta->created_at = mp->created_at;
	if (mp->labels_len) {
		meta->labels = m->text + mp->labels;
		meta->labels_len = mp->labels_len;
	}
}

/* Packs the pending pods named before `before` (NULL: all that are
 * left), passing those that have a status. */
static int merge_flush(merge_t *m, const char *before)
{
	kind_meta_t meta;
	int rc = 0;

	while (!rc && m->at < m->npods &&
	       (!before || strcmp(m->text + m->pods[m->at].name, before) < 0)) {
		const merge_pod_t *mp = &m->pods[m->at++];
		if (mp->pend == MERGE_HAS_STATUS)
			continue;
		merge_meta(m, mp, &meta);
		rc = pod_kind_pack_status(m->env, m->pk, &m->pend[mp->pend], &meta);
	}
	return rc;
}

static int merge_status(void *ctx, const st_status_t *s)
{
	merge_t *m = ctx;
	kind_meta_t meta = { 0 };
	int rc = merge_flush(m, s->name);

	if (rc)
		return rc;
	if (m->at < m->npods && !strcmp(m->text + m->pods[m->at].name, s->name))
		merge_meta(m, &m->pods[m->at++], &meta);
	return pod_kind_pack_status(m->env, m->pk, s, &meta);
}

/* Every stored pod is listed: those the reconciler has not reached yet
 * (right after an apply) as pending, and those being deleted while they
 * still have a status. */
static int pod__status_all(const kind_env_t *env, msgpack_packer *pk, unsigned flags,
			   tank_error_t *e)
{
	merge_t m = { .env = env, .pk = pk, .flags = flags };
	tank_error_t ce;
	int rc;

	tank_error_clear(&ce);
	size_t n = st_status_count(env->store, &ce);
	if (ce.code)
		return tank_error_set(e, ce.code, "%s", ce.msg);
	if ((rc = st_pod_foreach(env->store, merge_pending, &m, e)) == 0)
		rc = msgpack_pack_array(pk, n + m.npend) ? -ENOMEM : 0;
	if (rc == 0)
		rc = st_status_foreach(env->store, merge_status, &m, e);
	if (rc == 0)
		rc = merge_flush(&m, NULL);
	free(m.pend);
	free(m.pods);
	free(m.text);
	return rc;
}

/* ---- apply --wait ------------------------------------------------------------------ */

/* pod_observe's reading (its probe windows judged at the wall clock),
 * and the spec's rules:
 *   - a run-once pod (restart never or on_failure) converges only when it
 *     completed; seen running it is still pending (its failure, even
 *     0.3 s after it started, is a failure of the wait), and moving: it
 *     is doing what it was asked to;
 *   - a pod waiting for its depends_on waits on those pods (the wait
 *     resolves them: one that progresses is progress, one failed or
 *     missing leaves it blocked). */
static int pod__observe(const void *obj, const msgpack_object *s, const char *want,
			rc_observed_t *out)
{
	const pod_spec_t *spec = obj;
	struct timespec ts;
	int err;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (want && !strcmp(want, "stop")) {
		/* Done when nothing of it runs: phase stopped. */
		char ph[32] = "", why[160] = "";
		memset(out, 0, sizeof *out);
		if (!s || s->type != MSGPACK_OBJECT_MAP)
			return -EINVAL;
		kind_str(kind_map_get(s, "phase"), ph, sizeof ph);
		kind_str(kind_map_get(s, "reason"), why, sizeof why);
		int p = rc_fsm_phase_of(&pod_fsm, ph);
		out->state = p == POD_PP_STOPPED ? RC_OBS_DONE : RC_OBS_PENDING;
		out->moving = p == POD_PP_STOPPING;
		out->progress = tank_hash64(ph, strlen(ph)) ^ tank_hash64(why, strlen(why));
		snprintf(out->why, sizeof out->why, "%s%s%s", ph, why[0] ? ": " : "", why);
		return 0;
	}
	if ((err = pod_observe_status_at(s, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
					 out)) < 0)
		return err;
	if (spec && spec->restart != POD_RESTART_ALWAYS && out->state == RC_OBS_READY) {
		out->state = RC_OBS_PENDING;
		out->moving = true;
		snprintf(out->why, sizeof out->why, "running (restart %s: done when it completes)",
			 pod_restart_name(spec->restart));
	}
	char phase[32] = "";
	kind_str(kind_map_get(s, "phase"), phase, sizeof phase);
	if (spec && out->state == RC_OBS_PENDING &&
	    rc_fsm_phase_of(&pod_fsm, phase) == POD_PP_WAITING)
		for (size_t i = 0; i < spec->dep_count && out->nwaits < RC_OBS_WAITS_MAX; i++)
			out->waits_on[out->nwaits++] = spec->deps[i].pod;
	return 0;
}

/* ---- the `ps` table ------------------------------------------------------------------ */

static void c_restarts(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(s, "restarts", out, cap, "0");
}

/* The pod's reason; a running pod that is not ready and says nothing
 * else shows its first unready container's probe result ("c: readiness:
 * failed: HTTP 404"), which only `describe` showed. */
static void c_reason(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	const msgpack_object *cs = kind_map_get(s, "containers");
	const msgpack_object *rd = kind_map_get(s, "ready");
	char name[POD_NAME_MAX + 1], probe[160];

	(void)now;
	kind_cell(s, "reason", out, cap, "");
	if (out[0] || !rd || rd->type != MSGPACK_OBJECT_BOOLEAN || rd->via.boolean || !cs ||
	    cs->type != MSGPACK_OBJECT_ARRAY)
		return;
	for (uint32_t k = 0; k < cs->via.array.size; k++) {
		const msgpack_object *c = &cs->via.array.ptr[k];
		const msgpack_object *cr = kind_map_get(c, "ready");
		if (cr && cr->type == MSGPACK_OBJECT_BOOLEAN && !cr->via.boolean &&
		    kind_str(kind_map_get(c, "probe"), probe, sizeof probe) && probe[0] &&
		    kind_str(kind_map_get(c, "name"), name, sizeof name)) {
			snprintf(out, cap, "%s: %s", name, probe);
			return;
		}
	}
}

/* READY counts containers whose `ready` is true: running and past their
 * readiness probe (tankd before probes sent no `ready`: running counts). */
static void c_ready(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	const msgpack_object *cs = kind_map_get(s, "containers");
	uint32_t total = 0, running = 0;
	char ph[32];

	(void)now;
	if (cs && cs->type == MSGPACK_OBJECT_ARRAY) {
		total = cs->via.array.size;
		for (uint32_t k = 0; k < total; k++) {
			const msgpack_object *c = &cs->via.array.ptr[k];
			const msgpack_object *rd = kind_map_get(c, "ready");
			if (rd && rd->type == MSGPACK_OBJECT_BOOLEAN)
				running += rd->via.boolean;
			else
				running += kind_str(kind_map_get(c, "phase"), ph, sizeof ph) &&
					   rc_fsm_phase_of(&pod_ctr_fsm, ph) == POD_CP_RUNNING;
		}
	}
	snprintf(out, cap, "%u/%u", running, total);
}

/* The first container with a live process: a pod whose first container
 * ended while others run still shows a pid. */
static void c_pid(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	const msgpack_object *cs = kind_map_get(s, "containers");
	(void)now;
	snprintf(out, cap, "-");
	for (uint32_t k = 0; cs && cs->type == MSGPACK_OBJECT_ARRAY && k < cs->via.array.size; k++) {
		int64_t p;
		if (kind_int(kind_map_get(&cs->via.array.ptr[k], "pid"), &p) && p > 0) {
			snprintf(out, cap, "%" PRId64, p);
			return;
		}
	}
}

/* ---- daemon ------------------------------------------------------------------------- */

/* ---- events ------------------------------------------------------------------------ */

/* nil rather than "" for an absent string: a subscriber can tell "no
 * container" (a pod transition) from a container named "". */
static int pack_str_or_nil(msgpack_packer *pk, const char *s)
{
	return s ? kind_pack_str(pk, s) : msgpack_pack_nil(pk);
}

/* What every pod event starts with (type, pod, container) and ends with
 * (at, generation, uid). */
static int pack_head(msgpack_packer *pk, size_t keys, const char *type, const pod_event_t *ev)
{
	int rc = msgpack_pack_map(pk, keys);
	rc |= kind_pack_str(pk, "type");
	rc |= kind_pack_str(pk, type);
	rc |= kind_pack_str(pk, "pod");
	rc |= pack_str_or_nil(pk, ev->pod);
	rc |= kind_pack_str(pk, "container");
	rc |= pack_str_or_nil(pk, ev->container);
	return rc;
}

static int pack_tail(msgpack_packer *pk, const pod_event_t *ev)
{
	int rc = kind_pack_str(pk, "at");
	rc |= msgpack_pack_int64(pk, ev->at);
	rc |= kind_pack_str(pk, "generation");
	rc |= msgpack_pack_uint64(pk, ev->generation);
	rc |= kind_pack_str(pk, "uid");
	rc |= pack_str_or_nil(pk, ev->uid && ev->uid[0] ? ev->uid : NULL);
	return rc;
}

int pod_event_pack(msgpack_packer *pk, const pod_event_t *ev)
{
	int rc;

	if (ev->probe) {
		rc = pack_head(pk, 8, "probe", ev);
		rc |= kind_pack_str(pk, "result");
		rc |= kind_pack_str(pk, ev->probe);
		rc |= kind_pack_str(pk, "ready");
		rc |= ev->ready ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	} else {
		rc = pack_head(pk, POD_EVENT_TRANSITION_KEYS, "transition", ev);
		rc |= kind_pack_str(pk, "from");
		rc |= pack_str_or_nil(pk, ev->from);
		rc |= kind_pack_str(pk, "to");
		rc |= pack_str_or_nil(pk, ev->to);
		rc |= kind_pack_str(pk, "reason");
		rc |= pack_str_or_nil(pk, ev->reason);
	}
	rc |= pack_tail(pk, ev);
	/* msgpack-c's packers fail only when the write callback does, and
	 * the sbuffer's only failure is a failed realloc. */
	return rc ? -ENOMEM : 0;
}

static int pod__pack_ev(msgpack_packer *pk, const void *arg)
{
	return pod_event_pack(pk, arg);
}

/* The pod manager's news, out on the events stream (env outlives the
 * pod manager: both are the daemon's). */
static void pod__on_event(void *ctx, const pod_event_t *ev)
{
	const kind_env_t *env = ctx;
	env->publish(env->publish_ctx, pod__pack_ev, ev);
}

static int pod__open(kind_env_t *env, void **inst, tank_error_t *e)
{
	(void)e;
	*inst = env->pods;
	if (env->pods && env->publish)
		pod_mgr_set_events(env->pods, pod__on_event, env);
	return 0;
}

static void pod__record(void *inst, const rc_transition_t *t)
{
	pod_mgr_record(inst, t);
}

/* `top [POD]`: CPU and memory of the running containers (pod/pod_top.h).
 * A pod's is answered now (fn), every pod's, and a pod's while tankd
 * settles after a reexec, later (pod_top_later). */
static bool pod__top_name(const msgpack_object *params, char *name, size_t cap)
{
	name[0] = '\0';
	return !params->via.array.size || kind_str(&params->via.array.ptr[0], name, cap);
}

static int pod__v_top(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		      tank_error_t *e)
{
	char name[POD_NAME_MAX + 1];

	if (!env->pods)
		return tank_error_set(e, TANK_ENOTFOUND, "no pods here");
	if (!pod__top_name(params, name, sizeof name) || !name[0])
		return tank_error_set(e, TANK_EINVALID, "params[0]: expected a pod's name");
	return pod_top_pack(env->pods, name, pk, e);
}

static int pod__v_top_later(const kind_env_t *env, const msgpack_object *params,
			    const kind_reply_t *r, tank_error_t *e)
{
	char name[POD_NAME_MAX + 1];
	int rc;

	if (!env->pods || !pod__top_name(params, name, sizeof name) ||
	    pod_top_now(env->pods, name))
		return 1;
	if ((rc = pod_top_later(env->pods, env->rt, name, r)) < 0)
		return tank_error_set(e, rc, "top: %s", strerror(-rc));
	return 0;
}

static void c_cpu(const msgpack_object *s, uint64_t now_ms, char *out, size_t cap)
{
	const msgpack_object *v = kind_map_get(s, "cpu_percent");
	(void)now_ms;
	if (v && (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32))
		snprintf(out, cap, "%.1f%%", v->via.f64);
	else
		snprintf(out, cap, "-");
}

static void c_mem(const msgpack_object *s, uint64_t now_ms, char *out, size_t cap)
{
	int64_t b = -1;
	(void)now_ms;
	if (!kind_int(kind_map_get(s, "memory"), &b) || b < 0)
		snprintf(out, cap, "-");
	else if (b >= 1 << 30)
		snprintf(out, cap, "%.1fGi", (double)b / (1 << 30));
	else if (b >= 1 << 20)
		snprintf(out, cap, "%.1fMi", (double)b / (1 << 20));
	else
		snprintf(out, cap, "%.1fKi", (double)b / 1024);
}

static const kind_col_t top_cols[] = {
	{ "POD", NULL, "pod" }, { "CONTAINER", NULL, "container" }, { "PID", NULL, "pid" },
	{ "CPU", c_cpu, NULL }, { "MEMORY", c_mem, NULL }, { "PROCS", NULL, "procs" },
};

/* ---- verbs: stop, start ------------------------------------------------------ */

/* The operator's stop or start: a request to the loop (pod_req.h), which
 * stores it in the pod's status; the api answers behind an echo of the
 * loop (kind_verb_t), so the answer tells of a stored stop. */
static int pod__stopstart(const kind_env_t *env, const msgpack_object *params,
			  msgpack_packer *pk, tank_error_t *e, bool stop)
{
	pod_req_t q;
	st_pod_t p;
	int err;

	memset(&q, 0, sizeof q);
	kind_str(&params->via.array.ptr[0], q.pod, sizeof q.pod);
	if ((err = kind_get(env, &pod_kind, q.pod, &p, e)) < 0)
		return err == TANK_ENOTFOUND
		       ? tank_error_set(e, err, "pod \"%s\" not found", q.pod) : err;
	snprintf(q.uid, sizeof q.uid, "%s", p.uid);
	st_pod_clear(&p);
	rt_pid_t loop = rt_whereis(env->rt, env->loop_name);
	if (!loop)
		return tank_error_set(e, -ESRCH, "reconciler is not running");
	q.op = stop ? POD_REQ_STOP_POD : POD_REQ_START_POD;
	snprintf(q.user, sizeof q.user, "tankctl %s", stop ? "stop" : "start");
	if ((err = pod_req_send(env->rt, loop, &q)) < 0)
		return tank_error_set(e, err, "cannot reach the reconciler: %s", tank_strerror(err));
	int rc = msgpack_pack_map(pk, 3);
	rc |= kind_pack_str(pk, "kind");   rc |= kind_pack_str(pk, "pod");
	rc |= kind_pack_str(pk, "name");   rc |= kind_pack_str(pk, q.pod);
	rc |= kind_pack_str(pk, "action"); rc |= kind_pack_str(pk, stop ? "stopped" : "started");
	return rc ? -ENOMEM : 0;
}

static int pod__v_stop(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		       tank_error_t *e)
{
	return pod__stopstart(env, params, pk, e, true);
}

static int pod__v_start(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
			tank_error_t *e)
{
	return pod__stopstart(env, params, pk, e, false);
}

static const kind_verb_t pod__verbs[] = {
	{ "stop", "s?m", pod__v_stop, "[KIND] NAME... | KIND/NAME... [--wait [--timeout DURATION]] | [KIND] -l SELECTOR",
	  "Stops a pod without deleting it: its containers stop (stop signal, then\n"
	  "SIGKILL after their grace) and stay stopped, its phase is `stopped`.  It\n"
	  "is kept in the store: a restart of tankd and a re-apply of its manifest\n"
	  "leave it stopped (systemctl's stopped unit) until `start` (or `restart`).\n"
	  "--wait: until nothing of it runs.  NAME...: each, one stop after\n"
	  "another; -l SELECTOR: every pod whose labels match (neither with --wait).",
	  .flags = KIND_VERB_KINDED },
	{ "start", "s?m", pod__v_start, "[KIND] NAME... | KIND/NAME... [--wait [--timeout DURATION]] | [KIND] -l SELECTOR",
	  "Starts a pod stopped by `stop` (its containers run again, with their\n"
	  "restart counts kept).  --wait: as apply --wait.  NAME...: each, one\n"
	  "start after another; -l SELECTOR: every pod whose labels match\n"
	  "(neither with --wait).", .flags = KIND_VERB_KINDED },
	{ "top", "?s", pod__v_top, "[POD] [--no-headers] [-o yaml|json]",
	  "CPU and memory of the running containers (of POD, or of every pod):\n"
	  "CPU is the container's CPU time over its time running (100% = one CPU\n"
	  "busy since it started, as ps's %CPU), MEMORY what its cgroup is charged\n"
	  "(or its processes' resident memory without one), from cgroups v2 or v1.",
	  .words = "top", .flags = KIND_VERB_DOC | KIND_VERB_ANY, .cols = top_cols,
	  .ncols = sizeof top_cols / sizeof top_cols[0], .later = pod__v_top_later },
};

/* The probes' results and durations by probe kind (pod_probe_stats):
 * every kind of probe and result is written, zeros included, so a rate()
 * has a series from the first scrape. */
static void pod__metrics(const kind_env_t *env, const kind_metrics_t *w)
{
	pod_probe_stats_t st;

	(void)env;
	pod_probe_stats(&st);
	w->family(w->ctx, "tank_probe_total", "counter",
		  "Probe runs ended, by probe kind (exec, tcp, http) and result.");
	for (unsigned k = POD_PROBE_EXEC; k < POD_PROBE_KINDS; k++)
		for (unsigned r = 0; r < POD_PROBE_RESULTS; r++)
			w->sample(w->ctx, "tank_probe_total", (const char *const[]){
					  "probe", pod_probe_kind_word(k),
					  "result", pod_probe_result_word(r), NULL },
				  (double)st.runs[k][r]);
	w->family(w->ctx, "tank_probe_skipped_total", "counter",
		  "Probe runs not started when due: the descriptors tankd keeps for "
		  "probe runs in flight were all taken (targets that do not answer).");
	for (unsigned k = POD_PROBE_TCP; k < POD_PROBE_KINDS; k++)
		w->sample(w->ctx, "tank_probe_skipped_total", (const char *const[]){
				  "probe", pod_probe_kind_word(k), NULL },
			  (double)st.skipped[k]);
	w->family(w->ctx, "tank_probe_duration_seconds", "histogram",
		  "How long each probe run took, start to result, by probe kind.");
	for (unsigned k = POD_PROBE_EXEC; k < POD_PROBE_KINDS; k++)
		w->hist(w->ctx, "tank_probe_duration_seconds",
			(const char *const[]){ "probe", pod_probe_kind_word(k), NULL },
			&st.seconds[k]);
}

static const rc_wait_t *pod__reconcile_wait(const void *obj)
{
	return &((const pod_spec_t *)obj)->reconcile_wait;
}

const kind_t pod_kind = {
	.id = TANK_KIND_POD,
	.name = "pod", .plural = "pods", .short_name = "po",
	.mf = &pod_mf_kind,
	.coll = NULL,
	.encode = pod__encode,
	.name_of = pod__name_of,
	.check = pod__check,
	.check_item = pod__check_item,
	.admit = pod__admit,
	.pack_status = pod__pack_status,
	.status_one = pod__status_one,
	.status_all = pod__status_all,
	.observe = pod__observe,
	.reconcile_wait = pod__reconcile_wait,
	.verbs = pod__verbs,
	.nverbs = sizeof pod__verbs / sizeof pod__verbs[0],
	.methods = pod_methods,
	.nmethods = POD_NMETHODS,
	.cmds = pod_cmds,
	.ncmds = POD_NCMDS,
	.cols = {
		{ "NAME", kind_col_name }, { "PHASE", kind_col_phase }, { "READY", c_ready },
		{ "RESTARTS", c_restarts }, { "AGE", kind_col_age }, { "PID", c_pid },
		{ "REASON", c_reason },
	},
	.ncols = 7,
	.metrics = pod__metrics,
	.open = pod__open,
	.managers = { &pod_manager, &pod_ctr_manager },
	.record = pod__record,
};
