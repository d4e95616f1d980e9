#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tank_err.h"
#include "manifest/mf_doc.h"
#include "pod/pod_manifest.h"
#include "stack/stack_spec.h"
#include "workflow/wf_spec.h"
#include "tests/support/tsupport.h"

/* Parses text; on success returns the manifest, on failure NULL with the
 * joined errors in *why (caller frees). */
static pod_manifest_t *parse(const char *text, const char *src, char **why)
{
	kit_errors_t e;
	pod_manifest_t *m = NULL;
	int r;

	kit_errors_init(&e);
	r = pod_manifest_parse(text, strlen(text), src, &m, &e);
	if (why)
		*why = NULL;
	if (r == 0) {
		cr_assert_not_null(m);
		cr_assert_eq(e.count, 0);
	} else {
		cr_assert_eq(r, TANK_EINVALID, "r=%d", r);
		cr_assert_null(m);
		cr_assert_gt(e.count, 0);
		if (why)
			*why = kit_errors_join(&e);
	}
	kit_errors_free(&e);
	return m;
}

static void bytes_of(const pod_spec_t *s, char **buf, size_t *len)
{
	cr_assert_eq(pod_spec_encode(s, buf, len), 0);
}

static void assert_same_bytes(const pod_spec_t *a, const pod_spec_t *b)
{
	char *x, *y;
	size_t lx, ly;

	bytes_of(a, &x, &lx);
	bytes_of(b, &y, &ly);
	cr_assert_eq(lx, ly, "lengths %zu != %zu", lx, ly);
	cr_assert(memcmp(x, y, lx) == 0, "canonical bytes differ");
	free(x);
	free(y);
}

#define POD(n) "name: " n "\ncontainers: [{name: app, command: [/bin/true]}]\n"

Test(podspec, multi_document_yaml)
{
	pod_manifest_t *m = parse(
		"# leading comment\n"
		POD("a")
		"---\n"
		"# an empty document is skipped\n"
		"---\n"
		POD("b")
		"---\n" POD("c")
		"...\n", "m.yaml", NULL);

	cr_assert_eq(m->count, 3);
	cr_assert_str_eq(m->specs[0]->name, "a");
	cr_assert_str_eq(m->specs[1]->name, "b");
	cr_assert_str_eq(m->specs[2]->name, "c");
	cr_assert_eq(m->raw[1]->type, MSGPACK_OBJECT_MAP);
	pod_manifest_free(m);
}

Test(podspec, empty_manifest_has_no_pods)
{
	pod_manifest_t *m = parse("# nothing here\n", "e.yaml", NULL);
	cr_assert_eq(m->count, 0);
	pod_manifest_free(m);
	m = parse("", "e.yaml", NULL);
	cr_assert_eq(m->count, 0);
	pod_manifest_free(m);
}

Test(podspec, json_object_and_list)
{
	pod_manifest_t *m = parse(
		"{\"name\": \"web\", \"restart\": \"never\",\n"
		" \"containers\": [{\"name\": \"app\", \"command\": [\"/bin/echo\", \"8080\"],\n"
		"   \"limits\": {\"memory\": \"64Mi\", \"pids\": 10, \"cpu\": 1.5}}]}\n",
		"web.json", NULL);

	cr_assert_eq(m->count, 1);
	cr_assert_eq(m->specs[0]->restart, POD_RESTART_NEVER);
	cr_assert_str_eq(m->specs[0]->containers[0].argv[1], "8080");
	cr_assert_eq(m->specs[0]->containers[0].limits.cpu_millis, 1500);
	pod_manifest_free(m);

	m = parse("[{\"name\": \"a\", \"containers\": [{\"name\": \"x\", \"command\": [\"y\"]}]},\n"
		  " {\"name\": \"b\", \"containers\": [{\"name\": \"x\", \"command\": [\"y\"]}]}]\n",
		  "pods.json", NULL);
	cr_assert_eq(m->count, 2);
	cr_assert_str_eq(m->specs[1]->name, "b");
	pod_manifest_free(m);
}

Test(podspec, errors_name_source_and_document)
{
	char *why = NULL;
	pod_manifest_t *m = parse(
		POD("ok")
		"---\n"
		"name: web\n"
		"containers: [{name: a, command: [x]}, {name: b}]\n"
		"---\n"
		"name: other\n"
		"containers: [{name: a, command: [x], working_dir: rel}]\n",
		"web.yaml", &why);

	cr_assert_null(m, "a file with an invalid pod yields no pods");
	cr_assert_str_eq(why,
		"web.yaml: document 2: web: containers[1].command: required\n"
		"web.yaml: document 3: other: containers[0].working_dir: must be an absolute path");
	free(why);

	m = parse("[{\"name\": \"a\", \"containers\": [{\"name\": \"x\", \"command\": [\"y\"]}]},\n"
		  " {\"name\": \"b\", \"containers\": [{\"name\": \"x\"}]}]\n", "p.json", &why);
	cr_assert_null(m);
	cr_assert_str_eq(why, "p.json: document 1, item 2: b: containers[0].command: required");
	free(why);
}

Test(podspec, document_numbers_count_empty_documents)
{
	char *why = NULL;
	pod_manifest_t *m = parse("---\n# nothing\n---\nname: b\ncontainers: [{name: x}]\n",
				  "e.yaml", &why);

	cr_assert_null(m);
	cr_assert_str_eq(why, "e.yaml: document 2: b: containers[0].command: required");
	free(why);
}

