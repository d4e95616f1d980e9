/*
 * st_coll — a kind's collection, declared once (DESIGN.md §7 "Store
 * collections"): the store gives every collection the same desired-state
 * operations (put, delete, get, scan, watch), a group-committed status,
 * a bounded history and secondary indexes, and names no kind.
 *
 * A kind declares its collection with a static st_coll_decl_t and opens it
 * once per store (st_coll_open).  LMDB databases derive from the name:
 *   <name>             key -> {uid, name, spec (bin), generation, hash,
 *                             created_at, updated_at, and after a changed
 *                             spec prev_generation, prev_spec: the version
 *                             it replaced}  (as pods' records, st.h)
 *   <name>.status      key -> the kind's status record (its own msgpack)
 *   <name>.history     key \0 seq(8, big-endian) ->
 *                      {seq, at, kind, key, uid, from, to, reason}
 *   <name>.idx.<index> index key \0 key -> empty
 * The kind's codec is its own: specs and status records are msgpack bytes
 * the kind encodes and decodes; the store keeps them byte for byte.
 *
 * Durability is the store's (st.h): put and delete are fsync-durable before
 * they return, all or nothing, and BLOCK for one fsync; status and history
 * are queued, read back at once (read your own writes) and committed with
 * the store's group commit.  Identity: put of a new key gives it a fresh
 * uid and generation 1; a changed spec bumps the generation; delete then
 * put is a new object.
 *
 * Pods are a collection like any other: the store declares and opens it
 * itself (st_pods()); st.h's pod functions are wrappers over this module.
 * Every collection's status and history go through one queue and one
 * group commit, and one history implementation.  A collection whose status
 * records have the store's typed shape (st_status_t, declared with
 * typed_status: the pods) also keeps them decoded in memory, because
 * status reads of 10,000 pods are the reconciler's hot path; its status
 * bytes are then st_status_t's encoding, whichever call wrote them.
 *
 * One thread, as st.h (an async commit's transaction aside: st_coll_commit_async).
 * Errors as st.h.
 */
#ifndef TANK_ST_COLL_H
#define TANK_ST_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/st.h"

#define ST_COLL_NAME_MAX 31
#define ST_COLL_INDEX_MAX 4

typedef struct st_index_decl {
	const char *name;        /* [a-z_]+ */
	/* The index key of one desired record (its spec bytes): writes it
	 * into out (cap bytes) and returns its length, or 0 when the object
	 * is not in this index.  Must not fail otherwise. */
	size_t (*key_of)(const void *spec, size_t len, char *out, size_t cap);
} st_index_decl_t;

typedef struct st_coll_decl {
	const char *name;        /* [a-z_]+, at most ST_COLL_NAME_MAX */
	const char *noun;        /* one object, for messages ("stack"); NULL: name */
	uint32_t history_limit;  /* transitions kept per key; 0 = the store's
				  * (st_options_t.history_limit, 1000) */
	bool typed_status;       /* status records are st_status_t, kept decoded */
	st_index_decl_t indexes[ST_COLL_INDEX_MAX];
	size_t nindexes;
} st_coll_decl_t;

typedef struct st_coll st_coll_t;

/* Opens (creating as needed) the collection's databases.  The declaration
 * is borrowed and must outlive the store; opening the same declaration
 * twice returns the same handle.  The handle is freed by st_close.
 * Blocks (one write transaction).  TANK_EINVALID for a bad declaration,
 * LMDB errors (MDB_DBS_FULL past the store's database limit). */
int st_coll_open(st_t *st, const st_coll_decl_t *decl, st_coll_t **out,
		 tank_error_t *err);

/* ---- desired state ------------------------------------------------------ */

/* As st_apply, for this collection (inputs named by key). */
int st_coll_put(st_coll_t *c, const st_pod_in_t *in, size_t n,
		st_apply_result_t *res, tank_error_t *err);
/* As st_delete: removes the objects, their status, history and index
 * entries. */
int st_coll_delete(st_coll_t *c, const char *const *keys, size_t n,
		   bool *deleted, tank_error_t *err);
/* As st_pod_get / st_pod_foreach (records in the st_pod_t shape).  get:
 * TANK_ENOTFOUND "no <noun> \"<key>\"".  scan: each record's spec is
 * borrowed from the map and valid during fn only; fn returning non-zero
 * stops the scan with that value. */
int st_coll_get(st_coll_t *c, const char *key, st_pod_t *out, tank_error_t *err);
int st_coll_scan(st_coll_t *c, st_pod_fn fn, void *ctx, tank_error_t *err);
/* The same from the first key after `after` (NULL or "": from the start). */
int st_coll_scan_from(st_coll_t *c, const char *after, st_pod_fn fn, void *ctx,
		      tank_error_t *err);
/* How many committed writes changed the collection's objects (a put that
 * created or configured one, a delete that removed one) since open.  Equal
 * values mean the same stored objects: a resync that has walked them all
 * once need not read them again until this moves (the pod manager's
 * resync, pod/pod_mgr.c).  It may move without a change, never the
 * other way. */
uint64_t st_coll_changes(const st_coll_t *c);
/* Subscribers told the keys created, configured or deleted, after the
 * commit (as st_subscribe).  Returns an id > 0 or -ENOMEM. */
int st_coll_watch(st_coll_t *c, st_subscriber_fn fn, void *ctx);
/* Removes a watch: 0, or -ENOENT for an unknown id. */
int st_coll_unwatch(st_coll_t *c, int id);
/* The keys whose index `index` key is ikey, in key order: fn(ctx, key)
 * for each (key borrowed for the call).  TANK_ENOTFOUND for an unknown
 * index. */
