/*
 * What tankctl prints for programs and people (issue 36): -o json|yaml
 * with RFC 3339 times as the tables have them, `events` as JSON Lines,
 * quoted key=value, for one object, and replaying the recent past.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <msgpack.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

/* Runs `tankctl events ARGS` for secs seconds (it never ends on its own)
 * and returns what it printed. */
static void events_for(d_t *d, int secs, char *out, size_t cap, const char *args)
{
	char cmd[1024];
	size_t n = 0;

	snprintf(cmd, sizeof cmd, "timeout %d %s/tankctl --socket %s events %s 2>&1", secs,
		 bindir(), d->sock, args);
	FILE *p = popen(cmd, "r");
	cr_assert(p);
	while (n + 1 < cap && !feof(p)) {
		size_t k = fread(out + n, 1, cap - 1 - n, p);
		if (!k)
			break;
		n += k;
	}
	out[n] = '\0';
	pclose(p);
}

static int lines_with(const char *text, const char *needle)
{
	int n = 0;
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char line[4096];
		snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
		n += strstr(line, needle) != NULL;
	}
	return n;
}

Test(e2e, events_replay_filter_json_lines_and_rfc3339_times)
{
	d_t *d = setup();
	char out[65536], y[512];

	snprintf(y, sizeof y, "name: ev-a\ncontainers: [{name: c, command: [/bin/sleep, '1061']}]\n"
		 "---\nname: ev-b\ncontainers: [{name: c, command: [/bin/sh, -c, 'exit 3']}]\n"
		 "backoff: {base: 50ms, cap: 100ms, max_retries: 1}\n");
	write_file(d, "ev.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/ev.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "ev-a", "running", 20));
	cr_assert(wait_phase(d, "ev-b", "terminal", 20));

	/* --since replays what happened before the subscription. */
	events_for(d, 2, out, sizeof out, "--since 5m");
	cr_assert(lines_with(out, "pod=ev-a") >= 1, "ev-a's start replayed: %s", out);
	cr_assert(lines_with(out, "pod=ev-b") >= 1, "%s", out);
	/* Values with spaces are quoted. */
	cr_assert(strstr(out, "reason=\"exited with code 3\""), "%s", out);
	/* Without --since: only what comes (nothing here). */
	events_for(d, 1, out, sizeof out, "");
	cr_assert_eq(lines_with(out, "pod=ev-a"), 0, "live only: %s", out);

	/* One object: KIND/NAME or a pod's NAME. */
	events_for(d, 2, out, sizeof out, "pod/ev-b --since 5m");
	cr_assert(lines_with(out, "pod=ev-b") >= 1, "%s", out);
	cr_assert_eq(lines_with(out, "pod=ev-a"), 0, "another pod's: %s", out);
	events_for(d, 2, out, sizeof out, "ev-a --since 5m");
	cr_assert(lines_with(out, "pod=ev-a") >= 1 && !lines_with(out, "pod=ev-b"), "%s", out);
	cr_assert_neq(ctl(d, out, sizeof out, "events nokind/x"), 0);
	cr_assert(strstr(out, "unknown kind 'nokind'"), "%s", out);

	/* -o json: JSON Lines, one object a line, times in RFC 3339. */
	events_for(d, 2, out, sizeof out, "ev-a --since 5m -o json");
	int objs = 0;
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
		size_t n = strlen(l);
		cr_assert(n > 2 && l[0] == '{' && l[n - 1] == '}', "one object a line: %s", l);
		cr_assert(strstr(l, "\"at\": \"20") && strstr(l, "Z\""), "an RFC 3339 time: %s", l);
		objs++;
	}
	cr_assert_geq(objs, 1);

	/* status -o json and -o yaml: times as text, as in the tables. */
	cr_assert_eq(ctl(d, out, sizeof out, "status ev-a -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"since\": \"20"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status ev-a"), 0, "%s", out);
	cr_assert(strstr(out, "since: 20") || strstr(out, "since: '20") ||
		  strstr(out, "since: \"20"), "%s", out);
	/* Counters stay numbers. */
	cr_assert_eq(ctl(d, out, sizeof out, "status ev-b -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"restarts\": 1") || strstr(out, "\"restarts\": 0"), "%s", out);
	teardown(d);
}

/* apply --dry-run says what each object would be and writes nothing;
 * diff shows what apply would change as a unified diff and exits 1 when
 * there is a difference, 0 when none, 2 on trouble (kubectl diff's rule). */
Test(e2e, apply_dry_run_and_diff_write_nothing)
{
	d_t *d = setup();
	char out[16384];

	write_file(d, "a.yaml", "name: dr-a\ncontainers: [{name: c, command: [/bin/sleep, '1063']}]\n");
	write_file(d, "a2.yaml", "name: dr-a\nrestart: on_failure\n"
		   "containers: [{name: c, command: [/bin/sleep, '1063']}]\n");
	write_file(d, "bad.yaml", "name: dr-b\ncontainers: [{name: c}]\n");

	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a.yaml --dry-run", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "dr-a created (dry run)"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get dr-a"), 1, "nothing was written: %s", out);
	/* A bad manifest is refused as by apply. */
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/bad.yaml --dry-run", d->dir), 1);
	cr_assert(strstr(out, "command"), "%s", out);
	/* diff of a new object: all added; exit 1. */
	cr_assert_eq(ctl(d, out, sizeof out, "diff -f %s/a.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "+++ pod/dr-a (applied)") && strstr(out, "+name: dr-a"), "%s", out);

	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "dr-a", "running", 20));
	long pid = status_num(d, "dr-a", "pid");
	/* Unchanged: no diff, exit 0; dry run says unchanged. */
	cr_assert_eq(ctl(d, out, sizeof out, "diff -f %s/a.yaml", d->dir), 0, "%s", out);
	cr_assert_str_eq(out, "");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a.yaml --dry-run", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "dr-a unchanged (dry run)"), "%s", out);
	/* A change: the diff names the field; the dry run says configured
	 * and restarts nothing. */
	cr_assert_eq(ctl(d, out, sizeof out, "diff -f %s/a2.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "-restart: always") && strstr(out, "+restart: on_failure"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a2.yaml --dry-run", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "dr-a configured (dry run)"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get dr-a"), 0, "%s", out);
	cr_assert(strstr(out, "restart: always"), "the stored spec is as it was: %s", out);
	sleep_ms(500);
	cr_assert_eq(status_num(d, "dr-a", "pid"), pid, "the pod was not touched");
	cr_assert_neq(ctl(d, out, sizeof out, "apply -f %s/a.yaml --dry-run --wait", d->dir), 0);
	/* Trouble is 2, not 1 (1 says "something would change"): a refused
	 * manifest, a missing file, bad usage, no tankd. */
	cr_assert_eq(ctl(d, out, sizeof out, "diff -f %s/bad.yaml", d->dir), 2, "%s", out);
	cr_assert(strstr(out, "containers[0].command: required"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "diff -f %s/nosuch.yaml", d->dir), 2, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "diff"), 2, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "--socket %s/nosock diff -f %s/a.yaml", d->dir, d->dir),
		     2, "%s", out);
	cr_assert(strstr(out, "cannot connect"), "%s", out);
	teardown(d);
}

