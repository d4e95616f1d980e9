#include "store/st.h"

#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/random.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "store/st_codec.h"

#include "store/st_int.h"


int64_t st__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t st_hash64(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

bool st__is_mdb_err(int rc)
{
	return rc <= MDB_KEYEXIST && rc >= MDB_LAST_ERRCODE;
}

/* LMDB returns positive errnos or its own MDB_* codes; tank wants negative
 * errnos.  MDB_* failures other than the ones handled by the callers mean
 * the store cannot be used as is: they are reported as -EIO with LMDB's
 * text. */
int st__mdb_fail(tank_error_t *err, int rc, const char *what)
{
	if (rc > 0)
		return tank_error_set(err, -rc, "%s: %s", what, strerror(rc));
	if (st__is_mdb_err(rc))
		return tank_error_set(err, -EIO, "%s: %s", what,
				      mdb_strerror(rc));
	return tank_error_set(err, rc, "%s: %s", what, tank_strerror(rc));
}

static bool name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	return n > 0 && n <= ST_NAME_MAX;
}

/* ---- the queue ---------------------------------------------------------- */

/* Queue entries are found through their collection's map (the daemon's one
 * map: key -> entry index + 1). */
pend_t *st__pend_find(st_coll_t *c, const char *name)
{
	uintptr_t at = c->st->n_pend ? (uintptr_t)tank_map_get(&c->pend, name) : 0;
	return at ? &c->st->pend[at - 1] : NULL;
}

pend_t *st__pend_get(st_coll_t *c, const char *name)
{
	st_t *st = c->st;
	size_t len = strlen(name);
	pend_t *p = st__pend_find(c, name);
	if (p)
		return p;
	if (st->n_pend == st->cap_pend) {
		size_t cap = st->cap_pend ? st->cap_pend * 2 : 16;
		pend_t *n = realloc(st->pend, cap * sizeof *n);
		if (!n)
			return NULL;
		st->pend = n;
		st->cap_pend = cap;
	}
	if (tank_map_put(&c->pend, name, (void *)(uintptr_t)(st->n_pend + 1), NULL) < 0)
		return NULL;
	p = &st->pend[st->n_pend++];
	memset(p, 0, sizeof *p);
	p->c = c;
	memcpy(p->name, name, len + 1);
	p->namelen = len;
	return p;
}

/* Empties the queue's first n entries' maps (all of them: every map). */
static void pend_maps_clear(st_t *st)
{
	for (size_t i = 0; i < st->n_colls; i++)
		tank_map_clear(&st->colls[i]->pend);
}

/* Queue entries (names, transitions) whose room a flush keeps for the
 * next one; above, it is given back (pend_clear). */
#define ST_QUEUE_KEEP 1024

static void pend_clear(st_t *st)
{
	for (size_t i = 0; i < st->n_pend; i++)
		free(st->pend[i].val);
	st->n_pend = 0;
	st->n_trs = 0;
	pend_maps_clear(st);
	/* A burst should not pin its peak memory forever: the start of
	 * 10,000 pods queues ~60,000 transitions (392 B each) and 10,000
	 * names, and capacities of 65,536 kept ~25 MB, 2.5 KiB a pod, for
	 * as long as tankd ran (issue 38 item 2).  Past ST_QUEUE_KEEP
	 * entries the arrays go, and the next burst grows them again
	 * (doubling: a few reallocs). */
	if (st->cap_trs > ST_QUEUE_KEEP) {
		free(st->trs);
		st->trs = NULL;
		st->cap_trs = 0;
	}
	if (st->cap_pend > ST_QUEUE_KEEP) {
		free(st->pend);
		st->pend = NULL;
		st->cap_pend = 0;
		for (size_t i = 0; i < st->n_colls; i++)
			if (st->colls[i]->pend.cap > ST_QUEUE_KEEP) {
				tank_map_destroy(&st->colls[i]->pend);
				tank_map_init(&st->colls[i]->pend);
			}
	}
}

size_t st_pending(const st_t *st)
{
	size_t n = st->n_trs;
	for (size_t i = 0; i < st->n_pend; i++)
		n += st->pend[i].has_status || st->pend[i].forget;
	return n;
}

/* ---- the typed status cache ---------------------------------------------- */

static void status_sanitize(st_status_t *s);

/* The packed record (cent_t.rec): rec_head, then nctrs rec_ctr, then the
 * strings uid, phase, reason and, per container, name, phase, reason,
 * probe: each NUL-terminated, as long as it is.  Copied in and out with
 * memcpy (rec is not aligned past the head). */
typedef struct rec_head {
	uint64_t generation;
	int64_t since, next_restart_at;
	uint32_t retries, restarts;
	st_exit_t last_exit;
	bool ready, restart, held, stopped;
	uint8_t outcome;
} rec_head_t;

typedef struct rec_ctr {
	uint64_t pid_start_time, log_dropped;
	int64_t started_at, probe_until;
	int32_t pid;
	uint32_t restarts, retries;
	st_exit_t last_exit;
	bool ready;
	uint8_t outcome, gave_up;
} rec_ctr_t;

static size_t rec_str(unsigned char *dst, const char *s)
{
	size_t n = strlen(s) + 1;
	if (dst)
		memcpy(dst, s, n);
	return n;
}

/* Packs s (sanitized: every string ends within its buffer) into dst, or
 * only counts when dst is NULL.  Returns the size. */
static size_t rec_pack(unsigned char *dst, const st_status_t *s)
{
	size_t at = sizeof(rec_head_t) + s->n_containers * sizeof(rec_ctr_t);
	if (dst) {
		rec_head_t h = {
			.generation = s->generation, .since = s->since,
			.next_restart_at = s->next_restart_at, .retries = s->retries,
			.restarts = s->restarts, .last_exit = s->last_exit,
			.ready = s->ready, .restart = s->restart, .held = s->held,
			.stopped = s->stopped, .outcome = s->outcome,
		};
		memcpy(dst, &h, sizeof h);
		for (size_t i = 0; i < s->n_containers; i++) {
			const st_container_status_t *c = &s->containers[i];
			rec_ctr_t r = {
				.pid_start_time = c->pid_start_time,
				.log_dropped = c->log_dropped, .started_at = c->started_at,
				.probe_until = c->probe_until, .pid = c->pid,
				.restarts = c->restarts, .retries = c->retries,
				.last_exit = c->last_exit, .ready = c->ready,
				.outcome = c->outcome, .gave_up = c->gave_up,
			};
			memcpy(dst + sizeof h + i * sizeof r, &r, sizeof r);
		}
	}
	at += rec_str(dst ? dst + at : NULL, s->uid);
	at += rec_str(dst ? dst + at : NULL, s->phase);
	at += rec_str(dst ? dst + at : NULL, s->reason);
	for (size_t i = 0; i < s->n_containers; i++) {
		const st_container_status_t *c = &s->containers[i];
		at += rec_str(dst ? dst + at : NULL, c->name);
		at += rec_str(dst ? dst + at : NULL, c->phase);
		at += rec_str(dst ? dst + at : NULL, c->reason);
		at += rec_str(dst ? dst + at : NULL, c->probe);
	}
	return at;
}

/* Copies the string at *src into dst (it fits: it was packed from a
 * buffer of the same size) and steps past it. */
static void rec_unstr(char *dst, size_t cap, const unsigned char **src)
{
	size_t n = strnlen((const char *)*src, cap - 1);
	memcpy(dst, *src, n);
	dst[n] = '\0';
	*src += n + 1;
}

/* Unpacks e (not corrupt) into out; its containers go to cs, which has
 * room for e->nctrs. */
static void rec_unpack(const cent_t *e, st_status_t *out, st_container_status_t *cs)
{
	const unsigned char *r = e->rec;
	rec_head_t h;
	memcpy(&h, r, sizeof h);
	memset(out, 0, sizeof *out);
	memcpy(out->name, e->name, (size_t)e->namelen + 1);
	out->generation = h.generation;
	out->since = h.since;
	out->next_restart_at = h.next_restart_at;
	out->retries = h.retries;
	out->restarts = h.restarts;
	out->last_exit = h.last_exit;
	out->ready = h.ready;
	out->restart = h.restart;
	out->held = h.held;
	out->stopped = h.stopped;
	out->outcome = h.outcome;
	out->containers = e->nctrs ? cs : NULL;
	out->n_containers = e->nctrs;
	for (uint32_t i = 0; i < e->nctrs; i++) {
		rec_ctr_t c;
		memcpy(&c, r + sizeof h + i * sizeof c, sizeof c);
		memset(&cs[i], 0, sizeof cs[i]);
		cs[i].pid_start_time = c.pid_start_time;
		cs[i].log_dropped = c.log_dropped;
		cs[i].started_at = c.started_at;
		cs[i].probe_until = c.probe_until;
		cs[i].pid = c.pid;
		cs[i].restarts = c.restarts;
		cs[i].retries = c.retries;
		cs[i].last_exit = c.last_exit;
		cs[i].ready = c.ready;
		cs[i].outcome = c.outcome;
		cs[i].gave_up = c.gave_up;
	}
	r += sizeof h + e->nctrs * sizeof(rec_ctr_t);
	rec_unstr(out->uid, sizeof out->uid, &r);
	rec_unstr(out->phase, sizeof out->phase, &r);
	rec_unstr(out->reason, sizeof out->reason, &r);
	for (uint32_t i = 0; i < e->nctrs; i++) {
		rec_unstr(cs[i].name, sizeof cs[i].name, &r);
		rec_unstr(cs[i].phase, sizeof cs[i].phase, &r);
		rec_unstr(cs[i].reason, sizeof cs[i].reason, &r);
		rec_unstr(cs[i].probe, sizeof cs[i].probe, &r);
	}
}

/* Unpacks e (not corrupt) into out with its own containers array, as
 * st_status_copy would (free with st_status_clear).  -ENOMEM. */
static int rec_get(const cent_t *e, st_status_t *out)
{
	st_container_status_t *cs = NULL;
	if (e->nctrs && !(cs = malloc(e->nctrs * sizeof *cs)))
		return -ENOMEM;
	rec_unpack(e, out, cs);
	return 0;
}

/* Packs s (sanitized) as e's record, replacing the one it had.  -ENOMEM
 * leaves e as it was. */
static int rec_set(cent_t *e, const st_status_t *s)
{
	size_t len = rec_pack(NULL, s);
	unsigned char *r = malloc(len);
	if (!r)
		return -ENOMEM;
	rec_pack(r, s);
	free(e->rec);
	e->rec = r;
	e->nctrs = (uint32_t)s->n_containers;
	free(e->corrupt);
	e->corrupt = NULL;
	return 0;
}

static cent_t *cache_find(st_coll_t *c, const char *name)
{
	return c->n_cache ? tank_map_get(&c->cache_by_name, name) : NULL;
}

const cent_t *st__cache_find(st_coll_t *c, const char *name)
{
	return cache_find(c, name);
}

int st__cache_status(const cent_t *e, st_status_t *out)
{
	return rec_get(e, out);
}

/* Finds or adds the entry of name (already validated; len ≤ ST_NAME_MAX);
 * NULL on -ENOMEM.  A new entry has no record yet (rec NULL): the caller
 * sets one or a corrupt message. */
static cent_t *cache_get(st_coll_t *co, const char *name, size_t len)
{
	cent_t *c = cache_find(co, name);
	if (c)
		return c;
	if (co->n_cache == co->cap_cache) {
		size_t cap = co->cap_cache ? co->cap_cache * 2 : 64;
		cent_t **n = realloc(co->cache, cap * sizeof *n);
		if (!n)
			return NULL;
		co->cache = n;
		co->cap_cache = cap;
	}
	if (!(c = calloc(1, sizeof *c + len + 1)))
		return NULL;
	memcpy(c->name, name, len);
	c->name[len] = '\0';
	c->namelen = (uint16_t)len;
	if (tank_map_put(&co->cache_by_name, c->name, c, NULL) < 0) {
		free(c);
		return NULL;
	}
	c->idx = (uint32_t)co->n_cache;
	co->cache[co->n_cache++] = c;
	co->order_ok = false;
	return c;
}

static void cent_free(cent_t *c)
{
	free(c->rec);
	free(c->corrupt);
	free(c);
}

/* Removes the entries of names.  O(1) per name: the last entry takes the
 * removed one's place (the array has no order; lists sort `order` when
 * asked).  It compacted the whole array for every call, and a delete of
 * 100,000 pods, which forgets them one by one, spent seconds on it in
 * turns of up to 385 ms. */
void st__cache_del(st_coll_t *co, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		cent_t *c = cache_find(co, names[i]);
		if (!c)
			continue;
		tank_map_del(&co->cache_by_name, c->name);
		cent_t *last = co->cache[--co->n_cache];
		co->cache[c->idx] = last;
		last->idx = c->idx;
		cent_free(c);
		co->order_ok = false;
	}
}

static int cmp_cent(const void *a, const void *b)
{
	return strcmp((*(cent_t *const *)a)->name,
		      (*(cent_t *const *)b)->name);
}

static int cache_order(st_coll_t *c)
{
	if (c->order_ok)
		return 0;
	if (c->n_cache > c->cap_order) {
		cent_t **n = realloc(c->order, c->n_cache * sizeof *n);
		if (!n)
			return -ENOMEM;
		c->order = n;
		c->cap_order = c->n_cache;
	}
	if (c->n_cache) {
		memcpy(c->order, c->cache, c->n_cache * sizeof *c->order);
		qsort(c->order, c->n_cache, sizeof *c->order, cmp_cent);
	}
	c->order_ok = true;
	return 0;
}

void st__cache_free(st_coll_t *c)
{
	for (size_t i = 0; i < c->n_cache; i++)
		cent_free(c->cache[i]);
	free(c->cache);
	tank_map_destroy(&c->cache_by_name);
	free(c->order);
	c->cache = c->order = NULL;
	c->n_cache = c->cap_cache = c->cap_order = 0;
}

