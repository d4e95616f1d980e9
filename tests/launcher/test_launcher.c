/* pod_launcher: launches on a thread of their own, what they own, and
 * what is left when their requester goes away. */
#include <fcntl.h>
#include <sys/eventfd.h>

#include "pod/pod_launcher.h"
#include "tests/launcher/launcher_util.h"

static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* The next done job, waiting on the launcher's fd up to secs. */
static pod_launch_job_t *next_done(pod_launcher_t *l, double secs)
{
	double end = lt_now() + secs;
	pod_launch_job_t *j;
	while (!(j = pod_launcher_next_done(l)) && lt_now() < end) {
		struct pollfd p = { .fd = pod_launcher_fd(l), .events = POLLIN };
		(void)poll(&p, 1, 100);
	}
	return j;
}

/* Reaps pid (our child) within secs; its wait status, or -1. */
static int reap(pid_t pid, double secs)
{
	double end = lt_now() + secs;
	int st;
	while (lt_now() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0)
			return -1;
		usleep(10000);
	}
	return -1;
}

/* Every launch comes back once, with pod_launch's own result:
 * pipes whose output is the container's, an error message for a command
 * that does not exist, and that child reaped by the launcher (invisible
 * to the caller's waitpid, whoever calls it on which thread). */
Test(launcher, thread_launches_each_once_with_pod_launchs_results)
{
	pod_launcher_t *l;
	pod_launch_job_t *jobs[6], *j;
	tank_error_t err;
	char tag[6][16];

	cr_assert_eq(pod_launcher_new(&l), 0);
	for (int i = 0; i < 6; i++) {
		/* Options on the caller's stack, changed right after the
		 * submit: the job has its own copy. */
		char file[64];
		char *argv[] = { "sh", "-c", "echo $0 $1", tag[i], "x", NULL };
		char *envp[] = { "PATH=/bin:/usr/bin", NULL };
		snprintf(tag[i], sizeof tag[i], "job%d", i);
		snprintf(file, sizeof file, "%s", i == 3 ? "/nope/nothing" : "/bin/sh");
		pod_launch_opts_t o = { .file = file, .argv = argv, .envp = envp,
		                        .stdout_mode = POD_STDIO_PIPE,
		                        .stderr_mode = POD_STDIO_NULL };
		cr_assert_eq(pod_launch_submit(l, &o, (uint64_t)i, &jobs[i], &err), 0, "%s",
		             err.msg);
		memset(file, 'z', sizeof file - 1);
		argv[3] = "changed";
	}
	bool seen[6] = { false };
	for (int n = 0; n < 6; n++) {
		pod_proc_t p;
		cr_assert(j = next_done(l, 20), "only %d jobs done", n);
		uint64_t i = pod_launch_job_cookie(j);
		cr_assert_lt(i, 6);
		cr_assert(!seen[i], "job %d done twice", (int)i);
		seen[i] = true;
		cr_assert_eq(j, jobs[i]);
		int rc = pod_launch_job_take(j, &p, &err);
		pod_launch_job_free(j);
		if (i == 3) {
			cr_assert_eq(rc, -ENOENT);
			cr_expect_str_eq(err.msg, "exec /nope/nothing: No such file or directory");
			continue;
		}
		cr_assert_eq(rc, 0, "%s", err.msg);
		cr_assert_gt(p.pid, 0);
		cr_assert_gt(p.start_time, 0);
		char *out = lt_read_all(p.stdout_fd, 10);
		char want[32];
		snprintf(want, sizeof want, "job%d x\n", (int)i);
		cr_expect_str_eq(out, want);
		free(out);
		int st = reap(p.pid, 10);
		cr_expect(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		pod_proc_close_fds(&p);
	}
	/* The failed one was reaped by the launcher: no child is left. */
	cr_expect_eq(waitpid(-1, NULL, WNOHANG | __WALL), -1);
	cr_expect_eq(errno, ECHILD);
	cr_expect_null(pod_launcher_next_done(l));
	pod_launcher_free(l);
}

/* Launches done while the owner is not looking wake it once: the first
 * makes the done list non-empty and writes the eventfd, the others find
 * it non-empty (one write per job made a storm's burst cost a write and
 * an epoll callback each).  Every job is still handed out, once. */
Test(launcher, a_burst_of_done_launches_wakes_the_owner_once)
{
	enum { N = 8 };
	pod_launcher_t *l;
	pod_launch_job_t *j;
	tank_error_t err;
	int out[2];

	cr_assert_eq(pipe2(out, O_CLOEXEC | O_NONBLOCK), 0);
	cr_assert_eq(pod_launcher_new(&l), 0);
	for (int i = 0; i < N; i++) {
		char *argv[] = { "sh", "-c", "echo x", NULL };
		char *envp[] = { "PATH=/bin:/usr/bin", NULL };
		pod_launch_opts_t o = { .file = "/bin/sh", .argv = argv, .envp = envp,
		                        .stdout_mode = POD_STDIO_FD, .stdout_fd = out[1],
		                        .stderr_mode = POD_STDIO_NULL };
		cr_assert_eq(pod_launch_submit(l, &o, (uint64_t)i, &j, &err), 0, "%s", err.msg);
	}
	close(out[1]);
	/* Every child has exec'd and written (its job is done, or a few
	 * instructions from it), and nobody has drained the list. */
	int lines = 0;
	double end = lt_now() + 20;
	while (lines < N && lt_now() < end) {
		char c;
		struct pollfd p = { .fd = out[0], .events = POLLIN };
		(void)poll(&p, 1, 100);
		while (read(out[0], &c, 1) == 1)
			lines += c == '\n';
	}
	cr_assert_eq(lines, N);
	usleep(200000);
	uint64_t writes = 0;
	cr_assert_eq(read(pod_launcher_fd(l), &writes, sizeof writes), (ssize_t)sizeof writes);
	cr_expect_eq(writes, 1, "%d done launches wrote the eventfd %llu times", N,
	             (unsigned long long)writes);
	bool seen[N] = { false };
	for (int n = 0; n < N; n++) {
		pod_proc_t p;
		cr_assert(j = next_done(l, 20), "only %d jobs done", n);
		uint64_t i = pod_launch_job_cookie(j);
		cr_assert(i < N && !seen[i]);
		seen[i] = true;
		cr_assert_eq(pod_launch_job_take(j, &p, &err), 0, "%s", err.msg);
		pod_launch_job_free(j);
		cr_expect(reap(p.pid, 10) != -1);
		pod_proc_close_fds(&p);
	}
	cr_expect_null(pod_launcher_next_done(l));
	close(out[0]);
	pod_launcher_free(l);
}

/* A requester that goes away leaves nothing: a job abandoned while
 * queued never runs, one abandoned while running or done is killed, and
 * a result freed without being taken is killed too.  Every fd a job
 * held (its pipes, its copies of the caller's) is closed. */
Test(launcher, abandoned_launches_leave_no_process_and_no_fd)
{
	enum { N = 24 };
	pod_launcher_t *l;
	pod_launch_job_t *jobs[N];
	tank_error_t err;
	char *argv[] = { "/bin/sleep", "1000", NULL };
	int given, st;

	/* The launcher's slots are the process's for good: reserved first,
	 * so that what is counted is what the launches hold. */
	(void)pod_launch_reserve();
	int before = open_fds();
	cr_assert_eq(pod_launcher_new(&l), 0);
	given = open("/dev/null", O_WRONLY | O_CLOEXEC);
	cr_assert(given >= 0);
	for (int i = 0; i < N; i++) {
		pod_launch_opts_t o = { .file = "/bin/sleep", .argv = argv,
		                        .stdout_mode = POD_STDIO_PIPE,
		                        .stderr_mode = POD_STDIO_FD, .stderr_fd = given };
		cr_assert_eq(pod_launch_submit(l, &o, 0, &jobs[i], &err), 0, "%s", err.msg);
	}
	/* The caller's own fd may go at once: the job has a copy. */
	close(given);
	/* Half abandoned at once (most still queued, one perhaps in its
	 * clone), the others once done: freed untaken or abandoned. */
	for (int i = 0; i < N; i += 2)
		pod_launch_job_abandon(l, jobs[i]);
	for (int done = 0; done < N / 2; done++) {
		pod_launch_job_t *j = next_done(l, 20);
		cr_assert(j, "only %d of %d done", done, N / 2);
		if (done % 2)
			pod_launch_job_free(j);
		else
			pod_launch_job_abandon(l, j);
	}
	pod_launcher_free(l);
	/* Every child that was started was killed: the done ones and any
	 * abandoned in its clone; none of the others ran. */
	int reaped = 0;
	pid_t pid;
	while ((pid = waitpid(-1, &st, __WALL)) > 0) {
		cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		          "child %d not killed (status %#x)", (int)pid, st);
		reaped++;
	}
	cr_expect_geq(reaped, N / 2);
	cr_expect_leq(reaped, N);
	cr_expect_eq(open_fds(), before, "a launch left fds behind");
}

