#include "tests/launcher/launcher_util.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "pod/pod_cgroup.h"
#include "tests/support/tsupport.h"

/* Each test gets its own root group so parallel tests never collide. */
static void cg_env(pod_cgroup_env_t *env)
{
	char root[64];
	tank_error_t err;
	snprintf(root, sizeof root, "tank-test-%d", (int)getpid());
	ts_own_cgroot(root);     /* its groups go on every path (tsupport.h) */
	cr_assert_eq(pod_cgroup_probe(env, NULL, root, &err), 0, "%s", err.msg);
	if (env->mode == POD_CGROUP_NONE)
		cr_skip_test("no usable cgroup hierarchy on this machine");
	if (getuid() != 0)
		cr_skip_test("cgroups need root here");
}

static void cg_teardown(pod_cgroup_env_t *env, pod_cgroup_t *cg)
{
	double end = lt_now() + 10;
	while (pod_cgroup_destroy(cg) == -EBUSY && lt_now() < end) {
		pod_cgroup_kill_all(cg);
		usleep(5000);
	}
	cr_expect_eq(pod_cgroup_destroy(cg), 0);
	cr_expect_eq(pod_cgroup_env_cleanup(env), 0);
}

Test(launcher, cgroup_joined_before_exec_with_limits)
{
	pod_cgroup_env_t env;
	pod_cgroup_t cg;
	tank_error_t err;
	cg_env(&env);
	pod_cgroup_limits_t lim = { .memory = 64 << 20, .pids = 32, .cpu = 0.5 };
	cr_assert_eq(pod_cgroup_create(&env, "web", "app", &lim, &cg, &err), 0,
	             "%s", err.msg);
	char *argv[] = { "probe", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .cgroup = &cg, .stderr_mode = POD_STDIO_NULL };
	char *out = lt_run(&o, NULL);
	char want[256];
	if (env.mode == POD_CGROUP_V1) {
		snprintf(want, sizeof want, ":pids:/%s/web/app\n", env.root);
		cr_expect(strstr(out, want), "not in %s: %s", want, out);
		snprintf(want, sizeof want, ":memory:/%s/web/app\n", env.root);
		cr_expect(strstr(out, want), "not in %s: %s", want, out);
		char buf[64] = "";
		char path[512];
		snprintf(path, sizeof path, "%s/cpu.cfs_quota_us",
		         cg.dir[POD_CG_CPU]);
		FILE *f = fopen(path, "r");
		cr_assert(f);
		cr_expect(fgets(buf, sizeof buf, f));
		fclose(f);
		cr_expect_str_eq(buf, "50000\n");
	} else {
		snprintf(want, sizeof want, "0::/%s/web/app\n", env.root);
		cr_expect(strstr(out, want), "not in %s: %s", want, out);
	}
	free(out);
	cr_expect_eq(pod_cgroup_count(&cg), 0);
	cr_expect_eq(pod_cgroup_oom_killed(&cg), 0);
	cg_teardown(&env, &cg);
	/* the whole tree is gone */
	char path[512];
	snprintf(path, sizeof path, "%s/%s",
	         env.mode == POD_CGROUP_V2 ? env.v2_mount :
	         env.v1_mount[POD_CG_PIDS], env.root);
	cr_expect_eq(access(path, F_OK), -1);
}

Test(launcher, pids_limit_stops_fork_bomb)
{
	pod_cgroup_env_t env;
	pod_cgroup_t cg;
	tank_error_t err;
	cg_env(&env);
	pod_cgroup_limits_t lim = { .pids = 8 };
	cr_assert_eq(pod_cgroup_create(&env, "bomb", "b", &lim, &cg, &err), 0,
	             "%s", err.msg);
	char *argv[] = { "probe", "forkbomb", "100", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .cgroup = &cg, .stderr_mode = POD_STDIO_NULL };
	int st;
	char *out = lt_run(&o, &st);
	int k = -1, e = -1;
	cr_assert_eq(sscanf(out, "forked %d errno %d", &k, &e), 2, "%s", out);
	cr_expect(k >= 1 && k < 8, "forked %d with pids.max 8", k);
	cr_expect_eq(e, EAGAIN);
	free(out);
	cg_teardown(&env, &cg);
}

