/*
 * rt — tank's actor runtime: Erlang process semantics on one libev loop.
 *
 * An actor is a behaviour (three callbacks) plus a state pointer.  Actors
 * never share memory through the runtime: they exchange messages, which are
 * copied on send (or carry one pointer whose ownership moves with the
 * message, see rt_send_ptr).  Everything runs on the thread that calls
 * rt_run(); no function here is thread-safe and none blocks.
 *
 * Identity.  An rt_pid_t is a generational handle (generation << 32 | slot).
 * When an actor dies its slot's generation is bumped, so every copy of its
 * pid becomes stale at once: sending to it, linking to it or exiting it is
 * a cheap, safe no-op that returns -ESRCH.  Pid 0 (RT_NOPID) is never a live
 * actor.  The same scheme is used for timer references.
 *
 * Errors.  Functions return 0 or a negative errno.  The runtime never calls
 * exit() or abort(); on -ENOMEM the operation did not happen.
 *
 * Lifetimes.  An actor's state belongs to its behaviour: init creates it,
 * terminate frees it.  terminate is called exactly once, at a safe point
 * outside the actor's own handle callback.  A message belongs to the
 * runtime; handle() borrows it for the duration of the call.
 *
 * Scheduling.  Actors with mail are kept in a FIFO run queue (a second one,
 * served first, for RT_PRIO_HIGH actors); each turn an actor handles at
 * most RT_BATCH messages, then goes to the back of the queue.  After
 * RT_BUDGET turns or RT_SLICE_MS, whichever comes first (checked between
 * messages too), the runtime returns to libev so timers, fds and signals
 * are served: a flooded actor cannot starve the others nor the I/O.
 */
#ifndef TANK_RT_H
#define TANK_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef uint64_t rt_pid_t;
typedef uint64_t rt_ref_t;          /* monitor, timer and watch references */
typedef struct rt rt_t;
typedef struct rt_msg rt_msg_t;

#define RT_NOPID ((rt_pid_t)0)
#define RT_BATCH 32                 /* messages per actor per turn */
#define RT_BUDGET 4096              /* actor turns before polling libev */
#define RT_SLICE_MS 5               /* … or this long, whichever comes first */

/* Exit reasons.  Erlang's reasons are terms; here a reason is a kind plus
 * an integer detail (an errno, an exit code, a user code).  RT_KILL is only
 * meaningful as a signal sent with rt_exit(): it cannot be trapped and the
 * victim dies with RT_KILLED, which is what its links then see. */
enum rt_reason_kind {
	RT_NORMAL = 0,   /* finished; does not kill non-trapping links */
	RT_SHUTDOWN,     /* asked to stop by a supervisor or the runtime */
	RT_KILL,         /* untrappable kill signal (rt_exit only) */
	RT_KILLED,       /* died of RT_KILL */
	RT_NOPROC,       /* monitor/link target did not exist */
	RT_ERROR,        /* crashed; detail says why (negative errno or code) */
};

typedef struct rt_reason {
	uint32_t kind;   /* enum rt_reason_kind */
	int32_t detail;
} rt_reason_t;

static inline rt_reason_t rt_reason(uint32_t kind, int32_t detail)
{
	rt_reason_t r = { kind, detail };
	return r;
}
#define RT_R_NORMAL   rt_reason(RT_NORMAL, 0)
#define RT_R_SHUTDOWN rt_reason(RT_SHUTDOWN, 0)
#define RT_R_KILL     rt_reason(RT_KILL, 0)

/* A reason is "normal" in the OTP sense (no restart for transient
 * children, no propagation to non-trapping links) when it is NORMAL or
 * SHUTDOWN. */
bool rt_reason_is_normal(rt_reason_t r);
/* Static text for a reason kind ("normal", "killed", …). */
const char *rt_reason_name(rt_reason_t r);

/* Message types seen by handle(). */
enum rt_msg_type {
	RT_MSG_USER = 0, /* from rt_send / rt_send_ptr / rt_send_after */
	RT_MSG_EXIT,     /* exit signal converted because the actor traps exits */
	RT_MSG_DOWN,     /* a monitored actor died (or never existed: noproc) */
	RT_MSG_FD,       /* a watched fd is ready */
	RT_MSG_CHILD,    /* a watched child process changed state (exited) */
};

