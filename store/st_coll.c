/*
 * st_coll.c — collections declared by kinds (st_coll.h).
 *
 * Desired records use the pod record's shape and codec (st_codec.c), so
 * identity (uid, generation) works the same for every kind.  Queued
 * status and history writes of every collection (pods included) live in
 * the store's one queue (st.c), committed by its group commit; reads see
 * the queue (read your own writes).
 */
#include "store/st_coll.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/st_codec.h"
#include "store/st_int.h"

static bool coll__name_ok(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;
	if (!n || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
			return false;
	return true;
}

static bool coll__key_ok(const char *k)
{
	size_t n = k ? strlen(k) : 0;
	return n && n <= ST_NAME_MAX;
}

static const char *coll__noun(const st_coll_t *c)
{
	return c->decl->noun ? c->decl->noun : c->decl->name;
}

int st__coll_dbis_open(st_coll_t *c, MDB_txn *txn, unsigned flags)
{
	const st_coll_decl_t *d = c->decl;
	char db[ST_COLL_NAME_MAX * 2 + 16];
	int rc;

	if ((rc = mdb_dbi_open(txn, d->name, flags, &c->db_obj)))
		return rc;
	snprintf(db, sizeof db, "%s.status", d->name);
	if ((rc = mdb_dbi_open(txn, db, flags, &c->db_status)))
		return rc;
	snprintf(db, sizeof db, "%s.history", d->name);
	if ((rc = mdb_dbi_open(txn, db, flags, &c->db_hist)))
		return rc;
	for (size_t i = 0; i < d->nindexes; i++) {
		snprintf(db, sizeof db, "%s.idx.%s", d->name, d->indexes[i].name);
		if ((rc = mdb_dbi_open(txn, db, flags, &c->db_idx[i])))
			return rc;
	}
	return 0;
}

static int coll__open_fn(st_t *st, MDB_txn *txn, void *arg, tank_error_t *err)
{
	(void)st; (void)err;
	return st__coll_dbis_open(arg, txn, MDB_CREATE);
}

/* The pods' collection: named like any other since schema 3 (their status
 * and history were "status" and "transitions" before; st.c's migration
 * moves them).  Its status records are st_status_t, kept decoded. */
const st_coll_decl_t st__pods_decl = { .name = "pods", .noun = "pod", .typed_status = true };

static bool coll__reserved(const char *name)
{
	return !strcmp(name, "pods") || !strcmp(name, "status") ||
	       !strcmp(name, "transitions") || !strcmp(name, "meta");
}

int st_coll_open(st_t *st, const st_coll_decl_t *decl, st_coll_t **out,
		 tank_error_t *err)
{
	st_coll_t *c, **nc;
	int rc;

	for (size_t i = 0; i < st->n_colls; i++)
		if (st->colls[i]->decl == decl) {
			*out = st->colls[i];
			return 0;
		}
	if (!decl || !coll__name_ok(decl->name, ST_COLL_NAME_MAX) ||
	    (decl != &st__pods_decl && coll__reserved(decl->name)) ||
	    decl->nindexes > ST_COLL_INDEX_MAX)
		return tank_error_set(err, TANK_EINVALID,
				      "collection \"%s\": name must be [a-z_]{1,%d}, not a "
				      "store database, with at most %d indexes",
				      decl && decl->name ? decl->name : "", ST_COLL_NAME_MAX,
				      ST_COLL_INDEX_MAX);
	for (size_t i = 0; i < decl->nindexes; i++)
		if (!coll__name_ok(decl->indexes[i].name, ST_COLL_NAME_MAX) ||
		    !decl->indexes[i].key_of)
			return tank_error_set(err, TANK_EINVALID,
					      "collection \"%s\": index %zu: bad name or no key_of",
					      decl->name, i);
	if (!(c = calloc(1, sizeof *c)) ||
	    !(nc = realloc(st->colls, (st->n_colls + 1) * sizeof *nc))) {
		free(c);
		return tank_error_set(err, -ENOMEM, "out of memory");
	}
	st->colls = nc;
	c->st = st;
	c->decl = decl;
	c->history_limit = decl->history_limit ? decl->history_limit : st->history_limit;
	c->noun = coll__noun(c);
	c->noun_len = strlen(c->noun);
	if ((rc = st__write_txn(st, true, "open collection", coll__open_fn, c, err))) {
		free(c);
		return rc;
	}
	c->idx = st->n_colls;
	st->colls[st->n_colls++] = c;
	c->loaded = true;
	if (decl->typed_status)
		st__cache_begin(c);
	*out = c;
	return 0;
}

/* ---- observed state: writes ---------------------------------------------- */

int st_coll_status_put(st_coll_t *c, const char *key, const void *bytes, size_t len)
{
	pend_t *p;
	void *copy;

	if (!coll__key_ok(key) || (len && !bytes))
		return TANK_EINVALID;
	if (c->decl->typed_status) {
		/* The typed cache holds the record; bytes that do not decode
		 * as one are refused rather than stored. */
		st_status_t s;
		int rc = st__dec_status(bytes, len, key, strlen(key), &s, NULL);
		if (rc)
			return rc == TANK_ECORRUPT ? TANK_EINVALID : rc;
		rc = st_coll_status_put_typed(c, &s);
		st_status_clear(&s);
		return rc;
	}
	if (!(copy = malloc(len ? len : 1)))
		return -ENOMEM;
	memcpy(copy, bytes, len);
	if (!(p = st__pend_get(c, key))) {
		free(copy);
		return -ENOMEM;
	}
	free(p->val);
	p->val = copy;
	p->len = len;
	p->has_status = true;
	st__arm_timer(c->st);
	return 0;
}

int st_coll_history_add(st_coll_t *c, const char *key, const st_transition_t *t)
{
	return st__hist_add(c, key, t);
}

void st__coll_free_all(st_t *st)
{
	for (size_t i = 0; i < st->n_colls; i++) {
		st__cache_free(st->colls[i]);
		tank_map_destroy(&st->colls[i]->pend);
		free(st->colls[i]->subs);
		free(st->colls[i]);
	}
	free(st->colls);
	st->colls = NULL;
	st->n_colls = 0;
}

/* ---- desired state ---------------------------------------------------------- */

/* Adds or removes the index entries of one record (its spec bytes). */
static int coll__index(st_coll_t *c, MDB_txn *txn, const char *key, const void *spec,
		       size_t len, bool add)
{
	for (size_t i = 0; i < c->decl->nindexes; i++) {
		char ik[ST_NAME_MAX * 2 + 2];
		size_t il = c->decl->indexes[i].key_of(spec, len, ik, ST_NAME_MAX + 1);
		size_t kl = strlen(key);
		if (!il || il > ST_NAME_MAX)
			continue;
		ik[il] = '\0';
		memcpy(ik + il + 1, key, kl);
		MDB_val k = { il + 1 + kl, ik }, v = { 0, "" };
		int rc = add ? mdb_put(txn, c->db_idx[i], &k, &v, 0)
			     : mdb_del(txn, c->db_idx[i], &k, NULL);
		if (rc && rc != MDB_NOTFOUND)
			return rc;
	}
	return 0;
}

typedef struct coll_put {
	st_coll_t *c;
	const st_pod_in_t *in;
	size_t n;
	st_apply_result_t *res;
	int64_t now;
} coll_put_t;

/* The puts of one collection, in the caller's transaction, encoding in
 * buf.  Touches nothing of st_t but the collection's database handles and
 * its declaration (fixed once open): the store's thread runs it for an
 * async commit (st_coll_commit_async) while the loop goes on. */
static int coll__put_in(msgpack_sbuffer *buf, MDB_txn *txn, coll_put_t *a, tank_error_t *err)
{
	int rc = 0;

	for (size_t i = 0; i < a->n && !rc; i++) {
		const st_pod_in_t *in = &a->in[i];
		size_t len = strlen(in->name);
		MDB_val k = { len, (void *)in->name }, v;
		st_pod_t cur;
		void *old_spec = NULL;
		rc = mdb_get(txn, a->c->db_obj, &k, &v);
		if (rc == MDB_NOTFOUND) {
			memset(&cur, 0, sizeof cur);
			a->res[i].action = ST_CREATED;
			cur.generation = 1;
			cur.created_at = a->now;
			st_uid_new(cur.uid);
			rc = 0;
		} else if (rc) {
			break;
		} else {
			if ((rc = st__dec_pod(v.mv_data, v.mv_size, in->name, len, &cur, err)))
				break;
			bool same = st__spec_same(&cur, in);
			if (!same)
				rc = coll__index(a->c, txn, in->name, cur.spec, cur.spec_len, false);
			if (same) {
				free(cur.spec);
				a->res[i].action = ST_UNCHANGED;
				a->res[i].generation = cur.generation;
				memcpy(a->res[i].uid, cur.uid, sizeof cur.uid);
				continue;
			}
			a->res[i].action = ST_CONFIGURED;
			/* The version replaced is kept beside the new one (st.h,
			 * st_pod_t.prev_spec); freed below, once encoded. */
			old_spec = cur.spec;
			cur.prev_spec = cur.spec;
			cur.prev_spec_len = cur.spec_len;
			cur.prev_generation = cur.generation;
			cur.generation++;
		}
		memcpy(cur.name, in->name, len + 1);
		cur.spec = in->spec_len ? (void *)in->spec : (void *)"";
		cur.spec_len = in->spec_len;
		cur.hash = st_hash64(in->spec, in->spec_len);
		cur.updated_at = a->now;
		a->res[i].generation = cur.generation;
		memcpy(a->res[i].uid, cur.uid, sizeof cur.uid);
		buf->size = 0;
		if (!rc && !(rc = st__enc_pod(buf, &cur))) {
			MDB_val bv = { buf->size, buf->data };
			st__wrote(a->c->st);
			rc = mdb_put(txn, a->c->db_obj, &k, &bv, 0);
		}
		if (!rc)
			rc = coll__index(a->c, txn, in->name, cur.spec, cur.spec_len, true);
		free(old_spec);
		old_spec = NULL;
	}
	return rc;
}

static int coll__put_fn(st_t *st, MDB_txn *txn, void *arg, tank_error_t *err)
{
	/* What is queued commits first, in the same transaction. */
	int rc = st__write_pending(st, txn);
	return rc ? rc : coll__put_in(&st->buf, txn, arg, err);
}

int st__coll_puts(msgpack_sbuffer *buf, MDB_txn *txn, st_coll_t *c, const st_pod_in_t *in,
		  size_t n, st_apply_result_t *res, int64_t now, tank_error_t *err)
{
	coll_put_t a = { c, in, n, res, now };
	return coll__put_in(buf, txn, &a, err);
}

void st__coll_notify(st_coll_t *c, const char *const *keys, size_t n)
{
	if (n == 0)
		return;
	c->changes++;
	for (size_t i = 0; i < c->n_subs; i++)
		c->subs[i].fn(c->subs[i].ctx, keys, n);
}

int st_coll_put(st_coll_t *c, const st_pod_in_t *in, size_t n,
		st_apply_result_t *res, tank_error_t *err)
{
	const char **keys;
	int rc;

	if (!n)
		return 0;
	if (!(keys = malloc(n * sizeof *keys)))
		return tank_error_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		keys[i] = in[i].name;
	rc = st__check_names(keys, n, "apply", err);
	for (size_t i = 0; i < n && !rc; i++)
		if (in[i].spec_len && !in[i].spec)
			rc = tank_error_set(err, TANK_EINVALID, "apply: %s \"%s\": no spec",
					    coll__noun(c), in[i].name);
	if (!rc) {
		coll_put_t a = { c, in, n, res, st__now_ms() };
		rc = st__write_txn(c->st, true, "apply", coll__put_fn, &a, err);
	}
	if (!rc) {
		st__pending_done(c->st);
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (res[i].action != ST_UNCHANGED)
				keys[m++] = in[i].name;
		st__coll_notify(c, keys, m);
	}
	free(keys);
	return rc;
}

typedef struct coll_del {
	st_coll_t *c;
	const char *const *keys;
	size_t n;
	bool *deleted;
} coll_del_t;

/* The deletes of one collection, in the caller's transaction. */
static int coll__del_in(MDB_txn *txn, coll_del_t *a, tank_error_t *err)
{
	MDB_cursor *cur;
	int rc;

	if ((rc = mdb_cursor_open(txn, a->c->db_hist, &cur)))
		return rc;
	for (size_t i = 0; i < a->n && !rc; i++) {
		size_t len = strlen(a->keys[i]);
		MDB_val k = { len, (void *)a->keys[i] }, v;
		st_pod_t old;
		/* Status and history go even without a desired record: a
		 * name's observed state never outlives its delete. */
		a->deleted[i] = false;
		if ((rc = mdb_get(txn, a->c->db_obj, &k, &v)) == 0) {
			if (a->c->decl->nindexes &&
			    st__dec_pod(v.mv_data, v.mv_size, a->keys[i], len, &old, err) == 0) {
				rc = coll__index(a->c, txn, a->keys[i], old.spec, old.spec_len,
						 false);
				free(old.spec);
			}
			st__wrote(a->c->st);
			if (!rc && !(rc = mdb_del(txn, a->c->db_obj, &k, NULL)))
				a->deleted[i] = true;
		} else if (rc == MDB_NOTFOUND) {
			rc = 0;
		}
		if (!rc && (rc = mdb_del(txn, a->c->db_status, &k, NULL)) == MDB_NOTFOUND)
			rc = 0;
		if (!rc)
			rc = st__tr_delete_front(cur, a->keys[i], len, UINT64_MAX);
	}
	mdb_cursor_close(cur);
	return rc;
}

static int coll__del_only_fn(st_t *st, MDB_txn *txn, void *arg, tank_error_t *err)
{
	(void)st;
	return coll__del_in(txn, arg, err);
}

/* The keys' queued status and history are dropped, as by
 * st_coll_status_forget but without its own delete (the delete's
 * transaction removes what is stored): they must not land after it. */
static void coll__drop_queued(st_coll_t *c, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		pend_t *p = st__pend_find(c, keys[i]);
		if (p)
			st__pend_drop(c->st, p);
	}
}

