/*
 * bench_probes — what do health probes cost tankd? (stacks issue: "1,000
 * probes, CPU share, latency p50/p99")
 *
 * For each kind of probe — none (the baseline), tcp, http, exec — a fresh
 * tankd in a temp dir gets N pods of one `sleep` container, each with a
 * readiness probe of that kind every PERIOD (tcp and http against one
 * busybox httpd this program starts; exec runs /bin/true in the
 * container's sandbox).  Reported per kind:
 *   ready_s     from the apply until every pod is ready (status list)
 *   cpu_pct     tankd's CPU time (user + system, /proc) over a window of
 *               W seconds once all are ready, in percent of one core
 *   ping p50/p99/max   a client's ping round trips during that window,
 *               every 10 ms: what the probes cost everyone else
 *
 *   bench_probes           N 1,000, PERIOD 1 s, W 10 s
 *   QUICK=1 bench_probes   N 200, W 3 s
 *   PROBES_N, PROBES_WINDOW_S override.
 *
 * JSON lines on stdout, progress on stderr.  tankd and httpd get a
 * parent-death signal.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "bench/bench_util.h"
#include "api/api_client.h"
#include "api/api_rpc.h"

#define HTTP_PORT 18977

static const char *const KINDS[] = { "none", "tcp", "http", "exec" };

typedef struct bench {
	char top[256], data[PATH_MAX], sock[PATH_MAX + 16], tankd[PATH_MAX];
	pid_t pid, httpd;
	long n;
	int kind;
} bench_t;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("bench_probes: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void emit(const char *kind, const char *metric, double value, const char *unit, long n)
{
	printf("{\"bench\": \"probes\", \"metric\": \"%s_%s\", \"value\": %.3f, \"unit\": \"%s\", "
	       "\"n\": %ld}\n", metric, kind, value, unit, n);
	fflush(stdout);
}

static int call(api_client_t *c, const char *method, api_pack_fn fn, void *arg,
		api_incoming_t *out)
{
	return bench_call("probes", c, method, fn, arg, 600000, out);
}

static int pack_pods(msgpack_packer *pk, void *arg)
{
	const bench_t *b = arg;
	char name[32];
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, (size_t)b->n);
	for (long i = 0; i < b->n; i++) {
		snprintf(name, sizeof name, "p%05ld", i);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, name);
		rc |= api_pack_cstr(pk, "containers");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, b->kind ? 3 : 2);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, "c");
		rc |= api_pack_cstr(pk, "command");
		rc |= msgpack_pack_array(pk, 2);
		rc |= api_pack_cstr(pk, "sleep");      rc |= api_pack_cstr(pk, "100000");
		if (!b->kind)
			continue;
		rc |= api_pack_cstr(pk, "readiness");
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "period");     rc |= api_pack_cstr(pk, "1s");
		rc |= api_pack_cstr(pk, KINDS[b->kind]);
		if (b->kind == 3) {
			rc |= msgpack_pack_array(pk, 1);
			rc |= api_pack_cstr(pk, "/bin/true");
		} else {
			rc |= msgpack_pack_map(pk, b->kind == 2 ? 2 : 1);
			rc |= api_pack_cstr(pk, "port");
			rc |= msgpack_pack_uint16(pk, HTTP_PORT);
			if (b->kind == 2) {
				rc |= api_pack_cstr(pk, "path");
				rc |= api_pack_cstr(pk, "/index.html");
			}
		}
	}
	return rc ? -ENOMEM : 0;
}

/* Pods whose status says ready. */
static long count_ready(api_client_t *c)
{
	api_incoming_t in;
	long n = 0;
	if (call(c, "status", NULL, NULL, &in) < 0)
		return -1;
	const msgpack_object *arr = in.result;
	for (uint32_t i = 0; arr && arr->type == MSGPACK_OBJECT_ARRAY && i < arr->via.array.size; i++) {
		const msgpack_object *r = api_map_get(&arr->via.array.ptr[i], "ready");
		n += r && r->type == MSGPACK_OBJECT_BOOLEAN && r->via.boolean;
	}
	api_incoming_free(&in);
	return n;
}

