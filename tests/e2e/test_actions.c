/*
 * End to end, actions and playbooks (issue 33, docs/actions.md): a real
 * tankd, real pods, the real tankctl; each state path, the conflict rule,
 * four-eyes approval by two real uids, FIFO one at a time, cancel of a
 * running exec, exec inside a pod's own pid and mount namespaces, a
 * rolling playbook, LOST after kill -9, and bad input named.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>

#include "action/action_phase.h"
#include "action/playbook_mgr.h"
#include "pod/pod_req.h"
#include "api/api_client.h"
#include "store/st_coll.h"
#include "tests/e2e/e2e.h"

/* A pod that sleeps, with a custom action `backup` needing another
 * user's approval and `fail` that exits 2. */
static void pod(d_t *d, const char *name)
{
	char yaml[1024], out[4096];

	snprintf(yaml, sizeof yaml,
		 "name: %s\nstop: {grace: 1s}\ncontainers:\n  - name: main\n"
		 "    command: [/bin/sleep, \"3600\"]\n"
		 "actions:\n"
		 "  backup: {command: [/bin/sh, -c, \"echo backup of $0 $1\"], approval: other}\n"
		 "  fail: {command: [/bin/sh, -c, \"exit 2\"]}\n", name);
	char file[96];
	snprintf(file, sizeof file, "%s.yaml", name);
	write_file(d, file, yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/%s", d->dir, file), 0, "%s", out);
	cr_assert(wait_phase(d, name, "running", 20), "%s is not running", name);
}

/* `action run ARGS`: its id (from "action ID STATE"). */
static void run(d_t *d, char *id, const char *args)
{
	char out[4096];
	int rc = ctl(d, out, sizeof out, "action run %s", args);
	cr_assert_eq(rc, 0, "action run %s: %s", args, out);
	cr_assert_eq(sscanf(out, "action %48s", id), 1, "%s", out);
}

static bool wait_state(d_t *d, const char *id, const char *state, int secs)
{
	char pat[64];
	snprintf(pat, sizeof pat, "state: %s\n", state);
	return wait_says(d, secs, pat, "action get %s", id);
}

static void assert_state(d_t *d, const char *id, const char *state, int secs)
{
	char out[8192];
	bool ok = wait_state(d, id, state, secs);
	if (!ok)
		ctl(d, out, sizeof out, "action get %s", id);
	cr_assert(ok, "action %s is not %s:\n%s", id, state, ok ? "" : out);
}

Test(actions, every_state_path_with_history)
{
	d_t *d = setup();
	char ok[64], bad[64], held[64], gone[64], queued[64], runner[64], out[8192];

	pod(d, "web");
	/* PENDING_SCHEDULE → NEW → RUNNING → DONE */
	run(d, ok, "web exec -- /bin/sh -c 'echo hello'");
	assert_state(d, ok, "DONE", 20);
	cr_assert_eq(ctl(d, out, sizeof out, "history action %s", ok), 0, "%s", out);
	const char *seq[] = { "PENDING_SCHEDULE", "NEW", "RUNNING", "DONE" };
	const char *at = out;
	for (int i = 0; i < 4; i++) {
		at = strstr(at, seq[i]);
		cr_assert_not_null(at, "history lacks %s in order:\n%s", seq[i], out);
	}
	cr_assert(says(d, "hello", "exec web -- /bin/echo hello"));
	/* → FAILED with the exit code */
	run(d, bad, "web exec -- /bin/sh -c 'exit 3'");
	assert_state(d, bad, "FAILED", 20);
	cr_assert(says(d, "exit: 3", "action get %s", bad));
	run(d, bad, "web fail");
	assert_state(d, bad, "FAILED", 20);
	cr_assert(says(d, "exit: 2", "action get %s", bad));
	/* PENDING_APPROVE → approve → DONE; and → CANCELLED */
	run(d, held, "web restart --approve-first");
	sleep_ms(500);
	assert_state(d, held, "PENDING_APPROVE", 1);
	cr_assert_eq(ctl(d, out, sizeof out, "action approve %s", held), 0, "%s", out);
	assert_state(d, held, "DONE", 20);
	cr_assert(says(d, "approved by", "history action %s", held));
	cr_assert(wait_phase(d, "web", "running", 20));
	run(d, gone, "web signal HUP --approve-first");
	cr_assert_eq(ctl(d, out, sizeof out, "action cancel %s", gone), 0, "%s", out);
	assert_state(d, gone, "CANCELLED", 10);
	cr_assert_neq(ctl(d, out, sizeof out, "action approve %s", gone), 0);
	cr_assert(strstr(out, "CANCELLED"), "%s", out);
	/* NEW (behind a running one) → CANCELLED; RUNNING → CANCELLED */
	run(d, runner, "web exec -- /bin/sleep 30");
	assert_state(d, runner, "RUNNING", 10);
	run(d, queued, "web signal USR1");
	assert_state(d, queued, "NEW", 5);
	cr_assert_eq(ctl(d, out, sizeof out, "action cancel %s", queued), 0, "%s", out);
	assert_state(d, queued, "CANCELLED", 10);
	cr_assert_eq(ctl(d, out, sizeof out, "action cancel %s", runner), 0, "%s", out);
	assert_state(d, runner, "CANCELLED", 10);
	/* Events carry the transitions, `action ls` filters. */
	cr_assert(says(d, runner, "action ls --state CANCELLED"));
	cr_assert(!says(d, ok, "action ls --state CANCELLED"));
	cr_assert(says(d, "\"state\": \"DONE\"", "action ls --pod web -o json"));
	teardown(d);
}

/* An exec's output on a full disk (a 64 KiB tmpfs as <data dir>/logs/
 * actions): the output is cut where the disk filled, and that is said —
 * `output.cut` in the record, the reason naming why, and `tankctl exec`
 * on stderr.  Before, the bytes were dropped without a word: `cut: false`,
 * reason "exited 0", and `tankctl exec web -- echo hello` printed nothing
 * and exited 0.  The command itself is not disturbed. */
Test(actions, output_cut_by_a_full_disk_is_said)
{
	d_t *d = d_new();
	char dir[128], cmd[256], out[8192], id[64];

	snprintf(dir, sizeof dir, "%s/logs", d->dir);
	mkdir(dir, 0750);
	snprintf(dir, sizeof dir, "%s/logs/actions", d->dir);
	mkdir(dir, 0750);
	snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=64k tmpfs %s 2>/dev/null", dir);
	if (system(cmd) != 0) {
		teardown(d);
		cr_skip_test("cannot mount a tmpfs here (needs root): a full disk is not tested");
	}
	start(d);
	pod(d, "web");
	run(d, id, "web exec -- /bin/sh -c 'head -c 200000 /dev/zero | tr \"\\0\" a; echo end'");
	assert_state(d, id, "DONE", 30);
	cr_assert_eq(ctl(d, out, sizeof out, "action get %s", id), 0, "%s", out);
	cr_assert(strstr(out, "cut: true"), "the record says the output was cut:\n%s", out);
	cr_assert(strstr(out, "reason: exited 0; output cut (No space left on device)"),
		  "the reason says why:\n%s", out);
	/* The disk is full now: nothing of this one's output is kept. */
	int rc = ctl(d, out, sizeof out, "exec web -- /bin/echo hello");
	cr_assert_eq(rc, 0, "the command's own status: %s", out);
	cr_assert(strstr(out, "tankctl: exec: action ") &&
		  strstr(out, "output cut (No space left on device)"),
		  "tankctl exec says its output was lost:\n%s", out);
	stop(d, SIGTERM);
	snprintf(cmd, sizeof cmd, "umount -l %s", dir);
	cr_assert_eq(system(cmd), 0);
	teardown(d);
}

Test(actions, cancel_stops_a_running_exec)
{
	d_t *d = setup();
	char id[64], out[8192];
	long pid = -1;

	pod(d, "web");
	run(d, id, "web exec -- /bin/sleep 424242");
	assert_state(d, id, "RUNNING", 10);
	for (int i = 0; i < 100 && pid <= 0; i++) {
		ctl(d, out, sizeof out, "action get %s", id);
		const char *p = strstr(out, "\npid: ");
		if (p)
			pid = atol(p + 6);
		if (pid <= 0)
			sleep_ms(50);
	}
	cr_assert_gt(pid, 0, "no pid:\n%s", out);
	cr_assert_eq(kill((pid_t)pid, 0), 0, "the exec is not running");
	cr_assert_eq(ctl(d, out, sizeof out, "action cancel %s", id), 0, "%s", out);
	assert_state(d, id, "CANCELLED", 10);
	/* CANCELLED is written once the process has stopped. */
	char path[64], st[256] = "";
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	read_text(path, st, sizeof st);
	cr_assert(st[0] == '\0' || strstr(st, ") Z"), "pid %ld lives on: %s", pid, st);
	cr_assert(says(d, "cancelled by", "history action %s", id));
	teardown(d);
}

Test(actions, same_id_same_content_is_one_record_other_content_conflicts)
{
	d_t *d = setup();
	char a[64], b[64], out[4096];

	pod(d, "web");
	run(d, a, "web signal HUP --id op-1");
	cr_assert_str_eq(a, "op-1");
	run(d, b, "web signal HUP --id op-1");
	cr_assert_str_eq(b, "op-1");
	cr_assert_eq(ctl(d, out, sizeof out, "action ls -o json"), 0);
	const char *first = strstr(out, "\"id\": \"op-1\"");
	cr_assert(first && !strstr(first + 4, "\"id\": \"op-1\""), "one record: %s", out);
	cr_assert_neq(ctl(d, out, sizeof out, "action run web signal TERM --id op-1"), 0);
	cr_assert(strstr(out, "conflict"), "%s", out);
	cr_assert(strstr(out, "stored record wins"), "%s", out);
	assert_state(d, "op-1", "DONE", 10);
	cr_assert(says(d, "signal: HUP", "action get op-1"));
	teardown(d);
}

/* action_submit [{id: toolong, pod: web, kind: KIND, args: {KEY: WORDS}}]
 * over the socket as it is: a word may hold a NUL, the words be longer
 * than a tankctl line of the tests. */
typedef struct {
	const char *kind, *key;
	const char *w[2];
	size_t len[2];
	uint32_t n;
} submit_t;

static int pack_submit(msgpack_packer *pk, void *arg)
{
	const submit_t *x = arg;
	int rc = msgpack_pack_array(pk, 1) | msgpack_pack_map(pk, 4);
	rc |= api_pack_cstr(pk, "id") | api_pack_cstr(pk, "toolong");
	rc |= api_pack_cstr(pk, "pod") | api_pack_cstr(pk, "web");
	rc |= api_pack_cstr(pk, "kind") | api_pack_cstr(pk, x->kind);
	rc |= api_pack_cstr(pk, "args") | msgpack_pack_map(pk, 1);
	rc |= api_pack_cstr(pk, x->key) | msgpack_pack_array(pk, x->n);
	for (uint32_t i = 0; i < x->n; i++)
		rc |= msgpack_pack_str(pk, x->len[i]) | msgpack_pack_str_body(pk, x->w[i], x->len[i]);
	return rc ? -ENOMEM : 0;
}

/* Submits x; the error's message into msg ("" when accepted). */
static void submit_raw(d_t *d, const submit_t *x, char *msg, size_t cap)
{
	api_client_t *cl;
	api_incoming_t in;
	tank_error_t e;

	cr_assert_eq(api_client_connect(d->sock, &cl, &e), 0, "%s", e.msg);
	cr_assert_eq(api_client_call(cl, "action_submit", pack_submit, (void *)x, 10000, &in, &e),
		     0, "%s", e.msg);
	snprintf(msg, cap, "%s", in.code ? in.message : "");
	api_incoming_free(&in);
	api_client_close(cl);
}

Test(actions, bad_input_is_named)
{
	d_t *d = setup();
	char out[4096];

	pod(d, "web");
	struct { const char *args, *says; } c[] = {
		{ "web frobnicate", "kind \"frobnicate\": not an action kind of pod web" },
		{ "nopod restart", "pod \"nopod\" not found" },
		{ "web signal banana", "args.signal: unknown signal \"banana\"" },
		{ "web signal", "args.signal: required" },
		{ "web restart count=3", "unknown field \"count\" for restart" },
		{ "web exec timeout=soon -- /bin/true", "args.timeout: expected a duration" },
		{ "web exec", "args.command: required" },
		{ "web restart container=nope", "pod web has no container \"nope\"" },
		{ "web restart --id 'bad id'", "id: \"bad id\" must match" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		cr_assert_neq(ctl(d, out, sizeof out, "action run %s", c[i].args), 0, "%s",
			      c[i].args);
		cr_assert(strstr(out, c[i].says), "%s: %s", c[i].args, out);
	}
	/* A custom kind another pod declares is not this pod's. */
	write_file(d, "plain.yaml", "name: plain\ncontainers:\n  - name: m\n"
		   "    command: [/bin/sleep, \"3600\"]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/plain.yaml", d->dir), 0, "%s", out);
	cr_assert_neq(ctl(d, out, sizeof out, "action run plain backup"), 0);
	cr_assert(strstr(out, "it declares: none"), "%s", out);
	/* The pod's declaration is validated at apply. */
	write_file(d, "badact.yaml", "name: badact\ncontainers:\n  - name: m\n"
		   "    command: [/bin/sleep, \"3600\"]\n"
		   "actions:\n  restart: {command: [/bin/true]}\n"
		   "  x: {command: [/bin/true], approval: maybe}\n");
	cr_assert_neq(ctl(d, out, sizeof out, "apply -f %s/badact.yaml", d->dir), 0);
	cr_assert(strstr(out, "built-in action kind"), "%s", out);
	cr_assert(strstr(out, "must be one of none, required, other"), "%s", out);
	/* What an exec or a custom action would run is checked at submit:
	 * before, an empty program or a command past the pods' request
	 * bound (1,024 bytes) was accepted and FAILED at its turn, "the
	 * command does not fit a request", and a word with a NUL inside
	 * ran only what came before the NUL. */
	char big[1200], args[1400], msg[512];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	submit_t x[] = {
		{ "exec", "command", { "/bin/echo", big }, { 9, sizeof big - 1 }, 2 },
		{ "backup", "args", { big }, { sizeof big - 1 }, 1 },
		{ "exec", "command", { "" }, { 0 }, 1 },
		{ "exec", "command", { "/bin/echo", "a\0b" }, { 9, 3 }, 2 },
	};
	const char *want[] = {
		"args.command: the command is 1210 bytes, at most 1024",
		"args.args: the declared command with these args is 1232 bytes, at most 1024",
		"args.command[0]: must not be empty",
		"args.command[1]: contains a NUL byte",
	};
	for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) {
		submit_raw(d, &x[i], msg, sizeof msg);
		cr_assert(strstr(msg, want[i]), "case %zu: %s", i, msg[0] ? msg : "accepted");
	}
	cr_assert_neq(ctl(d, out, sizeof out, "action get toolong"), 0, "a refused one was kept");
	cr_assert(strstr(out, "action \"toolong\" not found"), "%s", out);
	/* A declaration that could never run is refused at apply. */
	snprintf(args, sizeof args, "name: longdecl\ncontainers:\n  - name: m\n"
		 "    command: [/bin/sleep, \"3600\"]\nactions:\n  x: {command: [/bin/echo, %s]}\n",
		 big);
	write_file(d, "longdecl.yaml", args);
	cr_assert_neq(ctl(d, out, sizeof out, "apply -f %s/longdecl.yaml", d->dir), 0);
	cr_assert(strstr(out, "actions.x.command: 1210 bytes, at most 1024"), "%s", out);
	/* Actions are submitted, not applied. */
	write_file(d, "act.yaml", "kind: Action\nname: x\n");
	cr_assert_neq(ctl(d, out, sizeof out, "apply -f %s/act.yaml", d->dir), 0);
	cr_assert(strstr(out, "submitted, not applied"), "%s", out);
	teardown(d);
}

