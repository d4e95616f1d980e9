/*
 * st — tank's durable state: one LMDB environment under <data_dir>/store/.
 *
 * Named databases (schema in docs/store.md):
 *   pods          name -> {uid, name, spec (bin), generation, hash, created_at, updated_at,
 *                          prev_generation, prev_spec (bin): the version a changed spec replaced}
 *   pods.status   name -> status map (st_status_t)
 *   pods.history  name \0 seq(8 bytes, big-endian) ->
 *                 {seq, at, kind, key, uid, from, to, reason}
 *   meta          "schema_version" -> uint
 * Pods are a collection like any other (st_coll.h): the pod functions
 * below (st_apply, st_delete, st_pod_*, st_subscribe, st_status_*,
 * st_transition_add, st_history) are COMPATIBILITY WRAPPERS over the pods'
 * collection (st_pods()), kept so that callers outside store/ need no
 * change; they are to be removed once those callers use st_coll_*
 * directly.
 * Every value is a msgpack map with named keys: unknown keys are ignored and
 * missing keys take their zero default, so records written by an older or a
 * slightly newer tank of the same schema version still decode.
 *
 * Two durability classes.
 *   Desired state (st_apply, st_delete) is fsync-durable before the call
 *   returns; a call is one write transaction, all or nothing.  These calls
 *   BLOCK for one fsync.  (st_coll_commit_async: the same transaction run
 *   on the store's thread, durable before its callback is called.)
 *   Observed state (st_status_put, st_transition_add, st_status_forget) is
 *   queued in memory and returns at once; st_flush() commits the whole queue
 *   in one write transaction without fsync, and a small internal thread
 *   fsyncs the environment after each flush.  With a loop attached
 *   (st_attach_loop) the queue is flushed within flush_interval_ms.  Every
 *   read sees the queue, so a caller always reads its own writes.
 *
 * Status cache.  Every status record is kept packed in memory (written
 * through by st_status_put): status reads cost a copy, not a transaction
 * and a decode.  Memory: about 230 bytes per pod with one container.  The
 * cache is NOT read at open (1.4 µs a record, 140-230 ms at 100,000 pods,
 * before tankd could answer): once a loop is attached it is loaded in
 * slices of ST_LOAD_SLICE records per loop turn (st_loaded says when it is
 * whole).  Meanwhile answers stay whole: a read of one status that the
 * load has not reached reads its stored record (and caches it), and a
 * list or walk of every status loads the rest first, on the caller's turn.
 *
 * Threading.  An st_t is used from ONE thread (the daemon's loop thread):
 * no function here is thread-safe.  The store's own thread calls
 * mdb_env_sync() after group commits and for st_durable, and runs the
 * write transaction of an async commit (st_coll.h st_coll_commit_async:
 * an apply's puts, commit and fsync, on inputs copied for it; its
 * completion, watchers and callback are the loop's).  While such a
 * commit is in flight every write transaction the loop would begin waits
 * for it first (one LMDB writer; counted in st_usage), and the group
 * commit's timer lets it be (docs/store.md "Threads").  Pod and history
 * reads use LMDB read transactions, which never wait for writers (so
 * mdb_stat / mdb_dump may read a live store, and the loop reads on while
 * the thread writes); status reads use the cache.  Subscriber callbacks
 * run on the loop thread, after the commit, outside any transaction.
 *
 * Errors.  Functions return 0, a negative errno (-ENOMEM, -ENOSPC, -EROFS,
 * -EIO …) or a TANK_E* code; where a tank_error_t is taken it is filled
 * with a message naming what failed ("status record \"web\": corrupt
 * msgpack").  A failed write leaves the store usable and changes nothing.
 * Nothing here exits or aborts.
 */
#ifndef TANK_ST_H
#define TANK_ST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/kit_hist.h"
#include "common/tank_err.h"

struct ev_loop;

typedef struct st st_t;

/* 2: every pod record has a `uid` (object identity); a version-1 store is
 * migrated at open (each pod gets a uid, nothing else changes).
 * 3: pods are a collection like any other: their status and history live
 * in "pods.status" and "pods.history" (moved byte for byte from "status"
 * and "transitions" at open), and every history entry carries seq, kind,
 * key and uid (entries written before are read back as `legacy`). */
