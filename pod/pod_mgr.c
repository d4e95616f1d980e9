/*
 * pod_mgr.c — pod and container managers.
 *
 * want (what the pod asks of a container) is derived, never stored:
 * pod__ctr_want() is true while the pod is desired, its running spec is
 * the desired generation, no restart by hand is under way and the daemon
 * is not shutting down.  Every decision compares that with the observed
 * state (runner alive, terminal, backing off), so any event — an exit, a
 * tick, an apply — just queues the key and the same code decides.
 */
#include "pod/pod_mgr.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <msgpack.h>

#include "common/tank_backoff.h"
#include "common/tank_map.h"
#include "common/tank_set.h"
#include "pod/pod_launch.h"
#include "pod/pod_log.h"
#include "pod/pod_phase.h"
#include "pod/pod_runner.h"
#include "pod/pod_sandbox.h"
#include "pod/pod_spec.h"
#include "reconciler/rc_fsm.h"

#define K_POD TANK_KIND_POD
#define K_CTR TANK_KIND_CONTAINER

typedef struct pod_trk pod_trk_t;

typedef struct pod_ctr {
	pod_trk_t *pod;
	char key[RC_KEY_MAX];         /* "<pod>/<container>" */
	const char *name;             /* into key */
	rc_fsm_state_t st;            /* phase, since, reason */
	rt_pid_t runner;
	pod_proc_t proc;
	bool stop_sent;
	uint32_t restarts, retries;
	st_exit_t last_exit;
	int64_t started_at, next_restart_at;
	bool has_cg;
	pod_cgroup_t cg;
	pod_log_t *log;
	uint64_t log_dropped;         /* lines its log lost, as last reported */
	bool ready;                   /* running, and ready (no readiness probe: running) */
	bool probes;                  /* it has probes: its runner says when it is ready */
	bool probe_ready;             /* what the runner's probes said last */
	char probe[ST_PROBE_MAX + 1]; /* the last probe news ("" = none) */
	/* processes left by a previous tankd */
	bool orphans_checked;         /* its cgroup was looked at */
	bool cg_orphans;              /* its cgroup held processes */
	pid_t orphan;
	uint64_t orphan_start;
	bool once_lost;               /* restart: never, and it was started by a
				       * previous tankd that did not see it end */
	int64_t orphan_deadline;      /* 0: stop signal not sent yet */
} pod_ctr_t;

struct pod_trk {
	char name[POD_NAME_MAX + 1];
	bool desired;
	pod_spec_t *want;             /* desired spec (owned), NULL if deleted */
	uint64_t want_gen;
	char want_uid[ST_UID_LEN + 1];  /* the desired object's identity */
	pod_spec_t *spec;             /* spec the containers run (owned; may == want) */
	uint64_t generation;
	char uid[ST_UID_LEN + 1];     /* the object the containers belong to */
	pod_ctr_t *ctrs;
	size_t nctrs;
	bool has_sb;
	pod_sandbox_t sb;
	bool restart_req;
	bool restart_noted;           /* the request is in the history */
	rc_fsm_state_t st;
	char *fail;                   /* non-NULL: failed as a whole (escalated, or
				       * its stored spec cannot be loaded); owned */
	bool restored;                /* stored status was read */
	st_status_t *saved;           /* stored status, until containers exist:
				       * on the heap, for the first pass only
				       * (a ~450 B record per pod otherwise) */
	uint64_t persisted_sig;       /* pod__status_sig of the last status queued */
	uint64_t seen_pass;           /* the last pass of pod__list that saw it stored */
	bool gated;                   /* a start waits for depends_on (phase waiting) */
	bool was_busy;                /* pod__busy at the last update */
	uint8_t cond;                 /* POD__COND_* that held at the last update */
	bool held;                    /* its owner (a stack) does not let it run */
	char held_why[RC_REASON_MAX];
	uint32_t told_sig;            /* what the owner was last told changed */
};

/* What a dependent may wait for (enum pod_dep_condition, as bits). */
#define POD__COND_STARTED   (1u << POD_DEP_STARTED)
#define POD__COND_READY     (1u << POD_DEP_READY)
#define POD__COND_COMPLETED (1u << POD_DEP_COMPLETED)

/* One dependent of a pod, in pod_mgr_t.rdeps (a tank_set keyed by the
 * hash of its name). */
typedef struct pod_rdep {
	uint64_t key;
	char name[POD_NAME_MAX + 1];
} pod_rdep_t;

struct pod_mgr {
	pod_mgr_opts_t o;
	char *log_dir;
	pod_cgroup_env_t cg_env;
	bool has_cg;
	tank_map_t pods;              /* name -> pod_trk_t */
	size_t nrunning;
	bool shutting_down;
	bool drained_told;
	/* The resync's walk over the stored pods, in slices (pod__list):
	 * its number, whether one is under way, and the last name seen. */
	uint64_t pass;
	bool walking;
	char cursor[POD_NAME_MAX + 1];
	bool sweeping;                /* the pass's cgroup sweep, in slices */
	pod_cgroup_sweep_t sweep;
	bool marking;                 /* the pass's end: unseen pods are gone */
	size_t mark_it;               /* where the marking goes on (map slot) */
	bool ctr_listing;             /* the containers' list, in slices */
	size_t ctr_it;
	/* depends_on backwards: pod name -> tank_set_t of pod_rdep_t, the
	 * pods whose desired or running spec names it (a superset: entries
	 * are checked against the spec when used, and go with the
	 * dependent's tracking).  Wakes the dependents of a pod whose
	 * condition changed, and holds a pod's stop while a dependent that
	 * is stopping too still runs. */
	tank_map_t rdeps;
	pod_owner_t owner;            /* .allows NULL: no owner */
};

/* --- helpers ----------------------------------------------------------------- */

/* Status strings are bounded; a longer reason is cut, by design. */
static void pod__fmt(char *dst, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void pod__fmt(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dst, cap, fmt, ap);
	va_end(ap);
}

static void pod__copy(char *dst, size_t cap, const char *src)
{
	pod__fmt(dst, cap, "%s", src ? src : "");
}

/* Marks p failed as a whole with reason (NULL clears it).  Failure is rare:
 * the reason lives on the heap, not in every pod's record.  On -ENOMEM the
 * pod is still marked failed, with a generic reason. */
static void pod__set_fail(pod_trk_t *p, const char *reason)
{
	static char oom[] = "failed (out of memory for the reason)";

	if (p->fail != oom)
		free(p->fail);
	p->fail = NULL;
	if (reason && !(p->fail = strdup(reason)))
		p->fail = oom;
}

static pod_ctr_t *pod__ctr_find(pod_mgr_t *m, const char *key)
{
	char pod[POD_NAME_MAX + 1];
	const char *slash = strchr(key, '/');
	pod_trk_t *p;

	if (!slash || (size_t)(slash - key) > POD_NAME_MAX)
		return NULL;
	memcpy(pod, key, (size_t)(slash - key));
	pod[slash - key] = '\0';
	if (!(p = tank_map_get(&m->pods, pod)))
		return NULL;
	for (size_t i = 0; i < p->nctrs; i++)
		if (strcmp(p->ctrs[i].name, slash + 1) == 0)
			return &p->ctrs[i];
	return NULL;
}

/* The containers run the desired object at its desired version.  Identity
 * is uid and generation together: a pod deleted and created again under
 * the same name starts at generation 1 again, so generations alone would
 * take the new object for the old one and leave the old process running. */
static bool pod__current(const pod_trk_t *p)
{
	return p->spec && p->generation == p->want_gen &&
	       strcmp(p->uid, p->want_uid) == 0;
}

static bool pod__ctr_want(const pod_mgr_t *m, const pod_ctr_t *c)
{
	const pod_trk_t *p = c->pod;
	return !m->shutting_down && p->desired && pod__current(p) &&
	       !p->restart_req && !p->fail && !p->held;
}

static bool pod__busy(const pod_trk_t *p)
{
	for (size_t i = 0; i < p->nctrs; i++)
		if (p->ctrs[i].runner || p->ctrs[i].orphan || p->ctrs[i].cg_orphans)
			return true;
	return false;
}

/* The pod has something to do once its containers are stopped: be
 * deleted, switch to a new spec, or start again after a restart. */
static bool pod__waits(const pod_trk_t *p)
{
	return !p->desired || (p->spec && !pod__current(p)) || p->restart_req;
}

static void pod__ctr_event(rc_loop_t *loop, pod_ctr_t *c, enum pod_ctr_event ev,
			   const char *reason)
{
	(void)rc_fsm_apply(loop, K_CTR, c->key, &pod_ctr_fsm, &c->st, (uint8_t)ev, reason);
}

/* --- dependencies (depends_on) ------------------------------------------------------ */

static uint64_t pod__rdep_key(const char *name)
{
	uint64_t h = tank_hash64(name, strlen(name));
	return h ? h : 1;       /* 0 is the set's empty slot */
}

/* Notes that `dependent` depends on every pod spec names.  Out of memory
 * only loses a wake-up: the resync revisits every pod that waits. */
static void pod__rdeps_add(pod_mgr_t *m, const char *dependent, const pod_spec_t *spec)
{
	pod_rdep_t r = { .key = pod__rdep_key(dependent) };

	pod__copy(r.name, sizeof r.name, dependent);
	for (size_t i = 0; spec && i < spec->dep_count; i++) {
		tank_set_t *set = tank_map_get(&m->rdeps, spec->deps[i].pod);
		if (!set) {
			if (!(set = calloc(1, sizeof *set)))
				continue;
			if (tank_map_put(&m->rdeps, spec->deps[i].pod, set, NULL) < 0) {
				free(set);
				continue;
			}
		}
		(void)tank_set_add(set, sizeof r, &r);
	}
}

static bool pod__spec_needs(const pod_spec_t *spec, const char *name);

/* Forgets that `dependent` depends on what spec names, except on what
 * `keep` (its other spec, or NULL) names too. */
static void pod__rdeps_del(pod_mgr_t *m, const char *dependent, const pod_spec_t *spec,
			   const pod_spec_t *keep)
{
	uint64_t key = pod__rdep_key(dependent);

	for (size_t i = 0; spec && i < spec->dep_count; i++) {
		tank_set_t *set = tank_map_get(&m->rdeps, spec->deps[i].pod);
		if (!set || pod__spec_needs(keep, spec->deps[i].pod))
			continue;
		(void)tank_set_del(set, sizeof(pod_rdep_t), key, NULL);
		if (!set->n) {
			tank_map_del(&m->rdeps, spec->deps[i].pod);
			tank_set_free(set);
			free(set);
		}
	}
}