/* ---- the cache's load, in slices -------------------------------------------
 *
 * Opening a store used to decode every stored status into the cache before
 * returning: 1.4 µs a pod, 140-230 ms at 100,000, all before tankd's socket
 * existed.  Now st_coll_open only notes that the cache is not loaded yet;
 * once a loop is attached, a timer loads ST_LOAD_SLICE records per turn,
 * and for ST_LOAD_SLICE_US at most (the precise clock, read every 32
 * records: 2,048 records of a cold 100,000-pod map took 22-40 ms on a
 * loaded machine, before tankd's first answer), from the key after the
 * last one it read, and readers keep
 * their answers whole meanwhile:
 *   - one name (st_status_get, st_coll_status_get, st__obj_uid): the cache,
 *     else the record read from LMDB and put in the cache (cache_lookup);
 *   - every name (list, foreach): the rest is loaded at once first
 *     (st__cache_complete), on the caller's turn.
 * An entry already in the cache is never replaced by the loader: it was
 * put (newer than the stored record) or looked up (the same).  A name
 * whose status was forgotten (queued `forget`, not yet committed) is
 * neither loaded nor looked up: its stored record is about to go. */

/* Fills e from one stored record (k, v).  0, or -ENOMEM / a decode error
 * other than corruption (err set). */
static int cache_fill(cent_t *e, const MDB_val *k, const MDB_val *v, tank_error_t *err)
{
	st_status_t s;
	tank_error_t de;
	int drc = st__dec_status(v->mv_data, v->mv_size, k->mv_data, k->mv_size, &s, &de);
	if (drc == 0) {
		status_sanitize(&s);
		int rc = rec_set(e, &s);
		st_status_clear(&s);
		return rc ? tank_error_set(err, -ENOMEM, "out of memory") : 0;
	}
	if (drc == TANK_ECORRUPT)
		return (e->corrupt = strdup(de.msg)) ? 0 :
			tank_error_set(err, -ENOMEM, "out of memory");
	return tank_error_set(err, drc, "%s", de.msg);
}

/* A name whose forget is queued: its stored status is as good as gone. */
static bool forgotten(st_coll_t *co, const char *name)
{
	const pend_t *p = st__pend_find(co, name);
	return p && p->forget && !p->has_status;
}

/* Loads up to max records (0: all that are left) after the last one
 * loaded, until kit_mono_ns() passes end_ns (0: no bound).  co->loaded
 * once the end is reached. */
static int load_some(st_coll_t *co, size_t max, uint64_t end_ns, tank_error_t *err)
{
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, v;
	int rc = st__read_begin(co->st, &txn, err), r;
	if (rc)
		return rc;
	if ((rc = mdb_cursor_open(txn, co->db_status, &c))) {
		mdb_txn_abort(txn);
		return st__mdb_fail(err, rc, "store: load status");
	}
	if (co->load_keylen) {
		k = (MDB_val){ co->load_keylen, co->load_key };
		r = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (r == 0 && k.mv_size == co->load_keylen &&
		    memcmp(k.mv_data, co->load_key, k.mv_size) == 0)
			r = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	} else {
		r = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	}
	for (size_t n = 0; r == 0 && !rc && (!max || n < max) &&
	     !(end_ns && n && (n & 31) == 0 && kit_mono_ns() > end_ns);
	     n++, r = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		size_t len = k.mv_size > ST_NAME_MAX ? ST_NAME_MAX : k.mv_size;
		char name[ST_NAME_MAX + 1];
		memcpy(name, k.mv_data, len);
		name[len] = '\0';
		if (strlen(name) != len || len == 0)
			st__key_repr(name, sizeof name, k.mv_data, k.mv_size);
		/* LMDB keys are at most 511 bytes: the resume key fits. */
		co->load_keylen = k.mv_size < sizeof co->load_key ? k.mv_size : sizeof co->load_key;
		memcpy(co->load_key, k.mv_data, co->load_keylen);
		if (cache_find(co, name) || forgotten(co, name))
			continue;
		cent_t *e = cache_get(co, name, strlen(name));
		if (!e) {
			rc = tank_error_set(err, -ENOMEM, "out of memory");
			break;
		}
		if ((rc = cache_fill(e, &k, &v, err)) && !e->rec && !e->corrupt) {
			const char *nm = e->name;
			st__cache_del(co, &nm, 1);
		}
	}
	if (!rc && r == MDB_NOTFOUND)
		co->loaded = true;
	else if (!rc && r)
		rc = st__mdb_fail(err, r, "store: load status");
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return rc;
}

void st__cache_begin(st_coll_t *co)
{
	co->loaded = false;
	co->load_keylen = 0;
	if (co->st->loop)
		st__arm_load(co->st);
}

int st__cache_complete(st_coll_t *co, tank_error_t *err)
{
	return co->loaded ? 0 : load_some(co, 0, 0, err);
}

bool st_loaded(const st_t *st)
{
	for (size_t i = 0; i < st->n_colls; i++)
		if (st->colls[i]->decl->typed_status && !st->colls[i]->loaded)
			return false;
	return true;
}

/* name's entry: the cache's, else (cache not loaded yet) its stored
 * record read in txn (or a read transaction of its own when txn is NULL)
 * and put in the cache.  NULL with *rc 0 when it has none. */
static cent_t *cache_lookup(st_coll_t *co, const char *name, MDB_txn *txn, int *rc,
			    tank_error_t *err)
{
	cent_t *e = cache_find(co, name);
	MDB_txn *own = NULL;
	MDB_val k = { strlen(name), (void *)name }, v;

	*rc = 0;
	if (e || co->loaded || forgotten(co, name))
		return e;
	if (!txn && (*rc = st__read_begin(co->st, &own, err)))
		return NULL;
	int r = mdb_get(txn ? txn : own, co->db_status, &k, &v);
	if (r == 0) {
		if (!(e = cache_get(co, name, k.mv_size)))
			*rc = tank_error_set(err, -ENOMEM, "out of memory");
		else if ((*rc = cache_fill(e, &k, &v, err))) {
			if (!e->rec && !e->corrupt)
				st__cache_del(co, &name, 1);
			e = NULL;
		}
	} else if (r != MDB_NOTFOUND) {
		*rc = st__mdb_fail(err, r, "store: read status");
	}
	if (own)
		mdb_txn_abort(own);
	return e;
}

const cent_t *st__cache_lookup(st_coll_t *co, const char *name, int *rc, tank_error_t *err)
{
	return cache_lookup(co, name, NULL, rc, err);
}

/* One slice of the first collection still loading, then again after the
 * loop has polled while any is left.  A failure stops the slices: the
 * readers that need everything load the rest themselves and report it. */
static void load_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	st_t *st = w->data;
	(void)loop;
	(void)revents;
	for (size_t i = 0; i < st->n_colls; i++) {
		st_coll_t *co = st->colls[i];
		tank_error_t e;
		if (!co->decl->typed_status || co->loaded)
			continue;
		if (load_some(co, ST_LOAD_SLICE, kit_mono_ns() + ST_LOAD_SLICE_US * 1000ull, &e))
			return;
		break;
	}
	if (!st_loaded(st))
		st__arm_load(st);
}

void st__arm_load(st_t *st)
{
	if (st->loop && !ev_is_active(&st->load_timer)) {
		ev_timer_set(&st->load_timer, 0., 0.);
		ev_timer_start(st->loop, &st->load_timer);
	}
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void flush_failed(st_t *st, const tank_error_t *e);
static bool env_reopen(st_t *st);

/* The trim timer never keeps the loop alive: it holds no reference of
 * the loop exactly while it is active (ev_unref after its start, ev_ref
 * before its stop).  It repeats, so libev never stops it by itself: as a
 * one-shot timer it was stopped by libev at its expiry, a transaction in
 * a callback run before its own in that turn of the loop armed it again
 * (and unref'd), and its callback, finding the store touched, unref'd
 * once more for a start that did nothing.  Each such turn took a
 * reference from the loop for good, until tankd's loop had none left
 * and ended by itself (found by a churn of web clients, SAN build). */
static void trim_arm(st_t *st)
{
	if (ev_is_active(&st->trim))
		return;
	ev_timer_set(&st->trim, ST_TRIM_QUIET_MS / 1000.0, ST_TRIM_QUIET_MS / 1000.0);
	ev_timer_start(st->loop, &st->trim);
	ev_unref(st->loop);
}

static void trim_disarm(st_t *st)
{
	if (!ev_is_active(&st->trim))
		return;
	ev_ref(st->loop);
	ev_timer_stop(st->loop, &st->trim);
}

/* Every transaction says so: the trim timer runs only while there is
 * something it may give back (no wake-up on a store nobody touches). */
static void st__touch(st_t *st)
{
	st->touched = true;
	if (st->loop && !ev_is_active(&st->trim))
		trim_arm(st);
}

/* madvise(MADV_DONTNEED) over this process's mappings of the store's
 * data file, found by device and inode in /proc/self/maps: LMDB does not
 * say where its map is (mdb_env_info's me_mapaddr is set only with
 * MDB_FIXEDMAP).  Read once per trim, seconds apart.  The number of
 * ranges given back, or -errno. */
static int map_give_back(st_t *st)
{
	struct stat sb;
	mdb_filehandle_t fd;
	char line[512];
	int n = 0;

	if (!st->env || mdb_env_get_fd(st->env, &fd) || fstat(fd, &sb) < 0)
		return -EIO;
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi, ino;
		unsigned maj, mnr;
		if (sscanf(line, "%lx-%lx %*s %*s %x:%x %lu", &lo, &hi, &maj, &mnr, &ino) != 5 ||
		    ino != (unsigned long)sb.st_ino || makedev(maj, mnr) != sb.st_dev)
			continue;
		if (madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0)
			n++;
	}
	fclose(f);
	return n;
}

/* The store was touched during the last period: wait another.  Else
 * nothing touched it for a whole period: its pages go out of this
 * process's page tables.  They stay in the page cache (the file is
 * unchanged: without MDB_WRITEMAP the map is read-only, written with
 * pwrite), so the next read takes a minor fault per page, not a disk
 * read.  Without this, every page a resync, an apply or a commit ever
 * read stays in tankd's PSS: at 10,000 pods 12 MB, 1.2 KiB a pod. */
static void trim_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	st_t *st = w->data;
	(void)loop; (void)revents;

	if (st->touched || st->ac) {
		st->touched = false;
		return;                /* another period: it repeats */
	}
	trim_disarm(st);
	/* A reopen gives the map back too: it goes with the environment. */
	if (st->max_txn_writes >= ST_REOPEN_WRITES && env_reopen(st))
		return;
	if (map_give_back(st) > 0)
		st->trims++;
}

void st__arm_timer(st_t *st)
{
	if (st->loop && !ev_is_active(&st->timer)) {
		ev_timer_set(&st->timer, st->flush_ms / 1000.0, 0.);
		ev_timer_start(st->loop, &st->timer);
	}
}

/* ---- status helpers ----------------------------------------------------- */

void st_status_clear(st_status_t *s)
{
	if (!s)
		return;
	free(s->containers);
	s->containers = NULL;
	s->n_containers = 0;
}

void st_status_list_free(st_status_t *s, size_t n)
{
	(void)n; /* one block, see st_status_list */
	free(s);
}

int st_status_copy(st_status_t *dst, const st_status_t *src)
{
	st_container_status_t *c = NULL;
	if (src->n_containers) {
		c = malloc(src->n_containers * sizeof *c);
		if (!c)
			return -ENOMEM;
		memcpy(c, src->containers, src->n_containers * sizeof *c);
	}
	*dst = *src;
	dst->containers = c;
	return 0;
}

/* Puts always store NUL-terminated fields even if the caller forgot. */
static void status_sanitize(st_status_t *s)
{
	s->name[ST_NAME_MAX] = s->phase[ST_PHASE_MAX] = '\0';
	s->reason[ST_REASON_MAX] = '\0';
	for (size_t i = 0; i < s->n_containers; i++) {
		st_container_status_t *c = &s->containers[i];
		c->name[ST_NAME_MAX] = c->phase[ST_PHASE_MAX] = '\0';
		c->reason[ST_REASON_MAX] = '\0';
		c->probe[ST_PROBE_MAX] = '\0';
	}
}

int st_coll_status_put_typed(st_coll_t *co, const st_status_t *s)
{
	st_status_t copy;
	if (!co->decl->typed_status || !s || strnlen(s->name, sizeof s->name) == 0 ||
	    strnlen(s->name, sizeof s->name) > ST_NAME_MAX ||
	    (s->n_containers && !s->containers))
		return TANK_EINVALID;
	if (st_status_copy(&copy, s))
		return -ENOMEM;
	status_sanitize(&copy);
	size_t len = strlen(copy.name);
	pend_t *p = st__pend_get(co, copy.name);
	cent_t *c = p ? cache_get(co, copy.name, len) : NULL;
	int rc = c ? rec_set(c, &copy) : -ENOMEM;
	st_status_clear(&copy);
	if (rc) {
		/* A new entry without a record would read as nothing. */
		if (c && !c->rec && !c->corrupt) {
			const char *nm = copy.name;
			st__cache_del(co, &nm, 1);
		}
		return -ENOMEM;
	}
	p->has_status = true;
	st__arm_timer(co->st);
	return 0;
}

int st_status_put(st_t *st, const st_status_t *s)
{
	return st_coll_status_put_typed(st->pods, s);
}

static void flush_failed(st_t *st, const tank_error_t *e)
{
	if (st->on_flush_error)
		st->on_flush_error(st->on_flush_error_ctx, e);
}

