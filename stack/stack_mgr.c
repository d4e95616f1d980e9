/*
 * stack_mgr — the Stack kind's manager.  See stack_mgr.h for the contract.
 */
#include "stack/stack_mgr.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kit.h"
#include "common/kit_frame.h"
#include "common/tank_map.h"
#include "reconciler/rc_fsm.h"
#include "stack/stack_phase.h"
#include "stack/stack_spec.h"

#define K_STACK TANK_KIND_STACK

/* The history's rate limit for readiness flips (as journald's
 * RateLimitBurst in RateLimitIntervalSec): STACK_FLAP_BURST changes
 * between starting, up and degraded a window are written; the rest are
 * counted and written as one entry at the window's end, and a window
 * that had to count holds every change of the next one too. */
#define STACK_FLAP_WINDOW_MS 10000
#define STACK_FLAP_BURST 10

/* What each link of a stop chain costs beyond its grace (see stop_ms). */
#define STACK_STOP_STEP_MS 150

const st_coll_decl_t stack_coll_decl = { .name = "stacks", .noun = "stack" };

typedef struct stack_trk {
	char name[POD_NAME_MAX + 1];
	stack_spec_t *spec;           /* NULL: deleted (forgotten at its reconcile) */
	char *bad;                    /* its stored spec could not be decoded */
	uint64_t generation;
	char uid[ST_UID_LEN + 1];
	rc_fsm_state_t st;
	bool run;                     /* what its pods were last told */
	char run_why[RC_REASON_MAX];  /* why not, when run is false */
	bool told;                    /* run was told at least once */
	uint8_t first_waits;          /* first looks put off: its pods were
				       * being adopted (a restarted tankd) */
	bool aborted;                 /* on_failure: abort fired for this generation */
	char abort_why[RC_REASON_MAX];
	char last_failure[RC_REASON_MAX];   /* on_failure: continue */
	/* How long stopping its pods may take: dependents stop first,
	 * each within its grace, so the longest dependency chain's sum of
	 * graces, plus STACK_STOP_STEP_MS a link (the loop's turns, the
	 * kill and the reaping).  A deadline starts the stop that much
	 * before it. */
	uint64_t stop_ms;
	uint64_t chain_ms;            /* the same chain's graces alone */
	bool rushed;                  /* told to stop with less time left than
				       * chain_ms: its pods stop at once */
	uint64_t status_hash;         /* of the last status queued */
	/* What its last status said beyond the tracking (rewritten as is
	 * when a request changes the tracking between reconciles). */
	size_t ready;
	int64_t next_at;
	char waiting_for[RC_REASON_MAX];
	/* The members its decision was last told to (names, owned): a
	 * pod that joins hears it even when the decision stays the same,
	 * and one that leaves is looked at again (released). */
	char (*told_pods)[POD_NAME_MAX + 1];
	size_t ntold;
	/* Flapping (a readiness probe that flips every few ms): changes
	 * between starting, up and degraded beyond STACK_FLAP_BURST in a
	 * window of STACK_FLAP_WINDOW_MS are counted, not written, and the
	 * window's end writes one entry for them (stack__flap_close). */
	int64_t flap_start;           /* the window's start (ms) */
	uint32_t flap_n;              /* entries written in it */
	uint32_t flap_held;           /* changes counted in it, not written */
	bool flapping;                /* the last window held some: this one
				       * holds every change */
	int64_t flap_last_at;
	char flap_from[ST_PHASE_MAX + 1], flap_to[ST_PHASE_MAX + 1];
	char flap_reason[RC_REASON_MAX];
} stack_trk_t;

struct stack_mgr {
	stack_mgr_opts_t o;
	st_coll_t *coll;
	int watch;
	tank_map_t stacks;            /* name -> stack_trk_t */
	tank_map_t member;            /* pod name -> stack_trk_t (borrowed) */
};

__attribute__((format(printf, 3, 4)))
static void stack__fmt(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dst, cap, fmt, ap);
	va_end(ap);
}

static void stack__stop_chain(stack_mgr_t *m, stack_trk_t *t);

/* ---- membership ----------------------------------------------------------- */

static void stack__unlink(stack_mgr_t *m, stack_trk_t *t)
{
	for (size_t i = 0; t->spec && i < t->spec->npods; i++)
		if (tank_map_get(&m->member, t->spec->pods[i].name) == t)
			tank_map_del(&m->member, t->spec->pods[i].name);
}

static int stack__link(stack_mgr_t *m, stack_trk_t *t)
{
	for (size_t i = 0; t->spec && i < t->spec->npods; i++)
		if (tank_map_put(&m->member, t->spec->pods[i].name, t, NULL) < 0)
			return -ENOMEM;
	return 0;
}

