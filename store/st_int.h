/*
 * st_int — what store/'s files share and nothing outside store/ sees: the
 * environment handle, the write-transaction runner, and the history key
 * layout.  st.c owns the environment, the one queue of observed state and
 * its group commit, and the typed status cache; st_coll.c the collections
 * (pods included) and their reads.
 */
#ifndef TANK_ST_INT_H
#define TANK_ST_INT_H

#include <ev.h>
#include <lmdb.h>
#include <msgpack.h>
#include <pthread.h>

#include "common/kit_hist.h"
#include "common/tank_map.h"
#include "store/st.h"
#include "store/st_coll.h"

#define MAP_SIZE_MAX ((size_t)1 << 40)
#define META_SCHEMA_KEY "schema_version"
#define SEQ_LEN 8
#define ST_FLUSH_SLICE 4096        /* names per timer flush (flush_some) */
#define ST_TRIM_QUIET_MS 2000      /* the map is given back after this long untouched */
#define ST_REOPEN_WRITES 1024      /* records in one write txn past which a quiet store
				    * reopens its environment (st.c "env_reopen") */
#define ST_LOAD_SLICE 2048         /* status records per turn of the cache's load, at most */
#define ST_LOAD_SLICE_US 1000      /* ... and for this long, at most (precise clock): it runs
				    * before the loop's drain in each iteration, so every
				    * answer during a start waits for one */

/* One queued key of a collection: whether its status must be written
 * and/or its status and history deleted first, plus the sequence and uid
 * bookkeeping used while its transitions are written.  Every collection's
 * observed state goes through this one queue (pods included). */
typedef struct pend {
	struct st_coll *c;
	char name[ST_NAME_MAX + 1];
	size_t namelen;
	bool forget;               /* delete status + history before the rest */
	bool has_status;           /* write the status (typed: the cache's) */
	void *val;                 /* untyped collections: the status bytes, owned */
	size_t len;
	uint64_t first_seq;        /* valid while writing, see write_pending */
	uint64_t next_seq;
	bool uid_done;             /* uid looked up (while writing) */
	char uid[ST_UID_LEN + 1];
	/* Queued transitions of this name numbered below this were
	 * forgotten (st_coll_status_forget) and are skipped, not removed:
	 * removing them scanned the whole queue for each name, and a delete
	 * of 100,000 pods forgets 100,000 names (issue 38). */
	uint64_t drop_below;
} pend_t;

typedef struct pend_tr {
	uint32_t ent;              /* index into st->pend */
	uint64_t qseq;             /* st->tr_qseq when queued */
	st_transition_t t;
} pend_tr_t;

/* A cached status, packed (st.c "the typed status cache"): the fixed
 * fields of the record and of each container, then its strings, each as
 * long as it is, NUL-terminated.  A st_status_t with one container is
 * ~840 bytes of fixed buffers (reason 128, probe 64 …); packed it is
 * ~200, and a read unpacks it with a few copies.  corrupt != NULL marks
 * a stored record that could not be decoded: reads report that message
 * instead of dropping the pod (rec is then NULL). */
typedef struct cent {
	unsigned char *rec;        /* owned: the packed status, or NULL */
	char *corrupt;             /* owned message, or NULL */
	uint32_t idx;              /* its place in c->cache (swap-removal) */
	uint32_t nctrs;            /* containers in rec */
	uint16_t namelen;
	char name[];               /* the key, NUL-terminated */
} cent_t;

typedef struct sub {
	int id;
	st_subscriber_fn fn;
	void *ctx;
} sub_t;

/* Whether an apply's input is the stored object's spec byte for byte (a
 * put of it then writes nothing).  in->spec may be NULL, as it is before
 * the batch is validated. */
static inline bool st__spec_same(const st_pod_t *cur, const st_pod_in_t *in)
{
	return cur->spec_len == in->spec_len &&
	       (!in->spec_len || (in->spec && !memcmp(cur->spec, in->spec, in->spec_len)));
}

/* The part of the map that applies leave free for status changes and
 * deletes: a quarter of it, at least 256 KiB. */
static inline size_t st__reserve(size_t map_size)
{
	size_t r = map_size / 4;
	return r < (256u << 10) ? (256u << 10) : r;
}

/* An async commit (st_coll_commit_async) handed to the store's thread:
 * everything its transaction reads is here, owned (the inputs copied
 * into arena), so the thread touches no other in-memory part of st_t.
 * The loop fills it and reads the outcome only once the thread has said
 * done (ac_state, under q_mu). */