struct rt_msg {
	rt_msg_t *next;      /* runtime-owned queue link */
	rt_pid_t from;       /* sender, RT_NOPID for the runtime or outside */
	uint32_t type;       /* enum rt_msg_type */
	uint32_t tag;        /* user tag (RT_MSG_USER, FD, CHILD), else 0 */
	union {
		struct { rt_pid_t from; rt_reason_t reason; } exit;
		struct { rt_ref_t ref; rt_pid_t pid; rt_reason_t reason; } down;
		struct { rt_ref_t ref; int fd; int revents; } fd;
		struct {
			rt_ref_t ref;
			pid_t pid;
			int status;      /* raw wait status */
			int code;        /* exit code, or -1 when signalled */
			int signal;      /* terminating signal, or 0 */
			bool core_dumped;
		} child;
	} u;
	/* Payload of a user message: `len` bytes copied at `data`. */
	size_t len;
	void *data;
	/* Owned pointer of rt_send_ptr: handle() may take it with
	 * rt_msg_take(); otherwise the runtime calls dtor(ptr) after handle()
	 * returns or when the message is dropped undelivered. */
	void *ptr;
	void (*dtor)(void *);
};

/* Takes ownership of msg->ptr (may be NULL); the runtime will not free it. */
void *rt_msg_take(rt_msg_t *msg);

typedef struct rt_behaviour {
	const char *name;  /* for diagnostics */
	/* Creates the actor's state from `arg` (borrowed; copy what you keep).
	 * Runs synchronously inside rt_spawn*, already as the new actor
	 * (rt_self() is its pid) so it may spawn, link, monitor and send.
	 * Returns 0 or a negative errno; on failure the actor never existed,
	 * terminate is not called, and whatever init set up must be undone
	 * by init itself. */
	int (*init)(rt_t *rt, void **state, void *arg);
	/* Handles one message.  May call anything in this API. */
	void (*handle)(rt_t *rt, void *state, rt_msg_t *msg);
	/* Frees the state.  Called once when the actor dies, with the reason.
	 * Must not send to itself; may send to others.  May be NULL. */
	void (*terminate)(rt_t *rt, void *state, rt_reason_t reason);
} rt_behaviour_t;

/* --- runtime ----------------------------------------------------------- */

/* Creates a runtime on a new libev loop.  Installs a SIGCHLD watcher and so
 * owns the reaping of every child of the process (see rt_watch_child).
 * Only one runtime may exist at a time per process for that reason.
 * Returns NULL on allocation failure or if another runtime exists. */
rt_t *rt_new(void);
/* Terminates every actor still alive, newest first, each with reason
 * shutdown and without delivering links or monitors (there is nobody left
 * to tell); then cancels timers and watchers and frees everything. */
void rt_free(rt_t *rt);
/* Runs the loop until rt_stop() is called or nothing is left to do (no
 * runnable actor and no active timer/watcher).  Returns 0. */
int rt_run(rt_t *rt);
/* Makes rt_run() return after the current callback. */
void rt_stop(rt_t *rt);
/* The libev loop, for code that adds its own watchers. */
struct ev_loop *rt_loop(rt_t *rt);
/* Milliseconds on the loop's monotonic clock (ev_now). */
uint64_t rt_now_ms(rt_t *rt);

/* Scheduling priority of the calling actor (call it from init).
 * RT_PRIO_NORMAL is every actor's at spawn.  High-priority actors run
 * before normal ones whenever both are runnable: the API's connections,
 * so that a restart storm filling the run queue with slow turns (a spawn
 * costs a millisecond) cannot keep `ping` waiting behind it.  Give it
 * only to actors whose turns are short.  A normal actor still gets a
 * turn after every RT_PRIO_RUN high turns or RT_SLICE_MS of them that it
 * waited for (counted across loop iterations), and then as long as those
 * took (one turn at least, RT_PRIO_SHARE_MS at most): a flood of
 * high-priority work, even of slow turns, gets half of the time and
 * cannot starve the rest.  Returns 0, or -EINVAL for an unknown priority
 * or outside an actor. */
enum { RT_PRIO_NORMAL = 0, RT_PRIO_HIGH = 1 };
#define RT_PRIO_RUN 16
#define RT_PRIO_SHARE_MS 100        /* the longest share of normal ones */
int rt_set_priority(rt_t *rt, int prio);
/* Tells the runtime that the current turn used up a time slice of its own
 * (a reconciler that ran keys for 5 ms): the turn ends after the message
 * being handled (the rest of the mailbox waits for a later turn) and the
 * drain polls libev right after it instead of running more turns first,
 * so sockets and timers wait for one such message at most.  Cheap. */