static bool pod__spec_needs(const pod_spec_t *spec, const char *name)
{
	for (size_t i = 0; spec && i < spec->dep_count; i++)
		if (strcmp(spec->deps[i].pod, name) == 0)
			return true;
	return false;
}

/* Calls fn on each tracked pod whose desired or running spec depends on
 * `name`. */
static void pod__dependents(pod_mgr_t *m, const char *name,
			    void (*fn)(pod_mgr_t *m, pod_trk_t *d, void *ctx), void *ctx)
{
	tank_set_t *set = tank_map_get(&m->rdeps, name);

	for (uint32_t i = 0; set && i < tank_set_slots(set); i++) {
		pod_rdep_t *r = tank_set_at(set, sizeof *r, i);
		pod_trk_t *d = r ? tank_map_get(&m->pods, r->name) : NULL;
		if (d && (pod__spec_needs(d->want, name) || pod__spec_needs(d->spec, name)))
			fn(m, d, ctx);
	}
}

/* Whether pod `name` meets cond; if not, why (for the dependent's reason). */
static bool pod__dep_met(const pod_mgr_t *m, const char *name,
			 enum pod_dep_condition cond, char *why, size_t cap)
{
	const pod_trk_t *d = tank_map_get(&m->pods, name);

	if (!d || !d->desired) {
		pod__fmt(why, cap, "it does not exist");
		return false;
	}
	if (d->cond & (1u << cond))
		return true;
	if (d->st.phase == POD_PP_RUNNING)
		pod__fmt(why, cap, "it is running, not %s yet", pod_dep_condition_name(cond));
	else if (d->st.reason[0])
		pod__fmt(why, cap, "it is %s: %s", rc_fsm_phase_name(&pod_fsm, d->st.phase),
			 d->st.reason);
	else
		pod__fmt(why, cap, "it is %s", rc_fsm_phase_name(&pod_fsm, d->st.phase));
	return false;
}

/* True when every dependency of p meets its condition; else the reason
 * names the first that does not ("waiting for db (ready): it is starting"). */
static bool pod__deps_met(const pod_mgr_t *m, const pod_trk_t *p, char *reason, size_t cap)
{
	const pod_spec_t *s = p->spec;
	char why[RC_REASON_MAX];

	for (size_t i = 0; s && i < s->dep_count; i++)
		if (!pod__dep_met(m, s->deps[i].pod, s->deps[i].condition, why, sizeof why)) {
			pod__fmt(reason, cap, "waiting for %s (%s): %s", s->deps[i].pod,
				 pod_dep_condition_name(s->deps[i].condition), why);
			return false;
		}
	return true;
}

static void pod__wake(pod_mgr_t *m, pod_trk_t *d, void *ctx)
{
	(void)m;
	rc_enqueue(ctx, K_POD, d->name);
}

static void pod__held_by(pod_mgr_t *m, pod_trk_t *d, void *ctx)
{
	bool *held = ctx;
	if (pod__busy(d) && (!d->desired || m->shutting_down || d->held))
		*held = true;
}

/* A pod going away (deleted, or tankd stopping) stops after the pods that
 * depend on it and go away too: it holds its stop while one of them still
 * runs.  A pod deleted alone stops at once (its dependents stay, and
 * their next start waits for it). */
static bool pod__stop_held(pod_mgr_t *m, const pod_trk_t *p)
{
	bool held = false;

	if (p->desired && !m->shutting_down && !p->held)
		return false;
	pod__dependents(m, p->name, pod__held_by, &held);
	return held;
}

/* After p's phase may have changed: its dependents are told when what
 * they may wait for changed, and the pods it depends on when it stopped
 * running (one of them may hold its own stop for it). */
static void pod__deps_notify(pod_mgr_t *m, rc_loop_t *loop, pod_trk_t *p, uint8_t cond)
{
	bool busy = pod__busy(p);

	if (cond != p->cond) {
		p->cond = cond;
		pod__dependents(m, p->name, pod__wake, loop);
	}
	if (p->was_busy && !busy) {
		const pod_spec_t *specs[2] = { p->spec, p->want };
		for (size_t k = 0; k < 2; k++)
			for (size_t i = 0; specs[k] && i < specs[k]->dep_count; i++)
				if (tank_map_get(&m->pods, specs[k]->deps[i].pod))
					rc_enqueue(loop, K_POD, specs[k]->deps[i].pod);
	}
	p->was_busy = busy;
}

/* A signature of everything the stored status shows.  A resync revisits
 * every pod; comparing this cheap hash of the live fields (not of the
 * 2 KiB record it would build) skips the store when nothing changed. */
static uint64_t pod__sig_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

static uint64_t pod__sig_str(uint64_t h, const char *str)
{
	return pod__sig_mix(h, tank_hash64(str, strlen(str)));
}

static uint64_t pod__status_sig(const pod_trk_t *p)
{
	uint64_t h = pod__sig_mix(p->st.phase, (uint64_t)p->st.since);

	h = pod__sig_str(h, p->st.reason);
	h = pod__sig_mix(h, p->generation ? p->generation : p->want_gen);
	h = pod__sig_mix(h, p->nctrs);
	for (size_t i = 0; i < p->nctrs; i++) {
		const pod_ctr_t *c = &p->ctrs[i];
		h = pod__sig_mix(h, c->st.phase);
		h = pod__sig_str(h, c->st.reason);
		h = pod__sig_mix(h, (uint64_t)(c->runner ? c->proc.pid : c->orphan));
		h = pod__sig_mix(h, c->runner ? c->proc.start_time : c->orphan_start);
		h = pod__sig_mix(h, (uint64_t)c->restarts << 32 | c->retries);
		h = pod__sig_mix(h, (uint64_t)c->last_exit.present << 63 ^
				   (uint64_t)(uint32_t)c->last_exit.code << 32 ^
				   (uint32_t)c->last_exit.signal);
		h = pod__sig_mix(h, (uint64_t)c->started_at);
		h = pod__sig_mix(h, (uint64_t)c->next_restart_at);
		h = pod__sig_mix(h, c->log_dropped);
		h = pod__sig_mix(h, c->ready);
		h = pod__sig_str(h, c->probe);
	}
	h = pod__sig_mix(h, p->cond);
	return h;
}

static void pod__persist(pod_mgr_t *m, pod_trk_t *p)
{
	uint64_t sig = pod__status_sig(p);
	st_status_t s;
	st_container_status_t *cs;
	int64_t last_at = -1;

	if (sig == p->persisted_sig)
		return;
	/* On the heap: the count comes from the spec, and a stack array
	 * sized by input is how a big pod once crashed tankd at every
	 * start.  -ENOMEM leaves the old status, which the next change
	 * rewrites. */
	if (!(cs = calloc(p->nctrs ? p->nctrs : 1, sizeof *cs)))
		return;
	memset(&s, 0, sizeof s);
	pod__copy(s.name, sizeof s.name, p->name);
	pod__copy(s.phase, sizeof s.phase, rc_fsm_phase_name(&pod_fsm, p->st.phase));
	pod__copy(s.reason, sizeof s.reason, p->st.reason);
	s.generation = p->generation ? p->generation : p->want_gen;
	pod__copy(s.uid, sizeof s.uid, p->spec ? p->uid : p->want_uid);
	s.since = p->st.since;
	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		pod__copy(cs[i].name, sizeof cs[i].name, c->name);
		pod__copy(cs[i].phase, sizeof cs[i].phase,
			  rc_fsm_phase_name(&pod_ctr_fsm, c->st.phase));
		pod__copy(cs[i].reason, sizeof cs[i].reason, c->st.reason);
		cs[i].pid = c->runner ? c->proc.pid : c->orphan;
		cs[i].pid_start_time = c->runner ? c->proc.start_time : c->orphan_start;
		cs[i].restarts = c->restarts;
		cs[i].retries = c->retries;
		cs[i].last_exit = c->last_exit;
		cs[i].started_at = c->started_at;
		cs[i].log_dropped = c->log_dropped;
		cs[i].ready = c->ready;
		pod__copy(cs[i].probe, sizeof cs[i].probe, c->probe);
		s.restarts += c->restarts;
		if (c->retries > s.retries)
			s.retries = c->retries;
		if (c->st.phase == POD_CP_BACKING_OFF &&
		    (!s.next_restart_at || c->next_restart_at < s.next_restart_at))
			s.next_restart_at = c->next_restart_at;
		if (c->last_exit.present && c->started_at > last_at) {
			last_at = c->started_at;
			s.last_exit = c->last_exit;
		}
	}
	s.ready = (p->cond & POD__COND_READY) != 0;
	s.containers = cs;
	s.n_containers = p->nctrs;
	/* Queued and group-committed. */
	if (st_status_put(m->o.store, &s) == 0)
		p->persisted_sig = sig;
	free(cs);
}

/* Derives the pod's phase from its containers (bubble up) and applies it
 * through the pod table. */