/* The one way a transition is queued, for every collection. */
int st__hist_add(st_coll_t *c, const char *name, const st_transition_t *t)
{
	st_t *st = c->st;
	if (!name_ok(name) || !t)
		return TANK_EINVALID;
	if (st->n_trs == ST_FLUSH_BATCH) {
		/* Only at this exact size: when the disk is full, the queue
		 * grows on towards ST_PENDING_MAX without a failing commit on
		 * every call; the timer keeps retrying. */
		tank_error_t e;
		if (st_flush(st, &e))
			flush_failed(st, &e);
	}
	if (st->n_trs >= ST_PENDING_MAX)
		return -ENOBUFS;
	if (st->n_trs == st->cap_trs) {
		size_t cap = st->cap_trs ? st->cap_trs * 2 : 256;
		pend_tr_t *n = realloc(st->trs, cap * sizeof *n);
		if (!n)
			return -ENOMEM;
		st->trs = n;
		st->cap_trs = cap;
	}
	pend_t *p = st__pend_get(c, name);
	if (!p)
		return -ENOMEM;
	pend_tr_t *tr = &st->trs[st->n_trs++];
	tr->ent = (uint32_t)(p - st->pend);
	tr->qseq = st->tr_qseq++;
	tr->t = *t;
	tr->t.seq = 0;
	tr->t.legacy = false;
	tr->t.from[ST_PHASE_MAX] = tr->t.to[ST_PHASE_MAX] = '\0';
	tr->t.reason[ST_REASON_MAX] = '\0';
	tr->t.kind[ST_KIND_MAX] = tr->t.key[ST_KEY_MAX] = tr->t.uid[ST_UID_LEN] = '\0';
	st__arm_timer(st);
	return 0;
}

int st_transition_add(st_t *st, const char *name, const st_transition_t *t)
{
	return st__hist_add(st->pods, name, t);
}

void st__pend_drop(st_t *st, pend_t *p)
{
	/* Its transitions queued so far go with it: skipped when written
	 * or read (st__tr_live), in O(1) here. */
	p->drop_below = st->tr_qseq;
	free(p->val);
	p->val = NULL;
	p->len = 0;
	p->has_status = false;
}

int st_coll_status_forget(st_coll_t *c, const char *name)
{
	st_t *st = c->st;
	if (!name_ok(name))
		return TANK_EINVALID;
	pend_t *p = st__pend_get(c, name);
	if (!p)
		return -ENOMEM;
	st__pend_drop(st, p);
	if (c->decl->typed_status)
		st__cache_del(c, &name, 1);
	p->forget = true;
	st__arm_timer(st);
	return 0;
}

int st_status_forget(st_t *st, const char *name)
{
	return st_coll_status_forget(st->pods, name);
}
/* ---- keys ----------------------------------------------------------------- */

void st__tr_key(unsigned char *k, const char *name, size_t len, uint64_t seq)
{
	memcpy(k, name, len);
	k[len] = '\0';
	for (int i = 0; i < SEQ_LEN; i++)
		k[len + 1 + i] = (unsigned char)(seq >> (56 - 8 * i));
}

uint64_t st__tr_seq(const MDB_val *k)
{
	const unsigned char *p = (const unsigned char *)k->mv_data +
				 k->mv_size - SEQ_LEN;
	uint64_t s = 0;
	for (int i = 0; i < SEQ_LEN; i++)
		s = s << 8 | p[i];
	return s;
}

bool st__tr_has_prefix(const MDB_val *k, const char *name, size_t len)
{
	return k->mv_size == len + 1 + SEQ_LEN &&
	       memcmp(k->mv_data, name, len) == 0 &&
	       ((const char *)k->mv_data)[len] == '\0';
}

/* First and one-past-last sequence of a pod's history; both 1 when empty.
 * Relies on the history being contiguous, which holds because entries are
 * only appended at the end and pruned from the front. */
int st__tr_range(MDB_cursor *c, const char *name, size_t len,
		    uint64_t *first, uint64_t *next)
{
	unsigned char kb[ST_NAME_MAX + 1 + SEQ_LEN];
	MDB_val k = { len + 1 + SEQ_LEN, kb }, v;
	*first = *next = 1;
	st__tr_key(kb, name, len, 0);
	int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (!st__tr_has_prefix(&k, name, len))
		return 0;
	*first = st__tr_seq(&k);
	st__tr_key(kb, name, len, UINT64_MAX);
	k.mv_size = len + 1 + SEQ_LEN;
	k.mv_data = kb;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	if (rc == MDB_NOTFOUND)
		rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
	else if (rc == 0 && !st__tr_has_prefix(&k, name, len))
		rc = mdb_cursor_get(c, &k, &v, MDB_PREV);
	if (rc)
		return rc;
	*next = st__tr_seq(&k) + 1;
	return 0;
}

/* Deletes the first `count` history entries of a pod (all if UINT64_MAX):
 * one seek, then delete-and-step, which LMDB supports (after
 * mdb_cursor_del, MDB_NEXT yields the entry that followed). */
int st__tr_delete_front(MDB_cursor *c, const char *name, size_t len,
			   uint64_t count)
{
	unsigned char kb[ST_NAME_MAX + 1 + SEQ_LEN];
	MDB_val k = { len + 1 + SEQ_LEN, kb }, v;
	st__tr_key(kb, name, len, 0);
	int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	for (uint64_t i = 0; i < count; i++) {
		if (rc == MDB_NOTFOUND)
			return 0;
		if (rc)
			return rc;
		if (!st__tr_has_prefix(&k, name, len))
			return 0;
		if ((rc = mdb_cursor_del(c, 0)))
			return rc;
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	return 0;
}

/* ---- write transactions ------------------------------------------------- */

int st__put_buf(st_t *st, MDB_txn *txn, MDB_dbi db, const void *key,
		   size_t keylen)
{
	MDB_val k = { keylen, (void *)key };
	MDB_val v = { st->buf.size, st->buf.data };
	st__wrote(st);
	return mdb_put(txn, db, &k, &v, 0);
}

/* The uid of key's object: its desired record's, or (a typed collection's
 * object being deleted) its cached status's; "" when neither is known. */
void st__obj_uid(st_coll_t *c, MDB_txn *txn, const char *key, char uid[ST_UID_LEN + 1])
{
	size_t kl = strlen(key);
	MDB_val k = { kl, (void *)key }, v;
	st_pod_t p;

	uid[0] = '\0';
	if (mdb_get(txn, c->db_obj, &k, &v) == 0 &&
	    st__dec_pod_ex(v.mv_data, v.mv_size, key, kl, &p, true, NULL) == 0 && p.uid[0]) {
		memcpy(uid, p.uid, ST_UID_LEN + 1);
		return;
	}
	if (c->decl->typed_status) {
		int rc;
		const cent_t *e = cache_lookup(c, key, txn, &rc, NULL);
		st_status_t s;
		if (e && e->rec && rec_get(e, &s) == 0) {
			memcpy(uid, s.uid, ST_UID_LEN + 1);
			st_status_clear(&s);
		}
	}
}

void st__tr_fill(st_coll_t *c, const char *key, uint64_t seq, const char *uid,
		 st_transition_t *t)
{
	/* On every queued entry at every flush: no printf here. */
	t->seq = seq;
	if (!t->kind[0])
		st__strlcpy(t->kind, sizeof t->kind, c->noun, c->noun_len);
	if (!t->key[0])
		st__strlcpy(t->key, sizeof t->key, key, strlen(key));
	if (!t->uid[0] && uid)
		memcpy(t->uid, uid, ST_UID_LEN + 1);
}

/* Writes the whole queue into txn.  Re-runnable: a retry after a map
 * resize starts again from the untouched queue. */
int st__write_pending(st_t *st, MDB_txn *txn)
{
	/* A bounded flush (flush_some) writes the names from write_from on
	 * (the queue's last ones) and their transitions only. */
	size_t lo = st->write_from < st->n_pend ? st->write_from : 0, np = st->n_pend;
	int rc = 0;

	if (st->n_pend == 0)
		return 0;
	for (size_t i = 0; i < st->n_colls; i++)
		st->colls[i]->cur = NULL;
	for (size_t i = lo; i < np && !rc; i++) {
		pend_t *p = &st->pend[i];
		st_coll_t *c = p->c;
		p->first_seq = p->next_seq = 0;
		p->uid_done = false;
		if (!c->cur && (rc = mdb_cursor_open(txn, c->db_hist, &c->cur)))
			break;
		if (p->forget) {
			MDB_val k = { p->namelen, p->name };
			st__wrote(st);
			rc = mdb_del(txn, c->db_status, &k, NULL);
			if (rc == MDB_NOTFOUND)
				rc = 0;
			if (!rc)
				rc = st__tr_delete_front(c->cur, p->name, p->namelen,
							 UINT64_MAX);
			p->first_seq = p->next_seq = 1;
		}
		if (rc || !p->has_status)
			continue;
		if (c->decl->typed_status) {
			cent_t *ce = cache_find(c, p->name);
			st_status_t s;
			if (!ce || !ce->rec)
				continue;
			if (rec_get(ce, &s)) {
				rc = ENOMEM;
				break;
			}
			st->buf.size = 0;
			if (!(rc = st__enc_status(&st->buf, &s)))
				rc = st__put_buf(st, txn, c->db_status, p->name, p->namelen);
			st_status_clear(&s);
		} else {
			MDB_val k = { p->namelen, p->name }, v = { p->len, p->val };
			st__wrote(st);
			rc = mdb_put(txn, c->db_status, &k, &v, 0);
		}
	}
	for (size_t i = 0; i < st->n_trs && !rc; i++) {
		if (st->trs[i].ent < lo || !st__tr_live(st->pend, &st->trs[i]))
			continue;
		pend_t *p = &st->pend[st->trs[i].ent];
		st_coll_t *c = p->c;
		unsigned char kb[ST_NAME_MAX + 1 + SEQ_LEN];
		/* Filled in place (the same at a re-run), not copied. */
		st_transition_t *t = &st->trs[i].t;
		if (p->next_seq == 0 &&
		    (rc = st__tr_range(c->cur, p->name, p->namelen, &p->first_seq, &p->next_seq)))
			break;
		if (!p->uid_done && !t->uid[0]) {
			st__obj_uid(c, txn, p->name, p->uid);
			p->uid_done = true;
		}
		st__tr_fill(c, p->name, p->next_seq, p->uid_done ? p->uid : NULL, t);
		st->buf.size = 0;
		if ((rc = st__enc_transition(&st->buf, t, p->name, p->namelen)))
			break;
		st__tr_key(kb, p->name, p->namelen, p->next_seq++);
		rc = st__put_buf(st, txn, c->db_hist, kb, p->namelen + 1 + SEQ_LEN);
		st->hist_writes++;
	}
	for (size_t i = lo; i < np && !rc; i++) {
		pend_t *p = &st->pend[i];
		uint64_t have = p->next_seq - p->first_seq;
		if (p->next_seq && have > p->c->history_limit)
			rc = st__tr_delete_front(p->c->cur, p->name, p->namelen,
						 have - p->c->history_limit);
	}
	for (size_t i = 0; i < st->n_colls; i++)
		if (st->colls[i]->cur) {
			mdb_cursor_close(st->colls[i]->cur);
			st->colls[i]->cur = NULL;
		}
	return rc;
}

/* LMDB turns a short pwrite into EIO, which is what a nearly full disk
 * produces; the free space tells the two apart for the caller. */
static bool disk_full(const st_t *st)
{
	struct statvfs sv;
	if (statvfs(st->path, &sv) < 0)
		return false;
	return (uint64_t)sv.f_bavail * sv.f_frsize < 256 * 1024;
}


/* The data file is allocated on disk up to the map size before the map
 * may use it: a write inside the map then never meets a full disk (LMDB
 * turns that into EIO and a store that cannot commit anything, not even
 * the delete that would free room).  The disk is asked for room only when
 * the map grows, and a growth the disk cannot hold fails as a whole,
 * before anything is written: TANK_ESTOREFULL. */
static int prealloc(st_t *st, size_t size)
{
	mdb_filehandle_t fd;
	if (mdb_env_get_fd(st->env, &fd) != 0)
		return -EBADF;
	int rc = posix_fallocate(fd, 0, (off_t)size);
	/* A file system without fallocate: nothing to promise, go on. */
	return rc == EOPNOTSUPP || rc == EINVAL ? 0 : -rc;
}

/* The largest map the disk can take now: the file (allocated up to the
 * map, so not in the free count) plus what the disk has free for tankd,
 * less what is left to the rest of the data dir (a sixteenth of the two,
 * between 256 KiB and 64 MiB), on 64 KiB.  SIZE_MAX when the file system
 * does not say. */
static size_t disk_fit(st_t *st)
{
	mdb_filehandle_t fd;
	struct statvfs sv;
	if (mdb_env_get_fd(st->env, &fd) || fstatvfs(fd, &sv) || !sv.f_frsize)
		return SIZE_MAX;
	size_t avail = (size_t)sv.f_bavail * sv.f_frsize;
	size_t keep = (st->map_size + avail) / 16;
	keep = keep < (256u << 10) ? (256u << 10) : keep > ((size_t)64 << 20) ? (size_t)64 << 20 : keep;
	if (avail <= keep)
		return st->map_size;
	return (st->map_size + avail - keep) & ~(size_t)((64u << 10) - 1);
}

/* Doubles the map, or takes what the disk has when that is less (but a
 * step worth a remap: a sixteenth of the map, at least 64 KiB).  Before
 * round 10 of issue 38 only doubling was tried: a 4 MiB store on an
 * 8 MiB disk with 4 MiB free said "the disk has no room to grow it". */
static int grow_map(st_t *st, tank_error_t *err)
{
	size_t want = st->map_size * 2;
	size_t step = st->map_size / 16 < (64u << 10) ? 64u << 10 : st->map_size / 16;

	/* mdb_env_set_mapsize wants no transaction open in the process:
	 * not while the store's thread has one. */
	st__ac_wait(st);
	if (want > MAP_SIZE_MAX)
		return tank_error_set(err, TANK_ESTOREFULL,
				      "store %s: map size limit reached",
				      st->path);
	/* Asked before the allocation: a failed one may leave blocks
	 * allocated past the file's end on some file systems. */
	size_t fit = disk_fit(st);
	if (fit < want)
		want = fit;
	int prc = want < st->map_size + step ? -ENOSPC : prealloc(st, want);
	if (prc < 0)
		return tank_error_set(err, prc == -ENOSPC ? TANK_ESTOREFULL : prc,
				      "store %s: full: its map of %zu bytes is taken and the "
				      "disk has no room to grow it by %zu: %s", st->path,
				      st->map_size, step, strerror(-prc));
	pthread_mutex_lock(&st->env_mu);
	int rc = mdb_env_set_mapsize(st->env, want);
	pthread_mutex_unlock(&st->env_mu);
	if (rc)
		return st__mdb_fail(err, rc, "store: cannot grow the map");
	st->map_size = want;
	return 0;
}

int st__grow_map(st_t *st, tank_error_t *err)
{
	return grow_map(st, err);
}

/* Runs fn in a write transaction and commits it; durable commits fsync
 * (data pages, then the meta page) before returning.  MDB_MAP_FULL at any
 * point aborts, doubles the map and runs fn again from scratch. */
int st__write_txn(st_t *st, bool durable, const char *what, txn_fn fn,
		     void *arg, tank_error_t *err)
{
	uint64_t t0;

	/* No write transaction begins on the loop while the store's thread
	 * commits one (LMDB has one writer: it would block in
	 * mdb_txn_begin anyway; here the wait is counted). */
	st__ac_wait(st);
	t0 = kit_mono_ns();
	tank_error_clear(err);
	if (st__env_ok(st, err))
		return err->code;
	st__touch(st);
	for (;;) {
		MDB_txn *txn;
		st->txn_writes = 0;
		int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
		if (rc)
			return st__mdb_fail(err, rc, what);
		rc = fn(st, txn, arg, err);
		if (rc == 0) {
			if (durable) {
				/* The env runs with MDB_NOSYNC for the group
				 * commits; a desired-state commit turns it off
				 * so LMDB orders its own fsyncs. */
				pthread_mutex_lock(&st->env_mu);
				mdb_env_set_flags(st->env, MDB_NOSYNC, 0);
				rc = mdb_txn_commit(txn);
				mdb_env_set_flags(st->env, MDB_NOSYNC, 1);
				pthread_mutex_unlock(&st->env_mu);
			} else {
				rc = mdb_txn_commit(txn);
			}
		} else {
			mdb_txn_abort(txn);
		}
		if (rc == MDB_MAP_FULL) {
			if ((rc = grow_map(st, err)))
				return rc;
			continue;
		}
		if (rc == 0) {
			kit_hist_observe_ns(durable ? &st->commit_durable : &st->commit_flush,
					    kit_mono_ns() - t0);
			if (st->txn_writes > st->max_txn_writes)
				st->max_txn_writes = st->txn_writes;
			return 0;
		}
		return st__write_fail(st, rc, what, err);
	}
}

int st__write_fail(st_t *st, int rc, const char *what, tank_error_t *err)
{
	/* fn may have filled err with something better already. */
	if (!st__is_mdb_err(rc) && rc < 0 && err && err->code == rc)
		return rc;
	char w[200];
	snprintf(w, sizeof w, "store %s: %s", st->path, what);
	if (rc == EIO && disk_full(st))
		rc = ENOSPC;
	return st__mdb_fail(err, rc, w);
}

static void wake_sync(st_t *st)
{
	pthread_mutex_lock(&st->q_mu);
	st->sync_req = true;
	pthread_cond_signal(&st->q_cv);
	pthread_mutex_unlock(&st->q_mu);
}

static int flush_fn(st_t *st, MDB_txn *txn, void *arg, tank_error_t *err)
{
	(void)arg;
	(void)err;
	return st__write_pending(st, txn);
}

/* The free list (LMDB's database 0, keyed by the id of the transaction
 * that freed the pages): how many pages are free in all, and how many of
 * them the next write transaction can take.  LMDB reuses the pages freed
 * by transactions older than its oldest reader; tankd's readers are
 * short, so that is every transaction before the last one (the pages
 * the last freed wait one more commit).  0 and 0 when it cannot read. */
static void free_pages(st_t *st, size_t last_txnid, size_t *all, size_t *reusable)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;

	*all = *reusable = 0;
	st__touch(st);
	if (mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) != 0)
		return;
	if (mdb_cursor_open(txn, 0, &cur) == 0) {
		for (int op = MDB_FIRST; mdb_cursor_get(cur, &k, &v, op) == 0; op = MDB_NEXT) {
			size_t n = 0, id = 0;
			if (v.mv_size >= sizeof n)
				memcpy(&n, v.mv_data, sizeof n);
			if (k.mv_size == sizeof id)
				memcpy(&id, k.mv_data, sizeof id);
			*all += n;
			if (id && id < last_txnid)
				*reusable += n;
		}
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(txn);
}

