/*
 * What docs/cli.md promises of logs and of tankd's errors (issue 40 item
 * 11): every container's lines, each prefixed with its name; `logs -f`
 * returning once the pod ended and its log is drained; an error of
 * tankd's naming the file and document as local errors do, once.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/e2e/e2e.h"

/* `logs POD` of a two-container pod showed the first container only. */
Test(e2e, logs_of_a_pod_shows_every_container_prefixed)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "two.yaml",
		   "name: two\ncontainers:\n"
		   "  - {name: a, command: [/bin/sh, -c, 'echo from-a; exec /bin/sleep 1050']}\n"
		   "  - {name: b, command: [/bin/sh, -c, 'sleep 0.2; echo from-b; exec /bin/sleep 1051']}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/two.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert(wait_says(d, 10, "from-b", "logs two"));
	cr_assert_eq(ctl(d, out, sizeof out, "logs two"), 0, "%s", out);
	char *a = strstr(out, "[a] "), *b = strstr(out, "[b] ");
	cr_assert(a && b && a < b, "both, in time order: %s", out);
	cr_assert(strstr(a, "stdout from-a\n") && strstr(b, "stdout from-b\n"), "%s", out);
	/* -c: that container's, unprefixed, as before. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs two -c b"), 0, "%s", out);
	cr_assert(strstr(out, "stdout from-b\n") && !strstr(out, "from-a") && !strstr(out, "[b]"),
		  "%s", out);
	teardown(d);
}

/* `logs -f` of a pod that ended returns (it never did), with every line;
 * of one that ends while followed, once it ended and its log is drained. */
Test(e2e, logs_follow_returns_once_the_pod_ended)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "job.yaml",
		   "name: once\nrestart: never\ncontainers:\n"
		   "  - {name: c, command: [/bin/sh, -c, 'echo one; sleep 1; echo two']}\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/job.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 10, "once", "ps"));
	sleep_ms(300);
	/* While it runs: -f returns after its last line. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs once -f"), 0, "%s", out);
	cr_assert(strstr(out, "stdout one\n") && strstr(out, "stdout two\n"), "%s", out);
	cr_assert(phase_is(d, "once", "terminal"));
	/* Ended already: returns at once, with everything. */
	cr_assert_eq(ctl(d, out, sizeof out, "logs once -f"), 0, "%s", out);
	cr_assert(strstr(out, "stdout one\n") && strstr(out, "stdout two\n"), "%s", out);
	teardown(d);
}

/* tankd's refusal named `pods[2]` and printed its first line twice;
 * local errors name the file and the document. */
Test(e2e, errors_from_tankd_name_the_file_and_document_once)
{
	d_t *d = setup();
	char out[8192];

	write_file(d, "ok.yaml", "name: e0\ncontainers: [{name: c, command: [/bin/sleep, '1052']}]\n");
	write_file(d, "err.yaml",
		   "name: e1\ncontainers: [{name: c, command: [/bin/sleep, '1053']}]\n---\n"
		   "name: e2\ncontainers: [{name: c, command: [/nope]}]\n---\n"
		   "name: e3\ndepends_on: [{pod: ghost}]\n"
		   "containers: [{name: c, command: [/bin/sleep, '1054']}]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/ok.yaml -f %s/err.yaml", d->dir, d->dir),
		     1, "%s", out);
	cr_assert(strstr(out, "tankctl: apply: 2 errors:\n"), "%s", out);
	cr_assert(strstr(out, "err.yaml: document 2: e2: containers[0].command[0]: /nope: not found"),
		  "%s", out);
	cr_assert(strstr(out, "err.yaml: document 3: e3: depends_on[0].pod: no pod named \"ghost\""),
		  "%s", out);
	cr_assert(!strstr(out, "pods["), "%s", out);
	char *first = strstr(out, "/nope: not found");
	cr_assert(first && !strstr(first + 1, "/nope: not found"), "once: %s", out);
	teardown(d);
}
