/*
 * ts_etcd — a real etcd for the tests and the benchmarks: Debian's
 * /usr/bin/etcd (package etcd-server; TANK_ETCD names another binary) on
 * two free loopback ports, its data in a directory of the run
 * (ts_mkdtemp), the process owned (ts_own_pid) so it goes on every path
 * (tsupport.h).  Nothing of the package's own service is used.
 *
 * Blocking: start and restart wait until etcd answers (at most 20 s).
 */
#ifndef TANK_TS_ETCD_H
#define TANK_TS_ETCD_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

typedef struct ts_etcd {
	pid_t pid;            /* 0 when stopped */
	int client_port, peer_port;
	char dir[PATH_MAX];   /* data dir and log (etcd.log) */
	char url[64];         /* http://127.0.0.1:PORT */
} ts_etcd_t;

/* The etcd binary the tests run. */
const char *ts_etcd_bin(void);
/* Whether it is there (tests skip with TS_ETCD_MISSING when not). */
bool ts_etcd_available(void);
#define TS_ETCD_MISSING "etcd not installed (/usr/bin/etcd; apt-get install etcd-server): skipped"

/* Starts a fresh etcd into *e: 0, or -errno (its log is in e->dir). */
int ts_etcd_start(ts_etcd_t *e);
/* SIGKILL (hard: a crash, a partition) or SIGTERM, and reaps it; the data
 * stays for a restart. */
void ts_etcd_stop(ts_etcd_t *e, bool hard);
/* Starts it again on the same ports and data. */
int ts_etcd_restart(ts_etcd_t *e);

#endif
