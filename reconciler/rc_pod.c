/*
 * rc_pod.c — pod and container managers.
 *
 * want (what the pod asks of a container) is derived, never stored:
 * rc__ctr_want() is true while the pod is desired, its running spec is
 * the desired generation, no restart by hand is under way and the daemon
 * is not shutting down.  Every decision compares that with the observed
 * state (runner alive, terminal, backing off), so any event — an exit, a
 * tick, an apply — just requeues the key and the same code decides.
 */
#include "reconciler/rc_pod.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <msgpack.h>

#include "common/tank_map.h"
#include "pod/pod_launch.h"
#include "pod/pod_log.h"
#include "pod/pod_sandbox.h"
#include "pod/pod_spec.h"
#include "reconciler/rc_runner.h"

/* Phases (DESIGN.md §4); static strings compared by pointer. */
static const char PH_PENDING[] = "pending";
static const char PH_STARTING[] = "starting";
static const char PH_RUNNING[] = "running";
static const char PH_BACKING_OFF[] = "backing_off";
static const char PH_STOPPING[] = "stopping";
static const char PH_TERMINAL[] = "terminal";

#define RC_REASON 128

typedef struct rc_pod rc_pod_t;

typedef struct rc_ctr {
	rc_pod_t *pod;
	char key[RC_KEY_MAX];         /* "<pod>/<container>" */
	const char *name;             /* into key */
	const char *phase;
	char reason[RC_REASON];
	rt_pid_t runner;
	pod_proc_t proc;
	bool stop_sent;
	bool terminal;
	uint32_t restarts, retries;
	st_exit_t last_exit;
	int64_t started_at, next_restart_at;
	bool has_cg;
	pod_cgroup_t cg;
	pod_log_t *log;
	/* processes left by a previous tankd */
	bool orphans_checked;         /* its cgroup was looked at */
	bool cg_orphans;              /* its cgroup held processes */
	pid_t orphan;
	uint64_t orphan_start;
	int64_t orphan_deadline;      /* 0: stop signal not sent yet */
} rc_ctr_t;

struct rc_pod {
	char name[POD_NAME_MAX + 1];
	bool desired;
	pod_spec_t *want;             /* desired spec (owned), NULL if deleted */
	uint64_t want_gen;
	pod_spec_t *spec;             /* spec the containers run (owned; may == want) */
	uint64_t generation;
	rc_ctr_t *ctrs;
	size_t nctrs;
	bool has_sb;
	pod_sandbox_t sb;
	char sb_error[RC_REASON];     /* non-empty: sandbox could not be made */
	bool restart_req;
	const char *phase;
	char reason[RC_REASON];
	int64_t since;
	bool restored;                /* stored status was read */
	st_status_t saved;            /* stored status, until containers exist */
	bool has_saved;
	uint64_t persisted_sig;       /* rc__status_sig of the last status queued */
};

struct rc_pods {
	rc_pods_opts_t o;
	char *log_dir;
	pod_cgroup_env_t cg_env;
	bool has_cg;
	tank_map_t pods;              /* name -> rc_pod_t */
	size_t nrunning;
	bool shutting_down;
	bool drained_told;
};

/* --- helpers ----------------------------------------------------------------- */

/* Status strings are bounded; a longer reason is cut, by design. */
static void rc__fmt(char *dst, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void rc__fmt(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dst, cap, fmt, ap);
	va_end(ap);
}

static void rc__copy(char *dst, size_t cap, const char *src)
{
	rc__fmt(dst, cap, "%s", src ? src : "");
}

static rc_ctr_t *rc__ctr_find(rc_pods_t *pods, const char *key)
{
	char pod[POD_NAME_MAX + 1];
	const char *slash = strchr(key, '/');
	rc_pod_t *p;

	if (!slash || (size_t)(slash - key) > POD_NAME_MAX)
		return NULL;
	memcpy(pod, key, (size_t)(slash - key));
	pod[slash - key] = '\0';
	if (!(p = tank_map_get(&pods->pods, pod)))
		return NULL;
	for (size_t i = 0; i < p->nctrs; i++)
		if (strcmp(p->ctrs[i].name, slash + 1) == 0)
			return &p->ctrs[i];
	return NULL;
}

static bool rc__ctr_want(rc_pods_t *pods, const rc_ctr_t *c)
{
	const rc_pod_t *p = c->pod;
	return !pods->shutting_down && p->desired && p->spec &&
	       p->generation == p->want_gen && !p->restart_req && !p->sb_error[0];
}

static bool rc__pod_busy(const rc_pod_t *p)
{
	for (size_t i = 0; i < p->nctrs; i++)
		if (p->ctrs[i].runner || p->ctrs[i].orphan || p->ctrs[i].cg_orphans)
			return true;
	return false;
}

/* The pod has something to do once its containers are stopped: be
 * deleted, switch to a new spec, or start again after a restart. */
static bool rc__pod_waits(const rc_pod_t *p)
{
	return !p->desired || (p->spec && p->generation != p->want_gen) || p->restart_req;
}

static void rc__ctr_phase(rc_loop_t *loop, rc_ctr_t *c, const char *phase,
			  const char *reason)
{
	if (c->phase == phase && strcmp(c->reason, reason ? reason : "") == 0)
		return;
	rc_record(loop, RC_KIND_CONTAINER, c->key, c->phase, phase, reason);
	c->phase = phase;
	rc__copy(c->reason, sizeof c->reason, reason);
}