/* Whether the members t's decision was last told to are not its members
 * now. */
static bool stack__members_moved(const stack_trk_t *t)
{
	size_t n = t->spec ? t->spec->npods : 0;

	if (n != t->ntold)
		return true;
	for (size_t i = 0; i < n; i++)
		if (strcmp(t->told_pods[i], t->spec->pods[i].name) != 0)
			return true;
	return false;
}

/* Queues every pod that was or is a member of t, and remembers the
 * members now as told.  A pod that left is released: its next reconcile
 * asks the owner again, and it is not held any more. */
static void stack__tell_members(stack_trk_t *t, rc_loop_t *loop)
{
	size_t n = t->spec ? t->spec->npods : 0;

	for (size_t i = 0; i < t->ntold; i++)
		rc_enqueue(loop, TANK_KIND_POD, t->told_pods[i]);
	for (size_t i = 0; i < n; i++)
		rc_enqueue(loop, TANK_KIND_POD, t->spec->pods[i].name);
	free(t->told_pods);
	t->told_pods = n ? calloc(n, sizeof *t->told_pods) : NULL;
	t->ntold = t->told_pods ? n : 0;     /* out of memory: told again next time */
	for (size_t i = 0; i < t->ntold; i++)
		snprintf(t->told_pods[i], sizeof t->told_pods[i], "%s", t->spec->pods[i].name);
}

/* Loads (or reloads) one stored stack; a missing one is marked deleted. */
static int stack__load(stack_mgr_t *m, const char *name)
{
	stack_trk_t *t = tank_map_get(&m->stacks, name);
	st_pod_t rec;
	tank_error_t e;
	int rc;

	if ((rc = st_coll_get(m->coll, name, &rec, &e)) == TANK_ENOTFOUND) {
		if (t) {
			stack__unlink(m, t);
			stack_spec_free(t->spec);
			t->spec = NULL;
			free(t->bad);          /* deleted, not broken: forgotten */
			t->bad = NULL;
		}
		return 0;
	}
	if (rc < 0)
		return rc;
	if (!t) {
		if (!(t = calloc(1, sizeof *t)) || tank_map_put(&m->stacks, name, t, NULL) < 0) {
			free(t);
			st_pod_clear(&rec);
			return -ENOMEM;
		}
		snprintf(t->name, sizeof t->name, "%s", name);
		rc_fsm_restore(&t->st, STACK_PP_DOWN, 0, "created");
	}
	stack_spec_t *spec = NULL;
	rc = stack_spec_decode(rec.spec, rec.spec_len, &spec, &e);
	stack__unlink(m, t);
	stack_spec_free(t->spec);
	free(t->bad);
	t->bad = NULL;
	t->spec = spec;
	if (rc < 0 && rc != -ENOMEM && !(t->bad = strdup(e.msg)))
		rc = -ENOMEM;
	if (rc == -ENOMEM) {
		st_pod_clear(&rec);
		return rc;
	}
	if (strcmp(rec.uid, t->uid) != 0) {
		/* Another object under the name (deleted and created again
		 * before the loop forgot the old one): it starts afresh. */
		rc_fsm_restore(&t->st, STACK_PP_DOWN, 0, "created");
		t->told = t->run = false;
		t->status_hash = 0;
	}
	if (rec.generation != t->generation || strcmp(rec.uid, t->uid) != 0) {
		/* A new version: an abort of the old one is over. */
		t->aborted = false;
		t->last_failure[0] = '\0';
	}
	t->generation = rec.generation;
	snprintf(t->uid, sizeof t->uid, "%s", rec.uid);
	st_pod_clear(&rec);
	return stack__link(m, t);
}

static void stack__watch(void *ctx, const char *const *keys, size_t n)
{
	stack_mgr_t *m = ctx;

	/* The API's apply or delete, right after its commit: the pod index
	 * is current before the loop looks at any pod of it.  A failed read
	 * is picked up by the next resync (list reloads). */
	for (size_t i = 0; i < n; i++)
		(void)stack__load(m, keys[i]);
}

/* ---- stored status ------------------------------------------------------- */

static void stack__str(const msgpack_object *o, char *dst, size_t cap)
{
	if (o && o->type == MSGPACK_OBJECT_STR && cap) {
		size_t n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
		memcpy(dst, o->via.str.ptr, n);
		dst[n] = '\0';
	}
}

