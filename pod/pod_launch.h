/*
 * pod_launch — start one container process, stop it, read its exit.
 *
 * pod_launch() is what a runtime actor calls to run a container.  It does
 * all the preparation in the caller (argv/envp arrays, the PATH candidates,
 * the user lookup, the cgroup paths) and then spawns with
 * clone3(CLONE_VM|CLONE_VFORK|CLONE_FILES|CLONE_CLEAR_SIGHAND), plus
 * CLONE_INTO_CGROUP for a v2 group (x86-64; clone(2) without those flags
 * elsewhere, on a kernel that refuses them, or with POD_LAUNCH_NO_CLONE3;
 * docs/launcher.md "clone3"): the child shares our memory and
 * our fd table until it execs, so it only makes async-signal-safe system
 * calls, never allocates, and reports a failure by writing (step, errno)
 * into the parent's stack before _exit(127).  The parent reaps such a
 * failed child itself.
 *
 * Spawn cost does not grow with the caller's fd count.  Copying the fd
 * table at clone and closing the close-on-exec fds at exec is O(open fds):
 * with thousands of pods that dominated a restart storm.  Instead the
 * child's first act is close_range(K, ~0U, CLOSE_RANGE_UNSHARE), which
 * gives it a private table holding only fds [0, K).  Everything the child
 * needs is put there by the parent right before the clone: the launcher
 * reserves POD_LAUNCH_RESERVED_FDS "slot" fds once per process (the
 * lowest free fds >= 3, holding /dev/null while idle, O_CLOEXEC) and
 * dup3()s the stdout/stderr sources and the sandbox's namespace and root
 * fds onto them; after the clone returns (the child has exec'd or failed)
 * it puts /dev/null back.  The child opens the cgroup.procs files itself.
 * On a kernel without CLOSE_RANGE_UNSHARE (< 5.9), or when a slot was
 * closed behind the launcher's back, it falls back to copying the table.
 * The slots and the child's stack (mapped at the first launch, then
 * reused) are the only process-wide state of the launcher, in
 * POD_LAUNCH_SETS sets: up to that many threads launch at once, more
 * wait for a set.  Other threads must not close or dup2 onto fds they do
 * not own (the slots).
 *
 * In the child, in order: its private fd table, all signal dispositions
 * reset to default (after CLONE_CLEAR_SIGHAND only the ignored ones are
 * left to reset: pod_launch_signals_changed) and the mask cleared (at
 * exec), setsid(), cgroup
 * membership (before exec: no window where the process runs unlimited;
 * a v2 group it was created in is not written),
 * setns into the pod's sandbox, stdin from /dev/null (or a given fd) and stdout/stderr
 * onto pipes or the given fds, rlimits, groups/gid/uid, chdir, every fd
 * above 2 closed (or marked close-on-exec on the copying path), execve.
 * The environment is exactly o->envp.
 *
 * The launcher never waits for a container: the caller reaps it (SIGCHLD).
 * Not thread-safe with respect to other threads changing the caller's
 * signal mask or (for a pid-namespaced launch) its pid namespace for
 * children, which pod_launch switches and restores around the clone.
 */
#ifndef TANK_POD_LAUNCH_H
#define TANK_POD_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/tank_err.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_sandbox.h"

/* The PATH searched for a command without '/' when envp has none. */
#define POD_LAUNCH_DEFAULT_PATH \
	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* How a container's stdout/stderr is wired (opts.stdout_mode, …). */
typedef enum pod_stdio {
	POD_STDIO_PIPE = 0,  /* a pipe; the read end is returned in pod_proc_t */
	POD_STDIO_NULL,      /* /dev/null */
	POD_STDIO_FD,        /* the given fd (borrowed, dup'ed into the child) */
} pod_stdio_t;

typedef struct pod_rlimit {
	int resource;          /* RLIMIT_* */
	uint64_t soft, hard;   /* RLIM_INFINITY allowed */
} pod_rlimit_t;

enum pod_launch_flags {
	/* Keep the caller's session and process group (default: setsid, so
	 * pod_proc_kill_all can kill the group when there is no cgroup). */
	POD_LAUNCH_NO_SETSID = 1u << 0,
	/* Clone with clone(2) as on a kernel (< 5.7) or architecture (other
	 * than x86-64) without clone3: the child resets every signal itself
	 * and joins every group by writing cgroup.procs.  For the tests of
	 * that path; the launcher falls back to it on its own otherwise. */
	POD_LAUNCH_NO_CLONE3 = 1u << 1,
};

/* Caller-owned options; every pointer is borrowed for the call only. */
typedef struct pod_launch_opts {
	const char *file;          /* command; searched in PATH iff no '/' */
	char *const *argv;         /* NULL-terminated; NULL = { file, NULL } */
	char *const *envp;         /* NULL-terminated; NULL = empty env */
	const char *cwd;           /* NULL = "/" */
	/* NULL = keep ours; "uid[:gid]" numeric, or "name[:group]" resolved in
	 * the caller from the host's passwd/group before forking.  With a name
	 * and no group: the user's primary group and supplementary groups. */
	const char *user;
	const pod_rlimit_t *rlimits;
	size_t n_rlimits;
	pod_stdio_t stdout_mode, stderr_mode;
	int stdout_fd, stderr_fd;  /* for POD_STDIO_FD */
	/* stdin: /dev/null, unless stdin_from_fd (then stdin_fd, borrowed,
	 * dup'ed into the child: an exec request's input file). */
	bool stdin_from_fd;
	int stdin_fd;
	const pod_cgroup_t *cgroup;   /* NULL = no cgroup */
	const pod_sandbox_t *sandbox; /* NULL = host namespaces */
	unsigned flags;            /* POD_LAUNCH_* */
} pod_launch_opts_t;

