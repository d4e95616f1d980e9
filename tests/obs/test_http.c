/*
 * tankd --http end to end (obs/obs_http.h): a real tankd serving on a
 * free loopback port, real pods, real HTTP clients — /metrics through a
 * Prometheus text parser, /events through a raw socket, /healthz, the
 * bind refusal, and the live page in a real headless Chromium driven over
 * the DevTools protocol.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/obs/obs_t.h"

/* tankd --http on a free loopback port, env ("K=V", NULL-terminated, or
 * NULL) in its environment; base gets "http://ADDR". */
static d_t *http_daemon_env(char *base, size_t cap, const char *const *env)
{
	static char addr[64];
	d_t *d = d_new();
	int port = obs_free_port();

	snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
	snprintf(base, cap, "http://%s", addr);
	obs_tankd(d, (const char *const[]){ "--http", addr, NULL }, env);
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(25);
	cr_assert(up(d), "tankd did not come up");
	return d;
}

static d_t *http_daemon(char *base, size_t cap)
{
	return http_daemon_env(base, cap, NULL);
}

/* Every build over many turns: one object a slice. */
static const char *const slice_one[] = { "TANK_HTTP_SLICE_OBJECTS=1", NULL };

static int port_of(const char *base)
{
	return atoi(strrchr(base, ':') + 1);
}

static void apply(d_t *d, const char *file, const char *yaml)
{
	char out[4096];
	write_file(d, file, yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/%s", d->dir, file), 0, "%s", out);
}

static void scrape(const char *base, prom_t *p)
{
	static char body[1 << 20];
	char url[128];

	snprintf(url, sizeof url, "%s/metrics", base);
	cr_assert_eq(obs_get(url, body, sizeof body), 200);
	cr_assert(prom_parse(body, p), "/metrics is not the text format: %s", p->err);
}

Test(obs_http, metrics_parse_and_a_crash_looping_pods_restarts_grow)
{
	char base[96];
	d_t *d = http_daemon(base, sizeof base);
	prom_t p;
	const char *const crash[] = { "kind", "pod", "name", "crash", "container", "c", NULL };

	apply(d, "crash.yaml", "name: crash\nbackoff: {base: 50ms, cap: 100ms}\ncontainers:\n"
		  "  - name: c\n    command: [/bin/sh, -c, \"exit 1\"]\n");
	double first = NAN;
	for (int i = 0; i < 100 && !(first >= 1); i++) {
		scrape(base, &p);
		first = prom_get(&p, "tank_container_restarts_total", crash);
		prom_free(&p);
		sleep_ms(100);
	}
	cr_assert_geq(first, 1, "no restart counted for crash/c (%g)", first);
	double later = first;
	for (int i = 0; i < 100 && later <= first; i++) {
		sleep_ms(100);
		scrape(base, &p);
		later = prom_get(&p, "tank_container_restarts_total", crash);
		prom_free(&p);
	}
	cr_assert_gt(later, first, "restarts did not grow: %g then %g", first, later);

	/* The rest of what the page's operators rely on is there. */
	scrape(base, &p);
	cr_assert_eq(prom_get(&p, "tank_kind_objects", (const char *const[]){ "kind", "pod", NULL }), 1);
	cr_assert_eq(prom_get(&p, "tank_kind_objects", (const char *const[]){ "kind", "stack", NULL }), 0);
	/* 0 or 1 depending on the moment: it runs for an instant each time. */
	cr_assert_not(isnan(prom_get(&p, "tank_container_ready", crash)));
	cr_assert_geq(prom_get(&p, "tank_reconcile_passes_total", NULL), 1);
	cr_assert_geq(prom_get(&p, "tank_reconcile_pass_seconds_count", NULL), 1);
	cr_assert_eq(prom_get(&p, "tank_reconcile_pass_seconds_bucket",
			      (const char *const[]){ "le", "+Inf", NULL }),
		     prom_get(&p, "tank_reconcile_pass_seconds_count", NULL));
	cr_assert_geq(prom_get(&p, "tank_store_commit_seconds_count",
			       (const char *const[]){ "type", "durable", NULL }), 1);
	cr_assert_gt(prom_get(&p, "tank_store_map_bytes", NULL), 0);
	cr_assert_gt(prom_get(&p, "process_resident_memory_bytes", NULL), 1 << 20);
	cr_assert_gt(prom_get(&p, "process_open_fds", NULL), 3);
	cr_assert_geq(prom_get(&p, "tank_events_total",
			       (const char *const[]){ "type", "transition", NULL }), 2);
	double phases = 0;
	for (size_t i = 0; i < p.n; i++)
		if (!strcmp(p.s[i].name, "tank_objects") && strstr(p.s[i].labels, "kind=\"pod\""))
			phases += p.s[i].value;
	cr_assert_eq(phases, 1, "tank_objects{kind=pod} sums to %g", phases);

	/* docs/observability.md lists every family tankd exposes, and the
	 * Grafana dashboard asks only for families that exist. */
	static char doc[65536], dash[131072];
	char path[600];
	const char *src = getenv("TANK_SRC_DIR") ? getenv("TANK_SRC_DIR") : ".";
	snprintf(path, sizeof path, "%s/docs/observability.md", src);
	read_text(path, doc, sizeof doc);
	snprintf(path, sizeof path, "%s/contrib/grafana-tank.json", src);
	read_text(path, dash, sizeof dash);
	cr_assert(doc[0] && dash[0]);
	for (size_t i = 0; i < p.n; i++) {
		char fam[128], want[140];
		/* A histogram's series belong to its family. */
		static const char *const sfx[] = { "_bucket", "_sum", "_count" };
		snprintf(fam, sizeof fam, "%s", p.s[i].name);
		for (size_t k = 0; k < 3; k++) {
			size_t l = strlen(fam), sl = strlen(sfx[k]);
			if (l > sl + 8 && !strcmp(fam + l - sl, sfx[k]) &&
			    !strncmp(fam + l - sl - 8, "_seconds", 8))
				fam[l - sl] = '\0';
		}
		snprintf(want, sizeof want, "`%s`", fam);
		cr_assert(strstr(doc, want), "%s is not in docs/observability.md", fam);
	}
	for (const char *q = dash; (q = strstr(q, "tank_")) != NULL; q++) {
		char name[128];
		size_t n = strspn(q, "abcdefghijklmnopqrstuvwxyz_");
		snprintf(name, sizeof name, "%.*s", (int)n, q);
		if (!strcmp(name, "tank_") || strstr(name, "tank_overview") || n < 8)
			continue;
		bool found = false;
		for (size_t i = 0; i < p.n && !found; i++)
			found = !strcmp(p.s[i].name, name);
		cr_assert(found, "the dashboard asks for %s, which tankd does not expose", name);
		q += n - 1;
	}
	prom_free(&p);
	teardown(d);
}

Test(obs_http, healthz_answers_and_the_side_is_read_only)
{
	char base[96], url[160], body[256];
	d_t *d = http_daemon(base, sizeof base);

	snprintf(url, sizeof url, "%s/healthz", base);
	cr_assert_eq(obs_get(url, body, sizeof body), 200);
	cr_assert_str_eq(body, "ok\n");
	snprintf(url, sizeof url, "%s/nope", base);
	cr_assert_eq(obs_get(url, NULL, 0), 404);
	/* A POST is refused: changes go through the socket. */
	snprintf(url, sizeof url, "%s/metrics", base);
	cr_assert_eq(obs_post(url), 405);
	/* The page is one document with no external asset. */
	static char page[1 << 17];
	snprintf(url, sizeof url, "%s/", base);
	cr_assert_eq(obs_get(url, page, sizeof page), 200);
	cr_assert(strstr(page, "EventSource"));
	cr_assert_null(strstr(page, "src=\"http"));
	cr_assert_null(strstr(page, "href=\"http"));
	teardown(d);
}

Test(obs_http, events_deliver_a_new_pod_as_json)
{
	char base[96];
	static char got[65536];
	d_t *d = http_daemon(base, sizeof base);
	int fd = obs_sse_open(port_of(base), "/events");

	got[0] = '\0';
	cr_assert(obs_sse_wait(fd, got, sizeof got, "retry: 2000", 5), "no stream: %s", got);
	cr_assert(strstr(got, "Content-Type: text/event-stream"), "%s", got);
	apply(d, "fresh.yaml", "name: fresh\ncontainers:\n"
		  "  - name: s\n    command: [/bin/sleep, \"1000\"]\n");
	cr_assert(obs_sse_wait(fd, got, sizeof got, "\"to\":\"running\"", 10),
		  "no event for the new pod: %s", got);
	const char *ev = strstr(got, "data: {\"type\":\"transition\",\"pod\":\"fresh\"");
	cr_assert_not_null(ev, "%s", got);
	cr_assert(strstr(ev, "}\n\n"), "an event is one line of JSON then a blank line: %s", ev);
	close(fd);
	teardown(d);
}

Test(obs_http, an_address_that_is_not_loopback_is_refused)
{
	d_t *d = d_new();
	char log[4096], path[128];
	int st;

	obs_tankd(d, (const char *const[]){ "--http", "0.0.0.0:0", NULL }, NULL);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 100, "status %d", st);
	snprintf(path, sizeof path, "%s/tankd.log", d->dir);
	read_text(path, log, sizeof log);
	cr_assert(strstr(log, "not a loopback address"), "%s", log);
	cr_assert(strstr(log, "--http-allow-remote"), "%s", log);

	/* With the flag it serves (on every address: port 0 picks one). */
	obs_tankd(d, (const char *const[]){ "--http", "0.0.0.0:0", "--http-allow-remote", NULL },
		  NULL);
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(25);
	cr_assert(up(d));
	read_text(path, log, sizeof log);
	cr_assert(strstr(log, "serving http://0.0.0.0:"), "%s", log);
	teardown(d);
}

