/* cl_cli — see cl_cli.h. */
#include "cluster/cl_cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "api/api_rpc.h"
#include "cluster/cl_etcd.h"
#include "cluster/cl_mirror.h"
#include "cluster/cl_node.h"
#include "common/kit_errors.h"
#include "common/kit_units.h"
#include "common/tank_err.h"
#include "common/tank_map.h"
#include "kinds/kind.h"
#include "manifest/mf.h"
#include "manifest/mf_doc.h"
#include "manifest/mf_labels.h"

#define EXIT_OK_ 0
#define EXIT_FAIL_ 1
#define EXIT_USAGE_ 2
#define NAME_CAP 256
/* etcd refuses a transaction of more than 128 operations (--max-txn-ops). */
#define TXN_OPS 64

typedef struct cli {
	const char *url;
	const char *verb;
	cl_etcd_t *e;
	FILE *out, *err;
} cli_t;

static int fail(cli_t *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(cli_t *c, int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(c->err, "tankctl: %s: ", c->verb);
	va_start(ap, fmt);
	vfprintf(c->err, fmt, ap);
	va_end(ap);
	fputc('\n', c->err);
	return code;
}

static int etcd_fail(cli_t *c)
{
	return fail(c, EXIT_FAIL_, "%s", cl_etcd_errmsg(c->e));
}

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

/* One JSON object (a value read from etcd), or NULL. */
static mf_docs_t *json_doc(const char *s, size_t len)
{
	kit_errors_t errs;
	mf_docs_t *d = NULL;

	kit_errors_init(&errs);
	if (mf_docs_load(s, len, "etcd.json", &d, &errs) != 0 || !d || d->count != 1) {
		mf_docs_free(d);
		d = NULL;
	}
	kit_errors_free(&errs);
	return d;
}

/* --- apply ----------------------------------------------------------------- */

/* The map without `key` (entries in zone, values shared). */
static msgpack_object without(const msgpack_object *m, const char *key, msgpack_zone *z)
{
	msgpack_object r = *m;
	uint32_t n = 0;

	r.via.map.ptr = msgpack_zone_malloc(z, (m->via.map.size + 1) * sizeof *r.via.map.ptr);
	if (!r.via.map.ptr) {
		r.via.map.size = 0;
		return r;
	}
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key;

		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
		    memcmp(k->via.str.ptr, key, k->via.str.size) == 0)
			continue;
		r.via.map.ptr[n++] = m->via.map.ptr[i];
	}
	r.via.map.size = n;
	return r;
}

/* node_selector: a map of label keys to label values. */
static void check_selector(const msgpack_object *sel, const char *at, kit_errors_t *errs)
{
	if (!sel)
		return;
	if (sel->type != MSGPACK_OBJECT_MAP) {
		kit_errors_add(errs, "%s.node_selector: expected a map of labels (key: value)", at);
		return;
	}
	for (uint32_t i = 0; i < sel->via.map.size; i++) {
		const msgpack_object *k = &sel->via.map.ptr[i].key, *v = &sel->via.map.ptr[i].val;

		if (k->type != MSGPACK_OBJECT_STR || !mf_label_key_ok(k->via.str.ptr, k->via.str.size))
			kit_errors_add(errs, "%s.node_selector: a key breaks the label rules", at);
		else if (v->type != MSGPACK_OBJECT_STR ||
			 !mf_label_value_ok(v->via.str.ptr, v->via.str.size))
			kit_errors_add(errs, "%s.node_selector[\"%.*s\"]: expected a label value", at,
				       (int)k->via.str.size, k->via.str.ptr);
	}
}

typedef struct pod_in {
	const kind_t *kind;
	void *obj;              /* validated (apply --wait observes with it) */
	char name[NAME_CAP];
	char *json;
	size_t len;
} pod_in_t;

/* The kind whose manifest entry is mk. */
static const kind_t *kind_of_mf(const mf_kind_t *mk)
{
	for (size_t i = 0; tank_kinds[i]; i++)
		if (tank_kinds[i]->mf == mk)
			return tank_kinds[i];
	return NULL;
}

/* Validates every object of the manifest with its kind's validator (a
 * stack's, its inline pods with it): 0 with pods filled (each object,
 * whatever its kind), or the exit code (problems said).  A kind a
 * cluster does not place (kinds/kind.h cluster_place) is refused. */
static int load_pods(cli_t *c, const char *path, pod_in_t **pods, size_t *n)
{
	mf_registry_t reg;
	kit_errors_t errs;
	mf_docs_t *docs = NULL;
	char *text = NULL;
	size_t len = 0;
	int rc = EXIT_OK_;

	*pods = NULL;
	*n = 0;
	memset(&reg, 0, sizeof reg);
	kind_registry(tank_kinds, &reg);
	kit_errors_init(&errs);
	tank_map_t seen;
	tank_map_init(&seen);
	if (mf_read_file(path, &text, &len, &errs) != 0 ||
	    mf_docs_load(text, len, path, &docs, &errs) != 0)
		goto said;
	if (!(*pods = calloc(docs->count + 1, sizeof **pods))) {
		rc = fail(c, EXIT_FAIL_, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < docs->count; i++) {
		const msgpack_object *o = &docs->docs[i];
		msgpack_object rest, labels, spec;
		const mf_kind_t *k;
		const kind_t *kk;
		const char *name = NULL;
		void *obj = NULL;
		char at[32], id[2 * NAME_CAP];

		snprintf(at, sizeof at, "document %u", docs->index[i]);
		if (o->type != MSGPACK_OBJECT_MAP) {
			kit_errors_add(&errs, "%s: expected a pod (a map)", at);
			continue;
		}
		if (!(k = mf_kind_of(&reg, o, docs->zone, &rest, at, &errs)))
			continue;
		if (!(kk = kind_of_mf(k)) || kk->cluster_place == KIND_PLACE_NONE) {
			kit_errors_add(&errs, "%s: kind %s: not applied to a cluster (docs/cluster.md)",
				       at, k->name);
			continue;
		}
		if (kk->cluster_place == KIND_PLACE_EVERY && map_get(&rest, "node_selector"))
			kit_errors_add(&errs, "%s: node_selector: a %s is on every node", at, kk->name);
		check_selector(map_get(&rest, "node_selector"), at, &errs);
		spec = without(&rest, "node_selector", docs->zone);
		if (mf_labels_take(&spec, docs->zone, &labels, at, &errs) != 0)
			continue;
		kit_errors_t perr;
		kit_errors_init(&perr);
		if (k->validate(&spec, &obj, &name, &perr) != 0) {
			char pre[48];
			snprintf(pre, sizeof pre, "%s: ", at);
			kit_errors_move(&errs, &perr, pre);
			kit_errors_free(&perr);
			continue;
		}
		kit_errors_free(&perr);
		if (cl_obj_id(kk, name, id, sizeof id) != 0) {
			kit_errors_add(&errs, "%s: %s: name too long", at, kk->name);
			k->free_obj(obj);
			continue;
		}
		if (tank_map_get(&seen, id)) {
			kit_errors_add(&errs, "%s: %s %s is named twice in the manifest", at, kk->name,
				       name);
			k->free_obj(obj);
			continue;
		}
		tank_map_put(&seen, id, (void *)1, NULL);
		(*pods)[*n].kind = kk;
		snprintf((*pods)[*n].name, NAME_CAP, "%s", name);
		/* Stored as written (kind, labels and node_selector included),
		 * on one line of JSON. */
		if (mf_doc_emit_string(o, MF_DOC_JSON_LINE, &(*pods)[*n].json, &(*pods)[*n].len) != 0) {
			kit_errors_add(&errs, "%s: cannot be written as JSON", at);
			k->free_obj(obj);
			continue;
		}
		(*pods)[*n].obj = obj;
		(*n)++;
	}
	if (errs.count == 0)
		goto out;
said:
	for (size_t i = 0; i < errs.stored; i++)
		fprintf(c->err, "tankctl: %s: %s\n", c->verb, errs.msgs[i]);
	rc = EXIT_FAIL_;
	for (size_t i = 0; *pods && i < *n; i++) {
		free((*pods)[i].json);
		(*pods)[i].kind->mf->free_obj((*pods)[i].obj);
	}
	free(*pods);
	*pods = NULL;
	*n = 0;
out:
	tank_map_destroy(&seen);
	kit_errors_free(&errs);
	mf_docs_free(docs);
	free(text);
	return rc;
}

static void pods_free(pod_in_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].json);
		p[i].kind->mf->free_obj(p[i].obj);
	}
	free(p);
}