/* Runs tankctl as uid/gid (a forked child drops root); its output in out. */
static int ctl_as(d_t *d, uid_t uid, gid_t gid, char *out, size_t cap, const char *verb,
		  const char *id)
{
	int p[2];
	char bin[160];

	snprintf(bin, sizeof bin, "%s/tankctl", d->dir);
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
			_exit(99);
		execl(bin, "tankctl", "--socket", d->sock, "action", verb, id, (char *)NULL);
		_exit(98);
	}
	close(p[1]);
	size_t got = 0;
	ssize_t n;
	while ((n = read(p[0], out + got, cap - 1 - got)) > 0 && got + (size_t)n < cap - 1)
		got += (size_t)n;     /* to the end: a child cut off would die of SIGPIPE */
	if (n > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(actions, four_eyes_needs_another_uid)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to act as a second user");
	const uid_t other = 65534;
	const gid_t group = 65534;
	d_t *d = d_new();
	char out[4096], id[64], src[700], dst[160], grp[16];

	/* The socket's group lets the second uid call (tankd's peer check:
	 * root, tankd's uid, or the socket group); it reaches the socket
	 * through the data dir (0711) and runs its own copy of tankctl. */
	snprintf(grp, sizeof grp, "%u", (unsigned)group);
	d->group = grp;
	start(d);
	cr_assert_eq(chmod(d->dir, 0711), 0);
	/* …and through the directories above it (the test run's own: search
	 * permission only). */
	char up[64];
	snprintf(up, sizeof up, "%s", d->dir);
	for (char *sl = strrchr(up, '/'); sl && sl != up; sl = strrchr(up, '/')) {
		struct stat sb;
		*sl = '\0';
		if (stat(up, &sb) == 0 && !(sb.st_mode & S_IXOTH))
			cr_assert_eq(chmod(up, (sb.st_mode & 07777) | 0011), 0, "%s", up);
	}
	snprintf(src, sizeof src, "%s/tankctl", bindir());
	snprintf(dst, sizeof dst, "%s/tankctl", d->dir);
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "cp %s %s && chmod 0755 %s", src, dst, dst);
	cr_assert_eq(system(cmd), 0);
	pod(d, "db");

	run(d, id, "db backup tonight");
	sleep_ms(500);
	assert_state(d, id, "PENDING_APPROVE", 1);
	/* The requester (root, uid 0) may not approve its own. */
	cr_assert_neq(ctl(d, out, sizeof out, "action approve %s", id), 0);
	cr_assert(strstr(out, "four-eyes"), "%s", out);
	assert_state(d, id, "PENDING_APPROVE", 1);
	/* A uid outside the socket's group is refused: the socket file is
	 * 0660 (and tankd's peer check would refuse it too). */
	int rc = ctl_as(d, other, 12345, out, sizeof out, "approve", id);
	cr_assert(rc == 1 && (strstr(out, "Permission denied") ||
			      strstr(out, "may not use this socket")), "%d: %s", rc, out);
	/* Another uid in the group approves: it runs. */
	cr_assert_eq(ctl_as(d, other, group, out, sizeof out, "approve", id), 0, "%s", out);
	assert_state(d, id, "DONE", 20);
	cr_assert(says(d, "uid: 65534", "action get %s", id), "approver recorded");
	cr_assert(says(d, "uid: 0", "action get %s", id), "requester recorded");
	/* Its output is kept with the record: the command and its args. */
	cr_assert(says(d, "backup of tonight", "exec db -- /bin/cat %s/logs/actions/%s.out",
		       d->dir, id) ||
		  says(d, "bytes: ", "action get %s", id));
	teardown(d);
}