void rt_slice_used(rt_t *rt);
/* Number of live actors. */
size_t rt_count(rt_t *rt);

/* --- actors ------------------------------------------------------------ */

/* Spawns an actor.  On success *out (may be NULL) gets its pid.  -ENOMEM,
 * or init's error. */
int rt_spawn(rt_t *rt, const rt_behaviour_t *b, void *arg, rt_pid_t *out);
/* Spawns and links the caller (rt_self()) to the new actor atomically: the
 * link exists before init runs.  If init fails the actor never existed, no
 * exit signal is sent, and init's error is returned.  Outside an actor it
 * is a plain spawn. */
int rt_spawn_link(rt_t *rt, const rt_behaviour_t *b, void *arg, rt_pid_t *out);
/* Spawns and links the new actor to `peer`, any live actor (not only the
 * caller), atomically: the link exists before init runs, so the new actor
 * can never be alive and unlinked.  This is how a supervisor's start
 * function, called on another actor's stack, links a child straight to the
 * supervisor.  -ESRCH if peer is dead or RT_NOPID (nothing is spawned and
 * no exit signal is sent to anyone); otherwise as rt_spawn_link: if init
 * fails the actor never existed, the peer gets no signal, and init's error
 * is returned.  rt_self() plays no part. */
int rt_spawn_link_to(rt_t *rt, rt_pid_t peer, const rt_behaviour_t *b,
		     void *arg, rt_pid_t *out);
/* Spawns and monitors; *ref gets the monitor reference. */
int rt_spawn_monitor(rt_t *rt, const rt_behaviour_t *b, void *arg,
		     rt_pid_t *out, rt_ref_t *ref);

/* The actor whose callback is running, or RT_NOPID outside any actor. */
rt_pid_t rt_self(rt_t *rt);
/* True while `pid` names a live actor. */
bool rt_alive(rt_t *rt, rt_pid_t pid);

/* The state of actor `pid` if it is alive and runs behaviour `b`, else NULL.
 * This is how a module implements synchronous calls on the actors of its
 * own behaviour (a supervisor's start_child, say): the loop is single-
 * threaded, so the state is borrowed safely for the duration of the call.
 * Matching on `b` keeps other modules from reaching into foreign state.
 * The callee must expect to be re-entered from its own callbacks. */
void *rt_state_of(rt_t *rt, rt_pid_t pid, const rt_behaviour_t *b);

/* Sends a copy of buf[0..len) with a tag.  -ESRCH if `to` is dead (the
 * message is dropped), -ENOMEM.  Never blocks; mailboxes are unbounded. */
int rt_send(rt_t *rt, rt_pid_t to, uint32_t tag, const void *buf, size_t len);
/* Sends a pointer whose ownership moves to the receiver (see rt_msg.ptr).
 * On any failure dtor(ptr) has been called before returning (if dtor). */
int rt_send_ptr(rt_t *rt, rt_pid_t to, uint32_t tag, void *ptr,
		void (*dtor)(void *));

/* Ends the calling actor with `reason` once its current callback returns.
 * Outside an actor: -EPERM. */
int rt_exit_self(rt_t *rt, rt_reason_t reason);
/* Sends an exit signal to `pid` from rt_self() (Erlang exit/2):
 *  - RT_KILL: the target dies with RT_KILLED, trapping or not;
 *  - the target traps exits: it gets an RT_MSG_EXIT message;
 *  - RT_NORMAL: ignored by a non-trapping target (unless it is the
 *    caller itself, which then exits normally);
 *  - anything else kills a non-trapping target with that reason.
 * A signal that can end the target (it does not trap, or RT_KILL) is
 * applied at its next turn, ahead of its queued mail; to a trapping
 * target the RT_MSG_EXIT is queued behind every message sent before it,
 * so signals keep their order per sender as in Erlang (a link's exit
 * comes after the dead actor's last messages too).  -ESRCH if the target
 * is dead. */
int rt_exit(rt_t *rt, rt_pid_t pid, rt_reason_t reason);
/* Sets whether the calling actor traps exits; returns the old setting,
 * or -EPERM outside an actor. */
