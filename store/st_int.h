/*
 * st_int — what store/'s files share and nothing outside store/ sees: the
 * environment handle, the write-transaction runner, and the history key
 * layout.  st.c owns the environment and the pod collection's typed status
 * cache; st_coll.c adds collections declared by kinds.
 */
#ifndef TANK_ST_INT_H
#define TANK_ST_INT_H

#include <ev.h>
#include <lmdb.h>
#include <msgpack.h>
#include <pthread.h>

#include "common/tank_map.h"
#include "store/st.h"
#include "store/st_coll.h"

#define MAP_SIZE_MAX ((size_t)1 << 40)
#define META_SCHEMA_KEY "schema_version"
#define SEQ_LEN 8
#define ST_FLUSH_SLICE 4096        /* names per timer flush (flush_some) */

/* One queued name: whether its status (held by the cache) must be written
 * and/or its status and history deleted first, plus the sequence
 * bookkeeping used while its transitions are written. */
typedef struct pend {
	char name[ST_NAME_MAX + 1];
	size_t namelen;
	bool forget;               /* delete status + history before the rest */
	bool has_status;           /* write the cached status */
	uint64_t first_seq;        /* valid while writing, see write_pending */
	uint64_t next_seq;
} pend_t;

typedef struct pend_tr {
	uint32_t ent;              /* index into st->pend */
	st_transition_t t;
} pend_tr_t;

/* A cached status.  corrupt != NULL marks a stored record that could not
 * be decoded: reads report that message instead of dropping the pod. */
typedef struct cent {
	st_status_t s;             /* s.containers owned */
	size_t namelen;
	char *corrupt;             /* owned message, or NULL */
	size_t idx;                /* its place in st->cache (swap-removal) */
} cent_t;

typedef struct sub {
	int id;
	st_subscriber_fn fn;
	void *ctx;
} sub_t;

/* The part of the map that applies leave free for status changes and
 * deletes: a quarter of it, at least 256 KiB. */
static inline size_t st__reserve(size_t map_size)
{
	size_t r = map_size / 4;
	return r < (256u << 10) ? (256u << 10) : r;
}

struct st {
	char *dir;                 /* <data_dir> */
	char *path;                /* <data_dir>/store */
	int lock_fd;
	MDB_env *env;
	MDB_dbi db_pods, db_status, db_trans, db_meta;
	size_t map_size;
	bool flush_failing;        /* the last flush failed (told once it works) */
	uint64_t flush_failures;   /* failed flushes since the last good one */
	uint64_t history_dropped;  /* transitions not written: store full */
	size_t write_limit;        /* st__write_pending: first N names only (0: all) */
	uint32_t history_limit;
	uint32_t flush_ms;
	void (*on_flush_error)(void *, const tank_error_t *);
	void *on_flush_error_ctx;

	msgpack_sbuffer buf;       /* encode scratch */

	/* The queue: entries in insertion order, hashed by name. */
	pend_t *pend;
	size_t n_pend, cap_pend;
	tank_map_t pend_by_name;   /* name -> entry index + 1 */
	pend_tr_t *trs;
	size_t n_trs, cap_trs;

	/* Every status, decoded: loaded at open, written through by puts.
	 * Status reads never touch LMDB: they are the reconciler's hot path
	 * and a list of 10,000 must take a few milliseconds, while decoding
	 * them costs about half a microsecond each.  The store is the only
	 * writer of its environment (flock), so the cache cannot go stale. */
	cent_t **cache;
	size_t n_cache, cap_cache;
	tank_map_t cache_by_name;  /* name -> cent_t (borrowed from cache[]) */
	cent_t **order;            /* cache sorted by name, valid if order_ok */
	size_t cap_order;
	bool order_ok;

	struct st_coll *pods;      /* the pods' collection (st_coll.c) */

	/* Collections declared by kinds (st_coll.c): their queued status and
	 * history writes, committed with everything else at each flush. */
	struct st_gq *gq;
	size_t n_gq, cap_gq;
	tank_map_t gq_last;        /* "<coll>\x1f<key>" -> last queued status + 1 */
	struct st_coll **colls;
	size_t n_colls;

	struct ev_loop *loop;
	ev_timer timer;

	/* Sync thread.  q_mu guards the request flags; env_mu is held around
	 * every mdb_env_sync, every NOSYNC flag toggle and every resize so the
	 * thread never syncs while the environment is being reconfigured. */
	pthread_t sync_thr;
	bool sync_started;
	pthread_mutex_t q_mu, env_mu;
	pthread_cond_t q_cv;
	bool sync_req, sync_stop;
	int sync_err;              /* last background sync failure, LMDB rc */
};

int64_t st__now_ms(void);
bool st__is_mdb_err(int rc);
int st__mdb_fail(tank_error_t *err, int rc, const char *what);
int st__put_buf(st_t *st, MDB_txn *txn, MDB_dbi db, const void *key, size_t klen);
typedef int (*txn_fn)(st_t *st, MDB_txn *txn, void *arg, tank_error_t *err);
int st__write_txn(st_t *st, bool durable, const char *what, txn_fn fn, void *arg,
		  tank_error_t *err);
int st__read_begin(st_t *st, MDB_txn **txn, tank_error_t *err);
/* Pods' bookkeeping around their collection's writes (st.c): room for
 * the puts, and the decoded status cache of deleted names. */
int st__headroom(st_t *st, const st_pod_in_t *pods, size_t n, tank_error_t *err);
void st__cache_del(st_t *st, const char *const *names, size_t n);
st_coll_t *st__pods(st_t *st);
int st__check_names(const char *const *names, size_t n, const char *what, tank_error_t *err);
void st__tr_key(unsigned char *k, const char *name, size_t len, uint64_t seq);
uint64_t st__tr_seq(const MDB_val *k);
bool st__tr_has_prefix(const MDB_val *k, const char *name, size_t len);
int st__tr_range(MDB_cursor *c, const char *name, size_t len, uint64_t *first, uint64_t *next);
int st__tr_delete_front(MDB_cursor *c, const char *name, size_t len, uint64_t count);
void st__arm_timer(st_t *st);

/* Writes everything queued (every collection's status and history, and
 * the pods' typed queue) into txn; re-runnable after a map resize.  A
 * desired-state write calls it first so queued writes commit with it, and
 * then st__pending_done once the transaction has committed. */
int st__write_pending(st_t *st, MDB_txn *txn);
void st__pending_done(st_t *st);

/* The pods' collection (st_coll.c), opened by st_open. */
extern const st_coll_decl_t st__pods_decl;

/* st_coll.c's part of a flush and of its bookkeeping. */
int st__coll_write_pending(st_t *st, MDB_txn *txn);
void st__coll_pend_clear(st_t *st);
void st__coll_free_all(st_t *st);

#endif
