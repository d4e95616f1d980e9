/*
 * dmn — tankd as a library (contract in dmn.h).
 *
 * The daemon's own state is small: what it opened (store, pod tracking,
 * cgroups, runtime), the root supervisor, and the stop state machine
 *
 *   running --dmn_stop--> draining --drained | deadline--> tree stopping
 *      |                     |                                  |
 *      +------- second dmn_stop: rt_stop, at once --------------+
 *
 * The drain and the forced stop both end in the same teardown (the tree
 * stops in reverse order, the store actor flushes); only their trigger
 * differs, so there is one path to test.
 */
#include <errno.h>
#include <fcntl.h>
#include <ev.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api_methods.h"
#include "api/api_server.h"
#include "common/tank_map.h"
#include "daemon/dmn.h"
#include "daemon/dmn_events.h"
#include "daemon/dmn_handover.h"
#include "keeper/kp_proto.h"
#include "pod/pod_adopt.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_host.h"
#include "pod/pod_mgr.h"
#include "kinds/kind.h"
#include "obs/obs_http.h"
#include "obs/obs_notify.h"
#include "common/kit_units.h"
#include "reconciler/rc_loop.h"
#include "runtime/rt.h"
#include "store/st.h"
#include "supervisor/sup.h"

/* OTP's default is 1 restart in 5 s; the root is a little more tolerant
 * because one of its children (the api) faces the outside world. */
static const sup_flags_t dmn_root_flags = { SUP_ONE_FOR_ONE, 3, 10000, SUP_AUTO_NEVER };
/* Each child's shutdown budget once the tree stops: the reconciler's
 * runners are already gone or are killed with it, the store actor's flush
 * takes milliseconds.  Bounded so that a wedged child cannot hold the
 * daemon's exit hostage. */
#define DMN_CHILD_SHUTDOWN_MS 5000
/* publish's buffer is kept between events up to this size. */
#define DMN_EV_BUF_KEEP (64u << 10)

struct dmn {
	char data_dir[PATH_MAX];
	char socket_path[PATH_MAX];
	char log_dir[PATH_MAX];
	char cg_root[POD_CGROUP_NAME];
	bool has_group;
	gid_t group;
	uint64_t resync_ms, nudge_ms, drain_ms;
	void (*log)(void *ctx, dmn_level_t level, const char *msg);
	void *log_ctx;
	FILE *log_file;

	st_t *store;
	pod_cgroup_env_t cg;
	pod_mgr_t *pods;
	/* The kinds and their instances (each kind's open, in list order);
	 * the api and the kinds' callbacks borrow it. */
	kind_env_t kinds;
	size_t nopen;           /* kinds opened, to close in reverse */
	rt_t *rt;
	api_daemon_t api;
	api_method_t methods[API_NMETHODS];
	size_t nmethods;
	rt_pid_t root;
	/* The web side and the service manager's notifications (obs/):
	 * NULL unless asked for. */
	obs_src_t obs;
	obs_http_t *http;
	obs_notify_t *notify;
	bool want_notify;
	int ready_fd;
	bool delegated;         /* the pods' groups are below tankd's own */

	/* A child's start failure, for dmn_open to return: the supervisor
	 * passes on only the code. */
	tank_error_t start_err;

	/* publish's buffer, reused from one event to the next. */
	msgpack_sbuffer ev;

	/* Failing status flushes (flush_error): how many, and when to say so. */
	uint64_t flush_fails, flush_quiet, flush_next_say, flush_gap_ms;

	bool stopping;          /* dmn_stop was called */
	bool stop_now;          /* a second dmn_stop: no more waiting */
	bool ran;               /* dmn_run was called */
	bool signals_on;
	ev_signal sigterm, sigint, sigusr2;

	/* Re-adoption: what a reexec or the keeper handed over, the keeper
	 * (fd -1: none), this pid's counters. */
	pod_adopt_t *adopt;
	kp_client_t kp;
	ev_io kp_io;
	ev_timer reexec_timer;
	unsigned reexec_waited_ms;    /* for answers owed, DMN_REEXEC_WAIT_MS at most */
	char *const *argv;
	dmn_handover_t hv;            /* listen_fd: the inherited socket, until served */
	ev_timer deadline;
	int exit_status;
};

/* --- diagnostics -------------------------------------------------------- */

const char *dmn_level_name(dmn_level_t level)
{
	switch (level) {
	case DMN_LOG_INFO: return "info";
	case DMN_LOG_WARNING: return "warning";
	default: return "fatal";
	}
}

static void log_line(void (*fn)(void *, dmn_level_t, const char *), void *ctx,
		     FILE *fp, dmn_level_t level, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof msg, fmt, ap);
	if (fn) {
		fn(ctx, level, msg);
		return;
	}
	/* Under systemd, stderr goes to the journal: a "<N>" syslog
	 * priority in front is what journald reads (info 6, warning 4,
	 * fatal 2).  Asked once: the stream does not change. */
	static int journal = -1;
	const char *prio = "";
	if ((!fp || fp == stderr) && journal < 0)
		journal = obs_journal_stderr();
	if ((!fp || fp == stderr) && journal == 1)
		prio = level == DMN_LOG_INFO ? "<6>" : level == DMN_LOG_WARNING ? "<4>" : "<2>";
	/* One fprintf per line: a line is never interleaved with another
	 * writer's on a shared stderr. */
	fprintf(fp ? fp : stderr, "%stankd: %s: %s\n", prio, dmn_level_name(level), msg);
	fflush(fp ? fp : stderr);
}

