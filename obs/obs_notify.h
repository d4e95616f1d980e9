/*
 * obs_notify — tankd under a service manager: systemd's notification
 * protocol (sd_notify(3)), which s6's notification-fd and others speak
 * too, and the journal's priorities on stderr.
 *
 * The protocol is written here, not taken from libsystemd: it is one
 * datagram of "KEY=value" lines to the AF_UNIX socket $NOTIFY_SOCKET
 * names (a path, or an abstract name written "@name"), and linking
 * libsystemd made every tankd and keeper start load it and its five
 * compression and crypto libraries for that (docs/bench.md, "Issue 38,
 * items 6 (a) and 2, round 5").
 *
 * With NOTIFY_SOCKET set (systemd's Type=notify; the daemon asks
 * obs_notify_wanted), tankd sends:
 *   READY=1      once the first reconcile pass after start is done (an
 *                rc_sync through the loop: every stored object was looked
 *                at once), with a first STATUS=;
 *   STATUS=…     a one-line summary (obs_summary: "3 pods (2 running,
 *                1 failed), 1 stack (1 up)"), again every 5 s;
 *   WATCHDOG=1   every WatchdogSec/2 when the manager set WATCHDOG_USEC
 *                for this process (WATCHDOG_PID unset or ours, as
 *                sd_watchdog_enabled(3) reads them; or our parent's, the
 *                keeper's), from a timer on the loop: a loop that is
 *                wedged stops petting and gets restarted;
 *   STOPPING=1   when the drain begins.
 * Without NOTIFY_SOCKET none of this exists (obs_notify_open is not
 * called), so it costs nothing.
 *
 * Everything runs on the runtime's thread; each notification is one
 * datagram on a socket of its own, sent as libsystemd sends it (a
 * blocking send the manager's reading ends at once; a NOTIFY_SOCKET that
 * is neither a path nor "@name", or too long, is ignored).
 */
#ifndef TANK_OBS_NOTIFY_H
#define TANK_OBS_NOTIFY_H

#include <stdbool.h>

#include "obs/obs_metrics.h"

typedef struct obs_notify obs_notify_t;

/* True when a service manager listens (NOTIFY_SOCKET is set). */
bool obs_notify_wanted(void);

/* Starts the notifications (src borrowed, must outlive it): the READY
 * wait (an actor that asks the loop for a sync), the status and watchdog
 * timers.  ready_fd > 0: also s6's readiness protocol (notification-fd,
 * s6-supervise(8)): a newline is written to that fd at READY time and it
 * is closed.  Call once the tree runs or is about to (before rt_run is
 * fine).  -ENOMEM, or the runtime's errors spawning the waiter. */
int obs_notify_open(const obs_src_t *src, int ready_fd, obs_notify_t **out);

/* STOPPING=1 (and a STATUS= saying so).  NULL: no-op. */
void obs_notify_stopping(obs_notify_t *n);

/* Stops the timers and frees; call before the runtime is freed (the
 * timers are on its loop).  NULL: no-op. */
void obs_notify_close(obs_notify_t *n);

/* True when stderr is the journal's stream (JOURNAL_STREAM names
 * stderr's device and inode, systemd.exec(5)): log lines then start with
 * a syslog priority, "<3>" … "<7>", which journald strips and keeps. */
bool obs_journal_stderr(void);

#endif
