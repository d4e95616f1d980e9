/*
 * cluster/cl_etcd: the etcd v3 client against a real etcd (Debian's
 * etcd-server, started per test by tests/support/ts_etcd.h on free
 * loopback ports; skipped with a message when the binary is missing).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cl_etcd.h"
#include "common/tank_err.h"
#include "tests/support/ts_etcd.h"
#include "tests/support/tsupport.h"

static ts_etcd_t etcd;
static cl_etcd_t *c;

static void up(void)
{
	if (!ts_etcd_available())
		return;
	cr_assert_eq(ts_etcd_start(&etcd), 0, "etcd did not start (log in %s)", etcd.dir);
	cr_assert_eq(cl_etcd_open(etcd.url, &c), 0);
}

static void down(void)
{
	cl_etcd_close(c);
	c = NULL;
	ts_etcd_stop(&etcd, false);
	ts_cleanup();
}

#define NEED_ETCD()                                  \
	do {                                         \
		if (!ts_etcd_available())            \
			cr_skip_test(TS_ETCD_MISSING); \
	} while (0)

TestSuite(etcd, .init = up, .fini = down);

Test(etcd, open_refuses_what_is_not_an_http_url)
{
	cl_etcd_t *x = NULL;

	cr_assert_eq(cl_etcd_open("https://a:1", &x), -EINVAL);
	cr_assert_eq(cl_etcd_open("localhost:2379", &x), -EINVAL);
	cr_assert_eq(cl_etcd_open("http://", &x), -EINVAL);
	cr_assert_null(x);
}

Test(etcd, put_get_binary_values_and_revisions)
{
	NEED_ETCD();
	/* Bytes that base64 pads in all three ways, a NUL, a high byte. */
	const char v1[] = { 'a', 0, (char)0xff, 'b' };
	int64_t r1 = 0, r2 = 0;
	cl_kvs_t r;

	cr_assert_eq(cl_etcd_put(c, "/t/a", v1, sizeof v1, 0, &r1), 0, "%s", cl_etcd_errmsg(c));
	cr_assert_eq(cl_etcd_put(c, "/t/bb", "xy", 2, 0, &r2), 0);
	cr_assert_eq(r2, r1 + 1);
	cr_assert_eq(cl_etcd_get(c, "/t/a", &r), 0);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.kv[0].key, "/t/a");
	cr_assert_eq(r.kv[0].value_len, sizeof v1);
	cr_assert_eq(memcmp(r.kv[0].value, v1, sizeof v1), 0);
	cr_assert_eq(r.kv[0].create_rev, r1);
	cr_assert_eq(r.kv[0].mod_rev, r1);
	cr_assert_eq(r.kv[0].version, 1);
	cr_assert_eq(r.revision, r2);
	cl_kvs_free(&r);
	/* A missing key is no error, and no kv. */
	cr_assert_eq(cl_etcd_get(c, "/t/none", &r), 0);
	cr_assert_eq(r.n, 0);
	cl_kvs_free(&r);
	/* An empty value stays empty, not missing. */
	cr_assert_eq(cl_etcd_put(c, "/t/c", "", 0, 0, NULL), 0);
	cr_assert_eq(cl_etcd_get(c, "/t/c", &r), 0);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.kv[0].value_len, 0);
	cl_kvs_free(&r);
}

Test(etcd, prefix_reads_and_deletes_stop_at_the_prefix)
{
	NEED_ETCD();
	cl_kvs_t r;
	int64_t del = 0;
	const char *keys[] = { "/p/x/1", "/p/x/2", "/p/x/3", "/p/y", "/p/x" };

	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(cl_etcd_put(c, keys[i], "v", 1, 0, NULL), 0);
	cr_assert_eq(cl_etcd_get_prefix(c, "/p/x/", 0, &r), 0);
	cr_assert_eq(r.n, 3);
	cr_assert_str_eq(r.kv[0].key, "/p/x/1");
	cr_assert_str_eq(r.kv[2].key, "/p/x/3");
	cl_kvs_free(&r);
	cr_assert_eq(cl_etcd_delete(c, "/p/x/", true, &del), 0);
	cr_assert_eq(del, 3);
	cr_assert_eq(cl_etcd_get_prefix(c, "/p/", 0, &r), 0);
	cr_assert_eq(r.n, 2, "/p/x and /p/y stay");
	cl_kvs_free(&r);
	cr_assert_eq(cl_etcd_delete(c, "/p/y", false, &del), 0);
	cr_assert_eq(del, 1);
	cr_assert_eq(cl_etcd_delete(c, "/p/y", false, &del), 0);
	cr_assert_eq(del, 0);
}