typedef struct pod_proc {
	pid_t pid;                 /* host pid; also its pgid unless NO_SETSID */
	uint64_t start_time;       /* /proc/PID/stat field 22 (clock ticks) */
	int stdout_fd, stderr_fd;  /* O_CLOEXEC|O_NONBLOCK read ends, or -1;
	                            * owned by the caller, who closes them */
	bool own_pgrp;             /* pid is a process group leader */
	/* Created in its v2 group by the kernel (clone3 CLONE_INTO_CGROUP):
	 * in it from its first instruction, no cgroup.procs write in the
	 * vfork window.  False: it joined by that write (v1, or clone(2)),
	 * or has no group. */
	bool cloned_into_cgroup;
} pod_proc_t;

/* Starts the process.  On success fills out; the caller owns the pipe fds
 * and must reap out->pid.  On failure nothing is left running, no fd is
 * leaked and err says what failed, e.g. "exec /nope: No such file or
 * directory" (code = -errno of the failing step), "user: unknown user
 * bob" (TANK_EINVALID), "sandbox: join pid namespace: …"
 * (TANK_EUNSUPPORTED or -errno).  Blocks only for the vfork window (until
 * the child has exec'd or failed). */
int pod_launch(const pod_launch_opts_t *o, pod_proc_t *out,
               tank_error_t *err);

/* Slot fds the launcher keeps open for the life of the process, per set,
 * and its sets: as many launches can be in their vfork windows at once
 * (the launcher thread's two, pod_launcher.h, and one of the loop's). */
#define POD_LAUNCH_RESERVED_FDS 10
#define POD_LAUNCH_SETS 3

/* Reserves the slot fds (every set's: POD_LAUNCH_SETS ×
 * POD_LAUNCH_RESERVED_FDS) now rather than at the first launch: a daemon
 * calls it early, while its lowest fds are free, so the child's private
 * table stays small (K is the highest slot of its set + 1).  Idempotent,
 * thread-safe.
 * Returns 0, or -EMFILE when they could not be reserved (pod_launch still
 * works, copying the fd table).
 * Its first call also records the process's RLIMIT_NOFILE as the one
 * every child starts with (before o->rlimits): a daemon that raises its
 * own limit later for its containers' pipes (pod_host_fit, up to
 * fs.nr_open) does not hand that to the containers, whose programs may
 * loop over every possible fd or use select(). */
int pod_launch_reserve(void);

/* Reads which signals this process ignores (SIG_IGN).  A child cloned
 * with CLONE_CLEAR_SIGHAND keeps only those of its parent's dispositions,
 * and resets them; told which they are, it does not ask the kernel for
 * each of the 62 signals (21.7 us a launch).  pod_launch_reserve's first
 * call, or else the first launch, reads them.  A process that ignores
 * another signal after that calls this again, or its children start with
 * that signal ignored (SIGPIPE excepted: always reset, as a library may
 * ignore it for a while at any time).  Safe from any thread, also while
 * launches run. */
void pod_launch_signals_changed(void);

/* Start time (clock ticks since boot, /proc/PID/stat field 22) of pid:
 * with the pid it identifies a process across pid reuse.  Returns 0 and
 * fills *out, or -ESRCH / negative errno. */
int pod_proc_start_time(pid_t pid, uint64_t *out);

/* True when pid is gone or a zombie (dead even if nobody reaps it: its
 * parent, init or a previous tankd's parent, may never wait for it).
 * Reads /proc/PID/stat; does not block beyond that. */
bool pod_proc_dead(pid_t pid);

/* What is of the process (pid, start): GONE when no process has that pid
 * and start time (it was reaped, or the pid now names another), ZOMBIE
 * when it has ended and nobody reaped it yet (it has left its cgroup:
 * cgroup.procs lists no zombie), RUNS otherwise.  One read of
 * /proc/PID/stat, so the start time and the state are of the same
 * process; an unreadable or unparsable stat counts as GONE. */
typedef enum { POD_PROC_GONE, POD_PROC_RUNS, POD_PROC_ZOMBIE } pod_proc_state_t;
pod_proc_state_t pod_proc_state(pid_t pid, uint64_t start);

/* Sends sig to the container's main process (the stop signal).  Returns 0
 * or -errno (-ESRCH once it is gone). */
int pod_proc_signal(const pod_proc_t *p, int sig);

/* SIGKILLs everything of the container: every process of cg when given
 * (pod_cgroup_kill_all), else the process group of p (when own_pgrp) and
 * p itself.  Non-blocking; the caller still reaps.  Returns 0, -EAGAIN
 * (see pod_cgroup_kill_all) or negative errno. */
int pod_proc_kill_all(const pod_proc_t *p, const pod_cgroup_t *cg);

/* Closes the pipe ends still open in p (sets them to -1). */
void pod_proc_close_fds(pod_proc_t *p);

/* How a container ended. */
typedef struct pod_exit {
	int code;          /* exit code, or -1 when killed by a signal */
	int signal;        /* terminating signal, or 0 */
	bool oom_killed;   /* the kernel OOM killer hit its cgroup */
} pod_exit_t;

/* Decodes a waitpid() status; cg (may be NULL) is asked for OOM kills. */
void pod_exit_from_status(int wstatus, const pod_cgroup_t *cg,
                          pod_exit_t *out);

/* "completed" (code 0), "oom_killed", "signaled" or "failed". */
const char *pod_exit_reason(const pod_exit_t *e);

#endif