/* The page in a real browser: it shows the pods (their containers,
 * restarts and readiness), and a pod applied after it loaded appears
 * without a reload (a mark set on the window survives). */
Test(obs_http, the_page_shows_pods_and_updates_live_in_chromium)
{
	char base[96], url[160], out[4096];
	chrome_t c;
	d_t *d;

	if (!chrome_path())
		cr_skip_test("chromium is not installed (scripts/deps.sh installs it)");
	d = http_daemon(base, sizeof base);
	apply(d, "alpha.yaml", "name: alpha\ncontainers:\n"
		  "  - name: main\n    command: [/bin/sleep, \"1000\"]\n");
	cr_assert(wait_phase(d, "alpha", "running", 20));
	snprintf(url, sizeof url, "%s/", base);
	chrome_open(&c, d->dir, url);
	cr_assert(chrome_wait(&c,
			      "(function(){var r=document.getElementById('pod-alpha');"
			      "return r&&r.textContent.indexOf('running')>=0?'yes':'no'})()",
			      "yes", 30, out, sizeof out),
		  "the page does not show alpha running: %s", out);
	/* The container, with its restarts and readiness, in the nested table. */
	cr_assert(chrome_eval(&c, "document.getElementById('kind-pod').innerText", out,
			      sizeof out));
	cr_assert(strstr(out, "main"), "%s", out);
	cr_assert(strstr(out, "restarts"), "%s", out);
	cr_assert(strstr(out, "ready"), "%s", out);
	cr_assert(chrome_eval(&c, "document.getElementById('conn').textContent", out, sizeof out));
	cr_assert_str_eq(out, "live");
	cr_assert(chrome_eval(&c, "(window.tankMark='kept','set')", out, sizeof out));

	apply(d, "beta.yaml", "name: beta\ncontainers:\n"
		  "  - name: side\n    command: [/bin/sleep, \"1000\"]\n");
	cr_assert(chrome_wait(&c,
			      "(function(){var r=document.getElementById('pod-beta');"
			      "return r&&r.textContent.indexOf('running')>=0?'yes':'no'})()",
			      "yes", 30, out, sizeof out),
		  "beta did not appear without a reload: %s", out);
	cr_assert(chrome_eval(&c, "String(window.tankMark)", out, sizeof out));
	cr_assert_str_eq(out, "kept", "the page was reloaded");
	/* The events list got beta's start, through the same stream. */
	cr_assert(chrome_eval(&c, "document.getElementById('events').innerText", out, sizeof out));
	cr_assert(strstr(out, "beta"), "%s", out);
	/* Every kind gets its section, stacks included, with no code for it. */
	cr_assert(chrome_eval(&c, "document.getElementById('kind-stack')?'yes':'no'", out,
			      sizeof out));
	cr_assert_str_eq(out, "yes");
	chrome_close(&c);
	teardown(d);
}