/* A signature of everything the stored status shows.  A resync revisits
 * every pod; comparing this cheap hash of the live fields (not of the
 * 2 KiB record it would build) skips the store when nothing changed. */
static uint64_t rc__sig_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

static uint64_t rc__sig_str(uint64_t h, const char *str)
{
	return rc__sig_mix(h, tank_hash64(str, strlen(str)));
}

static uint64_t rc__status_sig(const rc_pod_t *p)
{
	uint64_t h = rc__sig_mix((uintptr_t)p->phase, (uint64_t)p->since);

	h = rc__sig_str(h, p->reason);
	h = rc__sig_mix(h, p->generation ? p->generation : p->want_gen);
	h = rc__sig_mix(h, p->nctrs);
	for (size_t i = 0; i < p->nctrs; i++) {
		const rc_ctr_t *c = &p->ctrs[i];
		h = rc__sig_mix(h, (uintptr_t)c->phase);
		h = rc__sig_str(h, c->reason);
		h = rc__sig_mix(h, (uint64_t)(c->runner ? c->proc.pid : c->orphan));
		h = rc__sig_mix(h, c->runner ? c->proc.start_time : c->orphan_start);
		h = rc__sig_mix(h, (uint64_t)c->restarts << 32 | c->retries);
		h = rc__sig_mix(h, (uint64_t)c->last_exit.present << 63 ^
				   (uint64_t)(uint32_t)c->last_exit.code << 32 ^
				   (uint32_t)c->last_exit.signal);
		h = rc__sig_mix(h, (uint64_t)c->started_at);
		h = rc__sig_mix(h, (uint64_t)c->next_restart_at);
	}
	return h;
}

static void rc__persist(rc_pods_t *pods, rc_pod_t *p)
{
	uint64_t sig = rc__status_sig(p);

	if (sig == p->persisted_sig)
		return;
	{
	st_status_t s;
	st_container_status_t cs[p->nctrs ? p->nctrs : 1];
	int64_t last_at = -1;

	memset(&s, 0, sizeof s);
	rc__copy(s.name, sizeof s.name, p->name);
	rc__copy(s.phase, sizeof s.phase, p->phase);
	rc__copy(s.reason, sizeof s.reason, p->reason);
	s.generation = p->generation ? p->generation : p->want_gen;
	s.since = p->since;
	memset(cs, 0, sizeof cs);
	for (size_t i = 0; i < p->nctrs; i++) {
		rc_ctr_t *c = &p->ctrs[i];
		rc__copy(cs[i].name, sizeof cs[i].name, c->name);
		rc__copy(cs[i].phase, sizeof cs[i].phase, c->phase);
		rc__copy(cs[i].reason, sizeof cs[i].reason, c->reason);
		cs[i].pid = c->runner ? c->proc.pid : c->orphan;
		cs[i].pid_start_time = c->runner ? c->proc.start_time : c->orphan_start;
		cs[i].restarts = c->restarts;
		cs[i].retries = c->retries;
		cs[i].last_exit = c->last_exit;
		cs[i].started_at = c->started_at;
		s.restarts += c->restarts;
		if (c->retries > s.retries)
			s.retries = c->retries;
		if (c->phase == PH_BACKING_OFF &&
		    (!s.next_restart_at || c->next_restart_at < s.next_restart_at))
			s.next_restart_at = c->next_restart_at;
		if (c->last_exit.present && c->started_at > last_at) {
			last_at = c->started_at;
			s.last_exit = c->last_exit;
		}
	}
	s.containers = cs;
	s.n_containers = p->nctrs;
	/* Queued and group-committed; -ENOMEM leaves the old status, which
	 * the next change rewrites. */
	if (st_status_put(pods->o.store, &s) == 0)
		p->persisted_sig = sig;
	}
}

/* Derives the pod's phase from its containers (bubble up). */
static void rc__pod_update(rc_pods_t *pods, rc_loop_t *loop, rc_pod_t *p)
{
	const char *ph = PH_PENDING;
	char reason[RC_REASON] = "";
	size_t nterm = 0, nrun = 0, nback = 0, nstop = 0, nfail = 0;

	for (size_t i = 0; i < p->nctrs; i++) {
		rc_ctr_t *c = &p->ctrs[i];
		if (c->phase == PH_TERMINAL) {
			nterm++;
			if (strcmp(c->reason, "completed") != 0) {
				nfail++;
				rc__fmt(reason, sizeof reason, "%s", c->reason);
			}
		} else if (c->phase == PH_RUNNING) {
			nrun++;
		} else if (c->phase == PH_BACKING_OFF) {
			nback++;
			if (!reason[0])
				rc__fmt(reason, sizeof reason, "%s: %s", c->name, c->reason);
		} else if (c->phase == PH_STOPPING) {
			nstop++;
		}
	}
	if (p->sb_error[0]) {
		ph = PH_TERMINAL;
		rc__copy(reason, sizeof reason, p->sb_error);
	} else if (nstop || (rc__pod_busy(p) && p->nctrs && !rc__ctr_want(pods, &p->ctrs[0]))) {
		ph = PH_STOPPING;
		rc__copy(reason, sizeof reason, !p->desired ? "deleted"
				 : p->restart_req ? "restart"
				 : pods->shutting_down ? "shutdown" : "spec changed");
	} else if (p->nctrs && nterm == p->nctrs) {
		ph = PH_TERMINAL;
		if (!nfail)
			rc__copy(reason, sizeof reason, "completed");
		else if (strcmp(reason, "oom_killed") != 0)
			rc__copy(reason, sizeof reason, "failed");
	} else if (nback) {
		ph = PH_BACKING_OFF;
	} else if (p->nctrs && nrun + nterm == p->nctrs) {
		ph = PH_RUNNING;
		reason[0] = '\0';
	} else if (nrun) {
		ph = PH_STARTING;
	}
	if (ph != p->phase || strcmp(reason, p->reason) != 0) {
		if (ph != p->phase)
			p->since = (int64_t)rc_wall_ms();
		rc_record(loop, RC_KIND_POD, p->name, p->phase ? p->phase : "", ph, reason);
		p->phase = ph;
		rc__copy(p->reason, sizeof p->reason, reason);
	}
	rc__persist(pods, p);
}

