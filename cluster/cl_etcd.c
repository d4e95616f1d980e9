/*
 * cl_etcd — etcd v3 over its JSON gateway.  See cl_etcd.h for the
 * contract.  Requests are built with obs_buf (small, known shapes);
 * answers are parsed with libfyaml in JSON mode.
 */
#include "cluster/cl_etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <libfyaml.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tank_dl.h"
#include "common/tank_err.h"
#include "obs/obs_buf.h"

struct cl_etcd {
	char *base;            /* "http://host:port", no trailing slash */
	const tank_curl_t *cu; /* libcurl (common/tank_dl.h) */
	CURL *h;
	long timeout_ms;
	atomic_int aborted;
	char err[256];
	obs_buf_t in;          /* the answer being received */
	/* watch state, used by the write callback */
	cl_watch_fn wfn;
	void *wud;
	int wstop;             /* what fn returned, or an error of ours */
	int64_t wcompacted;
};

/* --- base64 (RFC 4648, with padding): etcd's JSON carries bytes so ------- */

static const char b64_alpha[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64_put(obs_buf_t *b, const void *data, size_t n)
{
	const unsigned char *p = data;
	char q[4];

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		size_t k = n - i;

		if (k > 1)
			v |= (uint32_t)p[i + 1] << 8;
		if (k > 2)
			v |= p[i + 2];
		q[0] = b64_alpha[(v >> 18) & 63];
		q[1] = b64_alpha[(v >> 12) & 63];
		q[2] = k > 1 ? b64_alpha[(v >> 6) & 63] : '=';
		q[3] = k > 2 ? b64_alpha[v & 63] : '=';
		obs_buf_put(b, q, 4);
	}
}

static int b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Decodes s (n chars) into a fresh NUL-terminated buffer: 0, -ENOMEM, or
 * TANK_ECORRUPT when s is not base64. */
