/*
 * pod_adopt — the processes a previous life of tankd left running, handed
 * to this one so that it adopts them instead of restarting them
 * (DESIGN.md §11), and the exits that happened while nobody watched.
 *
 * Where a handover comes from is the daemon's business: a reexec writes it
 * (same pid: the processes are still our children, their log pipes kept
 * open across the exec), or, after tankd was killed -9, the keeper gives
 * back the pipes it holds and the exits it reaped (keeper/kp_proto.h).
 * Either way each process is an *offer*: a name ("<pod>/<container>" for a
 * container, the pod's name for an isolated pod's sandbox), its pid and
 * start time (/proc/PID/stat field 22: never the pid alone), and for a
 * container the read ends of its stdout and stderr pipes.  The container
 * manager claims an offer when the stored status names the same pid and
 * start time (and the process is in the container's cgroup); offers
 * nobody claims are pruned (their fds closed, the keeper told).
 *
 * Exits: a process that is not our child (re-parented to the keeper) is
 * reaped by the keeper, which tells us (pod_adopt_exited).  Whoever
 * watches that process (pod_adopt_watch: an adopted container's runner,
 * or any kind's actor for a process tank started) gets one message,
 * payload pod_adopt_exit_t; an exit that came before the watch is kept
 * and delivered at the watch.  This is the adoption API other kinds use:
 * "pid P with start time T ended with status S at time X".
 *
 * Orphans: when no keeper reaps for us (it was killed -9: the processes
 * it held are re-parented to init or another subreaper, which neither we
 * nor a next keeper can wait(2) for), every watched process is followed
 * by a pidfd (pidfd_open, Linux >= 5.3) on the loop instead: from the
 * keeper's loss (pod_adopt_set_sink(NULL)) for the watches there are,
 * and at the watch for later ones (a handover's process that is not our
 * child).  Its end then comes as an exit with `lost` set: it ended while
 * no keeper held its status, which is unknown.  The pidfd is opened
 * before the start time is checked, so it never names a later holder of
 * the pid; a process already gone is lost at once.  Without pidfds
 * (ENOSYS, or no descriptor left) the process is looked at in /proc once
 * a second (pid and start time), the reason logged once
 * (TANK_NO_PIDFD=1 in the environment makes that the way always: the
 * tests of the fallback).  A pidfd is one
 * descriptor for as long as the watch lasts: pod_adopt_pidfds says how
 * many are held, which the descriptor budget counts (pod_host.h).
 *
 * Keeping: while a keeper is there (pod_adopt_set_sink), every container
 * started is handed to it (pod_adopt_keep: its pipes, under a tag naming
 * it) and forgotten when it ended (pod_adopt_forget).
 *
 * Execs (pod_req.h's POD_REQ_EXEC: an action's command, a workflow job's
 * template) are kept the same way, but live in no container's record: the
 * exec actor registers its process and the read end of its output pipe
 * while it runs (pod_adopt_exec_keep / _forget), which hands the pipe to
 * the keeper (tag "x <container key> <pid> <start>") and lets a reexec's
 * handover list it (pod_adopt_execs).  The next life finds them as exec
 * offers, keyed by pid and start time, which a POD_REQ_EXEC_ADOPT claims
 * (pod_adopt_claim_exec); those nobody claims by the third pass are
 * dropped with the unclaimed exits (pod_adopt_forget_exits), their process
 * group killed (SIGKILL) while the process is still the one handed over:
 * its requester gave it up (LOST, failed), and nothing would watch it.
 *
 * Everything runs on the loop's thread; nothing blocks but the keeper's
 * sends.  Owned by the daemon; outlives the loop: the watches' owners
 * (actors) unwatch in their terminate, and what is left at
 * pod_adopt_free is closed without touching the loop.
 */
#ifndef TANK_POD_ADOPT_H
#define TANK_POD_ADOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pod/pod_launch.h"
#include "runtime/rt.h"

typedef struct pod_adopt pod_adopt_t;

/* What a watcher receives (pod_adopt_watch's tag). */
typedef struct pod_adopt_exit {
	pid_t pid;
	uint64_t start;
	int status;              /* a wait status (rt_decode_status) */
	int64_t at_ms;           /* when it was reaped, ms since the epoch */
	/* It ended while no keeper held its status (the keeper was killed):
	 * status is unknown (0), at_ms when the end was noticed. */
	bool lost;
} pod_adopt_exit_t;

/* Where kept processes go (a keeper); every hook may be NULL. */
typedef struct pod_adopt_sink {
	void (*keep)(void *ctx, const char *tag, const int *fds, unsigned n);
	void (*forget)(void *ctx, const char *tag);
	void (*ack)(void *ctx, pid_t pid, uint64_t start);
	void *ctx;
} pod_adopt_sink_t;

