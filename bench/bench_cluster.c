/*
 * bench_cluster — three tankd nodes on a real etcd (docs/cluster.md):
 *   - apply → all running: `tankctl --cluster apply` of N pods (one
 *     /bin/sleep each), until every pod's status in etcd says running,
 *     written by the node it is assigned to;
 *   - the nodes' CPU (their tankd, agents included) for that apply, and
 *     per second over 10 s of quiet once all runs;
 *   - a node's death → its pods running elsewhere: tankd of one node
 *     killed -9 with its containers, until every pod runs again.  The
 *     lease TTL (10 s) is most of it.
 *
 *   build/bench/bench_cluster                  N = 3,000 (starts > 2,000
 *                                              processes: run it under
 *                                              `flock /work/bench.lock` on a
 *                                              shared machine)
 *   QUICK=1 build/bench/bench_cluster          N = 300
 *   BENCH_N=…                                  any N
 *
 * Skips (exit 0, says so) where /usr/bin/etcd is missing.  JSON lines on
 * stdout (bench_util.h), progress on stderr.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "cluster/cl_etcd.h"
#include "tests/support/ts_etcd.h"

#define WHO "cluster"

static void bench_note(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bench_note(const char *who, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bench_vnote(who, fmt, ap);
	va_end(ap);
}

typedef struct node {
	char name[8];
	char dir[PATH_MAX];
	char root[32];
	pid_t pid;
} node_t;

static const char *bindir(void)
{
	static char buf[512];
	const char *b = getenv("TANK_BUILD_DIR");

	snprintf(buf, sizeof buf, "%s/bin", b ? b : "build");
	return buf;
}

static int node_start(node_t *n, const char *name, const char *url)
{
	char bin[600], logp[PATH_MAX + 16];

	snprintf(n->name, sizeof n->name, "%s", name);
	if (!ts_mkdtemp(n->dir, sizeof n->dir, "tank-bcl"))
		return -1;
	ts_daemon_root(n->dir, n->root, sizeof n->root);
	ts_own_cgroot(n->root);
	snprintf(bin, sizeof bin, "%s/tankd", bindir());
	snprintf(logp, sizeof logp, "%s/tankd.log", n->dir);
	n->pid = fork();
	if (n->pid < 0)
		return -1;
	if (n->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, "tankd", "--data-dir", n->dir, "--cluster", url, "--node", name,
		      (char *)NULL);
		_exit(127);
	}
	ts_own_pid(n->pid);
	return 0;
}

/* CPU seconds (user + system) the live nodes' tankd used so far, their
 * threads' (the node agent's among them) included: /proc/PID/stat. */
