#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "common/kit_units.h"

static int dur(const char *s, uint64_t *ms)
{
	return kit_parse_duration(s, strlen(s), ms);
}

static int size(const char *s, uint64_t *b)
{
	return kit_parse_size(s, strlen(s), b);
}

Test(podspec, duration_units)
{
	uint64_t ms = 0;

	cr_assert_eq(dur("250ms", &ms), 0); cr_assert_eq(ms, 250);
	cr_assert_eq(dur("10s", &ms), 0); cr_assert_eq(ms, 10000);
	cr_assert_eq(dur("5m", &ms), 0); cr_assert_eq(ms, 300000);
	cr_assert_eq(dur("1h", &ms), 0); cr_assert_eq(ms, 3600000);
	cr_assert_eq(dur("1500", &ms), 0); cr_assert_eq(ms, 1500);
	cr_assert_eq(dur("0", &ms), 0); cr_assert_eq(ms, 0);
	cr_assert_eq(dur("0s", &ms), 0); cr_assert_eq(ms, 0);
	/* A counted string: the bytes past len are not looked at. */
	cr_assert_eq(kit_parse_duration("10sXYZ", 3, &ms), 0);
	cr_assert_eq(ms, 10000);
}

Test(podspec, duration_rejects_garbage_sign_and_overflow)
{
	uint64_t ms = 77;
	const char *bad[] = { "", "s", "-5s", "+5s", "5 s", " 5s", "5S", "1.5s",
			      "5d", "5sec", "1m30s", "ms", "0x10", "5ms ", NULL };
	size_t i;

	for (i = 0; bad[i]; i++)
		cr_assert_eq(dur(bad[i], &ms), -EINVAL, "%s accepted", bad[i]);
	cr_assert_eq(dur("99999999999999999999999", &ms), -ERANGE);
	cr_assert_eq(dur("9999999999999999h", &ms), -ERANGE);
	cr_assert_eq(dur("9007199254740993", &ms), -ERANGE);
	cr_assert_eq(dur("9007199254740992", &ms), 0);
	cr_assert_eq(ms, (uint64_t)1 << 53);
	cr_assert_eq(kit_parse_duration(NULL, 0, &ms), -EINVAL);
}

Test(podspec, duration_format_shortest_exact)
{
	char b[KIT_UNIT_BUF];
	uint64_t cases[] = { 0, 1, 250, 1000, 1500, 60000, 90000, 3600000,
			     7200000, 5400000, 86400000, (uint64_t)1 << 53 };
	size_t i;

	cr_assert_str_eq(kit_format_duration(0, b), "0s");
	cr_assert_str_eq(kit_format_duration(250, b), "250ms");
	cr_assert_str_eq(kit_format_duration(10000, b), "10s");
	cr_assert_str_eq(kit_format_duration(90000, b), "90s");
	cr_assert_str_eq(kit_format_duration(300000, b), "5m");
	cr_assert_str_eq(kit_format_duration(5400000, b), "90m");
	cr_assert_str_eq(kit_format_duration(7200000, b), "2h");
	for (i = 0; i < sizeof cases / sizeof *cases; i++) {
		uint64_t back = 12345;
		kit_format_duration(cases[i], b);
		cr_assert_eq(dur(b, &back), 0, "%s", b);
		cr_assert_eq(back, cases[i], "%s", b);
	}
}

Test(podspec, size_units)
{
	uint64_t v = 0;

	cr_assert_eq(size("64Mi", &v), 0); cr_assert_eq(v, 64ull << 20);
	cr_assert_eq(size("1Gi", &v), 0); cr_assert_eq(v, 1ull << 30);
	cr_assert_eq(size("100M", &v), 0); cr_assert_eq(v, 100000000ull);
	cr_assert_eq(size("1K", &v), 0); cr_assert_eq(v, 1000);
	cr_assert_eq(size("1k", &v), 0); cr_assert_eq(v, 1000);
	cr_assert_eq(size("1Ki", &v), 0); cr_assert_eq(v, 1024);
	cr_assert_eq(size("4096", &v), 0); cr_assert_eq(v, 4096);
	cr_assert_eq(size("15Ei", &v), 0); cr_assert_eq(v, 15ull << 60);
	cr_assert_eq(size("18446744073709551615", &v), 0);
	cr_assert_eq(v, UINT64_MAX);
}