/* Runs a bash completion of the words (the last one being completed)
 * through the script `tankctl completion bash` prints, with TANK_SOCKET
 * set to this daemon's; the candidates, one a line. */
static void complete_words(d_t *d, const char *words, int cword, char *out, size_t cap)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd,
		 "PATH=%s:$PATH TANK_SOCKET=%s bash -c 'source <(tankctl completion bash); "
		 "COMP_WORDS=(%s); COMP_CWORD=%d; _tankctl; printf \"%%s\\n\" \"${COMPREPLY[@]}\"' 2>&1",
		 bindir(), d->sock, words, cword);
	FILE *p = popen(cmd, "r");
	cr_assert(p);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	pclose(p);
}

/* `tankctl completion bash` completes verbs, kinds and the names tankd
 * has; zsh's script is there too. */
Test(e2e, shell_completion_offers_verbs_kinds_and_names)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "c.yaml", "name: compl-web\ncontainers: [{name: c, command: [/bin/sleep, '1064']}]\n"
		   "---\nkind: Stack\nname: compl-st\npods: [compl-web]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/c.yaml", d->dir), 0, "%s", out);
	complete_words(d, "tankctl lo", 1, out, sizeof out);
	cr_assert_str_eq(out, "logs\n");
	complete_words(d, "tankctl logs compl", 2, out, sizeof out);
	cr_assert_str_eq(out, "compl-web\n");
	complete_words(d, "tankctl get st", 2, out, sizeof out);
	cr_assert(strstr(out, "stack\n") && strstr(out, "stacks\n"), "%s", out);
	complete_words(d, "tankctl get stack \"\"", 3, out, sizeof out);
	cr_assert_str_eq(out, "compl-st\n");
	complete_words(d, "tankctl status -o j", 3, out, sizeof out);
	cr_assert_str_eq(out, "json\n");
	complete_words(d, "tankctl help ver", 2, out, sizeof out);
	cr_assert_str_eq(out, "version\n");
	/* The hidden helper is not offered. */
	complete_words(d, "tankctl _", 1, out, sizeof out);
	cr_assert_str_eq(out, "\n");
	cr_assert_eq(ctl(d, out, sizeof out, "completion zsh"), 0, "%s", out);
	cr_assert(!strncmp(out, "#compdef tankctl\n", 17), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "completion fish"), 2);
	teardown(d);
}

