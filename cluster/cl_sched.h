/*
 * cl_sched — the scheduler's decisions, as pure functions (no I/O, no
 * etcd): which live node a pod goes to, and which scheduler's turn a pod
 * is.  cl_node feeds them from its mirror of etcd and writes the result
 * with a transaction that compares the assignment key's revision, so two
 * schedulers that decide at once never both win (cl_node.h).
 *
 * The rule (docs/cluster.md): among the live nodes whose labels match
 * every pair of the pod's node_selector and that hold fewer pods than
 * their capacity, the least loaded.  Ties are broken by a hash of the
 * pod's and the node's names: every scheduler given the same view picks
 * the same node, and schedulers deciding at once from the same stale
 * view (each its own share of the pods) do not all pile onto one node,
 * as a tie broken by the node's name alone would have them do.
 *
 * Nothing here allocates, blocks or fails.
 */
#ifndef TANK_CL_SCHED_H
#define TANK_CL_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cl_label {
	const char *key, *value;
} cl_label_t;

typedef struct cl_sched_node {
	const char *name;
	const cl_label_t *labels;
	size_t nlabels;
	uint64_t capacity;   /* pods it may hold */
	uint64_t load;       /* pods assigned to it now (the caller counts) */
} cl_sched_node_t;

/* Whether node has every key = value of sel. */
bool cl_sched_fits(const cl_sched_node_t *node, const cl_label_t *sel, size_t nsel);

/* Index in nodes[0..n) of the node for a pod with selector sel, or -1
 * when none fits (none matches, or all matching are full). */
int cl_sched_pick(const cl_sched_node_t *nodes, size_t n, const char *pod,
		  const cl_label_t *sel, size_t nsel);

/* How long an assignment a scheduler won is counted before its watch
 * shows it: far longer than the watch's usual lag (milliseconds), short
 * enough that a lost event costs one late decision, not a wrong load for
 * good. */
#define CL_SCHED_INFLIGHT_MS 10000

/* Where a pod counts in the nodes' loads, and whether it is placed:
 * assigned_at is the index of its assigned node in the live nodes (-1
 * none, or a dead node), inflight_at that of the node this scheduler
 * assigned it to in a transaction it won but its watch has not brought
 * back (-1 none), inflight_age_ms how long ago.  A live assignment in the
 * mirror wins (ours came back, or another scheduler's); an in-flight one
 * counts until it is CL_SCHED_INFLIGHT_MS old.  Returns the index, or -1:
 * not placed, to be decided.  Without the in-flight count the passes
 * over one burst (each takes what the watch has delivered so far) would
 * each see the loads of before the burst, and all choose one node. */
int cl_sched_counted(int assigned_at, int inflight_at, uint64_t inflight_age_ms);

/* Whether the scheduler on node `me` takes pod first: every scheduler
 * may assign any pod, but each starts with its own share (a hash of the
 * pod's name over the live nodes' names, sorted), so that schedulers
 * running at once rarely race for the same pod; the others take a pod
 * only once it has waited unassigned for a while (cl_node).  `names`
 * sorted; false when me is not among them. */
bool cl_sched_mine(const char *pod, const char *me, const char *const *names, size_t n);

#endif