#define ST_SCHEMA_VERSION 3
#define ST_UID_LEN 36              /* UUIDv4 text: 8-4-4-4-12 hex digits */
#define ST_NAME_MAX 127            /* pod / container name, bytes */
#define ST_PHASE_MAX 23            /* "backing_off" and friends */
#define ST_KIND_MAX 23             /* a kind's name in history ("container") */
#define ST_KEY_MAX ST_NAME_MAX      /* a history entry's key ("web/httpd"; pod and container names are at most 63) */
#define ST_REASON_MAX 127          /* longer reasons are truncated on put */
#define ST_PROBE_MAX 63            /* a probe result, truncated likewise */
#define ST_HISTORY_DEFAULT 1000
#define ST_MAP_SIZE_DEFAULT (1u << 20)
#define ST_FLUSH_INTERVAL_DEFAULT 100   /* ms */
#define ST_FLUSH_BATCH 50000       /* queued transitions that force a flush */
#define ST_PENDING_MAX 100000      /* queued transitions before -ENOBUFS (~40 MB) */

/* Caller-owned; every zero field means "default".  Borrowed by st_open
 * only for the duration of the call (the callback pointers are kept). */
typedef struct st_options {
	uint32_t history_limit;      /* transitions kept per pod (1000) */
	size_t map_size;             /* initial LMDB map size (1 MiB); grows x2 */
	uint32_t flush_interval_ms;  /* group-commit period with a loop (100) */
	/* Called on the loop thread when a timer-driven flush fails (full
	 * disk…).  The queue is kept and retried at the next period.  The
	 * error is borrowed for the call.  Called once with err NULL when a
	 * flush works again after failing. */
	void (*on_flush_error)(void *ctx, const tank_error_t *err);
	void *on_flush_error_ctx;
	/* Tests: called on the store's thread before each async commit's
	 * transaction begins (st_coll_commit_async), so a test can hold the
	 * commit there and see what the loop does meanwhile.  NULL: none. */
	void (*commit_gate)(void *ctx);
	void *commit_gate_ctx;
} st_options_t;

/* Opens (creating as needed, mode 0700) <data_dir> and <data_dir>/store/,
 * takes <data_dir>/lock with flock(LOCK_EX|LOCK_NB) and writes our pid in it.
 * Blocks on file I/O.  Errors: TANK_ELOCKED ("data dir D is in use by pid
 * N"), TANK_ESCHEMA (store of a newer schema), TANK_ECORRUPT (unreadable
 * meta), negative errno (EROFS, EACCES, ENOSPC, ENOMEM …).  On success
 * *out is owned by the caller, to be released with st_close(). */
int st_open(const char *data_dir, const st_options_t *opts, st_t **out,
	    tank_error_t *err);

/* Flushes the queue, fsyncs, detaches from the loop, stops the sync thread,
 * closes the environment and releases the lock.  st is freed even when the
 * final flush fails (the return value says so; queued changes are then
 * lost).  Blocks.  NULL is a no-op. */
int st_close(st_t *st, tank_error_t *err);

/* The pods' collection (st_coll.h), opened by st_open; borrowed, freed by
 * st_close. */
struct st_coll *st_pods(st_t *st);

/* Path of the LMDB environment directory (<data_dir>/store); borrowed. */
const char *st_path(const st_t *st);

/* ---- desired state ---------------------------------------------------- */

/* The pod calls of this section and the next (st_apply, st_delete,
 * st_pod_get/list/foreach/foreach_from, st_subscribe/unsubscribe,
 * st_status_put/get/list/foreach/forget, st_transition_add, st_history)
 * are COMPATIBILITY WRAPPERS over the pods' collection (st_pods(), the
 * st_coll_* calls of st_coll.h): same signatures as before, to be removed
 * once callers outside store/ use the collection directly.  The types
 * (st_pod_t, st_status_t, st_transition_t) stay: they are every
 * collection's record shapes. */

typedef struct st_pod_in {
	const char *name;            /* 1..ST_NAME_MAX bytes, no NUL */
	const void *spec;            /* opaque (canonical msgpack map) */
	size_t spec_len;
} st_pod_in_t;

typedef enum st_action {
	ST_UNCHANGED = 0,            /* same spec bytes: generation kept */
	ST_CREATED,                  /* new name: generation 1 */
	ST_CONFIGURED,               /* different bytes: generation + 1 */
} st_action_t;

typedef struct st_apply_result {
	st_action_t action;
	uint64_t generation;         /* the pod's generation after the apply */
	char uid[ST_UID_LEN + 1];    /* the object's identity */
} st_apply_result_t;

