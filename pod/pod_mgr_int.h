/*
 * pod_mgr_int.h — what the pod manager's rooms share, and nothing else
 * includes (private to pod_mgr.c, pod_ctr.c, pod_sweep.c, pod_deps.c,
 * pod_req.c).
 *
 * The pod and container managers (pod_mgr.h) are one context, pod_mgr_t,
 * split by concern:
 *   pod_mgr.c    the pod manager (TANK_KIND_POD): tracking, the resync,
 *                a pod's phase derived from its containers, its status
 *                in the store, the public functions of pod_mgr.h;
 *   pod_ctr.c    the container manager (TANK_KIND_CONTAINER): start,
 *                stop, exit and restart policy, orphans of a previous
 *                tankd, runner messages;
 *   pod_sweep.c  the sweep of processes in tank's cgroups that no
 *                container owns;
 *   pod_deps.c   depends_on: the apply's check (pod_deps.h) and the
 *                runtime side declared here (who depends on whom, is a
 *                condition met, who waits for whom to stop);
 *   pod_req.c    requests from other kinds (pod_req.h): exec, signal,
 *                stop/start/restart of a container, each with a reply.
 *
 * Everything here runs on the loop's thread, on memory the loop actor
 * alone touches.  Names are pod__*; K_POD and K_CTR are the two kinds.
 */
#ifndef TANK_POD_MGR_INT_H
#define TANK_POD_MGR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/tank_map.h"
#include "common/tank_set.h"
#include "pod/pod_adopt.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_launcher.h"
#include "pod/pod_log.h"
#include "pod/pod_mgr.h"
#include "pod/pod_phase.h"
#include "pod/pod_req.h"
#include "pod/pod_runner.h"
#include "pod/pod_sandbox.h"
#include "pod/pod_spec.h"
#include "reconciler/rc_fsm.h"

#define K_POD TANK_KIND_POD
#define K_CTR TANK_KIND_CONTAINER


typedef struct pod_trk pod_trk_t;

