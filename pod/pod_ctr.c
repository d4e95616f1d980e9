/*
 * pod_ctr.c — the container manager (TANK_KIND_CONTAINER, key
 * "<pod>/<container>"): converges one container towards what its pod
 * wants (pod__ctr_want), judges its exits by the pod's restart policy,
 * stops what a previous tankd left, and handles its runner's messages.
 * Shares pod_mgr_t with the pod manager (pod_mgr_int.h).
 */
#include "pod/pod_mgr_int.h"

#include <errno.h>
#include <ev.h>
#include <stddef.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/tank_backoff.h"
#include "pod/pod_launch.h"
#include "pod/pod_launcher.h"

/* --- container manager ----------------------------------------------------------- */

/* The container manager lists nothing of its own: the pods' resync queues
 * the containers of every pod it finds not settled together with the pod
 * (pod__list), so a pass walks the tracked pods once, not twice (a second
 * walk over 10,000 pods, each checked again, was half of a pass; issue
 * 38). */

void pod__drained_check(pod_mgr_t *m, rc_loop_t *loop)
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
	int64_t now = (int64_t)rc_wall_ms();
	const pod_spec_t *s = c->pod->spec;
	bool pid_alive = c->orphan &&
			 pod_proc_state(c->orphan, c->orphan_start) == POD_PROC_RUNS;
	bool cg_alive = c->cg_orphans && c->has_cg && pod_cgroup_count(&c->cg) > 0;

	if (!pid_alive && !cg_alive) {
		c->orphan = 0;
		c->cg_orphans = false;
		c->orphan_deadline = 0;
		pod__ctr_event(loop, c, POD_CE_STOPPED,
			       c->st.phase == POD_CP_STOPPING
			       ? "processes of a previous tankd stopped" : rc_fsm_reason(&c->st));
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

char **pod__envp(const pod_container_t *pc)
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

void pod__envp_free(char **envp)
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
		 * would fail to join it, and every restart with it).  Not
		 * looked for again when the exit this start follows at once
		 * found it (its runner read its cgroup.procs, under a second
		 * ago): one path walk on cgroupfs less per restart in a mass
		 * kill.  Removed by hand in that moment, the launch fails at
		 * the join, and the next start, which looks, makes it again. */
		bool seen = c->cg_seen;
		c->cg_seen = false;
		if (seen || pod_cgroup_exists(&c->cg))
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

/* Whether the container's group exists (a previous tankd's), without
 * making it. */
static bool pod__ctr_cg_present(pod_mgr_t *m, pod_ctr_t *c)
{
	char group[POD_NAME_MAX + 16];

	if (!m->has_cg)
		return false;
	pod__cg_group(c->pod, group, sizeof group);
	return pod_cgroup_present(&m->cg_env, group, c->name);
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

	if (!s->isolation.namespaces || p->sb)
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
	pod_sandbox_t *sb = calloc(1, sizeof *sb);
	if (!sb) {
		free(mounts);
		pod__fmt(reason, cap, "sandbox: out of memory");
		return -ENOMEM;
	}
	tank_error_clear(&err);
	rc = pod_sandbox_create(&o, sb, &err);
	free(mounts);
	if (rc < 0) {
		free(sb);
		/* The sandbox's messages already start with "sandbox:". */
		pod__fmt(reason, cap, "%s%s",
			 strncmp(err.msg, "sandbox", 7) == 0 ? "" : "sandbox: ", err.msg);
		return rc;
	}
	p->sb = sb;
	{
		uint64_t st;
		if (pod_proc_start_time(p->sb->pid, &st) == 0)
			pod_adopt_keep_sandbox(m->o.adopt, p->name, p->sb->pid, st);
	}
	return 0;
}

/* An isolated pod's sandbox, handed over with its containers: taken over
 * (its namespaces opened again) rather than made.  false: none offered,
 * or not the one it claims to be. */
