#include "tests/launcher/launcher_util.h"

#include <fcntl.h>
#include <regex.h>
#include <sys/stat.h>

#include "pod/pod_log.h"
#include "tests/support/tsupport.h"

static bool record_ok(const char *line, const char *stream, const char *text)
{
	regex_t re;
	char pat[256];
	snprintf(pat, sizeof pat,
	         "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
	         "\\.[0-9]{3}Z %s %s$", stream, text);
	cr_assert_eq(regcomp(&re, pat, REG_EXTENDED | REG_NOSUB), 0);
	bool ok = regexec(&re, line, 0, NULL, 0) == 0;
	regfree(&re);
	return ok;
}

Test(launcher, log_capture_of_a_container_with_prefixes)
{
	char dir[] = "/tmp/tank-log-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	pod_log_opts_t lo = { .dir = dir, .pod = "web", .container = "app" };
	pod_log_t *w;
	tank_error_t err;
	cr_assert_eq(pod_log_open(&lo, &w, &err), 0, "%s", err.msg);
	char *argv[] = { "probe", "lines", "3", "5", NULL };
	pod_launch_opts_t o = { .file = lt_probe(), .argv = argv };
	pod_proc_t p;
	cr_assert_eq(pod_launch(&o, &p, &err), 0, "%s", err.msg);
	bool eof[2] = { false, false };
	double end = lt_now() + 10;
	while (!(eof[0] && eof[1]) && lt_now() < end) {
		struct pollfd pf[2] = { { .fd = eof[0] ? -1 : p.stdout_fd,
		                          .events = POLLIN },
		                        { .fd = eof[1] ? -1 : p.stderr_fd,
		                          .events = POLLIN } };
		poll(pf, 2, 100);
		for (int i = 0; i < 2; i++) {
			if (eof[i] || !pf[i].revents)
				continue;
			int r = pod_log_drain_fd(w, (pod_log_stream_t)i,
			                         i ? p.stderr_fd : p.stdout_fd);
			cr_assert(r >= 0, "drain: %d", r);
			eof[i] = r == 1;
		}
	}
	cr_assert(eof[0] && eof[1]);
	lt_wait(p.pid, 10);
	pod_proc_close_fds(&p);
	pod_log_close(w);

	char **lines;
	size_t n;
	cr_assert_eq(pod_log_tail(dir, "web", "app", 0, &lines, &n, &err), 0,
	             "%s", err.msg);
	cr_assert_eq(n, 4);
	int outs = 0, errs = 0;
	for (size_t i = 0; i < n; i++) {
		outs += record_ok(lines[i], "stdout", "xxxxx");
		errs += record_ok(lines[i], "stderr", "err line");
	}
	cr_expect_eq(outs, 3, "%s", lines[0]);
	cr_expect_eq(errs, 1);
	pod_log_lines_free(lines, n);
	cr_assert_eq(pod_log_tail(dir, "web", "app", 2, &lines, &n, &err), 0);
	cr_expect_eq(n, 2);
	pod_log_lines_free(lines, n);
	lt_rmrf(dir);
}