static int apply_wait(cli_t *c, const pod_in_t *pods, size_t n, uint64_t timeout_ms);

static int do_apply(cli_t *c, int argc, char **argv)
{
	const char *file = NULL;
	pod_in_t *pods;
	size_t n;
	int rc;
	bool wait = false;
	uint64_t timeout_ms = 60000;

	for (int i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--filename") == 0) && i + 1 < argc)
			file = argv[++i];
		else if (strcmp(argv[i], "--wait") == 0)
			wait = true;
		else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
			if (kit_parse_duration(argv[i + 1], strlen(argv[i + 1]), &timeout_ms) != 0)
				return fail(c, EXIT_USAGE_, "--timeout: expected a duration (30s, 2m), got %s",
					    argv[i + 1]);
			i++;
		} else
			return fail(c, EXIT_USAGE_,
				    "unexpected '%s' (usage: apply -f FILE|- [--wait [--timeout D]])",
				    argv[i]);
	}
	if (!file)
		return fail(c, EXIT_USAGE_, "-f FILE is required");
	if ((rc = load_pods(c, file, &pods, &n)) != EXIT_OK_)
		return rc;
	/* What is there now, one read per kind of the manifest; then the
	 * changes in transactions of TXN_OPS puts (an apply of 3,000 pods is
	 * 47 requests, not 6,000). */
	cl_kvs_t now[KIND_MAX + 1];
	tank_map_t had;
	const char **what = calloc(n + 1, sizeof *what);
	char (*keys)[NAME_CAP + 32] = calloc(n + 1, sizeof *keys);
	cl_op_t *ops = calloc(n + 1, sizeof *ops);
	size_t nops = 0;

	memset(now, 0, sizeof now);
	tank_map_init(&had);
	if (!what || !keys || !ops) {
		rc = fail(c, EXIT_FAIL_, "out of memory");
		goto out;
	}
	for (size_t ki = 0; tank_kinds[ki] && ki < KIND_MAX; ki++) {
		char prefix[NAME_CAP];
		bool used = false;

		for (size_t i = 0; i < n && !used; i++)
			used = pods[i].kind == tank_kinds[ki];
		if (!used)
			continue;
		snprintf(prefix, sizeof prefix, "/tank/%s/", tank_kinds[ki]->plural);
		if (cl_etcd_get_prefix(c->e, prefix, 0, &now[ki]) != 0) {
			rc = etcd_fail(c);
			goto out;
		}
		for (size_t i = 0; i < now[ki].n; i++)
			tank_map_put(&had, now[ki].kv[i].key, &now[ki].kv[i], NULL);
	}
	for (size_t i = 0; i < n; i++) {
		cl_kv_t *kv;

		cl_spec_key(pods[i].kind, pods[i].name, keys[nops], sizeof keys[nops]);
		kv = tank_map_get(&had, keys[nops]);
		if (kv && kv->value_len == pods[i].len && memcmp(kv->value, pods[i].json, pods[i].len) == 0) {
			what[i] = "unchanged";
			continue;
		}
		what[i] = kv ? "configured" : "created";
		ops[nops] = (cl_op_t){ .kind = CL_OP_PUT, .key = keys[nops], .value = pods[i].json,
				       .value_len = pods[i].len };
		nops++;
	}
	for (size_t i = 0; i < nops; i += TXN_OPS) {
		bool ok;

		if (cl_etcd_txn(c->e, NULL, 0, ops + i, nops - i < TXN_OPS ? nops - i : TXN_OPS, NULL, 0,
				&ok, NULL, NULL) != 0) {
			rc = etcd_fail(c);
			break;
		}
	}
	if (rc == EXIT_OK_)
		for (size_t i = 0; i < n; i++)
			fprintf(c->out, "%s %s %s\n", pods[i].kind->name, pods[i].name, what[i]);
	if (rc == EXIT_OK_ && wait) {
		fflush(c->out);
		rc = apply_wait(c, pods, n, timeout_ms);
	}
out:
	for (size_t i = 0; i <= KIND_MAX; i++)
		cl_kvs_free(&now[i]);
	tank_map_destroy(&had);
	free(what);
	free(keys);
	free(ops);
	pods_free(pods, n);
	return rc;
}

/* --- delete ---------------------------------------------------------------- */

/* A name on the command line: KIND/NAME, or NAME of kind dflt (the
 * kind word before the names, else the first kind of the list: pods).
 * NULL (said) when KIND is none a cluster places. */
static const kind_t *named(cli_t *c, const char *arg, const kind_t *dflt, const char **name)
{
	const char *slash = strchr(arg, '/');
	const kind_t *k;

	*name = arg;
	if (!slash)
		return dflt;
	k = kind_find(tank_kinds, arg, (size_t)(slash - arg));
	if (!k || k->cluster_place == KIND_PLACE_NONE) {
		fail(c, EXIT_USAGE_, "%.*s: not a kind a cluster holds", (int)(slash - arg), arg);
		return NULL;
	}
	*name = slash + 1;
	return k;
}

/* The kind word that may come before the names ("stack st"): the kind,
 * *at moved past it; else the first kind (pods). */
static const kind_t *kind_word(int argc, char **argv, int *at)
{
	const kind_t *k;

	if (*at + 1 < argc && argv[*at][0] != '-' && !strchr(argv[*at], '/') &&
	    (k = kind_find(tank_kinds, argv[*at], strlen(argv[*at]))) &&
	    k->cluster_place != KIND_PLACE_NONE) {
		(*at)++;
		return k;
	}
	return tank_kinds[0];
}

static int delete_one(cli_t *c, const kind_t *k, const char *name)
{
	char k1[NAME_CAP + 64], k2[NAME_CAP + 64], k3[NAME_CAP + 64], id[NAME_CAP + 32];
	cl_cmp_t cmp = { .key = k1, .target = CL_CMP_CREATE, .result = CL_GT, .num = 0 };
	cl_op_t ops[3] = { { .kind = CL_OP_DELETE, .key = k1 }, { .kind = CL_OP_DELETE, .key = k2 },
			   { .kind = CL_OP_DELETE, .key = k3 } };
	bool ok = false;

	if (cl_obj_id(k, name, id, sizeof id) != 0 || cl_spec_key(k, name, k1, sizeof k1) != 0)
		return fail(c, EXIT_FAIL_, "%s %s: not found", k->name, name);
	snprintf(k2, sizeof k2, CL_PREFIX_ASSIGN "%s", id);
	snprintf(k3, sizeof k3, CL_PREFIX_STATUS "%s", id);
	/* The spec, its assignment and its status at once, if it exists. */
	if (cl_etcd_txn(c->e, &cmp, 1, ops, 3, NULL, 0, &ok, NULL, NULL) != 0)
		return etcd_fail(c);
	if (!ok)
		return fail(c, EXIT_FAIL_, "%s %s: not found", k->name, name);
	fprintf(c->out, "%s %s deleted\n", k->name, name);
	return EXIT_OK_;
}

