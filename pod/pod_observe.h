/*
 * pod_observe — what the pod kind observes of one pod, for the generic
 * convergence rule (reconciler/rc_converge.h): a status map, as the
 * `status` RPC returns it (docs/rpc.md), in; an rc_observed_t out.
 *
 *   terminal + outcome completed → DONE
 *   terminal + any other outcome → FAILED (why: the reason and last exit)
 *   a container stopped by its startup probe (its reason `unhealthy:
 *                                 startup: …`) → FAILED: the probe gave up
 *   held by its owner (`held`), nothing running (waiting, pending) → DONE:
 *                                 what is desired holds
 *   running and `ready` false    → PENDING (why: the first container not
 *                                 ready and its probe); moving while now is
 *                                 before a not-ready container's
 *                                 `probe_until` (its probes' window)
 *   running (and ready; a status without `ready` counts as ready) → READY,
 *                                 stability = the running containers'
 *                                 names and start times
 *   anything else               → PENDING (why: phase and reason)
 *   since = the status's `since`.
 *   progress = phase, reason, last exit; outcome = last exit;
 *   restarts = the pod's restart count.
 *
 * It reads the map only (no I/O); unknown or missing fields read as empty.
 * Phases and the outcome are decoded into their enums (pod_phase.h) and
 * decided on; the reason is text for people and decides nothing.
 */
#ifndef TANK_POD_OBSERVE_H
#define TANK_POD_OBSERVE_H

#include <msgpack.h>

#include "reconciler/rc_converge.h"

/* 0, or -EINVAL when status is not a map.  now_ms: the wall clock (ms
 * since the epoch) the probe windows are judged at; 0: never moving. */
int pod_observe_status_at(const msgpack_object *status, int64_t now_ms, rc_observed_t *out);
/* pod_observe_status_at with no clock. */
int pod_observe_status(const msgpack_object *status, rc_observed_t *out);

#endif