/* The file's end against the mark total - reserve/div, in pages: 1 with
 * *room the pages left below it (0 at it), 0 when past it, -1 when it
 * cannot tell.  The end, not the live data: LMDB takes new pages at the
 * end of the file while recently freed ones wait (seen: 180 KiB free and
 * the end reached), and the end is what makes a commit fail.  With
 * reuse, the free pages the next commit can take count as room at the
 * end (the end never comes down, so without them statuses would wait for
 * good once they had reached it, whatever was deleted): the free list is
 * walked once the end alone is past the mark, or always with
 * END_ROOM_ALL, for who needs the whole room and not just the side. */
enum { END_ROOM_END, END_ROOM_REUSE, END_ROOM_ALL };
static int end_room(st_t *st, size_t div, int reuse, size_t *room)
{
	MDB_envinfo info;
	MDB_stat ms;
	size_t all, reusable, used, mark = st->map_size - st__reserve(st->map_size) / div;

	if (!st->env || mdb_env_info(st->env, &info) || mdb_env_stat(st->env, &ms) ||
	    !ms.ms_psize)
		return -1;
	used = info.me_last_pgno + 1;
	if (reuse == END_ROOM_ALL || (reuse && used * ms.ms_psize > mark)) {
		free_pages(st, info.me_last_txnid, &all, &reusable);
		used -= reusable < used ? reusable : used;
	}
	if (used * ms.ms_psize > mark)
		return 0;
	*room = mark / ms.ms_psize - used;
	return 1;
}

/* The file's end above total - reserve/div, and unable to grow.  With
 * reuse, free pages a write will take first count as room at the end. */
static bool over_mark(st_t *st, size_t div, bool reuse)
{
	size_t room;
	if (end_room(st, div, reuse ? END_ROOM_REUSE : END_ROOM_END, &room) != 0)
		return false;
	tank_error_t g;
	return grow_map(st, &g) != 0;
}

/* History waits past half the reserve, measured at the file's end
 * alone: history is live data that only grows, and counting the pages a
 * commit frees and the next reuses (their number swings from one commit
 * to the next) let it grow until statuses found no room (round 9). */
static bool history_over_mark(st_t *st)
{
	return over_mark(st, 2, false);
}

/* Statuses wait past three quarters of it: the last quarter is the
 * deletes', the operator's way to make room.  Statuses of thousands of
 * pods took it all on an 8 MiB disk, and then even a delete of one pod
 * found no page at the file's end (docs/bench.md, issue 38 round 8).
 * Free pages the next commit can take count as room: statuses rewrite
 * what is there, and after a delete they go on. */
static bool status_over_mark(st_t *st)
{
	return over_mark(st, 4, true);
}

/* The pages statuses may still take before their mark: what lies
 * between the file's end (less the pages the next commit can reuse) and
 * total - reserve/4.  0 when past it or when it cannot tell. */
static size_t status_room_pages(st_t *st)
{
	size_t room;
	return end_room(st, 4, END_ROOM_ALL, &room) == 1 ? room : 0;
}

bool st__status_waits(st_t *st)
{
	return st->n_pend && status_over_mark(st);
}

/* Commits the queue's last k names (their statuses and transitions)
 * and takes them out of it.  The rest stays queued, its indexes right
 * (see flush_some).  Nothing leaves the queue when the commit fails. */
static int flush_slice(st_t *st, size_t k, tank_error_t *err)
{
	size_t lo = st->n_pend - k;
	st->write_from = lo;
	int rc = st__write_txn(st, false, "flush", flush_fn, NULL, err);
	st->write_from = 0;
	if (rc)
		return rc;
	for (size_t i = lo; i < st->n_pend; i++) {
		free(st->pend[i].val);
		tank_map_del(&st->pend[i].c->pend, st->pend[i].name);
	}
	st->n_pend = lo;
	size_t j = 0;
	for (size_t i = 0; i < st->n_trs; i++)
		if (st->trs[i].ent < lo)
			st->trs[j++] = st->trs[i];
	st->n_trs = j;
	wake_sync(st);
	return 0;
}

/* A queue that does not fit in one transaction on a store that cannot
 * grow: the statuses of thousands of pods changed at once, as at tankd's
 * stop on a full disk (bench/scale/s5_full.sh said "unable to commit
 * status at stop"), whose one transaction needs room for a copy of every
 * page it changes.  In parts it often fits, each commit freeing the pages
 * its copies replaced for a later one.  Each part is bounded by the room
 * below the statuses' mark, at two pages a name (its leaf's copy, and a
 * split) and ST_SLICE_SPARE pages for the branches and the free list, so
 * that no part takes the file's end into the quarter kept for deletes
 * (halving from the whole queue did: round 10, not kept).  A part that
 * still does not fit is halved.  0 once the queue is empty; else what
 * went stays gone from the queue, the rest waits. */
#define ST_SLICE_SPARE 8
static int flush_in_slices(st_t *st, tank_error_t *err)
{
	size_t cap = st->n_pend;
	int rc = 0;
	while (st->n_pend) {
		size_t room = status_room_pages(st);
		size_t k = room > ST_SLICE_SPARE ? (room - ST_SLICE_SPARE) / 2 : 0;
		if (k > cap)
			k = cap;
		if (k > st->n_pend)
			k = st->n_pend;
		if (!k)
			return tank_error_set(err, TANK_ESTOREFULL,
					      "store %s: full: status changes wait (the last %zu "
					      "bytes are kept for deletes) until room is made",
					      st->path, st__reserve(st->map_size) / 4);
		rc = flush_slice(st, k, err);
		if (rc == TANK_ESTOREFULL)
			cap = k / 2;
		else if (rc)
			return rc;
	}
	return 0;
}

/* st_flush, with st__status_waits already asked (waits): each asking
 * tries to grow a full file (grow_map), so flush_some asks once. */
static int flush_all(st_t *st, bool waits, tank_error_t *err)
{
	int serr;
	pthread_mutex_lock(&st->q_mu);
	serr = st->sync_err;
	st->sync_err = 0;
	pthread_mutex_unlock(&st->q_mu);
	/* Statuses waiting means past the history's mark too (a quarter of
	 * the reserve is less than half), and the file just failed to grow:
	 * not asked again. */
	if (st->n_trs && (waits || history_over_mark(st))) {
		/* History is the one observed thing that can wait: on a store
		 * that cannot grow, it is not allowed to eat the half of the
		 * reserve that status changes and deletes need.  Counted. */
		st->history_dropped += st->n_trs;
		st->n_trs = 0;
	}
	if (waits) {
		st->flush_failing = true;
		st->flush_failures++;
		return tank_error_set(err, TANK_ESTOREFULL,
				      "store %s: full: status changes wait (the last %zu bytes "
				      "are kept for deletes) until room is made", st->path,
				      st__reserve(st->map_size) / 4);
	}
	if (st->n_pend || st->n_trs) {
		int rc = st__write_txn(st, false, "flush", flush_fn, NULL, err);
		if (rc == TANK_ESTOREFULL && st->n_trs) {
			/* A batch of history bigger than the room: statuses
			 * first, the history is dropped (counted). */
			st->history_dropped += st->n_trs;
			st->n_trs = 0;
			rc = st__write_txn(st, false, "flush", flush_fn, NULL, err);
		}
		if (rc == TANK_ESTOREFULL && st->n_pend > 1)
			rc = flush_in_slices(st, err);
		if (rc) {
			st->flush_failing = true;
			st->flush_failures++;
			return rc;
		}
		pend_clear(st);
		wake_sync(st);
		if (st->flush_failing) {
			/* Said once: the callback hears NULL for "works again". */
			st->flush_failing = false;
			if (st->on_flush_error)
				st->on_flush_error(st->on_flush_error_ctx, NULL);
			st->flush_failures = 0;
		}
	}
	if (st->loop)
		ev_timer_stop(st->loop, &st->timer);
	if (serr)
		return st__mdb_fail(err, serr, "store: background fsync failed");
	return 0;
}

int st_flush(st_t *st, tank_error_t *err)
{
	return flush_all(st, st__status_waits(st), err);
}

/* The timer's flush commits at most ST_FLUSH_SLICE names (and their
 * transitions) per loop iteration: a delete of 100,000 pods queued that
 * many status removals, and committing them in one transaction held
 * tankd's loop for 50 to 250 ms.  The rest stays queued (readers see it)
 * and goes at the next iteration.  The slice is the queue's LAST names:
 * what stays is then the array's front, untouched, with its indexes (the
 * names' maps, the transitions' entries) still right.  Taking the first
 * ones moved the rest to the front and indexed it again, all of it at
 * every slice: 10-24 ms a slice with 100,000 names queued.  Names are
 * independent of each other (each has one entry, its transitions keep
 * their order), so the order the slices land in does not matter.
 * st_flush, for callers that need the whole queue on disk, is
 * unchanged. */
