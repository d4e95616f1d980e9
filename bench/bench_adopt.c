/*
 * bench_adopt — live re-adoption (issue 35): a real `tankd --keeper` with
 * N pods (/bin/sleep), then
 *   reexec: `daemon.reexec`, and the client-visible pause: from the reply
 *           until a new connection is served by the new image (a ping
 *           every millisecond meanwhile), then the time until every pod
 *           is adopted (daemon.status's `adopted` grew by N);
 *   kill9:  SIGKILL to tankd, and the time until the keeper's next tankd
 *           serves (the keeper waits 250 ms first) and until every pod is
 *           adopted.
 * Also checks that no container was restarted (`running`'s pids are the
 * same before and after).  Then, at the same N, BENCH_REPEAT (20; QUICK=1:
 * 3) reexecs and as many kill -9s in a row, each waited for until every
 * pod is adopted again, and reports at the start and at the end the fds
 * and RSS of tankd and of the keeper and the processes under the keeper
 * (a leak grows them), and the spread of the pause and adoption times.
 * N = 1000 (QUICK=1), else 1000 and 10000 (BENCH_N=a,b overrides).  tankd
 * holds 2 fds a pod and 256 for itself (pod/pod_host.h, the figure its
 * apply checks), the keeper 2 a pod: the bench raises its descriptor
 * limit, hard limit included, up to fs.nr_open where it may (root with
 * CAP_SYS_RESOURCE), and tankd and the keeper inherit it; an N the limit
 * cannot take is skipped with the reason.  JSON lines on stdout, notes
 * on stderr.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "pod/pod_host.h"

/* What tankd's apply needs for n pods of one container (pod_host_plan). */
static long fds_needed(long n)
{
	return (long)POD_HOST_FDS_PER_CONTAINER * n + POD_HOST_FD_RESERVE;
}

typedef struct ctx {
	char build[PATH_MAX];
	char dir[PATH_MAX];
	char sock[PATH_MAX + 64];
	pid_t keeper;
} ctx_t;

static void emit(const char *metric, double v, const char *unit, long n)
{
	printf("{\"bench\": \"adopt\", \"metric\": \"%s\", \"value\": %.3f, \"unit\": \"%s\", "
	       "\"n\": %ld}\n", metric, v, unit, n);
	fflush(stdout);
}

/* One call on a fresh connection: 0, or < 0 when nobody serves. */
static int call_once(ctx_t *c, const char *method, api_incoming_t *in, int timeout_ms)
{
	api_client_t *cl;
	tank_error_t e;
	int r;

	if (api_client_connect(c->sock, &cl, &e) < 0)
		return -ECONNREFUSED;
	r = api_client_call(cl, method, NULL, NULL, timeout_ms, in, &e);
	api_client_close(cl);
	if (r < 0)
		return r;
	if (in->code != API_OK) {
		api_incoming_free(in);
		return -EPROTO;
	}
	return 0;
}

static uint64_t map_u64(const msgpack_object *m, const char *key)
{
	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return 0;
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object_kv *kv = &m->via.map.ptr[i];
		if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(key) &&
		    !memcmp(kv->key.via.str.ptr, key, kv->key.via.str.size))
			return kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER ? kv->val.via.u64 : 0;
	}
	return 0;
}

/* daemon.status's field, or 0 when nobody answers. */
static uint64_t status_of(ctx_t *c, const char *key)
{
	api_incoming_t in;
	uint64_t v;

	if (call_once(c, "daemon.status", &in, 5000) < 0)
		return 0;
	v = map_u64(in.result, key);
	api_incoming_free(&in);
	return v;
}

/* Sum and count of the pids `running` lists (a pid changed: the sum
 * does, nearly surely). */