Test(launcher, log_partial_and_overlong_lines)
{
	char dir[] = "/tmp/tank-log-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	pod_log_opts_t lo = { .dir = dir, .pod = "p", .container = "c",
	                      .max_line = 10 };
	pod_log_t *w;
	tank_error_t err;
	cr_assert_eq(pod_log_open(&lo, &w, &err), 0, "%s", err.msg);
	cr_expect_eq(pod_log_feed(w, POD_LOG_STDOUT, "hel", 3), 0);
	cr_expect_eq(pod_log_feed(w, POD_LOG_STDERR, "E1\n", 3), 0);
	cr_expect_eq(pod_log_feed(w, POD_LOG_STDOUT, "lo\nwor", 6), 0);
	cr_expect_eq(pod_log_feed(w, POD_LOG_STDOUT,
	                          "abcdefghijABCDEFGHIJ12345\n", 26), 0);
	char **lines;
	size_t n;
	cr_assert_eq(pod_log_tail(dir, "p", "c", 0, &lines, &n, &err), 0);
	cr_assert_eq(n, 5, "got %zu lines", n);
	cr_expect(record_ok(lines[0], "stderr", "E1"), "%s", lines[0]);
	cr_expect(record_ok(lines[1], "stdout", "hello"), "%s", lines[1]);
	cr_expect(record_ok(lines[2], "stdout", "worabcdefg"), "%s", lines[2]);
	cr_expect(record_ok(lines[3], "stdout", "hijABCDEFG"), "%s", lines[3]);
	cr_expect(record_ok(lines[4], "stdout", "HIJ12345"), "%s", lines[4]);
	pod_log_lines_free(lines, n);
	cr_expect_eq(pod_log_feed(w, POD_LOG_STDOUT, "tail", 4), 0);
	pod_log_close(w);   /* flushes the partial "tail" */
	cr_assert_eq(pod_log_tail(dir, "p", "c", 1, &lines, &n, &err), 0);
	cr_assert_eq(n, 1);
	cr_expect(record_ok(lines[0], "stdout", "tail"), "%s", lines[0]);
	pod_log_lines_free(lines, n);
	lt_rmrf(dir);
}

Test(launcher, log_rotation_keeps_n_files_and_tail_spans_them)
{
	char dir[] = "/tmp/tank-log-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	pod_log_opts_t lo = { .dir = dir, .pod = "rot", .container = "c",
	                      .max_bytes = 1000, .keep = 3 };
	pod_log_t *w;
	tank_error_t err;
	cr_assert_eq(pod_log_open(&lo, &w, &err), 0, "%s", err.msg);
	for (int i = 0; i < 100; i++) {
		char buf[64];
		int len = snprintf(buf, sizeof buf, "line %03d padding-padding\n",
		                   i);
		cr_assert_eq(pod_log_feed(w, POD_LOG_STDOUT, buf, (size_t)len), 0);
	}
	pod_log_close(w);
	char path[512];
	struct stat st;
	for (int g = 0; g <= 4; g++) {
		snprintf(path, sizeof path, g ? "%s/rot/c.log.%d" : "%s/rot/c.log",
		         dir, g);
		if (g <= 3) {
			cr_expect_eq(stat(path, &st), 0, "%s missing", path);
			cr_expect(st.st_size <= 1000, "%s: %ld bytes", path,
			          (long)st.st_size);
		} else {
			cr_expect_eq(stat(path, &st), -1, "%s kept", path);
		}
	}
	char **lines;
	size_t n;
	cr_assert_eq(pod_log_tail(dir, "rot", "c", 30, &lines, &n, &err), 0);
	cr_assert_eq(n, 30);   /* more than one file holds */
	for (size_t i = 0; i < n; i++) {
		char want[64];
		snprintf(want, sizeof want, "line %03zu padding-padding", 70 + i);
		cr_expect(record_ok(lines[i], "stdout", want), "%zu: %s", i,
		          lines[i]);
	}
	pod_log_lines_free(lines, n);
	cr_assert_eq(pod_log_tail(dir, "rot", "c", 0, &lines, &n, &err), 0);
	cr_expect(n > 30 && n < 100, "%zu lines", n);   /* oldest dropped */
	pod_log_lines_free(lines, n);
	lt_rmrf(dir);
}

Test(launcher, log_tail_of_unknown_container_and_bad_names)
{
	char dir[] = "/tmp/tank-log-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	char **lines;
	size_t n = 9;
	tank_error_t err;
	cr_expect_eq(pod_log_tail(dir, "none", "c", 5, &lines, &n, &err), 0);
	cr_expect_eq(n, 0);
	pod_log_lines_free(lines, n);
	cr_expect_eq(pod_log_tail(dir, "../etc", "c", 5, &lines, &n, &err),
	             TANK_EINVALID);
	pod_log_t *w;
	pod_log_opts_t lo = { .dir = dir, .pod = "p", .container = ".." };
	cr_expect_eq(pod_log_open(&lo, &w, &err), TANK_EINVALID);
	lt_rmrf(dir);
}

