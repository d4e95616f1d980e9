/* cl_node — the node agent; see cl_node.h for the contract. */
#include "cluster/cl_node.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <msgpack.h>

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "cluster/cl_etcd.h"
#include "cluster/cl_mirror.h"
#include "cluster/cl_sched.h"
#include "common/tank_map.h"
#include "kinds/kind.h"
#include "manifest/mf.h"
#include "manifest/mf_doc.h"
#include "manifest/mf_labels.h"
#include "obs/obs_buf.h"
#include "obs/obs_json.h"
#include "pod/pod_host.h"

#define LABELS_MAX 32
#define SEL_MAX 32
#define NAME_MAX_ 254
#define APPLY_BATCH 200
/* The full looks at the local side (every object listed, every status
 * asked), between which the worker goes by its own changes and tankd's
 * events only. */
#define CL_NODE_FULL_MS 5000
/* After a wake, the worker waits this long for more (a burst of
 * assignments comes in transactions of 64): one pass, not dozens. */
#define CL_NODE_DEBOUNCE_MS 50
/* Up to this many objects are asked one call each (`status NAME`);
 * more, and one call for the whole kind costs tankd less (measured with
 * bench_cluster's nodes_cpu_apply_s at 3,000 pods: docs/bench.md). */
#define CL_NODE_ONE_BY_ONE 16
#define TXN_BATCH 64

/* What the worker keeps of one object of /tank/<plural>/ (its thread
 * only), keyed by its id (cl_obj_id).  Named pod_c for the pods it first
 * held; any kind's object is one. */
typedef struct pod_c {
	const kind_t *kind;
	char name[NAME_MAX_];
	int64_t spec_rev;        /* mod_revision of the spec parsed */
	mf_docs_t *doc;          /* the spec; NULL when it did not parse */
	char err[400];           /* why, then */
	cl_label_t sel[SEL_MAX]; /* node_selector, borrowed from doc */
	size_t nsel;
	bool seen;               /* in the last snapshot */
	char assigned[NAME_MAX_];
	int64_t assign_mod, assign_create;
	int64_t applied_rev;     /* spec_rev applied locally; 0 none */
	char *status;            /* the summary last written */
	uint64_t status_at;
	uint64_t waiting_since;  /* unassigned since (ms), 0 not waiting */
	/* An assignment this scheduler won that its watch has not brought
	 * back yet (kept across snapshots; the rule: cl_sched_counted). */
	char inflight[NAME_MAX_];
	uint64_t inflight_at;
	bool failed_apply;
	bool running;            /* its phase, as last asked (pods) */
	uint32_t weight;         /* the pods it brings: 1 + its inline ones */
} pod_c;

/* A request to this node (/tank/req/NODE/ID, cl_cli's routed calls),
 * copied out of the mirror. */
typedef struct req_c {
	char id[96];
	char *value;
	size_t len;
} req_c;

typedef struct node_c {
	char name[NAME_MAX_];
	cl_label_t labels[LABELS_MAX];
	size_t nlabels;
	mf_docs_t *doc;          /* the record, labels borrowed from it */
	uint64_t capacity;
} node_c;

struct cl_node {
	char *url, *name, *socket;
	char labels_buf[1024];
	cl_label_t labels[LABELS_MAX];
	size_t nlabels;
	int ttl_s;
	uint64_t capacity;
	uint64_t share_wait_ms;
	FILE *log;

	atomic_int stop;
	/* [/tank/assign/, /tank0): assignments, nodes, requests and every
	 * kind's objects; /tank/status/ in its middle is skipped (the nodes
	 * write it, none reads it). */
	cl_mirror_t *mirror;
	pthread_t lease_thr, work_thr;
	bool lease_started, work_started;
	cl_etcd_t *lease_etcd, *work_etcd;

	pthread_mutex_t mu;           /* guards lease, running, record_dirty, lastlog */
	int64_t lease;
	uint64_t running, assigned;
	bool record_dirty;
	char lastlog[256];

	/* the worker's */
	tank_map_t pods;              /* name → pod_c */
	node_c *nodes;
	size_t nnodes;
	api_client_t *api;
	uint64_t last_local_ms;
	uint64_t last_gen;
	/* What changed locally (docs/cluster.md "Incremental"): tankd's
	 * events, on a connection of their own, name the objects whose
	 * status moved; only those are asked again.  all_dirty: ask every
	 * status (at start, after the stream broke, every
	 * CL_NODE_FULL_MS). */
	api_client_t *ev;
	tank_map_t dirty;             /* ids */
	bool all_dirty;
	uint64_t last_full_ms;
	/* The local objects as the last full look saw them, kept up to
	 * date with what the worker itself applied and deleted, so that a
	 * pass applies only what changed (a full look, `list` of each kind,
	 * every CL_NODE_FULL_MS and after tankd was reached again). */
	tank_map_t local_all, local_ours;
	bool local_known;
	req_c *reqs;                  /* this pass's requests */
	size_t nreqs, reqcap;
	tank_map_t served;            /* ids answered, until their key goes */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nap(cl_node_t *n, int ms)
{
	for (int i = 0; i < ms / 50 && !atomic_load(&n->stop); i++) {
		struct timespec ts = { 0, 50 * 1000000L };

		nanosleep(&ts, NULL);
	}
}

/* "tankd: cluster: …", a message said once in a row (a long outage is
 * one line, not one a second). */
static void say(cl_node_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(cl_node_t *n, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&n->mu);
	if (strcmp(msg, n->lastlog) != 0) {
		snprintf(n->lastlog, sizeof n->lastlog, "%s", msg);
		fprintf(n->log ? n->log : stderr, "tankd: cluster: %s\n", msg);
		fflush(n->log ? n->log : stderr);
	}
	pthread_mutex_unlock(&n->mu);
}

/* --- options ------------------------------------------------------------- */

int cl_labels_parse(const char *s, char *buf, size_t cap, cl_label_t *out, size_t max,
		    tank_error_t *e)
{
	size_t n = 0;
	char *p, *save = NULL;

	if (!s || !*s)
		return 0;
	if (strlen(s) >= cap) {
		tank_error_set(e, TANK_EINVALID, "--labels: longer than %zu bytes", cap - 1);
		return -1;
	}
	strcpy(buf, s);
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(p, '=');

		if (!eq || eq == p) {
			tank_error_set(e, TANK_EINVALID, "--labels: expected KEY=VALUE, got \"%s\"", p);
			return -1;
		}
		*eq = '\0';
		if (!mf_label_key_ok(p, strlen(p)) || !mf_label_value_ok(eq + 1, strlen(eq + 1))) {
			tank_error_set(e, TANK_EINVALID,
				       "--labels: \"%s=%s\" breaks the label rules (docs/manifest.md)",
				       p, eq + 1);
			return -1;
		}
		if (n == max) {
			tank_error_set(e, TANK_EINVALID, "--labels: more than %zu labels", max);
			return -1;
		}
		out[n].key = p;
		out[n].value = eq + 1;
		n++;
	}
	return (int)n;
}

int cl_node_check(const cl_node_opts_t *o, tank_error_t *e)
{
	char buf[1024];
	cl_label_t l[LABELS_MAX];

	if (!o->url || strncmp(o->url, "http://", 7) != 0 || !o->url[7])
		return tank_error_set(e, TANK_EINVALID, "--cluster: expected http://HOST:PORT, got \"%s\"",
				      o->url ? o->url : "");
	if (!o->node || !*o->node)
		return tank_error_set(e, TANK_EINVALID, "--node: required with --cluster");
	if (!mf_label_value_ok(o->node, strlen(o->node)))
		return tank_error_set(e, TANK_EINVALID,
				      "--node: \"%s\": 1 to 63 letters, digits, '-', '_' or '.', "
				      "beginning and ending with a letter or digit", o->node);
	if (cl_labels_parse(o->labels, buf, sizeof buf, l, LABELS_MAX, e) < 0)
		return TANK_EINVALID;
	if (!o->socket || !*o->socket)
		return tank_error_set(e, TANK_EINVALID, "cluster: no socket to call");
	return 0;
}

/* --- JSON helpers -------------------------------------------------------- */

static const msgpack_object *map_get(const msgpack_object *m, const char *k)
{
	size_t kl = strlen(k);

	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object *key = &m->via.map.ptr[i].key;

		if (key->type == MSGPACK_OBJECT_STR && key->via.str.size == kl &&
		    memcmp(key->via.str.ptr, k, kl) == 0)
			return &m->via.map.ptr[i].val;
	}
	return NULL;
}

static bool str_is(const msgpack_object *o, const char *s)
{
	size_t n = strlen(s);

	return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
	       memcmp(o->via.str.ptr, s, n) == 0;
}

static void str_copy(const msgpack_object *o, char *buf, size_t cap)
{
	size_t n;

	buf[0] = '\0';
	if (!o || o->type != MSGPACK_OBJECT_STR)
		return;
	n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
	if (n) /* an empty string's ptr may be NULL */
		memcpy(buf, o->via.str.ptr, n);
	buf[n] = '\0';
}