typedef struct pod_ctr {
	pod_trk_t *pod;
	/* "<pod>/<container>" (at most RC_KEY_MAX - 1 bytes): in the block
	 * of its pod's ctrs array, after the containers, each as long as
	 * it is (a fixed buffer cost every container 160 bytes). */
	char *key;
	const char *name;             /* into key */
	/* A resync's pod__settled reads these and st's phase: next to each
	 * other (see pod_trk). */
	rt_pid_t runner;
	bool stop_sent;
	bool cg_orphans;              /* its cgroup held processes (a previous tankd's) */
	bool launching;               /* its runner's launch is under way
				       * (pod_launcher.h): proc.pid still 0 */
	pid_t orphan;                 /* a process a previous tankd left */
	rc_fsm_state_t st;            /* phase, since, reason */
	uint8_t outcome;              /* enum pod_outcome: how it ended, when terminal */
	pod_proc_t proc;
	uint32_t restarts, retries;
	st_exit_t last_exit;
	int64_t started_at, next_restart_at;
	bool has_cg;
	/* Its runner read cg at the exit whose restart is due at once
	 * (pod_runner_exited_t.cg_read): that start skips the drift check
	 * (pod__ctr_cgroup).  In the padding after has_cg. */
	bool cg_seen;
	pod_cgroup_t cg;
	pod_log_t *log;
	uint64_t log_dropped;         /* lines its log lost, as last reported */
	bool ready;                   /* running, and ready (no readiness probe: running) */
	bool probes;                  /* it has probes: its runner says when it is ready */
	bool probe_ready;             /* what the runner's probes said last */
	/* The last probe news, at most ST_PROBE_MAX bytes, owned; NULL =
	 * none.  On the heap only while there is news: a fixed buffer cost
	 * every container 64 bytes (issue 38, item 2). */
	char *probe;
	uint8_t gave_up;              /* the probe that stopped its last run:
				       * enum pod_probe_role + 1, 0 = none */
	/* processes left by a previous tankd */
	bool orphans_checked;         /* its cgroup was looked at */
	uint64_t orphan_start;        /* of orphan (cg_orphans, orphan: above) */
	bool adopting;                /* orphan is offered (pod_adopt): adopt it */
	/* The phase its stored status had, + 1, when this tankd took it up
	 * and restored it as pending (0: none, or its first transition is
	 * recorded): that first transition's `from`, so that its history
	 * chains across a restart of tankd (pod_mgr_record). */
	uint8_t restored_from;
	bool once_lost;               /* restart: never, and it was started by a
				       * previous tankd that did not see it end */
	int64_t orphan_deadline;      /* 0: stop signal not sent yet */
	char *held_by;                /* the user whose stop holds it (at most
				       * POD_REQ_USER_MAX bytes, owned; NULL = none;
				       * pod_req.h) */
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
	/* What a resync reads of every pod (pod__seen, pod__settled) is
	 * above and here, in the first four cache lines: with the sandbox
	 * before these, a pass over 10,000 converged pods touched seven
	 * lines a pod and took a fifth longer. */
	bool restart_req;
	bool stopped;                 /* the operator stopped it (tankctl stop,
				       * POD_REQ_STOP_POD): stored in its status */
	bool restart_noted;           /* the request is in the history */
	bool fail_spec;               /* that failure is its stored spec's */
	bool restored;                /* stored status was read */
	char *fail;                   /* non-NULL: failed as a whole (escalated, or
				       * its stored spec cannot be loaded); owned */
	uint64_t seen_pass;           /* the last pass of pod__list that saw it stored */
	/* Its sandbox (owned), while it has one: NULL for a pod without
	 * isolation, most of them (inline, it cost every pod 120 bytes;
	 * issue 38, item 2). */
	pod_sandbox_t *sb;
	rc_fsm_state_t st;
	uint8_t outcome;              /* enum pod_outcome, when terminal */
	st_status_t *saved;           /* stored status, until containers exist:
				       * on the heap, for the first pass only
				       * (a ~450 B record per pod otherwise) */
	uint64_t persisted_sig;       /* pod__status_sig of the last status queued */
	/* The resync's sweep skips the groups of a settled pod it already
	 * swept in the same state (pod__status_sig): its sig then, and the
	 * pass (pod_sweep.c). */
	uint64_t swept_sig;
	uint64_t swept_pass;
	bool gated;                   /* a start waits for depends_on (phase waiting) */
	bool was_busy;                /* pod__busy at the last update */
	uint8_t cond;                 /* POD__COND_* that held at the last update */
	bool held;                    /* its owner (a stack) does not let it run */
	char *held_why;               /* why, while held (owned; NULL = none) */
	/* While pod__update applies an event whose reason is a container's
	 * (POD_WHY_DETAIL): that container, so that pod_mgr_record points
	 * the pod's history entry at the container's instead of repeating
	 * its event.  NULL otherwise. */
	const pod_ctr_t *cause;
	uint32_t told_sig;            /* what the owner was last told changed */
	/* Its containers' restarts summed at the sweep that set swept_sig:
	 * a state moved only by restarts is swept once the starts are over
	 * (pod_sweep.c).  In the tail padding after told_sig. */
	uint32_t swept_restarts;
};

/* How the reason of a container given up (backoff.max_retries) begins;
 * its pod's reason says it too. */
#define POD__GAVE_UP "gave up after "

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
	size_t nrunning;              /* runners, launching ones included */
	size_t nlaunching;            /* runners whose launch is under way */
	/* Starts, counted, and their count when the last resync's sweep
	 * ended: an ended container's group is left to a sweep with no
	 * start since the last one (pod_sweep.c, pod__cg_owned), at most
	 * POD_SWEEP_DEFER_MAX sweeps in a row (sweep_deferred). */
	uint64_t nstarts, swept_starts;
	unsigned sweep_deferred;
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
	/* A pass whose store has not changed since a whole walk (its
	 * st_coll_changes is the one that walk started at) walks the
	 * tracked pods instead of the store: every stored pod is tracked,
	 * at the generation it has, and none tracked as desired is gone. */
	bool fast;                    /* this pass walks the map */
	bool missed;                  /* this walk could not track a pod */
	bool clean;                   /* clean_changes is valid */
	uint64_t walk_changes;        /* st_coll_changes when this walk began */
	uint64_t clean_changes;       /* ... when the last whole walk began */
	/* The names the store's watch told changed (created, configured or
	 * deleted), each with the number of the call that told it (a
	 * uintptr_t, from 1): what pod_mgr_ncontainers_ahead reads instead
	 * of the whole store.  Names told before the last whole walk began
	 * were taken up by it and leave at its end (pod__ahead_prune).
	 * Complete when every call since that walk began was kept: told -
	 * clean_told equals the store's changes since clean_changes (each
	 * notification moves st_coll_changes once; a change not told, or a
	 * name not kept for want of memory, makes them differ, and the
	 * store is walked until a whole walk begins again). */
	int watch;                    /* st_subscribe id; 0 without a store */
	tank_map_t ahead;             /* name -> (void *)(uintptr_t)call */
	uint64_t told;                /* watch calls whose names were all kept */
	uint64_t walk_told;           /* told when this walk began */
	uint64_t clean_told;          /* ... when the last whole walk began */
	size_t fast_it;               /* where the map walk goes on */
	/* depends_on backwards: pod name -> tank_set_t of pod_rdep_t, the
	 * pods whose desired or running spec names it (a superset: entries
	 * are checked against the spec when used, and go with the
	 * dependent's tracking).  Wakes the dependents of a pod whose
	 * condition changed, and holds a pod's stop while a dependent that
	 * is stopping too still runs. */
	tank_map_t rdeps;
	pod_owner_t owner;            /* .allows NULL: no owner */
	/* The launcher thread containers start on (pod_launcher.h), made
	 * at the first start that uses it (none with a fake launch); its
	 * eventfd is watched by the loop actor while launcher_watched. */
	pod_launcher_t *launcher;
	bool launcher_watched;
	rt_pid_t top_walker;          /* pod_top_later's actor, RT_NOPID before */
};