/* A restarted tankd goes on from the stored phase, and an abort holds. */
static void stack__restore(stack_mgr_t *m, stack_trk_t *t)
{
	void *buf;
	size_t len;
	msgpack_unpacked u;
	tank_error_t e;
	char phase[ST_PHASE_MAX + 1] = "", reason[RC_REASON_MAX] = "";

	if (st_coll_status_get(m->coll, t->name, &buf, &len, &e) < 0)
		return;
	if (kit_frame_unpack(buf, len, &u) == 0 && u.data.type == MSGPACK_OBJECT_MAP) {
		const msgpack_object *o = &u.data, *v;
		stack__str(kit_lookup(o, "phase"), phase, sizeof phase);
		stack__str(kit_lookup(o, "reason"), reason, sizeof reason);
		int p = rc_fsm_phase_of(&stack_fsm, phase);
		int64_t since = (v = kit_lookup(o, "since")) &&
				v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)v->via.u64 : 0;
		if (p >= 0)
			rc_fsm_restore(&t->st, (uint8_t)p, since, reason);
		if ((v = kit_lookup(o, "aborted")) && v->type == MSGPACK_OBJECT_STR &&
		    (v = kit_lookup(o, "generation")) &&
		    v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 == t->generation) {
			t->aborted = true;
			stack__str(kit_lookup(o, "aborted"), t->abort_why, sizeof t->abort_why);
		}
	}
	msgpack_unpacked_destroy(&u);
	free(buf);
}

static int pk_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	int rc = msgpack_pack_str(pk, n);
	return rc ? rc : msgpack_pack_str_body(pk, s, n);
}

/* Queues the status map when it changed. */
static void stack__persist(stack_mgr_t *m, stack_trk_t *t, size_t ready, int64_t next_at,
			   const char *waiting_for)
{
	t->ready = ready;
	t->next_at = next_at;
	snprintf(t->waiting_for, sizeof t->waiting_for, "%s", waiting_for ? waiting_for : "");
	msgpack_sbuffer sb;
	msgpack_packer pk;
	const stack_spec_t *s = t->spec;
	int rc;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	rc = msgpack_pack_map(&pk, 11 + (t->aborted ? 1 : 0) + (next_at ? 1 : 0) +
				   (waiting_for ? 1 : 0)) ||
	     pk_str(&pk, "name") || pk_str(&pk, t->name) ||
	     pk_str(&pk, "kind") || pk_str(&pk, "stack") ||
	     pk_str(&pk, "phase") || pk_str(&pk, rc_fsm_phase_name(&stack_fsm, t->st.phase)) ||
	     pk_str(&pk, "reason") || pk_str(&pk, rc_fsm_reason(&t->st)) ||
	     pk_str(&pk, "since") || msgpack_pack_int64(&pk, t->st.since) ||
	     pk_str(&pk, "generation") || msgpack_pack_uint64(&pk, t->generation) ||
	     pk_str(&pk, "uid") || pk_str(&pk, t->uid) ||
	     pk_str(&pk, "desired") || pk_str(&pk, stack_desired_name(s->desired)) ||
	     pk_str(&pk, "on_failure") || pk_str(&pk, stack_on_failure_name(s->on_failure)) ||
	     pk_str(&pk, "ready") || msgpack_pack_uint64(&pk, ready) ||
	     pk_str(&pk, "total") || msgpack_pack_uint64(&pk, s->npods);
	if (!rc && t->aborted)
		rc = pk_str(&pk, "aborted") || pk_str(&pk, t->abort_why);
	if (!rc && next_at)
		rc = pk_str(&pk, "next_at") || msgpack_pack_int64(&pk, next_at);
	if (!rc && waiting_for)
		rc = pk_str(&pk, "waiting_for") || pk_str(&pk, waiting_for);
	uint64_t h = rc ? 0 : tank_hash64(sb.data, sb.size);
	if (!rc && h != t->status_hash &&
	    st_coll_status_put(m->coll, t->name, sb.data, sb.size) == 0)
		t->status_hash = h;
	msgpack_sbuffer_destroy(&sb);
}

/* ---- the owner's hooks ------------------------------------------------------ */

/* Whether t's pods should run at `now`; if not, why. */
static bool stack__should_run(const stack_trk_t *t, int64_t now, char *why, size_t cap,
			      bool *failed)
{
	const stack_spec_t *s = t->spec;
	char at[STACK_TIME_MAX];

	*failed = false;
	if (!s)
		return true;            /* deleted: its pods are released */
	/* Down is what was asked: an aborted stack, or one past its deadline,
	 * taken down by its user is down, not failed (issue 40 item 4). */
	if (s->desired == STACK_DOWN) {
		stack__fmt(why, cap, "stack %s is down (desired: down)", t->name);
		return false;
	}
	if (t->aborted) {
		*failed = true;
		stack__fmt(why, cap, "stack %s aborted: %s", t->name, t->abort_why);
		return false;
	}
	if (s->deadline && now >= s->deadline - (int64_t)t->stop_ms) {
		*failed = now >= s->deadline || t->st.phase != STACK_PP_DOWN;
		stack__fmt(why, cap, "stack %s: deadline %s%s", t->name,
			   stack_time_format(s->deadline, at),
			   now >= s->deadline ? " passed" : " is near (stopping within the grace)");
		return false;
	}
	if (s->start_at && now < s->start_at) {
		stack__fmt(why, cap, "stack %s starts at %s", t->name,
			   stack_time_format(s->start_at, at));
		return false;
	}
	if (s->stop_at && now >= s->stop_at) {
		stack__fmt(why, cap, "stack %s stopped at %s (stop_at)", t->name,
			   stack_time_format(s->stop_at, at));
		return false;
	}
	return true;
}

