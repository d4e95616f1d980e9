/*
 * pod_cgroup — one cgroup per container: limits, tracking, kill, OOM.
 *
 * Layout: <mount>/<root>/<pod>/<container>.  <root> is per daemon (e.g.
 * "tank", or "tank-<pid>" in tests) so two daemons never share groups.
 * cgroup v2 is used when the unified hierarchy offers the memory, pids and
 * cpu controllers; otherwise the v1 hierarchies memory/, pids/ and cpu/.
 * On v1 every container gets a group in pids/ (the tracking hierarchy: what
 * kill_all walks) and groups in memory/ and cpu/ only when it has those
 * limits, which keeps a restart storm of unlimited containers cheap.
 *
 * The launcher puts the child into the group before it execs: the child
 * opens <dir>/cgroup.procs and writes "0" (v2: the kernel creates it in
 * the group instead, clone3 CLONE_INTO_CGROUP, when it can).  No fd is held per container
 * between launches (they were: up to three per container, which ran a
 * daemon with thousands of pods into EMFILE).
 *
 * Nothing here keeps global state: the caller owns a pod_cgroup_env_t
 * (probed once) and one pod_cgroup_t per container.  All functions do
 * small blocking file operations on cgroupfs (never slow, never waiting
 * for a process) and return 0 or a negative errno / TANK_E* code.
 */
#ifndef TANK_POD_CGROUP_H
#define TANK_POD_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/tank_err.h"

#define POD_CGROUP_PATH 384
#define POD_CGROUP_NAME 128

typedef enum pod_cgroup_mode {
	POD_CGROUP_NONE = 0,  /* no usable cgroup hierarchy */
	POD_CGROUP_V1,
	POD_CGROUP_V2,
} pod_cgroup_mode_t;

/* v1 controllers, also the index into pod_cgroup_t.dir. */
enum { POD_CG_PIDS = 0, POD_CG_MEMORY, POD_CG_CPU, POD_CG_N };

typedef struct pod_cgroup_env {
	pod_cgroup_mode_t mode;
	char root[POD_CGROUP_NAME];           /* group name under each mount */
	char v2_mount[POD_CGROUP_PATH];       /* v2: the unified mount */
	char v1_mount[POD_CG_N][POD_CGROUP_PATH]; /* v1: per controller */
} pod_cgroup_env_t;

/* Limits of one container; 0 means "no limit" for each field. */
typedef struct pod_cgroup_limits {
	uint64_t memory;    /* bytes */
	uint64_t pids;      /* max tasks */
	double cpu;         /* CPUs (0.5 = half a CPU) → cfs quota/period */
} pod_cgroup_limits_t;

typedef struct pod_cgroup {
	pod_cgroup_mode_t mode;
	/* v2: only index 0 is used.  v1: indexed by POD_CG_*; "" = no group.
	 * The strings share one allocation, `paths`, owned by the struct and
	 * freed by pod_cgroup_destroy or pod_cgroup_forget: a daemon holds one
	 * of these per container, and fixed buffers cost 1 KiB each. */
	const char *dir[POD_CG_N];
	char *paths;
	bool has_memory;          /* a memory group exists (OOM detectable) */
	uint64_t oom_base;        /* oom_kill count when the group was made */
} pod_cgroup_t;

/* Finds the hierarchies under sysfs (NULL = "/sys/fs/cgroup") and fills
 * env.  root is the per-daemon group name: [A-Za-z0-9._-]+, it may hold
 * one '/' level (e.g. "tank/d1").  Never fails for lack of cgroups: env->mode
 * is then POD_CGROUP_NONE.  Fails with TANK_EINVALID on a bad root. */
int pod_cgroup_probe(pod_cgroup_env_t *env, const char *sysfs,
                     const char *root, tank_error_t *err);