Test(etcd, a_read_at_an_old_revision_sees_that_revision)
{
	NEED_ETCD();
	int64_t r1, r2;
	cl_kvs_t r;

	cr_assert_eq(cl_etcd_put(c, "/o/k", "1", 1, 0, &r1), 0);
	cr_assert_eq(cl_etcd_put(c, "/o/k", "2", 1, 0, &r2), 0);
	cr_assert_eq(cl_etcd_get_prefix(c, "/o/", r1, &r), 0);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.kv[0].value, "1");
	cl_kvs_free(&r);
}

Test(etcd, txn_create_if_absent_wins_once)
{
	NEED_ETCD();
	cl_cmp_t cmp = { .key = "/a/pod", .target = CL_CMP_CREATE, .result = CL_EQ, .num = 0 };
	cl_op_t put1 = { .kind = CL_OP_PUT, .key = "/a/pod", .value = "n1", .value_len = 2 };
	cl_op_t put2 = { .kind = CL_OP_PUT, .key = "/a/pod", .value = "n2", .value_len = 2 };
	cl_op_t get = { .kind = CL_OP_GET, .key = "/a/pod" };
	bool ok = false;
	cl_kvs_t got;
	int64_t mod;

	cr_assert_eq(cl_etcd_txn(c, &cmp, 1, &put1, 1, &get, 1, &ok, &got, NULL), 0,
		     "%s", cl_etcd_errmsg(c));
	cr_assert(ok);
	cr_assert_eq(got.n, 0);
	cl_kvs_free(&got);
	cr_assert_eq(cl_etcd_txn(c, &cmp, 1, &put2, 1, &get, 1, &ok, &got, NULL), 0);
	cr_assert_not(ok, "the second create must lose");
	cr_assert_eq(got.n, 1, "the failure branch's read comes back");
	cr_assert_str_eq(got.kv[0].value, "n1");
	mod = got.kv[0].mod_rev;
	cl_kvs_free(&got);

	/* Compare-and-swap on mod_revision: a stale revision loses. */
	cl_cmp_t cas = { .key = "/a/pod", .target = CL_CMP_MOD, .result = CL_EQ, .num = mod };
	cr_assert_eq(cl_etcd_txn(c, &cas, 1, &put2, 1, NULL, 0, &ok, NULL, NULL), 0);
	cr_assert(ok);
	cr_assert_eq(cl_etcd_txn(c, &cas, 1, &put1, 1, NULL, 0, &ok, NULL, NULL), 0);
	cr_assert_not(ok);
	cr_assert_eq(cl_etcd_get(c, "/a/pod", &got), 0);
	cr_assert_str_eq(got.kv[0].value, "n2");
	cl_kvs_free(&got);

	/* A value compare, and a delete in the success branch. */
	cl_cmp_t val = { .key = "/a/pod", .target = CL_CMP_VALUE, .result = CL_EQ,
			 .value = "n2", .value_len = 2 };
	cl_op_t del = { .kind = CL_OP_DELETE, .key = "/a/pod" };
	cr_assert_eq(cl_etcd_txn(c, &val, 1, &del, 1, NULL, 0, &ok, NULL, NULL), 0);
	cr_assert(ok);
	cr_assert_eq(cl_etcd_get(c, "/a/pod", &got), 0);
	cr_assert_eq(got.n, 0);
	cl_kvs_free(&got);
}