/* The delete without the queue (coll__del_only_fn), when the queue did
 * not fit with it: a store that cannot grow, the statuses of thousands of
 * pods waiting.  The keys' queued status and history go once their
 * delete commits (nothing writes the queue in between: this thread's
 * transactions only, after st__ac_wait).  A delete that does not fit
 * alone either (the room at the file's end is what the statuses left)
 * is cut in halves, each its own transaction, so that what fits goes
 * and frees room for the rest; d says which keys went, also when a part
 * failed.  Deleting is the operator's way to make room: on a full disk it
 * must not need the room it would free. */
static int coll__del_alone(st_coll_t *c, const char *const *keys, size_t n, bool *d,
			   tank_error_t *err)
{
	coll_del_t a = { c, keys, n, d };
	int rc;

	memset(d, 0, n * sizeof *d);
	tank_error_clear(err);
	rc = st__write_txn(c->st, true, "delete", coll__del_only_fn, &a, err);
	if (!rc) {
		coll__drop_queued(c, keys, n);
		if (c->decl->typed_status)
			st__cache_del(c, keys, n);
		return 0;
	}
	memset(d, 0, n * sizeof *d);     /* the aborted transaction's */
	if (rc != TANK_ESTOREFULL || n == 1)
		return rc;
	size_t h = n / 2;
	if ((rc = coll__del_alone(c, keys, h, d, err)))
		return rc;
	return coll__del_alone(c, keys + h, n - h, d + h, err);
}