Test(launcher, memory_limit_ends_in_oom_killed)
{
	pod_cgroup_env_t env;
	pod_cgroup_t cg;
	tank_error_t err;
	cg_env(&env);
	pod_cgroup_limits_t lim = { .memory = 32 << 20 };
	cr_assert_eq(pod_cgroup_create(&env, "oom", "hog", &lim, &cg, &err), 0,
	             "%s", err.msg);
	char *argv[] = { "probe", "alloc", "512", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .cgroup = &cg, .stderr_mode = POD_STDIO_NULL };
	int st;
	char *out = lt_run(&o, &st);
	cr_expect_str_eq(out, "");
	pod_exit_t ex;
	pod_exit_from_status(st, &cg, &ex);
	cr_expect_eq(ex.signal, SIGKILL, "status %x", st);
	cr_expect(ex.oom_killed);
	cr_expect_str_eq(pod_exit_reason(&ex), "oom_killed");
	free(out);
	cg_teardown(&env, &cg);
}

Test(launcher, kill_all_reaches_grandchildren_in_cgroup)
{
	pod_cgroup_env_t env;
	pod_cgroup_t cg;
	tank_error_t err;
	cg_env(&env);
	cr_assert_eq(pod_cgroup_create(&env, "stop", "deaf", NULL, &cg, &err),
	             0, "%s", err.msg);
	cr_expect(!cg.has_memory);
	char *argv[] = { "probe", "tree", "4", NULL };
	/* NO_SETSID: the group kill must not depend on the process group */
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .cgroup = &cg, .flags = POD_LAUNCH_NO_SETSID,
	                        .stderr_mode = POD_STDIO_NULL };
	pod_proc_t p;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	char *line = lt_read_line(p.stdout_fd, 10);
	cr_assert(strncmp(line, "ready", 5) == 0, "got %s", line);
	cr_expect_eq(pod_cgroup_count(&cg), 5);
	cr_expect_eq(pod_proc_signal(&p, SIGTERM), 0);
	usleep(50000);
	cr_expect_eq(waitpid(p.pid, NULL, WNOHANG), 0, "TERM was not ignored");
	cr_expect_eq(pod_proc_kill_all(&p, &cg), 0);
	int st = lt_wait(p.pid, 10);
	cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	double end = lt_now() + 10;
	while (pod_cgroup_count(&cg) > 0 && lt_now() < end)
		usleep(2000);
	cr_expect_eq(pod_cgroup_count(&cg), 0, "a grandchild survived");
	pod_exit_t ex;
	pod_exit_from_status(st, &cg, &ex);
	cr_expect(!ex.oom_killed);
	cr_expect_str_eq(pod_exit_reason(&ex), "signaled");
	pod_proc_close_fds(&p);
	free(line);
	cg_teardown(&env, &cg);
}

/* The exit's kill of what is left (pod__runner_kill_rest): a process the
 * main one left behind in its group is found and killed; an empty group
 * is nothing to do, and no error. */
Test(launcher, kill_all_after_the_exit_finds_what_was_left_and_passes_an_empty_group)
{
	pod_cgroup_env_t env;
	pod_cgroup_t cg;
	tank_error_t err;
	char tag[64];
	cg_env(&env);
	cr_assert_eq(pod_cgroup_create(&env, "left", "behind", NULL, &cg, &err), 0, "%s",
		     err.msg);
	snprintf(tag, sizeof tag, "/bin/sleep 9702.%d </dev/null >/dev/null 2>&1 & exit 0",
		 (int)getpid());
	char *argv[] = { "sh", "-c", tag, NULL };
	pod_launch_opts_t o = { .file = "/bin/sh", .argv = argv, .cgroup = &cg,
				.stderr_mode = POD_STDIO_NULL };
	pod_proc_t p;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	int st = lt_wait(p.pid, 10);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert_eq(pod_cgroup_count(&cg), 1, "the sleep outlived its shell");
	cr_expect_eq(pod_proc_kill_all(&p, &cg), 0);
	double end = lt_now() + 10;
	while (pod_cgroup_count(&cg) > 0 && lt_now() < end) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;       /* ours to reap if this process is a subreaper */
		usleep(2000);
	}
	cr_expect_eq(pod_cgroup_count(&cg), 0, "the process left behind survived");
	/* Empty now: nothing to do, and no error. */
	cr_expect_eq(pod_cgroup_kill_all(&cg), 0);
	pod_proc_close_fds(&p);
	cg_teardown(&env, &cg);
}