static void say(dmn_t *d, dmn_level_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(dmn_t *d, dmn_level_t level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_line(d->log, d->log_ctx, d->log_file, level, fmt, ap);
	va_end(ap);
}

static void say_opts(const dmn_opts_t *o, dmn_level_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say_opts(const dmn_opts_t *o, dmn_level_t level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_line(o ? o->log : NULL, o ? o->log_ctx : NULL, o ? o->log_file : NULL,
		 level, fmt, ap);
	va_end(ap);
}

/* --- process set-up ----------------------------------------------------- */

static void dmn__nofile_ceiling(const dmn_opts_t *opts)
{
	char buf[32];
	int fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	struct rlimit rl;

	if (fd >= 0)
		close(fd);
	if (n <= 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	buf[n] = '\0';
	rlim_t to = (rlim_t)strtoull(buf, NULL, 10);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max >= to)
		return;
	rl.rlim_cur = rl.rlim_max = to;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		say_opts(opts, DMN_LOG_INFO,
			 "keeping the open-file limit: %s (a handover past it is cut short)",
			 strerror(errno));
}

void dmn_process_setup(const dmn_opts_t *opts)
{
	struct rlimit nofile;
	int err;

	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		say_opts(opts, DMN_LOG_WARNING,
			 "unable to become a child subreaper: %s (orphans go to init)",
			 strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	/* glibc keeps freed small blocks in fast bins, and any allocation of
	 * 1 KiB or more first consolidates them (malloc_consolidate): after
	 * a delete of 100,000 pods freed their tracking, the loop's 8 KiB
	 * buffers (a decoded request's zone, an encoded status) each paid
	 * for thousands of them, 201,190 consolidations in one bench_bulk
	 * run, in 18-33 ms turns.  Without fast bins the per-thread cache
	 * still takes the small frees; that run's CPU did not grow (10.9 s
	 * against 11.2 s) and it consolidated once (docs/bench.md, issue 38
	 * item 6, round 4).  Best effort: another allocator ignores it. */
	(void)mallopt(M_MXFAST, 0);
	/* And glibc's thresholds fixed at their defaults (128 KiB), which
	 * turns their "dynamic" growth off: freeing an mmap'ed block (LMDB's
	 * 2 MB lists at each environment close, store/st.c env_reopen; a
	 * big list's buffer) raised the trim threshold to twice that block,
	 * and a thread's arena then kept its free top for good: 4 MB of
	 * the store thread's, all free and resident, at 9,872 pods (issue
	 * 38 item 2, docs/bench.md round 6). */
	(void)mallopt(M_TRIM_THRESHOLD, 128 * 1024);
	(void)mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &nofile) < 0)
			say_opts(opts, DMN_LOG_WARNING, "unable to raise the open-file limit: %s",
				 strerror(errno));
	}
	/* The slot fds are taken before the store and the socket, so they
	 * sit low in the fd table and a spawn copies only those. */
	if ((err = pod_launch_reserve()) < 0)
		say_opts(opts, DMN_LOG_WARNING,
			 "unable to reserve launcher fds: %s (spawns copy the fd table)",
			 tank_strerror(err));
	/* After the launcher recorded the limit its children start with: a
	 * tankd the keeper (re)starts is handed back every pipe the keeper
	 * holds, up to fs.nr_open of them (the keeper's own limit), before
	 * anything is applied; take that ceiling (as root) so the handover
	 * cannot be cut short by EMFILE. */
	if (getenv(KP_ENV_FD))
		dmn__nofile_ceiling(opts);
}

int dmn_exit_status(int err)
{
	switch (err) {
	case 0:
		return DMN_EXIT_OK;
	case TANK_ELOCKED:
	case -EADDRINUSE:
	case -ENOMEM:
	case -EMFILE:
	case -ENFILE:
	case -EAGAIN:
		return DMN_EXIT_TEMPORARY;
	default:
		return DMN_EXIT_PERMANENT;
	}
}

/* --- the store actor ------------------------------------------------------ */

/* The store has no mailbox of its own: this actor gives its group commit a
 * place in the tree, so that it is attached to the loop while the tree
 * runs and flushed when the tree stops (it stops last: it started first). */

/* Packs one event with pack(pk, arg) and hands it to the api's
 * subscribers.  No api (stopping, or between two of its lives): nobody
 * listens.  An event that cannot be packed or queued is dropped:
 * subscribers miss one line, what it told is in the history or the log. */
static void publish(dmn_t *d, int (*pack)(msgpack_packer *pk, const void *arg),
		    const void *arg)
{
	rt_pid_t api = rt_whereis(d->rt, "api");
	msgpack_sbuffer *sb = &d->ev;
	msgpack_packer pk;

	if (!api && !d->http)
		return;
	/* The daemon's buffer, reused: a fresh one is an 8 KiB malloc
	 * (msgpack's first size) per event, for a few hundred bytes, and
	 * one of the allocations that made glibc consolidate its fast bins
	 * after a delete of 100,000 (see dmn_process_setup). */
	sb->size = 0;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	if (pack(&pk, arg) == 0) {
		if (api)
			(void)api_server_publish(d->rt, api, sb->data, sb->size);
		/* The web side's /events and its counts by type. */
		if (d->http)
			obs_http_publish(d->http, sb->data, sb->size);
	}
	/* Events are a few hundred bytes: a rare big one is not kept. */
	if (sb->alloc > DMN_EV_BUF_KEEP) {
		msgpack_sbuffer_destroy(sb);
		msgpack_sbuffer_init(sb);
	}
}

typedef struct store_ev { bool failing; const char *reason; uint64_t failures; } store_ev_t;

static int pack_store_ev(msgpack_packer *pk, const void *arg)
{
	const store_ev_t *e = arg;
	return dmn_event_pack_store(pk, e->failing, e->reason, e->failures,
				    (int64_t)rc_wall_ms());
}

/* On the events stream, once when commits start failing and once when
 * they work again. */
static void store_event(dmn_t *d, bool failing, const char *reason)
{
	store_ev_t e = { failing, reason, d->flush_fails };
	publish(d, pack_store_ev, &e);
}

/* A flush that fails fails again every period until there is room: said
 * at once, then after 1, 2, 4 … up to 300 seconds with the count since,
 * and once when it works again (it once logged 10 lines a second for as
 * long as the disk stayed full). */