static int coll__commit(st_t *st, const st_coll_op_t *ops, size_t n, bool durable,
			const char *what, tank_error_t *err);

/* One op of deletes: the queue commits first, in the same transaction
 * (coll__multi_fn), so that no queued write of these keys lands after
 * the delete. */
int st_coll_delete(st_coll_t *c, const char *const *keys, size_t n,
		   bool *deleted, tank_error_t *err)
{
	st_coll_op_t op = { .c = c, .del = keys, .ndel = n, .deleted = deleted };
	return coll__commit(c->st, &op, 1, true, "delete", err);
}

int st_coll_get(st_coll_t *c, const char *key, st_pod_t *out, tank_error_t *err)
{
	MDB_txn *txn;
	int rc;

	memset(out, 0, sizeof *out);
	if (!coll__key_ok(key))
		return tank_error_set(err, TANK_ENOTFOUND, "%s \"%s\" not found", coll__noun(c),
				      key ? key : "");
	if ((rc = st__read_begin(c->st, &txn, err)))
		return rc;
	MDB_val k = { strlen(key), (void *)key }, v;
	rc = mdb_get(txn, c->db_obj, &k, &v);
	if (rc == MDB_NOTFOUND)
		rc = tank_error_set(err, TANK_ENOTFOUND, "%s \"%s\" not found", coll__noun(c), key);
	else if (rc)
		rc = st__mdb_fail(err, rc, "store: get");
	else
		rc = st__dec_pod(v.mv_data, v.mv_size, key, strlen(key), out, err);
	mdb_txn_abort(txn);
	return rc;
}

