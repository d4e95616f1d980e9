/*
 * pod_usage_read (pod/pod_top.h) on cgroup files laid out as v2 and v1
 * show them, and its /proc fallback on a real process.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pod/pod_top.h"
#include "tests/support/tsupport.h"

static void put(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

Test(launcher, usage_from_v2_and_v1_groups_and_from_proc)
{
	char root[] = "/tmp/tank-top-XXXXXX", v1cpu[600], v1mem[600], v1pids[600], me[32];
	pod_usage_t u;

	cr_assert(ts_mkdtemp_at(root));
	snprintf(me, sizeof me, "%d\n", (int)getpid());
	/* v2: one directory. */
	put(root, "cpu.stat", "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n");
	put(root, "memory.current", "5678\n");
	put(root, "cgroup.procs", me);
	pod_cgroup_t cg2 = { .mode = POD_CGROUP_V2, .dir = { root } };
	cr_assert_eq(pod_usage_read(&cg2, getpid(), &u), 0);
	cr_assert(u.from_cgroup);
	cr_assert_eq(u.cpu_usec, 1234);
	cr_assert_eq(u.mem_bytes, 5678);
	cr_assert_eq(u.procs, 1);

	/* v1: a group per controller; cpuacct.usage is in ns. */
	snprintf(v1cpu, sizeof v1cpu, "%s/cpu", root);
	snprintf(v1mem, sizeof v1mem, "%s/mem", root);
	snprintf(v1pids, sizeof v1pids, "%s/pids", root);
	cr_assert_eq(mkdir(v1cpu, 0700), 0);
	cr_assert_eq(mkdir(v1mem, 0700), 0);
	cr_assert_eq(mkdir(v1pids, 0700), 0);
	put(v1cpu, "cpuacct.usage", "7000000\n");
	put(v1mem, "memory.usage_in_bytes", "9999\n");
	put(v1pids, "cgroup.procs", me);
	pod_cgroup_t cg1 = { .mode = POD_CGROUP_V1 };
	cg1.dir[POD_CG_CPU] = v1cpu;
	cg1.dir[POD_CG_MEMORY] = v1mem;
	cg1.dir[POD_CG_PIDS] = v1pids;
	cr_assert_eq(pod_usage_read(&cg1, getpid(), &u), 0);
	cr_assert(u.from_cgroup);
	cr_assert_eq(u.cpu_usec, 7000);
	cr_assert_eq(u.mem_bytes, 9999);
	/* v1 without memory and cpu groups (no limits): /proc of its group's
	 * processes — this test process, which has resident memory. */
	cg1.dir[POD_CG_CPU] = "";
	cg1.dir[POD_CG_MEMORY] = "";
	cr_assert_eq(pod_usage_read(&cg1, getpid(), &u), 0);
	cr_assert(!u.from_cgroup);
	cr_assert_eq(u.procs, 1);
	cr_assert_gt(u.mem_bytes, 0);
	/* No group: the process itself; a process that is gone: -ENOENT. */
	cr_assert_eq(pod_usage_read(NULL, getpid(), &u), 0);
	cr_assert_gt(u.mem_bytes, 0);
	cr_assert_eq(pod_usage_read(NULL, 0, &u), -ENOENT);
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf %s", root);
	cr_assert_eq(system(cmd), 0);
}

/* A group of thousands of processes: its cgroup.procs is read a piece
 * at a time, a pid cut by a piece's end read whole (here: this process,
 * listed 3,000 times, 20 KB).  The resident memory comes from
 * /proc/PID/stat's rss, the figure /proc/PID/statm gives. */
Test(launcher, usage_of_a_big_group_and_rss_from_stat)
{
	char root[] = "/tmp/tank-top-XXXXXX", me[32];
	pod_usage_t u;
	enum { N = 3000 };

	cr_assert(ts_mkdtemp_at(root));
	int ml = snprintf(me, sizeof me, "%d\n", (int)getpid());
	char *list = malloc((size_t)ml * N + 1);
	cr_assert_not_null(list);
	for (int i = 0; i < N; i++)
		memcpy(list + (size_t)i * (size_t)ml, me, (size_t)ml);
	list[(size_t)ml * N] = '\0';
	put(root, "cgroup.procs", list);
	free(list);
	pod_cgroup_t cg1 = { .mode = POD_CGROUP_V1 };
	cg1.dir[POD_CG_CPU] = "";
	cg1.dir[POD_CG_MEMORY] = "";
	cg1.dir[POD_CG_PIDS] = root;
	cr_assert_eq(pod_usage_read(&cg1, getpid(), &u), 0);
	cr_assert(!u.from_cgroup);
	cr_assert_eq(u.procs, N);

	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%*u %llu", &pages), 1);
	fclose(f);
	cr_assert_eq(pod_usage_read(NULL, getpid(), &u), 0);
	double statm = (double)pages * (double)sysconf(_SC_PAGESIZE);
	cr_assert(u.mem_bytes > 0.8 * statm && u.mem_bytes < 1.25 * statm,
		  "rss %llu bytes from stat, %.0f from statm", (unsigned long long)u.mem_bytes, statm);
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf %s", root);
	cr_assert_eq(system(cmd), 0);
}
