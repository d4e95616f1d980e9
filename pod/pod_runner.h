/*
 * pod_runner — the runtime actor of one running container.
 *
 * The container manager (pod_mgr) spawns one runner per container start (a `temporary`
 * actor: it never restarts itself; restart policy is the reconciler's).
 * The runner starts the process through the pod layer's launcher, watches
 * its exit and its stdout/stderr pipes, feeds the log writer, and carries
 * out a stop: the stop signal, then after the grace period SIGKILL to
 * everything in the container's cgroup (or process group).
 *
 * It also runs the container's health probes (pod_probe.h) and tells its
 * owner their news; a liveness (or startup) probe that gives up makes it
 * stop the container as a stop would, the exit then marked unhealthy.
 *
 * An adopted runner (args.adopt) takes over a process a previous life of
 * tankd started (pod_adopt.h) instead of starting one; from then on it is
 * like any other.
 *
 * When the process has exited the runner kills whatever descendants are
 * left in its cgroup, sends its owner one POD_RUNNER_EXITED message and
 * exits normally.  If the runner is killed (daemon shutdown, crash) its
 * terminate kills the container's processes: a container never outlives
 * the actor that tracks it.
 *
 * Ownership: the cgroup and the log writer are the owner's (they live as
 * long as the container's tracking, across restarts); the runner borrows
 * them until it sends POD_RUNNER_EXITED or dies, and the owner must not
 * free them before.  A log writer the runner opens at the first output
 * (args.log_slot) is put in the owner's slot and is the owner's from
 * then on.  Everything else is copied.
 */
#ifndef TANK_POD_RUNNER_H
#define TANK_POD_RUNNER_H

#include <stdbool.h>

#include "common/tank_err.h"
#include "common/tank_kinds.h"
#include "pod/pod_adopt.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_launch.h"
#include "pod/pod_launcher.h"
#include "pod/pod_log.h"
#include "pod/pod_probe.h"
#include "reconciler/rc_loop.h"
#include "runtime/rt.h"

/* runner -> owner (the reconciler): a tag of the container kind, so the
 * loop routes it to the container manager and no other */
#define POD_RUNNER_EXITED RC_TAG_KIND(TANK_KIND_CONTAINER, 1)
/* runner -> owner: the container's log started (dropping) or stopped
 * losing lines; payload pod_runner_logdrop_t */
#define POD_RUNNER_LOGDROP RC_TAG_KIND(TANK_KIND_CONTAINER, 2)
typedef struct pod_runner_logdrop {
	bool dropping;
	uint64_t lines;           /* dropped so far, all time */
	uint64_t episode;         /* dropped in the episode that ended */
	char error[64];           /* what the write said, when it starts */
	char key[RC_KEY_MAX];
} pod_runner_logdrop_t;
/* runner -> owner: a probe's news (pod_probe.h); payload pod_runner_probe_t */
#define POD_RUNNER_PROBE RC_TAG_KIND(TANK_KIND_CONTAINER, 3)
typedef struct pod_runner_probe {
	pod_probe_report_t report;
	char key[RC_KEY_MAX];
} pod_runner_probe_t;
/* runner -> owner: an asynchronous start (args.launcher) is over; payload
 * pod_runner_started_t.  rc 0: the process runs, args.proc is filled (the
 * container is started from now on); else it did not start (error says
 * why) and the runner has exited normally, with no POD_RUNNER_EXITED. */
#define POD_RUNNER_STARTED RC_TAG_KIND(TANK_KIND_CONTAINER, 4)
typedef struct pod_runner_started {
	int rc;
	char error[POD_LAUNCH_ERR_MAX];   /* what a status shows of it */
	char key[RC_KEY_MAX];
} pod_runner_started_t;
/* owner -> runner: starts the stop sequence (idempotent).  Payload none,
 * or a uint64_t: the longest grace this stop may take (ms), when it is
 * shorter than the spec's (an owner's deadline is nearer than the grace). */
#define POD_RUNNER_STOP 10
/* runner -> itself: the grace period ran out: SIGKILL to the process and
 * to its group's members as read once; the exit that follows kills what
 * a fork slipped past that read (the full kill of any exit) */
#define POD_RUNNER_GRACE 11
/* the launcher's owner -> runner: its launch is done; payload the
 * pod_launch_job_t * (pod_launcher.h), the runner's from then on */