static void pod__update(pod_mgr_t *m, rc_loop_t *loop, pod_trk_t *p)
{
	enum pod_pevent ev = POD_PE_WAIT;
	char reason[RC_REASON_MAX] = "";
	size_t nterm = 0, nrun = 0, nback = 0, nstop = 0, nfail = 0;

	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		switch (c->st.phase) {
		case POD_CP_TERMINAL:
			nterm++;
			if (strcmp(c->st.reason, "completed") != 0) {
				nfail++;
				pod__copy(reason, sizeof reason, c->st.reason);
			}
			break;
		case POD_CP_RUNNING:
			nrun++;
			break;
		case POD_CP_BACKING_OFF:
			nback++;
			if (!reason[0])
				pod__fmt(reason, sizeof reason, "%s: %s", c->name, c->st.reason);
			break;
		case POD_CP_STOPPING:
			nstop++;
			break;
		}
	}
	if (nstop || (pod__busy(p) && p->nctrs && !pod__ctr_want(m, &p->ctrs[0]))) {
		ev = POD_PE_STOP;
		pod__copy(reason, sizeof reason, !p->desired ? "deleted"
			  : p->restart_req ? "restart"
			  : m->shutting_down ? "shutdown"
			  : p->fail ? p->fail
			  : p->held ? p->held_why : "spec changed");
	} else if (p->fail) {
		ev = POD_PE_ALL_DONE;
		pod__copy(reason, sizeof reason, p->fail);
	} else if (p->nctrs && nterm == p->nctrs) {
		ev = POD_PE_ALL_DONE;
		if (!nfail)
			pod__copy(reason, sizeof reason, "completed");
		else if (strcmp(reason, "oom_killed") != 0)
			pod__copy(reason, sizeof reason, "failed");
	} else if (p->held && !nrun) {
		ev = POD_PE_DEPS;
		pod__copy(reason, sizeof reason, p->held_why);
	} else if (p->gated && !nrun) {
		/* A start waits for depends_on: the containers say for what. */
		ev = POD_PE_DEPS;
		for (size_t i = 0; i < p->nctrs && !reason[0]; i++)
			if (p->ctrs[i].st.phase == POD_CP_PENDING)
				pod__copy(reason, sizeof reason, p->ctrs[i].st.reason);
	} else if (nback) {
		ev = POD_PE_BACKOFF;
	} else if (p->nctrs && nrun + nterm == p->nctrs) {
		ev = POD_PE_ALL_RUNNING;
		reason[0] = '\0';
	} else if (nrun) {
		ev = POD_PE_SOME_RUNNING;
	}
	(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st, (uint8_t)ev, reason);

	/* Ready (DESIGN.md §8): every container ready or completed, and
	 * the pod running.  A container without a readiness probe is ready
	 * while it runs. */
	bool ready = p->st.phase == POD_PP_RUNNING && !p->fail;
	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		c->ready = c->st.phase == POD_CP_RUNNING && (!c->probes || c->probe_ready);
		if (!c->ready && !(c->st.phase == POD_CP_TERMINAL &&
				   strcmp(c->st.reason, "completed") == 0))
			ready = false;
	}
	bool completed = p->st.phase == POD_PP_TERMINAL && !p->fail && !nfail;
	uint8_t cond = (uint8_t)((ready ? POD__COND_READY : 0) |
				 (ready || p->st.phase == POD_PP_RUNNING || completed
				  ? POD__COND_STARTED : 0) |
				 (completed ? POD__COND_COMPLETED : 0));
	if (!pod__current(p) || !p->desired)
		cond = 0;
	pod__deps_notify(m, loop, p, cond);
	pod__persist(m, p);
	uint32_t sig = (uint32_t)p->st.phase | (uint32_t)p->cond << 8 |
		       (uint32_t)pod__busy(p) << 16 | (uint32_t)(p->fail != NULL) << 17 |
		       1u << 18;
	if (m->owner.changed && sig != p->told_sig) {
		p->told_sig = sig;
		m->owner.changed(m->owner.ctx, loop, p->name);
	}
}

/* Asks the owner whether p may run; true when that changed. */
static bool pod__hold(pod_mgr_t *m, pod_trk_t *p)
{
	char why[RC_REASON_MAX] = "";
	bool held = m->owner.allows && !m->owner.allows(m->owner.ctx, p->name, why,
							 sizeof why);
	bool changed = held != p->held || (held && strcmp(why, p->held_why) != 0);

	p->held = held;
	pod__copy(p->held_why, sizeof p->held_why, held ? why : "");
	return changed;
}

/* --- tracking ------------------------------------------------------------------ */

static void pod__ctrs_free(pod_trk_t *p)
{
	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		if (c->has_cg && pod_cgroup_destroy(&c->cg) < 0) {
			pod_cgroup_kill_all(&c->cg);
			/* Its processes are dying; their group is left to the
			 * next daemon start (create reuses it). */
			pod_cgroup_forget(&c->cg);
		}
		pod_log_close(c->log);
	}
	free(p->ctrs);
	p->ctrs = NULL;
	p->nctrs = 0;
	if (p->has_sb) {
		pod_sandbox_destroy(&p->sb, false);
		p->has_sb = false;
	}
}

static void pod__trk_free(pod_trk_t *p)
{
	pod__set_fail(p, NULL);
	pod__ctrs_free(p);
	if (p->spec != p->want)
		pod_spec_free(p->spec);
	pod_spec_free(p->want);
	if (p->saved) {
		st_status_clear(p->saved);
		free(p->saved);
	}
	free(p);
}

/* Builds the containers of p->spec, taking over what the stored status
 * says about them when it is of the same generation. */
static int pod__ctrs_build(pod_trk_t *p)
{
	const pod_spec_t *s = p->spec;

	if (!(p->ctrs = calloc(s->container_count ? s->container_count : 1, sizeof *p->ctrs)))
		return -ENOMEM;
	p->nctrs = s->container_count;
	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		c->pod = p;
		pod__fmt(c->key, sizeof c->key, "%s/%s", p->name, s->containers[i].name);
		c->name = strchr(c->key, '/') + 1;
		rc_fsm_restore(&c->st, POD_CP_PENDING, 0, "");
		c->proc.stdout_fd = c->proc.stderr_fd = -1;
		if (!p->saved)
			continue;
		for (size_t j = 0; j < p->saved->n_containers; j++) {
			const st_container_status_t *cs = &p->saved->containers[j];
			if (strcmp(cs->name, c->name) != 0)
				continue;
			/* A process of a previous tankd, if still the same. */
			uint64_t st;
			if (cs->pid > 0 && pod_proc_start_time(cs->pid, &st) == 0 &&
			    st == cs->pid_start_time) {
				c->orphan = cs->pid;
				c->orphan_start = st;
			}
			/* Counts belong to this object at this version: not to
			 * a predecessor of the same name. */
			if (p->saved->generation != p->generation ||
			    (p->saved->uid[0] && strcmp(p->saved->uid, p->uid) != 0))
				break;
			c->restarts = cs->restarts;
			c->retries = cs->retries;
			c->last_exit = cs->last_exit;
			c->started_at = cs->started_at;
			if (strcmp(cs->phase, "terminal") == 0)
				rc_fsm_restore(&c->st, POD_CP_TERMINAL, 0, cs->reason);
			else if (s->restart == POD_RESTART_NEVER && cs->started_at > 0)
				c->once_lost = true;   /* see pod__ctr_reconcile */
			else if (strcmp(cs->phase, "backing_off") == 0)
				c->next_restart_at = p->saved->next_restart_at;
		}
	}
	if (p->saved) {
		st_status_clear(p->saved);
		free(p->saved);
		p->saved = NULL;
	}
	return 0;
}

/* --- pod manager ------------------------------------------------------------------ */

static pod_trk_t *pod__track(pod_mgr_t *m, const char *name)
{
	pod_trk_t *p = tank_map_get(&m->pods, name);

	if (p)
		return p;
	if (!(p = calloc(1, sizeof *p)))
		return NULL;
	pod__copy(p->name, sizeof p->name, name);
	rc_fsm_restore(&p->st, POD_PP_PENDING, 0, "");
	if (tank_map_put(&m->pods, p->name, p, NULL) < 0) {
		free(p);
		return NULL;
	}
	return p;
}

/* A new generation of the same object that changes nothing that runs
 * (pod_spec_same_run: only reconcile_wait) is the running spec at once:
 * no stop, no restart, the status says the new generation.  Not while a
 * container is being stopped (a change under way goes its way). */
static void pod__adopt(pod_mgr_t *m, pod_trk_t *p)
{
	pod_spec_t *old = p->spec;

	if (!old || old == p->want || strcmp(p->uid, p->want_uid) != 0 ||
	    !pod_spec_same_run(old, p->want))
		return;
	for (size_t i = 0; i < p->nctrs; i++)
		if (p->ctrs[i].stop_sent)
			return;
	p->spec = p->want;
	p->generation = p->want_gen;
	pod_spec_free(old);     /* same deps as want's: rdeps stand */
	pod__persist(m, p);
}

/* One stored pod, seen by a resync: track it, decode its spec only when
 * its generation moved (a resync over 10,000 unchanged pods decodes
 * nothing and copies nothing). */
static int pod__seen(void *ctx, const st_pod_t *sp)
{
	pod_mgr_t *m = ctx;
	pod_trk_t *p = pod__track(m, sp->name);

	if (!p)
		return 0;               /* seen again at the next resync */
	if (!p->restored) {
		p->restored = true;
		if ((p->saved = calloc(1, sizeof *p->saved)) &&
		    st_status_get(m->o.store, p->name, p->saved, NULL) < 0) {
			free(p->saved);
			p->saved = NULL;
		}
		if (p->saved) {
			int ph = rc_fsm_phase_of(&pod_fsm, p->saved->phase);
			rc_fsm_restore(&p->st, ph < 0 ? POD_PP_PENDING : (uint8_t)ph,
				       p->saved->since, p->saved->reason);
		}
	}
	if (p->want_gen != sp->generation || strcmp(p->want_uid, sp->uid) != 0 ||
	    (!p->want && !p->fail)) {
		pod_spec_t *ns = NULL;
		tank_error_t err;
		tank_error_clear(&err);
		if (pod_spec_decode(sp->spec, sp->spec_len, &ns, &err) < 0) {
			/* Validated at apply, so only a damaged store: this pod
			 * is failed with the reason, the others run. */
			char why[RC_REASON_MAX];
			pod__fmt(why, sizeof why, "stored spec cannot be loaded: %s", err.msg);
			pod__set_fail(p, why);
			p->want_gen = sp->generation;
			pod__copy(p->want_uid, sizeof p->want_uid, sp->uid);
			p->desired = true;
			return 0;
		}
		if (p->want != p->spec) {
			pod__rdeps_del(m, p->name, p->want, p->spec ? p->spec : ns);
			pod_spec_free(p->want);
		}
		p->want = ns;
		pod__rdeps_add(m, p->name, ns);
		p->want_gen = sp->generation;
		pod__copy(p->want_uid, sizeof p->want_uid, sp->uid);
		if (p->fail && strncmp(p->fail, "stored spec", 11) == 0)
			pod__set_fail(p, NULL);
		pod__adopt(m, p);
	}
	p->desired = true;
	return 0;
}

/* Nothing a pass could change: desired at the generation it runs, every
 * container either terminal or running under a live runner, nothing
 * stopping, no restart asked for, no leftover of a previous daemon.  A
 * resync skips such pods: what can still happen to them (an exit, a
 * delete, an apply) arrives as an event that queues the key, and a runner
 * that died unseen fails the rt_alive check here.  A pass over 10,000
 * converged pods then reads the store and checks flags, nothing more. */
