/*
 * pod_req — how other kinds act on pods (DESIGN.md §7 "Requests to pods"):
 * one message interface, so that no later kind (actions, workflows) adds
 * an entry point to the pod manager, and no kind writes its memory.
 *
 * A requester — any actor: an action's step, a workflow's job, a test —
 * sends a pod_req_t (pod_req_send) to the reconcile loop actor; the loop
 * routes it by its tag to the pod manager, which answers the sender with
 * one POD_REQ_REPLY message (a pod_req_reply_t with the request's id):
 *   POD_REQ_EXEC     runs argv inside the pod's sandbox (its namespaces,
 *                    the named container's cgroup, user, working dir and
 *                    environment).  The container must be running, or
 *                    held stopped by the requester itself (its `user`:
 *                    a workflow's stopped environment), in a pod whose
 *                    sandbox exists when it has namespaces.
 *                    stdin: in_path (a host file, opened by tankd before it
 *                    enters the sandbox) or /dev/null.  stdout and stderr,
 *                    interleaved as they arrive, go to the host file
 *                    out_path (created or truncated, 0600; "": dropped), at
 *                    most out_max bytes, then one line "[tank: output cut
 *                    at N bytes]" and the rest is read and dropped (the
 *                    command keeps running); the file grows while it runs,
 *                    so a follower can stream it.
 *                    Replied twice: once started (started = 1, with the
 *                    exec actor's rt pid in `exec`, the host pid and its
 *                    start time), once ended (exit code or signal,
 *                    -ETIMEDOUT when killed at timeout_ms, -ECANCELED when
 *                    the cancel's signals ended it (pod_exec_ended_by_cancel:
 *                    one that had exited already, or caught SIGTERM and
 *                    exited, is replied as it ended), the bytes written).
 *                    A launch failure is
 *                    replied once, ended, with err set.
 *                    Cancel: POD_EXEC_CANCEL (no payload) sent to `exec`:
 *                    SIGTERM to the command's process group, SIGKILL after
 *                    POD_REQ_CANCEL_GRACE_MS.  Harmless once it ended.
 *                    While it runs, its process and the read end of its
 *                    output pipe are kept for a next life of tankd
 *                    (pod_adopt.h: the keeper's fd store, a reexec's
 *                    handover), so that it can be adopted.
 *   POD_REQ_EXEC_ADOPT takes over a command that a previous life of tankd
 *                    started with POD_REQ_EXEC (killed -9 under a keeper,
 *                    or re-executed): `pid` and `pid_start` as its first
 *                    reply gave them (the requester stores them), the same
 *                    pod and container, out_path, out_max and timeout_ms.
 *                    It is found by pid plus start time among the
 *                    processes handed over, never by pid alone, and when
 *                    still running it must be in the container's cgroup
 *                    (if it has one).  The output file is opened to append:
 *                    out_max counts what it holds already, and what the
 *                    command wrote in the gap waited in its pipe.  The
 *                    timeout counts from the process's own start.  Replied
 *                    as an exec: started (the same pid), then ended with
 *                    its real status and ended_at — an end the keeper
 *                    reaped in the gap is replied at once, with its time.
 *                    Cancel as for an exec.  A process that is not our
 *                    child and that no keeper reaps (the keeper was killed)
 *                    is followed by a pidfd: its end is replied `lost`
 *                    (status unknown).  TANK_ENOTFOUND: nothing of
 *                    that pid and start time was handed over (gone with no
 *                    kept exit, no keeper, another process); -EAGAIN: the
 *                    pod or its container is not known yet (first pass
 *                    after a start): ask again shortly.  The container
 *                    need not be running.
 *   POD_REQ_SIGNAL   sends `signal` to the container (its whole cgroup when
 *                    it has one); replied at once.
 *   Every op but the two pod-wide ones: while the manager settles after a
 *   reexec or a restart under the keeper (pod_mgr_settling), a pod not
 *   known yet, or a container being adopted, is -EAGAIN ("not settled
 *   yet"): ask again shortly.  It was "no pod" (an exec right after a
 *   reexec failed so), or a container not running that runs.
 *   POD_REQ_STOP     the container is stopped (stop signal, grace) and held
 *                    stopped in the requester's name (`user`);
 *   POD_REQ_START    ends that user's hold: the container runs again when
 *                    its pod wants it;
 *   POD_REQ_RESTART  stops the container and starts it again (retries,
 *                    backoff and a terminal state cleared).
 *   POD_REQ_STOP_POD the operator's stop of the whole pod (`tankctl stop`;
 *                    container ignored): its desired state is down, kept
 *                    in the store (the pod's status says `stopped`, and a
 *                    restart of tankd keeps it) until POD_REQ_START_POD.
 *                    Its containers stop (stop signal, grace) and its
 *                    phase becomes `stopped`.  It composes with the users'
 *                    holds: a container runs only while neither the
 *                    operator's stop nor any hold asks it to stop.  A
 *                    re-apply of the pod, even of a changed spec, does not
 *                    start it; a delete forgets it.
 *   POD_REQ_START_POD ends the operator's stop (a user's hold stays).
 *                    Both are stored before the loop handles its next
 *                    message, so an answer sent behind an RC_TAG_ECHO
 *                    tells of a stored request.
 * Stop, start and restart are replied once accepted; their effect shows in
 * the pod's status and history (the reason names the user).
 *
 * The pod's owner and its other users are kept apart: the owner
 * (pod_owner_t, a stack) decides whether the pod may run at all, through
 * its hooks; users act only within that and only through these messages.
 * A user cannot start what the owner holds (the start ends the user's hold,
 * the owner's stays), and a hold of one user is not ended by another
 * (TANK_ECONFLICT, naming the holder).  Holds live in tankd's memory: a
 * user re-asserts them after a restart of tankd (its own desired state).
 *
 * Errors in the reply: TANK_ENOTFOUND (no such pod or container),
 * TANK_ECONFLICT (not running, held by another user), TANK_EINVALID (a
 * malformed request), a launch error for exec (its message in msg).
 * Everything runs on the loop's thread; the exec command runs in a small
 * actor of its own, so the loop never waits for it.
 */
