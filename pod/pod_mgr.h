/*
 * pod_mgr — the pod and container managers (Tank's reconciler semantics)
 * on the generic loop (reconciler/rc_loop.h).
 *
 * Two kinds, sharing one context (pod_mgr_t):
 *   TANK_KIND_POD, key "<pod>": diffs the desired pod (store) against the
 *     tracked one: adopts a new spec, tears a deleted or changed pod down
 *     once its containers are stopped, and derives the pod's phase from
 *     its containers (status bubbles up).
 *   TANK_KIND_CONTAINER, key "<pod>/<container>": converges one container
 *     towards what its pod wants (cascade): make the sandbox if the pod
 *     has none yet, start the process through a runner actor
 *     (pod_runner), stop it, or wait out its backoff.  Its parent, for
 *     escalation, is its pod.
 *
 * The managers decide; the OS work is the pod layer's other modules
 * (pod_launch, pod_cgroup, pod_sandbox, pod_log); phases change only
 * through the tables of pod_phase.h (rc_fsm_apply); status goes to the
 * store, group-committed.
 *
 * Restart policy lives here, not in a supervisor: runners are temporary.
 * A container's exit is judged by the pod's policy (always / on_failure:
 * non-zero exit, a signal or an OOM kill / never); a restart waits
 * tank_backoff(base, cap, n), n the consecutive restarts, reset to 0 by a
 * run of at least stable_window.  A failed start (exec error, sandbox that
 * cannot be made) counts as a failed run.  A container that is not
 * restarted is terminal (completed: exit 0; failed otherwise), and a pod
 * whose containers are all terminal is terminal until its spec changes,
 * pod_mgr_restart() or delete.
 *
 * On the first resync the stored status is restored: restart counts,
 * backoffs, terminal states (a completed `never` pod is not run again) and
 * the pids of processes left by a previous tankd, which are stopped (stop
 * signal, then SIGKILL after the grace period) before their pod starts
 * again, so no orphan and no duplicate ever runs.  A stored spec that
 * cannot be decoded makes that one pod terminal with the reason; the
 * others run.
 *
 * Everything runs on the loop's thread.  pod_mgr_t is owned by the daemon
 * and must outlive the loop actor.
 */
#ifndef TANK_POD_MGR_H
#define TANK_POD_MGR_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/tank_kinds.h"
#include "common/tank_map.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_launch.h"
#include "pod/pod_phase.h"
#include "reconciler/rc_loop.h"
#include "store/st.h"

extern const rc_manager_t pod_manager;          /* TANK_KIND_POD */
extern const rc_manager_t pod_ctr_manager;      /* TANK_KIND_CONTAINER */

/* Message to the loop actor, routed to the pod manager: stop every
 * container (the daemon's drain).  No payload.  Every stop that may go
 * is sent while handling it, the rest (a pod whose dependents still run)
 * as soon as the last of those dependents ends: the graces run at once,
 * level by level of depends_on. */
#define POD_MGR_SHUTDOWN RC_TAG_KIND(TANK_KIND_POD, 1)
/* Message to the loop actor, routed to the pod manager: restart the pod
 * named by the payload (its name, NUL included) by hand.  See
 * pod_mgr_restart(). */
#define POD_MGR_RESTART RC_TAG_KIND(TANK_KIND_POD, 2)

typedef struct pod_mgr pod_mgr_t;

/* One transition, as published to subscribers (borrowed strings). */
typedef struct pod_event {
	const char *pod;
	const char *container;   /* NULL for a pod transition */
	const char *from, *to, *reason;
	int64_t at;              /* ms since the epoch */
	uint64_t generation;
	const char *uid;         /* the pod object's identity ("" if unknown) */
	/* A probe's news instead of a transition (from, to NULL): its last
	 * result ("readiness: failed: connect: Connection refused") and
	 * whether the container is ready now. */
	const char *probe;
	bool ready;
} pod_event_t;

