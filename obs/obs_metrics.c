/* obs_metrics — the Prometheus exposition of tankd (contract in obs_metrics.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "obs/obs_metrics.h"
#include "obs/obs_prom.h"
#include "api/api_server.h"

/* ---- every status map of a kind ------------------------------------------- */

typedef struct scan {
	const kind_env_t *env;
	const kind_t *k;
	msgpack_packer pk;
	size_t n;
} scan_t;

static int scan_one(void *ctx, const st_pod_t *p)
{
	scan_t *s = ctx;
	int rc = s->k->pack_status(s->env, p, &s->pk);
	s->n += rc == 0;
	return rc;
}

int obs_statuses(const kind_env_t *env, const kind_t *k, msgpack_packer *pk, tank_error_t *e)
{
	msgpack_sbuffer sb;
	scan_t s = { .env = env, .k = k };
	int err;

	if (k->status_all)
		return k->status_all(env, pk, e);
	if (!k->pack_status)
		return msgpack_pack_array(pk, 0) ? -ENOMEM : 0;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&s.pk, &sb, msgpack_sbuffer_write);
	if ((err = kind_scan(env, k, scan_one, &s, e)) == 0) {
		err = msgpack_pack_array(pk, s.n) ? -ENOMEM : 0;
		/* The maps as packed, after the array's header. */
		if (!err && sb.size)
			err = pk->callback(pk->data, sb.data, sb.size) ? -ENOMEM : 0;
	}
	msgpack_sbuffer_destroy(&sb);
	return err;
}

/* Kind k's status maps, unpacked into *u from *sb: the strings of *u
 * point into *sb (msgpack_unpack_next copies none), so the caller
 * destroys both, u first.  0 or an error. */
static int statuses_of(const kind_env_t *env, const kind_t *k, msgpack_sbuffer *sb,
		       msgpack_unpacked *u)
{
	msgpack_packer pk;
	tank_error_t e;
	size_t off = 0;
	int err;

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	tank_error_clear(&e);
	err = obs_statuses(env, k, &pk, &e);
	msgpack_unpacked_init(u);
	if (!err && msgpack_unpack_next(u, sb->data, sb->size, &off) != MSGPACK_UNPACK_SUCCESS)
		err = -EINVAL;
	if (!err && u->data.type != MSGPACK_OBJECT_ARRAY)
		err = -EINVAL;
	return err;
}

static void statuses_done(msgpack_sbuffer *sb, msgpack_unpacked *u)
{
	msgpack_unpacked_destroy(u);
	msgpack_sbuffer_destroy(sb);
}

/* ---- phases ------------------------------------------------------------------- */

#define OBS_PHASES 24

typedef struct phases {
	char name[OBS_PHASES][32];
	uint64_t n[OBS_PHASES];
	size_t count;
	uint64_t total;
} phases_t;

static void phases_add(phases_t *p, const msgpack_object *status)
{
	char ph[32];

	p->total++;
	if (!kind_str(kind_map_get(status, "phase"), ph, sizeof ph) || !ph[0])
		snprintf(ph, sizeof ph, "unknown");
	for (size_t i = 0; i < p->count; i++)
		if (!strcmp(p->name[i], ph)) {
			p->n[i]++;
			return;
		}
	if (p->count == OBS_PHASES)
		return;
	snprintf(p->name[p->count], sizeof p->name[0], "%s", ph);
	p->n[p->count++] = 1;
}

/* ---- the process ---------------------------------------------------------------- */

static double rss_bytes(void)
{
	unsigned long size = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &rss) != 2)
		rss = 0;
	fclose(f);
	return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

static double open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	double n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;     /* the directory's own fd */
}

/* ---- the exposition ---------------------------------------------------------------- */

static void family(obs_buf_t *b, const char *name, const char *type, const char *help,
		   const obs_buf_t *samples)
{
	obs_prom_head(b, name, type, help);
	if (samples->len)
		obs_buf_put(b, samples->p, samples->len);
	if (samples->oom)
		b->oom = true;
}

