/* cl_cli — see cl_cli.h. */
#include "cluster/cl_cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "cluster/cl_etcd.h"
#include "cluster/cl_node.h"
#include "common/kit_errors.h"
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
	char name[NAME_CAP];
	char *json;
	size_t len;
} pod_in_t;

/* Validates every object of the manifest as a pod: 0 with pods filled,
 * or the exit code (problems said). */
static int load_pods(cli_t *c, const char *path, pod_in_t **pods, size_t *n)
{
	mf_registry_t reg;
	const mf_kind_t *podk;
	kit_errors_t errs;
	mf_docs_t *docs = NULL;
	char *text = NULL;
	size_t len = 0;
	int rc = EXIT_OK_;

	*pods = NULL;
	*n = 0;
	memset(&reg, 0, sizeof reg);
	kind_registry(tank_kinds, &reg);
	podk = mf_lookup(&reg, "Pod", 3);
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
		const char *name = NULL;
		void *obj = NULL;
		char at[32];

		snprintf(at, sizeof at, "document %u", docs->index[i]);
		if (o->type != MSGPACK_OBJECT_MAP) {
			kit_errors_add(&errs, "%s: expected a pod (a map)", at);
			continue;
		}
		if (!(k = mf_kind_of(&reg, o, docs->zone, &rest, at, &errs)))
			continue;
		if (k != podk) {
			kit_errors_add(&errs, "%s: kind %s: only pods go to a cluster (docs/cluster.md)",
				       at, k->name);
			continue;
		}
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
		if (tank_map_get(&seen, name)) {
			kit_errors_add(&errs, "%s: pod %s is named twice in the manifest", at, name);
			k->free_obj(obj);
			continue;
		}
		tank_map_put(&seen, name, (void *)1, NULL);
		snprintf((*pods)[*n].name, NAME_CAP, "%s", name);
		k->free_obj(obj);
		/* Stored as written (kind, labels and node_selector included),
		 * on one line of JSON. */
		if (mf_doc_emit_string(o, MF_DOC_JSON_LINE, &(*pods)[*n].json, &(*pods)[*n].len) != 0) {
			kit_errors_add(&errs, "%s: cannot be written as JSON", at);
			continue;
		}
		(*n)++;
	}
	if (errs.count == 0)
		goto out;
said:
	for (size_t i = 0; i < errs.stored; i++)
		fprintf(c->err, "tankctl: %s: %s\n", c->verb, errs.msgs[i]);
	rc = EXIT_FAIL_;
	for (size_t i = 0; *pods && i < *n; i++)
		free((*pods)[i].json);
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
	for (size_t i = 0; i < n; i++)
		free(p[i].json);
	free(p);
}

