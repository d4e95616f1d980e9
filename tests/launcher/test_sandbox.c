#include "tests/launcher/launcher_util.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "pod/pod_sandbox.h"
#include "tests/support/tsupport.h"

static void need_root(void)
{
	if (getuid() != 0)
		cr_skip_test("namespaces need root here");
}

/* Creates the sandbox; skips only when the kernel/privileges refuse. */
static void sbx(const pod_sandbox_opts_t *o, pod_sandbox_t *sb)
{
	tank_error_t err;
	int r = pod_sandbox_create(o, sb, &err);
	if (r == TANK_EUNSUPPORTED && strstr(err.msg, "create namespaces"))
		cr_skip_test("%s", err.msg);
	cr_assert_eq(r, 0, "%s", err.msg);
}

static char *run_in(const pod_sandbox_t *sb, const char *file,
                    char *const *argv, int *status)
{
	static char *envp[] = { "PATH=/bin:/usr/bin", NULL };
	pod_launch_opts_t o = { .file = file, .argv = argv, .envp = envp,
	                        .sandbox = sb, .stderr_mode = POD_STDIO_PIPE };
	pod_proc_t p;
	tank_error_t err;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	char *out = lt_read_all(p.stdout_fd, 10);
	char *e = lt_read_all(p.stderr_fd, 1);
	int st = lt_wait(p.pid, 10);
	if (status)
		*status = st;
	cr_log_info("stderr: %s", e);
	free(e);
	pod_proc_close_fds(&p);
	return out;
}

Test(launcher, sandbox_pid_and_uts_namespaces_shared_by_containers)
{
	need_root();
	pod_sandbox_opts_t so = { .ns = POD_NS_PID | POD_NS_UTS | POD_NS_IPC,
	                          .hostname = "tank-pod-a" };
	pod_sandbox_t sb;
	sbx(&so, &sb);
	char host[256];
	gethostname(host, sizeof host);
	cr_assert_str_neq(host, "tank-pod-a");
	char *argv[] = { "probe", NULL };
	for (int i = 0; i < 2; i++) {
		int st;
		char *out = run_in(&sb, lt_probe(), argv, &st);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
		cr_expect(strstr(out, "\nhostname tank-pod-a\n"), "%s", out);
		int pid = atoi(out + 4);
		cr_expect(pid >= 2 && pid < 100, "pid %d in the pod", pid);
		cr_expect(strstr(out, "\nppid 0\n"), "%s", out);  /* parent outside */
		free(out);
	}
	/* our own pid namespace for children was restored */
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .stderr_mode = POD_STDIO_NULL };
	char *out = lt_run(&o, NULL);
	cr_expect(atoi(out + 4) > 1 && strstr(out, host), "%s", out);
	free(out);
	pod_sandbox_destroy(&sb, true);
	cr_expect_eq(sb.pid, -1);
	pod_proc_t p;
	tank_error_t err;
	o.sandbox = &sb;
	cr_expect_eq(pod_launch(&o, &p, &err), TANK_ECONFLICT);
}

