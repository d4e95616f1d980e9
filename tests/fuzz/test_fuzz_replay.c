/*
 * Replays every seed (tests/fuzz/corpus/<target>/) and every input that
 * once failed (tests/fuzz/regress/<target>/) through the fuzz targets, in
 * the normal build and, under `make SAN=1 test`, with ASan and UBSan: a
 * regression found by `make fuzz` stays found.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_targets.h"

static int replay_dir(const tf_target_t *t, const char *kind)
{
	char dir[1024];
	const char *src = getenv("TANK_SRC_DIR");
	snprintf(dir, sizeof dir, "%s/tests/fuzz/%s/%s", src ? src : ".", kind, t->name);
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[2048];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "rb");
		if (!f)
			continue;
		static uint8_t buf[1 << 20];
		size_t len = fread(buf, 1, sizeof buf, f);
		fclose(f);
		/* A heap copy of exactly len bytes, so ASan sees a read past
		 * the end as the fuzzer would. */
		uint8_t *copy = malloc(len ? len : 1);
		cr_assert_not_null(copy);
		memcpy(copy, buf, len);
		cr_assert_eq(t->fn(copy, len), 0, "%s: %s", t->name, path);
		free(copy);
		n++;
	}
	closedir(d);
	return n;
}

Test(fuzz, every_seed_and_every_past_failure_replays_cleanly)
{
	int total = 0;
	for (int i = 0; i < TF_NTARGETS; i++) {
		int seeds = replay_dir(&tf_targets[i], "corpus");
		cr_assert_gt(seeds, 0, "target %s has no seed corpus (TANK_SRC_DIR?)",
			     tf_targets[i].name);
		total += seeds + replay_dir(&tf_targets[i], "regress");
	}
	cr_assert_gt(total, 4 * 3);
}