static int run_kind(bench_t *b, long window_s)
{
	api_client_t *c = NULL;
	tank_error_t e;
	char log[PATH_MAX + 16];
	const char *kind = KINDS[b->kind];
	int rc = -1;

	snprintf(b->data, sizeof b->data, "%s/data-%s", b->top, kind);
	snprintf(b->sock, sizeof b->sock, "%s/tank.sock", b->data);
	snprintf(log, sizeof log, "%s/tankd-%s.log", b->top, kind);
	mkdir(b->data, 0700);
	char *targv[] = { b->tankd, "--data-dir", b->data, NULL };
	b->pid = bench_spawn(log, targv);
	for (int i = 0; i < 5000 && api_client_connect(b->sock, &c, &e) < 0; i++) {
		c = NULL;
		bench_sleep_ms(2);
	}
	if (!c) {
		note("%s: tankd did not come up (%s)", kind, log);
		goto out;
	}
	uint64_t t0 = bench_now_ns();
	if (call(c, "apply", pack_pods, b, NULL) < 0)
		goto out;
	long ready = 0;
	while ((ready = count_ready(c)) >= 0 && ready < b->n && bench_now_ns() - t0 < 300ull * 1000000000u)
		bench_sleep_ms(50);
	if (ready != b->n) {
		note("%s: %ld of %ld ready", kind, ready, b->n);
		goto out;
	}
	double ready_s = (double)(bench_now_ns() - t0) / 1e9;
	size_t cap = (size_t)window_s * 120 + 16, n = 0;
	uint64_t *lat = calloc(cap, sizeof *lat);
	double cpu0 = bench_cpu_s(b->pid);
	uint64_t w0 = bench_now_ns(), end = w0 + (uint64_t)window_s * 1000000000u;
	while (bench_now_ns() < end && n < cap) {
		uint64_t a = bench_now_ns();
		if (call(c, "ping", NULL, NULL, NULL) < 0)
			break;
		lat[n++] = bench_now_ns() - a;
		bench_sleep_ms(10);
	}
	double cpu = (bench_cpu_s(b->pid) - cpu0) / ((double)(bench_now_ns() - w0) / 1e9) * 100.0;
	qsort(lat, n, sizeof *lat, bench_u64_cmp);
	emit(kind, "ready_s", ready_s, "s", b->n);
	emit(kind, "cpu_pct", cpu, "%", b->n);
	if (n) {
		emit(kind, "ping_p50", (double)lat[n / 2] / 1e6, "ms", (long)n);
		emit(kind, "ping_p99", (double)lat[n * 99 / 100] / 1e6, "ms", (long)n);
		emit(kind, "ping_max", (double)lat[n - 1] / 1e6, "ms", (long)n);
	}
	note("%s: %ld pods ready in %.2f s; tankd %.1f%% of a core; ping p50 %.2f p99 %.2f ms",
	     kind, b->n, ready_s, cpu, n ? (double)lat[n / 2] / 1e6 : 0,
	     n ? (double)lat[n * 99 / 100] / 1e6 : 0);
	free(lat);
	rc = 0;
out:
	if (c)
		api_client_close(c);
	bench_reap(&b->pid);
	return rc;
}

int main(void)
{
	bench_t b;
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	bool quick = getenv("QUICK") && atoi(getenv("QUICK"));
	long window = quick ? 3 : 10;
	char www[PATH_MAX + 8], log[PATH_MAX + 16], port[32];
	int rc = 0;

	memset(&b, 0, sizeof b);
	b.n = quick ? 200 : 1000;
	if (getenv("PROBES_N"))
		b.n = atol(getenv("PROBES_N"));
	if (getenv("PROBES_WINDOW_S"))
		window = atol(getenv("PROBES_WINDOW_S"));
	if (!realpath(build, b.tankd)) {
		note("no build dir %s", build);
		return 1;
	}
	strncat(b.tankd, "/bin/tankd", sizeof b.tankd - strlen(b.tankd) - 1);
	if (access("/bin/busybox", X_OK) != 0) {
		note("no /bin/busybox (scripts/deps.sh installs busybox-static)");
		return 1;
	}
	snprintf(b.top, sizeof b.top, "/tmp/tank-bench-probes-XXXXXX");
	if (!ts_mkdtemp_at(b.top))
		return 1;
	snprintf(www, sizeof www, "%s/www", b.top);
	mkdir(www, 0755);
	snprintf(log, sizeof log, "%s/www/index.html", b.top);
	FILE *f = fopen(log, "w");
	if (f) {
		fputs("ok\n", f);
		fclose(f);
	}
	snprintf(log, sizeof log, "%s/httpd.log", b.top);
	snprintf(port, sizeof port, "127.0.0.1:%d", HTTP_PORT);
	char *hargv[] = { "/bin/busybox", "httpd", "-f", "-p", port, "-h", www, NULL };
	b.httpd = bench_spawn(log, hargv);
	note("%ld pods, a readiness probe each every 1 s, window %ld s", b.n, window);
	for (b.kind = 0; b.kind < 4 && rc == 0; b.kind++)
		rc = run_kind(&b, window);
	bench_reap(&b.httpd);
	bench_rm_rf(b.top);
	return rc ? 1 : 0;
}
