/*
 * End to end, what an apply does to what runs (issue 40): a change of a
 * field nothing that runs reads (reconcile_wait, read by `apply --wait`)
 * restarts nothing; mistakes the host can show are refused at apply,
 * naming the field; what fails at launch is in the container's log and
 * status.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

static const char *pod_yaml(char *buf, size_t cap, const char *arg, const char *wait)
{
	snprintf(buf, cap,
		 "name: web\nstop: {grace: 1s}\nreconcile_wait: %s\n"
		 "containers:\n  - name: s\n    command: [/bin/sleep, \"%s\"]\n",
		 wait, arg);
	return buf;
}

Test(e2e, a_change_of_reconcile_wait_alone_restarts_nothing)
{
	d_t *d = setup();
	char out[4096], yaml[512], arg[32];

	snprintf(arg, sizeof arg, "4246.%d", (int)getpid());
	write_file(d, "web.yaml", pod_yaml(yaml, sizeof yaml, arg, "2s"));
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	long pid = status_num(d, "web", "pid");
	cr_assert_gt(pid, 0);
	cr_assert_eq(status_num(d, "web", "generation"), 1);

	/* Only the client-side field: the stored spec moves to generation 2
	 * (`configured`), the container goes on. */
	write_file(d, "web.yaml", pod_yaml(yaml, sizeof yaml, arg, "5s"));
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert(strstr(out, "web configured"), "%s", out);
	cr_assert(says(d, "5s", "get web"), "the stored spec has the new reconcile_wait");
	for (int i = 0; i < 100 && status_num(d, "web", "generation") != 2; i++)
		sleep_ms(50);
	cr_assert_eq(status_num(d, "web", "generation"), 2);
	sleep_ms(1000);         /* a restart would have happened by now */
	cr_assert_eq(status_num(d, "web", "pid"), pid, "the container was restarted");
	cr_assert(ts_alive((pid_t)pid));
	cr_assert_eq(status_num(d, "web", "restarts"), 0);
	cr_assert(phase_is(d, "web", "running"));

	/* A field that does change what runs still restarts it. */
	char arg2[40];
	snprintf(arg2, sizeof arg2, "%s1", arg);
	write_file(d, "web.yaml", pod_yaml(yaml, sizeof yaml, arg2, "5s"));
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert(strstr(out, "web configured"), "%s", out);
	long now = 0;
	for (int i = 0; i < 200; i++) {
		now = status_num(d, "web", "pid");
		if (now > 0 && now != pid && phase_is(d, "web", "running"))
			break;
		sleep_ms(50);
	}
	cr_assert(now > 0 && now != pid, "pid %ld -> %ld", pid, now);
	teardown(d);
}

/* Whether this process may make pid and mount namespaces (a child tries,
 * so nothing here changes). */
static bool namespaces_work(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0)
		_exit(unshare(CLONE_NEWPID | CLONE_NEWNS) == 0 ? 0 : 1);
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ssize_t n;

	cr_assert(in >= 0 && out >= 0, "copy %s -> %s", from, to);
	while ((n = read(in, buf, sizeof buf)) > 0)
		cr_assert_eq(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

Test(e2e, apply_refuses_what_the_host_shows_wrong_naming_the_field)
{
	d_t *d = setup();
	char out[16384], yaml[4096], path[256];

	/* Each mistake of issue 40 item 12 that used to crash-loop. */
	snprintf(yaml, sizeof yaml,
		 "name: bad\nisolation: {namespaces: [mount]}\n"
		 "volumes: [{name: v, host_path: %s/no-such-dir}]\n"
		 "containers:\n"
		 "  - name: a\n    command: [/nope, x]\n"
		 "    mounts: [{volume: v, path: /no-such-mount-point}]\n"
		 "  - name: b\n    command: [no-such-command-4247]\n"
		 "    working_dir: /no/such/dir\n    user: no-such-user-4247\n",
		 d->dir);
	write_file(d, "bad.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/bad.yaml", d->dir), 1, "%s", out);
	static const char *const want[] = {
		"bad.yaml: document 1: bad: volumes[0].host_path: ",
		"/no-such-dir: No such file or directory",
		"bad.yaml: document 1: bad: containers[0].command[0]: /nope: not found",
		"bad.yaml: document 1: bad: containers[0].mounts[0].path: /no-such-mount-point: no such mount point",
		"bad.yaml: document 1: bad: containers[1].command[0]: no-such-command-4247: not found in PATH",
		"bad.yaml: document 1: bad: containers[1].working_dir: /no/such/dir: not found",
		"bad.yaml: document 1: bad: containers[1].user: unknown user \"no-such-user-4247\"",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		cr_expect(strstr(out, want[i]), "no \"%s\" in:\n%s", want[i], out);
	cr_assert_eq(ctl(d, out, sizeof out, "status bad"), 1, "nothing applied: %s", out);

	/* A rootfs: commands are looked up in it, its absolute symlinks
	 * staying inside it.  /bin/sleep there links to /opt/bb/busybox,
	 * which the host does not have; /bin/true is on the host only. */
	const char *dirs[] = { "rootfs", "rootfs/bin", "rootfs/opt", "rootfs/opt/bb" };
	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof path, "%s/%s", d->dir, dirs[i]);
		cr_assert_eq(mkdir(path, 0755), 0, "%s", path);
	}
	if (access("/bin/busybox", X_OK) < 0)
		cr_skip_test("no /bin/busybox for a rootfs");
	snprintf(path, sizeof path, "%s/rootfs/opt/bb/busybox", d->dir);
	copy_file("/bin/busybox", path, 0755);
	snprintf(path, sizeof path, "%s/rootfs/bin/sleep", d->dir);
	cr_assert_eq(symlink("/opt/bb/busybox", path), 0);
	cr_assert_neq(access("/opt/bb/busybox", F_OK), 0, "the host has /opt/bb/busybox");
	snprintf(yaml, sizeof yaml,
		 "name: inroot\nstop: {grace: 1s}\n"
		 "isolation: {namespaces: [pid, mount], rootfs: %s/rootfs}\n"
		 "containers:\n  - name: s\n    command: [/bin/sleep, \"100\"]\n"
		 "    working_dir: /opt/bb\n"
		 "---\n"
		 "name: hostonly\nisolation: {namespaces: [pid, mount], rootfs: %s/rootfs}\n"
		 "volumes: [{name: v, host_path: %s}]\n"
		 "containers:\n  - name: s\n    command: [/bin/true]\n"
		 "    mounts: [{volume: v, path: /bin/sleep/data}]\n",
		 d->dir, d->dir, d->dir);
	write_file(d, "root.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/root.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "root.yaml: document 2: hostonly: containers[0].command[0]: /bin/true: "
			 "not found in isolation.rootfs"), "%s", out);
	/* A mount point the sandbox could not make: /bin/sleep is a file. */
	cr_assert(strstr(out, "root.yaml: document 2: hostonly: containers[0].mounts[0].path: /bin/sleep/data: "
			 "cannot be made in isolation.rootfs: /bin/sleep is not a directory"),
		  "%s", out);
	cr_assert_not(strstr(out, "inroot"), "%s", out);
	/* Without the host-only pod the rootfs pod is accepted, and runs. */
	char *cut = strstr(yaml, "---\n");
	*cut = '\0';
	write_file(d, "root.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/root.yaml", d->dir), 0, "%s", out);
	if (namespaces_work())
		cr_assert(wait_phase(d, "inroot", "running", 20));
	teardown(d);
}