static bool pod__sandbox_adopt(pod_mgr_t *m, pod_trk_t *p)
{
	char group[POD_NAME_MAX + 16];
	tank_error_t err;
	pid_t pid;
	uint64_t start;

	if (!pod_adopt_claim_sandbox(m->o.adopt, p->name, &pid, &start))
		return false;
	pod__cg_group(p, group, sizeof group);
	pod_sandbox_opts_t o = {
		.ns = p->spec->isolation.namespaces,
		.cgroups = m->has_cg ? &m->cg_env : NULL, .cgroup_pod = group,
	};
	pod_sandbox_t *sb = calloc(1, sizeof *sb);
	if (!sb || pod_sandbox_adopt(pid, start, o.ns, &o, sb, &err) < 0) {
		free(sb);
		pod_adopt_forget_sandbox(m->o.adopt, p->name, pid, start);
		return false;
	}
	p->sb = sb;
	return true;
}

/* The launcher containers start on, made and watched at the first use;
 * NULL (start on the loop thread, as with no launcher) when it cannot be
 * made or watched. */
static pod_launcher_t *pod__launcher(pod_mgr_t *m, rc_loop_t *loop)
{
	if (m->o.launch)
		return NULL;            /* a test's fake: synchronous */
	if (!m->launcher && pod_launcher_new(&m->launcher) < 0)
		return NULL;
	if (!m->launcher_watched &&
	    rt_watch_fd(rc_rt(loop), rc_pid(loop), pod_launcher_fd(m->launcher), EV_READ,
			POD__LAUNCHER_READY, NULL) < 0)
		return NULL;
	m->launcher_watched = true;
	return m->launcher;
}

/* Hands every done launch to its runner (POD_RUNNER_LAUNCHED). */
static void pod__launcher_ready(pod_mgr_t *m, rc_loop_t *loop)
{
	pod_launch_job_t *j;

	if (!m->launcher)
		return;
	while ((j = pod_launcher_next_done(m->launcher))) {
		rt_pid_t to = (rt_pid_t)pod_launch_job_cookie(j);
		/* A runner that died abandoned its job, which is then
		 * never handed out: this one lives.  One that cannot be
		 * told is ended; its terminate abandons the job (the
		 * process killed), and its exit is a crash here. */
		if (rt_send(rc_rt(loop), to, POD_RUNNER_LAUNCHED, &j, sizeof j) < 0)
			(void)rt_exit(rc_rt(loop), to, RT_R_KILL);
	}
}

/* Starts the container, or with adopt takes over that process of a
 * previous life of tankd (pod_adopt.h; child: it is our child); on
 * failure fills reason and returns < 0 (adopt's fds are the caller's
 * again). */
static int pod__ctr_start(pod_mgr_t *m, rc_loop_t *loop, pod_ctr_t *c,
			  const pod_proc_t *adopt, bool child, char *reason, size_t cap)
{
	pod_trk_t *p = c->pod;
	const pod_container_t *pc = pod__ctr_spec(c);
	tank_error_t err;
	char **envp;
	int rc;

	if (!pc)
		return -ENOENT;
	tank_error_clear(&err);
	if (!adopt && c->log) {
		/* A new process: a partial line its predecessor left in the
		 * spool (one whose pipe closed without its EOF drained) is a
		 * record of its own, not the start of this one's first line.
		 * A log not made yet is flushed so when the runner makes it
		 * (pod_runner.c, at the first output). */
		(void)pod_log_flush(c->log, POD_LOG_STDOUT);
		(void)pod_log_flush(c->log, POD_LOG_STDERR);
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
		.sandbox = p->sb,
	};
	pod_launcher_t *async = adopt ? NULL : pod__launcher(m, loop);
	pod_runner_args_t ra = {
		.owner = rc_pid(loop), .key = c->key, .launch_opts = &lo,
		.launch = m->o.launch, .launcher = async,
		/* The log is made at the first output (pod_runner.h);
		 * without one the container still runs, output dropped. */
		.cgroup = c->has_cg ? &c->cg : NULL, .log = c->log,
		.log_slot = &c->log, .log_dir = m->log_dir,
		.stop_signal = p->spec->stop.signal, .grace_ms = p->spec->stop.grace_ms,
		.proc = &c->proc, .err = &err,
		.probes = pod_container_has_probes(pc) ? pc->probes : NULL,
		.sandbox = p->sb,
		.adopt = adopt, .adopt_child = child, .adopt_started_at = c->started_at,
		.adopter = m->o.adopt,
	};
	/* Until its probes speak: ready unless a startup or readiness probe
	 * has to pass first. */
	c->probes = ra.probes != NULL;
	c->probe_ready = (adopt && c->probe_ready) ||
			 (pod_container_probe(pc, POD_PROBE_STARTUP)->kind == POD_PROBE_NONE &&
			  pod_container_probe(pc, POD_PROBE_READINESS)->kind == POD_PROBE_NONE);
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
	m->nstarts++;
	if (async && !c->proc.pid) {
		c->launching = true;
		m->nlaunching++;
	}
	/* Its pipes to the keeper, so that a tankd killed -9 loses no line
	 * (an adopted one's are there already, under the same tag; a
	 * launch under way gives them at POD_RUNNER_STARTED). */
	if (!adopt && !async)
		pod_adopt_keep(m->o.adopt, c->key, &c->proc);
	return 0;
}

