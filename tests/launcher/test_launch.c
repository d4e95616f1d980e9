#include "tests/launcher/launcher_util.h"
#include "tests/support/tsupport.h"

#include <fcntl.h>
#include <sys/resource.h>

Test(launcher, env_cwd_applied_and_parent_env_not_leaked)
{
	char dir[] = "/tmp/tank-launch-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	setenv("TANK_SECRET_LEAK", "1", 1);
	char *argv[] = { "probe", "info", NULL };
	char *envp[] = { "FOO=bar baz", "PATH=/usr/bin:/bin", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv, .envp = envp,
	                        .cwd = dir, .stderr_mode = POD_STDIO_NULL };
	int st;
	char *out = lt_run(&o, &st);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	char want[256];
	snprintf(want, sizeof want, "\ncwd %s\n", dir);
	cr_expect(strstr(out, want), "cwd missing: %s", out);
	cr_expect(strstr(out, "\nenv FOO=bar baz\n"), "%s", out);
	cr_expect(strstr(out, "\nenv PATH=/usr/bin:/bin\n"), "%s", out);
	cr_expect(!strstr(out, "TANK_SECRET_LEAK"), "env leaked: %s", out);
	/* exactly two env lines */
	int n = 0;
	for (char *p = out; (p = strstr(p, "\nenv ")); p++)
		n++;
	cr_expect_eq(n, 2, "%s", out);
	cr_expect(strstr(out, "\nsigpipe default\n"), "%s", out);
	cr_expect(strstr(out, "\nsigmask empty\n"), "%s", out);
	free(out);
	rmdir(dir);
}

Test(launcher, only_std_fds_open_and_stdin_is_dev_null)
{
	/* A leaky fd in the parent: no O_CLOEXEC. */
	int leak = open("/dev/zero", O_RDONLY);
	cr_assert(leak >= 3);
	signal(SIGPIPE, SIG_IGN);   /* must not be inherited */
	char *argv[] = { "probe", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .stderr_mode = POD_STDIO_NULL };
	int st;
	char *out = lt_run(&o, &st);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	int n = 0;
	for (char *p = out; (p = strstr(p, "\nfd ")); p++) {
		int fd = atoi(p + 4);
		cr_expect(fd >= 0 && fd <= 2, "fd %d open in child: %s", fd, out);
		n++;
	}
	cr_expect_eq(n, 3, "%s", out);
	cr_expect(strstr(out, "\nstdin /dev/null\n"), "%s", out);
	cr_expect(strstr(out, "\nsigpipe default\n"), "%s", out);
	free(out);
	close(leak);
}

/* The probe, copied where any user can run it: the test switches to
 * uid 65534, which cannot reach a build dir inside a 0700 home (where
 * users clone, and where CI's clone lives). */
static const char *public_probe(char *dir, size_t cap)
{
	static char path[128];
	char cmd[1024];

	snprintf(dir, cap, "/tmp/tank-probe-XXXXXX");
	cr_assert_not_null(ts_mkdtemp_at(dir));
	cr_assert_eq(chmod(dir, 0755), 0);
	snprintf(path, sizeof path, "%s/probe", dir);
	snprintf(cmd, sizeof cmd, "cp %s %s && chmod 755 %s", lt_probe(), path, path);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	return path;
}

Test(launcher, user_numeric_and_by_name)
{
	char *argv[] = { "probe", NULL }, dir[64];
	if (getuid() != 0)
		cr_skip_test("needs root to switch users");
	pod_launch_opts_t o = { .file = public_probe(dir, sizeof dir), .argv = argv,
	                        .user = "65534:65533",
	                        .stderr_mode = POD_STDIO_NULL };
	char *out = lt_run(&o, NULL);
	cr_expect(strstr(out, "\nuid 65534\ngid 65533\ngroups\n"), "%s", out);
	free(out);
	o.user = "nobody";
	out = lt_run(&o, NULL);
	cr_expect(strstr(out, "\nuid 65534\ngid 65534\n"), "%s", out);
	free(out);
	tank_error_t err;
	pod_proc_t p;
	o.user = "no-such-user-xyz";
	cr_expect_eq(pod_launch(&o, &p, &err), TANK_EINVALID);
	cr_expect_str_eq(err.msg, "user: unknown user no-such-user-xyz");
	lt_rmrf(dir);
}