static bool stack__allows(void *ctx, const char *pod, char *why, size_t cap)
{
	stack_mgr_t *m = ctx;
	const stack_trk_t *t = tank_map_get(&m->member, pod);
	bool failed;

	/* Before the stack's first reconcile its stop chain is not known
	 * yet: a deadline already inside it must not let a pod start. */
	if (t && t->spec && t->spec->deadline && !t->told)
		stack__stop_chain(m, (stack_trk_t *)t);
	if (!t || !stack__should_run(t, (int64_t)rc_wall_ms(), why, cap, &failed))
		return !t;
	/* It should run, but its stack has not told its pods yet (a pod
	 * looked at between the apply of `up` and the stack's reconcile):
	 * the decision they were told holds until then, so that what the
	 * stack does when it comes up again (its ended pods run again, and
	 * their last run's conditions are stale) happens first. */
	if (t->told && !t->run) {
		snprintf(why, cap, "%s", t->run_why);
		return false;
	}
	return true;
}

static int64_t stack__stop_by(void *ctx, const char *pod, bool *rushed)
{
	stack_mgr_t *m = ctx;
	const stack_trk_t *t = tank_map_get(&m->member, pod);

	*rushed = t && t->spec && t->rushed;
	return t && t->spec ? t->spec->deadline : 0;
}

static bool stack__parent(void *ctx, const char *pod, rc_ref_t *out)
{
	stack_mgr_t *m = ctx;
	const stack_trk_t *t = tank_map_get(&m->member, pod);

	if (!t || !t->spec)
		return false;
	out->kind = K_STACK;
	snprintf(out->key, sizeof out->key, "%s", t->name);
	return true;
}

static void stack__changed(void *ctx, rc_loop_t *loop, const char *pod)
{
	stack_mgr_t *m = ctx;
	const stack_trk_t *t = tank_map_get(&m->member, pod);

	if (t)
		rc_enqueue(loop, K_STACK, t->name);
}

/* t->stop_ms and t->chain_ms from its pods now: a pod stops after the
 * members that depend on it (pod manager, depends_on reversed), so the
 * stop of pod i takes its grace plus the longest stop among its
 * dependents.  Members are at most STACK_PODS_MAX: the longest path is
 * found by relaxing every edge at most n times (the graph is acyclic). */
static void stack__stop_chain(stack_mgr_t *m, stack_trk_t *t)
{
	const stack_spec_t *s = t->spec;
	size_t n = s->npods < STACK_PODS_MAX ? s->npods : STACK_PODS_MAX;
	uint64_t grace[STACK_PODS_MAX], chain[STACK_PODS_MAX], raw[STACK_PODS_MAX];
	pod_info_t info[STACK_PODS_MAX];
	uint64_t most = 0, most_raw = 0;

	for (size_t i = 0; i < n; i++) {
		if (!pod_mgr_info(m->o.pods, s->pods[i].name, &info[i]) || !info[i].exists)
			memset(&info[i], 0, sizeof info[i]);
		grace[i] = info[i].grace_ms;
		chain[i] = grace[i] + STACK_STOP_STEP_MS;
		raw[i] = grace[i];
	}
	for (size_t pass = 0; pass < n; pass++) {
		bool moved = false;
		/* Dependent i of member j: j's stop waits for i's. */
		for (size_t i = 0; i < n; i++)
			for (size_t k = 0; k < info[i].ndeps; k++)
				for (size_t j = 0; j < n; j++) {
					if (j == i || strcmp(info[i].deps[k].pod, s->pods[j].name))
						continue;
					if (grace[j] + STACK_STOP_STEP_MS + chain[i] > chain[j]) {
						chain[j] = grace[j] + STACK_STOP_STEP_MS + chain[i];
						moved = true;
					}
					if (grace[j] + raw[i] > raw[j]) {
						raw[j] = grace[j] + raw[i];
						moved = true;
					}
				}
		if (!moved)
			break;
	}
	for (size_t i = 0; i < n; i++) {
		if (chain[i] > most)
			most = chain[i];
		if (raw[i] > most_raw)
			most_raw = raw[i];
	}
	t->stop_ms = most;
	t->chain_ms = most_raw;
}