/* An approver sees what they approve: a custom action's record shows its
 * resolved run (the declared command, then the words given), not only
 * `args: {}` (its args are folded into the run at submit). */
Test(actions, a_pending_custom_action_shows_what_will_run)
{
	d_t *d = setup();
	char out[8192], id[64];

	pod(d, "db");
	run(d, id, "db backup tonight");
	assert_state(d, id, "PENDING_APPROVE", 5);
	cr_assert_eq(ctl(d, out, sizeof out, "action get %s -o json", id), 0, "%s", out);
	const char *run = strstr(out, "\"run\"");
	cr_assert(run, "no run in the record:\n%s", out);
	cr_assert(strstr(run, "\"/bin/sh\"") && strstr(run, "\"echo backup of $0 $1\"") &&
		  strstr(run, "\"tonight\""), "the run is not the declared command + tonight:\n%s",
		  out);
	cr_assert_eq(ctl(d, out, sizeof out, "action cancel %s", id), 0, "%s", out);
	teardown(d);
}

Test(actions, one_at_a_time_per_pod_in_submit_order)
{
	d_t *d = setup();
	char ids[6][64], out[8192], args[512], path[128], text[4096];

	pod(d, "web");
	snprintf(path, sizeof path, "%s/runs.txt", d->dir);
	for (int i = 0; i < 6; i++) {
		snprintf(args, sizeof args,
			 "web exec -- /bin/sh -c 'echo S%d >> %s; sleep 0.2; echo E%d >> %s'",
			 i, path, i, path);
		run(d, ids[i], args);
	}
	for (int i = 0; i < 6; i++)
		assert_state(d, ids[i], "DONE", 30);
	read_text(path, text, sizeof text);
	/* Each run ends before the next starts, in the order submitted. */
	char want[256] = "";
	for (int i = 0; i < 6; i++)
		snprintf(want + strlen(want), sizeof want - strlen(want), "S%d\nE%d\n", i, i);
	cr_assert_str_eq(text, want);
	/* The records' times say the same: started_at >= the previous ended_at. */
	cr_assert_eq(ctl(d, out, sizeof out, "action ls --pod web -o json"), 0);
	teardown(d);
}

