/* cl_mirror — see cl_mirror.h. */
#include "cluster/cl_mirror.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/cl_etcd.h"
#include "common/tank_err.h"

struct cl_mirror {
	char *key, *end;
	char *skip;              /* a prefix not kept (NULL: none) */
	cl_etcd_t *etcd;
	pthread_t thr;
	atomic_int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	tank_map_t map;          /* key → cl_entry_t * */
	bool synced;
	int64_t rev;             /* the last revision applied */
	int64_t created_rev;     /* the store's revision when the watch began */
	uint64_t gen;
	unsigned lists;
};

static void entry_free(cl_entry_t *e)
{
	if (e) {
		free(e->value);
		free(e);
	}
}

static void map_clear(tank_map_t *m)
{
	const char *k;
	void *v;

	for (size_t i = 0; tank_map_next(m, &i, &k, &v);)
		entry_free(v);
	tank_map_destroy(m);
	tank_map_init(m);
}

/* Under mu. */
static int map_set(tank_map_t *m, const cl_kv_t *kv)
{
	cl_entry_t *e = calloc(1, sizeof *e);
	void *old = NULL;

	if (!e || !(e->value = malloc(kv->value_len + 1))) {
		free(e);
		return -ENOMEM;
	}
	memcpy(e->value, kv->value, kv->value_len);
	e->value[kv->value_len] = '\0';
	e->len = kv->value_len;
	e->create_rev = kv->create_rev;
	e->mod_rev = kv->mod_rev;
	e->lease = kv->lease;
	if (tank_map_put(m, kv->key, e, &old) != 0) {
		entry_free(e);
		return -ENOMEM;
	}
	entry_free(old);
	return 0;
}

static void bump(cl_mirror_t *m)
{
	m->gen++;
	pthread_cond_broadcast(&m->cv);
}

static void set_synced(cl_mirror_t *m, bool s)
{
	pthread_mutex_lock(&m->mu);
	if (m->synced != s) {
		m->synced = s;
		bump(m);
	}
	pthread_mutex_unlock(&m->mu);
}

static bool skipped(const cl_mirror_t *m, const char *key)
{
	return m->skip && strncmp(key, m->skip, strlen(m->skip)) == 0;
}

/* A fresh list replaces the map: what was deleted while we were away
 * goes too. */
static int relist(cl_mirror_t *m)
{
	cl_kvs_t r;
	tank_map_t fresh;
	int rc;

	if ((rc = cl_etcd_get_range(m->etcd, m->key, m->end, 0, &r)) != 0)
		return rc;
	tank_map_init(&fresh);
	for (size_t i = 0; i < r.n && rc == 0; i++)
		if (!skipped(m, r.kv[i].key))
			rc = map_set(&fresh, &r.kv[i]);
	if (rc) {
		map_clear(&fresh);
		cl_kvs_free(&r);
		return rc;
	}
	pthread_mutex_lock(&m->mu);
	map_clear(&m->map);
	m->map = fresh;
	m->rev = r.revision;
	m->lists++;
	bump(m);
	pthread_mutex_unlock(&m->mu);
	cl_kvs_free(&r);
	return 0;
}

static int on_events(void *ud, const cl_event_t *ev, size_t n, int64_t revision)
{
	cl_mirror_t *m = ud;
	int rc = 0;
	bool was, kept = false;

	pthread_mutex_lock(&m->mu);
	was = m->synced;
	if (n == 0) {
		m->created_rev = revision;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (ev[i].kv.mod_rev > m->rev)
			m->rev = ev[i].kv.mod_rev;
		/* A skipped key still moves the revision (it is what lets a
		 * quiet range see it has caught up), but wakes no reader. */
		if (skipped(m, ev[i].kv.key))
			continue;
		kept = true;
		if (ev[i].type == CL_EV_DELETE)
			entry_free(tank_map_del(&m->map, ev[i].kv.key));
		else
			rc = map_set(&m->map, &ev[i].kv);
		if (ev[i].kv.mod_rev > m->rev)
			m->rev = ev[i].kv.mod_rev;
	}
	if (n && revision > m->rev)
		m->rev = revision;
	if (!m->synced && m->rev >= m->created_rev)
		m->synced = true;
	if (kept || was != m->synced || n == 0)
		bump(m);
	pthread_mutex_unlock(&m->mu);
	/* Out of memory: end the watch; the thread lists again. */
	return rc ? rc : atomic_load(&m->stop) ? 1 : 0;
}