static double nodes_cpu_s(const node_t *nodes, int count)
{
	double ticks = 0;
	long hz = sysconf(_SC_CLK_TCK);

	for (int i = 0; i < count; i++) {
		char path[64], buf[1024], *p;
		unsigned long ut = 0, st = 0;
		FILE *f;
		size_t len;

		if (nodes[i].pid <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/%d/stat", (int)nodes[i].pid);
		if (!(f = fopen(path, "r")))
			continue;
		len = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* After the command's closing parenthesis: state is field 3,
		 * utime and stime fields 14 and 15. */
		if (!(p = strrchr(buf, ')')) ||
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
			continue;
		ticks += (double)(ut + st);
	}
	return hz > 0 ? ticks / (double)hz : 0;
}

static size_t count_prefix(cl_etcd_t *c, const char *prefix)
{
	cl_kvs_t r;
	size_t n;

	if (cl_etcd_get_prefix(c, prefix, 0, &r) != 0)
		return 0;
	n = r.n;
	cl_kvs_free(&r);
	return n;
}

/* Pods whose status says running, written by their assigned node, and
 * how many are assigned to `on` (may be NULL). */
static size_t running(cl_etcd_t *c, const char *on, size_t *on_count)
{
	cl_kvs_t a, s;
	size_t ok = 0, j = 0;

	if (on_count)
		*on_count = 0;
	if (cl_etcd_get_prefix(c, "/tank/assign/", 0, &a) != 0)
		return 0;
	if (cl_etcd_get_prefix(c, "/tank/status/", 0, &s) != 0) {
		cl_kvs_free(&a);
		return 0;
	}
	/* Both sorted by key: walk them together. */
	for (size_t i = 0; i < a.n; i++) {
		const char *pod = a.kv[i].key + strlen("/tank/assign/");
		char want[128];

		if (on && on_count && strcmp(a.kv[i].value, on) == 0)
			(*on_count)++;
		while (j < s.n && strcmp(s.kv[j].key + strlen("/tank/status/"), pod) < 0)
			j++;
		if (j == s.n || strcmp(s.kv[j].key + strlen("/tank/status/"), pod) != 0)
			continue;
		snprintf(want, sizeof want, "{\"node\":\"%s\",\"phase\":\"running\"", a.kv[i].value);
		if (strncmp(s.kv[j].value, want, strlen(want)) == 0)
			ok++;
	}
	cl_kvs_free(&a);
	cl_kvs_free(&s);
	return ok;
}

int main(void)
{
	bool quick = getenv("QUICK") && strcmp(getenv("QUICK"), "1") == 0;
	long n = getenv("BENCH_N") ? atol(getenv("BENCH_N")) : quick ? 300 : 3000;
	ts_etcd_t etcd;
	node_t nodes[3];
	cl_etcd_t *c;
	char path[PATH_MAX + 16], cmd[PATH_MAX * 2];
	FILE *f;
	uint64_t t0;
	double apply_s, all_s, moved_s;
	size_t had = 0, on = 0;
	int rc = 1;

	if (!ts_etcd_available()) {
		bench_note(WHO, "%s", TS_ETCD_MISSING);
		return 0;
	}
	if (ts_etcd_start(&etcd) != 0 || cl_etcd_open(etcd.url, &c) != 0) {
		bench_note(WHO, "etcd did not start (log in %s)", etcd.dir);
		return 1;
	}
	for (int i = 0; i < 3; i++) {
		char name[8];

		snprintf(name, sizeof name, "n%d", i + 1);
		if (node_start(&nodes[i], name, etcd.url) != 0) {
			bench_note(WHO, "cannot start node %s", name);
			goto out;
		}
	}
	for (uint64_t end = bench_now_ns() + 20000000000ull; count_prefix(c, "/tank/nodes/") < 3;) {
		if (bench_now_ns() > end) {
			bench_note(WHO, "the nodes never registered");
			goto out;
		}
		bench_sleep_ms(100);
	}
	snprintf(path, sizeof path, "%s/pods.yaml", nodes[0].dir);
	if (!(f = fopen(path, "w")))
		goto out;
	for (long i = 0; i < n; i++)
		fprintf(f, "---\nname: b%ld\nrestart: always\ncontainers:\n  - name: m\n"
			   "    command: [/bin/sleep, \"100000\"]\n", i);
	fclose(f);
	bench_note(WHO, "%ld pods on 3 nodes", n);
	snprintf(cmd, sizeof cmd, "%s/tankctl --cluster %s apply -f %s > /dev/null", bindir(), etcd.url,
		 path);
	double cpu0 = nodes_cpu_s(nodes, 3);
	t0 = bench_now_ns();
	if (system(cmd) != 0) {
		bench_note(WHO, "apply failed");
		goto out;
	}
	apply_s = (bench_now_ns() - t0) / 1e9;
	for (size_t k = 0; (k = running(c, NULL, NULL)) < (size_t)n;) {
		if (bench_now_ns() - t0 > 600e9) {
			bench_note(WHO, "only %zu of %ld running after 600 s", k, n);
			goto out;
		}
		bench_sleep_ms(200);
	}
	all_s = (bench_now_ns() - t0) / 1e9;
	bench_note(WHO, "apply %.2f s, all running %.2f s", apply_s, all_s);
	bench_emit(WHO, "apply_written_s", apply_s, "s", n);
	bench_emit(WHO, "apply_to_all_running_s", all_s, "s", n);
	/* What the nodes spent on it (their tankd, agents included), and
	 * what they spend once all runs and nothing changes: the agent's
	 * cost per second of quiet (a pass that looks at everything shows
	 * here). */
	double cpu1 = nodes_cpu_s(nodes, 3);
	bench_sleep_ms(10000);
	double cpu2 = nodes_cpu_s(nodes, 3);
	bench_note(WHO, "nodes' cpu: %.2f s for the apply, %.1f ms a second when quiet",
		   cpu1 - cpu0, (cpu2 - cpu1) * 100);
	bench_emit(WHO, "nodes_cpu_apply_s", cpu1 - cpu0, "s", n);
	bench_emit(WHO, "nodes_cpu_quiet_ms_per_s", (cpu2 - cpu1) * 100, "ms", n);

	running(c, "n2", &had);
	kill(nodes[1].pid, SIGKILL);
	waitpid(nodes[1].pid, NULL, 0);
	nodes[1].pid = 0;
	t0 = bench_now_ns();
	ts_cgroot_clear(nodes[1].root, 10, NULL);
	for (size_t k = 0; (k = running(c, "n2", &on)) < (size_t)n || on > 0;) {
		if (bench_now_ns() - t0 > 600e9) {
			bench_note(WHO, "only %zu of %ld running 600 s after the death", k, n);
			goto out;
		}
		bench_sleep_ms(200);
	}
	moved_s = (bench_now_ns() - t0) / 1e9;
	bench_note(WHO, "node n2 killed with %zu pods: all running elsewhere after %.2f s", had, moved_s);
	bench_emit(WHO, "node_death_to_all_running_s", moved_s, "s", (long)had);
	rc = 0;
out:
	for (int i = 0; i < 3; i++)
		if (nodes[i].pid > 0) {
			kill(nodes[i].pid, SIGTERM);
			waitpid(nodes[i].pid, NULL, 0);
		}
	cl_etcd_close(c);
	ts_etcd_stop(&etcd, false);
	ts_cleanup();
	return rc;
}
