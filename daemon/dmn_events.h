/*
 * dmn_events — the daemon's own news on the events stream: the store's
 * state.  Each kind packs its own events in its own folder (Pod's
 * transitions and probe results: pod/pod_kind.h pod_event_pack; a
 * kind's descriptor gets the daemon's publisher through kind_env_t), so
 * that a kind adds its event type there, not here (docs/rpc.md, after
 * the methods, lists every type).
 *
 * The encoding is its own module so that it can be tested without a
 * daemon.  Pure functions: no allocation beyond the packer's buffer, no
 * blocking.
 */
#ifndef TANK_DMN_EVENTS_H
#define TANK_DMN_EVENTS_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

/* The store's status commits started failing (failing, with the reason
 * and the failures so far) or work again (reason nil, failures: how many
 * failed):
 *   {type: "store", state: "failing"|"ok", reason, failures, at}
 * Returns 0, or -ENOMEM when the packer's buffer could not grow. */
int dmn_event_pack_store(msgpack_packer *pk, bool failing, const char *reason,
			 uint64_t failures, int64_t at);

#endif