Test(launcher, sandbox_init_reaps_orphans_and_proc_is_the_pods)
{
	need_root();
	pod_sandbox_opts_t so = { .ns = POD_NS_PID | POD_NS_MOUNT };
	pod_sandbox_t sb;
	sbx(&so, &sb);
	/* the inner sh exits at once, orphaning its sleep to PID 1 (our
	 * sandbox init), which must reap it once it ends */
	char *argv[] = { "sh", "-c",
	                 "sh -c 'sleep 0.05 &'; sleep 0.5; "
	                 "cat /proc/1/comm; "
	                 "cat /proc/[0-9]*/stat | grep -c ') Z ' || true; "
	                 "ls /proc | grep -c '^[0-9]'",
	                 NULL };
	int st;
	char *out = run_in(&sb, "/bin/sh", argv, &st);
	int procs = 0, zombies = -1;
	char comm[64] = "";
	cr_assert_eq(sscanf(out, "%63s %d %d", comm, &zombies, &procs), 3, "%s",
	             out);
	cr_expect_str_eq(comm, "tank-sandbox");
	cr_expect_eq(zombies, 0, "%s", out);
	cr_expect(procs >= 2 && procs < 10, "%d processes visible", procs);
	free(out);
	pod_sandbox_destroy(&sb, true);
}

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	cr_assert(in >= 0 && out >= 0);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		cr_assert_eq(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

Test(launcher, sandbox_busybox_rootfs_with_volumes)
{
	need_root();
	if (access("/bin/busybox", X_OK) < 0)
		cr_skip_test("busybox-static not installed");
	char tmp[] = "/tmp/tank-rootfs-XXXXXX";
	cr_assert(ts_mkdtemp_at(tmp));
	char root[512], path[600], ro[512], rw[512];
	snprintf(root, sizeof root, "%s/root", tmp);
	snprintf(ro, sizeof ro, "%s/ro", tmp);
	snprintf(rw, sizeof rw, "%s/rw", tmp);
	cr_assert_eq(mkdir(root, 0755), 0);
	cr_assert_eq(mkdir(ro, 0755), 0);
	cr_assert_eq(mkdir(rw, 0755), 0);
	snprintf(path, sizeof path, "%s/bin", root);
	cr_assert_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/bin/busybox", root);
	copy_file("/bin/busybox", path);
	const char *tools[] = { "sh", "ls", "cat", "touch", "hostname", "echo",
	                        "grep", "wc" };
	for (size_t i = 0; i < sizeof tools / sizeof *tools; i++) {
		snprintf(path, sizeof path, "%s/bin/%s", root, tools[i]);
		cr_assert_eq(symlink("busybox", path), 0);
	}
	snprintf(path, sizeof path, "%s/hello", ro);
	FILE *f = fopen(path, "w");
	cr_assert(f);
	fputs("hello from the host\n", f);
	fclose(f);

	pod_sandbox_mount_t mounts[] = { { ro, "/data", true },
	                         { rw, "/srv/rw", false } };
	pod_sandbox_opts_t so = { .ns = POD_NS_PID | POD_NS_MOUNT | POD_NS_UTS |
	                                POD_NS_IPC,
	                          .hostname = "boxy", .rootfs = root,
	                          .mounts = mounts, .n_mounts = 2 };
	pod_sandbox_t sb;
	sbx(&so, &sb);
	char *argv[] = { "sh", "-c",
	                 "echo pid $$; hostname; cat /data/hello; "
	                 "touch /data/x 2>/dev/null && echo ro-broken || echo ro-ok;"
	                 " touch /srv/rw/y && echo rw-ok; ls /dev | grep -c null;"
	                 " ls / | grep -c tmp; cat /proc/1/comm",
	                 NULL };
	int st;
	char *out = run_in(&sb, "/bin/sh", argv, &st);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%d %s", st, out);
	int pid = -1;
	cr_expect_eq(sscanf(out, "pid %d", &pid), 1);
	cr_expect(pid >= 2 && pid < 100, "%s", out);
	cr_expect(strstr(out, "\nboxy\nhello from the host\nro-ok\nrw-ok\n1\n0\n"
	                 "tank-sandbox\n"), "%s", out);
	free(out);
	snprintf(path, sizeof path, "%s/y", rw);
	cr_expect_eq(access(path, F_OK), 0, "rw volume write not on host");
	snprintf(path, sizeof path, "%s/x", ro);
	cr_expect_eq(access(path, F_OK), -1);

	/* a command missing inside the rootfs fails with the exec message */
	pod_launch_opts_t o = { .file = "/usr/bin/python3", .sandbox = &sb };
	pod_proc_t p;
	tank_error_t err;
	cr_expect_eq(pod_launch(&o, &p, &err), -ENOENT);
	cr_expect_str_eq(err.msg, "exec /usr/bin/python3: No such file or "
	                 "directory");
	pod_sandbox_destroy(&sb, true);
	lt_rmrf(tmp);
	cr_expect_eq(access(tmp, F_OK), -1, "temp dir left behind");
}

Test(launcher, sandbox_rejects_inconsistent_options)
{
	pod_sandbox_t sb;
	tank_error_t err;
	pod_sandbox_opts_t so = { .ns = POD_NS_PID, .rootfs = "/tmp" };
	cr_expect_eq(pod_sandbox_create(&so, &sb, &err), TANK_EINVALID);
	cr_expect_str_eq(err.msg, "sandbox: rootfs and volumes need the mount "
	                 "namespace");
	so = (pod_sandbox_opts_t){ .ns = POD_NS_PID, .hostname = "x" };
	cr_expect_eq(pod_sandbox_create(&so, &sb, &err), TANK_EINVALID);
	so = (pod_sandbox_opts_t){ .ns = 0 };
	cr_expect_eq(pod_sandbox_create(&so, &sb, &err), TANK_EINVALID);
	so = (pod_sandbox_opts_t){ .ns = POD_NS_MOUNT,
	                           .rootfs = "/nonexistent-root" };
	cr_expect_eq(pod_sandbox_create(&so, &sb, &err), TANK_EINVALID);
	cr_expect_eq(sb.pid, -1);
}

Test(launcher, sandbox_net_namespace_has_only_loopback_up)
{
	need_root();
	pod_sandbox_opts_t so = { .ns = POD_NS_NET };
	pod_sandbox_t sb;
	sbx(&so, &sb);
	char *argv[] = { "sh", "-c", "cat /proc/net/dev | tail -n +3 | "
	                 "cut -d: -f1 | tr -d ' '", NULL };
	char *out = run_in(&sb, "/bin/sh", argv, NULL);
	cr_expect_str_eq(out, "lo\n");
	free(out);
	pod_sandbox_destroy(&sb, true);
}

static int count_fds(void)
{
	int n = 0;
	char path[64];
	for (int fd = 0; fd < 1024; fd++) {
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		n += access(path, F_OK) == 0;
	}
	return n;
}

Test(launcher, no_fd_leaks_in_the_caller)
{
	need_root();
	/* The slots are the launcher's, reserved once per process. */
	int unreserved = count_fds();
	cr_assert_eq(pod_launch_reserve(), 0);
	int before = count_fds();
	cr_expect(before - unreserved <= POD_LAUNCH_RESERVED_FDS * POD_LAUNCH_SETS);
	cr_assert_eq(pod_launch_reserve(), 0);
	cr_expect_eq(count_fds(), before);
	tank_error_t err;
	pod_proc_t p;
	/* success with pipes, an exec failure, a sandbox round trip */
	char *argv[] = { "true", NULL };
	pod_launch_opts_t o = { .file = "/bin/true", .argv = argv };
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
		lt_wait(p.pid, 10);
		pod_proc_close_fds(&p);
	}
	o.file = "/nope";
	cr_assert_eq(pod_launch(&o, &p, &err), -ENOENT);
	pod_sandbox_opts_t so = { .ns = POD_NS_PID | POD_NS_MOUNT | POD_NS_UTS };
	pod_sandbox_t sb;
	sbx(&so, &sb);
	o.file = "/bin/true";
	o.sandbox = &sb;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	lt_wait(p.pid, 10);
	pod_proc_close_fds(&p);
	o.file = "/nope";
	cr_assert_eq(pod_launch(&o, &p, &err), -ENOENT);
	pod_sandbox_destroy(&sb, true);
	so.rootfs = "/nonexistent";   /* a failure before any fork */
	cr_assert_eq(pod_sandbox_create(&so, &sb, &err), TANK_EINVALID);
	cr_expect_eq(count_fds(), before);
}

