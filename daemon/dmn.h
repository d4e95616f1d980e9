/*
 * dmn — tankd as a library: the supervision tree, signals and the drain.
 *
 * A dmn_t is one daemon on one data dir:
 *
 *   root supervisor (one_for_one, 3 restarts in 10 s)
 *   ├── store        attaches the store's group commit to the loop, and
 *   │                flushes it when the tree stops
 *   ├── reconciler   rc_loop with the pod and container managers; its
 *   │                runner actors are its own temporary children
 *   └── api          the msgpack-RPC server (api_server + api_methods)
 *
 * The store and the reconciler's tracking (pod_mgr_t) are opened by
 * dmn_open and outlive the tree, so a reconciler restarted by the root
 * supervisor picks up where the old one left off.
 *
 * Lifecycle: dmn_open → dmn_run (returns when stopped) → dmn_close.
 * cmd/tankd.c turns flags into a dmn_opts_t and nothing more; every
 * decision lives here so that tests reach it (tests/daemon/).
 *
 * Live re-adoption (DESIGN.md §11): with a keeper (keeper/kp_keeper.h:
 * TANK_KEEPER_FD in the environment) every container's pipes are kept
 * there too, and a tankd started after one killed -9 gets them back with
 * the exits the keeper reaped meanwhile, and adopts the containers
 * instead of restarting them; a reexec (dmn_reexec) hands everything to
 * the next image of the same pid.  docs/operations.md says what survives
 * what.
 *
 * The drain (dmn_stop, SIGTERM, SIGINT): the socket stops accepting (the
 * api child is terminated and its socket file removed), every container
 * is stopped the way its pod says (stop signal, grace, SIGKILL), then the
 * tree stops in reverse order and the store is flushed.  Desired state is
 * untouched: the next tankd starts the pods again.  If containers are
 * still stopping when the drain deadline passes (opts.drain_ms, default
 * 60 s), the tree is stopped regardless: a runner that dies kills its
 * container's processes (SIGKILL to its cgroup or process group), so
 * nothing is left running either way; the deadline only bounds how long
 * a pod's grace is honoured.  A second dmn_stop (a second signal) stops at
 * once, without waiting for the tree's shutdown timeouts.
 *
 * Threading: everything runs on the thread that calls dmn_open and
 * dmn_run; nothing here is thread-safe.  One dmn_t per process (the
 * runtime owns SIGCHLD, see rt_new).  Nothing here calls exit() or
 * abort(): failures are values, with a message in the tank_error_t.
 */
#ifndef TANK_DMN_H
#define TANK_DMN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/tank_err.h"
#include "pod/pod_launch.h"

#define DMN_VERSION "0.1.0"

#define DMN_RESYNC_DEFAULT_MS 5000u
#define DMN_NUDGE_DEFAULT_MS 100u
#define DMN_DRAIN_DEFAULT_MS 60000u

/* Exit statuses, as s6 spells them: a supervisor of tankd restarts it
 * after a temporary failure and gives up after a permanent one. */
#define DMN_EXIT_OK 0
#define DMN_EXIT_PERMANENT 100
#define DMN_EXIT_TEMPORARY 111

typedef enum dmn_cgroups {
	DMN_CGROUPS_AUTO = 0,   /* probe: v2 if it has the controllers, else
				 * v1, else none (limits are then refused) */
	DMN_CGROUPS_OFF,        /* never touch cgroupfs */
} dmn_cgroups_t;

typedef enum dmn_level {
	DMN_LOG_INFO = 0,
	DMN_LOG_WARNING,
	DMN_LOG_FATAL,
} dmn_level_t;

/* "info", "warning", "fatal". */
const char *dmn_level_name(dmn_level_t level);