/* The text of a record of stream, or NULL (for texts too long for the
 * pattern of record_ok). */
static const char *rec_body(const char *line, const char *stream)
{
	if (strlen(line) < 32 || line[23] != 'Z' || line[24] != ' ' ||
	    strncmp(line + 25, stream, 6) != 0 || line[31] != ' ')
		return NULL;
	return line + 32;
}

static int log_fds_open(void)
{
	int n = 0;
	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* An idle writer holds no fd and a few hundred bytes; a partial line
 * waits in the spool, not on the heap, across feeds (one record in the
 * end); while writing, the log and the two spools are open, and all
 * three are closed at an EOF with nothing pending. */
Test(launcher, log_idle_writer_is_small_and_holds_no_fd)
{
	char dir[] = "/tmp/tank-log-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	pod_log_opts_t lo = { .dir = dir, .pod = "p", .container = "c" };
	pod_log_t *w;
	tank_error_t err;
	int fds = log_fds_open();
	cr_assert_eq(pod_log_open(&lo, &w, &err), 0, "%s", err.msg);
	size_t idle = pod_log_heap_bytes(w);
	cr_expect(idle > 0 && idle <= 512, "idle writer holds %zu bytes", idle);
	cr_expect_eq(log_fds_open(), fds, "an idle writer holds an fd");
	char chunk[300];
	memset(chunk, 'y', sizeof chunk);
	for (int i = 0; i < 10; i++)
		cr_expect_eq(pod_log_feed(w, POD_LOG_STDOUT, chunk, sizeof chunk),
		             0);
	cr_expect_eq(pod_log_heap_bytes(w), idle,
	             "a partial line of 3000 bytes on the heap");
	cr_expect_eq(pod_log_feed(w, POD_LOG_STDOUT, "z\n", 2), 0);
	cr_expect_eq(pod_log_heap_bytes(w), idle);
	cr_expect_eq(pod_log_feed(w, POD_LOG_STDERR, "e\n", 2), 0);
	cr_expect_eq(log_fds_open(), fds + 3, "the log and two spools open while writing");
	cr_expect_eq(pod_log_flush(w, POD_LOG_STDOUT), 0);
	cr_expect_eq(log_fds_open(), fds, "file kept open after EOF");
	/* the next record reopens it, appending */
	cr_expect_eq(pod_log_feed(w, POD_LOG_STDERR, "again\n", 6), 0);
	pod_log_close(w);
	cr_expect_eq(log_fds_open(), fds);
	char **lines;
	size_t n;
	cr_assert_eq(pod_log_tail(dir, "p", "c", 0, &lines, &n, &err), 0);
	cr_assert_eq(n, 3, "got %zu lines", n);
	char want[3002];
	memset(want, 'y', 3000);
	want[3000] = 'z';
	want[3001] = '\0';
	const char *b = rec_body(lines[0], "stdout");
	cr_expect(b && strcmp(b, want) == 0, "long partial line");
	cr_expect(record_ok(lines[1], "stderr", "e"), "%s", lines[1]);
	cr_expect(record_ok(lines[2], "stderr", "again"), "%s", lines[2]);
	pod_log_lines_free(lines, n);
	lt_rmrf(dir);
}

/* However many containers write at once, their daemon holds at most
 * POD_LOG_OPEN_MAX log files open: the writer written least recently
 * gives its file up and reopens it (appending) at its next record, and
 * every record still lands in its own file, in order. */
Test(launcher, log_files_open_at_once_are_bounded_and_nothing_is_lost)
{
	enum { N = POD_LOG_OPEN_MAX * 3 };
	char dir[] = "/tmp/tank-log-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	static pod_log_t *w[N];
	static char names[N][16];
	tank_error_t err;
	int fds = log_fds_open();

	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "c%03d", i);
		pod_log_opts_t lo = { .dir = dir, .pod = "p", .container = names[i] };
		cr_assert_eq(pod_log_open(&lo, &w[i], &err), 0, "%s", err.msg);
	}
	/* A partial line on stderr keeps a writer's file open after each
	 * stdout record (flush_stream closes only with nothing pending). */
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < N; i++) {
			char line[32];
			int n = snprintf(line, sizeof line, "r%d %.15s\n", round, names[i]);
			cr_assert_eq(pod_log_feed(w[i], POD_LOG_STDOUT, line, (size_t)n), 0);
			cr_assert_eq(pod_log_feed(w[i], POD_LOG_STDERR, "part", 4), 0);
			cr_assert_leq(log_fds_open(), fds + POD_LOG_OPEN_MAX,
				      "round %d writer %d: %d fds open", round, i,
				      log_fds_open() - fds);
		}
	cr_assert_eq(log_fds_open(), fds + POD_LOG_OPEN_MAX);
	for (int i = 0; i < N; i++)
		pod_log_close(w[i]);
	cr_assert_eq(log_fds_open(), fds, "every file closed");
	for (int i = 0; i < N; i += 37) {
		char **lines;
		size_t n;
		cr_assert_eq(pod_log_tail(dir, "p", names[i], 0, &lines, &n, &err), 0);
		cr_assert_eq(n, 4, "%s: %zu lines", names[i], n);
		for (int r = 0; r < 3; r++) {
			char want[32];
			snprintf(want, sizeof want, "r%d %.15s", r, names[i]);
			cr_expect(record_ok(lines[r], "stdout", want), "%s", lines[r]);
		}
		cr_expect(record_ok(lines[3], "stderr", "partpartpart"), "%s", lines[3]);
		pod_log_lines_free(lines, n);
	}
	lt_rmrf(dir);
}