Test(podspec, duplicate_pod_names_across_documents)
{
	char *why = NULL;
	pod_manifest_t *m = parse(POD("web") "---\n" POD("db") "---\n" POD("web"),
				  "all.yaml", &why);

	cr_assert_null(m);
	cr_assert_str_eq(why, "all.yaml: document 3: web: duplicate pod name (first in document 1)");
	free(why);
}

Test(podspec, yaml_syntax_error_position)
{
	char *why = NULL;
	pod_manifest_t *m;

	m = parse("name: web\ncontainers:\n  - name: app\n    command: [x, y\n", "bad.yaml", &why);
	cr_assert_null(m);
	cr_assert(strncmp(why, "bad.yaml:5:1: ", 14) == 0, "got: %s", why);
	free(why);

	m = parse("name: \"web\ncontainers: []\n", "bad.yaml", &why);
	cr_assert_null(m);
	cr_assert(strncmp(why, "bad.yaml:1:7: ", 14) == 0, "got: %s", why);
	free(why);

	/* A syntax error in a later document rejects the whole file. */
	m = parse(POD("a") "---\nname: b\n  oops: 1\n", "two.yaml", &why);
	cr_assert_null(m);
	cr_assert(strncmp(why, "two.yaml:4:7: ", 14) == 0, "got: %s", why);
	free(why);

	m = parse("{\"name\": \"a\",}", "x.json", &why);
	cr_assert_null(m);
	cr_assert(strncmp(why, "x.json:1:", 9) == 0, "got: %s", why);
	free(why);

	m = parse("a: 1\na: 2\n", "dup.yaml", &why);
	cr_assert_null(m);
	cr_assert(strstr(why, "dup.yaml:2:1: duplicate key \"a\""), "the key named: %s", why);
	free(why);
	m = parse("name: a\ncontainers:\n  - name: c\n    command: [/bin/true]\n"
		  "    command: [/bin/false]\n", "dup2.yaml", &why);
	cr_assert_null(m);
	cr_assert(strstr(why, "dup2.yaml:5:5: duplicate key \"command\""), "got: %s", why);
	free(why);
	m = parse("{\"name\": \"a\", \"name\": \"b\"}", "dup.json", &why);
	cr_assert_null(m);
	cr_assert(strstr(why, "duplicate key \"name\""), "got: %s", why);
	free(why);
	m = parse("'a b': 1\n'a b': 2\n", "dup3.yaml", &why);
	cr_assert_null(m);
	cr_assert(strstr(why, "duplicate key \"a b\""), "got: %s", why);
	free(why);
}

Test(podspec, core_schema_scalars)
{
	kit_errors_t e;
	mf_docs_t *d = NULL;
	const char *y =
		"- 42\n- -7\n- +5\n- 0x1F\n- 0o17\n- 1.5\n- 2.0\n- 1e3\n- .inf\n- -.Inf\n- .nan\n"
		"- ~\n- null\n-\n- true\n- False\n"
		"- yes\n- on\n- '42'\n- \"true\"\n- !!str 7\n- |\n  block\n- 1.2.3\n- 0x\n- 12abc\n";
	const msgpack_object *a;

	kit_errors_init(&e);
	cr_assert_eq(mf_docs_load(y, strlen(y), "s.yaml", &d, &e), 0);
	cr_assert_eq(d->count, 1);
	a = d->docs[0].via.array.ptr;
	cr_assert_eq(d->docs[0].via.array.size, 25);
	cr_assert_eq(a[0].type, MSGPACK_OBJECT_POSITIVE_INTEGER); cr_assert_eq(a[0].via.u64, 42);
	cr_assert_eq(a[1].type, MSGPACK_OBJECT_NEGATIVE_INTEGER); cr_assert_eq(a[1].via.i64, -7);
	cr_assert_eq(a[2].via.u64, 5);
	cr_assert_eq(a[3].via.u64, 31);
	cr_assert_eq(a[4].via.u64, 15);
	cr_assert_eq(a[5].type, MSGPACK_OBJECT_FLOAT64); cr_assert_float_eq(a[5].via.f64, 1.5, 0);
	cr_assert_eq(a[6].type, MSGPACK_OBJECT_FLOAT64);
	cr_assert_eq(a[7].type, MSGPACK_OBJECT_FLOAT64); cr_assert_float_eq(a[7].via.f64, 1000, 0);
	cr_assert(isinf(a[8].via.f64) && a[8].via.f64 > 0);
	cr_assert(isinf(a[9].via.f64) && a[9].via.f64 < 0);
	cr_assert(isnan(a[10].via.f64));
	cr_assert_eq(a[11].type, MSGPACK_OBJECT_NIL);
	cr_assert_eq(a[12].type, MSGPACK_OBJECT_NIL);
	cr_assert_eq(a[13].type, MSGPACK_OBJECT_NIL);
	cr_assert_eq(a[14].type, MSGPACK_OBJECT_BOOLEAN); cr_assert(a[14].via.boolean);
	cr_assert_eq(a[15].type, MSGPACK_OBJECT_BOOLEAN); cr_assert(!a[15].via.boolean);
	/* YAML 1.2: yes/on are strings; quoting or !!str always makes a string. */
	for (int i = 16; i < 25; i++)
		cr_assert_eq(a[i].type, MSGPACK_OBJECT_STR, "item %d", i);
	cr_assert_eq(a[21].via.str.size, 6);
	cr_assert(memcmp(a[21].via.str.ptr, "block\n", 6) == 0);
	mf_docs_free(d);

	cr_assert_eq(mf_docs_load("- 99999999999999999999\n", 23, "big.yaml", &d, &e),
		     TANK_EINVALID);
	cr_assert_null(d);
	cr_assert_str_eq(e.msgs[0], "big.yaml:1:3: integer out of range: 99999999999999999999");
	kit_errors_free(&e);
}