int st_coll_scan(st_coll_t *c, st_pod_fn fn, void *ctx, tank_error_t *err)
{
	return st_coll_scan_from(c, NULL, fn, ctx, err);
}

int st_coll_scan_from(st_coll_t *c, const char *after, st_pod_fn fn, void *ctx,
		      tank_error_t *err)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	size_t al = after ? strlen(after) : 0;
	int rc, op = MDB_FIRST;

	if ((rc = st__read_begin(c->st, &txn, err)))
		return rc;
	if ((rc = mdb_cursor_open(txn, c->db_obj, &cur))) {
		mdb_txn_abort(txn);
		return st__mdb_fail(err, rc, "store: scan");
	}
	if (al) {
		/* The first key >= after, then past it if it is after itself. */
		k.mv_data = (void *)after;
		k.mv_size = al;
		op = MDB_SET_RANGE;
	}
	for (; !(rc = mdb_cursor_get(cur, &k, &v, op)); op = MDB_NEXT) {
		st_pod_t p;
		if (op == MDB_SET_RANGE && k.mv_size == al && memcmp(k.mv_data, after, al) == 0)
			continue;
		if ((rc = st__dec_pod_ex(v.mv_data, v.mv_size, k.mv_data, k.mv_size, &p, true, err)))
			break;
		if ((rc = fn(ctx, &p)))
			break;
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	return rc;
}

