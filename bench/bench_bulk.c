/*
 * bench_bulk — does tankd keep answering while it does bulk work?
 * (hardening round 2, item 5: big stores and big applies kept the socket
 * dark for seconds.)
 *
 * A real tankd in a temp dir.  A second client pings it every 5 ms from
 * its own thread, and every answer's latency is filed under the phase
 * the main thread is in:
 *   idle     half a second of nothing: the baseline
 *   apply    an apply of APPLY_N one-shot pods (restart: never, /bin/true)
 *            in one call, until `sync` says the loop has seen them all
 *   fill     more applies (batches of 1,000) up to STORE_N stored pods,
 *            and their runs; not reported, it only builds the store
 *   start    tankd stopped (SIGTERM) and started on that store: time to
 *            the first answered ping, then pings until `sync` answers
 *   delete   a delete of every name in one call, until `sync` answers
 * For each phase: pings answered, p50 / p99 / max latency, the phase's
 * duration, and the longest gap between two answers.
 *
 *   bench_bulk            STORE_N 100,000, APPLY_N 10,000
 *   QUICK=1 bench_bulk    STORE_N 10,000, APPLY_N 2,000
 *   BULK_STORE_N / BULK_APPLY_N override either.
 *   BULK_TOP=DIR          work in DIR (made if missing) instead of a temp
 *                         dir; when DIR already holds a store (a run with
 *                         BULK_KEEP=1 left it), idle, apply and fill are
 *                         skipped: tankd starts on it, then stop, start
 *                         and delete are measured as usual (for iterating
 *                         on the start, the stop and the delete without
 *                         the fill's 100,000 processes: the delete empties
 *                         the store, so reuse a copy of the kept dir)
 *   BULK_KEEP=1           no delete phase, and the dir is kept
 *
 * JSON lines on stdout, progress on stderr.  tankd gets a parent-death
 * signal, so nothing outlives this program.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "bench/bench_util.h"
#include "pod/pod_host.h"
#include "api/api_client.h"
#include "api/api_rpc.h"

/* apply_call: the pings of the apply phase asked before the apply's
 * answer (its validation and its commit, not its pods' runs). */
enum { PH_IDLE, PH_APPLY, PH_FILL, PH_START, PH_DELETE, PH_APPLY_CALL, PH_COUNT };
static const char *const PH_NAME[PH_COUNT] = { "idle", "apply", "fill", "start", "delete",
					       "apply_call" };

typedef struct lat {
	uint64_t *v;
	size_t n, cap;
	uint64_t max_gap;       /* longest time between two answers, ns */
	uint64_t last;          /* time of the last answer */
} lat_t;

typedef struct bench {
	char top[64];
	char tankd[PATH_MAX];
	char sock[PATH_MAX + 16];
	char data[PATH_MAX + 16];
	pid_t pid;
	api_client_t *cli;
	/* The pinger's side. */
	pthread_t th;
	atomic_int phase;
	atomic_bool in_call;       /* the apply's call is not answered yet */
	atomic_bool stop;
	atomic_bool daemon_down;   /* set while tankd is being restarted */
	pthread_mutex_t mu;
	lat_t lat[PH_COUNT];
} bench_t;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("bench_bulk: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void emit(const char *metric, double value, const char *unit, long n)
{
	printf("{\"bench\": \"bulk\", \"metric\": \"%s\", \"value\": %.3f, \"unit\": \"%s\", "
	       "\"n\": %ld}\n", metric, value, unit, n);
	fflush(stdout);
}

/* --- tankd --------------------------------------------------------------- */

static int daemon_start(bench_t *b)
{
	char log[PATH_MAX + 16];
	snprintf(log, sizeof log, "%s/tankd.log", b->top);
	char *argv[] = { b->tankd, "--data-dir", b->data, "--socket", b->sock, NULL };
	pid_t pid = bench_spawn(log, argv);
	if (pid < 0)
		return -errno;
	b->pid = pid;
	return 0;
}

/* Connects `*c` to tankd; returns the time it took, or 0 on failure. */
static uint64_t daemon_connect(bench_t *b, api_client_t **c, uint64_t t0)
{
	uint64_t deadline = bench_now_ns() + 600ull * 1000000000u;
	while (bench_now_ns() < deadline) {
		tank_error_t e;
		api_incoming_t in;
		if (api_client_connect(b->sock, c, &e) == 0) {
			if (api_client_call(*c, "ping", NULL, NULL, 600000, &in, &e) == 0) {
				api_incoming_free(&in);
				return bench_now_ns() - t0;
			}
			api_client_close(*c);
			*c = NULL;
		}
		int st;
		if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
			note("tankd exited at start: see %s/tankd.log", b->top);
			return 0;
		}
		bench_sleep_ms(1);
	}
	return 0;
}