#define POD_RUNNER_LAUNCHED 13
/* pod_adopt -> an adopted runner: its process, not our child, was reaped
 * by the keeper (or ended with no keeper to tell how: lost); payload
 * pod_adopt_exit_t */
#define POD_RUNNER_KEPT 12

typedef struct pod_runner_exited {
	pod_exit_t exit;
	bool stopped;             /* it was asked to stop */
	uint64_t ran_ms;          /* from exec to exit */
	/* non-empty: stopped because a probe gave up on it (liveness or
	 * startup), the probe's last word; the exit counts as a failure */
	char unhealthy[ST_PROBE_MAX + 1];
	/* which probe gave up: enum pod_probe_role + 1, 0 = none (decisions
	 * read this, never unhealthy's text) */
	uint8_t gave_up;
	/* Reaped by the keeper while no tankd watched (an adopted process):
	 * when, ms since the epoch; 0 otherwise */
	int64_t kept_at;
	/* An adopted process that ended while no keeper held its status (the
	 * keeper was killed; pod_adopt.h "Orphans"): exit unknown (code -1) */
	bool lost;
	/* Its cgroup was read (or killed through, v2) at the exit and found
	 * there: the owner's restart at once need not look for it again. */
	bool cg_read;
	char key[RC_KEY_MAX];     /* "<pod>/<container>" */
} pod_runner_exited_t;

typedef struct pod_runner_args {
	rt_pid_t owner;
	const char *key;                  /* copied */
	const pod_launch_opts_t *launch_opts;  /* borrowed for the spawn */
	pod_cgroup_t *cgroup;             /* borrowed (see above); may be NULL */
	pod_log_t *log;                   /* borrowed; may be NULL */
	/* With log NULL: where a log opened at the container's first output
	 * goes (the owner's slot, which then owns it like log), and the
	 * directory it is made in (borrowed: the owner's, outliving the
	 * runner).  NULL: output is read and dropped.  A container that
	 * never writes costs no directory and no file (creating them took
	 * 2.5 ms per container on a busy ext4 here: more than its spawn). */
	pod_log_t **log_slot;
	const char *log_dir;
	/* The container's probes ([POD_PROBE_ROLES], copied; NULL = none)
	 * and the pod's sandbox they run in (borrowed like the cgroup). */
	const pod_probe_t *probes;
	const pod_sandbox_t *sandbox;
	int stop_signal;
	uint64_t grace_ms;
	/* The launcher: pod_launch, or a test's fake with its contract. */
	int (*launch)(const pod_launch_opts_t *, pod_proc_t *, tank_error_t *);
	/* Non-NULL (and launch NULL, no adopt): the start is asynchronous.
	 * pod_runner_start submits the launch to this launcher thread
	 * (pod_launcher.h) and returns at once with args->proc's pid 0; the
	 * launcher's owner hands the done job to the runner
	 * (POD_RUNNER_LAUNCHED), which then tells its owner
	 * POD_RUNNER_STARTED.  A stop asked meanwhile is carried out as soon
	 * as the process exists; a runner killed meanwhile abandons the job
	 * (the process, if any, is killed).  Borrowed: outlives the runner. */
	pod_launcher_t *launcher;
	pod_proc_t *proc;                 /* out: the started process; the runner
					   * also marks there a pipe it closed
					   * (fd -1), for a reexec's handover */
	/* Adoption (pod_adopt.h): non-NULL, the process is not started but
	 * taken over (its pid, start time and pipe fds, which the runner
	 * then owns); it started at adopt_started_at (ms since the epoch).
	 * Its exit is watched as a child's when it is our child, else
	 * through adopter (the keeper reaps it). */
	const pod_proc_t *adopt;
	bool adopt_child;                 /* it is our child (a reexec's) */
	int64_t adopt_started_at;
	pod_adopt_t *adopter;
	tank_error_t *err;                /* out: why the start failed */
} pod_runner_args_t;

/* Spawns a runner linked to the caller and starts the process in its
 * init.  Returns 0 with args->proc filled, or the launch error (args->err
 * says what failed: "exec /nope: No such file or directory"); no actor
 * then exists.  Blocks for the launcher's vfork window only.  With
 * args->launcher: returns once the launch is queued (args->proc's pid
 * 0), the outcome comes as POD_RUNNER_STARTED; errors are then only the
 * runner's own (memory, a dup). */
int pod_runner_start(rt_t *rt, pod_runner_args_t *args, rt_pid_t *out);

#endif