static size_t running(ctx_t *c, uint64_t *sum)
{
	api_incoming_t in;
	size_t n = 0;

	*sum = 0;
	if (call_once(c, "running", &in, 30000) < 0)
		return 0;
	if (in.result && in.result->type == MSGPACK_OBJECT_MAP) {
		n = in.result->via.map.size;
		for (uint32_t i = 0; i < n; i++)
			if (in.result->via.map.ptr[i].val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				*sum += in.result->via.map.ptr[i].val.via.u64;
	}
	api_incoming_free(&in);
	return n;
}

static int apply_pods(ctx_t *c, long n)
{
	char path[PATH_MAX + 32], cmd[4 * PATH_MAX + 128];
	FILE *f;

	snprintf(path, sizeof path, "%s/pods.yaml", c->dir);
	if (!(f = fopen(path, "w")))
		return -errno;
	for (long i = 0; i < n; i++)
		fprintf(f, "name: a%ld\ncontainers:\n  - name: s\n"
			"    command: [/bin/sleep, \"100000\"]\n---\n", i);
	fclose(f);
	snprintf(cmd, sizeof cmd, "'%s/bin/tankctl' --socket '%s' apply -f '%s' >/dev/null",
		 c->build, c->sock, path);
	return system(cmd) == 0 ? 0 : -EIO;
}

/* Waits until every pod is adopted (adopted >= want); ms, or -1. */
static double wait_adopted(ctx_t *c, uint64_t want, uint64_t t0, int secs)
{
	for (int i = 0; i < secs * 100; i++) {
		if (status_of(c, "adopted") >= want)
			return (double)(bench_now_ns() - t0) / 1e6;
		bench_sleep_ms(10);
	}
	return -1;
}

/* --- what a leak would grow ------------------------------------------------ */

static long proc_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	long n = 0;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	if (!(dir = opendir(path)))
		return -1;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* A line of /proc/PID/status ("VmRSS:", "RssAnon:", "RssFile:"), in kB.
 * The anonymous part is the heap a leak grows; the file part is mostly
 * the store's pages, mapped (LMDB), which grow with its records. */
static long proc_status_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	long kb = -1;
	size_t fl = strlen(field);
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, field, fl) && sscanf(line + fl, " %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static long proc_children(pid_t pid)
{
	char path[96];
	long n = 0;
	int ch;
	bool in = false;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while ((ch = fgetc(f)) != EOF) {
		if (ch != ' ' && ch != '\n' && !in)
			n++;
		in = ch != ' ' && ch != '\n';
	}
	fclose(f);
	return n;
}

/* One line: fds and RSS of tankd and the keeper, and the processes under
 * the keeper (its children, tankd among them, and tankd's). */
static void snapshot(ctx_t *c, const char *when, long n)
{
	pid_t tankd = (pid_t)status_of(c, "pid");

	printf("{\"bench\": \"adopt\", \"metric\": \"resources_%s\", \"n\": %ld, "
	       "\"tankd_fds\": %ld, \"keeper_fds\": %ld, \"tankd_rss_kb\": %ld, "
	       "\"tankd_rss_anon_kb\": %ld, \"tankd_rss_file_kb\": %ld, "
	       "\"keeper_rss_kb\": %ld, \"processes\": %ld}\n", when, n,
	       proc_fds(tankd), proc_fds(c->keeper), proc_status_kb(tankd, "VmRSS:"),
	       proc_status_kb(tankd, "RssAnon:"), proc_status_kb(tankd, "RssFile:"),
	       proc_status_kb(c->keeper, "VmRSS:"),
	       proc_children(c->keeper) + proc_children(tankd));
	fflush(stdout);
}

static void spread(const char *metric, const double *v, int k, long n)
{
	double lo = 0, hi = 0, sum = 0;
	int got = 0;

	for (int i = 0; i < k; i++) {
		if (v[i] < 0)
			continue;
		lo = !got || v[i] < lo ? v[i] : lo;
		hi = !got || v[i] > hi ? v[i] : hi;
		sum += v[i];
		got++;
	}
	printf("{\"bench\": \"adopt\", \"metric\": \"%s\", \"unit\": \"ms\", \"n\": %ld, "
	       "\"rounds\": %d, \"ok\": %d, \"min\": %.3f, \"mean\": %.3f, \"max\": %.3f}\n",
	       metric, n, k, got, lo, got ? sum / got : 0, hi);
	fflush(stdout);
}

/* A reexec; its pause and time to full adoption into *pause, *adopt
 * (-1 when it did not happen).  < 0: the call failed. */
static int one_reexec(ctx_t *c, long n, double *pause, double *adopt)
{
	uint64_t before = status_of(c, "reexecs"), adopted = status_of(c, "adopted"), t0;
	api_incoming_t in;

	*pause = *adopt = -1;
	if (call_once(c, "daemon.reexec", &in, 5000) < 0)
		return -1;
	api_incoming_free(&in);
	t0 = bench_now_ns();
	for (int i = 0; i < 60000; i++) {
		if (status_of(c, "reexecs") > before) {
			*pause = (double)(bench_now_ns() - t0) / 1e6;
			break;
		}
		bench_sleep_ms(1);
	}
	*adopt = wait_adopted(c, adopted + (uint64_t)n, t0, 120);
	return 0;
}

/* A kill -9 of the serving tankd; the time until another serves and
 * until it adopted every pod (its own count starts at 0). */
static void one_kill9(ctx_t *c, long n, double *serving, double *adopt)
{
	pid_t pid = (pid_t)status_of(c, "pid");
	uint64_t t0 = bench_now_ns();

	*serving = *adopt = -1;
	kill(pid, SIGKILL);
	for (int i = 0; i < 60000; i++) {
		uint64_t now = status_of(c, "pid");
		if (now && now != (uint64_t)pid) {
			*serving = (double)(bench_now_ns() - t0) / 1e6;
			ts_own_pid((pid_t)now);
			break;
		}
		bench_sleep_ms(1);
	}
	*adopt = wait_adopted(c, (uint64_t)n, t0, 120);
}

static int run(ctx_t *c, long n)
{
	char data[PATH_MAX + 32], log[PATH_MAX + 64], tankd[PATH_MAX + 16];
	uint64_t sum0, sum1, t0, adopted;
	api_incoming_t in;
	size_t got;

	snprintf(data, sizeof data, "%s/d%ld", c->dir, n);
	mkdir(data, 0700);
	snprintf(c->sock, sizeof c->sock, "%s/tank.sock", data);
	snprintf(log, sizeof log, "%s/tankd.log", data);
	snprintf(tankd, sizeof tankd, "%s/bin/tankd", c->build);
	char *argv[] = { tankd, (char *)"--keeper", (char *)"--data-dir", data,
			 (char *)"--socket", c->sock, NULL };
	c->keeper = bench_spawn(log, argv);
	for (int i = 0; i < 500; i++) {
		if (call_once(c, "ping", &in, 1000) == 0) {
			api_incoming_free(&in);
			break;
		}
		bench_sleep_ms(20);
	}
	/* The keeper's tankd is owned too: it goes however we end. */
	if (status_of(c, "pid"))
		ts_own_pid((pid_t)status_of(c, "pid"));
	if (apply_pods(c, n) < 0) {
		fprintf(stderr, "bench_adopt: apply of %ld pods failed (see %s)\n", n, log);
		return -1;
	}
	for (int i = 0; i < 6000 && (got = running(c, &sum0)) < (size_t)n; i++)
		bench_sleep_ms(50);
	if (running(c, &sum0) < (size_t)n) {
		fprintf(stderr, "bench_adopt: %ld pods did not all run\n", n);
		return -1;
	}
	bench_sleep_ms(1000);   /* the group commit: every pid is stored */

	/* reexec */
	adopted = status_of(c, "adopted");
	if (call_once(c, "daemon.reexec", &in, 5000) < 0) {
		fprintf(stderr, "bench_adopt: daemon.reexec failed\n");
		return -1;
	}
	api_incoming_free(&in);
	t0 = bench_now_ns();
	uint64_t served = 0;
	for (int i = 0; i < 60000; i++) {
		if (status_of(c, "reexecs") >= 1) {
			served = bench_now_ns();
			break;
		}
		bench_sleep_ms(1);
	}
	double adopt_ms = wait_adopted(c, adopted + (uint64_t)n, t0, 120);
	emit("reexec_pause_ms", served ? (double)(served - t0) / 1e6 : -1, "ms", n);
	emit("reexec_full_adoption_ms", adopt_ms, "ms", n);
	if (running(c, &sum1) != (size_t)n || sum1 != sum0)
		fprintf(stderr, "bench_adopt: after the reexec, pods were restarted\n");

	/* kill -9 */
	pid_t pid = (pid_t)status_of(c, "pid");
	adopted = status_of(c, "adopted");
	t0 = bench_now_ns();
	kill(pid, SIGKILL);
	served = 0;
	for (int i = 0; i < 60000; i++) {
		uint64_t now = status_of(c, "pid");
		if (now && now != (uint64_t)pid) {
			served = bench_now_ns();
			break;
		}
		bench_sleep_ms(1);
	}
	if (served)
		ts_own_pid((pid_t)status_of(c, "pid"));
	/* A new life counts from 0: every pod is adopted once more. */
	adopt_ms = wait_adopted(c, (uint64_t)n, t0, 120);
	emit("kill9_serving_again_ms", served ? (double)(served - t0) / 1e6 : -1, "ms", n);
	emit("kill9_full_adoption_ms", adopt_ms, "ms", n);
	if (running(c, &sum1) != (size_t)n || sum1 != sum0)
		fprintf(stderr, "bench_adopt: after the kill -9, pods were restarted\n");
	(void)adopted;

	/* Again and again: nothing may pile up. */
	const char *rs = getenv("BENCH_REPEAT");
	bool quick = getenv("QUICK") && strcmp(getenv("QUICK"), "0");
	int rounds = rs && *rs ? atoi(rs) : quick ? 3 : 20;
	if (rounds > 0) {
		double *rp = calloc((size_t)rounds, sizeof *rp), *ra = calloc((size_t)rounds, sizeof *ra);
		double *ks = calloc((size_t)rounds, sizeof *ks), *ka = calloc((size_t)rounds, sizeof *ka);
		if (!rp || !ra || !ks || !ka) {
			free(rp), free(ra), free(ks), free(ka);
			return -1;
		}
		bench_sleep_ms(1000);
		snapshot(c, "start", n);
		for (int r = 0; r < rounds; r++)
			if (one_reexec(c, n, &rp[r], &ra[r]) < 0)
				fprintf(stderr, "bench_adopt: reexec %d failed\n", r);
		for (int r = 0; r < rounds; r++)
			one_kill9(c, n, &ks[r], &ka[r]);
		bench_sleep_ms(1000);
		snapshot(c, "end", n);
		spread("repeat_reexec_pause_ms", rp, rounds, n);
		spread("repeat_reexec_full_adoption_ms", ra, rounds, n);
		spread("repeat_kill9_serving_again_ms", ks, rounds, n);
		spread("repeat_kill9_full_adoption_ms", ka, rounds, n);
		if (running(c, &sum1) != (size_t)n || sum1 != sum0)
			fprintf(stderr, "bench_adopt: after the repeats, pods were restarted\n");
		free(rp), free(ra), free(ks), free(ka);
	}
	fprintf(stderr, "bench_adopt: n=%ld done\n", n);
	bench_reap(&c->keeper);
	return 0;
}

/* The largest hard limit the kernel allows (fs.nr_open). */
static long nr_open(void)
{
	long v = 1048576;
	FILE *f = fopen("/proc/sys/fs/nr_open", "r");

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = 1048576;
		fclose(f);
	}
	return v;
}