uint64_t st_coll_changes(const st_coll_t *c)
{
	return c->changes;
}

int st_coll_watch(st_coll_t *c, st_subscriber_fn fn, void *ctx)
{
	sub_t *n = realloc(c->subs, (c->n_subs + 1) * sizeof *n);
	if (!n)
		return -ENOMEM;
	c->subs = n;
	n[c->n_subs++] = (sub_t){ ++c->next_sub_id, fn, ctx };
	return c->next_sub_id;
}

int st_coll_unwatch(st_coll_t *c, int id)
{
	for (size_t i = 0; i < c->n_subs; i++)
		if (c->subs[i].id == id) {
			memmove(&c->subs[i], &c->subs[i + 1], (c->n_subs - i - 1) * sizeof *c->subs);
			c->n_subs--;
			return 0;
		}
	return -ENOENT;
}

int st_coll_index_scan(st_coll_t *c, const char *index, const char *ikey,
		       void (*fn)(void *ctx, const char *key), void *ctx,
		       tank_error_t *err)
{
	size_t i, il = strlen(ikey);
	MDB_txn *txn;
	MDB_cursor *cur;
	char kb[ST_NAME_MAX * 2 + 2];
	int rc;

	for (i = 0; i < c->decl->nindexes; i++)
		if (!strcmp(c->decl->indexes[i].name, index))
			break;
	if (i == c->decl->nindexes)
		return tank_error_set(err, TANK_ENOTFOUND, "%s: no index \"%s\"", c->decl->name, index);
	if (!il || il > ST_NAME_MAX)
		return 0;
	if ((rc = st__read_begin(c->st, &txn, err)))
		return rc;
	if ((rc = mdb_cursor_open(txn, c->db_idx[i], &cur))) {
		mdb_txn_abort(txn);
		return st__mdb_fail(err, rc, "store: index");
	}
	memcpy(kb, ikey, il);
	kb[il] = '\0';
	MDB_val k = { il + 1, kb }, v;
	for (int op = MDB_SET_RANGE; !(rc = mdb_cursor_get(cur, &k, &v, op)); op = MDB_NEXT) {
		char key[ST_NAME_MAX + 1];
		size_t kl;
		if (k.mv_size <= il + 1 || memcmp(k.mv_data, kb, il + 1) != 0)
			break;
		kl = k.mv_size - il - 1;
		if (kl > ST_NAME_MAX)
			continue;
		memcpy(key, (char *)k.mv_data + il + 1, kl);
		key[kl] = '\0';
		fn(ctx, key);
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	return rc > 0 ? st__mdb_fail(err, rc, "store: index") : rc;
}

/* ---- observed state ------------------------------------------------------- */

int st_coll_status_get(st_coll_t *c, const char *key, void **bytes, size_t *len,
		       tank_error_t *err)
{
	MDB_txn *txn;
	pend_t *p;
	int rc;

	*bytes = NULL;
	*len = 0;
	if (!coll__key_ok(key))
		return tank_error_set(err, TANK_ENOTFOUND, "no status");
	if (c->decl->typed_status) {
		/* The cache, or the stored record while it loads. */
		int lrc;
		const cent_t *e = st__cache_lookup(c, key, &lrc, err);
		msgpack_sbuffer b;
		if (lrc)
			return lrc;
		if (!e)
			return tank_error_set(err, TANK_ENOTFOUND, "%s \"%s\": no status",
					      c->decl->name, key);
		if (e->corrupt)
			return tank_error_set(err, TANK_ECORRUPT, "%s", e->corrupt);
		st_status_t s;
		if (st__cache_status(e, &s))
			return tank_error_set(err, -ENOMEM, "out of memory");
		msgpack_sbuffer_init(&b);
		rc = st__enc_status(&b, &s);
		st_status_clear(&s);
		if (rc) {
			msgpack_sbuffer_destroy(&b);
			return tank_error_set(err, -ENOMEM, "out of memory");
		}
		*len = b.size;
		*bytes = msgpack_sbuffer_release(&b);
		return 0;
	}
	if ((p = st__pend_find(c, key)) && (p->has_status || p->forget)) {
		if (!p->has_status)
			return tank_error_set(err, TANK_ENOTFOUND, "%s \"%s\": no status",
					      c->decl->name, key);
		if (!(*bytes = malloc(p->len ? p->len : 1)))
			return tank_error_set(err, -ENOMEM, "out of memory");
		memcpy(*bytes, p->val, p->len);
		*len = p->len;
		return 0;
	}
	if ((rc = st__read_begin(c->st, &txn, err)))
		return rc;
	MDB_val k = { strlen(key), (void *)key }, v;
	rc = mdb_get(txn, c->db_status, &k, &v);
	if (rc == MDB_NOTFOUND)
		rc = tank_error_set(err, TANK_ENOTFOUND, "%s \"%s\": no status", c->decl->name, key);
	else if (rc)
		rc = st__mdb_fail(err, rc, "store: status");
	else if (!(*bytes = malloc(v.mv_size ? v.mv_size : 1)))
		rc = tank_error_set(err, -ENOMEM, "out of memory");
	else {
		memcpy(*bytes, v.mv_data, v.mv_size);
		*len = v.mv_size;
	}
	mdb_txn_abort(txn);
	return rc;
}

static int coll__push_tr(st_transition_t **arr, size_t *n, size_t *cap,
			 const st_transition_t *t)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		st_transition_t *na = realloc(*arr, nc * sizeof *na);
		if (!na)
			return -ENOMEM;
		*arr = na;
		*cap = nc;
	}
	(*arr)[(*n)++] = *t;
	return 0;
}