/* ---- the history's rate limit ------------------------------------------------- */

/* A phase a stack's readiness moves it between (what flaps); ph a phase
 * number of the stack table, or -1. */
static bool stack__live_phase(int ph)
{
	return ph == STACK_PP_STARTING || ph == STACK_PP_UP || ph == STACK_PP_DEGRADED;
}

static void stack__history(stack_mgr_t *m, const char *key, int64_t at, const char *from,
			   const char *to, const char *reason)
{
	st_transition_t tr;

	memset(&tr, 0, sizeof tr);
	tr.at = at;
	snprintf(tr.from, sizeof tr.from, "%s", from);
	snprintf(tr.to, sizeof tr.to, "%s", to);
	snprintf(tr.reason, sizeof tr.reason, "%s", reason ? reason : "");
	(void)st_coll_history_add(m->coll, key, &tr);
}

/* Ends s's flap window when it is over at `now` (or at once with force):
 * the changes it counted become one entry, "flapping: N changes in 10s
 * (last: …)", from the phase before the first to the phase after the
 * last; the next window holds every change while this one had to count. */
static void stack__flap_close(stack_mgr_t *m, stack_trk_t *s, int64_t now, bool force)
{
	if (!force && now < s->flap_start + STACK_FLAP_WINDOW_MS)
		return;
	if (s->flap_held) {
		char r[RC_REASON_MAX];
		stack__fmt(r, sizeof r, "flapping: %u changes in %ds (last: %s)", s->flap_held,
			   STACK_FLAP_WINDOW_MS / 1000,
			   s->flap_reason[0] ? s->flap_reason : s->flap_to);
		stack__history(m, s->name, s->flap_last_at, s->flap_from, s->flap_to, r);
	}
	s->flapping = s->flap_held > 0 && !force;
	s->flap_start = now;
	s->flap_n = s->flap_held = 0;
}

/* When s's flap window must be closed by a timer (it counted changes, or
 * holds them), else 0. */
static int64_t stack__flap_due(const stack_trk_t *s)
{
	return s->flap_held || s->flapping ? s->flap_start + STACK_FLAP_WINDOW_MS : 0;
}

/* Whether pod name is stored (one read of the store's page cache; only
 * for a member the pod manager does not track). */
static bool stack__stored_pod(stack_mgr_t *m, const char *name)
{
	st_pod_t rec;

	if (st_pod_get(m->o.store, name, &rec, NULL) < 0)
		return false;
	st_pod_clear(&rec);
	return true;
}

/* ---- the manager --------------------------------------------------------------- */

static int stack__list(void *ctx, rc_loop_t *loop)
{
	stack_mgr_t *m = ctx;
	const char *name;
	size_t it = 0;

	/* Stacks are few (each holds up to STACK_PODS_MAX pods): one slice. */
	while (tank_map_next(&m->stacks, &it, &name, NULL))
		rc_enqueue(loop, K_STACK, name);
	return 0;
}

static int stack__observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	stack_mgr_t *m = ctx;

	(void)loop;
	return (view->obj = tank_map_get(&m->stacks, key)) ? 0 : TANK_ENOTFOUND;
}

static void stack__event(rc_loop_t *loop, stack_trk_t *t, enum stack_pevent ev,
			 const char *reason)
{
	(void)rc_fsm_apply(loop, K_STACK, t->name, &stack_fsm, &t->st, (uint8_t)ev, reason);
}

/* The stack was deleted: its pods are released (the owned ones went in
 * the same transaction) and it is forgotten. */
static void stack__forget(stack_mgr_t *m, rc_loop_t *loop, stack_trk_t *t)
{
	rc_cancel_requeue(loop, K_STACK, t->name);
	stack__tell_members(t, loop);   /* the released ones are looked at again */
	tank_map_del(&m->stacks, t->name);
	free(t->told_pods);
	free(t->bad);
	rc_fsm_clear(&t->st);
	free(t);
}

