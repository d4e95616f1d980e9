/*
 * pod_host — what an apply can check of a pod against the host that will
 * run it, before storing it.
 *
 * pod_spec validates what a manifest says (tankctl runs it too, on any
 * machine); this checks what the paths and names in it mean on the host
 * where tankd runs them, so that a mistake is refused at apply, naming
 * the field, instead of being found by a crash loop:
 *
 *   - isolation.rootfs is a directory;
 *   - each mounted volume's host_path exists;
 *   - without a rootfs, each mount point exists on the host (the sandbox
 *     creates mount points inside a rootfs only); with one, a mount point
 *     absent from it can be made (its nearest existing ancestor is a
 *     directory, on a file system that is not read-only);
 *   - command[0] and each exec probe's exec[0] name an executable regular
 *     file, found in the container's PATH (its env's, else the launcher's
 *     default) when it has no '/';
 *   - working_dir is a directory;
 *   - user's and group's names exist in the host's passwd/group (numeric
 *     ids need no entry; names are resolved on the host, as the launcher
 *     does);
 *   - a pod with an http probe can have it run: libcurl loads (the check
 *     loads it, common/tank_dl.h; a pod without one never does).
 *
 * Paths are looked up as the container will see them: inside the rootfs
 * when the pod has one (openat2 RESOLVE_IN_ROOT, so its absolute symlinks
 * stay inside it), else on the host.  Only what is certain is refused: a
 * path under a mount point (a volume, and /proc or /dev of a rootfs) is
 * not looked at, nor a PATH with a relative element, nor anything when
 * the kernel cannot resolve in a root (openat2, Linux >= 5.6).  What is
 * checked can still change before the start (a file removed later): that
 * is then a failed start, reported in the container's log and status.
 *
 * Blocks on the file system (stat-like lookups, no reads) and on NSS for
 * user names, as the launcher does at each start.  Keeps nothing.
 */
#ifndef TANK_POD_HOST_H
#define TANK_POD_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "common/kit_errors.h"
#include "common/tank_err.h"
#include "pod/pod_spec.h"

/* Appends each problem of s (borrowed) to errs as validation does,
 * "<pod>: <path>: <problem>", e.g.
 *   web: containers[0].command[0]: /nope: not found
 *   web: volumes[0].host_path: /srv/data: No such file or directory
 * Returns the number of problems found (0: nothing to refuse). */
size_t pod_host_check(const pod_spec_t *s, kit_errors_t *errs);

/*
 * Host limits: what tankd needs to hold its containers, checked (and
 * raised where tankd may) before an apply is stored, so that an apply is
 * refused whole instead of failing starts half-way with EMFILE or EAGAIN.
 *
 *   - RLIMIT_NOFILE: POD_HOST_FDS_PER_CONTAINER for each live container
 *     plus POD_HOST_FD_RESERVE for tankd itself, plus the pidfds held now
 *     (held_fds: one per adopted process that no keeper reaps any more,
 *     pod_adopt.h "Orphans"; counted only while held, they are rare).  Raised at apply time to
 *     what is needed (rounded up to 4,096), the hard limit too when the
 *     soft cannot reach it (root, CAP_SYS_RESOURCE), up to fs.nr_open.
 *   - kernel.pid_max: the threads on the machine now (/proc/loadavg) plus
 *     the new containers plus POD_HOST_PID_RESERVE for everything else.
 *     Raised by writing /proc/sys/kernel/pid_max (root, as systemd does at
 *     boot), up to the kernel's 4,194,304.
 *   - kernel.threads-max: the same count; checked only (it is sized from
 *     the machine's memory).
 *   - pids.max of the pods' cgroup and every ancestor (v2, or the v1 pids
 *     hierarchy): the new containers must fit under the tightest
 *     (pids.max - pids.current).  Checked only: it is the administrator's
 *     (TasksMax= under systemd).
 * A refusal says what would be needed, the limit, how many containers it
 * can hold, and how to raise it.  pod_host_plan is the decision alone
 * (no I/O: unit-tested with any numbers); pod_host_fit reads the host,
 * plans, and raises.
 */

