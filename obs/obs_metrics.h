/*
 * obs_metrics — what tankd tells Prometheus (docs/observability.md lists
 * every family), computed when asked: a scrape reads the daemon's state
 * on the loop's thread, where the state lives, so nothing is copied or
 * locked and nothing is computed while nobody scrapes.
 *
 * Nothing here names a kind.  Objects by kind and phase come from walking
 * the list of kinds (kinds/kind.h) and each kind's status maps, one at a
 * time (obs_each_status: pack_status of each stored object, else the
 * elements of its status_all): a kind added to
 * TANK_KIND_LIST is counted without a change here.  Per-object and
 * per-container series come from the status map's conventional keys, so
 * any kind whose status map has them gets them:
 *   `ready` (bool)               tank_object_ready{kind,name}
 *   `containers` (array of maps with `name`):
 *     `restarts` (int)           tank_container_restarts_total{kind,name,container}
 *     `ready` (bool)             tank_container_ready{kind,name,container}
 * A kind's metrics of its own (a pod's probes: tank_probe_total …) come
 * from its descriptor's metrics hook (kind_t.metrics), written after the
 * objects' families.
 *
 * Everything here runs on the runtime's thread (the kinds' callbacks
 * require it).
 */
#ifndef TANK_OBS_METRICS_H
#define TANK_OBS_METRICS_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "kinds/kind.h"
#include "obs/obs_buf.h"
#include "runtime/rt.h"
#include "store/st.h"

/* Where the numbers come from; borrowed. */
typedef struct obs_src {
	rt_t *rt;
	const kind_env_t *kinds;
	st_t *store;
	const char *loop_name;       /* the reconciler's registered name */
	const char *api_name;        /* the api server's registered name */
	const char *version;
} obs_src_t;

/* Counts the web side keeps itself (events seen by type, clients). */
#define OBS_EVENT_TYPES 16
typedef struct obs_counts {
	char type[OBS_EVENT_TYPES][24];
	uint64_t events[OBS_EVENT_TYPES];
	size_t ntypes;
	uint64_t events_other;       /* types past OBS_EVENT_TYPES */
	uint64_t requests;           /* HTTP requests answered */
	size_t sse_clients;
	uint64_t sse_dropped;        /* clients cut for falling behind */
	uint64_t slow_closed;        /* connections closed: no whole request in time */
} obs_counts_t;

/* The whole exposition into b.  0, or -ENOMEM (b->oom). */
int obs_metrics_write(const obs_src_t *s, const obs_counts_t *c, obs_buf_t *b);

/* Calls fn with each status map of kind k, one at a time (status borrowed
 * for the call), until fn returns nonzero (returned).  A kind with
 * pack_status is walked object by object through one small buffer
 * (kind_scan): a scrape of 10,000 pods never holds all their statuses at
 * once, which the heap would keep afterwards.  The objects are the stored
 * ones (a pod being deleted is gone from them at once); a kind with only
 * status_all is read from its array, element by element. */
typedef int (*obs_status_fn)(void *ctx, const msgpack_object *status);
int obs_each_status(const kind_env_t *env, const kind_t *k, obs_status_fn fn, void *ctx);

/* A one-line summary for systemd's STATUS=: "3 pods (2 running, 1
 * failed), 1 stack (1 up)", every kind of the list. */
void obs_summary(const obs_src_t *s, char *out, size_t cap);

#endif