static void daemon_stop(bench_t *b)
{
	if (b->pid <= 0)
		return;
	kill(b->pid, SIGTERM);
	for (int i = 0; i < 6000; i++) {
		int st;
		if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
			b->pid = 0;
			return;
		}
		bench_sleep_ms(10);
	}
	kill(b->pid, SIGKILL);
	waitpid(b->pid, NULL, 0);
	b->pid = 0;
}

static int call(api_client_t *c, const char *method, api_pack_fn fn, void *arg)
{
	return bench_call("bulk", c, method, fn, arg, 1200000, NULL);
}

/* tankd's store counters (`version`'s store map): the durable commits
 * and their time, and the loop's waits for a commit on the store's
 * thread.  Absent (an older tankd): all -1. */
typedef struct commits { double n, ms, waits, wait_ms; } commits_t;

static double map_num(const msgpack_object *m, const char *key)
{
	const msgpack_object *o = m ? api_map_get(m, key) : NULL;
	if (!o)
		return -1;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return (double)o->via.u64;
	if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
		return o->via.f64;
	return -1;
}

static commits_t commits_of(api_client_t *c)
{
	commits_t r = { -1, -1, -1, -1 };
	api_incoming_t in;
	if (bench_call("bulk", c, "version", NULL, NULL, 600000, &in) < 0)
		return r;
	const msgpack_object *st = api_map_get(in.result, "store");
	r = (commits_t){ map_num(st, "durable_commits"), map_num(st, "durable_commit_ms"),
			 map_num(st, "commit_waits"), map_num(st, "commit_wait_ms") };
	api_incoming_free(&in);
	return r;
}

/* --- requests --------------------------------------------------------------- */

typedef struct range { long from, to; } range_t;

static int pack_pods(msgpack_packer *pk, void *arg)
{
	const range_t *r = arg;
	char name[32];
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, (size_t)(r->to - r->from));
	for (long i = r->from; i < r->to; i++) {
		snprintf(name, sizeof name, "b%06ld", i);
		rc |= msgpack_pack_map(pk, 3);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, name);
		rc |= api_pack_cstr(pk, "restart");    rc |= api_pack_cstr(pk, "never");
		rc |= api_pack_cstr(pk, "containers");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, "c");
		rc |= api_pack_cstr(pk, "command");
		rc |= msgpack_pack_array(pk, 1);
		rc |= api_pack_cstr(pk, "/bin/true");
	}
	return rc ? -ENOMEM : 0;
}

static int pack_names(msgpack_packer *pk, void *arg)
{
	const range_t *r = arg;
	char name[32];
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, (size_t)(r->to - r->from));
	for (long i = r->from; i < r->to; i++) {
		snprintf(name, sizeof name, "b%06ld", i);
		rc |= api_pack_cstr(pk, name);
	}
	return rc ? -ENOMEM : 0;
}

/* One fill batch.  `sync` says the loop has seen every pod, not that
 * their processes have ended: on a loaded machine some of the apply's
 * 9,744 may still run when the next batch comes, and tankd refuses a
 * batch that would pass its descriptor limit (API_RESOURCE_LIMIT) until
 * they exit.  Retried for up to 10 minutes. */