static bool namespaces_work(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0)
		_exit(unshare(CLONE_NEWPID | CLONE_NEWNS) == 0 ? 0 : 1);
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

Test(actions, exec_runs_in_the_pods_namespaces_and_rootfs)
{
	if (!namespaces_work())
		cr_skip_test("pid/mount namespaces are not available here");
	d_t *d = setup();
	char cmd[1200], yaml[1024], out[8192], host_ns[128] = "", link[96];

	snprintf(cmd, sizeof cmd,
		 "mkdir -p %s/root/bin %s/root/proc %s/root/dev %s/root/tmp && "
		 "cp /bin/busybox %s/root/bin/busybox && ln -s busybox %s/root/bin/sh && "
		 "echo inside-the-rootfs > %s/root/marker",
		 d->dir, d->dir, d->dir, d->dir, d->dir, d->dir, d->dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(yaml, sizeof yaml,
		 "name: iso\nstop: {grace: 1s}\n"
		 "isolation: {namespaces: [pid, mount], rootfs: %s/root}\n"
		 "containers:\n  - name: main\n    command: [/bin/busybox, sleep, \"3600\"]\n",
		 d->dir);
	write_file(d, "iso.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/iso.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "iso", "running", 20));
	long pid = status_num(d, "iso", "pid");
	cr_assert_gt(pid, 0);
	snprintf(link, sizeof link, "/proc/%ld/ns/pid", pid);
	cr_assert_gt(readlink(link, host_ns, sizeof host_ns - 1), 0);
	int rc = ctl(d, out, sizeof out, "exec iso -- /bin/busybox sh -c "
		     "'cat /marker; echo ns=$(readlink /proc/self/ns/pid); "
		     "echo one=$(readlink /proc/1/ns/pid); echo me=$$; exit 7'");
	cr_assert_eq(rc, 7, "exit status passed through: %d\n%s", rc, out);
	cr_assert(strstr(out, "inside-the-rootfs"), "not in the pod's rootfs:\n%s", out);
	char want[160];
	snprintf(want, sizeof want, "ns=%s", host_ns);
	cr_assert(strstr(out, want), "not in the container's pid namespace (%s):\n%s", host_ns,
		  out);
	snprintf(want, sizeof want, "one=%s", host_ns);
	cr_assert(strstr(out, want), "pid 1 is not of the pod's namespace:\n%s", out);
	const char *me = strstr(out, "me=");
	cr_assert(me && atol(me + 3) < 100, "a pid of the pod's namespace is small:\n%s", out);
	teardown(d);
}

Test(actions, running_becomes_lost_after_kill9_and_the_queue_keeps_its_order)
{
	d_t *d = setup();
	char first[64], q[3][64], out[8192], args[512], path[128], text[1024];

	pod(d, "web");
	snprintf(path, sizeof path, "%s/after.txt", d->dir);
	run(d, first, "web exec -- /bin/sleep 300");
	assert_state(d, first, "RUNNING", 10);
	for (int i = 0; i < 3; i++) {
		snprintf(args, sizeof args, "web exec --id q%d -- /bin/sh -c 'echo q%d >> %s'", i, i,
			 path);
		run(d, q[i], args);
	}
	assert_state(d, "q0", "NEW", 5);
	stop(d, SIGKILL);
	start(d);
	assert_state(d, first, "LOST", 20);
	cr_assert(says(d, "could not re-adopt", "action get %s", first), "the reason says why");
	for (int i = 0; i < 3; i++)
		assert_state(d, q[i], "DONE", 30);
	read_text(path, text, sizeof text);
	cr_assert_str_eq(text, "q0\nq1\nq2\n", "never re-run, in order");
	cr_assert(says(d, "LOST", "history action %s", first));
	(void)out;
	teardown(d);
}

Test(actions, a_rolling_playbook_runs_at_most_max_parallel)
{
	d_t *d = setup();
	char out[8192], yaml[2048], path[128], text[8192];

	for (int i = 1; i <= 6; i++) {
		char n[16];
		snprintf(n, sizeof n, "rp-%d", i);
		pod(d, n);
	}
	snprintf(path, sizeof path, "%s/roll.txt", d->dir);
	snprintf(yaml, sizeof yaml,
		 "kind: Playbook\nname: roll\nstages:\n"
		 "  - max_parallel: 2\n    actions:\n"
		 "      - pods: [\"rp-*\"]\n        kind: exec\n"
		 "        args: {command: [/bin/sh, -c, \"echo S >> %s; sleep 0.4; echo E >> %s\"]}\n"
		 "  - actions:\n      - pods: [rp-1]\n        kind: exec\n"
		 "        args: {command: [/bin/sh, -c, \"echo second >> %s\"]}\n",
		 path, path, path);
	write_file(d, "roll.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "playbook apply -f %s/roll.yaml", d->dir), 0, "%s",
		     out);
	cr_assert(wait_says(d, 60, "done", "playbook get roll"), "playbook not done");
	read_text(path, text, sizeof text);
	int running = 0, most = 0, starts = 0;
	const char *p = text;
	for (; *p; p++) {
		if (p[0] == 'S' && (p == text || p[-1] == '\n')) {
			starts++;
			if (++running > most)
				most = running;
		} else if (p[0] == 'E' && (p == text || p[-1] == '\n')) {
			running--;
		}
	}
	cr_assert_eq(starts, 6, "every pod's action ran:\n%s", text);
	cr_assert_eq(most, 2, "at most 2 at once, and 2 did run together:\n%s", text);
	cr_assert(strstr(text, "second\n") && strstr(text, "second\n")[7] == '\0',
		  "stage 2 after all of stage 1:\n%s", text);
	cr_assert(says(d, "roll", "playbook ls"));
	/* A two-word verb's errors name both words. */
	cr_assert_neq(ctl(d, out, sizeof out, "playbook get nosuch"), 0);
	cr_assert(strstr(out, "tankctl: playbook get: "), "%s", out);

	/* A failure fails the playbook; the later stage never starts. */
	write_file(d, "bad.yaml",
		   "kind: Playbook\nname: bad\nstages:\n"
		   "  - actions: [{pods: [rp-2], kind: fail}]\n"
		   "  - actions: [{pods: [rp-3], kind: signal, args: {signal: USR2}}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/bad.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 30, "phase: failed", "get playbook bad"), "not failed");
	cr_assert(says(d, "stage 1", "get playbook bad"));
	cr_assert(!says(d, "USR2", "action ls --pod rp-3 -o yaml"), "stage 2 started");
	teardown(d);
}

Test(actions, finished_actions_are_kept_per_pod_up_to_the_bound)
{
	d_t *d = d_new();
	char ids[5][64], args[64], out[16384];

	setenv("TANK_ACTIONS_KEEP", "3", 1);    /* tankd's environment (this test's process) */
	start(d);
	unsetenv("TANK_ACTIONS_KEEP");
	pod(d, "web");
	for (int i = 0; i < 5; i++) {
		snprintf(args, sizeof args, "web exec --id k%d -- /bin/true", i);
		run(d, ids[i], args);
		assert_state(d, ids[i], "DONE", 10);
	}
	/* The oldest two are purged, record and history. */
	cr_assert_neq(ctl(d, out, sizeof out, "action get k0"), 0);
	cr_assert(strstr(out, "action \"k0\" not found"), "%s", out);
	cr_assert_neq(ctl(d, out, sizeof out, "action get k1"), 0);
	for (int i = 2; i < 5; i++)
		assert_state(d, ids[i], "DONE", 1);
	cr_assert_eq(ctl(d, out, sizeof out, "action ls --pod web"), 0);
	int rows = 0;
	for (const char *p = out; (p = strchr(p, '\n')); p++)
		rows++;
	cr_assert_eq(rows, 4, "a header and 3 rows:\n%s", out);
	teardown(d);
}

Test(actions, declaring_actions_restarts_nothing)
{
	d_t *d = setup();
	char out[4096], id[64];

	write_file(d, "a.yaml", "name: web\ncontainers:\n  - name: main\n"
		   "    command: [/bin/sleep, \"3600\"]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_phase(d, "web", "running", 20));
	long pid = status_num(d, "web", "pid");
	cr_assert_neq(ctl(d, out, sizeof out, "action run web hello"), 0);
	write_file(d, "a.yaml", "name: web\ncontainers:\n  - name: main\n"
		   "    command: [/bin/sleep, \"3600\"]\n"
		   "actions:\n  hello: {command: [/bin/echo, hello]}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a.yaml", d->dir), 0, "%s", out);
	cr_assert(strstr(out, "configured"), "%s", out);
	run(d, id, "web hello");
	assert_state(d, id, "DONE", 20);
	cr_assert_eq(status_num(d, "web", "pid"), pid, "the container was restarted");
	cr_assert(says(d, "actions:", "get web"), "get shows the declaration");
	teardown(d);
}

/* Whether web's pod stays out of `running` for ms. */
static bool stays_stopped(d_t *d, int ms)
{
	for (int i = 0; i < ms / 50; i++) {
		if (phase_is(d, "web", "running"))
			return false;
		sleep_ms(50);
	}
	return true;
}

Test(actions, a_stop_holds_across_a_restart_of_tankd_until_a_start)
{
	d_t *d = setup();
	char id[64], out[4096];

	pod(d, "web");
	run(d, id, "web stop");
	assert_state(d, id, "DONE", 10);
	bool off = false;
	for (int i = 0; i < 100 && !off; i++) {
		off = !phase_is(d, "web", "running");
		sleep_ms(50);
	}
	cr_assert(off, "the stop did not stop web");
	cr_assert(stays_stopped(d, 1000), "web ran again while held");
	stop(d, SIGKILL);
	start(d);
	/* The hold is asserted again (at the first pass that finds the pod). */
	off = false;
	for (int i = 0; i < 200 && !off; i++) {
		off = !phase_is(d, "web", "running") && stays_stopped(d, 1500);
		if (!off)
			sleep_ms(50);
	}
	cr_assert(off, "web runs after the restart although a stop action holds it");
	/* A command cannot wait for a start queued behind it: it fails, naming the stop. */
	cr_assert_neq(ctl(d, out, sizeof out, "exec web -- /bin/true"), 0);
	cr_assert(strstr(out, "held stopped by action"), "%s", out);
	run(d, id, "web start");
	assert_state(d, id, "DONE", 10);
	cr_assert(wait_phase(d, "web", "running", 20), "the start did not end the hold");
	(void)out;
	teardown(d);
}

/* `exec` on a pod none of whose containers runs waits in the pod's
 * queue: after a second it says so on stderr, once, with the pod's phase
 * and reason (it waited silently, as on a crash-looping pod), then runs
 * when a container runs.  (The pod waits for a stopped dependency started
 * 1.5 s later: a crash loop has running windows the exec could slip
 * into.) */
Test(actions, an_exec_queued_on_a_pod_that_does_not_run_says_why_it_waits)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "dep.yaml", "name: dep\ncontainers: [{name: c, command: [/bin/sleep, '3601']}]\n");
	write_file(d, "late.yaml", "name: late\ndepends_on: [{pod: dep, condition: started}]\n"
		   "containers: [{name: c, command: [/bin/sleep, '3600']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/dep.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "stop dep --wait --timeout 20s"), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/late.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 10, "waiting for dep", "status late -o json"), "late waits");
	pid_t kid = fork();
	cr_assert_geq(kid, 0);
	if (kid == 0) {
		char o2[4096];
		sleep_ms(1500);
		_exit(ctl(d, o2, sizeof o2, "start dep") == 0 ? 0 : 1);
	}
	int rc = ctl(d, out, sizeof out, "exec late -- /bin/echo ran-at-last");
	int st = 0;
	cr_assert_eq(waitpid(kid, &st, 0), kid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dep not started");
	cr_assert_eq(rc, 0, "%s", out);
	cr_assert(strstr(out, "ran-at-last"), "%s", out);
	char *w = strstr(out, "tankctl: exec: waiting: action ");
	cr_assert(w, "no word of the wait: %s", out);
	cr_assert(strstr(w, "queued on pod late (waiting: waiting for dep (started): it is "
			 "stopped"), "%s", out);
	cr_assert_null(strstr(w + 1, "tankctl: exec: waiting"), "said once: %s", out);
	/* An exec that runs at once says nothing of the kind. */
	cr_assert_eq(ctl(d, out, sizeof out, "exec late -- /bin/sh -c 'sleep 1.5; echo slow'"), 0,
		     "%s", out);
	cr_assert_str_eq(out, "slow\n");
	teardown(d);
}

/* [{id, pod: web, kind: exec, approve_first?, args: {command: [/bin/sh,
 * -c, SCRIPT]}}] */
typedef struct {
	const char *id, *script;
	bool approve_first;
} pipe_submit_t;

static int pack_pipe_submit(msgpack_packer *pk, void *arg)
{
	const pipe_submit_t *x = arg;
	int rc = msgpack_pack_array(pk, 1) | msgpack_pack_map(pk, x->approve_first ? 5 : 4);
	rc |= api_pack_cstr(pk, "id") | api_pack_cstr(pk, x->id);
	rc |= api_pack_cstr(pk, "pod") | api_pack_cstr(pk, "web");
	rc |= api_pack_cstr(pk, "kind") | api_pack_cstr(pk, "exec");
	if (x->approve_first)
		rc |= api_pack_cstr(pk, "approve_first") | msgpack_pack_true(pk);
	rc |= api_pack_cstr(pk, "args") | msgpack_pack_map(pk, 1);
	rc |= api_pack_cstr(pk, "command") | msgpack_pack_array(pk, 3);
	rc |= api_pack_cstr(pk, "/bin/sh") | api_pack_cstr(pk, "-c");
	rc |= api_pack_cstr(pk, x->script);
	return rc ? -ENOMEM : 0;
}

static int pack_id(msgpack_packer *pk, void *arg)
{
	int rc = msgpack_pack_array(pk, 1) | api_pack_cstr(pk, arg);
	return rc ? -ENOMEM : 0;
}

/* action_submit of x and `method` [x->id] in one write, before anything
 * came back; the submit must succeed.  *second: the second's answer
 * (api_incoming_free). */
static void pipe_two(d_t *d, const pipe_submit_t *x, const char *method, api_incoming_t *second)
{
	api_client_t *cl;
	api_incoming_t in;
	tank_error_t e;
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	cr_assert_eq(api_pack_request(&pk, 1, "action_submit", pack_pipe_submit, (void *)x), 0);
	cr_assert_eq(api_pack_request(&pk, 2, method, pack_id, (void *)x->id), 0);
	cr_assert_eq(api_client_connect(d->sock, &cl, &e), 0, "%s", e.msg);
	cr_assert_eq(api_client_send_raw(cl, sb.data, sb.size, 10000, &e), 0, "%s", e.msg);
	msgpack_sbuffer_destroy(&sb);
	cr_assert_eq(api_client_wait(cl, 1, 20000, &in, &e), 0, "%s", e.msg);
	cr_assert_eq(in.code, 0, "submit: %s", in.message);
	api_incoming_free(&in);
	cr_assert_eq(api_client_wait(cl, 2, 20000, second, &e), 0, "%s", e.msg);
	api_client_close(cl);
}

/* A client that sends action_submit and action_cancel of the same id in
 * one write, before it heard anything back, asked for the cancel after
 * the submit: the cancel finds the action.  Before, the cancel was read
 * while the loop had not taken the submit yet (its answer waits for the
 * loop), and it answered not_found while the command ran on to DONE. */
Test(actions, a_cancel_pipelined_after_its_submit_finds_it)
{
	d_t *d = setup();
	char marker[128], script[256];
	api_incoming_t in;

	pod(d, "web");
	snprintf(marker, sizeof marker, "%s/ran", d->dir);
	snprintf(script, sizeof script, "touch %s; exec sleep 424242", marker);
	pipe_submit_t x = { "piped-1", script, false };
	pipe_two(d, &x, "action_cancel", &in);
	cr_assert_eq(in.code, 0, "the cancel found the action: %s", in.message);
	char state[32] = "";
	const msgpack_object *s = NULL;
	for (uint32_t i = 0; in.result->type == MSGPACK_OBJECT_MAP && i < in.result->via.map.size;
	     i++) {
		const msgpack_object_kv *kv = &in.result->via.map.ptr[i];
		if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 5 &&
		    !memcmp(kv->key.via.str.ptr, "state", 5))
			s = &kv->val;
	}
	cr_assert(s && s->type == MSGPACK_OBJECT_STR && s->via.str.size < sizeof state);
	memcpy(state, s->via.str.ptr, s->via.str.size);
	cr_assert(!strcmp(state, "CANCELLED") || !strcmp(state, "cancelling"), "%s", state);
	api_incoming_free(&in);
	assert_state(d, "piped-1", "CANCELLED", 20);
	cr_assert(says(d, "cancelled by", "history action piped-1"));
	/* Its command never ran: the cancel was taken before its turn. */
	cr_assert_neq(access(marker, F_OK), 0, "the command ran");
	const char *argv[] = { "sleep", "424242", NULL };
	cr_assert_eq(wait_procs(argv, 0, 10), 0, "its command lives on");
	teardown(d);
}

/* The same for action_approve: an action submitted with approve_first
 * and approved in the same write is approved and runs.  Before, the
 * approve was read before the loop took the submit and said no action,
 * and the action waited for an approval the client had sent. */
Test(actions, an_approve_pipelined_after_its_submit_finds_it)
{
	d_t *d = setup();
	char marker[128], script[256];
	api_incoming_t in;

	pod(d, "web");
	snprintf(marker, sizeof marker, "%s/ran", d->dir);
	snprintf(script, sizeof script, "touch %s", marker);
	pipe_submit_t x = { "piped-2", script, true };
	pipe_two(d, &x, "action_approve", &in);
	cr_assert_eq(in.code, 0, "the approve found the action: %s", in.message);
	api_incoming_free(&in);
	assert_state(d, "piped-2", "DONE", 20);
	cr_assert(says(d, "approved by", "history action piped-2"));
	cr_assert_eq(access(marker, F_OK), 0, "the command did not run");
	teardown(d);
}

/* Deleting a playbook stops what it started, as deleting a Job deletes
 * its pods or `systemctl stop` stops a unit's processes: its running
 * action is stopped and its queued one never runs; both end CANCELLED,
 * the reason naming the playbook's deletion.  Before, they ran on, owned
 * by nothing. */
Test(actions, deleting_a_playbook_cancels_its_unfinished_actions)
{
	d_t *d = setup();
	char out[8192], yaml[1024], id[2][64] = { "", "" };

	pod(d, "web");
	snprintf(yaml, sizeof yaml,
		 "kind: Playbook\nname: long\nstages:\n"
		 "  - actions:\n"
		 "      - pods: [web]\n        kind: exec\n"
		 "        args: {command: [/bin/sleep, \"434343\"]}\n"
		 "      - pods: [web]\n        kind: signal\n        args: {signal: USR1}\n");
	write_file(d, "long.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/long.yaml", d->dir), 0, "%s", out);
	const char *argv[] = { "/bin/sleep", "434343", NULL };
	cr_assert_eq(wait_procs(argv, 1, 20), 1, "the playbook's exec does not run");
	/* Its two actions: the exec RUNNING, the signal NEW behind it. */
	cr_assert(wait_says(d, 20, "NEW", "action ls --pod web"), "no queued action");
	cr_assert_eq(ctl(d, out, sizeof out, "action ls --pod web"), 0, "%s", out);
	int n = 0;
	for (const char *p = strstr(out, "pb-"); p && n < 2; p = strstr(p + 1, "pb-"))
		cr_assert_eq(sscanf(p, "%48s", id[n++]), 1);
	cr_assert_eq(n, 2, "two actions of the playbook:\n%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete playbook long"), 0, "%s", out);
	for (int i = 0; i < 2; i++) {
		assert_state(d, id[i], "CANCELLED", 20);
		cr_assert(says(d, "deletion of playbook long", "action get %s", id[i]),
			  "the reason names the deletion");
	}
	cr_assert_eq(wait_procs(argv, 0, 20), 0, "the exec lives on");
	cr_assert(!says(d, "DONE", "action ls --pod web"), "something ran to its end");
	teardown(d);
}