Test(podspec, aliases_are_resolved)
{
	pod_manifest_t *m = parse(
		"name: web\n"
		"containers:\n"
		"  - name: a\n"
		"    command: &cmd [/bin/sh, -c, \"sleep 1\"]\n"
		"  - name: b\n"
		"    command: *cmd\n", "alias.yaml", NULL);
	cr_assert_eq(m->specs[0]->containers[1].argc, 3);
	cr_assert_str_eq(m->specs[0]->containers[1].argv[2], "sleep 1");
	pod_manifest_free(m);
}

static const char *full_yaml =
	"name: web\n"
	"restart: on_failure\n"
	"backoff: {base: 250ms, cap: 90s, stable_window: 1h}\n"
	"stop: {signal: SIGUSR1, grace: 1500}\n"
	"isolation: {namespaces: [net, pid, mount, uts], hostname: web, rootfs: /srv/rootfs}\n"
	"volumes: [{name: data, host_path: /srv/data}, {name: logs, host_path: /var/log/web}]\n"
	"containers:\n"
	"  - name: app\n"
	"    command: [/usr/bin/python3, -m, http.server, \"8080\"]\n"
	"    env: {PORT: \"8080\", EMPTY: \"\", Z: \"true\", A: \"line1\\nline2\"}\n"
	"    working_dir: /srv\n"
	"    user: \"1000:1000\"\n"
	"    limits: {memory: 64Mi, pids: 64, cpu: 0.5}\n"
	"    mounts: [{volume: data, path: /data, read_only: true}, {volume: logs, path: /logs}]\n"
	"  - name: side\n"
	"    command: [\"/bin/sh\", \"-c\", \"echo 'a: b' # not a comment\"]\n"
	"    limits: {cpu: 2, memory: 1000000}\n"
	"reconcile_wait: {random: {min: 1s, max: 10s}}\n";

/* The same pod spelled differently: JSON, other key order, other units,
 * defaults written out, signal as a number. */
static const char *full_json =
	"{\"containers\": [\n"
	"   {\"command\": [\"/usr/bin/python3\", \"-m\", \"http.server\", \"8080\"],\n"
	"    \"name\": \"app\",\n"
	"    \"limits\": {\"cpu\": \"500m\", \"pids\": 64, \"memory\": 67108864},\n"
	"    \"env\": {\"PORT\": \"8080\", \"EMPTY\": \"\", \"Z\": \"true\", \"A\": \"line1\\nline2\"},\n"
	"    \"user\": \"1000:1000\", \"working_dir\": \"/srv\",\n"
	"    \"mounts\": [{\"path\": \"/data\", \"volume\": \"data\", \"read_only\": true},\n"
	"               {\"volume\": \"logs\", \"path\": \"/logs\", \"read_only\": false}]},\n"
	"   {\"name\": \"side\", \"command\": [\"/bin/sh\", \"-c\", \"echo 'a: b' # not a comment\"],\n"
	"    \"limits\": {\"cpu\": 2.0, \"memory\": \"1M\"}}],\n"
	" \"reconcile_wait\": {\"random\": {\"max\": \"10000ms\", \"min\": 1000}},\n"
	" \"stop\": {\"grace\": \"1500ms\", \"signal\": 10},\n"
	" \"isolation\": {\"rootfs\": \"/srv/rootfs\", \"hostname\": \"web\",\n"
	"               \"namespaces\": [\"pid\", \"mount\", \"uts\", \"net\"]},\n"
	" \"volumes\": [{\"host_path\": \"/srv/data\", \"name\": \"data\"},\n"
	"             {\"name\": \"logs\", \"host_path\": \"/var/log/web\"}],\n"
	" \"backoff\": {\"stable_window\": \"60m\", \"cap\": \"90000ms\", \"base\": 250},\n"
	" \"restart\": \"on_failure\", \"name\": \"web\"}\n";

Test(podspec, canonical_bytes_equal_for_yaml_and_json)
{
	pod_manifest_t *y = parse(full_yaml, "web.yaml", NULL);
	pod_manifest_t *j = parse(full_json, "web.json", NULL);

	cr_assert_eq(y->count, 1);
	cr_assert_eq(j->count, 1);
	assert_same_bytes(y->specs[0], j->specs[0]);
	pod_manifest_free(y);
	pod_manifest_free(j);
}

Test(podspec, canonical_bytes_differ_when_spec_differs)
{
	pod_manifest_t *a = parse(POD("web"), "a.yaml", NULL);
	pod_manifest_t *b = parse("name: web\nstop: {grace: 11s}\n"
				  "containers: [{name: app, command: [/bin/true]}]\n", "b.yaml", NULL);
	char *x, *y;
	size_t lx, ly;

	bytes_of(a->specs[0], &x, &lx);
	bytes_of(b->specs[0], &y, &ly);
	cr_assert(lx != ly || memcmp(x, y, lx) != 0);
	free(x);
	free(y);
	pod_manifest_free(a);
	pod_manifest_free(b);
}

