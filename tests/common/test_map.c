#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/tank_map.h"
#include "common/tank_err.h"

Test(common, map_put_get_del_under_churn)
{
	tank_map_t m;
	char key[32];
	void *old;
	tank_map_init(&m);
	for (intptr_t i = 0; i < 20000; i++) {
		snprintf(key, sizeof key, "pod-%ld", (long)i);
		cr_assert_eq(tank_map_put(&m, key, (void *)(i + 1), &old), 0);
		cr_assert_null(old);
	}
	cr_assert_eq(m.len, 20000);
	/* Delete every third key; the rest must stay reachable. */
	for (intptr_t i = 0; i < 20000; i += 3) {
		snprintf(key, sizeof key, "pod-%ld", (long)i);
		cr_assert_eq(tank_map_del(&m, key), (void *)(i + 1));
	}
	for (intptr_t i = 0; i < 20000; i++) {
		snprintf(key, sizeof key, "pod-%ld", (long)i);
		void *v = tank_map_get(&m, key);
		if (i % 3 == 0)
			cr_assert_null(v, "%s still there", key);
		else
			cr_assert_eq(v, (void *)(i + 1), "%s lost", key);
	}
	cr_assert_eq(tank_map_put(&m, "pod-1", (void *)7, &old), 0);
	cr_assert_eq(old, (void *)2);
	size_t it = 0, n = 0;
	const char *k;
	while (tank_map_next(&m, &it, &k, NULL))
		n++;
	cr_assert_eq(n, m.len);
	cr_assert_null(tank_map_del(&m, "absent"));
	tank_map_destroy(&m);
}

Test(common, strerror_names_both_kinds)
{
	cr_assert_str_eq(tank_strerror(TANK_ELOCKED), "data dir in use");
	cr_assert_str_eq(tank_strerror(-ENOENT), "No such file or directory");
	tank_error_t e;
	cr_assert_eq(tank_error_set(&e, TANK_EINVALID, "x: %d", 3), TANK_EINVALID);
	cr_assert_str_eq(e.msg, "x: 3");
}
