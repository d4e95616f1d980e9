/* obs_metrics — the Prometheus exposition of tankd (contract in obs_metrics.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "obs/obs_metrics.h"
#include "obs/obs_prom.h"
#include "api/api_server.h"

/* ---- a kind with status_all only ------------------------------------------ */

/* Calls fn with each element of kind k's status_all array, one at a time
 * (borrowed for the call).  Such a
 * kind (no pack_status) is read whole in one slice. */
static int status_all_each(const kind_env_t *env, const kind_t *k, obs_status_fn fn, void *ctx)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked u;
	tank_error_t te;
	const unsigned char *d;
	size_t off = 0, n = 0;
	int err;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_unpacked_init(&u);
	tank_error_clear(&te);
	err = k->status_all(env, &pk, 0, &te);
	/* The array's header read by hand: msgpack-c unpacks whole objects
	 * only. */
	d = (const unsigned char *)sb.data;
	if (err == 0 && sb.size >= 1 && (d[0] & 0xf0) == 0x90) {
		n = d[0] & 0x0f;
		off = 1;
	} else if (err == 0 && sb.size >= 3 && d[0] == 0xdc) {
		n = (size_t)d[1] << 8 | d[2];
		off = 3;
	} else if (err == 0 && sb.size >= 5 && d[0] == 0xdd) {
		n = (size_t)d[1] << 24 | (size_t)d[2] << 16 | (size_t)d[3] << 8 | d[4];
		off = 5;
	} else if (err == 0) {
		err = -EINVAL;
	}
	for (size_t i = 0; err == 0 && i < n; i++) {
		if (msgpack_unpack_next(&u, sb.data, sb.size, &off) != MSGPACK_UNPACK_SUCCESS)
			err = -EINVAL;
		else
			fn(ctx, &u.data);
	}
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
	return err;
}

/* ---- walks in slices ------------------------------------------------------------ */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One kind's part of a slice: the reused buffers of its status maps. */
typedef struct wslice {
	obs_walk_t *w;
	const kind_t *k;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked u;
	size_t seen;
	bool stopped;                 /* the slice ended before the kind did */
} wslice_t;

static int walk_one(void *arg, const st_pod_t *rec)
{
	wslice_t *s = arg;
	obs_walk_t *w = s->w;
	size_t off = 0;

	s->sb.size = 0;
	if (s->k->pack_status(w->env, rec, &s->pk, 0) == 0 &&
	    msgpack_unpack_next(&s->u, s->sb.data, s->sb.size, &off) == MSGPACK_UNPACK_SUCCESS)
		w->fns.status(w->ctx, &s->u.data);   /* one that cannot be read is skipped */
	snprintf(w->after, sizeof w->after, "%s", rec->name);
	/* The clock every 16: a status map costs microseconds, a read of
	 * the clock tens of nanoseconds, and the slice may run over by 16. */
	if (--w->slice_left == 0 || (++s->seen % 16 == 0 && mono_ns() >= w->slice_end_ns)) {
		s->stopped = true;
		return 1;
	}
	return 0;
}

void obs_walk_init(obs_walk_t *w, const kind_env_t *env, const obs_walk_fns_t *fns, void *ctx)
{
	memset(w, 0, sizeof *w);
	w->env = env;
	w->fns = *fns;
	w->ctx = ctx;
}