static void objects(const obs_src_t *s, obs_buf_t *b)
{
	obs_buf_t by_phase = { 0 }, totals = { 0 }, ready = { 0 }, restarts = { 0 },
		  cready = { 0 };

	for (size_t i = 0; s->kinds->kinds[i]; i++) {
		const kind_t *k = s->kinds->kinds[i];
		msgpack_sbuffer sb;
		msgpack_unpacked u;
		phases_t ph = { 0 };
		char name[128], ctr[128];

		if (statuses_of(s->kinds, k, &sb, &u) == 0) {
			for (uint32_t j = 0; j < u.data.via.array.size; j++) {
				const msgpack_object *st = &u.data.via.array.ptr[j];
				const msgpack_object *o;
				phases_add(&ph, st);
				if (!kind_str(kind_map_get(st, "name"), name, sizeof name))
					continue;
				if ((o = kind_map_get(st, "ready")) && o->type == MSGPACK_OBJECT_BOOLEAN)
					obs_prom_sample(&ready, "tank_object_ready",
							(const char *[]){ "kind", k->name, "name", name, NULL },
							o->via.boolean);
				const msgpack_object *cs = kind_map_get(st, "containers");
				if (!cs || cs->type != MSGPACK_OBJECT_ARRAY)
					continue;
				for (uint32_t c = 0; c < cs->via.array.size; c++) {
					const msgpack_object *cm = &cs->via.array.ptr[c];
					int64_t n;
					if (!kind_str(kind_map_get(cm, "name"), ctr, sizeof ctr))
						continue;
					const char *l[] = { "kind", k->name, "name", name,
							    "container", ctr, NULL };
					if (kind_int(kind_map_get(cm, "restarts"), &n))
						obs_prom_sample(&restarts, "tank_container_restarts_total",
								l, (double)n);
					if ((o = kind_map_get(cm, "ready")) &&
					    o->type == MSGPACK_OBJECT_BOOLEAN)
						obs_prom_sample(&cready, "tank_container_ready", l,
								o->via.boolean);
				}
			}
		}
		statuses_done(&sb, &u);
		obs_prom_sample(&totals, "tank_kind_objects",
				(const char *[]){ "kind", k->name, NULL }, (double)ph.total);
		for (size_t p = 0; p < ph.count; p++)
			obs_prom_sample(&by_phase, "tank_objects",
					(const char *[]){ "kind", k->name, "phase", ph.name[p], NULL },
					(double)ph.n[p]);
	}
	family(b, "tank_kind_objects", "gauge", "Objects stored, by kind.", &totals);
	family(b, "tank_objects", "gauge", "Objects by kind and phase.", &by_phase);
	family(b, "tank_object_ready", "gauge",
	       "1 when the object is ready (kinds whose status has `ready`).", &ready);
	family(b, "tank_container_restarts_total", "counter",
	       "Restarts of each container (from the status maps).", &restarts);
	family(b, "tank_container_ready", "gauge",
	       "1 when the container is ready (its readiness probe passed, or it has none).",
	       &cready);
	obs_buf_free(&by_phase);
	obs_buf_free(&totals);
	obs_buf_free(&ready);
	obs_buf_free(&restarts);
	obs_buf_free(&cready);
}

static void one(obs_buf_t *b, const char *name, const char *type, const char *help, double v)
{
	obs_prom_head(b, name, type, help);
	obs_prom_sample(b, name, NULL, v);
}