/*
 * Delegation (systemd's Delegate=yes, docs/operations.md): places the
 * daemon's groups below the daemon's own cgroup instead of at the
 * hierarchy's root, so a service manager sees the pods under the unit
 * (`systemctl status tankd`, systemd-cgls) and its KillMode reaches them.
 * v2 only (env->mode POD_CGROUP_V2; otherwise 0 and nothing changes).
 *
 * self is the process's own group ("/system.slice/tankd.service"; NULL:
 * the "0::" line of /proc/self/cgroup).  With force false the group must
 * say it is delegated to us — the trusted.delegate or user.delegate
 * extended attribute systemd sets on it (since v251) — else nothing
 * changes (a daemon started from a shell stays at the root).  A root
 * group ("/") never changes.
 *
 * When delegated: the v2 rule "no processes in a group that hands
 * controllers down" means the daemon cannot stay in its own group, so it
 * moves itself (every thread) — and every other process of SELF, its
 * keeper — into the leaf SELF/supervisor, then
 * env->v2_mount becomes the mount plus self: every group is then
 * SELF/<root>/<pod>/<container>.  *delegated says whether this happened.
 * A SELF that is that leaf already (a tankd its keeper started again, a
 * reexec) counts as its parent.  Call before the process has children of
 * its own in that group.
 * Errors: negative errno from cgroupfs (the process is then where it
 * was and env unchanged).
 */
int pod_cgroup_delegate(pod_cgroup_env_t *env, const char *self, bool force,
			bool *delegated, tank_error_t *err);

/* Creates (or reuses, after a crash) the group of pod/container, applies
 * lim (NULL = none) and checks its cgroup.procs files can be opened for
 * writing (it keeps none open).  cg is caller-owned
 * storage; on success it must be released with pod_cgroup_destroy().
 * Errors: TANK_EUNSUPPORTED when env has no cgroups or a requested
 * controller is missing, TANK_EINVALID on a bad name, negative errno from
 * cgroupfs (e.g. -EACCES without privileges).  On failure nothing is left
 * behind and cg needs no release. */
int pod_cgroup_create(const pod_cgroup_env_t *env, const char *pod,
                      const char *container, const pod_cgroup_limits_t *lim,
                      pod_cgroup_t *cg, tank_error_t *err);

/* Moves process pid into the group (every hierarchy it has): for a
 * process the caller started itself and holds back until it is in (the
 * launcher's children join on their own, before exec).  0 or a negative
 * errno. */
int pod_cgroup_attach(const pod_cgroup_t *cg, pid_t pid);

/* Reads file dir/name into buf with one plain read (size - 1 bytes at
 * most, NUL-terminated): the small files of cgroupfs and procfs, which
 * the kernel hands over whole.  Its length, or a negative errno (-ENOENT:
 * no such file).  No stdio: the loop reads one at each exit, and `top`
 * one or two a container and one a process. */
int pod_cgroup_read(const char *dir, const char *name, char *buf, size_t size);

/* The number after `key ` on a line of dir/name (key NULL: the file's
 * first number), read with pod_cgroup_read (4 KiB at most).  0, or
 * -ENODATA when no line has the key (a whole word), -EINVAL when no
 * number follows it or it overflows, a negative errno from the read. */
int pod_cgroup_read_num(const char *dir, const char *name, const char *key, uint64_t *out);

/* Calls fn(pid, arg) for each pid listed in dir/cgroup.procs, in the
 * file's order, read 4 KiB at a time (a group may hold thousands: no list
 * is built).  A negative return from fn stops the walk and is returned.
 * The number of pids seen, or a negative errno (-ENOENT: no such group). */
typedef int (*pod_cgroup_pid_fn)(pid_t pid, void *arg);
int pod_cgroup_each_pid(const char *dir, pod_cgroup_pid_fn fn, void *arg);

/* Number of processes in the group (>= 0) or a negative errno. */
int pod_cgroup_count(const pod_cgroup_t *cg);

/* True when pid is a member of the group (read from its cgroup.procs):
 * with its start time, how an adopted process is known to be this
 * container's (pod_adopt.h). */
bool pod_cgroup_has_pid(const pod_cgroup_t *cg, pid_t pid);

/* Sends sig to every process in the group (one read of cgroup.procs; a
 * process forked meanwhile is missed: callers that must empty the group
 * use pod_cgroup_kill_all).  0 or a negative errno. */
int pod_cgroup_signal(const pod_cgroup_t *cg, int sig);

/* True while the group's directory exists (false after someone removed it
 * by hand: drift the caller repairs by making it again). */
bool pod_cgroup_exists(const pod_cgroup_t *cg);