static int flush_some(st_t *st, tank_error_t *err)
{
	size_t k = ST_FLUSH_SLICE;
	int rc;

	bool waits = st__status_waits(st);

	if (st->n_pend <= k || waits)
		return flush_all(st, waits, err);   /* which says why statuses wait */
	if ((rc = flush_slice(st, k, err)))
		return st_flush(st, err);   /* a failure is handled (and told) there */
	return 0;
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	st_t *st = w->data;
	tank_error_t e;
	(void)loop;
	(void)revents;
	/* The store's thread commits: the slice would wait for it (one
	 * writer).  The completion arms the timer again. */
	if (st->ac)
		return;
	tank_error_clear(&e);
	if (flush_some(st, &e)) {
		flush_failed(st, &e);
		if (st->n_pend || st->n_trs)
			st__arm_timer(st);
	} else if (st->n_pend || st->n_trs) {
		/* More than a slice was queued: the rest at once, after the
		 * loop has polled.  (Stopped first: the flush may have armed it
		 * again, and libev's heap keeps an active timer's time.) */
		ev_timer_stop(st->loop, &st->timer);
		ev_timer_set(&st->timer, 0.001, 0.);
		ev_timer_start(st->loop, &st->timer);
	}
}

/* Tells the waiters whose number a finished fsync covers (or a failed
 * one was to cover).  Callers are collected first: a callback may call
 * st_durable again. */
static void durable_tell(st_t *st)
{
	uint64_t done, fail;
	int fail_rc;

	pthread_mutex_lock(&st->q_mu);
	done = st->dur_done;
	fail = st->dur_fail;
	fail_rc = st->dur_fail_rc;
	st->dur_fail = 0;
	pthread_mutex_unlock(&st->q_mu);
	size_t n = 0, k = 0;
	st_waiter_t *told = NULL;
	for (size_t i = 0; i < st->n_waiters; i++)
		n += st->waiters[i].seq <= done || st->waiters[i].seq <= fail;
	if (!n)
		return;
	if (!(told = malloc(n * sizeof *told)))
		return;         /* told at the next wake-up or at the detach */
	for (size_t i = 0, j = 0; i < st->n_waiters; i++) {
		st_waiter_t w = st->waiters[i];
		if (w.seq <= done || w.seq <= fail)
			told[k++] = w;
		else
			st->waiters[j++] = w;
	}
	st->n_waiters -= k;
	for (size_t i = 0; i < k; i++)
		told[i].fn(told[i].ctx, told[i].seq <= done ? 0 : -fail_rc);
	free(told);
}

static void ac_complete(st_t *st);

static void durable_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	st_t *st = w->data;
	(void)loop;
	(void)revents;
	if (st->ac) {
		pthread_mutex_lock(&st->q_mu);
		bool done = st->ac_state == ST_AC_DONE;
		pthread_mutex_unlock(&st->q_mu);
		if (done)
			ac_complete(st);
	}
	durable_tell(st);
}

/* ---- async commits (st_coll_commit_async) ------------------------------------
 *
 * The loop prepares the commit (checks, room, the inputs copied: st_coll.c)
 * and hands it to the store's thread, which runs the whole write
 * transaction, its commit and fsync, touching nothing of st_t but the
 * environment and the collections' fixed handles.  The loop keeps
 * turning; its readers see the old snapshot until the commit.  The thread
 * says done (ac_state, ac_cv, and the loop's async watcher), and the
 * loop does the rest: a map too small is grown there (no transaction may
 * be open in the process meanwhile, which only the loop can see to) and
 * the transaction run again; then the results are copied out, the
 * watchers told, the caller's fn called. */

void st__ac_wait(st_t *st)
{
	if (!st->ac)
		return;
	pthread_mutex_lock(&st->q_mu);
	if (st->ac_state == ST_AC_QUEUED || st->ac_state == ST_AC_RUNNING) {
		uint64_t t0 = kit_mono_ns();
		while (st->ac_state == ST_AC_QUEUED || st->ac_state == ST_AC_RUNNING)
			pthread_cond_wait(&st->ac_cv, &st->q_mu);
		st->ac_waits++;
		st->ac_wait_ns += kit_mono_ns() - t0;
	}
	pthread_mutex_unlock(&st->q_mu);
}

/* On the store's thread. */
static void ac_run(st_t *st, st_acommit_t *a)
{
	uint64_t t0;
	MDB_txn *txn;
	int rc;

	if (st->commit_gate)
		st->commit_gate(st->commit_gate_ctx);
	t0 = kit_mono_ns();
	tank_error_clear(&a->err);
	st->txn_writes = 0;        /* the loop writes nothing meanwhile */
	if ((rc = mdb_txn_begin(st->env, NULL, 0, &txn)) == 0) {
		for (size_t i = 0; i < a->n && !rc; i++)
			if (a->ops[i].nput)
				rc = st__coll_puts(&a->buf, txn, a->ops[i].c, a->ops[i].put,
						   a->ops[i].nput, a->ops[i].res, a->now, &a->err);
		if (rc) {
			mdb_txn_abort(txn);
		} else {
			/* Durable, as st__write_txn's: LMDB orders its fsyncs. */
			pthread_mutex_lock(&st->env_mu);
			mdb_env_set_flags(st->env, MDB_NOSYNC, 0);
			rc = mdb_txn_commit(txn);
			mdb_env_set_flags(st->env, MDB_NOSYNC, 1);
			pthread_mutex_unlock(&st->env_mu);
		}
	}
	a->rc = rc;
	a->ns += kit_mono_ns() - t0;
}

void st__ac_free(st_acommit_t *a)
{
	if (!a)
		return;
	free(a->ops);
	free(a->in);
	free(a->res);
	free(a->arena);
	free(a->user_res);
	msgpack_sbuffer_destroy(&a->buf);
	free(a);
}

void st__ac_submit(st_t *st, st_acommit_t *a)
{
	st__touch(st);
	ev_ref(st->loop);          /* the loop lives until the completion */
	pthread_mutex_lock(&st->q_mu);
	st->ac = a;
	st->ac_state = ST_AC_QUEUED;
	pthread_cond_signal(&st->q_cv);
	pthread_mutex_unlock(&st->q_mu);
}

/* On the loop, once the thread said done. */
static void ac_complete(st_t *st)
{
	st_acommit_t *a = st->ac;
	tank_error_t e = a->err;
	int rc = a->rc;

	if (rc == MDB_MAP_FULL) {
		/* Nothing was written (aborted): a bigger map, and again. */
		pthread_mutex_lock(&st->q_mu);
		st->ac_state = ST_AC_NONE;
		pthread_mutex_unlock(&st->q_mu);
		if ((rc = grow_map(st, &e)) == 0) {
			pthread_mutex_lock(&st->q_mu);
			st->ac_state = ST_AC_QUEUED;
			pthread_cond_signal(&st->q_cv);
			pthread_mutex_unlock(&st->q_mu);
			return;
		}
	} else if (rc) {
		rc = st__write_fail(st, rc, "apply", &e);
	}
	pthread_mutex_lock(&st->q_mu);
	st->ac = NULL;
	st->ac_state = ST_AC_NONE;
	pthread_mutex_unlock(&st->q_mu);
	ev_unref(st->loop);
	if (!rc) {
		kit_hist_observe_ns(&st->commit_durable, a->ns);
		if (st->txn_writes > st->max_txn_writes)
			st->max_txn_writes = st->txn_writes;
		for (size_t i = 0; i < a->n; i++) {
			st_coll_op_t *op = &a->ops[i];
			size_t m = 0;
			const char **keys = op->nput ? malloc(op->nput * sizeof *keys) : NULL;
			if (op->nput)
				memcpy(a->user_res[i], op->res, op->nput * sizeof *op->res);
			if (!keys) {
				op->c->changes += op->nput > 0;   /* not told, still changed */
				continue;
			}
			for (size_t k = 0; k < op->nput; k++)
				if (op->res[k].action != ST_UNCHANGED)
					keys[m++] = op->put[k].name;
			st__coll_notify(op->c, keys, m);
			free(keys);
		}
	}
	a->fn(a->ctx, rc, rc ? &e : NULL);
	st__ac_free(a);
	/* The queue waited for it (timer_cb). */
	if (st->n_pend || st->n_trs)
		st__arm_timer(st);
}

unsigned st_loop_holds(const st_t *st)
{
	if (!st->loop)
		return 0;
	return (ev_is_active(&st->timer) ? ST_HOLD_FLUSH : 0) |
	       (ev_is_active(&st->load_timer) ? ST_HOLD_LOAD : 0) |
	       (st->ac ? ST_HOLD_COMMIT : 0);
}

bool st_commit_busy(const st_t *st)
{
	return st->ac != NULL;
}

void st_settle(st_t *st)
{
	while (st->ac) {
		st__ac_wait(st);
		ac_complete(st);
	}
}

/* Waiters left when the loop goes: told -ECANCELED (they only free what
 * they hold; nobody is left to answer). */
static void durable_cancel(st_t *st)
{
	while (st->n_waiters) {
		st_waiter_t w = st->waiters[--st->n_waiters];
		w.fn(w.ctx, -ECANCELED);
	}
}

int st_durable(st_t *st, void (*fn)(void *ctx, int rc), void *ctx)
{
	if (!st->loop) {
		/* No loop to be woken on: the sync is the caller's. */
		tank_error_t e;
		int rc = st__env_ok(st, &e) ? EIO : 0;
		pthread_mutex_lock(&st->env_mu);
		if (!rc)
			rc = mdb_env_sync(st->env, 1);
		pthread_mutex_unlock(&st->env_mu);
		fn(ctx, rc ? -rc : 0);
		return 0;
	}
	if (st->n_waiters == st->cap_waiters) {
		size_t cap = st->cap_waiters ? st->cap_waiters * 2 : 8;
		st_waiter_t *w = realloc(st->waiters, cap * sizeof *w);
		if (!w)
			return -ENOMEM;
		st->waiters = w;
		st->cap_waiters = cap;
	}
	uint64_t seq = ++st->dur_seq;
	st->waiters[st->n_waiters++] = (st_waiter_t){ seq, fn, ctx };
	pthread_mutex_lock(&st->q_mu);
	st->dur_want = seq;
	st->sync_req = true;
	pthread_cond_signal(&st->q_cv);
	pthread_mutex_unlock(&st->q_mu);
	return 0;
}

int st_attach_loop(st_t *st, struct ev_loop *loop)
{
	if (st->loop)
		return -EBUSY;
	st->loop = loop;
	ev_timer_init(&st->timer, timer_cb, 0., 0.);
	st->timer.data = st;
	ev_timer_init(&st->trim, trim_cb, 0., 0.);
	st->trim.data = st;
	st__touch(st);             /* what the open and the cache load read */
	ev_timer_init(&st->load_timer, load_cb, 0., 0.);
	st->load_timer.data = st;
	if (st->n_pend || st->n_trs)
		st__arm_timer(st);
	if (!st_loaded(st))
		st__arm_load(st);
	ev_async_init(&st->dur_async, durable_cb);
	st->dur_async.data = st;
	ev_async_start(loop, &st->dur_async);
	/* The watcher keeps no loop alive by itself (rt_run ends when
	 * nothing else is left). */
	ev_unref(loop);
	pthread_mutex_lock(&st->q_mu);
	st->dur_on = true;
	pthread_mutex_unlock(&st->q_mu);
	return 0;
}

void st_detach_loop(st_t *st)
{
	if (!st->loop)
		return;
	/* A commit on the store's thread ends first, and its caller hears
	 * how it went (nothing torn, nothing left to the thread). */
	st_settle(st);
	ev_timer_stop(st->loop, &st->timer);
	trim_disarm(st);
	ev_timer_stop(st->loop, &st->load_timer);
	pthread_mutex_lock(&st->q_mu);
	st->dur_on = false;
	pthread_mutex_unlock(&st->q_mu);
	ev_ref(st->loop);
	ev_async_stop(st->loop, &st->dur_async);
	/* Whoever is still waiting is told what an fsync covered so far,
	 * the rest that it is cancelled. */
	durable_tell(st);
	durable_cancel(st);
	st->loop = NULL;
}

/* ---- desired state -------------------------------------------------------- */

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names must be valid and distinct: a batch naming a pod twice has no
 * obvious meaning, so it is refused rather than resolved by order. */
int st__check_names(const char *const *names, size_t n, const char *what,
		       tank_error_t *err)
{
	for (size_t i = 0; i < n; i++)
		if (!name_ok(names[i]))
			return tank_error_set(err, TANK_EINVALID,
					      "%s: bad name at index %zu", what,
					      i);
	if (n < 2)
		return 0;
	const char **s = malloc(n * sizeof *s);
	if (!s)
		return tank_error_set(err, -ENOMEM, "out of memory");
	memcpy(s, names, n * sizeof *s);
	qsort(s, n, sizeof *s, cmp_str_ptr);
	int rc = 0;
	for (size_t i = 1; i < n && !rc; i++)
		if (strcmp(s[i - 1], s[i]) == 0)
			rc = tank_error_set(err, TANK_EINVALID,
					    "%s: \"%s\" appears twice", what,
					    s[i]);
	free(s);
	return rc;
}

/* The queue is in the store now (a desired-state write committed it). */
void st__pending_done(st_t *st)
{
	pend_clear(st);
	if (st->loop)
		ev_timer_stop(st->loop, &st->timer);
}

/* Pods' desired state is the pods' collection's (st_coll.c). */
void st_commit_stats(const st_t *st, kit_hist_t *durable, kit_hist_t *flush)
{
	*durable = st->commit_durable;
	*flush = st->commit_flush;
}