Test(podspec, roundtrip_spec_msgpack_spec_is_lossless)
{
	const char *cases[] = { full_yaml, POD("minimal"),
		"name: w\nreconcile_wait: {exponential: {wait: 2s, multiplier: 1.5}}\n"
		"stop: {signal: RTMIN+4}\n"
		"containers: [{name: a, command: [x], user: www, limits: {cpu: 0.001}}]\n",
		"name: web\ndepends_on: [{pod: db, condition: ready}, {pod: init, condition: completed},"
		" {pod: cache}]\n" "containers: [{name: a, command: [x]}]\n",
		"name: web\ncontainers: [{name: a, command: [x],"
		" startup: {exec: [test, -f, /up], period: 1s, failure_threshold: 30},"
		" readiness: {http: {port: 8080, path: /healthz, host: '::1'}, timeout: 2s,"
		" success_threshold: 2}, liveness: {tcp: {port: 8080}, initial_delay: 5s}}]\n",
		NULL };

	for (int i = 0; cases[i]; i++) {
		pod_manifest_t *m = parse(cases[i], "r.yaml", NULL);
		pod_spec_t *s1 = m->specs[0], *s2 = NULL, *s3;
		char *b1, *b2;
		size_t l1, l2;
		msgpack_unpacked u;
		kit_errors_t e;

		bytes_of(s1, &b1, &l1);
		msgpack_unpacked_init(&u);
		cr_assert_eq(msgpack_unpack_next(&u, b1, l1, NULL), MSGPACK_UNPACK_SUCCESS);
		kit_errors_init(&e);
		cr_assert_eq(pod_spec_from_msgpack(&u.data, &s2, &e), 0,
			     "canonical form rejected: %s", e.stored ? e.msgs[0] : "");
		bytes_of(s2, &b2, &l2);
		cr_assert_eq(l1, l2);
		cr_assert(memcmp(b1, b2, l1) == 0, "case %d: bytes changed on round trip", i);
		/* Field-level spot checks that nothing was defaulted away. */
		cr_assert_str_eq(s2->name, s1->name);
		cr_assert_eq(s2->restart, s1->restart);
		cr_assert_eq(s2->backoff.base_ms, s1->backoff.base_ms);
		cr_assert_eq(s2->stop.signal, s1->stop.signal);
		cr_assert_eq(s2->isolation.namespaces, s1->isolation.namespaces);
		cr_assert_eq(s2->reconcile_wait.kind, s1->reconcile_wait.kind);
		cr_assert_float_eq(s2->reconcile_wait.multiplier, s1->reconcile_wait.multiplier, 0);
		cr_assert_eq(s2->containers[0].limits.cpu_millis, s1->containers[0].limits.cpu_millis);
		cr_assert_eq(s2->containers[0].env_count, s1->containers[0].env_count);
		/* dup goes through the same bytes */
		s3 = pod_spec_dup(s1);
		cr_assert_not_null(s3);
		assert_same_bytes(s1, s3);
		pod_spec_free(s3);
		pod_spec_free(s2);
		kit_errors_free(&e);
		msgpack_unpacked_destroy(&u);
		free(b1);
		free(b2);
		pod_manifest_free(m);
	}
}

/* Emits obj in fmt, loads the text back and checks it is the same object. */
static void emit_and_reload(const msgpack_object *obj, enum mf_doc_format fmt,
			    const char *src)
{
	char *text = NULL;
	size_t len = 0;
	mf_docs_t *d = NULL;
	kit_errors_t e;

	cr_assert_eq(mf_doc_emit_string(obj, fmt, &text, &len), 0);
	cr_assert_eq(strlen(text), len);
	kit_errors_init(&e);
	cr_assert_eq(mf_docs_load(text, len, src, &d, &e), 0,
		     "output does not parse as %s: %s\n%s", src,
		     e.stored ? e.msgs[0] : "", text);
	cr_assert_eq(d->count, 1);
	cr_assert(msgpack_object_equal(*obj, d->docs[0]), "changed on the way:\n%s", text);
	mf_docs_free(d);
	kit_errors_free(&e);
	free(text);
}

Test(podspec, emit_yaml_and_json_then_parse_back)
{
	const char *y =
		"strings: [\"8080\", \"true\", \"\", \"null\", \"~\", \"1.5\", \"0x1F\", \"-1\", \".inf\",\n"
		"          \"a: b\", \"- x\", \"#c\", \" lead\", \"trail \", \"multi\\nline\\n\", \"tab\\there\",\n"
		"          \"quote \\\" and ' \", \"unicodé ✓\", \"[x]\", \"{y}\", \"*a\", \"&b\", \"!t\", \"%p\", \"@x\",\n"
		"          \"1.2.3\", \"08\", \"127.0.0.1:8080\", \"1_000\", \"1e5x\", \"-c\", \"a #b\", \"k: \"]\n"
		"numbers: [0, 1, -1, 18446744073709551615, -9223372036854775808, 0.5, 2.0, 1e300, -2.5e-10]\n"
		"other: [true, false, null, [], {}, [[1, [2]], {k: v}]]\n"
		"nested: {a: {b: {c: [1, {d: e}]}}}\n";
	mf_docs_t *d = NULL;
	kit_errors_t e;

	kit_errors_init(&e);
	cr_assert_eq(mf_docs_load(y, strlen(y), "in.yaml", &d, &e), 0,
		     "%s", e.stored ? e.msgs[0] : "");
	emit_and_reload(&d->docs[0], MF_DOC_YAML, "out.yaml");
	/* ".json" makes the loader strict JSON: the output must be real JSON. */
	emit_and_reload(&d->docs[0], MF_DOC_JSON, "out.json");
	mf_docs_free(d);
	kit_errors_free(&e);
}