static bool pod__settled(rt_t *rt, const pod_trk_t *p)
{
	if (!p->desired || !pod__current(p) ||
	    p->restart_req || p->fail || !p->nctrs)
		return false;
	for (size_t i = 0; i < p->nctrs; i++) {
		const pod_ctr_t *c = &p->ctrs[i];
		if (c->orphan || c->cg_orphans || c->stop_sent)
			return false;
		if (c->st.phase == POD_CP_TERMINAL)
			continue;
		if (c->st.phase != POD_CP_RUNNING || !c->runner || !rt_alive(rt, c->runner))
			return false;
	}
	return true;
}

/* The pod's cgroup: "<name>.<first 8 hex digits of its uid>".  Tied to
 * the object, not the name: the group of a deleted pod is never the group
 * of its successor of the same name, so leftovers of the old object are
 * found by the sweep (unowned), not taken for the new one's. */
static void pod__cg_group(const pod_trk_t *p, char *buf, size_t cap)
{
	const char *uid = p->spec ? p->uid : p->want_uid;

	if (uid[0])
		pod__fmt(buf, cap, "%s.%.8s", p->name, uid);
	else
		pod__copy(buf, cap, p->name);
}

/* --- the sweep: processes in tank's cgroups that no container owns ---------- */

/* A sandbox's group is the pod's sandbox's; or, while processes of a
 * previous tankd may still run in the pod (checked, and stopped
 * gracefully, by its containers), the one they run in: killing their
 * pid namespace's init would kill them at once. */
static bool pod__sb_owned(const pod_trk_t *p, const char *group)
{
	if (p->has_sb && strcmp(p->sb.group, group) == 0)
		return true;
	for (size_t i = 0; i < p->nctrs; i++)
		if (!p->ctrs[i].orphans_checked || p->ctrs[i].orphan || p->ctrs[i].cg_orphans)
			return true;
	return !p->nctrs;
}

typedef struct pod_sweep {
	pod_mgr_t *m;
	rc_loop_t *loop;
	bool all;                     /* shutting down: nothing is owned */
} pod_sweep_t;

static bool pod__cg_owned(void *ctx, const char *pod, const char *container)
{
	const pod_sweep_t *sw = ctx;
	const pod_trk_t *p;
	const char *dot = strrchr(pod, '.');
	char name[POD_NAME_MAX + 1], group[POD_NAME_MAX + 16];

	if (sw->all || !dot || (size_t)(dot - pod) > POD_NAME_MAX)
		return false;
	memcpy(name, pod, (size_t)(dot - pod));
	name[dot - pod] = '\0';
	if (!(p = tank_map_get(&sw->m->pods, name)))
		return false;
	pod__cg_group(p, group, sizeof group);
	if (strcmp(group, pod) != 0)
		return false;           /* a predecessor's group */
	if (pod_sandbox_is_group(container))
		return pod__sb_owned(p, container);
	/* Containers not built yet (the first pass after a restart of
	 * tankd) are owned through the spec: their leftovers are stopped
	 * gracefully by the container manager (stop signal, grace), not
	 * killed by the sweep. */
	if (!p->nctrs) {
		const pod_spec_t *sp = p->spec ? p->spec : p->want;
		for (size_t i = 0; sp && i < sp->container_count; i++)
			if (strcmp(sp->containers[i].name, container) == 0)
				return true;
		return false;
	}
	for (size_t i = 0; i < p->nctrs; i++)
		if (strcmp(p->ctrs[i].name, container) == 0)
			return true;
	return false;
}

static void pod__cg_found(void *ctx, const char *pod, const char *container, int n)
{
	const pod_sweep_t *sw = ctx;
	char name[POD_NAME_MAX + 1];
	const char *dot = strrchr(pod, '.');
	pod_trk_t *p;
	char what[RC_REASON_MAX];

	/* The group names the pod (and the object): note it in that pod's
	 * history when the name is tracked, even if the group is a
	 * predecessor's. */
	pod__fmt(name, sizeof name, "%.*s", dot ? (int)(dot - pod) : (int)strlen(pod), pod);
	p = name[0] ? tank_map_get(&sw->m->pods, name) : NULL;
	if (p && p->has_sb && strcmp(p->sb.group, container) == 0)
		return;                 /* its own sandbox, at tankd's stop */

	if (pod_sandbox_is_group(container))
		pod__fmt(what, sizeof what, "stopped a sandbox no container runs in any more "
			 "(left by a previous tankd): cgroup %s/%s", pod, container);
	else
		pod__fmt(what, sizeof what, "stopped %d untracked process%s found in the cgroup%s%s%s%s",
			 n, n == 1 ? "" : "es", pod[0] ? " of " : " root", pod,
			 container[0] ? "/" : "", container);
	fprintf(stderr, "tankd: warning: %s\n", what);
	if (p) {
		/* In the pod's history and on the events stream. */
		(void)rc_fsm_apply(sw->loop, K_POD, p->name, &pod_fsm, &p->st,
				   POD_PE_NOTE, what);
	} else if (sw->m->o.on_event) {
		/* No object to keep a history: the event says it. */
		pod_event_t ev = {
			.pod = name, .container = container[0] ? container : NULL,
			.from = "untracked", .to = "stopped", .reason = what,
			.at = (int64_t)rc_wall_ms(),
		};
		sw->m->o.on_event(sw->m->o.event_ctx, &ev);
	}
}

/* The final sweep, at the daemon's stop once every container is gone:
 * whatever still runs in tank's cgroups is killed (nothing is owned any
 * more).  The sweep of each resync is pod__list's second half, in slices
 * (pod_cgroup_sweep_step). */
static void pod__sweep_all(pod_mgr_t *m, rc_loop_t *loop)
{
	pod_sweep_t sw = { m, loop, true };

	if (!m->has_cg)
		return;
	if (pod_cgroup_sweep(&m->cg_env, pod__cg_owned, pod__cg_found, &sw) <= 0)
		return;
	/* At the daemon's stop: SIGKILL is not instant, and a group can only
	 * be removed once its processes are gone.  Sweep again (nothing is
	 * reported twice: found is not passed) until the groups are empty,
	 * for at most 5 s: on a loaded machine a killed process can take
	 * well over a second to be gone, and tankd must not exit while one
	 * of its containers' processes still runs. */
	for (int i = 0; i < 500; i++) {
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
		if (pod_cgroup_sweep(&m->cg_env, pod__cg_owned, NULL, &sw) <= 0)
			break;
	}
	(void)pod_cgroup_sweep(&m->cg_env, pod__cg_owned, NULL, &sw);
}

typedef struct pod_walk {
	pod_mgr_t *m;
	rc_loop_t *loop;
	uint64_t end_ns;              /* coarse clock: the slice ends here */
} pod_walk_t;

static uint64_t pod__coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int pod__seen_slice(void *ctx, const st_pod_t *sp)
{
	pod_walk_t *w = ctx;
	pod_mgr_t *m = w->m;
	pod_trk_t *p;

	(void)pod__seen(m, sp);
	if ((p = tank_map_get(&m->pods, sp->name))) {
		p->seen_pass = m->pass;
		if (!pod__settled(rc_rt(w->loop), p))
			rc_enqueue(w->loop, K_POD, p->name);
	}
	pod__copy(m->cursor, sizeof m->cursor, sp->name);
	return pod__coarse_ns() > w->end_ns ? 1 : 0;
}

/* A resync of the pods, in slices of RC_LIST_SLICE_MS: tankd with
 * 100,000 stored pods decodes each spec at its first pass (start-up) and
 * reads every record at each pass, which in one go held the loop, and so
 * the socket, for seconds.  A slice goes on from the last name the
 * previous one saw.  Each pod seen is marked with the pass; at the end,
 * a tracked pod the walk did not see is no longer stored (a pod applied
 * meanwhile behind the cursor is not tracked yet: the next pass, which
 * its apply's nudge asks for, finds it). */
static int pod__list(void *ctx, rc_loop_t *loop)
{
	pod_mgr_t *m = ctx;
	pod_walk_t w = { m, loop, pod__coarse_ns() + RC_LIST_SLICE_MS * 1000000ull };
	size_t it = 0;
	const char *name;
	void *v;
	int err;

	if (m->sweeping) {
		/* The pass's second half: the cgroup sweep, in slices too. */
		pod_sweep_t sw = { m, loop, false };
		if (!m->shutting_down &&
		    pod_cgroup_sweep_step(&m->cg_env, &m->sweep, pod__cg_owned, pod__cg_found,
					  &sw, RC_LIST_SLICE_MS) == 1)
			return RC_LIST_MORE;
		pod_cgroup_sweep_abort(&m->sweep);
		m->sweeping = false;
		return 0;
	}
	if (!m->walking && !m->marking) {
		m->walking = true;
		m->pass++;
		m->cursor[0] = '\0';
	}
	if (m->walking) {
		err = st_pod_foreach_from(m->o.store, m->cursor, pod__seen_slice, &w, NULL);
		if (err == 1)
			return RC_LIST_MORE;
		m->walking = false;
		if (err < 0)
			return err;     /* half a walk must not read as "deleted" */
		m->marking = true;
		m->mark_it = 0;
	}
	if (m->marking) {
		/* Tracked pods the walk did not see are no longer stored.  In
		 * slices as well: after a delete of 100,000 this queues
		 * 100,000 keys (130 ms in one turn).  Reconciles between the
		 * slices may remove pods from the map and move others behind
		 * the iterator; one missed is marked by the next pass, and one
		 * seen twice is marked twice, which is the same. */
		it = m->mark_it;
		unsigned n = 0;
		while (tank_map_next(&m->pods, &it, &name, &v)) {
			pod_trk_t *p = v;
			if (p->seen_pass != m->pass) {
				p->desired = false;
				if (!pod__settled(rc_rt(loop), p))
					rc_enqueue(loop, K_POD, name);
			}
			if ((++n & 63) == 0 && pod__coarse_ns() > w.end_ns) {
				m->mark_it = it;
				return RC_LIST_MORE;
			}
		}
		m->marking = false;
	}
	if (!m->has_cg || m->shutting_down)
		return 0;
	m->sweeping = true;     /* in the next slice */
	return RC_LIST_MORE;
}

static void pod__enqueue_ctrs(rc_loop_t *loop, pod_trk_t *p)
{
	for (size_t i = 0; i < p->nctrs; i++)
		rc_enqueue(loop, K_CTR, p->ctrs[i].key);
}