typedef struct pod_mgr_opts {
	st_t *store;                       /* borrowed */
	const char *log_dir;               /* copied; container logs */
	const pod_cgroup_env_t *cgroups;   /* copied; NULL or mode NONE = none */
	void (*on_event)(void *ctx, const pod_event_t *ev);   /* may be NULL */
	void *event_ctx;
	/* Starts a container process: NULL = pod_launch.  Tests inject a
	 * fake with the same contract (pod_launch.h). */
	int (*launch)(const pod_launch_opts_t *o, pod_proc_t *out, tank_error_t *err);
	/* Processes a previous life of tankd left (a reexec's handover or
	 * the keeper's): adopted instead of stopped when the stored status
	 * names the same pid and start time; also where started containers
	 * are kept (pod_adopt_keep).  Borrowed; NULL: none. */
	struct pod_adopt *adopt;
	/* Called once, after the shutdown message, when no container runs. */
	void (*on_drained)(void *ctx);
	void *drained_ctx;
} pod_mgr_opts_t;

/* What owns pods from above: the stack manager (DESIGN.md §8 cascade).
 * The pod manager asks it and tells it; it never sees stacks.  Every hook
 * runs on the loop's thread, and only reads (may call rc_enqueue).  Any
 * other kind acts on pods only by the messages of pod/pod_req.h (exec,
 * signal, stop/start/restart of a container), each answered by a reply. */
typedef struct pod_owner {
	/* May pod run now?  false with why ("stack shop is down"): its
	 * containers are then stopped (dependents first) and not started,
	 * and the pod shows `waiting` with that reason. */
	bool (*allows)(void *ctx, const char *pod, char *why, size_t cap);
	/* The pod's parent, for escalation (its stack), or false. */
	bool (*parent)(void *ctx, const char *pod, rc_ref_t *out);
	/* Something a parent derives its status from changed: the pod's
	 * phase, readiness, whether it runs, or its existence. */
	void (*changed)(void *ctx, rc_loop_t *loop, const char *pod);
	/* May be NULL.  When the pod is held: the wall-clock time (ms) by
	 * which nothing of it may run any more (its stack's deadline), or 0
	 * for none; a stop then takes no longer than what is left, grace
	 * included.  *rushed: its stop may not wait for its dependents to
	 * stop first (the deadline leaves no time for the chain). */
	int64_t (*stop_by)(void *ctx, const char *pod, bool *rushed);
	void *ctx;
} pod_owner_t;

/* -ENOMEM. */
int pod_mgr_new(const pod_mgr_opts_t *o, pod_mgr_t **out);
/* Sets the owner (copied); before the loop starts. */
void pod_mgr_set_owner(pod_mgr_t *m, const pod_owner_t *owner);
/* Sets where the pod manager's events go (the opts' on_event and
 * event_ctx, replaced; fn NULL: nowhere); before the loop starts.  The
 * Pod descriptor's open hooks them to the daemon's publisher. */
void pod_mgr_set_events(pod_mgr_t *m, void (*fn)(void *ctx, const pod_event_t *ev),
			void *ctx);
/* Frees the tracking; the loop actor must be gone (its runners too). */
void pod_mgr_free(pod_mgr_t *m);

/* The loop's record hook (record_ctx = the pod_mgr_t): appends the
 * transition to the pod's history and publishes it. */
void pod_mgr_record(void *ctx, const rc_transition_t *t);

/* Asks for a restart of a pod by hand (from any actor, e.g. the API's):
 * its running containers stop, retries, backoff and terminal state are
 * cleared, and it starts again.  A request is a message (POD_MGR_RESTART)
 * to the loop actor (`loop` is its pid); nothing of the manager's memory
 * is touched here (m gives the store it reads, set at pod_mgr_new).  The
 * manager stores the request with the pod's status (`restart: true`) and
 * commits it before it acts, so a tankd killed -9 after this returned
 * restarts the pod when it starts again; the request is cleared once the
 * restart happened.  TANK_ENOTFOUND if no such pod is stored; rt_send's
 * errors. */
int pod_mgr_restart(pod_mgr_t *m, rt_t *rt, rt_pid_t loop, const char *name);

/* Calls fn for each pod with a running container, with the host pid of
 * its first running container. */
void pod_mgr_running(pod_mgr_t *m,
		     void (*fn)(void *ctx, const char *name, pid_t pid), void *ctx);

/* For a reexec's handover (the daemon's): fn for each container process
 * a runner watches now (its key, its process with the pipe fds it still
 * has open, -1 for a closed one) and for each pod's sandbox (sandbox
 * true, name the pod, fds -1); then for each process a previous life
 * handed over that is not adopted yet (pod_adopt_each_offer), unless a
 * process of this life stands for it already.  Each name once. */