Test(launcher, cgroup_rejects_bad_names_and_busy_destroy)
{
	pod_cgroup_env_t env;
	pod_cgroup_t cg;
	tank_error_t err;
	cr_expect_eq(pod_cgroup_probe(&env, NULL, "../x", &err), TANK_EINVALID);
	cg_env(&env);
	cr_expect_eq(pod_cgroup_create(&env, "..", "a", NULL, &cg, &err),
	             TANK_EINVALID);
	cr_expect_eq(pod_cgroup_create(&env, "a/b", "a", NULL, &cg, &err),
	             TANK_EINVALID);
	cr_assert_eq(pod_cgroup_create(&env, "busy", "c", NULL, &cg, &err), 0,
	             "%s", err.msg);
	char *argv[] = { "sleep", "30", NULL };
	pod_launch_opts_t o = { .file = "/bin/sleep", .argv = argv,
	                        .cgroup = &cg };
	pod_proc_t p;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	cr_expect_eq(pod_cgroup_destroy(&cg), -EBUSY);
	cr_expect_eq(pod_cgroup_count(&cg), 1);   /* still valid */
	cr_expect_eq(pod_proc_kill_all(&p, &cg), 0);
	lt_wait(p.pid, 10);
	pod_proc_close_fds(&p);
	cg_teardown(&env, &cg);
}

static void put(const char *dir, const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	FILE *f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static void sub(const char *dir, const char *rel)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	cr_assert_eq(mkdir(path, 0755), 0, "%s", path);
}

Test(launcher, cgroup_probe_prefers_a_complete_v2_then_v1)
{
	char dir[] = "/tmp/tank-cgfs-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	pod_cgroup_env_t env;
	tank_error_t err;
	/* hybrid host: unified present but without the controllers → v1 */
	sub(dir, "unified");
	put(dir, "unified/cgroup.controllers", "\n");
	sub(dir, "pids");
	put(dir, "pids/cgroup.procs", "");
	sub(dir, "memory");
	put(dir, "memory/cgroup.procs", "");
	cr_assert_eq(pod_cgroup_probe(&env, dir, "tank", &err), 0, "%s", err.msg);
	cr_expect_eq(env.mode, POD_CGROUP_V1);
	cr_expect(strstr(env.v1_mount[POD_CG_MEMORY], "/memory"));
	cr_expect_str_eq(env.v1_mount[POD_CG_CPU], "");
	/* a cpu limit without the cpu hierarchy is refused up front */
	pod_cgroup_t cg;
	pod_cgroup_limits_t lim = { .cpu = 1 };
	cr_expect_eq(pod_cgroup_create(&env, "p", "c", &lim, &cg, &err),
	             TANK_EUNSUPPORTED);
	cr_expect_str_eq(err.msg, "cgroup: no cpu controller");
	/* a unified hierarchy with all three controllers wins */
	put(dir, "unified/cgroup.controllers", "cpuset cpu io memory pids\n");
	cr_assert_eq(pod_cgroup_probe(&env, dir, "tank/d1", &err), 0);
	cr_expect_eq(env.mode, POD_CGROUP_V2);
	cr_expect(strstr(env.v2_mount, "/unified"));
	/* nothing usable: NONE, and create says why */
	lt_rmrf(dir);
	cr_assert(ts_mkdtemp_at(strcpy(dir, "/tmp/tank-cgfs-XXXXXX")));
	cr_assert_eq(pod_cgroup_probe(&env, dir, "tank", &err), 0);
	cr_expect_eq(env.mode, POD_CGROUP_NONE);
	cr_expect_eq(pod_cgroup_create(&env, "p", "c", NULL, &cg, &err),
	             TANK_EUNSUPPORTED);
	lt_rmrf(dir);
}

static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* A container's group costs the daemon no fd between launches; the child
 * joins by path, and a group that vanished is a launch error naming the
 * step, with nothing left running. */