/* Many threads race to create the same keys: each key has exactly one
 * winner (what the scheduler's assignment relies on). */
struct racer {
	const char *url;
	int id, wins;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	cl_etcd_t *e;
	char key[32], val[8];

	if (cl_etcd_open(r->url, &e) != 0)
		return NULL;
	snprintf(val, sizeof val, "%d", r->id);
	for (int i = 0; i < 40; i++) {
		bool ok = false;

		snprintf(key, sizeof key, "/race/%d", i);
		cl_cmp_t cmp = { .key = key, .target = CL_CMP_CREATE, .result = CL_EQ, .num = 0 };
		cl_op_t put = { .kind = CL_OP_PUT, .key = key, .value = val, .value_len = strlen(val) };
		if (cl_etcd_txn(e, &cmp, 1, &put, 1, NULL, 0, &ok, NULL, NULL) == 0 && ok)
			r->wins++;
	}
	cl_etcd_close(e);
	return NULL;
}

Test(etcd, racing_creates_have_one_winner_per_key)
{
	NEED_ETCD();
	pthread_t th[4];
	struct racer r[4];
	int total = 0;
	cl_kvs_t got;

	for (int i = 0; i < 4; i++) {
		r[i] = (struct racer){ etcd.url, i, 0 };
		pthread_create(&th[i], NULL, race, &r[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		total += r[i].wins;
	}
	cr_assert_eq(total, 40, "40 keys, %d wins", total);
	cr_assert_eq(cl_etcd_get_prefix(c, "/race/", 0, &got), 0);
	cr_assert_eq(got.n, 40);
	for (size_t i = 0; i < got.n; i++)
		cr_assert_eq(got.kv[i].version, 1, "%s written twice", got.kv[i].key);
	cl_kvs_free(&got);
}

Test(etcd, a_lease_keeps_its_keys_until_revoked_and_expires_unkept)
{
	NEED_ETCD();
	int64_t id = 0, ttl = 0, left = 0;
	cl_kvs_t r;

	cr_assert_eq(cl_etcd_lease_grant(c, 10, &id, &ttl), 0, "%s", cl_etcd_errmsg(c));
	cr_assert_neq(id, 0);
	cr_assert_eq(ttl, 10);
	cr_assert_eq(cl_etcd_put(c, "/l/k", "v", 1, id, NULL), 0);
	cr_assert_eq(cl_etcd_lease_keepalive(c, id, &left), 0, "%s", cl_etcd_errmsg(c));
	cr_assert_eq(left, 10);
	cr_assert_eq(cl_etcd_get(c, "/l/k", &r), 0);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.kv[0].lease, id);
	cl_kvs_free(&r);
	int64_t g = 0;
	cr_assert_eq(cl_etcd_lease_ttl(c, id, &left, &g), 0, "%s", cl_etcd_errmsg(c));
	cr_assert(left >= 9 && left <= 10, "%lld s left", (long long)left);
	cr_assert_eq(g, 10);
	cr_assert_eq(cl_etcd_lease_revoke(c, id), 0);
	cr_assert_eq(cl_etcd_lease_ttl(c, id, &left, NULL), TANK_ENOTFOUND);
	cr_assert_eq(cl_etcd_get(c, "/l/k", &r), 0);
	cr_assert_eq(r.n, 0, "the lease's key went with it");
	cl_kvs_free(&r);
	cr_assert_eq(cl_etcd_lease_keepalive(c, id, &left), TANK_ENOTFOUND);
	cr_assert_eq(cl_etcd_lease_revoke(c, id), TANK_ENOTFOUND, "%s", cl_etcd_errmsg(c));
	/* A put on a lease that does not exist is refused. */
	cr_assert_eq(cl_etcd_put(c, "/l/k", "v", 1, id, NULL), TANK_ENOTFOUND);

	/* Unkept, a short lease expires by itself (etcd raises a TTL below
	 * its minimum, 1.5 election timeouts, so allow up to 9 s). */
	cr_assert_eq(cl_etcd_lease_grant(c, 1, &id, &ttl), 0);
	cr_assert_eq(cl_etcd_put(c, "/l/short", "v", 1, id, NULL), 0);
	size_t n = 1;
	for (int i = 0; i < 90 && n; i++) {
		usleep(100 * 1000);
		cr_assert_eq(cl_etcd_get(c, "/l/short", &r), 0);
		n = r.n;
		cl_kvs_free(&r);
	}
	cr_assert_eq(n, 0, "the unkept lease's key never went");
}

/* --- watch --------------------------------------------------------------- */

struct seen {
	char log[2048];
	int batches, events;
	int64_t last_rev;
	int stop_after;   /* events */
	int64_t created_rev;
};

static int on_events(void *ud, const cl_event_t *ev, size_t n, int64_t rev)
{
	struct seen *s = ud;
	size_t len = strlen(s->log);

	if (n == 0) {
		s->created_rev = rev;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(s->log + len, sizeof s->log - len, "%s %s=%s;",
			 ev[i].type == CL_EV_PUT ? "put" : "del", ev[i].kv.key,
			 ev[i].type == CL_EV_PUT ? ev[i].kv.value : "");
		len = strlen(s->log);
		s->events++;
	}
	s->batches++;
	s->last_rev = rev;
	return s->events >= s->stop_after ? 7 : 0;
}

Test(etcd, a_watch_from_a_revision_sees_every_change_in_order)
{
	NEED_ETCD();
	struct seen s = { .stop_after = 4 };
	int64_t r0, compacted = -1;

	cr_assert_eq(cl_etcd_put(c, "/w/a", "1", 1, 0, &r0), 0);
	cr_assert_eq(cl_etcd_put(c, "/w/b", "2", 1, 0, NULL), 0);
	cr_assert_eq(cl_etcd_put(c, "/other", "x", 1, 0, NULL), 0);
	cr_assert_eq(cl_etcd_put(c, "/w/a", "3", 1, 0, NULL), 0);
	cr_assert_eq(cl_etcd_delete(c, "/w/b", false, NULL), 0);
	/* History replayed from r0: the callback's nonzero ends the watch. */
	cr_assert_eq(cl_etcd_watch(c, "/w/", true, r0, on_events, &s, &compacted), 7,
		     "%s", cl_etcd_errmsg(c));
	cr_assert_str_eq(s.log, "put /w/a=1;put /w/b=2;put /w/a=3;del /w/b=;");
	cr_assert_eq(compacted, 0);
	cr_assert_eq(s.last_rev, r0 + 4);
	cr_assert_eq(s.created_rev, r0 + 4, "created at the store's revision");
}

struct live {
	const char *url;
	atomic_int go;
};

static void *writer(void *arg)
{
	struct live *l = arg;
	cl_etcd_t *e;

	while (!atomic_load(&l->go))
		usleep(1000);
	usleep(200 * 1000);
	if (cl_etcd_open(l->url, &e) != 0)
		return NULL;
	cl_etcd_put(e, "/live/x", "1", 1, 0, NULL);
	cl_etcd_put(e, "/live/y", "2", 1, 0, NULL);
	cl_etcd_close(e);
	return NULL;
}

static int on_live(void *ud, const cl_event_t *ev, size_t n, int64_t rev)
{
	struct seen *s = ud;

	(void)ev;
	(void)rev;
	if (n == 0)
		s->batches++;
	s->events += (int)n;
	return s->events >= 2 ? 1 : 0;
}

Test(etcd, a_watch_from_now_sees_live_writes)
{
	NEED_ETCD();
	struct live l = { etcd.url, 0 };
	struct seen s = { 0 };
	pthread_t th;

	pthread_create(&th, NULL, writer, &l);
	atomic_store(&l.go, 1);
	cr_assert_eq(cl_etcd_watch(c, "/live/", true, 0, on_live, &s, NULL), 1, "%s",
		     cl_etcd_errmsg(c));
	pthread_join(th, NULL);
	cr_assert_eq(s.events, 2);
	cr_assert_eq(s.batches, 1, "one created notice");
}

Test(etcd, a_range_read_and_watch_cover_their_range_only)
{
	NEED_ETCD();
	cl_kvs_t r;
	struct seen s = { .stop_after = 2 };
	int64_t r0;

	cr_assert_eq(cl_etcd_put(c, "/tank/assign/a", "n1", 2, 0, &r0), 0);
	cr_assert_eq(cl_etcd_put(c, "/tank/nodes/n1", "{}", 2, 0, NULL), 0);
	cr_assert_eq(cl_etcd_put(c, "/tank/pods/a", "{}", 2, 0, NULL), 0);
	cr_assert_eq(cl_etcd_put(c, "/tank/status/a", "{}", 2, 0, NULL), 0);
	cr_assert_eq(cl_etcd_get_range(c, "/tank/assign/", "/tank/nodes0", 0, &r), 0);
	cr_assert_eq(r.n, 2);
	cr_assert_str_eq(r.kv[1].key, "/tank/nodes/n1");
	cl_kvs_free(&r);
	cr_assert_eq(cl_etcd_watch_range(c, "/tank/nodes/", "/tank/status/", r0, on_events, &s, NULL),
		     7);
	cr_assert_str_eq(s.log, "put /tank/nodes/n1={};put /tank/pods/a={};");
}

static void *aborter(void *arg)
{
	usleep(300 * 1000);
	cl_etcd_abort(arg);
	return NULL;
}

Test(etcd, abort_ends_an_idle_watch_and_rearm_allows_calls_again)
{
	NEED_ETCD();
	struct seen s = { .stop_after = 1000 };
	pthread_t th;
	struct timespec t0, t1;
	cl_kvs_t r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&th, NULL, aborter, c);
	cr_assert_eq(cl_etcd_watch(c, "/idle/", true, 0, on_events, &s, NULL), -ECANCELED);
	pthread_join(th, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 3, "abort took more than 2 s");
	cr_assert_eq(cl_etcd_get(c, "/idle/x", &r), -ECANCELED);
	cl_etcd_rearm(c);
	cr_assert_eq(cl_etcd_get(c, "/idle/x", &r), 0);
	cl_kvs_free(&r);
}