/* A max_line above the stack batch: records bigger than the batch are
 * written whole, between the batched ones, in order. */
Test(launcher, log_record_bigger_than_batch_is_whole_and_in_order)
{
	char dir[] = "/tmp/tank-log-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	pod_log_opts_t lo = { .dir = dir, .pod = "p", .container = "c",
	                      .max_line = 300000 };
	pod_log_t *w;
	tank_error_t err;
	cr_assert_eq(pod_log_open(&lo, &w, &err), 0, "%s", err.msg);
	size_t big = 200000;
	char *in = malloc(big + 16);
	memcpy(in, "a\n", 2);
	memset(in + 2, 'b', big);
	memcpy(in + 2 + big, "\nc\n", 3);
	cr_expect_eq(pod_log_feed(w, POD_LOG_STDOUT, in, big + 5), 0);
	pod_log_close(w);
	char **lines;
	size_t n;
	cr_assert_eq(pod_log_tail(dir, "p", "c", 0, &lines, &n, &err), 0);
	cr_assert_eq(n, 3, "got %zu lines", n);
	cr_expect(record_ok(lines[0], "stdout", "a"));
	in[2 + big] = '\0';
	const char *b = rec_body(lines[1], "stdout");
	cr_expect(b && strcmp(b, in + 2) == 0, "big record");
	cr_expect(record_ok(lines[2], "stdout", "c"));
	pod_log_lines_free(lines, n);
	free(in);
	lt_rmrf(dir);
}

/* Lines that cannot be written (a full disk: here the log file is a link
 * to /dev/full, where every write fails with ENOSPC) are counted, whole
 * lines and their bytes, the episode is marked, and it ends with the
 * first write that works again. */
