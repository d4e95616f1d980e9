/*
 * sup — OTP supervisors on the actor runtime (runtime/rt.h).
 *
 * A supervisor is an actor that traps exits, starts its children from
 * child specs, restarts them by a strategy when they die, gives up when
 * they die too often, and stops them in reverse start order.  The model is
 * Erlang/OTP's `supervisor`; docs/supervisor.md lists the differences.
 *
 * Threading.  Like the runtime: one thread, nothing here blocks.  Every
 * "synchronous" call below (sup_start_child, sup_which_children, …) runs
 * its work at once on the caller's stack and returns; what has to wait for
 * another actor (a child's death) completes later through messages.
 *
 * Calling context.  The calls may be made from any actor, from outside any
 * actor (main, tests), and re-entrantly from inside a child's init while
 * the supervisor is starting children.  A start function always runs on
 * the caller's stack.  The `start_link` form is told the supervisor's pid
 * and spawns the child linked straight to it (sup_spawn_link, i.e.
 * rt_spawn_link_to), so there is no moment at which a running child is
 * linked to somebody else or to nobody.  The older `start` form links to
 * rt_self(), so it can only be used by the supervisor itself: a sup_* call
 * from another caller on a child that only has `start` fails with -EINVAL.
 *
 * Errors.  0 or a negative errno:
 *   -ESRCH      `sup` is not a live supervisor
 *   -EINVAL     bad flags or spec, or a call that does not fit the strategy
 *   -ENOENT     no child with that id / pid
 *   -EEXIST     a child with that id already exists
 *   -EBUSY      the child is running or being started (restart/delete)
 *   -ESHUTDOWN  the supervisor is shutting down
 *   -ENOMEM
 *   or the error a child's start function returned.
 */
#ifndef TANK_SUP_H
#define TANK_SUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/rt.h"

#define SUP_ID_MAX 63   /* longest child id, bytes */

enum sup_strategy {
	SUP_ONE_FOR_ONE = 0,     /* restart the dead child only */
	SUP_ONE_FOR_ALL,         /* stop all others (reverse), start all */
	SUP_REST_FOR_ONE,        /* stop the later ones (reverse), start from it */
	SUP_SIMPLE_ONE_FOR_ONE,  /* one template, dynamic children only */
};

enum sup_auto_shutdown {
	SUP_AUTO_NEVER = 0,
	SUP_AUTO_ANY_SIGNIFICANT,  /* a significant child ended by itself */
	SUP_AUTO_ALL_SIGNIFICANT,  /* every significant child has ended */
};

enum sup_restart {
	SUP_PERMANENT = 0,  /* always restarted */
	SUP_TRANSIENT,      /* restarted unless it ended normal or shutdown */
	SUP_TEMPORARY,      /* never restarted; its spec goes when it ends */
};

enum sup_child_type { SUP_WORKER = 0, SUP_SUPERVISOR };

/* sup_spec_t.shutdown: a positive number of milliseconds (exit `shutdown`,
 * then `kill` when they run out), or one of these. */
#define SUP_SHUTDOWN_DEFAULT 0      /* OTP's: 5000 ms for workers, infinity
				       for supervisors */
#define SUP_BRUTAL_KILL (-1)        /* exit `kill` at once */
#define SUP_INFINITY (-2)           /* exit `shutdown` and wait forever */
#define SUP_DEFAULT_WORKER_SHUTDOWN_MS 5000

/* The detail of the RT_SHUTDOWN reason a supervisor exits with when it
 * gives up by itself.  When its parent (or sup_stop) told it to stop, it
 * exits with the reason it was given. */
enum sup_exit_detail {
	SUP_EXIT_REQUESTED = 0,       /* sup_stop() */
	SUP_EXIT_MAX_INTENSITY = 1,   /* OTP's reached_max_restart_intensity */
	SUP_EXIT_AUTO_SHUTDOWN = 2,   /* auto_shutdown on significant children */
};

typedef struct sup_flags {
	uint32_t strategy;       /* enum sup_strategy */
	int32_t intensity;       /* restarts allowed per period, >= 0 */
	uint32_t period_ms;      /* 0 means the default, 5000 */
	uint32_t auto_shutdown;  /* enum sup_auto_shutdown */
} sup_flags_t;

/* OTP's defaults; sup_start_link(…, NULL, …) uses them too. */
#define SUP_FLAGS_DEFAULT { SUP_ONE_FOR_ONE, 1, 5000, SUP_AUTO_NEVER }