Test(etcd, a_compacted_revision_is_told_apart)
{
	NEED_ETCD();
	int64_t r1, r2, r3, compacted = 0;
	struct seen s = { .stop_after = 1 };
	cr_assert_eq(cl_etcd_put(c, "/cmp/k", "1", 1, 0, &r1), 0);
	cr_assert_eq(cl_etcd_put(c, "/cmp/k", "2", 1, 0, &r2), 0);
	cr_assert_eq(cl_etcd_put(c, "/cmp/k", "3", 1, 0, &r3), 0);
	cr_assert_eq(cl_etcd_compact(c, r3), 0, "%s", cl_etcd_errmsg(c));
	cr_assert_eq(cl_etcd_watch(c, "/cmp/", true, r1, on_events, &s, &compacted), -ERANGE,
		     "%s", cl_etcd_errmsg(c));
	cr_assert_eq(compacted, r3);
	cl_kvs_t r;
	cr_assert_eq(cl_etcd_get_prefix(c, "/cmp/", r1, &r), -ERANGE, "%s", cl_etcd_errmsg(c));
	/* Re-list, then watch from the list's revision + 1. */
	cr_assert_eq(cl_etcd_get_prefix(c, "/cmp/", 0, &r), 0);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.kv[0].value, "3");
	cl_kvs_free(&r);
}

