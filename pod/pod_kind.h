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
#include "store/st.h"

extern const kind_t pod_kind;

/* Packs one status record as the contract's status map; the owners of
 * the pod (each kind whose `children` is Pod names its key, or nil) are
 * asked through env (may be NULL: no owner keys). */
int pod_kind_pack_status(const kind_env_t *env, msgpack_packer *pk, const st_status_t *s);

#endif