/* Starts one child, the preferred form.  Runs on the caller's stack (the
 * supervisor itself, or the caller of a sup_* function); `sup` is the
 * supervisor the child is for.  It must spawn the child linked to `sup`
 * with sup_spawn_link(rt, sup, …) (a supervisor child: sup_start_link_to(
 * rt, sup, …)), set *out to its pid and return 0; or return a negative
 * error (nothing was spawned).  Returning 0 with *out = RT_NOPID is OTP's
 * `ignore`: no process runs; the spec is kept (restart_child may try
 * again), except a temporary child's, which is dropped as OTP does.  `arg` is the spec's,
 * `extra` the dynamic child's (NULL for static children). */
typedef int (*sup_start_link_fn)(rt_t *rt, rt_pid_t sup, void *arg,
				 void *extra, rt_pid_t *out);

/* Starts one child, the older form: as sup_start_link_fn but the child is
 * linked to rt_self() with rt_spawn_link (a supervisor child: with
 * sup_start_link), which is the supervisor only when the supervisor
 * starts the child itself (at its start, on restarts).  A child with only
 * this form cannot be started by another caller's sup_* call (-EINVAL). */
typedef int (*sup_start_fn)(rt_t *rt, void *arg, void *extra, rt_pid_t *out);

typedef struct sup_spec {
	const char *id;        /* unique per supervisor, copied; for the
				  simple_one_for_one template it may be NULL */
	sup_start_fn start;    /* exactly one of start and start_link */
	void *arg;             /* borrowed: must outlive the child spec, i.e.
				  stay valid while the supervisor may restart
				  the child */
	uint32_t restart;      /* enum sup_restart */
	int32_t shutdown;      /* ms, SUP_BRUTAL_KILL, SUP_INFINITY, or
				  SUP_SHUTDOWN_DEFAULT */
	uint32_t type;         /* enum sup_child_type */
	bool significant;      /* needs auto_shutdown != never and a
				  transient or temporary child */
	/* simple_one_for_one only: frees a dynamic child's `extra` once the
	 * child is gone for good (may be NULL: extra stays the caller's). */
	void (*extra_free)(void *extra);
	sup_start_link_fn start_link;   /* preferred over start, see above */
} sup_spec_t;

typedef struct sup_child_info {
	char id[SUP_ID_MAX + 1];  /* "" for dynamic children */
	rt_pid_t pid;             /* RT_NOPID when not running */
	uint32_t type;            /* enum sup_child_type */
	bool restarting;          /* a failed restart waits to be retried */
} sup_child_info_t;

typedef struct sup_counts {
	size_t specs;        /* child specs (1 for simple_one_for_one) */
	size_t active;       /* children with a live process */
	size_t supervisors;  /* specs (or dynamic children) of each type, */
	size_t workers;      /*   running or not */
} sup_counts_t;

/* --- starting and stopping a supervisor -------------------------------- */

/* Spawns a supervisor linked to the caller (rt_self(), or nobody outside
 * an actor) and starts its children in spec order before returning.
 * `flags` (NULL: SUP_FLAGS_DEFAULT) and `specs[0..n)` are copied, except
 * each spec's arg.  simple_one_for_one takes exactly one spec, the
 * template, and starts no child.  On success *out (may be NULL) gets the
 * supervisor's pid.
 *
 * If a child's start fails, the ones already started are stopped in
 * reverse order and the error is returned: *out is not set and the caller
 * is not linked to anything.  That stop is asynchronous (children may take
 * their shutdown time): a detached rollback actor, invisible to the API,
 * finishes it and then disappears. */
int sup_start_link(rt_t *rt, const sup_flags_t *flags, const sup_spec_t *specs,
		   size_t n, rt_pid_t *out);

/* sup_start_link, but the new supervisor is linked to `parent`, any live
 * actor, instead of the caller (rt_spawn_link_to): what a supervisor
 * child's sup_start_link_fn calls with the `sup` it is given.  -ESRCH if
 * parent is dead. */
int sup_start_link_to(rt_t *rt, rt_pid_t parent, const sup_flags_t *flags,
		      const sup_spec_t *specs, size_t n, rt_pid_t *out);

/* For start functions: spawns behaviour `b` linked to supervisor `sup`
 * before its init runs (rt_spawn_link_to).  Errors as rt_spawn_link_to. */
int sup_spawn_link(rt_t *rt, rt_pid_t sup, const rt_behaviour_t *b,
		   void *arg, rt_pid_t *out);

/* Called once when the root supervisor of sup_start_root exits. */
typedef void (*sup_exit_fn)(rt_t *rt, rt_pid_t sup, rt_reason_t reason,
			    void *ctx);

