/*
 * cl_node — the node agent: what `tankd --cluster URL --node NAME` adds to
 * a tankd (DESIGN.md §14, docs/cluster.md).
 *
 * Keys in etcd (values JSON; ID is an object's id, cl_obj_id below):
 *   /tank/<plural>/NAME an object's manifest, as `tankctl --cluster apply`
 *                       put it (/tank/pods/NAME, /tank/stacks/NAME …)
 *   /tank/assign/ID     the node that runs it (its name, plain text)
 *   /tank/nodes/NAME    a live node: {name, labels, capacity, running},
 *                       attached to the node's lease (TTL 10 s, kept alive)
 *   /tank/status/ID     the object's status as its node last wrote it:
 *                       {node, phase, reason, ready, restarts, …}
 *   /tank/req/NODE/RID  a call routed to NODE's tankd: {method, params}
 *   /tank/ans/RID       its answer {code, message, result, details},
 *                       under the node's lease
 *
 * Which objects a node holds is the kind's cluster_place (kinds/kind.h):
 * a unit (pods, stacks with their inline pods) on the node it is assigned
 * to, a definition (workflows, their stages and tasks, playbooks) on every
 * node.  This module reads nothing else of a kind.
 *
 * Three threads, none of them the loop's, so tankd's loop never waits on
 * etcd:
 *   - the mirror (cl_mirror.h) lists and watches [/tank/assign/,
 *     /tank0), skipping /tank/status/;
 *   - the lease thread registers the node (grant, then the node record
 *     put under the lease) and keeps the lease alive every TTL/3; when
 *     etcd says it expired it registers again.  It talks only to etcd, so
 *     a busy tankd does not let the lease lapse;
 *   - the worker, woken by the mirror (or every second), once the mirror
 *     is in sync with etcd: schedules (cl_sched.h; every node does, each
 *     assignment a transaction comparing the assign key's revision, so
 *     two schedulers never both win), then makes the local store match
 *     what is assigned to this node, answers the requests to it, then
 *     writes back the status of its objects.  Incrementally: it applies
 *     what moved since its last pass and asks the status of what tankd's
 *     events (`subscribe`, a connection of its own) named, with a full
 *     look at both every CL_NODE_FULL_MS (cl_node.c).
 *
 * The worker reaches tankd the way tankctl does: as a client of its
 * socket.  An assigned pod is applied with the `apply` method, so it is
 * validated, stored and reconciled exactly as any apply, marked with the
 * label tank-cluster/node=NAME (CL_NODE_LABEL) so that it is told apart
 * from a pod applied locally; a cluster pod no longer assigned here is
 * deleted with `delete`.  A local pod of the same name that lacks the
 * label is never touched: its status in etcd says the conflict.
 *
 * While the mirror is not in sync (etcd unreachable, or a resumed watch
 * still catching up) the worker changes nothing locally: the pods keep
 * running from the local store, and nothing assigned elsewhere meanwhile
 * is started or kept once the mirror is in sync again.
 *
 * Status writes are coalesced: a pod's key is written when its summary
 * changed and at most once per CL_NODE_STATUS_MIN_MS.
 *
 * Errors are values; the agent logs what goes wrong to its log FILE
 * ("tankd: cluster: …", each distinct message once in a row) and retries;
 * nothing here exits.
 */
#ifndef TANK_CL_NODE_H
#define TANK_CL_NODE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <stddef.h>

#include "common/tank_err.h"

#define CL_NODE_LABEL "tank-cluster/node"
#define CL_NODE_TTL_DEFAULT 10
#define CL_NODE_STATUS_MIN_MS 500
/* A pod unassigned this long is taken by any scheduler, not only the one
 * whose share it is (cl_sched_mine). */
#define CL_NODE_SHARE_WAIT_MS 2000

#define CL_PREFIX_PODS "/tank/pods/"
#define CL_PREFIX_ASSIGN "/tank/assign/"
#define CL_PREFIX_NODES "/tank/nodes/"
#define CL_PREFIX_STATUS "/tank/status/"

#define CL_PREFIX_REQ "/tank/req/"
#define CL_PREFIX_ANS "/tank/ans/"

/* --- keys of any kind's objects (docs/cluster.md "Keys") ------------------
 *
 * A kind's object lives at /tank/<plural>/NAME (pods: /tank/pods/NAME).
 * Its assignment and status are under /tank/assign/ and /tank/status/ +
 * its id: NAME for the list's first kind (pods, as before other kinds came
 * to the cluster: a pod's name has no '/'), <plural>/NAME for every other.
 * Only kinds whose cluster_place is not KIND_PLACE_NONE have keys. */
struct kind;
/* The id of k's object name into buf: 0, or -ENAMETOOLONG. */
int cl_obj_id(const struct kind *k, const char *name, char *buf, size_t cap);
/* The spec key of k's object name into buf. */
int cl_spec_key(const struct kind *k, const char *name, char *buf, size_t cap);
/* The kind of a spec key (/tank/<plural>/NAME) and *name (points into
 * key), or NULL when key is no kind's spec. */
const struct kind *cl_spec_kind(const char *key, const char **name);
/* The kind of an id (as cl_obj_id writes it) and *name, or NULL. */
const struct kind *cl_id_kind(const char *id, const char **name);

typedef struct cl_node_opts {
	const char *url;       /* etcd: http://HOST:PORT */
	const char *node;      /* this node's name (a label value's rules) */
	const char *labels;    /* "k=v,k=v" or NULL */
	const char *socket;    /* tankd's socket, which the worker calls */
	int ttl_s;             /* lease TTL; 0: CL_NODE_TTL_DEFAULT */
	uint64_t capacity;     /* pods it may hold; 0: from the host's limits */
	FILE *log;             /* NULL: stderr */
} cl_node_opts_t;

typedef struct cl_node cl_node_t;

/* Checks the options without I/O: TANK_EINVALID with the flag named
 * (--cluster, --node, --labels) in e. */
int cl_node_check(const cl_node_opts_t *o, tank_error_t *e);

/* Starts the threads (does not wait for etcd).  0, TANK_EINVALID (as
 * cl_node_check), -ENOMEM or a thread error; *out is the caller's. */
int cl_node_start(const cl_node_opts_t *o, cl_node_t **out, tank_error_t *e);

/* Stops the threads; with revoke, revokes the lease first (waits at most
 * 2 s for etcd), so that the other nodes take this node's pods at once
 * instead of after the TTL.  NULL is a no-op. */
void cl_node_stop(cl_node_t *n, bool revoke);

/* Parses "k=v,k=v" into out (at most max pairs; strings point into buf, a
 * copy the caller gives, cap bytes).  The number of pairs, or -1 with
 * the problem in e (a key or value against the label rules). */
struct cl_label;
int cl_labels_parse(const char *s, char *buf, size_t cap, struct cl_label *out, size_t max,
		    tank_error_t *e);

#endif
