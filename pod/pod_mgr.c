/*
 * pod_mgr.c — the pod manager (the container manager is pod_ctr.c; see
 * pod_mgr_int.h for the rooms).
 *
 * want (what the pod asks of a container) is derived, never stored:
 * pod__ctr_want() is true while the pod is desired, its running spec is
 * the desired generation, no restart by hand is under way and the daemon
 * is not shutting down.  Every decision compares that with the observed
 * state (runner alive, terminal, backing off), so any event — an exit, a
 * tick, an apply — just queues the key and the same code decides.
 */
#include "pod/pod_mgr_int.h"
#include "pod/pod_launcher.h"
#include "store/st_coll.h"

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
#include "pod/pod_launch.h"

/* --- helpers ----------------------------------------------------------------- */

/* Status strings are bounded; a longer reason is cut, by design. */
void pod__fmt(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dst, cap, fmt, ap);
	va_end(ap);
}

void pod__copy(char *dst, size_t cap, const char *src)
{
	pod__fmt(dst, cap, "%s", src ? src : "");
}

int pod__ostr_set(char **dst, const char *src, size_t cap)
{
	if (*dst && src && strcmp(*dst, src) == 0)
		return 0;
	free(*dst);
	*dst = NULL;
	if (!src || !src[0] || !cap)
		return 0;
	return (*dst = strndup(src, cap - 1)) ? 0 : -ENOMEM;
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
	p->fail_spec = false;
	if (reason && !(p->fail = strdup(reason)))
		p->fail = oom;
}

pod_ctr_t *pod__ctr_find(pod_mgr_t *m, const char *key)
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

bool pod__ctr_want(const pod_mgr_t *m, const pod_ctr_t *c)
{
	const pod_trk_t *p = c->pod;
	return !m->shutting_down && p->desired && pod__current(p) &&
	       !p->restart_req && !p->fail && !p->held && !c->held_by && !p->stopped;
}

bool pod__busy(const pod_trk_t *p)
{
	for (size_t i = 0; i < p->nctrs; i++)
		if (p->ctrs[i].runner || p->ctrs[i].orphan || p->ctrs[i].cg_orphans)
			return true;
	return false;
}

/* The pod has something to do once its containers are stopped: be
 * deleted, switch to a new spec, or start again after a restart. */
bool pod__waits(const pod_trk_t *p)
{
	return !p->desired || (p->spec && !pod__current(p)) || p->restart_req;
}

void pod__ctr_event(rc_loop_t *loop, pod_ctr_t *c, enum pod_ctr_event ev,
			   const char *reason)
{
	(void)rc_fsm_apply(loop, K_CTR, c->key, &pod_ctr_fsm, &c->st, (uint8_t)ev, reason);
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

uint64_t pod__status_sig(const pod_trk_t *p)
{
	uint64_t h = pod__sig_mix(p->st.phase, (uint64_t)p->st.since);

	h = pod__sig_str(h, rc_fsm_reason(&p->st));
	h = pod__sig_mix(h, p->generation ? p->generation : p->want_gen);
	/* The object it is of: a pod deleted and applied again is another
	 * object at the same generation, whose status must say so even
	 * when nothing else in it has moved yet. */
	h = pod__sig_str(h, p->spec ? p->uid : p->want_uid);
	h = pod__sig_mix(h, p->nctrs);
	for (size_t i = 0; i < p->nctrs; i++) {
		const pod_ctr_t *c = &p->ctrs[i];
		h = pod__sig_mix(h, c->st.phase);
		h = pod__sig_str(h, rc_fsm_reason(&c->st));
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
		h = pod__sig_str(h, pod__ostr(c->probe));
		h = pod__sig_mix(h, c->outcome);
	}
	h = pod__sig_mix(h, p->outcome);
	h = pod__sig_mix(h, p->restart_req);
	h = pod__sig_mix(h, p->held);
	h = pod__sig_mix(h, p->stopped);
	h = pod__sig_mix(h, p->cond);
	return h;
}

/* The end of the window in which c's startup and readiness probes may
 * still pass since it started (each: initial delay + failure threshold ×
 * period; a readiness probe starts after the startup probe passed): a
 * wait counts a container not ready yet as progress until then
 * (docs/cli.md "apply --wait").  0: no such probe, or not started. */
static int64_t pod__probe_until(const pod_ctr_t *c)
{
	const pod_spec_t *s = c->pod->spec;
	const pod_container_t *pc = NULL;
	uint64_t w = 0;

	for (size_t i = 0; c->started_at && s && i < s->container_count && !pc; i++)
		if (strcmp(s->containers[i].name, c->name) == 0)
			pc = &s->containers[i];
	if (!pc)
		return 0;
	for (int r = 0; r < 2; r++) {
		const pod_probe_t *pr = pod_container_probe(pc, r ? POD_PROBE_READINESS : POD_PROBE_STARTUP);
		if (pr->kind != POD_PROBE_NONE)
			w += pr->initial_delay_ms + (uint64_t)pr->failure_threshold * pr->period_ms;
	}
	return w ? c->started_at + (int64_t)w : 0;
}

void pod__persist(pod_mgr_t *m, pod_trk_t *p)
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
	pod__copy(s.reason, sizeof s.reason, rc_fsm_reason(&p->st));
	s.generation = p->generation ? p->generation : p->want_gen;
	pod__copy(s.uid, sizeof s.uid, p->spec ? p->uid : p->want_uid);
	s.since = p->st.since;
	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		pod__copy(cs[i].name, sizeof cs[i].name, c->name);
		pod__copy(cs[i].phase, sizeof cs[i].phase,
			  rc_fsm_phase_name(&pod_ctr_fsm, c->st.phase));
		pod__copy(cs[i].reason, sizeof cs[i].reason, rc_fsm_reason(&c->st));
		cs[i].pid = c->runner ? c->proc.pid : c->orphan;
		cs[i].pid_start_time = c->runner ? c->proc.start_time : c->orphan_start;
		cs[i].restarts = c->restarts;
		cs[i].retries = c->retries;
		cs[i].last_exit = c->last_exit;
		cs[i].started_at = c->started_at;
		cs[i].log_dropped = c->log_dropped;
		cs[i].ready = c->ready;
		pod__copy(cs[i].probe, sizeof cs[i].probe, c->probe);
		cs[i].outcome = c->st.phase == POD_CP_TERMINAL ? c->outcome : POD_OUT_NONE;
		cs[i].probe_until = pod__probe_until(c);
		cs[i].gave_up = c->gave_up;
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
	s.outcome = p->st.phase == POD_PP_TERMINAL ? p->outcome : POD_OUT_NONE;
	s.restart = p->restart_req;
	s.held = p->held;
	s.stopped = p->stopped;
	s.containers = cs;
	s.n_containers = p->nctrs;
	/* Queued and group-committed. */
	if (st_status_put(m->o.store, &s) == 0)
		p->persisted_sig = sig;
	free(cs);
}