/* The one history reader, for every collection: the stored entries of
 * key, then its queued ones, oldest first, each with every field filled
 * (an entry of an older schema: kind, key and uid derived, legacy). */
int st_coll_history(st_coll_t *c, const char *key, size_t limit,
		    st_transition_t **out, size_t *n, tank_error_t *err)
{
	st_transition_t *arr = NULL;
	size_t cnt = 0, cap = 0, kl;
	MDB_txn *txn;
	MDB_cursor *cur;
	unsigned char kb[ST_NAME_MAX + 1 + SEQ_LEN];
	char uid[ST_UID_LEN + 1];
	uint64_t next = 1;
	pend_t *p;
	int rc;

	*out = NULL;
	*n = 0;
	if (!coll__key_ok(key))
		return 0;
	kl = strlen(key);
	p = st__pend_find(c, key);
	if ((rc = st__read_begin(c->st, &txn, err)))
		return rc;
	st__obj_uid(c, txn, key, uid);
	if ((rc = mdb_cursor_open(txn, c->db_hist, &cur))) {
		mdb_txn_abort(txn);
		return st__mdb_fail(err, rc, "store: history");
	}
	st__tr_key(kb, key, kl, 0);
	MDB_val k = { kl + 1 + SEQ_LEN, kb }, v;
	/* Stored entries (none if a forget is queued), oldest first. */
	for (int op = MDB_SET_RANGE, r; !rc && !(p && p->forget); op = MDB_NEXT) {
		st_transition_t t;
		if ((r = mdb_cursor_get(cur, &k, &v, op)) == MDB_NOTFOUND ||
		    (!r && !st__tr_has_prefix(&k, key, kl)))
			break;
		if (r) {
			rc = st__mdb_fail(err, r, "store: history");
			break;
		}
		if ((rc = st__dec_transition(v.mv_data, v.mv_size, k.mv_data, k.mv_size, &t, err)))
			break;
		next = st__tr_seq(&k) + 1;
		/* No kind: written before schema 3. */
		t.legacy = !t.kind[0];
		st__tr_fill(c, key, next - 1, uid, &t);
		if (coll__push_tr(&arr, &cnt, &cap, &t)) {
			rc = tank_error_set(err, -ENOMEM, "out of memory");
			break;
		}
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	/* Then the queued ones, numbered as the flush will number them. */
	if (p) {
		uint32_t ent = (uint32_t)(p - c->st->pend);
		for (size_t i = 0; i < c->st->n_trs && !rc; i++) {
			st_transition_t t;
			if (c->st->trs[i].ent != ent || !st__tr_live(c->st->pend, &c->st->trs[i]))
				continue;
			t = c->st->trs[i].t;
			st__tr_fill(c, key, next++, uid, &t);
			if (coll__push_tr(&arr, &cnt, &cap, &t))
				rc = tank_error_set(err, -ENOMEM, "out of memory");
		}
	}
	if (rc) {
		free(arr);
		return rc;
	}
	/* Same view as after the next flush: pruned to the limit. */
	size_t keep = cnt < c->history_limit ? cnt : c->history_limit;
	if (limit && keep > limit)
		keep = limit;
	if (keep < cnt)
		memmove(arr, arr + (cnt - keep), keep * sizeof *arr);
	if (!keep) {
		free(arr);
		arr = NULL;
	}
	*out = arr;
	*n = keep;
	return 0;
}

/* ---- several collections in one transaction ---------------------------------- */

typedef struct coll_multi {
	const st_coll_op_t *ops;
	size_t n;
	int64_t now;
} coll_multi_t;

static int coll__multi_fn(st_t *st, MDB_txn *txn, void *arg, tank_error_t *err)
{
	coll_multi_t *a = arg;
	int rc = st__write_pending(st, txn);

	for (size_t i = 0; i < a->n && !rc; i++) {
		const st_coll_op_t *op = &a->ops[i];
		coll_put_t p = { op->c, op->put, op->nput, op->res, a->now };
		if (op->nput)
			rc = coll__put_in(&st->buf, txn, &p, err);
	}
	for (size_t i = 0; i < a->n && !rc; i++) {
		const st_coll_op_t *op = &a->ops[i];
		coll_del_t d = { op->c, op->del, op->ndel, op->deleted };
		if (op->ndel)
			rc = coll__del_in(txn, &d, err);
	}
	return rc;
}

static int coll__commit(st_t *st, const st_coll_op_t *ops, size_t n, bool durable,
			const char *what, tank_error_t *err)
{
	st_coll_op_t *own;
	bool **dflt;
	int rc = 0;

	size_t work = 0;
	for (size_t i = 0; i < n; i++)
		work += ops[i].nput + ops[i].ndel;
	if (!work)
		return 0;
	own = calloc(n, sizeof *own);
	dflt = calloc(n, sizeof *dflt);
	if (!own || !dflt) {
		free(own);
		free(dflt);
		return tank_error_set(err, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n && !rc; i++) {
		own[i] = ops[i];
		if (!own[i].c)
			own[i].c = st_pods(st);
		if (own[i].nput && own[i].c == st_pods(st))
			rc = st__headroom(st, own[i].put, own[i].nput, err);
		for (size_t k = 0; k < own[i].nput && !rc; k++) {
			if (!own[i].put[k].name ||
			    (own[i].put[k].spec_len && !own[i].put[k].spec))
				rc = tank_error_set(err, TANK_EINVALID, "apply: %s: no spec",
						    coll__noun(own[i].c));
			else
				rc = st__check_names(&own[i].put[k].name, 1, "apply", err);
		}
		if (!rc && own[i].ndel)
			rc = st__check_names(own[i].del, own[i].ndel, "delete", err);
		if (!rc && own[i].ndel && !own[i].deleted) {
			if (!(dflt[i] = calloc(own[i].ndel, sizeof **dflt)))
				rc = tank_error_set(err, -ENOMEM, "out of memory");
			own[i].deleted = dflt[i];
		}
	}
	/* Deletes only (st_coll_delete's among them), on a store that cannot
	 * grow: they do not wait for the room the queued statuses lack (each
	 * collection's its own transaction then, cut in halves if need be:
	 * coll__del_alone). */
	bool dels_only = true, alone = false;
	for (size_t i = 0; i < n; i++)
		dels_only = dels_only && !own[i].nput;
	if (!rc) {
		coll_multi_t a = { own, n, st__now_ms() };
		rc = dels_only && st__status_waits(st) ? TANK_ESTOREFULL
			: st__write_txn(st, durable, what, coll__multi_fn, &a, err);
		if (rc == TANK_ESTOREFULL && dels_only) {
			alone = true;
			rc = 0;
			for (size_t i = 0; i < n; i++) {
				int r = own[i].ndel ? coll__del_alone(own[i].c, own[i].del, own[i].ndel,
								      own[i].deleted, err) : 0;
				rc = rc ? rc : r;
			}
		}
	}
	if (rc && !alone)
		for (size_t i = 0; i < n; i++)   /* the aborted transaction's */
			if (own[i].ndel)
				memset(own[i].deleted, 0, own[i].ndel * sizeof *own[i].deleted);
	if (!rc || alone) {
		if (!alone)
			st__pending_done(st);
		for (size_t i = 0; i < n; i++) {
			const st_coll_op_t *op = &own[i];
			size_t cap = op->nput + op->ndel, m = 0;
			const char **keys = cap ? malloc(cap * sizeof *keys) : NULL;
			if (!alone && op->c->decl->typed_status && op->ndel)
				st__cache_del(op->c, op->del, op->ndel);
			if (!keys) {
				op->c->changes += cap > 0;   /* not notified, still changed */
				continue;
			}
			for (size_t k = 0; k < op->nput; k++)
				if (op->res[k].action != ST_UNCHANGED)
					keys[m++] = op->put[k].name;
			for (size_t k = 0; k < op->ndel; k++)
				if (op->deleted[k])
					keys[m++] = op->del[k];
			st__coll_notify(op->c, keys, m);
			free(keys);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(dflt[i]);
	free(dflt);
	free(own);
	return rc;
}

/* ---- a commit on the store's thread (st.c "async commits") ---------------- */

int st_coll_commit_async(st_t *st, const st_coll_op_t *ops, size_t n, st_commit_fn fn,
			 void *ctx, tank_error_t *err)
{
	size_t nin = 0, bytes = 0;
	st_acommit_t *a;
	int rc = 0;

	tank_error_clear(err);
	/* One at a time: a commit still in flight ends first. */
	st_settle(st);
	if ((rc = st__env_ok(st, err)))
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (ops[i].ndel)
			return tank_error_set(err, TANK_EINVALID,
					      "store: an async commit puts, it does not delete");
		st_coll_t *c = ops[i].c ? ops[i].c : st_pods(st);
		if (ops[i].nput && c == st_pods(st) &&
		    (rc = st__headroom(st, ops[i].put, ops[i].nput, err)))
			return rc;
		for (size_t k = 0; k < ops[i].nput; k++) {
			const st_pod_in_t *in = &ops[i].put[k];
			if (!in->name || (in->spec_len && !in->spec))
				return tank_error_set(err, TANK_EINVALID, "apply: %s: no spec",
						      coll__noun(c));
			if ((rc = st__check_names(&in->name, 1, "apply", err)))
				return rc;
			bytes += strlen(in->name) + 1 + in->spec_len;
		}
		nin += ops[i].nput;
	}
	if (!st->loop || !nin) {
		/* No loop to hear the thread (or nothing to write): here. */
		rc = coll__commit(st, ops, n, true, "apply", err);
		fn(ctx, rc, rc ? err : NULL);
		return 0;
	}
	/* Everything the thread reads is copied: the caller's buffers may
	 * go (an apply whose client left) before the commit is done. */
	if (!(a = calloc(1, sizeof *a)) || !(a->ops = calloc(n, sizeof *a->ops)) ||
	    !(a->in = calloc(nin, sizeof *a->in)) || !(a->res = calloc(nin, sizeof *a->res)) ||
	    !(a->user_res = calloc(n, sizeof *a->user_res)) || !(a->arena = malloc(bytes + 1))) {
		st__ac_free(a);
		return tank_error_set(err, -ENOMEM, "out of memory");
	}
	msgpack_sbuffer_init(&a->buf);
	a->n = n;
	a->nin = nin;
	a->now = st__now_ms();
	a->fn = fn;
	a->ctx = ctx;
	char *at = a->arena;
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		a->ops[i] = (st_coll_op_t){ .c = ops[i].c ? ops[i].c : st_pods(st),
					    .put = a->in + j, .nput = ops[i].nput,
					    .res = a->res + j };
		a->user_res[i] = ops[i].res;
		for (size_t k = 0; k < ops[i].nput; k++, j++) {
			const st_pod_in_t *in = &ops[i].put[k];
			size_t nl = strlen(in->name) + 1;
			memcpy(at, in->name, nl);
			a->in[j].name = at;
			at += nl;
			if (in->spec_len)
				memcpy(at, in->spec, in->spec_len);
			a->in[j].spec = at;
			a->in[j].spec_len = in->spec_len;
			at += in->spec_len;
		}
	}
	st__ac_submit(st, a);
	return 0;
}

int st_coll_commit(st_t *st, const st_coll_op_t *ops, size_t n, tank_error_t *err)
{
	return coll__commit(st, ops, n, true, "apply", err);
}

int st_coll_commit_nosync(st_t *st, const st_coll_op_t *ops, size_t n, tank_error_t *err)
{
	return coll__commit(st, ops, n, false, "commit", err);
}