int st_usage(st_t *st, st_usage_t *out)
{
	MDB_envinfo info;
	MDB_stat ms;
	size_t nfree, nreuse;
	int rc;

	memset(out, 0, sizeof *out);
	tank_error_t e;
	if (st__env_ok(st, &e) || (rc = mdb_env_info(st->env, &info)) ||
	    (rc = mdb_env_stat(st->env, &ms)))
		return -EIO;
	/* Pages freed by earlier commits are reused first: they count as
	 * room. */
	free_pages(st, info.me_last_txnid, &nfree, &nreuse);
	size_t pages = info.me_last_pgno + 1;
	out->total = st->map_size;
	out->high_water = pages * ms.ms_psize;
	out->used = (pages > nfree ? pages - nfree : 0) * ms.ms_psize;
	out->reusable = (nreuse < pages ? nreuse : pages) * ms.ms_psize;
	out->reserve = st__reserve(st->map_size);
	out->flush_failures = st->flush_failures;
	out->history_dropped = st->history_dropped;
	out->history_trimmed = st->history_trimmed;
	out->map_trims = st->trims;
	out->env_reopens = st->reopens;
	out->commit_waits = st->ac_waits;
	out->commit_wait_ns = st->ac_wait_ns;
	return 0;
}

/* ---- history trimmed for an apply --------------------------------------- */

#define ST_TRIM_NAMES 64           /* histories a trim's transaction goes through */

typedef struct trim_arg {
	st_coll_t *c;
	uint64_t keep;             /* newest entries kept in each history */
	char from[ST_NAME_MAX + 1]; /* the first history of this transaction ("": the first) */
	char next[ST_NAME_MAX + 1]; /* out: the next transaction's from */
	bool done;                 /* out: no history after this transaction's */
	uint64_t dropped;          /* out: entries this transaction deleted */
} trim_arg_t;

/* One transaction of a trim: up to ST_TRIM_NAMES histories from a->from,
 * each cut to its newest a->keep entries (delete_front keeps them
 * contiguous and numbered on).  Re-runnable: only out fields change. */
static int trim_fn(st_t *st, MDB_txn *txn, void *arg, tank_error_t *err)
{
	trim_arg_t *a = arg;
	MDB_cursor *cur;
	MDB_val k, v;
	unsigned char kb[ST_NAME_MAX + 1 + SEQ_LEN];
	char name[ST_NAME_MAX + 1];
	size_t len = strlen(a->from), names = 0;
	int rc;

	(void)st;
	a->dropped = 0;
	a->done = false;
	if ((rc = mdb_cursor_open(txn, a->c->db_hist, &cur)))
		return st__mdb_fail(err, rc, "store: history trim");
	st__tr_key(kb, a->from, len, 0);
	k = (MDB_val){ len + 1 + SEQ_LEN, kb };
	rc = len ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	for (; rc == 0; names++) {
		if (k.mv_size < 2 + SEQ_LEN || k.mv_size - 1 - SEQ_LEN > ST_NAME_MAX) {
			rc = MDB_CORRUPTED;     /* not a history key */
			break;
		}
		len = k.mv_size - 1 - SEQ_LEN;
		memcpy(name, k.mv_data, len);
		name[len] = '\0';
		if (names == ST_TRIM_NAMES) {
			memcpy(a->next, name, len + 1);
			break;
		}
		uint64_t first, next;
		if ((rc = st__tr_range(cur, name, len, &first, &next)))
			break;
		if (next - first > a->keep) {
			if ((rc = st__tr_delete_front(cur, name, len, next - first - a->keep)))
				break;
			a->dropped += next - first - a->keep;
		}
		/* On to the next history: past this one's last possible key. */
		st__tr_key(kb, name, len, UINT64_MAX);
		k = (MDB_val){ len + 1 + SEQ_LEN, kb };
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND) {
		a->done = true;
		rc = 0;
	}
	return rc ? st__mdb_fail(err, rc, "store: history trim") : 0;
}

/* Cuts every history of every collection to its newest keep entries,
 * ST_TRIM_NAMES histories a transaction (each commit frees pages the
 * next can take: one transaction for all could not find the pages its
 * copies need on a full disk).  History is what the store keeps last:
 * an apply refused for room on a disk that cannot grow the map trims it
 * before it says no (st__headroom).  Blocks the caller for the walk
 * (only on a full disk).  Returns the entries deleted; what is trimmed
 * when a transaction fails stays trimmed. */
static uint64_t history_trim(st_t *st, uint64_t keep)
{
	uint64_t dropped = 0;
	for (size_t i = 0; i < st->n_colls; i++) {
		trim_arg_t *a = calloc(1, sizeof *a);
		if (!a)
			break;
		a->c = st->colls[i];
		a->keep = keep;
		for (;;) {
			tank_error_t e;
			if (st__write_txn(st, false, "store: history trim", trim_fn, a, &e))
				break;
			dropped += a->dropped;
			if (a->done)
				break;
			memcpy(a->from, a->next, sizeof a->from);
		}
		free(a);
	}
	st->history_trimmed += dropped;
	return dropped;
}

/* An apply's transaction commits the queue first (coll__put_fn): the
 * history queued past its mark is dropped (counted) before, as a flush
 * drops it (flush_all), so that an apply does not write it into the
 * part of the reserve kept for statuses and deletes. */
static void queue_keeps_marks(st_t *st)
{
	if (st->n_trs && history_over_mark(st)) {
		st->history_dropped += st->n_trs;
		st->n_trs = 0;
	}
}

/* The bytes every collection's history takes on its pages (mdb_stat's
 * counts, no walk): the most a cut could free. */
static size_t history_bytes(st_t *st)
{
	MDB_txn *txn;
	size_t bytes = 0;
	if (mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn))
		return 0;
	for (size_t i = 0; i < st->n_colls; i++) {
		MDB_stat h;
		if (mdb_stat(txn, st->colls[i]->db_hist, &h) == 0)
			bytes += (h.ms_leaf_pages + h.ms_branch_pages + h.ms_overflow_pages) *
				 h.ms_psize;
	}
	mdb_txn_abort(txn);
	return bytes;
}

/* What a status takes on its pages before any is stored: a pod's with
 * one container and short reasons, with the slack of LMDB's pages. */
#define ST_STATUS_GUESS 384

/* The room the statuses the stored objects have not written yet will
 * take: for every collection that stores statuses (and the pods'), its
 * objects less its statuses, each at the size a stored status takes on
 * its pages (ST_STATUS_GUESS while none is stored); that size for the
 * pods' in *pod_each.  The pods of
 * an apply run long before all their statuses land; without this, an
 * apply right after another was let in on the statuses already
 * written, and on a full disk the store then held pods whose statuses
 * had no room (s5_full.sh, issue 38 round 10).  mdb_stat's counts: no
 * walk. */
static size_t statuses_to_come(st_t *st, size_t *pod_each)
{
	MDB_txn *txn;
	size_t sum = 0;
	*pod_each = ST_STATUS_GUESS;
	if (mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn))
		return 0;
	for (size_t i = 0; i < st->n_colls; i++) {
		MDB_stat o, s;
		st_coll_t *c = st->colls[i];
		if (mdb_stat(txn, c->db_obj, &o) || mdb_stat(txn, c->db_status, &s))
			continue;
		/* A kind whose objects keep no status (tasks are templates):
		 * none to come.  Pods always write one. */
		if (!s.ms_entries && c != st->pods)
			continue;
		size_t each = s.ms_entries ? (s.ms_leaf_pages + s.ms_overflow_pages) *
					     s.ms_psize / s.ms_entries
					   : ST_STATUS_GUESS;
		if (c == st->pods)
			*pod_each = each;
		if (o.ms_entries > s.ms_entries)
			sum += (o.ms_entries - s.ms_entries) * each;
	}
	mdb_txn_abort(txn);
	return sum;
}

/* What a pod's put takes: its record twice (copy on write: the pages it
 * replaces are free only after the next commit). */
static size_t put_cost(const st_pod_in_t *p)
{
	return 2 * (p->spec_len + strlen(p->name) + 128);
}

/* What the batch takes, looked up pod by pod: *need its records (twice,
 * copy on write) but for the pods stored with the same spec (a re-apply
 * writes nothing for them), *fresh the pods with no status stored
 * and no object stored (whose statuses are still to come; a stored
 * pod's are counted by statuses_to_come).  Asked only of a batch that
 * does not fit by the first count, which takes every pod as new.  The
 * batch is not validated yet: a spec may be NULL. */
static void batch_cost(st_t *st, const st_pod_in_t *pods, size_t n, size_t *need,
		       size_t *fresh)
{
	MDB_txn *txn;
	if (mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn))
		return;
	*need = *fresh = 0;
	for (size_t i = 0; i < n; i++) {
		size_t kl = strlen(pods[i].name);
		MDB_val k = { kl, (void *)pods[i].name }, v;
		st_pod_t p;
		bool stored = mdb_get(txn, st->pods->db_obj, &k, &v) == 0;
		/* A stored pod without a status is statuses_to_come's. */
		if (!stored && mdb_get(txn, st->pods->db_status, &k, &v) != 0)
			(*fresh)++;
		if (stored &&
		    st__dec_pod_ex(v.mv_data, v.mv_size, pods[i].name, kl, &p, true, NULL) == 0 &&
		    st__spec_same(&p, &pods[i]))
			continue;
		*need += put_cost(&pods[i]);
	}
	mdb_txn_abort(txn);
}

/* Applies stop where the reserve begins: what is left is for what must
 * always succeed (status changes, deletes).  A batch that would pass the
 * mark first tries to grow the map (room asked of the disk, see
 * prealloc); if the disk has none, the apply is refused. */
int st__headroom(st_t *st, const st_pod_in_t *pods, size_t n, tank_error_t *err)
{
	size_t need = 0, fresh = n;
	int trims = 0;
	bool counted = false;
	st_usage_t u;
	/* Every pod's put (batch_cost counts again, if need be, without
	 * the pods stored as they are). */
	for (size_t i = 0; i < n; i++)
		need += put_cost(&pods[i]);
	for (;;) {
		if (st_usage(st, &u) < 0)
			return 0;               /* cannot tell: let LMDB say */
		/* The statuses still to come: the stored pods' and the
		 * batch's (at first every pod of it, then, if that does not
		 * fit, the ones with no status stored: batch_cost). */
		size_t each, stored = statuses_to_come(st, &each), later;
		for (;;) {
			later = stored + fresh * each;
			/* Room in the live data, and the file's end far
			 * enough that history and status keep their half of
			 * the reserve (pages a write reuses before the end
			 * count as room there). */
			if (u.used + later + need + u.reserve <= u.total &&
			    u.high_water - u.reusable + later + need + u.reserve / 2 <= u.total)
				return queue_keeps_marks(st), 0;
			if (counted)
				break;
			batch_cost(st, pods, n, &need, &fresh);
			counted = true;
			/* Nothing of its own to write (every pod stored as it
			 * is): not refused over the mark, as long as the queue
			 * its transaction commits first keeps the marks a
			 * flush keeps (history past its mark dropped,
			 * statuses not waiting). */
			if (!need && !fresh && !st__status_waits(st))
				return queue_keeps_marks(st), 0;
		}
		tank_error_t g;
		int rc = grow_map(st, &g);
		if (rc == 0)
			continue;
		/* History gives way before the apply is refused: cut to its
		 * newest 16 entries an object, then to the last one (its
		 * numbering goes on).  Only where it can make the room (an
		 * apply that would not fit with no history at all keeps
		 * it), and not again once cut to one while no history was
		 * written since. */
		bool cut = false;
		size_t hist = history_bytes(st);
		if (st->hist_writes != st->hist_writes_trimmed &&
		    u.used - (hist < u.used ? hist : u.used) + later + need + u.reserve <= u.total) {
			while (!cut && trims < 2)
				cut = history_trim(st, trims++ ? 1 : 16) > 0;
			if (trims == 2)
				st->hist_writes_trimmed = st->hist_writes;
		}
		if (cut)
			continue;
		return tank_error_set(err, TANK_ESTOREFULL,
				      "store full: %zu of %zu bytes in use (%zu of the file "
				      "taken, %zu more for statuses not written yet), %zu are "
				      "kept for status changes and deletes, and the disk has no "
				      "room to grow it; free disk space (or delete pods)",
				      u.used, u.total, u.high_water, later, u.reserve);
	}
}

int st_apply(st_t *st, const st_pod_in_t *pods, size_t n,
	     st_apply_result_t *results, tank_error_t *err)
{
	int rc = st__headroom(st, pods, n, err);
	return rc ? rc : st_coll_put(st->pods, pods, n, results, err);
}

int st_delete(st_t *st, const char *const *names, size_t n, bool *deleted,
	      tank_error_t *err)
{
	return st_coll_delete(st->pods, names, n, deleted, err);
}

st_coll_t *st_pods(st_t *st)
{
	return st->pods;
}

int st_subscribe(st_t *st, st_subscriber_fn fn, void *ctx)
{
	return st_coll_watch(st->pods, fn, ctx);
}

int st_unsubscribe(st_t *st, int id)
{
	return st_coll_unwatch(st->pods, id);
}

/* ---- reads ------------------------------------------------------------- */

int st__read_begin(st_t *st, MDB_txn **txn, tank_error_t *err)
{
	if (st__env_ok(st, err))
		return err->code;
	st__touch(st);
	int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn);
	if (rc == MDB_MAP_RESIZED) {
		/* Only another process could have grown it; adopt its size. */
		mdb_env_set_mapsize(st->env, 0);
		rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn);
	}
	return rc ? st__mdb_fail(err, rc, "store: read") : 0;
}

void st_pod_clear(st_pod_t *p)
{
	if (p) {
		free(p->spec);
		p->spec = NULL;
		p->spec_len = 0;
	}
}

void st_pod_list_free(st_pod_t *pods, size_t n)
{
	for (size_t i = 0; i < n; i++)
		st_pod_clear(&pods[i]);
	free(pods);
}

int st_pod_get(st_t *st, const char *name, st_pod_t *out, tank_error_t *err)
{
	return st_coll_get(st->pods, name, out, err);
}