static int fill_apply(api_client_t *c, range_t *f)
{
	for (int i = 0; i < 6000; i++) {
		api_incoming_t in;
		tank_error_t e;
		int err;
		tank_error_clear(&e);
		if ((err = api_client_call(c, "apply", pack_pods, f, 1200000, &in, &e)) < 0) {
			note("apply: %s", e.msg[0] ? e.msg : strerror(-err));
			return err;
		}
		int code = in.code;
		if (code != API_OK && code != API_RESOURCE_LIMIT)
			note("apply: tankd says: %s", in.message);
		api_incoming_free(&in);
		if (code == API_OK)
			return 0;
		if (code != API_RESOURCE_LIMIT)
			return -EPROTO;
		bench_sleep_ms(100);
	}
	note("apply: still refused for the descriptor limit after 10 minutes");
	return -ETIMEDOUT;
}

/* --- the pinger --------------------------------------------------------------- */

static void lat_add(lat_t *l, uint64_t v, uint64_t at)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		uint64_t *nv = realloc(l->v, cap * sizeof *nv);
		if (!nv)
			return;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	if (l->last && at - l->last > l->max_gap)
		l->max_gap = at - l->last;
	l->last = at;
}

static void *pinger(void *arg)
{
	bench_t *b = arg;
	api_client_t *c = NULL;

	while (!atomic_load(&b->stop)) {
		if (atomic_load(&b->daemon_down)) {
			if (c) {
				api_client_close(c);
				c = NULL;
			}
			bench_sleep_ms(1);
			continue;
		}
		tank_error_t e;
		if (!c && api_client_connect(b->sock, &c, &e) < 0) {
			c = NULL;
			bench_sleep_ms(1);
			continue;
		}
		api_incoming_t in;
		uint64_t t0 = bench_now_ns();
		int ph = atomic_load(&b->phase);
		bool in_call = atomic_load(&b->in_call);
		if (api_client_call(c, "ping", NULL, NULL, 600000, &in, &e) < 0) {
			api_client_close(c);
			c = NULL;
			continue;
		}
		api_incoming_free(&in);
		uint64_t t1 = bench_now_ns();
		/* An answer that straddles a phase change counts for the phase
		 * it was asked in. */
		pthread_mutex_lock(&b->mu);
		lat_add(&b->lat[ph], t1 - t0, t1);
		if (ph == PH_APPLY && in_call)
			lat_add(&b->lat[PH_APPLY_CALL], t1 - t0, t1);
		pthread_mutex_unlock(&b->mu);
		bench_sleep_ms(5);
	}
	if (c)
		api_client_close(c);
	return NULL;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void phase_report(bench_t *b, int ph, long n, uint64_t dur_ns)
{
	pthread_mutex_lock(&b->mu);
	lat_t *l = &b->lat[ph];
	if (!l->n) {
		pthread_mutex_unlock(&b->mu);
		note("%s (n=%ld): no ping answered in %.2f s", PH_NAME[ph], n, dur_ns / 1e9);
		emit("ping_answered", 0, "count", n);
		return;
	}
	qsort(l->v, l->n, sizeof *l->v, u64_cmp);
	double p50 = l->v[l->n / 2] / 1e6, p99 = l->v[l->n * 99 / 100] / 1e6;
	double mx = l->v[l->n - 1] / 1e6, gap = l->max_gap / 1e6;
	size_t cnt = l->n;
	pthread_mutex_unlock(&b->mu);
	char m[64];
	snprintf(m, sizeof m, "%s_ping_p50", PH_NAME[ph]);  emit(m, p50, "ms", n);
	snprintf(m, sizeof m, "%s_ping_p99", PH_NAME[ph]);  emit(m, p99, "ms", n);
	snprintf(m, sizeof m, "%s_ping_max", PH_NAME[ph]);  emit(m, mx, "ms", n);
	snprintf(m, sizeof m, "%s_seconds", PH_NAME[ph]);   emit(m, dur_ns / 1e9, "s", n);
	note("%-6s n=%-7ld %6.2f s  %5zu pings  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  "
	     "longest gap %7.2f ms", PH_NAME[ph], n, dur_ns / 1e9, cnt, p50, p99, mx, gap);
}

static void set_phase(bench_t *b, int ph)
{
	atomic_store(&b->phase, ph);
}

/* --- main ---------------------------------------------------------------------- */

static long env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	return s && *s ? strtol(s, NULL, 10) : dflt;
}

