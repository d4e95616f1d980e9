/*
 * pod_kind — the Pod kind's descriptor (kinds/kind.h): pod/pods/po,
 * manifest `kind: Pod` (the default), stored in the store's own pods
 * collection, its batch checks (depends_on across the batch and the
 * store; tankd's descriptor limit), its status map (docs/rpc.md), the
 * `ps` columns, and its managers (pod, container) on the loop.
 *
 * Its instance is the pod manager the daemon opened (env->pods): the
 * daemon owns it because it drains it at stop.
 */
#ifndef TANK_POD_KIND_H
#define TANK_POD_KIND_H

#include "kinds/kind.h"
#include "pod/pod_mgr.h"
#include "store/st.h"

extern const kind_t pod_kind;

/* tankctl's commands of the Pod kind (pod_cli.c): restart, logs. */
#define POD_NCMDS 2
extern const kind_cmd_t pod_cmds[POD_NCMDS];

/* Packs one status record as the contract's status map; the owners of
 * the pod (each kind whose `children` is Pod names its key, or nil) are
 * asked through env (may be NULL: no owner keys); meta's keys last
 * (kind_meta_pack; NULL: none). */
int pod_kind_pack_status(const kind_env_t *env, msgpack_packer *pk, const st_status_t *s,
			 const kind_meta_t *meta);

/* Number of keys in a transition event map. */
#define POD_EVENT_TRANSITION_KEYS 9

/* A pod's or a container's transition, or a probe's news, as one
 * events-stream map (docs/rpc.md):
 *   {type: "transition", pod, container (nil for the pod itself), from,
 *    to, reason, at (ms since the epoch), generation, uid}
 *   {type: "probe", pod, container, result, ready, at, generation, uid}
 *    (pod_event_t.probe set)
 * A NULL from/to/reason is packed as nil (a subscriber must not be sent a
 * crash for a missing one).  The descriptor's open hooks the pod
 * manager's events to the daemon's publisher with it.  Returns 0, or
 * -ENOMEM when the packer's buffer could not grow (what was written is
 * then incomplete: discard the buffer).  Pure. */
int pod_event_pack(msgpack_packer *pk, const pod_event_t *ev);

#endif