static int pod__observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	pod_mgr_t *m = ctx;

	(void)loop;
	return (view->obj = tank_map_get(&m->pods, key)) ? 0 : TANK_ENOTFOUND;
}

static void pod__forget(pod_mgr_t *m, rc_loop_t *loop, pod_trk_t *p)
{
	(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st, POD_PE_DELETE, "deleted");
	if (m->owner.changed)
		m->owner.changed(m->owner.ctx, loop, p->name);
	pod__rdeps_del(m, p->name, p->want, NULL);
	if (p->spec != p->want)
		pod__rdeps_del(m, p->name, p->spec, NULL);
	pod__dependents(m, p->name, pod__wake, loop);
	tank_map_del(&m->pods, p->name);
	(void)st_status_forget(m->o.store, p->name);
	for (size_t i = 0; i < p->nctrs; i++)
		rc_cancel_requeue(loop, K_CTR, p->ctrs[i].key);
	char name[POD_NAME_MAX + 1];
	memcpy(name, p->name, sizeof name);
	pod__trk_free(p);               /* closes its log writers */
	/* The logs go with the pod (a deleted pod's directory used to stay
	 * forever); until now `logs` could still read them. */
	(void)pod_log_remove(m->log_dir, name);
}

static rc_result_t pod__reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	pod_mgr_t *m = ctx;
	pod_trk_t *p = view->obj;

	if (!p->desired) {
		if (pod__busy(p)) {             /* cascade the stop */
			pod__enqueue_ctrs(loop, p);
			pod__update(m, loop, p);
			return rc_act();
		}
		pod__forget(m, loop, p);
		return rc_converged();
	}
	(void)pod__hold(m, p);
	if (p->restart_req && !p->restart_noted) {
		p->restart_noted = true;
		(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st,
				   POD_PE_NOTE, "restart requested");
	}
	if (p->spec && !pod__current(p)) {
		if (pod__busy(p)) {
			pod__enqueue_ctrs(loop, p);
			pod__update(m, loop, p);
			return rc_act();
		}
		for (size_t i = 0; i < p->nctrs; i++)
			rc_cancel_requeue(loop, K_CTR, p->ctrs[i].key);
		pod__ctrs_free(p);
		p->gated = false;
		if (p->spec != p->want) {
			pod__rdeps_del(m, p->name, p->spec, p->want);
			pod_spec_free(p->spec);
		}
		p->spec = NULL;
		if (p->fail && strncmp(p->fail, "stored spec", 11) != 0)
			pod__set_fail(p, NULL);  /* a new spec starts afresh */
	}
	if (!p->spec && p->want) {
		p->spec = p->want;
		p->generation = p->want_gen;
		memcpy(p->uid, p->want_uid, sizeof p->uid);
		if (pod__ctrs_build(p) < 0) {
			p->spec = NULL;
			return rc_failed(-ENOMEM, "out of memory building containers");
		}
	}
	if (p->restart_req) {
		if (pod__busy(p)) {
			pod__enqueue_ctrs(loop, p);
			pod__update(m, loop, p);
			return rc_act();
		}
		p->restart_req = p->restart_noted = false;
		p->gated = false;
		if (p->want)
			pod__set_fail(p, NULL);
		for (size_t i = 0; i < p->nctrs; i++) {
			pod_ctr_t *c = &p->ctrs[i];
			c->retries = 0;
			c->next_restart_at = 0;
			c->once_lost = false;   /* asked for: it runs again */
			pod__ctr_event(loop, c, POD_CE_RESET, "restart requested");
			rc_cancel_requeue(loop, K_CTR, c->key);
		}
	}
	pod__enqueue_ctrs(loop, p);
	pod__update(m, loop, p);
	return rc_converged();
}

/* Retries exhausted for the pod itself: it fails as a whole. */
static void pod__mark_failed(void *ctx, rc_loop_t *loop, const char *key,
			     const char *reason)
{
	pod_mgr_t *m = ctx;
	pod_trk_t *p = tank_map_get(&m->pods, key);

	if (!p)
		return;
	pod__set_fail(p, reason);
	pod__enqueue_ctrs(loop, p);
	pod__update(m, loop, p);
}

/* A container failed for good (terminal now: backoff.max_retries used up,
 * or the loop's retries): the pod notes it, its phase follows from its
 * containers as always, and the failure goes on to the pod's parent (its
 * stack, through the owner), whose manager decides abort or continue. */
static void pod__child_failed(void *ctx, rc_loop_t *loop, const char *key,
			      const char *child_kind, const char *child_key,
			      const char *reason)
{
	pod_mgr_t *m = ctx;
	pod_trk_t *p = tank_map_get(&m->pods, key);
	char note[RC_REASON_MAX];

	(void)child_kind;
	if (!p)
		return;
	pod__fmt(note, sizeof note, "container %s failed: %s",
		 strchr(child_key, '/') ? strchr(child_key, '/') + 1 : child_key, reason);
	(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st, POD_PE_NOTE, note);
	/* Its stack, if any, decides what the failure means for the rest. */
	rc_escalate(loop, K_POD, p->name, note);
}

static bool pod__parent(void *ctx, const char *key, rc_ref_t *out)
{
	pod_mgr_t *m = ctx;
	return m->owner.parent && m->owner.parent(m->owner.ctx, key, out);
}

/* --- container manager ----------------------------------------------------------- */

static int pod__ctr_list(void *ctx, rc_loop_t *loop)
{
	pod_mgr_t *m = ctx;
	uint64_t end = pod__coarse_ns() + RC_LIST_SLICE_MS * 1000000ull;
	size_t it = m->ctr_listing ? m->ctr_it : 0;
	unsigned n = 0;
	void *v;

	/* The containers of every pod that is not settled (see
	 * pod__settled): the others have nothing to converge.  In slices,
	 * as the pods' walk (100,000 pods took tens of milliseconds); a pod
	 * missed because the map changed between slices is listed by the
	 * next pass, and anything that happens to it queues it anyway. */
	m->ctr_listing = true;
	while (tank_map_next(&m->pods, &it, NULL, &v)) {
		pod_trk_t *p = v;
		if (!pod__settled(rc_rt(loop), p))
			for (size_t i = 0; i < p->nctrs; i++)
				rc_enqueue(loop, K_CTR, p->ctrs[i].key);
		if ((++n & 63) == 0 && pod__coarse_ns() > end) {
			m->ctr_it = it;
			return RC_LIST_MORE;
		}
	}
	m->ctr_listing = false;
	return 0;
}

static void pod__drained_check(pod_mgr_t *m, rc_loop_t *loop)
{
	if (m->shutting_down && !m->nrunning && !m->drained_told) {
		size_t it = 0;
		void *v;
		while (tank_map_next(&m->pods, &it, NULL, &v))
			if (pod__busy(v))
				return;
		/* Every tracked container is gone; whatever still runs in
		 * tank's cgroups is untracked, and tankd's stop stops it. */
		pod__sweep_all(m, loop);
		m->drained_told = true;
		if (m->o.on_drained)
			m->o.on_drained(m->o.drained_ctx);
	}
}

/* Processes left by a previous tankd — found by the pid and start time
 * in the stored status, or as members of the container's cgroup (which
 * also catches a start the previous daemon had no time to record) — are
 * stopped like a container: stop signal, then SIGKILL after the grace
 * period.  Returns the requeue delay while some remain, 0 when none. */
static uint64_t pod__orphan_step(rc_loop_t *loop, pod_ctr_t *c)
{
	uint64_t st;
	int64_t now = (int64_t)rc_wall_ms();
	const pod_spec_t *s = c->pod->spec;
	bool pid_alive = c->orphan && pod_proc_start_time(c->orphan, &st) == 0 &&
			 st == c->orphan_start && !pod_proc_dead(c->orphan);
	bool cg_alive = c->cg_orphans && c->has_cg && pod_cgroup_count(&c->cg) > 0;

	if (!pid_alive && !cg_alive) {
		c->orphan = 0;
		c->cg_orphans = false;
		c->orphan_deadline = 0;
		pod__ctr_event(loop, c, POD_CE_STOPPED,
			       c->st.phase == POD_CP_STOPPING
			       ? "processes of a previous tankd stopped" : c->st.reason);
		return 0;
	}
	if (!c->orphan_deadline) {
		int sig = s ? s->stop.signal : SIGTERM;
		if (pid_alive)
			kill(c->orphan, sig);
		if (cg_alive)
			pod_cgroup_signal(&c->cg, sig);
		c->orphan_deadline = now + (int64_t)(s ? s->stop.grace_ms : 10000);
		pod__ctr_event(loop, c, POD_CE_STOP,
			       "stopping processes left by a previous tankd");
	} else if (now >= c->orphan_deadline) {
		if (cg_alive)
			pod_cgroup_kill_all(&c->cg);
		if (pid_alive)
			kill(c->orphan, SIGKILL);
	}
	return 50;
}

static char **pod__envp(const pod_container_t *pc)
{
	char **envp = calloc(pc->env_count + 1, sizeof *envp);

	if (!envp)
		return NULL;
	for (size_t i = 0; i < pc->env_count; i++) {
		size_t kl = strlen(pc->env[i].key), vl = strlen(pc->env[i].value);
		if (!(envp[i] = malloc(kl + vl + 2))) {
			for (size_t j = 0; j < i; j++)
				free(envp[j]);
			free(envp);
			return NULL;
		}
		memcpy(envp[i], pc->env[i].key, kl);
		envp[i][kl] = '=';
		memcpy(envp[i] + kl + 1, pc->env[i].value, vl + 1);
	}
	return envp;
}

static void pod__envp_free(char **envp)
{
	for (size_t i = 0; envp && envp[i]; i++)
		free(envp[i]);
	free(envp);
}

/* The container's spec. */
static const pod_container_t *pod__ctr_spec(const pod_ctr_t *c)
{
	const pod_spec_t *s = c->pod->spec;
	for (size_t i = 0; s && i < s->container_count; i++)
		if (strcmp(s->containers[i].name, c->name) == 0)
			return &s->containers[i];
	return NULL;
}

/* Makes (or, after a daemon crash, reuses) the container's cgroup: it
 * applies the limits and is how every process of the container is found,
 * including those a previous tankd left behind.  Kept across restarts. */
