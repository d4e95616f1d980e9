/* pod_spec_same_run (which changes restart a pod) and pod_host_check
 * (what tankd refuses at apply), on specs loaded from YAML. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tank_err.h"
#include "manifest/mf_doc.h"
#include "pod/pod_host.h"
#include "pod/pod_spec.h"

static pod_spec_t *load(const char *yaml)
{
	kit_errors_t errs;
	mf_docs_t *docs = NULL;
	pod_spec_t *spec = NULL;

	kit_errors_init(&errs);
	cr_assert_eq(mf_docs_load(yaml, strlen(yaml), "t.yaml", &docs, &errs), 0);
	cr_assert_eq(pod_spec_from_msgpack(&docs->docs[0], &spec, &errs), 0, "%s",
		     errs.stored ? errs.msgs[0] : "?");
	mf_docs_free(docs);
	kit_errors_free(&errs);
	return spec;
}

#define BASE "name: web\ncontainers: [{name: c, command: [/bin/sleep, '9']}]\n"

Test(podspec, only_reconcile_wait_leaves_the_run_the_same)
{
	pod_spec_t *a = load(BASE "reconcile_wait: 2s\n");
	pod_spec_t *b = load(BASE "reconcile_wait: {exponential: {wait: 1s}}\n");
	pod_spec_t *c = load(BASE);
	pod_spec_t *d = load(BASE "backoff: {base: 1s}\n");
	pod_spec_t *e = load("name: web\ncontainers: [{name: c, command: [/bin/sleep, '8']}]\n");

	cr_expect(pod_spec_same_run(a, b));
	cr_expect(pod_spec_same_run(b, c));
	cr_expect(pod_spec_same_run(c, c));
	cr_expect_not(pod_spec_same_run(c, d), "backoff restarts");
	cr_expect_not(pod_spec_same_run(a, e), "a command restarts");
	pod_spec_free(a);
	pod_spec_free(b);
	pod_spec_free(c);
	pod_spec_free(d);
	pod_spec_free(e);
}

static char *host_errors(const char *yaml, size_t *n)
{
	pod_spec_t *s = load(yaml);
	kit_errors_t errs;

	kit_errors_init(&errs);
	*n = pod_host_check(s, &errs);
	cr_assert_eq(*n, errs.count);
	char *j = errs.count ? kit_errors_join(&errs) : strdup("");
	kit_errors_free(&errs);
	pod_spec_free(s);
	return j;
}

Test(podspec, host_check_refuses_only_what_is_certain)
{
	size_t n;
	char *out, yaml[1024];

	/* Found: an absolute command, one in PATH, an env PATH, a numeric user. */
	out = host_errors("name: ok\ncontainers:\n"
			  "  - {name: a, command: [/bin/sh], working_dir: /tmp, user: '0:0'}\n"
			  "  - {name: b, command: [sh]}\n"
			  "  - {name: c, command: [sh], env: {PATH: /nowhere:/bin}}\n"
			  "  - {name: d, command: [sh], env: {PATH: 'rel:/nowhere'}}\n", &n);
	cr_expect_eq(n, 0, "%s", out);
	free(out);
	/* Under a volume's mount point: the volume decides, not looked at. */
	out = host_errors("name: vol\nisolation: {namespaces: [mount]}\n"
			  "volumes: [{name: v, host_path: /tmp}]\n"
			  "containers:\n  - name: a\n    command: [/tmp/no-such-prog-4248]\n"
			  "    mounts: [{volume: v, path: /tmp}]\n", &n);
	cr_expect_eq(n, 0, "%s", out);
	free(out);
	/* Each mistake named. */
	out = host_errors("name: bad\ncontainers:\n"
			  "  - {name: a, command: [/no-such-prog-4248], working_dir: /etc/passwd}\n"
			  "  - {name: b, command: [/tmp], user: 'no-such-user-4248:0'}\n"
			  "  - {name: c, command: [/etc/passwd], user: '0:no-such-group-4248'}\n"
			  "  - name: d\n    command: [no-such-prog-4248]\n"
			  "    readiness: {exec: [/no-such-probe-4248]}\n", &n);
	cr_expect_eq(n, 8, "%s", out);
	static const char *const want[] = {
		"bad: containers[0].command[0]: /no-such-prog-4248: not found",
		"bad: containers[0].working_dir: /etc/passwd: not a directory",
		"bad: containers[1].command[0]: /tmp: is a directory",
		"bad: containers[1].user: unknown user \"no-such-user-4248\"",
		"bad: containers[2].command[0]: /etc/passwd: not executable",
		"bad: containers[2].user: unknown group \"no-such-group-4248\"",
		"bad: containers[3].command[0]: no-such-prog-4248: not found in PATH",
		"bad: containers[3].readiness.exec[0]: /no-such-probe-4248: not found",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		cr_expect(strstr(out, want[i]), "no \"%s\" in\n%s", want[i], out);
	free(out);
	/* A rootfs that is not there. */
	snprintf(yaml, sizeof yaml, "name: r\nisolation: {namespaces: [mount], "
		 "rootfs: /no-such-rootfs-4248}\ncontainers: [{name: a, command: [/bin/sh]}]\n");
	out = host_errors(yaml, &n);
	cr_expect(strstr(out, "r: isolation.rootfs: /no-such-rootfs-4248: No such file or "
			 "directory"), "%s", out);
	free(out);
}