/* A map of strings to strings (labels, a selector) into out: the strings
 * are NUL-terminated in place?  msgpack strings are not, so they are
 * copied into the zone of doc. */
static size_t labels_of(const msgpack_object *m, msgpack_zone *z, cl_label_t *out, size_t max)
{
	size_t n = 0;

	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return 0;
	for (uint32_t i = 0; i < m->via.map.size && n < max; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key, *v = &m->via.map.ptr[i].val;
		char *ks, *vs;

		if (k->type != MSGPACK_OBJECT_STR || v->type != MSGPACK_OBJECT_STR)
			continue;
		ks = msgpack_zone_malloc(z, k->via.str.size + 1);
		vs = msgpack_zone_malloc(z, v->via.str.size + 1);
		if (!ks || !vs)
			break;
		if (k->via.str.size)
			memcpy(ks, k->via.str.ptr, k->via.str.size);
		ks[k->via.str.size] = '\0';
		if (v->via.str.size) /* an empty value's ptr may be NULL */
			memcpy(vs, v->via.str.ptr, v->via.str.size);
		vs[v->via.str.size] = '\0';
		out[n].key = ks;
		out[n].value = vs;
		n++;
	}
	return n;
}

/* The pods an object brings to the node it is placed on: 1, plus those
 * its kind applies inline with it (a stack's), read by the kind's own
 * validator from the map as the node applies it (no `kind`, `labels` or
 * `node_selector`: the manifest layer's and the scheduler's).  The
 * scheduler weighs nodes by these, so a node holding a stack of ten is
 * not as loaded as one holding a single pod. */
static uint32_t weight_of(const kind_t *k, mf_docs_t *doc)
{
	const msgpack_object *o = doc && doc->count ? &doc->docs[0] : NULL;
	msgpack_object rest;
	kit_errors_t errs;
	void *obj = NULL;
	const char *name;
	uint32_t w = 1;

	if (!k || !k->ninline || !k->mf || !o || o->type != MSGPACK_OBJECT_MAP)
		return 1;
	rest = *o;
	rest.via.map.size = 0;
	if (!(rest.via.map.ptr = msgpack_zone_malloc(doc->zone, (o->via.map.size + 1) *
								 sizeof *rest.via.map.ptr)))
		return 1;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *key = &o->via.map.ptr[i].key;
		if (!str_is(key, "kind") && !str_is(key, "labels") && !str_is(key, "node_selector"))
			rest.via.map.ptr[rest.via.map.size++] = o->via.map.ptr[i];
	}
	kit_errors_init(&errs);
	if (k->mf->validate(&rest, &obj, &name, &errs) == 0) {
		w += (uint32_t)k->ninline(obj);
		k->mf->free_obj(obj);
	}
	kit_errors_free(&errs);
	return w;
}

static mf_docs_t *parse_json(const char *s, size_t len, char *err, size_t cap)
{
	kit_errors_t errs;
	mf_docs_t *d = NULL;

	kit_errors_init(&errs);
	if (mf_docs_load(s, len, "etcd.json", &d, &errs) != 0 || !d || d->count != 1 ||
	    d->docs[0].type != MSGPACK_OBJECT_MAP) {
		snprintf(err, cap, "%s", errs.stored ? errs.msgs[0] : "not one JSON object");
		mf_docs_free(d);
		d = NULL;
	}
	kit_errors_free(&errs);
	return d;
}

/* --- keys ----------------------------------------------------------------- */

int cl_obj_id(const kind_t *k, const char *name, char *buf, size_t cap)
{
	int w = k == tank_kinds[0] ? snprintf(buf, cap, "%s", name)
		: snprintf(buf, cap, "%s/%s", k->plural, name);

	return w < 0 || (size_t)w >= cap ? -ENAMETOOLONG : 0;
}

int cl_spec_key(const kind_t *k, const char *name, char *buf, size_t cap)
{
	int w = snprintf(buf, cap, "/tank/%s/%s", k->plural, name);

	return w < 0 || (size_t)w >= cap ? -ENAMETOOLONG : 0;
}

static const kind_t *placed_kind(const char *plural, size_t len)
{
	for (size_t i = 0; tank_kinds[i]; i++) {
		const kind_t *k = tank_kinds[i];

		if (k->cluster_place != KIND_PLACE_NONE && strlen(k->plural) == len &&
		    memcmp(k->plural, plural, len) == 0)
			return k;
	}
	return NULL;
}

const kind_t *cl_spec_kind(const char *key, const char **name)
{
	const char *p, *slash;
	const kind_t *k;

	if (strncmp(key, "/tank/", 6) != 0)
		return NULL;
	p = key + 6;
	if (!(slash = strchr(p, '/')) || !slash[1] || strchr(slash + 1, '/'))
		return NULL;
	if (!(k = placed_kind(p, (size_t)(slash - p))))
		return NULL;
	*name = slash + 1;
	return k;
}

const kind_t *cl_id_kind(const char *id, const char **name)
{
	const char *slash = strchr(id, '/');
	const kind_t *k;

	if (!slash) {
		*name = id;
		return tank_kinds[0];
	}
	if (!slash[1] || strchr(slash + 1, '/') || !(k = placed_kind(id, (size_t)(slash - id))))
		return NULL;
	*name = slash + 1;
	return k;
}

/* --- the node record and the lease ---------------------------------------- */

static void record_json(cl_node_t *n, obs_buf_t *b)
{
	uint64_t running, assigned;

	pthread_mutex_lock(&n->mu);
	running = n->running;
	assigned = n->assigned;
	pthread_mutex_unlock(&n->mu);
	obs_buf_puts(b, "{\"name\":");
	obs_json_str(b, n->name, strlen(n->name));
	obs_buf_puts(b, ",\"labels\":{");
	for (size_t i = 0; i < n->nlabels; i++) {
		obs_buf_puts(b, i ? "," : "");
		obs_json_str(b, n->labels[i].key, strlen(n->labels[i].key));
		obs_buf_puts(b, ":");
		obs_json_str(b, n->labels[i].value, strlen(n->labels[i].value));
	}
	obs_buf_printf(b, "},\"capacity\":%" PRIu64 ",\"assigned\":%" PRIu64
		       ",\"running\":%" PRIu64 ",\"since\":%" PRIu64 "}",
		       n->capacity, assigned, running, wall_ms());
}

static int put_record(cl_node_t *n, int64_t lease)
{
	char key[sizeof CL_PREFIX_NODES + NAME_MAX_];
	obs_buf_t b = { 0 };
	int rc;

	snprintf(key, sizeof key, CL_PREFIX_NODES "%s", n->name);
	record_json(n, &b);
	rc = b.oom ? -ENOMEM : cl_etcd_put(n->lease_etcd, key, b.p, b.len, lease, NULL);
	obs_buf_free(&b);
	return rc;
}

static void *lease_main(void *arg)
{
	cl_node_t *n = arg;
	uint64_t next_keep = 0, next_record = 0;
	int64_t lease = 0;

	while (!atomic_load(&n->stop)) {
		uint64_t t = now_ms();
		bool dirty;
		int rc;

		if (lease == 0) {
			int64_t id = 0;

			if ((rc = cl_etcd_lease_grant(n->lease_etcd, n->ttl_s, &id, NULL)) != 0 ||
			    (rc = put_record(n, id)) != 0) {
				say(n, "unable to register node %s: %s", n->name,
				    cl_etcd_errmsg(n->lease_etcd));
				nap(n, 1000);
				continue;
			}
			lease = id;
			pthread_mutex_lock(&n->mu);
			n->lease = id;
			n->record_dirty = false;
			pthread_mutex_unlock(&n->mu);
			say(n, "node %s registered (lease %" PRIx64 ", TTL %d s)", n->name,
			    (uint64_t)id, n->ttl_s);
			next_keep = now_ms() + (uint64_t)n->ttl_s * 1000u / 3u;
			next_record = now_ms() + 1000;
			continue;
		}
		if (t >= next_keep) {
			rc = cl_etcd_lease_keepalive(n->lease_etcd, lease, NULL);
			if (rc == TANK_ENOTFOUND) {
				say(n, "lease of node %s expired: registering again", n->name);
				lease = 0;
				pthread_mutex_lock(&n->mu);
				n->lease = 0;
				pthread_mutex_unlock(&n->mu);
				continue;
			}
			if (rc) {
				say(n, "keeping the lease of node %s: %s", n->name,
				    cl_etcd_errmsg(n->lease_etcd));
				next_keep = t + 1000;
			} else {
				next_keep = t + (uint64_t)n->ttl_s * 1000u / 3u;
			}
		}
		pthread_mutex_lock(&n->mu);
		dirty = n->record_dirty;
		pthread_mutex_unlock(&n->mu);
		/* The record's counts, at most once a second. */
		if (dirty && t >= next_record) {
			/* Cleared before the put reads the counts: a change
			 * made meanwhile sets it again and is not lost. */
			pthread_mutex_lock(&n->mu);
			n->record_dirty = false;
			pthread_mutex_unlock(&n->mu);
			if (put_record(n, lease) != 0) {
				pthread_mutex_lock(&n->mu);
				n->record_dirty = true;
				pthread_mutex_unlock(&n->mu);
			}
			next_record = t + 1000;
		}
		nap(n, 100);
	}
	return NULL;
}

