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
 * Then at scale (issue 38 item 7): SN pods, a tcp readiness probe each
 * every SPERIOD, all at one listener this program runs on a thread of its
 * own (accept, stamp, close: cheaper and nearer a real service's port
 * than 10,000 listening containers).  Over a window of SW seconds once
 * all are ready, metrics suffixed _scale:
 *   cpu_pct     tankd's CPU, percent of one core (/proc/PID/stat)
 *   ping p50/p99/max   a client pinging every 5 ms
 *   probe_p99   the probe runs' duration p99, start to result, from
 *               tankd's own histogram (GET /metrics at the window's ends;
 *               the bucket's upper bound: 0.1, 0.25, 0.5, 1, 2.5 … ms)
 *   spread_peak  the busiest 5% slice of the period: its connects over
 *               the mean slice's, over the window (1: even, 20: all at
 *               one instant)
 *   connects    connects the listener took in the window, per second
 *               (N / SPERIOD if every probe runs on time)
 *
 *   bench_probes           SN 1,000, SPERIOD 10 s, SW 60 s
 *   QUICK=1 bench_probes   SN 200, SPERIOD 2 s, SW 6 s
 *   PROBES_SCALE_N, PROBES_SCALE_PERIOD_S, PROBES_SCALE_WINDOW_S
 *   override; PROBES_SCALE_N=0 skips it, PROBES_KINDS=0 skips the kinds.
 *   Past 2,000 pods run it under `flock /work/bench.lock` (docs/bench.md).
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
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

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
	/* At scale: the probes' listener and what it saw. */
	long period_s;
	int lfd;
	uint16_t lport;
	pthread_t lth;
	atomic_bool lstop;
	pthread_mutex_t mu;
	uint64_t *acc;             /* connect stamps (ns) */
	size_t nacc, capacc;
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
		char period[24];
		snprintf(period, sizeof period, "%lds", b->period_s ? b->period_s : 1);
		rc |= api_pack_cstr(pk, "period");     rc |= api_pack_cstr(pk, period);
		rc |= api_pack_cstr(pk, KINDS[b->kind]);
		if (b->kind == 3) {
			rc |= msgpack_pack_array(pk, 1);
			rc |= api_pack_cstr(pk, "/bin/true");
		} else {
			rc |= msgpack_pack_map(pk, b->kind == 2 ? 2 : 1);
			rc |= api_pack_cstr(pk, "port");
			rc |= msgpack_pack_uint16(pk, b->period_s ? b->lport : HTTP_PORT);
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
	long running = 0;
	for (uint32_t i = 0; arr && arr->type == MSGPACK_OBJECT_ARRAY && i < arr->via.array.size; i++) {
		const msgpack_object *r = api_map_get(&arr->via.array.ptr[i], "ready");
		n += r && r->type == MSGPACK_OBJECT_BOOLEAN && r->via.boolean;
		running += api_obj_streq(api_map_get(&arr->via.array.ptr[i], "phase"), "running");
	}
	if (getenv("PROBES_TRACE"))
		note("%.3f: %ld running, %ld ready", bench_now_ns() / 1e9, running, n);
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

/* --- at scale ----------------------------------------------------------------- */

static void *listener(void *arg)
{
	bench_t *b = arg;

	while (!atomic_load(&b->lstop)) {
		struct pollfd pf = { .fd = b->lfd, .events = POLLIN };
		int c;
		(void)poll(&pf, 1, 50);
		while ((c = accept4(b->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
			uint64_t t = bench_now_ns();
			close(c);
			pthread_mutex_lock(&b->mu);
			if (b->nacc < b->capacc)
				b->acc[b->nacc++] = t;
			pthread_mutex_unlock(&b->mu);
		}
	}
	return NULL;
}

/* 127.0.0.1 on a port the kernel picks, backlog as deep as it allows;
 * -1 on failure. */
static int listen_any(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 65535) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

/* The tcp probes' duration histogram from tankd's /metrics (cumulative
 * counts per bound, KIT_HIST_NB + 1 of them, +Inf last); -1 on failure. */
static int scrape(uint16_t port, double cum[16])
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
	size_t cap = 1 << 20, len = 0;   /* grows: at 10,000 pods /metrics is MiBs */
	char *buf = malloc(cap + 1);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n = 0;
	ssize_t r;

	if (!buf || fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((r = read(fd, buf + len, cap - len)) > 0) {
		len += (size_t)r;
		if (len == cap) {
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = '\0';
	const char *key = "tank_probe_duration_seconds_bucket{probe=\"tcp\",le=\"";
	for (char *q = buf; n < 16 && (q = strstr(q, key)); q++) {
		char *v = strstr(q, "} ");
		if (v)
			cum[n++] = strtod(v + 2, NULL);
	}
	free(buf);
	return n == 16 ? 0 : -1;
}

static const char *const LE_MS[16] = {
	"0.1", "0.25", "0.5", "1", "2.5", "5", "10", "25", "50", "100", "250", "500",
	"1000", "2500", "10000", "+Inf",
};

/* Pings every 5 ms on a thread of its own while the window lasts. */
typedef struct pinger {
	bench_t *b;
	atomic_bool stop;
	uint64_t *lat;
	size_t n, cap;
} pinger_t;

static void *pinger(void *arg)
{
	pinger_t *pg = arg;
	api_client_t *c = NULL;
	tank_error_t e;

	if (api_client_connect(pg->b->sock, &c, &e) < 0)
		return NULL;
	while (!atomic_load(&pg->stop) && pg->n < pg->cap) {
		api_incoming_t in;
		uint64_t a = bench_now_ns();
		if (api_client_call(c, "ping", NULL, NULL, 600000, &in, &e) < 0)
			break;
		api_incoming_free(&in);
		pg->lat[pg->n++] = bench_now_ns() - a;
		bench_sleep_ms(5);
	}
	api_client_close(c);
	return NULL;
}

static int run_scale(bench_t *b, long window_s)
{
	api_client_t *c = NULL;
	tank_error_t e;
	char log[PATH_MAX + 16], http[64];
	uint16_t hport = 0;
	int rc = -1, hfd;

	/* A port for tankd's /metrics: one the kernel gave us, let go. */
	if ((hfd = listen_any(&hport)) < 0)
		return -1;
	close(hfd);
	snprintf(http, sizeof http, "127.0.0.1:%u", (unsigned)hport);
	snprintf(b->data, sizeof b->data, "%s/data-scale", b->top);
	snprintf(b->sock, sizeof b->sock, "%s/tank.sock", b->data);
	snprintf(log, sizeof log, "%s/tankd-scale.log", b->top);
	mkdir(b->data, 0700);
	char *targv[] = { b->tankd, "--data-dir", b->data, "--http", http, NULL };
	b->pid = bench_spawn(log, targv);
	for (int i = 0; i < 5000 && api_client_connect(b->sock, &c, &e) < 0; i++) {
		c = NULL;
		bench_sleep_ms(2);
	}
	if (!c) {
		note("scale: tankd did not come up (%s)", log);
		goto out;
	}
	uint64_t t0 = bench_now_ns();
	b->kind = 1;
	if (call(c, "apply", pack_pods, b, NULL) < 0)
		goto out;
	long ready = 0;
	/* 30 min: 10,000 pods on a machine others load too take minutes. */
	while ((ready = count_ready(c)) >= 0 && ready < b->n && bench_now_ns() - t0 < 1800ull * 1000000000u)
		bench_sleep_ms(b->n > 2000 ? 2000 : 100);
	if (ready != b->n) {
		note("scale: %ld of %ld ready", ready, b->n);
		goto out;
	}
	double ready_s = (double)(bench_now_ns() - t0) / 1e9;
	api_client_close(c);
	c = NULL;

	/* The window: pings on their thread, connects on the listener's. */
	pinger_t pg = { .b = b, .cap = (size_t)window_s * 250 + 16 };
	pthread_t pth;
	double h0[16], h1[16];
	if (!(pg.lat = calloc(pg.cap, sizeof *pg.lat)))
		goto out;
	int hrc = scrape(hport, h0);
	if (hrc < 0)
		note("scale: no /metrics from tankd at %s: no probe_p99", http);
	pthread_mutex_lock(&b->mu);
	b->nacc = 0;
	pthread_mutex_unlock(&b->mu);
	double cpu0 = bench_cpu_s(b->pid);
	uint64_t w0 = bench_now_ns();
	if (pthread_create(&pth, NULL, pinger, &pg) != 0) {
		free(pg.lat);
		goto out;
	}
	bench_sleep_ms(window_s * 1000);
	atomic_store(&pg.stop, true);
	pthread_join(pth, NULL);
	uint64_t w1 = bench_now_ns();
	double cpu = (bench_cpu_s(b->pid) - cpu0) / ((double)(w1 - w0) / 1e9) * 100.0;
	if (hrc == 0)
		hrc = scrape(hport, h1);

	/* The spread: connects per 5% slice of the period, over the window
	 * (finer slices would measure the noise of a few connects each). */
	uint64_t slice = (uint64_t)b->period_s * 50000000u;
	size_t nsl = (size_t)((w1 - w0) / slice) + 1, nacc, peak = 0;
	size_t *bins = calloc(nsl, sizeof *bins);
	pthread_mutex_lock(&b->mu);
	nacc = b->nacc;
	for (size_t i = 0; bins && i < nacc; i++)
		if (b->acc[i] >= w0 && b->acc[i] < w1)
			bins[(b->acc[i] - w0) / slice]++;
	pthread_mutex_unlock(&b->mu);
	for (size_t i = 0; bins && i + 1 < nsl; i++)   /* the last slice is partial */
		if (bins[i] > peak)
			peak = bins[i];
	double mean = nsl > 1 ? (double)nacc / ((double)(w1 - w0) / (double)slice) : 0;
	free(bins);

	qsort(pg.lat, pg.n, sizeof *pg.lat, bench_u64_cmp);
	emit("scale", "ready_s", ready_s, "s", b->n);
	emit("scale", "cpu_pct", cpu, "%", b->n);
	if (pg.n) {
		emit("scale", "ping_p50", (double)pg.lat[pg.n / 2] / 1e6, "ms", (long)pg.n);
		emit("scale", "ping_p99", (double)pg.lat[pg.n * 99 / 100] / 1e6, "ms", (long)pg.n);
		emit("scale", "ping_max", (double)pg.lat[pg.n - 1] / 1e6, "ms", (long)pg.n);
	}
	const char *p99 = "?";
	double runs = hrc == 0 ? h1[15] - h0[15] : 0;
	for (int i = 0; runs > 0 && i < 16; i++)
		if (h1[i] - h0[i] >= runs * 0.99) {
			p99 = LE_MS[i];
			if (i < 15)
				emit("scale", "probe_p99", strtod(LE_MS[i], NULL), "ms", (long)runs);
			break;
		}
	emit("scale", "spread_peak", mean > 0 ? (double)peak / mean : 0, "x", (long)nacc);
	emit("scale", "connects", (double)nacc / ((double)(w1 - w0) / 1e9), "/s", b->n);
	note("scale: %ld pods, a tcp probe every %ld s: ready in %.2f s; over %ld s tankd "
	     "%.2f%% of a core, ping p50 %.2f p99 %.2f max %.2f ms, probe p99 <= %s ms "
	     "(%.0f runs), %.1f connects/s, busiest 5%% of the period %.1fx the mean",
	     b->n, b->period_s, ready_s, window_s, cpu,
	     pg.n ? (double)pg.lat[pg.n / 2] / 1e6 : 0,
	     pg.n ? (double)pg.lat[pg.n * 99 / 100] / 1e6 : 0,
	     pg.n ? (double)pg.lat[pg.n - 1] / 1e6 : 0, p99, runs,
	     (double)nacc / ((double)(w1 - w0) / 1e9), mean > 0 ? (double)peak / mean : 0);
	free(pg.lat);
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
	bool kinds = !getenv("PROBES_KINDS") || atoi(getenv("PROBES_KINDS"));
	if (kinds)
		note("%ld pods, a readiness probe each every 1 s, window %ld s", b.n, window);
	for (b.kind = 0; kinds && b.kind < 4 && rc == 0; b.kind++)
		rc = run_kind(&b, window);
	bench_reap(&b.httpd);

	long sn = quick ? 200 : 1000, speriod = quick ? 2 : 10, swindow = quick ? 6 : 60;
	if (getenv("PROBES_SCALE_N"))
		sn = atol(getenv("PROBES_SCALE_N"));
	if (getenv("PROBES_SCALE_PERIOD_S"))
		speriod = atol(getenv("PROBES_SCALE_PERIOD_S"));
	if (getenv("PROBES_SCALE_WINDOW_S"))
		swindow = atol(getenv("PROBES_SCALE_WINDOW_S"));
	if (rc == 0 && sn > 0 && speriod > 0 && swindow > 0) {
		b.n = sn;
		b.period_s = speriod;
		b.capacc = (size_t)(sn * swindow / speriod) * 2 + 1024;
		pthread_mutex_init(&b.mu, NULL);
		if (!(b.acc = calloc(b.capacc, sizeof *b.acc)) || (b.lfd = listen_any(&b.lport)) < 0 ||
		    pthread_create(&b.lth, NULL, listener, &b) != 0) {
			note("scale: no listener");
			rc = -1;
		} else {
			note("%ld pods, a tcp readiness probe each every %ld s at one listener "
			     "(127.0.0.1:%u), window %ld s", sn, speriod, (unsigned)b.lport, swindow);
			rc = run_scale(&b, swindow);
			atomic_store(&b.lstop, true);
			pthread_join(b.lth, NULL);
			close(b.lfd);
		}
		free(b.acc);
	}
	bench_rm_rf(b.top);
	return rc ? 1 : 0;
}
