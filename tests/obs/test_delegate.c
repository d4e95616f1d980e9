/*
 * cgroup delegation (pod/pod_cgroup.h pod_cgroup_delegate) on a fake v2
 * mount in a temporary directory: nothing moves unless the group is
 * delegated (or forced); when it is, the daemon's process is written into
 * SELF/supervisor and the groups' base becomes SELF.  Then on the
 * machine's own v2 hierarchy, when tankd uses it: a real tankd (and a
 * keeper) started in a group made as systemd makes a Delegate=yes unit's.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "pod/pod_cgroup.h"
#include "tests/obs/obs_t.h"

static void touch(const char *path)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fclose(f);
}

Test(obs_delegate, groups_go_below_a_delegated_own_group)
{
	char dir[128], p[512], got[64], want[32];
	pod_cgroup_env_t env;
	tank_error_t e;
	bool del;

	cr_assert_not_null(ts_mkdtemp(dir, sizeof dir, "tank-deleg"));
	snprintf(p, sizeof p, "%s/system.slice", dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/system.slice/tankd.service", dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/system.slice/tankd.service/supervisor", dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/system.slice/tankd.service/supervisor/cgroup.procs", dir);
	touch(p);

	memset(&env, 0, sizeof env);
	env.mode = POD_CGROUP_V2;
	snprintf(env.v2_mount, sizeof env.v2_mount, "%s", dir);
	snprintf(env.root, sizeof env.root, "tank-1");
	tank_error_clear(&e);

	/* v1 or none: nothing to do. */
	env.mode = POD_CGROUP_V1;
	cr_assert_eq(pod_cgroup_delegate(&env, "/system.slice/tankd.service", true, &del, &e), 0);
	cr_assert_not(del);
	env.mode = POD_CGROUP_V2;
	/* The root group never moves; an unmarked group only when forced. */
	cr_assert_eq(pod_cgroup_delegate(&env, "/", true, &del, &e), 0);
	cr_assert_not(del);
	cr_assert_eq(pod_cgroup_delegate(&env, "/system.slice/tankd.service", false, &del, &e), 0);
	cr_assert_not(del, "moved without the delegate mark");
	cr_assert_str_eq(env.v2_mount, dir);

	/* Marked as systemd marks it (user.delegate where trusted.* is not
	 * ours to set), or forced. */
	snprintf(p, sizeof p, "%s/system.slice/tankd.service", dir);
	bool marked = setxattr(p, "user.delegate", "1", 1, 0) == 0;
	cr_assert_eq(pod_cgroup_delegate(&env, "/system.slice/tankd.service", !marked, &del, &e),
		     0, "%s", e.msg);
	cr_assert(del);
	cr_assert_str_eq(env.v2_mount, p);
	snprintf(p, sizeof p, "%s/system.slice/tankd.service/supervisor/cgroup.procs", dir);
	read_text(p, got, sizeof got);
	snprintf(want, sizeof want, "%d", (int)getpid());
	cr_assert_str_eq(got, want, "the daemon did not move itself into the leaf");
	/* A tankd started again by its keeper (or a reexec) is in the leaf
	 * already: the base stays the unit's group, so the pods' groups keep
	 * their paths and are adopted. */
	snprintf(env.v2_mount, sizeof env.v2_mount, "%s", dir);
	cr_assert_eq(pod_cgroup_delegate(&env, "/system.slice/tankd.service/supervisor", true, &del,
					 &e), 0, "%s", e.msg);
	cr_assert(del);
	snprintf(p, sizeof p, "%s/system.slice/tankd.service", dir);
	cr_assert_str_eq(env.v2_mount, p, "not a supervisor below the supervisor");
	ts_cleanup();
}

/* ---- on the machine's own cgroup v2 hierarchy -------------------------------- */

/* The units' groups this test made (as systemd makes a Delegate=yes
 * unit's, afresh at each start), removed by deleg_fini even when an
 * assertion failed; g_unit is the current one. */
static char g_units[2][POD_CGROUP_PATH + 64];
#define g_unit g_units[g_run]
static int g_run;

/* Kills what is left in dir and below, then removes the groups, deepest
 * first. */
static void cg_remove(const char *dir)
{
	char p[sizeof g_unit + 300];
	DIR *d;
	struct dirent *de;

	snprintf(p, sizeof p, "%s/cgroup.kill", dir);
	FILE *k = fopen(p, "we");
	if (k) {
		fputs("1", k);
		fclose(k);
	}
	if ((d = opendir(dir))) {
		while ((de = readdir(d)))
			if (de->d_type == DT_DIR && de->d_name[0] != '.') {
				snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
				cg_remove(p);
			}
		closedir(d);
	}
	for (int i = 0; i < 100 && rmdir(dir) < 0 && errno == EBUSY; i++)
		usleep(20000);     /* the killed processes leave the group as they are reaped */
}

static void deleg_fini(void)
{
	ts_cleanup();
	for (int i = 0; i < 2; i++)
		if (g_units[i][0])
			cg_remove(g_units[i]);
}

/* The "0::/path" line of /proc/PID/cgroup, into out ("" when none). */
static void cg_of(pid_t pid, char *out, size_t cap)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
	out[0] = '\0';
	read_text(path, buf, sizeof buf);
	if ((p = strstr(buf, "0::/"))) {
		size_t n = strcspn(p + 3, "\n");
		snprintf(out, cap, "%.*s", (int)n, p + 3);
	}
}

/* tankd (extra flags) started inside the unit's group, as systemd starts
 * a unit's main process: the child moves itself before the exec. */
