/*
 * Shared static helpers of the store tests (header-only so every test file
 * stays self-contained in the single test binary: everything is static).
 */
#ifndef TANK_TESTS_STORE_UTIL_H
#define TANK_TESTS_STORE_UTIL_H

#include <criterion/criterion.h>
#include <ftw.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <time.h>
#include <unistd.h>

#include "store/st.h"

static inline int stu_rm_cb(const char *p, const struct stat *sb, int flag,
		     struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static inline void stu_rmrf(const char *dir)
{
	nftw(dir, stu_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void stu_tmpdir(char *buf, size_t cap)
{
	snprintf(buf, cap, "/tmp/tank-st-%d-XXXXXX", (int)getpid());
	cr_assert_not_null(mkdtemp(buf), "mkdtemp");
}

static inline st_t *stu_open(const char *dir, const st_options_t *o)
{
	st_t *st = NULL;
	tank_error_t e;
	int rc = st_open(dir, o, &st, &e);
	cr_assert_eq(rc, 0, "st_open(%s): %s", dir, e.msg);
	return st;
}

static inline int64_t stu_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes one raw value into a closed store with plain LMDB, to plant
 * damaged or foreign records. */
static inline void stu_raw_put(const char *dir, const char *db, const void *key,
			size_t keylen, const void *val, size_t vallen)
{
	char path[4096];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	snprintf(path, sizeof path, "%s/store", dir);
	cr_assert_eq(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 16);
	cr_assert_eq(mdb_env_open(env, path, 0, 0600), 0);
	MDB_envinfo info;
	mdb_env_info(env, &info);
	mdb_env_set_mapsize(env, info.me_mapsize);
	cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
	cr_assert_eq(mdb_dbi_open(txn, db, MDB_CREATE, &dbi), 0);
	MDB_val k = { keylen, (void *)key }, v = { vallen, (void *)val };
	cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

/* Number of entries of a named db, read by the separate mdb_stat program so
 * that it sees only what was committed to the file. */
static inline long stu_mdb_entries(const char *dir, const char *db)
{
	char cmd[4200], line[256];
	long n = -1;
	snprintf(cmd, sizeof cmd, "mdb_stat -s %s %s/store 2>&1", db, dir);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, " Entries: %ld", &n) == 1)
			break;
	while (fgets(line, sizeof line, f))
		;
	pclose(f);
	return n;
}

static inline void stu_status(st_status_t *s, const char *name, const char *phase,
		       uint32_t restarts)
{
	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", name);
	snprintf(s->phase, sizeof s->phase, "%s", phase);
	s->restarts = restarts;
}

/* Rss, in KiB, of this process's mappings of dir's data.mdb. */
static inline long stu_map_rss_kib(const char *dir)
{
	char line[1024];
	long rss = 0;
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof line, f)) {
		long v;
		/* A mapping's header begins with its address (lower-case
		 * hex); its fields with a capitalised name. */
		if ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f'))
			in = strstr(line, dir) && strstr(line, "/data.mdb");
		if (in && sscanf(line, "Rss: %ld kB", &v) == 1)
			rss += v;
	}
	fclose(f);
	return rss;
}

/* Path of a helper program built from tests/helpers/NAME.c. */
static inline void stu_helper(char *buf, size_t cap, const char *name)
{
	const char *bd = getenv("TANK_BUILD_DIR");
	cr_assert_not_null(bd, "TANK_BUILD_DIR is not set (run via make test)");
	snprintf(buf, cap, "%s/tests/helpers/%s", bd, name);
	cr_assert_eq(access(buf, X_OK), 0, "no helper %s", buf);
}

/* Starts argv[0] with stdout on out_fd (or inherited when -1).  posix_spawn
 * rather than fork: no atfork handlers of the test framework run in the
 * child. */
static inline pid_t stu_spawn(char *const argv[], int out_fd)
{
	extern char **environ;
	posix_spawn_file_actions_t fa;
	pid_t pid;
	posix_spawn_file_actions_init(&fa);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(rc, 0, "posix_spawn %s: %s", argv[0], strerror(rc));
	return pid;
}

#endif