static int b64_get(const char *s, size_t n, char **out, size_t *outlen)
{
	char *d = malloc(n / 4 * 3 + 4);
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;

	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int v;

		if (s[i] == '=')
			break;
		if ((v = b64_val((unsigned char)s[i])) < 0) {
			free(d);
			return TANK_ECORRUPT;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			d[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	d[o] = '\0';
	*out = d;
	*outlen = o;
	return 0;
}

/* --- errors -------------------------------------------------------------- */

static int fail(cl_etcd_t *e, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(cl_etcd_t *e, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->err, sizeof e->err, fmt, ap);
	va_end(ap);
	return rc;
}

/* --- JSON reading ------------------------------------------------------- */

static struct fy_document *jparse(const char *s, size_t n)
{
	struct fy_parse_cfg cfg;

	memset(&cfg, 0, sizeof cfg);
	cfg.flags = FYPCF_QUIET | FYPCF_JSON_FORCE | FYPCF_DEFAULT_VERSION_1_2;
	return fy_document_build_from_string(&cfg, s, n);
}

static struct fy_node *jget(struct fy_node *m, const char *k)
{
	if (!m || !fy_node_is_mapping(m))
		return NULL;
	return fy_node_mapping_lookup_by_string(m, k, FY_NT);
}

/* An int64 field: etcd writes them as strings, a few (code) as numbers;
 * a missing field is 0, as proto3 omits zeros. */
static int64_t jint(struct fy_node *m, const char *k)
{
	struct fy_node *n = jget(m, k);
	const char *s;
	size_t len;
	char tmp[32];

	if (!n || !fy_node_is_scalar(n) || !(s = fy_node_get_scalar(n, &len)) ||
	    len == 0 || len >= sizeof tmp)
		return 0;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	return strtoll(tmp, NULL, 10);
}

static bool jbool(struct fy_node *m, const char *k)
{
	struct fy_node *n = jget(m, k);
	const char *s;
	size_t len;

	if (!n || !fy_node_is_scalar(n) || !(s = fy_node_get_scalar(n, &len)))
		return false;
	return len == 4 && memcmp(s, "true", 4) == 0;
}

static const char *jstr(struct fy_node *m, const char *k, size_t *len)
{
	struct fy_node *n = jget(m, k);

	*len = 0;
	if (!n || !fy_node_is_scalar(n))
		return NULL;
	return fy_node_get_scalar(n, len);
}

/* A base64 field decoded into *out (an empty string when missing). */
static int jb64(struct fy_node *m, const char *k, char **out, size_t *len)
{
	size_t n;
	const char *s = jstr(m, k, &n);

	return b64_get(s ? s : "", s ? n : 0, out, len);
}

static int kv_read(struct fy_node *n, cl_kv_t *kv)
{
	size_t klen;
	int rc;

	memset(kv, 0, sizeof *kv);
	if ((rc = jb64(n, "key", &kv->key, &klen)) != 0)
		return rc;
	if ((rc = jb64(n, "value", &kv->value, &kv->value_len)) != 0) {
		free(kv->key);
		kv->key = NULL;
		return rc;
	}
	kv->create_rev = jint(n, "create_revision");
	kv->mod_rev = jint(n, "mod_revision");
	kv->version = jint(n, "version");
	kv->lease = jint(n, "lease");
	return 0;
}

static void kv_free(cl_kv_t *kv)
{
	free(kv->key);
	free(kv->value);
}

void cl_kvs_free(cl_kvs_t *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		kv_free(&r->kv[i]);
	free(r->kv);
	memset(r, 0, sizeof *r);
}

/* Appends the "kvs" array of range answer m to out. */
static int kvs_append(struct fy_node *m, cl_kvs_t *out)
{
	struct fy_node *arr = jget(m, "kvs"), *it;
	void *iter = NULL;
	int cnt, rc;
	cl_kv_t *grown;

	if (!arr || !fy_node_is_sequence(arr))
		return 0;
	cnt = fy_node_sequence_item_count(arr);
	if (cnt <= 0)
		return 0;
	if (!(grown = realloc(out->kv, (out->n + (size_t)cnt) * sizeof *grown)))
		return -ENOMEM;
	out->kv = grown;
	while ((it = fy_node_sequence_iterate(arr, &iter)) != NULL) {
		if ((rc = kv_read(it, &out->kv[out->n])) != 0)
			return rc;
		out->n++;
	}
	return 0;
}

/* --- transport ---------------------------------------------------------- */

int cl_etcd_open(const char *url, cl_etcd_t **out)
{
	cl_etcd_t *e;
	const tank_curl_t *cu;
	size_t n;
	int rc;

	if (!url || strncmp(url, "http://", 7) != 0 || !url[7])
		return -EINVAL;
	if ((rc = tank_curl_load(&cu, NULL)) < 0)
		return rc;
	if (!(e = calloc(1, sizeof *e)))
		return -ENOMEM;
	e->cu = cu;
	if (!(e->base = strdup(url)) || !(e->h = cu->easy_init())) {
		free(e->base);
		free(e);
		return -ENOMEM;
	}
	n = strlen(e->base);
	while (n > 7 && e->base[n - 1] == '/')
		e->base[--n] = '\0';
	e->timeout_ms = 5000;
	*out = e;
	return 0;
}

const char *cl_etcd_strerror(int rc)
{
	const char *why = NULL;

	if (rc == -ELIBACC)
		(void)tank_curl_load(NULL, &why);
	return why && *why ? why : tank_strerror(rc);
}

void cl_etcd_close(cl_etcd_t *e)
{
	if (!e)
		return;
	e->cu->easy_cleanup(e->h);
	obs_buf_free(&e->in);
	free(e->base);
	free(e);
}

void cl_etcd_set_timeout(cl_etcd_t *e, long ms)
{
	e->timeout_ms = ms > 0 ? ms : 5000;
}

const char *cl_etcd_errmsg(const cl_etcd_t *e)
{
	return e->err;
}

void cl_etcd_abort(cl_etcd_t *e)
{
	atomic_store(&e->aborted, 1);
}

void cl_etcd_rearm(cl_etcd_t *e)
{
	atomic_store(&e->aborted, 0);
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
	cl_etcd_t *e = ud;

	obs_buf_put(&e->in, p, sz * nm);
	return e->in.oom ? 0 : sz * nm;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	cl_etcd_t *e = ud;

	(void)a, (void)b, (void)c, (void)d;
	return atomic_load(&e->aborted) ? 1 : 0;
}

static int curl_errno(cl_etcd_t *e, CURLcode cc, const char *what)
{
	int rc;

	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		rc = -ECONNREFUSED;
		break;
	case CURLE_OPERATION_TIMEDOUT:
		rc = -ETIMEDOUT;
		break;
	case CURLE_ABORTED_BY_CALLBACK:
		rc = -ECANCELED;
		break;
	case CURLE_OUT_OF_MEMORY:
		rc = -ENOMEM;
		break;
	default:
		rc = -ECONNRESET;
	}
	return fail(e, rc, "etcd %s%s: %s", e->base, what, e->cu->easy_strerror(cc));
}

/* Sets up one POST of body to path; the answer goes through wfn. */
static void setup(cl_etcd_t *e, const char *url, const obs_buf_t *body,
		  curl_write_callback wfn, long timeout_ms, struct curl_slist *hdr)
{
	e->cu->easy_reset(e->h);
	e->cu->easy_setopt(e->h, CURLOPT_URL, url);
	e->cu->easy_setopt(e->h, CURLOPT_POST, 1L);
	e->cu->easy_setopt(e->h, CURLOPT_POSTFIELDS, body->p ? body->p : "");
	e->cu->easy_setopt(e->h, CURLOPT_POSTFIELDSIZE, (long)body->len);
	e->cu->easy_setopt(e->h, CURLOPT_HTTPHEADER, hdr);
	e->cu->easy_setopt(e->h, CURLOPT_WRITEFUNCTION, wfn);
	e->cu->easy_setopt(e->h, CURLOPT_WRITEDATA, e);
	e->cu->easy_setopt(e->h, CURLOPT_NOPROGRESS, 0L);
	e->cu->easy_setopt(e->h, CURLOPT_XFERINFOFUNCTION, on_progress);
	e->cu->easy_setopt(e->h, CURLOPT_XFERINFODATA, e);
	/* Threads: no SIGALRM for timeouts. */
	e->cu->easy_setopt(e->h, CURLOPT_NOSIGNAL, 1L);
	e->cu->easy_setopt(e->h, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms < 3000 ? e->timeout_ms : 3000L);
	e->cu->easy_setopt(e->h, CURLOPT_TIMEOUT_MS, timeout_ms);
	e->cu->easy_setopt(e->h, CURLOPT_TCP_KEEPALIVE, 1L);
	e->cu->easy_setopt(e->h, CURLOPT_TCP_KEEPIDLE, 5L);
	e->cu->easy_setopt(e->h, CURLOPT_TCP_KEEPINTVL, 2L);
}

/* The error an answer carries ({"error", "message", "code"}), as a value:
 * gRPC codes 3 (invalid argument) and 5 (not found) have their own; an
 * answer without a header nor an error is TANK_ECORRUPT. */
static int answer_error(cl_etcd_t *e, struct fy_node *root, const char *path)
{
	size_t n;
	const char *msg;
	int64_t code;

	if (!jget(root, "error") && !jget(root, "code"))
		return 0;
	code = jint(root, "code");
	if (!(msg = jstr(root, "message", &n)) && !(msg = jstr(root, "error", &n)))
		msg = "?", n = 1;
	return fail(e, code == 5 ? TANK_ENOTFOUND : code == 3 ? TANK_EINVALID :
		       code == 11 ? -ERANGE : -EIO,
		    "etcd %s: %.*s", path, (int)(n > 200 ? 200 : n), msg);
}

/* POSTs body to path and parses the answer into *doc (owned by the
 * caller: fy_document_destroy).  e->in holds the text *doc was built from
 * until the next request. */
static int request(cl_etcd_t *e, const char *path, obs_buf_t *body, struct fy_document **doc)
{
	char url[512];
	struct curl_slist *hdr = NULL;
	CURLcode cc;
	long status = 0;
	int rc;

	*doc = NULL;
	e->err[0] = '\0';
	if (body->oom)
		return fail(e, -ENOMEM, "etcd %s: out of memory", path);
	if (atomic_load(&e->aborted))
		return fail(e, -ECANCELED, "etcd %s: aborted", path);
	snprintf(url, sizeof url, "%s%s", e->base, path);
	e->in.len = 0;
	e->in.oom = false;
	hdr = e->cu->slist_append(NULL, "Content-Type: application/json");
	setup(e, url, body, on_body, e->timeout_ms, hdr);
	cc = e->cu->easy_perform(e->h);
	e->cu->slist_free_all(hdr);
	if (cc != CURLE_OK)
		return curl_errno(e, cc, path);
	e->cu->easy_getinfo(e->h, CURLINFO_RESPONSE_CODE, &status);
	if (e->in.oom)
		return fail(e, -ENOMEM, "etcd %s: out of memory", path);
	if (!(*doc = jparse(e->in.p ? e->in.p : "", e->in.len)))
		return fail(e, TANK_ECORRUPT, "etcd %s: HTTP %ld, an answer that is not JSON (%zu bytes)",
			    path, status, e->in.len);
	if ((rc = answer_error(e, fy_document_root(*doc), path)) != 0 ||
	    (status != 200 && (rc = fail(e, -EIO, "etcd %s: HTTP %ld", path, status)))) {
		fy_document_destroy(*doc);
		*doc = NULL;
		return rc;
	}
	return 0;
}

/* --- JSON writing: the few shapes we send -------------------------------- */

static void jkey(obs_buf_t *b, const char *name, const void *data, size_t n)
{
	obs_buf_printf(b, "\"%s\":\"", name);
	b64_put(b, data, n);
	obs_buf_puts(b, "\"");
}

/* The smallest key greater than every key starting with prefix: the
 * prefix with its last byte below 0xff incremented (etcd's rule); "\0"
 * (every key) when there is none. */
static void jrange_end(obs_buf_t *b, const char *prefix)
{
	size_t n = strlen(prefix);
	char *end = n ? malloc(n) : NULL;

	if (n && !end) {
		b->oom = true;
		return;
	}
	if (n)
		memcpy(end, prefix, n);
	while (n > 0 && (unsigned char)end[n - 1] == 0xff)
		n--;
	if (n == 0) {
		jkey(b, "range_end", "", 1);
	} else {
		end[n - 1]++;
		jkey(b, "range_end", end, n);
	}
	free(end);
}

/* --- kv ------------------------------------------------------------------ */

/* The end of a read or a watch: none (one key), a prefix's, or given. */
static void jend(obs_buf_t *b, const char *key, bool prefix, const char *end)
{
	if (end) {
		obs_buf_puts(b, ",");
		jkey(b, "range_end", end, strlen(end));
	} else if (prefix) {
		obs_buf_puts(b, ",");
		jrange_end(b, key);
	}
}

static int range(cl_etcd_t *e, const char *key, bool prefix, const char *end, int64_t rev,
		 cl_kvs_t *out)
{
	obs_buf_t b = { 0 };
	struct fy_document *d;
	struct fy_node *root;
	int rc;

	memset(out, 0, sizeof *out);
	obs_buf_puts(&b, "{");
	jkey(&b, "key", key, strlen(key));
	jend(&b, key, prefix, end);
	if (rev > 0)
		obs_buf_printf(&b, ",\"revision\":\"%" PRId64 "\"", rev);
	obs_buf_puts(&b, "}");
	rc = request(e, "/v3/kv/range", &b, &d);
	obs_buf_free(&b);
	if (rc)
		return rc;
	root = fy_document_root(d);
	out->revision = jint(jget(root, "header"), "revision");
	rc = kvs_append(root, out);
	fy_document_destroy(d);
	if (rc) {
		cl_kvs_free(out);
		return fail(e, rc, "etcd /v3/kv/range: %s", tank_strerror(rc));
	}
	return 0;
}

int cl_etcd_get(cl_etcd_t *e, const char *key, cl_kvs_t *out)
{
	return range(e, key, false, NULL, 0, out);
}

int cl_etcd_get_prefix(cl_etcd_t *e, const char *prefix, int64_t rev, cl_kvs_t *out)
{
	return range(e, prefix, true, NULL, rev, out);
}

int cl_etcd_get_range(cl_etcd_t *e, const char *key, const char *end, int64_t rev,
		      cl_kvs_t *out)
{
	return range(e, key, false, end, rev, out);
}

int cl_etcd_put(cl_etcd_t *e, const char *key, const void *value, size_t len,
		int64_t lease, int64_t *rev)
{
	obs_buf_t b = { 0 };
	struct fy_document *d;
	int rc;

	obs_buf_puts(&b, "{");
	jkey(&b, "key", key, strlen(key));
	obs_buf_puts(&b, ",");
	jkey(&b, "value", value, len);
	if (lease)
		obs_buf_printf(&b, ",\"lease\":\"%" PRId64 "\"", lease);
	obs_buf_puts(&b, "}");
	rc = request(e, "/v3/kv/put", &b, &d);
	obs_buf_free(&b);
	if (rc)
		return rc;
	if (rev)
		*rev = jint(jget(fy_document_root(d), "header"), "revision");
	fy_document_destroy(d);
	return 0;
}

int cl_etcd_delete(cl_etcd_t *e, const char *key, bool prefix, int64_t *deleted)
{
	obs_buf_t b = { 0 };
	struct fy_document *d;
	int rc;

	obs_buf_puts(&b, "{");
	jkey(&b, "key", key, strlen(key));
	if (prefix) {
		obs_buf_puts(&b, ",");
		jrange_end(&b, key);
	}
	obs_buf_puts(&b, "}");
	rc = request(e, "/v3/kv/deleterange", &b, &d);
	obs_buf_free(&b);
	if (rc)
		return rc;
	if (deleted)
		*deleted = jint(fy_document_root(d), "deleted");
	fy_document_destroy(d);
	return 0;
}

int cl_etcd_compact(cl_etcd_t *e, int64_t rev)
{
	obs_buf_t b = { 0 };
	struct fy_document *d;
	int rc;

	obs_buf_printf(&b, "{\"revision\":\"%" PRId64 "\",\"physical\":true}", rev);
	rc = request(e, "/v3/kv/compaction", &b, &d);
	obs_buf_free(&b);
	if (rc)
		return rc;
	fy_document_destroy(d);
	return 0;
}

/* --- txn ----------------------------------------------------------------- */

static void jops(obs_buf_t *b, const char *name, const cl_op_t *op, size_t n)
{
	obs_buf_printf(b, "\"%s\":[", name);
	for (size_t i = 0; i < n; i++) {
		const char *what = op[i].kind == CL_OP_PUT ? "request_put" :
				   op[i].kind == CL_OP_DELETE ? "request_delete_range" :
				   "request_range";

		obs_buf_printf(b, "%s{\"%s\":{", i ? "," : "", what);
		jkey(b, "key", op[i].key, strlen(op[i].key));
		if (op[i].kind == CL_OP_PUT) {
			obs_buf_puts(b, ",");
			jkey(b, "value", op[i].value, op[i].value_len);
			if (op[i].lease)
				obs_buf_printf(b, ",\"lease\":\"%" PRId64 "\"", op[i].lease);
		}
		obs_buf_puts(b, "}}");
	}
	obs_buf_puts(b, "]");
}

int cl_etcd_txn(cl_etcd_t *e, const cl_cmp_t *cmp, size_t ncmp,
		const cl_op_t *then, size_t nthen,
		const cl_op_t *otherwise, size_t notherwise,
		bool *succeeded, cl_kvs_t *got, int64_t *rev)
{
	static const char *const targets[] = { "CREATE", "MOD", "VERSION", "VALUE" };
	static const char *const fields[] = { "create_revision", "mod_revision", "version", "value" };
	static const char *const results[] = { "EQUAL", "NOT_EQUAL", "LESS", "GREATER" };
	obs_buf_t b = { 0 };
	struct fy_document *d;
	struct fy_node *root, *resps, *it;
	void *iter = NULL;
	int rc = 0;

	if (got)
		memset(got, 0, sizeof *got);
	obs_buf_puts(&b, "{\"compare\":[");
	for (size_t i = 0; i < ncmp; i++) {
		obs_buf_printf(&b, "%s{", i ? "," : "");
		jkey(&b, "key", cmp[i].key, strlen(cmp[i].key));
		obs_buf_printf(&b, ",\"target\":\"%s\",\"result\":\"%s\",",
			       targets[cmp[i].target], results[cmp[i].result]);
		if (cmp[i].target == CL_CMP_VALUE)
			jkey(&b, "value", cmp[i].value, cmp[i].value_len);
		else
			obs_buf_printf(&b, "\"%s\":\"%" PRId64 "\"", fields[cmp[i].target], cmp[i].num);
		obs_buf_puts(&b, "}");
	}
	obs_buf_puts(&b, "],");
	jops(&b, "success", then, nthen);
	obs_buf_puts(&b, ",");
	jops(&b, "failure", otherwise, notherwise);
	obs_buf_puts(&b, "}");
	rc = request(e, "/v3/kv/txn", &b, &d);
	obs_buf_free(&b);
	if (rc)
		return rc;
	root = fy_document_root(d);
	*succeeded = jbool(root, "succeeded");
	if (rev)
		*rev = jint(jget(root, "header"), "revision");
	if (got && (resps = jget(root, "responses")) && fy_node_is_sequence(resps)) {
		got->revision = jint(jget(root, "header"), "revision");
		while (!rc && (it = fy_node_sequence_iterate(resps, &iter)) != NULL) {
			struct fy_node *r = jget(it, "response_range");

			if (r)
				rc = kvs_append(r, got);
		}
		if (rc) {
			cl_kvs_free(got);
			fail(e, rc, "etcd /v3/kv/txn: %s", tank_strerror(rc));
		}
	}
	fy_document_destroy(d);
	return rc;
}

/* --- leases -------------------------------------------------------------- */

int cl_etcd_lease_grant(cl_etcd_t *e, int64_t ttl, int64_t *id, int64_t *granted)
{
	obs_buf_t b = { 0 };
	struct fy_document *d;
	int rc;

	obs_buf_printf(&b, "{\"TTL\":\"%" PRId64 "\"}", ttl);
	rc = request(e, "/v3/lease/grant", &b, &d);
	obs_buf_free(&b);
	if (rc)
		return rc;
	*id = jint(fy_document_root(d), "ID");
	if (granted)
		*granted = jint(fy_document_root(d), "TTL");
	fy_document_destroy(d);
	if (*id == 0)
		return fail(e, TANK_ECORRUPT, "etcd /v3/lease/grant: no lease ID in the answer");
	return 0;
}

int cl_etcd_lease_keepalive(cl_etcd_t *e, int64_t id, int64_t *ttl)
{
	obs_buf_t b = { 0 };
	struct fy_document *d;
	int64_t left;
	int rc;

	/* A streaming RPC in gRPC; through the gateway one request body gives
	 * one {"result": …} answer, and the stream ends with the body. */
	obs_buf_printf(&b, "{\"ID\":\"%" PRId64 "\"}", id);
	rc = request(e, "/v3/lease/keepalive", &b, &d);
	obs_buf_free(&b);
	if (rc)
		return rc;
	left = jint(jget(fy_document_root(d), "result"), "TTL");
	fy_document_destroy(d);
	if (ttl)
		*ttl = left;
	/* etcd answers an expired lease with TTL 0 (omitted), not an error. */
	if (left <= 0)
		return fail(e, TANK_ENOTFOUND, "etcd lease %" PRIx64 ": expired", (uint64_t)id);
	return 0;
}

int cl_etcd_lease_ttl(cl_etcd_t *e, int64_t id, int64_t *left, int64_t *granted)
{
	obs_buf_t b = { 0 };
	struct fy_document *d;
	int64_t l;
	int rc;

	obs_buf_printf(&b, "{\"ID\":\"%" PRId64 "\"}", id);
	rc = request(e, "/v3/lease/timetolive", &b, &d);
	obs_buf_free(&b);
	if (rc)
		return rc;
	l = jint(fy_document_root(d), "TTL");
	if (granted)
		*granted = jint(fy_document_root(d), "grantedTTL");
	fy_document_destroy(d);
	*left = l;
	/* A lease that is gone answers TTL -1. */
	if (l < 0)
		return fail(e, TANK_ENOTFOUND, "etcd lease %" PRIx64 ": gone", (uint64_t)id);
	return 0;
}

int cl_etcd_lease_revoke(cl_etcd_t *e, int64_t id)
{
	obs_buf_t b = { 0 };
	struct fy_document *d;
	int rc;

	obs_buf_printf(&b, "{\"ID\":\"%" PRId64 "\"}", id);
	rc = request(e, "/v3/lease/revoke", &b, &d);
	obs_buf_free(&b);
	if (rc)
		return rc;
	fy_document_destroy(d);
	return 0;
}

/* --- watch --------------------------------------------------------------- */

/* One message of the watch stream ({"result": {...}}): events to fn, a
 * cancel to wstop.  Returns nonzero to stop. */
static int watch_message(cl_etcd_t *e, const char *s, size_t n)
{
	struct fy_document *d = jparse(s, n);
	struct fy_node *res, *evs, *it;
	cl_event_t *ev = NULL;
	size_t nev = 0;
	void *iter = NULL;
	int64_t revision;
	int rc = 0, cnt;

	if (!d)
		return e->wstop = fail(e, TANK_ECORRUPT, "etcd /v3/watch: a message that is not JSON");
	if ((rc = answer_error(e, fy_document_root(d), "/v3/watch")) != 0) {
		fy_document_destroy(d);
		return e->wstop = rc;
	}
	res = jget(fy_document_root(d), "result");
	if (jbool(res, "canceled")) {
		e->wcompacted = jint(res, "compact_revision");
		if (e->wcompacted > 0)
			rc = fail(e, -ERANGE, "etcd /v3/watch: revision compacted (oldest %" PRId64 ")",
				  e->wcompacted);
		else {
			size_t len;
			const char *why = jstr(res, "cancel_reason", &len);

			rc = fail(e, -EIO, "etcd /v3/watch: canceled: %.*s", why ? (int)len : 1,
				  why ? why : "?");
		}
		fy_document_destroy(d);
		return e->wstop = rc;
	}
	revision = jint(jget(res, "header"), "revision");
	if (jbool(res, "created")) {
		rc = e->wfn(e->wud, NULL, 0, revision);
		fy_document_destroy(d);
		return e->wstop = rc;
	}
	evs = jget(res, "events");
	if (evs && fy_node_is_sequence(evs) && (cnt = fy_node_sequence_item_count(evs)) > 0) {
		if (!(ev = calloc((size_t)cnt, sizeof *ev))) {
			fy_document_destroy(d);
			return e->wstop = fail(e, -ENOMEM, "etcd /v3/watch: out of memory");
		}
		while ((it = fy_node_sequence_iterate(evs, &iter)) != NULL && nev < (size_t)cnt) {
			size_t len;
			const char *t = jstr(it, "type", &len);

			ev[nev].type = t && len == 6 && memcmp(t, "DELETE", 6) == 0 ? CL_EV_DELETE : CL_EV_PUT;
			if ((rc = kv_read(jget(it, "kv"), &ev[nev].kv)) != 0)
				break;
			nev++;
		}
		if (rc)
			rc = e->wstop = fail(e, rc, "etcd /v3/watch: %s", tank_strerror(rc));
		else if (nev && (rc = e->wfn(e->wud, ev, nev, revision)) != 0)
			e->wstop = rc;
		for (size_t i = 0; i < nev; i++)
			kv_free(&ev[i].kv);
		free(ev);
	}
	fy_document_destroy(d);
	return rc;
}

/* The stream: JSON objects, one per line (grpc-gateway's delimiter). */
static size_t on_watch_body(char *p, size_t sz, size_t nm, void *ud)
{
	cl_etcd_t *e = ud;
	size_t start = 0;

	obs_buf_put(&e->in, p, sz * nm);
	if (e->in.oom) {
		e->wstop = fail(e, -ENOMEM, "etcd /v3/watch: out of memory");
		return 0;
	}
	for (size_t i = 0; i < e->in.len; i++) {
		if (e->in.p[i] != '\n')
			continue;
		if (i > start && watch_message(e, e->in.p + start, i - start) != 0)
			return 0;
		start = i + 1;
	}
	obs_buf_consume(&e->in, start);
	return sz * nm;
}

static int watch(cl_etcd_t *e, const char *key, bool prefix, const char *end, int64_t start_rev,
		 cl_watch_fn fn, void *ud, int64_t *compacted)
{
	char url[512];
	obs_buf_t b = { 0 };
	struct curl_slist *hdr;
	CURLcode cc;
	int rc;

	e->err[0] = '\0';
	if (atomic_load(&e->aborted))
		return fail(e, -ECANCELED, "etcd /v3/watch: aborted");
	obs_buf_puts(&b, "{\"create_request\":{");
	jkey(&b, "key", key, strlen(key));
	jend(&b, key, prefix, end);
	if (start_rev > 0)
		obs_buf_printf(&b, ",\"start_revision\":\"%" PRId64 "\"", start_rev);
	obs_buf_puts(&b, "}}");
	if (b.oom) {
		obs_buf_free(&b);
		return fail(e, -ENOMEM, "etcd /v3/watch: out of memory");
	}
	snprintf(url, sizeof url, "%s/v3/watch", e->base);
	e->in.len = 0;
	e->in.oom = false;
	e->wfn = fn;
	e->wud = ud;
	e->wstop = 0;
	e->wcompacted = 0;
	hdr = e->cu->slist_append(NULL, "Content-Type: application/json");
	setup(e, url, &b, on_watch_body, 0L, hdr);
	cc = e->cu->easy_perform(e->h);
	e->cu->slist_free_all(hdr);
	obs_buf_free(&b);
	e->in.len = 0;
	if (compacted)
		*compacted = e->wcompacted;
	if (e->wstop)
		return e->wstop;
	if (cc != CURLE_OK)
		return curl_errno(e, cc, "/v3/watch");
	rc = fail(e, -ECONNRESET, "etcd %s/v3/watch: the stream ended", e->base);
	return rc;
}

int cl_etcd_watch(cl_etcd_t *e, const char *key, bool prefix, int64_t start_rev,
		  cl_watch_fn fn, void *ud, int64_t *compacted)
{
	return watch(e, key, prefix, NULL, start_rev, fn, ud, compacted);
}

int cl_etcd_watch_range(cl_etcd_t *e, const char *key, const char *end, int64_t start_rev,
			cl_watch_fn fn, void *ud, int64_t *compacted)
{
	return watch(e, key, false, end, start_rev, fn, ud, compacted);
}