/* describe: one object for a person, for any kind — its status with
 * times as RFC 3339 and their age, a pod's containers as a table (pid,
 * restarts), its spec, its stack, its last history. */
Test(e2e, describe_shows_status_spec_and_history_of_any_kind)
{
	d_t *d = setup();
	char out[16384];

	write_file(d, "ds.yaml",
		   "kind: Stack\nname: ds-st\npods:\n"
		   "  - name: ds-web\n"
		   "    containers: [{name: httpd, command: [/bin/sleep, '1065']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/ds.yaml --wait --timeout 30s", d->dir), 0,
		     "%s", out);
	long pid = status_num(d, "ds-web", "pid");
	cr_assert_gt(pid, 1);
	char spid[32];
	snprintf(spid, sizeof spid, "%ld", pid);

	cr_assert_eq(ctl(d, out, sizeof out, "describe ds-web"), 0, "%s", out);
	cr_assert(!strncmp(out, "Name:    ds-web\nKind:    pod\n", 29), "%s", out);
	cr_assert(strstr(out, "Phase:") && strstr(out, "running"), "%s", out);
	cr_assert(strstr(out, "Stack:") && strstr(out, "ds-st"), "its stack: %s", out);
	cr_assert(strstr(out, "ago)"), "a time with its age: %s", out);
	cr_assert(strstr(out, "Containers:\n") && strstr(out, "PID") && strstr(out, spid),
		  "the containers' table with the pid: %s", out);
	cr_assert(strstr(out, "Spec:\n") && strstr(out, "/bin/sleep 1065"), "%s", out);
	cr_assert(strstr(out, "Events:\n") && strstr(out, "container/ds-web/httpd"), "%s", out);
	/* Another kind, either spelling. */
	cr_assert_eq(ctl(d, out, sizeof out, "describe stack/ds-st"), 0, "%s", out);
	cr_assert(!strncmp(out, "Name:    ds-st\nKind:    stack\n", 30), "%s", out);
	cr_assert(strstr(out, "Pods:") && strstr(out, "ds-web"), "%s", out);
	cr_assert(strstr(out, "stack/ds-st"), "its history: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "describe stack ds-st"), 0, "%s", out);
	cr_assert(!strncmp(out, "Name:    ds-st\nKind:    stack\n", 30), "%s", out);
	/* Unknown: exit 1, named; a bad kind: exit 2. */
	cr_assert_eq(ctl(d, out, sizeof out, "describe nope"), 1);
	cr_assert(strstr(out, "\"nope\" not found") || strstr(out, "nope"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "describe what/x"), 2, "%s", out);
	teardown(d);
}