void pod__ctr_finish(rc_loop_t *loop, pod_ctr_t *c, uint8_t outcome, const char *reason)
{
	c->outcome = outcome;
	pod__ctr_event(loop, c, POD_CE_FINISHED, reason);
	/* Ended for good: its group is no longer its own, and the next
	 * resync's sweep removes it (and kills what a descendant left in
	 * it), in the sweep's slices; a restart asked later makes one
	 * again.  Kept until tankd's stop, 100,000 completed pods' groups
	 * took that stop 58 s to remove (issue 38).  Not removed here: an
	 * rmdir waits for the kernel's cgroup mutex, which each start's
	 * migration holds across an RCU grace period, and during an apply
	 * of 9,744 one-shot pods the rmdirs at their ends held the loop for
	 * seconds. */
	if (c->has_cg && !c->runner) {
		pod_cgroup_forget(&c->cg);
		c->has_cg = false;
	}
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
		uint8_t out = !failed ? POD_OUT_COMPLETED
			      : ex->oom_killed ? POD_OUT_OOM_KILLED : POD_OUT_FAILED;
		pod__ctr_finish(loop, c, out, out == POD_OUT_FAILED ? reason : pod_outcome_name(out));
		return;
	}
	if (ran_ms >= s->backoff.stable_window_ms)
		c->retries = 0;
	if (s->backoff.max_retries && c->retries >= s->backoff.max_retries) {
		/* Bounded: given up, failed (a stack above it hears of it
		 * through the pod's failure). */
		char gave[RC_REASON_MAX];
		pod__fmt(gave, sizeof gave, POD__GAVE_UP "%u restarts in a row "
			 "(backoff.max_retries): %s", c->retries, reason);
		pod__ctr_finish(loop, c, POD_OUT_EXHAUSTED, gave);
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

/* An exit that counts toward backoff.max_retries is on disk before
 * anything acts on it (the restart it schedules): a tankd killed -9 a
 * moment later finds the count, and does not run the container once more
 * than its bound.  A commit, no fsync (tankd's death does not lose the
 * page cache); only for a bounded pod, so crash loops without a bound
 * stay on the group commit. */
static void pod__exit_commit(pod_mgr_t *m, pod_ctr_t *c)
{
	if (c->pod->spec && c->pod->spec->backoff.max_retries)
		(void)st_flush(m->o.store, NULL);
}

/* An exit the keeper reaped while it held the process for us: the keeper
 * forgets it, and the pipes it holds, only once the status recording it
 * is committed (pod_adopt_ack).  A kill -9 of tankd before that finds
 * both at the keeper again, and the next tankd records the exit.  A
 * commit that fails acks nothing: the group commit retries it, and the
 * keeper's copy goes once a later tankd finds nobody to claim it. */
static void pod__kept_commit(pod_mgr_t *m, const pod_ctr_t *c, pid_t pid, uint64_t start)
{
	if (st_flush(m->o.store, NULL) < 0)
		return;
	pod_adopt_ack(m->o.adopt, pid, start);
	pod_adopt_forget(m->o.adopt, c->key, pid, start);
}

/* c's start failed with err (reason says why), at once (pod__ctr_run)
 * or on the launcher thread (async: POD_RUNNER_STARTED). */
static rc_result_t pod__ctr_start_failed(pod_mgr_t *m, rc_loop_t *loop, pod_ctr_t *c,
					 int err, const char *reason, int64_t now, bool async)
{
	if (tank_err_is_resource(err)) {
		/* tank, not the container, ran out of something: no failure
		 * is counted against it and its policy does not apply.  The
		 * loop retries with its own backoff and, past its bound,
		 * fails the container (mark_failed) and tells the pod.  A
		 * launch that failed on the launcher thread has no reconcile
		 * to fail: it is tried again in a second. */
		char why[RC_REASON_MAX];
		pod__fmt(why, sizeof why, "waiting for resources: %s", reason);
		if (c->pod->spec->restart == POD_RESTART_NEVER && c->started_at) {
			/* Not started after all: a restart of tankd now must
			 * not take it for one that ran (see once_lost). */
			c->started_at = 0;
			pod__persist(m, c->pod);
			(void)st_flush(m->o.store, NULL);
		}
		pod__ctr_event(loop, c, POD_CE_WAIT, why);
		if (async) {
			c->next_restart_at = now + 1000;
			rc_enqueue(loop, K_CTR, c->key);
		}
		pod__update(m, loop, c->pod);
		return rc_failed(err, NULL);
	}
	/* A start that fails counts as a failed run (exit 127, as a
	 * shell reports "command not found"), so policy and backoff
	 * apply and a broken command cannot spin. */
	pod_exit_t ex = { .code = 127 };
	/* `logs` says why too: the container wrote nothing (so
	 * its log may not exist yet). */
	if (!c->log) {
		pod_log_opts_t lo = { .dir = m->log_dir, .pod = c->pod->name,
				      .container = c->name };
		(void)pod_log_open(&lo, &c->log, NULL);
	}
	(void)pod_log_note(c->log, reason);
	pod__ctr_exited(loop, c, &ex, 0, reason, false);
	pod__update(m, loop, c->pod);
	pod__exit_commit(m, c);
	return rc_converged();  /* the exit queued the key again */
}

/* Starts c (the decision said so): a run-once start is on disk first. */
static rc_result_t pod__ctr_run(pod_mgr_t *m, rc_loop_t *loop, pod_ctr_t *c, int64_t now)
{
	char reason[RC_REASON_MAX];

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
	int err = pod__ctr_start(m, loop, c, NULL, false, reason, sizeof reason);
	if (err < 0)
		return pod__ctr_start_failed(m, loop, c, err, reason, now, false);
	c->stop_sent = false;
	c->gave_up = 0;
	c->started_at = now;
	if (!c->proc.pid) {
		/* On the launcher thread: started (or failed) when it says
		 * so, POD_RUNNER_STARTED; until then the runner holds the
		 * key (the decision waits) and the phase stays. */
		return rc_act();
	}
	pod__ctr_event(loop, c, POD_CE_STARTED, "started");
	pod__update(m, loop, c->pod);
	return rc_act();
}

static void pod__ctr_gone(pod_mgr_t *m, rc_loop_t *loop, pod_ctr_t *c, bool forget);

/* A launch under way is over (POD_RUNNER_STARTED from c's runner). */
static void pod__ctr_started(pod_mgr_t *m, rc_loop_t *loop, rt_pid_t from, const void *data)
{
	pod_runner_started_t st;
	pod_ctr_t *c;

	memcpy(&st, data, sizeof st);
	st.key[sizeof st.key - 1] = '\0';
	st.error[sizeof st.error - 1] = '\0';
	if (!(c = pod__ctr_find(m, st.key)) || !c->runner || c->runner != from)
		return;
	if (c->launching) {
		c->launching = false;
		m->nlaunching--;
	}
	if (st.rc == 0) {
		pod_adopt_keep(m->o.adopt, c->key, &c->proc);
		/* A stop asked meanwhile is under way (the runner carries
		 * it out): the container is stopping, not started. */
		if (!c->stop_sent)
			pod__ctr_event(loop, c, POD_CE_STARTED, "started");
		pod__update(m, loop, c->pod);
		return;
	}
	/* It did not start; its runner has exited (normally). */
	rt_unlink(rc_rt(loop), c->runner);
	pod__ctr_gone(m, loop, c, false);
	if (c->stop_sent || !pod__ctr_want(m, c)) {
		pod__ctr_event(loop, c, POD_CE_STOPPED, "stopped");
		pod__update(m, loop, c->pod);
		rc_enqueue(loop, K_CTR, c->key);
	} else {
		(void)pod__ctr_start_failed(m, loop, c, st.rc, st.error, (int64_t)rc_wall_ms(),
					    true);
	}
	rc_enqueue(loop, K_POD, c->pod->name);
	pod__drained_check(m, loop);
}

/* Adopts the process a previous life of tankd left for c (c->orphan,
 * handed over: pod_adopt.h) instead of stopping it: the same pid and
 * start time as the stored status (pod__ctrs_build), a member of the
 * container's cgroup when it has one, and either our child (a reexec)
 * or reaped for us by the keeper (else followed by a pidfd, its status
 * then lost).  It ran, or ended while nobody
 * watched: either way a runner takes it over, and an end already known
 * is judged at once with its real status.  false: not adoptable; the
 * leftovers are then stopped as before. */
static bool pod__ctr_adopt(pod_mgr_t *m, rc_loop_t *loop, pod_ctr_t *c)
{
	pod_trk_t *p = c->pod;
	pod_proc_t proc;
	char why[RC_REASON_MAX] = "";
	bool ended = pod_adopt_ended(m->o.adopt, c->orphan, c->orphan_start, NULL);
	bool child = false;
	/* Ended, not reaped yet: a zombie has left its group (cgroup.procs
	 * lists none) but keeps its pid and start time; its exit comes to
	 * the watch (pod__ctr_start) as any other's.  Taken for a stranger,
	 * it was stopped as a leftover and its container started afresh: a
	 * `restart: never` pod killed during a reexec ran twice. */
	bool zombie = !ended &&
		      pod_proc_state(c->orphan, c->orphan_start) == POD_PROC_ZOMBIE;

	c->adopting = false;
	if (!p->spec || !pod__ctr_spec(c))
		return false;
	if (pod__ctr_cgroup(m, c, why, sizeof why) < 0 ||
	    (!ended && !zombie && c->has_cg && !pod_cgroup_has_pid(&c->cg, c->orphan)))
		return false;
	if (!pod_adopt_claim(m->o.adopt, c->key, c->orphan, c->orphan_start, &proc, &child))
		return false;
	/* A process that is not our child is followed without a keeper too
	 * (a pidfd: pod_adopt.h "Orphans"), its end then told lost. */
	if ((p->spec->isolation.namespaces && !p->sb && !pod__sandbox_adopt(m, p)) ||
	    pod__ctr_start(m, loop, c, &proc, child && !ended, why, sizeof why) < 0) {
		pod_proc_close_fds(&proc);
		pod_adopt_forget(m->o.adopt, c->key, c->orphan, c->orphan_start);
		return false;
	}
	pod__fmt(why, sizeof why, "adopted: pid %d, started by a previous tankd", (int)c->orphan);
	c->orphan = 0;
	c->orphan_start = 0;
	c->cg_orphans = false;
	c->orphans_checked = true;
	c->once_lost = false;
	c->stop_sent = false;
	c->gave_up = 0;
	pod_adopt_count(m->o.adopt);
	pod__ctr_event(loop, c, POD_CE_STARTED, why);
	pod__update(m, loop, p);
	return true;
}

/* Tells c's runner to stop it (stop signal, SIGKILL after the grace:
 * pod_runner.h); the caller updates the pod. */
static void pod__ctr_send_stop(pod_mgr_t *m, rc_loop_t *loop, pod_ctr_t *c, int64_t now)
{
	pod_trk_t *p = c->pod;
	/* An owner's deadline bounds the stop, grace included: what is left
	 * of it is the longest the grace may last. */
	bool rushed = false;
	int64_t by = p->held && m->owner.stop_by
		     ? m->owner.stop_by(m->owner.ctx, p->name, &rushed) : 0;
	uint64_t cap = by > now ? (uint64_t)(by - now) : 0;

	if (by)
		rt_send(rc_rt(loop), c->runner, POD_RUNNER_STOP, &cap, sizeof cap);
	else
		rt_send(rc_rt(loop), c->runner, POD_RUNNER_STOP, NULL, 0);
	c->stop_sent = true;
	pod__ctr_event(loop, c, POD_CE_STOP, p->desired ? "stop" : "deleted");
}

void pod__shutdown_stop(pod_mgr_t *m, rc_loop_t *loop, pod_trk_t *p)
{
	int64_t now = (int64_t)rc_wall_ms();
	bool sent = false, other = false, held = false, asked = false;

	for (size_t i = 0; i < p->nctrs; i++) {
		pod_ctr_t *c = &p->ctrs[i];
		if (!c->runner || c->stop_sent) {
			/* Leftovers of a previous tankd are stopped by the
			 * reconcile (pod__orphan_step); a container with
			 * nothing running has nothing to stop. */
			other = other || c->orphan || c->cg_orphans || !c->orphans_checked;
			continue;
		}
		/* Asked once a pod: its dependents are the same for each
		 * of its containers. */
		if (!asked) {
			held = pod__stop_held(m, p);
			asked = true;
		}
		if (held)
			break;
		pod__ctr_send_stop(m, loop, c, now);
		sent = true;
	}
	if (sent)
		pod__update(m, loop, p);
	for (size_t i = 0; other && i < p->nctrs; i++)
		rc_enqueue(loop, K_CTR, p->ctrs[i].key);
}

static rc_result_t pod__ctr_reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	pod_mgr_t *m = ctx;
	pod_ctr_t *c = view->obj;
	pod_trk_t *p = c->pod;
	uint64_t wait;
	int64_t now = (int64_t)rc_wall_ms();
	char why[RC_REASON_MAX] = "";

	if (c->adopting && pod__ctr_adopt(m, loop, c))
		return rc_act();
	if (!c->orphans_checked) {
		/* A container that ended for good has no group (pod__ctr_finish
		 * gave it up to the sweep): one a previous tankd left is looked
		 * into, and given up to the sweep when empty, but none is made
		 * just to count nothing in it (two mkdirs a pod at every start,
		 * then kept). */
		bool ended = c->st.phase == POD_CP_TERMINAL && !c->orphan && !c->runner;
		c->orphans_checked = true;
		if ((!ended || pod__ctr_cg_present(m, c)) &&
		    pod__ctr_cgroup(m, c, why, sizeof why) == 0 && c->has_cg &&
		    pod_cgroup_count(&c->cg) > 0)
			c->cg_orphans = true;
		else if (ended && c->has_cg) {
			/* Empty: given up to the sweep, as at its end. */
			pod_cgroup_forget(&c->cg);
			c->has_cg = false;
		}
	}
	/* Leftovers of a previous tankd are stopped before anything else. */
	if ((c->orphan || c->cg_orphans) && (wait = pod__orphan_step(loop, c))) {
		pod__update(m, loop, p);
		return rc_requeue_after(wait);
	}

	/* Observe (what the decision reads; the costly parts only when they
	 * can matter), then decide (pod_ctr_decide, pod_phase.h), then act. */
	pod_ctr_obs_t o = {
		.phase = c->st.phase, .want = pod__ctr_want(m, c), .runner = c->runner != 0,
		.stop_sent = c->stop_sent, .backing_off = c->next_restart_at > now,
		.once_lost = c->once_lost,
	};
	if (!o.want && o.runner && !o.stop_sent)
		o.stop_held = pod__stop_held(m, p);
	if (o.want && !o.runner && o.phase != POD_CP_TERMINAL && !o.backing_off &&
	    p->spec->dep_count)
		/* Every start, restarts too, waits for depends_on.  What it
		 * waits for queues this pod when it changes (pod__deps_notify);
		 * the resync revisits it anyway (a waiting pod is not settled). */
		o.deps_unmet = !pod__deps_met(m, p, why, sizeof why);
	if (!o.want)
		p->gated = false;

	switch (pod_ctr_decide(&o)) {
	case POD_CA_NOTHING:
		return rc_converged();
	case POD_CA_HOLD:
		/* Its dependents go first; the last of them to stop queues
		 * this pod again (pod__deps_notify). */
		return rc_converged();
	case POD_CA_STOP:
		pod__ctr_send_stop(m, loop, c, now);
		pod__update(m, loop, p);
		return rc_act();
	case POD_CA_RELEASED:
		/* Only a pod that waits for its containers to stop needs
		 * telling; waking any other pod would ping-pong forever (its
		 * reconcile queues its containers). */
		if (pod__waits(p))
			rc_enqueue(loop, K_POD, p->name);
		pod__drained_check(m, loop);
		return rc_converged();
	case POD_CA_BACKOFF:
		if (c->st.phase != POD_CP_BACKING_OFF) {
			/* Restored after a restart of tankd: the reason read
			 * back (its last exit) says more than the restoring. */
			char why[RC_REASON_MAX];
			pod__fmt(why, sizeof why, "%s", rc_fsm_reason(&c->st)[0]
				 ? rc_fsm_reason(&c->st) : "restoring backoff");
			pod__ctr_event(loop, c, POD_CE_BACKOFF, why);
		}
		pod__update(m, loop, p);
		return rc_requeue_after((uint64_t)(c->next_restart_at - now));
	case POD_CA_WAIT_DEPS:
		c->next_restart_at = 0;
		p->gated = true;
		pod__ctr_event(loop, c, POD_CE_WAIT, why);
		pod__update(m, loop, p);
		return rc_converged();
	case POD_CA_LOST:
		/* A run-once container a previous tankd started and never saw
		 * end (killed -9, or its process gone or stopped above while
		 * tankd was down): running it again would run it twice.  Its
		 * exit status is unknown. */
		c->next_restart_at = 0;
		p->gated = false;
		c->once_lost = false;
		c->last_exit = (st_exit_t){ .present = true, .code = -1 };
		pod__ctr_finish(loop, c, POD_OUT_FAILED,
				"not run again: it was running when tankd stopped "
				"(restart: never runs once; exit status unknown)");
		pod__update(m, loop, p);
		return rc_converged();
	case POD_CA_START:
		/* The exit's look at the group holds for a restart it was
		 * due for at once, under a second ago (pod__ctr_cgroup). */
		c->cg_seen = c->cg_seen && c->next_restart_at &&
			     now - c->next_restart_at < 1000;
		c->next_restart_at = 0;
		p->gated = false;
		return pod__ctr_run(m, loop, c, now);
	}
	return rc_converged();
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
	pod__ctr_finish(loop, c, POD_OUT_FAILED, reason);
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

/* The runner of c is gone (reported, or died): account for it.  forget:
 * the keeper forgets its pipes now (else the caller does, after its
 * commit: pod__kept_commit). */
static void pod__ctr_gone(pod_mgr_t *m, rc_loop_t *loop, pod_ctr_t *c, bool forget)
{
	if (forget)
		pod_adopt_forget(m->o.adopt, c->key, c->proc.pid, c->proc.start_time);
	rc_disown(loop, c->runner);
	c->runner = 0;
	c->proc.pid = 0;
	m->nrunning--;
	if (c->launching) {
		c->launching = false;
		m->nlaunching--;
	}
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
	(void)pod__ostr_set(&c->probe, pr.report.text, ST_PROBE_MAX + 1);
	if (m->o.on_event) {
		pod_event_t ev = {
			.pod = c->pod->name, .container = c->name, .probe = pod__ostr(c->probe),
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
	bool counted = false;

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
				pod__ctr_gone(m, loop, c, true);
				bool counted = pod__ctr_want(m, c);
				if (counted)
					pod__ctr_exited(loop, c, &e, 0, "runner died", false);
				else
					pod__ctr_event(loop, c, POD_CE_STOPPED, "stopped");
				pod__update(m, loop, p);
				if (counted)
					pod__exit_commit(m, c);
				rc_enqueue(loop, K_POD, p->name);
				pod__drained_check(m, loop);
				return;
			}
		}
		return;
	}
	if (msg->type == RT_MSG_FD && msg->tag == POD__LAUNCHER_READY) {
		pod__launcher_ready(m, loop);
		return;
	}
	if (msg->type == RT_MSG_USER && msg->tag == POD_RUNNER_STARTED &&
	    msg->len == sizeof(pod_runner_started_t)) {
		pod__ctr_started(m, loop, msg->from, msg->data);
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
	 * mistaken for a crash.  An exit the keeper reaped (an adopted
	 * process's) stays the keeper's, pipes and all, until it is stored. */
	pid_t kept_pid = ex.kept_at > 0 ? c->proc.pid : 0, ran_pid = c->proc.pid;
	uint64_t kept_start = c->proc.start_time;
	rt_unlink(rc_rt(loop), c->runner);
	pod__ctr_gone(m, loop, c, !kept_pid);
	if (!pod__ctr_want(m, c) || ex.stopped) {
		c->last_exit.present = true;
		c->last_exit.code = ex.exit.code;
		c->last_exit.signal = ex.exit.signal;
		pod__ctr_event(loop, c, POD_CE_STOPPED, "stopped");
		if (ex.stopped && pod__ctr_want(m, c))
			rc_enqueue(loop, K_CTR, c->key);
		/* At tankd's stop its group goes as it ends, while the
		 * others' grace runs, not all in the final sweep after the
		 * last one (about 0.4 ms a pod of rmdirs here: 0.4 s of a
		 * 0.9 s stop at 1,000 pods). */
		else if (m->shutting_down && c->has_cg && pod_cgroup_destroy(&c->cg) == 0)
			c->has_cg = false;
	} else {
		char why[RC_REASON_MAX];
		ex.unhealthy[sizeof ex.unhealthy - 1] = '\0';
		/* A probe gave up on it: a failure whatever the exit said
		 * (Kubernetes restarts it under Always and OnFailure). */
		if (ex.unhealthy[0])
			pod__fmt(why, sizeof why, "unhealthy: %s", ex.unhealthy);
		c->gave_up = ex.unhealthy[0] ? ex.gave_up : 0;
		if (!ex.unhealthy[0] && ex.lost) {
			/* Its keeper was killed while it ran: nobody could
			 * wait(2) for it, its pidfd said it ended. */
			pod__fmt(why, sizeof why, "ended while no keeper held its status "
				 "(pid %d, exit status unknown)", (int)ran_pid);
		} else if (!ex.unhealthy[0] && ex.kept_at > 0) {
			/* It ended while no tankd watched: the keeper's record
			 * says how and when. */
			time_t t = (time_t)(ex.kept_at / 1000);
			struct tm tm;
			char at[32];
			gmtime_r(&t, &tm);
			strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
			if (ex.exit.signal)
				pod__fmt(why, sizeof why, "killed by signal %d at %s, while tankd "
					 "was down", ex.exit.signal, at);
			else
				pod__fmt(why, sizeof why, "exited with code %d at %s, while tankd "
					 "was down", ex.exit.code, at);
		}
		pod__ctr_exited(loop, c, &ex.exit, ex.ran_ms,
				ex.unhealthy[0] || ex.kept_at > 0 || ex.lost ? why : NULL,
				ex.unhealthy[0] != 0);
		/* A restart due at once: its start trusts this exit's look
		 * at the group (pod__ctr_cgroup). */
		c->cg_seen = ex.cg_read && c->has_cg && c->runner == 0 &&
			     c->st.phase == POD_CP_BACKING_OFF &&
			     c->next_restart_at <= (int64_t)rc_wall_ms();
		counted = true;
	}
	pod__update(m, loop, c->pod);
	if (kept_pid)
		pod__kept_commit(m, c, kept_pid, kept_start);
	else if (counted)
		pod__exit_commit(m, c);
	rc_enqueue(loop, K_POD, c->pod->name);
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
			pod_adopt_forget(m->o.adopt, c->key, c->proc.pid, c->proc.start_time);
			c->runner = 0;
			c->stop_sent = false;
			c->launching = false;
			c->proc.pid = 0;
			pod__ctr_event(loop, c, POD_CE_LOST, "reconciler stopped");
		}
	}
	m->nrunning = 0;
	m->nlaunching = 0;
	/* The launcher's watch was the loop actor's: a new loop watches
	 * again at its first start.  Launches under way were abandoned by
	 * their runners, which died with the loop. */
	m->launcher_watched = false;
}

const rc_manager_t pod_ctr_manager = {
	.kind = TANK_KIND_CONTAINER,
	.name = "container",
	.observe = pod__ctr_observe,
	.reconcile = pod__ctr_reconcile,
	.mark_failed = pod__ctr_mark_failed,
	.parent = pod__ctr_parent,
	.handle = pod__ctr_handle,
	.stop = pod__ctr_stop,
};