/* --- tracking ------------------------------------------------------------------ */

static void rc__ctrs_free(rc_pod_t *p)
{
	for (size_t i = 0; i < p->nctrs; i++) {
		rc_ctr_t *c = &p->ctrs[i];
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
	p->sb_error[0] = '\0';
}

static void rc__pod_free(rc_pod_t *p)
{
	rc__ctrs_free(p);
	if (p->spec != p->want)
		pod_spec_free(p->spec);
	pod_spec_free(p->want);
	if (p->has_saved)
		st_status_clear(&p->saved);
	free(p);
}

/* Builds the containers of p->spec, taking over what the stored status
 * says about them when it is of the same generation. */
static int rc__ctrs_build(rc_pod_t *p)
{
	const pod_spec_t *s = p->spec;

	if (!(p->ctrs = calloc(s->container_count, sizeof *p->ctrs)))
		return -ENOMEM;
	p->nctrs = s->container_count;
	for (size_t i = 0; i < p->nctrs; i++) {
		rc_ctr_t *c = &p->ctrs[i];
		c->pod = p;
		rc__fmt(c->key, sizeof c->key, "%s/%s", p->name, s->containers[i].name);
		c->name = strchr(c->key, '/') + 1;
		c->phase = PH_PENDING;
		c->proc.stdout_fd = c->proc.stderr_fd = -1;
		if (!p->has_saved)
			continue;
		for (size_t j = 0; j < p->saved.n_containers; j++) {
			const st_container_status_t *cs = &p->saved.containers[j];
			if (strcmp(cs->name, c->name) != 0)
				continue;
			/* A process of a previous tankd, if still the same. */
			uint64_t st;
			if (cs->pid > 0 && pod_proc_start_time(cs->pid, &st) == 0 &&
			    st == cs->pid_start_time) {
				c->orphan = cs->pid;
				c->orphan_start = st;
			}
			if (p->saved.generation != p->generation)
				break;
			c->restarts = cs->restarts;
			c->retries = cs->retries;
			c->last_exit = cs->last_exit;
			c->started_at = cs->started_at;
			if (strcmp(cs->phase, PH_TERMINAL) == 0) {
				c->terminal = true;
				c->phase = PH_TERMINAL;
				rc__copy(c->reason, sizeof c->reason, cs->reason);
			} else if (strcmp(cs->phase, PH_BACKING_OFF) == 0) {
				c->next_restart_at = p->saved.next_restart_at;
			}
		}
	}
	if (p->has_saved) {
		st_status_clear(&p->saved);
		p->has_saved = false;
	}
	return 0;
}

static int rc__decode_spec(const st_pod_t *sp, pod_spec_t **out)
{
	msgpack_unpacked u;
	size_t off = 0;
	int err;

	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, sp->spec, sp->spec_len, &off) != MSGPACK_UNPACK_SUCCESS) {
		msgpack_unpacked_destroy(&u);
		return TANK_ECORRUPT;
	}
	err = pod_spec_from_msgpack(&u.data, out, NULL);
	msgpack_unpacked_destroy(&u);
	return err;
}

/* --- pod manager ------------------------------------------------------------------ */

/* One stored pod, seen by a resync: track it, decode its spec only when
 * its generation moved (a resync over 10,000 unchanged pods decodes
 * nothing and copies nothing). */