static rc_result_t stack__reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	stack_mgr_t *m = ctx;
	stack_trk_t *t = view->obj;
	const stack_spec_t *s = t->spec;
	int64_t now = (int64_t)rc_wall_ms();
	char why[RC_REASON_MAX] = "", first[RC_REASON_MAX] = "";
	size_t ready = 0, busy = 0;
	bool failed_stop, degraded = false;

	if (!s && !t->bad) {
		stack__forget(m, loop, t);
		return rc_converged();
	}
	/* tankd's drain stops every pod; the stack keeps the phase it had
	 * (the next tankd starts from it), rather than "degrading". */
	if (pod_mgr_draining(m->o.pods))
		return rc_converged();
	if (!s) {
		(void)rc_fsm_apply(loop, K_STACK, t->name, &stack_fsm, &t->st, STACK_E_FAIL,
				   t->bad);
		return rc_converged();
	}

	/* A restarted tankd adopts the pods the previous one left running
	 * (pod/pod_adopt.h): the first look waits for that (at most 10 s),
	 * so a stack whose pods kept running stays as it was instead of
	 * "starting (tankd restarted)". */
	if (!t->told && t->first_waits < 100 && (t->st.phase == STACK_PP_UP ||
						  t->st.phase == STACK_PP_DEGRADED)) {
		bool wait = false;
		for (size_t i = 0; i < s->npods && !wait; i++) {
			pod_info_t pi;
			if (pod_mgr_info(m->o.pods, s->pods[i].name, &pi))
				wait = pi.adopting;
			else
				wait = stack__stored_pod(m, s->pods[i].name);
		}
		if (wait) {
			t->first_waits++;
			return rc_requeue_after(100);
		}
	}

	/* What its pods say (status bubbles up). */
	stack__stop_chain(m, t);
	for (size_t i = 0; i < s->npods; i++) {
		pod_info_t pi;
		const char *pod = s->pods[i].name;
		bool tracked = pod_mgr_info(m->o.pods, pod, &pi);
		bool known = tracked && pi.exists;
		if (known && pi.busy)
			busy++;
		if (known && (pi.ready || pi.completed)) {
			ready++;
			continue;
		}
		if (!tracked && stack__stored_pod(m, pod)) {
			/* Applied with the stack, not tracked by the pod
			 * manager yet (its pass has not reached it): pending,
			 * not missing — a stack that just came up is not
			 * degraded by it.  Its tracking queues the stack. */
			if (!first[0])
				stack__fmt(first, sizeof first, "pod %s is pending", pod);
		} else if (!known) {
			if (!degraded || !first[0])
				stack__fmt(first, sizeof first, "pod %s does not exist", pod);
			degraded = true;
		} else if (pi.failed) {
			if (!degraded || !first[0])
				stack__fmt(first, sizeof first, "pod %s failed: %s", pod,
					   pi.reason);
			degraded = true;
		} else if (!first[0] && pi.phase == POD_PP_RUNNING) {
			stack__fmt(first, sizeof first, "pod %s is running, not ready yet", pod);
		} else if (!first[0]) {
			const char *ph = rc_fsm_phase_name(&pod_fsm, pi.phase);
			stack__fmt(first, sizeof first, pi.reason && pi.reason[0]
				   ? "pod %s is %s: %s" : "pod %s is %s", pod, ph, pi.reason);
		}
	}

	/* Cascade: tell the pods when whether they may run changed. */
	bool run = stack__should_run(t, now, why, sizeof why, &failed_stop);
	stack_obs_t obs = {
		.phase = t->st.phase, .run = run, .failed_stop = failed_stop,
		.first_look = !t->told, .all_ready = ready == s->npods,
		.degraded = degraded, .last_failure = t->last_failure[0] != '\0',
		.busy = busy > 0,
	};
	/* Every member hears the decision when it changed and whenever the
	 * membership did: a running pod named into a down stack stops. */
	if (run != t->run || !t->told || stack__members_moved(t)) {
		bool rearm = t->told && run && !t->run;
		t->run = run;
		snprintf(t->run_why, sizeof t->run_why, "%s", run ? "" : why);
		/* Told to stop with less time before its deadline than the
		 * chain needs (applied late, a deadline moved nearer, tankd
		 * was down): its pods stop all at once. */
		t->rushed = !run && s->deadline && s->deadline - now < (int64_t)t->chain_ms;
		t->told = true;
		/* Brought up again (not a restarted tankd's first look: a
		 * completed run-once pod must not run twice). */
		for (size_t i = 0; rearm && i < s->npods; i++)
			pod_mgr_rearm(m->o.pods, loop, s->pods[i].name);
		stack__tell_members(t, loop);
		/* The rearms are stored before they are acted on. */
		if (rearm)
			(void)st_flush(m->o.store, NULL);
	}

	/* The decision is stack_derive's (stack_phase.h); here only the
	 * reasons' text. */
	stack_step_t steps[2];
	size_t nsteps = stack_derive(&obs, steps);
	for (size_t i = 0; i < nsteps; i++) {
		const char *r = "";
		switch (steps[i].why) {
		case STACK_WHY_NONE:         r = ""; break;
		case STACK_WHY_STARTING:     r = "starting"; break;
		case STACK_WHY_RESTARTED:    r = "starting (tankd restarted)"; break;
		case STACK_WHY_FIRST:        r = first; break;
		case STACK_WHY_LAST_FAILURE: r = t->last_failure; break;
		case STACK_WHY_KEEP:         r = rc_fsm_reason(&t->st); break;
		case STACK_WHY_STOP:         r = why; break;
		}
		char cut[RC_REASON_MAX];
		snprintf(cut, sizeof cut, "%s", r);     /* r may be rc_fsm_reason(&t->st) */
		stack__event(loop, t, steps[i].ev, cut);
	}

	/* Schedule triggers: the next time the answer of should_run changes. */
	int64_t next = 0;
	const int64_t at[3] = { s->start_at, s->stop_at,
				s->deadline ? s->deadline - (int64_t)t->stop_ms : 0 };
	for (int i = 0; i < 3; i++)
		if (at[i] > now && (!next || at[i] < next))
			next = at[i];
	if (s->deadline > now && s->deadline - (int64_t)t->stop_ms <= now &&
	    (!next || s->deadline < next))
		next = s->deadline;      /* from "near" to "passed" */
	stack__persist(m, t, ready, next,
		       run && t->st.phase == STACK_PP_STARTING && first[0] ? first : NULL);
	/* A flap window that counted changes is written when it ends, even
	 * if nothing changes after it. */
	stack__flap_close(m, t, now, false);
	int64_t due = stack__flap_due(t);
	int64_t wake = next && (!due || next < due) ? next : due;
	return wake ? rc_requeue_after((uint64_t)(wake > now ? wake - now : 1))
		    : rc_converged();
}

