/* A data dir written by the release before object ids (schema 1, commit
 * 40fcc54: tankd ran three pods — one completed, one crash-looping, one
 * sleeping — and was stopped) opens with this code: pods, generations,
 * status, restart counts and history intact, every pod given a uid by the
 * migration, and the uids stable across later opens. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/st.h"

static void unpack_fixture(char *dir, size_t cap)
{
	const char *src = getenv("TANK_SRC_DIR");
	char cmd[1024];

	snprintf(dir, cap, "/tmp/tank-mig-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof cmd, "tar xzf %s/tests/store/fixtures/v1-datadir.tar.gz -C %s",
		 src ? src : ".", dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static size_t history_len(st_t *st, const char *name)
{
	st_transition_t *t = NULL;
	size_t n = 0;
	cr_assert_eq(st_history(st, name, 0, &t, &n, NULL), 0);
	free(t);
	return n;
}

Test(store, schema1_data_dir_opens_after_upgrade_with_everything_kept)
{
	char dir[64], cmd[128], uids[3][ST_UID_LEN + 1];
	static const char *const names[] = { "crash", "done", "sleeper" };
	tank_error_t e;
	st_t *st;
	st_pod_t *pods;
	size_t n;

	unpack_fixture(dir, sizeof dir);
	for (int round = 0; round < 2; round++) {
		cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
		cr_assert_eq(st_pod_list(st, &pods, &n, &e), 0, "%s", e.msg);
		cr_assert_eq(n, 3);
		for (size_t i = 0; i < n; i++) {
			cr_assert_str_eq(pods[i].name, names[i]);
			cr_assert_eq(pods[i].generation, 1);
			cr_assert_eq(strlen(pods[i].uid), ST_UID_LEN, "%s: uid \"%s\"",
				     pods[i].name, pods[i].uid);
			cr_assert_eq(pods[i].uid[14], '4');     /* UUIDv4 */
			if (round == 0)
				memcpy(uids[i], pods[i].uid, sizeof uids[i]);
			else    /* assigned once, by the migration */
				cr_assert_str_eq(pods[i].uid, uids[i]);
		}
		cr_assert_str_neq(uids[0], uids[1]);
		cr_assert_str_neq(uids[1], uids[2]);
		st_pod_list_free(pods, n);

		st_status_t s;
		memset(&s, 0, sizeof s);
		cr_assert_eq(st_status_get(st, "crash", &s, &e), 0, "%s", e.msg);
		cr_assert_str_eq(s.phase, "backing_off");
		cr_assert_eq(s.restarts, 15);
		cr_assert_eq(s.n_containers, 1);
		cr_assert_eq(s.containers[0].last_exit.code, 1);
		st_status_clear(&s);
		cr_assert_eq(st_status_get(st, "done", &s, &e), 0, "%s", e.msg);
		cr_assert_str_eq(s.phase, "terminal");
		cr_assert_str_eq(s.reason, "completed");   /* a run-once pod stays done */
		st_status_clear(&s);
		cr_assert_eq(history_len(st, "crash"), 61);
		cr_assert_eq(history_len(st, "done"), 5);
		cr_assert_eq(history_len(st, "sleeper"), 7);
		cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* Identity: re-applying an object keeps its uid; deleting and creating
 * the same name gives a new uid and generation 1 again. */
Test(store, delete_then_create_is_a_new_object)
{
	char dir[64] = "/tmp/tank-uid-XXXXXX", cmd[96];
	tank_error_t e;
	st_t *st;
	st_apply_result_t r1, r2, r3, r4;
	st_pod_in_t a = { "web", "\x81\xa1x\x01", 4 }, b = { "web", "\x81\xa1x\x02", 4 };
	const char *names[] = { "web" };

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_apply(st, &a, 1, &r1, &e), 0, "%s", e.msg);
	cr_assert_eq(st_apply(st, &b, 1, &r2, &e), 0, "%s", e.msg);
	cr_assert_eq(r2.action, ST_CONFIGURED);
	cr_assert_eq(r2.generation, 2);
	cr_assert_str_eq(r2.uid, r1.uid);
	cr_assert_eq(st_apply(st, &b, 1, &r3, &e), 0, "%s", e.msg);
	cr_assert_eq(r3.action, ST_UNCHANGED);
	cr_assert_str_eq(r3.uid, r1.uid);
	cr_assert_eq(st_delete(st, names, 1, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(st_apply(st, &a, 1, &r4, &e), 0, "%s", e.msg);
	cr_assert_eq(r4.action, ST_CREATED);
	cr_assert_eq(r4.generation, 1);
	cr_assert_str_neq(r4.uid, r1.uid);
	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "web", &p, &e), 0, "%s", e.msg);
	cr_assert_str_eq(p.uid, r4.uid);
	st_pod_clear(&p);
	st_close(st, NULL);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}