/* Starts a root supervisor under a small keeper actor that calls
 * on_exit(rt, root, reason, ctx) when the root exits (for example to
 * rt_stop() the loop), then ends.  *out gets the root's pid: stop the tree
 * with sup_stop(rt, root).  Errors as sup_start_link; on error on_exit is
 * never called. */
int sup_start_root(rt_t *rt, const sup_flags_t *flags, const sup_spec_t *specs,
		   size_t n, sup_exit_fn on_exit, void *ctx, rt_pid_t *out);

/* Asks `sup` to stop its children (reverse order; simple_one_for_one: all
 * at once) and then exit with reason shutdown.  Asynchronous: monitor the
 * supervisor to learn when it is done.  A supervisor that is somebody's
 * permanent child is restarted by its parent: use sup_terminate_child on
 * the parent for that.  An exit signal from the parent, or rt_exit() from
 * outside any actor, does the same with the signal's reason. */
int sup_stop(rt_t *rt, rt_pid_t sup);

/* --- children ----------------------------------------------------------- */

/* Adds a child spec at the end of the start order and starts the child
 * (not for simple_one_for_one: -EINVAL).  If the start fails the spec is
 * not kept.  *out (may be NULL) gets the pid, RT_NOPID for `ignore`. */
int sup_start_child(rt_t *rt, rt_pid_t sup, const sup_spec_t *spec,
		    rt_pid_t *out);
/* simple_one_for_one: starts a child from the template with `extra`.  On
 * success the supervisor owns `extra` (template extra_free frees it when
 * the child is gone for good; at once on `ignore`); on error it stays the
 * caller's.  O(1) amortised. */
int sup_start_dynamic(rt_t *rt, rt_pid_t sup, void *extra, rt_pid_t *out);

/* Stops a child the way its spec says, without restarting it.  Returns
 * once the stop has begun: the child is gone when its EXIT reaches the
 * supervisor (monitor its pid first to be told).  A static child keeps
 * its spec (restart it with sup_restart_child); a temporary or dynamic
 * child is removed.  0 also when the child was not running. */
int sup_terminate_child(rt_t *rt, rt_pid_t sup, const char *id);
/* The same by pid; the only way for dynamic children.  -ENOENT if `pid`
 * is not a running child of `sup`. */
int sup_terminate_pid(rt_t *rt, rt_pid_t sup, rt_pid_t pid);
/* Starts a stopped static child again; -EBUSY if it runs (or is being
 * restarted by its strategy).  OTP's terminate_child returns once the
 * child is gone, so restart_child right after it works; ours cannot
 * block (a child that traps exits takes its time), so a restart_child of
 * a child that terminate_child is stopping is queued: it returns 0 with
 * *out = RT_NOPID, and the child starts as soon as the old one is gone
 * (sup_child_pid gives its pid then; a start that fails leaves it down).
 * Never two at once.  A temporary child's spec goes with its stop:
 * -EBUSY while stopping, -ENOENT after. */
int sup_restart_child(rt_t *rt, rt_pid_t sup, const char *id, rt_pid_t *out);
/* Forgets a stopped static child's spec; -EBUSY if it runs.  Of a child
 * terminate_child is stopping: queued, forgotten once it is gone (and a
 * queued restart is off); returns 0. */
int sup_delete_child(rt_t *rt, rt_pid_t sup, const char *id);
/* The pid of child `id` (RT_NOPID when not running). */
int sup_child_pid(rt_t *rt, rt_pid_t sup, const char *id, rt_pid_t *out);

/* Fills out[0..min(cap, total)) in start order and sets *total (may be
 * NULL) to the number of children.  O(children). */
int sup_which_children(rt_t *rt, rt_pid_t sup, sup_child_info_t *out,
		       size_t cap, size_t *total);
int sup_count_children(rt_t *rt, rt_pid_t sup, sup_counts_t *out);

/* Work done so far, for tests and benchmarks: a count that grows with the
 * work, not with time, so a test can catch an algorithm that went
 * quadratic without a timed assertion. */
typedef struct sup_stats {
	/* Child records visited by the supervisor's own walks over its
	 * children (strategies, sequences, shutdown; not the calls below
	 * that report every child).  Start, a one_for_all or rest_for_one
	 * restart, and stop each add O(children). */
	uint64_t walk_steps;
} sup_stats_t;

int sup_stats(rt_t *rt, rt_pid_t sup, sup_stats_t *out);

#endif
