/*
 * tankd's own stop (SIGTERM) with many pods: every stop that may go goes
 * in one pass, so the graces run at once (no pod gets SIGKILL while
 * another still waits for its SIGTERM), and depends_on still orders it,
 * dependents first, level by level (issue 38, item 6 (c)).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

#define NPODS 200

/* Lines in path (0 when it cannot be read). */
static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	int n = 0, ch;

	if (!f)
		return 0;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

/* Whether pid runs (exists and is not a zombie). */
static bool runs(pid_t pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	read_text(path, buf, sizeof buf);
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] && rp[2] != 'Z' && rp[2] != 'X';
}

/* 200 pods whose shell ignores SIGTERM (its trap notes it in a file the
 * pods share), grace 3 s.  Every one is noted before any is killed: when
 * the 200th line is there, the 200 shells all still run. */
Test(stop, every_pod_gets_its_sigterm_before_any_gets_sigkill)
{
	d_t *d = setup();
	char terms[128], pids[128], arg[32], out[4096];
	size_t cap = (size_t)NPODS * 320, len = 0;
	char *y = malloc(cap);
	const char *const sleeper[] = { "/bin/sleep", arg, NULL };

	cr_assert_not_null(y);
	snprintf(terms, sizeof terms, "%s/terms", d->dir);
	snprintf(pids, sizeof pids, "%s/pids", d->dir);
	snprintf(arg, sizeof arg, "4244.%d", (int)getpid());
	for (int i = 0; i < NPODS; i++)
		len += (size_t)snprintf(y + len, cap - len,
			"%sname: t%03d\nstop: {grace: 3s}\ncontainers:\n"
			"  - name: c\n    command: [/bin/sh, -c, \"trap 'echo t%03d >> %s' TERM; "
			"echo $$ >> %s; while :; do /bin/sleep %s & wait $!; done\"]\n",
			i ? "---\n" : "", i, i, terms, pids, arg);
	write_file(d, "many.yaml", y);
	free(y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/many.yaml", d->dir), 0, "%s", out);
	for (int t = 0; t < 2400 && count_lines(pids) < NPODS; t++)
		sleep_ms(25);
	cr_assert_eq(count_lines(pids), NPODS, "every shell started and set its trap");

	pid_t shell[NPODS];
	FILE *f = fopen(pids, "r");
	cr_assert_not_null(f);
	for (int i = 0; i < NPODS; i++)
		cr_assert_eq(fscanf(f, "%d", &shell[i]), 1);
	fclose(f);

	cr_assert_eq(kill(d->pid, SIGTERM), 0);
	for (int t = 0; t < 1000 && count_lines(terms) < NPODS; t++)
		sleep_ms(10);
	int alive = 0;
	for (int i = 0; i < NPODS; i++)
		alive += runs(shell[i]);
	cr_assert_eq(count_lines(terms), NPODS, "every pod got its SIGTERM");
	cr_assert_eq(alive, NPODS, "none was killed before the last got its SIGTERM");

	/* Then SIGKILL after the grace (a second SIGTERM would kill them at
	 * once: only waited for): tankd exits 0, nothing of them left. */
	int st = 0;
	cr_assert_eq(waitpid(d->pid, &st, 0), d->pid);
	d->pid = 0;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	alive = 0;
	for (int i = 0; i < NPODS; i++)
		alive += runs(shell[i]);
	cr_assert_eq(alive, 0, "every shell was killed after its grace");
	cr_assert_eq(count_procs(sleeper), 0, "and what it started");
	teardown(d);
}

/* Four chains of three pods, c<i> -> b<i> -> a<i> (c depends on b, b on
 * a); each notes its name on SIGTERM, b and c a moment later, and exits.
 * In tankd's stop, which sends every stop it may at once, each chain
 * still stops dependents first: c, then b once c is gone, then a. */
Test(stop, dependents_stop_first_in_every_chain_at_once)
{
	d_t *d = setup();
	char order[128], y[8192], out[8192], got[512];
	size_t len = 0;

	snprintf(order, sizeof order, "%s/order", d->dir);
	for (int i = 0; i < 4; i++)
		for (int lv = 0; lv < 3; lv++) {
			char name[8], dep[64] = "";
			snprintf(name, sizeof name, "%c%d", 'a' + lv, i);
			if (lv)
				snprintf(dep, sizeof dep, "depends_on: [{pod: %c%d}]\n", 'a' + lv - 1, i);
			len += (size_t)snprintf(y + len, sizeof y - len,
				"%sname: %s\n%scontainers: [{name: c, command: [/bin/sh, -c, "
				"\"trap '%secho %s >> %s; exit 0' TERM; while :; do /bin/sleep 0.05; "
				"done\"]}]\n", len ? "---\n" : "", name, dep,
				lv ? "/bin/sleep 0.2; " : "", name, order);
		}
	cr_assert_lt(len, sizeof y);
	write_file(d, "chains.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/chains.yaml --wait --timeout 60s",
			 d->dir), 0, "%s", out);
	cr_assert_eq(stop(d, SIGTERM), 0);
	read_text(order, got, sizeof got);
	for (int i = 0; i < 4; i++) {
		char a[8], b[8], c[8];
		snprintf(a, sizeof a, "a%d\n", i);
		snprintf(b, sizeof b, "b%d\n", i);
		snprintf(c, sizeof c, "c%d\n", i);
		const char *pa = strstr(got, a), *pb = strstr(got, b), *pc = strstr(got, c);
		cr_assert(pa && pb && pc, "chain %d: every pod stopped: %s", i, got);
		cr_assert(pc < pb && pb < pa, "chain %d: c, then b, then a: %s", i, got);
	}
	teardown(d);
}
