/* The launcher's spawn does not depend on the caller's fd table: a caller
 * holding thousands of fds (leaky ones too) still gives the child only
 * 0-2, errors are still reported, and the slots never leak or clobber. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "tests/launcher/launcher_util.h"
#include "tests/support/tsupport.h"

#define MANY 5000

static int fds_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	cr_assert(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;   /* the DIR's own fd */
}

/* Raises RLIMIT_NOFILE for MANY extra fds, or skips the test. */
static void need_nofile(void)
{
	struct rlimit rl;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur >= MANY + 256)
		return;
	if (rl.rlim_max < MANY + 256)
		cr_skip_test("RLIMIT_NOFILE hard limit %llu too low",
		             (unsigned long long)rl.rlim_max);
	rl.rlim_cur = MANY + 256;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/* Opens n dups of /dev/null *without* close-on-exec. */
static int *hold(int n)
{
	int *v = calloc((size_t)n, sizeof *v);
	int null = open("/dev/null", O_RDONLY);
	cr_assert(v && null >= 0);
	for (int i = 0; i < n; i++) {
		v[i] = fcntl(null, F_DUPFD, 3);
		cr_assert(v[i] >= 0, "dup %d: %s", i, strerror(errno));
	}
	close(null);
	return v;
}

static void release(int *v, int n)
{
	for (int i = 0; i < n; i++)
		close(v[i]);
	free(v);
}

static void expect_only_std_fds(const char *out)
{
	int seen = 0;
	for (const char *p = out; (p = strstr(p, "\nfd ")); p++) {
		int fd = atoi(p + 4);
		cr_expect(fd >= 0 && fd <= 2, "fd %d open in child", fd);
		seen++;
	}
	cr_expect_eq(seen, 3, "child fds: %s", out);
	cr_expect(strstr(out, "\nstdin /dev/null\n"), "%s", out);
}

/* After the child exited, its stdout pipe reads EOF: no copy of the write
 * end stayed behind in a slot. */
static void expect_eof(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;
	cr_expect_eq(poll(&p, 1, 5000), 1, "no EOF on the pipe");
	cr_expect_eq(read(fd, &c, 1), 0, "pipe not at EOF");
}

Test(launcher, many_parent_fds_child_sees_only_std_fds)
{
	need_nofile();
	cr_assert_eq(pod_launch_reserve(), 0);
	int before = fds_count();
	int *many = hold(MANY);
	char *argv[] = { "launcher_probe", "info", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv };
	pod_proc_t p;
	tank_error_t err;
	for (int round = 0; round < 3; round++) {
		cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
		char *out = lt_read_all(p.stdout_fd, 10);
		int st = lt_wait(p.pid, 10);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
		expect_only_std_fds(out);
		expect_eof(p.stdout_fd);
		expect_eof(p.stderr_fd);
		free(out);
		pod_proc_close_fds(&p);
	}
	/* an exec error still comes back, and nothing is left running */
	o.file = "/nonexistent/tank-probe";
	cr_expect_eq(pod_launch(&o, &p, &err), -ENOENT);
	cr_expect(strstr(err.msg, "exec /nonexistent/tank-probe"), "%s", err.msg);
	cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1, "a child was left");
	release(many, MANY);
	cr_expect_eq(fds_count(), before);
}

Test(launcher, given_fd_and_null_stdio_through_slots)
{
	char path[] = "/tmp/tank-fds-XXXXXX";
	int fd = mkostemp(path, O_CLOEXEC);
	cr_assert(fd >= 0);
	unlink(path);
	char *argv[] = { "launcher_probe", "info", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv,
	                        .stdout_mode = POD_STDIO_FD, .stdout_fd = fd,
	                        .stderr_mode = POD_STDIO_NULL };
	pod_proc_t p;
	tank_error_t err;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	cr_expect_eq(p.stdout_fd, -1);
	cr_expect_eq(p.stderr_fd, -1);
	lt_wait(p.pid, 10);
	char buf[8192];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	cr_assert(n > 0);
	buf[n] = '\0';
	char *out = NULL;
	cr_assert(asprintf(&out, "\n%s", buf) > 0);
	expect_only_std_fds(out);
	cr_expect(strstr(out, "\nfd 2\n"));
	free(out);
	close(fd);
}

/* Someone closed the launcher's slots and reused their numbers: the
 * launcher must notice, leave those fds alone and still launch. */
static bool is_dev_null(int fd)
{
	char lnk[64], tgt[64];
	snprintf(lnk, sizeof lnk, "/proc/self/fd/%d", fd);
	ssize_t l = readlink(lnk, tgt, sizeof tgt - 1);
	if (l < 0)
		return false;
	tgt[l] = '\0';
	return strcmp(tgt, "/dev/null") == 0;
}

Test(launcher, clobbered_slots_are_left_alone)
{
	bool was_null[1024];
	for (int fd = 0; fd < 1024; fd++)
		was_null[fd] = is_dev_null(fd);
	int before = fds_count();
	cr_assert_eq(pod_launch_reserve(), 0);
	/* find the slots: the fds that appeared with the reservation */
	int slots[POD_LAUNCH_RESERVED_FDS * POD_LAUNCH_SETS], n = 0;
	for (int fd = 3; fd < 1024 && n < POD_LAUNCH_RESERVED_FDS * POD_LAUNCH_SETS; fd++)
		if (!was_null[fd] && is_dev_null(fd))
			slots[n++] = fd;
	cr_assert_eq(n, fds_count() - before, "slots not found");
	char dir[] = "/tmp/tank-fds-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	struct stat want[POD_LAUNCH_RESERVED_FDS * POD_LAUNCH_SETS];
	for (int i = 0; i < n; i++) {
		close(slots[i]);
		int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		cr_assert_eq(fd, slots[i], "reuse %d", slots[i]);
		cr_assert_eq(fstat(fd, &want[i]), 0);
	}
	char *argv[] = { "launcher_probe", "info", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv };
	int st;
	char *out = lt_run(&o, &st);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	expect_only_std_fds(out);
	free(out);
	for (int i = 0; i < n; i++) {
		struct stat now;
		cr_expect_eq(fstat(slots[i], &now), 0);
		cr_expect(now.st_ino == want[i].st_ino &&
		          now.st_dev == want[i].st_dev, "fd %d clobbered",
		          slots[i]);
		close(slots[i]);
	}
	rmdir(dir);
}