Test(etcd, a_dead_etcd_is_an_error_value_and_a_restart_is_seen)
{
	NEED_ETCD();
	cl_kvs_t r;
	int rc;

	cr_assert_eq(cl_etcd_put(c, "/d/k", "v", 1, 0, NULL), 0);
	ts_etcd_stop(&etcd, true);
	cl_etcd_set_timeout(c, 1000);
	rc = cl_etcd_get(c, "/d/k", &r);
	cr_assert(rc == -ECONNREFUSED || rc == -ECONNRESET, "rc %d: %s", rc, cl_etcd_errmsg(c));
	cr_assert_neq(cl_etcd_errmsg(c)[0], '\0');
	cr_assert_eq(ts_etcd_restart(&etcd), 0);
	cr_assert_eq(cl_etcd_get(c, "/d/k", &r), 0, "%s", cl_etcd_errmsg(c));
	cr_assert_eq(r.n, 1, "the data survived the restart");
	cl_kvs_free(&r);
}

static void *killer(void *arg)
{
	usleep(300 * 1000);
	ts_etcd_stop(arg, true);
	return NULL;
}

Test(etcd, a_watch_ends_with_an_error_when_etcd_dies)
{
	NEED_ETCD();
	struct seen s = { .stop_after = 1000 };
	pthread_t th;
	int rc;

	/* etcd killed while the watch waits: the stream ends with an error
	 * value, not a hang and not a success. */
	pthread_create(&th, NULL, killer, &etcd);
	rc = cl_etcd_watch(c, "/dead/", true, 0, on_events, &s, NULL);
	pthread_join(th, NULL);
	cr_assert(rc == -ECONNRESET || rc == -EIO, "rc %d: %s", rc, cl_etcd_errmsg(c));
}