/* Before a reexec: the queued launches are cancelled, the one under way
 * finishes, and every started child nobody took is killed (it would run
 * untracked beside the one the next image starts); the launcher goes on
 * working afterwards. */
Test(launcher, settle_cancels_queued_and_kills_untaken)
{
	enum { N = 16 };
	pod_launcher_t *l;
	pod_launch_job_t *jobs[N], *j;
	tank_error_t err;
	pod_proc_t p;
	char *argv[] = { "/bin/sleep", "1000", NULL };
	pod_launch_opts_t o = { .file = "/bin/sleep", .argv = argv,
	                        .stdout_mode = POD_STDIO_PIPE, .stderr_mode = POD_STDIO_PIPE };

	cr_assert_eq(pod_launcher_new(&l), 0);
	for (int i = 0; i < N; i++)
		cr_assert_eq(pod_launch_submit(l, &o, (uint64_t)i, &jobs[i], &err), 0);
	pod_launcher_settle(l);
	int cancelled = 0, killed = 0;
	for (int i = 0; i < N; i++) {
		cr_assert(j = next_done(l, 20), "job %d not done after settle", i);
		cr_assert_eq(j, jobs[pod_launch_job_cookie(j)]);
		int rc = pod_launch_job_take(j, &p, &err);
		if (rc == -ECANCELED) {
			cr_expect_str_eq(err.msg, "launch: cancelled");
			cancelled++;
		} else {
			cr_assert_eq(rc, 0, "%s", err.msg);
			int st = reap(p.pid, 10);
			cr_expect(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
			pod_proc_close_fds(&p);
			killed++;
		}
		pod_launch_job_free(j);
	}
	cr_expect_eq(cancelled + killed, N);
	cr_expect_gt(cancelled, 0, "all %d launched before the settle", N);
	/* Still working. */
	cr_assert_eq(pod_launch_submit(l, &o, 99, &j, &err), 0);
	cr_assert(next_done(l, 20) == j);
	cr_assert_eq(pod_launch_job_take(j, &p, &err), 0, "%s", err.msg);
	pod_launch_job_free(j);
	cr_expect(ts_alive(p.pid));
	kill(p.pid, SIGKILL);
	reap(p.pid, 10);
	pod_proc_close_fds(&p);
	pod_launcher_free(l);
}
