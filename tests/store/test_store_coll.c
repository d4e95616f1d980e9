/* A new kind costs a declaration: a "widget" collection, declared once,
 * gets put/get/delete/scan/watch, a group-committed status, a bounded
 * history and an index, on a real LMDB store. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/st.h"
#include "store/st_coll.h"
#include "tests/support/tsupport.h"

/* The widget's "spec" is "<color>:<rest>"; the index is by color. */
static size_t by_color(const void *spec, size_t len, char *out, size_t cap)
{
	const char *colon = memchr(spec, ':', len);
	size_t n = colon ? (size_t)(colon - (const char *)spec) : 0;
	if (!n || n >= cap)
		return 0;
	memcpy(out, spec, n);
	return n;
}

static const st_coll_decl_t widgets = {
	.name = "widget", .history_limit = 3,
	.indexes = { { "color", by_color } }, .nindexes = 1,
};

typedef struct seen { char keys[8][32]; int n; int calls; } seen_t;

static void on_change(void *ctx, const char *const *names, size_t n)
{
	seen_t *s = ctx;
	s->calls++;
	for (size_t i = 0; i < n && s->n < 8; i++)
		snprintf(s->keys[s->n++], 32, "%s", names[i]);
}

static void collect(void *ctx, const char *key)
{
	seen_t *s = ctx;
	snprintf(s->keys[s->n++], 32, "%s", key);
}

static int count_fn(void *ctx, const st_pod_t *p)
{
	(*(int *)ctx)++;
	cr_assert_eq(strlen(p->uid), ST_UID_LEN);
	return 0;
}