int rt_trap_exit(rt_t *rt, bool on);

/* Links the caller and `pid` (idempotent).  Links and monitors are kept in
 * per-actor sets: linking, unlinking, demonitoring and a peer's death are
 * O(1) expected however many links an actor has (a supervisor with
 * 100,000 children), while an actor with few links pays no more than a
 * small array.  Linking to a dead pid fails with -ESRCH (OTP's noproc)
 * and changes nothing: the caller is not sent an exit signal. */
int rt_link(rt_t *rt, rt_pid_t pid);
int rt_unlink(rt_t *rt, rt_pid_t pid);
/* Monitors `pid`: when it dies the caller gets RT_MSG_DOWN with the ref and
 * the reason.  If it is already dead the DOWN (reason RT_NOPROC) is queued
 * at once; the call still succeeds.  Each call makes a new monitor. */
int rt_monitor(rt_t *rt, rt_pid_t pid, rt_ref_t *ref);
/* Removes a monitor; a DOWN already queued is removed too (as Erlang's
 * demonitor with flush).  -ENOENT if unknown. */
int rt_demonitor(rt_t *rt, rt_ref_t ref);

/* Registered names (copied).  -EEXIST if the name is taken or the actor has
 * one, -ESRCH if pid is dead, -EINVAL for an empty name.  A name is freed
 * when its actor dies. */
int rt_register(rt_t *rt, const char *name, rt_pid_t pid);
int rt_unregister(rt_t *rt, const char *name);
rt_pid_t rt_whereis(rt_t *rt, const char *name);

/* --- timers ------------------------------------------------------------ */

/* Delivers an RT_MSG_USER message (tag, copy of buf) to `to` after `ms`
 * milliseconds, from rt_self().  The timer dies with `to`.  *ref (may be
 * NULL) identifies it for rt_cancel_timer. */
int rt_send_after(rt_t *rt, rt_pid_t to, uint64_t ms, uint32_t tag,
		  const void *buf, size_t len, rt_ref_t *ref);
/* Cancels a timer.  0 if it had not fired: its message will never arrive.
 * -ENOENT if it already fired (its message is in the mailbox or was
 * handled) or was cancelled: Erlang's cancel_timer returning false. */
int rt_cancel_timer(rt_t *rt, rt_ref_t ref);

/* --- fds and child processes ------------------------------------------- */

/* Watches `fd` for EV_READ/EV_WRITE on behalf of `owner`.  Readiness is
 * level-triggered and at most one RT_MSG_FD per watch is in flight: the
 * watch re-arms after the owner has handled the message.  The fd stays the
 * caller's; remove the watch before closing it.  Dies with the owner. */
int rt_watch_fd(rt_t *rt, rt_pid_t owner, int fd, int events, uint32_t tag,
		rt_ref_t *ref);
/* Or'ed into rt_watch_fd's events with EV_READ: fd is the read end of a
 * pipe.  Such an end is never writable, so the watch asks the kernel for
 * writability too: a hang-up, which epoll reports as both, then matches
 * what is registered.  A watch for reading only makes libev re-register
 * the fd (epoll_ctl MOD) at each hang-up, one system call a pipe and an
 * exit (issue 38).  The owner still hears EV_READ only.  Anything but a
 * pipe's read end (a socket is writable at once) must not say it. */
#define RT_FD_PIPE 0x100
int rt_unwatch_fd(rt_t *rt, rt_ref_t ref);
/* The watched fd is a pipe written by the watched child pid (its stdout,
 * say): when it is readable and all its writers are gone (POLLHUP: for a
 * watch made with RT_FD_PIPE, the writability a hang-up brings; for
 * another, one poll(2) at each readiness), the child is said to be ending
 * (rt_child_exiting) before the owner hears of the readiness.  The
 * message comes as before.  -ENOENT for an unknown watch. */
int rt_fd_ends_with_child(rt_t *rt, rt_ref_t ref, pid_t pid);

/* Delivers one RT_MSG_CHILD to `owner` when child process `pid` exits (or
 * is killed).  The runtime reaps all children itself: an exit that happened
 * before this call (even before rt_run) is kept and delivered at once.
 * One watch per pid: -EEXIST.  Dies with the owner (the status of a child
 * reaped later is then discarded). */
