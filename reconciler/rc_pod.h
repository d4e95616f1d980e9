/*
 * rc_pod — the pod and container managers (Tank's reconciler semantics).
 *
 * Two kinds on one rc_loop, sharing one context (rc_pods_t):
 *   kind RC_KIND_POD, key "<pod>": diffs the desired pod (store) against
 *     the tracked one: adopts a new spec, tears a deleted or changed pod
 *     down once its containers are stopped, owns the pod's sandbox, and
 *     derives the pod's phase from its containers (status bubbles up).
 *   kind RC_KIND_CONTAINER, key "<pod>/<container>": converges one
 *     container towards what its pod wants (cascade): start it through a
 *     runner actor (rc_runner), stop it, or wait out its backoff.
 *
 * Restart policy lives here, not in a supervisor: runners are temporary.
 * A container's exit is judged by the pod's policy (always / on_failure:
 * non-zero exit, a signal or an OOM kill / never); a restart waits
 * min(base·2ⁿ, cap), n the consecutive restarts, reset to 0 by a run of at
 * least stable_window.  A container that is not restarted is terminal
 * (completed: exit 0; failed otherwise), and a pod whose containers are all
 * terminal is terminal until its spec changes, rc_pods_restart() or delete.
 *
 * Every status change is queued to the store (group commit) and every
 * transition goes through rc_record() → rc_pods_record(), which appends it
 * to the pod's history and hands it to the event sink.
 *
 * On the first resync the stored status is restored: restart counts,
 * backoffs, terminal states (a completed `never` pod is not run again) and
 * the pids of processes left by a previous tankd, which are stopped (stop
 * signal, then SIGKILL after the grace period) before their pod starts
 * again, so no orphan and no duplicate ever runs.
 *
 * Everything runs on the loop's thread.  rc_pods_t is owned by the daemon
 * and must outlive the loop actor.
 */
#ifndef TANK_RC_POD_H
#define TANK_RC_POD_H

#include <stdbool.h>
#include <sys/types.h>

#include "pod/pod_cgroup.h"
#include "pod/pod_launch.h"
#include "reconciler/rc_loop.h"
#include "store/st.h"

enum { RC_KIND_POD = 0, RC_KIND_CONTAINER = 1 };

extern const rc_manager_t rc_pod_manager;
extern const rc_manager_t rc_container_manager;

typedef struct rc_pods rc_pods_t;

/* One transition, as published to subscribers (borrowed strings). */
typedef struct rc_event {
	const char *pod;
	const char *container;   /* NULL for a pod transition */
	const char *from, *to, *reason;
	int64_t at;              /* ms since the epoch */
	uint64_t generation;
} rc_event_t;

typedef struct rc_pods_opts {
	st_t *store;                       /* borrowed */
	const char *log_dir;               /* copied; container logs */
	const pod_cgroup_env_t *cgroups;   /* copied; NULL or mode NONE = none */
	void (*on_event)(void *ctx, const rc_event_t *ev);   /* may be NULL */
	void *event_ctx;
	/* Starts a container process: NULL = pod_launch.  Tests inject a
	 * fake with the same contract (pod_launch.h). */
	int (*launch)(const pod_launch_opts_t *o, pod_proc_t *out, tank_error_t *err);
	/* Called once, after rc_pods_shutdown(), when no container runs. */
	void (*on_drained)(void *ctx);
	void *drained_ctx;
} rc_pods_opts_t;

/* -ENOMEM. */
int rc_pods_new(const rc_pods_opts_t *o, rc_pods_t **out);
/* Frees the tracking; the loop actor must be gone (its runners too). */
void rc_pods_free(rc_pods_t *pods);

/* rc_loop record hook (record_ctx = the rc_pods_t). */
void rc_pods_record(void *ctx, const rc_transition_t *t);

/* Restarts a pod by hand: stops its running containers, clears retries,
 * backoff and terminal state, and starts it again.  TANK_ENOTFOUND if the
 * pod is not desired. */
int rc_pods_restart(rc_pods_t *pods, rc_loop_t *loop, const char *name);

/* Calls fn for each pod that has a running first container. */
void rc_pods_running(rc_pods_t *pods,
		     void (*fn)(void *ctx, const char *name, pid_t pid), void *ctx);

/* Stops every container (stop signal, grace, kill) and calls on_drained
 * when none is left.  Desired state is untouched: the next tankd starts
 * them again. */
void rc_pods_shutdown(rc_pods_t *pods, rc_loop_t *loop);

/* Number of running container processes. */
size_t rc_pods_nrunning(const rc_pods_t *pods);

#endif