Test(store, a_declared_collection_gets_every_operation)
{
	char dir[] = "/tmp/tank-coll-XXXXXX", cmd[96];
	tank_error_t e;
	st_t *st;
	st_coll_t *c, *again;
	st_apply_result_t r[2];
	seen_t w = { .n = 0 };

	cr_assert_not_null(ts_mkdtemp_at(dir));
	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &widgets, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &widgets, &again, &e), 0);
	cr_assert_eq(c, again);
	static const st_coll_decl_t bad = { .name = "pods" };
	cr_assert_eq(st_coll_open(st, &bad, &again, &e), TANK_EINVALID);
	cr_assert_gt(st_coll_watch(c, on_change, &w), 0);

	st_pod_in_t in[2] = { { "w1", "red:a", 5 }, { "w2", "blue:b", 6 } };
	cr_assert_eq(st_coll_put(c, in, 2, r, &e), 0, "%s", e.msg);
	cr_assert_eq(r[0].action, ST_CREATED);
	cr_assert_eq(r[0].generation, 1);
	cr_assert_str_neq(r[0].uid, r[1].uid);
	cr_assert_eq(w.n, 2);
	/* A pod of the same name is another collection's business. */
	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "w1", &p, &e), TANK_ENOTFOUND);

	/* Configure w1 (red → blue): generation 2, same uid, index moves. */
	st_pod_in_t w1b = { "w1", "blue:c", 6 };
	st_apply_result_t r2;
	cr_assert_eq(st_coll_put(c, &w1b, 1, &r2, &e), 0);
	cr_assert_eq(r2.action, ST_CONFIGURED);
	cr_assert_eq(r2.generation, 2);
	cr_assert_str_eq(r2.uid, r[0].uid);
	seen_t blue = { .n = 0 }, red = { .n = 0 };
	cr_assert_eq(st_coll_index_scan(c, "color", "blue", collect, &blue, &e), 0);
	cr_assert_eq(st_coll_index_scan(c, "color", "red", collect, &red, &e), 0);
	cr_assert_eq(blue.n, 2);
	cr_assert_str_eq(blue.keys[0], "w1");
	cr_assert_str_eq(blue.keys[1], "w2");
	cr_assert_eq(red.n, 0);
	cr_assert_eq(st_coll_index_scan(c, "size", "x", collect, &red, &e), TANK_ENOTFOUND);

	cr_assert_eq(st_coll_get(c, "w1", &p, &e), 0);
	cr_assert_eq(p.spec_len, 6);
	cr_assert_eq(memcmp(p.spec, "blue:c", 6), 0);
	st_pod_clear(&p);
	int n = 0;
	cr_assert_eq(st_coll_scan(c, count_fn, &n, &e), 0);
	cr_assert_eq(n, 2);

	/* Status: read back at once (queued), then durable after a flush. */
	void *b;
	size_t bl;
	cr_assert_eq(st_coll_status_put(c, "w1", "\x81\xa1s\x01", 4), 0);
	cr_assert_eq(st_coll_status_put(c, "w1", "\x81\xa1s\x02", 4), 0);
	cr_assert_gt(st_pending(st), 0);
	cr_assert_eq(st_coll_status_get(c, "w1", &b, &bl, &e), 0);
	cr_assert_eq(bl, 4);
	cr_assert_eq(((unsigned char *)b)[3], 2);
	free(b);
	/* History: bounded at 3 per key, oldest dropped. */
	for (int i = 0; i < 5; i++) {
		st_transition_t t = { .at = 1000 + i };
		snprintf(t.from, sizeof t.from, "s%d", i);
		snprintf(t.to, sizeof t.to, "s%d", i + 1);
		cr_assert_eq(st_coll_history_add(c, "w1", &t), 0);
	}
	st_transition_t *h;
	size_t hn;
	cr_assert_eq(st_coll_history(c, "w1", 0, &h, &hn, &e), 0);
	cr_assert_eq(hn, 3);
	cr_assert_str_eq(h[0].from, "s2");
	free(h);
	cr_assert_eq(st_flush(st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_pending(st), 0);
	cr_assert_eq(st_close(st, &e), 0);

	/* Reopened: everything is there. */
	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &widgets, &c, &e), 0);
	cr_assert_eq(st_coll_status_get(c, "w1", &b, &bl, &e), 0, "%s", e.msg);
	cr_assert_eq(((unsigned char *)b)[3], 2);
	free(b);
	cr_assert_eq(st_coll_history(c, "w1", 0, &h, &hn, &e), 0);
	cr_assert_eq(hn, 3);
	cr_assert_str_eq(h[2].to, "s5");
	free(h);

	/* Delete: object, status, history and index entries go; a new put
	 * of the name is a new object. */
	const char *del[] = { "w1", "nope" };
	bool d[2];
	cr_assert_eq(st_coll_delete(c, del, 2, d, &e), 0, "%s", e.msg);
	cr_assert(d[0] && !d[1]);
	cr_assert_eq(st_coll_get(c, "w1", &p, &e), TANK_ENOTFOUND);
	cr_assert_eq(st_coll_status_get(c, "w1", &b, &bl, &e), TANK_ENOTFOUND);
	cr_assert_eq(st_coll_history(c, "w1", 0, &h, &hn, &e), 0);
	cr_assert_eq(hn, 0);
	blue.n = 0;
	cr_assert_eq(st_coll_index_scan(c, "color", "blue", collect, &blue, &e), 0);
	cr_assert_eq(blue.n, 1);
	cr_assert_eq(st_coll_put(c, &w1b, 1, &r2, &e), 0);
	cr_assert_eq(r2.action, ST_CREATED);
	cr_assert_eq(r2.generation, 1);
	cr_assert_str_neq(r2.uid, r[0].uid);
	cr_assert_eq(st_close(st, &e), 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* A delete commits what is queued in its own transaction, so a status or
 * history queued just before it cannot land afterwards and resurrect the
 * name's observed state; pods (a collection too) behave the same. */
Test(store, a_delete_wins_over_writes_queued_before_it)
{
	char dir[] = "/tmp/tank-coll-XXXXXX", cmd[96];
	tank_error_t e;
	st_t *st;
	st_coll_t *c;
	st_apply_result_t r;
	void *b;
	size_t bl, hn;
	st_transition_t *h, t = { .at = 1, .from = "a", .to = "b" };

	cr_assert_not_null(ts_mkdtemp_at(dir));
	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &widgets, &c, &e), 0, "%s", e.msg);
	st_pod_in_t in = { "w", "red:a", 5 };
	cr_assert_eq(st_coll_put(c, &in, 1, &r, &e), 0, "%s", e.msg);
	cr_assert_eq(st_apply(st, &in, 1, &r, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_status_put(c, "w", "\x80", 1), 0);
	cr_assert_eq(st_coll_history_add(c, "w", &t), 0);
	cr_assert_eq(st_transition_add(st, "w", &t), 0);
	cr_assert_gt(st_pending(st), 0);

	const char *del[] = { "w" };
	cr_assert_eq(st_coll_delete(c, del, 1, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(st_pending(st), 0, "the queue committed with the delete");
	cr_assert_eq(st_coll_status_get(c, "w", &b, &bl, &e), TANK_ENOTFOUND);
	cr_assert_eq(st_delete(st, del, 1, NULL, &e), 0, "%s", e.msg);
	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "w", &p, &e), TANK_ENOTFOUND);
	cr_assert_str_eq(e.msg, "pod \"w\" not found");
	cr_assert_eq(st_close(st, &e), 0);

	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &widgets, &c, &e), 0);
	cr_assert_eq(st_coll_get(c, "w", &p, &e), TANK_ENOTFOUND);
	cr_assert_str_eq(e.msg, "widget \"w\" not found");
	cr_assert_eq(st_coll_status_get(c, "w", &b, &bl, &e), TANK_ENOTFOUND);
	cr_assert_eq(st_coll_history(c, "w", 0, &h, &hn, &e), 0);
	cr_assert_eq(hn, 0);
	cr_assert_eq(st_history(st, "w", 0, &h, &hn, &e), 0);
	cr_assert_eq(hn, 0);
	cr_assert_eq(st_close(st, &e), 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* A stack and its pods: several collections, one transaction, all or
 * nothing. */
Test(store, a_commit_over_collections_is_all_or_nothing)
{
	char dir[] = "/tmp/tank-commit-XXXXXX", cmd[96];
	tank_error_t e;
	st_t *st;
	st_coll_t *c;
	st_apply_result_t rp[2], rw[1];
	seen_t w = { .n = 0 }, pods = { .n = 0 };
	st_pod_t p;

	cr_assert_not_null(ts_mkdtemp_at(dir));
	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &widgets, &c, &e), 0, "%s", e.msg);
	cr_assert_gt(st_coll_watch(c, on_change, &w), 0);
	cr_assert_gt(st_subscribe(st, on_change, &pods), 0);

	st_pod_in_t pin[2] = { { "p1", "x", 1 }, { "p2", "y", 1 } };
	st_pod_in_t win[1] = { { "w1", "red:a", 5 } };
	st_coll_op_t ops[2] = {
		{ .c = NULL, .put = pin, .nput = 2, .res = rp },
		{ .c = c, .put = win, .nput = 1, .res = rw },
	};
	cr_assert_eq(st_coll_commit(st, ops, 2, &e), 0, "%s", e.msg);
	cr_assert_eq(rp[1].action, ST_CREATED);
	cr_assert_eq(rw[0].action, ST_CREATED);
	cr_assert_eq(pods.n, 2, "each collection's watchers are told");
	cr_assert_eq(w.n, 1);
	cr_assert_eq(st_pod_get(st, "p2", &p, &e), 0);
	st_pod_clear(&p);

	/* A bad name in the second op: the first is not written either. */
	st_pod_in_t pin2[1] = { { "p3", "z", 1 } };
	st_pod_in_t bad[1] = { { "", "red:b", 5 } };
	st_coll_op_t ops2[2] = {
		{ .c = NULL, .put = pin2, .nput = 1, .res = rp },
		{ .c = c, .put = bad, .nput = 1, .res = rw },
	};
	cr_assert_lt(st_coll_commit(st, ops2, 2, &e), 0);
	cr_assert_eq(st_pod_get(st, "p3", &p, &e), TANK_ENOTFOUND, "nothing applied");

	/* Deletes across collections: the widget and a pod at once. */
	const char *dw[] = { "w1" }, *dp[] = { "p1", "nosuch" };
	bool dd[2];
	st_coll_op_t ops3[2] = {
		{ .c = c, .del = dw, .ndel = 1 },
		{ .c = NULL, .del = dp, .ndel = 2, .deleted = dd },
	};
	cr_assert_eq(st_coll_commit(st, ops3, 2, &e), 0, "%s", e.msg);
	cr_assert(dd[0] && !dd[1]);
	cr_assert_eq(st_pod_get(st, "p1", &p, &e), TANK_ENOTFOUND);
	cr_assert_eq(st_coll_get(c, "w1", &p, &e), TANK_ENOTFOUND);
	cr_assert_eq(st_pod_get(st, "p2", &p, &e), 0, "the rest stays");
	st_pod_clear(&p);
	cr_assert_eq(st_close(st, &e), 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* History you can read (DESIGN.md §7): every entry {seq, at, kind, key,
 * uid, from, to, reason}; the store numbers them and fills what the
 * caller left empty, the same queued and stored, for pods and for a
 * declared collection alike. */
static void hist_add(st_coll_t *c, const char *key, const char *kind, const char *ekey,
		     const char *from, const char *to)
{
	st_transition_t t = { .at = 5 };
	snprintf(t.from, sizeof t.from, "%s", from);
	snprintf(t.to, sizeof t.to, "%s", to);
	snprintf(t.kind, sizeof t.kind, "%s", kind);
	snprintf(t.key, sizeof t.key, "%s", ekey);
	cr_assert_eq(st_coll_history_add(c, key, &t), 0);
}

static void hist_check(st_coll_t *c, const char *key, size_t n, const char *const *kinds,
		       const char *const *keys, const char *uid, uint64_t first)
{
	st_transition_t *t;
	size_t got;
	tank_error_t e;
	cr_assert_eq(st_coll_history(c, key, 0, &t, &got, &e), 0, "%s", e.msg);
	cr_assert_eq(got, n, "%s: %zu entries", key, got);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(t[i].seq, first + i, "#%zu: seq %llu", i, (unsigned long long)t[i].seq);
		cr_assert_str_eq(t[i].kind, kinds[i]);
		cr_assert_str_eq(t[i].key, keys[i]);
		cr_assert_str_eq(t[i].uid, uid);
		cr_assert_not(t[i].legacy);
		cr_assert_eq(t[i].at, 5);
	}
	free(t);
}