static int pod__ctr_cgroup(pod_mgr_t *m, pod_ctr_t *c, char *reason, size_t cap)
{
	const pod_container_t *pc = pod__ctr_spec(c);
	tank_error_t err;
	int rc;

	if (c->has_cg) {
		/* Drift: a group removed by hand is made again (the launcher
		 * would fail to join it, and every restart with it). */
		if (pod_cgroup_exists(&c->cg))
			return 0;
		if (pod_cgroup_destroy(&c->cg) < 0)
			pod_cgroup_forget(&c->cg);
		c->has_cg = false;
	}
	if (!pc)
		return 0;
	const pod_limits_t *l = &pc->limits;
	bool limited = l->memory_bytes || l->pids || l->cpu_millis;
	if (!m->has_cg && !limited)
		return 0;
	pod_cgroup_limits_t lim = {
		.memory = l->memory_bytes, .pids = l->pids,
		.cpu = (double)l->cpu_millis / 1000.0,
	};
	char group[POD_NAME_MAX + 16];
	pod__cg_group(c->pod, group, sizeof group);
	tank_error_clear(&err);
	rc = m->has_cg
		? pod_cgroup_create(&m->cg_env, group, c->name, &lim, &c->cg, &err)
		: tank_error_set(&err, TANK_EUNSUPPORTED, "no cgroup hierarchy");
	if (rc < 0) {
		/* Limits cannot be honoured: refuse to run unlimited.  Without
		 * limits, run untracked by cgroup. */
		if (limited) {
			pod__fmt(reason, cap, "limits: %s", err.msg);
			return rc;
		}
		return 0;
	}
	c->has_cg = true;
	return 0;
}

/* The pod's sandbox, made by the first container that starts.  A failure
 * is that container's failed start (policy and backoff apply, and the
 * next start tries again), not a permanent state of the pod. */
static int pod__sandbox(pod_mgr_t *m, pod_trk_t *p, char *reason, size_t cap)
{
	const pod_spec_t *s = p->spec;
	pod_sandbox_mount_t *mounts;
	size_t nm = 0, total = 0;
	tank_error_t err;
	int rc;

	if (!s->isolation.namespaces || p->has_sb)
		return 0;
	for (size_t i = 0; i < s->container_count; i++)
		total += s->containers[i].mount_count;
	/* Sized by the spec, on the heap: every mount is applied. */
	if (!(mounts = calloc(total ? total : 1, sizeof *mounts))) {
		pod__fmt(reason, cap, "sandbox: out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->container_count; i++)
		for (size_t j = 0; j < s->containers[i].mount_count; j++) {
			const pod_mount_t *mt = &s->containers[i].mounts[j];
			mounts[nm].host_path = s->volumes[mt->volume_index].host_path;
			mounts[nm].path = mt->path;
			mounts[nm].read_only = mt->read_only;
			nm++;
		}
	/* In the pod's cgroup, where the sweep finds it after a kill -9. */
	char group[POD_NAME_MAX + 16];
	pod__cg_group(p, group, sizeof group);
	pod_sandbox_opts_t o = {
		.ns = s->isolation.namespaces, .hostname = s->isolation.hostname,
		.rootfs = s->isolation.rootfs, .mounts = mounts, .n_mounts = nm,
		.name = p->name, .cgroups = m->has_cg ? &m->cg_env : NULL,
		.cgroup_pod = group,
	};
	tank_error_clear(&err);
	rc = pod_sandbox_create(&o, &p->sb, &err);
	free(mounts);
	if (rc < 0) {
		/* The sandbox's messages already start with "sandbox:". */
		pod__fmt(reason, cap, "%s%s",
			 strncmp(err.msg, "sandbox", 7) == 0 ? "" : "sandbox: ", err.msg);
		return rc;
	}
	p->has_sb = true;
	return 0;
}

/* Starts the container; on failure fills reason and returns < 0. */
static int pod__ctr_start(pod_mgr_t *m, rc_loop_t *loop, pod_ctr_t *c,
			  char *reason, size_t cap)
{
	pod_trk_t *p = c->pod;
	const pod_container_t *pc = pod__ctr_spec(c);
	tank_error_t err;
	char **envp;
	int rc;

	if (!pc)
		return -ENOENT;
	tank_error_clear(&err);
	if (!c->log) {
		pod_log_opts_t lo = { .dir = m->log_dir, .pod = p->name, .container = c->name };
		/* Without a log the container still runs; output is dropped. */
		(void)pod_log_open(&lo, &c->log, NULL);
	}
	if ((rc = pod__sandbox(m, p, reason, cap)) < 0 ||
	    (rc = pod__ctr_cgroup(m, c, reason, cap)) < 0)
		return rc;
	if (!(envp = pod__envp(pc))) {
		pod__fmt(reason, cap, "out of memory");
		return -ENOMEM;
	}
	pod_launch_opts_t lo = {
		.file = pc->argv[0], .argv = pc->argv, .envp = envp,
		.cwd = pc->working_dir, .user = pc->user,
		.stdout_mode = POD_STDIO_PIPE, .stderr_mode = POD_STDIO_PIPE,
		.cgroup = c->has_cg ? &c->cg : NULL,
		.sandbox = p->has_sb ? &p->sb : NULL,
	};
	pod_runner_args_t ra = {
		.owner = rc_pid(loop), .key = c->key, .launch_opts = &lo,
		.launch = m->o.launch,
		.cgroup = c->has_cg ? &c->cg : NULL, .log = c->log,
		.stop_signal = p->spec->stop.signal, .grace_ms = p->spec->stop.grace_ms,
		.proc = &c->proc, .err = &err,
		.probes = pod_container_has_probes(pc) ? pc->probes : NULL,
		.sandbox = p->has_sb ? &p->sb : NULL,
	};
	/* Until its probes speak: ready unless a startup or readiness probe
	 * has to pass first. */
	c->probes = ra.probes != NULL;
	c->probe_ready = pc->probes[POD_PROBE_STARTUP].kind == POD_PROBE_NONE &&
			 pc->probes[POD_PROBE_READINESS].kind == POD_PROBE_NONE;
	rc = pod_runner_start(rc_rt(loop), &ra, &c->runner);
	pod__envp_free(envp);
	if (rc < 0) {
		c->runner = 0;
		pod__fmt(reason, cap, "%s", err.msg[0] ? err.msg : tank_strerror(rc));
		return rc;
	}
	if (rc_own(loop, K_CTR, c->runner) < 0) {
		/* Cannot route its exit: stop it rather than run untracked. */
		rt_exit(rc_rt(loop), c->runner, RT_R_KILL);
		c->runner = 0;
		pod__fmt(reason, cap, "out of memory");
		return -ENOMEM;
	}
	m->nrunning++;
	return 0;
}

/* Applies the restart policy to an exit (or a failed start).  A restart
 * is not scheduled here: the key is queued, and its reconcile returns the
 * remaining backoff as requeue_after. */
static void pod__ctr_exited(rc_loop_t *loop, pod_ctr_t *c, const pod_exit_t *ex,
			    uint64_t ran_ms, const char *why, bool unhealthy)
{
	const pod_spec_t *s = c->pod->spec;
	bool failed = unhealthy || ex->oom_killed || ex->code != 0 || ex->signal != 0;
	bool restart = s->restart == POD_RESTART_ALWAYS ||
		       (s->restart == POD_RESTART_ON_FAILURE && failed);
	char reason[RC_REASON_MAX];

	c->last_exit.present = true;
	c->last_exit.code = ex->code;
	c->last_exit.signal = ex->signal;
	if (why)
		pod__fmt(reason, sizeof reason, "%s", why);
	else if (ex->oom_killed)
		pod__fmt(reason, sizeof reason, "oom_killed");
	else if (ex->signal)
		pod__fmt(reason, sizeof reason, "killed by signal %d", ex->signal);
	else
		pod__fmt(reason, sizeof reason, "exited with code %d", ex->code);
	if (!restart) {
		pod__ctr_event(loop, c, POD_CE_FINISHED,
			       !failed ? "completed" : ex->oom_killed ? "oom_killed" : reason);
		return;
	}
	if (ran_ms >= s->backoff.stable_window_ms)
		c->retries = 0;
	if (s->backoff.max_retries && c->retries >= s->backoff.max_retries) {
		/* Bounded: given up, failed (a stack above it hears of it
		 * through the pod's failure). */
		char gave[RC_REASON_MAX];
		pod__fmt(gave, sizeof gave, "gave up after %u restarts in a row "
			 "(backoff.max_retries): %s", c->retries, reason);
		pod__ctr_event(loop, c, POD_CE_FINISHED, gave);
		rc_escalate(loop, K_CTR, c->key, gave);
		return;
	}
	uint64_t delay = tank_backoff(s->backoff.base_ms, s->backoff.cap_ms, c->retries);
	c->retries++;
	c->restarts++;
	c->next_restart_at = (int64_t)(rc_wall_ms() + delay);
	pod__ctr_event(loop, c, POD_CE_CRASHED, reason);
	rc_enqueue(loop, K_CTR, c->key);
}

static int pod__ctr_observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	(void)loop;
	return (view->obj = pod__ctr_find(ctx, key)) ? 0 : TANK_ENOTFOUND;
}

static rc_result_t pod__ctr_reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	pod_mgr_t *m = ctx;
	pod_ctr_t *c = view->obj;
	char reason[RC_REASON_MAX];
	uint64_t wait;

	if (!c->orphans_checked) {
		char why[RC_REASON_MAX];
		c->orphans_checked = true;
		if (pod__ctr_cgroup(m, c, why, sizeof why) == 0 && c->has_cg &&
		    pod_cgroup_count(&c->cg) > 0)
			c->cg_orphans = true;
	}
	if ((c->orphan || c->cg_orphans) && (wait = pod__orphan_step(loop, c))) {
		pod__update(m, loop, c->pod);
		return rc_requeue_after(wait);
	}
	if (!pod__ctr_want(m, c)) {
		c->pod->gated = false;
		if (c->runner && !c->stop_sent) {
			/* Its dependents go first; the last of them to stop
			 * queues this pod again (pod__deps_notify). */
			if (pod__stop_held(m, c->pod))
				return rc_converged();
			rt_send(rc_rt(loop), c->runner, POD_RUNNER_STOP, NULL, 0);
			c->stop_sent = true;
			pod__ctr_event(loop, c, POD_CE_STOP, c->pod->desired ? "stop" : "deleted");
			pod__update(m, loop, c->pod);
			return rc_act();
		}
		if (!c->runner) {
			/* Only a pod that waits for its containers to stop needs
			 * telling; waking any other pod would ping-pong forever
			 * (its reconcile queues its containers). */
			if (pod__waits(c->pod))
				rc_enqueue(loop, K_POD, c->pod->name);
			pod__drained_check(m, loop);
		}
		return rc_converged();
	}
	if (c->runner || c->st.phase == POD_CP_TERMINAL)
		return rc_converged();
	int64_t now = (int64_t)rc_wall_ms();
	if (c->next_restart_at > now) {
		if (c->st.phase != POD_CP_BACKING_OFF)
			pod__ctr_event(loop, c, POD_CE_BACKOFF, "restoring backoff");
		pod__update(m, loop, c->pod);
		return rc_requeue_after((uint64_t)(c->next_restart_at - now));
	}
	c->next_restart_at = 0;
	if (c->pod->spec->dep_count) {
		/* Every start, restarts too, waits for depends_on.  What it
		 * waits for queues this pod when it changes (pod__deps_notify);
		 * the resync revisits it anyway (a waiting pod is not settled). */
		char why[RC_REASON_MAX];
		if (!pod__deps_met(m, c->pod, why, sizeof why)) {
			c->pod->gated = true;
			pod__ctr_event(loop, c, POD_CE_WAIT, why);
			pod__update(m, loop, c->pod);
			return rc_converged();
		}
		c->pod->gated = false;
	}
	if (c->once_lost) {
		/* A run-once container a previous tankd started and never saw
		 * end (killed -9, or its process gone or stopped above while
		 * tankd was down): running it again would run it twice.  Its
		 * exit status is unknown. */
		c->once_lost = false;
		c->last_exit = (st_exit_t){ .present = true, .code = -1 };
		pod__ctr_event(loop, c, POD_CE_FINISHED,
			       "not run again: it was running when tankd stopped "
			       "(restart: never runs once; exit status unknown)");
		pod__update(m, loop, c->pod);
		return rc_converged();
	}
	if (c->pod->spec->restart == POD_RESTART_NEVER) {
		/* Run once means the start is on disk before the process
		 * exists: a tankd killed right after the exec finds it
		 * started (above) instead of never started.  A commit, no
		 * fsync: tankd's death does not lose the page cache.  A store
		 * that cannot take it holds the start back, retried. */
		tank_error_t fe;
		c->started_at = now;
		pod__persist(m, c->pod);
		if (st_flush(m->o.store, &fe) < 0) {
			char why[RC_REASON_MAX];
			c->started_at = 0;
			pod__fmt(why, sizeof why, "waiting for the store: %s", fe.msg);
			pod__ctr_event(loop, c, POD_CE_WAIT, why);
			pod__update(m, loop, c->pod);
			return rc_failed(-ENOBUFS, NULL);
		}
	}
	int err = pod__ctr_start(m, loop, c, reason, sizeof reason);
	if (err < 0 && tank_err_is_resource(err)) {
		/* tank, not the container, ran out of something: no failure
		 * is counted against it and its policy does not apply.  The
		 * loop retries with its own backoff and, past its bound,
		 * fails the container (mark_failed) and tells the pod. */
		char why[RC_REASON_MAX];
		pod__fmt(why, sizeof why, "waiting for resources: %s", reason);
		if (c->pod->spec->restart == POD_RESTART_NEVER && c->started_at == now) {
			/* Not started after all: a restart of tankd now must
			 * not take it for one that ran (see once_lost). */
			c->started_at = 0;
			pod__persist(m, c->pod);
			(void)st_flush(m->o.store, NULL);
		}
		pod__ctr_event(loop, c, POD_CE_WAIT, why);
		pod__update(m, loop, c->pod);
		return rc_failed(err, NULL);
	}
	if (err < 0) {
		/* A start that fails counts as a failed run (exit 127, as a
		 * shell reports "command not found"), so policy and backoff
		 * apply and a broken command cannot spin. */
		pod_exit_t ex = { .code = 127 };
		/* `logs` says why too: the container wrote nothing. */
		(void)pod_log_note(c->log, reason);
		pod__ctr_exited(loop, c, &ex, 0, reason, false);
		pod__update(m, loop, c->pod);
		return rc_converged();  /* the exit queued the key again */
	}
	c->stop_sent = false;
	c->started_at = now;
	pod__ctr_event(loop, c, POD_CE_STARTED, "started");
	pod__update(m, loop, c->pod);
	return rc_act();
}