Test(podspec, emit_spec_as_yaml_and_json)
{
	pod_manifest_t *m = parse(full_yaml, "web.yaml", NULL);
	char *buf, *text;
	size_t len, tlen;
	msgpack_unpacked u;
	pod_manifest_t *back;

	bytes_of(m->specs[0], &buf, &len);
	msgpack_unpacked_init(&u);
	cr_assert_eq(msgpack_unpack_next(&u, buf, len, NULL), MSGPACK_UNPACK_SUCCESS);
	for (int f = 0; f < 2; f++) {
		cr_assert_eq(mf_doc_emit_string(&u.data, f ? MF_DOC_JSON : MF_DOC_YAML,
						 &text, &tlen), 0);
		if (f) {
			cr_assert(strstr(text, "\"signal\": \"USR1\""), "%s", text);
			cr_assert(strstr(text, "\"cpu\": 0.5"), "%s", text);
			cr_assert(strstr(text, "\"EMPTY\": \"\""), "%s", text);
		} else {
			cr_assert(strstr(text, "PORT: \"8080\""), "%s", text);
			cr_assert(strstr(text, "memory: 64Mi"), "%s", text);
			cr_assert(strstr(text, "- name: app\n"), "block style expected:\n%s", text);
		}
		/* The printed form is itself a valid manifest of the same pod
		 * (`tankctl get -o yaml > f; tankctl apply -f f`). */
		back = parse(text, f ? "get.json" : "get.yaml", NULL);
		cr_assert_eq(back->count, 1);
		assert_same_bytes(m->specs[0], back->specs[0]);
		pod_manifest_free(back);
		free(text);
	}
	msgpack_unpacked_destroy(&u);
	free(buf);
	pod_manifest_free(m);
}

Test(podspec, emit_to_file_and_rejects_binary)
{
	msgpack_object o = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 7 };
	msgpack_object bin = { .type = MSGPACK_OBJECT_BIN };
	msgpack_object_kv kv = { .key = { .type = MSGPACK_OBJECT_ARRAY }, .val = o };
	msgpack_object badkey = { .type = MSGPACK_OBJECT_MAP,
				  .via.map = { .size = 1, .ptr = &kv } };
	char *text = (char *)1;
	char line[32] = "";
	FILE *f = tmpfile();

	cr_assert_not_null(f);
	cr_assert_eq(mf_doc_emit(&o, MF_DOC_JSON, f), 0);
	rewind(f);
	cr_assert_not_null(fgets(line, sizeof line, f));
	cr_assert_str_eq(line, "7\n");
	fclose(f);
	cr_assert_eq(mf_doc_emit_string(&bin, MF_DOC_YAML, &text, NULL), -EINVAL);
	cr_assert_null(text);
	cr_assert_eq(mf_doc_emit_string(&badkey, MF_DOC_JSON, &text, NULL), -EINVAL);
}

/* Loads one YAML document for the emit tests (the caller frees d). */
static const msgpack_object *load_one(const char *y, mf_docs_t **d)
{
	kit_errors_t e;

	kit_errors_init(&e);
	cr_assert_eq(mf_docs_load(y, strlen(y), "in.yaml", d, &e), 0, "%s",
		     e.stored ? e.msgs[0] : "");
	kit_errors_free(&e);
	cr_assert_eq((*d)->count, 1);
	return &(*d)->docs[0];
}

static void assert_emits(const msgpack_object *o, enum mf_doc_format fmt, const char *want)
{
	char *text = NULL;
	size_t len = 0;

	cr_assert_eq(mf_doc_emit_string(o, fmt, &text, &len), 0);
	cr_assert_str_eq(text, want);
	cr_assert_eq(len, strlen(want));
	free(text);
}

/* The layout scripts read: the one libfyaml's emitter wrote until it was
 * replaced (a sequence at its mapping's indentation, a sequence item's
 * map on the dash's line, empty collections in flow, a key holding a
 * line break as an explicit "? key"). */