Test(launcher, cgroup_holds_no_fds_and_join_is_by_path)
{
	pod_cgroup_env_t env;
	pod_cgroup_t cg;
	tank_error_t err;
	cg_env(&env);
	cr_assert_eq(pod_launch_reserve(), 0);
	int before = open_fds();
	pod_cgroup_limits_t lim = { .memory = 64 << 20, .pids = 32, .cpu = 0.5 };
	cr_assert_eq(pod_cgroup_create(&env, "fds", "app", &lim, &cg, &err), 0,
	             "%s", err.msg);
	cr_expect_eq(open_fds(), before, "the group holds fds");
	char *argv[] = { "probe", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .cgroup = &cg, .stderr_mode = POD_STDIO_NULL };
	for (int i = 0; i < 3; i++) {
		char *out = lt_run(&o, NULL);
		char want[256];
		snprintf(want, sizeof want, env.mode == POD_CGROUP_V1 ?
		         ":pids:/%s/fds/app\n" : "0::/%s/fds/app\n", env.root);
		cr_expect(strstr(out, want), "not in %s: %s", want, out);
		free(out);
	}
	cr_expect_eq(open_fds(), before, "a launch left fds behind");
	/* the pids group removed behind our back */
	const char *d = env.mode == POD_CGROUP_V1 ? cg.dir[POD_CG_PIDS]
	                                          : cg.dir[0];
	cr_assert_eq(rmdir(d), 0, "rmdir %s: %s", d, strerror(errno));
	pod_proc_t p;
	int r = pod_launch(&o, &p, &err);
	cr_expect_eq(r, -ENOENT, "%d %s", r, err.msg);
	cr_expect(strstr(err.msg, "join cgroup"), "%s", err.msg);
	cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1, "a child was left");
	cr_expect_eq(open_fds(), before);
	cg_teardown(&env, &cg);
}

/* A cgroup2 mount: /sys/fs/cgroup on a v2 host, /sys/fs/cgroup/unified on
 * a hybrid one (this machine: no controllers there, but groups and
 * CLONE_INTO_CGROUP work the same).  "" when there is none. */
static void cg2_mount(char *out, size_t cap)
{
	static const char *const cand[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	struct statfs sf;
	out[0] = '\0';
	for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
		if (statfs(cand[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
			snprintf(out, cap, "%s", cand[i]);
			return;
		}
}

/* One launch of the probe into the v2 group `dir` (a pod_cgroup_t made by
 * hand: pod_cgroup_create wants the memory, pids and cpu controllers,
 * which a hybrid host's unified hierarchy lacks); its output and whether
 * the kernel created it in the group. */
static char *run_in_v2(const char *dir, unsigned flags, bool *into)
{
	pod_cgroup_t cg = { .mode = POD_CGROUP_V2, .dir = { dir, "", "" } };
	char *argv[] = { "probe", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv, .cgroup = &cg,
	                        .stderr_mode = POD_STDIO_NULL, .flags = flags };
	pod_proc_t p;
	tank_error_t err;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "pod_launch: %s", err.msg);
	*into = p.cloned_into_cgroup;
	char *out = lt_read_all(p.stdout_fd, 10);
	int st = lt_wait(p.pid, 10);
	pod_proc_close_fds(&p);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	return out;
}

Test(launcher, a_v2_container_is_created_in_its_group_and_the_fallback_joins_it)
{
	char mnt[64], root[64], top[192], dir[256], want[256];
	cg2_mount(mnt, sizeof mnt);
	if (!mnt[0])
		cr_skip_test("no cgroup2 mount on this machine");
	if (getuid() != 0)
		cr_skip_test("cgroups need root here");
	snprintf(root, sizeof root, "tank-test-%d", (int)getpid());
	ts_own_cgroot(root);
	snprintf(top, sizeof top, "%s/%s", mnt, root);
	snprintf(dir, sizeof dir, "%s/c", top);
	cr_assert(mkdir(top, 0755) == 0 || errno == EEXIST, "%s: %s", top, strerror(errno));
	cr_assert_eq(mkdir(dir, 0755), 0, "%s: %s", dir, strerror(errno));
	snprintf(want, sizeof want, "\ncgroup 0::/%s/c\n", root);

	/* clone3: the kernel creates the child in the group, so what the
	 * container reads of itself is the group, and it wrote nothing. */
	bool into = false;
	char *out = run_in_v2(dir, 0, &into);
	cr_expect(into, "not created in its group (clone3 CLONE_INTO_CGROUP)");
	cr_expect(strstr(out, want), "not in %s: %s", want + 1, out);
	free(out);

	/* clone(2), as on a kernel without clone3: the child joins it by
	 * writing cgroup.procs before its exec. */
	out = run_in_v2(dir, POD_LAUNCH_NO_CLONE3, &into);
	cr_expect(!into);
	cr_expect(strstr(out, want), "not in %s: %s", want + 1, out);
	free(out);

	/* A group removed meanwhile fails the launch at the cgroup step,
	 * on both paths, and leaves no process. */
	cr_assert_eq(rmdir(dir), 0);
	unsigned fl[2] = { 0, POD_LAUNCH_NO_CLONE3 };
	for (int i = 0; i < 2; i++) {
		pod_cgroup_t cg = { .mode = POD_CGROUP_V2, .dir = { dir, "", "" } };
		char *argv[] = { "probe", NULL };
		pod_launch_opts_t o = { .file = lt_probe(), .argv = argv, .cgroup = &cg,
		                        .flags = fl[i] };
		pod_proc_t p;
		tank_error_t err;
		cr_expect_lt(pod_launch(&o, &p, &err), 0);
		cr_expect(strstr(err.msg, "join cgroup"), "%s", err.msg);
	}
	cr_expect_eq(rmdir(top), 0, "%s: %s", top, strerror(errno));
}

static void put_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fputs(text, f) >= 0, true);
	cr_assert_eq(fclose(f), 0);
}