Test(e2e, a_start_that_fails_says_why_in_logs_and_status)
{
	d_t *d = setup();
	char out[16384], yaml[1024], path[256];

	/* Passes every check at apply (an executable regular file), fails
	 * at exec: its interpreter does not exist. */
	snprintf(path, sizeof path, "%s/prog", d->dir);
	write_file(d, "prog", "#!/no/such/interpreter\n");
	cr_assert_eq(chmod(path, 0755), 0);
	snprintf(yaml, sizeof yaml,
		 "name: broken\nbackoff: {base: 100ms, cap: 200ms}\n"
		 "containers:\n  - name: c\n    command: [%s]\n", path);
	write_file(d, "p.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/p.yaml", d->dir), 0, "%s", out);
	char line[512];
	snprintf(line, sizeof line, "stderr tank: exec %s: No such file or directory", path);
	cr_assert(wait_says(d, 20, line, "logs broken -t"), "logs: %s",
		  (ctl(d, out, sizeof out, "logs broken -t"), out));
	snprintf(line, sizeof line, "exec %s: No such file or directory", path);
	cr_assert(says(d, line, "status broken"), "status: %s",
		  (ctl(d, out, sizeof out, "status broken"), out));
	cr_assert(says(d, line, "history broken"));
	teardown(d);
}

/* A batch bigger than one validation slice (the api validates 1,000
 * objects a turn): what the host shows wrong is checked as each object
 * is validated (kind_t's check_item), for given pods and for those a
 * stack brings inline, and refuses the whole batch, named; said only
 * when every object is valid, as before. */
Test(e2e, a_big_apply_refuses_what_the_host_shows_wrong_in_any_slice)
{
	d_t *d = setup();
	enum { N = 1200 };
	size_t cap = (size_t)N * 128 + 1024, len = 0;
	char *yaml = malloc(cap), out[16384];

	cr_assert(yaml);
	for (int i = 0; i < N; i++)
		len += (size_t)snprintf(yaml + len, cap - len,
					"name: big%d\nrestart: never\n"
					"containers: [{name: c, command: [%s]}]\n---\n",
					i, i == 1100 ? "/nope-4248" : "/bin/true");
	len += (size_t)snprintf(yaml + len, cap - len,
				"kind: Stack\nname: st\npods:\n"
				"  - name: inl\n    containers: [{name: c, command: [/nope-4249]}]\n");
	write_file(d, "big.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/big.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "big1100: containers[0].command[0]: /nope-4248: not found"),
		  "%s", out);
	cr_assert(strstr(out, "inl: containers[0].command[0]: /nope-4249: not found"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status big0"), 1, "nothing applied: %s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get stack st"), 1, "nothing applied: %s", out);

	/* One object invalid: only that is said (the host's findings wait
	 * for a batch that validates), and nothing is applied. */
	char *bad = strstr(yaml, "name: big5\n");
	cr_assert(bad);
	memcpy(bad, "nome", 4);
	write_file(d, "big.yaml", yaml);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/big.yaml", d->dir), 1, "%s", out);
	cr_assert_not(strstr(out, "/nope-4248"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "status big0"), 1, "nothing applied: %s", out);

	/* Fixed: all of it passes (a dry run: 1,200 processes are not
	 * what this test is about). */
	memcpy(bad, "name", 4);
	char *nope = strstr(yaml, "/nope-4248");
	memcpy(nope, "/bin/true ", 10);
	nope = strstr(yaml, "/nope-4249");
	memcpy(nope, "/bin/true ", 10);
	write_file(d, "big.yaml", yaml);
	/* Its 1,200 lines are drained, not kept: a tankctl whose reader
	 * stopped at the buffer's end would die of SIGPIPE. */
	cr_assert_eq(ctl(d, NULL, 0, "apply --dry-run -f %s/big.yaml", d->dir), 0);
	free(yaml);
	teardown(d);
}
