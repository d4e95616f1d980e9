/*
 * pod_deps — the dependency graph of pods (depends_on, DESIGN.md §8) as
 * an apply sees it: every name a pod depends on must exist, in the batch
 * or in the store, and the graph must have no cycle.
 *
 * The stored graph is acyclic (every apply was checked), so a cycle that
 * an apply would make runs through one of its pods: the check walks from
 * the batch's pods only, reading a stored pod's spec when the walk first
 * reaches it.  A batch pod replaces its stored namesake.  An apply of n
 * pods reads at most the stored pods reachable from them.
 *
 * Deleting a pod others depend on is allowed (as `docker rm` of a
 * dependency is): its dependents keep running and a start of theirs
 * waits, naming it.  A stored pod whose dependency was deleted is not
 * the apply's error unless the apply names that pod.
 *
 * Blocks on store reads (LMDB, page cache).  Nothing is kept.
 *
 * pod_deps.c also holds the run-time side of depends_on for the pod
 * manager (which dependents to wake, whether a condition is met, which
 * stop waits for which): private, declared in pod_mgr_int.h.
 */
#ifndef TANK_POD_DEPS_H
#define TANK_POD_DEPS_H

#include <stddef.h>

#include "common/kit_errors.h"
#include "pod/pod_spec.h"
#include "store/st.h"

/*
 * Checks the batch specs[0..n) (borrowed) against itself and the store.
 * Each problem is appended to errs as "<where[i]><pod>: depends_on…",
 * where[i] naming spec i in the request (kinds/kind.h kind_item_where:
 * "pods[3]: ", "stacks[0]: shop: pods[1]: "; where NULL: "pods[i]: "):
 *   depends_on[k].pod: no pod named "x" in this apply or stored
 *   depends_on: cycle: web -> api -> web
 * Returns 0 (errs may have gained entries: the batch is invalid then),
 * or -ENOMEM, or a store error (its message in err).
 */
int pod_deps_check(pod_spec_t *const *specs, const char *const *where, size_t n, st_t *st,
		   kit_errors_t *errs, tank_error_t *err);

#endif