/* Descriptors tankd holds for one live container: the read ends of its
 * stdout and stderr pipes.  Its log file is open only while it writes,
 * and at most POD_LOG_OPEN_MAX log files are open at once (pod_log.h):
 * those are in the reserve (docs/bench.md "Descriptors"). */
#define POD_HOST_FDS_PER_CONTAINER 2
/* Descriptors tankd keeps for itself: store, socket, clients, signals,
 * the open log files. */
#define POD_HOST_FD_RESERVE 256
/* Client connections (the socket's, api_server.h): their share of the
 * reserve.  They may also take what the limit holds beyond everything
 * counted (the containers' two each, the reserve, held_fds), never the
 * containers' own: at 9,700 containers and a limit of 20,000, 900 clients
 * that connected and stalled took the last descriptors, and a container
 * killed meanwhile could not start again (no pipe) while `tankctl`
 * waited in the socket's backlog (docs/bench.md, issue 38 round 11). */
#define POD_HOST_CONN_FDS 64
/* Connections served whatever the count says (a limit lowered under
 * tankd): an operator can still connect and delete. */
#define POD_HOST_CONN_MIN 8
/* Pids left for the rest of the machine. */
#define POD_HOST_PID_RESERVE 512
/* The kernel's PID_MAX_LIMIT on 64-bit. */
#define POD_HOST_PID_MAX_LIMIT 4194304u

typedef struct pod_host_limits {
	uint64_t nofile_cur, nofile_max; /* RLIMIT_NOFILE; UINT64_MAX: unlimited */
	uint64_t nr_open;                /* fs.nr_open; 0: unknown */
	uint64_t pid_max, threads_max;   /* 0: unknown */
	uint64_t tasks;                  /* threads on the machine now */
	/* The tightest pids.max over the pods' cgroup and its ancestors
	 * (cg_max 0: none), its pids.current and where it is. */
	uint64_t cg_max, cg_cur;
	char cg_path[256];
	/* Descriptors tankd holds now beyond its containers' and its
	 * reserve: pidfds of orphans (pod_adopt_pidfds).  Not read by
	 * pod_host_read: the caller's. */
	uint64_t held_fds;
} pod_host_limits_t;

typedef struct pod_host_plan {
	uint64_t nofile_cur, nofile_max; /* new RLIMIT_NOFILE; 0: leave it */
	uint64_t pid_max;                /* write kernel.pid_max; 0: leave it */
} pod_host_plan_t;

/* Decides, for live containers after the apply (their descriptors) of
 * which new_procs are new processes, what to raise in *plan (zeroed
 * first), or refuses: TANK_ELIMIT with the figures in e.  Does no I/O. */
int pod_host_plan(const pod_host_limits_t *l, size_t live, size_t new_procs,
		  pod_host_plan_t *plan, tank_error_t *e);

/* How many client connections the descriptors leave room for, with a
 * soft RLIMIT_NOFILE of nofile_cur (UINT64_MAX: unlimited), live
 * containers and held_fds as above: POD_HOST_CONN_FDS plus what the
 * limit holds beyond 2 x live + held_fds + POD_HOST_FD_RESERVE, at least
 * POD_HOST_CONN_MIN.  No I/O.  pod_host_conn_room reads the limit now
 * (one getrlimit): the daemon's api_server_opts_t.conn_room. */
size_t pod_host_conn_room_plan(uint64_t nofile_cur, size_t live, size_t held_fds);
size_t pod_host_conn_room(size_t live, size_t held_fds);

/* Reads the limits above; pids_group is the pods' cgroup directory in
 * the pids (v1) or unified (v2) hierarchy, NULL or "" for none (it need
 * not exist yet: its ancestors count). */
void pod_host_read(pod_host_limits_t *l, const char *pids_group);

/* pod_host_read + pod_host_plan + the raises, held_fds as in
 * pod_host_limits_t.  A raise the kernel refuses (EPERM: not root) is a
 * TANK_ELIMIT refusal naming the limit, how many containers it can hold
 * and how to raise it.  Blocks on /proc reads. */
int pod_host_fit(size_t live, size_t new_procs, size_t held_fds, const char *pids_group,
		 tank_error_t *e);

#endif