bool obs_walk_step(obs_walk_t *w, size_t max_objects, uint64_t budget_ns)
{
	uint64_t now = mono_ns();
	tank_error_t te;

	w->slice_end_ns = budget_ns > UINT64_MAX - now ? UINT64_MAX : now + budget_ns;
	w->slice_left = max_objects ? max_objects : SIZE_MAX;
	for (bool first = true; w->env->kinds[w->kind]; first = false) {
		const kind_t *k = w->env->kinds[w->kind];
		bool done = true;

		/* Between two kinds: the slice may be over already. */
		if (!first && (w->slice_left == 0 || mono_ns() >= w->slice_end_ns))
			return false;
		if (!w->in_kind) {
			if (w->fns.kind_begin)
				w->fns.kind_begin(w->ctx, k);
			w->in_kind = true;
			w->after[0] = '\0';
		}
		tank_error_clear(&te);
		if (k->pack_status) {
			wslice_t s = { .w = w, .k = k };
			msgpack_sbuffer_init(&s.sb);
			msgpack_packer_init(&s.pk, &s.sb, msgpack_sbuffer_write);
			msgpack_unpacked_init(&s.u);
			/* A store error ends the kind's walk: what it saw stays. */
			(void)kind_scan_from(w->env, k, w->after, walk_one, &s, &te);
			msgpack_unpacked_destroy(&s.u);
			msgpack_sbuffer_destroy(&s.sb);
			done = !s.stopped;
		} else if (k->status_all) {
			(void)status_all_each(w->env, k, w->fns.status, w->ctx);
		}
		if (!done)
			return false;
		if (w->fns.kind_end)
			w->fns.kind_end(w->ctx, k);
		w->in_kind = false;
		w->kind++;
	}
	return true;
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

typedef struct objs {
	const kind_t *k;
	phases_t ph;
	obs_buf_t ready, restarts, cready;
} objs_t;

static void object_one(void *ctx, const msgpack_object *st)
{
	objs_t *o = ctx;
	const msgpack_object *v, *cs;
	char name[128], ctr[128];

	phases_add(&o->ph, st);
	if (!kind_str(kind_map_get(st, "name"), name, sizeof name))
		return;
	if ((v = kind_map_get(st, "ready")) && v->type == MSGPACK_OBJECT_BOOLEAN)
		obs_prom_sample(&o->ready, "tank_object_ready",
				(const char *[]){ "kind", o->k->name, "name", name, NULL },
				v->via.boolean);
	if (!(cs = kind_map_get(st, "containers")) || cs->type != MSGPACK_OBJECT_ARRAY)
		return;
	for (uint32_t c = 0; c < cs->via.array.size; c++) {
		const msgpack_object *cm = &cs->via.array.ptr[c];
		int64_t n;
		if (!kind_str(kind_map_get(cm, "name"), ctr, sizeof ctr))
			continue;
		const char *l[] = { "kind", o->k->name, "name", name, "container", ctr, NULL };
		if (kind_int(kind_map_get(cm, "restarts"), &n))
			obs_prom_sample(&o->restarts, "tank_container_restarts_total", l, (double)n);
		if ((v = kind_map_get(cm, "ready")) && v->type == MSGPACK_OBJECT_BOOLEAN)
			obs_prom_sample(&o->cready, "tank_container_ready", l, v->via.boolean);
	}
}

/* The objects' families over a walk (obs_walk_t): counted by kind and
 * phase as each kind ends, the per-object series as they come. */
struct obs_metrics_build {
	obs_src_t src;
	objs_t o;
	obs_buf_t by_phase, totals;
	obs_walk_t w;
};

static void objects_begin(void *ctx, const kind_t *k)
{
	obs_metrics_build_t *mb = ctx;

	mb->o.k = k;
	memset(&mb->o.ph, 0, sizeof mb->o.ph);
}

static void objects_one(void *ctx, const msgpack_object *st)
{
	object_one(&((obs_metrics_build_t *)ctx)->o, st);
}

static void objects_end(void *ctx, const kind_t *k)
{
	obs_metrics_build_t *mb = ctx;
	objs_t *o = &mb->o;

	obs_prom_sample(&mb->totals, "tank_kind_objects",
			(const char *[]){ "kind", k->name, NULL }, (double)o->ph.total);
	for (size_t p = 0; p < o->ph.count; p++)
		obs_prom_sample(&mb->by_phase, "tank_objects",
				(const char *[]){ "kind", k->name, "phase", o->ph.name[p], NULL },
				(double)o->ph.n[p]);
}

obs_metrics_build_t *obs_metrics_start(const obs_src_t *s)
{
	static const obs_walk_fns_t fns = { objects_begin, objects_one, objects_end };
	obs_metrics_build_t *mb = calloc(1, sizeof *mb);

	if (!mb)
		return NULL;
	mb->src = *s;
	obs_walk_init(&mb->w, s->kinds, &fns, mb);
	return mb;
}

bool obs_metrics_step(obs_metrics_build_t *mb, size_t max_objects, uint64_t budget_ns)
{
	return obs_walk_step(&mb->w, max_objects, budget_ns);
}

void obs_metrics_free(obs_metrics_build_t *mb)
{
	if (!mb)
		return;
	obs_buf_free(&mb->by_phase);
	obs_buf_free(&mb->totals);
	obs_buf_free(&mb->o.ready);
	obs_buf_free(&mb->o.restarts);
	obs_buf_free(&mb->o.cready);
	free(mb);
}

/* The objects' families into parts[0..5]: the per-object samples are
 * moved, not copied (megabytes at 100,000 pods, whose copy into fresh
 * pages was a turn of 36-46 ms). */
static void objects(obs_metrics_build_t *mb, obs_buf_t *parts)
{
	family(&parts[0], "tank_kind_objects", "gauge", "Objects stored, by kind.", &mb->totals);
	family(&parts[0], "tank_objects", "gauge", "Objects by kind and phase.", &mb->by_phase);
	obs_prom_head(&parts[0], "tank_object_ready", "gauge",
		      "1 when the object is ready (kinds whose status has `ready`).");
	parts[1] = mb->o.ready;
	obs_prom_head(&parts[2], "tank_container_restarts_total", "counter",
		      "Restarts of each container (from the status maps).");
	parts[3] = mb->o.restarts;
	obs_prom_head(&parts[4], "tank_container_ready", "gauge",
		      "1 when the container is ready (its readiness probe passed, or it has none).");
	parts[5] = mb->o.cready;
	mb->o.ready = mb->o.restarts = mb->o.cready = (obs_buf_t){ 0 };
}

/* ---- the kinds' own (kind_t.metrics) --------------------------------------------- */

static void km_family(void *ctx, const char *name, const char *type, const char *help)
{
	obs_prom_head(ctx, name, type, help);
}

static void km_sample(void *ctx, const char *name, const char *const *labels, double v)
{
	obs_prom_sample(ctx, name, labels, v);
}

static void km_hist(void *ctx, const char *name, const char *const *labels, const kit_hist_t *h)
{
	obs_prom_hist(ctx, name, labels, h);
}

static void kinds_own(const obs_src_t *s, obs_buf_t *b)
{
	const kind_metrics_t w = { .ctx = b, .family = km_family, .sample = km_sample,
				   .hist = km_hist };

	for (size_t i = 0; s->kinds->kinds[i]; i++)
		if (s->kinds->kinds[i]->metrics)
			s->kinds->kinds[i]->metrics(s->kinds, &w);
}

static void one(obs_buf_t *b, const char *name, const char *type, const char *help, double v)
{
	obs_prom_head(b, name, type, help);
	obs_prom_sample(b, name, NULL, v);
}

int obs_metrics_finish_parts(obs_metrics_build_t *mb, const obs_counts_t *c,
			     obs_buf_t parts[OBS_METRICS_PARTS])
{
	const obs_src_t *s = &mb->src;
	obs_buf_t *b;
	rt_pid_t loop = rt_whereis(s->rt, s->loop_name);
	rt_pid_t api = rt_whereis(s->rt, s->api_name);
	rc_stats_t rs;
	st_usage_t su;
	kit_hist_t durable, flush;
	struct rusage ru;

	memset(parts, 0, OBS_METRICS_PARTS * sizeof *parts);
	b = &parts[0];
	obs_prom_head(b, "tank_build_info", "gauge", "tankd's version, as a label.");
	obs_prom_sample(b, "tank_build_info",
			(const char *[]){ "version", s->version ? s->version : "", NULL }, 1);
	objects(mb, parts);
	b = &parts[OBS_METRICS_PARTS - 1];
	kinds_own(s, b);

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
		one(b, "tank_store_history_trimmed_total", "counter",
		    "History entries deleted to let an apply in on a full disk.",
		    (double)su.history_trimmed);
		one(b, "tank_store_commit_waits_total", "counter",
		    "Writes on the loop that waited for an apply's commit on the store's thread.",
		    (double)su.commit_waits);
		one(b, "tank_store_commit_wait_seconds_total", "counter",
		    "Time those writes held the loop.", (double)su.commit_wait_ns / 1e9);
		one(b, "tank_store_map_trims_total", "counter",
		    "Times the quiet store gave its map's pages back.", (double)su.map_trims);
		one(b, "tank_store_env_reopens_total", "counter",
		    "Times the quiet store reopened its environment to free LMDB's kept pages.",
		    (double)su.env_reopens);
	}
	one(b, "tank_store_pending", "gauge", "Status changes queued for the next commit.",
	    (double)st_pending(s->store));

	one(b, "tank_api_connections", "gauge", "Open connections on the RPC socket.",
	    api ? (double)api_server_conns(s->rt, api) : 0);
	one(b, "tank_api_subscribers", "gauge", "RPC connections subscribed to events.",
	    api ? (double)api_server_subscribers(s->rt, api) : 0);
	uint64_t shed = 0;
	size_t unsent = api ? api_server_unsent(s->rt, api, &shed) : 0;
	one(b, "tank_api_unsent_bytes", "gauge",
	    "Answers and events queued unsent on the RPC socket, all connections.",
	    (double)unsent);
	one(b, "tank_api_shed_total", "counter",
	    "RPC connections closed for not reading while unsent output passed its bound.",
	    (double)shed);

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
	one(b, "tank_http_snapshot_bytes", "gauge",
	    "Bytes of the state documents that pages read or /state answers send, each build counted once.",
	    (double)c->snap_bytes);
	one(b, "tank_http_slow_closed_total", "counter",
	    "HTTP connections closed for not sending a whole request in time.",
	    (double)c->slow_closed);
	one(b, "tank_http_build_slices_total", "counter",
	    "Slices (turns of the loop) that /metrics, /state and the page's snapshots took "
	    "to build.", (double)c->build_slices);

	one(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
	    rss_bytes());
	one(b, "process_open_fds", "gauge", "Number of open file descriptors.", open_fds());
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		one(b, "process_cpu_seconds_total", "counter",
		    "User and system CPU time spent in seconds.",
		    (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	obs_metrics_free(mb);
	for (size_t i = 0; i < OBS_METRICS_PARTS; i++)
		if (parts[i].oom)
			return -ENOMEM;
	return 0;
}

/* The summary over a walk: the phases of each kind, in the list's order. */
struct obs_summary_build {
	obs_src_t src;
	size_t nkinds, cur;
	phases_t *ph;                  /* one per kind */
	obs_walk_t w;
};

static void summary_begin(void *ctx, const kind_t *k)
{
	obs_summary_build_t *sb = ctx;

	(void)k;
	sb->cur = sb->w.kind;
}

static void summary_one(void *ctx, const msgpack_object *status)
{
	obs_summary_build_t *sb = ctx;

	phases_add(&sb->ph[sb->cur], status);
}

obs_summary_build_t *obs_summary_start(const obs_src_t *s)
{
	static const obs_walk_fns_t fns = { summary_begin, summary_one, NULL };
	obs_summary_build_t *sb = calloc(1, sizeof *sb);
	size_t n = 0;

	if (!sb)
		return NULL;
	while (s->kinds->kinds[n])
		n++;
	if (!(sb->ph = calloc(n ? n : 1, sizeof *sb->ph))) {
		free(sb);
		return NULL;
	}
	sb->src = *s;
	sb->nkinds = n;
	obs_walk_init(&sb->w, s->kinds, &fns, sb);
	return sb;
}

bool obs_summary_step(obs_summary_build_t *sb, uint64_t budget_ns)
{
	return obs_walk_step(&sb->w, sb->src.slice_objects, budget_ns);
}

void obs_summary_free(obs_summary_build_t *sb)
{
	if (sb)
		free(sb->ph);
	free(sb);
}

void obs_summary_finish(obs_summary_build_t *sb, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sb->nkinds; i++) {
		const kind_t *k = sb->src.kinds->kinds[i];
		const phases_t *ph = &sb->ph[i];
		int n = snprintf(out + len, cap - len, "%s%llu %s", len ? ", " : "",
				 (unsigned long long)ph->total, ph->total == 1 ? k->name : k->plural);
		if (n < 0 || (size_t)n >= cap - len)
			break;
		len += (size_t)n;
		for (size_t p = 0; p < ph->count; p++) {
			n = snprintf(out + len, cap - len, "%s%llu %s", p ? ", " : " (",
				     (unsigned long long)ph->n[p], ph->name[p]);
			if (n < 0 || (size_t)n >= cap - len)
				goto out;
			len += (size_t)n;
		}
		if (ph->count) {
			if (len + 2 > cap)
				break;
			out[len++] = ')';
			out[len] = '\0';
		}
	}
out:
	obs_summary_free(sb);
}
