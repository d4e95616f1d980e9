/*
 * pod_launcher — pod_launch on a thread of its own, so the daemon's loop
 * goes on while a container is being spawned.
 *
 * Why: pod_launch blocks its caller for the vfork window (clone until the
 * child's exec: the cgroup join, setsid, the signal reset, exec itself),
 * which is most of a restart's cost.  CLONE_VFORK suspends only the
 * calling thread: with the clones on these threads, the loop reaps,
 * records and commits the restarts meanwhile, and a restart costs about
 * max(window, the loop's work) instead of their sum.  Two threads, each
 * launching with its own set of slots and child stack (pod_launch.h),
 * keep two windows going at once: a storm's launches are then bounded by
 * the machine's two cores rather than by one thread's serial windows
 * (docs/bench.md, "Issue 38, items 3 and 4, round 2").
 *
 * The launched child's parent is still the daemon's process (threads
 * share it): SIGCHLD and reaping are the runtime's as before.  A child
 * that fails before its exec is reaped by this thread, invisible to the
 * runtime's waitpid(-1) (pod_launch.c: no exit signal until exec).
 *
 * Use, all on the loop thread except the spawning itself:
 *   pod_launcher_new            one per daemon (the container manager's)
 *   pod_launcher_fd             an eventfd, readable when jobs are done;
 *                               the owner watches it
 *   pod_launch_submit           queues a launch, returns its job
 *   pod_launcher_next_done      after the fd was readable: done jobs, in
 *                               the order they finished (two threads:
 *                               not always the order of the submits);
 *                               call it until NULL: the fd is written
 *                               only when the done list was empty
 *   pod_launch_job_take         the result (pod_launch's), once
 *   pod_launch_job_free         frees a job the caller holds
 *   pod_launch_job_abandon      the requester is gone: whatever the job
 *                               started is killed, its fds closed
 *   pod_launcher_settle         before a reexec: nothing half launched
 *   pod_launcher_free           the end: stops the thread, frees the rest
 *
 * Ownership.  pod_launch_submit copies everything of the options (argv,
 * envp, strings, rlimits, the cgroup's paths) and dup()s every fd they
 * name (the sandbox's namespaces and root, a given stdio fd), so the
 * caller may free or close its own at once (a pod deleted while its
 * container is queued does not make the child join a reused fd).  Every
 * fd the job holds is O_CLOEXEC.  A job is held by the launcher while it
 * is queued or running, then by whoever pod_launcher_next_done gave it
 * to.  The holder either takes the result (pod_launch_job_take: the
 * pid and the pipes' read ends become the caller's, exactly as
 * pod_launch's out) and frees the job, or abandons it.  A job abandoned
 * while queued is dropped before it runs; one abandoned while running is
 * killed (SIGKILL to its process group and pid) and its pipes closed
 * when it is done.  pod_launch_job_free of a job whose result was not
 * taken does the same.  So no fd or process is left behind by a launch
 * whose requester died, or by a failed launch.
 *
 * A job carries a cookie (the requester's actor id, for the owner to
 * route the news).  Not thread-safe except as described: one loop
 * thread calls these, the launcher's own thread runs the launches.
 */
#ifndef TANK_POD_LAUNCHER_H
#define TANK_POD_LAUNCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/tank_err.h"
#include "pod/pod_launch.h"

/* A job's error message is cut to this (NUL included): what a start's
 * reason can show (RC_REASON_MAX). */
#define POD_LAUNCH_ERR_MAX 128

/* Launching threads (each takes one of pod_launch's POD_LAUNCH_SETS). */
#define POD_LAUNCHER_THREADS 2

typedef struct pod_launcher pod_launcher_t;
typedef struct pod_launch_job pod_launch_job_t;

/* Starts the launcher's threads (all signals blocked in them: they are
 * the loop thread's; one is enough if the second cannot be made).
 * Returns 0, -ENOMEM, -EMFILE or pthread_create's error. */
int pod_launcher_new(pod_launcher_t **out);

/* Settles (as pod_launcher_settle), stops and joins the thread, kills
 * and frees every job still held by the launcher.  Jobs a caller holds
 * stay the caller's.  NULL is a no-op. */
void pod_launcher_free(pod_launcher_t *l);

/* The eventfd the owner watches (EV_READ); O_CLOEXEC|O_NONBLOCK. */
int pod_launcher_fd(const pod_launcher_t *l);

/* Queues o's launch.  Returns 0 with *out, or -ENOMEM / -EMFILE (a dup)
 * with err set; nothing is then queued or left open. */
int pod_launch_submit(pod_launcher_t *l, const pod_launch_opts_t *o,
                      uint64_t cookie, pod_launch_job_t **out,
                      tank_error_t *err);

/* The next done job (the caller holds it from now on), or NULL.  The
 * first call after the fd was readable clears its readiness: call it
 * until NULL. */
pod_launch_job_t *pod_launcher_next_done(pod_launcher_t *l);

uint64_t pod_launch_job_cookie(const pod_launch_job_t *j);

/* The launch's result, exactly pod_launch's: 0 with *out filled (the
 * pid to reap, the pipes' read ends now the caller's), or its error with
 * err filled (the message cut to POD_LAUNCH_ERR_MAX - 1 bytes).  Once
 * per job. */
int pod_launch_job_take(pod_launch_job_t *j, pod_proc_t *out,
                        tank_error_t *err);

/* Frees a job the caller holds (after next_done); a result not taken is
 * killed and closed first. */
void pod_launch_job_free(pod_launch_job_t *j);

/* The requester of a job it submitted is gone, whether or not the job
 * is done or was handed out by next_done: from now on the job is nobody's
 * but the launcher's, which kills and frees it (now if it can, else when
 * its launch returns).  j must not be used after. */
void pod_launch_job_abandon(pod_launcher_t *l, pod_launch_job_t *j);

/* Before a reexec, which lists the processes it hands over: waits for
 * the launch under way, if any, cancels the queued ones (their result:
 * -ECANCELED, "launch: cancelled") and SIGKILLs every launched child
 * whose result nobody has taken yet (pod_launch_job_take), wherever its
 * job is.  Such a child is in no list a reexec hands over: it would run
 * untracked beside the one the next image starts.  Its holder, if the
 * reexec fails and the daemon goes on, sees it killed.  The launcher
 * keeps working afterwards. */
void pod_launcher_settle(pod_launcher_t *l);

#endif