Test(podspec, size_rejects_garbage_and_overflow)
{
	uint64_t v = 5;
	const char *bad[] = { "", "Mi", "64Q", "64mi", "64MB", "-1", "1.5Gi", " 1",
			      "1 Mi", "64Mii", "0x40", NULL };
	size_t i;

	for (i = 0; bad[i]; i++)
		cr_assert_eq(size(bad[i], &v), -EINVAL, "%s accepted", bad[i]);
	cr_assert_eq(v, 5, "failed parse must not write");
	cr_assert_eq(size("16Ei", &v), -ERANGE);
	cr_assert_eq(size("18446744073709551616", &v), -ERANGE);
	cr_assert_eq(size("18446744073709552K", &v), -ERANGE);
}

Test(podspec, size_format_shortest_exact)
{
	char b[KIT_UNIT_BUF];
	uint64_t cases[] = { 0, 1, 999, 1000, 1024, 1500, 65536, 100000000,
			     64ull << 20, 2048000, UINT64_MAX, 1ull << 63 };
	size_t i;

	cr_assert_str_eq(kit_format_size(0, b), "0");
	cr_assert_str_eq(kit_format_size(1000, b), "1K");
	cr_assert_str_eq(kit_format_size(1024, b), "1Ki");
	cr_assert_str_eq(kit_format_size(1500, b), "1500");
	cr_assert_str_eq(kit_format_size(65536, b), "64Ki");
	cr_assert_str_eq(kit_format_size(64ull << 20, b), "64Mi");
	cr_assert_str_eq(kit_format_size(100000000, b), "100M");
	cr_assert_str_eq(kit_format_size(2048000, b), "2048K");
	cr_assert_str_eq(kit_format_size(1000ull << 20, b), "1000Mi");
	for (i = 0; i < sizeof cases / sizeof *cases; i++) {
		uint64_t back = 3;
		kit_format_size(cases[i], b);
		cr_assert_eq(size(b, &back), 0, "%s", b);
		cr_assert_eq(back, cases[i], "%s", b);
	}
}

Test(podspec, signals)
{
	char b[KIT_UNIT_BUF];
	int s = 0;

	cr_assert_eq(kit_parse_signal("TERM", 4, &s), 0); cr_assert_eq(s, SIGTERM);
	cr_assert_eq(kit_parse_signal("SIGKILL", 7, &s), 0); cr_assert_eq(s, SIGKILL);
	cr_assert_eq(kit_parse_signal("sigusr1", 7, &s), 0); cr_assert_eq(s, SIGUSR1);
	cr_assert_eq(kit_parse_signal("hup", 3, &s), 0); cr_assert_eq(s, SIGHUP);
	cr_assert_eq(kit_parse_signal("15", 2, &s), 0); cr_assert_eq(s, 15);
	cr_assert_eq(kit_parse_signal("RTMIN+2", 7, &s), 0); cr_assert_eq(s, SIGRTMIN + 2);
	cr_assert_eq(kit_parse_signal("0", 1, &s), -EINVAL);
	cr_assert_eq(kit_parse_signal("99", 2, &s), -EINVAL);
	cr_assert_eq(kit_parse_signal("SIG", 3, &s), -EINVAL);
	cr_assert_eq(kit_parse_signal("TERMX", 5, &s), -EINVAL);
	cr_assert_eq(kit_parse_signal("RTMIN+", 6, &s), -EINVAL);
	cr_assert_eq(kit_parse_signal("", 0, &s), -EINVAL);
	cr_assert_str_eq(kit_format_signal(SIGTERM, b), "TERM");
	cr_assert_str_eq(kit_format_signal(SIGABRT, b), "ABRT");
	cr_assert_str_eq(kit_format_signal(SIGRTMIN + 3, b), "RTMIN+3");
	for (s = 1; s <= SIGRTMAX; s++) {
		int back = 0;
		kit_format_signal(s, b);
		cr_assert_eq(kit_parse_signal(b, strlen(b), &back), 0, "%s", b);
		cr_assert_eq(back, s, "%s", b);
	}
}