typedef struct dmn_opts {
	/* Required: state, logs and (by default) the socket.  Copied. */
	const char *data_dir;
	/* NULL or "": DATA_DIR/tank.sock.  Copied. */
	const char *socket_path;
	/* NULL or "": DATA_DIR/logs (container output).  Copied. */
	const char *log_dir;
	/* Socket mode 0660 and this group, whose members may call; without
	 * it the socket is 0600. */
	bool has_socket_group;
	gid_t socket_group;
	dmn_cgroups_t cgroups;
	/* Name of tank's group under each cgroup hierarchy.  NULL or "":
	 * "tank-XXXXXXXX" from a hash of data_dir, so two daemons on two
	 * data dirs never share groups and a restarted one finds its
	 * predecessor's.  Copied. */
	const char *cgroup_root;
	/* Delegation (pod_cgroup_delegate): AUTO places the groups below
	 * tankd's own cgroup when that group is marked delegated (systemd's
	 * Delegate=yes), YES whenever tankd is not in the root group, NO
	 * never (the hierarchy's root, as before). */
	enum { DMN_DELEGATE_AUTO = 0, DMN_DELEGATE_YES, DMN_DELEGATE_NO } cgroup_delegate;
	uint64_t resync_ms;     /* full reconcile period; 0: 5 s */
	uint64_t nudge_ms;      /* nudge debounce; 0: 100 ms */
	uint64_t drain_ms;      /* drain deadline; 0: 60 s */
	const char *version;    /* `version` reports it; NULL: DMN_VERSION.
				 * Borrowed: must outlive the dmn_t. */
	/* Diagnostics.  With `log` set every line goes to it (msg borrowed
	 * for the call, no newline); otherwise "tankd: LEVEL: msg\n" goes to
	 * log_file (NULL: stderr).  Both borrowed; must outlive the dmn_t. */
	void (*log)(void *ctx, dmn_level_t level, const char *msg);
	void *log_ctx;
	FILE *log_file;
	/* Test hook: starts a container process; NULL = pod_launch.  Same
	 * contract as pod_launch (pod_launch.h). */
	int (*launch)(const pod_launch_opts_t *o, pod_proc_t *out, tank_error_t *err);
	/* Test hook: the store's st_options_t.commit_gate (called on the
	 * store's thread before each async commit, an apply's: a test holds
	 * the commit there).  NULL: none. */
	void (*store_commit_gate)(void *ctx);
	void *store_commit_gate_ctx;
	/* The kinds this daemon serves (kinds/kind.h), NULL-terminated, the
	 * Pod kind first; NULL: the shipped list, tank_kinds.  A test build
	 * of tankd adds its own kinds here. */
	const struct kind *const *kinds;
	/* The argv tankd was started with (borrowed, must outlive the
	 * dmn_t): a reexec (dmn_reexec) execs the same binary with it.
	 * NULL: no reexec. */
	char *const *argv;
	/* The web side (obs/obs_http.h): "HOST:PORT" to serve /metrics,
	 * /healthz, /events and the live page on; NULL or "": none (nothing
	 * of it exists then).  Refused unless loopback or http_allow_remote.
	 * Copied. */
	const char *http_addr;
	bool http_allow_remote;
	/* Speak the service manager's notification protocol (sd_notify:
	 * READY=1, STATUS=, WATCHDOG=1, STOPPING=1; obs/obs_notify.h).
	 * tankd sets it when NOTIFY_SOCKET is set. */
	bool notify;
	/* s6's readiness notification (notification-fd): a newline is
	 * written to this fd once the first pass is done, and it is closed.
	 * 0: none. */
	int ready_fd;
} dmn_opts_t;

typedef struct dmn dmn_t;

/*
 * Process-wide set-up a daemon wants before dmn_open, kept apart from it
 * because it changes the whole process (an embedder or a test may not
 * want it):
 *   - become a child subreaper, so what a container's processes leave
 *     behind is re-parented to us and reaped by the runtime, not by init;
 *   - ignore SIGPIPE (a client that hangs up is an EPIPE, not a death);
 *   - raise RLIMIT_NOFILE's soft limit to the hard one (each container
 *     holds a few fds), as s6-svscan and systemd do;
 *   - reserve the launcher's slot fds while the lowest fds are free
 *     (docs/launcher.md);
 *   - turn glibc's fast bins off (M_MXFAST 0): small blocks still go
 *     through its per-thread cache, and no allocation of 1 KiB or more
 *     stops to consolidate thousands of freed ones first.
 * Each step is best effort: the daemon works without it.  Failures are
 * logged as warnings through opts' logger (opts may be NULL: stderr).
 * Never blocks.
 */
void dmn_process_setup(const dmn_opts_t *opts);

