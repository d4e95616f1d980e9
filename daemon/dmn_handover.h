/*
 * dmn_handover — a reexec of tankd: what the running image hands the next
 * one (the same pid, DESIGN.md §11).
 *
 * The old image writes, into a memfd whose number it puts in
 * TANK_HANDOVER_FD, its own counters and one line per process its pods
 * run (pod_mgr_procs): a container's key, pid, start time and the read
 * ends of its stdout/stderr pipes, or a sandbox's pod, pid and start
 * time, or a running exec's container, pid, start time and the read end
 * of its output pipe (pod_adopt_execs), and the exits of those that ended
 * before their adoption (a process killed between two reexecs keeps its
 * real status).  It clears close-on-exec on those fds, the listening socket and
 * the keeper's socket, unblocks every signal and execs the binary it was
 * started from (its path again: an upgraded binary there is the one that
 * runs).  Nothing is torn down: the containers stay its children, their
 * pipes stay open (nothing written in between is lost: it waits in the
 * pipe), and clients that connect meanwhile wait in the socket's backlog.
 *
 * The new image reads it back (dmn_handover_read) before it opens
 * anything else: the counters, the socket to serve, and each process as
 * an offer (pod_adopt.h), which its container claims.
 *
 * Format, text, one record a line:
 *   tank-handover 1
 *   listen FD | started_at MS | reexecs N | lives N | adopted N
 *   c KEY PID START OUTFD ERRFD CHILD
 *   s POD PID START
 *   x KEY PID START RDFD CHILD   (a running exec of container KEY, pod_req.h)
 *   e PID START STATUS AT_MS      (an exit recorded, not claimed yet:
 *                                  pod_adopt_each_exit; its process's
 *                                  offer, above, names it by PID START)
 * Not thread-safe; blocks on nothing but the memfd's writes.
 */
#ifndef TANK_DMN_HANDOVER_H
#define TANK_DMN_HANDOVER_H

#include <stdint.h>

#include "common/tank_err.h"
#include "pod/pod_adopt.h"
#include "pod/pod_mgr.h"

#define DMN_HANDOVER_ENV "TANK_HANDOVER_FD"

typedef struct dmn_handover {
	int listen_fd;           /* -1: none */
	/* The web side's listening socket (obs_http_listen_fd), -1: none:
	 * kept open across the exec so that clients connecting meanwhile
	 * wait in its backlog instead of being refused. */
	int http_fd;
	int64_t started_at;      /* ms since the epoch, the pid's first start */
	uint32_t reexecs;        /* reexecs so far (the new image adds one) */
	uint32_t lives;          /* restarts by the keeper before this pid */
	uint64_t adopted;        /* adoptions so far */
} dmn_handover_t;

/* Writes the handover (h and pods' processes), keeps keep_fd (the
 * keeper's socket, -1: none) open too, and execs exe with argv and the
 * environment.  Returns only on failure: a negative errno with err
 * saying which step, every fd's close-on-exec restored, the memfd gone;
 * the daemon goes on as before. */
int dmn_handover_exec(const dmn_handover_t *h, pod_mgr_t *pods, pod_adopt_t *adopt, int keep_fd,
		      const char *exe, char *const *argv, tank_error_t *err);

/* Reads the handover named by the environment, if any, and removes the
 * variable: 0 when there is none (h untouched), 1 when read (h filled,
 * every process offered to a; the listening socket's fd in h), or a
 * negative errno with err (whatever it held is closed). */
int dmn_handover_read(dmn_handover_t *h, pod_adopt_t *a, tank_error_t *err);

#endif