static int rc__pod_seen(void *ctx, const st_pod_t *sp)
{
	rc_pods_t *pods = ctx;
	rc_pod_t *p = tank_map_get(&pods->pods, sp->name);

	if (!p) {
		if (!(p = calloc(1, sizeof *p)))
			return 0;       /* seen again at the next resync */
		rc__copy(p->name, sizeof p->name, sp->name);
		if (tank_map_put(&pods->pods, p->name, p, NULL) < 0) {
			free(p);
			return 0;
		}
	}
	if (!p->restored) {
		p->restored = true;
		p->has_saved = st_status_get(pods->o.store, p->name, &p->saved, NULL) == 0;
	}
	if (p->want_gen != sp->generation || !p->want) {
		pod_spec_t *ns = NULL;
		if (rc__decode_spec(sp, &ns) < 0)
			return 0;       /* validated at apply: only a damaged store */
		if (p->want != p->spec)
			pod_spec_free(p->want);
		p->want = ns;
		p->want_gen = sp->generation;
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
static bool rc__pod_settled(rt_t *rt, const rc_pod_t *p)
{
	if (!p->desired || !p->spec || p->generation != p->want_gen ||
	    p->restart_req || p->sb_error[0] || !p->nctrs)
		return false;
	for (size_t i = 0; i < p->nctrs; i++) {
		const rc_ctr_t *c = &p->ctrs[i];
		if (c->orphan || c->cg_orphans || c->stop_sent)
			return false;
		if (c->phase == PH_TERMINAL)
			continue;
		if (c->phase != PH_RUNNING || !c->runner || !rt_alive(rt, c->runner))
			return false;
	}
	return true;
}

static int rc__pod_observe(void *ctx, rc_loop_t *loop, uint32_t kind)
{
	rc_pods_t *pods = ctx;
	size_t it = 0;
	const char *name;
	void *v;
	int err;

	/* Everything tracked is looked at; absent ones become undesired. */
	while (tank_map_next(&pods->pods, &it, &name, &v))
		((rc_pod_t *)v)->desired = false;
	if ((err = st_pod_foreach(pods->o.store, rc__pod_seen, pods, NULL)) < 0) {
		/* Half a walk must not read as "deleted": keep them desired. */
		it = 0;
		while (tank_map_next(&pods->pods, &it, &name, &v))
			((rc_pod_t *)v)->desired = ((rc_pod_t *)v)->want != NULL;
		return err;
	}
	it = 0;
	while (tank_map_next(&pods->pods, &it, &name, &v))
		if (!rc__pod_settled(rc_rt(loop), v))
			rc_enqueue(loop, kind, name);
	return 0;
}

static void rc__enqueue_ctrs(rc_loop_t *loop, rc_pod_t *p)
{
	for (size_t i = 0; i < p->nctrs; i++)
		rc_enqueue(loop, RC_KIND_CONTAINER, p->ctrs[i].key);
}

static void rc__make_sandbox(rc_pod_t *p)
{
	const pod_spec_t *s = p->spec;
	pod_sandbox_mount_t mounts[64];
	size_t nm = 0;
	tank_error_t err;

	if (!s->isolation.namespaces || p->has_sb || p->sb_error[0])
		return;
	for (size_t i = 0; i < s->container_count; i++)
		for (size_t j = 0; j < s->containers[i].mount_count && nm < 64; j++) {
			const pod_mount_t *m = &s->containers[i].mounts[j];
			mounts[nm].host_path = s->volumes[m->volume_index].host_path;
			mounts[nm].path = m->path;
			mounts[nm].read_only = m->read_only;
			nm++;
		}
	pod_sandbox_opts_t o = {
		.ns = s->isolation.namespaces, .hostname = s->isolation.hostname,
		.rootfs = s->isolation.rootfs, .mounts = mounts, .n_mounts = nm,
	};
	tank_error_clear(&err);
	if (pod_sandbox_create(&o, &p->sb, &err) < 0)
		rc__fmt(p->sb_error, sizeof p->sb_error, "sandbox: %s", err.msg);
	else
		p->has_sb = true;
}

static int rc__pod_reconcile(void *ctx, rc_loop_t *loop, const char *key)
{
	rc_pods_t *pods = ctx;
	rc_pod_t *p = tank_map_get(&pods->pods, key);

	if (!p)
		return 0;
	if (!p->desired) {
		if (rc__pod_busy(p)) {          /* cascade the stop */
			rc__enqueue_ctrs(loop, p);
			rc__pod_update(pods, loop, p);
			return 0;
		}
		rc_record(loop, RC_KIND_POD, p->name, p->phase ? p->phase : "", "deleted", "deleted");
		tank_map_del(&pods->pods, p->name);
		(void)st_status_forget(pods->o.store, p->name);
		for (size_t i = 0; i < p->nctrs; i++)
			rc_cancel_requeue(loop, RC_KIND_CONTAINER, p->ctrs[i].key);
		rc__pod_free(p);
		return 0;
	}
	if (p->spec && p->generation != p->want_gen) {
		if (rc__pod_busy(p)) {
			rc__enqueue_ctrs(loop, p);
			rc__pod_update(pods, loop, p);
			return 0;
		}
		for (size_t i = 0; i < p->nctrs; i++)
			rc_cancel_requeue(loop, RC_KIND_CONTAINER, p->ctrs[i].key);
		rc__ctrs_free(p);
		if (p->spec != p->want)
			pod_spec_free(p->spec);
		p->spec = NULL;
	}
	if (!p->spec) {
		p->spec = p->want;
		p->generation = p->want_gen;
		if (rc__ctrs_build(p) < 0) {
			p->spec = NULL;
			return -ENOMEM;
		}
	}
	if (p->restart_req) {
		if (rc__pod_busy(p)) {
			rc__enqueue_ctrs(loop, p);
			rc__pod_update(pods, loop, p);
			return 0;
		}
		p->restart_req = false;
		for (size_t i = 0; i < p->nctrs; i++) {
			rc_ctr_t *c = &p->ctrs[i];
			c->terminal = false;
			c->retries = 0;
			c->next_restart_at = 0;
			c->phase = PH_PENDING;
			rc_cancel_requeue(loop, RC_KIND_CONTAINER, c->key);
		}
	}
	if (!pods->shutting_down)
		rc__make_sandbox(p);
	if (p->sb_error[0])
		for (size_t i = 0; i < p->nctrs; i++)
			if (!p->ctrs[i].runner && p->ctrs[i].phase != PH_TERMINAL) {
				p->ctrs[i].terminal = true;
				rc__ctr_phase(loop, &p->ctrs[i], PH_TERMINAL, p->sb_error);
			}
	rc__enqueue_ctrs(loop, p);
	rc__pod_update(pods, loop, p);
	return 0;
}

static bool rc__pod_pending(void *ctx, const char *key)
{
	rc_pods_t *pods = ctx;
	rc_pod_t *p = tank_map_get(&pods->pods, key);

	if (!p || !p->desired)
		return p != NULL;
	return !(p->phase == PH_RUNNING ||
		 (p->phase == PH_TERMINAL && strcmp(p->reason, "completed") == 0));
}

static void rc__pod_escalate(void *ctx, rc_loop_t *loop, const char *key, int err)
{
	rc_pods_t *pods = ctx;
	rc_pod_t *p = tank_map_get(&pods->pods, key);
	char reason[RC_REASON];

	if (!p)
		return;
	rc__fmt(reason, sizeof reason, "reconcile failed: %s", tank_strerror(err));
	rc_record(loop, RC_KIND_POD, p->name, p->phase ? p->phase : "", p->phase ? p->phase : PH_PENDING, reason);
}

/* --- container manager ----------------------------------------------------------- */

static int rc__ctr_observe(void *ctx, rc_loop_t *loop, uint32_t kind)
{
	rc_pods_t *pods = ctx;
	size_t it = 0;
	void *v;

	/* The containers of every pod that is not settled (see
	 * rc__pod_settled): the others have nothing to converge. */
	while (tank_map_next(&pods->pods, &it, NULL, &v)) {
		rc_pod_t *p = v;
		if (rc__pod_settled(rc_rt(loop), p))
			continue;
		for (size_t i = 0; i < p->nctrs; i++)
			rc_enqueue(loop, kind, p->ctrs[i].key);
	}
	return 0;
}

static void rc__drained_check(rc_pods_t *pods)
{
	if (pods->shutting_down && !pods->nrunning && !pods->drained_told) {
		size_t it = 0;
		void *v;
		while (tank_map_next(&pods->pods, &it, NULL, &v))
			if (rc__pod_busy(v))
				return;
		pods->drained_told = true;
		if (pods->o.on_drained)
			pods->o.on_drained(pods->o.drained_ctx);
	}
}

/* A zombie is dead even if nobody reaps it (its parent, init or our
 * predecessor's parent, may never wait for it). */
static bool rc__zombie(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return true;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

/* Sends sig to every process of the container's cgroup. */
static void rc__cg_signal(const pod_cgroup_t *cg, int sig)
{
	char path[POD_CGROUP_PATH + 16];
	FILE *f;
	int pid;

	rc__fmt(path, sizeof path, "%s/cgroup.procs",
		cg->mode == POD_CGROUP_V2 ? cg->dir[0] : cg->dir[POD_CG_PIDS]);
	if (!(f = fopen(path, "re")))
		return;
	while (fscanf(f, "%d", &pid) == 1)
		if (pid > 0)
			kill(pid, sig);
	fclose(f);
}

/* Processes left by a previous tankd — found by the pid and start time
 * in the stored status, or as members of the container's cgroup (which
 * also catches a start the previous daemon had no time to record) — are
 * stopped like a container: stop signal, then SIGKILL after the grace
 * period.  Returns 1 while some remain (the key is requeued). */
static int rc__orphan_step(rc_pods_t *pods, rc_loop_t *loop, rc_ctr_t *c)
{
	uint64_t st;
	int64_t now = (int64_t)rc_wall_ms();
	const pod_spec_t *s = c->pod->spec;
	bool pid_alive = c->orphan && pod_proc_start_time(c->orphan, &st) == 0 &&
			 st == c->orphan_start && !rc__zombie(c->orphan);
	bool cg_alive = c->cg_orphans && c->has_cg && pod_cgroup_count(&c->cg) > 0;

	(void)pods;
	if (!pid_alive && !cg_alive) {
		c->orphan = 0;
		c->cg_orphans = false;
		c->orphan_deadline = 0;
		rc_record(loop, RC_KIND_CONTAINER, c->key, "orphan", "stopped",
			  "processes of a previous tankd stopped");
		return 0;
	}
	if (!c->orphan_deadline) {
		int sig = s ? s->stop.signal : SIGTERM;
		if (pid_alive)
			kill(c->orphan, sig);
		if (cg_alive)
			rc__cg_signal(&c->cg, sig);
		c->orphan_deadline = now + (int64_t)(s ? s->stop.grace_ms : 10000);
		rc_record(loop, RC_KIND_CONTAINER, c->key, c->phase, "orphan",
			  "stopping processes left by a previous tankd");
	} else if (now >= c->orphan_deadline) {
		if (cg_alive)
			pod_cgroup_kill_all(&c->cg);
		if (pid_alive)
			kill(c->orphan, SIGKILL);
	}
	rc_requeue_after(loop, RC_KIND_CONTAINER, c->key, 50);
	return 1;
}

static char **rc__envp(const pod_container_t *pc)
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

static void rc__envp_free(char **envp)
{
	for (size_t i = 0; envp && envp[i]; i++)
		free(envp[i]);
	free(envp);
}

/* The container's spec. */
static const pod_container_t *rc__ctr_spec(const rc_ctr_t *c)
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
static int rc__ctr_cgroup(rc_pods_t *pods, rc_ctr_t *c, char *reason, size_t cap)
{
	const pod_container_t *pc = rc__ctr_spec(c);
	tank_error_t err;
	int rc;

	if (c->has_cg) {
		/* Drift: a group removed by hand is made again (the launcher
		 * would fail to join it, and every restart with it). */
		if (access(c->cg.mode == POD_CGROUP_V2 ? c->cg.dir[0] : c->cg.dir[POD_CG_PIDS],
			   F_OK) == 0)
			return 0;
		if (pod_cgroup_destroy(&c->cg) < 0)
			pod_cgroup_forget(&c->cg);
		c->has_cg = false;
	}
	if (!pc)
		return 0;
	const pod_limits_t *l = &pc->limits;
	bool limited = l->memory_bytes || l->pids || l->cpu_millis;
	if (!pods->has_cg && !limited)
		return 0;
	pod_cgroup_limits_t lim = {
		.memory = l->memory_bytes, .pids = l->pids,
		.cpu = (double)l->cpu_millis / 1000.0,
	};
	tank_error_clear(&err);
	rc = pods->has_cg
		? pod_cgroup_create(&pods->cg_env, c->pod->name, c->name, &lim, &c->cg, &err)
		: tank_error_set(&err, TANK_EUNSUPPORTED, "no cgroup hierarchy");
	if (rc < 0) {
		/* Limits cannot be honoured: refuse to run unlimited.  Without
		 * limits, run untracked by cgroup. */
		if (limited) {
			rc__fmt(reason, cap, "limits: %s", err.msg);
			return rc;
		}
		return 0;
	}
	c->has_cg = true;
	return 0;
}

/* Starts the container; on failure fills reason and returns < 0. */
static int rc__ctr_start(rc_pods_t *pods, rc_loop_t *loop, rc_ctr_t *c,
			 char *reason, size_t cap)
{
	rc_pod_t *p = c->pod;
	const pod_container_t *pc = NULL;
	tank_error_t err;
	char **envp;
	int rc;

	for (size_t i = 0; i < p->spec->container_count; i++)
		if (strcmp(p->spec->containers[i].name, c->name) == 0)
			pc = &p->spec->containers[i];
	if (!pc)
		return -ENOENT;
	tank_error_clear(&err);
	if ((rc = rc__ctr_cgroup(pods, c, reason, cap)) < 0)
		return rc;
	if (!c->log) {
		pod_log_opts_t lo = { .dir = pods->log_dir, .pod = p->name, .container = c->name };
		/* Without a log the container still runs; output is dropped. */
		(void)pod_log_open(&lo, &c->log, NULL);
	}
	if (!(envp = rc__envp(pc))) {
		rc__fmt(reason, cap, "out of memory");
		return -ENOMEM;
	}
	pod_launch_opts_t lo = {
		.file = pc->argv[0], .argv = pc->argv, .envp = envp,
		.cwd = pc->working_dir, .user = pc->user,
		.stdout_mode = POD_STDIO_PIPE, .stderr_mode = POD_STDIO_PIPE,
		.cgroup = c->has_cg ? &c->cg : NULL,
		.sandbox = p->has_sb ? &p->sb : NULL,
	};
	rc_runner_args_t ra = {
		.owner = rc_pid(loop), .key = c->key, .launch_opts = &lo,
		.launch = pods->o.launch,
		.cgroup = c->has_cg ? &c->cg : NULL, .log = c->log,
		.stop_signal = p->spec->stop.signal, .grace_ms = p->spec->stop.grace_ms,
		.proc = &c->proc, .err = &err,
	};
	rc = rc_runner_start(rc_rt(loop), &ra, &c->runner);
	rc__envp_free(envp);
	if (rc < 0) {
		c->runner = 0;
		rc__fmt(reason, cap, "%s", err.msg[0] ? err.msg : tank_strerror(rc));
		return rc;
	}
	pods->nrunning++;
	return 0;
}

/* min(base · 2ⁿ, cap).  Bounded work whatever n is: a zero base never
 * grows, and past 64 doublings any base has reached any cap. */
static uint64_t rc__backoff(const pod_spec_t *s, uint32_t n)
{
	uint64_t d = s->backoff.base_ms;

	if (d == 0)
		return 0;
	for (uint32_t i = 0; i < n && i < 64 && d < s->backoff.cap_ms; i++)
		d = d > UINT64_MAX / 2 ? UINT64_MAX : d * 2;
	return d < s->backoff.cap_ms ? d : s->backoff.cap_ms;
}

/* Applies the restart policy to an exit (or a failed start). */
static void rc__ctr_exited(rc_pods_t *pods, rc_loop_t *loop, rc_ctr_t *c,
			   const pod_exit_t *ex, uint64_t ran_ms, const char *why)
{
	const pod_spec_t *s = c->pod->spec;
	bool failed = ex->oom_killed || ex->code != 0 || ex->signal != 0;
	bool restart = s->restart == POD_RESTART_ALWAYS ||
		       (s->restart == POD_RESTART_ON_FAILURE && failed);
	char reason[RC_REASON];

	c->last_exit.present = true;
	c->last_exit.code = ex->code;
	c->last_exit.signal = ex->signal;
	if (why)
		rc__fmt(reason, sizeof reason, "%s", why);
	else if (ex->oom_killed)
		rc__fmt(reason, sizeof reason, "oom_killed");
	else if (ex->signal)
		rc__fmt(reason, sizeof reason, "killed by signal %d", ex->signal);
	else
		rc__fmt(reason, sizeof reason, "exited with code %d", ex->code);
	if (!restart) {
		c->terminal = true;
		rc__ctr_phase(loop, c, PH_TERMINAL,
			      !failed ? "completed" : ex->oom_killed ? "oom_killed" : reason);
		return;
	}
	if (ran_ms >= s->backoff.stable_window_ms)
		c->retries = 0;
	uint64_t delay = rc__backoff(s, c->retries);
	c->retries++;
	c->restarts++;
	c->next_restart_at = (int64_t)(rc_wall_ms() + delay);
	rc__ctr_phase(loop, c, PH_BACKING_OFF, reason);
	if (delay)
		rc_requeue_after(loop, RC_KIND_CONTAINER, c->key, delay);
	else
		rc_enqueue(loop, RC_KIND_CONTAINER, c->key);
	(void)pods;
}

static int rc__ctr_reconcile(void *ctx, rc_loop_t *loop, const char *key)
{
	rc_pods_t *pods = ctx;
	rc_ctr_t *c = rc__ctr_find(pods, key);
	char reason[RC_REASON];

	if (!c)
		return 0;
	if (!c->orphans_checked) {
		char why[RC_REASON];
		c->orphans_checked = true;
		if (rc__ctr_cgroup(pods, c, why, sizeof why) == 0 && c->has_cg &&
		    pod_cgroup_count(&c->cg) > 0)
			c->cg_orphans = true;
	}
	if ((c->orphan || c->cg_orphans) && rc__orphan_step(pods, loop, c))
		return 0;
	if (!rc__ctr_want(pods, c)) {
		if (c->runner && !c->stop_sent) {
			rt_send(rc_rt(loop), c->runner, RC_RUNNER_STOP, NULL, 0);
			c->stop_sent = true;
			rc__ctr_phase(loop, c, PH_STOPPING, c->pod->desired ? "stop" : "deleted");
			rc__pod_update(pods, loop, c->pod);
		} else if (!c->runner) {
			rc_cancel_requeue(loop, RC_KIND_CONTAINER, c->key);
			/* Only a pod that waits for its containers to stop needs
			 * telling; waking any other pod would ping-pong forever
			 * (its reconcile requeues its containers). */
			if (rc__pod_waits(c->pod))
				rc_enqueue(loop, RC_KIND_POD, c->pod->name);
			rc__drained_check(pods);
		}
		return 0;
	}
	if (c->runner || c->terminal)
		return 0;
	int64_t now = (int64_t)rc_wall_ms();
	if (c->next_restart_at > now) {
		if (c->phase != PH_BACKING_OFF)
			rc__ctr_phase(loop, c, PH_BACKING_OFF, "restoring backoff");
		rc_requeue_after(loop, RC_KIND_CONTAINER, c->key,
				 (uint64_t)(c->next_restart_at - now));
		rc__pod_update(pods, loop, c->pod);
		return 0;
	}
	c->next_restart_at = 0;
	if (rc__ctr_start(pods, loop, c, reason, sizeof reason) < 0) {
		/* A start that fails counts as a failed run (exit 127, as a
		 * shell reports "command not found"), so policy and backoff
		 * apply and a broken command cannot spin. */
		pod_exit_t ex = { .code = 127 };
		rc__ctr_exited(pods, loop, c, &ex, 0, reason);
	} else {
		c->stop_sent = false;
		c->started_at = now;
		rc__ctr_phase(loop, c, PH_RUNNING, "started");
	}
	rc__pod_update(pods, loop, c->pod);
	return 0;
}

static bool rc__ctr_handle(void *ctx, rc_loop_t *loop, rt_msg_t *m)
{
	rc_pods_t *pods = ctx;
	rc_runner_exited_t ex;
	rc_ctr_t *c;

	if (m->type == RT_MSG_EXIT) {
		/* A runner that ends normally has sent RC_RUNNER_EXITED first;
		 * exit signals overtake mail (docs/runtime.md), so that report
		 * is still queued: let it speak. */
		if (m->u.exit.reason.kind == RT_NORMAL)
			return true;
		/* A runner died without reporting (crash or kill): treat it
		 * as an exit by signal, so the container is restarted. */
		size_t it = 0;
		void *v;
		while (tank_map_next(&pods->pods, &it, NULL, &v)) {
			rc_pod_t *p = v;
			for (size_t i = 0; i < p->nctrs; i++)
				if (p->ctrs[i].runner == m->u.exit.from) {
					pod_exit_t e = { .code = -1, .signal = SIGKILL };
					c = &p->ctrs[i];
					c->runner = 0;
					pods->nrunning--;
					if (rc__ctr_want(pods, c))
						rc__ctr_exited(pods, loop, c, &e, 0, "runner died");
					else
						rc__ctr_phase(loop, c, PH_PENDING, "stopped");
					rc__pod_update(pods, loop, p);
					rc_enqueue(loop, RC_KIND_POD, p->name);
					return true;
				}
		}
		return true;
	}
	if (m->type != RT_MSG_USER || m->tag != RC_RUNNER_EXITED || m->len != sizeof ex)
		return false;
	memcpy(&ex, m->data, sizeof ex);
	ex.key[sizeof ex.key - 1] = '\0';
	if (!(c = rc__ctr_find(pods, ex.key)) || !c->runner)
		return true;
	/* The runner is exiting normally; forget its link so its EXIT is not
	 * mistaken for a crash. */
	rt_unlink(rc_rt(loop), c->runner);
	c->runner = 0;
	c->proc.pid = 0;
	pods->nrunning--;
	if (!rc__ctr_want(pods, c) || ex.stopped) {
		c->last_exit.present = true;
		c->last_exit.code = ex.exit.code;
		c->last_exit.signal = ex.exit.signal;
		rc__ctr_phase(loop, c, PH_PENDING, "stopped");
		if (ex.stopped && rc__ctr_want(pods, c))
			rc_enqueue(loop, RC_KIND_CONTAINER, c->key);
	} else {
		rc__ctr_exited(pods, loop, c, &ex.exit, ex.ran_ms, NULL);
	}
	rc__pod_update(pods, loop, c->pod);
	rc_enqueue(loop, RC_KIND_POD, c->pod->name);
	rc__drained_check(pods);
	return true;
}

/* The loop actor is going away (crash or daemon stop).  Its runners are
 * linked to it and die with it, killing their processes; forget them so
 * a restarted loop starts those containers again. */
static void rc__ctr_stop(void *ctx, rc_loop_t *loop)
{
	rc_pods_t *pods = ctx;
	size_t it = 0;
	void *v;

	(void)loop;
	while (tank_map_next(&pods->pods, &it, NULL, &v)) {
		rc_pod_t *p = v;
		for (size_t i = 0; i < p->nctrs; i++) {
			rc_ctr_t *c = &p->ctrs[i];
			if (!c->runner)
				continue;
			c->runner = 0;
			c->stop_sent = false;
			c->proc.pid = 0;
			c->phase = PH_PENDING;
			rc__copy(c->reason, sizeof c->reason, "reconciler stopped");
		}
	}
	pods->nrunning = 0;
}

const rc_manager_t rc_pod_manager = {
	.kind = "pod",
	.observe = rc__pod_observe,
	.reconcile = rc__pod_reconcile,
	.is_pending = rc__pod_pending,
	.escalate = rc__pod_escalate,
};

const rc_manager_t rc_container_manager = {
	.kind = "container",
	.observe = rc__ctr_observe,
	.reconcile = rc__ctr_reconcile,
	.handle = rc__ctr_handle,
	.stop = rc__ctr_stop,
};

/* --- public ------------------------------------------------------------------------ */

int rc_pods_new(const rc_pods_opts_t *o, rc_pods_t **out)
{
	rc_pods_t *pods = calloc(1, sizeof *pods);

	if (!pods)
		return -ENOMEM;
	pods->o = *o;
	if (!(pods->log_dir = strdup(o->log_dir ? o->log_dir : "."))) {
		free(pods);
		return -ENOMEM;
	}
	if (o->cgroups && o->cgroups->mode != POD_CGROUP_NONE) {
		pods->cg_env = *o->cgroups;
		pods->has_cg = true;
	}
	tank_map_init(&pods->pods);
	*out = pods;
	return 0;
}

void rc_pods_free(rc_pods_t *pods)
{
	size_t it = 0;
	void *v;

	if (!pods)
		return;
	while (tank_map_next(&pods->pods, &it, NULL, &v))
		rc__pod_free(v);
	tank_map_destroy(&pods->pods);
	free(pods->log_dir);
	free(pods);
}

void rc_pods_record(void *ctx, const rc_transition_t *t)
{
	rc_pods_t *pods = ctx;
	char pod[POD_NAME_MAX + 1];
	const char *container = NULL;
	st_transition_t tr;
	rc_pod_t *p;

	memset(&tr, 0, sizeof tr);
	tr.at = (int64_t)t->at_ms;
	rc__copy(tr.from, sizeof tr.from, t->from);
	rc__copy(tr.to, sizeof tr.to, t->to);
	if (strcmp(t->kind, "container") == 0) {
		const char *slash = strchr(t->key, '/');
		size_t n = slash ? (size_t)(slash - t->key) : strlen(t->key);
		if (n > POD_NAME_MAX)
			n = POD_NAME_MAX;
		memcpy(pod, t->key, n);
		pod[n] = '\0';
		container = slash ? slash + 1 : "";
		rc__fmt(tr.reason, sizeof tr.reason, "container %s: %s", container, t->reason);
	} else {
		rc__copy(pod, sizeof pod, t->key);
		rc__copy(tr.reason, sizeof tr.reason, t->reason);
	}
	/* A deleted pod's history is dropped with it (st_status_forget). */
	if (strcmp(t->to, "deleted") != 0)
		(void)st_transition_add(pods->o.store, pod, &tr);
	if (pods->o.on_event) {
		p = tank_map_get(&pods->pods, pod);
		rc_event_t ev = {
			.pod = pod, .container = container, .from = t->from,
			.to = t->to, .reason = t->reason, .at = tr.at,
			.generation = p ? p->generation : 0,
		};
		pods->o.on_event(pods->o.event_ctx, &ev);
	}
}

int rc_pods_restart(rc_pods_t *pods, rc_loop_t *loop, const char *name)
{
	rc_pod_t *p = tank_map_get(&pods->pods, name);

	if (!p || !p->desired)
		return TANK_ENOTFOUND;
	p->restart_req = true;
	rc_record(loop, RC_KIND_POD, p->name, p->phase ? p->phase : "", p->phase ? p->phase : PH_PENDING, "restart requested");
	rc_enqueue(loop, RC_KIND_POD, p->name);
	return 0;
}

void rc_pods_running(rc_pods_t *pods,
		     void (*fn)(void *ctx, const char *name, pid_t pid), void *ctx)
{
	size_t it = 0;
	const char *name;
	void *v;

	while (tank_map_next(&pods->pods, &it, &name, &v)) {
		rc_pod_t *p = v;
		if (p->nctrs && p->ctrs[0].runner)
			fn(ctx, name, p->ctrs[0].proc.pid);
	}
}

void rc_pods_shutdown(rc_pods_t *pods, rc_loop_t *loop)
{
	size_t it = 0;
	void *v;

	pods->shutting_down = true;
	while (tank_map_next(&pods->pods, &it, NULL, &v))
		rc__enqueue_ctrs(loop, v);
	rc__drained_check(pods);
}

size_t rc_pods_nrunning(const rc_pods_t *pods)
{
	return pods->nrunning;
}