typedef struct st_acommit {
	st_coll_op_t *ops;         /* the ops, put arrays pointing into in[] */
	size_t n;
	st_pod_in_t *in;           /* every op's puts, in op order */
	st_apply_result_t *res;    /* their results, filled by the thread */
	size_t nin;
	char *arena;               /* names and specs, copied */
	st_apply_result_t **user_res; /* the caller's res array of each op */
	int64_t now;
	msgpack_sbuffer buf;       /* the thread's encode scratch */
	tank_error_t err;          /* what the thread's txn said */
	int rc;                    /* 0, an LMDB code or a negative errno */
	uint64_t ns;               /* begin to commit, on the thread */
	void (*fn)(void *ctx, int rc, const tank_error_t *err);
	void *ctx;
} st_acommit_t;

enum { ST_AC_NONE = 0, ST_AC_QUEUED, ST_AC_RUNNING, ST_AC_DONE };

/* An st_durable caller waiting for the fsync that covers seq. */
typedef struct st_waiter {
	uint64_t seq;
	void (*fn)(void *ctx, int rc);
	void *ctx;
} st_waiter_t;

struct st {
	char *dir;                 /* <data_dir> */
	char *path;                /* <data_dir>/store */
	int lock_fd;
	MDB_env *env;
	MDB_dbi db_meta;
	size_t map_size;
	bool flush_failing;        /* the last flush failed (told once it works) */
	uint64_t flush_failures;   /* failed flushes since the last good one */
	uint64_t history_dropped;  /* transitions not written: store full */
	uint64_t history_trimmed;  /* entries deleted for an apply (history_trim) */
	uint64_t hist_writes;      /* history entries put (retried ones again) */
	uint64_t hist_writes_trimmed; /* hist_writes at the last trim to one */
	/* Write transactions' time, begin to commit (fsyncs included for a
	 * durable one): st_commit_stats. */
	kit_hist_t commit_durable, commit_flush;
	size_t write_from;         /* st__write_pending: names from this one on only (0: all) */
	uint32_t history_limit;
	uint32_t flush_ms;
	void (*on_flush_error)(void *, const tank_error_t *);
	void *on_flush_error_ctx;

	msgpack_sbuffer buf;       /* encode scratch */

	/* The queue, of every collection: entries in insertion order, each
	 * found through its collection's map (key -> entry index + 1). */
	pend_t *pend;
	size_t n_pend, cap_pend;
	pend_tr_t *trs;
	size_t n_trs, cap_trs;
	uint64_t tr_qseq;          /* numbers the queued transitions */

	struct st_coll *pods;      /* the pods' collection */
	struct st_coll **colls;    /* every open collection, pods first */
	size_t n_colls;

	struct ev_loop *loop;
	ev_timer timer;
	/* The map's pages this process touched stay mapped (file-backed, in
	 * its PSS: 1.2 KiB a pod at 10,000) until given back: once the store
	 * has gone a whole ST_TRIM_QUIET_MS untouched (no transaction), the
	 * trim timer drops them with MADV_DONTNEED (st__touch, trim_cb). */
	ev_timer trim;
	bool touched;              /* a transaction since the trim timer started */
	uint64_t trims;            /* times the map was given back */
	/* LMDB keeps the pages a write transaction dirtied, malloc'ed, on a
	 * list of its environment for the next ones, and frees that list
	 * only at mdb_env_close: one apply of 10,000 pods left 12 MB in
	 * tankd for good.  Every record a write transaction puts or deletes
	 * counts in txn_writes (reset at each begin; the store's thread
	 * counts its commit's, the loop writes nothing meanwhile); the most
	 * of one transaction since the environment was opened is
	 * max_txn_writes.  Past ST_REOPEN_WRITES, the quiet store's trim
	 * closes and reopens its environment (env_reopen) instead. */
	size_t txn_writes, max_txn_writes;
	uint64_t reopens;          /* times the environment was reopened */
	ev_timer load_timer;       /* the caches' load, a slice per turn */

