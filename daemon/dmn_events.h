/*
 * dmn_events — how a reconciler transition (or a probe's news) goes out on
 * the events stream.
 *
 * The reconciler reports every transition as an pod_event_t (borrowed
 * strings); subscribers of the RPC socket receive it as one msgpack map
 * (docs/rpc.md, after the methods):
 *
 *   {type: "transition", pod, container (nil for the pod itself), from,
 *    to, reason, at (ms since the epoch), generation, uid}
 *   {type: "probe", pod, container, result, ready, at, generation, uid}
 *    (pod_event_t.probe set)
 *
 * Kinds above pods pack their own events (their descriptor's open gets
 * the daemon's publisher: kinds/kind.h), so that a kind adds its event
 * type in its own folder, not here.
 *
 * The encoding is its own module so that it can be tested without a
 * daemon.
 *
 * Pure functions: no allocation beyond the packer's buffer, no blocking.
 */
#ifndef TANK_DMN_EVENTS_H
#define TANK_DMN_EVENTS_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "pod/pod_mgr.h"

/* Number of keys in a transition event map. */
#define DMN_EVENT_TRANSITION_KEYS 9

/* Packs ev as one map onto pk.  A NULL from/to/reason is packed as nil (the
 * reconciler always sets them; a subscriber must not be sent a crash for
 * a missing one).  Returns 0, or -ENOMEM when the packer's buffer could
 * not grow (what was written is then incomplete: discard the buffer). */
int dmn_event_pack(msgpack_packer *pk, const pod_event_t *ev);


/* The store's status commits started failing (failing, with the reason
 * and the failures so far) or work again (reason nil, failures: how many
 * failed):
 *   {type: "store", state: "failing"|"ok", reason, failures, at}
 * Same return as dmn_event_pack. */
int dmn_event_pack_store(msgpack_packer *pk, bool failing, const char *reason,
			 uint64_t failures, int64_t at);

#endif