/* The same when the playbook was deleted and applied again while tankd
 * was down (here: replaced in its store while tankd is dead, by kill -9,
 * as a delete and an apply would leave it): what the old one started is
 * cancelled, the reason naming the deletion, and the new one runs its
 * own.  Before, the new one's first pass took the name as its own and
 * the old action waited on, owned by nothing.  The action waits for an
 * approval (backup: approval other), so it outlives a tankd without a
 * keeper. */
Test(actions, a_playbook_applied_again_while_tankd_was_down_cancels_the_old_ones)
{
	d_t *d = setup();
	char out[8192], yaml[512], id[64] = "", id2[64] = "";

	pod(d, "web");
	snprintf(yaml, sizeof yaml,
		 "kind: Playbook\nname: long\nstages:\n"
		 "  - actions:\n"
		 "      - pods: [web]\n        kind: backup\n");
	write_file(d, "long.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/long.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 20, "pb-", "action ls --pod web"), "no action of the playbook");
	cr_assert_eq(ctl(d, out, sizeof out, "action ls --pod web"), 0, "%s", out);
	cr_assert_eq(sscanf(strstr(out, "pb-"), "%48s", id), 1);
	assert_state(d, id, "PENDING_APPROVE", 20);
	sleep_ms(300);   /* the group commit reaches the disk */
	stop(d, SIGKILL);

	/* Deleted and stored again under the same name: another uid. */
	st_t *st;
	st_coll_t *c;
	st_pod_t p;
	tank_error_t e;
	st_options_t o = { .history_limit = 50 };
	cr_assert_eq(st_open(d->dir, &o, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &playbook_coll_decl, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_get(c, "long", &p, &e), 0, "%s", e.msg);
	const char *keys[] = { "long" };
	cr_assert_eq(st_coll_delete(c, keys, 1, NULL, &e), 0, "%s", e.msg);
	st_pod_in_t in = { .name = "long", .spec = p.spec, .spec_len = p.spec_len };
	st_apply_result_t r;
	cr_assert_eq(st_coll_put(c, &in, 1, &r, &e), 0, "%s", e.msg);
	cr_assert_str_neq(r.uid, p.uid);
	st_pod_clear(&p);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);

	start(d);
	assert_state(d, id, "CANCELLED", 20);
	cr_assert(says(d, "deletion of playbook long", "action get %s", id),
		  "the reason names the deletion");
	/* The new run's own action, waiting as the first did. */
	bool found = false;
	for (int t = 0; t < 200 && !found; t++) {
		cr_assert_eq(ctl(d, out, sizeof out, "action ls --pod web"), 0, "%s", out);
		for (const char *q = strstr(out, "pb-"); q && !found; q = strstr(q + 1, "pb-"))
			found = sscanf(q, "%48s", id2) == 1 && strcmp(id2, id);
		if (!found)
			sleep_ms(100);
	}
	cr_assert(found, "the new run made no action:\n%s", out);
	assert_state(d, id2, "PENDING_APPROVE", 20);
	teardown(d);
}

/* A command that ends on its own — here it catches the cancel's SIGTERM
 * and exits 0 — ends as it ended: DONE, exit 0, not CANCELLED with
 * exit 0.  The same rule decides the race of a cancel with a command that
 * has just exited (its exit not handled yet when the cancel's signal
 * goes): before, 9 of 300 such races read CANCELLED with `exit: 0`. */
Test(actions, a_command_that_ends_by_itself_after_a_cancel_ends_as_it_ended)
{
	d_t *d = setup();
	char id[64], out[8192], flag[128], cmd[512];

	pod(d, "web");
	snprintf(flag, sizeof flag, "%s/trapped", d->dir);
	snprintf(cmd, sizeof cmd, "web exec -- /bin/sh -c 'trap \"exit 0\" TERM; touch %s; "
		 "while :; do sleep 0.05; done'", flag);
	run(d, id, cmd);
	assert_state(d, id, "RUNNING", 10);
	for (int i = 0; i < 400 && access(flag, F_OK) != 0; i++)
		sleep_ms(50);
	cr_assert_eq(access(flag, F_OK), 0, "the trap is not set");
	cr_assert_eq(ctl(d, out, sizeof out, "action cancel %s", id), 0, "%s", out);
	assert_state(d, id, "DONE", 20);
	cr_assert(says(d, "exit: 0", "action get %s", id));
	/* And one the cancel's signal ends is CANCELLED (its status). */
	run(d, id, "web exec -- /bin/sleep 444444");
	assert_state(d, id, "RUNNING", 10);
	const char *argv[] = { "/bin/sleep", "444444", NULL };
	cr_assert_eq(wait_procs(argv, 1, 20), 1);
	cr_assert_eq(ctl(d, out, sizeof out, "action cancel %s", id), 0, "%s", out);
	assert_state(d, id, "CANCELLED", 20);
	cr_assert(says(d, "signal: 15", "action get %s", id));
	teardown(d);
}

/* The rule itself, as a table: CANCELLED only when the status says the
 * cancel's signals ended it (SIGTERM, SIGKILL after the grace, or the
 * shells' 128+N for them); anything else ends as it ended. */
Test(actions, the_cancel_outcome_rule)
{
	static const struct { int code, sig; bool cancelled; } t[] = {
		{ -1, SIGTERM, true },  { -1, SIGKILL, true }, { 143, 0, true }, { 137, 0, true },
		{ 0, 0, false },        { 1, 0, false },       { 2, 0, false },  { -1, SIGSEGV, false },
		{ -1, SIGHUP, false },  { 130, 0, false },
		{ -1, 0, true },       /* no status known: the cancel's signal went */
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		cr_assert_eq(pod_exec_ended_by_cancel(t[i].code, t[i].sig), t[i].cancelled,
			     "exit %d signal %d", t[i].code, t[i].sig);
}
