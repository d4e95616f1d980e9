/* A data dir written by the release before object ids (schema 1, commit
 * 40fcc54: tankd ran three pods — one completed, one crash-looping, one
 * sleeping — and was stopped) opens with this code: pods, generations,
 * status, restart counts and history intact, every pod given a uid by the
 * migration, and the uids stable across later opens. */
#include <criterion/criterion.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/st.h"
#include "store/st_coll.h"
#include "store_util.h"
#include "tests/support/tsupport.h"

/* Each test's data dir (g_rdir): removed by rdir_clean, the tests' .fini,
 * whatever the test's end (a failed assertion included). */
static char g_rdir[64];

static void rdir_clean(void)
{
	if (g_rdir[0])
		stu_rmrf(g_rdir);
}

static void unpack_fixture(char *dir, size_t cap)
{
	const char *src = getenv("TANK_SRC_DIR");
	char cmd[1024];

	snprintf(dir, cap, "/tmp/tank-mig-XXXXXX");
	cr_assert_not_null(ts_mkdtemp_at(dir));
	snprintf(cmd, sizeof cmd, "tar xzf %s/tests/store/fixtures/v1-datadir.tar.gz -C %s",
		 src ? src : ".", dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* The length of a pod's history; its entries, written before schema 3,
 * read back legacy, numbered from 1, as the pod's (kind, key, uid). */
static size_t history_len(st_t *st, const char *name)
{
	st_transition_t *t = NULL;
	size_t n = 0;
	st_pod_t p;
	cr_assert_eq(st_history(st, name, 0, &t, &n, NULL), 0);
	cr_assert_eq(st_pod_get(st, name, &p, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		cr_assert(t[i].legacy);
		cr_assert_eq(t[i].seq, i + 1);
		cr_assert_str_eq(t[i].kind, "pod");
		cr_assert_str_eq(t[i].key, name);
		cr_assert_str_eq(t[i].uid, p.uid);
	}
	st_pod_clear(&p);
	free(t);
	return n;
}

Test(store, schema1_data_dir_opens_after_upgrade_with_everything_kept, .fini = rdir_clean)
{
	char *dir = g_rdir, uids[3][ST_UID_LEN + 1];
	static const char *const names[] = { "crash", "done", "sleeper" };
	tank_error_t e;
	st_t *st;
	st_pod_t *pods;
	size_t n;

	unpack_fixture(dir, sizeof g_rdir);
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
}

/* Identity: re-applying an object keeps its uid; deleting and creating
 * the same name gives a new uid and generation 1 again. */
Test(store, delete_then_create_is_a_new_object, .fini = rdir_clean)
{
	char *dir = g_rdir;
	tank_error_t e;
	st_t *st;
	st_apply_result_t r1, r2, r3, r4;
	st_pod_in_t a = { "web", "\x81\xa1x\x01", 4 }, b = { "web", "\x81\xa1x\x02", 4 };
	const char *names[] = { "web" };

	stu_tmpdir(dir, sizeof g_rdir);
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
}

/* ---- schema 2 (with stacks) → 3 ------------------------------------------ */

static const st_coll_decl_t mig_stacks = { .name = "stacks", .noun = "stack" };

static void unpack(const char *archive, char *dir, size_t cap)
{
	const char *src = getenv("TANK_SRC_DIR");
	char cmd[1024];

	snprintf(dir, cap, "/tmp/tank-mig-XXXXXX");
	cr_assert_not_null(ts_mkdtemp_at(dir));
	snprintf(cmd, sizeof cmd, "tar xzf %s/tests/store/fixtures/%s -C %s",
		 src ? src : ".", archive, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* Old entries are legacy, numbered 1..n with kind, key and uid derived. */
static void check_legacy(const st_transition_t *t, size_t n, const char *kind,
			 const char *key, const char *uid)
{
	for (size_t i = 0; i < n; i++) {
		cr_assert(t[i].legacy, "%s #%zu", key, i);
		cr_assert_eq(t[i].seq, i + 1, "%s #%zu: seq %llu", key, i,
			     (unsigned long long)t[i].seq);
		cr_assert_str_eq(t[i].kind, kind);
		cr_assert_str_eq(t[i].key, key);
		cr_assert_str_eq(t[i].uid, uid);
		cr_assert(t[i].at > 0 && t[i].to[0], "%s #%zu", key, i);
	}
}

/* A data dir of the release before schema 3, with a stack in it
 * (tests/store/fixtures/README.md), opens with this code: every pod, its
 * status and its history where they were, the stack's collection
 * untouched, the pods' old databases gone, and the history readable in
 * the new shape (old entries legacy, new ones chained after them). */
Test(store, schema2_data_dir_with_stacks_opens_after_upgrade_with_everything_kept,
     .fini = rdir_clean)
{
	static const char *const names[] = { "batch", "crashloop", "shop-db", "shop-web", "web" };
	static const size_t hist[] = { 4, 80, 6, 8, 6 };
	char *dir = g_rdir, uids[5][ST_UID_LEN + 1], suid[ST_UID_LEN + 1];
	tank_error_t e;
	st_t *st;
	st_pod_t *pods;
	size_t n;

	unpack("v2-stacks-datadir.tar.gz", dir, sizeof g_rdir);
	for (int round = 0; round < 2; round++) {
		st_coll_t *stacks;
		st_transition_t *t;
		st_status_t s;
		st_pod_t sp;
		void *b;
		size_t bl;

		cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
		cr_assert_eq(st_pod_list(st, &pods, &n, &e), 0, "%s", e.msg);
		cr_assert_eq(n, 5);
		for (size_t i = 0; i < n; i++) {
			cr_assert_str_eq(pods[i].name, names[i]);
			cr_assert_eq(strlen(pods[i].uid), ST_UID_LEN);
			if (round == 0)
				memcpy(uids[i], pods[i].uid, sizeof uids[i]);
			else
				cr_assert_str_eq(pods[i].uid, uids[i]);
			cr_assert_eq(st_history(st, names[i], 0, &t, &bl, &e), 0, "%s", e.msg);
			cr_assert_eq(bl, hist[i] + (size_t)round, "%s: %zu entries", names[i], bl);
			check_legacy(t, hist[i], "pod", names[i], uids[i]);
			if (round == 1) {   /* the entry added at round 0: chained on */
				cr_assert_not(t[hist[i]].legacy);
				cr_assert_eq(t[hist[i]].seq, hist[i] + 1);
				cr_assert_str_eq(t[hist[i]].from, t[hist[i] - 1].to);
				cr_assert_str_eq(t[hist[i]].kind, "pod");
				cr_assert_str_eq(t[hist[i]].uid, uids[i]);
			}
			free(t);
		}
		st_pod_list_free(pods, n);

		memset(&s, 0, sizeof s);
		cr_assert_eq(st_status_get(st, "batch", &s, &e), 0, "%s", e.msg);
		cr_assert_str_eq(s.phase, "terminal");
		cr_assert_str_eq(s.reason, "completed");
		st_status_clear(&s);
		cr_assert_eq(st_status_get(st, "crashloop", &s, &e), 0, "%s", e.msg);
		cr_assert_str_eq(s.phase, "backing_off");
		cr_assert_eq(s.restarts, 20);
		cr_assert_eq(s.n_containers, 1);
		cr_assert_eq(s.containers[0].last_exit.code, 3);
		st_status_clear(&s);
		/* A clean stop leaves the pods it stopped pending. */
		cr_assert_eq(st_status_get(st, "shop-web", &s, &e), 0, "%s", e.msg);
		cr_assert_str_eq(s.phase, "pending");
		st_status_clear(&s);

		cr_assert_eq(st_coll_open(st, &mig_stacks, &stacks, &e), 0, "%s", e.msg);
		cr_assert_eq(st_coll_get(stacks, "shop", &sp, &e), 0, "%s", e.msg);
		if (round == 0)
			memcpy(suid, sp.uid, sizeof suid);
		cr_assert_str_eq(sp.uid, suid);
		st_pod_clear(&sp);
		cr_assert_eq(st_coll_status_get(stacks, "shop", &b, &bl, &e), 0, "%s", e.msg);
		free(b);
		cr_assert_eq(st_coll_history(stacks, "shop", 0, &t, &bl, &e), 0, "%s", e.msg);
		cr_assert_eq(bl, 3);
		check_legacy(t, 3, "stack", "shop", suid);
		cr_assert_str_eq(t[2].to, "up");
		free(t);

		if (round == 0)
			for (size_t i = 0; i < 5; i++) {
				st_transition_t nt = { .at = 1 };
				st_transition_t *h;
				size_t hn;
				cr_assert_eq(st_history(st, names[i], 0, &h, &hn, &e), 0);
				snprintf(nt.from, sizeof nt.from, "%s", h[hn - 1].to);
				snprintf(nt.to, sizeof nt.to, "stopping");
				free(h);
				cr_assert_eq(st_transition_add(st, names[i], &nt), 0);
			}
		cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
		/* The pods' databases of schema 2 are gone. */
		cr_assert_eq(stu_mdb_entries(dir, "status"), -1);
		cr_assert_eq(stu_mdb_entries(dir, "transitions"), -1);
		cr_assert_eq(stu_mdb_entries(dir, "pods.status"), 5);
	}
}

/* ---- the environment's reopen once quiet (issue 38, item 2) ------------- */

static long rss_anon_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "RssAnon: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static void reopen_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)w; (void)revents;
}

/* Runs the loop until the store's map left this process (a trim or a
 * reopen ended a quiet period), or 15 s.  st_usage would read the store
 * and so end the quiet: the map's Rss tells instead. */
static void run_until_quiet(struct ev_loop *loop, const char *dir)
{
	ev_timer tick;
	ev_timer_init(&tick, reopen_tick, 0.1, 0.1);
	ev_timer_start(loop, &tick);
	for (int64_t end = stu_now_ms() + 15000;
	     stu_map_rss_kib(dir) > 16 && stu_now_ms() < end;)
		ev_run(loop, EVRUN_ONCE);
	ev_timer_stop(loop, &tick);
}

/* LMDB frees the pages its write transactions dirtied only when its
 * environment closes: after one big transaction the quiet store closes
 * and reopens it (st.c env_reopen), and malloc has those pages back.
 * On a migrated store (its databases' handles were numbered around the
 * migration's own), with a second collection open: after the reopen
 * every database is found by name again, so every record, status and
 * history entry reads back and the next writes land where they should. */
Test(store, a_quiet_store_reopens_after_a_big_write_and_frees_its_dirty_pages,
     .fini = rdir_clean)
{
	enum { N = 3000 };
	char *dir = g_rdir, spec[600];
	tank_error_t e;
	st_t *st;
	st_coll_t *stacks;
	st_usage_t u;
	st_pod_t p;
	st_status_t s;
	st_transition_t *t;
	size_t n;

	unpack("v2-stacks-datadir.tar.gz", dir, sizeof g_rdir);
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_not_null(loop);
	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(st, &mig_stacks, &stacks, &e), 0, "%s", e.msg);
	cr_assert_eq(st_attach_loop(st, loop), 0);

	/* A small write does not reopen (below ST_REOPEN_WRITES). */
	st_pod_in_t *in = calloc(N, sizeof *in);
	st_apply_result_t *res = calloc(N, sizeof *res);
	char (*names)[16] = calloc(N, sizeof *names);
	cr_assert(in && res && names);
	memset(spec, 's', sizeof spec);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "big%05d", i);
		in[i] = (st_pod_in_t){ .name = names[i], .spec = spec, .spec_len = sizeof spec };
	}
	cr_assert_eq(st_apply(st, in, 10, res, &e), 0, "%s", e.msg);
	run_until_quiet(loop, dir);
	cr_assert_eq(st_usage(st, &u), 0);
	cr_assert_eq(u.map_trims, 1, "the small write's quiet period ended in no trim");
	cr_assert_eq(u.env_reopens, 0, "a write of 10 records reopened the environment");

	/* One write of N records: reopened once quiet, its pages freed. */
	cr_assert_eq(st_apply(st, in, N, res, &e), 0, "%s", e.msg);
	long rss0 = rss_anon_kib();
	run_until_quiet(loop, dir);
	long rss1 = rss_anon_kib();
	cr_assert_eq(st_usage(st, &u), 0);
	cr_assert_eq(u.env_reopens, 1, "the store was not reopened after a write of %d records",
		     N);
	cr_assert_eq(u.map_trims, 1, "a reopen is not counted as a trim");
#if !defined(__SANITIZE_ADDRESS__)
	/* The write dirtied ~3 MB of pages (N records of 600 bytes and
	 * their index entries); at least 1 MB of it left the process.  (ASan's
	 * allocator keeps freed memory in quarantine: not measured there.) */
	cr_assert_geq(rss0 - rss1, 1024, "anonymous Rss %ld KiB after the reopen, %ld before",
		      rss1, rss0);
#else
	(void)rss0; (void)rss1;
#endif

	/* Everything reads back through the new environment's handles. */
	cr_assert_eq(st_pod_get(st, "big02999", &p, &e), 0, "%s", e.msg);
	cr_assert_eq(p.spec_len, sizeof spec);
	st_pod_clear(&p);
	cr_assert_eq(st_pod_get(st, "crashloop", &p, &e), 0, "%s", e.msg);
	st_pod_clear(&p);
	cr_assert_eq(st_history(st, "crashloop", 0, &t, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n, 80);
	free(t);
	cr_assert_eq(st_coll_get(stacks, "shop", &p, &e), 0, "%s", e.msg);
	st_pod_clear(&p);
	cr_assert_eq(st_coll_history(stacks, "shop", 0, &t, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n, 3);
	free(t);
	/* And the next writes land in the right databases. */
	memset(&s, 0, sizeof s);
	stu_status(&s, "big00001", "running", 2);
	cr_assert_eq(st_status_put(st, &s), 0);
	st_transition_t nt = { .at = 1 };
	snprintf(nt.from, sizeof nt.from, "pending");
	snprintf(nt.to, sizeof nt.to, "running");
	cr_assert_eq(st_transition_add(st, "big00001", &nt), 0);
	cr_assert_eq(st_flush(st, &e), 0, "%s", e.msg);
	free(in);
	free(res);
	free(names);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
	ev_loop_destroy(loop);

	cr_assert_eq(stu_mdb_entries(dir, "pods"), 5 + N);
	cr_assert_eq(stu_mdb_entries(dir, "pods.status"), 6);
	cr_assert_eq(stu_mdb_entries(dir, "stacks"), 1);
	cr_assert_eq(st_open(dir, NULL, &st, &e), 0, "%s", e.msg);
	memset(&s, 0, sizeof s);
	cr_assert_eq(st_status_get(st, "big00001", &s, &e), 0, "%s", e.msg);
	cr_assert_str_eq(s.phase, "running");
	st_status_clear(&s);
	cr_assert_eq(st_history(st, "big00001", 0, &t, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(t[0].to, "running");
	free(t);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
}

/* The reopen is for the same file only: with the data file renamed
 * away under the store (an operator's mistake), a reopen would open a
 * new, empty store and tankd would stop what runs.  The store keeps its
 * open environment, gives its map back as any quiet store does, and
 * every record still reads. */
Test(store, a_store_whose_file_was_moved_away_is_not_reopened, .fini = rdir_clean)
{
	enum { N = 1500 };
	char *dir = g_rdir, from[128], to[128];
	tank_error_t e;
	st_usage_t u;
	st_pod_t p;

	stu_tmpdir(dir, sizeof g_rdir);
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_not_null(loop);
	st_t *st = stu_open(dir, NULL);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	st_pod_in_t *in = calloc(N, sizeof *in);
	st_apply_result_t *res = calloc(N, sizeof *res);
	char (*names)[16] = calloc(N, sizeof *names);
	cr_assert(in && res && names);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "p%05d", i);
		in[i] = (st_pod_in_t){ .name = names[i], .spec = "spec", .spec_len = 4 };
	}
	cr_assert_eq(st_apply(st, in, N, res, &e), 0, "%s", e.msg);
	snprintf(from, sizeof from, "%s/store/data.mdb", dir);
	snprintf(to, sizeof to, "%s/store/data.mdb.moved", dir);
	cr_assert_eq(rename(from, to), 0);
	run_until_quiet(loop, dir);
	cr_assert_eq(st_usage(st, &u), 0);
	cr_assert_eq(u.env_reopens, 0, "reopened on a path that names no store");
	cr_assert_eq(u.map_trims, 1);
	cr_assert_eq(st_pod_get(st, "p01499", &p, &e), 0, "%s", e.msg);
	st_pod_clear(&p);
	cr_assert_eq(rename(to, from), 0);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
	ev_loop_destroy(loop);
	free(in);
	free(res);
	free(names);
}