/* A kind obs/ has never heard of — the test kind, Note, served by the
 * test build of tankd — is counted by phase, its events by type, and its
 * table is in /state with its own columns: nothing in obs/ names a kind. */
Test(obs_http, a_kind_from_the_list_is_counted_without_code_for_it)
{
	static char dir[512], body[65536];
	const char *b = getenv("TANK_BUILD_DIR");
	char base[96], url[160], out[4096];
	prom_t p;
	d_t *d;

	snprintf(dir, sizeof dir, "%s/tests/kinds", b ? b : "build");
	setenv("TANK_BUILD_DIR", dir, 1);
	d = http_daemon(base, sizeof base);
	write_file(d, "n.yaml", "kind: Note\nname: hello\ntext: hi there\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/n.yaml --wait --timeout 20s", d->dir), 0,
		     "%s", out);
	scrape(base, &p);
	if (prom_get(&p, "tank_objects",
		     (const char *const[]){ "kind", "note", "phase", "ready", NULL }) != 1) {
		static char all[1 << 20];
		snprintf(url, sizeof url, "%s/metrics", base);
		obs_get(url, all, sizeof all);
		cr_assert_fail("no note ready in:\n%.3000s", strstr(all, "tank_kind_objects"));
	}
	cr_assert_eq(prom_get(&p, "tank_kind_objects", (const char *const[]){ "kind", "note", NULL }), 1);
	cr_assert_geq(prom_get(&p, "tank_events_total", (const char *const[]){ "type", "note", NULL }), 1);
	prom_free(&p);
	snprintf(url, sizeof url, "%s/state", base);
	cr_assert_eq(obs_get(url, body, sizeof body), 200);
	cr_assert(strstr(body, "\"name\":\"note\",\"plural\":\"notes\",\"kind\":\"Note\","
			       "\"cols\":[\"NAME\",\"PHASE\",\"TEXT\",\"AGE\"]"), "%s", body);
	cr_assert(strstr(body, "\"cells\":[\"hello\",\"ready\",\"hi there\","), "%s", body);
	teardown(d);
}

/* Probe runs skipped because the descriptors tankd keeps for runs in
 * flight (POD_PROBE_FDS_MAX, 48) were all taken are counted, not
 * silent: 60 tcp probes every 100 ms at a listener that never accepts
 * (its backlog full, each connect waits out its 1 s timeout) cannot all
 * be in flight, and tank_probe_skipped_total{probe="tcp"} grows. */
Test(obs_http, probe_runs_skipped_for_descriptors_are_counted)
{
	char base[96];
	static char yaml[16384];
	d_t *d = http_daemon(base, sizeof base);
	prom_t p;
	unsigned port;
	int lfd = ts_listen_loopback(0, 0, &port);
	const char *const tcp[] = { "probe", "tcp", NULL };
	size_t off = 0;

	cr_assert_geq(lfd, 0, "listen: %s", strerror(-lfd));
	scrape(base, &p);
	cr_assert_eq(prom_get(&p, "tank_probe_skipped_total", tcp), 0, "a series from the start");
	prom_free(&p);
	for (int i = 0; i < 30; i++)
		off += (size_t)snprintf(yaml + off, sizeof yaml - off,
			"---\nname: s%02d\ncontainers:\n"
			"  - name: c\n    command: [/bin/sleep, \"600\"]\n"
			"    readiness: {tcp: {port: %u}, period: 100ms, timeout: 1s}\n"
			"    liveness: {tcp: {port: %u}, period: 100ms, timeout: 1s, "
			"failure_threshold: 1000}\n",
			i, port, port);
	apply(d, "skipped.yaml", yaml);
	double skipped = 0;
	for (int i = 0; i < 300 && !(skipped >= 1); i++) {
		sleep_ms(100);
		scrape(base, &p);
		skipped = prom_get(&p, "tank_probe_skipped_total", tcp);
		prom_free(&p);
	}
	cr_assert_geq(skipped, 1, "no skipped run counted (%g)", skipped);
	teardown(d);
	close(lfd);
}

/* The probes' results by probe kind (the Pod kind's metrics hook,
 * pod_probe_stats): a tcp probe on a port nobody listens on fails, an
 * exec probe that exits 0 passes, one that outlives its timeout times out;
 * each kind's duration histogram is cumulative and counts every run once.
 * Actions and jobs (every kind of the list) are counted by state. */