/* --- the worker: snapshot ------------------------------------------------ */

static void pod_c_free(pod_c *p)
{
	if (!p)
		return;
	mf_docs_free(p->doc);
	free(p->status);
	free(p);
}

static void nodes_free(cl_node_t *n)
{
	for (size_t i = 0; i < n->nnodes; i++)
		mf_docs_free(n->nodes[i].doc);
	free(n->nodes);
	n->nodes = NULL;
	n->nnodes = 0;
}

static pod_c *pod_of(cl_node_t *n, const char *name)
{
	pod_c *p = tank_map_get(&n->pods, name);

	if (p)
		return p;
	if (!(p = calloc(1, sizeof *p)))
		return NULL;
	if (tank_map_put(&n->pods, name, p, NULL) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

static int cmp_node(const void *a, const void *b)
{
	return strcmp(((const node_c *)a)->name, ((const node_c *)b)->name);
}

static void req_reset(cl_node_t *n)
{
	for (size_t i = 0; i < n->nreqs; i++)
		free(n->reqs[i].value);
	n->nreqs = 0;
}

static void req_note(cl_node_t *n, const char *id, const cl_entry_t *e)
{
	req_c *r;

	if (strlen(id) >= sizeof r->id)
		return;
	if (n->nreqs == n->reqcap) {
		size_t cap = n->reqcap ? n->reqcap * 2 : 8;
		req_c *g = realloc(n->reqs, cap * sizeof *g);

		if (!g)
			return;
		n->reqs = g;
		n->reqcap = cap;
	}
	r = &n->reqs[n->nreqs];
	if (!(r->value = malloc(e->len + 1)))
		return;
	memcpy(r->value, e->value, e->len);
	r->value[e->len] = '\0';
	r->len = e->len;
	snprintf(r->id, sizeof r->id, "%s", id);
	n->nreqs++;
}

/* One mirror's keys into the worker's view: specs (parsed again only
 * when their revision moved) and live nodes.  Under its lock. */
static void snap_specs(cl_node_t *n, const tank_map_t *m, size_t *cap)
{
	const char *k;
	void *v;

	for (size_t i = 0; tank_map_next(m, &i, &k, &v);) {
		const cl_entry_t *e = v;
		const kind_t *kind;
		const char *name;

		if ((kind = cl_spec_kind(k, &name))) {
			char id[2 * NAME_MAX_];
			pod_c *p;

			if (cl_obj_id(kind, name, id, sizeof id) != 0 || !(p = pod_of(n, id)))
				continue;
			p->seen = true;
			p->kind = kind;
			snprintf(p->name, sizeof p->name, "%s", name);
			if (p->spec_rev != e->mod_rev) {
				mf_docs_free(p->doc);
				p->err[0] = '\0';
				p->spec_rev = e->mod_rev;
				p->nsel = 0;
				if ((p->doc = parse_json(e->value, e->len, p->err, sizeof p->err)))
					p->nsel = labels_of(map_get(&p->doc->docs[0], "node_selector"),
							    p->doc->zone, p->sel, SEL_MAX);
				p->weight = weight_of(kind, p->doc);
			}
		} else if (strncmp(k, CL_PREFIX_NODES, strlen(CL_PREFIX_NODES)) == 0) {
			node_c *nc;

			if (n->nnodes == *cap) {
				size_t nc2 = *cap ? *cap * 2 : 8;
				node_c *g = realloc(n->nodes, nc2 * sizeof *g);

				if (!g)
					continue;
				n->nodes = g;
				*cap = nc2;
			}
			nc = &n->nodes[n->nnodes];
			memset(nc, 0, sizeof *nc);
			snprintf(nc->name, sizeof nc->name, "%s", k + strlen(CL_PREFIX_NODES));
			char err[80];
			if ((nc->doc = parse_json(e->value, e->len, err, sizeof err))) {
				const msgpack_object *c = map_get(&nc->doc->docs[0], "capacity");

				nc->nlabels = labels_of(map_get(&nc->doc->docs[0], "labels"),
							nc->doc->zone, nc->labels, LABELS_MAX);
				nc->capacity = c && c->type == MSGPACK_OBJECT_POSITIVE_INTEGER
					       ? c->via.u64 : UINT64_MAX;
			} else {
				nc->capacity = UINT64_MAX;
			}
			n->nnodes++;
		}
	}
}

/* The assignments (in the first range) onto the objects, and the
 * requests to this node (cl_node_serve). */
static void snap_assign(cl_node_t *n, const tank_map_t *m)
{
	char reqp[sizeof CL_PREFIX_REQ + NAME_MAX_ + 1];
	const char *k;
	void *v;

	snprintf(reqp, sizeof reqp, CL_PREFIX_REQ "%s/", n->name);
	for (size_t i = 0; tank_map_next(m, &i, &k, &v);) {
		const cl_entry_t *e = v;
		pod_c *p;

		if (strncmp(k, reqp, strlen(reqp)) == 0) {
			req_note(n, k + strlen(reqp), e);
			continue;
		}
		if (strncmp(k, CL_PREFIX_ASSIGN, strlen(CL_PREFIX_ASSIGN)) != 0)
			continue;
		if (!(p = tank_map_get(&n->pods, k + strlen(CL_PREFIX_ASSIGN))))
			continue;   /* an assignment of a pod gone: no one runs it */
		snprintf(p->assigned, sizeof p->assigned, "%.*s", (int)e->len, e->value);
		p->assign_mod = e->mod_rev;
		p->assign_create = e->create_rev;
	}
}

/* Copies what the worker needs out of the mirrors: every object's spec,
 * assignment, the live nodes and this node's requests.  Returns whether
 * both mirrors are in sync (nothing to act on when not). */
static bool snapshot(cl_node_t *n)
{
	const char *k;
	void *v;
	size_t cap = 0;
	bool synced;

	for (size_t i = 0; tank_map_next(&n->pods, &i, &k, &v);) {
		pod_c *p = v;

		p->seen = false;
		p->assigned[0] = '\0';
		p->assign_mod = p->assign_create = 0;
	}
	nodes_free(n);
	req_reset(n);
	cl_mirror_lock(n->mirror);
	synced = cl_mirror_synced(n->mirror);
	snap_specs(n, cl_mirror_map(n->mirror), &cap);
	snap_assign(n, cl_mirror_map(n->mirror));
	cl_mirror_unlock(n->mirror);
	if (n->nnodes > 1)
		qsort(n->nodes, n->nnodes, sizeof *n->nodes, cmp_node);
	/* Objects gone from etcd are forgotten (the local side deletes them). */
	for (size_t i = 0; tank_map_next(&n->pods, &i, &k, &v);) {
		pod_c *p = v;

		if (!p->seen && !p->applied_rev) {
			tank_map_del(&n->pods, k);
			pod_c_free(p);
			i = 0;
		}
	}
	return synced;
}

static int node_at(const cl_node_t *n, const char *name)
{
	for (size_t i = 0; i < n->nnodes; i++)
		if (strcmp(n->nodes[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* --- the worker: scheduling --------------------------------------------- */

typedef struct assign_batch {
	char key[TXN_BATCH][sizeof CL_PREFIX_ASSIGN + NAME_MAX_];
	const char *node[TXN_BATCH];
	int64_t mod[TXN_BATCH];  /* 0: must not exist */
	pod_c *pod[TXN_BATCH];   /* whose assignment (the worker's map) */
	size_t n;
} assign_batch_t;

/* Notes an assignment won, until the watch brings it back. */
static void assign_won(pod_c *p, const char *node, uint64_t t)
{
	snprintf(p->inflight, sizeof p->inflight, "%s", node);
	p->inflight_at = t;
}

static int assign_one(cl_node_t *n, const char *key, const char *node, int64_t mod, bool *won)
{
	cl_cmp_t c = { .key = key, .target = mod ? CL_CMP_MOD : CL_CMP_CREATE, .result = CL_EQ,
		       .num = mod };
	cl_op_t op = { .kind = CL_OP_PUT, .key = key, .value = node, .value_len = strlen(node) };

	return cl_etcd_txn(n->work_etcd, &c, 1, &op, 1, NULL, 0, won, NULL, NULL);
}

/* All of the batch in one transaction; when any compare fails (another
 * scheduler was first for some pod), each alone. */
static void assign_flush(cl_node_t *n, assign_batch_t *b)
{
	cl_cmp_t c[TXN_BATCH];
	cl_op_t op[TXN_BATCH];
	bool won = false;
	int rc;

	if (b->n == 0)
		return;
	for (size_t i = 0; i < b->n; i++) {
		c[i] = (cl_cmp_t){ .key = b->key[i], .target = b->mod[i] ? CL_CMP_MOD : CL_CMP_CREATE,
				   .result = CL_EQ, .num = b->mod[i] };
		op[i] = (cl_op_t){ .kind = CL_OP_PUT, .key = b->key[i], .value = b->node[i],
				   .value_len = strlen(b->node[i]) };
	}
	rc = cl_etcd_txn(n->work_etcd, c, b->n, op, b->n, NULL, 0, &won, NULL, NULL);
	if (rc == 0 && won) {
		for (size_t i = 0; i < b->n; i++)
			assign_won(b->pod[i], b->node[i], now_ms());
	} else if (rc == 0 && b->n > 1) {
		for (size_t i = 0; i < b->n; i++) {
			if (assign_one(n, b->key[i], b->node[i], b->mod[i], &won) != 0)
				break;
			if (won)
				assign_won(b->pod[i], b->node[i], now_ms());
		}
	} else if (rc) {
		say(n, "scheduling: %s", cl_etcd_errmsg(n->work_etcd));
	}
	b->n = 0;
}

/* The live node p counts on, or -1 (cl_sched_counted); an in-flight
 * assignment that no longer counts is forgotten. */
static int placed_at(cl_node_t *n, pod_c *p, uint64_t t)
{
	int assigned = p->assigned[0] ? node_at(n, p->assigned) : -1;
	int inflight = p->inflight[0] ? node_at(n, p->inflight) : -1;
	int at = cl_sched_counted(assigned, inflight,
				  t > p->inflight_at ? t - p->inflight_at : 0);

	if (at < 0 || at == assigned)
		p->inflight[0] = '\0';
	return at;
}

static void schedule(cl_node_t *n)
{
	cl_sched_node_t *sn = calloc(n->nnodes ? n->nnodes : 1, sizeof *sn);
	const char **names = calloc(n->nnodes ? n->nnodes : 1, sizeof *names);
	assign_batch_t *b = calloc(1, sizeof *b);
	uint64_t t = now_ms();
	const char *k;
	void *v;

	if (!sn || !names || !b)
		goto out;
	/* Not registered yet (or expired): this node would see its own pods
	 * as a dead node's and move them. */
	if (node_at(n, n->name) < 0)
		goto out;
	for (size_t i = 0; i < n->nnodes; i++) {
		sn[i] = (cl_sched_node_t){ n->nodes[i].name, n->nodes[i].labels, n->nodes[i].nlabels,
					   n->nodes[i].capacity, 0 };
		names[i] = n->nodes[i].name;
	}
	for (size_t i = 0; tank_map_next(&n->pods, &i, &k, &v);) {
		pod_c *p = v;
		int at;

		if (p->seen && (at = placed_at(n, p, t)) >= 0)
			sn[at].load += p->weight ? p->weight : 1;
	}
	for (size_t i = 0; tank_map_next(&n->pods, &i, &k, &v);) {
		pod_c *p = v;
		int at;

		if (!p->seen || !p->doc || p->kind->cluster_place != KIND_PLACE_UNIT)
			continue;
		if (placed_at(n, p, t) >= 0) {
			p->waiting_since = 0;
			continue;
		}
		if (!p->waiting_since)
			p->waiting_since = t;
		if (!cl_sched_mine(k, n->name, names, n->nnodes) &&
		    t - p->waiting_since < n->share_wait_ms)
			continue;
		if ((at = cl_sched_pick(sn, n->nnodes, k, p->sel, p->nsel)) < 0)
			continue;
		sn[at].load += p->weight ? p->weight : 1;
		snprintf(b->key[b->n], sizeof b->key[b->n], CL_PREFIX_ASSIGN "%s", k);
		b->node[b->n] = n->nodes[at].name;
		/* Moving it from a node that is gone: only if no one moved it
		 * since we read it. */
		b->mod[b->n] = p->assign_create ? p->assign_mod : 0;
		b->pod[b->n] = p;
		if (++b->n == TXN_BATCH)
			assign_flush(n, b);
	}
	assign_flush(n, b);
out:
	free(sn);
	free(names);
	free(b);
}

/* --- the worker: the local side ------------------------------------------- */

static bool api_ready(cl_node_t *n)
{
	tank_error_t e;

	if (n->api)
		return true;
	if (api_client_connect(n->socket, &n->api, &e) != 0) {
		say(n, "%s", e.msg);
		n->api = NULL;
		return false;
	}
	return true;
}

static void api_drop(cl_node_t *n)
{
	api_client_close(n->api);
	n->api = NULL;
	/* What tankd holds may have changed while it was out of reach. */
	api_client_close(n->ev);
	n->ev = NULL;
	n->local_known = false;
	n->all_dirty = true;
}

static void mark_dirty(cl_node_t *n, const kind_t *k, const msgpack_object *name)
{
	char nm[NAME_MAX_], id[2 * NAME_MAX_];

	str_copy(name, nm, sizeof nm);
	if (k && nm[0] && cl_obj_id(k, nm, id, sizeof id) == 0)
		tank_map_put(&n->dirty, id, (void *)1, NULL);
}

/* tankd's events since the last pass: the objects they name are dirty
 * (their status is asked again).  An event names a pod (`pod`: a
 * transition, a probe, a workflow's step) and/or an object of the kind
 * its `type` names (`{type: "stack", stack: NAME}`).  A broken stream
 * makes everything dirty, and is subscribed again. */
static void drain_events(cl_node_t *n)
{
	tank_error_t e;

	if (!n->ev) {
		api_incoming_t in;

		memset(&in, 0, sizeof in);
		if (api_client_connect(n->socket, &n->ev, &e) != 0) {
			n->ev = NULL;
			return;
		}
		if (api_client_call(n->ev, "subscribe", NULL, NULL, 10000, &in, &e) != 0 ||
		    in.code != API_OK) {
			api_client_close(n->ev);
			n->ev = NULL;
		}
		api_incoming_free(&in);
		n->all_dirty = true;   /* what happened before the subscription */
		return;
	}
	for (;;) {
		api_incoming_t in;
		int rc;

		memset(&in, 0, sizeof in);
		/* What is queued or buffered first, then the socket without
		 * waiting; a frame cut short stays buffered (api_client.c). */
		if ((rc = api_client_next(n->ev, 0, &in, &e)) == -ETIMEDOUT)
			break;
		if (rc != 0) {
			api_client_close(n->ev);
			n->ev = NULL;
			n->all_dirty = true;
			break;
		}
		if (in.type == API_NOTIFICATION && in.params &&
		    in.params->type == MSGPACK_OBJECT_ARRAY) {
			for (uint32_t i = 0; i < in.params->via.array.size; i++) {
				const msgpack_object *ev = &in.params->via.array.ptr[i], *ty;
				const kind_t *k;

				mark_dirty(n, tank_kinds[0], map_get(ev, "pod"));
				if ((ty = map_get(ev, "type")) && ty->type == MSGPACK_OBJECT_STR &&
				    (k = kind_find(tank_kinds, ty->via.str.ptr, ty->via.str.size)))
					mark_dirty(n, k, map_get(ev, k->name));
			}
		}
		api_incoming_free(&in);
	}
}

typedef struct apply_arg {
	cl_node_t *n;
	pod_c **pods;
	const char **names;
	size_t count;
	const kind_t *kind;      /* delete, list, status: the kind asked */
} apply_arg_t;

/* One object as applied here: its manifest without node_selector (the
 * scheduler's, not the node's), its labels with CL_NODE_LABEL added. */
static int pack_pod(msgpack_packer *pk, const msgpack_object *spec, const char *me)
{
	const msgpack_object *labels = map_get(spec, "labels");
	uint32_t keep = 0, nl = 1;
	int rc = 0;

	for (uint32_t i = 0; i < spec->via.map.size; i++) {
		const msgpack_object *key = &spec->via.map.ptr[i].key;

		if (!str_is(key, "node_selector") && !str_is(key, "labels"))
			keep++;
	}
	if (labels && labels->type == MSGPACK_OBJECT_MAP)
		for (uint32_t i = 0; i < labels->via.map.size; i++)
			if (!str_is(&labels->via.map.ptr[i].key, CL_NODE_LABEL))
				nl++;
	rc |= msgpack_pack_map(pk, keep + 1);
	for (uint32_t i = 0; i < spec->via.map.size; i++) {
		const msgpack_object *key = &spec->via.map.ptr[i].key;

		if (str_is(key, "node_selector") || str_is(key, "labels"))
			continue;
		rc |= msgpack_pack_object(pk, *key);
		rc |= msgpack_pack_object(pk, spec->via.map.ptr[i].val);
	}
	rc |= msgpack_pack_str_with_body(pk, "labels", 6);
	rc |= msgpack_pack_map(pk, nl);
	if (labels && labels->type == MSGPACK_OBJECT_MAP)
		for (uint32_t i = 0; i < labels->via.map.size; i++) {
			if (str_is(&labels->via.map.ptr[i].key, CL_NODE_LABEL))
				continue;
			rc |= msgpack_pack_object(pk, labels->via.map.ptr[i].key);
			rc |= msgpack_pack_object(pk, labels->via.map.ptr[i].val);
		}
	rc |= msgpack_pack_str_with_body(pk, CL_NODE_LABEL, strlen(CL_NODE_LABEL));
	rc |= msgpack_pack_str_with_body(pk, me, strlen(me));
	return rc;
}

static int pack_apply(msgpack_packer *pk, void *arg)
{
	apply_arg_t *a = arg;
	int rc = msgpack_pack_array(pk, 1);

	rc |= msgpack_pack_array(pk, a->count);
	for (size_t i = 0; i < a->count; i++)
		rc |= pack_pod(pk, &a->pods[i]->doc->docs[0], a->n->name);
	return rc;
}

/* {kind: K}: the option every generic method takes. */
static int pack_kind_opt(msgpack_packer *pk, const kind_t *k)
{
	int rc = msgpack_pack_map(pk, 1);

	rc |= msgpack_pack_str_with_body(pk, "kind", 4);
	rc |= msgpack_pack_str_with_body(pk, k->name, strlen(k->name));
	return rc;
}

static int pack_delete(msgpack_packer *pk, void *arg)
{
	apply_arg_t *a = arg;
	int rc = msgpack_pack_array(pk, 2);

	rc |= msgpack_pack_array(pk, a->count);
	for (size_t i = 0; i < a->count; i++)
		rc |= msgpack_pack_str_with_body(pk, a->names[i], strlen(a->names[i]));
	rc |= pack_kind_opt(pk, a->kind);
	return rc;
}

static int pack_list(msgpack_packer *pk, void *arg)
{
	apply_arg_t *a = arg;
	int rc = msgpack_pack_array(pk, 1);

	return rc | pack_kind_opt(pk, a->kind);
}

static int pack_status(msgpack_packer *pk, void *arg)
{
	apply_arg_t *a = arg;
	int rc = msgpack_pack_array(pk, 2);

	rc |= msgpack_pack_nil(pk);
	return rc | pack_kind_opt(pk, a->kind);
}

/* Applies a batch; false when the daemon could not be reached.  A batch
 * refused is applied object by object, so one bad object does not hold
 * the rest: each refusal is kept as its object's error (its status says
 * it). */
static bool apply_batch(cl_node_t *n, pod_c **pods, size_t count)
{
	apply_arg_t a = { n, pods, NULL, count, NULL };
	api_incoming_t in;
	tank_error_t e;

	memset(&in, 0, sizeof in);
	if (api_client_call(n->api, "apply", pack_apply, &a, 60000, &in, &e) != 0) {
		say(n, "apply: %s", e.msg);
		api_drop(n);
		return false;
	}
	if (in.code == API_OK) {
		for (size_t i = 0; i < count; i++) {
			pods[i]->applied_rev = pods[i]->spec_rev;
			pods[i]->failed_apply = false;
		}
		api_incoming_free(&in);
		return true;
	}
	if (count == 1) {
		snprintf(pods[0]->err, sizeof pods[0]->err, "%.150s", in.message);
		pods[0]->failed_apply = true;
		pods[0]->applied_rev = pods[0]->spec_rev; /* not again until it changes */
		api_incoming_free(&in);
		return true;
	}
	api_incoming_free(&in);
	for (size_t i = 0; i < count; i++)
		if (!apply_batch(n, &pods[i], 1))
			return false;
	return true;
}

static bool delete_batch(cl_node_t *n, const kind_t *k, const char **names, size_t count)
{
	apply_arg_t a = { n, NULL, names, count, k };
	api_incoming_t in;
	tank_error_t e;

	memset(&in, 0, sizeof in);
	if (api_client_call(n->api, "delete", pack_delete, &a, 60000, &in, &e) != 0) {
		say(n, "delete: %s", e.msg);
		api_drop(n);
		return false;
	}
	if (in.code != API_OK)
		say(n, "delete: %s", in.message);
	api_incoming_free(&in);
	return true;
}

/* The local objects of every kind a cluster places, by id: every one
 * into all, the cluster's (labelled) into ours.  false when the daemon
 * could not be asked. */
static bool local_list(cl_node_t *n, tank_map_t *all, tank_map_t *ours)
{
	for (size_t ki = 0; tank_kinds[ki]; ki++) {
		const kind_t *k = tank_kinds[ki];
		apply_arg_t a = { n, NULL, NULL, 0, k };
		api_incoming_t in;
		tank_error_t e;
		char name[NAME_MAX_], id[2 * NAME_MAX_];

		if (k->cluster_place == KIND_PLACE_NONE)
			continue;
		memset(&in, 0, sizeof in);
		if (api_client_call(n->api, "list", pack_list, &a, 60000, &in, &e) != 0) {
			say(n, "list: %s", e.msg);
			api_drop(n);
			return false;
		}
		if (in.code != API_OK || !in.result || in.result->type != MSGPACK_OBJECT_ARRAY) {
			say(n, "list: %s", in.message);
			api_incoming_free(&in);
			return false;
		}
		for (uint32_t i = 0; i < in.result->via.array.size; i++) {
			const msgpack_object *s = &in.result->via.array.ptr[i];
			const msgpack_object *l = map_get(map_get(s, "labels"), CL_NODE_LABEL);

			str_copy(map_get(s, "name"), name, sizeof name);
			if (!name[0] || cl_obj_id(k, name, id, sizeof id) != 0)
				continue;
			tank_map_put(all, id, (void *)1, NULL);
			if (l && l->type == MSGPACK_OBJECT_STR)
				tank_map_put(ours, id, (void *)1, NULL);
		}
		api_incoming_free(&in);
	}
	return true;
}

/* Whether this node should hold p: a unit assigned here, or a
 * definition every node holds. */
static bool assigned_here(const cl_node_t *n, const pod_c *p)
{
	if (!p->seen || !p->doc || !p->kind)
		return false;
	if (p->kind->cluster_place == KIND_PLACE_EVERY)
		return true;
	return p->kind->cluster_place == KIND_PLACE_UNIT && strcmp(p->assigned, n->name) == 0;
}

/* Deletes the ids in gone (of kinds whose place is `place`), grouped by
 * kind. */
static bool delete_gone(cl_node_t *n, const char **gone, size_t ngone, unsigned place)
{
	const char **names = calloc(ngone + 1, sizeof *names);
	bool ok = true;

	if (!names)
		return false;
	for (size_t ki = 0; ok && tank_kinds[ki]; ki++) {
		const kind_t *k = tank_kinds[ki];
		size_t cnt = 0;

		if (k->cluster_place != place)
			continue;
		for (size_t i = 0; i < ngone; i++) {
			const char *name;

			if (cl_id_kind(gone[i], &name) == k)
				names[cnt++] = name;
		}
		for (size_t i = 0; ok && i < cnt; i += APPLY_BATCH)
			ok = delete_batch(n, k, names + i, cnt - i < APPLY_BATCH ? cnt - i : APPLY_BATCH);
	}
	free(names);
	return ok;
}

static int pack_status_one(msgpack_packer *pk, void *arg);

/* The objects new to this node (to be applied, not the cluster's here
 * yet), looked up one by one with `get` (a few: cheaper than a list of
 * everything) into the kept look.  false when there are more than a
 * batch of them (a full look is cheaper) or tankd could not be asked. */
static bool look_new(cl_node_t *n)
{
	pod_c *fresh[CL_NODE_ONE_BY_ONE];
	size_t nf = 0;
	const char *k;
	void *v;

	for (size_t i = 0; tank_map_next(&n->pods, &i, &k, &v);) {
		pod_c *p = v;

		if (!assigned_here(n, p) || p->applied_rev == p->spec_rev ||
		    tank_map_get(&n->local_ours, k))
			continue;
		if (nf == CL_NODE_ONE_BY_ONE)
			return false;
		fresh[nf++] = p;
	}
	for (size_t i = 0; i < nf; i++) {
		api_incoming_t in;
		tank_error_t e;
		char id[2 * NAME_MAX_];
		const msgpack_object *l;

		if (cl_obj_id(fresh[i]->kind, fresh[i]->name, id, sizeof id) != 0)
			continue;
		memset(&in, 0, sizeof in);
		if (api_client_call(n->api, "status", pack_status_one, fresh[i], 60000, &in, &e) != 0) {
			say(n, "status: %s", e.msg);
			api_drop(n);
			return false;
		}
		if (in.code == API_OK) {
			tank_map_put(&n->local_all, id, (void *)1, NULL);
			l = map_get(map_get(in.result, "labels"), CL_NODE_LABEL);
			if (l && l->type == MSGPACK_OBJECT_STR)
				tank_map_put(&n->local_ours, id, (void *)1, NULL);
		}
		api_incoming_free(&in);
	}
	return true;
}

/* Makes the local store match what etcd assigns to this node: with a
 * full look at the local objects (full, or none kept), else from what
 * the last look saw and the worker did since. */
static void sync_local(cl_node_t *n, bool full)
{
	tank_map_t all, ours;
	pod_c **todo = NULL;
	const char **gone = NULL;
	size_t ntodo = 0, ngone = 0, cap;
	const char *k;
	void *v;

	tank_map_init(&all);
	tank_map_init(&ours);
	/* An object new to this node is applied only after a fresh look: a
	 * local object of its name, applied since the last look, must be
	 * seen (and left alone), not replaced. */
	if (!full && n->local_known && !look_new(n))
		full = true;
	if (!n->api)
		goto out;   /* tankd went away meanwhile */
	if (full || !n->local_known) {
		if (!local_list(n, &all, &ours))
			goto out;
		tank_map_destroy(&n->local_all);
		tank_map_destroy(&n->local_ours);
		n->local_all = all;
		n->local_ours = ours;
		n->local_known = true;
		tank_map_init(&all);
		tank_map_init(&ours);
	}
	/* The kept look, by name, from here on. */
#define all (n->local_all)
#define ours (n->local_ours)
	cap = n->pods.len + ours.len + 1;
	todo = calloc(cap, sizeof *todo);
	gone = calloc(cap, sizeof *gone);
	if (!todo || !gone)
		goto out;
	/* Definitions first: the units applied after them refer to them
	 * (a pod's workflow). */
	for (unsigned place = KIND_PLACE_EVERY;; place = KIND_PLACE_UNIT) {
		for (size_t i = 0; tank_map_next(&n->pods, &i, &k, &v);) {
			pod_c *p = v;

			if (!p->kind || p->kind->cluster_place != place)
				continue;
			if (!assigned_here(n, p)) {
				p->applied_rev = 0;
				continue;
			}
			if (tank_map_get(&all, k) && !tank_map_get(&ours, k)) {
				/* An object applied here by hand: not ours to replace. */
				snprintf(p->err, sizeof p->err,
					 "a local %s named %s, not the cluster's, is in the way",
					 p->kind->name, p->name);
				p->failed_apply = true;
				continue;
			}
			/* Again when its spec moved, or when it went from the
			 * local store (a local delete); a spec tankd refused
			 * waits for a new spec. */
			if (p->applied_rev != p->spec_rev ||
			    (!p->failed_apply && !tank_map_get(&ours, k)))
				todo[ntodo++] = p;
		}
		if (place == KIND_PLACE_UNIT)
			break;
	}
	for (size_t i = 0; tank_map_next(&ours, &i, &k, &v);) {
		pod_c *p = tank_map_get(&n->pods, k);

		if (!p || !assigned_here(n, p))
			gone[ngone++] = k;
	}
	/* Stop first what is no longer ours (units, then the definitions
	 * they may use), then start what is. */
	if (!delete_gone(n, gone, ngone, KIND_PLACE_UNIT) ||
	    !delete_gone(n, gone, ngone, KIND_PLACE_EVERY))
		goto out;
	for (size_t i = 0; i < ngone; i++) {
		/* gone[] points at keys of ours: copy before deleting. */
		char id[2 * NAME_MAX_];

		snprintf(id, sizeof id, "%s", gone[i]);
		tank_map_del(&all, id);
		tank_map_del(&ours, id);
	}
	for (size_t i = 0; i < ntodo; i += APPLY_BATCH)
		if (!apply_batch(n, todo + i, ntodo - i < APPLY_BATCH ? ntodo - i : APPLY_BATCH))
			goto out;
	for (size_t i = 0; i < ntodo; i++) {
		char id[2 * NAME_MAX_];

		/* Applied (or refused: its status says so): stored here
		 * as the cluster's, and its status to be asked. */
		if (cl_obj_id(todo[i]->kind, todo[i]->name, id, sizeof id) != 0)
			continue;
		if (!todo[i]->failed_apply) {
			tank_map_put(&all, id, (void *)1, NULL);
			tank_map_put(&ours, id, (void *)1, NULL);
		}
		tank_map_put(&n->dirty, id, (void *)1, NULL);
	}
	/* Forget objects deleted from etcd once deleted here. */
	for (size_t i = 0; tank_map_next(&n->pods, &i, &k, &v);) {
		pod_c *p = v;

		if (!p->seen) {
			tank_map_del(&n->pods, k);
			pod_c_free(p);
			i = 0;
		}
	}
#undef all
#undef ours
out:
	free(todo);
	free(gone);
	tank_map_destroy(&all);
	tank_map_destroy(&ours);
}

/* --- the worker: status back to etcd ---------------------------------------- */

/* A status map's `ready`: a pod's boolean, or a count (a stack's). */
static void json_ready(obs_buf_t *b, const msgpack_object *ready)
{
	if (ready && ready->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		obs_buf_printf(b, "%" PRIu64, ready->via.u64);
	else
		obs_buf_puts(b, ready && ready->type == MSGPACK_OBJECT_BOOLEAN && ready->via.boolean
			     ? "true" : "false");
}

static void summary(cl_node_t *n, const pod_c *p, const msgpack_object *s, obs_buf_t *b)
{
	char phase[32], reason[400];
	const msgpack_object *ready = map_get(s, "ready"), *restarts = map_get(s, "restarts"),
			     *total = map_get(s, "total");

	if (p->failed_apply) {
		snprintf(phase, sizeof phase, "failed");
		snprintf(reason, sizeof reason, "%s", p->err);
	} else {
		str_copy(map_get(s, "phase"), phase, sizeof phase);
		str_copy(map_get(s, "reason"), reason, sizeof reason);
		if (!phase[0])
			snprintf(phase, sizeof phase, "pending");
	}
	obs_buf_puts(b, "{\"node\":");
	obs_json_str(b, n->name, strlen(n->name));
	obs_buf_puts(b, ",\"phase\":");
	obs_json_str(b, phase, strlen(phase));
	obs_buf_puts(b, ",\"reason\":");
	obs_json_str(b, reason, strlen(reason));
	obs_buf_puts(b, ",\"ready\":");
	json_ready(b, ready);
	obs_buf_printf(b, ",\"restarts\":%" PRIu64,
		       restarts && restarts->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? restarts->via.u64 : 0);
	if (total && total->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		obs_buf_printf(b, ",\"total\":%" PRIu64, total->via.u64);
	/* What other kinds add to this kind's status (a pod's workflow
	 * position: kind_t.adds_to), under their names. */
	for (size_t i = 0; tank_kinds[i]; i++) {
		const kind_t *o = tank_kinds[i];
		const msgpack_object *x;

		if (o->adds_to != p->kind || !(x = map_get(s, o->name)) ||
		    x->type != MSGPACK_OBJECT_STR)
			continue;
		obs_buf_puts(b, ",");
		obs_json_str(b, o->name, strlen(o->name));
		obs_buf_puts(b, ":");
		obs_json_str(b, x->via.str.ptr, x->via.str.size);
	}
	obs_buf_puts(b, "}");
}

/* Every status map of the kinds placed as units, by id, into st; the
 * answers kept in ins (freed by the caller).  false when the daemon
 * could not be asked. */
static bool local_status(cl_node_t *n, tank_map_t *st, api_incoming_t *ins)
{
	char name[NAME_MAX_], id[2 * NAME_MAX_];

	for (size_t ki = 0; tank_kinds[ki]; ki++) {
		const kind_t *k = tank_kinds[ki];
		apply_arg_t a = { n, NULL, NULL, 0, k };
		api_incoming_t *in = &ins[ki];
		tank_error_t e;

		if (k->cluster_place != KIND_PLACE_UNIT)
			continue;
		if (api_client_call(n->api, "status", pack_status, &a, 60000, in, &e) != 0) {
			say(n, "status: %s", e.msg);
			api_drop(n);
			return false;
		}
		if (in->code != API_OK || !in->result || in->result->type != MSGPACK_OBJECT_ARRAY)
			continue;
		for (uint32_t i = 0; i < in->result->via.array.size; i++) {
			const msgpack_object *s = &in->result->via.array.ptr[i];

			str_copy(map_get(s, "name"), name, sizeof name);
			if (name[0] && cl_obj_id(k, name, id, sizeof id) == 0)
				tank_map_put(st, id, (void *)s, NULL);
		}
	}
	return true;
}

static int pack_status_one(msgpack_packer *pk, void *arg)
{
	const pod_c *p = arg;
	int rc = msgpack_pack_array(pk, 2);

	rc |= msgpack_pack_str_with_body(pk, p->name, strlen(p->name));
	return rc | pack_kind_opt(pk, p->kind);
}

/* The dirty objects' status maps, one call each, into st (answers kept
 * in *ins, *nins of them).  false when the daemon could not be asked. */
static bool dirty_status(cl_node_t *n, tank_map_t *st, api_incoming_t **ins, size_t *nins)
{
	const char *k;
	void *v;

	*ins = calloc(n->dirty.len + 1, sizeof **ins);
	*nins = 0;
	if (!*ins)
		return false;
	for (size_t i = 0; tank_map_next(&n->dirty, &i, &k, &v);) {
		pod_c *p = tank_map_get(&n->pods, k);
		api_incoming_t *in = &(*ins)[*nins];
		tank_error_t e;

		if (!p || !assigned_here(n, p) || p->kind->cluster_place != KIND_PLACE_UNIT)
			continue;
		if (api_client_call(n->api, "status", pack_status_one, p, 60000, in, &e) != 0) {
			say(n, "status: %s", e.msg);
			api_drop(n);
			return false;
		}
		(*nins)++;
		if (in->code == API_OK && in->result && in->result->type == MSGPACK_OBJECT_MAP)
			tank_map_put(st, k, (void *)in->result, NULL);
	}
	return true;
}

/* Writes back the status of this node's objects that changed: all of
 * them after a full look (at start, every CL_NODE_FULL_MS, after the
 * event stream broke), else only those tankd's events named. */
static void push_status(cl_node_t *n)
{
	api_incoming_t ins[KIND_MAX + 1], *dins = NULL;
	size_t ndins = 0;
	tank_map_t st, keep;
	cl_op_t *ops = NULL;
	char **keys = NULL;
	obs_buf_t *vals = NULL;
	pod_c **who = NULL;
	size_t nops = 0, cap = n->pods.len + 1;
	uint64_t t = now_ms(), running = 0, assigned = 0;
	bool full = n->all_dirty || !n->ev || t - n->last_full_ms >= CL_NODE_FULL_MS;
	const char *k;
	void *v;

	memset(ins, 0, sizeof ins);
	tank_map_init(&st);
	tank_map_init(&keep);
	if (!full && n->dirty.len > CL_NODE_ONE_BY_ONE)
		full = true;   /* a burst: one call per kind costs less */
	if (full ? !local_status(n, &st, ins) : !dirty_status(n, &st, &dins, &ndins))
		goto out;
	ops = calloc(cap, sizeof *ops);
	keys = calloc(cap, sizeof *keys);
	vals = calloc(cap, sizeof *vals);
	who = calloc(cap, sizeof *who);
	if (!ops || !keys || !vals || !who)
		goto out;
	for (size_t i = 0; tank_map_next(&n->pods, &i, &k, &v);) {
		pod_c *p = v;
		const msgpack_object *s;

		if (!assigned_here(n, p) || p->kind->cluster_place != KIND_PLACE_UNIT) {
			p->running = false;
			continue;
		}
		if (p->kind == tank_kinds[0])
			assigned++;
		if (!full && !tank_map_get(&n->dirty, k)) {
			running += p->kind == tank_kinds[0] && p->running;
			continue;   /* nothing said it changed */
		}
		s = tank_map_get(&st, k);
		p->running = s && str_is(map_get(s, "phase"), "running");
		if (p->kind == tank_kinds[0])
			running += p->running;
		summary(n, p, s, &vals[nops]);
		if (vals[nops].oom) {
			tank_map_put(&keep, k, (void *)1, NULL);
			continue;
		}
		if (p->status && strlen(p->status) == vals[nops].len &&
		    memcmp(p->status, vals[nops].p, vals[nops].len) == 0) {
			obs_buf_free(&vals[nops]);
			continue;
		}
		if (t - p->status_at < CL_NODE_STATUS_MIN_MS) {
			/* Written too lately: again at a later pass. */
			tank_map_put(&keep, k, (void *)1, NULL);
			obs_buf_free(&vals[nops]);
			continue;
		}
		if (asprintf(&keys[nops], CL_PREFIX_STATUS "%s", k) < 0) {
			keys[nops] = NULL;
			tank_map_put(&keep, k, (void *)1, NULL);
			obs_buf_free(&vals[nops]);
			continue;
		}
		ops[nops] = (cl_op_t){ .kind = CL_OP_PUT, .key = keys[nops], .value = vals[nops].p,
				       .value_len = vals[nops].len };
		who[nops] = p;
		nops++;
	}
	for (size_t i = 0; i < nops; i += TXN_BATCH) {
		size_t cnt = nops - i < TXN_BATCH ? nops - i : TXN_BATCH;
		bool ok;

		if (cl_etcd_txn(n->work_etcd, NULL, 0, ops + i, cnt, NULL, 0, &ok, NULL, NULL) != 0) {
			say(n, "status: %s", cl_etcd_errmsg(n->work_etcd));
			for (size_t j = i; j < nops; j++)
				tank_map_put(&keep, keys[j] + strlen(CL_PREFIX_STATUS), (void *)1, NULL);
			break;
		}
		for (size_t j = i; j < i + cnt; j++) {
			char *copy = strndup(vals[j].p, vals[j].len);

			if (copy) {
				free(who[j]->status);
				who[j]->status = copy;
				who[j]->status_at = t;
			}
		}
	}
	/* What was written (or found unchanged) is clean; what waits on
	 * the rate or on etcd stays dirty. */
	tank_map_destroy(&n->dirty);
	n->dirty = keep;
	tank_map_init(&keep);
	if (full) {
		n->all_dirty = false;
		n->last_full_ms = t;
	}
	pthread_mutex_lock(&n->mu);
	if (n->running != running || n->assigned != assigned) {
		n->running = running;
		n->assigned = assigned;
		n->record_dirty = true;
	}
	pthread_mutex_unlock(&n->mu);
out:
	for (size_t i = 0; i < nops; i++) {
		free(keys[i]);
		obs_buf_free(&vals[i]);
	}
	free(ops);
	free(keys);
	free(vals);
	free(who);
	tank_map_destroy(&st);
	tank_map_destroy(&keep);
	for (size_t i = 0; i <= KIND_MAX; i++)
		api_incoming_free(&ins[i]);
	for (size_t i = 0; i < ndins; i++)
		api_incoming_free(&dins[i]);
	free(dins);
}

/* --- the worker: calls routed to this node -------------------------------- */

static int pack_params(msgpack_packer *pk, void *arg)
{
	return msgpack_pack_object(pk, *(const msgpack_object *)arg);
}

/* The answer to a request: {code, message, result, details} as JSON, the
 * code a wire name ("" for success). */
static char *answer_json(int code, const char *message, const msgpack_object *result,
			 const msgpack_object *details, size_t *len)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked up;
	char *json = NULL;
	const char *cn = code == API_OK ? "" : api_code_name(code);

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4);
	msgpack_pack_str_with_body(&pk, "code", 4);
	msgpack_pack_str_with_body(&pk, cn, strlen(cn));
	msgpack_pack_str_with_body(&pk, "message", 7);
	msgpack_pack_str_with_body(&pk, message, strlen(message));
	msgpack_pack_str_with_body(&pk, "result", 6);
	if (result)
		msgpack_pack_object(&pk, *result);
	else
		msgpack_pack_nil(&pk);
	msgpack_pack_str_with_body(&pk, "details", 7);
	if (details)
		msgpack_pack_object(&pk, *details);
	else
		msgpack_pack_nil(&pk);
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS &&
	    mf_doc_emit_string(&up.data, MF_DOC_JSON_LINE, &json, len) != 0)
		json = NULL;
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
	return json;
}

/* Runs one request {method, params} on this node's tankd (through its
 * socket, as tankctl would) and puts the answer at /tank/ans/ID, deleting
 * the request in the same transaction.  false when tankd could not be
 * reached (the request stays for the next pass). */
static bool serve_one(cl_node_t *n, const req_c *r, int64_t lease)
{
	char err[160] = "", method[64], key[sizeof CL_PREFIX_ANS + sizeof r->id],
	     rkey[sizeof CL_PREFIX_REQ + NAME_MAX_ + sizeof r->id];
	mf_docs_t *d = parse_json(r->value, r->len, err, sizeof err);
	const msgpack_object *params = d ? map_get(&d->docs[0], "params") : NULL;
	api_incoming_t in;
	tank_error_t e;
	char *json;
	size_t len = 0;
	bool ok;

	api_client_t *via = n->api, *own = NULL;

	memset(&in, 0, sizeof in);
	str_copy(d ? map_get(&d->docs[0], "method") : NULL, method, sizeof method);
	/* A method whose answer may be followed by notifications (a log
	 * followed: kind_method_t.follow) gets a connection of its own,
	 * closed after its answer, which ends what it started: the routed
	 * call answers once, and the worker's connection carries nothing
	 * it did not ask for. */
	for (size_t ki = 0; tank_kinds[ki] && method[0]; ki++)
		for (size_t i = 0; i < tank_kinds[ki]->nmethods; i++)
			if (!own && strcmp(tank_kinds[ki]->methods[i].name, method) == 0 &&
			    tank_kinds[ki]->methods[i].follow &&
			    api_client_connect(n->socket, &own, &e) == 0)
				via = own;
	if (!d || !method[0] || !params || params->type != MSGPACK_OBJECT_ARRAY) {
		json = answer_json(API_BAD_REQUEST, d ? "expected {method, params: [...]}" : err,
				   NULL, NULL, &len);
	} else if (api_client_call(via, method, pack_params, (void *)params, 60000, &in, &e) != 0) {
		say(n, "%s: %s", method, e.msg);
		if (via == n->api)
			api_drop(n);
		api_client_close(own);
		mf_docs_free(d);
		return false;
	} else {
		json = answer_json(in.code, in.message, in.result, in.details, &len);
	}
	api_client_close(own);
	snprintf(key, sizeof key, CL_PREFIX_ANS "%s", r->id);
	snprintf(rkey, sizeof rkey, CL_PREFIX_REQ "%s/%s", n->name, r->id);
	if (json) {
		/* Under the node's lease: an answer nobody read goes with its
		 * node at the latest. */
		cl_op_t ops[2] = { { .kind = CL_OP_PUT, .key = key, .value = json, .value_len = len,
				     .lease = lease },
				   { .kind = CL_OP_DELETE, .key = rkey } };

		if (cl_etcd_txn(n->work_etcd, NULL, 0, ops, 2, NULL, 0, &ok, NULL, NULL) != 0)
			say(n, "answer: %s", cl_etcd_errmsg(n->work_etcd));
		else
			tank_map_put(&n->served, r->id, (void *)1, NULL);
	}
	free(json);
	api_incoming_free(&in);
	mf_docs_free(d);
	return true;
}

static void serve_requests(cl_node_t *n)
{
	int64_t lease;
	const char *k;
	void *v;
	tank_map_t now;

	pthread_mutex_lock(&n->mu);
	lease = n->lease;
	pthread_mutex_unlock(&n->mu);
	tank_map_init(&now);
	for (size_t i = 0; i < n->nreqs; i++) {
		tank_map_put(&now, n->reqs[i].id, (void *)1, NULL);
		if (tank_map_get(&n->served, n->reqs[i].id))
			continue;   /* answered; the mirror has not seen its delete yet */
		if (!n->api || !serve_one(n, &n->reqs[i], lease))
			break;
	}
	/* Ids whose request key is gone need no memory. */
	for (size_t i = 0; tank_map_next(&n->served, &i, &k, &v);)
		if (!tank_map_get(&now, k)) {
			tank_map_del(&n->served, k);
			i = 0;
		}
	tank_map_destroy(&now);
}

static void *work_main(void *arg)
{
	cl_node_t *n = arg;
	uint64_t gen = 0, last_snap = 0;
	bool synced = false;

	while (!atomic_load(&n->stop)) {
		/* Woken by the mirror; else every 100 ms for tankd's events
		 * (their connection is read here, without waiting), the
		 * whole view looked at again every second. */
		uint64_t g = cl_mirror_wait(n->mirror, gen, 100);
		bool changed = g != gen;
		uint64_t t = now_ms();

		gen = g;
		if (atomic_load(&n->stop))
			break;
		/* A burst (assignments come in transactions of 64) is one
		 * pass, not one per transaction. */
		if (changed) {
			nap(n, CL_NODE_DEBOUNCE_MS);
			gen = cl_mirror_gen(n->mirror);
		}
		if (changed || t - last_snap >= 1000) {
			last_snap = t;
			if (!(synced = snapshot(n)))
				continue;   /* out of step with etcd: change nothing */
			schedule(n);
			if (!api_ready(n)) {
				nap(n, 500);
				continue;
			}
			if (changed || t - n->last_local_ms >= CL_NODE_FULL_MS) {
				bool full = t - n->last_local_ms >= CL_NODE_FULL_MS;

				sync_local(n, full);
				if (full)
					n->last_local_ms = t;
			}
			if (n->api)
				serve_requests(n);
		}
		if (!synced || !n->api)
			continue;
		drain_events(n);
		if (n->api)
			push_status(n);
	}
	return NULL;
}

/* --- start and stop ----------------------------------------------------- */

static uint64_t host_capacity(void)
{
	pod_host_limits_t l;
	uint64_t fds, pids;

	memset(&l, 0, sizeof l);
	pod_host_read(&l, NULL);
	fds = l.nofile_max == UINT64_MAX ? UINT64_MAX
	      : l.nofile_max > POD_HOST_FD_RESERVE
	      ? (l.nofile_max - POD_HOST_FD_RESERVE) / POD_HOST_FDS_PER_CONTAINER : 0;
	pids = l.pid_max > POD_HOST_PID_RESERVE ? l.pid_max - POD_HOST_PID_RESERVE : UINT64_MAX;
	if (!l.pid_max)
		pids = UINT64_MAX;
	fds = fds < pids ? fds : pids;
	return fds == UINT64_MAX ? 100000 : fds;
}

void cl_node_stop(cl_node_t *n, bool revoke)
{
	if (!n)
		return;
	atomic_store(&n->stop, 1);
	if (n->work_etcd)
		cl_etcd_abort(n->work_etcd);
	if (n->lease_etcd)
		cl_etcd_abort(n->lease_etcd);
	if (n->work_started)
		pthread_join(n->work_thr, NULL);
	if (n->lease_started)
		pthread_join(n->lease_thr, NULL);
	cl_mirror_stop(n->mirror);
	req_reset(n);
	free(n->reqs);
	tank_map_destroy(&n->served);
	if (revoke && n->lease && n->lease_etcd) {
		cl_etcd_rearm(n->lease_etcd);
		cl_etcd_set_timeout(n->lease_etcd, 2000);
		cl_etcd_lease_revoke(n->lease_etcd, n->lease);
	}
	api_client_close(n->api);
	api_client_close(n->ev);
	tank_map_destroy(&n->dirty);
	tank_map_destroy(&n->local_all);
	tank_map_destroy(&n->local_ours);
	{
		const char *k;
		void *v;

		for (size_t i = 0; tank_map_next(&n->pods, &i, &k, &v);)
			pod_c_free(v);
		tank_map_destroy(&n->pods);
	}
	nodes_free(n);
	cl_etcd_close(n->work_etcd);
	cl_etcd_close(n->lease_etcd);
	pthread_mutex_destroy(&n->mu);
	free(n->url);
	free(n->name);
	free(n->socket);
	free(n);
}

int cl_node_start(const cl_node_opts_t *o, cl_node_t **out, tank_error_t *e)
{
	cl_node_t *n;
	int rc, r;

	if ((rc = cl_node_check(o, e)) != 0)
		return rc;
	if (!(n = calloc(1, sizeof *n)))
		return tank_error_set(e, -ENOMEM, "cluster: out of memory");
	pthread_mutex_init(&n->mu, NULL);
	tank_map_init(&n->pods);
	tank_map_init(&n->served);
	tank_map_init(&n->dirty);
	tank_map_init(&n->local_all);
	tank_map_init(&n->local_ours);
	n->all_dirty = true;
	n->ttl_s = o->ttl_s > 0 ? o->ttl_s : CL_NODE_TTL_DEFAULT;
	n->capacity = o->capacity ? o->capacity : host_capacity();
	n->log = o->log;
	/* A test's knob (tests/cluster/): 0 makes every scheduler go for
	 * every pod at once, the race the transactions must settle. */
	const char *sw = getenv("TANK_CLUSTER_SHARE_WAIT_MS");
	n->share_wait_ms = sw && *sw ? strtoull(sw, NULL, 10) : CL_NODE_SHARE_WAIT_MS;
	r = cl_labels_parse(o->labels, n->labels_buf, sizeof n->labels_buf, n->labels, LABELS_MAX, e);
	n->nlabels = r > 0 ? (size_t)r : 0;
	if (!(n->url = strdup(o->url)) || !(n->name = strdup(o->node)) ||
	    !(n->socket = strdup(o->socket))) {
		rc = tank_error_set(e, -ENOMEM, "cluster: out of memory");
		goto fail;
	}
	if ((rc = cl_etcd_open(n->url, &n->lease_etcd)) != 0 ||
	    (rc = cl_etcd_open(n->url, &n->work_etcd)) != 0 ||
	    (rc = cl_mirror_start_skip(n->url, CL_PREFIX_ASSIGN, "/tank0", CL_PREFIX_STATUS,
					&n->mirror)) != 0) {
		tank_error_set(e, rc, "cluster: %s", cl_etcd_strerror(rc));
		goto fail;
	}
	/* The keep-alive must never wait behind a slow request of its own. */
	cl_etcd_set_timeout(n->lease_etcd, (long)n->ttl_s * 1000 / 4);
	if ((r = pthread_create(&n->lease_thr, NULL, lease_main, n)) != 0) {
		rc = tank_error_set(e, -r, "cluster: %s", strerror(r));
		goto fail;
	}
	n->lease_started = true;
	if ((r = pthread_create(&n->work_thr, NULL, work_main, n)) != 0) {
		rc = tank_error_set(e, -r, "cluster: %s", strerror(r));
		goto fail;
	}
	n->work_started = true;
	*out = n;
	return 0;
fail:
	cl_node_stop(n, false);
	return rc;
}
