/*
 * pod_sweep.c — processes in tank's cgroups that no container owns (left
 * by a previous tankd, by a deleted object, or escaped a stop): found and
 * stopped, in slices at each resync (pod__sweep_slice) and whole at the
 * daemon's stop (pod__sweep_all).  A group belongs to a tracked pod when
 * its name is that pod object's (pod__cg_group) and the container is
 * one of its own.
 */
#include "pod/pod_mgr_int.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* --- the sweep: processes in tank's cgroups that no container owns ---------- */

/* A sandbox's group is the pod's sandbox's; or, while processes of a
 * previous tankd may still run in the pod (checked, and stopped
 * gracefully, by its containers), the one they run in: killing their
 * pid namespace's init would kill them at once. */
static bool pod__sb_owned(const pod_trk_t *p, const char *group)
{
	if (p->sb && strcmp(p->sb->group, group) == 0)
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
	bool starting;                /* containers started since the last sweep */
} pod_sweep_t;

/* An ended container's group is removed by a sweep that no start
 * preceded since the last one: an rmdir waits for the kernel's cgroup
 * mutex, which each start's migration holds across an RCU grace period,
 * so during an apply of thousands of one-shot pods their removals made
 * every start (and the loop) wait; they go once the starts are over, in
 * the sweep's slices.  Not forever: past this many sweeps in a row (a
 * crash loop somewhere starts something at every pass) they go anyway. */
#define POD_SWEEP_DEFER_MAX 12

/* A settled pod's groups swept once in a state are skipped at the next
 * sweeps until that state changes (a start, an exit, a restart, a stop,
 * a new spec: its status signature moves, or it is not settled), and read
 * again at least every POD_SWEEP_FULL_PASSES passes (5 minutes at the
 * default resync of 5 s): what tank itself does to a pod changes its
 * state, so only a process planted by hand in a settled pod's own group
 * (or a container group made by hand in it) waits that long. */
#define POD_SWEEP_FULL_PASSES 60

/* A pod only waiting for its containers' restarts (POD_CALM_RESTARTING) is
 * skipped too, when its last sweep found it clean within the same 60
 * passes, without counting as a state swept: tank is the one acting on
 * it, the runner killed what its container left at the exit, and it is
 * read at the first sweep after it runs again (its signature moved).  A
 * storm of 10,000 restarts made every pod this at each pass until its
 * turn, and reading each one's groups (~55 us a pod) at every pass was
 * most of tankd's system time in the storm. */
/* Its containers' restarts, summed (wraps; only compared for equality). */
static uint32_t pod__restarts(const pod_trk_t *p)
{
	uint32_t n = 0;

	for (size_t i = 0; i < p->nctrs; i++)
		n += p->ctrs[i].restarts;
	return n;
}

/* A settled pod whose state moved since its last clean sweep, and whose
 * containers restarted meanwhile, is put off while containers are being
 * started (sw->starting: at most POD_SWEEP_DEFER_MAX sweeps in a row),
 * without counting as a state swept: it is read at the first sweep that
 * no start preceded.  After a mass kill, every pod that ran again was
 * read at the next pass (opendir, getdents, the pod group's
 * cgroup.procs: ~5 system calls, two path walks on cgroupfs) while the
 * storm's other restarts waited for the loop: ~10 % of the loop's CPU in
 * a storm of 1,000 that a pass fell into, a pass every 5 s through a
 * storm of 10,000.  Each of those exits had its container's group read
 * and emptied by its runner already (pod__runner_kill_rest); what waits
 * is only a process planted by hand in the pod's own group, as for a
 * settled pod. */
static bool pod__cg_skip(const pod_sweep_t *sw, pod_trk_t *p)
{
	pod_mgr_t *m = sw->m;
	pod_calm_t calm = pod__calm(rc_rt(sw->loop), p);
	uint64_t sig;
	uint32_t restarts;

	if (calm != POD_CALM_SETTLED)
		return calm == POD_CALM_RESTARTING && p->swept_sig &&
		       m->pass - p->swept_pass < POD_SWEEP_FULL_PASSES;
	sig = pod__status_sig(p);
	if (p->swept_sig == sig && m->pass - p->swept_pass < POD_SWEEP_FULL_PASSES)
		return true;
	restarts = pod__restarts(p);
	if (sw->starting && p->swept_sig && restarts != p->swept_restarts &&
	    m->pass - p->swept_pass < POD_SWEEP_FULL_PASSES)
		return true;
	/* Swept now, in this state: pod__cg_found forgets it if this
	 * sweep finds anything. */
	p->swept_sig = sig;
	p->swept_pass = m->pass;
	p->swept_restarts = restarts;
	return false;
}

static bool pod__cg_owned(void *ctx, const char *pod, const char *container)
{
	const pod_sweep_t *sw = ctx;
	pod_trk_t *p;
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
	if (!container)
		return pod__cg_skip(sw, p);
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
	/* A container that ended for good gave its group up
	 * (pod__ctr_finish): the sweep removes it. */
	for (size_t i = 0; i < p->nctrs; i++)
		if (strcmp(p->ctrs[i].name, container) == 0) {
			if (p->ctrs[i].has_cg || p->ctrs[i].runner ||
			    p->ctrs[i].st.phase != POD_CP_TERMINAL)
				return true;
			/* Deferred: read again by the next sweep, not skipped
			 * as swept in this state (pod__cg_skip). */
			if (sw->starting)
				p->swept_sig = 0;
			return sw->starting;
		}
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
	if (p && p->sb && strcmp(p->sb->group, container) == 0)
		return;                 /* its own sandbox, at tankd's stop */
	if (p)
		p->swept_sig = 0;       /* not clean: read again next time */

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
void pod__sweep_all(pod_mgr_t *m, rc_loop_t *loop)
{
	pod_sweep_t sw = { m, loop, true, false };

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

/* One slice of a resync's sweep (pod_cgroup_sweep_step): 1 while more
 * remains, 0 when done, < 0 on error. */
int pod__sweep_slice(pod_mgr_t *m, rc_loop_t *loop)
{
	bool starting = (m->nlaunching || m->nstarts != m->swept_starts) &&
			m->sweep_deferred < POD_SWEEP_DEFER_MAX;
	pod_sweep_t sw = { m, loop, false, starting };
	int r = pod_cgroup_sweep_step(&m->cg_env, &m->sweep, pod__cg_owned, pod__cg_found,
				      &sw, RC_LIST_SLICE_MS);

	if (r <= 0) {
		m->sweep_deferred = starting ? m->sweep_deferred + 1 : 0;
		m->swept_starts = m->nstarts;
	}
	return r;
}
