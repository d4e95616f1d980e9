/*
 * cl_etcd — a small etcd v3 client over etcd's JSON gateway (HTTP POST to
 * /v3/kv/range, /v3/kv/put, /v3/kv/deleterange, /v3/kv/txn,
 * /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke and /v3/watch),
 * through libcurl.
 *
 * Why the JSON gateway: Debian has no C gRPC client for etcd, the gateway
 * ships in every etcd since 3.3 (3.4.23 in Debian 12), and libcurl is
 * already a dependency.  Keys and values travel base64-encoded and int64
 * fields as JSON strings; responses are parsed with libfyaml (JSON is YAML
 * 1.2), so no JSON parser is written by hand.
 *
 * BLOCKING.  Every call here blocks on the network (a request is bounded
 * by the timeout, default 5 s; a watch by nothing but its stop).  Never
 * call these from tankd's loop thread: the node agent (cl_node.h) calls
 * them from its own threads, tankctl from its main.
 *
 * Threading.  A cl_etcd_t is used by one thread at a time (it owns one
 * curl handle).  The one exception is cl_etcd_abort(), which any thread
 * may call to end a watch (or a request) in flight.  Two threads that both
 * talk to etcd use two cl_etcd_t.
 *
 * Ownership.  Strings passed in are borrowed for the call.  Results
 * (cl_kvs_t) are owned by the caller and freed with cl_kvs_free.
 *
 * Errors.  0 on success, else:
 *   -ECONNREFUSED / -EHOSTUNREACH  etcd cannot be reached;
 *   -ETIMEDOUT                     no answer within the timeout;
 *   -ECONNRESET                    the connection broke mid-answer;
 *   -ECANCELED                     cl_etcd_abort() ended the call;
 *   -ENOMEM                        out of memory;
 *   TANK_ENOTFOUND                 etcd said not found (a lease gone);
 *   TANK_EINVALID                  etcd refused the request as malformed;
 *   TANK_ECORRUPT                  the answer could not be parsed;
 *   -EIO                           any other error etcd reported.
 * cl_etcd_errmsg() then says what happened, in etcd's words when it gave
 * some.  No function exits or aborts.
 */
#ifndef TANK_CL_ETCD_H
#define TANK_CL_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cl_etcd cl_etcd_t;

/* One key-value as etcd keeps it.  key is NUL-terminated (keys here are
 * text); value has value_len bytes and a NUL after them (for text). */
typedef struct cl_kv {
	char *key;
	char *value;
	size_t value_len;
	int64_t create_rev, mod_rev, version, lease;
} cl_kv_t;

/* The answer to a read: kvs in key order, and the store's revision at the
 * time of the read (a watch from revision + 1 misses nothing). */
typedef struct cl_kvs {
	cl_kv_t *kv;
	size_t n;
	int64_t revision;
} cl_kvs_t;

void cl_kvs_free(cl_kvs_t *r);

/* Connects lazily: url is "http://HOST:PORT" (a trailing slash is
 * accepted).  Only checks the URL's shape: -EINVAL when it is not http://,
 * -ENOMEM; and loads libcurl, the first time (common/tank_dl.h: only a
 * program that talks to etcd loads it): -ELIBACC when it cannot be
 * loaded.  *out is owned by the caller (cl_etcd_close). */
int cl_etcd_open(const char *url, cl_etcd_t **out);
/* The text of an error cl_etcd_open returned: for -ELIBACC, which library
 * could not be loaded and why ("cannot load libcurl.so.4: …"), else
 * tank_strerror's.  Static. */
const char *cl_etcd_strerror(int rc);
void cl_etcd_close(cl_etcd_t *e);
/* The bound on one request (not on a watch), in ms; default 5000. */
void cl_etcd_set_timeout(cl_etcd_t *e, long ms);
/* The text of the last error, "" after a success.  Borrowed. */
const char *cl_etcd_errmsg(const cl_etcd_t *e);
/* Ends the call in flight (a watch, mostly) with -ECANCELED within about
 * a second, and every later call until cl_etcd_rearm.  Thread-safe. */
void cl_etcd_abort(cl_etcd_t *e);
void cl_etcd_rearm(cl_etcd_t *e);

/* The one key `key` (out->n is 0 or 1). */
int cl_etcd_get(cl_etcd_t *e, const char *key, cl_kvs_t *out);
/* Every key starting with prefix, at revision rev (0: the latest); a
 * compacted rev fails with -ERANGE. */
int cl_etcd_get_prefix(cl_etcd_t *e, const char *prefix, int64_t rev, cl_kvs_t *out);
/* Every key in [key, end) at revision rev (0: the latest). */
int cl_etcd_get_range(cl_etcd_t *e, const char *key, const char *end, int64_t rev,
		      cl_kvs_t *out);
/* Puts key = value (len bytes), attached to lease (0: none).  *rev (may be
 * NULL) is the revision of the write. */
