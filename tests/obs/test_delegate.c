/*
 * cgroup delegation (pod/pod_cgroup.h pod_cgroup_delegate) on a fake v2
 * mount in a temporary directory: nothing moves unless the group is
 * delegated (or forced); when it is, the daemon's process is written into
 * SELF/supervisor and the groups' base becomes SELF.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
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
