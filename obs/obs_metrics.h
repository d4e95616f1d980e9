/*
 * obs_metrics — what tankd tells Prometheus (docs/observability.md lists
 * every family), computed when asked: a scrape reads the daemon's state
 * on the loop's thread, where the state lives, so nothing is copied or
 * locked and nothing is computed while nobody scrapes.
 *
 * Nothing here names a kind.  Objects by kind and phase come from walking
 * the list of kinds (kinds/kind.h) and each kind's status maps, one at a
 * time (obs_walk_t below: pack_status of each stored object, else the
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
	/* At most this many objects a slice of a sliced walk (a /metrics or
	 * /state build, the STATUS= summary) takes (0: as many as its time
	 * allows); the tests set 1 (TANK_HTTP_SLICE_OBJECTS) to have every
	 * walk run over many turns. */
	size_t slice_objects;
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
	size_t snap_bytes;           /* state builds held for pages and /state answers */
	uint64_t slow_closed;        /* connections closed: no whole request in time */
	uint64_t build_slices;       /* slices of /metrics and /state builds (obs_http.c) */
} obs_counts_t;

/* A status map, borrowed for the call. */
typedef void (*obs_status_fn)(void *ctx, const msgpack_object *status);

/* ---- walks in slices ------------------------------------------------------
 *
 * Every object of every kind is too many for one turn of the loop at
 * 100,000 stored pods (a scrape or a /state took most of a second, and
 * every RPC waited behind it).  A walk goes over them in slices, each in
 * its own read of the store, from the name after the last it saw
 * (kind_scan_from): between two slices the loop serves everything else.
 * An object applied or deleted between slices is seen or not by its
 * place in the name order; each object is seen at most once.
 */
typedef struct obs_walk_fns {
	void (*kind_begin)(void *ctx, const kind_t *k);   /* may be NULL */
	obs_status_fn status;                             /* each status map, borrowed */
	void (*kind_end)(void *ctx, const kind_t *k);     /* may be NULL */
} obs_walk_fns_t;

typedef struct obs_walk {
	const kind_env_t *env;       /* borrowed */
	obs_walk_fns_t fns;
	void *ctx;
	size_t kind;                 /* index in env->kinds of the kind walked */
	bool in_kind;                /* its kind_begin was called */
	char after[ST_NAME_MAX + 1]; /* the last object of it seen ("": none) */
	uint64_t slice_end_ns;       /* this slice's deadline (CLOCK_MONOTONIC) */
	size_t slice_left;           /* objects this slice may still take */
} obs_walk_t;

void obs_walk_init(obs_walk_t *w, const kind_env_t *env, const obs_walk_fns_t *fns, void *ctx);
/* One slice: objects until max_objects of them (0: no count) or budget_ns
 * of the clock went by, whichever comes first (one object at least).
 * True once every kind is walked.  A kind with status_all and no
 * pack_status is read whole in one slice. */
bool obs_walk_step(obs_walk_t *w, size_t max_objects, uint64_t budget_ns);

/* The exposition built over several turns: obs_metrics_start, then
 * obs_metrics_step until it says true, then obs_metrics_finish_parts (the
 * objects' families from the walk, the rest as it is at that moment).
 * obs_metrics_free drops one unfinished.  start returns NULL when out of
 * memory. */
typedef struct obs_metrics_build obs_metrics_build_t;
obs_metrics_build_t *obs_metrics_start(const obs_src_t *s);
bool obs_metrics_step(obs_metrics_build_t *mb, size_t max_objects, uint64_t budget_ns);
/* The whole exposition as OBS_METRICS_PARTS buffers to be sent one after
 * the other (the caller's to free, also on -ENOMEM), and mb freed: the
 * objects' samples are moved out of the build, not copied.  0, or
 * -ENOMEM. */
#define OBS_METRICS_PARTS 7
int obs_metrics_finish_parts(obs_metrics_build_t *mb, const obs_counts_t *c,
			     obs_buf_t parts[OBS_METRICS_PARTS]);
void obs_metrics_free(obs_metrics_build_t *mb);

/* A one-line summary for systemd's STATUS=: "3 pods (2 running, 1
 * failed), 1 stack (1 up)", every kind of the list, built over several
 * turns (as obs_metrics_start …): start (NULL when out of memory), step
 * until true, then finish writes out and frees; obs_summary_free drops
 * one unfinished. */
typedef struct obs_summary_build obs_summary_build_t;
obs_summary_build_t *obs_summary_start(const obs_src_t *s);
bool obs_summary_step(obs_summary_build_t *sb, uint64_t budget_ns);
void obs_summary_finish(obs_summary_build_t *sb, char *out, size_t cap);
void obs_summary_free(obs_summary_build_t *sb);

#endif