Test(obs_http, probe_results_and_latency_by_probe_kind)
{
	char base[96], yaml[1024];
	d_t *d = http_daemon(base, sizeof base);
	prom_t p;
	int closed = obs_free_port();     /* bound, read back and closed: nobody listens */
	const char *const tcp_fail[] = { "probe", "tcp", "result", "failure", NULL };
	const char *const exec_ok[] = { "probe", "exec", "result", "success", NULL };
	const char *const exec_to[] = { "probe", "exec", "result", "timeout", NULL };

	snprintf(yaml, sizeof yaml,
		 "name: probed\ncontainers:\n"
		 "  - name: t\n    command: [/bin/sleep, \"600\"]\n"
		 "    readiness: {tcp: {port: %d}, period: 50ms}\n"
		 "  - name: e\n    command: [/bin/sleep, \"600\"]\n"
		 "    readiness: {exec: [/bin/true], period: 100ms}\n"
		 "  - name: s\n    command: [/bin/sleep, \"600\"]\n"
		 "    readiness: {exec: [/bin/sleep, \"5\"], period: 100ms, timeout: 20ms}\n",
		 closed);
	apply(d, "probed.yaml", yaml);

	double first = NAN;
	for (int i = 0; i < 100 && !(first >= 2); i++) {
		sleep_ms(100);
		scrape(base, &p);
		first = prom_get(&p, "tank_probe_total", tcp_fail);
		prom_free(&p);
	}
	cr_assert_geq(first, 2, "tcp failures not counted (%g)", first);
	double later = first, ok = 0, to = 0;
	for (int i = 0; i < 100 && (later <= first || !(ok >= 1) || !(to >= 1)); i++) {
		sleep_ms(100);
		scrape(base, &p);
		later = prom_get(&p, "tank_probe_total", tcp_fail);
		ok = prom_get(&p, "tank_probe_total", exec_ok);
		to = prom_get(&p, "tank_probe_total", exec_to);
		prom_free(&p);
	}
	cr_assert_gt(later, first, "the tcp failure counter did not grow: %g then %g", first, later);
	cr_assert_geq(ok, 1, "exec successes not counted (%g)", ok);
	cr_assert_geq(to, 1, "exec timeouts not counted (%g)", to);

	scrape(base, &p);
	/* Nothing ran an http probe: its series are there, at zero. */
	cr_assert_eq(prom_get(&p, "tank_probe_total",
			      (const char *const[]){ "probe", "http", "result", "success", NULL }), 0);
	cr_assert_eq(prom_get(&p, "tank_probe_duration_seconds_count",
			      (const char *const[]){ "probe", "http", NULL }), 0);
	static const char *const kinds[] = { "exec", "tcp", "http" };
	for (size_t k = 0; k < 3; k++) {
		char want[32];
		double prev = 0, inf = NAN, runs = 0;
		size_t nb = 0;
		snprintf(want, sizeof want, "probe=\"%s\"", kinds[k]);
		for (size_t i = 0; i < p.n; i++) {
			if (!strstr(p.s[i].labels, want))
				continue;
			if (!strcmp(p.s[i].name, "tank_probe_total"))
				runs += p.s[i].value;
			if (strcmp(p.s[i].name, "tank_probe_duration_seconds_bucket"))
				continue;
			cr_assert_geq(p.s[i].value, prev, "%s buckets not cumulative at {%s}",
				      kinds[k], p.s[i].labels);
			prev = p.s[i].value;
			nb++;
			if (strstr(p.s[i].labels, "le=\"+Inf\""))
				inf = p.s[i].value;
		}
		cr_assert_eq(nb, 16, "%s: %zu buckets", kinds[k], nb);
		double count = prom_get(&p, "tank_probe_duration_seconds_count",
					(const char *const[]){ "probe", kinds[k], NULL });
		cr_assert_eq(inf, count, "%s: +Inf %g, _count %g", kinds[k], inf, count);
		/* Every run that ended is in both, once (one scrape is one
		 * moment: tankd is one thread). */
		cr_assert_eq(count, runs, "%s: _count %g, runs %g", kinds[k], count, runs);
		cr_assert_not(isnan(prom_get(&p, "tank_probe_duration_seconds_sum",
					     (const char *const[]){ "probe", kinds[k], NULL })));
	}
	/* Runs took time.  (Not "at least the timeout" each: the timeout is
	 * a loop timer, armed from the loop's time of the turn, which a busy
	 * turn leaves behind the clock the run's start is read from.) */
	cr_assert_gt(prom_get(&p, "tank_probe_duration_seconds_sum",
			      (const char *const[]){ "probe", "exec", NULL }), 0);
	cr_assert_gt(prom_get(&p, "tank_probe_duration_seconds_sum",
			      (const char *const[]){ "probe", "tcp", NULL }), 0);
	/* Every kind of the list is counted, actions and jobs included. */
	static const char *const shipped[] = { "pod", "stack", "action", "playbook", "task",
					       "stage", "workflow", "job" };
	for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++)
		cr_assert_not(isnan(prom_get(&p, "tank_kind_objects",
					     (const char *const[]){ "kind", shipped[i], NULL })),
			      "no tank_kind_objects{kind=\"%s\"}", shipped[i]);
	cr_assert_gt(prom_get(&p, "tank_api_connections", NULL), -1);
	prom_free(&p);
	teardown(d);
}

/* `up` and `down` of a stack look at that stack, not at everything: no
 * resync pass runs for them (issue 38 item 7: with 1,000 stacks, an `up`
 * of each ran a pass — every stored pod read, every cgroup swept — after
 * nearly each one).  tankd's own resync is an hour away, so
 * tank_reconcile_passes_total moves only if a verb asks for a pass. */