static void flush_error(void *ctx, const tank_error_t *err)
{
	dmn_t *d = ctx;
	uint64_t now = rt_now_ms(d->rt);

	if (!err) {
		say(d, DMN_LOG_INFO, "status commits work again after %llu failed",
		    (unsigned long long)d->flush_fails);
		store_event(d, false, NULL);
		d->flush_fails = 0;
		d->flush_quiet = 0;
		return;
	}
	d->flush_fails++;
	if (d->flush_fails == 1)
		store_event(d, true, err->msg);
	if (d->flush_fails > 1 && now < d->flush_next_say) {
		d->flush_quiet++;
		return;
	}
	uint64_t gap = d->flush_gap_ms ? d->flush_gap_ms : 1000;
	if (d->flush_fails == 1)
		gap = 1000;
	say(d, DMN_LOG_WARNING,
	    "unable to commit status: %s (kept, retrying; %llu failures, next said in %llu s)",
	    err->msg, (unsigned long long)d->flush_fails, (unsigned long long)gap / 1000);
	d->flush_next_say = now + gap;
	d->flush_gap_ms = gap * 2 > 300000 ? 300000 : gap * 2;
}

static int store_init(rt_t *rt, void **state, void *arg)
{
	dmn_t *d = arg;
	int err = st_attach_loop(d->store, rt_loop(rt));

	*state = d;
	/* A restarted store actor finds the store still attached when its
	 * predecessor's terminate did not run (rt_free): that is fine. */
	return err == -EBUSY ? 0 : err;
}

static void store_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)rt; (void)state; (void)m;
}

static void store_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	dmn_t *d = state;
	tank_error_t e;

	(void)rt; (void)reason;
	tank_error_clear(&e);
	if (st_flush(d->store, &e) < 0)
		say(d, DMN_LOG_WARNING, "unable to commit status at stop: %s", e.msg);
	st_detach_loop(d->store);
}

static const rt_behaviour_t dmn_store_actor = {
	"dmn_store", store_init, store_handle, store_terminate,
};

static int start_store(rt_t *rt, void *arg, void *extra, rt_pid_t *out)
{
	(void)extra;
	return rt_spawn_link(rt, &dmn_store_actor, arg, out);
}

/* --- the reconciler ------------------------------------------------------- */

static void publish_kind(void *ctx, int (*pack)(msgpack_packer *pk, const void *arg),
			 const void *arg)
{
	publish(ctx, pack, arg);
}

/* The loop's record hook: each kind records its own managers' transitions. */
static void record(void *ctx, const rc_transition_t *t)
{
	dmn_t *d = ctx;
	const kind_t *k = kind_of_manager(d->kinds.kinds, t->kind);
	void *inst = k ? kind_inst(&d->kinds, k) : NULL;

	if (k && k->record && inst)
		k->record(inst, t);
	/* Kinds that wait for other kinds' objects see their transitions. */
	for (size_t i = 0; d->kinds.kinds[i] && i < KIND_MAX; i++) {
		const kind_t *o = d->kinds.kinds[i];
		if (o != k && o->record_other && d->kinds.inst[i])
			o->record_other(d->kinds.inst[i], t);
	}
}

static int start_reconciler(rt_t *rt, void *arg, void *extra, rt_pid_t *out)
{
	dmn_t *d = arg;
	rc_loop_opts_t o = {
		.resync_ms = d->resync_ms,
		.nudge_ms = d->nudge_ms,
		/* A start that fails for tank's resources is retried by the
		 * loop: 10 times from 100 ms, doubling, capped at 30 s, is
		 * about 80 s before the container is failed. */
		.max_retries = 10,
		.record = record,
		.record_ctx = d,
		/* api_methods finds the reconciler by this name. */
		.name = API_RECONCILER_NAME,
	};

	/* Every manager of every kind, each with its kind's instance. */
	for (size_t i = 0; d->kinds.kinds[i] && i < KIND_MAX; i++)
		for (size_t m = 0; m < KIND_MANAGERS_MAX; m++) {
			const rc_manager_t *mg = d->kinds.kinds[i]->managers[m];
			if (!mg || o.nkinds == RC_MAX_KINDS)
				continue;
			o.managers[o.nkinds] = mg;
			o.ctx[o.nkinds++] = d->kinds.inst[i];
		}
	(void)extra;
	return rc_loop_start(rt, &o, out);
}

/* --- the api ---------------------------------------------------------------- */

/* How many clients the descriptors leave room for: never the ones the
 * containers were promised (pod/pod_host.h, POD_HOST_CONN_FDS).  On the
 * loop's thread, at an accept once a few connections are open: a walk of
 * the tracked pods (about 0.1 ms at 10,000). */
static size_t conn_room(void *ctx)
{
	dmn_t *d = ctx;

	if (!d->pods)
		return SIZE_MAX;
	return pod_host_conn_room(pod_mgr_ncontainers(d->pods, NULL),
				  pod_adopt_pidfds(d->adopt));
}

static int start_api(rt_t *rt, void *arg, void *extra, rt_pid_t *out)
{
	dmn_t *d = arg;
	api_server_opts_t o = {
		.socket_path = d->socket_path,
		.has_group = d->has_group,
		.group = d->group,
		.methods = d->methods,
		.nmethods = d->nmethods,
		.conn_room = conn_room,
		.conn_room_ctx = d,
		/* After a reexec: the socket the previous image listened on
		 * (its backlog holds who connected meanwhile); once. */
		.inherit = d->hv.listen_fd >= 0,
		.listen_fd = d->hv.listen_fd,
	};
	tank_error_t e;
	int err;

	(void)extra;
	d->hv.listen_fd = -1;
	tank_error_clear(&e);
	if ((err = api_server_start(rt, &o, out, &e)) < 0) {
		tank_error_set(&d->start_err, err, "unable to serve %s: %s", d->socket_path,
			       e.msg[0] ? e.msg : tank_strerror(err));
		/* At open the error is returned; on a restart by the
		 * supervisor nobody else would say why the api is gone. */
		if (d->ran)
			say(d, DMN_LOG_WARNING, "%s", d->start_err.msg);
		return err;
	}
	return rt_register(rt, "api", *out);
}