/* A stored desired pod.  spec is malloc'ed and owned by the struct, and
 * followed by a NUL byte that spec_len does not count:
 * release with st_pod_clear(). */
/* Identity: a pod created under a name gets a fresh uid (a random UUIDv4,
 * never reused); applies to the same object keep it; a delete followed
 * by a create is a new object with a new uid and generation 1 again, so
 * "same object" is uid equality and "same version" is uid + generation. */
typedef struct st_pod {
	char name[ST_NAME_MAX + 1];
	char uid[ST_UID_LEN + 1];
	void *spec;
	size_t spec_len;
	uint64_t generation;
	uint64_t hash;               /* st_hash64 of the spec bytes */
	int64_t created_at;          /* ms since the epoch */
	int64_t updated_at;          /* last created/configured, ms */
	/* The generation before the last put that changed the spec, and its
	 * spec bytes, kept until the next such put: a process a previous
	 * tankd left running at that generation is taken over as it is and
	 * then replaced by the usual rules, not stopped as a stranger
	 * (DESIGN.md §11).  0 / NULL when the object never changed.  Filled
	 * by the scans (st_pod_foreach*, st_coll_scan*) only, borrowed as
	 * spec is there; NULL in a record from a get or a list. */
	uint64_t prev_generation;
	const void *prev_spec;
	size_t prev_spec_len;
} st_pod_t;

/* Writes a fresh random UUIDv4 (36 characters and a NUL) into out.
 * Blocks only if the kernel's entropy pool is not initialised yet. */
void st_uid_new(char out[ST_UID_LEN + 1]);

/* 64-bit content hash used for specs (FNV-1a, 64 bit). */
uint64_t st_hash64(const void *data, size_t len);

/* Applies n pods in one write transaction and one fsync (all or nothing),
 * together with any queued status changes.  results (caller-owned, n
 * entries) gets one entry per input, in order.  Subscribers are told the
 * names that were created or configured.  Blocks.  Errors: TANK_EINVALID
 * (bad or duplicate name, n == 0 is fine and does nothing), -ENOSPC,
 * -EROFS, -EIO, -ENOMEM; nothing was applied then. */
int st_apply(st_t *st, const st_pod_in_t *pods, size_t n,
	     st_apply_result_t *results, tank_error_t *err);

/* Deletes n desired pods, with their status and their history (a deleted
 * pod's name starts afresh if applied again), in one fsync'ed transaction.
 * Queued status changes of these names are dropped; other queued changes
 * commit with it, or, when they do not fit with it (a store that cannot
 * grow), stay queued for the next flush while the delete commits alone,
 * in halves if it does not fit whole (then one transaction each, and on
 * an error deleted says which went): a full disk does not refuse the
 * delete that makes room.  deleted
 * (caller-owned, n entries, may be NULL) says
 * which names existed.  Subscribers are told the deleted names.  Blocks;
 * errors as st_apply. */
int st_delete(st_t *st, const char *const *names, size_t n, bool *deleted,
	      tank_error_t *err);

/* Reads one pod into *out (caller-owned; st_pod_clear it).  TANK_ENOTFOUND,
 * TANK_ECORRUPT (message names the key), -ENOMEM. */
int st_pod_get(st_t *st, const char *name, st_pod_t *out, tank_error_t *err);

/* All pods, sorted by name.  *out is a malloc'ed array owned by the caller
 * (st_pod_list_free); *n may be 0 with *out NULL. */
int st_pod_list(st_t *st, st_pod_t **out, size_t *n, tank_error_t *err);
void st_pod_clear(st_pod_t *p);

/* Calls fn for every pod, sorted by name, without copying: p and p->spec
 * are borrowed from the map for the call only (do not st_pod_clear them).
 * For readers that look at every pod often (the reconciler's resync).
 * Returns 0, fn's nonzero value (which stops the walk), TANK_ECORRUPT
 * naming the key, or an LMDB error.  Must not call other st_* writes. */
typedef int (*st_pod_fn)(void *ctx, const st_pod_t *p);
int st_pod_foreach(st_t *st, st_pod_fn fn, void *ctx, tank_error_t *err);
/* The same from the first name after `after` (NULL or "": from the
 * start): a walk in slices stops with fn's value, keeps the last name it
 * saw and goes on from it later, each slice in its own read transaction
 * (names applied or deleted between slices are seen or not, by their
 * place in the order). */
int st_pod_foreach_from(st_t *st, const char *after, st_pod_fn fn, void *ctx,
			tank_error_t *err);
void st_pod_list_free(st_pod_t *pods, size_t n);