static pid_t tankd_in(d_t *d, const char *unit, const char *extra)
{
	char bin[600], logp[128], procs[sizeof g_unit + 16];
	pid_t pid;

	snprintf(bin, sizeof bin, "%s/tankd", bindir());
	snprintf(logp, sizeof logp, "%s/tankd.log", d->dir);
	snprintf(procs, sizeof procs, "%s/cgroup.procs", unit);
	ts_own_daemon_root(d->dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		FILE *f = fopen(procs, "we");
		if (!f || fputs("0", f) < 0 || fclose(f) != 0)
			_exit(126);
		execl(bin, "tankd", "--data-dir", d->dir, "--resync", "300",
		      "--cgroup-delegate", "yes", extra, (char *)NULL);
		_exit(127);
	}
	ts_own_pid(pid);
	d->pid = pid;
	for (int i = 0; i < 200 && !up(d); i++)
		sleep_ms(50);
	return pid;
}

/* One run: tankd (with extra: "--keeper" or NULL) in the unit's group;
 * a pod's container is below the unit, beside tankd's own leaf, and its
 * group goes with the pod. */
static void deleg_run(const char *rel, const char *extra)
{
	d_t *d = d_new();
	char out[4096], cg[512], own[512], root[64], want[600], pod_dir[sizeof g_unit + 700];
	pid_t keeper = tankd_in(d, g_unit, extra);
	long cpid = -1;

	cr_assert(up(d), "tankd in %s did not come up", g_unit);
	ts_daemon_root(d->dir, root, sizeof root);
	write_file(d, "web.yaml", "name: web\ncontainers:\n  - name: c\n"
		   "    command: [/bin/sleep, \"600\"]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml --wait", d->dir), 0, "%s", out);
	for (int i = 0; i < 100 && cpid <= 0; i++, sleep_ms(50))
		cpid = status_num(d, "web", "pid");
	cr_assert_gt(cpid, 0, "no container pid");

	/* tankd (and its keeper) in the unit's leaf ... */
	snprintf(want, sizeof want, "%s/supervisor", rel);
	cg_of(keeper, own, sizeof own);
	cr_assert_str_eq(own, want, "%s is not in the unit's leaf", extra ? "the keeper" : "tankd");
	/* ... the container below the unit, in its own group. */
	cg_of((pid_t)cpid, cg, sizeof cg);
	snprintf(want, sizeof want, "%s/%s/web.", rel, root);
	cr_assert(!strncmp(cg, want, strlen(want)), "the container is in %s, not below %s", cg, want);
	cr_assert(strlen(cg) > strlen(want) + 8 && !strcmp(cg + strlen(want) + 8, "/c"),
		  "the container is in %s", cg);
	snprintf(pod_dir, sizeof pod_dir, "%.*s", (int)(strlen(g_unit) - strlen(rel)), g_unit);
	snprintf(pod_dir + strlen(pod_dir), sizeof pod_dir - strlen(pod_dir), "%.*s",
		 (int)(strlen(cg) - 2), cg);
	struct stat sb;
	cr_assert_eq(stat(pod_dir, &sb), 0, "%s", pod_dir);

	/* Deleting the pod removes its group. */
	cr_assert_eq(ctl(d, out, sizeof out, "delete web --wait"), 0, "%s", out);
	bool gone = false;
	for (int i = 0; i < 200 && !gone; i++, sleep_ms(50))
		gone = stat(pod_dir, &sb) < 0 && errno == ENOENT;
	cr_assert(gone, "%s is still there after the pod was deleted", pod_dir);
	stop(d, SIGTERM);
	teardown(d);
}

Test(obs_delegate, on_the_real_v2_hierarchy_pods_go_below_tankds_own_group,
     .fini = deleg_fini, .timeout = 120)
{
	pod_cgroup_env_t env;
	tank_error_t e;
	char rel[64];

	tank_error_clear(&e);
	if (geteuid() != 0)
		cr_skip_test("cgroup delegation needs root to make a unit's group");
	if (pod_cgroup_probe(&env, NULL, "tank-deleg", &e) < 0 || env.mode != POD_CGROUP_V2)
		cr_skip_test("tankd does not use cgroup v2 here (no unified hierarchy offering "
			     "memory, pids and cpu: v1 or hybrid host), so it delegates nothing");
	/* The controllers handed down to the units, as systemd does (set
	 * already on a systemd host). */
	char sub[POD_CGROUP_PATH + 32];
	snprintf(sub, sizeof sub, "%s/cgroup.subtree_control", env.v2_mount);
	FILE *f = fopen(sub, "we");
	if (f) {
		fputs("+memory +pids +cpu", f);
		fclose(f);
	}
	/* Where systemd would put a unit: a group of the hierarchy's root,
	 * made afresh for each start (a group that handed controllers down
	 * takes no process: the keeper's run needs its own). */
	static const char *const extra[2] = { NULL, "--keeper" };
	for (g_run = 0; g_run < 2; g_run++) {
		snprintf(rel, sizeof rel, "/tank-deleg-%d-%d", (int)getpid(), g_run);
		snprintf(g_unit, sizeof g_unit, "%s%s", env.v2_mount, rel);
		if (mkdir(g_unit, 0755) < 0) {
			int err = errno;
			g_unit[0] = '\0';
			cr_skip_test("cgroup v2 at %s is not writable: %s", env.v2_mount,
				     strerror(err));
		}
		deleg_run(rel, extra[g_run]);
	}
}