/* --- stopping ------------------------------------------------------------------ */

static void root_exited(rt_t *rt, rt_pid_t sup, rt_reason_t reason, void *ctx)
{
	dmn_t *d = ctx;

	(void)sup;
	d->root = RT_NOPID;
	if (!d->stopping) {
		say(d, DMN_LOG_FATAL, "supervision tree gave up (%s)", rt_reason_name(reason));
		d->exit_status = DMN_EXIT_TEMPORARY;
	}
	rt_stop(rt);
}

/* The end of every stop: the tree in reverse order (api, reconciler with
 * its runners — each kills its container if it still runs — and last the
 * store actor, which flushes).  root_exited then stops the loop. */
static void stop_tree(dmn_t *d)
{
	if (ev_is_active(&d->deadline))
		ev_timer_stop(rt_loop(d->rt), &d->deadline);
	if (d->root && rt_alive(d->rt, d->root))
		sup_stop(d->rt, d->root);
	else
		rt_stop(d->rt);
}

static void drained(void *ctx)
{
	dmn_t *d = ctx;

	/* pod_mgr calls this when its last container is gone, which is only
	 * ever after dmn_stop; the check keeps a stray call harmless. */
	if (d->stopping)
		stop_tree(d);
}

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	dmn_t *d = w->data;
	char buf[KIT_UNIT_BUF];

	(void)loop; (void)revents;
	say(d, DMN_LOG_WARNING,
	    "%zu container(s) still stopping at the drain deadline (%s): killing them",
	    pod_mgr_nrunning(d->pods), kit_format_duration(d->drain_ms, buf));
	stop_tree(d);
}

void dmn_stop(dmn_t *d)
{
	rt_pid_t loop;

	if (d->stopping) {
		if (d->stop_now)
			return;
		/* Asked twice: the operator does not want to wait.  rt_stop
		 * ends the loop now; dmn_close's rt_free then terminates every
		 * actor, and each runner kills its container. */
		say(d, DMN_LOG_INFO, "stopping now: killing containers");
		d->stop_now = true;
		if (ev_is_active(&d->deadline))
			ev_timer_stop(rt_loop(d->rt), &d->deadline);
		rt_stop(d->rt);
		return;
	}
	d->stopping = true;
	say(d, DMN_LOG_INFO, "stopping: stopping containers");
	obs_notify_stopping(d->notify);
	/* Stop accepting first: an apply arriving during the drain would
	 * race it.  The api is a permanent child, so it is terminated
	 * through its supervisor, which then does not restart it. */
	if (d->root && rt_alive(d->rt, d->root))
		(void)sup_terminate_child(d->rt, d->root, "api");
	/* ev_now is the time of the last poll, possibly long ago when
	 * called before dmn_run: the deadline counts from now. */
	ev_now_update(rt_loop(d->rt));
	ev_timer_init(&d->deadline, deadline_cb, (double)d->drain_ms / 1000., 0.);
	d->deadline.data = d;
	ev_timer_start(rt_loop(d->rt), &d->deadline);
	/* The pod manager calls drained() when no container is left.  No
	 * reconciler: its runners died with it, killing their containers. */
	loop = rt_whereis(d->rt, API_RECONCILER_NAME);
	if (!loop || rt_send(d->rt, loop, POD_MGR_SHUTDOWN, NULL, 0) < 0)
		stop_tree(d);
}

/* --- re-adoption: the keeper, reexec ----------------------------------------------- */

static void kp_keep(void *ctx, const char *tag, const int *fds, unsigned n)
{
	dmn_t *d = ctx;
	(void)kp_client_put(&d->kp, tag, fds, n);
}

static void kp_forget(void *ctx, const char *tag)
{
	dmn_t *d = ctx;
	(void)kp_client_del(&d->kp, tag);
}

static void kp_ack(void *ctx, pid_t pid, uint64_t start)
{
	dmn_t *d = ctx;
	(void)kp_client_ack(&d->kp, pid, start);
}

static void kp_entry(void *ctx, const char *tag, const int *fds, unsigned n)
{
	dmn_t *d = ctx;
	(void)pod_adopt_offer_tag(d->adopt, tag, fds, n);
}

static void kp_exit(void *ctx, pid_t pid, uint64_t start, int status, int64_t at_ms)
{
	dmn_t *d = ctx;
	pod_adopt_exited(d->adopt, d->rt, pid, start, status, at_ms);
}

/* A child reaped while nobody watched it: one a previous image handed
 * over is recorded with its real status for its adoption. */
static bool unwatched_exit(void *ctx, pid_t pid, int status)
{
	dmn_t *d = ctx;
	return pod_adopt_reaped(d->adopt, pid, status, (int64_t)rc_wall_ms());
}

static void kp_gone(dmn_t *d, pid_t pid)
{
	if (ev_is_active(&d->kp_io))
		ev_io_stop(rt_loop(d->rt), &d->kp_io);
	/* The processes it reaped for us are followed by pidfds now
	 * (pod_adopt.h "Orphans"). */
	pod_adopt_set_sink(d->adopt, NULL);
	kp_client_close(&d->kp);
	/* Nothing names a keeper any more: a reexec must not take the fd
	 * number (reused by then) for its socket. */
	unsetenv(KP_ENV_FD);
	unsetenv(KP_ENV_PID);
	say(d, DMN_LOG_WARNING, "the keeper (pid %d) is gone: pods keep running (the "
	    "processes it reaped for tankd are followed by pidfds, their exit status "
	    "unknown), but nothing restarts tankd, and a kill -9 of tankd now loses their "
	    "output and restarts them", (int)pid);
}