int st_coll_index_scan(st_coll_t *c, const char *index, const char *ikey,
		       void (*fn)(void *ctx, const char *key), void *ctx,
		       tank_error_t *err);

/* One transaction over several collections (a stack and its inline pods
 * are written together, or not at all).  Each op names a collection (NULL:
 * the pods), objects to put (results in res, nput entries) and keys to
 * delete (deleted: ndel entries, may be NULL).  Puts of every op come
 * first, then deletes, all in one durable write transaction; then every
 * collection's watchers are told, op by op.  Errors as st_coll_put; on
 * error nothing is written.  Blocks for one fsync.  One exception, a
 * store that cannot grow: a commit of deletes only that does not fit
 * with the queued statuses deletes as st_coll_delete does then (each op
 * alone, in halves if need be, one transaction each), and on an error
 * the deleted arrays say which keys went (and the watchers heard of
 * them). */
typedef struct st_coll_op {
	st_coll_t *c;
	const st_pod_in_t *put;
	size_t nput;
	st_apply_result_t *res;
	const char *const *del;
	size_t ndel;
	bool *deleted;
} st_coll_op_t;
int st_coll_commit(st_t *st, const st_coll_op_t *ops, size_t n, tank_error_t *err);
/* The same commit without its fsync: committed (every reader sees it, and
 * it survives the process's death: the page cache holds it) but durable
 * against an OS crash only once st_durable's callback says so.  For
 * callers that answer only then and must not hold the loop for an fsync
 * meanwhile (a delete of 100,000 names in chunks of 1,000: 40-70 ms a
 * chunk with its fsync on the loop).  Errors as st_coll_commit. */
int st_coll_commit_nosync(st_t *st, const st_coll_op_t *ops, size_t n, tank_error_t *err);

/* The same durable commit (puts only), run on the store's thread while
 * the loop goes on: the whole write transaction, its commit and its
 * fsync (tens of ms for 10,000 records, which held every client when it
 * ran on the loop).  The checks (names, room) are made here and an error
 * is returned at once (fn not called).  Otherwise the inputs are copied
 * (the caller's buffers may go), 0 is returned and fn(ctx, rc, err) is
 * called exactly once, on the loop thread, outside the call (with no
 * loop attached, or nothing to put, before it returns): rc 0 with every
 * op's res filled and the watchers told first, or the error st_coll_commit
 * would give (err borrowed for the call; nothing applied).  The caller's
 * res arrays must stay valid until fn is called.
 * What runs where: the loop checks, copies, later grows the map when the
 * transaction found it full (and hands it over again), fills res, tells
 * the watchers; the store's thread runs only the transaction.  Readers
 * see the old records until the thread commits, the new ones from then
 * on (possibly before fn).  Queued status changes are not part of it (the
 * group commit writes them after).  While it is in flight every other
 * write of the store waits for it: the group commit's timer lets it be,
 * a write called on the loop (st_flush, st_coll_put …) blocks until the
 * thread's commit is done (st_usage's commit_waits count those).  One at
 * a time: a second call settles the first.  st_detach_loop and st_close
 * settle what is in flight. */
typedef void (*st_commit_fn)(void *ctx, int rc, const tank_error_t *err);
int st_coll_commit_async(st_t *st, const st_coll_op_t *ops, size_t n, st_commit_fn fn,
			 void *ctx, tank_error_t *err);
/* Whether an async commit is in flight (until its fn has been called). */
bool st_commit_busy(const st_t *st);
/* Waits (blocking the loop) for the async commit in flight, if any, and
 * completes it now: its fn is called from here.  For a caller that must
 * read its outcome before going on (a desired-state write that checks
 * stored objects first). */
void st_settle(st_t *st);

/* ---- observed state ------------------------------------------------------ */

/* Queues the status record of key (a copy of bytes) and returns at once.
 * TANK_EINVALID (bad key), -ENOMEM. */
int st_coll_status_put(st_coll_t *c, const char *key, const void *bytes, size_t len);
/* The latest status of key, queued ones included: *bytes is malloc'ed
 * (caller frees).  TANK_ENOTFOUND, -ENOMEM. */
int st_coll_status_get(st_coll_t *c, const char *key, void **bytes, size_t *len,
		       tank_error_t *err);
/* Queues the removal of key's status and history (as st_status_forget). */
int st_coll_status_forget(st_coll_t *c, const char *key);
/* Queues a transition into key's history (as st_transition_add: the store
 * assigns its seq and fills kind, key and uid when empty; -ENOBUFS when
 * ST_PENDING_MAX transitions are queued); pruned beyond the history limit
 * at flush. */
int st_coll_history_add(st_coll_t *c, const char *key, const st_transition_t *t);
/* As st_history: the last `limit` entries of key's history (0 = all
 * kept), oldest first, queued ones included, every field filled. */
int st_coll_history(st_coll_t *c, const char *key, size_t limit,
		    st_transition_t **out, size_t *n, tank_error_t *err);

/* Typed status (collections declared with typed_status; TANK_EINVALID
 * otherwise): as st.h's st_status_put / get / list / foreach, which are
 * these on the pods' collection.  Reads never open a transaction. */
int st_coll_status_put_typed(st_coll_t *c, const st_status_t *s);
int st_coll_status_get_typed(st_coll_t *c, const char *key, st_status_t *out,
			     tank_error_t *err);
int st_coll_status_list(st_coll_t *c, st_status_t **out, size_t *n, tank_error_t *err);
int st_coll_status_foreach(st_coll_t *c, st_status_fn fn, void *ctx, tank_error_t *err);

#endif