/* Derives the pod's phase from its containers (bubble up: pod_derive,
 * pod_phase.h) and applies it through the pod table. */
void pod__update(pod_mgr_t *m, rc_loop_t *loop, pod_trk_t *p)
{
	/* A container a previous tankd left is being adopted (a reexec, a
	 * kill -9 under the keeper): until its reconcile adopts it or stops
	 * it, the pod keeps the phase its stored status has (restored in
	 * pod__seen).  Derived now, with that container neither running nor
	 * anything else yet, it would read pending, and every upgrade would
	 * write running -> pending -> running into each pod's history and
	 * events; the adoption's own transition says what happened. */
	for (size_t i = 0; i < p->nctrs; i++)
		if (p->ctrs[i].adopting)
			return;
	pod_obs_t o = {
		.nctrs = p->nctrs, .failed_as = POD_OUT_FAILED, .busy = pod__busy(p),
		.want = p->nctrs && pod__ctr_want(m, &p->ctrs[0]), .desired = p->desired,
		.restart = p->restart_req, .shutting_down = m->shutting_down,
		.fail = p->fail != NULL, .held = p->held, .gated = p->gated,
		.stopped = p->stopped,
		.stale = p->spec && !pod__current(p),
	};
	char detail[RC_REASON_MAX] = "", reason[RC_REASON_MAX] = "";
	const pod_ctr_t *cause = NULL;     /* whose reason detail is */

	const pod_ctr_t *stopping = NULL, *gave_up = NULL;
	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		if (c->orphan || c->cg_orphans)
			o.leftovers = true;
		switch (c->st.phase) {
		case POD_CP_TERMINAL:
			o.nterm++;
			if (c->outcome != POD_OUT_COMPLETED) {
				o.nfail++;
				o.failed_as = c->outcome == POD_OUT_OOM_KILLED
					      ? POD_OUT_OOM_KILLED : POD_OUT_FAILED;
				pod__copy(detail, sizeof detail, rc_fsm_reason(&c->st));
				cause = c;
				/* The outcome is stored with the status: it
				 * survives a restart of tankd. */
				if (c->outcome == POD_OUT_EXHAUSTED)
					o.gave_up = true, gave_up = c;
			}
			break;
		case POD_CP_RUNNING:
			o.nrun++;
			break;
		case POD_CP_BACKING_OFF:
			o.nback++;
			if (!detail[0]) {
				pod__fmt(detail, sizeof detail, "%s: %s", c->name, rc_fsm_reason(&c->st));
				cause = c;
			}
			break;
		case POD_CP_STOPPING:
			o.nstop++;
			if (!stopping)
				stopping = c;
			break;
		}
	}
	pod_step_t step = pod_derive(&o);
	enum pod_pevent ev = step.ev;
	uint8_t outcome = (uint8_t)step.outcome;
	switch (step.why) {
	case POD_WHY_DETAIL:       pod__copy(reason, sizeof reason, detail); break;
	case POD_WHY_NONE:         break;
	case POD_WHY_DELETED:      pod__copy(reason, sizeof reason, "deleted"); break;
	case POD_WHY_RESTART:      pod__copy(reason, sizeof reason, "restart"); break;
	case POD_WHY_SHUTDOWN:     pod__copy(reason, sizeof reason, "shutdown"); break;
	case POD_WHY_FAIL:         pod__copy(reason, sizeof reason, p->fail); break;
	case POD_WHY_HELD:         pod__copy(reason, sizeof reason, p->held_why); break;
	case POD_WHY_SPEC_CHANGED: pod__copy(reason, sizeof reason, "spec changed"); break;
	case POD_WHY_STOPPED:      pod__copy(reason, sizeof reason, "stopped by tankctl stop"); break;
	case POD_WHY_LEFTOVERS:
		pod__copy(reason, sizeof reason, "stopping what a previous tankd left running");
		break;
	case POD_WHY_STOPPING:
		if (stopping)
			pod__fmt(reason, sizeof reason, "%s: %s", stopping->name,
				 rc_fsm_reason(&stopping->st));
		break;
	case POD_WHY_GAVE_UP:
		pod__fmt(reason, sizeof reason, "container %s failed: %s", gave_up->name,
			 rc_fsm_reason(&gave_up->st));
		break;
	case POD_WHY_OUTCOME:
		pod__copy(reason, sizeof reason, pod_outcome_name(step.outcome));
		break;
	case POD_WHY_GATED:
		/* A start waits for depends_on: the containers say for what. */
		pod__copy(reason, sizeof reason, detail);
		for (size_t i = 0; i < p->nctrs && !reason[0]; i++)
			if (p->ctrs[i].st.phase == POD_CP_PENDING)
				pod__copy(reason, sizeof reason, rc_fsm_reason(&p->ctrs[i].st));
		break;
	}
	p->cause = step.why == POD_WHY_DETAIL ? cause : NULL;
	(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st, (uint8_t)ev, reason);
	p->cause = NULL;
	if (p->st.phase == POD_PP_TERMINAL && ev == POD_PE_ALL_DONE)
		p->outcome = outcome;
	else if (p->st.phase != POD_PP_TERMINAL)
		p->outcome = POD_OUT_NONE;

	/* Ready (DESIGN.md §8): every container ready or completed, and
	 * the pod running.  A container without a readiness probe is ready
	 * while it runs. */
	bool ready = p->st.phase == POD_PP_RUNNING && !p->fail;
	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		c->ready = c->st.phase == POD_CP_RUNNING && (!c->probes || c->probe_ready);
		if (!c->ready && !(c->st.phase == POD_CP_TERMINAL &&
				   c->outcome == POD_OUT_COMPLETED))
			ready = false;
	}
	bool completed = p->st.phase == POD_PP_TERMINAL && !p->fail && !o.nfail;
	uint8_t cond = (uint8_t)((ready ? POD__COND_READY : 0) |
				 (ready || p->st.phase == POD_PP_RUNNING || completed
				  ? POD__COND_STARTED : 0) |
				 (completed ? POD__COND_COMPLETED : 0));
	/* A run asked for again (a restart by hand, a stack brought up
	 * again) resets what the last run met: a dependent waiting for
	 * `completed` waits for this run, not the last one. */
	if (!pod__current(p) || !p->desired || p->restart_req)
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
	bool changed = held != p->held || (held && strcmp(why, pod__ostr(p->held_why)) != 0);

	p->held = held;
	(void)pod__ostr_set(&p->held_why, held ? why : NULL, RC_REASON_MAX);
	return changed;
}

