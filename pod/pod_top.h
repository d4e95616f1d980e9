/*
 * pod_top — what the containers use now (`tankctl top`): CPU time and
 * memory from each container's cgroup — v2 cpu.stat's usage_usec and
 * memory.current; v1 cpuacct.usage and memory.usage_in_bytes where the
 * container has those groups — or, where it has none (v1 without limits,
 * no cgroups at all), the sum over /proc of the processes of its group
 * (or of its process): utime + stime and resident memory.
 *
 * Reads small files under /sys/fs/cgroup and /proc: blocks only on
 * those.  Runs on the loop's thread (the pod manager's map is read, never
 * written).
 */
#ifndef TANK_POD_TOP_H
#define TANK_POD_TOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "common/tank_err.h"
#include "kinds/kind.h"
#include "pod/pod_cgroup.h"
#include "runtime/rt.h"

struct pod_mgr;

typedef struct pod_usage {
	uint64_t cpu_usec;       /* CPU time used, all its processes */
	uint64_t mem_bytes;      /* memory charged (cgroup) or resident (/proc) */
	uint32_t procs;          /* processes in its group (1 without one) */
	bool from_cgroup;        /* both figures are the cgroup's */
} pod_usage_t;

/* One container's use: cg may be NULL (no group), pid its main process.
 * 0, or -ENOENT when neither the group nor the process can be read. */
int pod_usage_read(const pod_cgroup_t *cg, pid_t pid, pod_usage_t *u);

/*
 * Packs one map per running container of pod `pod`, in container order:
 *   {pod, container, pid, cpu_usec, cpu_percent, memory, procs, source}
 * cpu_percent is its CPU time over its time running (ps's %CPU: 100 is
 * one CPU busy since it started); source "cgroup" or "proc".  An array.
 * TANK_ENOTFOUND (no such pod), TANK_ECONFLICT (nothing of it runs: the
 * message says its phase and why), -ENOMEM.
 */
int pod_top_pack(struct pod_mgr *m, const char *pod, msgpack_packer *pk, tank_error_t *e);

/* Whether a `top` of pod (NULL or "": every pod) is answered now by
 * pod_top_pack: a pod's, unless it is being adopted or not known yet
 * while m settles (pod_mgr_settling); every pod's never (pod_top_later). */
bool pod_top_now(struct pod_mgr *m, const char *pod);

/*
 * The same answered later through r (kinds/kind.h), for pod (NULL or "":
 * every pod, in pod then container order) by an actor of m's ("pod-top",
 * spawned at the first call, living with the runtime):
 *   - Every pod is read TOP_SLICE_MS (5 ms) a turn, so a `top` of 9,700
 *     containers does not hold the loop for half a second.  The pods are
 *     those of the moment the walk begins (one deleted since is left
 *     out); a question asked during a walk is answered by the next one,
 *     which every question waiting then shares.
 *   - While m settles (a reexec's or the keeper's containers being
 *     adopted, the first pass over the store), a question waits until
 *     what it reads is known (10 s at most): right after a reexec, a top
 *     listed 0-75 of 500 running containers.
 *   - 64 questions wait at most: the 65th is answered TANK_ELIMIT at once
 *     (each answer of a walk is the whole table, copied into its
 *     connection's output whether the client reads or not).
 * Call on the runtime's thread.  0 (taken), or a negative errno (not
 * taken, answer it).  The actor reads m's map in its turns: m must
 * outlive the runtime's actors (dmn_close frees the runtime first).
 */
int pod_top_later(struct pod_mgr *m, rt_t *rt, const char *pod, const kind_reply_t *r);

#endif
