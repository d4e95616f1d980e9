/*
 * pod_sandbox — the per-pod isolation holder.
 *
 * A sandbox is one small process created with the pod's namespaces
 * (pid, mount, uts, ipc, net).  It is a forked copy of the caller running
 * our own code, never exec'ing: in a pid namespace it is PID 1 and reaps
 * every orphan of the pod.  It sets the hostname, and in a mount namespace
 * makes every mount private, builds the root (rootfs bind + /proc + a
 * minimal tmpfs /dev + the volumes, read-only when asked) and pivot_roots
 * into it.  Then it closes every fd it inherited and waits for signals.
 *
 * Every container of the pod is started by pod_launch() *into* the sandbox
 * (setns on the fds kept here), so the containers share the namespaces
 * and the mounts; each still has its own cgroup, uid, cwd, env and rlimits.
 *
 * The sandbox process is a child of the caller: the caller reaps it (its
 * SIGCHLD handling must not treat it as a container).  Destroying it
 * SIGKILLs it, which in a pid namespace kills every process of the pod.
 *
 * It outlives a caller killed with SIGKILL (the containers in its
 * namespaces do too, until the next daemon stops them), so it must be
 * findable: given a cgroup env, it runs in its own group
 * <root>/<cgroup_pod>/_sandbox.<pid> (POD_SANDBOX_GROUP_PREFIX: a name no
 * container can have), joined before it runs any setup step, so a
 * cgroup sweep finds it; and its name says which pod it serves (comm
 * "sbx:<pod>", command line "tank-sandbox <pod>"), not the caller's.
 */
#ifndef TANK_POD_SANDBOX_H
#define TANK_POD_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/tank_err.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_ns.h"


typedef struct pod_sandbox_mount {
	const char *host_path;  /* absolute, must exist */
	const char *path;       /* absolute, inside the container root */
	bool read_only;
} pod_sandbox_mount_t;

/* Caller-owned options; everything is borrowed for the call only. */
typedef struct pod_sandbox_opts {
	unsigned ns;                 /* POD_NS_* bits; 0 is invalid */
	const char *hostname;        /* needs POD_NS_UTS; NULL = keep */
	const char *rootfs;          /* needs POD_NS_MOUNT; NULL = host root */
	const pod_sandbox_mount_t *mounts;   /* needs POD_NS_MOUNT */
	size_t n_mounts;
	const char *name;            /* the pod, for its process name; NULL:
	                              * "tank-sandbox" */
	/* Its cgroup: NULL (or mode NONE) = none; else cgroup_pod is the
	 * pod's group name under the env's root. */
	const pod_cgroup_env_t *cgroups;
	const char *cgroup_pod;
} pod_sandbox_opts_t;

/* The sandbox groups: "_sandbox.<host pid>" (container names start with
 * [a-z0-9], so none is ever one). */
#define POD_SANDBOX_GROUP_PREFIX "_sandbox."
#define POD_SANDBOX_GROUP_MAX 32

/* True when a container-level group name is a sandbox's. */
bool pod_sandbox_is_group(const char *name);

/* ns fd slots, in the order containers join them (mount last). */
enum { POD_SBX_UTS = 0, POD_SBX_IPC, POD_SBX_NET, POD_SBX_PID, POD_SBX_MNT,
       POD_SBX_NFD };

typedef struct pod_sandbox {
	pid_t pid;               /* host pid of the sandbox init; -1 once gone */
	unsigned ns;             /* POD_NS_* it holds */
	int ns_fd[POD_SBX_NFD];  /* O_CLOEXEC /proc/PID/ns/x fds, or -1 */
	int root_fd;             /* its root dir (mount ns), or -1 */
	pod_cgroup_t cg;         /* its group; mode NONE when it has none */
	char group[POD_SANDBOX_GROUP_MAX];   /* its group's name, or "" */
} pod_sandbox_t;

/* Creates the sandbox and waits (briefly, blocking) until it has set
 * itself up or reported why it could not.  sb is caller storage, valid
 * after success until pod_sandbox_destroy().  Errors: TANK_EINVALID for
 * inconsistent options, TANK_EUNSUPPORTED (with a message naming the
 * namespace or mount) when the kernel or our privileges refuse, the
 * cgroup's error when its group cannot be made or joined, negative errno
 * otherwise.  On failure no process, fd or group is left behind. */
int pod_sandbox_create(const pod_sandbox_opts_t *o, pod_sandbox_t *sb,
                       tank_error_t *err);

/* Takes over the sandbox a previous life of the daemon made (pod_adopt.h):
 * pid with exactly that start time, holding the namespaces ns, a member
 * of its group "_sandbox.<pid>" under o's cgroup env and cgroup_pod when
 * there is one (o's other fields are not used).  Opens its namespaces and
 * root as pod_sandbox_create does.  -ESRCH when it is gone,
 * TANK_ECONFLICT when it is not in its group, negative errno; the
 * process is never touched on failure. */
int pod_sandbox_adopt(pid_t pid, uint64_t start, unsigned ns,
		      const pod_sandbox_opts_t *o, pod_sandbox_t *sb, tank_error_t *err);

/* SIGKILLs the sandbox (and with it a pid namespace's processes), closes
 * the fds.  Does not reap: the caller's SIGCHLD handling does, or pass
 * reap=true to waitpid() for it here (tests, shutdown), which also
 * removes its cgroup; without reap the group is left, empty once the
 * process is gone, for the caller's sweep to remove. */
void pod_sandbox_destroy(pod_sandbox_t *sb, bool reap);

#endif
