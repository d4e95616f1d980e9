/*
 * kp_keeper — the keeper process (`tankd --keeper`): the ancestor of tankd
 * that keeps what a tankd killed -9 would lose (protocol: kp_proto.h).
 *
 * It does little, so that it cannot crash: it becomes a child subreaper,
 * starts tankd (exe with argv, plus TANK_KEEPER_FD and TANK_KEEPER_PID)
 * and
 *   - restarts it when it dies of anything but a clean stop (exit 0) or a
 *     permanent error (exit 100): after 250 ms, doubling up to 10 s while
 *     it dies within 10 s of its start;
 *   - reaps every process that becomes its child (the containers of a
 *     dead tankd are re-parented to it) and keeps (pid, start time, wait
 *     status, time) until a tankd acks it, pushing it to the tankd
 *     connected at the time (at most KP_EXITS_MAX kept, oldest dropped);
 *   - keeps the fds tankd hands it under their tags until tankd forgets
 *     them, and gives them all to a new tankd that asks;
 *   - says how many tags and exits it holds when asked (KP_STAT);
 *   - passes SIGTERM, SIGINT and SIGHUP on to tankd and then exits with
 *     tankd's status once it has stopped (a graceful stop stops the pods:
 *     it is tankd's own); passes SIGUSR2 (reexec) on.
 * It never reads a log pipe, never parses a tag, allocates only for what
 * it keeps.  Exits 0 when tankd stopped cleanly, 100 when tankd failed
 * permanently, 111 when it cannot start at all.
 */
#ifndef TANK_KP_KEEPER_H
#define TANK_KP_KEEPER_H

#include <stdbool.h>
#include <stdio.h>

#define KP_EXITS_MAX 65536

typedef struct kp_keeper_opts {
	const char *exe;           /* tankd's path, exec'd at each start */
	char *const *argv;         /* its argv (argv[0] included) */
	FILE *log;                 /* NULL: stderr */
	/* The log is the journal's stream (obs_journal_stderr: under
	 * systemd): each line starts with its syslog priority, "<6>" info,
	 * "<4>" warning, "<2>" fatal, as tankd's own lines do. */
	bool journal;
} kp_keeper_opts_t;

/* Runs the keeper until tankd stops for good; returns the exit status. */
int kp_keeper_run(const kp_keeper_opts_t *o);

#endif