/* Retries exhausted for a container: it is terminal with the reason; its
 * parent (the pod) hears of it through child_failed. */
static void pod__ctr_mark_failed(void *ctx, rc_loop_t *loop, const char *key,
				 const char *reason)
{
	pod_mgr_t *m = ctx;
	pod_ctr_t *c = pod__ctr_find(m, key);

	if (!c)
		return;
	pod__ctr_event(loop, c, POD_CE_FINISHED, reason);
	pod__update(m, loop, c->pod);
}

static bool pod__ctr_parent(void *ctx, const char *key, rc_ref_t *out)
{
	const char *slash = strchr(key, '/');

	(void)ctx;
	if (!slash || (size_t)(slash - key) >= sizeof out->key)
		return false;
	out->kind = K_POD;
	memcpy(out->key, key, (size_t)(slash - key));
	out->key[slash - key] = '\0';
	return true;
}

/* The runner of c is gone (reported, or died): account for it. */
static void pod__ctr_gone(pod_mgr_t *m, rc_loop_t *loop, pod_ctr_t *c)
{
	rc_disown(loop, c->runner);
	c->runner = 0;
	c->proc.pid = 0;
	m->nrunning--;
}

/* A container's log started or stopped losing lines (a full log disk):
 * said once each way, in tankd's log and the pod's history (and so on the
 * events stream), and the count goes into its status. */
static void pod__ctr_logdrop(pod_mgr_t *m, rc_loop_t *loop, const void *data)
{
	pod_runner_logdrop_t ld;
	pod_ctr_t *c;
	char what[RC_REASON_MAX];

	memcpy(&ld, data, sizeof ld);
	ld.key[sizeof ld.key - 1] = '\0';
	if (!(c = pod__ctr_find(m, ld.key)))
		return;
	c->log_dropped = ld.lines;
	if (ld.dropping)
		pod__fmt(what, sizeof what, "log of %s: dropping lines (%s)", c->name,
			 ld.error[0] ? ld.error : "write failed");
	else
		pod__fmt(what, sizeof what, "log of %s: writing again after %llu lines dropped",
			 c->name, (unsigned long long)ld.episode);
	fprintf(stderr, "tankd: warning: %s/%s\n", c->pod->name, what);
	(void)rc_fsm_apply(loop, K_POD, c->pod->name, &pod_fsm, &c->pod->st, POD_PE_NOTE, what);
	pod__persist(m, c->pod);
}

/* A probe's news from a runner: kept in the status, published. */
static void pod__ctr_probe(pod_mgr_t *m, rc_loop_t *loop, rt_pid_t from, const void *data)
{
	pod_runner_probe_t pr;
	pod_ctr_t *c;

	memcpy(&pr, data, sizeof pr);
	pr.key[sizeof pr.key - 1] = '\0';
	pr.report.text[sizeof pr.report.text - 1] = '\0';
	if (!(c = pod__ctr_find(m, pr.key)) || c->runner != from)
		return;         /* a runner that is gone already */
	c->probe_ready = pr.report.ready;
	pod__copy(c->probe, sizeof c->probe, pr.report.text);
	if (m->o.on_event) {
		pod_event_t ev = {
			.pod = c->pod->name, .container = c->name, .probe = c->probe,
			.ready = pr.report.ready, .at = (int64_t)rc_wall_ms(),
			.generation = c->pod->generation, .uid = c->pod->uid,
		};
		m->o.on_event(m->o.event_ctx, &ev);
	}
	pod__update(m, loop, c->pod);
}

static void pod__ctr_handle(void *ctx, rc_loop_t *loop, rt_msg_t *msg)
{
	pod_mgr_t *m = ctx;
	pod_runner_exited_t ex;
	pod_ctr_t *c;

	if (msg->type == RT_MSG_EXIT) {
		/* Only exits of runners we own are routed here.  A runner
		 * that ends normally reports first and is disowned then; one
		 * that died without reporting (crash or kill) is an exit by
		 * signal, so the container is restarted. */
		size_t it = 0;
		void *v;
		/* A normal exit follows a report (POD_RUNNER_EXITED) that
		 * may still be queued behind it: let the report speak. */
		if (msg->u.exit.reason.kind == RT_NORMAL)
			return;
		while (tank_map_next(&m->pods, &it, NULL, &v)) {
			pod_trk_t *p = v;
			for (size_t i = 0; i < p->nctrs; i++) {
				if (p->ctrs[i].runner != msg->u.exit.from)
					continue;
				pod_exit_t e = { .code = -1, .signal = SIGKILL };
				c = &p->ctrs[i];
				pod__ctr_gone(m, loop, c);
				if (pod__ctr_want(m, c))
					pod__ctr_exited(loop, c, &e, 0, "runner died", false);
				else
					pod__ctr_event(loop, c, POD_CE_STOPPED, "stopped");
				pod__update(m, loop, p);
				rc_enqueue(loop, K_POD, p->name);
				pod__drained_check(m, loop);
				return;
			}
		}
		return;
	}
	if (msg->type == RT_MSG_USER && msg->tag == POD_RUNNER_LOGDROP &&
	    msg->len == sizeof(pod_runner_logdrop_t)) {
		pod__ctr_logdrop(m, loop, msg->data);
		return;
	}
	if (msg->type == RT_MSG_USER && msg->tag == POD_RUNNER_PROBE &&
	    msg->len == sizeof(pod_runner_probe_t)) {
		pod__ctr_probe(m, loop, msg->from, msg->data);
		return;
	}
	if (msg->type != RT_MSG_USER || msg->tag != POD_RUNNER_EXITED || msg->len != sizeof ex)
		return;
	memcpy(&ex, msg->data, sizeof ex);
	ex.key[sizeof ex.key - 1] = '\0';
	if (!(c = pod__ctr_find(m, ex.key)) || !c->runner)
		return;
	/* The runner is exiting normally; forget its link so its EXIT is not
	 * mistaken for a crash. */
	rt_unlink(rc_rt(loop), c->runner);
	pod__ctr_gone(m, loop, c);
	if (!pod__ctr_want(m, c) || ex.stopped) {
		c->last_exit.present = true;
		c->last_exit.code = ex.exit.code;
		c->last_exit.signal = ex.exit.signal;
		pod__ctr_event(loop, c, POD_CE_STOPPED, "stopped");
		if (ex.stopped && pod__ctr_want(m, c))
			rc_enqueue(loop, K_CTR, c->key);
	} else {
		char why[RC_REASON_MAX];
		ex.unhealthy[sizeof ex.unhealthy - 1] = '\0';
		/* A probe gave up on it: a failure whatever the exit said
		 * (Kubernetes restarts it under Always and OnFailure). */
		if (ex.unhealthy[0])
			pod__fmt(why, sizeof why, "unhealthy: %s", ex.unhealthy);
		pod__ctr_exited(loop, c, &ex.exit, ex.ran_ms, ex.unhealthy[0] ? why : NULL,
				ex.unhealthy[0] != 0);
	}
	pod__update(m, loop, c->pod);
	rc_enqueue(loop, K_POD, c->pod->name);
	pod__drained_check(m, loop);
}