Test(launcher, exec_failure_is_reported_and_reaped)
{
	pod_launch_opts_t o = { .file = "/nope" };
	pod_proc_t p;
	tank_error_t err;
	cr_assert_eq(pod_launch(&o, &p, &err), -ENOENT);
	cr_expect_str_eq(err.msg, "exec /nope: No such file or directory");
	o.file = "no-such-command-xyz";
	cr_assert_eq(pod_launch(&o, &p, &err), -ENOENT);
	cr_expect_str_eq(err.msg,
	                 "exec no-such-command-xyz: No such file or directory");
	char nx[] = "/tmp/tank-launch-nx-XXXXXX";   /* exists, not executable */
	int fd = mkostemp(nx, O_CLOEXEC);
	cr_assert(fd >= 0);
	close(fd);
	o.file = nx;
	cr_expect_eq(pod_launch(&o, &p, &err), -EACCES, "%s", err.msg);
	unlink(nx);
	o.file = lt_probe();
	o.cwd = "/nonexistent-dir";
	cr_assert_eq(pod_launch(&o, &p, &err), -ENOENT);
	cr_expect_str_eq(err.msg,
	                 "chdir /nonexistent-dir: No such file or directory");
	/* the failed children were reaped by pod_launch (__WALL: a child
	 * that failed before exec has no exit signal, and plain waitpid(-1)
	 * would not see it even as a zombie) */
	cr_expect_eq(waitpid(-1, NULL, WNOHANG | __WALL), -1);
	cr_expect_eq(errno, ECHILD);
}

Test(launcher, path_lookup_uses_container_path)
{
	char *argv[] = { "sh", "-c", "echo hello from $0", NULL };
	char *envp[] = { "PATH=/nonexistent:/bin:/usr/bin", NULL };
	pod_launch_opts_t o = { .file = "sh", .argv = argv, .envp = envp };
	int st;
	char *out = lt_run(&o, &st);
	cr_expect_str_eq(out, "hello from sh\n");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(out);
}

Test(launcher, setsid_rlimits_and_start_time)
{
	char *argv[] = { "probe", NULL };
	pod_rlimit_t rl[] = { { RLIMIT_NOFILE, 77, 77 } };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .rlimits = rl, .n_rlimits = 1,
	                        .stderr_mode = POD_STDIO_NULL };
	pod_proc_t p;
	tank_error_t err;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	cr_expect(p.start_time > 0);
	uint64_t st2 = 0;
	/* not reaped yet: still the same process */
	cr_expect_eq(pod_proc_start_time(p.pid, &st2), 0);
	cr_expect_eq(st2, p.start_time);
	char *out = lt_read_all(p.stdout_fd, 10);
	lt_wait(p.pid, 10);
	pod_proc_close_fds(&p);
	char want[128];
	snprintf(want, sizeof want, "\npgid %d\nsid %d\n", (int)p.pid,
	         (int)p.pid);
	cr_expect(strstr(out, want), "%s", out);
	cr_expect(strstr(out, "\nnofile 77\n"), "%s", out);
	cr_expect_eq(pod_proc_start_time(p.pid, &st2), -ESRCH);
	free(out);
}

/* The start time a launch reports is the kernel's (/proc/PID/stat field
 * 22: what adoption compares after a restart of tankd), whether the
 * launcher knew it from the clock around the clone or read /proc: 300
 * launches in a row, some of them across a clock tick. */
Test(launcher, start_time_is_the_kernels_for_every_launch)
{
	char *argv[] = { "sleep", "30", NULL };
	pod_launch_opts_t o = { .file = "/bin/sleep", .argv = argv,
	                        .stdout_mode = POD_STDIO_NULL,
	                        .stderr_mode = POD_STDIO_NULL };
	for (int i = 0; i < 300; i++) {
		pod_proc_t p;
		tank_error_t err;
		uint64_t st = 0;
		cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
		int r = pod_proc_start_time(p.pid, &st);
		kill(p.pid, SIGKILL);
		lt_wait(p.pid, 10);
		cr_assert_eq(r, 0);
		cr_assert_gt(p.start_time, 0);
		cr_assert_eq(p.start_time, st, "launch %d: reported %llu, /proc says %llu", i,
			     (unsigned long long)p.start_time, (unsigned long long)st);
	}
}

/* pod_proc_state tells the three ends of (pid, start) apart from one
 * read: running, ended and not reaped (what adoption claims as a zombie),
 * and gone, also when the pid is right and the start time is not (the
 * pid now names another process). */