Test(podspec, emit_layout_is_block_yaml_and_indented_json)
{
	mf_docs_t *d = NULL;
	const msgpack_object *o = load_one(
		"name: web\n"
		"list: [a, {b: 1, c: [x, y]}, [1, [2]], [], {}]\n"
		"map: {k: {deep: true}, e: {}, l: [], n: null}\n"
		"\"two\\nlines\": [z]\n"
		"port: \"8080\"\n", &d);

	assert_emits(o, MF_DOC_YAML,
		     "name: web\n"
		     "list:\n"
		     "- a\n"
		     "- b: 1\n"
		     "  c:\n"
		     "  - x\n"
		     "  - y\n"
		     "- - 1\n"
		     "  - - 2\n"
		     "- []\n"
		     "- {}\n"
		     "map:\n"
		     "  k:\n"
		     "    deep: true\n"
		     "  e: {}\n"
		     "  l: []\n"
		     "  n: null\n"
		     "? \"two\\nlines\"\n"
		     ": - z\n"
		     "port: \"8080\"\n");
	assert_emits(o, MF_DOC_JSON,
		     "{\n"
		     "  \"name\": \"web\",\n"
		     "  \"list\": [\n"
		     "    \"a\",\n"
		     "    {\n"
		     "      \"b\": 1,\n"
		     "      \"c\": [\n"
		     "        \"x\",\n"
		     "        \"y\"\n"
		     "      ]\n"
		     "    },\n"
		     "    [\n"
		     "      1,\n"
		     "      [\n"
		     "        2\n"
		     "      ]\n"
		     "    ],\n"
		     "    [],\n"
		     "    {}\n"
		     "  ],\n"
		     "  \"map\": {\n"
		     "    \"k\": {\n"
		     "      \"deep\": true\n"
		     "    },\n"
		     "    \"e\": {},\n"
		     "    \"l\": [],\n"
		     "    \"n\": null\n"
		     "  },\n"
		     "  \"two\\nlines\": [\n"
		     "    \"z\"\n"
		     "  ],\n"
		     "  \"port\": \"8080\"\n"
		     "}\n");
	assert_emits(o, MF_DOC_JSON_LINE,
		     "{\"name\": \"web\", \"list\": [\"a\", {\"b\": 1, \"c\": [\"x\", \"y\"]}, "
		     "[1, [2]], [], {}], \"map\": {\"k\": {\"deep\": true}, \"e\": {}, "
		     "\"l\": [], \"n\": null}, \"two\\nlines\": [\"z\"], \"port\": \"8080\"}\n");
	emit_and_reload(o, MF_DOC_YAML, "out.yaml");
	emit_and_reload(o, MF_DOC_JSON, "out.json");
	mf_docs_free(d);
	/* "..." at column 0 would end the document: a top-level string or
	 * key starting so is quoted (found by review) */
	o = load_one("\"... a\": \"...\"\n...b: x\n", &d);
	assert_emits(o, MF_DOC_YAML, "\"... a\": \"...\"\n\"...b\": x\n");
	emit_and_reload(o, MF_DOC_YAML, "out.yaml");
	emit_and_reload(&o->via.map.ptr[0].val, MF_DOC_YAML, "out.yaml");
	mf_docs_free(d);
}

/* Every character a reader could fold, drop or choke on comes back: C0
 * and C1 controls, DEL, NEL, LS, PS, the byte order mark, in keys and
 * values; JSON output holds none of them raw.  Text that is not UTF-8,
 * or holds a NUL, has no YAML or JSON form and is refused. */
Test(podspec, emit_escapes_what_a_reader_would_change)
{
	char s[512];
	size_t n = 0;
	for (int ch = 1; ch < 0x20; ch++)
		s[n++] = (char)ch;
	const char *more = "\x7f \xc2\x80\xc2\x85\xc2\x9f \xe2\x80\xa8\xe2\x80\xa9 \xef\xbb\xbf"
			   "unicod\xc3\xa9 \xe2\x9c\x93 \"q\" \\b\\";
	memcpy(s + n, more, strlen(more));
	n += strlen(more);
	msgpack_object str = { .type = MSGPACK_OBJECT_STR, .via.str = { (uint32_t)n, s } };
	msgpack_object_kv kv[2] = { { .key = str, .val = str },
				    { .key = { .type = MSGPACK_OBJECT_STR,
					       .via.str = { 1, "k" } }, .val = str } };
	msgpack_object map = { .type = MSGPACK_OBJECT_MAP, .via.map = { 2, kv } };
	char *text = NULL;
	size_t len;

	emit_and_reload(&map, MF_DOC_YAML, "out.yaml");
	emit_and_reload(&map, MF_DOC_JSON, "out.json");
	emit_and_reload(&map, MF_DOC_JSON_LINE, "out.json");
	cr_assert_eq(mf_doc_emit_string(&map, MF_DOC_JSON_LINE, &text, &len), 0);
	for (size_t i = 0; i + 1 < len; i++)
		cr_assert((unsigned char)text[i] >= 0x20 && text[i] != 0x7f,
			  "raw control byte 0x%02x at %zu: %s", text[i], i, text);
	cr_assert_null(memmem(text, len, "\xe2\x80\xa8", 3), "%s", text);
	cr_assert_null(memmem(text, len, "\xc2\x85", 2), "%s", text);
	cr_assert_not_null(strstr(text, "\\u2028\\u2029"), "%s", text);
	free(text);
	cr_assert_eq(mf_doc_emit_string(&map, MF_DOC_YAML, &text, &len), 0);
	cr_assert_not_null(strstr(text, "\\x80\\N\\x9F \\L\\P \\uFEFF"), "%s", text);
	free(text);

	msgpack_object bad = { .type = MSGPACK_OBJECT_STR, .via.str = { 3, "a\xc3(" } };
	text = (char *)1;
	cr_assert_eq(mf_doc_emit_string(&bad, MF_DOC_JSON, &text, NULL), -EINVAL);
	cr_assert_null(text);
	msgpack_object nul = { .type = MSGPACK_OBJECT_STR, .via.str = { 3, "a\0b" } };
	cr_assert_eq(mf_doc_emit_string(&nul, MF_DOC_YAML, &text, NULL), -EINVAL);
}

/* A document past the emitter's chunk goes to the FILE in pieces: the
 * file holds exactly what the string form holds. */