int st_pod_list(st_t *st, st_pod_t **out, size_t *n, tank_error_t *err)
{
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_stat ms;
	st_pod_t *arr = NULL;
	size_t cnt = 0;
	*out = NULL;
	*n = 0;
	int rc = st__read_begin(st, &txn, err);
	if (rc)
		return rc;
	if ((rc = mdb_stat(txn, st->pods->db_obj, &ms)) ||
	    (rc = mdb_cursor_open(txn, st->pods->db_obj, &c))) {
		mdb_txn_abort(txn);
		return st__mdb_fail(err, rc, "store: list pods");
	}
	if (ms.ms_entries && !(arr = calloc(ms.ms_entries, sizeof *arr)))
		rc = tank_error_set(err, -ENOMEM, "out of memory");
	MDB_val k, v;
	for (int op = MDB_FIRST; !rc && cnt < ms.ms_entries; op = MDB_NEXT) {
		int r = mdb_cursor_get(c, &k, &v, op);
		if (r == MDB_NOTFOUND)
			break;
		if (r) {
			rc = st__mdb_fail(err, r, "store: list pods");
			break;
		}
		rc = st__dec_pod(v.mv_data, v.mv_size, k.mv_data, k.mv_size,
				 &arr[cnt], err);
		if (!rc)
			cnt++;
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (rc) {
		st_pod_list_free(arr, cnt);
		return rc;
	}
	*out = arr;
	*n = cnt;
	return 0;
}

int st_pod_foreach(st_t *st, st_pod_fn fn, void *ctx, tank_error_t *err)
{
	return st_coll_scan(st->pods, fn, ctx, err);
}

int st_pod_foreach_from(st_t *st, const char *after, st_pod_fn fn, void *ctx,
			tank_error_t *err)
{
	return st_coll_scan_from(st->pods, after, fn, ctx, err);
}

int st_coll_status_get_typed(st_coll_t *co, const char *name, st_status_t *out,
			     tank_error_t *err)
{
	memset(out, 0, sizeof *out);
	if (!co->decl->typed_status)
		return tank_error_set(err, TANK_EINVALID, "%s: no typed status", co->decl->name);
	int rc = 0;
	cent_t *c = name_ok(name) ? cache_lookup(co, name, NULL, &rc, err) : NULL;
	if (rc)
		return rc;
	if (!c)
		return tank_error_set(err, TANK_ENOTFOUND, "no status for \"%s\"",
				      name ? name : "");
	if (c->corrupt)
		return tank_error_set(err, TANK_ECORRUPT, "%s", c->corrupt);
	if (rec_get(c, out))
		return tank_error_set(err, -ENOMEM, "out of memory");
	return 0;
}

int st_status_get(st_t *st, const char *name, st_status_t *out,
		  tank_error_t *err)
{
	return st_coll_status_get_typed(st->pods, name, out, err);
}

/* Sorts the cache and fails on the first damaged record: a list must not
 * quietly leave a pod out. */
static int walk_begin(st_coll_t *c, tank_error_t *err)
{
	if (!c->decl->typed_status)
		return tank_error_set(err, TANK_EINVALID, "%s: no typed status", c->decl->name);
	int rc = st__cache_complete(c, err);
	if (rc)
		return rc;
	if (cache_order(c))
		return tank_error_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < c->n_cache; i++)
		if (c->order[i]->corrupt)
			return tank_error_set(err, TANK_ECORRUPT, "%s",
					      c->order[i]->corrupt);
	return 0;
}

int st_coll_status_foreach(st_coll_t *c, st_status_fn fn, void *ctx, tank_error_t *err)
{
	/* One unpacked record at a time, its containers in a buffer kept
	 * for the walk. */
	st_container_status_t one[4], *cs = one;
	size_t cap = sizeof one / sizeof one[0];
	int rc = walk_begin(c, err);
	for (size_t i = 0; i < c->n_cache && !rc; i++) {
		const cent_t *e = c->order[i];
		st_status_t s;
		if (e->nctrs > cap) {
			st_container_status_t *n = malloc(e->nctrs * sizeof *n);
			if (!n) {
				rc = tank_error_set(err, -ENOMEM, "out of memory");
				break;
			}
			if (cs != one)
				free(cs);
			cs = n;
			cap = e->nctrs;
		}
		rec_unpack(e, &s, cs);
		rc = fn(ctx, &s);
	}
	if (cs != one)
		free(cs);
	return rc;
}

int st_status_foreach(st_t *st, st_status_fn fn, void *ctx, tank_error_t *err)
{
	return st_coll_status_foreach(st->pods, fn, ctx, err);
}

int st_coll_status_list(st_coll_t *c, st_status_t **out, size_t *n, tank_error_t *err)
{
	*out = NULL;
	*n = 0;
	int rc = walk_begin(c, err);
	if (rc || c->n_cache == 0)
		return rc;
	/* One block: the array, then every container.  A list of 10,000 is
	 * ~10 MB; as one chunk it is reused by the allocator from call to call
	 * instead of being trimmed and page-faulted in again, which made a
	 * list cost 1 to 5 ms. */
	size_t nc = 0;
	for (size_t i = 0; i < c->n_cache; i++)
		nc += c->order[i]->nctrs;
	st_status_t *arr = malloc(c->n_cache * sizeof *arr +
				  nc * sizeof(st_container_status_t));
	if (!arr)
		return tank_error_set(err, -ENOMEM, "out of memory");
	st_container_status_t *cs = (st_container_status_t *)(arr + c->n_cache);
	for (size_t i = 0; i < c->n_cache; i++) {
		rec_unpack(c->order[i], &arr[i], cs);
		cs += c->order[i]->nctrs;
	}
	*out = arr;
	*n = c->n_cache;
	return 0;
}

size_t st_status_count(st_t *st, tank_error_t *err)
{
	if (st__cache_complete(st->pods, err))
		return 0;
	return st->pods->n_cache;
}

bool st_status_has(st_t *st, const char *name)
{
	int rc;
	return name_ok(name) && cache_lookup(st->pods, name, NULL, &rc, NULL) != NULL;
}

int st_status_list(st_t *st, st_status_t **out, size_t *n, tank_error_t *err)
{
	return st_coll_status_list(st->pods, out, n, err);
}

int st_history(st_t *st, const char *name, size_t limit,
	       st_transition_t **out, size_t *n, tank_error_t *err)
{
	return st_coll_history(st->pods, name, limit, out, n, err);
}

size_t st_map_size(const st_t *st)
{
	return st->map_size;
}

const char *st_path(const st_t *st)
{
	return st->path;
}

/* ---- open / close --------------------------------------------------------- */

static int mkdir_p(char *path, mode_t mode)
{
	for (char *s = path + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		int rc = mkdir(path, mode);
		*s = c;
		if (rc && errno != EEXIST)
			return -errno;
		if (c == '\0')
			return 0;
	}
}

static int take_lock(st_t *st, tank_error_t *err)
{
	char lp[4096], buf[32];
	snprintf(lp, sizeof lp, "%s/lock", st->dir);
	int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return tank_error_set(err, -errno, "cannot open %s: %s", lp,
				      strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		if (e == EWOULDBLOCK) {
			ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
			long pid = 0;
			buf[r > 0 ? r : 0] = '\0';
			pid = strtol(buf, NULL, 10);
			close(fd);
			if (pid > 0)
				return tank_error_set(err, TANK_ELOCKED,
						      "data dir %s is in use by pid %ld",
						      st->dir, pid);
			return tank_error_set(err, TANK_ELOCKED,
					      "data dir %s is in use by another process",
					      st->dir);
		}
		close(fd);
		return tank_error_set(err, -e, "cannot lock %s: %s", lp,
				      strerror(e));
	}
	int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
		int e = errno;
		close(fd);
		return tank_error_set(err, -e, "cannot write %s: %s", lp,
				      strerror(e));
	}
	st->lock_fd = fd;
	return 0;
}

/* LMDB 0.9.24 opens one of its data.mdb descriptors without O_CLOEXEC and
 * does not expose it, so after mdb_env_open every descriptor that points
 * into our store directory is marked here.  Only the opening thread runs
 * at that point, so no fork can slip in between. */
static void cloexec_store_fds(const st_t *st)
{
	char fdp[64], tgt[4096];
	char *real = realpath(st->path, NULL);
	if (!real)
		return;
	size_t plen = strlen(real);
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		free(real);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name);
		if (de->d_name[0] == '.' || fd == dirfd(d))
			continue;
		snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fd);
		ssize_t n = readlink(fdp, tgt, sizeof tgt - 1);
		if (n <= (ssize_t)plen)
			continue;
		tgt[n] = '\0';
		if (strncmp(tgt, real, plen) == 0 && tgt[plen] == '/') {
			int fl = fcntl(fd, F_GETFD);
			if (fl >= 0 && !(fl & FD_CLOEXEC))
				fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
		}
	}
	closedir(d);
	free(real);
}

void st_uid_new(char out[ST_UID_LEN + 1])
{
	unsigned char r[16];
	size_t got = 0;

	while (got < sizeof r) {
		ssize_t n = getrandom(r + got, sizeof r - got, 0);
		if (n > 0)
			got += (size_t)n;
		else if (n < 0 && errno != EINTR)
			break;
	}
	if (got < sizeof r) {
		/* No getrandom: a uid still must differ from the last one of
		 * the name; time and a counter do that on one machine. */
		static _Atomic uint64_t seq;    /* the loop and the store's thread */
		uint64_t a = (uint64_t)st__now_ms(), b = ++seq ^ (uint64_t)getpid() << 32;
		memcpy(r, &a, 8);
		memcpy(r + 8, &b, 8);
	}
	r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);    /* version 4 */
	r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);    /* RFC 4122 variant */
	snprintf(out, ST_UID_LEN + 1,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
		 r[10], r[11], r[12], r[13], r[14], r[15]);
}

/* Schema 1 → 2: each stored pod gets a uid; nothing else changes (status
 * and history are kept as they are, and their pod keeps its generation).
 * In the open transaction, so it is all or nothing. */
static int migrate_v1_v2(st_t *st, MDB_txn *txn, MDB_dbi db_pods, tank_error_t *err)
{
	MDB_cursor *c;
	MDB_val k, v;
	char (*names)[ST_NAME_MAX + 1] = NULL;
	size_t n = 0, cap = 0;
	int rc = mdb_cursor_open(txn, db_pods, &c);

	if (rc)
		return rc;
	/* Names first: writing through the cursor while walking would move
	 * the pages its keys point into. */
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size > ST_NAME_MAX)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			void *nn = realloc(names, nc * sizeof *names);
			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			names = nn;
			cap = nc;
		}
		memcpy(names[n], k.mv_data, k.mv_size);
		names[n++][k.mv_size] = '\0';
	}
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		size_t len = strlen(names[i]);
		MDB_val key = { len, names[i] };
		st_pod_t p;
		if ((rc = mdb_get(txn, db_pods, &key, &v)))
			break;
		if (st__dec_pod(v.mv_data, v.mv_size, names[i], len, &p, NULL) < 0)
			continue;       /* a damaged record stays as it is */
		if (!p.uid[0]) {
			st_uid_new(p.uid);
			st->buf.size = 0;
			if ((rc = st__enc_pod(&st->buf, &p)) == 0)
				rc = st__put_buf(st, txn, db_pods, names[i], len);
		}
		free(p.spec);
	}
	free(names);
	if (rc)
		return tank_error_set(err, rc < 0 ? rc : TANK_ECORRUPT,
				      "store %s: migrating to schema 2: %s", st->path,
				      rc < 0 ? tank_strerror(rc) : mdb_strerror(rc));
	return 0;
}

/* Moves every record of database `from` into `to` (created) byte for
 * byte, then deletes `from`; nothing to do when `from` does not exist.
 * Each record is copied out of the map before the put (a put may move the
 * pages a cursor's values point into). */
static int move_db(st_t *st, MDB_txn *txn, const char *from, const char *to)
{
	MDB_dbi a, b;
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_dbi_open(txn, from, 0, &a);

	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc || (rc = mdb_dbi_open(txn, to, MDB_CREATE, &b)) ||
	    (rc = mdb_cursor_open(txn, a, &c)))
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		st->buf.size = 0;
		if (msgpack_sbuffer_write(&st->buf, k.mv_data, k.mv_size) ||
		    msgpack_sbuffer_write(&st->buf, v.mv_data, v.mv_size)) {
			rc = -ENOMEM;
			break;
		}
		MDB_val nk = { k.mv_size, st->buf.data };
		MDB_val nv = { v.mv_size, st->buf.data + k.mv_size };
		if ((rc = mdb_put(txn, b, &nk, &nv, 0)))
			break;
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND)
		return rc;
	return mdb_drop(txn, a, 1);
}

/* Schema 2 → 3: the pods' observed state moves to their collection's
 * databases ("status" → "pods.status", "transitions" → "pods.history"),
 * byte for byte, so that pods are a collection like any other.  History
 * entries keep their old shape ({at, from, to, reason}); readers fill kind,
 * key, uid and seq and mark them legacy (st_coll.c), for every
 * collection's old entries alike.  In the open transaction. */
static int migrate_v2_v3(st_t *st, MDB_txn *txn, tank_error_t *err)
{
	int rc = move_db(st, txn, "status", "pods.status");

	if (!rc)
		rc = move_db(st, txn, "transitions", "pods.history");
	if (rc && rc != MDB_MAP_FULL)
		return tank_error_set(err, rc < 0 ? rc : TANK_ECORRUPT,
				      "store %s: migrating to schema 3: %s", st->path,
				      rc < 0 ? tank_strerror(rc) : mdb_strerror(rc));
	return rc;
}