typedef struct pid_sum { long long sum; int n; } pid_sum_t;

static int add_pid(pid_t pid, void *arg)
{
	pid_sum_t *s = arg;
	s->sum += pid;
	return ++s->n == 5000 ? -ECANCELED : 0;
}

/* The readers pod_top and the exits share (pod_cgroup_read_num,
 * pod_cgroup_each_pid), on plain files laid out as cgroupfs's: a key is
 * a whole word (oom_kill is not oom_kill_disable), a missing key or
 * number says so, and a pid list longer than a read is parsed whole,
 * numbers cut at a 4 KiB edge included; fn's error stops the walk. */
Test(launcher, cgroup_readers_take_keys_whole_and_pids_across_reads)
{
	char dir[] = "/tmp/tank-cgread-XXXXXX", buf[64];
	uint64_t v = 7;
	cr_assert(ts_mkdtemp_at(dir));

	put_file(dir, "memory.events", "low 0\noom_kill_disable 1\noom_kill 5\n");
	cr_assert_eq(pod_cgroup_read_num(dir, "memory.events", "oom_kill", &v), 0);
	cr_assert_eq(v, 5);
	cr_assert_eq(pod_cgroup_read_num(dir, "memory.events", "oom", &v), -ENODATA);
	put_file(dir, "cpu.stat", "usage_usec x\n");
	cr_assert_eq(pod_cgroup_read_num(dir, "cpu.stat", "usage_usec", &v), -EINVAL);
	put_file(dir, "memory.current", "123456789\n");
	cr_assert_eq(pod_cgroup_read_num(dir, "memory.current", NULL, &v), 0);
	cr_assert_eq(v, 123456789);
	cr_assert_eq(pod_cgroup_read_num(dir, "nope", NULL, &v), -ENOENT);
	cr_assert_eq(pod_cgroup_read(dir, "memory.current", buf, 5), 4);
	cr_assert_str_eq(buf, "1234");

	/* 3,000 pids of 1 to 7 digits: ~15 KiB, four reads. */
	static char list[3000 * 9];
	size_t off = 0;
	long long want = 0;
	for (int i = 0; i < 3000; i++) {
		long pid = 1 + (i * 7919L) % 4194303;
		want += pid;
		off += (size_t)snprintf(list + off, sizeof list - off, "%ld\n", pid);
	}
	put_file(dir, "cgroup.procs", list);
	pid_sum_t s = { 0, 0 };
	cr_assert_eq(pod_cgroup_each_pid(dir, add_pid, &s), 3000);
	cr_assert_eq(s.n, 3000);
	cr_assert_eq(s.sum, want, "every pid whole: %lld, want %lld", s.sum, want);
	put_file(dir, "cgroup.procs", "1\n2\n3");   /* no last newline */
	s = (pid_sum_t){ 0, 0 };
	cr_assert_eq(pod_cgroup_each_pid(dir, add_pid, &s), 3);
	cr_assert_eq(s.sum, 6);
	s = (pid_sum_t){ 0, 4999 };
	cr_assert_eq(pod_cgroup_each_pid(dir, add_pid, &s), -ECANCELED, "fn's error stops it");
	cr_assert_eq(pod_cgroup_each_pid("/nonexistent-tank", add_pid, &s), -ENOENT);
}