Test(obs_http, stack_up_and_down_run_no_resync_pass)
{
	char addr[64], base[96], out[4096];
	d_t *d = d_new();
	prom_t p;
	int port = obs_free_port();

	snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
	snprintf(base, sizeof base, "http://%s", addr);
	obs_tankd(d, (const char *const[]){ "--http", addr, "--resync", "1h", NULL }, NULL);
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(25);
	cr_assert(up(d), "tankd did not come up");
	apply(d, "st.yaml", "kind: Stack\nname: st\npods:\n"
	      "  - name: a\n    containers: [{name: c, command: [sleep, '100']}]\n"
	      "  - name: b\n    depends_on: [{pod: a, condition: started}]\n"
	      "    containers: [{name: c, command: [sleep, '100']}]\n");
	cr_assert(wait_says(d, 20, "\"phase\": \"up\"", "status stack st -o json"));
	scrape(base, &p);
	double before = prom_get(&p, "tank_reconcile_passes_total", NULL);
	prom_free(&p);

	cr_assert_eq(ctl(d, out, sizeof out, "down st"), 0, "%s", out);
	cr_assert(wait_says(d, 20, "\"phase\": \"down\"", "status stack st -o json"));
	cr_assert(wait_phase(d, "b", "waiting", 20), "its pods stopped");
	cr_assert_eq(ctl(d, out, sizeof out, "up st"), 0, "%s", out);
	cr_assert(wait_says(d, 20, "\"phase\": \"up\"", "status stack st -o json"));
	cr_assert(wait_phase(d, "b", "running", 20), "its pods run again");

	scrape(base, &p);
	double after = prom_get(&p, "tank_reconcile_passes_total", NULL);
	prom_free(&p);
	cr_assert(before >= 1 && after == before,
		  "down and up ran no pass: %.0f passes before, %.0f after", before, after);
	teardown(d);
}

/* The live page's stream at scale: a snapshot of thousands of pods is
 * bigger than a client's 1 MiB bound, and every change brings another
 * (at most one a second).  The bound counted the snapshots: a client
 * still reading one was cut by the events and snapshots behind it (at
 * 10,000 pods the page was cut at every change, reconnected 2 s later,
 * was sent 5.7 MB again and was cut again: docs/bench.md, issue 38 round
 * 8).  Now a client still reading a snapshot is sent no new one until it
 * has read it (it then gets a fresh one), and the bound is for the events
 * behind the snapshot, so a slow reader is not cut.  3,000 pods waiting
 * for a stopped dependency (no process) make a snapshot of about 1.5 MB;
 * six changes in 3 s while the client reads nothing would queue 9 MB. */
/* n pods w0000… waiting on a stopped pod "gate": objects with no
 * process, for big snapshots. */
static void apply_waiting(d_t *d, int n)
{
	static char y[10000 * 120], out[1 << 18];
	size_t off = 0;

	cr_assert_leq(n, 10000);
	apply(d, "gate.yaml", "name: gate\ncontainers:\n"
	      "  - name: s\n    command: [/bin/sleep, \"1000\"]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "stop gate --wait --timeout 20s"), 0, "%s", out);
	for (int i = 0; i < n; i++)
		off += (size_t)snprintf(y + off, sizeof y - off,
					"---\nname: w%04d\ndepends_on: [{pod: gate}]\n"
					"containers: [{name: c, command: [/bin/sleep, \"1000\"]}]\n", i);
	write_file(d, "waiting.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/waiting.yaml", d->dir), 0, "%.2000s", out);
}

Test(obs_http, a_page_reading_a_big_snapshot_is_not_cut_by_the_changes_behind_it)
{
	char base[96], name[32], yy[256];
	static char got[32 << 20];
	d_t *d = http_daemon(base, sizeof base);

	apply_waiting(d, 3000);

	int fd = obs_sse_open(port_of(base), "/events?snapshot=1");
	got[0] = '\0';
	cr_assert(obs_sse_wait(fd, got, sizeof got, "event: snapshot", 10), "%.300s", got);
	/* Changes while the client reads nothing. */
	for (int i = 1; i <= 6; i++) {
		snprintf(name, sizeof name, "f%d.yaml", i);
		snprintf(yy, sizeof yy, "name: f%d\ncontainers:\n"
			 "  - name: s\n    command: [/bin/sleep, \"1000\"]\n", i);
		apply(d, name, yy);
		sleep_ms(500);
	}
	cr_assert(obs_sse_wait(fd, got, sizeof got, "\"pod\":\"f6\"", 60),
		  "cut before the changes behind the snapshot (%zu bytes read)", strlen(got));
	cr_assert(strstr(got, "\"w2999\""), "the snapshot came whole");
	close(fd);
	teardown(d);
}

/* tankd's resident memory, KiB (VmRSS). */
static long rss_kib(pid_t pid)
{
	char path[64], st[4096];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	read_text(path, st, sizeof st);
	const char *v = strstr(st, "VmRSS:");
	cr_assert(v, "no VmRSS in %s", path);
	return atol(v + 6);
}

/* Pages that read their snapshot slowly share its bytes: each held a
 * copy of its own (63 MB at 100,000 stored pods, 64 pages 4 GB in
 * tankd).  40 pages that read nothing past the snapshot's first bytes,
 * 3,000 waiting pods (a snapshot of about 1.5 MB): tankd holds the
 * messages of the few builds they were sent (a build serves every page
 * of its run), counted once each by tank_http_snapshot_bytes, and its
 * memory grows by a few snapshots, not by 40.  (A page that reads gets
 * the shared bytes whole, events after them: the test above.) */