int cl_etcd_put(cl_etcd_t *e, const char *key, const void *value, size_t len,
		int64_t lease, int64_t *rev);
/* Deletes key, or every key under it when prefix.  *deleted (may be NULL)
 * is how many keys went. */
int cl_etcd_delete(cl_etcd_t *e, const char *key, bool prefix, int64_t *deleted);

/* Compacts etcd's history up to rev (an operator's act; etcd can also do
 * it by itself with --auto-compaction): reads and watches from below rev
 * fail with -ERANGE afterwards. */
int cl_etcd_compact(cl_etcd_t *e, int64_t rev);

/* --- transactions ------------------------------------------------------ */

typedef enum cl_cmp_target {
	CL_CMP_CREATE,  /* create_revision (0: the key does not exist) */
	CL_CMP_MOD,     /* mod_revision */
	CL_CMP_VERSION, /* version */
	CL_CMP_VALUE,   /* the value's bytes */
} cl_cmp_target_t;

typedef enum cl_cmp_result { CL_EQ, CL_NE, CL_LT, CL_GT } cl_cmp_result_t;

typedef struct cl_cmp {
	const char *key;
	cl_cmp_target_t target;
	cl_cmp_result_t result;
	int64_t num;            /* for CREATE, MOD, VERSION */
	const void *value;      /* for VALUE */
	size_t value_len;
} cl_cmp_t;

typedef enum cl_op_kind { CL_OP_PUT, CL_OP_DELETE, CL_OP_GET } cl_op_kind_t;

typedef struct cl_op {
	cl_op_kind_t kind;
	const char *key;
	const void *value;      /* PUT */
	size_t value_len;
	int64_t lease;          /* PUT: 0 none */
} cl_op_t;

/* If every compare holds, runs `then`, else `otherwise`, atomically.
 * *succeeded says which; *got (may be NULL) receives the kvs of the GET
 * ops that ran, in order; *rev (may be NULL) the revision after it. */
int cl_etcd_txn(cl_etcd_t *e, const cl_cmp_t *cmp, size_t ncmp,
		const cl_op_t *then, size_t nthen,
		const cl_op_t *otherwise, size_t notherwise,
		bool *succeeded, cl_kvs_t *got, int64_t *rev);

/* --- leases ------------------------------------------------------------ */

/* A lease of ttl seconds: *id and the TTL etcd granted (*granted, may be
 * NULL). */
int cl_etcd_lease_grant(cl_etcd_t *e, int64_t ttl, int64_t *id, int64_t *granted);
/* One keep-alive: *ttl (may be NULL) is the lease's TTL again.
 * TANK_ENOTFOUND when the lease expired or was revoked. */
int cl_etcd_lease_keepalive(cl_etcd_t *e, int64_t id, int64_t *ttl);
/* The seconds the lease has left (*left) and was granted (*granted, may
 * be NULL).  TANK_ENOTFOUND when it is gone. */
int cl_etcd_lease_ttl(cl_etcd_t *e, int64_t id, int64_t *left, int64_t *granted);
/* Revokes the lease: every key attached to it goes.  TANK_ENOTFOUND when
 * it was already gone. */
int cl_etcd_lease_revoke(cl_etcd_t *e, int64_t id);

/* --- watch ------------------------------------------------------------- */

typedef enum cl_ev_type { CL_EV_PUT, CL_EV_DELETE } cl_ev_type_t;

typedef struct cl_event {
	cl_ev_type_t type;
	cl_kv_t kv;   /* a DELETE carries the key and mod_rev only */
} cl_event_t;

/* Called for each batch of events (in revision order), on the watching
 * thread; ev and its strings are borrowed for the call.  `revision` is
 * the batch's header revision: after it returns, a watch resumed from
 * revision + 1 misses nothing.  Called once first with n == 0 (ev NULL)
 * when etcd has created the watch, `revision` then being the store's
 * revision at that time: once the events up to it have come, the
 * watcher is in sync.  Nonzero stops the watch (cl_etcd_watch returns
 * that value). */
typedef int (*cl_watch_fn)(void *ud, const cl_event_t *ev, size_t n, int64_t revision);

/* Watches key (or everything under it when prefix) from start_rev (0:
 * from now on).  BLOCKS until fn returns nonzero (returned), the stream
 * breaks (an error above), cl_etcd_abort (-ECANCELED), or start_rev was
 * compacted: -ERANGE with *compacted (may be NULL) set to the oldest
 * revision still there — re-list with cl_etcd_get_prefix, then watch
 * from the list's revision + 1. */
int cl_etcd_watch(cl_etcd_t *e, const char *key, bool prefix, int64_t start_rev,
		  cl_watch_fn fn, void *ud, int64_t *compacted);

/* The same over the keys in [key, end). */
int cl_etcd_watch_range(cl_etcd_t *e, const char *key, const char *end, int64_t start_rev,
			cl_watch_fn fn, void *ud, int64_t *compacted);

#endif