/* ps's everyday options: names, -q, -o name|json, --no-headers, and -w
 * printing a row when a pod's news comes. */
Test(e2e, ps_names_quiet_output_and_watch)
{
	d_t *d = setup();
	char out[16384], cmd[1024];

	write_file(d, "p.yaml", "name: ps-a\ncontainers: [{name: c, command: [/bin/sleep, '1066']}]\n"
		   "---\nname: ps-b\ncontainers: [{name: c, command: [/bin/sleep, '1067']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/p.yaml --wait --timeout 30s", d->dir), 0,
		     "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "ps -q"), 0, "%s", out);
	cr_assert_str_eq(out, "ps-a\nps-b\n");
	cr_assert_eq(ctl(d, out, sizeof out, "ps -o name ps-b"), 0, "%s", out);
	cr_assert_str_eq(out, "pod/ps-b\n");
	cr_assert_eq(ctl(d, out, sizeof out, "ps ps-a --no-headers"), 0, "%s", out);
	cr_assert(!strncmp(out, "ps-a ", 5) && !strstr(out, "NAME") && !strstr(out, "ps-b"), "%s",
		  out);
	cr_assert_eq(ctl(d, out, sizeof out, "ps ps-a -o json"), 0, "%s", out);
	cr_assert(out[0] == '[' && strstr(out, "\"name\": \"ps-a\"") && !strstr(out, "ps-b"), "%s",
		  out);
	cr_assert_eq(ctl(d, out, sizeof out, "ps ps-a nope"), 1, "%s", out);
	cr_assert(strstr(out, "pod \"nope\" not found") && strstr(out, "ps-a"), "%s", out);

	/* -w: the table, then a row when ps-b is restarted (its new pid). */
	long pid = status_num(d, "ps-b", "pid");
	snprintf(cmd, sizeof cmd, "timeout 4 %s/tankctl --socket %s ps -w ps-b > %s/watch 2>&1 &",
		 bindir(), d->sock, d->dir);
	cr_assert_eq(system(cmd), 0);
	sleep_ms(800);
	cr_assert_eq(ctl(d, out, sizeof out, "restart ps-b"), 0, "%s", out);
	cr_assert(wait_phase(d, "ps-b", "running", 10));
	long pid2 = status_num(d, "ps-b", "pid");
	cr_assert_neq(pid2, pid);
	char path[256], spid[32];
	snprintf(path, sizeof path, "%s/watch", d->dir);
	snprintf(spid, sizeof spid, "%ld", pid2);
	bool seen = false;
	for (int i = 0; i < 100 && !seen; i++) {
		read_text(path, out, sizeof out);
		seen = strstr(out, spid) != NULL;
		if (!seen)
			sleep_ms(50);
	}
	cr_assert(seen, "a row with the new pid %s: %s", spid, out);
	cr_assert(!strncmp(out, "NAME", 4), "the table first: %s", out);
	sleep_ms(3500);   /* the watcher's timeout ends it */

	/* A watched pod deleted: a `deleted` row, once, not an error
	 * ("tankctl: ps: pod \"ps-b\" not found" at each of its last events). */
	snprintf(cmd, sizeof cmd, "timeout 4 %s/tankctl --socket %s ps -w > %s/watch2 2>&1 &",
		 bindir(), d->sock, d->dir);
	cr_assert_eq(system(cmd), 0);
	sleep_ms(800);
	cr_assert_eq(ctl(d, out, sizeof out, "delete ps-b"), 0, "%s", out);
	snprintf(path, sizeof path, "%s/watch2", d->dir);
	sleep_ms(3500);   /* the watcher's timeout ends it */
	read_text(path, out, sizeof out);
	cr_assert(!strstr(out, "not found"), "no error for a deleted pod: %s", out);
	int deleted = 0;
	for (const char *l = out; (l = strstr(l, "ps-b ")); l++)
		if (!strncmp(l + strspn(l + 4, " ") + 4, "deleted ", 8))
			deleted++;
	cr_assert_eq(deleted, 1, "one deleted row: %s", out);
	teardown(d);
}