static int do_delete(cli_t *c, int argc, char **argv)
{
	int rc = EXIT_OK_, named_ = 0, at = 1;
	const kind_t *dflt = kind_word(argc, argv, &at);

	for (int i = at; i < argc; i++) {
		if ((strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--filename") == 0) && i + 1 < argc) {
			pod_in_t *pods;
			size_t n;
			int r = load_pods(c, argv[++i], &pods, &n);

			if (r != EXIT_OK_)
				return r;
			for (size_t j = 0; j < n; j++, named_++)
				if ((r = delete_one(c, pods[j].kind, pods[j].name)) != EXIT_OK_)
					rc = r;
			pods_free(pods, n);
		} else if (argv[i][0] == '-') {
			return fail(c, EXIT_USAGE_,
				    "unknown option '%s' (usage: delete [KIND] NAME...|KIND/NAME...|-f FILE)",
				    argv[i]);
		} else {
			const char *name;
			const kind_t *k = named(c, argv[i], dflt, &name);
			int r = k ? delete_one(c, k, name) : EXIT_USAGE_;

			named_++;
			if (r != EXIT_OK_)
				rc = r;
		}
	}
	if (!named_)
		return fail(c, EXIT_USAGE_, "nothing named (usage: delete [KIND] NAME...|KIND/NAME...|-f FILE)");
	return rc;
}

/* --- reading the cluster ------------------------------------------------ */

typedef struct view {
	cl_kvs_t all;                 /* /tank/assign/ … /tank/status/ */
	tank_map_t assign, status, nodes; /* name → cl_kv_t * */
	cl_kv_t **pods;
	size_t npods;
} view_t;

static int view_load(cli_t *c, view_t *v)
{
	memset(v, 0, sizeof *v);
	tank_map_init(&v->assign);
	tank_map_init(&v->status);
	tank_map_init(&v->nodes);
	if (cl_etcd_get_range(c->e, CL_PREFIX_ASSIGN, "/tank0", 0, &v->all) != 0)
		return etcd_fail(c);
	if (!(v->pods = calloc(v->all.n + 1, sizeof *v->pods)))
		return fail(c, EXIT_FAIL_, "out of memory");
	for (size_t i = 0; i < v->all.n; i++) {
		cl_kv_t *kv = &v->all.kv[i];
		const char *k = kv->key, *name;
		const kind_t *kk = cl_spec_kind(k, &name);

		if (kk && kk->cluster_place == KIND_PLACE_UNIT)
			v->pods[v->npods++] = kv;  /* what is placed on a node */
		else if (kk)
			continue;
		else if (strncmp(k, CL_PREFIX_ASSIGN, strlen(CL_PREFIX_ASSIGN)) == 0)
			tank_map_put(&v->assign, k + strlen(CL_PREFIX_ASSIGN), kv, NULL);
		else if (strncmp(k, CL_PREFIX_STATUS, strlen(CL_PREFIX_STATUS)) == 0)
			tank_map_put(&v->status, k + strlen(CL_PREFIX_STATUS), kv, NULL);
		else if (strncmp(k, CL_PREFIX_NODES, strlen(CL_PREFIX_NODES)) == 0)
			tank_map_put(&v->nodes, k + strlen(CL_PREFIX_NODES), kv, NULL);
	}
	return EXIT_OK_;
}

static void view_free(view_t *v)
{
	cl_kvs_free(&v->all);
	tank_map_destroy(&v->assign);
	tank_map_destroy(&v->status);
	tank_map_destroy(&v->nodes);
	free(v->pods);
}

/* A simple aligned table: rows of ncol strings. */
typedef struct table {
	char **cell;
	size_t ncol, nrow, cap;
} table_t;

static void table_add(table_t *t, const char *const *row)
{
	if (t->nrow == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **g = realloc(t->cell, cap * t->ncol * sizeof *g);

		if (!g)
			return;
		t->cell = g;
		t->cap = cap;
	}
	for (size_t i = 0; i < t->ncol; i++)
		t->cell[t->nrow * t->ncol + i] = strdup(row[i] ? row[i] : "");
	t->nrow++;
}

static void table_print(table_t *t, FILE *out)
{
	size_t w[16] = { 0 };

	for (size_t r = 0; r < t->nrow; r++)
		for (size_t i = 0; i < t->ncol; i++) {
			const char *s = t->cell[r * t->ncol + i];
			size_t l = s ? strlen(s) : 0;

			if (l > w[i])
				w[i] = l;
		}
	for (size_t r = 0; r < t->nrow; r++) {
		for (size_t i = 0; i < t->ncol; i++) {
			const char *s = t->cell[r * t->ncol + i];

			if (i + 1 == t->ncol)
				fprintf(out, "%s\n", s ? s : "");
			else
				fprintf(out, "%-*s   ", (int)w[i], s ? s : "");
		}
		for (size_t i = 0; i < t->ncol; i++)
			free(t->cell[r * t->ncol + i]);
	}
	free(t->cell);
}

static int do_ps(cli_t *c, int argc, char **argv)
{
	view_t v;
	table_t t = { .ncol = 6 };
	const char *head[] = { "NAME", "NODE", "PHASE", "READY", "RESTARTS", "REASON" };
	int rc;

	(void)argv;
	if (argc > 1)
		return fail(c, EXIT_USAGE_, "takes no arguments");
	if ((rc = view_load(c, &v)) != EXIT_OK_) {
		view_free(&v);
		return rc;
	}
	table_add(&t, head);
	/* Pods first (as before other kinds came), then each other kind's
	 * units as KIND/NAME. */
	for (size_t ki = 0; tank_kinds[ki]; ki++)
	for (size_t i = 0; i < v.npods; i++) {
		const char *name;
		const kind_t *kk = cl_spec_kind(v.pods[i]->key, &name);
		char id[NAME_CAP + 32], shown[2 * NAME_CAP];

		if (kk != tank_kinds[ki] || cl_obj_id(kk, name, id, sizeof id) != 0)
			continue;
		if (ki == 0)
			snprintf(shown, sizeof shown, "%s", name);
		else
			snprintf(shown, sizeof shown, "%s/%s", kk->name, name);
		cl_kv_t *a = tank_map_get(&v.assign, id), *s = tank_map_get(&v.status, id);
		char node[NAME_CAP] = "-", phase[64] = "unassigned", ready[8] = "-", restarts[24] = "-",
		     reason[200] = "";
		mf_docs_t *d = s ? json_doc(s->value, s->value_len) : NULL;

		if (a)
			snprintf(node, sizeof node, "%s", a->value);
		if (a)
			snprintf(phase, sizeof phase, "pending");
		if (d) {
			char who[NAME_CAP];
			const msgpack_object *o = &d->docs[0], *rd = map_get(o, "ready"),
					     *rs = map_get(o, "restarts");

			str_copy(map_get(o, "node"), who, sizeof who);
			/* A status from the node that runs it now, not from
			 * the node it left. */
			if (a && strcmp(who, a->value) == 0) {
				str_copy(map_get(o, "phase"), phase, sizeof phase);
				str_copy(map_get(o, "reason"), reason, sizeof reason);
				const msgpack_object *tot = map_get(o, "total");

				/* A pod's ready is yes or no; a stack's a count
				 * of its total. */
				if (rd && rd->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
					snprintf(ready, sizeof ready, "%" PRIu64 "/%" PRIu64, rd->via.u64,
						 tot && tot->type == MSGPACK_OBJECT_POSITIVE_INTEGER
						 ? tot->via.u64 : 0);
				else
					snprintf(ready, sizeof ready, "%s",
						 rd && rd->type == MSGPACK_OBJECT_BOOLEAN && rd->via.boolean
						 ? "yes" : "no");
				if (rs && rs->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
					snprintf(restarts, sizeof restarts, "%" PRIu64, rs->via.u64);
			}
			mf_docs_free(d);
		}
		if (a && !tank_map_get(&v.nodes, a->value))
			snprintf(reason, sizeof reason, "node %s is gone: moving", a->value);
		const char *row[] = { shown, node, phase, ready, restarts, reason };
		table_add(&t, row);
	}
	table_print(&t, c->out);
	view_free(&v);
	return EXIT_OK_;
}

static int do_get(cli_t *c, int argc, char **argv)
{
	const char *name = NULL, *fmt = "yaml";
	char key[NAME_CAP + 64], id[NAME_CAP + 32];
	int at = 1;
	const kind_t *k = kind_word(argc, argv, &at);
	cl_kvs_t r, a, s;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	mf_docs_t *spec, *st = NULL;
	int rc = EXIT_OK_;

	for (int i = at; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			fmt = argv[++i];
		else if (strncmp(argv[i], "-o", 2) == 0 && argv[i][2])
			fmt = argv[i] + 2;
		else if (argv[i][0] != '-' && !name)
			name = argv[i];
		else
			return fail(c, EXIT_USAGE_,
				    "unexpected '%s' (usage: get [KIND] NAME|KIND/NAME [-o yaml|json])",
				    argv[i]);
	}
	if (!name)
		return fail(c, EXIT_USAGE_, "usage: get [KIND] NAME|KIND/NAME [-o yaml|json]");
	if (!(k = named(c, name, k, &name)))
		return EXIT_USAGE_;
	if (strcmp(fmt, "yaml") != 0 && strcmp(fmt, "json") != 0)
		return fail(c, EXIT_USAGE_, "-o: expected yaml or json, got %s", fmt);
	if (cl_spec_key(k, name, key, sizeof key) != 0 || cl_obj_id(k, name, id, sizeof id) != 0)
		return fail(c, EXIT_FAIL_, "%s %s: not found", k->name, name);
	if (cl_etcd_get(c->e, key, &r) != 0)
		return etcd_fail(c);
	if (!r.n) {
		cl_kvs_free(&r);
		return fail(c, EXIT_FAIL_, "%s %s: not found", k->name, name);
	}
	snprintf(key, sizeof key, CL_PREFIX_ASSIGN "%s", id);
	if (cl_etcd_get(c->e, key, &a) != 0) {
		cl_kvs_free(&r);
		return etcd_fail(c);
	}
	snprintf(key, sizeof key, CL_PREFIX_STATUS "%s", id);
	if (cl_etcd_get(c->e, key, &s) != 0) {
		cl_kvs_free(&r);
		cl_kvs_free(&a);
		return etcd_fail(c);
	}
	spec = json_doc(r.kv[0].value, r.kv[0].value_len);
	if (s.n)
		st = json_doc(s.kv[0].value, s.kv[0].value_len);
	if (!spec || spec->docs[0].type != MSGPACK_OBJECT_MAP) {
		rc = fail(c, EXIT_FAIL_, "%s %s: the stored spec is not a JSON object", k->name, name);
		goto out;
	}
	/* The spec, then where it runs and how. */
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	const msgpack_object *o = &spec->docs[0];
	msgpack_pack_map(&pk, o->via.map.size + 2);
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		msgpack_pack_object(&pk, o->via.map.ptr[i].key);
		msgpack_pack_object(&pk, o->via.map.ptr[i].val);
	}
	msgpack_pack_str_with_body(&pk, "node", 4);
	if (a.n)
		msgpack_pack_str_with_body(&pk, a.kv[0].value, a.kv[0].value_len);
	else
		msgpack_pack_nil(&pk);
	msgpack_pack_str_with_body(&pk, "status", 6);
	if (st)
		msgpack_pack_object(&pk, st->docs[0]);
	else
		msgpack_pack_nil(&pk);
	msgpack_unpacked up;
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS) {
		if (mf_doc_emit(&up.data, strcmp(fmt, "json") == 0 ? MF_DOC_JSON : MF_DOC_YAML, c->out) != 0)
			rc = fail(c, EXIT_FAIL_, "cannot print %s %s", k->name, name);
	} else {
		rc = fail(c, EXIT_FAIL_, "out of memory");
	}
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
out:
	mf_docs_free(spec);
	mf_docs_free(st);
	cl_kvs_free(&r);
	cl_kvs_free(&a);
	cl_kvs_free(&s);
	return rc;
}

static int do_nodes(cli_t *c, int argc, char **argv)
{
	view_t v;
	table_t t = { .ncol = 6 };
	const char *head[] = { "NAME", "LEASE", "LABELS", "CAPACITY", "ASSIGNED", "RUNNING" };
	tank_map_t load;
	const char *k;
	void *val;
	int rc;

	(void)argv;
	if (argc > 1)
		return fail(c, EXIT_USAGE_, "takes no arguments");
	if ((rc = view_load(c, &v)) != EXIT_OK_) {
		view_free(&v);
		return rc;
	}
	/* Load as the schedulers count it: the assignments of live pods. */
	tank_map_init(&load);
	for (size_t i = 0; i < v.all.n; i++) {
		cl_kv_t *kv = &v.all.kv[i];

		if (strncmp(kv->key, CL_PREFIX_ASSIGN, strlen(CL_PREFIX_ASSIGN)) != 0)
			continue;
		uintptr_t n = (uintptr_t)tank_map_get(&load, kv->value);
		tank_map_put(&load, kv->value, (void *)(n + 1), NULL);
	}
	table_add(&t, head);
	for (size_t i = 0; i < v.all.n; i++) {
		cl_kv_t *kv = &v.all.kv[i];
		char lease[64] = "-", labels[512] = "", cap[24] = "-", asg[24], run[24] = "-";
		mf_docs_t *d;

		if (strncmp(kv->key, CL_PREFIX_NODES, strlen(CL_PREFIX_NODES)) != 0)
			continue;
		const char *name = kv->key + strlen(CL_PREFIX_NODES);
		int64_t left = 0, granted = 0;
		if (kv->lease && cl_etcd_lease_ttl(c->e, kv->lease, &left, &granted) == 0)
			snprintf(lease, sizeof lease, "alive %" PRId64 "/%" PRId64 "s", left, granted);
		else
			snprintf(lease, sizeof lease, "expiring");
		if ((d = json_doc(kv->value, kv->value_len))) {
			const msgpack_object *o = &d->docs[0], *l = map_get(o, "labels"),
					     *cp = map_get(o, "capacity"), *rn = map_get(o, "running");
			size_t off = 0;

			for (uint32_t j = 0; l && l->type == MSGPACK_OBJECT_MAP && j < l->via.map.size; j++) {
				const msgpack_object *lk = &l->via.map.ptr[j].key, *lv = &l->via.map.ptr[j].val;

				if (lk->type != MSGPACK_OBJECT_STR || lv->type != MSGPACK_OBJECT_STR)
					continue;
				int w = snprintf(labels + off, sizeof labels - off, "%s%.*s=%.*s",
						 off ? "," : "", (int)lk->via.str.size, lk->via.str.ptr,
						 (int)lv->via.str.size, lv->via.str.ptr);
				if (w < 0 || (size_t)w >= sizeof labels - off)
					break;
				off += (size_t)w;
			}
			if (cp && cp->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				snprintf(cap, sizeof cap, "%" PRIu64, cp->via.u64);
			if (rn && rn->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				snprintf(run, sizeof run, "%" PRIu64, rn->via.u64);
			mf_docs_free(d);
		}
		snprintf(asg, sizeof asg, "%" PRIuPTR, (uintptr_t)tank_map_get(&load, name));
		tank_map_del(&load, name);
		const char *row[] = { name, lease, labels[0] ? labels : "-", cap, asg, run };
		table_add(&t, row);
	}
	/* Nodes that hold assignments but no record: their lease is gone and
	 * the schedulers are moving their pods. */
	for (size_t i = 0; tank_map_next(&load, &i, &k, &val);) {
		char asg[24];

		snprintf(asg, sizeof asg, "%" PRIuPTR, (uintptr_t)val);
		const char *row[] = { k, "expired", "-", "-", asg, "-" };
		table_add(&t, row);
	}
	table_print(&t, c->out);
	tank_map_destroy(&load);
	view_free(&v);
	return EXIT_OK_;
}

/* --- calls routed to a node (docs/cluster.md "Verbs on a cluster") ------------ */

/* One node's answer: {code, message, result, details} (cl_node.c). */
typedef struct answer {
	mf_docs_t *d;
	const msgpack_object *result, *details;
	char code[32], message[512];
	/* A list joined from every node's: their documents, and the array
	 * pointing into them (result points at joined). */
	mf_docs_t **more;
	size_t nmore;
	msgpack_object joined;
} answer_t;

static void answer_free(answer_t *a)
{
	mf_docs_free(a->d);
	for (size_t i = 0; i < a->nmore; i++)
		mf_docs_free(a->more[i]);
	free(a->more);
	if (a->joined.type == MSGPACK_OBJECT_ARRAY)
		free(a->joined.via.array.ptr);
	memset(a, 0, sizeof *a);
}

/* Adds one node's list to a's joined list (one's document moves into a). */
static int answer_join(answer_t *a, answer_t *one)
{
	uint32_t had = a->joined.type == MSGPACK_OBJECT_ARRAY ? a->joined.via.array.size : 0;
	uint32_t add = one->result->via.array.size;
	msgpack_object *g = realloc(had ? a->joined.via.array.ptr : NULL,
				    (had + add + 1) * sizeof *g);
	mf_docs_t **m = realloc(a->more, (a->nmore + 1) * sizeof *m);

	if (m)
		a->more = m;
	if (!g || !m) {
		if (g) {
			a->joined.type = MSGPACK_OBJECT_ARRAY;
			a->joined.via.array.ptr = g;
		}
		return -ENOMEM;
	}
	if (add)
		memcpy(g + had, one->result->via.array.ptr, add * sizeof *g);
	a->joined.type = MSGPACK_OBJECT_ARRAY;
	a->joined.via.array.ptr = g;
	a->joined.via.array.size = had + add;
	a->more[a->nmore++] = one->d;
	one->d = NULL;
	a->result = &a->joined;
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static bool node_live(cli_t *c, const char *node)
{
	char key[NAME_CAP + 32];
	cl_kvs_t r;
	bool live;

	snprintf(key, sizeof key, CL_PREFIX_NODES "%s", node);
	if (cl_etcd_get(c->e, key, &r) != 0)
		return true;   /* etcd's trouble, not the node's: the wait says */
	live = r.n > 0;
	cl_kvs_free(&r);
	return live;
}

/* Waits up to timeout_ms for the answer at akey, through a mirror of
 * that one key (cl_mirror: a list, then a watch, on its own thread, so an
 * answer written before the watch began is seen too), asking every second
 * whether node still lives.  1 with the answer in *value (malloc'd), 0
 * when none came (*gone says the node went), -1 when the mirror could not
 * be started (the caller reads the key). */
static int ans_wait(cli_t *c, const char *node, const char *akey, int timeout_ms,
		    char **value, size_t *len, bool *gone)
{
	char end[192];
	cl_mirror_t *m;
	uint64_t gen = 0;
	struct timespec t0, now;

	*value = NULL;
	*gone = false;
	/* [akey, akey "~"): the key, and none but keys it is a prefix of
	 * (ids are hex digits and dashes, all below '~'). */
	snprintf(end, sizeof end, "%s~", akey);
	if (cl_mirror_start(c->url, akey, end, &m) != 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		cl_mirror_lock(m);
		const cl_entry_t *e = tank_map_get(cl_mirror_map(m), akey);
		if (e && (*value = malloc(e->len + 1))) {
			memcpy(*value, e->value, e->len + 1);
			*len = e->len;
		}
		cl_mirror_unlock(m);
		clock_gettime(CLOCK_MONOTONIC, &now);
		long waited = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (*value || waited >= timeout_ms || (*gone = !node_live(c, node)))
			break;
		gen = cl_mirror_wait(m, gen, 1000);
	}
	cl_mirror_stop(m);
	return *value ? 1 : 0;
}

/* Asks node to call method with params (an array) on its tankd: the
 * request at /tank/req/NODE/ID, the answer watched for at /tank/ans/ID
 * (then deleted).  0 with *a filled, or the exit code (said). */
static int node_call(cli_t *c, const char *node, const char *method,
		     const msgpack_object *params, int timeout_ms, answer_t *a)
{
	static unsigned seq;
	char id[96], rkey[NAME_CAP + 160], akey[160];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked up;
	char *json = NULL;
	size_t len = 0;
	struct timespec ts;
	int rc = EXIT_OK_;

	memset(a, 0, sizeof *a);
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(id, sizeof id, "%llx-%x-%x", (unsigned long long)ts.tv_sec * 1000000000ull +
		 (unsigned long long)ts.tv_nsec, (unsigned)getpid(), seq++);
	snprintf(rkey, sizeof rkey, CL_PREFIX_REQ "%s/%s", node, id);
	snprintf(akey, sizeof akey, CL_PREFIX_ANS "%s", id);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str_with_body(&pk, "method", 6);
	msgpack_pack_str_with_body(&pk, method, strlen(method));
	msgpack_pack_str_with_body(&pk, "params", 6);
	msgpack_pack_object(&pk, *params);
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, sb.data, sb.size, NULL) != MSGPACK_UNPACK_SUCCESS ||
	    mf_doc_emit_string(&up.data, MF_DOC_JSON_LINE, &json, &len) != 0) {
		rc = fail(c, EXIT_FAIL_, "out of memory");
		goto out;
	}
	if (cl_etcd_put(c->e, rkey, json, len, 0, NULL) != 0) {
		rc = etcd_fail(c);
		goto out;
	}
	/* The node's worker answers at its next pass (it is woken by the
	 * request's put): watched for, not polled. */
	char *val = NULL;
	size_t vlen = 0;
	bool gone = false;
	int got = ans_wait(c, node, akey, timeout_ms, &val, &vlen, &gone);
	if (got <= 0) {
		/* No watch (or it ended without the answer): one read. */
		cl_kvs_t r;
		if (cl_etcd_get(c->e, akey, &r) != 0) {
			rc = etcd_fail(c);
			goto out;
		}
		if (r.n && (val = malloc(r.kv[0].value_len + 1))) {
			memcpy(val, r.kv[0].value, r.kv[0].value_len);
			val[r.kv[0].value_len] = '\0';
			vlen = r.kv[0].value_len;
		}
		cl_kvs_free(&r);
	}
	if (!val) {
		cl_etcd_delete(c->e, rkey, false, NULL);
		rc = fail(c, EXIT_FAIL_, gone ? "node %s is gone" : "node %s did not answer within %d ms",
			  node, timeout_ms);
		goto out;
	}
	a->d = json_doc(val, vlen);
	free(val);
	cl_etcd_delete(c->e, akey, false, NULL);
	if (!a->d || a->d->docs[0].type != MSGPACK_OBJECT_MAP) {
		rc = fail(c, EXIT_FAIL_, "node %s: an answer that is not JSON", node);
		goto out;
	}
	str_copy(map_get(&a->d->docs[0], "code"), a->code, sizeof a->code);
	str_copy(map_get(&a->d->docs[0], "message"), a->message, sizeof a->message);
	a->result = map_get(&a->d->docs[0], "result");
	a->details = map_get(&a->d->docs[0], "details");
out:
	if (rc != EXIT_OK_)
		answer_free(a);
	free(json);
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

/* The node an object is assigned to (k's name), into node: true. */
static bool node_of(cli_t *c, const kind_t *k, const char *name, char *node, size_t cap)
{
	char id[NAME_CAP + 32], key[NAME_CAP + 64];
	cl_kvs_t r;
	bool found = false;

	node[0] = '\0';
	if (!k || k->cluster_place != KIND_PLACE_UNIT || cl_obj_id(k, name, id, sizeof id) != 0)
		return false;
	snprintf(key, sizeof key, CL_PREFIX_ASSIGN "%s", id);
	if (cl_etcd_get(c->e, key, &r) != 0)
		return false;
	if (r.n) {
		snprintf(node, cap, "%.*s", (int)r.kv[0].value_len, r.kv[0].value);
		found = true;
	}
	cl_kvs_free(&r);
	return found;
}

/* A call routed as docs/cluster.md says: to the node of the object it
 * names (target, of kind k; else a pod of that name), or, when it names
 * none the cluster knows (an action's id), to every live node in turn:
 * the first answer other than not_found is the answer, and lists
 * (arrays) are joined.  0 with *a the answer, or the exit code (said). */
static int cluster_call(cli_t *c, const kind_t *k, const char *target, const char *method,
			const msgpack_object *params, int timeout_ms, answer_t *a)
{
	char node[NAME_CAP];
	cl_kvs_t nodes;
	int rc = EXIT_OK_;
	bool joined = false;

	memset(a, 0, sizeof *a);
	if (target && (node_of(c, k, target, node, sizeof node) ||
		       node_of(c, tank_kinds[0], target, node, sizeof node)))
		return node_call(c, node, method, params, timeout_ms, a);
	if (cl_etcd_get_prefix(c->e, CL_PREFIX_NODES, 0, &nodes) != 0)
		return etcd_fail(c);
	if (!nodes.n) {
		cl_kvs_free(&nodes);
		return fail(c, EXIT_FAIL_, "no live node");
	}
	for (size_t i = 0; i < nodes.n; i++) {
		answer_t one;

		if ((rc = node_call(c, nodes.kv[i].key + strlen(CL_PREFIX_NODES), method, params,
				    timeout_ms, &one)) != EXIT_OK_)
			break;
		if (!one.code[0] && one.result && one.result->type == MSGPACK_OBJECT_ARRAY) {
			/* A list: every node's, joined. */
			if (answer_join(a, &one) != 0) {
				answer_free(&one);
				rc = fail(c, EXIT_FAIL_, "out of memory");
				break;
			}
			answer_free(&one);
			joined = true;
			continue;
		}
		if (joined || strcmp(one.code, api_code_name(API_NOT_FOUND)) == 0) {
			/* Not this node's: kept in case no node has it. */
			if (!joined) {
				answer_free(a);
				*a = one;
			} else {
				answer_free(&one);
			}
			continue;
		}
		/* One object's answer (or an error other than not_found). */
		answer_free(a);
		*a = one;
		break;
	}
	cl_kvs_free(&nodes);
	if (rc != EXIT_OK_)
		answer_free(a);
	return rc;
}

/* An answer's error, said as tankctl says tankd's: exit code 1. */
static int answer_fail(cli_t *c, const answer_t *a)
{
	fprintf(c->err, "tankctl: %s: %s\n", c->verb, a->message[0] ? a->message : a->code);
	if (a->details && a->details->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < a->details->via.array.size; i++) {
			const msgpack_object *d = &a->details->via.array.ptr[i];

			if (d->type == MSGPACK_OBJECT_STR)
				fprintf(c->err, "  %.*s\n", (int)d->via.str.size, d->via.str.ptr);
		}
	return EXIT_FAIL_;
}

/* A kind's verb (kinds/kind.h kind_verb_t) on the node of its object:
 * `VERB [WORD] NAME [-o yaml|json]`, for a kinded verb `[KIND] NAME` or
 * KIND/NAME.  --wait is not routed (docs/cluster.md). */
static int run_verb(cli_t *c, const kind_t *k, const kind_verb_t *v, int at, int argc, char **argv)
{
	const char *name = NULL, *fmt = NULL;
	const kind_t *obj_kind = k;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked up;
	answer_t a;
	int rc;

	if ((v->flags & KIND_VERB_KINDED) && at + 1 < argc && argv[at][0] != '-') {
		const kind_t *kk = kind_find(tank_kinds, argv[at], strlen(argv[at]));

		if (kk) {
			obj_kind = kk;
			at++;
		}
	}
	for (int i = at; i < argc; i++) {
		if ((v->flags & KIND_VERB_DOC) && strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			fmt = argv[++i];
		else if (argv[i][0] == '-')
			return fail(c, EXIT_USAGE_, "%s: not with --cluster (docs/cluster.md)", argv[i]);
		else if (!name)
			name = argv[i];
		else
			return fail(c, EXIT_USAGE_, "unexpected '%s'", argv[i]);
	}
	if (fmt && strcmp(fmt, "yaml") != 0 && strcmp(fmt, "json") != 0)
		return fail(c, EXIT_USAGE_, "-o: expected yaml or json, got %s", fmt);
	if (!name && !(v->flags & KIND_VERB_ANY))
		return fail(c, EXIT_USAGE_, "NAME is required (usage: %s%s%s %s)", c->verb,
			    kind_verb_subword(v)[0] ? " " : "", kind_verb_subword(v),
			    v->usage ? v->usage : "NAME");
	if (name && (v->flags & KIND_VERB_KINDED) && strchr(name, '/')) {
		const kind_t *kk = kind_find(tank_kinds, name, (size_t)(strchr(name, '/') - name));

		if (!kk)
			return fail(c, EXIT_USAGE_, "%s: no such kind", name);
		obj_kind = kk;
		name = strchr(name, '/') + 1;
	}
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, (name ? 1u : 0u) + ((v->flags & KIND_VERB_KINDED) ? 1u : 0u));
	if (name)
		msgpack_pack_str_with_body(&pk, name, strlen(name));
	if (v->flags & KIND_VERB_KINDED) {
		msgpack_pack_map(&pk, 1);
		msgpack_pack_str_with_body(&pk, "kind", 4);
		msgpack_pack_str_with_body(&pk, obj_kind->name, strlen(obj_kind->name));
	}
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, sb.data, sb.size, NULL) != MSGPACK_UNPACK_SUCCESS) {
		rc = fail(c, EXIT_FAIL_, "out of memory");
		goto out;
	}
	if ((rc = cluster_call(c, obj_kind, name, v->name, &up.data, 30000, &a)) != EXIT_OK_)
		goto out;
	if (a.code[0]) {
		rc = answer_fail(c, &a);
	} else if (v->flags & KIND_VERB_FOLLOW) {
		const msgpack_object *t = map_get(a.result, "text");

		if (t && t->type == MSGPACK_OBJECT_STR)
			fwrite(t->via.str.ptr, 1, t->via.str.size, c->out);
	} else if (v->flags & KIND_VERB_DOC) {
		if (a.result && mf_doc_emit(a.result, fmt && strcmp(fmt, "json") == 0 ? MF_DOC_JSON
					    : MF_DOC_YAML, c->out) != 0)
			rc = fail(c, EXIT_FAIL_, "cannot print the answer");
	} else {
		char action[64];

		str_copy(map_get(a.result, "action"), action, sizeof action);
		fprintf(c->out, "%s %s %s\n", obj_kind->name, name, action[0] ? action : "done");
	}
	answer_free(&a);
out:
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

/* params [name, {kind: k}] (status, the generic methods' shape). */
static int pack_named(msgpack_sbuffer *sb, const kind_t *k, const char *name,
		      msgpack_unpacked *up)
{
	msgpack_packer pk;

	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_str_with_body(&pk, name, strlen(name));
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str_with_body(&pk, "kind", 4);
	msgpack_pack_str_with_body(&pk, k->name, strlen(k->name));
	msgpack_unpacked_init(up);
	return msgpack_unpack_next(up, sb->data, sb->size, NULL) == MSGPACK_UNPACK_SUCCESS ? 0
	       : -ENOMEM;
}

/* `status [KIND] NAME|KIND/NAME [-o yaml|json]`: the object's whole
 * status map, from its node's tankd. */
static int do_status(cli_t *c, int argc, char **argv)
{
	const char *name = NULL, *fmt = "yaml";
	int at = 1, rc;
	const kind_t *k = kind_word(argc, argv, &at);
	msgpack_sbuffer sb;
	msgpack_unpacked up;
	answer_t a;

	for (int i = at; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			fmt = argv[++i];
		else if (argv[i][0] != '-' && !name)
			name = argv[i];
		else
			return fail(c, EXIT_USAGE_,
				    "unexpected '%s' (usage: status [KIND] NAME|KIND/NAME [-o yaml|json])",
				    argv[i]);
	}
	if (!name)
		return fail(c, EXIT_USAGE_, "usage: status [KIND] NAME|KIND/NAME [-o yaml|json]");
	if (strcmp(fmt, "yaml") != 0 && strcmp(fmt, "json") != 0)
		return fail(c, EXIT_USAGE_, "-o: expected yaml or json, got %s", fmt);
	if (!(k = named(c, name, k, &name)))
		return EXIT_USAGE_;
	msgpack_sbuffer_init(&sb);
	if (pack_named(&sb, k, name, &up) != 0) {
		rc = fail(c, EXIT_FAIL_, "out of memory");
		goto out;
	}
	if ((rc = cluster_call(c, k, name, "status", &up.data, 30000, &a)) != EXIT_OK_)
		goto out;
	if (a.code[0])
		rc = answer_fail(c, &a);
	else if (!a.result || mf_doc_emit(a.result, strcmp(fmt, "json") == 0 ? MF_DOC_JSON
					  : MF_DOC_YAML, c->out) != 0)
		rc = fail(c, EXIT_FAIL_, "cannot print the answer");
	answer_free(&a);
out:
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

/* Whether node wrote k's object name as failed (a spec its tankd
 * refused: docs/cluster.md), with its reason into why. */
static bool refused_on(cli_t *c, const kind_t *k, const char *name, const char *node,
		       char *why, size_t cap)
{
	char id[NAME_CAP + 32], key[NAME_CAP + 64], who[NAME_CAP], phase[32];
	cl_kvs_t r;
	mf_docs_t *d = NULL;
	bool refused = false;

	if (cl_obj_id(k, name, id, sizeof id) != 0)
		return false;
	snprintf(key, sizeof key, CL_PREFIX_STATUS "%s", id);
	if (cl_etcd_get(c->e, key, &r) != 0)
		return false;
	if (r.n && (d = json_doc(r.kv[0].value, r.kv[0].value_len))) {
		str_copy(map_get(&d->docs[0], "node"), who, sizeof who);
		str_copy(map_get(&d->docs[0], "phase"), phase, sizeof phase);
		if (strcmp(who, node) == 0 && strcmp(phase, "failed") == 0) {
			str_copy(map_get(&d->docs[0], "reason"), why, cap);
			refused = true;
		}
	}
	mf_docs_free(d);
	cl_kvs_free(&r);
	return refused;
}

/* `apply --wait`: each object placed on a node is asked for its status
 * on its node (routed, as `status`) every 500 ms until its kind's observe
 * says it is there (ready, or done), or failed, or the timeout.  A
 * definition is there once written.  One routed call per object not yet
 * there, each round: meant for the few objects of a manifest, not for
 * thousands. */
static int apply_wait(cli_t *c, const pod_in_t *pods, size_t n, uint64_t timeout_ms)
{
	bool *done = calloc(n + 1, sizeof *done);
	char (*why)[RC_CONV_WHY] = calloc(n + 1, sizeof *why);
	struct timespec t0, t;
	size_t left = 0;
	int rc = EXIT_OK_;

	if (!done || !why) {
		free(done);
		free(why);
		return fail(c, EXIT_FAIL_, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		done[i] = pods[i].kind->cluster_place != KIND_PLACE_UNIT || !pods[i].kind->observe;
		left += !done[i];
		snprintf(why[i], sizeof why[i], "not assigned to a node yet");
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (left && rc == EXIT_OK_) {
		for (size_t i = 0; i < n && rc == EXIT_OK_; i++) {
			const kind_t *k = pods[i].kind;
			char node[NAME_CAP];
			msgpack_sbuffer sb;
			msgpack_unpacked up;
			answer_t a;
			rc_observed_t ob;

			if (done[i] || !node_of(c, k, pods[i].name, node, sizeof node))
				continue;
			msgpack_sbuffer_init(&sb);
			if (pack_named(&sb, k, pods[i].name, &up) != 0 ||
			    node_call(c, node, "status", &up.data, 30000, &a) != EXIT_OK_) {
				/* Said; the node may be moving it: again next round. */
				msgpack_unpacked_destroy(&up);
				msgpack_sbuffer_destroy(&sb);
				continue;
			}
			/* The cluster's copy (its label names the node), not a
			 * local object of that name. */
			char mark[NAME_CAP];
			str_copy(map_get(map_get(a.result, "labels"), CL_NODE_LABEL), mark, sizeof mark);
			if (!a.code[0] && strcmp(mark, node) != 0)
				snprintf(a.code, sizeof a.code, "not_yet");
			if (a.code[0] && refused_on(c, k, pods[i].name, node, why[i], sizeof why[i])) {
				/* Not there because its node refused it. */
				rc = fail(c, EXIT_FAIL_, "%s %s failed on %s: %s", k->name,
					  pods[i].name, node, why[i]);
			} else if (!a.code[0] && a.result &&
				   k->observe(pods[i].obj, a.result, NULL, &ob) == 0) {
				snprintf(why[i], sizeof why[i], "%s", ob.why);
				if (ob.state == RC_OBS_READY || ob.state == RC_OBS_DONE) {
					done[i] = true;
					left--;
				} else if (ob.state == RC_OBS_FAILED) {
					rc = fail(c, EXIT_FAIL_, "%s %s failed on %s: %s", k->name,
						  pods[i].name, node, ob.why);
				}
			}
			answer_free(&a);
			msgpack_unpacked_destroy(&up);
			msgpack_sbuffer_destroy(&sb);
		}
		if (!left || rc != EXIT_OK_)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((uint64_t)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000) >=
		    timeout_ms) {
			for (size_t i = 0; i < n; i++)
				if (!done[i])
					fprintf(c->err, "tankctl: %s: %s %s: not ready after %" PRIu64
						" ms: %s\n", c->verb, pods[i].kind->name, pods[i].name,
						timeout_ms, why[i]);
			rc = EXIT_FAIL_;
			break;
		}
		sleep_ms(500);
	}
	free(done);
	free(why);
	return rc;
}

/* The kind verb argv names (its word, and its second word when it has
 * one): 0 with *k, *v and *at (the first argument after the words), or -1. */
static int find_verb(int argc, char **argv, const kind_t **k, const kind_verb_t **v, int *at)
{
	for (size_t ki = 0; tank_kinds[ki]; ki++)
		for (size_t i = 0; i < tank_kinds[ki]->nverbs; i++) {
			const kind_verb_t *kv = &tank_kinds[ki]->verbs[i];
			char word[64];
			const char *sub = kind_verb_subword(kv);

			if (strcmp(kind_verb_word(kv, word, sizeof word), argv[0]) != 0)
				continue;
			if (sub[0] && (argc < 2 || strcmp(argv[1], sub) != 0))
				continue;
			*k = tank_kinds[ki];
			*v = kv;
			*at = sub[0] ? 2 : 1;
			return 0;
		}
	return -1;
}

/* --- a kind's own commands, their calls routed (kind_cli_t) -------------------- */

typedef struct ccli {
	kind_cli_t cli;
	cli_t *c;
} ccli_t;

static int cc_call(const kind_cli_t *cli, const char *method, kind_pack_fn pack, void *arg,
		   int timeout_ms, kind_got_fn got, void *garg)
{
	cli_t *c = ((const ccli_t *)cli)->c;
	const kind_method_t *m = NULL;
	const kind_t *mk = NULL;
	char pod[NAME_CAP];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked up;
	answer_t a;
	int rc;

	for (size_t ki = 0; tank_kinds[ki] && !m; ki++)
		for (size_t i = 0; i < tank_kinds[ki]->nmethods; i++)
			if (strcmp(tank_kinds[ki]->methods[i].name, method) == 0) {
				m = &tank_kinds[ki]->methods[i];
				mk = tank_kinds[ki];
				break;
			}
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (pack ? pack(&pk, arg) != 0 : msgpack_pack_array(&pk, 0) != 0) {
		msgpack_sbuffer_destroy(&sb);
		return fail(c, EXIT_FAIL_, "out of memory");
	}
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, sb.data, sb.size, NULL) != MSGPACK_UNPACK_SUCCESS) {
		rc = fail(c, EXIT_FAIL_, "out of memory");
		goto out;
	}
	/* The method's own route (the pod it acts on), else every node. */
	pod[0] = '\0';
	if (m && m->route && !m->route(&up.data, pod, sizeof pod))
		pod[0] = '\0';
	(void)mk;
	if ((rc = cluster_call(c, tank_kinds[0], pod[0] ? pod : NULL, method, &up.data,
			       timeout_ms > 0 ? timeout_ms : 30000, &a)) != EXIT_OK_)
		goto out;
	if (a.code[0]) {
		rc = answer_fail(c, &a);
	} else if (got) {
		int r = got(garg, a.result);

		if (r < 0)
			rc = fail(c, EXIT_FAIL_, "%s", tank_strerror(r));
		else if (r > 0)
			rc = r;
	}
	answer_free(&a);
out:
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static int cc_emit(const kind_cli_t *cli, const msgpack_object *o, const char *format)
{
	cli_t *c = ((const ccli_t *)cli)->c;

	return mf_doc_emit(o, strcmp(format, "json") == 0 ? MF_DOC_JSON : MF_DOC_YAML, c->out)
	       ? EXIT_FAIL_ : EXIT_OK_;
}

static int cc_vsay(const kind_cli_t *cli, int code, const char *fmt, va_list ap)
{
	cli_t *c = ((const ccli_t *)cli)->c;

	fprintf(c->err, "tankctl: %s: ", c->verb);
	vfprintf(c->err, fmt, ap);
	fputc('\n', c->err);
	return code;
}

static int cc_fail(const kind_cli_t *cli, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = cc_vsay(cli, EXIT_FAIL_, fmt, ap);
	va_end(ap);
	return rc;
}

static int cc_usage(const kind_cli_t *cli, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = cc_vsay(cli, EXIT_USAGE_, fmt, ap);
	va_end(ap);
	return rc;
}

static int cc_bad_option(const kind_cli_t *cli, int o, char **argv)
{
	(void)argv;
	return cc_usage(cli, o == ':' ? "an option needs a value" : "unknown option");
}

static int cc_verb_run(const kind_cli_t *cli, int argc, char **argv)
{
	cli_t *c = ((const ccli_t *)cli)->c;

	return cl_cli_main(c->url, argc, argv, c->out, c->err);
}

static int cc_selected(const kind_cli_t *cli, const kind_t *k, const char *selector,
		       char ***names)
{
	(void)k;
	(void)selector;
	*names = NULL;
	return cc_usage(cli, "-l: not with --cluster (docs/cluster.md)");
}

static int cc_follow(const kind_cli_t *cli,
		     int (*note)(void *arg, const char *event, const msgpack_object *params),
		     void *arg)
{
	(void)note;
	(void)arg;
	return cc_fail(cli, "following is not routed with --cluster (docs/cluster.md)");
}

static int run_cmd(cli_t *c, const kind_cmd_t *cmd, int argc, char **argv)
{
	ccli_t cc = { .c = c };

	cc.cli = (kind_cli_t){ .ctx = &cc, .verb = cmd->name, .call = cc_call, .emit = cc_emit,
			       .fail = cc_fail, .usage = cc_usage, .bad_option = cc_bad_option,
			       .verb_run = cc_verb_run, .selected = cc_selected,
			       .follow = cc_follow };
	/* getopt is used by a command's run: start it afresh. */
	optind = 0;
	return cmd->run(&cc.cli, argc, argv);
}

static const kind_cmd_t *find_cmd(const char *word)
{
	for (size_t ki = 0; tank_kinds[ki]; ki++)
		for (size_t i = 0; i < tank_kinds[ki]->ncmds; i++)
			if (strcmp(tank_kinds[ki]->cmds[i].name, word) == 0)
				return &tank_kinds[ki]->cmds[i];
	return NULL;
}

static void help(FILE *fp)
{
	fprintf(fp,
		"usage: tankctl --cluster URL VERB [ARGS...]\n\n"
		"Talks to the cluster's etcd at URL (http://HOST:2379), not to a tankd\n"
		"(docs/cluster.md):\n"
		"  apply -f FILE|-          write the manifest's objects to the cluster\n"
		"  delete [KIND] NAME...|KIND/NAME...|-f FILE\n"
		"                           delete objects from the cluster\n"
		"  get [KIND] NAME|KIND/NAME [-o yaml|json]\n"
		"                           an object's spec, node and status\n"
		"  ps                       every object with its node and phase\n"
		"  nodes                    the live nodes: lease, labels, load\n"
		"  VERB ...                 a kind's verb or command (up, down, action run,\n"
		"                           workflow status, ...), run by the object's node\n");
}

int cl_cli_main(const char *url, int argc, char **argv, FILE *out, FILE *err)
{
	cli_t c = { .url = url, .verb = argc > 0 ? argv[0] : "", .out = out, .err = err };
	const kind_t *vk;
	const kind_verb_t *vv;
	const kind_cmd_t *cmd;
	int vat;
	int rc;

	if (argc < 1) {
		help(err);
		return EXIT_USAGE_;
	}
	if (strcmp(argv[0], "help") == 0 || strcmp(argv[0], "--help") == 0) {
		help(out);
		return EXIT_OK_;
	}
	if ((rc = cl_etcd_open(url, &c.e)) == -EINVAL)
		return fail(&c, EXIT_USAGE_, "--cluster: expected http://HOST:PORT, got \"%s\"", url);
	if (rc != 0)
		return fail(&c, EXIT_FAIL_, "--cluster: %s", cl_etcd_strerror(rc));
	if (strcmp(argv[0], "apply") == 0)
		rc = do_apply(&c, argc, argv);
	else if (strcmp(argv[0], "delete") == 0)
		rc = do_delete(&c, argc, argv);
	else if (strcmp(argv[0], "get") == 0)
		rc = do_get(&c, argc, argv);
	else if (strcmp(argv[0], "ps") == 0)
		rc = do_ps(&c, argc, argv);
	else if (strcmp(argv[0], "nodes") == 0)
		rc = do_nodes(&c, argc, argv);
	else if (strcmp(argv[0], "status") == 0)
		rc = do_status(&c, argc, argv);
	else if ((cmd = find_cmd(argv[0])))
		rc = run_cmd(&c, cmd, argc, argv);
	else if (find_verb(argc, argv, &vk, &vv, &vat) == 0)
		rc = run_verb(&c, vk, vv, vat, argc, argv);
	else
		rc = fail(&c, EXIT_USAGE_,
			  "not a cluster verb (apply, delete, get, ps, nodes, or a kind's verb; "
			  "docs/cluster.md)");
	cl_etcd_close(c.e);
	fflush(out);
	return rc;
}