Test(launcher, proc_state_tells_runs_zombie_and_gone)
{
	char *argv[] = { "sleep", "30", NULL };
	pod_launch_opts_t o = { .file = "/bin/sleep", .argv = argv,
	                        .stdout_mode = POD_STDIO_NULL,
	                        .stderr_mode = POD_STDIO_NULL };
	pod_proc_t p;
	tank_error_t err;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	cr_expect_eq(pod_proc_state(p.pid, p.start_time), POD_PROC_RUNS);
	cr_expect_eq(pod_proc_state(p.pid, p.start_time + 1), POD_PROC_GONE);
	cr_expect_eq(pod_proc_state(0, p.start_time), POD_PROC_GONE);
	cr_assert_eq(kill(p.pid, SIGKILL), 0);
	pod_proc_state_t s = POD_PROC_RUNS;
	for (int i = 0; i < 10000 && (s = pod_proc_state(p.pid, p.start_time)) == POD_PROC_RUNS; i++)
		usleep(1000);
	cr_expect_eq(s, POD_PROC_ZOMBIE, "killed and not reaped: state %d", (int)s);
	cr_expect(pod_proc_dead(p.pid));
	/* Not a zombie when the start time is another process's. */
	cr_expect_eq(pod_proc_state(p.pid, p.start_time + 1), POD_PROC_GONE);
	lt_wait(p.pid, 10);
	cr_expect_eq(pod_proc_state(p.pid, p.start_time), POD_PROC_GONE);
	cr_expect(pod_proc_dead(p.pid));
	pod_proc_close_fds(&p);
}

Test(launcher, stdout_into_given_fd_and_exit_decoding)
{
	char path[] = "/tmp/tank-launch-out-XXXXXX";
	int fd = mkostemp(path, O_CLOEXEC);
	cr_assert(fd >= 0);
	char *argv[] = { "sh", "-c", "echo to-file; echo to-err >&2; exit 7",
	                 NULL };
	pod_launch_opts_t o = { .file = "/bin/sh", .argv = argv,
	                        .stdout_mode = POD_STDIO_FD, .stdout_fd = fd };
	pod_proc_t p;
	tank_error_t err;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	cr_expect_eq(p.stdout_fd, -1);
	char *e = lt_read_all(p.stderr_fd, 10);
	int st = lt_wait(p.pid, 10);
	pod_proc_close_fds(&p);
	cr_expect_str_eq(e, "to-err\n");
	free(e);
	pod_exit_t ex;
	pod_exit_from_status(st, NULL, &ex);
	cr_expect_eq(ex.code, 7);
	cr_expect_eq(ex.signal, 0);
	cr_expect_str_eq(pod_exit_reason(&ex), "failed");
	char buf[64] = "";
	cr_expect(pread(fd, buf, sizeof buf - 1, 0) > 0);
	cr_expect_str_eq(buf, "to-file\n");
	close(fd);
	unlink(path);
	pod_exit_from_status(0, NULL, &ex);
	cr_expect_str_eq(pod_exit_reason(&ex), "completed");
	pod_exit_from_status(SIGTERM, NULL, &ex);  /* WTERMSIG encoding */
	cr_expect_eq(ex.signal, SIGTERM);
	cr_expect_eq(ex.code, -1);
	cr_expect_str_eq(pod_exit_reason(&ex), "signaled");
}

Test(launcher, stop_escalation_without_cgroup_kills_process_group)
{
	char *argv[] = { "probe", "tree", "3", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .stderr_mode = POD_STDIO_NULL };
	pod_proc_t p;
	tank_error_t err;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	char *line = lt_read_line(p.stdout_fd, 10);
	cr_assert(strncmp(line, "ready", 5) == 0, "got %s", line);
	pid_t kids[3];
	cr_assert_eq(sscanf(line + 5, "%d %d %d", &kids[0], &kids[1], &kids[2]),
	             3);
	cr_expect_eq(pod_proc_signal(&p, SIGTERM), 0);
	usleep(50000);
	cr_expect_eq(waitpid(p.pid, NULL, WNOHANG), 0, "TERM was not ignored");
	cr_expect_eq(pod_proc_kill_all(&p, NULL), 0);
	int st = lt_wait(p.pid, 10);
	cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	double end = lt_now() + 10;
	bool all = false;
	while (!all && lt_now() < end) {
		all = !ts_alive(kids[0]) && !ts_alive(kids[1]) && !ts_alive(kids[2]);
		usleep(2000);
	}
	cr_expect(all, "a grandchild outlived its container");
	pod_proc_close_fds(&p);
	free(line);
}