Test(obs_http, pages_reading_a_snapshot_share_its_bytes)
{
	enum { PAGES = 40 };
	static char url[128], got[PAGES][1 << 18];
	char base[96];
	static char state[8 << 20];
	d_t *d = http_daemon(base, sizeof base);
	int fds[PAGES];
	prom_t p;

	apply_waiting(d, 3000);
	/* The apply's events over (a page gets them before its snapshot). */
	cr_assert_eq(ctl(d, state, sizeof state, "sync"), 0, "%s", state);
	sleep_ms(1000);
	snprintf(url, sizeof url, "%s/state", base);
	cr_assert_eq(obs_get(url, state, sizeof state), 200);
	size_t one = strlen(state);
	cr_assert_gt(one, 1000000, "a snapshot of 3,000 pods is %zu bytes", one);
	long rss0 = rss_kib(d->pid);

	for (int i = 0; i < PAGES; i++) {
		fds[i] = obs_sse_open(port_of(base), "/events?snapshot=1");
		int small = 4096;
		(void)setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
		got[i][0] = '\0';
	}
	for (int i = 0; i < PAGES; i++)
		cr_assert(obs_sse_wait(fds[i], got[i], sizeof got[i], "event: snapshot", 30),
			  "page %d got no snapshot: %.200s", i, got[i]);
	/* Each page has read at most 256 KiB: the rest is tankd's. */
	scrape(base, &p);
	double held = prom_get(&p, "tank_http_snapshot_bytes", NULL);
	prom_free(&p);
	long grew = rss_kib(d->pid) - rss0;
	cr_assert_gt(held, (double)one, "no snapshot held (%.0f bytes) while %d pages read one",
		     held, PAGES);
	cr_assert_lt(held, 8. * (double)one,
		     "%.0f bytes of snapshots held for %d pages: %.1f copies of %zu", held, PAGES,
		     held / (double)one, one);
	cr_assert_lt((double)grew * 1024., 16. * (double)one,
		     "tankd grew %ld KiB while %d pages read a %zu-byte snapshot", grew, PAGES, one);
	for (int i = 0; i < PAGES; i++)
		close(fds[i]);
	teardown(d);
}

/* The web side is closed before the actors are freed, and an actor's
 * end may still record an event: told to stop twice ("stopping now"),
 * the loop ends with containers still running, and the reconciler's
 * terminate in rt_free records each as lost.  That event went to the
 * freed web side (a read of freed memory: AddressSanitizer's abort in
 * the SAN build, found by a churn of web clients at a stop). */
Test(obs_http, events_of_the_actors_freed_last_find_no_freed_web_side)
{
	char base[96], out[256];
	d_t *d = http_daemon(base, sizeof base);

	write_file(d, "deaf.yaml", "name: deaf\n"
		   "containers:\n  - name: c\n    command: [/bin/sh, -c, \"trap '' TERM; sleep 1000\"]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/deaf.yaml --wait --timeout 20s", d->dir), 0,
		     "%s", out);
	cr_assert_eq(kill(d->pid, SIGTERM), 0);
	sleep_ms(300);
	cr_assert_eq(kill(d->pid, SIGTERM), 0);
	obs_exits_clean(d);
	teardown(d);
}

/* Connections to 127.0.0.1:port for secs, one after another, each a GET
 * of /healthz read to its first bytes: how many were refused. */
static int refused_for(int port, double secs)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	struct timespec t0, t;
	int refused = 0;
	char buf[64];

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		cr_assert_geq(fd, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
			cr_assert_eq(errno, ECONNREFUSED, "connect: %s", strerror(errno));
			refused++;
		} else if (write(fd, req, sizeof req - 1) == (ssize_t)sizeof req - 1) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (poll(&p, 1, 10000) > 0)
				(void)!read(fd, buf, sizeof buf);
		}
		close(fd);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	return refused;
}

/* A reexec hands the web side's listening socket over with the RPC
 * socket's: a client that connects while the new image starts waits in
 * its backlog and is served.  Before, the socket went with the old image
 * and every connection in that window was refused (689 in 5 reexecs
 * hammered from one client). */
Test(obs_http, a_reexec_refuses_no_web_client)
{
	char base[96], out[512];
	d_t *d = http_daemon(base, sizeof base);
	int port = port_of(base), refused = 0;

	/* The client in a process of its own: `daemon reexec` answers once
	 * the new image serves, after the window. */
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	pid_t kid = fork();
	cr_assert_geq(kid, 0);
	if (kid == 0) {
		close(fds[0]);
		int n = refused_for(port, 5.0);
		(void)!write(fds[1], &n, sizeof n);
		_exit(0);
	}
	close(fds[1]);
	for (int i = 0; i < 3; i++) {
		sleep_ms(300);
		cr_assert_eq(ctl(d, out, sizeof out, "daemon reexec"), 0, "%s", out);
	}
	cr_assert_eq(read(fds[0], &refused, sizeof refused), (ssize_t)sizeof refused,
		     "the client said nothing");
	close(fds[0]);
	cr_assert_eq(waitpid(kid, NULL, 0), kid);
	cr_assert_eq(ctl(d, out, sizeof out, "daemon status"), 0, "%s", out);
	cr_assert(strstr(out, "reexecs    3"), "three reexecs: %s", out);
	cr_assert_eq(refused, 0, "%d connections refused across 3 reexecs", refused);
	/* Still the same address, and it answers. */
	char url[128], body[256];
	snprintf(url, sizeof url, "%s/healthz", base);
	cr_assert_eq(obs_get(url, body, sizeof body), 200);
	teardown(d);
}