/* Desired-state subscribers.  fn runs after each st_apply / st_delete that
 * changed something, after the commit, on the caller's thread; names is
 * borrowed for the call.  fn may read the store and queue status changes;
 * it must not call st_apply, st_delete, st_unsubscribe or st_close.
 * Returns a subscription id > 0, or -ENOMEM. */
typedef void (*st_subscriber_fn)(void *ctx, const char *const *names,
				 size_t n);
int st_subscribe(st_t *st, st_subscriber_fn fn, void *ctx);
/* -ENOENT if id is unknown. */
int st_unsubscribe(st_t *st, int id);

/* ---- observed state ---------------------------------------------------- */

/* Phases are strings so that new kinds add their own without a schema
 * change; pods use "pending", "starting", "running", "backing_off",
 * "stopping", "terminal". */
typedef struct st_exit {
	bool present;                /* false: never exited (encoded nil) */
	int32_t code;                /* exit code, when exited normally */
	int32_t signal;              /* terminating signal, or 0 */
} st_exit_t;

typedef struct st_container_status {
	char name[ST_NAME_MAX + 1];
	char phase[ST_PHASE_MAX + 1];
	char reason[ST_REASON_MAX + 1];
	int32_t pid;                 /* host pid, 0 = none */
	uint64_t pid_start_time;     /* /proc/PID/stat field 22 (clock ticks) */
	uint32_t restarts;
	uint32_t retries;
	st_exit_t last_exit;
	int64_t started_at;          /* ms, 0 = never */
	uint64_t log_dropped;        /* log lines lost (full log disk), all time */
	bool ready;                  /* running and its readiness probe passed (or has none) */
	char probe[ST_PROBE_MAX + 1]; /* the last probe result ("" = none yet) */
	uint8_t outcome;             /* how it ended when terminal (the kind's enum; 0 = none) */
	/* ms: until then its startup and readiness probes are still inside
	 * their window (initial delay + failure threshold × period each) and
	 * may yet pass; 0 = no such probe, or it never started. */
	int64_t probe_until;
	/* the probe that gave up on its last run and stopped it (the kind's
	 * enum + 1: pod/pod_spec.h enum pod_probe_role); 0 = none */
	uint8_t gave_up;
} st_container_status_t;

/* containers is malloc'ed and owned by the struct (st_status_clear). */
typedef struct st_status {
	char name[ST_NAME_MAX + 1];
	char uid[ST_UID_LEN + 1];    /* the object this status belongs to ("" if unknown) */
	char phase[ST_PHASE_MAX + 1];
	char reason[ST_REASON_MAX + 1];
	uint32_t retries;
	uint32_t restarts;
	uint64_t generation;
	int64_t since;               /* ms, entered the current phase */
	int64_t next_restart_at;     /* ms, 0 = none */
	st_exit_t last_exit;
	bool ready;                  /* every container ready (DESIGN.md §8) */
	uint8_t outcome;             /* how it ended when terminal (the kind's enum; 0 = none) */
	bool restart;                /* a restart by hand is asked and not done yet */
	bool held;                   /* its owner (a stack) does not let it run */
	bool stopped;                /* the operator stopped it (tankctl stop) */
	st_container_status_t *containers;
	size_t n_containers;
} st_status_t;

/* One history entry, {seq, at, kind, key, uid, from, to, reason}
 * (DESIGN.md §7).  A history is kept per object key of a collection (a
 * pod's history holds the pod's entries and its containers'); within it
 * each entry says whose it is.  Callers fill at, from, to, reason and
 * may leave the rest zero: the store assigns seq (1, 2, … per history,
 * in the order added) and fills an empty kind with the collection's noun
 * ("pod"), an empty key with the history's key and an empty uid with the
 * object's uid (from its desired record, when it has one).  legacy marks
 * an entry written before schema 3: its kind, key and uid were derived
 * that way when read (docs/store.md). */
typedef struct st_transition {
	int64_t at;                  /* ms */
	char from[ST_PHASE_MAX + 1];
	char to[ST_PHASE_MAX + 1];
	char reason[ST_REASON_MAX + 1];
	uint64_t seq;                /* set by the store */
	char kind[ST_KIND_MAX + 1];  /* "pod", "container", "stack" … */
	char key[ST_KEY_MAX + 1];    /* "web", "web/httpd" */
	char uid[ST_UID_LEN + 1];    /* the object (a container: its pod's) */
	bool legacy;                 /* read from a pre-schema-3 record */
} st_transition_t;

