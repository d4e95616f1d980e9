/*
 * bench_util — the few small things every benchmark program needs: a
 * monotonic clock, a sleep, and removing its temporary tree.  Header-only
 * (static inline): each bench source is a program of its own.
 */
#ifndef TANK_BENCH_UTIL_H
#define TANK_BENCH_UTIL_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void bench_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static inline int bench__rm_one(const char *path, const struct stat *st, int flag,
				struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

/* rm -rf dir, without following symlinks; errors are ignored. */
static inline void bench_rm_rf(const char *dir)
{
	nftw(dir, bench__rm_one, 64, FTW_DEPTH | FTW_PHYS);
}

#endif
