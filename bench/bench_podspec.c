/*
 * bench_podspec — cost of the manifest path: YAML text → validated spec,
 * spec → canonical msgpack, msgpack → validated spec (the RPC path), and
 * spec → YAML output.  Reports, never asserts.  QUICK=1: fewer rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "manifest/mf_doc.h"
#include "pod/pod_manifest.h"

static const char *manifest =
	"name: web\n"
	"restart: on_failure\n"
	"backoff: {base: 1s, cap: 60s, stable_window: 5m}\n"
	"stop: {signal: TERM, grace: 5s}\n"
	"isolation: {namespaces: [pid, mount, uts, ipc], hostname: web}\n"
	"volumes: [{name: data, host_path: /srv/data}]\n"
	"containers:\n"
	"  - name: app\n"
	"    command: [/usr/bin/python3, -m, http.server, \"8080\"]\n"
	"    env: {PORT: \"8080\", MODE: production}\n"
	"    working_dir: /srv\n"
	"    user: \"1000:1000\"\n"
	"    limits: {memory: 64Mi, pids: 64, cpu: 0.5}\n"
	"    mounts: [{volume: data, path: /data}]\n"
	"  - name: sidecar\n"
	"    command: [/bin/sh, -c, \"while :; do sleep 5; done\"]\n";

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void report(const char *metric, double value, const char *unit)
{
	printf("{\"bench\": \"podspec\", \"metric\": \"%s\", \"value\": %.0f, \"unit\": \"%s\"}\n",
	       metric, value, unit);
}

int main(void)
{
	int rounds = getenv("QUICK") && *getenv("QUICK") == '1' ? 2000 : 20000;
	size_t len = strlen(manifest), blen = 0;
	pod_manifest_t *m = NULL;
	char *buf = NULL, *text = NULL;
	msgpack_unpacked u;
	double t;
	int i;

	if (pod_manifest_parse(manifest, len, "bench.yaml", &m, NULL) != 0) {
		fprintf(stderr, "bench_podspec: manifest rejected\n");
		return 1;
	}

	t = now();
	for (i = 0; i < rounds; i++) {
		pod_manifest_t *x = NULL;
		if (pod_manifest_parse(manifest, len, "bench.yaml", &x, NULL) != 0)
			return 1;
		pod_manifest_free(x);
	}
	report("yaml_parse_validate_per_s", rounds / (now() - t), "manifests/s");

	t = now();
	for (i = 0; i < rounds; i++) {
		free(buf);
		if (pod_spec_encode(m->specs[0], &buf, &blen) != 0)
			return 1;
	}
	report("canonical_encode_per_s", rounds / (now() - t), "specs/s");

	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, buf, blen, NULL) != MSGPACK_UNPACK_SUCCESS)
		return 1;
	t = now();
	for (i = 0; i < rounds; i++) {
		pod_spec_t *s = NULL;
		if (pod_spec_from_msgpack(&u.data, &s, NULL) != 0)
			return 1;
		pod_spec_free(s);
	}
	report("msgpack_validate_per_s", rounds / (now() - t), "specs/s");

	t = now();
	for (i = 0; i < rounds; i++) {
		free(text);
		if (mf_doc_emit_string(&u.data, MF_DOC_YAML, &text, NULL) != 0)
			return 1;
	}
	report("emit_yaml_per_s", rounds / (now() - t), "docs/s");
	report("canonical_size", (double)blen, "bytes");

	free(text);
	msgpack_unpacked_destroy(&u);
	free(buf);
	pod_manifest_free(m);
	return 0;
}