/* Queues a deep copy of *s (replacing any queued status of that name) and
 * returns at once; s stays the caller's.  Errors: TANK_EINVALID (empty or
 * too long name), -ENOMEM.  Does not block. */
int st_status_put(st_t *st, const st_status_t *s);

/* Queues a transition into pod `name`'s history; the store assigns its
 * sequence number and fills kind ("pod"), key (name) and uid when left
 * empty.  A container's entry names itself (kind "container", key
 * "web/httpd") and goes into its pod's history.  History beyond
 * history_limit is pruned oldest first at flush.
 * Does not block, except that the ST_FLUSH_BATCH-th queued transition
 * flushes the queue on the spot (no fsync; tens of ms) so that a burst is
 * bounded by size as well as by time; a failure of that flush goes to
 * on_flush_error.  Errors: TANK_EINVALID, -ENOMEM, -ENOBUFS
 * (ST_PENDING_MAX transitions are already queued: the store cannot flush). */
int st_transition_add(st_t *st, const char *name, const st_transition_t *t);

/* Queues the removal of a pod's status and history (for the reconciler,
 * once a deleted pod has stopped).  Cancels earlier queued changes of that
 * name; later ones apply after it. */
int st_status_forget(st_t *st, const char *name);

/* Commits everything queued in one write transaction (no fsync; the sync
 * thread is woken).  On failure the queue is kept for the next try.  Blocks
 * briefly (no fsync).  Errors: -ENOSPC, -EROFS, -EIO, -ENOMEM. */
int st_flush(st_t *st, tank_error_t *err);

/* Number of queued status records plus transitions (tests, metrics). */
size_t st_pending(const st_t *st);

/* Arms an ev_timer on loop so the queue is flushed within
 * flush_interval_ms of the first queued change, and one that loads the
 * status cache a slice per turn.  Call on the loop thread;
 * the loop must outlive the attachment (st_detach_loop or st_close).
 * -EBUSY if already attached. */
int st_attach_loop(st_t *st, struct ev_loop *loop);
void st_detach_loop(st_t *st);
/* Whether every typed collection's status cache is loaded (see "Status
 * cache" above): tests, and what `daemon status` may say. */
bool st_loaded(const st_t *st);
/* Which of the store's watchers keep its loop alive now, as flags:
 * ST_HOLD_FLUSH (a flush is due), ST_HOLD_LOAD (the status cache is
 * still loading), ST_HOLD_COMMIT (a commit runs on the store's thread);
 * the trim timer and the fsync's answer never do.  0: the store alone
 * does not keep ev_run from returning.  For tests and diagnostics. */
#define ST_HOLD_FLUSH 1u
#define ST_HOLD_LOAD 2u
#define ST_HOLD_COMMIT 4u
unsigned st_loop_holds(const st_t *st);

/* One pod's status, queued changes included.  *out is caller-owned
 * (st_status_clear).  TANK_ENOTFOUND, TANK_ECORRUPT, -ENOMEM. */
int st_status_get(st_t *st, const char *name, st_status_t *out,
		  tank_error_t *err);
/* Every status, sorted by name, queued changes included.  *out is ONE
 * allocation holding the array and every element's containers, owned by
 * the caller: release it with st_status_list_free only (never
 * st_status_clear an element; st_status_copy one to keep it).  *n may be 0
 * with *out NULL.  A damaged stored record fails the whole list with
 * TANK_ECORRUPT naming it (it is never silently left out).  -ENOMEM. */
int st_status_list(st_t *st, st_status_t **out, size_t *n, tank_error_t *err);
/* Calls fn for every status in name order, queued changes included,
 * without copying: s is borrowed for the call.  fn returns 0 to go on,
 * nonzero to stop; it must not call st_ functions that change state (put,
 * forget, apply, delete, flush, close).  Returns 0, fn's nonzero value, or
 * TANK_ECORRUPT / -ENOMEM as st_status_list (then fn was not called). */
typedef int (*st_status_fn)(void *ctx, const st_status_t *s);
int st_status_foreach(st_t *st, st_status_fn fn, void *ctx, tank_error_t *err);
/* How many statuses st_status_foreach would walk now (the cache loaded
 * first; 0 with err set when that fails), and whether name has a status
 * (no copy made): to stream a list without holding it whole. */