/* -ENOMEM. */
int pod_adopt_new(pod_adopt_t **out);
/* Closes the fds of offers never claimed; NULL is fine. */
void pod_adopt_free(pod_adopt_t *a);

/* A keeper holds our processes' pipes and reaps the ones that are not our
 * children (sink copied; NULL: none any more, and the watches there are
 * are followed by pidfds from now on, see "Orphans"). */
void pod_adopt_set_sink(pod_adopt_t *a, const pod_adopt_sink_t *sink);
/* True while a keeper reaps for us: a process that is not our child has
 * its real exit status told.  (Without one it can still be adopted: its
 * end is noticed, its status lost.) */
bool pod_adopt_has_reaper(const pod_adopt_t *a);
/* pidfds held now for orphans (descriptors, for the budget). */
size_t pod_adopt_pidfds(const pod_adopt_t *a);

/* --- offers -------------------------------------------------------------------- */

/* A container (key "<pod>/<container>") or a sandbox (sandbox true, name
 * the pod) offered with its pid and start time; fds (out, err: -1 for
 * none) are taken, closed on failure.  child: it is a child of this
 * process (a reexec's), whose exit the runtime reaps; else the keeper
 * does.  -ENOMEM. */
int pod_adopt_offer(pod_adopt_t *a, bool sandbox, const char *name, pid_t pid,
		    uint64_t start, int out_fd, int err_fd, bool child);
/* The same, from a keeper's tag (pod_adopt_keep's) and its fds.
 * TANK_EINVALID for a tag that is not ours (its fds closed). */
int pod_adopt_offer_tag(pod_adopt_t *a, const char *tag, const int *fds, unsigned n);
/* The offer for key with exactly pid and start, taken: true with *out
 * filled (pid, start_time, its fds now the caller's, own_pgrp) and
 * *child (see pod_adopt_offer).  false
 * when there is none or it names another process. */
bool pod_adopt_claim(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start,
		     pod_proc_t *out, bool *child);
/* Whether key is offered with exactly pid and start (not taken). */
bool pod_adopt_offered(const pod_adopt_t *a, const char *key, pid_t pid, uint64_t start);
/* A sandbox's offer for pod, taken: true with its pid and start. */
bool pod_adopt_claim_sandbox(pod_adopt_t *a, const char *pod, pid_t *pid,
			     uint64_t *start);
/* Offers left. */
size_t pod_adopt_offers(const pod_adopt_t *a);
/* fn for each container's and sandbox's offer not claimed yet whose
 * process still runs (pid and start time), or whose end is known
 * (pod_adopt_ended: handed on with pod_adopt_each_exit's; one gone with
 * its end unknown is left out, its pid may be another's by then): its name (a container's key, a sandbox's
 * pod) and process, the pipes' read ends still the offer's (-1 for none).  For a reexec's handover: a second
 * reexec before the first one's adoption ended handed over only what was
 * adopted, and the new image stopped the rest as strangers and started
 * them again (1,941 of 2,000 pods). */
void pod_adopt_each_offer(const pod_adopt_t *a,
			  void (*fn)(void *ctx, bool sandbox, const char *name,
				     const pod_proc_t *p),
			  void *ctx);
/* Offers of containers and sandboxes left (not execs: those are their
 * requesters' to claim): while there are some, processes handed over are
 * still to be adopted.  O(1): asked by every pod request while the
 * manager settles (pod_mgr_settling). */
size_t pod_adopt_proc_offers(const pod_adopt_t *a);
/* Drops every offer wanted(ctx, sandbox, name) says no to: its fds
 * closed, the keeper told to forget it. */
void pod_adopt_prune(pod_adopt_t *a,
		     bool (*wanted)(void *ctx, bool sandbox, const char *name), void *ctx);
/* Counts one adoption (pod_adopt_adopted reports them). */
void pod_adopt_count(pod_adopt_t *a);
uint64_t pod_adopt_adopted(const pod_adopt_t *a);

/* --- exits ---------------------------------------------------------------------- */

/* The keeper reaped pid (start) with status at at_ms: told to its watcher,
 * or kept for the watch to come.  Not acked: the keeper keeps the exit
 * until pod_adopt_ack says it is stored. */
void pod_adopt_exited(pod_adopt_t *a, rt_t *rt, pid_t pid, uint64_t start, int status,
		      int64_t at_ms);