/* The launcher's eventfd is readable (RT_MSG_FD to the loop actor). */
#define POD__LAUNCHER_READY RC_TAG_KIND(TANK_KIND_CONTAINER, 5)

/* --- pod_mgr.c: helpers, status, phase, tracking ----------------------------- */

/* Bounded status strings: a longer text is cut, by design. */
void pod__fmt(char *dst, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void pod__copy(char *dst, size_t cap, const char *src);
/* An optional string owned by a tracking (pod_ctr_t.probe, .held_by,
 * pod_trk_t.held_why): *dst becomes a copy of src cut to cap - 1 bytes,
 * or NULL when src is NULL or "" (the old one freed).  -ENOMEM leaves
 * NULL.  pod__ostr reads one: "" for NULL. */
int pod__ostr_set(char **dst, const char *src, size_t cap);
static inline const char *pod__ostr(const char *s)
{
	return s ? s : "";
}
/* The container of key "<pod>/<container>", or NULL. */
pod_ctr_t *pod__ctr_find(pod_mgr_t *m, const char *key);
/* Whether c's pod wants it to run: desired at the running version, no
 * restart under way, not failed, not held by its owner or a user, and
 * tankd not stopping.  Derived, never stored. */
bool pod__ctr_want(const pod_mgr_t *m, const pod_ctr_t *c);
/* A process of p runs or is being stopped (leftovers of a previous tankd
 * included). */
bool pod__busy(const pod_trk_t *p);
/* p has something to do once its containers stopped (be deleted, switch
 * spec, restart). */
bool pod__waits(const pod_trk_t *p);
/* Applies a container event through its table (pod_phase.h). */
void pod__ctr_event(rc_loop_t *loop, pod_ctr_t *c, enum pod_ctr_event ev, const char *reason);
/* Queues p's status when it changed (group-committed; st_flush commits). */
void pod__persist(pod_mgr_t *m, pod_trk_t *p);
/* Derives p's phase from its containers (pod_derive), tells dependents
 * and the owner, persists. */
void pod__update(pod_mgr_t *m, rc_loop_t *loop, pod_trk_t *p);
/* Nothing a resync pass could change for p (it may skip it). */
bool pod__settled(rt_t *rt, const pod_trk_t *p);
/* pod__settled, or settled but for containers backing off before a
 * restart of their own policy (their process reaped, nothing else amiss:
 * what a restart storm makes of every pod, pod_sweep.c), or neither. */
typedef enum { POD_CALM_NO, POD_CALM_SETTLED, POD_CALM_RESTARTING } pod_calm_t;
pod_calm_t pod__calm(rt_t *rt, const pod_trk_t *p);
/* p's cgroup name, "<name>.<8 hex of its uid>". */
void pod__cg_group(const pod_trk_t *p, char *buf, size_t cap);
/* CLOCK_MONOTONIC in ns: where a slice of work ends.  Not the coarse
 * clock: its steps are 4 ms here, as long as the whole 4 ms budget, so a
 * slice ran 4 to 8 ms (about 25 ns a read through the vDSO: a pass reads
 * it once a pod, 2.5 ms over 100,000 pods in all). */
uint64_t pod__slice_ns(void);

/* --- pod_ctr.c: the container manager -------------------------------------------- */

/* Once tankd drains and no container runs: the final sweep, on_drained. */
void pod__drained_check(pod_mgr_t *m, rc_loop_t *loop);
/* tankd's stop (POD_MGR_SHUTDOWN), for one pod: its containers' runners
 * are told to stop now, unless a dependent that runs holds its stop
 * (pod__stop_held: then the last of them to end calls this again,
 * pod__deps_notify).  No reconcile, no queue: the drain sends every stop
 * it may in one pass over the pods, the next level of depends_on as soon
 * as the level above it is gone.  When some container of p has something
 * only its reconcile does (leftovers of a previous tankd to stop, a group
 * not looked into yet), p's containers are queued as before. */
void pod__shutdown_stop(pod_mgr_t *m, rc_loop_t *loop, pod_trk_t *p);
/* c ends for good (terminal) with outcome (enum pod_outcome) and reason. */
void pod__ctr_finish(rc_loop_t *loop, pod_ctr_t *c, uint8_t outcome, const char *reason);
/* A container's environment as "KEY=value" strings, NULL-terminated, for
 * its start and for an exec in its sandbox (pod_req).  Malloc'ed: free
 * with pod__envp_free.  NULL: out of memory. */
char **pod__envp(const pod_container_t *pc);
void pod__envp_free(char **envp);

/* A signature of the fields a status shows (phase, reason, each
 * container's phase, pid, start time, restarts, ...): equal signatures,
 * nothing to write (and, for the sweep, nothing happened). */
uint64_t pod__status_sig(const pod_trk_t *p);

/* --- pod_sweep.c: untracked processes ---------------------------------------------- */

/* The daemon's final sweep: whatever runs in tank's cgroups is killed. */
void pod__sweep_all(pod_mgr_t *m, rc_loop_t *loop);
/* One slice of a resync's sweep: 1 while more remains, 0 when done. */
int pod__sweep_slice(pod_mgr_t *m, rc_loop_t *loop);

/* --- pod_req.c: requests from other kinds ------------------------------------------- */

/* A POD_REQ message (pod_req.h): acts on it and replies to its sender. */
void pod__req_handle(pod_mgr_t *m, rc_loop_t *loop, const rt_msg_t *msg);
/* The operator's stop (stopped) or start of the pod called name
 * (POD_REQ_STOP_POD/START_POD): kept on its tracking (tracked now when
 * the loop has not seen it yet: applied a moment ago), stored in its
 * status before the loop moves on, and queued.  user names who asked, for
 * the history; uid the object the requester found ("" or NULL: the one
 * tracked), taken up from the store first when the loop has not seen it
 * yet (applied a moment ago, perhaps over a deleted one).  0, or
 * -ENOMEM. */
int pod__set_stopped(pod_mgr_t *m, rc_loop_t *loop, const char *name, bool stopped,
		     const char *user, const char *uid);

/* --- pod_deps.c: depends_on at run time -------------------------------------------- */

/* Notes (forgets) that dependent depends on what spec names (except what
 * keep names too).  Out of memory loses only a wake-up. */
void pod__rdeps_add(pod_mgr_t *m, const char *dependent, const pod_spec_t *spec);
void pod__rdeps_del(pod_mgr_t *m, const char *dependent, const pod_spec_t *spec,
		    const pod_spec_t *keep);
/* fn on each tracked pod whose desired or running spec depends on name. */
void pod__dependents(pod_mgr_t *m, const char *name,
		     void (*fn)(pod_mgr_t *m, pod_trk_t *d, void *ctx), void *ctx);
/* Every dependency of p meets its condition; else reason names the first
 * that does not. */
bool pod__deps_met(const pod_mgr_t *m, const pod_trk_t *p, char *reason, size_t cap);
/* A pod__dependents callback: queues d (ctx: the loop). */
void pod__wake(pod_mgr_t *m, pod_trk_t *d, void *ctx);
/* p goes away and a dependent going away too still runs: p's stop waits. */
bool pod__stop_held(pod_mgr_t *m, const pod_trk_t *p);
/* After p's phase may have changed: wakes its dependents when cond (the
 * POD__COND_* that hold) changed, and what it depends on when it stopped. */
void pod__deps_notify(pod_mgr_t *m, rc_loop_t *loop, pod_trk_t *p, uint8_t cond);

#endif