Test(podspec, emit_to_file_in_chunks_equals_the_string)
{
	enum { N = 20000 };
	msgpack_zone *z = msgpack_zone_new(1 << 16);
	msgpack_object list = { .type = MSGPACK_OBJECT_ARRAY };
	char *text = NULL, *back;
	size_t len = 0;
	FILE *f = tmpfile();

	cr_assert_not_null(z);
	cr_assert_not_null(f);
	list.via.array.size = N;
	list.via.array.ptr = msgpack_zone_malloc(z, N * sizeof(msgpack_object));
	for (int i = 0; i < N; i++) {
		msgpack_object_kv *kv = msgpack_zone_malloc(z, 2 * sizeof *kv);
		char *name = msgpack_zone_malloc(z, 16);
		int nl = snprintf(name, 16, "p%05d", i);
		kv[0].key = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { 4, "name" } };
		kv[0].val = (msgpack_object){ .type = MSGPACK_OBJECT_STR,
					      .via.str = { (uint32_t)nl, name } };
		kv[1].key = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { 3, "pid" } };
		kv[1].val = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER,
					      .via.u64 = (uint64_t)i * 7 };
		list.via.array.ptr[i] = (msgpack_object){ .type = MSGPACK_OBJECT_MAP,
							  .via.map = { 2, kv } };
	}
	for (int fmt = MF_DOC_YAML; fmt <= MF_DOC_JSON_LINE; fmt++) {
		cr_assert_eq(mf_doc_emit_string(&list, fmt, &text, &len), 0);
		cr_assert_gt(len, 256u << 10, "the document should span several chunks");
		cr_assert_eq(ftruncate(fileno(f), 0), 0);
		rewind(f);
		cr_assert_eq(mf_doc_emit(&list, fmt, f), 0);
		cr_assert_eq((size_t)ftell(f), len);
		rewind(f);
		back = malloc(len);
		cr_assert_eq(fread(back, 1, len, f), len);
		cr_assert(memcmp(back, text, len) == 0, "format %d differs", fmt);
		free(back);
		free(text);
	}
	fclose(f);
	msgpack_zone_free(z);
}

/* examples/ is found from the working directory (make test runs at the
 * repository root) or, failing that, above $TANK_BUILD_DIR. */
static int find_examples(char *out, size_t n)
{
	const char *bd = getenv("TANK_BUILD_DIR");
	char p[PATH_MAX];

	if (access("examples/web.yaml", R_OK) == 0) {
		snprintf(out, n, "examples");
		return 0;
	}
	if (!bd)
		return -1;
	snprintf(p, sizeof p, "%s", bd);
	for (int up = 0; up < 4; up++) {
		char *slash;
		char probe[PATH_MAX + 32];
		snprintf(probe, sizeof probe, "%s/examples/web.yaml", p);
		if (access(probe, R_OK) == 0) {
			if ((size_t)snprintf(out, n, "%.*s/examples", (int)(n - 16), p) >= n)
				return -1;
			return 0;
		}
		slash = strrchr(p, '/');
		if (!slash || slash == p)
			break;
		*slash = '\0';
	}
	return -1;
}

Test(podspec, every_example_parses)
{
	char dir[PATH_MAX];
	DIR *dp;
	struct dirent *de;
	int files = 0;
	bool seen_web = false, seen_worker = false, seen_batch = false, seen_stack = false;

	cr_assert_eq(find_examples(dir, sizeof dir), 0, "examples/ not found");
	dp = opendir(dir);
	cr_assert_not_null(dp);
	while ((de = readdir(dp)) != NULL) {
		char path[PATH_MAX + 256];
		kit_errors_t e;
		const char *ext = strrchr(de->d_name, '.');

		if (!ext || (strcmp(ext, ".yaml") && strcmp(ext, ".yml") && strcmp(ext, ".json")))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		kit_errors_init(&e);
		/* Every kind tankctl reads. */
		static const mf_registry_t kinds = { .kinds = { &pod_mf_kind, &stack_mf_kind,
								&wf_task_mf, &wf_stage_mf,
								&wf_workflow_mf }, .n = 5 };
		mf_manifest_t *m = NULL;
		char *text = NULL;
		size_t len = 0;
		cr_assert_eq(mf_read_file(path, &text, &len, &e), 0, "%s", path);
		cr_assert_eq(mf_parse(&kinds, text, len, path, &m, &e), 0, "%s: %s", path,
			     e.stored ? e.msgs[0] : "");
		free(text);
		cr_assert_gt(m->count, 0, "%s has no objects", path);
		for (size_t i = 0; i < m->count; i++) {
			if (m->objs[i].kind == &stack_mf_kind) {
				const stack_spec_t *st = m->objs[i].obj;
				seen_stack |= st->npods >= 2 && st->pods[0].inline_spec &&
					      st->pods[1].inline_spec &&
					      st->pods[1].inline_spec->dep_count == 1;
				continue;
			}
			if (m->objs[i].kind != &pod_mf_kind)
				continue;       /* the workflow kinds (workflow.yaml) */
			const pod_spec_t *ps = m->objs[i].obj;
			seen_web |= !strcmp(ps->name, "web");
			seen_worker |= !strcmp(ps->name, "worker") &&
				       ps->restart == POD_RESTART_ALWAYS;
			seen_batch |= !strcmp(ps->name, "batch") &&
				      ps->restart == POD_RESTART_NEVER;
		}
		mf_free(m);
		kit_errors_free(&e);
		files++;
	}
	closedir(dp);
	cr_assert_geq(files, 3);
	cr_assert(seen_web && seen_worker && seen_batch);
	cr_assert(seen_stack, "examples/ has a stack of a pod depending on another");
}