#ifndef TANK_POD_REQ_H
#define TANK_POD_REQ_H

#include <stdint.h>

#include "common/tank_kinds.h"
#include "pod/pod_spec.h"
#include "reconciler/rc_fsm.h"
#include "reconciler/rc_loop.h"
#include "runtime/rt.h"

/* To the loop actor (routed to the pod manager): a pod_req_t. */
#define POD_REQ       RC_TAG_KIND(TANK_KIND_POD, 3)
/* To the requester: a pod_req_reply_t. */
#define POD_REQ_REPLY RC_TAG_KIND(TANK_KIND_POD, 4)
/* To an exec actor (pod_req_reply_t.exec): stop the command. */
#define POD_EXEC_CANCEL RC_TAG_KIND(TANK_KIND_POD, 5)

enum pod_req_op {
	POD_REQ_EXEC = 1,
	POD_REQ_SIGNAL,
	POD_REQ_STOP,
	POD_REQ_START,
	POD_REQ_RESTART,
	POD_REQ_STOP_POD,
	POD_REQ_START_POD,
	POD_REQ_EXEC_ADOPT,
};

#define POD_REQ_USER_MAX 63
#define POD_REQ_UID_MAX 36           /* ST_UID_LEN */
#define POD_REQ_ARGV_MAX 1024      /* bytes of exec's argv, each NUL-terminated */
#define POD_REQ_EXEC_TIMEOUT_MS 30000
#define POD_REQ_PATH_MAX 255
#define POD_REQ_OUT_MAX (1u << 20)      /* out_max's default: 1 MiB */
#define POD_REQ_CANCEL_GRACE_MS 2000

