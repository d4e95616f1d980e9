/*
 * The libraries loaded only when a feature needs them (common/tank_dl.h):
 * neither tankd nor tankctl links libcurl, libmicrohttpd or libsystemd;
 * a real tankd maps libcurl once its first http probe ran and
 * libmicrohttpd once --http serves, not before; and when one cannot be
 * loaded (TANK_DL_CURL / TANK_DL_MHD name a library that does not
 * exist) the user is told which and what needed it, and nothing crashes:
 * http probes fail saying so, --http and --cluster refuse to start.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/obs/obs_t.h"

#define NONE_LIB "libtank-none.so.0"

/* Whether pid maps a file whose path contains needle. */
static bool maps_has(pid_t pid, const char *needle)
{
	char path[64];
	static char maps[1 << 20];

	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	read_text(path, maps, sizeof maps);
	cr_assert(strstr(maps, "[stack]"), "could not read %s", path);
	return strstr(maps, needle) != NULL;
}

/* Runs bindir()/prog with args, env added; its stdout and stderr in out.
 * Returns its exit status (-1 when it did not exit). */
static int run(const char *prog, const char *const *args, const char *const *env, char *out,
	       size_t cap)
{
	char bin[600];
	const char *argv[16] = { prog };
	int p[2], st;
	size_t n = 1, len = 0;
	ssize_t r;
	pid_t pid;

	snprintf(bin, sizeof bin, "%s/%s", bindir(), prog);
	for (size_t i = 0; args && args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		for (size_t i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	ts_own_pid(pid);
	close(p[1]);
	while (len + 1 < cap && (r = read(p[0], out + len, cap - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = '\0';
	close(p[0]);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Waits (up to secs) for d's tankd to exit: its exit status, -1 if not. */
static int wait_exit(d_t *d, int secs)
{
	int st;

	for (int i = 0; i < secs * 20; i++) {
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		sleep_ms(50);
	}
	return -1;
}

static void wait_up(d_t *d)
{
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(25);
	cr_assert(up(d), "tankd did not come up");
}

/* A pod serving its own directory on port, probed there over http. */
static void apply_web(d_t *d, int port)
{
	char y[1024], out[4096];

	snprintf(out, sizeof out, "%s/www", d->dir);
	cr_assert_eq(mkdir(out, 0755), 0);
	write_file(d, "www/health", "ok\n");
	snprintf(y, sizeof y, "name: web\ncontainers:\n  - name: main\n"
		 "    command: [/bin/busybox, httpd, -f, -p, '127.0.0.1:%d', -h, %s/www]\n"
		 "    readiness: {http: {port: %d, path: /health}, period: 50ms, "
		 "failure_threshold: 1}\n", port, d->dir, port);
	write_file(d, "web.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 0, "%s", out);
}

/* The loader's own list (glibc's LD_TRACE_LOADED_OBJECTS, what ldd
 * prints): what every start of the program loads. */
Test(lazy, no_program_links_curl_microhttpd_or_systemd)
{
	static const char *const progs[] = { "tankd", "tankctl" };
	char out[16384];

	for (size_t i = 0; i < 2; i++) {
		int rc = run(progs[i], NULL,
			     (const char *const[]){ "LD_TRACE_LOADED_OBJECTS=1", NULL },
			     out, sizeof out);
		cr_assert_eq(rc, 0, "%s: %s", progs[i], out);
		/* The list is there: lmdb is linked. */
		cr_assert(strstr(out, "liblmdb"), "%s: no list: %s", progs[i], out);
		cr_assert_null(strstr(out, "libcurl"), "%s: %s", progs[i], out);
		cr_assert_null(strstr(out, "libmicrohttpd"), "%s: %s", progs[i], out);
		cr_assert_null(strstr(out, "libsystemd"), "%s: %s", progs[i], out);
	}
}

Test(lazy, libcurl_is_loaded_by_the_first_http_probe_not_before)
{
	d_t *d = d_new();

	if (access("/bin/busybox", X_OK) != 0)
		cr_skip_test("no /bin/busybox (scripts/deps.sh installs busybox-static)");
	obs_tankd(d, NULL, NULL);
	wait_up(d);
	cr_assert_not(maps_has(d->pid, "libcurl"), "libcurl loaded at start");
	cr_assert_not(maps_has(d->pid, "libmicrohttpd"), "libmicrohttpd loaded without --http");
	apply_web(d, obs_free_port());
	cr_assert(wait_says(d, 20, "readiness: ok", "status web -o json"));
	cr_assert(maps_has(d->pid, "libcurl"), "an http probe passed without libcurl mapped?");
	cr_assert_not(maps_has(d->pid, "libmicrohttpd"));
	teardown(d);
}

Test(lazy, http_loads_libmicrohttpd_and_serves)
{
	d_t *d = d_new();
	char addr[64], url[96], body[64];

	snprintf(addr, sizeof addr, "127.0.0.1:%d", obs_free_port());
	snprintf(url, sizeof url, "http://%s/healthz", addr);
	obs_tankd(d, (const char *const[]){ "--http", addr, NULL }, NULL);
	wait_up(d);
	cr_assert_eq(obs_get(url, body, sizeof body), 200, "%s", body);
	cr_assert(maps_has(d->pid, "libmicrohttpd"));
	cr_assert_not(maps_has(d->pid, "libcurl"), "--http loaded libcurl");
	teardown(d);
}

Test(lazy, http_refuses_to_start_without_libmicrohttpd)
{
	d_t *d = d_new();
	char addr[64], logp[128];
	static char log[65536];

	snprintf(addr, sizeof addr, "127.0.0.1:%d", obs_free_port());
	obs_tankd(d, (const char *const[]){ "--http", addr, NULL },
		  (const char *const[]){ "TANK_DL_MHD=" NONE_LIB, NULL });
	cr_assert_eq(wait_exit(d, 20), 100, "not a permanent failure");
	snprintf(logp, sizeof logp, "%s/tankd.log", d->dir);
	read_text(logp, log, sizeof log);
	cr_assert(strstr(log, "tankd: fatal: --http: cannot load " NONE_LIB ": " NONE_LIB
			 ": cannot open shared object file"), "%s", log);
	cr_assert_null(strstr(log, "serving"), "%s", log);
	teardown(d);
}

/* The apply is refused, naming the probe and the library: a pod whose
 * http probe could never run is not stored. */
Test(lazy, an_apply_with_an_http_probe_is_refused_without_libcurl)
{
	d_t *d = d_new();
	char out[4096];

	obs_tankd(d, NULL, (const char *const[]){ "TANK_DL_CURL=" NONE_LIB, NULL });
	wait_up(d);
	write_file(d, "web.yaml", "name: web\ncontainers:\n  - name: main\n"
		   "    command: [/bin/sleep, '1000']\n"
		   "    liveness: {http: {port: 1}}\n");
	cr_assert_neq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "web: containers[0].liveness.http: cannot load " NONE_LIB ": "
			 NONE_LIB ": cannot open shared object file"), "%s", out);
	cr_assert(strstr(out, "(http probes need it)"), "%s", out);
	cr_assert_neq(ctl(d, out, sizeof out, "get web"), 0, "stored: %s", out);
	/* Other probes need nothing loaded. */
	write_file(d, "db.yaml", "name: db\ncontainers:\n  - name: main\n"
		   "    command: [/bin/sleep, '1000']\n"
		   "    liveness: {tcp: {port: 1}, initial_delay: 1h}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/db.yaml", d->dir), 0, "%s", out);
	teardown(d);
}

/* A pod stored while libcurl loaded, started again by a tankd that
 * cannot load it: its http probe fails saying why, tankd serves on. */
Test(lazy, http_probes_fail_saying_libcurl_cannot_be_loaded)
{
	d_t *d = d_new();
	char logp[128], out[4096];
	static char log[65536];
	const char *line = "tankd: error: http probe of web/main: cannot load " NONE_LIB ": " NONE_LIB
			   ": cannot open shared object file";

	if (access("/bin/busybox", X_OK) != 0)
		cr_skip_test("no /bin/busybox (scripts/deps.sh installs busybox-static)");
	obs_tankd(d, NULL, NULL);
	wait_up(d);
	apply_web(d, obs_free_port());
	cr_assert(wait_says(d, 20, "readiness: ok", "status web -o json"));
	stop(d, SIGTERM);
	obs_tankd(d, NULL, (const char *const[]){ "TANK_DL_CURL=" NONE_LIB, NULL });
	wait_up(d);
	cr_assert(wait_says(d, 20, "readiness: failed: cannot load " NONE_LIB "\"",
			    "status web -o json"));
	/* More runs fail the same way (period 50 ms); tankd serves on. */
	sleep_ms(300);
	cr_assert(says(d, "readiness: failed: cannot load " NONE_LIB "\"", "status web -o json"));
	cr_assert(says(d, "\"ready\": false", "status web -o json"));
	cr_assert_eq(ctl(d, out, sizeof out, "version"), 0, "%s", out);
	snprintf(logp, sizeof logp, "%s/tankd.log", d->dir);
	read_text(logp, log, sizeof log);
	const char *first = strstr(log, line);
	cr_assert(first, "%s", log);
	cr_assert_null(strstr(first + strlen(line), "http probe of"), "said more than once: %s", log);
	teardown(d);
}

Test(lazy, cluster_mode_says_libcurl_cannot_be_loaded)
{
	d_t *d = d_new();
	char out[4096], logp[128];
	static char log[65536];
	const char *const env[] = { "TANK_DL_CURL=" NONE_LIB, NULL };

	/* tankctl: before any request (nothing listens at port 1). */
	int rc = run("tankctl", (const char *const[]){ "--cluster", "http://127.0.0.1:1", "ps", NULL },
		     env, out, sizeof out);
	cr_assert_eq(rc, 1, "%s", out);
	cr_assert(strstr(out, "tankctl: ps: --cluster: cannot load " NONE_LIB ": " NONE_LIB
			 ": cannot open shared object file"), "%s", out);
	/* A URL that is not one is still said to be so. */
	rc = run("tankctl", (const char *const[]){ "--cluster", "localhost:1", "ps", NULL },
		 env, out, sizeof out);
	cr_assert_eq(rc, 2, "%s", out);
	cr_assert(strstr(out, "expected http://HOST:PORT"), "%s", out);

	/* tankd --cluster: refuses to start, saying why. */
	obs_tankd(d, (const char *const[]){ "--cluster", "http://127.0.0.1:1", "--node", "n1", NULL },
		  env);
	cr_assert_neq(wait_exit(d, 20), -1, "tankd --cluster did not exit");
	snprintf(logp, sizeof logp, "%s/tankd.log", d->dir);
	read_text(logp, log, sizeof log);
	cr_assert(strstr(log, "tankd: fatal: cluster: cannot load " NONE_LIB ": "), "%s", log);
	teardown(d);
}