/* --- tracking ------------------------------------------------------------------ */

static void pod__ctrs_free(pod_mgr_t *m, pod_trk_t *p)
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
		free(c->probe);
		free(c->held_by);
		rc_fsm_clear(&c->st);
	}
	free(p->ctrs);
	p->ctrs = NULL;
	p->nctrs = 0;
	if (p->sb) {
		uint64_t st;
		if (pod_proc_start_time(p->sb->pid, &st) == 0)
			pod_adopt_forget_sandbox(m->o.adopt, p->name, p->sb->pid, st);
		pod_sandbox_destroy(p->sb, false);
		free(p->sb);
		p->sb = NULL;
	}
}

static void pod__trk_free(pod_mgr_t *m, pod_trk_t *p)
{
	pod__set_fail(p, NULL);
	pod__ctrs_free(m, p);
	free(p->held_why);
	rc_fsm_clear(&p->st);
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
static int pod__ctrs_build(pod_mgr_t *m, pod_trk_t *p)
{
	const pod_spec_t *s = p->spec;

	size_t n = s->container_count, keys = 0, nl = strlen(p->name);
	char *at;

	for (size_t i = 0; i < n; i++) {
		size_t kl = nl + 1 + strlen(s->containers[i].name);
		keys += (kl < RC_KEY_MAX ? kl : RC_KEY_MAX - 1) + 1;
	}
	/* One block: the containers, then their keys. */
	if (!(p->ctrs = calloc(1, (n ? n : 1) * sizeof *p->ctrs + keys)))
		return -ENOMEM;
	p->nctrs = n;
	at = (char *)(p->ctrs + (n ? n : 1));
	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		size_t kl = nl + 1 + strlen(s->containers[i].name);
		kl = kl < RC_KEY_MAX ? kl : RC_KEY_MAX - 1;
		c->pod = p;
		c->key = at;
		pod__fmt(c->key, kl + 1, "%s/%s", p->name, s->containers[i].name);
		at += kl + 1;
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
			bool same = p->saved->generation == p->generation &&
				    (!p->saved->uid[0] || strcmp(p->saved->uid, p->uid) == 0);
			if (cs->pid > 0 && pod_proc_start_time(cs->pid, &st) == 0 &&
			    st == cs->pid_start_time) {
				c->orphan = cs->pid;
				c->orphan_start = st;
			}
			/* Handed over (a reexec, the keeper) and of this object
			 * at this version: adopted, not stopped (pod_ctr.c),
			 * even when it ended while nobody watched (its exit is
			 * known).  An older version is adopted too when its
			 * spec is known (pod__adopt_prev built these
			 * containers from it), then replaced by the rules for
			 * a changed spec; otherwise it is stopped. */
			if (same && cs->pid > 0 &&
			    pod_adopt_offered(m->o.adopt, c->key, cs->pid, cs->pid_start_time) &&
			    (c->orphan || pod_adopt_ended(m->o.adopt, cs->pid,
							  cs->pid_start_time, NULL))) {
				c->orphan = cs->pid;
				c->orphan_start = cs->pid_start_time;
				c->adopting = true;
			}
			/* Counts belong to this object at this version: not to
			 * a predecessor of the same name. */
			if (!same)
				break;
			/* An adopted container keeps its readiness until its
			 * probes (started afresh) say otherwise. */
			c->probe_ready = c->adopting && cs->ready;
			c->restarts = cs->restarts;
			c->retries = cs->retries;
			c->last_exit = cs->last_exit;
			c->started_at = cs->started_at;
			int ph = rc_fsm_phase_of(&pod_ctr_fsm, cs->phase);
			/* Restored as pending, whatever it was: its next
			 * transition says from what (pod_mgr_record). */
			if (ph > POD_CP_PENDING && ph != POD_CP_TERMINAL)
				c->restored_from = (uint8_t)(ph + 1);
			/* It had a process nobody handed over (tankd killed
			 * without its keeper, the machine restarted): that
			 * process is stopped if still there and the container
			 * starts again, which is a restart, as Kubernetes
			 * counts one after its node's restart.  (RESTARTS
			 * stayed 0 and only the pid told.)  restart: never
			 * does not run again (once_lost below). */
			if (cs->pid > 0 && !c->adopting && ph != POD_CP_TERMINAL &&
			    s->restart != POD_RESTART_NEVER)
				c->restarts++;
			if (ph == POD_CP_TERMINAL) {
				rc_fsm_restore(&c->st, POD_CP_TERMINAL, 0, cs->reason);
				/* Stored since the outcome was; before, a clean
				 * last exit was the one way to complete. */
				c->outcome = cs->outcome ? cs->outcome
					     : cs->last_exit.present && !cs->last_exit.code &&
					       !cs->last_exit.signal
					     ? POD_OUT_COMPLETED : POD_OUT_FAILED;
			} else if (s->restart == POD_RESTART_NEVER && cs->started_at > 0 &&
				   !c->adopting) {
				c->once_lost = true;   /* see pod__ctr_reconcile */
			} else if (ph == POD_CP_BACKING_OFF) {
				c->next_restart_at = p->saved->next_restart_at;
				/* Why it backs off (its last exit) stays its
				 * reason once the backoff is restored. */
				rc_fsm_restore(&c->st, POD_CP_PENDING, 0, cs->reason);
			}
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

/* The stored status says the containers ran an older generation of this
 * object than the desired one (a replace a previous tankd had not
 * finished: a stop grace under way, a stop held for dependents, or an
 * apply just before its death), and a process of theirs is handed over
 * (pod_adopt.h).  The containers are then built from that generation's
 * spec, which the store keeps beside the new one (st_pod_t.prev_spec), so
 * that they are adopted as they are, same pid, recorded at their own
 * generation; pod__reconcile then replaces them as it replaces any
 * container of a changed spec, as if tankd had never gone away.  Any other
 * case (two applies since, nothing handed over, a spec that does not
 * load) keeps the old way: what is left is stopped as leftovers. */
static void pod__adopt_prev(pod_mgr_t *m, pod_trk_t *p, const st_pod_t *sp)
{
	const st_status_t *s = p->saved;
	pod_spec_t *old = NULL;
	tank_error_t err;
	bool offered = false;

	if (!s || p->spec || !p->want || !sp->prev_spec || !sp->prev_generation ||
	    s->generation != sp->prev_generation || s->generation == p->want_gen ||
	    strcmp(s->uid, p->want_uid) != 0 || !pod_adopt_offers(m->o.adopt))
		return;
	for (size_t j = 0; j < s->n_containers && !offered; j++) {
		const st_container_status_t *cs = &s->containers[j];
		char key[RC_KEY_MAX];
		pod__fmt(key, sizeof key, "%s/%s", p->name, cs->name);
		offered = cs->pid > 0 && pod_adopt_offered(m->o.adopt, key, cs->pid,
							   cs->pid_start_time);
	}
	tank_error_clear(&err);
	if (!offered || pod_spec_decode(sp->prev_spec, sp->prev_spec_len, &old, &err) < 0)
		return;
	p->spec = old;
	p->generation = s->generation;
	memcpy(p->uid, p->want_uid, sizeof p->uid);
	pod__rdeps_add(m, p->name, old);
	if (pod__ctrs_build(m, p) < 0) {
		/* Out of memory: the old way (its leftovers stopped). */
		pod__rdeps_del(m, p->name, old, p->want);
		pod_spec_free(old);
		p->spec = NULL;
		p->generation = 0;
		p->uid[0] = '\0';
	}
}

/* One stored pod, seen by a resync: track it, decode its spec only when
 * its generation moved (a resync over 10,000 unchanged pods decodes
 * nothing and copies nothing).  Returns its tracking, NULL when it could
 * not be tracked (out of memory: seen again at the next resync), so that
 * the walk does not look the name up a second time. */
static pod_trk_t *pod__seen(pod_mgr_t *m, const st_pod_t *sp)
{
	pod_trk_t *p = pod__track(m, sp->name);

	if (!p)
		return NULL;
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
			/* A restart asked of a previous tankd and not done yet
			 * (pod__restart_req stored it). */
			if (p->saved->restart)
				p->restart_req = true;
			/* Stopped by the operator: stays stopped across a
			 * restart of tankd (systemd's stopped unit). */
			if (p->saved->stopped)
				p->stopped = true;
		}
	}
	/* Another object under the same name (deleted and applied again):
	 * the operator's stop was the old one's. */
	if (p->want_uid[0] && strcmp(p->want_uid, sp->uid) != 0)
		p->stopped = false;
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
			p->fail_spec = true;
			p->want_gen = sp->generation;
			pod__copy(p->want_uid, sizeof p->want_uid, sp->uid);
			p->desired = true;
			return p;
		}
		if (p->want != p->spec) {
			pod__rdeps_del(m, p->name, p->want, p->spec ? p->spec : ns);
			pod_spec_free(p->want);
		}
		p->want = ns;
		pod__rdeps_add(m, p->name, ns);
		p->want_gen = sp->generation;
		pod__copy(p->want_uid, sizeof p->want_uid, sp->uid);
		if (p->fail_spec)
			pod__set_fail(p, NULL);
		if (p->saved && !p->spec)
			pod__adopt_prev(m, p, sp);
		pod__adopt(m, p);
	}
	p->desired = true;
	return p;
}