/* `ps --no-headers` with a stack printed the stacks' table, a blank line
 * and a `stack NAME:` / `no stack:` title before each group: a script's
 * `ps --no-headers | awk '{print $1}'` read "shop", "", "stack", "no" as
 * pods.  Rows only is one row a pod, as -q lists them. */
Test(e2e, ps_no_headers_prints_one_row_a_pod_with_stacks)
{
	d_t *d = setup();
	char out[16384];

	write_file(d, "s.yaml",
		   "kind: Stack\nname: nh-shop\npods:\n"
		   "  - {name: nh-db, containers: [{name: c, command: [/bin/sleep, '1068']}]}\n"
		   "---\nname: nh-solo\ncontainers: [{name: c, command: [/bin/sleep, '1069']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/s.yaml --wait --timeout 30s", d->dir), 0,
		     "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "ps"), 0, "%s", out);
	cr_assert(strstr(out, "STACK") && strstr(out, "stack nh-shop:") && strstr(out, "no stack:"),
		  "the grouped table still: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "ps --no-headers"), 0, "%s", out);
	cr_assert(!strncmp(out, "nh-db ", 6), "the first row is a pod's: %s", out);
	char *solo = strstr(out, "\nnh-solo ");
	cr_assert(solo, "%s", out);
	cr_assert(!strchr(solo + 1, '\n')[1], "two rows, nothing after: %s", out);
	cr_assert(!strstr(out, "\n\n") && !strstr(out, "stack") && !strstr(out, "NAME"),
		  "no title, blank line or header: %s", out);
	cr_assert(strstr(out, "running"), "%s", out);
	teardown(d);
}

/* Sends raw (pipelined requests) on a new connection to d's socket and
 * reads n answers: their msgids in order in ids, and whether each
 * answer's result (an array) names pod `want`; errors are counted in
 * *errors when it is given (each must contain `why`), else fail. */
static void pipelined(d_t *d, const char *raw, size_t len, int n, uint32_t *ids, bool *named,
		      const char *want, int *errors, const char *why)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	msgpack_unpacker u;
	msgpack_unpacked r;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), got = 0;

	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d->sock);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0, "%s", strerror(errno));
	cr_assert_eq(write(fd, raw, len), (ssize_t)len);
	cr_assert(msgpack_unpacker_init(&u, 1 << 16));
	msgpack_unpacked_init(&r);
	for (int t = 0; got < n && t < 600; t++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		msgpack_unpacker_reserve_buffer(&u, 1 << 16);
		ssize_t k = read(fd, msgpack_unpacker_buffer(&u), 1 << 16);
		cr_assert_gt(k, 0, "tankd closed the connection");
		msgpack_unpacker_buffer_consumed(&u, (size_t)k);
		while (got < n && msgpack_unpacker_next(&u, &r) == MSGPACK_UNPACK_SUCCESS) {
			const msgpack_object *a = r.data.via.array.ptr;
			cr_assert(r.data.type == MSGPACK_OBJECT_ARRAY && r.data.via.array.size == 4);
			if (errors && a[2].type != MSGPACK_OBJECT_NIL) {
				char text[512];
				msgpack_object_print_buffer(text, sizeof text, a[2]);
				cr_assert(strstr(text, why), "%s", text);
				ids[got] = (uint32_t)a[1].via.u64;
				named[got++] = false;
				(*errors)++;
				continue;
			}
			cr_assert_eq(a[2].type, MSGPACK_OBJECT_NIL, "answer %d is an error", got);
			ids[got] = (uint32_t)a[1].via.u64;
			named[got] = false;
			for (uint32_t i = 0; a[3].type == MSGPACK_OBJECT_ARRAY && i < a[3].via.array.size; i++) {
				const msgpack_object *m = &a[3].via.array.ptr[i];
				for (uint32_t j = 0; m->type == MSGPACK_OBJECT_MAP && j < m->via.map.size; j++) {
					const msgpack_object_kv *kv = &m->via.map.ptr[j];
					if (kv->key.via.str.size == 3 && !memcmp(kv->key.via.str.ptr, "pod", 3) &&
					    kv->val.type == MSGPACK_OBJECT_STR &&
					    kv->val.via.str.size == strlen(want) &&
					    !memcmp(kv->val.via.str.ptr, want, strlen(want)))
						named[got] = true;
				}
			}
			got++;
		}
	}
	cr_assert_eq(got, n, "%d answers of %d in 60 s", got, n);
	msgpack_unpacked_destroy(&r);
	msgpack_unpacker_destroy(&u);
	close(fd);
}