/*
 * Opens the daemon: opens the store (takes DATA_DIR/lock), probes
 * cgroups, creates the runtime and starts the supervision tree, which
 * binds the socket.  Blocks on file I/O (the store's open).  opts is
 * borrowed for the call except where marked above.
 *
 * On success *out is the caller's, to be released with dmn_close; the
 * tree runs once dmn_run is called.  On failure nothing is left behind
 * (no lock, no socket file, no actor) and err says what failed, naming
 * the data dir or the socket:
 *   TANK_EINVALID     opts: a required field is missing ("data_dir:
 *                     required")
 *   -ENAMETOOLONG     a derived path does not fit
 *   TANK_ELOCKED      "unable to open the store in DIR: data dir DIR is
 *                     in use by pid N"
 *   TANK_ESCHEMA, TANK_ECORRUPT, negative errno   from the store's open
 *   -EADDRINUSE       "unable to serve PATH: socket PATH is in use"
 *   -EEXIST, bind/listen errors    from the socket
 *   -ENOMEM, -EBUSY   out of memory, or another runtime exists in the
 *                     process (one daemon per process)
 */
int dmn_open(const dmn_opts_t *opts, dmn_t **out, tank_error_t *err);

/*
 * Runs the daemon until it is stopped (dmn_stop, SIGTERM, SIGINT) or the
 * supervision tree gives up.  SIGTERM and SIGINT are watched from the
 * start of dmn_run until dmn_close begins (one that arrives in between,
 * when the loop no longer runs, is ignored; during dmn_close their
 * default action applies again: the store is durable at every commit).
 * Returns the exit status: DMN_EXIT_OK after
 * a requested stop (the drain deadline forcing it included),
 * DMN_EXIT_TEMPORARY when the tree gave up (its restart intensity was
 * exceeded).  Call at most once; a second call returns the same status at
 * once.
 */
int dmn_run(dmn_t *d);

/*
 * The drain (see the top of this file).  The first call starts it and
 * returns at once; dmn_run returns when it is done, or when the drain
 * deadline has passed and the tree is stopped regardless.  A second call
 * stops at once.  Callable on the loop's thread at any time between
 * dmn_open and dmn_close: from a callback during dmn_run, or before it
 * (dmn_run then only drains).
 */
void dmn_stop(dmn_t *d);

/*
 * Re-executes tankd in place (`tankctl daemon reexec`, SIGUSR2): the same
 * pid, its containers untouched, their log pipes and the listening socket
 * kept open across the exec, the status committed first; the next image
 * adopts every container (daemon/dmn_handover.h, pod/pod_adopt.h).
 * Clients see a pause: connections made meanwhile wait in the socket's
 * backlog; open ones are closed (a subscriber reconnects).  Deferred to
 * the next loop turn (a reply to the caller goes out first).  0, or
 * TANK_EUNSUPPORTED (no argv in the opts), -EBUSY (stopping).  A failed
 * exec is logged and the daemon goes on.
 */
int dmn_reexec(dmn_t *d);

/* True once dmn_stop was called (or a stop signal arrived). */
bool dmn_stopping(const dmn_t *d);

/* The address the web side serves on ("127.0.0.1:9180"), or NULL
 * without one (borrowed, lives as long as d). */
const char *dmn_http_addr(const dmn_t *d);

/* The socket path in use (borrowed, lives as long as d). */
const char *dmn_socket_path(const dmn_t *d);

/* Number of container processes the daemon runs now. */
size_t dmn_nrunning(const dmn_t *d);

/*
 * Tears the daemon down: stops what still runs (without draining: call
 * dmn_stop and dmn_run first for a clean stop; a runner that dies kills
 * its container), reaps the processes so killed (every child of the
 * process, as the runtime does), removes the containers' cgroups and the
 * cgroup root once empty, flushes and closes the store, releases the
 * lock.  Blocks on the store's final flush and fsync, and for at most 2 s
 * on killed processes that do not die (one that escaped the kill).  A failed final flush is logged as a warning (the lost changes
 * are observed state, which the next tankd observes again).  NULL is a
 * no-op.
 */
void dmn_close(dmn_t *d);

/* The exit status for a dmn_open error: DMN_EXIT_TEMPORARY for what may
 * pass by itself (the data dir or the socket in use, out of memory or
 * descriptors), DMN_EXIT_PERMANENT for the rest (bad options, a store of
 * a newer schema). */
int dmn_exit_status(int err);

#endif