static int open_fn(st_t *st, MDB_txn *txn, void *arg, tank_error_t *err)
{
	(void)arg;
	int rc;
	MDB_dbi db_pods;
	if ((rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &st->db_meta)) ||
	    (rc = mdb_dbi_open(txn, "pods", MDB_CREATE, &db_pods)))
		return rc;
	MDB_val k = { sizeof META_SCHEMA_KEY - 1, META_SCHEMA_KEY }, v;
	rc = mdb_get(txn, st->db_meta, &k, &v);
	if (rc == MDB_NOTFOUND) {
		st->buf.size = 0;
		if ((rc = st__enc_uint(&st->buf, ST_SCHEMA_VERSION)))
			return rc;
		return st__put_buf(st, txn, st->db_meta, k.mv_data, k.mv_size);
	}
	if (rc)
		return rc;
	uint64_t ver;
	if (st__dec_uint(v.mv_data, v.mv_size, &ver) || ver == 0)
		return tank_error_set(err, TANK_ECORRUPT,
				      "store %s: meta record \"%s\": corrupt msgpack",
				      st->path, META_SCHEMA_KEY);
	if (ver > ST_SCHEMA_VERSION)
		return tank_error_set(err, TANK_ESCHEMA,
				      "store %s has schema version %llu; this tank "
				      "understands versions up to %d (upgrade tank)",
				      st->path, (unsigned long long)ver,
				      ST_SCHEMA_VERSION);
	if (ver < 2 && (rc = migrate_v1_v2(st, txn, db_pods, err)))
		return rc;
	if (ver < 3 && (rc = migrate_v2_v3(st, txn, err)))
		return rc;
	if (ver < ST_SCHEMA_VERSION) {
		st->buf.size = 0;
		if ((rc = st__enc_uint(&st->buf, ST_SCHEMA_VERSION)))
			return rc;
		return st__put_buf(st, txn, st->db_meta, k.mv_data, k.mv_size);
	}
	return 0;
}

/* Creates and opens st->env on st->path at st->map_size (st->env NULL
 * on failure, with why in err). */
static int env_open(st_t *st, tank_error_t *err)
{
	int rc;
	if ((rc = mdb_env_create(&st->env))) {
		st->env = NULL;
		return st__mdb_fail(err, rc, "store: mdb_env_create");
	}
	/* Four for pods and meta, and room for every kind's collection
	 * (st_coll.h: three databases each, plus its indexes). */
	mdb_env_set_maxdbs(st->env, 128);
	mdb_env_set_mapsize(st->env, st->map_size);
	/* NOTLS: read txns are not tied to threads.  NOSYNC: group commits
	 * do not fsync; durable commits turn it off around themselves (see
	 * st__write_txn) and the sync thread covers the rest. */
	rc = mdb_env_open(st->env, st->path, MDB_NOTLS | MDB_NOSYNC, 0600);
	if (rc) {
		char w[200];
		mdb_env_close(st->env);
		st->env = NULL;
		snprintf(w, sizeof w, "cannot open store %s", st->path);
		return st__mdb_fail(err, rc, w);
	}
	return 0;
}

/* The handles of every open database, in a fresh environment: a reopened
 * environment numbers its handles anew (the migrations' ones are gone),
 * so each is looked up by name again.  Without MDB_CREATE: they all
 * exist, nothing is written, and a file that is not the store's any
 * more fails (MDB_NOTFOUND) instead of being filled with empty ones. */
static int dbis_reopen(st_t *st, tank_error_t *err)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc)
		return st__mdb_fail(err, rc, "store: reopen");
	rc = mdb_dbi_open(txn, "meta", 0, &st->db_meta);
	for (size_t i = 0; i < st->n_colls && !rc; i++)
		rc = st__coll_dbis_open(st->colls[i], txn, 0);
	if (rc) {
		mdb_txn_abort(txn);
		return st__mdb_fail(err, rc, "store: reopen");
	}
	if ((rc = mdb_txn_commit(txn)))
		return st__mdb_fail(err, rc, "store: reopen");
	return 0;
}

/* Opens the environment again after env_reopen closed it (and its open
 * failed).  The data fd is the only one LMDB opens without O_CLOEXEC
 * (its lock file and its O_DSYNC fd have it); containers close every
 * fd above 2 before exec anyway. */
static int env_open_again(st_t *st, tank_error_t *err)
{
	mdb_filehandle_t fd;
	int rc = env_open(st, err);
	if (!rc && mdb_env_get_fd(st->env, &fd) == 0) {
		int fl = fcntl(fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
	}
	if (!rc && (rc = dbis_reopen(st, err))) {
		mdb_env_close(st->env);
		st->env = NULL;
	}
	return rc;
}

int st__env_ok(st_t *st, tank_error_t *err)
{
	if (st->env)
		return 0;
	pthread_mutex_lock(&st->env_mu);
	int rc = env_open_again(st, err);
	pthread_mutex_unlock(&st->env_mu);
	if (rc)
		return rc;
	return 0;
}

/* env_reopen: LMDB gives the pages a write transaction dirtied back to
 * a list of its environment, not to malloc, and frees that list only in
 * mdb_env_close; the list keeps as many pages as the largest write
 * transaction since the open dirtied.  An apply of 10,000 pods is one
 * transaction (the contract: all or nothing): 12 MB that tankd held
 * until it exited, 1.2 KiB a pod.  So once the store is quiet (the trim
 * timer, no transaction for ST_TRIM_QUIET_MS, no commit on the thread)
 * and a transaction wrote ST_REOPEN_WRITES records or more since the
 * open, the environment is closed and opened again, and malloc gives
 * the freed pages back to the system.  Closing commits nothing and
 * loses nothing: every commit is already in the file (pwrite; the page
 * cache holds what is not fsynced yet, and the sync thread's next fsync
 * covers it through the new environment's fd).  No read transaction
 * lives across turns (they begin and end in one call), and env_mu,
 * held throughout, keeps the sync thread's fsync out.  A failed open
 * leaves env NULL: every entry point tries again (st__env_ok) and fails
 * with why until it works; nothing is lost, the data file is untouched. */
static bool env_reopen(st_t *st)
{
	tank_error_t e;
	struct stat open_sb, path_sb;
	mdb_filehandle_t fd;
	char data[PATH_MAX];

	/* Only if the path still names the file open: a data file removed
	 * or replaced under tankd would be opened empty, and tankd would
	 * then stop what runs.  The open one stays, as before. */
	snprintf(data, sizeof data, "%s/data.mdb", st->path);
	if (mdb_env_get_fd(st->env, &fd) || fstat(fd, &open_sb) ||
	    stat(data, &path_sb) || open_sb.st_ino != path_sb.st_ino ||
	    open_sb.st_dev != path_sb.st_dev)
		return false;
	pthread_mutex_lock(&st->env_mu);
	mdb_env_close(st->env);
	st->env = NULL;
	/* Before the open: it mallocs 3 MB of lists (mostly never touched),
	 * which would otherwise take the freed pages, still resident. */
	malloc_trim(0);
	(void)env_open_again(st, &e);
	pthread_mutex_unlock(&st->env_mu);
	st->max_txn_writes = 0;
	st->reopens++;
	return true;
}

static void *sync_main(void *arg)
{
	st_t *st = arg;
	pthread_mutex_lock(&st->q_mu);
	for (;;) {
		while (!st->sync_req && !st->sync_stop && st->ac_state != ST_AC_QUEUED)
			pthread_cond_wait(&st->q_cv, &st->q_mu);
		if (st->ac_state == ST_AC_QUEUED) {
			/* An async commit: its transaction, commit and fsync
			 * here; the loop completes it (ac_complete). */
			st_acommit_t *a = st->ac;
			st->ac_state = ST_AC_RUNNING;
			pthread_mutex_unlock(&st->q_mu);
			ac_run(st, a);
			pthread_mutex_lock(&st->q_mu);
			st->ac_state = ST_AC_DONE;
			pthread_cond_broadcast(&st->ac_cv);
			if (st->dur_on)
				ev_async_send(st->loop, &st->dur_async);
			continue;
		}
		if (!st->sync_req)
			break;
		st->sync_req = false;
		/* Everything committed before this point is covered by the
		 * sync that follows: the numbers asked for so far. */
		uint64_t want = st->dur_want;
		pthread_mutex_unlock(&st->q_mu);
		pthread_mutex_lock(&st->env_mu);
		/* No environment: its reopen failed (env_reopen), and what
		 * was committed before is not known to be on disk. */
		int rc = st->env ? mdb_env_sync(st->env, 1) : EIO;
		pthread_mutex_unlock(&st->env_mu);
		pthread_mutex_lock(&st->q_mu);
		if (rc) {
			st->sync_err = rc;
			if (want > st->dur_done) {
				st->dur_fail = want;
				st->dur_fail_rc = rc;
			}
		} else if (want > st->dur_done) {
			st->dur_done = want;
		}
		if (want && st->dur_on)
			ev_async_send(st->loop, &st->dur_async);
	}
	pthread_mutex_unlock(&st->q_mu);
	return NULL;
}

static int start_sync_thread(st_t *st)
{
	sigset_t all, old;
	/* The thread must never take the daemon's signals (libev's signal
	 * watchers expect them on the loop thread). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&st->sync_thr, NULL, sync_main, st);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	st->sync_started = true;
	return 0;
}

static void st_free(st_t *st)
{
	if (st->sync_started) {
		pthread_mutex_lock(&st->q_mu);
		st->sync_stop = true;
		pthread_cond_signal(&st->q_cv);
		pthread_mutex_unlock(&st->q_mu);
		pthread_join(st->sync_thr, NULL);
	}
	if (st->env)
		mdb_env_close(st->env);
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	durable_cancel(st);
	free(st->waiters);
	pend_clear(st);
	st__coll_free_all(st);
	free(st->pend);
	free(st->trs);
	msgpack_sbuffer_destroy(&st->buf);
	pthread_mutex_destroy(&st->q_mu);
	pthread_mutex_destroy(&st->env_mu);
	pthread_cond_destroy(&st->q_cv);
	pthread_cond_destroy(&st->ac_cv);
	free(st->dir);
	free(st->path);
	free(st);
}

int st_open(const char *data_dir, const st_options_t *opts, st_t **out,
	    tank_error_t *err)
{
	st_options_t o = { 0 };
	int rc;
	*out = NULL;
	if (opts)
		o = *opts;
	if (!data_dir || !*data_dir)
		return tank_error_set(err, TANK_EINVALID, "store: no data dir");
	st_t *st = calloc(1, sizeof *st);
	if (!st)
		return tank_error_set(err, -ENOMEM, "out of memory");
	st->lock_fd = -1;
	pthread_mutex_init(&st->q_mu, NULL);
	pthread_mutex_init(&st->env_mu, NULL);
	pthread_cond_init(&st->q_cv, NULL);
	pthread_cond_init(&st->ac_cv, NULL);
	msgpack_sbuffer_init(&st->buf);
	st->history_limit = o.history_limit ? o.history_limit : ST_HISTORY_DEFAULT;
	st->flush_ms = o.flush_interval_ms ? o.flush_interval_ms
					   : ST_FLUSH_INTERVAL_DEFAULT;
	st->map_size = o.map_size ? o.map_size : ST_MAP_SIZE_DEFAULT;
	/* History may be on disk already: an apply on a full disk may trim
	 * it before this process writes any (st__headroom). */
	st->hist_writes = 1;
	st->on_flush_error = o.on_flush_error;
	st->on_flush_error_ctx = o.on_flush_error_ctx;
	st->commit_gate = o.commit_gate;
	st->commit_gate_ctx = o.commit_gate_ctx;
	st->dir = strdup(data_dir);
	if (st->dir && asprintf(&st->path, "%s/store", data_dir) < 0)
		st->path = NULL;
	if (!st->dir || !st->path) {
		rc = tank_error_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = mkdir_p(st->path, 0700))) {
		tank_error_set(err, rc, "cannot create %s: %s", st->path,
			       strerror(-rc));
		goto fail;
	}
	if ((rc = take_lock(st, err)))
		goto fail;
	if ((rc = env_open(st, err)))
		goto fail;
	cloexec_store_fds(st);
	/* A previous owner killed with SIGKILL leaves reader slots behind. */
	int dead;
	mdb_reader_check(st->env, &dead);
	MDB_envinfo info;
	if (mdb_env_info(st->env, &info) == 0 && info.me_mapsize > st->map_size)
		st->map_size = info.me_mapsize;
	/* A disk smaller than the map: a smaller map that the disk holds
	 * (never below what the file already uses), so the promise above
	 * holds.  On a disk already full the store still opens, its reads
	 * work, and a write that needs room fails with the reason. */
	if (prealloc(st, st->map_size) == -ENOSPC) {
		MDB_stat ms;
		size_t floor = 256u << 10;
		if (mdb_env_stat(st->env, &ms) == 0 &&
		    (info.me_last_pgno + 1) * ms.ms_psize * 2 > floor)
			floor = (info.me_last_pgno + 1) * ms.ms_psize * 2;
		size_t m = st->map_size;
		while (m / 2 >= floor && prealloc(st, m / 2) == -ENOSPC)
			m /= 2;
		if (m / 2 >= floor && mdb_env_set_mapsize(st->env, m / 2) == 0)
			st->map_size = m / 2;
	}
	if ((rc = start_sync_thread(st))) {
		tank_error_set(err, rc, "store: cannot start sync thread: %s",
			       strerror(-rc));
		goto fail;
	}
	tank_error_clear(err);
	if ((rc = st__write_txn(st, true, "open", open_fn, NULL, err)) ||
	    (rc = st_coll_open(st, &st__pods_decl, &st->pods, err)))
		goto fail;
	*out = st;
	return 0;
fail:
	st_free(st);
	return rc;
}

int st_close(st_t *st, tank_error_t *err)
{
	if (!st)
		return 0;
	st_detach_loop(st);
	int rc = st_flush(st, err);
	pthread_mutex_lock(&st->env_mu);
	int src = st->env ? mdb_env_sync(st->env, 1) : EIO;
	pthread_mutex_unlock(&st->env_mu);
	if (!rc && src)
		rc = st__mdb_fail(err, src, "store: final fsync");
	st_free(st);
	return rc;
}