/* top: CPU and memory of the running containers, from their cgroups or
 * /proc: a busy loop shows a high CPU share, a sleeper almost none. */
Test(e2e, top_shows_cpu_and_memory_of_running_containers)
{
	d_t *d = setup();
	char out[16384];

	write_file(d, "t.yaml",
		   "name: top-burn\ncontainers: [{name: c, command: [/bin/sh, -c, 'while :; do :; done']}]\n"
		   "---\nname: top-idle\ncontainers: [{name: c, command: [/bin/sleep, '1068']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/t.yaml --wait --timeout 30s", d->dir), 0,
		     "%s", out);
	sleep_ms(1500);
	cr_assert_eq(ctl(d, out, sizeof out, "top"), 0, "%s", out);
	cr_assert(!strncmp(out, "POD", 3) && strstr(out, "top-burn") && strstr(out, "top-idle"),
		  "%s", out);
	/* --no-headers: the rows only, as ps (kubectl top's). */
	cr_assert_eq(ctl(d, out, sizeof out, "top --no-headers"), 0, "%s", out);
	cr_assert(!strncmp(out, "top-burn ", 9) && strstr(out, "\ntop-idle ") && !strstr(out, "POD"),
		  "top --no-headers: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "top top-idle --no-headers"), 0, "%s", out);
	cr_assert(!strncmp(out, "top-idle ", 9) && !strchr(out, '\n')[1], "%s", out);
	/* A `top` of every pod is read by an actor of its own over turns of
	 * the loop and answered from there (pod_top_later): tops asked at
	 * once, during a walk, all get a whole answer, and a ping between
	 * them its own; a client gone before its answer costs nothing. */
	static const char req[] = "\x94\x00\x01\xa3top\x90" "\x94\x00\x03\xa3top\x90"
				  "\x94\x00\x02\xa4ping\x90" "\x94\x00\x04\xa3top\x90"
				  "\x94\x00\x05\xa3top\x90";
	uint32_t ids[5], seen = 0;
	bool named[5];
	pipelined(d, req, sizeof req - 1, 5, ids, named, "top-burn", NULL, NULL);
	for (int i = 0; i < 5; i++) {
		cr_assert(ids[i] >= 1 && ids[i] <= 5 && !(seen & (1u << ids[i])), "msgid %u", ids[i]);
		seen |= 1u << ids[i];
		cr_assert(ids[i] == 2 || named[i], "top %u's answer has the pods", ids[i]);
	}
	/* 80 at once: the walk under way answers the first, the next walk
	 * 64 more; 15 are refused at once (each answer is the whole table,
	 * copied into the connection's output whether it reads or not). */
	static char many[80 * 8];
	static uint32_t mids[80];
	static bool mnamed[80];
	int refused = 0, whole = 0;
	size_t ml = 0;
	for (int i = 0; i < 80; i++) {   /* [0, 10 + i, "top", []] */
		memcpy(many + ml, "\x94\x00?\xa3top\x90", 8);
		many[ml + 2] = (char)(10 + i);
		ml += 8;
	}
	pipelined(d, many, ml, 80, mids, mnamed, "top-burn", &refused, "wait already");
	for (int i = 0; i < 80; i++)
		whole += mnamed[i];
	cr_assert_eq(refused, 15, "%d refused", refused);
	cr_assert_eq(whole, 65, "%d whole answers", whole);
	for (int i = 0; i < 20; i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d->sock);
		cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0, "%s", strerror(errno));
		cr_assert_eq(write(fd, req, 9), 9);
		close(fd);
	}
	cr_assert_eq(ctl(d, out, sizeof out, "top"), 0, "%s", out);
	cr_assert(strstr(out, "top-burn") && strstr(out, "top-idle"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "top top-burn -o json"), 0, "%s", out);
	char *p = strstr(out, "\"cpu_percent\": ");
	cr_assert(p, "%s", out);
	double burn = strtod(p + 15, NULL);
	cr_assert_gt(burn, 20.0, "a busy loop uses a CPU: %s", out);
	p = strstr(out, "\"memory\": ");
	cr_assert(p && strtoull(p + 10, NULL, 10) > 0, "%s", out);
	cr_assert(!strstr(out, "top-idle"), "only the pod named: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "top top-idle -o json"), 0, "%s", out);
	p = strstr(out, "\"cpu_percent\": ");
	cr_assert(p && strtod(p + 15, NULL) < 5.0, "a sleeper uses almost nothing: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "top nope"), 1, "%s", out);
	cr_assert(strstr(out, "pod \"nope\" not found"), "%s", out);
	/* A pod with nothing running says why (it printed a bare header). */
	cr_assert_eq(ctl(d, out, sizeof out, "stop top-idle --wait --timeout 20s"), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "top top-idle"), 1, "%s", out);
	cr_assert(strstr(out, "pod \"top-idle\" has no running container (it is stopped"),
		  "%s", out);
	teardown(d);
}