/* Reads fd to EOF (60 s at most); the body, malloc'ed. */
static char *read_body(int fd)
{
	size_t len = 0, cap = 1 << 20;
	char *buf = malloc(cap);
	time_t end = time(NULL) + 60;

	cr_assert(buf);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		cr_assert(time(NULL) < end, "no EOF after 60 s (%zu bytes)", len);
		if (poll(&p, 1, 1000) <= 0)
			continue;
		if (len + 1 == cap)
			cr_assert((buf = realloc(buf, cap *= 2)));
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		cr_assert_geq(n, 0, "read: %s", strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	char *body = strstr(buf, "\r\n\r\n");
	cr_assert(body, "no header end in %.200s", buf);
	cr_assert(!strncmp(buf, "HTTP/1.1 200", 12), "%.200s", buf);
	char *copy = strdup(body + 4);
	free(buf);
	return copy;
}

/* True once process pid is stopped (state T in /proc/PID/stat): kill
 * returns before the signal has taken it. */
static bool stopped(pid_t pid)
{
	char path[64], st[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 1000; i++) {
		read_text(path, st, sizeof st);
		char *p = strrchr(st, ')');
		if (p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't'))
			return true;
		sleep_ms(10);
	}
	return false;
}

/* Requests that MHD serves in one run share one build of /state and one
 * of /metrics (nothing can change between them: they are served on the
 * loop's thread): eight clients that asked while tankd was stopped get the
 * same bytes, "at" included.  Before, each was built again — at 9,700
 * pods 64 pages opened at once froze the loop for seconds. */
Test(obs_http, requests_served_in_one_run_share_one_build)
{
	char base[96];
	d_t *d = http_daemon(base, sizeof base);

	/* Enough objects that each build takes milliseconds: "at" then
	 * tells two builds apart. */
	apply_waiting(d, 3000);

	int fds[8];
	char *body[8];
	cr_assert_eq(kill(d->pid, SIGSTOP), 0);
	cr_assert(stopped(d->pid), "tankd did not stop");
	/* Eight: libmicrohttpd (0.9.75, epoll) accepts at most 11 connections
	 * after one epoll_wait and serves them in the next run; more would
	 * take two runs, and two builds. */
	for (int i = 0; i < 8; i++)
		fds[i] = obs_http_ask(port_of(base), i % 2 ? "/metrics" : "/state",
				      "Connection: close\r\n");
	cr_assert_eq(kill(d->pid, SIGCONT), 0);
	for (int i = 0; i < 8; i++)
		body[i] = read_body(fds[i]);
	cr_assert(strstr(body[0], "\"w2999\""), "/state has every pod");
	cr_assert(strstr(body[1], "tank_"), "/metrics is the exposition");
	for (int i = 2; i < 8; i++)
		cr_assert_str_eq(body[i], body[i % 2], "%s %d is not the first one's: built "
				 "again", i % 2 ? "/metrics" : "/state", i);
	for (int i = 0; i < 8; i++)
		free(body[i]);
	teardown(d);
}

/* /metrics and /state of many objects are built over many turns of the
 * loop (a slice each; TANK_HTTP_SLICE_OBJECTS=1 makes each slice one
 * object), and what is asked while one is built waits for it: at 100,000
 * stored pods each was one turn of most of a second, every RPC behind
 * it: bench/scale/s26_scrape_stored.sh measures that.  Here: requests that
 * ask during one build get the same whole bytes, a page that connects
 * then gets the snapshot, and the slices are counted. */
Test(obs_http, big_answers_are_built_over_many_turns)
{
	static char url[128], got[8 << 20];
	char base[96];
	d_t *d = http_daemon_env(base, sizeof base, slice_one);
	int port = port_of(base);
	prom_t p;

	apply_waiting(d, 2000);

	cr_assert_eq(kill(d->pid, SIGSTOP), 0);
	cr_assert(stopped(d->pid), "tankd did not stop");
	int fds[4];
	for (int i = 0; i < 4; i++)
		fds[i] = obs_http_ask(port, i % 2 ? "/metrics" : "/state", "Connection: close\r\n");
	int page = obs_sse_open(port, "/events?snapshot=1");
	cr_assert_eq(kill(d->pid, SIGCONT), 0);
	char *body[4];
	for (int i = 0; i < 4; i++)
		body[i] = read_body(fds[i]);
	cr_assert(strstr(body[0], "\"w1999\"") && strstr(body[0], "\"w0000\""),
		  "/state has every pod");
	cr_assert_str_eq(body[2], body[0], "two /state asked during one build differ");
	cr_assert_str_eq(body[3], body[1], "two /metrics asked during one build differ");
	cr_assert(prom_parse(body[1], &p), "%s", p.err);
	cr_assert_eq(prom_get(&p, "tank_kind_objects", (const char *const[]){ "kind", "pod", NULL }),
		     2001.);
	cr_assert(strstr(body[1], "name=\"w1999\""), "/metrics has the last pod's series");
	cr_assert(strstr(body[1], "name=\"w0000\""), "/metrics has the first pod's series");
	prom_free(&p);
	got[0] = '\0';
	cr_assert(obs_sse_wait(page, got, sizeof got, "\"w1999\"", 60), "the page's snapshot");
	close(page);

	/* Each of those took a slice a pod: counted. */
	snprintf(url, sizeof url, "%s/metrics", base);
	static char m[4 << 20];
	cr_assert_eq(obs_get(url, m, sizeof m), 200);
	cr_assert(prom_parse(m, &p), "%s", p.err);
	double slices = prom_get(&p, "tank_http_build_slices_total", NULL);
	cr_assert_geq(slices, 2 * 2001., "%g slices", slices);
	prom_free(&p);
	for (int i = 0; i < 4; i++)
		free(body[i]);
	teardown(d);
}