/* Whether a cancelled command's status says the cancel ended it: killed
 * by SIGTERM or SIGKILL (POD_EXEC_CANCEL's signals), or a shell's exit
 * 128+N for them, or no status known (exit_code < 0 without a signal:
 * nothing says it ended by itself, and the signal went).  Any other status
 * is the command's own end: an exit it made before the signal reached it
 * (a cancel racing an exit not handled yet), or one it chose on SIGTERM.
 * Rejected: "cancelled" whenever the signal was sent, which says a signal
 * went, not that it ended anything (9 of 300 races read cancelled with
 * exit 0).  Pure. */
bool pod_exec_ended_by_cancel(int exit_code, int exit_signal);

typedef struct pod_req {
	uint64_t id;                        /* the requester's; echoed in the reply */
	uint32_t op;                        /* enum pod_req_op */
	int32_t signal;                     /* POD_REQ_SIGNAL */
	uint32_t timeout_ms;                /* POD_REQ_EXEC; 0: POD_REQ_EXEC_TIMEOUT_MS */
	char user[POD_REQ_USER_MAX + 1];    /* who asks: "action deploy/3" */
	char pod[POD_NAME_MAX + 1];
	char container[POD_NAME_MAX + 1];   /* "": the pod's first container */
	uint32_t argv_len;                  /* bytes used in argv */
	char argv[POD_REQ_ARGV_MAX];        /* POD_REQ_EXEC */
	char in_path[POD_REQ_PATH_MAX + 1];  /* POD_REQ_EXEC: stdin, "": /dev/null */
	char out_path[POD_REQ_PATH_MAX + 1]; /* POD_REQ_EXEC: output, "": dropped */
	uint32_t out_max;                   /* 0: POD_REQ_OUT_MAX */
	int32_t pid;                        /* POD_REQ_EXEC_ADOPT: the process */
	uint64_t pid_start;                 /* POD_REQ_EXEC_ADOPT: its start time */
	/* POD_REQ_STOP_POD/START_POD: the object the requester found in the
	 * store ("": whichever the loop tracks), so a stop of a pod deleted
	 * and applied again is the new object's even when it reaches the
	 * loop before the loop has seen that object. */
	char uid[POD_REQ_UID_MAX + 1];
} pod_req_t;

typedef struct pod_req_reply {
	uint64_t id;
	int32_t err;                        /* 0, or a TANK_E* / negative errno */
	int32_t exit_code;                  /* exec: its exit code, -1 if signalled */
	int32_t exit_signal;                /* exec: the signal that ended it, or 0 */
	char msg[RC_REASON_MAX];            /* what happened, for people */
	/* POD_REQ_EXEC only: */
	uint32_t started;                   /* 1: the first reply, it runs */
	rt_pid_t exec;                      /* the exec actor (POD_EXEC_CANCEL) */
	int32_t pid;                        /* the command's host pid */
	uint64_t pid_start;                 /* its start time (/proc stat 22) */
	uint64_t out_bytes;                 /* bytes written to out_path */
	uint32_t out_cut;                   /* 1: out_max or out_err cut it */
	int32_t out_err;                    /* the errno of the write to out_path
					     * that failed (ENOSPC: a full disk),
					     * which cut it there; 0: none */
	int64_t ended_at;                   /* when it ended, ms since the epoch */
	/* 1: an adopted command that ended while no keeper held its status
	 * (the keeper was killed; pod_adopt.h "Orphans"): its exit is
	 * unknown; err -ECHILD, msg says so, ended_at when it was noticed */
	uint32_t lost;
} pod_req_reply_t;

/* Packs argv (NULL-terminated) into req for POD_REQ_EXEC.  TANK_ETOOBIG
 * when it does not fit, TANK_EINVALID when empty. */
int pod_req_set_argv(pod_req_t *req, const char *const *argv);

/* Sends req to the loop actor `loop`, from the calling actor (the reply
 * goes to rt_self()).  rt_send's errors. */
int pod_req_send(rt_t *rt, rt_pid_t loop, const pod_req_t *req);

#endif