/* `daemon status` says the uptime as people read it, as systemctl does
 * (how long, since when); it printed the raw duration ("1342497ms"). */
Test(e2e, daemon_status_uptime_reads_as_an_age_and_a_time)
{
	d_t *d = setup();
	char out[4096];

	cr_assert_eq(ctl(d, out, sizeof out, "daemon status"), 0, "%s", out);
	const char *u = strstr(out, "uptime     ");
	cr_assert(u, "%s", out);
	unsigned n;
	char unit, y[5];
	cr_assert_eq(sscanf(u, "uptime     %u%c (since %4[0-9]-", &n, &unit, y), 3,
		     "uptime is not 'AGE (since TIME)':\n%s", out);
	cr_assert(unit == 's' && n < 60 && !strncmp(y, "20", 2), "%s", out);
	cr_assert_null(strstr(u, "ms"), "%s", out);
	teardown(d);
}

/* A name that names no pod is `pod "x" not found` by every verb of a
 * pod, whichever kind serves the verb (top and exec said `no pod "x"`,
 * jobs and workflow status "has no workflow"); "has no workflow" is said
 * only of a pod that exists, and without the hint that the pod is of
 * another kind than the verb's (jobs takes a pod). */
Test(e2e, a_missing_pod_is_not_found_by_every_verb)
{
	d_t *d = setup();
	char out[4096];

	write_file(d, "mp.yaml", "name: mp-web\ncontainers: [{name: c, command: [/bin/sleep, '1077']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/mp.yaml", d->dir), 0, "%s", out);
	static const char *const verbs[] = {
		"top", "exec nosuch -- /bin/true", "jobs", "workflow status", "workflow retry",
		"restart", "get", "status", "logs", "describe", "history", "stop",
	};
	for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
		const char *v = verbs[i];
		if (strchr(v, ' ') && strstr(v, "nosuch"))
			cr_assert_eq(ctl(d, out, sizeof out, "%s", v), 1, "%s: %s", v, out);
		else
			cr_assert_eq(ctl(d, out, sizeof out, "%s nosuch", v), 1, "%s: %s", v, out);
		cr_assert(strstr(out, "pod \"nosuch\" not found"), "%s: %s", v, out);
		cr_assert(!strstr(out, "no pod") && !strstr(out, "has no workflow"), "%s: %s", v, out);
	}
	cr_assert_eq(ctl(d, out, sizeof out, "jobs mp-web"), 1, "%s", out);
	cr_assert(strstr(out, "pod \"mp-web\" has no workflow"), "%s", out);
	cr_assert(!strstr(out, "acts on"), "a pod is what jobs takes: %s", out);
	teardown(d);
}