	/* Sync thread.  q_mu guards the request flags; env_mu is held around
	 * every mdb_env_sync, every NOSYNC flag toggle and every resize so the
	 * thread never syncs while the environment is being reconfigured. */
	pthread_t sync_thr;
	bool sync_started;
	pthread_mutex_t q_mu, env_mu;
	pthread_cond_t q_cv;
	bool sync_req, sync_stop;
	int sync_err;              /* last background sync failure, LMDB rc */
	/* st_durable: each call numbers "everything committed so far"
	 * (dur_seq, loop thread).  Under q_mu: the highest number asked for
	 * (dur_want), the highest a finished fsync covers (dur_done), and
	 * the highest a failed one was to cover with its error (dur_fail,
	 * dur_fail_rc, LMDB rc).  The sync thread wakes the loop through
	 * dur_async once an fsync that covers a number is done (dur_on:
	 * the watcher is started, under q_mu). */
	uint64_t dur_seq, dur_want, dur_done, dur_fail;
	int dur_fail_rc;
	bool dur_on;
	ev_async dur_async;
	struct st_waiter *waiters; /* st_durable callers not told yet */
	size_t n_waiters, cap_waiters;

	/* The async commit in flight (at most one; loop-owned pointer, NULL
	 * when none): from st_coll_commit_async until its completion ran on
	 * the loop.  ac_state (under q_mu) says where the thread is with it;
	 * ac_cv is signalled when it is done.  While it is in flight no
	 * write transaction begins on the loop: a loop write waits on ac_cv
	 * first (counted in ac_waits / ac_wait_ns), the flush timer and the
	 * trim wait for the completion instead. */
	st_acommit_t *ac;
	int ac_state;
	pthread_cond_t ac_cv;
	uint64_t ac_waits, ac_wait_ns;
	void (*commit_gate)(void *ctx);
	void *commit_gate_ctx;
};

struct st_coll {
	st_t *st;
	const st_coll_decl_t *decl;
	size_t idx;                /* its place in st->colls */
	const char *noun;          /* decl->noun, or decl->name */
	size_t noun_len;
	MDB_dbi db_obj, db_status, db_hist;
	MDB_dbi db_idx[ST_COLL_INDEX_MAX];
	uint32_t history_limit;
	sub_t *subs;
	size_t n_subs;
	int next_sub_id;
	tank_map_t pend;           /* key -> st->pend index + 1 */
	MDB_cursor *cur;           /* on db_hist, while a flush writes */
	uint64_t changes;          /* st_coll_changes */

	/* typed_status: every status, packed (cent_t): loaded at open,
	 * written through by puts.  Status reads never touch LMDB: they are the
	 * reconciler's hot path and a list of 10,000 must take a few
	 * milliseconds, while decoding them costs about half a microsecond
	 * each.  The store is the only writer of its environment (flock),
	 * so the cache cannot go stale. */
	cent_t **cache;
	size_t n_cache, cap_cache;
	tank_map_t cache_by_name;  /* key -> cent_t (borrowed from cache[]) */
	cent_t **order;            /* cache sorted by key, valid if order_ok */
	size_t cap_order;
	bool order_ok;
	/* The load (st.c "the cache's load, in slices"): loaded once every
	 * stored record was read; load_key is the last key read. */
	bool loaded;
	size_t load_keylen;
	unsigned char load_key[512];
};

int64_t st__now_ms(void);
/* A write transaction put or deleted a record (see txn_writes). */
static inline void st__wrote(st_t *st) { st->txn_writes++; }
/* 0 when the environment is open; else it tries to open it again (a
 * reopen failed: env_reopen) and fails with why. */
int st__env_ok(st_t *st, tank_error_t *err);
/* Opens every database of c in txn with flags (MDB_CREATE at the
 * collection's open, 0 after the environment's reopen), setting its
 * handles.  An LMDB code. */
int st__coll_dbis_open(struct st_coll *c, MDB_txn *txn, unsigned flags);
bool st__is_mdb_err(int rc);
int st__mdb_fail(tank_error_t *err, int rc, const char *what);
int st__put_buf(st_t *st, MDB_txn *txn, MDB_dbi db, const void *key, size_t klen);
typedef int (*txn_fn)(st_t *st, MDB_txn *txn, void *arg, tank_error_t *err);
int st__write_txn(st_t *st, bool durable, const char *what, txn_fn fn, void *arg,
		  tank_error_t *err);
/* The error of a failed write transaction, as callers see it ("store
 * <path>: <what>: …"; EIO on a full disk said as ENOSPC); rc as the
 * transaction returned it, err possibly filled by its fn already. */
int st__write_fail(st_t *st, int rc, const char *what, tank_error_t *err);
/* Grows the map (x2) when the disk can hold it; on the loop, with no
 * transaction open in the process. */
int st__grow_map(st_t *st, tank_error_t *err);
/* Blocks until the async commit in flight, if any, is done on the
 * store's thread (its completion is left for the loop): what every
 * write transaction on the loop does first. */