Test(launcher, sandbox_setup_failure_names_the_step_and_leaves_nothing)
{
	need_root();
	char tmp[] = "/tmp/tank-rootfs-XXXXXX";
	cr_assert(ts_mkdtemp_at(tmp));
	char path[600];
	snprintf(path, sizeof path, "%s/etc", tmp);
	cr_assert_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/etc/hosts", tmp);
	FILE *f = fopen(path, "w");   /* a file where a directory is needed */
	cr_assert(f);
	fclose(f);
	pod_sandbox_mount_t m = { "/tmp", "/etc/hosts/sub", true };
	pod_sandbox_opts_t so = { .ns = POD_NS_MOUNT | POD_NS_PID, .rootfs = tmp,
	                          .mounts = &m, .n_mounts = 1 };
	pod_sandbox_t sb;
	tank_error_t err;
	int r = pod_sandbox_create(&so, &sb, &err);
	if (r == TANK_EUNSUPPORTED && strstr(err.msg, "create namespaces"))
		cr_skip_test("%s", err.msg);
	cr_expect_eq(r, -ENOTDIR, "%s", err.msg);
	cr_expect_str_eq(err.msg, "sandbox: bind volume /etc/hosts/sub: Not a "
	                 "directory");
	cr_expect_eq(sb.pid, -1);
	cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1);   /* reaped */
	cr_expect_eq(errno, ECHILD);
	lt_rmrf(tmp);
}