/* Every launcher test (the suite spans every file of tests/launcher): the processes
 * it launched are its children, SIGKILLed and reaped by ts_cleanup when
 * the test ends without collecting them (a failed assertion). */
static void lt_suite_init(void)
{
	ts_own_children();
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* The probe's "signondefault" line for a launch with flags: the signals
 * not at their default in the child, as " 1 2 3 " (malloc'd). */
static char *lt_signondefault(unsigned flags)
{
	char *argv[] = { "probe", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .stderr_mode = POD_STDIO_NULL, .flags = flags };
	int st;
	char *out = lt_run(&o, &st), *line = NULL;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	cr_expect(strstr(out, "\nsigmask empty\n"), "flags %u: %s", flags, out);
	/* The probe's own handlers may be listed (a sanitizer's: SIGSEGV,
	 * SIGBUS, SIGFPE); none of those set here. */
	const char *l = strstr(out, "\nsignondefault ");
	cr_assert(l, "%s", out);
	cr_assert(asprintf(&line, " %.*s ", (int)strcspn(l + 15, "\n"), l + 15) > 0);
	free(out);
	return line;
}

static bool lt_listed(const char *line, int sig)
{
	char w[16];
	snprintf(w, sizeof w, " %d ", sig);
	return strstr(line, w) != NULL;
}

/* The child resets every ignored signal on both clone paths: clone3
 * (the kernel resets handlers, CLONE_CLEAR_SIGHAND; the child resets the
 * ignored ones the launcher read at its first launch) and clone(2) (the
 * child resets all of them). */
Test(launcher, ignored_signals_are_reset_on_both_clone_paths)
{
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	signal(SIGRTMIN + 3, SIG_IGN);
	signal(SIGUSR1, on_usr1);
	/* The third: clone3 again, after the set is read anew
	 * (pod_launch_signals_changed). */
	unsigned fl[3] = { 0, POD_LAUNCH_NO_CLONE3, 0 };
	for (int i = 0; i < 3; i++) {
		if (i == 2)
			pod_launch_signals_changed();
		char *line = lt_signondefault(fl[i]);
		const int set[] = { SIGPIPE, SIGUSR2, SIGRTMIN + 3, SIGUSR1 };
		for (size_t k = 0; k < sizeof set / sizeof set[0]; k++)
			cr_expect(!lt_listed(line, set[k]), "flags %u: signal %d not default: %s",
			          fl[i], set[k], line);
		free(line);
	}
	signal(SIGPIPE, SIG_DFL);
	signal(SIGUSR2, SIG_DFL);
	signal(SIGRTMIN + 3, SIG_DFL);
	signal(SIGUSR1, SIG_DFL);
}

/* Whether a child launched now starts with sig not at its default. */
static bool lt_child_ignores(int sig)
{
	char *line = lt_signondefault(0);
	bool listed = lt_listed(line, sig);
	free(line);
	return listed;
}

/* Told which signals the process ignores, a child resets those and
 * asks no more: a signal ignored after that is left ignored until the
 * process says so again (the contract of pod_launch_signals_changed),
 * but SIGPIPE, which libraries ignore for a while, is reset anyway. */
Test(launcher, a_child_resets_the_ignored_signals_it_was_told_of)
{
	signal(SIGUSR2, SIG_IGN);
	pod_launch_signals_changed();
	cr_expect_not(lt_child_ignores(SIGUSR2), "told: reset");
	signal(SIGRTMIN + 2, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	cr_expect(lt_child_ignores(SIGRTMIN + 2),
		  "not told of it: the child did not ask the kernel, so it kept it");
	cr_expect_not(lt_child_ignores(SIGPIPE), "SIGPIPE is reset whatever it was told");
	cr_expect_not(lt_child_ignores(SIGUSR2));
	pod_launch_signals_changed();
	cr_expect_not(lt_child_ignores(SIGRTMIN + 2), "told again: reset");
	signal(SIGUSR2, SIG_DFL);
	signal(SIGRTMIN + 2, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
}

TestSuite(launcher, .init = lt_suite_init);