void st__ac_wait(st_t *st);
/* Hands a prepared async commit to the store's thread (a loop attached,
 * none in flight); frees one (its copies and itself). */
void st__ac_submit(st_t *st, st_acommit_t *a);
void st__ac_free(st_acommit_t *a);
/* The puts of one collection in a transaction, with an encode buffer of
 * the caller's (st_coll.c; the thread's own for an async commit). */
int st__coll_puts(msgpack_sbuffer *buf, MDB_txn *txn, st_coll_t *c, const st_pod_in_t *in,
		  size_t n, st_apply_result_t *res, int64_t now, tank_error_t *err);
/* Tells c's watchers these keys changed (and counts the change). */
void st__coll_notify(st_coll_t *c, const char *const *keys, size_t n);
int st__read_begin(st_t *st, MDB_txn **txn, tank_error_t *err);
/* Pods' room for puts (st.c), and the packed status cache (st.c) of a
 * typed collection: loaded in slices after open, entries of deleted keys
 * dropped. */
int st__headroom(st_t *st, const st_pod_in_t *pods, size_t n, tank_error_t *err);
/* Marks c's cache not loaded; its load runs in slices on the loop. */
void st__cache_begin(st_coll_t *c);
void st__arm_load(st_t *st);
/* Loads what is left of c's cache now (readers of every status). */
int st__cache_complete(st_coll_t *c, tank_error_t *err);
/* key's entry, read from LMDB into the cache when the load has not
 * reached it; NULL with *rc 0 when key has no status. */
const cent_t *st__cache_lookup(st_coll_t *c, const char *key, int *rc, tank_error_t *err);
void st__cache_del(st_coll_t *c, const char *const *names, size_t n);
void st__cache_free(st_coll_t *c);
const cent_t *st__cache_find(st_coll_t *c, const char *name);
/* e's status (e not corrupt), unpacked with its own containers array
 * (free with st_status_clear).  -ENOMEM. */
int st__cache_status(const cent_t *e, st_status_t *out);
/* The queue entry of (c, key), found or created (key already valid);
 * NULL on -ENOMEM. */
/* A queued transition not forgotten since (pend_t.drop_below). */
static inline bool st__tr_live(const pend_t *pend, const pend_tr_t *tr)
{
	return tr->qseq >= pend[tr->ent].drop_below;
}
/* True when queued status changes wait for room (the file's end is in
 * the last quarter of the reserve, kept for deletes, and the map cannot
 * grow): a flush refuses them, a delete commits without them. */
bool st__status_waits(st_t *st);
pend_t *st__pend_find(st_coll_t *c, const char *key);
/* Drops p's queued status and the transitions queued for its name so far
 * (its drop_below mark); a later put queues afresh. */
void st__pend_drop(st_t *st, pend_t *p);
pend_t *st__pend_get(st_coll_t *c, const char *key);
/* Queues one transition (the ST_FLUSH_BATCH and ST_PENDING_MAX rules). */
int st__hist_add(st_coll_t *c, const char *key, const st_transition_t *t);
/* The uid of key's object (its desired record's in txn, else a typed
 * collection's cached status's), or "". */
void st__obj_uid(st_coll_t *c, MDB_txn *txn, const char *key, char uid[ST_UID_LEN + 1]);
/* Fills what the store knows of an entry of key's history: seq, and kind
 * (the collection's noun), key and uid (uid, may be NULL) when empty. */
void st__tr_fill(st_coll_t *c, const char *key, uint64_t seq, const char *uid,
		 st_transition_t *t);
int st__check_names(const char *const *names, size_t n, const char *what, tank_error_t *err);
void st__tr_key(unsigned char *k, const char *name, size_t len, uint64_t seq);
uint64_t st__tr_seq(const MDB_val *k);
bool st__tr_has_prefix(const MDB_val *k, const char *name, size_t len);
int st__tr_range(MDB_cursor *c, const char *name, size_t len, uint64_t *first, uint64_t *next);
int st__tr_delete_front(MDB_cursor *c, const char *name, size_t len, uint64_t count);
void st__arm_timer(st_t *st);

/* Writes everything queued (every collection's status and history) into txn; re-runnable after a map resize.  A
 * desired-state write calls it first so queued writes commit with it, and
 * then st__pending_done once the transaction has committed. */
int st__write_pending(st_t *st, MDB_txn *txn);
void st__pending_done(st_t *st);

/* The pods' collection (st_coll.c), opened by st_open. */
extern const st_coll_decl_t st__pods_decl;

void st__coll_free_all(st_t *st);

#endif