/* --- cl_mirror: list, watch, resume ---------------------------------------- */

#include "cluster/cl_mirror.h"

static bool mirror_has(cl_mirror_t *m, const char *key, const char *value, bool synced)
{
	bool ok;

	cl_mirror_lock(m);
	cl_entry_t *e = tank_map_get(cl_mirror_map(m), key);
	ok = (value ? e && strcmp(e->value, value) == 0 : !e) &&
	     (!synced || cl_mirror_synced(m));
	cl_mirror_unlock(m);
	return ok;
}

static bool mirror_wait(cl_mirror_t *m, const char *key, const char *value, int secs)
{
	uint64_t g = 0;

	for (int i = 0; i < secs * 10; i++) {
		if (mirror_has(m, key, value, true))
			return true;
		g = cl_mirror_wait(m, g, 100);
	}
	return mirror_has(m, key, value, true);
}

Test(etcd, a_mirror_lists_watches_and_resumes_after_etcd_restarts)
{
	NEED_ETCD();
	cl_mirror_t *m;

	cr_assert_eq(cl_etcd_put(c, "/m/a", "1", 1, 0, NULL), 0);
	cr_assert_eq(cl_etcd_put(c, "/n/out", "x", 1, 0, NULL), 0);
	cr_assert_eq(cl_mirror_start(etcd.url, "/m/", "/m0", &m), 0);
	cr_assert(mirror_wait(m, "/m/a", "1", 10), "never listed");
	cr_assert(mirror_has(m, "/n/out", NULL, false), "outside its range");
	cr_assert_eq(cl_etcd_put(c, "/m/b", "2", 1, 0, NULL), 0);
	cr_assert_eq(cl_etcd_delete(c, "/m/a", false, NULL), 0);
	cr_assert(mirror_wait(m, "/m/b", "2", 10));
	cr_assert(mirror_wait(m, "/m/a", NULL, 10), "a delete not mirrored");
	/* etcd goes: the mirror is out of sync, keeps what it had. */
	ts_etcd_stop(&etcd, true);
	bool unsynced = false;
	for (int i = 0; i < 50 && !unsynced; i++) {
		cl_mirror_lock(m);
		unsynced = !cl_mirror_synced(m);
		cl_mirror_unlock(m);
		usleep(100 * 1000);
	}
	cr_assert(unsynced, "still synced with etcd dead");
	cr_assert(mirror_has(m, "/m/b", "2", false));
	cr_assert_eq(ts_etcd_restart(&etcd), 0);
	cr_assert_eq(cl_etcd_put(c, "/m/c", "3", 1, 0, NULL), 0);
	cr_assert(mirror_wait(m, "/m/c", "3", 15), "not back in sync after etcd came back");
	cr_assert_eq(cl_mirror_lists(m), 1, "the watch was resumed, not listed again");
	cl_mirror_stop(m);
}