int obs_metrics_write(const obs_src_t *s, const obs_counts_t *c, obs_buf_t *b)
{
	rt_pid_t loop = rt_whereis(s->rt, s->loop_name);
	rt_pid_t api = rt_whereis(s->rt, s->api_name);
	rc_stats_t rs;
	st_usage_t su;
	kit_hist_t durable, flush;
	struct rusage ru;

	obs_prom_head(b, "tank_build_info", "gauge", "tankd's version, as a label.");
	obs_prom_sample(b, "tank_build_info",
			(const char *[]){ "version", s->version ? s->version : "", NULL }, 1);
	objects(s, b);

	memset(&rs, 0, sizeof rs);
	if (!loop || rc_loop_stats(s->rt, loop, &rs) < 0)
		memset(&rs, 0, sizeof rs);
	one(b, "tank_reconcile_passes_total", "counter", "Resync passes started.",
	    (double)rs.passes);
	one(b, "tank_reconciles_total", "counter", "reconcile() calls of every kind.",
	    (double)rs.reconciles);
	one(b, "tank_reconcile_failures_total", "counter", "reconcile() calls that failed.",
	    (double)rs.failures);
	one(b, "tank_reconcile_escalations_total", "counter",
	    "Keys whose retries ran out.", (double)rs.escalations);
	one(b, "tank_reconcile_queue", "gauge", "Keys queued or waiting for a requeue.",
	    (double)rs.queued);
	obs_prom_head(b, "tank_reconcile_pass_seconds", "histogram",
		      "How long each resync pass took, first list call to last.");
	obs_prom_hist(b, "tank_reconcile_pass_seconds", NULL, &rs.pass_seconds);

	st_commit_stats(s->store, &durable, &flush);
	obs_prom_head(b, "tank_store_commit_seconds", "histogram",
		      "Store write transactions, begin to commit: durable (applies, deletes; "
		      "fsynced) and flush (group commits of observed state).");
	obs_prom_hist(b, "tank_store_commit_seconds", (const char *[]){ "type", "durable", NULL },
		      &durable);
	obs_prom_hist(b, "tank_store_commit_seconds", (const char *[]){ "type", "flush", NULL },
		      &flush);
	if (st_usage(s->store, &su) == 0) {
		one(b, "tank_store_used_bytes", "gauge", "Store pages in use, in bytes.",
		    (double)su.used);
		one(b, "tank_store_map_bytes", "gauge", "The store's map size (grows on demand).",
		    (double)su.total);
		one(b, "tank_store_reserve_bytes", "gauge",
		    "Room kept for status changes and deletes.", (double)su.reserve);
		one(b, "tank_store_flush_failures", "gauge",
		    "Status flushes failed since the last good one.", (double)su.flush_failures);
		one(b, "tank_store_history_dropped_total", "counter",
		    "Transitions not written because the store was full.",
		    (double)su.history_dropped);
	}
	one(b, "tank_store_pending", "gauge", "Status changes queued for the next commit.",
	    (double)st_pending(s->store));

	one(b, "tank_api_connections", "gauge", "Open connections on the RPC socket.",
	    api ? (double)api_server_conns(s->rt, api) : 0);
	one(b, "tank_api_subscribers", "gauge", "RPC connections subscribed to events.",
	    api ? (double)api_server_subscribers(s->rt, api) : 0);

	obs_prom_head(b, "tank_events_total", "counter", "Events published, by type.");
	for (size_t i = 0; i < c->ntypes; i++)
		obs_prom_sample(b, "tank_events_total",
				(const char *[]){ "type", c->type[i], NULL }, (double)c->events[i]);
	if (c->events_other)
		obs_prom_sample(b, "tank_events_total", (const char *[]){ "type", "other", NULL },
				(double)c->events_other);
	one(b, "tank_http_requests_total", "counter", "HTTP requests answered.",
	    (double)c->requests);
	one(b, "tank_http_sse_clients", "gauge", "Clients on /events.", (double)c->sse_clients);
	one(b, "tank_http_sse_dropped_total", "counter",
	    "/events clients cut for falling behind.", (double)c->sse_dropped);

	one(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
	    rss_bytes());
	one(b, "process_open_fds", "gauge", "Number of open file descriptors.", open_fds());
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		one(b, "process_cpu_seconds_total", "counter",
		    "User and system CPU time spent in seconds.",
		    (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	return b->oom ? -ENOMEM : 0;
}

void obs_summary(const obs_src_t *s, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; s->kinds->kinds[i]; i++) {
		const kind_t *k = s->kinds->kinds[i];
		msgpack_sbuffer sb;
		msgpack_unpacked u;
		phases_t ph = { 0 };

		if (statuses_of(s->kinds, k, &sb, &u) == 0)
			for (uint32_t j = 0; j < u.data.via.array.size; j++)
				phases_add(&ph, &u.data.via.array.ptr[j]);
		statuses_done(&sb, &u);
		int n = snprintf(out + len, cap - len, "%s%llu %s", len ? ", " : "",
				 (unsigned long long)ph.total, ph.total == 1 ? k->name : k->plural);
		if (n < 0 || (size_t)n >= cap - len)
			return;
		len += (size_t)n;
		for (size_t p = 0; p < ph.count; p++) {
			n = snprintf(out + len, cap - len, "%s%llu %s", p ? ", " : " (",
				     (unsigned long long)ph.n[p], ph.name[p]);
			if (n < 0 || (size_t)n >= cap - len)
				return;
			len += (size_t)n;
		}
		if (ph.count) {
			if (len + 2 > cap)
				return;
			out[len++] = ')';
			out[len] = '\0';
		}
	}
}