/* Nothing a pass could change: desired at the generation it runs, every
 * container either terminal or running under a live runner, nothing
 * stopping, no restart asked for, no leftover of a previous daemon.  A
 * resync skips such pods: what can still happen to them (an exit, a
 * delete, an apply) arrives as an event that queues the key, and a runner
 * that died unseen fails the rt_alive check here.  A pass over 10,000
 * converged pods then reads the store and checks flags, nothing more. */
bool pod__settled(rt_t *rt, const pod_trk_t *p)
{
	return pod__calm(rt, p) == POD_CALM_SETTLED;
}

/* What a pass could change of p: nothing (POD_CALM_SETTLED, above),
 * nothing but its containers' restarts, which tank itself times
 * (POD_CALM_RESTARTING: every container terminal, running under a live
 * runner, or backing off without one or with its restart's launch under
 * way, and at least one backing off), or more (POD_CALM_NO).  One walk
 * for both: the sweep asks both of every pod.  A restart's launch waits
 * in the launcher's queue for seconds in a storm of 10,000: those pods
 * were read by every sweep meanwhile. */
pod_calm_t pod__calm(rt_t *rt, const pod_trk_t *p)
{
	pod_calm_t calm = POD_CALM_SETTLED;

	if (!p->desired || !pod__current(p) ||
	    p->restart_req || p->fail || !p->nctrs)
		return POD_CALM_NO;
	for (size_t i = 0; i < p->nctrs; i++) {
		const pod_ctr_t *c = &p->ctrs[i];
		if (c->orphan || c->cg_orphans || c->stop_sent)
			return POD_CALM_NO;
		if (c->st.phase == POD_CP_TERMINAL)
			continue;
		if (c->st.phase == POD_CP_BACKING_OFF &&
		    (!c->runner || (c->launching && rt_alive(rt, c->runner))))
			calm = POD_CALM_RESTARTING;
		else if (c->st.phase != POD_CP_RUNNING || !c->runner || !rt_alive(rt, c->runner))
			return POD_CALM_NO;
	}
	return calm;
}

/* The pod's cgroup: "<name>.<first 8 hex digits of its uid>".  Tied to
 * the object, not the name: the group of a deleted pod is never the group
 * of its successor of the same name, so leftovers of the old object are
 * found by the sweep (unowned), not taken for the new one's. */
void pod__cg_group(const pod_trk_t *p, char *buf, size_t cap)
{
	const char *uid = p->spec ? p->uid : p->want_uid;

	if (uid[0])
		pod__fmt(buf, cap, "%s.%.8s", p->name, uid);
	else
		pod__copy(buf, cap, p->name);
}