static void kp_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	dmn_t *d = w->data;
	pid_t pid = d->kp.pid;

	(void)loop; (void)revents;
	if (kp_client_read(&d->kp, kp_exit, d) == -EPIPE)
		kp_gone(d, pid);
}

/* The keeper of this tankd, if it was started by one: its sink, and
 * after a kill -9 of the previous tankd what it kept. */
static void keeper_open(dmn_t *d, bool handed_over)
{
	tank_error_t e;
	int r;

	tank_error_clear(&e);
	if (kp_client_from_env(&d->kp, &e) < 0) {
		say(d, DMN_LOG_WARNING, "no keeper: %s", e.msg);
		return;
	}
	if (d->kp.fd < 0)
		return;
	pod_adopt_sink_t sink = { kp_keep, kp_forget, kp_ack, d };
	pod_adopt_set_sink(d->adopt, &sink);
	/* A reexec brought everything along; the keeper's copies stay. */
	if (handed_over)
		return;
	if ((r = kp_client_hello(&d->kp, 10000, kp_entry, kp_exit, d)) < 0) {
		pid_t pid = d->kp.pid;
		say(d, DMN_LOG_WARNING, "the keeper (pid %d) did not answer: %s", (int)pid,
		    tank_strerror(r));
		kp_gone(d, pid);
		return;
	}
	if (pod_adopt_offers(d->adopt))
		say(d, DMN_LOG_INFO, "the keeper (pid %d) kept %zu process(es) of a previous "
		    "tankd: adopting them", (int)d->kp.pid, pod_adopt_offers(d->adopt));
}

#define DMN_REEXEC_POLL_MS 20u
#define DMN_REEXEC_WAIT_MS 2000u

static void reexec_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	dmn_t *d = w->data;
	dmn_handover_t h = d->hv;
	char exe[PATH_MAX];
	tank_error_t e;
	rt_pid_t api;
	ssize_t n;

	(void)loop; (void)revents;
	if (d->stopping)
		return;
	api = rt_whereis(d->rt, "api");
	/* Requests taken and not answered yet (a `top` of every pod being
	 * read, a verb waiting for the loop's echo) and answers not sent
	 * yet go with their connections at the exec: the clients would hear
	 * "tankd closed the connection".  Wait for them, a little. */
	if (api && d->reexec_waited_ms < DMN_REEXEC_WAIT_MS &&
	    (api_server_pending(d->rt, api) || api_server_unsent(d->rt, api, NULL))) {
		d->reexec_waited_ms += DMN_REEXEC_POLL_MS;
		ev_timer_set(&d->reexec_timer, DMN_REEXEC_POLL_MS / 1000., 0.);
		ev_timer_start(rt_loop(d->rt), &d->reexec_timer);
		return;
	}
	tank_error_clear(&e);
	if (st_flush(d->store, &e) < 0)
		say(d, DMN_LOG_WARNING, "reexec: unable to commit status: %s", e.msg);
	h.listen_fd = api ? api_server_listen_fd(d->rt, api) : -1;
	h.http_fd = d->http ? obs_http_listen_fd(d->http) : -1;
	h.adopted = d->hv.adopted + pod_adopt_adopted(d->adopt);
	/* The path it was started from: an upgraded binary there is the one
	 * that runs next ("… (deleted)" once it was replaced). */
	if ((n = readlink("/proc/self/exe", exe, sizeof exe - 1)) <= 0) {
		say(d, DMN_LOG_WARNING, "reexec: /proc/self/exe: %s", strerror(errno));
		return;
	}
	exe[n] = '\0';
	if (n > 10 && strcmp(exe + n - 10, " (deleted)") == 0)
		exe[n - 10] = '\0';
	say(d, DMN_LOG_INFO, "re-executing %s (pid %d, %zu container(s) kept)", exe,
	    (int)getpid(), pod_mgr_nrunning(d->pods));
	tank_error_clear(&e);
	(void)dmn_handover_exec(&h, d->pods, d->adopt, d->kp.fd, exe, d->argv, &e);
	say(d, DMN_LOG_WARNING, "reexec failed, serving on: %s", e.msg);
}

int dmn_reexec(dmn_t *d)
{
	if (!d->argv)
		return TANK_EUNSUPPORTED;
	if (d->stopping)
		return -EBUSY;
	if (ev_is_active(&d->reexec_timer))
		return 0;
	/* A moment for the reply of `daemon reexec` to go out (and for the
	 * answers owed, reexec_cb). */
	d->reexec_waited_ms = 0;
	ev_timer_init(&d->reexec_timer, reexec_cb, DMN_REEXEC_POLL_MS / 1000., 0.);
	d->reexec_timer.data = d;
	ev_timer_start(rt_loop(d->rt), &d->reexec_timer);
	return 0;
}

static int api_reexec(void *ctx)
{
	return dmn_reexec(ctx);
}

static void api_status(void *ctx, api_daemon_status_t *out)
{
	dmn_t *d = ctx;

	out->pid = getpid();
	out->keeper_pid = d->kp.fd >= 0 ? d->kp.pid : 0;
	out->started_at = d->hv.started_at;
	out->reexecs = d->hv.reexecs;
	out->lives = d->hv.lives;
	out->adopted = d->hv.adopted + pod_adopt_adopted(d->adopt);
	/* What the keeper holds, asked now (a round trip to a process that
	 * always reads at once; `daemon status` is rare). */
	out->keeper_tags = out->keeper_exits = -1;
	if (out->ask_keeper && d->kp.fd >= 0) {
		uint64_t tags = 0, exits = 0;
		pid_t kpid = d->kp.pid;
		int r = kp_client_stat(&d->kp, 250, kp_exit, d, &tags, &exits);
		if (r == 0) {
			out->keeper_tags = (int64_t)tags;
			out->keeper_exits = (int64_t)exits;
		} else if (r == -EPIPE) {
			kp_gone(d, kpid);
			out->keeper_pid = 0;
		}
	}
}