/* Requests that come while tankd stops its web side (obs_http_close's
 * last runs of MHD, after the waiters were told it stops) are answered,
 * not suspended for a build: MHD_stop_daemon with a suspended connection
 * aborts the process ("MHD_stop_daemon() called while we have suspended
 * connections"), and tankd died of SIGABRT at a SIGTERM that met a
 * backlog of /state requests. */
Test(obs_http, requests_while_stopping_do_not_abort_tankd)
{
	char base[96];
	d_t *d = http_daemon_env(base, sizeof base, slice_one);
	int port = port_of(base);
	enum { N = 60 };
	int fds[N];

	apply_waiting(d, 300);

	cr_assert_eq(kill(d->pid, SIGSTOP), 0);
	cr_assert(stopped(d->pid), "tankd did not stop");
	/* More than one run of MHD accepts (11 a run): some are accepted and
	 * served in obs_http_close's runs, while a build runs. */
	for (int i = 0; i < N; i++)
		fds[i] = obs_http_ask(port, i % 2 ? "/metrics" : "/state", "Connection: close\r\n");
	cr_assert_eq(kill(d->pid, SIGTERM), 0);
	cr_assert_eq(kill(d->pid, SIGCONT), 0);
	obs_exits_clean(d);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	teardown(d);
}

/* Raw: connects to 127.0.0.1:port and sends text as it is. */
static int raw_conn(int port, const char *text)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s",
		     strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	return fd;
}

/* Reads what fd has now without waiting: true when its end was read (the
 * server closed it). */
static bool closed_by_server(int fd)
{
	char buf[4096];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
		;
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Slowloris: 60 connections each sending half a request and then a byte
 * a second (each byte reset libmicrohttpd's inactivity timeout), beside
 * an answered connection and a page's stream.  Every slot of the web side (64)
 * was held for as long as they dripped, and /healthz went unanswered.
 * Now a connection has OBS_HTTP_ASK_S (10 s) to send a whole request,
 * counted from its accept; a page's stream stays. */
Test(obs_http, connections_that_never_finish_a_request_are_closed, .timeout = 120)
{
	enum { N = 60 };
	char base[96], url[128], buf[8192] = "";
	d_t *d = http_daemon(base, sizeof base);
	int port = port_of(base), fds[N], page, idle;
	bool shut[N] = { false };
	int nshut = 0;
	prom_t p;

	page = obs_sse_open(port, "/events");
	cr_assert(obs_sse_wait(page, buf, sizeof buf, "\r\n\r\n", 10), "no stream: %s", buf);
	idle = raw_conn(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
	for (int i = 0; i < N; i++)
		fds[i] = raw_conn(port, "GET /state HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
	/* Dripping until every one is closed: 60 s at most, where before
	 * none ever was. */
	for (int t = 0; t < 60 && nshut < N; t++) {
		for (int i = 0; i < N; i++) {
			if (shut[i])
				continue;
			if (closed_by_server(fds[i])) {
				shut[i] = true;
				nshut++;
			} else
				(void)send(fds[i], "a", 1, MSG_NOSIGNAL);
		}
		sleep_ms(1000);
	}
	cr_assert_eq(nshut, N, "%d of %d connections dripping half a request still open "
		     "after 60 s", N - nshut, N);
	/* Closed right after its answer, not by the deadline: every answer
	 * is queued in the handler's first call, after which libmicrohttpd
	 * (0.9.75 to 1.0.1) says "Connection: close".  No keep-alive is
	 * tested here. */
	for (int i = 0; i < 50 && !closed_by_server(idle); i++)
		sleep_ms(100);
	cr_assert(closed_by_server(idle), "a connection answered is still open");
	/* The page's stream was not closed: it is in a request. */
	cr_assert_not(closed_by_server(page), "the page's stream was closed");
	scrape(base, &p);
	/* The answered one closed with its answer (N + 1 were it kept). */
	double closed = prom_get(&p, "tank_http_slow_closed_total", NULL);
	cr_assert(closed >= N && closed <= N + 1, "tank_http_slow_closed_total %g", closed);
	prom_free(&p);
	snprintf(url, sizeof url, "%s/healthz", base);
	cr_assert_eq(obs_get(url, buf, sizeof buf), 200);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	close(idle);
	close(page);
	teardown(d);
}

/* An answer built over many slices is queued at a later call of the
 * handler than its first (after its resume): libmicrohttpd could keep
 * such a connection alive.  Kept or not, it is not held: closed with its
 * answer (0.9.75 does) or OBS_HTTP_ASK_S after it, when no next request
 * comes (the deadline on_completed sets). */
Test(obs_http, a_sliced_answer_does_not_hold_its_connection)
{
	char base[96], buf[1 << 16];
	d_t *d = http_daemon_env(base, sizeof base, slice_one);
	int port = port_of(base);
	bool shut = false;

	apply_waiting(d, 300);
	int fd = raw_conn(port, "GET /state HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			  "Connection: keep-alive\r\n\r\n");
	size_t got = 0;
	for (int t = 0; t < 300 && !shut; t++) {
		ssize_t n;
		while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
			got += (size_t)n;
		shut = n == 0 || (n < 0 && errno == ECONNRESET);
		if (!shut)
			sleep_ms(50);
	}
	cr_assert(shut, "a keep-alive connection answered over slices is still open 15 s "
		  "after its request (%zu bytes read)", got);
	cr_assert_gt(got, 300 * 100, "the answer (%zu bytes) is not /state of 300 pods", got);
	close(fd);
	teardown(d);
}