typedef struct pod_walk {
	pod_mgr_t *m;
	rc_loop_t *loop;
	uint64_t end_ns;              /* pod__slice_ns: the slice ends here */
} pod_walk_t;

uint64_t pod__slice_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A pod a resync found not settled: it and its containers are queued
 * (the container manager lists nothing itself, pod_ctr.c).  A pod only
 * waiting for its containers' restarts (POD_CALM_RESTARTING) is left
 * alone, as the sweep leaves it: each backing-off container has its own
 * requeue at its restart time (pod__ctr_reconcile), and one whose launch
 * is under way hears from the launcher.  In a storm of 9,872 nearly every
 * pod is such a pod, and each pass queued and reconciled them all for
 * nothing: O(N) a pass, O(N^2) a storm (docs/bench.md, issue 38 item 3,
 * round 4). */
static void pod__resync_one(rc_loop_t *loop, pod_trk_t *p)
{
	rc_enqueue(loop, K_POD, p->name);
	for (size_t i = 0; i < p->nctrs; i++)
		rc_enqueue(loop, K_CTR, p->ctrs[i].key);
}

/* The store's watch (st_subscribe): the names an apply or a delete
 * changed, kept until a whole walk that began after them ends.  A call
 * not wholly kept (no memory) is not counted: pod__ahead_whole is false
 * until the next whole walk. */
static void pod__ahead_told(void *ctx, const char *const *names, size_t n)
{
	pod_mgr_t *m = ctx;
	void *call = (void *)(uintptr_t)(m->told + 1);

	for (size_t i = 0; i < n; i++)
		if (tank_map_put(&m->ahead, names[i], call, NULL) < 0)
			return;
	m->told++;
}

/* A whole walk ended: the names told before it began were taken up by it
 * and leave (all of them when none came since: the map's memory goes). */
static void pod__ahead_prune(pod_mgr_t *m)
{
	size_t it = 0;
	const char *name;
	void *v;
	tank_map_t keep;

	if (m->told == m->walk_told) {
		tank_map_destroy(&m->ahead);
		tank_map_init(&m->ahead);
		return;
	}
	tank_map_init(&keep);
	while (tank_map_next(&m->ahead, &it, &name, &v)) {
		if ((uintptr_t)v <= m->walk_told)
			continue;
		if (tank_map_put(&keep, name, v, NULL) < 0) {
			tank_map_destroy(&keep);
			return;         /* kept as it is: a superset is still right */
		}
	}
	tank_map_destroy(&m->ahead);
	m->ahead = keep;
}

static int pod__seen_slice(void *ctx, const st_pod_t *sp)
{
	pod_walk_t *w = ctx;
	pod_mgr_t *m = w->m;
	pod_trk_t *p;

	if ((p = pod__seen(m, sp))) {
		p->seen_pass = m->pass;
		if (pod__calm(rc_rt(w->loop), p) == POD_CALM_NO)
			pod__resync_one(w->loop, p);
	} else {
		m->missed = true;       /* this walk cannot stand for the store */
	}
	if (pod__slice_ns() <= w->end_ns)
		return 0;
	/* The next slice goes on after this name.  Copied only when the
	 * slice stops: a formatted copy for each of 10,000 pods was a fifth
	 * of a resync's instructions. */
	pod__copy(m->cursor, sizeof m->cursor, sp->name);
	return 1;
}

/* One slice of a pass that walks the tracked pods, not the store (see
 * pod__list): 1 while more remains.  A pod tracked as desired is still
 * stored at the generation it was seen at; one not desired is going and
 * is queued, as the marking would. */
static int pod__fast_slice(pod_mgr_t *m, rc_loop_t *loop, uint64_t end_ns)
{
	size_t it = m->fast_it;
	unsigned n = 0;
	void *v;

	while (tank_map_next(&m->pods, &it, NULL, &v)) {
		pod_trk_t *p = v;
		if (p->desired)
			p->seen_pass = m->pass;
		if (pod__calm(rc_rt(loop), p) == POD_CALM_NO)
			pod__resync_one(loop, p);
		if ((++n & 63) == 0 && pod__slice_ns() > end_ns) {
			m->fast_it = it;
			return 1;
		}
	}
	return 0;
}

/* An offer (pod_adopt) still has a taker: its container is to be
 * adopted, or its sandbox's pod has containers to adopt. */