Test(launcher, log_lines_lost_on_a_full_disk_are_counted)
{
	char dir[] = "/tmp/tank-log-XXXXXX", pdir[64], file[96];
	cr_assert(ts_mkdtemp_at(dir));
	pod_log_opts_t lo = { .dir = dir, .pod = "p", .container = "c" };
	pod_log_t *w;
	tank_error_t err;
	uint64_t lines, bytes;
	bool dropping;
	cr_assert_eq(pod_log_open(&lo, &w, &err), 0, "%s", err.msg);
	snprintf(pdir, sizeof pdir, "%s/p", dir);
	snprintf(file, sizeof file, "%s/c.log", pdir);
	(void)unlink(file);
	cr_assert_eq(symlink("/dev/full", file), 0, "%s", strerror(errno));

	pod_log_drops(w, &lines, &bytes, &dropping);
	cr_assert_eq(lines, 0);
	cr_assert_not(dropping);
	cr_assert_eq(pod_log_feed(w, POD_LOG_STDOUT, "one\ntwo\nthr", 11), -ENOSPC);
	pod_log_drops(w, &lines, &bytes, &dropping);
	cr_assert_eq(lines, 2, "%llu lines", (unsigned long long)lines);
	cr_assert(dropping);
	cr_assert_gt(bytes, 2 * 25, "a record is a timestamp, the stream and the text");
	cr_assert_eq(pod_log_feed(w, POD_LOG_STDERR, "four\n", 5), -ENOSPC);
	/* The partial "thr" is written (and lost) at EOF. */
	cr_assert_eq(pod_log_flush(w, POD_LOG_STDOUT), -ENOSPC);
	pod_log_drops(w, &lines, NULL, &dropping);
	cr_assert_eq(lines, 4, "%llu lines", (unsigned long long)lines);
	cr_assert_eq(pod_log_drop_episode(w), 4);

	/* The disk has room again (the file is closed after the flush: the
	 * next record opens a real file). */
	cr_assert_eq(unlink(file), 0);
	cr_assert_eq(pod_log_feed(w, POD_LOG_STDOUT, "five\n", 5), 0);
	pod_log_drops(w, &lines, NULL, &dropping);
	cr_assert_eq(lines, 4, "the count stays");
	cr_assert_not(dropping, "the episode is over");
	cr_assert_eq(pod_log_drop_episode(w), 4, "the last episode's count");
	pod_log_close(w);
	char **ls;
	size_t n;
	cr_assert_eq(pod_log_tail(dir, "p", "c", 0, &ls, &n, &err), 0);
	cr_assert_eq(n, 1);
	cr_assert(record_ok(ls[0], "stdout", "five"), "%s", ls[0]);
	pod_log_lines_free(ls, n);
	lt_rmrf(dir);
}

/* --- exactly once across a kill -9 (the spool, issue 35) ---------------- */

static pod_log_step_t crash_step;
static int crash_left;

static void crash_hook(pod_log_step_t s)
{
	if (s == crash_step && --crash_left == 0)
		raise(SIGKILL);
}

/* Drains both read ends into w until both are at EOF (or the deadline). */
static int drain_both(pod_log_t *w, int out, int err, double secs)
{
	bool eof[2] = { false, false };
	double end = lt_now() + secs;
	while (!(eof[0] && eof[1]) && lt_now() < end) {
		struct pollfd pf[2] = { { .fd = eof[0] ? -1 : out, .events = POLLIN },
		                        { .fd = eof[1] ? -1 : err, .events = POLLIN } };
		poll(pf, 2, 100);
		for (int i = 0; i < 2; i++) {
			if (eof[i] || !pf[i].revents)
				continue;
			int r = pod_log_drain_fd(w, (pod_log_stream_t)i, i ? err : out);
			if (r < 0)
				return r;
			eof[i] = r == 1;
		}
	}
	return eof[0] && eof[1] ? 0 : -ETIMEDOUT;
}

/* Writes "o1".."oN" on out and "e1".."eN" on err, every 7th line in two
 * writes a moment apart (a partial line waits in the spool), pausing
 * now and then (the drain goes in many rounds); then exits (EOF). */