int rt_watch_child(rt_t *rt, rt_pid_t owner, pid_t pid, uint32_t tag,
		   rt_ref_t *ref);
int rt_unwatch_child(rt_t *rt, rt_ref_t ref);
/* fn(ctx, pid, status) for each child reaped while nobody watched it (a
 * process a previous image of this one started, say): true takes it,
 * false (or no fn) keeps it for an rt_watch_child to come, as before
 * (within rt_set_orphan_limits' bounds).  Called in the reap, on the
 * loop's thread; fn must not call back into the runtime's reaping.  One
 * hook; NULL removes it. */
void rt_on_unwatched_exit(rt_t *rt, bool (*fn)(void *ctx, pid_t pid, int status), void *ctx);

/* The bounds of the exits kept for a watch to come (reaped while nobody
 * watched them, see rt_watch_child).  At most `max` are kept, each for
 * `keep_ms`.  The set is swept of the exits older than keep_ms when it has
 * doubled since the last sweep; once it is full, at most once every
 * `full_sweep_ms` (a sweep that frees nothing, at each exit, would walk
 * the whole set each time).  An exit reaped while the set is full and no
 * sweep is allowed is not kept: a watch of it never fires.  The defaults
 * (RT_ORPHANS_MAX, RT_ORPHAN_KEEP_MS, RT_ORPHANS_FULL_SWEEP_MS) are what
 * every runtime starts with; tankd keeps them.  Tests lower them, to
 * reach a full set with a few exits instead of 2^18. */
#define RT_ORPHANS_MAX (1u << 18)       /* 24 bytes each, twice in the table */
#define RT_ORPHAN_KEEP_MS 60000u
#define RT_ORPHANS_FULL_SWEEP_MS 1000u
typedef struct rt_orphan_limits {
	uint32_t max;              /* exits kept at most: 1 .. 2^30 */
	uint64_t keep_ms;          /* how long each is kept: > 0 */
	uint64_t full_sweep_ms;    /* a full set is swept at most this often */
} rt_orphan_limits_t;
/* Sets the bounds (copied from *lim), for the exits reaped from now on:
 * those kept already stay until a sweep finds them old, and a set
 * holding more than the new max keeps none more until then.  -EINVAL,
 * the bounds unchanged, when max is 0 or above 2^30 (the sweep doubles
 * it), keep_ms is 0, or a time does not fit in nanoseconds.  Never
 * blocks. */
int rt_set_orphan_limits(rt_t *rt, const rt_orphan_limits_t *lim);

/* Reaping is spaced by its own cost (each reap walks every child of the
 * process in the kernel): a SIGCHLD that comes less than 32 times the last
 * reap's CPU time after it (at most 20 ms) is served by one reap at the
 * end of that gap, with every exit of the meantime.  A SIGCHLD's reap
 * also waits for the actors' turns of its loop iteration (at most 20 ms
 * while turns remain), so that children known to be ending meanwhile
 * are reaped by pid (rt_child_exiting) and the walk finds fewer.  How
 * many reaps ran, and how many SIGCHLDs were put off to a later one (for
 * tests and benchmarks; either pointer may be NULL). */
void rt_reap_stats(rt_t *rt, uint64_t *reaps, uint64_t *put_off);

/* A watched child is known to be ending (its output pipe's writers are
 * gone, rt_fd_ends_with_child: a process's descriptors close just
 * before it becomes a zombie): it is reaped by its pid, at once if it is
 * a zombie already (its exit delivered as with a SIGCHLD; returns 1),
 * else by the next reap before any walk (returns 0; given up after 64
 * reaps that found it running).  A reap about to walk also polls every
 * linked watch for a hang-up, and cuts its walk short (8 children) while
 * others are reaped by pid.  A reap by pid looks at that child
 * only, where waitpid(-1) walks the list of children from its head to
 * the first zombie each time: with thousands of children dying at once
 * that walk was a third of tankd's CPU.  -ENOENT when pid is not a
 * watched child.  Never blocks. */
int rt_child_exiting(rt_t *rt, pid_t pid);
/* Children reaped by their pid so far (rt_child_exiting, and each
 * rt_watch_child's look at its own child), for tests and benchmarks. */
uint64_t rt_reaped_by_pid(rt_t *rt);

/* Decodes a raw wait status into code / signal / core dumped. */
void rt_decode_status(int status, int *code, int *signal, bool *core);

#endif