int main(void)
{
	ctx_t c = { 0 };
	const char *b = getenv("BUILD"), *ns = getenv("BENCH_N");
	bool quick = getenv("QUICK") && strcmp(getenv("QUICK"), "0");
	long sizes[8] = { 1000, 10000 };
	size_t nsizes = quick ? 1 : 2;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!realpath(b && *b ? b : "build", c.build)) {
		fprintf(stderr, "bench_adopt: no build dir\n");
		return 1;
	}
	if (ns && *ns) {
		nsizes = 0;
		for (char *s = strdup(ns), *t = strtok(s, ","); t && nsizes < 8; t = strtok(NULL, ","))
			sizes[nsizes++] = atol(t);
	}
	snprintf(c.dir, sizeof c.dir, "/tmp/tank-bench-adopt-XXXXXX");
	if (!ts_mkdtemp_at(c.dir)) {
		fprintf(stderr, "bench_adopt: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	for (size_t i = 0; i < nsizes; i++) {
		/* tankd holds 2 fds a pod, its keeper 2: root may raise the
		 * hard limit for them, up to fs.nr_open (they inherit it). */
		const char *why = "";
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && (long)rl.rlim_cur < fds_needed(sizes[i])) {
			long want = fds_needed(sizes[i]) + 512, cap = nr_open();
			struct rlimit up = { (rlim_t)(want < cap ? want : cap),
					     (rlim_t)(want < cap ? want : cap) };
			if (up.rlim_max < rl.rlim_max)
				up.rlim_max = rl.rlim_max;
			if (setrlimit(RLIMIT_NOFILE, &up) == 0)
				rl = up;
			else
				why = errno == EPERM ? " (raising it was refused: no "
						       "CAP_SYS_RESOURCE here)" : strerror(errno);
		}
		if ((long)rl.rlim_cur < fds_needed(sizes[i])) {
			fprintf(stderr, "bench_adopt: n=%ld skipped: it needs %ld fds, the limit "
				"is %ld%s\n", sizes[i], fds_needed(sizes[i]), (long)rl.rlim_cur, why);
			printf("{\"bench\": \"adopt\", \"metric\": \"skipped\", \"n\": %ld, "
			       "\"fd_limit\": %ld}\n", sizes[i], (long)rl.rlim_cur);
			continue;
		}
		if (run(&c, sizes[i]) < 0) {
			bench_reap(&c.keeper);
			ts_cleanup();
			return 1;
		}
	}
	ts_cleanup();
	return 0;
}