/* A pod of the stack failed for good: abort, or note and continue. */
static void stack__child_failed(void *ctx, rc_loop_t *loop, const char *key,
				const char *child_kind, const char *child_key,
				const char *reason)
{
	stack_mgr_t *m = ctx;
	stack_trk_t *t = tank_map_get(&m->stacks, key);

	(void)loop; (void)child_kind;
	if (!t || !t->spec)
		return;
	if (t->spec->on_failure == STACK_ABORT) {
		if (!t->aborted) {
			t->aborted = true;
			stack__fmt(t->abort_why, sizeof t->abort_why, "pod %s: %s",
				   child_key, reason);
		}
	} else {
		stack__fmt(t->last_failure, sizeof t->last_failure, "pod %s: %s",
			   child_key, reason);
	}
}

/* Requests, by message (stack_mgr_lift).  A lift is stored (the status
 * without `aborted`, committed) before the stack acts on it. */
static void stack__handle(void *ctx, rc_loop_t *loop, rt_msg_t *msg)
{
	stack_mgr_t *m = ctx;
	char name[POD_NAME_MAX + 1];
	stack_trk_t *t;

	if (msg->type != RT_MSG_USER || msg->tag != STACK_MGR_LIFT || !msg->len ||
	    msg->len > sizeof name || ((const char *)msg->data)[msg->len - 1])
		return;
	memcpy(name, msg->data, msg->len);
	if (!(t = tank_map_get(&m->stacks, name)) || !t->spec || !t->aborted)
		return;
	t->aborted = false;
	t->abort_why[0] = '\0';
	t->last_failure[0] = '\0';
	stack__persist(m, t, t->ready, t->next_at, t->waiting_for[0] ? t->waiting_for : NULL);
	/* Its failed pods run again (the reconcile would rearm them when its
	 * decision flips; a kill -9 before that must not lose it): stored
	 * with the lift. */
	for (size_t i = 0; i < t->spec->npods; i++)
		pod_mgr_rearm(m->o.pods, loop, t->spec->pods[i].name);
	/* A commit, no fsync: tankd's death does not lose the page cache. */
	(void)st_flush(m->o.store, NULL);
	rc_enqueue(loop, K_STACK, t->name);
}

const rc_manager_t stack_manager = {
	.kind = TANK_KIND_STACK,
	.name = "stack",
	.list = stack__list,
	.observe = stack__observe,
	.reconcile = stack__reconcile,
	.child_failed = stack__child_failed,
	.handle = stack__handle,
};

/* ---- public ------------------------------------------------------------------------ */

static int stack__load_one(void *ctx, const st_pod_t *rec)
{
	stack_mgr_t *m = ctx;
	int rc = stack__load(m, rec->name);
	stack_trk_t *t = tank_map_get(&m->stacks, rec->name);

	if (rc == 0 && t)
		stack__restore(m, t);
	return rc;
}