/* The exit of pid (start) that the keeper told is recorded: what it means
 * is in the store, COMMITTED (st_flush returned 0; no fsync needed, a
 * tankd's death does not lose the page cache), so the keeper may forget
 * it.  Whoever watched the process calls this after that commit, and only
 * then forgets the process's tag (pod_adopt_forget): a tankd killed -9
 * between the exit and the commit gets both the exit and the offer again
 * from the keeper, and records the exit then.  An exit no watcher claims
 * is acked when it is forgotten (pod_adopt_forget_exits).  No keeper: a
 * no-op. */
void pod_adopt_ack(pod_adopt_t *a, pid_t pid, uint64_t start);
/* True when pid (start) is known to have ended (and how, into *out). */
bool pod_adopt_ended(const pod_adopt_t *a, pid_t pid, uint64_t start,
		     pod_adopt_exit_t *out);
/* owner gets one message (tag, payload pod_adopt_exit_t) when pid (start)
 * is reaped by the keeper; at once when it was already.  Without a keeper
 * (or once it is gone) the end is followed by a pidfd and told `lost`;
 * at once when the process is gone already.  rt is kept (the loop the
 * pidfds go on).  One watch per process (-EEXIST); -ENOMEM. */
int pod_adopt_watch(pod_adopt_t *a, rt_t *rt, pid_t pid, uint64_t start, rt_pid_t owner,
		    uint32_t tag);
void pod_adopt_unwatch(pod_adopt_t *a, pid_t pid, uint64_t start);
/* Our own child pid, offered (a reexec's handover, child true), was
 * reaped by the runtime while nobody watched it (rt_on_unwatched_exit):
 * its exit is recorded as a keeper's would be (pod_adopt_exited, with
 * the offer's start time), so its adoption judges the real status; a
 * container killed during a reexec's adoption read "exit status
 * unknown".  false: not a child offered (the runtime keeps it). */
bool pod_adopt_reaped(pod_adopt_t *a, pid_t pid, int status, int64_t at_ms);
/* fn for each exit recorded and not claimed yet (a reexec's handover:
 * the next image records them again, pod_adopt_exited). */
void pod_adopt_each_exit(const pod_adopt_t *a, void (*fn)(void *ctx, const pod_adopt_exit_t *x),
			 void *ctx);
/* Forgets exits nobody claimed (after the first passes), acking them
 * (nothing will ever record them), and drops the exec offers nobody
 * claimed (their pipes closed, the keeper told). */
void pod_adopt_forget_exits(pod_adopt_t *a);

/* --- keeping --------------------------------------------------------------------- */

/* A container started (key, its process): its pipes to the keeper. */
void pod_adopt_keep(pod_adopt_t *a, const char *key, const pod_proc_t *p);
/* It ended: the keeper forgets them. */
void pod_adopt_forget(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start);
/* A sandbox made / destroyed (no fds: its namespaces are found again by
 * its pid). */
void pod_adopt_keep_sandbox(pod_adopt_t *a, const char *pod, pid_t pid, uint64_t start);
void pod_adopt_forget_sandbox(pod_adopt_t *a, const char *pod, pid_t pid, uint64_t start);

/* --- execs ------------------------------------------------------------------------ */

/* A running exec of container key: its process and its output pipe's read
 * end (-1: none, or read to its end), registered (replacing the same
 * process's entry) and handed to the keeper.  -ENOMEM. */
int pod_adopt_exec_keep(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start, int rd);
/* It ended: unregistered, the keeper forgets its pipe. */
void pod_adopt_exec_forget(pod_adopt_t *a, pid_t pid, uint64_t start);
/* fn for each registered exec and each exec offer not claimed yet whose
 * process still runs or whose end is known (pod_adopt_ended), rd the
 * offer's pipe (a reexec's handover: an exec a previous life handed
 * over is handed on by a reexec before its requester claimed it). */
void pod_adopt_execs(const pod_adopt_t *a,
		     void (*fn)(void *ctx, const char *key, pid_t pid, uint64_t start, int rd),
		     void *ctx);
/* An exec of container key handed over (rd taken, closed on failure;
 * child: see pod_adopt_offer).  -ENOMEM. */
int pod_adopt_offer_exec(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start, int rd,
			 bool child);
/* Whether an exec of exactly pid and start is offered (not taken). */
bool pod_adopt_exec_offered(const pod_adopt_t *a, pid_t pid, uint64_t start);
/* The exec offer for exactly pid and start, of container key, taken: true
 * with *rd (the caller's now, -1: none) and *child.  false when none. */
bool pod_adopt_claim_exec(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start,
			  int *rd, bool *child);

/* True when pid is a child of this process (read from /proc). */
bool pod_adopt_is_child(pid_t pid);

#endif