static pid_t produce(int out, int err, int n)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid)
		return pid;
	for (int i = 1; i <= n; i++) {
		char l[32];
		for (int s = 0; s < 2; s++) {
			int k = snprintf(l, sizeof l, "%c%d\n", s ? 'e' : 'o', i);
			int fd = s ? err : out, half = i % 7 == 0 ? k / 2 : k;
			if (write(fd, l, (size_t)half) != half)
				_exit(1);
			if (half < k) {
				usleep(500);
				if (write(fd, l + half, (size_t)(k - half)) != k - half)
					_exit(1);
			}
		}
		if (i % 25 == 0)
			usleep(1000);
	}
	_exit(0);
}

/* Every line of both streams once, in order; "" or what is wrong. */
static const char *check_once(const char *dir, const char *pod, int n, char *why, size_t cap)
{
	char **lines;
	size_t cnt;
	tank_error_t err;
	int want[2] = { 1, 1 };
	why[0] = '\0';
	if (pod_log_tail(dir, pod, "c", 0, &lines, &cnt, &err) < 0) {
		snprintf(why, cap, "tail: %.200s", err.msg);
		return why;
	}
	for (size_t i = 0; i < cnt && !why[0]; i++) {
		const char *b;
		int s = (b = rec_body(lines[i], "stdout")) ? 0 : (b = rec_body(lines[i], "stderr")) ? 1 : -1;
		if (s < 0 || b[0] != (s ? 'e' : 'o') || atoi(b + 1) != want[s])
			snprintf(why, cap, "record %zu is \"%.100s\" where %c%d was due", i, lines[i],
			         s ? 'e' : 'o', s < 0 ? 0 : want[s]);
		else
			want[s]++;
	}
	if (!why[0] && (want[0] != n + 1 || want[1] != n + 1))
		snprintf(why, cap, "%d stdout and %d stderr lines of %d", want[0] - 1, want[1] - 1, n);
	pod_log_lines_free(lines, cnt);
	return why;
}

static off_t file_size(const char *dir, const char *pod, const char *name)
{
	char p[256];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s/%s", dir, pod, name);
	return stat(p, &st) == 0 ? st.st_size : -1;
}

/* For each step of the drain/format/commit sequence and a few of its
 * occurrences, a child draining two pipes into a writer is SIGKILLed
 * right after it; a new writer on the same pipes (the parent kept their
 * read ends, as the keeper does) and files drains the rest.  Every line
 * of both streams is in the log once and in order, across partial lines
 * and rotations (a 4 KiB max_bytes: some 25 of them), and the spools end
 * as bare headers. */