/* kubectl's KIND/NAME names an object on every verb that takes a name,
 * not only on describe, stop, start and events: get, status, history,
 * delete, logs, restart, top, up, down, jobs.  A KIND the verb does not
 * act on is bad usage naming it; the help keeps KIND/NAME a form. */
Test(e2e, kind_slash_name_names_an_object_on_every_verb)
{
	d_t *d = setup();
	char out[16384];

	write_file(d, "k.yaml",
		   "name: ks-web\ncontainers: [{name: c, command: [/bin/sh, -c, 'echo hi; exec sleep 1071']}]\n"
		   "---\nkind: Stack\nname: ks-st\n"
		   "pods: [{name: ks-in, containers: [{name: c, command: [/bin/sleep, '1072']}]}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/k.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "ks-web", "running", 20));
	cr_assert(wait_says(d, 20, "hi", "logs ks-web"));

	/* Each verb, its exit status, and what it prints: all of it
	 * (whole) or a part of it (in). */
	static const struct { const char *args; int rc; const char *whole, *in; } c_[] = {
		{ "get pod/ks-web -o name", 0, "pod/ks-web\n", NULL },
		{ "get po/ks-web", 0, NULL, "name: ks-web" },
		{ "get st/ks-st -o name", 0, "stack/ks-st\n", NULL },
		{ "status pod/ks-web", 0, NULL, "name: ks-web" },
		{ "status stack/ks-st", 0, NULL, "kind: stack" },
		{ "history stack/ks-st", 0, NULL, "stack/ks-st" },
		{ "logs pod/ks-web", 0, "hi\n", NULL },
		{ "top pod/ks-web --no-headers", 0, NULL, "ks-web" },
		{ "down stack/ks-st", 0, NULL, "stack/ks-st configured" },
		{ "up st/ks-st", 0, NULL, "stack/ks-st configured" },
		{ "restart pod/ks-web", 0, NULL, "ks-web restarted" },
		/* Another kind, an unknown one, or no name: bad usage, named. */
		{ "up pod/ks-web", 2, NULL, "tankctl: up: 'pod/ks-web' is not a stack: up acts on stacks" },
		{ "logs stack/ks-st", 2, NULL, "'stack/ks-st' is not a pod" },
		{ "get nokind/x", 2, NULL, "unknown kind 'nokind'" },
		{ "status pod/", 2, NULL, NULL },
		{ "delete pod/ks-web stack/ks-st", 2, NULL, "names of one kind at a time" },
		{ "get ks-web", 0, NULL, NULL },        /* nothing deleted */
		{ "delete pod/nosuch", 1, NULL, "pod \"nosuch\" not found" },
	};
	for (size_t i = 0; i < sizeof c_ / sizeof c_[0]; i++) {
		cr_assert_eq(ctl(d, out, sizeof out, "%s", c_[i].args), c_[i].rc, "%s: %s",
			     c_[i].args, out);
		if (c_[i].whole)
			cr_assert_str_eq(out, c_[i].whole, "%s", c_[i].args);
		if (c_[i].in)
			cr_assert(strstr(out, c_[i].in), "%s: %s", c_[i].args, out);
	}

	/* The help keeps KIND/NAME a form, not the last kind's name. */
	cr_assert_eq(ctl(d, out, sizeof out, "describe --help"), 0, "%s", out);
	cr_assert(strstr(out, "| KIND/NAME") && !strstr(out, "job/NAME"), "%s", out);

	cr_assert_eq(ctl(d, out, sizeof out, "delete stack/ks-st"), 0, "%s", out);
	cr_assert(strstr(out, "stack/ks-st deleted"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get ks-in"), 1, "it went with its stack: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete po/ks-web"), 0, "%s", out);
	cr_assert(strstr(out, "ks-web deleted"), "%s", out);
	teardown(d);
}