static bool pod__offer_wanted(void *ctx, bool sandbox, const char *name)
{
	pod_mgr_t *m = ctx;

	if (sandbox) {
		pod_trk_t *p = tank_map_get(&m->pods, name);
		for (size_t i = 0; p && !p->sb && i < p->nctrs; i++)
			if (p->ctrs[i].adopting)
				return true;
		return false;
	}
	pod_ctr_t *c = pod__ctr_find(m, name);
	return c && c->adopting;
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
	/* Short slices while the store still loads its cache (the start):
	 * the first answers of the socket wait for the iterations. */
	uint64_t slice_ms = st_loaded(m->o.store) ? RC_LIST_SLICE_MS : RC_LIST_SLICE_START_MS;
	pod_walk_t w = { m, loop, pod__slice_ns() + slice_ms * 1000000ull };
	size_t it = 0;
	const char *name;
	void *v;
	int err;

	if (m->sweeping) {
		/* The pass's second half: the cgroup sweep, in slices too. */
		if (!m->shutting_down && pod__sweep_slice(m, loop) == 1)
			return RC_LIST_MORE;
		pod_cgroup_sweep_abort(&m->sweep);
		m->sweeping = false;
		return 0;
	}
	if (!m->walking && !m->marking) {
		m->walking = true;
		m->pass++;
		m->cursor[0] = '\0';
		m->fast_it = 0;
		m->missed = false;
		m->walk_changes = st_coll_changes(st_pods(m->o.store));
		m->walk_told = m->told;
		m->fast = m->clean && m->walk_changes == m->clean_changes;

	}
	if (m->walking && m->fast) {
		/* Nothing stored changed since a whole walk: what it would
		 * find is what is tracked (no spec to decode, no pod gone),
		 * so only the tracked pods are looked at, and no marking
		 * follows.  A pass over 10,000 converged pods read and decoded
		 * 10,000 records for nothing (docs/bench.md, issue 38). */
		if (pod__fast_slice(m, loop, w.end_ns) == 1)
			return RC_LIST_MORE;
		m->walking = false;
	} else if (m->walking) {
		err = st_pod_foreach_from(m->o.store, m->cursor, pod__seen_slice, &w, NULL);
		if (err == 1)
			return RC_LIST_MORE;
		m->walking = false;
		if (err < 0)
			return err;     /* half a walk must not read as "deleted" */
		/* A store changed during the walk, behind its cursor, is
		 * walked again next time: the count is the one it began at. */
		if (!m->missed) {
			m->clean = true;
			m->clean_changes = m->walk_changes;
			m->clean_told = m->walk_told;
			pod__ahead_prune(m);
		}
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
					pod__resync_one(loop, p);
			}
			if ((++n & 63) == 0 && pod__slice_ns() > w.end_ns) {
				m->mark_it = it;
				return RC_LIST_MORE;
			}
		}
		m->marking = false;
	}
	/* By the end of the second pass every container handed over has
	 * been looked at: what is left is nobody's. */
	if (m->o.adopt && m->pass >= 2) {
		pod_adopt_prune(m->o.adopt, pod__offer_wanted, m);
		if (m->pass >= 3)
			pod_adopt_forget_exits(m->o.adopt);
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
	pod__trk_free(m, p);               /* closes its log writers */
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
		pod__ctrs_free(m, p);
		p->gated = false;
		if (p->spec != p->want) {
			pod__rdeps_del(m, p->name, p->spec, p->want);
			pod_spec_free(p->spec);
		}
		p->spec = NULL;
		if (p->fail && !p->fail_spec)
			pod__set_fail(p, NULL);  /* a new spec starts afresh */
	}
	if (!p->spec && p->want) {
		/* Another object under the same name (deleted and created
		 * again before the old one was forgotten): it starts with an
		 * empty log, as a new container of kubectl or compose does;
		 * the old one's writers were closed with its containers. */
		if (p->uid[0] && strcmp(p->uid, p->want_uid) != 0)
			(void)pod_log_remove(m->log_dir, p->name);
		p->spec = p->want;
		p->generation = p->want_gen;
		memcpy(p->uid, p->want_uid, sizeof p->uid);
		if (pod__ctrs_build(m, p) < 0) {
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
			c->outcome = POD_OUT_NONE;
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

/* A restart by hand, asked by message (pod_mgr_restart): stored before
 * anything acts on it, so a kill -9 of tankd does not forget it. */
static void pod__restart_req(pod_mgr_t *m, rc_loop_t *loop, const rt_msg_t *msg)
{
	char name[POD_NAME_MAX + 1];
	pod_trk_t *p;

	if (!msg->len || msg->len > sizeof name || ((const char *)msg->data)[msg->len - 1])
		return;
	memcpy(name, msg->data, msg->len);
	/* Not tracked yet (applied a moment ago): it starts afresh anyway. */
	if (!(p = tank_map_get(&m->pods, name)) || !p->desired)
		return;
	p->restart_req = true;
	p->restart_noted = false;
	p->stopped = false;     /* a restart of a stopped pod starts it (systemctl's) */
	pod__deps_notify(m, loop, p, 0);        /* its last run's conditions are stale */
	pod__persist(m, p);
	/* A commit, no fsync: tankd's death does not lose the page cache. */
	(void)st_flush(m->o.store, NULL);
	rc_enqueue(loop, K_POD, p->name);
}

int pod__set_stopped(pod_mgr_t *m, rc_loop_t *loop, const char *name, bool stopped,
		     const char *user, const char *uid)
{
	char why[RC_REASON_MAX];
	pod_trk_t *p = tank_map_get(&m->pods, name);

	/* The object the requester found and no pass has taken up yet
	 * (applied a moment ago, perhaps over a deleted one): taken up now,
	 * as the walk would, so that the stop is this object's and no pass
	 * in progress forgets the tracking as not stored.  (Tracked apart
	 * from the store, a `stop` right after an apply went with the
	 * tracking, or was taken for the deleted one's, and the pod ran.) */
	if (uid && uid[0] && (!p || !p->desired || strcmp(p->want_uid, uid) != 0)) {
		st_pod_t sp;
		if (st_pod_get(m->o.store, name, &sp, NULL) == 0) {
			if (strcmp(sp.uid, uid) == 0 && (p = pod__seen(m, &sp)))
				p->seen_pass = m->pass;
			st_pod_clear(&sp);
		}
	}
	if (!p && !(p = pod__track(m, name)))
		return -ENOMEM;
	if (p->stopped != stopped) {
		p->stopped = stopped;
		pod__fmt(why, sizeof why, "%s asked by %s", stopped ? "stop" : "start", user);
		(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st, POD_PE_NOTE, why);
	}
	pod__persist(m, p);
	/* A commit, no fsync, as a restart's: tankd's death does not lose
	 * the page cache, and the answer waits for this (RC_TAG_ECHO). */
	(void)st_flush(m->o.store, NULL);
	pod__enqueue_ctrs(loop, p);
	rc_enqueue(loop, K_POD, p->name);
	return 0;
}

static void pod__handle(void *ctx, rc_loop_t *loop, rt_msg_t *msg)
{
	pod_mgr_t *m = ctx;
	size_t it = 0;
	void *v;

	if (msg->type == RT_MSG_USER && msg->tag == POD_MGR_RESTART) {
		pod__restart_req(m, loop, msg);
		return;
	}
	if (msg->type == RT_MSG_USER && msg->tag == POD_REQ) {
		pod__req_handle(m, loop, msg);
		return;
	}
	if (msg->type != RT_MSG_USER || msg->tag != POD_MGR_SHUTDOWN)
		return;
	m->shutting_down = true;
	/* Every stop that may go goes now, in this one pass (a stop is a
	 * message to a runner, microseconds): the graces then run at once,
	 * and tankd's stop lasts about the longest grace a level of
	 * depends_on, not a drain of the queue a container at a time
	 * (issue 38, item 6 (c)).  A pod whose dependents still run is
	 * stopped when the last of them ends (pod__deps_notify). */
	while (tank_map_next(&m->pods, &it, NULL, &v))
		pod__shutdown_stop(m, loop, v);
	pod__drained_check(m, loop);
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
	tank_map_init(&m->ahead);
	if (o->store && (m->watch = st_subscribe(o->store, pod__ahead_told, m)) < 0) {
		int rc = m->watch;
		tank_map_destroy(&m->ahead);
		tank_map_destroy(&m->rdeps);
		tank_map_destroy(&m->pods);
		free(m->log_dir);
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void pod_mgr_set_owner(pod_mgr_t *m, const pod_owner_t *owner)
{
	m->owner = *owner;
}

void pod_mgr_set_events(pod_mgr_t *m, void (*fn)(void *ctx, const pod_event_t *ev),
			void *ctx)
{
	m->o.on_event = fn;
	m->o.event_ctx = ctx;
}

bool pod_mgr_draining(const pod_mgr_t *m)
{
	return m->shutting_down;
}

bool pod_mgr_settling(const pod_mgr_t *m)
{
	return m->pass == 0 || (m->pass == 1 && (m->walking || m->marking)) ||
	       pod_adopt_proc_offers(m->o.adopt) > 0;
}

bool pod_mgr_info(const pod_mgr_t *m, const char *name, pod_info_t *out)
{
	const pod_trk_t *p = tank_map_get(&m->pods, name);

	memset(out, 0, sizeof *out);
	if (!p)
		return false;
	out->exists = p->desired;
	out->busy = pod__busy(p);
	if (pod_adopt_offers(m->o.adopt)) {
		out->adopting = !p->nctrs && p->saved;
		for (size_t i = 0; i < p->nctrs && !out->adopting; i++)
			out->adopting = p->ctrs[i].adopting;
	}
	out->ready = (p->cond & POD__COND_READY) != 0;
	out->completed = (p->cond & POD__COND_COMPLETED) != 0;
	out->failed = p->fail || (p->st.phase == POD_PP_TERMINAL && !out->completed);
	out->phase = (enum pod_phase)p->st.phase;
	out->outcome = p->st.phase == POD_PP_TERMINAL ? (enum pod_outcome)p->outcome
						       : POD_OUT_NONE;
	out->reason = rc_fsm_reason(&p->st);
	const pod_spec_t *s = p->want ? p->want : p->spec;
	out->grace_ms = s ? s->stop.grace_ms : 0;
	out->deps = s ? s->deps : NULL;
	out->ndeps = s ? s->dep_count : 0;
	return true;
}

void pod_mgr_rearm(pod_mgr_t *m, rc_loop_t *loop, const char *name)
{
	pod_trk_t *p = tank_map_get(&m->pods, name);

	if (!p || !p->desired || (p->st.phase != POD_PP_TERMINAL && !p->fail))
		return;
	p->restart_req = true;
	p->restart_noted = false;
	p->stopped = false;     /* a restart of a stopped pod starts it (systemctl's) */
	/* Its last run's conditions are stale from now on, before any
	 * dependent of it is looked at (the stack queues them all at once). */
	pod__deps_notify(m, loop, p, 0);
	/* Stored as a restart by hand is (pod__restart_req); the caller
	 * commits (st_flush) once for all the pods it rearms. */
	pod__persist(m, p);
	rc_enqueue(loop, K_POD, name);
}

void pod_mgr_free(pod_mgr_t *m)
{
	size_t it = 0;
	void *v;

	if (!m)
		return;
	while (tank_map_next(&m->pods, &it, NULL, &v))
		pod__trk_free(m, v);
	tank_map_destroy(&m->pods);
	it = 0;
	while (tank_map_next(&m->rdeps, &it, NULL, &v)) {
		tank_set_free(v);
		free(v);
	}
	tank_map_destroy(&m->rdeps);
	if (m->watch > 0)
		(void)st_unsubscribe(m->o.store, m->watch);
	tank_map_destroy(&m->ahead);
	pod_cgroup_sweep_abort(&m->sweep);
	pod_launcher_free(m->launcher);
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

	/* A container's first transition after a restart of tankd goes from
	 * the phase its stored status had (running, stopping, backing_off),
	 * not from the pending it was restored as: its history chains
	 * (docs/store.md), as its pod's does (restored at its phase). */
	const char *from = t->from;
	if (t->kind_id == K_CTR) {
		pod_ctr_t *c = pod__ctr_find(m, t->key);
		if (c && c->restored_from) {
			if (strcmp(from, rc_fsm_phase_name(&pod_ctr_fsm, POD_CP_PENDING)) == 0)
				from = rc_fsm_phase_name(&pod_ctr_fsm, (uint8_t)(c->restored_from - 1));
			c->restored_from = 0;
		}
	}
	/* Each entry says whose it is (kind, key "web" or "web/httpd"); the
	 * store files a container's entries in its pod's history. */
	memset(&tr, 0, sizeof tr);
	tr.at = (int64_t)t->at_ms;
	pod__copy(tr.from, sizeof tr.from, from);
	pod__copy(tr.to, sizeof tr.to, t->to);
	pod__copy(tr.kind, sizeof tr.kind, t->kind);
	pod__copy(tr.key, sizeof tr.key, t->key);
	pod__copy(tr.reason, sizeof tr.reason, t->reason);
	if (t->kind_id == K_CTR) {
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
	if (p && !container && p->cause)
		pod__fmt(tr.reason, sizeof tr.reason, "container %s: %s", p->cause->name,
			 rc_fsm_phase_name(&pod_ctr_fsm, p->cause->st.phase));
	/* A deleted pod's history is dropped with it (st_status_forget). */
	if (!(t->kind_id == K_POD && t->to_phase == POD_PP_DELETED))
		(void)st_transition_add(m->o.store, pod, &tr);
	if (m->o.on_event) {
		pod_event_t ev = {
			.pod = pod, .container = container, .from = from,
			.to = t->to, .reason = t->reason, .at = tr.at,
			.generation = p ? p->generation : 0,
			.uid = p ? (p->spec ? p->uid : p->want_uid) : "",
		};
		m->o.on_event(m->o.event_ctx, &ev);
	}
}

int pod_mgr_restart(pod_mgr_t *m, rt_t *rt, rt_pid_t loop, const char *name)
{
	st_pod_t sp;
	size_t n = strlen(name);
	int rc;

	/* The store says whether it exists (the manager's map is the loop
	 * actor's alone). */
	if (n > POD_NAME_MAX)
		return TANK_ENOTFOUND;
	if ((rc = st_pod_get(m->o.store, name, &sp, NULL)) < 0)
		return rc;
	st_pod_clear(&sp);
	return rt_send(rt, loop, POD_MGR_RESTART, name, n + 1);
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

typedef struct pod_procs_walk {
	pod_mgr_t *m;
	void (*fn)(void *ctx, bool sandbox, const char *name, const pod_proc_t *p);
	void *ctx;
} pod_procs_walk_t;

/* An offer not claimed yet, handed on unless this life's own process of
 * the same name was handed over already (a container started again in
 * place of one that could not be adopted: its offer waits for the prune). */
static void pod__offer_on(void *ctx, bool sandbox, const char *name, const pod_proc_t *p)
{
	pod_procs_walk_t *w = ctx;

	if (sandbox) {
		const pod_trk_t *t = tank_map_get(&w->m->pods, name);
		if (t && t->sb && t->sb->pid > 0)
			return;
	} else {
		const pod_ctr_t *c = pod__ctr_find(w->m, name);
		if (c && c->runner && c->proc.pid > 0)
			return;
	}
	w->fn(w->ctx, sandbox, name, p);
}

void pod_mgr_procs(pod_mgr_t *m,
		   void (*fn)(void *ctx, bool sandbox, const char *name, const pod_proc_t *p),
		   void *ctx)
{
	pod_procs_walk_t w = { m, fn, ctx };

	size_t it = 0;
	const char *name;
	void *v;

	/* Nothing half launched while the image is replaced: a child the
	 * launcher thread clones now, or one whose runner has not taken it
	 * yet, would be in no list and run untracked (it is killed; the
	 * next image starts the container again). */
	pod_launcher_settle(m->launcher);
	while (tank_map_next(&m->pods, &it, &name, &v)) {
		pod_trk_t *p = v;
		if (p->sb && p->sb->pid > 0) {
			pod_proc_t sp = { .pid = p->sb->pid, .stdout_fd = -1, .stderr_fd = -1 };
			if (pod_proc_start_time(sp.pid, &sp.start_time) == 0)
				fn(ctx, true, name, &sp);
		}
		for (size_t i = 0; i < p->nctrs; i++)
			if (p->ctrs[i].runner && p->ctrs[i].proc.pid > 0)
				fn(ctx, false, p->ctrs[i].key, &p->ctrs[i].proc);
	}
	pod_adopt_each_offer(m->o.adopt, pod__offer_on, &w);
}

size_t pod_mgr_nrunning(const pod_mgr_t *m)
{
	/* A launch under way is no running process yet. */
	return m->nrunning - m->nlaunching;
}

/* Containers that hold or may take descriptors: a pod whose containers
 * all finished for good (terminal: `restart: never` done, or given up)
 * holds none, and 100,000 completed one-shot pods must not block an
 * apply of one more. */
static size_t pod__live_ctrs(const pod_trk_t *p)
{
	size_t n = p->nctrs;

	/* Seen but not taken up yet (its containers are built when it
	 * starts): it will hold its wanted spec's. */
	if (p->want && p->want->container_count > n)
		n = p->want->container_count;
	if (p->st.phase == POD_PP_TERMINAL && !(p->want && p->want != p->spec))
		return 0;
	return n;
}

void pod_mgr_pids_group(const pod_mgr_t *m, char *buf, size_t cap)
{
	const pod_cgroup_env_t *g = &m->cg_env;

	buf[0] = '\0';
	if (!m->has_cg)
		return;
	if (g->mode == POD_CGROUP_V2 && g->v2_mount[0])
		snprintf(buf, cap, "%s/%s", g->v2_mount, g->root);
	else if (g->mode == POD_CGROUP_V1 && g->v1_mount[POD_CG_PIDS][0])
		snprintf(buf, cap, "%s/%s", g->v1_mount[POD_CG_PIDS], g->root);
}

typedef struct pod_ahead {
	pod_mgr_t *m;
	const tank_map_t *skip;
	size_t n;
} pod_ahead_t;

static int pod__ahead_one(void *ctx, const st_pod_t *sp)
{
	pod_ahead_t *a = ctx;
	const pod_trk_t *p = tank_map_get(&a->m->pods, sp->name);
	pod_spec_t *s = NULL;
	tank_error_t e;
	size_t have;

	if (a->skip && tank_map_get(a->skip, sp->name))
		return 0;
	/* Seen by the loop: pod__live_ctrs counts it. */
	if (p && p->want_gen == sp->generation && strcmp(p->want_uid, sp->uid) == 0)
		return 0;
	tank_error_clear(&e);
	if (pod_spec_decode(sp->spec, sp->spec_len, &s, &e) < 0)
		return 0;
	have = p ? pod__live_ctrs(p) : 0;
	a->n += s->container_count > have ? s->container_count - have : 0;
	pod_spec_free(s);
	return 0;
}

bool pod_mgr_caught_up(const pod_mgr_t *m)
{
	return m->clean && st_coll_changes(st_pods(m->o.store)) == m->clean_changes;
}

/* Every name the store changed since the last whole walk began is in
 * m->ahead (pod_mgr_int.h). */
static bool pod__ahead_whole(const pod_mgr_t *m)
{
	return m->clean && m->watch > 0 &&
	       st_coll_changes(st_pods(m->o.store)) - m->clean_changes == m->told - m->clean_told;
}

size_t pod_mgr_ncontainers_ahead(pod_mgr_t *m, const tank_map_t *skip)
{
	pod_ahead_t a = { m, skip, 0 };
	tank_error_t e;
	size_t it = 0;
	const char *name;

	tank_error_clear(&e);
	if (!pod__ahead_whole(m)) {
		/* tankd's start (no whole walk yet), or a change the watch
		 * could not keep: the store itself. */
		(void)st_pod_foreach(m->o.store, pod__ahead_one, &a, &e);
		return a.n;
	}
	/* Only the names changed since: with 100,000 pods stored the walk
	 * held the loop for each apply that came right after another. */
	while (tank_map_next(&m->ahead, &it, &name, NULL)) {
		st_pod_t sp;
		memset(&sp, 0, sizeof sp);
		if (st_pod_get(m->o.store, name, &sp, &e) < 0)
			continue;       /* deleted since: nothing ahead */
		(void)pod__ahead_one(&a, &sp);
		st_pod_clear(&sp);
	}
	return a.n;
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