Test(launcher, log_every_line_once_across_a_kill_at_each_step, .timeout = 240)
{
	enum { N = 1500 };
	static const int nth[] = { 1, 4, 19 };
	char dir[] = "/tmp/tank-log-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	int runs = 0;
	for (int k = 0; k < POD_LOG_STEP_N; k++)
		for (size_t j = 0; j < sizeof nth / sizeof nth[0]; j++) {
			/* a spool shrinks at its EOF: once a stream */
			if (k == POD_LOG_STEP_SHRUNK && nth[j] > 2)
				continue;
			char pod[32], why[512];
			int po[2], pe[2];
			snprintf(pod, sizeof pod, "k%d-%d", k, nth[j]);
			pod_log_opts_t lo = { .dir = dir, .pod = pod, .container = "c",
			                      .max_bytes = 4096, .keep = 200, .max_line = 64 };
			cr_assert_eq(pipe2(po, O_CLOEXEC), 0);
			cr_assert_eq(pipe2(pe, O_CLOEXEC), 0);
			fcntl(po[0], F_SETFL, O_NONBLOCK);
			fcntl(pe[0], F_SETFL, O_NONBLOCK);
			pid_t prod = produce(po[1], pe[1], N);
			ts_own_pid(prod);
			close(po[1]);
			close(pe[1]);
			pid_t drainer = fork();
			cr_assert_geq(drainer, 0);
			if (drainer == 0) {
				pod_log_t *w;
				crash_step = (pod_log_step_t)k;
				crash_left = nth[j];
				pod_log_step_hook = crash_hook;
				if (pod_log_open(&lo, &w, NULL) < 0 ||
				    drain_both(w, po[0], pe[0], 60) < 0)
					_exit(2);
				pod_log_close(w);
				_exit(0);
			}
			ts_own_pid(drainer);
			int st;
			cr_assert_eq(waitpid(drainer, &st, 0), drainer);
			cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
			          "step %d #%d: the drainer was not killed there (status %#x)",
			          k, nth[j], st);
			pod_log_t *w;
			tank_error_t err;
			cr_assert_eq(pod_log_open(&lo, &w, &err), 0, "%s", err.msg);
			cr_assert_eq(drain_both(w, po[0], pe[0], 60), 0);
			pod_log_close(w);
			lt_wait(prod, 10);
			close(po[0]);
			close(pe[0]);
			cr_assert_str_empty(check_once(dir, pod, N, why, sizeof why),
			                    "killed after step %d #%d: %s", k, nth[j], why);
			cr_expect_eq(file_size(dir, pod, "c.stdout.spool"), 64, "%s", pod);
			cr_expect_eq(file_size(dir, pod, "c.stderr.spool"), 64, "%s", pod);
			cr_expect_gt(file_size(dir, pod, "c.log.20"), 0, "%s: rotated", pod);
			runs++;
		}
	cr_assert_eq(runs, 3 * (POD_LOG_STEP_N - 1) + 1);
	lt_rmrf(dir);
}

/* A partial line in the spool when the writer dies: its rest, written
 * after, joins it into one record (not two), with the time of its first
 * byte; and nothing of it is on the heap meanwhile. */
Test(launcher, log_partial_line_across_a_kill_is_one_record)
{
	char dir[] = "/tmp/tank-log-XXXXXX";
	cr_assert(ts_mkdtemp_at(dir));
	pod_log_opts_t lo = { .dir = dir, .pod = "p", .container = "c" };
	int po[2];
	cr_assert_eq(pipe2(po, O_CLOEXEC | O_NONBLOCK), 0);
	cr_assert_eq(write(po[1], "first\nhello wor", 15), 15);
	pid_t drainer = fork();
	cr_assert_geq(drainer, 0);
	if (drainer == 0) {
		pod_log_t *w;
		if (pod_log_open(&lo, &w, NULL) < 0 || pod_log_drain_fd(w, POD_LOG_STDOUT, po[0]) != 0)
			_exit(2);
		raise(SIGKILL);
	}
	ts_own_pid(drainer);
	int st;
	cr_assert_eq(waitpid(drainer, &st, 0), drainer);
	cr_assert(WIFSIGNALED(st), "status %#x", st);
	cr_assert_eq(file_size(dir, "p", "c.stdout.spool"), 64 + 15);
	sleep(1);   /* the rest comes a second later */
	cr_assert_eq(write(po[1], "ld\n", 3), 3);
	close(po[1]);
	pod_log_t *w;
	tank_error_t err;
	cr_assert_eq(pod_log_open(&lo, &w, &err), 0, "%s", err.msg);
	cr_assert_eq(pod_log_drain_fd(w, POD_LOG_STDOUT, po[0]), 1);
	pod_log_close(w);
	close(po[0]);
	char **lines;
	size_t n;
	cr_assert_eq(pod_log_tail(dir, "p", "c", 0, &lines, &n, &err), 0);
	cr_assert_eq(n, 2, "got %zu records", n);
	cr_expect(record_ok(lines[0], "stdout", "first"), "%s", lines[0]);
	cr_expect(record_ok(lines[1], "stdout", "hello world"), "%s", lines[1]);
	/* the time of its first byte, kept in the spool's header */
	cr_expect_eq(strncmp(lines[0], lines[1], 23), 0, "%s / %s", lines[0], lines[1]);
	pod_log_lines_free(lines, n);
	cr_expect_eq(file_size(dir, "p", "c.stdout.spool"), 64);
	lt_rmrf(dir);
}