static int do_apply(cli_t *c, int argc, char **argv)
{
	const char *file = NULL;
	pod_in_t *pods;
	size_t n;
	int rc;

	for (int i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--filename") == 0) && i + 1 < argc)
			file = argv[++i];
		else
			return fail(c, EXIT_USAGE_, "unexpected '%s' (usage: apply -f FILE|-)", argv[i]);
	}
	if (!file)
		return fail(c, EXIT_USAGE_, "-f FILE is required");
	if ((rc = load_pods(c, file, &pods, &n)) != EXIT_OK_)
		return rc;
	/* What is there now, in one read; then the changes in transactions
	 * of TXN_OPS puts (an apply of 3,000 pods is 47 requests, not 6,000). */
	cl_kvs_t now;
	tank_map_t had;
	const char **what = calloc(n + 1, sizeof *what);
	char (*keys)[NAME_CAP + 32] = calloc(n + 1, sizeof *keys);
	cl_op_t *ops = calloc(n + 1, sizeof *ops);
	size_t nops = 0;

	tank_map_init(&had);
	if (!what || !keys || !ops) {
		rc = fail(c, EXIT_FAIL_, "out of memory");
		goto out;
	}
	if (cl_etcd_get_prefix(c->e, CL_PREFIX_PODS, 0, &now) != 0) {
		rc = etcd_fail(c);
		goto out;
	}
	for (size_t i = 0; i < now.n; i++)
		tank_map_put(&had, now.kv[i].key + strlen(CL_PREFIX_PODS), &now.kv[i], NULL);
	for (size_t i = 0; i < n; i++) {
		cl_kv_t *kv = tank_map_get(&had, pods[i].name);

		if (kv && kv->value_len == pods[i].len && memcmp(kv->value, pods[i].json, pods[i].len) == 0) {
			what[i] = "unchanged";
			continue;
		}
		what[i] = kv ? "configured" : "created";
		snprintf(keys[nops], sizeof keys[nops], CL_PREFIX_PODS "%s", pods[i].name);
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
			fprintf(c->out, "pod %s %s\n", pods[i].name, what[i]);
	cl_kvs_free(&now);
out:
	tank_map_destroy(&had);
	free(what);
	free(keys);
	free(ops);
	pods_free(pods, n);
	return rc;
}

/* --- delete ---------------------------------------------------------------- */

static int delete_one(cli_t *c, const char *name)
{
	char k1[NAME_CAP + 32], k2[NAME_CAP + 32], k3[NAME_CAP + 32];
	cl_cmp_t cmp = { .key = k1, .target = CL_CMP_CREATE, .result = CL_GT, .num = 0 };
	cl_op_t ops[3] = { { .kind = CL_OP_DELETE, .key = k1 }, { .kind = CL_OP_DELETE, .key = k2 },
			   { .kind = CL_OP_DELETE, .key = k3 } };
	bool ok = false;

	snprintf(k1, sizeof k1, CL_PREFIX_PODS "%s", name);
	snprintf(k2, sizeof k2, CL_PREFIX_ASSIGN "%s", name);
	snprintf(k3, sizeof k3, CL_PREFIX_STATUS "%s", name);
	/* The spec, its assignment and its status at once, if it exists. */
	if (cl_etcd_txn(c->e, &cmp, 1, ops, 3, NULL, 0, &ok, NULL, NULL) != 0)
		return etcd_fail(c);
	if (!ok)
		return fail(c, EXIT_FAIL_, "pod %s: not found", name);
	fprintf(c->out, "pod %s deleted\n", name);
	return EXIT_OK_;
}

static int do_delete(cli_t *c, int argc, char **argv)
{
	int rc = EXIT_OK_, named = 0;

	for (int i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--filename") == 0) && i + 1 < argc) {
			pod_in_t *pods;
			size_t n;
			int r = load_pods(c, argv[++i], &pods, &n);

			if (r != EXIT_OK_)
				return r;
			for (size_t j = 0; j < n; j++, named++)
				if ((r = delete_one(c, pods[j].name)) != EXIT_OK_)
					rc = r;
			pods_free(pods, n);
		} else if (argv[i][0] == '-') {
			return fail(c, EXIT_USAGE_, "unknown option '%s' (usage: delete NAME...|-f FILE)",
				    argv[i]);
		} else {
			int r = delete_one(c, argv[i]);

			named++;
			if (r != EXIT_OK_)
				rc = r;
		}
	}
	if (!named)
		return fail(c, EXIT_USAGE_, "no pod named (usage: delete NAME...|-f FILE)");
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
	if (cl_etcd_get_range(c->e, CL_PREFIX_ASSIGN, "/tank/status0", 0, &v->all) != 0)
		return etcd_fail(c);
	if (!(v->pods = calloc(v->all.n + 1, sizeof *v->pods)))
		return fail(c, EXIT_FAIL_, "out of memory");
	for (size_t i = 0; i < v->all.n; i++) {
		cl_kv_t *kv = &v->all.kv[i];
		const char *k = kv->key;

		if (strncmp(k, CL_PREFIX_PODS, strlen(CL_PREFIX_PODS)) == 0)
			v->pods[v->npods++] = kv;
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
	for (size_t i = 0; i < v.npods; i++) {
		const char *name = v.pods[i]->key + strlen(CL_PREFIX_PODS);
		cl_kv_t *a = tank_map_get(&v.assign, name), *s = tank_map_get(&v.status, name);
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
				snprintf(ready, sizeof ready, "%s",
					 rd && rd->type == MSGPACK_OBJECT_BOOLEAN && rd->via.boolean ? "yes" : "no");
				if (rs && rs->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
					snprintf(restarts, sizeof restarts, "%" PRIu64, rs->via.u64);
			}
			mf_docs_free(d);
		}
		if (a && !tank_map_get(&v.nodes, a->value))
			snprintf(reason, sizeof reason, "node %s is gone: moving", a->value);
		const char *row[] = { name, node, phase, ready, restarts, reason };
		table_add(&t, row);
	}
	table_print(&t, c->out);
	view_free(&v);
	return EXIT_OK_;
}