Test(podspec, load_file_errors)
{
	char tmpl[] = "/tmp/tank-podspec-XXXXXX";
	char path[64];
	pod_manifest_t *m = (pod_manifest_t *)1;
	kit_errors_t e;
	FILE *f;

	cr_assert_not_null(ts_mkdtemp_at(tmpl));
	snprintf(path, sizeof path, "%s/missing.yaml", tmpl);
	kit_errors_init(&e);
	cr_assert_eq(pod_manifest_load_file(path, &m, &e), -ENOENT);
	cr_assert_null(m);
	cr_assert(strstr(e.msgs[0], "missing.yaml: No such file or directory"), "%s", e.msgs[0]);
	kit_errors_free(&e);

	snprintf(path, sizeof path, "%s/web.yaml", tmpl);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("name: web\ncontainers: [{name: a}]\n", f);
	fclose(f);
	cr_assert_eq(pod_manifest_load_file(path, &m, &e), TANK_EINVALID);
	cr_assert_null(m);
	cr_assert_eq(e.count, 1);
	cr_assert(strstr(e.msgs[0], "web.yaml: document 1: web: containers[0].command: required"),
		  "%s", e.msgs[0]);
	kit_errors_free(&e);
	unlink(path);
	rmdir(tmpl);
}

/* Every prefix of a full manifest is either a valid manifest or rejected
 * with at least one message; never a crash or a leak (SAN=1 build). */
Test(podspec, every_prefix_is_handled)
{
	size_t n = strlen(full_yaml), ok = 0, bad = 0;

	for (size_t len = 0; len <= n; len++) {
		kit_errors_t e;
		pod_manifest_t *m = NULL;
		int r;

		kit_errors_init(&e);
		r = pod_manifest_parse(full_yaml, len, "p.yaml", &m, &e);
		if (r == 0) {
			cr_assert_not_null(m);
			ok++;
		} else {
			cr_assert_eq(r, TANK_EINVALID, "len %zu: r=%d", len, r);
			cr_assert_null(m);
			cr_assert_gt(e.stored, 0, "len %zu: rejected without a message", len);
			bad++;
		}
		pod_manifest_free(m);
		kit_errors_free(&e);
	}
	cr_assert_gt(ok, 0);
	cr_assert_gt(bad, 0);
}

/* What `get` prints (the spec plus its generation) applies back unchanged. */
Test(podspec, get_output_with_generation_applies_back)
{
	char *why = NULL;
	pod_manifest_t *a = parse("name: w\ncontainers:\n  - name: c\n    command: [/bin/true]\n",
				  "a.yaml", &why);
	pod_manifest_t *b = parse("name: w\ngeneration: 7\ncontainers:\n  - name: c\n    command: [/bin/true]\n",
				  "b.yaml", &why);
	cr_assert_not_null(a);
	cr_assert_not_null(b, "%s", why ? why : "");
	assert_same_bytes(a->specs[0], b->specs[0]);
	pod_manifest_free(a);
	pod_manifest_free(b);
}

/* An alias bomb (9 levels of 10 aliases, ~10^9 nodes once resolved) is
 * refused at once, naming the line, instead of keeping the reader busy for
 * minutes; ordinary aliases still work. */
Test(manifest, alias_bomb_is_refused_naming_the_line)
{
	char text[4096];
	size_t off = 0;
	pod_manifest_t *m = NULL;
	kit_errors_t errs;

	off += (size_t)snprintf(text + off, sizeof text - off,
				"a0: &a0 [l, l, l, l, l, l, l, l, l, l]\n");
	for (int i = 1; i < 10; i++) {
		off += (size_t)snprintf(text + off, sizeof text - off, "a%d: &a%d [", i, i);
		for (int j = 0; j < 10; j++)
			off += (size_t)snprintf(text + off, sizeof text - off, "%s*a%d",
						j ? ", " : "", i - 1);
		off += (size_t)snprintf(text + off, sizeof text - off, "]\n");
	}
	off += (size_t)snprintf(text + off, sizeof text - off,
				"name: bomb\ncontainers: [{name: c, command: [*a9]}]\n");
	kit_errors_init(&errs);
	cr_assert_eq(pod_manifest_parse(text, off, "bomb.yaml", &m, &errs), TANK_EINVALID);
	cr_assert_null(m);
	cr_assert_geq(errs.stored, 1);
	cr_assert(strstr(errs.msgs[0], "bomb.yaml:6:") &&
		  strstr(errs.msgs[0], "more than 1,000,000 nodes after expanding aliases"),
		  "%s", errs.msgs[0]);
	kit_errors_free(&errs);

	static const char ok2[] =
		"name: ok\ncontainers: [{name: c, command: &cmd [/bin/true, x]},\n"
		"  {name: d, command: *cmd}]\n";
	kit_errors_init(&errs);
	cr_assert_eq(pod_manifest_parse(ok2, sizeof ok2 - 1, "ok2.yaml", &m, &errs), 0,
		     "%s", errs.stored ? errs.msgs[0] : "?");
	cr_assert_eq(m->count, 1);
	cr_assert_eq(m->specs[0]->container_count, 2);
	cr_assert_str_eq(m->specs[0]->containers[1].argv[1], "x");
	pod_manifest_free(m);
	kit_errors_free(&errs);
}