int main(void)
{
	static bench_t b;
	bool quick = getenv("QUICK") && strcmp(getenv("QUICK"), "1") == 0;
	long store_n = env_long("BULK_STORE_N", quick ? 10000 : 100000);
	long apply_n = env_long("BULK_APPLY_N", quick ? 2000 : 10000);
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	int rc = 1;

	if (apply_n > store_n)
		apply_n = store_n;
	snprintf(b.tankd, sizeof b.tankd, "%s/bin/tankd", build);
	if (access(b.tankd, X_OK) < 0 || access("/bin/true", X_OK) < 0) {
		fprintf(stderr, "bench_bulk: fatal: unable to find %s or /bin/true (run make first)\n",
			b.tankd);
		return 111;
	}
	/* tankd counts 3 descriptors per container that may still run
	 * (completed one-shot pods hold none): the apply of APPLY_N needs
	 * room for all of it at once.  Lift what tankd inherits. */
	struct rlimit rl = { 1 << 20, 1 << 20 };
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	/* tankd's own count (pod/pod_host.h), less a margin for the bench. */
	if (rl.rlim_cur != RLIM_INFINITY &&
	    (long)rl.rlim_cur < POD_HOST_FDS_PER_CONTAINER * apply_n + 512) {
		apply_n = ((long)rl.rlim_cur - 512) / POD_HOST_FDS_PER_CONTAINER;
		note("descriptor limit %llu: apply size lowered to %ld",
		     (unsigned long long)rl.rlim_cur, apply_n);
	}
	const char *top = getenv("BULK_TOP");
	bool keep = getenv("BULK_KEEP") && strcmp(getenv("BULK_KEEP"), "1") == 0;
	bool reuse = false;
	if (top && *top) {
		char st[PATH_MAX + 32];
		snprintf(b.top, sizeof b.top, "%s", top);
		if (mkdir(b.top, 0700) < 0 && errno != EEXIST) {
			perror("bench_bulk: mkdir BULK_TOP");
			return 111;
		}
		snprintf(st, sizeof st, "%s/data/store", b.top);
		reuse = access(st, F_OK) == 0;
	} else {
		snprintf(b.top, sizeof b.top, "/tmp/tank-bulk-XXXXXX");
		if (!ts_mkdtemp_at(b.top)) {
			perror("bench_bulk: mkdtemp");
			return 111;
		}
	}
	snprintf(b.data, sizeof b.data, "%s/data", b.top);
	snprintf(b.sock, sizeof b.sock, "%s/tank.sock", b.top);
	pthread_mutex_init(&b.mu, NULL);
	signal(SIGPIPE, SIG_IGN);

	uint64_t t0 = bench_now_ns();
	if (daemon_start(&b) < 0 || !daemon_connect(&b, &b.cli, t0))
		goto out;
	if (pthread_create(&b.th, NULL, pinger, &b) != 0)
		goto out;
	if (reuse) {
		note("reusing the store in %s (idle, apply and fill skipped)", b.top);
		set_phase(&b, PH_FILL);
		if (call(b.cli, "sync", NULL, NULL) < 0)
			goto out;
		goto stop;
	}
	/* idle: the baseline, tankd with nothing to do. */
	t0 = bench_now_ns();
	bench_sleep_ms(500);
	phase_report(&b, PH_IDLE, 0, bench_now_ns() - t0);

	/* apply: one call of APPLY_N pods, then until the loop is through. */
	t0 = bench_now_ns();
	set_phase(&b, PH_APPLY);
	range_t r = { 0, apply_n };
	commits_t c0 = commits_of(b.cli);
	atomic_store(&b.in_call, true);
	if (call(b.cli, "apply", pack_pods, &r) < 0)
		goto out;
	atomic_store(&b.in_call, false);
	uint64_t ack_ns = bench_now_ns() - t0;
	emit("apply_ack", ack_ns / 1e6, "ms", apply_n);
	note("apply: acknowledged after %.2f ms", ack_ns / 1e6);
	phase_report(&b, PH_APPLY_CALL, apply_n, ack_ns);
	commits_t c1 = commits_of(b.cli);
	if (c0.n >= 0 && c1.n >= 0) {
		/* The apply's commit: the durable commits between the two. */
		emit("apply_commit_ms", c1.ms - c0.ms, "ms", apply_n);
		emit("apply_loop_waits", c1.waits - c0.waits, "count", apply_n);
		emit("apply_loop_wait_ms", c1.wait_ms - c0.wait_ms, "ms", apply_n);
		note("apply: %.0f durable commit(s), %.2f ms begin to commit; the loop waited "
		     "for it %.0f time(s), %.2f ms", c1.n - c0.n, c1.ms - c0.ms,
		     c1.waits - c0.waits, c1.wait_ms - c0.wait_ms);
	}
	if (call(b.cli, "sync", NULL, NULL) < 0)
		goto out;
	phase_report(&b, PH_APPLY, apply_n, bench_now_ns() - t0);
	commits_t c2 = commits_of(b.cli);
	if (c1.n >= 0 && c2.n >= 0)
		note("apply: until sync, the loop waited for a commit %.0f more time(s), %.2f ms",
		     c2.waits - c1.waits, c2.wait_ms - c1.wait_ms);

	/* fill: up to STORE_N, in batches, not reported. */
	set_phase(&b, PH_FILL);
	t0 = bench_now_ns();
	for (long from = apply_n; from < store_n; from += 1000) {
		range_t f = { from, from + 1000 < store_n ? from + 1000 : store_n };
		if (fill_apply(b.cli, &f) < 0)
			goto out;
		/* Each batch run to its end before the next: tankd refuses an
		 * apply whose containers, with those still running, would
		 * pass its descriptor limit (the apply above may have used it
		 * nearly all). */
		if (call(b.cli, "sync", NULL, NULL) < 0)
			goto out;
		if ((from / 1000) % 10 == 0)
			note("fill: %ld pods stored", f.to);
	}
	if (call(b.cli, "sync", NULL, NULL) < 0)
		goto out;
	note("fill: %ld pods stored and seen in %.1f s", store_n, (bench_now_ns() - t0) / 1e9);

stop:
	/* start: stop tankd and start it on the full store. */
	atomic_store(&b.daemon_down, true);
	api_client_close(b.cli);
	b.cli = NULL;
	t0 = bench_now_ns();
	daemon_stop(&b);
	emit("stop_seconds", (bench_now_ns() - t0) / 1e9, "s", store_n);
	note("stop: tankd gone %.2f s after SIGTERM", (bench_now_ns() - t0) / 1e9);
	set_phase(&b, PH_START);
	t0 = bench_now_ns();
	if (daemon_start(&b) < 0)
		goto out;
	atomic_store(&b.daemon_down, false);
	uint64_t first = daemon_connect(&b, &b.cli, t0);
	if (!first || call(b.cli, "sync", NULL, NULL) < 0)
		goto out;
	emit("start_first_ping", first / 1e6, "ms", store_n);
	note("start: first ping answered %.2f ms after exec (spawned at %llu ns, "
	     "CLOCK_MONOTONIC)", first / 1e6, (unsigned long long)t0);
	phase_report(&b, PH_START, store_n, bench_now_ns() - t0);

	if (keep) {
		rc = 0;
		goto out;
	}
	/* delete: every name in one call. */
	set_phase(&b, PH_DELETE);
	t0 = bench_now_ns();
	range_t all = { 0, store_n };
	if (call(b.cli, "delete", pack_names, &all) < 0)
		goto out;
	emit("delete_ack", (bench_now_ns() - t0) / 1e6, "ms", store_n);
	note("delete: acknowledged after %.2f ms", (bench_now_ns() - t0) / 1e6);
	if (call(b.cli, "sync", NULL, NULL) < 0)
		goto out;
	phase_report(&b, PH_DELETE, store_n, bench_now_ns() - t0);
	rc = 0;
out:
	atomic_store(&b.stop, true);
	if (b.th)
		pthread_join(b.th, NULL);
	if (b.cli)
		api_client_close(b.cli);
	daemon_stop(&b);
	if (rc)
		note("failed; tankd's log: %s/tankd.log", b.top);
	else if (keep)
		note("kept: %s", b.top);
	else
		bench_rm_rf(b.top);
	for (int i = 0; i < PH_COUNT; i++)
		free(b.lat[i].v);
	return rc;
}