static int do_get(cli_t *c, int argc, char **argv)
{
	const char *name = NULL, *fmt = "yaml";
	char key[NAME_CAP + 32];
	cl_kvs_t r, a, s;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	mf_docs_t *spec, *st = NULL;
	int rc = EXIT_OK_;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			fmt = argv[++i];
		else if (strncmp(argv[i], "-o", 2) == 0 && argv[i][2])
			fmt = argv[i] + 2;
		else if (argv[i][0] != '-' && !name)
			name = argv[i];
		else
			return fail(c, EXIT_USAGE_, "unexpected '%s' (usage: get NAME [-o yaml|json])",
				    argv[i]);
	}
	if (!name)
		return fail(c, EXIT_USAGE_, "usage: get NAME [-o yaml|json]");
	if (strcmp(fmt, "yaml") != 0 && strcmp(fmt, "json") != 0)
		return fail(c, EXIT_USAGE_, "-o: expected yaml or json, got %s", fmt);
	snprintf(key, sizeof key, CL_PREFIX_PODS "%s", name);
	if (cl_etcd_get(c->e, key, &r) != 0)
		return etcd_fail(c);
	if (!r.n) {
		cl_kvs_free(&r);
		return fail(c, EXIT_FAIL_, "pod %s: not found", name);
	}
	snprintf(key, sizeof key, CL_PREFIX_ASSIGN "%s", name);
	if (cl_etcd_get(c->e, key, &a) != 0) {
		cl_kvs_free(&r);
		return etcd_fail(c);
	}
	snprintf(key, sizeof key, CL_PREFIX_STATUS "%s", name);
	if (cl_etcd_get(c->e, key, &s) != 0) {
		cl_kvs_free(&r);
		cl_kvs_free(&a);
		return etcd_fail(c);
	}
	spec = json_doc(r.kv[0].value, r.kv[0].value_len);
	if (s.n)
		st = json_doc(s.kv[0].value, s.kv[0].value_len);
	if (!spec || spec->docs[0].type != MSGPACK_OBJECT_MAP) {
		rc = fail(c, EXIT_FAIL_, "pod %s: the stored spec is not a JSON object", name);
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
			rc = fail(c, EXIT_FAIL_, "cannot print pod %s", name);
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

static void help(FILE *fp)
{
	fprintf(fp,
		"usage: tankctl --cluster URL VERB [ARGS...]\n\n"
		"Talks to the cluster's etcd at URL (http://HOST:2379), not to a tankd\n"
		"(docs/cluster.md):\n"
		"  apply -f FILE|-          write the manifest's pods to the cluster\n"
		"  delete NAME...|-f FILE   delete pods from the cluster\n"
		"  get NAME [-o yaml|json]  a pod's spec, node and status\n"
		"  ps                       every pod with its node and phase\n"
		"  nodes                    the live nodes: lease, labels, load\n");
}

int cl_cli_main(const char *url, int argc, char **argv, FILE *out, FILE *err)
{
	cli_t c = { .verb = argc > 0 ? argv[0] : "", .out = out, .err = err };
	int rc;

	if (argc < 1) {
		help(err);
		return EXIT_USAGE_;
	}
	if (strcmp(argv[0], "help") == 0 || strcmp(argv[0], "--help") == 0) {
		help(out);
		return EXIT_OK_;
	}
	if (cl_etcd_open(url, &c.e) != 0)
		return fail(&c, EXIT_USAGE_, "--cluster: expected http://HOST:PORT, got \"%s\"", url);
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
	else
		rc = fail(&c, EXIT_USAGE_,
			  "not a cluster verb (apply, delete, get, ps, nodes; docs/cluster.md)");
	cl_etcd_close(c.e);
	fflush(out);
	return rc;
}