/* The first line of a /proc file of pid, NULs shown as spaces and
 * trailing NULs dropped. */
static void proc_text(pid_t pid, const char *file, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, cap - 1);
	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	while (n > 0 && (buf[n - 1] == '\0' || buf[n - 1] == '\n'))
		n--;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
}

Test(launcher, sandbox_runs_in_its_own_cgroup_named_after_its_pod)
{
	need_root();
	pod_cgroup_env_t env;
	tank_error_t err;
	char root[64], buf[512], want[256];
	snprintf(root, sizeof root, "tank-test-%d", (int)getpid());
	cr_assert_eq(pod_cgroup_probe(&env, NULL, root, &err), 0, "%s", err.msg);
	if (env.mode == POD_CGROUP_NONE)
		cr_skip_test("no usable cgroup hierarchy on this machine");
	pod_sandbox_opts_t so = { .ns = POD_NS_PID | POD_NS_UTS, .name = "web-frontend",
	                          .cgroups = &env, .cgroup_pod = "web-frontend.1234abcd" };
	pod_sandbox_t sb;
	sbx(&so, &sb);
	/* In <root>/<pod>/_sandbox.<pid>, the only process there. */
	snprintf(want, sizeof want, POD_SANDBOX_GROUP_PREFIX "%d", (int)sb.pid);
	cr_assert_str_eq(sb.group, want);
	cr_assert(pod_sandbox_is_group(sb.group));
	cr_assert_not(pod_sandbox_is_group("sandbox"));
	cr_assert_eq(pod_cgroup_count(&sb.cg), 1);
	proc_text(sb.pid, "cgroup", buf, sizeof buf);
	snprintf(want, sizeof want, "/%s/web-frontend.1234abcd/" POD_SANDBOX_GROUP_PREFIX "%d",
	         root, (int)sb.pid);
	cr_assert(strstr(buf, want), "%s not in %s", want, buf);
	/* Its name says which pod it serves. */
	proc_text(sb.pid, "comm", buf, sizeof buf);
	cr_expect_str_eq(buf, "sbx:web-fronten");
	proc_text(sb.pid, "cmdline", buf, sizeof buf);
	cr_expect_str_eq(buf, "tank-sandbox web-frontend");
	/* A container still joins the pod (the sandbox is its pid 1). */
	char *argv[] = { "probe", NULL };
	int st;
	char *out = run_in(&sb, lt_probe(), argv, &st);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	free(out);
	/* Destroyed with reap: the process and its group are gone. */
	char dir[POD_CGROUP_PATH];
	snprintf(dir, sizeof dir, "%s", sb.cg.dir[env.mode == POD_CGROUP_V2 ? 0 : POD_CG_PIDS]);
	pod_sandbox_destroy(&sb, true);
	cr_expect_neq(access(dir, F_OK), 0, "%s still exists", dir);
	cr_expect_eq(sb.group[0], '\0');
	cr_expect_eq(pod_cgroup_env_cleanup(&env), 0);

	/* Without a name it is tank-sandbox; without cgroups, in none. */
	pod_sandbox_opts_t plain = { .ns = POD_NS_PID };
	sbx(&plain, &sb);
	proc_text(sb.pid, "comm", buf, sizeof buf);
	cr_expect_str_eq(buf, "tank-sandbox");
	cr_expect_eq(sb.group[0], '\0');
	cr_expect_eq(sb.cg.mode, POD_CGROUP_NONE);
	pod_sandbox_destroy(&sb, true);
}