static void pod__handle(void *ctx, rc_loop_t *loop, rt_msg_t *msg)
{
	pod_mgr_t *m = ctx;
	size_t it = 0;
	void *v;

	if (msg->type != RT_MSG_USER || msg->tag != POD_MGR_SHUTDOWN)
		return;
	m->shutting_down = true;
	while (tank_map_next(&m->pods, &it, NULL, &v))
		pod__enqueue_ctrs(loop, v);
	pod__drained_check(m, loop);
}

/* The loop actor is going away (crash or daemon stop).  Its runners are
 * linked to it and die with it, killing their processes; forget them so
 * a restarted loop starts those containers again. */
static void pod__ctr_stop(void *ctx, rc_loop_t *loop)
{
	pod_mgr_t *m = ctx;
	size_t it = 0;
	void *v;

	while (tank_map_next(&m->pods, &it, NULL, &v)) {
		pod_trk_t *p = v;
		for (size_t i = 0; i < p->nctrs; i++) {
			pod_ctr_t *c = &p->ctrs[i];
			if (!c->runner)
				continue;
			c->runner = 0;
			c->stop_sent = false;
			c->proc.pid = 0;
			pod__ctr_event(loop, c, POD_CE_LOST, "reconciler stopped");
		}
	}
	m->nrunning = 0;
}

const rc_manager_t pod_manager = {
	.kind = TANK_KIND_POD,
	.name = "pod",
	.list = pod__list,
	.observe = pod__observe,
	.reconcile = pod__reconcile,
	.mark_failed = pod__mark_failed,
	.parent = pod__parent,
	.child_failed = pod__child_failed,
	.handle = pod__handle,
};

const rc_manager_t pod_ctr_manager = {
	.kind = TANK_KIND_CONTAINER,
	.name = "container",
	.list = pod__ctr_list,
	.observe = pod__ctr_observe,
	.reconcile = pod__ctr_reconcile,
	.mark_failed = pod__ctr_mark_failed,
	.parent = pod__ctr_parent,
	.handle = pod__ctr_handle,
	.stop = pod__ctr_stop,
};

/* --- public ------------------------------------------------------------------------ */

int pod_mgr_new(const pod_mgr_opts_t *o, pod_mgr_t **out)
{
	pod_mgr_t *m = calloc(1, sizeof *m);

	if (!m)
		return -ENOMEM;
	m->o = *o;
	if (!(m->log_dir = strdup(o->log_dir ? o->log_dir : "."))) {
		free(m);
		return -ENOMEM;
	}
	if (o->cgroups && o->cgroups->mode != POD_CGROUP_NONE) {
		m->cg_env = *o->cgroups;
		m->has_cg = true;
	}
	tank_map_init(&m->pods);
	tank_map_init(&m->rdeps);
	*out = m;
	return 0;
}

void pod_mgr_set_owner(pod_mgr_t *m, const pod_owner_t *owner)
{
	m->owner = *owner;
}

bool pod_mgr_draining(const pod_mgr_t *m)
{
	return m->shutting_down;
}

bool pod_mgr_info(const pod_mgr_t *m, const char *name, pod_info_t *out)
{
	const pod_trk_t *p = tank_map_get(&m->pods, name);

	memset(out, 0, sizeof *out);
	if (!p)
		return false;
	out->exists = p->desired;
	out->busy = pod__busy(p);
	out->ready = (p->cond & POD__COND_READY) != 0;
	out->completed = (p->cond & POD__COND_COMPLETED) != 0;
	out->failed = p->fail || (p->st.phase == POD_PP_TERMINAL && !out->completed);
	out->phase = rc_fsm_phase_name(&pod_fsm, p->st.phase);
	out->reason = p->st.reason;
	const pod_spec_t *s = p->want ? p->want : p->spec;
	out->grace_ms = s ? s->stop.grace_ms : 0;
	return true;
}

void pod_mgr_rearm(pod_mgr_t *m, rc_loop_t *loop, const char *name)
{
	pod_trk_t *p = tank_map_get(&m->pods, name);

	if (!p || !p->desired || (p->st.phase != POD_PP_TERMINAL && !p->fail))
		return;
	p->restart_req = true;
	p->restart_noted = false;
	rc_enqueue(loop, K_POD, name);
}

void pod_mgr_free(pod_mgr_t *m)
{
	size_t it = 0;
	void *v;

	if (!m)
		return;
	while (tank_map_next(&m->pods, &it, NULL, &v))
		pod__trk_free(v);
	tank_map_destroy(&m->pods);
	it = 0;
	while (tank_map_next(&m->rdeps, &it, NULL, &v)) {
		tank_set_free(v);
		free(v);
	}
	tank_map_destroy(&m->rdeps);
	pod_cgroup_sweep_abort(&m->sweep);
	free(m->log_dir);
	free(m);
}

void pod_mgr_record(void *ctx, const rc_transition_t *t)
{
	pod_mgr_t *m = ctx;
	char pod[POD_NAME_MAX + 1];
	const char *container = NULL;
	st_transition_t tr;
	pod_trk_t *p;

	/* Each entry says whose it is (kind, key "web" or "web/httpd"); the
	 * store files a container's entries in its pod's history. */
	memset(&tr, 0, sizeof tr);
	tr.at = (int64_t)t->at_ms;
	pod__copy(tr.from, sizeof tr.from, t->from);
	pod__copy(tr.to, sizeof tr.to, t->to);
	pod__copy(tr.kind, sizeof tr.kind, t->kind);
	pod__copy(tr.key, sizeof tr.key, t->key);
	pod__copy(tr.reason, sizeof tr.reason, t->reason);
	if (strcmp(t->kind, "container") == 0) {
		const char *slash = strchr(t->key, '/');
		size_t n = slash ? (size_t)(slash - t->key) : strlen(t->key);
		if (n > POD_NAME_MAX)
			n = POD_NAME_MAX;
		memcpy(pod, t->key, n);
		pod[n] = '\0';
		container = slash ? slash + 1 : "";
	} else {
		pod__copy(pod, sizeof pod, t->key);
	}
	p = tank_map_get(&m->pods, pod);
	if (p)
		pod__copy(tr.uid, sizeof tr.uid, p->spec ? p->uid : p->want_uid);
	/* A pod moved by one of its containers ("c: exited with code 3")
	 * points at the container's entry, recorded just before, rather than
	 * repeating its event. */
	for (size_t i = 0; p && !container && i < p->nctrs; i++) {
		const pod_ctr_t *c = &p->ctrs[i];
		size_t cl = strlen(c->name);
		if (strncmp(t->reason, c->name, cl) == 0 && strncmp(t->reason + cl, ": ", 2) == 0 &&
		    strcmp(t->reason + cl + 2, c->st.reason) == 0) {
			pod__fmt(tr.reason, sizeof tr.reason, "container %s: %s", c->name,
				 rc_fsm_phase_name(&pod_ctr_fsm, c->st.phase));
			break;
		}
	}
	/* A deleted pod's history is dropped with it (st_status_forget). */
	if (strcmp(t->to, "deleted") != 0)
		(void)st_transition_add(m->o.store, pod, &tr);
	if (m->o.on_event) {
		pod_event_t ev = {
			.pod = pod, .container = container, .from = t->from,
			.to = t->to, .reason = t->reason, .at = tr.at,
			.generation = p ? p->generation : 0,
			.uid = p ? (p->spec ? p->uid : p->want_uid) : "",
		};
		m->o.on_event(m->o.event_ctx, &ev);
	}
}

int pod_mgr_restart(pod_mgr_t *m, rt_t *rt, rt_pid_t loop, const char *name)
{
	pod_trk_t *p = tank_map_get(&m->pods, name);

	if (!p || !p->desired)
		return TANK_ENOTFOUND;
	p->restart_req = true;
	return rc_enqueue_from(rt, loop, K_POD, p->name);
}

void pod_mgr_running(pod_mgr_t *m,
		     void (*fn)(void *ctx, const char *name, pid_t pid), void *ctx)
{
	size_t it = 0;
	const char *name;
	void *v;

	while (tank_map_next(&m->pods, &it, &name, &v)) {
		pod_trk_t *p = v;
		/* The first container that runs: a pod whose first container
		 * died while others run is still a running pod. */
		for (size_t i = 0; i < p->nctrs; i++)
			if (p->ctrs[i].runner && p->ctrs[i].proc.pid > 0) {
				fn(ctx, name, p->ctrs[i].proc.pid);
				break;
			}
	}
}

size_t pod_mgr_nrunning(const pod_mgr_t *m)
{
	return m->nrunning;
}

/* Containers that hold or may take descriptors: a pod whose containers
 * all finished for good (terminal: `restart: never` done, or given up)
 * holds none, and 100,000 completed one-shot pods must not block an
 * apply of one more. */
static size_t pod__live_ctrs(const pod_trk_t *p)
{
	return p->st.phase == POD_PP_TERMINAL ? 0 : p->nctrs;
}

size_t pod_mgr_ncontainers(const pod_mgr_t *m, const char *name)
{
	size_t it = 0, n = 0;
	void *v;

	if (name) {
		const pod_trk_t *p = tank_map_get(&m->pods, name);
		return p ? pod__live_ctrs(p) : 0;
	}
	while (tank_map_next(&m->pods, &it, NULL, &v))
		n += pod__live_ctrs(v);
	return n;
}