static void nap(cl_mirror_t *m, int ms)
{
	for (int i = 0; i < ms / 50 && !atomic_load(&m->stop); i++) {
		struct timespec ts = { 0, 50 * 1000000L };

		nanosleep(&ts, NULL);
	}
}

static void *run(void *arg)
{
	cl_mirror_t *m = arg;
	bool listed = false;

	while (!atomic_load(&m->stop)) {
		int64_t from, compacted = 0;
		int rc;

		if (!listed) {
			if (relist(m) != 0) {
				set_synced(m, false);
				nap(m, 500);
				continue;
			}
			listed = true;
		}
		pthread_mutex_lock(&m->mu);
		from = m->rev + 1;
		/* Synced only once the watch has caught up (on_events). */
		m->created_rev = INT64_MAX;
		pthread_mutex_unlock(&m->mu);
		rc = cl_etcd_watch_range(m->etcd, m->key, m->end, from, on_events, m, &compacted);
		set_synced(m, false);
		if (atomic_load(&m->stop))
			break;
		if (rc == -ERANGE || rc == -ENOMEM || rc == TANK_ECORRUPT)
			listed = false;
		nap(m, 300);
	}
	return NULL;
}

int cl_mirror_start(const char *url, const char *key, const char *end, cl_mirror_t **out)
{
	return cl_mirror_start_skip(url, key, end, NULL, out);
}

int cl_mirror_start_skip(const char *url, const char *key, const char *end, const char *skip,
			 cl_mirror_t **out)
{
	cl_mirror_t *m = calloc(1, sizeof *m);
	int rc;

	if (!m)
		return -ENOMEM;
	if (skip && !(m->skip = strdup(skip))) {
		free(m);
		return -ENOMEM;
	}
	if ((rc = cl_etcd_open(url, &m->etcd)) != 0) {
		free(m);
		return rc;
	}
	if (!(m->key = strdup(key)) || !(m->end = strdup(end))) {
		rc = -ENOMEM;
		goto fail;
	}
	tank_map_init(&m->map);
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	if ((rc = pthread_create(&m->thr, NULL, run, m)) != 0) {
		rc = -rc;
		pthread_mutex_destroy(&m->mu);
		pthread_cond_destroy(&m->cv);
		goto fail;
	}
	*out = m;
	return 0;
fail:
	cl_etcd_close(m->etcd);
	free(m->key);
	free(m->end);
	free(m->skip);
	free(m);
	return rc;
}

void cl_mirror_stop(cl_mirror_t *m)
{
	if (!m)
		return;
	atomic_store(&m->stop, 1);
	cl_etcd_abort(m->etcd);
	pthread_join(m->thr, NULL);
	map_clear(&m->map);
	tank_map_destroy(&m->map);
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->cv);
	cl_etcd_close(m->etcd);
	free(m->key);
	free(m->end);
	free(m->skip);
	free(m);
}

void cl_mirror_lock(cl_mirror_t *m)
{
	pthread_mutex_lock(&m->mu);
}

void cl_mirror_unlock(cl_mirror_t *m)
{
	pthread_mutex_unlock(&m->mu);
}

const tank_map_t *cl_mirror_map(const cl_mirror_t *m)
{
	return &m->map;
}

bool cl_mirror_synced(const cl_mirror_t *m)
{
	return m->synced;
}

int64_t cl_mirror_revision(const cl_mirror_t *m)
{
	return m->rev;
}

uint64_t cl_mirror_gen(cl_mirror_t *m)
{
	uint64_t g;

	pthread_mutex_lock(&m->mu);
	g = m->gen;
	pthread_mutex_unlock(&m->mu);
	return g;
}

uint64_t cl_mirror_wait(cl_mirror_t *m, uint64_t seen, int timeout_ms)
{
	struct timespec ts;
	uint64_t g;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m->mu);
	while (m->gen == seen) {
		if (pthread_cond_timedwait(&m->cv, &m->mu, &ts) == ETIMEDOUT)
			break;
	}
	g = m->gen;
	pthread_mutex_unlock(&m->mu);
	return g;
}

unsigned cl_mirror_lists(cl_mirror_t *m)
{
	unsigned n;

	pthread_mutex_lock(&m->mu);
	n = m->lists;
	pthread_mutex_unlock(&m->mu);
	return n;
}