void pod_mgr_procs(pod_mgr_t *m,
		   void (*fn)(void *ctx, bool sandbox, const char *name, const pod_proc_t *p),
		   void *ctx);

/* Number of running container processes. */
size_t pod_mgr_nrunning(const pod_mgr_t *m);   /* launches under way not counted */

/* What a parent derives its status from, for one pod. */
typedef struct pod_info {
	bool exists;             /* desired (stored) */
	bool busy;               /* a process of it runs or is being stopped */
	bool adopting;           /* processes a previous tankd left may still be
				  * adopted (pod_adopt.h): what it is about to
				  * be is not known yet */
	bool ready;              /* running and every container ready */
	bool completed;          /* every container finished with exit 0 */
	bool failed;             /* terminal and not completed, or failed whole */
	enum pod_phase phase;    /* what decisions read */
	enum pod_outcome outcome;  /* when terminal */
	const char *reason;      /* for people; borrowed until the next loop turn */
	uint64_t grace_ms;       /* its stop grace (stop.grace) */
	const struct pod_dep *deps;  /* its depends_on (pod_spec.h; borrowed, as reason) */
	size_t ndeps;
} pod_info_t;
/* True once the drain (POD_MGR_SHUTDOWN) began: pods stop because tankd
 * does, which changes nothing a parent wants. */
bool pod_mgr_draining(const pod_mgr_t *m);
/* True while what runs is not all known yet: the first pass over the
 * stored pods has not ended (a pod not tracked yet may be stored), or
 * processes a previous tankd handed over (a reexec, the keeper) are still
 * to be adopted (their offers are claimed or, at the end of the second
 * pass, dropped).  A reader of what runs (`top`) waits for it to end. */
bool pod_mgr_settling(const pod_mgr_t *m);
/* Fills *out for pod name: false when it is not tracked at all. */
bool pod_mgr_info(const pod_mgr_t *m, const char *name, pod_info_t *out);
/* From inside the loop: a terminal pod starts again (retries and
 * terminal states cleared, as pod_mgr_restart); a live one is left
 * alone.  For a parent brought up again.  The request is queued in the
 * pod's status; the caller commits it (st_flush) before it goes on. */
void pod_mgr_rearm(pod_mgr_t *m, rc_loop_t *loop, const char *name);

/* Containers of the pods tracked now that are not terminal (deleted ones
 * still stopping included; a pod whose containers all finished for good
 * holds no descriptor), or of the one pod `name` (0 when it is not
 * tracked or terminal); what an apply adds to tankd's descriptors is
 * measured against these. */
size_t pod_mgr_ncontainers(const pod_mgr_t *m, const char *name);
/* Containers of the pods stored that the loop has not taken up yet: a
 * name not tracked, or stored under another uid or generation than the
 * tracking has seen (applied a moment ago, while the loop still works
 * through an earlier batch), each counted for what its stored spec adds
 * to pod_mgr_ncontainers(name).  Names in `skip` (the batch being
 * admitted, which replaces them; may be NULL) are left out.  Without it
 * an apply right after another was measured without the other's pods
 * (docs/bench.md, issue 38 round 8).  Reads only the names the store's
 * watch told changed since the last whole walk began (kept by the
 * manager, which subscribes at pod_mgr_new); before the first whole walk,
 * or when a change was not told, walks the store.  Decodes only the
 * specs not taken up; an unreadable spec counts as none (it never
 * runs). */
size_t pod_mgr_ncontainers_ahead(pod_mgr_t *m, const tank_map_t *skip);
/* True when the loop has taken up every stored pod: a whole walk of the
 * store (the resync's) saw them all and no commit changed the pods since
 * (st_coll_changes).  pod_mgr_ncontainers_ahead is 0 then, without its
 * walk.  False also before the first whole walk (tankd's start). */
bool pod_mgr_caught_up(const pod_mgr_t *m);

/* The directory of the pods' cgroup root in the hierarchy that counts
 * their processes (v2: the unified one; v1: pids), written into buf; ""
 * without cgroups.  For the host-limits check (pod_host.h). */
void pod_mgr_pids_group(const pod_mgr_t *m, char *buf, size_t cap);

#endif