int stack_mgr_new(const stack_mgr_opts_t *o, stack_mgr_t **out, tank_error_t *err)
{
	stack_mgr_t *m = calloc(1, sizeof *m);
	int rc;

	*out = NULL;
	if (!m)
		return tank_error_set(err, -ENOMEM, "out of memory");
	m->o = *o;
	tank_map_init(&m->stacks);
	tank_map_init(&m->member);
	if ((rc = st_coll_open(o->store, &stack_coll_decl, &m->coll, err)) < 0 ||
	    (rc = st_coll_scan(m->coll, stack__load_one, m, err)) < 0) {
		stack_mgr_free(m);
		return rc;
	}
	if ((rc = m->watch = st_coll_watch(m->coll, stack__watch, m)) < 0) {
		stack_mgr_free(m);
		return tank_error_set(err, rc, "out of memory");
	}
	pod_owner_t owner = {
		.allows = stack__allows, .parent = stack__parent,
		.changed = stack__changed, .stop_by = stack__stop_by, .ctx = m,
	};
	pod_mgr_set_owner(o->pods, &owner);
	*out = m;
	return 0;
}

void stack_mgr_free(stack_mgr_t *m)
{
	const char *name;
	void *v;
	size_t it = 0;

	if (!m)
		return;
	if (m->watch > 0)
		(void)st_coll_unwatch(m->coll, m->watch);
	if (m->o.pods) {
		pod_owner_t none = { 0 };
		pod_mgr_set_owner(m->o.pods, &none);
	}
	while (tank_map_next(&m->stacks, &it, &name, &v)) {
		stack_trk_t *t = v;
		stack_spec_free(t->spec);
		free(t->told_pods);
		free(t->bad);
		rc_fsm_clear(&t->st);
		free(t);
	}
	tank_map_destroy(&m->stacks);
	tank_map_destroy(&m->member);
	free(m);
}

void stack_mgr_record(stack_mgr_t *m, const rc_transition_t *t)
{
	stack_trk_t *s = tank_map_get(&m->stacks, t->key);
	int64_t at = (int64_t)t->at_ms;

	if (s && stack__live_phase(rc_fsm_phase_of(&stack_fsm, t->from)) &&
	    stack__live_phase(t->to_phase)) {
		stack__flap_close(m, s, at, false);
		if (s->flapping || s->flap_n >= STACK_FLAP_BURST) {
			if (!s->flap_held++)
				snprintf(s->flap_from, sizeof s->flap_from, "%s", t->from);
			snprintf(s->flap_to, sizeof s->flap_to, "%s", t->to);
			snprintf(s->flap_reason, sizeof s->flap_reason, "%s",
				 t->reason ? t->reason : "");
			s->flap_last_at = at;
		} else {
			s->flap_n++;
			stack__history(m, t->key, at, t->from, t->to, t->reason);
		}
	} else {
		/* Anything else (stopping, down, failed) is always written,
		 * after what the window counted so far. */
		if (s && s->flap_held)
			stack__flap_close(m, s, at, true);
		stack__history(m, t->key, at, t->from, t->to, t->reason);
	}
	if (m->o.on_event) {
		stack_event_t ev = {
			.stack = t->key, .from = t->from, .to = t->to,
			.reason = t->reason, .at = at,
			.generation = s ? s->generation : 0,
		};
		m->o.on_event(m->o.event_ctx, &ev);
	}
}

const char *stack_mgr_stack_of(const stack_mgr_t *m, const char *pod)
{
	const stack_trk_t *t = tank_map_get(&m->member, pod);
	return t && t->spec ? t->name : NULL;
}

/* Whether the stored status of name says aborted for its stored generation. */
static bool stack__stored_abort(stack_mgr_t *m, const char *name)
{
	st_pod_t rec;
	void *buf;
	size_t len;
	msgpack_unpacked u;
	bool aborted = false;

	if (st_coll_get(m->coll, name, &rec, NULL) < 0)
		return false;
	if (st_coll_status_get(m->coll, name, &buf, &len, NULL) == 0) {
		if (kit_frame_unpack(buf, len, &u) == 0 && u.data.type == MSGPACK_OBJECT_MAP) {
			const msgpack_object *v = kit_lookup(&u.data, "generation");
			aborted = kit_lookup(&u.data, "aborted") && v &&
				  v->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
				  v->via.u64 == rec.generation;
		}
		msgpack_unpacked_destroy(&u);
		free(buf);
	}
	st_pod_clear(&rec);
	return aborted;
}

bool stack_mgr_lift(stack_mgr_t *m, rt_t *rt, rt_pid_t loop, const char *name)
{
	size_t n = strlen(name);

	if (n > POD_NAME_MAX || !stack__stored_abort(m, name))
		return false;
	return loop && rt_send(rt, loop, STACK_MGR_LIFT, name, n + 1) == 0;
}