/* The spool does not grow without bound: formatted through, it is cut
 * back to its header once it holds 256 KiB; one that keeps a partial
 * line at every drain has its formatted bytes punched out (its blocks
 * freed) while its size goes on. */
Test(launcher, log_spool_shrinks_back)
{
	char dir[] = "/tmp/tank-log-XXXXXX", sp[128];
	cr_assert(ts_mkdtemp_at(dir));
	pod_log_opts_t lo = { .dir = dir, .pod = "p", .container = "c", .max_bytes = 64 << 20 };
	pod_log_t *w;
	tank_error_t err;
	char line[101];
	struct stat st;
	memset(line, 'x', 99);
	line[99] = '\n';
	cr_assert_eq(pod_log_open(&lo, &w, &err), 0, "%s", err.msg);
	snprintf(sp, sizeof sp, "%s/p/c.stdout.spool", dir);
	off_t most = 0;
	for (int i = 0; i < 6000; i++) {      /* 600 KB of whole lines */
		cr_assert_eq(pod_log_feed(w, POD_LOG_STDOUT, line, 100), 0);
		cr_assert_eq(stat(sp, &st), 0);
		if (st.st_size > most)
			most = st.st_size;
	}
	cr_expect_leq(most, 64 + (256 << 10), "the spool grew to %lld", (long long)most);
	cr_expect_lt(st.st_size, 64 + (256 << 10));
	/* now never at a line's end: 50 x, then "49 x\n50 x" again and again */
	char two[100];
	memcpy(two, line + 50, 50);
	memcpy(two + 50, line, 50);
	cr_assert_eq(pod_log_feed(w, POD_LOG_STDOUT, line, 50), 0);
	for (int i = 0; i < 6000; i++)
		cr_assert_eq(pod_log_feed(w, POD_LOG_STDOUT, two, 100), 0);
	cr_assert_eq(stat(sp, &st), 0);
	cr_expect_gt(st.st_size, 512 << 10, "formatted bytes stay in the size");
	cr_expect_lt((long long)st.st_blocks * 512, 2 << 20, "%lld bytes on disk for %lld",
	             (long long)st.st_blocks * 512, (long long)st.st_size);
	pod_log_close(w);
	cr_assert_eq(stat(sp, &st), 0);
	cr_expect_eq(st.st_size, 64, "empty after the close");
	cr_expect_eq(file_size(dir, "p", "c.log"), 12000 * (32 + 100) + 32 + 51,
	             "every record written");
	lt_rmrf(dir);
}

/* A rotation stopped between two renames (a kill -9) leaves one
 * generation missing; tail reads across that gap, and stops at two. */
Test(launcher, log_tail_reads_across_a_gap_a_halted_rotation_left)
{
	char dir[] = "/tmp/tank-log-XXXXXX", p[160];
	cr_assert(ts_mkdtemp_at(dir));
	snprintf(p, sizeof p, "%s/p", dir);
	cr_assert_eq(mkdir(p, 0750), 0);
	static const char *const files[] = { "c.log", "c.log.1", "c.log.3", "c.log.6" };
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof p, "%s/p/%s", dir, files[i]);
		FILE *f = fopen(p, "w");
		cr_assert_not_null(f);
		fprintf(f, "2026-11-22T03:04:05.123Z stdout %s\n", files[i]);
		fclose(f);
	}
	char **lines;
	size_t n;
	tank_error_t err;
	cr_assert_eq(pod_log_tail(dir, "p", "c", 0, &lines, &n, &err), 0);
	cr_assert_eq(n, 3, "got %zu records", n);
	cr_expect(record_ok(lines[0], "stdout", "c.log.3"), "%s", lines[0]);
	cr_expect(record_ok(lines[2], "stdout", "c.log"), "%s", lines[2]);
	pod_log_lines_free(lines, n);
	lt_rmrf(dir);
}