/* The host-limits plan (pod_host_plan): what tankd raises for an apply,
 * and what it refuses with the figures, from numbers alone. */
Test(podspec, host_limits_raise_what_tankd_may_and_refuse_the_rest_with_figures)
{
	pod_host_limits_t l = { .nofile_cur = 20000, .nofile_max = 20000, .nr_open = 1048576,
				.pid_max = 32768, .threads_max = 192730, .tasks = 900 };
	pod_host_plan_t plan;
	tank_error_t e = { 0 };

	/* Fits: nothing to raise. */
	cr_assert_eq(pod_host_plan(&l, 1000, 1000, &plan, &e), 0);
	cr_assert_eq(plan.nofile_cur, 0);
	cr_assert_eq(plan.pid_max, 0);

	/* 10,000 containers: 256 + 2 x 10,000 = 20,256 descriptors, past the
	 * hard limit: soft and hard go to 20,480 (4,096 steps); 10,000 new
	 * processes + 900 running + 512 kept fit pid_max 32,768. */
	cr_assert_eq(pod_host_plan(&l, 10000, 10000, &plan, &e), 0, "%s", e.msg);
	cr_assert_eq(plan.nofile_cur, 20480);
	cr_assert_eq(plan.nofile_max, 20480);
	cr_assert_eq(plan.pid_max, 0);

	/* 40,000 new ones: pid_max goes up to 45,056 (900 + 40,000 + 512, in
	 * 4,096 steps). */
	cr_assert_eq(pod_host_plan(&l, 40000, 40000, &plan, &e), 0, "%s", e.msg);
	cr_assert_eq(plan.pid_max, 45056);
	cr_assert_eq(plan.nofile_cur, 81920);

	/* pidfds held for orphaned adopted processes count while held: 9,872
	 * containers fit 20,000 (256 + 19,744), not with 100 pidfds more. */
	cr_assert_eq(pod_host_plan(&l, 9872, 0, &plan, &e), 0, "%s", e.msg);
	cr_assert_eq(plan.nofile_cur, 0);
	pod_host_limits_t held = l;
	held.held_fds = 100;
	cr_assert_eq(pod_host_plan(&held, 9872, 0, &plan, &e), 0, "%s", e.msg);
	cr_assert_eq(plan.nofile_cur, 20480, "the pidfds are in the need");
	held.nr_open = 20000;
	cr_assert_eq(pod_host_plan(&held, 9872, 0, &plan, &e), TANK_ELIMIT);
	cr_assert(strstr(e.msg, "so it can hold 9822 containers"), "%s", e.msg);

	/* A soft limit below the hard one is raised alone. */
	pod_host_limits_t soft = l;
	soft.nofile_cur = 1024;
	cr_assert_eq(pod_host_plan(&soft, 1000, 0, &plan, &e), 0);
	cr_assert_eq(plan.nofile_cur, 4096);
	cr_assert_eq(plan.nofile_max, 20000);

	/* fs.nr_open bounds it: refused, saying how many it can hold. */
	pod_host_limits_t small = l;
	small.nr_open = 65536;
	cr_assert_eq(pod_host_plan(&small, 40000, 40000, &plan, &e), TANK_ELIMIT);
	cr_assert(strstr(e.msg, "40000 containers would need 80256 descriptors in tankd, "
			 "its limit is 20000 and fs.nr_open caps it at 65536, so it can hold "
			 "32640 containers"), "%s", e.msg);
	cr_assert(strstr(e.msg, "sysctl -w fs.nr_open=81920"), "%s", e.msg);

	/* threads-max: checked only. */
	pod_host_limits_t thr = l;
	thr.threads_max = 20000;
	cr_assert_eq(pod_host_plan(&thr, 25000, 25000, &plan, &e), TANK_ELIMIT);
	cr_assert(strstr(e.msg, "kernel.threads-max is 20000, so it can start 18588 more"),
		  "%s", e.msg);

	/* The tightest pids.max on the pods' cgroup path. */
	pod_host_limits_t cg = l;
	cg.cg_max = 4915;
	cg.cg_cur = 15;
	snprintf(cg.cg_path, sizeof cg.cg_path, "/sys/fs/cgroup/system.slice/tank.service");
	cr_assert_eq(pod_host_plan(&cg, 5000, 5000, &plan, &e), TANK_ELIMIT);
	cr_assert(strstr(e.msg, "the cgroup /sys/fs/cgroup/system.slice/tank.service allows "
			 "4915 (pids.max) and holds 15, so it can start 4900 more"), "%s", e.msg);
	cr_assert_eq(pod_host_plan(&cg, 5000, 4900, &plan, &e), 0, "%s", e.msg);

	/* Past the kernel's own pid ceiling. */
	cr_assert_eq(pod_host_plan(&l, 10, 5000000, &plan, &e), TANK_ELIMIT);
	cr_assert(strstr(e.msg, "allows at most 4194304 pids, so it can start 4192892 more"),
		  "%s", e.msg);
}

/* The clients' room (pod_host_conn_room_plan): their share of the reserve
 * plus what the limit holds beyond the containers' two each, the held
 * pidfds and the reserve; never less than the floor. */
Test(podspec, client_connections_get_their_share_and_the_slack_never_the_containers_fds)
{
	/* 9,700 containers at 20,000: 20,000 + 64 - (19,400 + 256) = 408. */
	cr_assert_eq(pod_host_conn_room_plan(20000, 9700, 0), 408);
	/* 9,872 (the most that fit): the share alone, 64 - (19,744 + 256 - 20,000). */
	cr_assert_eq(pod_host_conn_room_plan(20000, 9872, 0), 64);
	/* Held pidfds count. */
	cr_assert_eq(pod_host_conn_room_plan(20000, 9700, 8), 400);
	/* Past the budget (a limit lowered under tankd): the floor. */
	cr_assert_eq(pod_host_conn_room_plan(512, 300, 0), POD_HOST_CONN_MIN);
	/* Few containers: plenty (the server's max_conns caps it). */
	cr_assert_eq(pod_host_conn_room_plan(20000, 10, 0), 20000 + 64 - 276);
	cr_assert_eq(pod_host_conn_room_plan(UINT64_MAX, 10, 0), SIZE_MAX);
}