/* SIGKILLs every process in the group.  v2 writes cgroup.kill when the
 * kernel has it; otherwise it sweeps cgroup.procs until it reads empty (a
 * bounded number of sweeps, so a fork bomb cannot keep it busy forever).
 * Does not wait for the processes to be reaped.  Returns 0 when the group
 * was seen empty (or cgroup.kill was written), -EAGAIN when processes
 * were still appearing after the last sweep, or a negative errno. */
int pod_cgroup_kill_all(const pod_cgroup_t *cg);

/* 1 if the kernel OOM-killed a process of this group since it was
 * created, 0 if not (or no memory group), negative errno on error. */
int pod_cgroup_oom_killed(const pod_cgroup_t *cg);

/* Whether <root>/<pod>/<container> exists (the pids hierarchy under v1),
 * without making it. */
bool pod_cgroup_present(const pod_cgroup_env_t *env, const char *pod, const char *container);

/* Removes the container's directories (and the pod's directory when it
 * became empty).  Returns -EBUSY, leaving the group in place and cg valid,
 * while processes remain (kill them, reap, retry). */
int pod_cgroup_destroy(pod_cgroup_t *cg);

/* Frees cg's memory and leaves its groups as they are: for a group that
 * stays busy at shutdown, which the next daemon finds and reuses.  cg is
 * then released (mode NONE).  NULL is fine. */
void pod_cgroup_forget(pod_cgroup_t *cg);

/* The sweep: finds every group under env's root that its owner does not
 * claim and stops what runs in it.
 *
 * Walks <root>/<pod>/<container> in the pids (v1) or unified (v2) tree.
 * For each container group, owned(ctx, pod, container) says whether a
 * tracked container owns it; an unowned group's processes are SIGKILLed
 * (pod_cgroup_kill_all), found(ctx, pod, container, n) is told how many
 * there were (n > 0 only), and the group is removed once empty (a busy one
 * is left for the next sweep).  Processes planted directly in the root or
 * a pod's group (tank never puts any there) are killed and reported with
 * container "" (and pod "" for the root).  Returns the number of processes
 * found, or a negative errno when the root cannot be read (-ENOENT: no
 * root yet, nothing to sweep).  Blocks on cgroupfs reads only.
 * owned(ctx, pod, NULL) is asked first for each pod group: true skips
 * that group whole at this sweep (its owner knows it clean: reading the
 * groups of 10,000 settled pods at every resync was most of an idle
 * tankd's CPU, issue 38). */
typedef bool (*pod_cgroup_owned_fn)(void *ctx, const char *pod, const char *container);
typedef void (*pod_cgroup_found_fn)(void *ctx, const char *pod, const char *container,
				    int nprocs);
/* The same in steps, for a daemon that must keep answering while it
 * sweeps 20,000 pod groups (each costs a dozen cgroupfs calls): each call
 * goes on for about budget_ms (0: to the end) and returns 1 when more is
 * left (call again with the same sw; the listing of the pod groups is
 * sliced as well), 0 when the sweep is complete
 * (sw->total is then the number of processes found), or a negative errno
 * as pod_cgroup_sweep.  The pod groups are listed at the first step; one
 * made later waits for the next sweep.  A sweep given up midway is freed
 * with pod_cgroup_sweep_abort.  sw starts zeroed. */
typedef struct pod_cgroup_sweep {
	void *dir;              /* the root's DIR while listing, owned */
	char **pods;            /* names of the pod groups listed, owned */
	size_t n, cap, at;
	int total;
	bool started;
} pod_cgroup_sweep_t;
int pod_cgroup_sweep_step(const pod_cgroup_env_t *env, pod_cgroup_sweep_t *sw,
			  pod_cgroup_owned_fn owned, pod_cgroup_found_fn found, void *ctx,
			  unsigned budget_ms);
void pod_cgroup_sweep_abort(pod_cgroup_sweep_t *sw);
int pod_cgroup_sweep(const pod_cgroup_env_t *env, pod_cgroup_owned_fn owned,
		     pod_cgroup_found_fn found, void *ctx);

/* Removes env's root group if it is empty (tests, daemon shutdown). */
int pod_cgroup_env_cleanup(const pod_cgroup_env_t *env);

#endif