static void sigusr2_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	dmn_t *d = w->data;
	(void)loop; (void)revents;
	if (dmn_reexec(d) < 0)
		say(d, DMN_LOG_WARNING, "SIGUSR2: cannot reexec now");
}

bool dmn_stopping(const dmn_t *d)
{
	return d->stopping;
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop; (void)revents;
	dmn_stop(w->data);
}

/* --- open, run, close ---------------------------------------------------------- */

static int copy_path(char *dst, size_t cap, const char *what, tank_error_t *err,
		     const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int copy_path(char *dst, size_t cap, const char *what, tank_error_t *err,
		     const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(dst, cap, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap)
		return tank_error_set(err, -ENAMETOOLONG, "%s: path too long (%d bytes)",
				      what, n);
	return 0;
}

static int configure(dmn_t *d, const dmn_opts_t *o, tank_error_t *err)
{
	int rc;

	if (!o->data_dir || !o->data_dir[0])
		return tank_error_set(err, TANK_EINVALID, "data_dir: required");
	if ((rc = copy_path(d->data_dir, sizeof d->data_dir, "data dir", err, "%s",
			    o->data_dir)) < 0)
		return rc;
	if (o->socket_path && o->socket_path[0])
		rc = copy_path(d->socket_path, sizeof d->socket_path, "socket", err, "%s",
			       o->socket_path);
	else
		rc = copy_path(d->socket_path, sizeof d->socket_path, "socket", err,
			       "%s/tank.sock", d->data_dir);
	if (rc < 0)
		return rc;
	if (o->log_dir && o->log_dir[0])
		rc = copy_path(d->log_dir, sizeof d->log_dir, "log dir", err, "%s", o->log_dir);
	else
		rc = copy_path(d->log_dir, sizeof d->log_dir, "log dir", err, "%s/logs",
			       d->data_dir);
	if (rc < 0)
		return rc;
	if (o->cgroup_root && o->cgroup_root[0])
		rc = copy_path(d->cg_root, sizeof d->cg_root, "cgroup root", err, "%s",
			       o->cgroup_root);
	else
		rc = copy_path(d->cg_root, sizeof d->cg_root, "cgroup root", err,
			       "tank-%08llx",
			       (unsigned long long)(tank_hash64(d->data_dir, strlen(d->data_dir))
						    & 0xffffffffu));
	if (rc < 0)
		return rc;
	d->has_group = o->has_socket_group;
	d->group = o->socket_group;
	d->resync_ms = o->resync_ms ? o->resync_ms : DMN_RESYNC_DEFAULT_MS;
	d->nudge_ms = o->nudge_ms ? o->nudge_ms : DMN_NUDGE_DEFAULT_MS;
	d->drain_ms = o->drain_ms ? o->drain_ms : DMN_DRAIN_DEFAULT_MS;
	d->log = o->log;
	d->log_ctx = o->log_ctx;
	d->log_file = o->log_file;
	return 0;
}

static bool http_healthy(void *ctx)
{
	return !((dmn_t *)ctx)->stopping;
}

/* The web side (--http) and the notifications, each only when asked for:
 * off, neither exists and nothing of them runs (obs/obs_http.h). */
static int open_obs(dmn_t *d, const dmn_opts_t *o, tank_error_t *err)
{
	int rc;

	d->obs = (obs_src_t){
		.rt = d->rt, .kinds = &d->kinds, .store = d->store,
		.loop_name = API_RECONCILER_NAME, .api_name = "api",
		.version = d->api.version,
	};
	/* The objects a slice of a sliced walk takes at most (obs_metrics.h):
	 * the tests make every walk run over many turns. */
	const char *so = getenv("TANK_HTTP_SLICE_OBJECTS");
	if (so && *so)
		d->obs.slice_objects = (size_t)strtoul(so, NULL, 10);
	d->want_notify = o->notify;
	d->ready_fd = o->ready_fd;
	if (!o->http_addr || !o->http_addr[0]) {
		if (d->hv.http_fd >= 0)
			close(d->hv.http_fd);   /* the last image served one; not this */
		d->hv.http_fd = -1;
		return 0;
	}
	obs_http_opts_t ho = {
		.addr = o->http_addr, .allow_remote = o->http_allow_remote, .src = d->obs,
		.healthy = http_healthy, .healthy_ctx = d,
		.inherit = d->hv.http_fd >= 0, .listen_fd = d->hv.http_fd,
	};
	d->hv.http_fd = -1;                     /* taken by the call */
	if ((rc = obs_http_open(&ho, &d->http, err)) < 0)
		d->http = NULL;
	return rc;
}

const char *dmn_http_addr(const dmn_t *d)
{
	return d->http ? obs_http_addr(d->http) : NULL;
}

/* How long release() waits for the processes of killed containers to be
 * reaped.  SIGKILL takes effect in microseconds; the bound is for a
 * process that escaped the kill (no cgroups and a setsid'ed grandchild),
 * which would otherwise hold dmn_close forever. */
#define DMN_REAP_MS 2000

/* Reaps the processes the last moments of the tree killed: containers
 * killed at the drain deadline or by a stop now, descendants a runner
 * killed after its container's exit.  After rt_free nobody else would:
 * they would stay zombies until the process exits, and their cgroups could
 * not be removed (pod_mgr_free would leave them behind).  Every child of
 * the process is the daemon's (rt_new), so reaping any is fair. */
static void reap_killed(void)
{
	struct timespec pause = { 0, 5 * 1000000L };

	for (int waited = 0; waited < DMN_REAP_MS; ) {
		pid_t r = waitpid(-1, NULL, WNOHANG);
		if (r > 0)
			continue;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return;        /* ECHILD: all reaped */
		nanosleep(&pause, NULL);
		waited += 5;
	}
}

/* Releases what dmn_open acquired, in reverse; safe on a partial open. */
static void release(dmn_t *d)
{
	tank_error_t e;

	if (d->signals_on) {
		ev_signal_stop(rt_loop(d->rt), &d->sigterm);
		ev_signal_stop(rt_loop(d->rt), &d->sigint);
		ev_signal_stop(rt_loop(d->rt), &d->sigusr2);
	}
	if (d->rt && ev_is_active(&d->kp_io))
		ev_io_stop(rt_loop(d->rt), &d->kp_io);
	if (d->rt && ev_is_active(&d->reexec_timer))
		ev_timer_stop(rt_loop(d->rt), &d->reexec_timer);
	if (d->rt && ev_is_active(&d->deadline))
		ev_timer_stop(rt_loop(d->rt), &d->deadline);
	/* The web side's streams end and its watchers leave the loop.  Gone
	 * before rt_free: an actor's terminate there may still record an
	 * event (what the reconciler ran, lost at a stop now), which
	 * publish then gives to nobody. */
	obs_http_close(d->http);
	d->http = NULL;
	obs_notify_close(d->notify);
	d->notify = NULL;
	/* The actors first (runners kill their containers), then the
	 * tracking they borrowed. */
	rt_free(d->rt);
	/* Only a daemon that ran has children; one that failed to open
	 * must not wait on its embedder's. */
	if (d->ran)
		reap_killed();
	while (d->nopen) {
		const kind_t *k = d->kinds.kinds[--d->nopen];
		if (k->close && d->kinds.inst[d->nopen])
			k->close(d->kinds.inst[d->nopen]);
	}
	pod_mgr_free(d->pods);
	msgpack_sbuffer_destroy(&d->ev);
	pod_adopt_free(d->adopt);
	kp_client_close(&d->kp);
	if (d->hv.listen_fd >= 0)
		close(d->hv.listen_fd);
	if (d->hv.http_fd >= 0)
		close(d->hv.http_fd);
	if (d->cg.mode != POD_CGROUP_NONE)
		(void)pod_cgroup_env_cleanup(&d->cg);
	if (d->store) {
		tank_error_clear(&e);
		if (st_close(d->store, &e) < 0)
			say(d, DMN_LOG_WARNING, "unable to close the store: %s",
			    e.msg[0] ? e.msg : "?");
	}
	free(d);
}

int dmn_open(const dmn_opts_t *opts, dmn_t **out, tank_error_t *err)
{
	dmn_t *d;
	tank_error_t e;
	int rc;

	*out = NULL;
	if (!(d = calloc(1, sizeof *d)))
		return tank_error_set(err, -ENOMEM, "out of memory");
	d->cg.mode = POD_CGROUP_NONE;
	d->kp.fd = -1;
	d->hv.listen_fd = -1;
	d->hv.http_fd = -1;
	if ((rc = configure(d, opts, err)) < 0) {
		free(d);
		return rc;
	}
	d->argv = opts->argv;
	if ((rc = pod_adopt_new(&d->adopt)) < 0) {
		free(d);
		return tank_error_set(err, rc, "out of memory");
	}
	/* A reexec's handover first: it holds fds nothing else may take. */
	{
		tank_error_t he;
		struct timespec now;
		tank_error_clear(&he);
		rc = dmn_handover_read(&d->hv, d->adopt, &he);
		if (rc < 0)
			say(d, DMN_LOG_WARNING, "reexec: unusable handover (%s): starting afresh",
			    he.msg);
		if (rc <= 0) {
			const char *lives = getenv(KP_ENV_STARTS);
			clock_gettime(CLOCK_REALTIME, &now);
			d->hv = (dmn_handover_t){ .listen_fd = -1, .http_fd = -1,
				.started_at = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 };
			if (lives && atoi(lives) > 1)
				d->hv.lives = (uint32_t)atoi(lives) - 1;
		} else {
			d->hv.reexecs++;
		}
	}

	tank_error_clear(&e);
	st_options_t so = { .on_flush_error = flush_error, .on_flush_error_ctx = d,
			    .commit_gate = opts->store_commit_gate,
			    .commit_gate_ctx = opts->store_commit_gate_ctx };
	/* The group commit's period (docs/operations.md): a longer one widens
	 * the window in which a status lives only in memory, which the tests
	 * of what must be committed before it is acted on use. */
	const char *gc = getenv("TANK_GROUP_COMMIT_MS");
	if (gc && *gc)
		so.flush_interval_ms = (uint32_t)strtoul(gc, NULL, 10);
	if ((rc = st_open(d->data_dir, &so, &d->store, &e)) < 0) {
		d->store = NULL;
		tank_error_set(err, rc, "unable to open the store in %s: %s", d->data_dir,
			       e.msg[0] ? e.msg : tank_strerror(rc));
		release(d);
		return rc;
	}
	/* No cgroups is a mode, not an error: pods without limits run, and
	 * pods with limits are refused with the reason. */
	if (opts->cgroups == DMN_CGROUPS_AUTO &&
	    pod_cgroup_probe(&d->cg, NULL, d->cg_root, NULL) < 0)
		d->cg.mode = POD_CGROUP_NONE;
	/* Under a service manager that delegated tankd's cgroup, the pods'
	 * groups go below it (pod_cgroup.h). */
	if (d->cg.mode == POD_CGROUP_V2 && opts->cgroup_delegate != DMN_DELEGATE_NO) {
		tank_error_clear(&e);
		if (pod_cgroup_delegate(&d->cg, NULL, opts->cgroup_delegate == DMN_DELEGATE_YES,
					&d->delegated, &e) < 0)
			say_opts(opts, DMN_LOG_WARNING, "%s (groups stay at the root)", e.msg);
	}

	if (!(d->rt = rt_new())) {
		rc = tank_error_set(err, -EBUSY,
				    "unable to start the runtime: out of memory, or another "
				    "daemon runs in this process");
		release(d);
		return rc;
	}
	rt_on_unwatched_exit(d->rt, unwatched_exit, d);
	keeper_open(d, d->hv.started_at && d->hv.reexecs > 0);
	pod_mgr_opts_t po = {
		.store = d->store, .log_dir = d->log_dir, .cgroups = &d->cg,
		.launch = opts->launch, .adopt = d->adopt,
		.on_drained = drained, .drained_ctx = d,
	};
	if ((rc = pod_mgr_new(&po, &d->pods)) < 0) {
		d->pods = NULL;
		tank_error_set(err, rc, "unable to start the reconciler: %s", tank_strerror(rc));
		release(d);
		return rc;
	}
	/* Each kind's instance, in list order (a kind may use those before
	 * it: a kind above pods becomes their owner). */
	d->kinds = (kind_env_t){
		.rt = d->rt, .store = d->store, .log_dir = d->log_dir,
		.loop_name = API_RECONCILER_NAME, .pods = d->pods, .adopt = d->adopt,
		.kinds = opts->kinds ? (const kind_t *const *)opts->kinds : tank_kinds,
		.publish = publish_kind, .publish_ctx = d,
	};
	for (size_t i = 0; d->kinds.kinds[i]; i++) {
		const kind_t *k = d->kinds.kinds[i];
		tank_error_t ke;
		if (i == KIND_MAX) {
			rc = tank_error_set(err, -E2BIG, "more than %d kinds", KIND_MAX);
			release(d);
			return rc;
		}
		tank_error_clear(&ke);
		if (k->open && (rc = k->open(&d->kinds, &d->kinds.inst[i], &ke)) < 0) {
			tank_error_set(err, rc, "unable to open the kind %s: %s", k->name,
				       ke.msg[0] ? ke.msg : tank_strerror(rc));
			release(d);
			return rc;
		}
		d->nopen = i + 1;
	}
	d->api = (api_daemon_t){ .rt = d->rt, .store = d->store, .log_dir = d->log_dir,
				 .version = opts->version ? opts->version : DMN_VERSION,
				 .pods = d->pods, .kinds = &d->kinds,
				 .daemon_status = api_status, .reexec = api_reexec,
				 .daemon_ctx = d };
	d->nmethods = api_methods_table(&d->api, d->methods);

	const sup_spec_t children[] = {
		{ .id = "store", .start = start_store, .arg = d,
		  .restart = SUP_PERMANENT, .shutdown = DMN_CHILD_SHUTDOWN_MS },
		{ .id = "reconciler", .start = start_reconciler, .arg = d,
		  .restart = SUP_PERMANENT, .shutdown = DMN_CHILD_SHUTDOWN_MS },
		{ .id = "api", .start = start_api, .arg = d,
		  .restart = SUP_PERMANENT, .shutdown = DMN_CHILD_SHUTDOWN_MS },
	};
	tank_error_clear(&d->start_err);
	if ((rc = sup_start_root(d->rt, &dmn_root_flags, children,
				 sizeof children / sizeof children[0], root_exited, d,
				 &d->root)) < 0) {
		d->root = RT_NOPID;
		if (d->start_err.code == rc && d->start_err.msg[0])
			tank_error_set(err, rc, "%s", d->start_err.msg);
		else
			tank_error_set(err, rc, "unable to start: %s", tank_strerror(rc));
		release(d);
		return rc;
	}
	if ((rc = open_obs(d, opts, err)) < 0) {
		release(d);
		return rc;
	}
	*out = d;
	return 0;
}

int dmn_run(dmn_t *d)
{
	struct ev_loop *loop = rt_loop(d->rt);

	if (d->ran)
		return d->exit_status;
	d->ran = true;
	ev_signal_init(&d->sigterm, signal_cb, SIGTERM);
	ev_signal_init(&d->sigint, signal_cb, SIGINT);
	d->sigterm.data = d->sigint.data = d;
	ev_signal_start(loop, &d->sigterm);
	ev_signal_start(loop, &d->sigint);
	ev_signal_init(&d->sigusr2, sigusr2_cb, SIGUSR2);
	d->sigusr2.data = d;
	ev_signal_start(loop, &d->sigusr2);
	d->signals_on = true;
	if (d->kp.fd >= 0) {
		ev_io_init(&d->kp_io, kp_cb, d->kp.fd, EV_READ);
		d->kp_io.data = d;
		ev_io_start(loop, &d->kp_io);
	}
	say(d, DMN_LOG_INFO, "serving %s (data dir %s, cgroups %s%s%s)", d->socket_path,
	    d->data_dir,
	    d->cg.mode == POD_CGROUP_V2 ? "v2" : d->cg.mode == POD_CGROUP_V1 ? "v1" : "none",
	    d->delegated ? ", delegated: " : "", d->delegated ? d->cg.v2_mount : "");
	if (d->http)
		say(d, DMN_LOG_INFO, "serving http://%s/ (metrics, events, page)",
		    obs_http_addr(d->http));
	/* READY=1 follows the first pass (obs_notify.h). */
	if ((d->want_notify || d->ready_fd > 0) && !d->notify &&
	    obs_notify_open(&d->obs, d->ready_fd, &d->notify) < 0)
		say(d, DMN_LOG_WARNING, "unable to notify the service manager: out of memory");
	if (!d->stop_now)
		rt_run(d->rt);
	return d->exit_status;
}

const char *dmn_socket_path(const dmn_t *d)
{
	return d->socket_path;
}

size_t dmn_nrunning(const dmn_t *d)
{
	return pod_mgr_nrunning(d->pods);
}

void dmn_close(dmn_t *d)
{
	dmn_opts_t lo;
	bool clean;

	if (!d)
		return;
	clean = d->ran && d->exit_status == DMN_EXIT_OK;
	/* release() frees d: "stopped" is said through a copy of the
	 * logger, once the store is closed and the lock released. */
	lo = (dmn_opts_t){ .log = d->log, .log_ctx = d->log_ctx, .log_file = d->log_file };
	release(d);
	if (clean)
		say_opts(&lo, DMN_LOG_INFO, "stopped");
}