size_t st_status_count(st_t *st, tank_error_t *err);
bool st_status_has(st_t *st, const char *name);
/* Frees what st_status_get / st_status_copy allocated in s. */
void st_status_clear(st_status_t *s);
/* Frees a st_status_list result (n is the count it returned). */
void st_status_list_free(st_status_t *s, size_t n);
/* Deep copy; dst must be uninitialised or cleared.  -ENOMEM. */
int st_status_copy(st_status_t *dst, const st_status_t *src);

/* The last `limit` transitions of a pod (0 = all kept), oldest first, queued
 * ones included, every field filled (seq numbered as the flush numbers).  *out is a malloc'ed array owned by the caller (free()).
 * An unknown pod yields *n == 0, not an error.  TANK_ECORRUPT, -ENOMEM. */
int st_history(st_t *st, const char *name, size_t limit,
	       st_transition_t **out, size_t *n, tank_error_t *err);

/* Current LMDB map size in bytes (grows on demand). */
size_t st_map_size(const st_t *st);

/* Room in the store.  The LMDB data file is allocated on disk up to the
 * map size before the map uses it, so writes inside the map never meet a
 * full disk; the map grows (x2, or into what the disk has less a
 * sixteenth kept for the data dir) only when the disk can hold it.
 * Applies stop at total - reserve, counting the statuses the stored
 * pods have not written yet (TANK_ESTOREFULL naming used and total bytes):
 * the reserve is for what must always succeed, status changes and
 * deletes.  used counts pages in use (freed pages are room).
 * flush_failures: status flushes failed since the last good one.
 * history_dropped: transitions not written because the store was past
 * total - reserve/2 and could not grow (history waits; status changes
 * and deletes keep the rest of the reserve).
 * history_trimmed: history entries deleted to let an apply in: on a
 * disk that cannot grow the map, an apply past the mark first cuts every
 * object's history to its newest 16 entries, then to its last one. */
typedef struct st_usage {
	size_t used, total, reserve;
	size_t high_water;           /* the file's pages in use or free, bytes */
	/* Of high_water, the free pages the next write can take (freed by
	 * commits before the last; LMDB reuses them before it takes pages at
	 * the file's end, which never comes down): room at the end as much
	 * as what lies past it.  Without them, statuses that had taken the
	 * end into the reserve kept every apply out after any delete. */
	size_t reusable;
	uint64_t flush_failures;
	uint64_t history_dropped;
	uint64_t history_trimmed;
	/* Times the map's pages were given back to the page cache: with a
	 * loop attached, once the store went ST_TRIM_QUIET_MS (2 s, st_int.h)
	 * without a transaction, the pages this process touched are unmapped
	 * (MADV_DONTNEED; they stay in the page cache, the next read takes a
	 * minor fault) so that tankd's PSS does not keep every page it ever
	 * read. */
	uint64_t map_trims;
	/* Times the environment was closed and opened again, once quiet,
	 * after a write transaction of ST_REOPEN_WRITES records or more
	 * (st_int.h): LMDB frees the pages its write transactions dirtied
	 * only when its environment closes (one apply of 10,000 pods: 12 MB
	 * kept until tankd exited).  A reopen also gives the map back, as a
	 * trim does (it is not counted in map_trims). */
	uint64_t env_reopens;
	/* Times a write on the loop (a flush, a put or delete, a grown map)
	 * had to wait for an async commit on the store's thread to end
	 * (st_coll_commit_async), and the time those waits held the loop. */
	uint64_t commit_waits;
	uint64_t commit_wait_ns;
} st_usage_t;
int st_usage(st_t *st, st_usage_t *out);

/* Calls fn(ctx, rc) once everything committed before this call is on
 * disk: one fsync, on the store's sync thread, covers every call made
 * before it started.  With a loop attached fn runs later, on the loop
 * thread (outside any actor's turn), with rc 0, or a negative errno when
 * the fsync failed (what was committed may then be lost at an OS crash);
 * when the loop is detached (st_detach_loop, st_close) before the fsync
 * is done, with -ECANCELED, and fn must then only release ctx.  Without
 * a loop the fsync runs in the call and fn is called before it returns.
 * Returns 0 (fn will be called exactly once) or -ENOMEM (it will not). */
int st_durable(st_t *st, void (*fn)(void *ctx, int rc), void *ctx);

/* How long the store's write transactions took, begin to commit: the
 * durable ones (applies and deletes, fsynced) and the group commits of
 * observed state.  Copies; call on the thread that writes. */
void st_commit_stats(const st_t *st, kit_hist_t *durable, kit_hist_t *flush);

#endif