Test(store, history_entries_say_whose_they_are_numbered_queued_or_stored)
{
	char dir[] = "/tmp/tank-hist-XXXXXX", cmd[96];
	static const char *const k3[] = { "pod", "container", "pod" };
	static const char *const key3[] = { "web", "web/httpd", "web" };
	static const char *const wk[] = { "widget", "widget", "widget" };
	static const char *const wkey[] = { "w", "w", "w" };
	tank_error_t e;
	st_t *st;
	st_coll_t *w;
	st_apply_result_t r, rw;
	st_pod_in_t pod = { "web", "\x81\xa1x\x01", 4 }, wid = { "w", "red:1", 5 };
	const char *del[] = { "web" };

	cr_assert_not_null(ts_mkdtemp_at(dir));
	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &widgets, &w, &e), 0, "%s", e.msg);
	cr_assert_eq(st_apply(st, &pod, 1, &r, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_put(w, &wid, 1, &rw, &e), 0, "%s", e.msg);

	/* The pod's own entries and its container's, in one history. */
	hist_add(st_pods(st), "web", "", "", "", "pending");
	hist_add(st_pods(st), "web", "container", "web/httpd", "pending", "running");
	hist_add(st_pods(st), "web", "pod", "web", "pending", "running");
	hist_check(st_pods(st), "web", 3, k3, key3, r.uid, 1);     /* queued */
	cr_assert_eq(st_flush(st, &e), 0, "%s", e.msg);
	hist_check(st_pods(st), "web", 3, k3, key3, r.uid, 1);     /* stored */
	/* A declared collection: kind is its noun (here its name). */
	for (int i = 0; i < 5; i++)
		hist_add(w, "w", "", "", "a", "a");
	cr_assert_eq(st_flush(st, &e), 0, "%s", e.msg);
	hist_check(w, "w", 3, wk, wkey, rw.uid, 3);                /* pruned at 3: 3, 4, 5 */
	hist_add(w, "w", "", "", "a", "a");
	hist_check(w, "w", 3, wk, wkey, rw.uid, 4);                /* 4, 5 stored, 6 queued */
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);

	/* Reopened: the same, and numbering goes on after the last one. */
	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &widgets, &w, &e), 0, "%s", e.msg);
	hist_check(st_pods(st), "web", 3, k3, key3, r.uid, 1);
	hist_check(w, "w", 3, wk, wkey, rw.uid, 4);
	/* A forgotten history starts again at 1, queued or flushed; a
	 * deleted object's goes with it. */
	cr_assert_eq(st_coll_status_forget(w, "w"), 0);
	hist_add(w, "w", "", "", "a", "b");
	hist_check(w, "w", 1, wk, wkey, rw.uid, 1);
	cr_assert_eq(st_flush(st, &e), 0, "%s", e.msg);
	hist_check(w, "w", 1, wk, wkey, rw.uid, 1);
	cr_assert_eq(st_delete(st, del, 1, NULL, &e), 0, "%s", e.msg);
	hist_check(st_pods(st), "web", 0, k3, key3, "", 1);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}
