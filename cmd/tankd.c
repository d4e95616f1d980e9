/*
 * tankd — the tank daemon: flags, and the wiring of one supervision tree.
 *
 *   root supervisor (one_for_one, 3 restarts in 10 s)
 *   ├── store        attaches the LMDB store's group commit to the loop
 *   ├── reconciler   rc_loop with the pod and container managers; its
 *   │                runner actors are its own temporary children
 *   └── api          the msgpack-RPC server
 *
 * The store and the reconciler's tracking (pod_mgr_t) are opened here and
 * outlive the tree, so a restarted reconciler picks up where the old one
 * left off.  SIGTERM/SIGINT stop every container (stop signal, grace,
 * kill), then the tree, then the process; desired state is kept, so the
 * next tankd starts the pods again.
 *
 * Diagnostics: "tankd: fatal: unable to X: reason" on stderr; exit 111 for
 * a temporary failure (data dir in use, socket in use), 100 for a
 * permanent one (bad flags, unknown schema), as s6 does.
 */
#include <errno.h>
#include <ev.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_methods.h"
#include "api/api_server.h"
#include "common/tank_map.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_launch.h"
#include "reconciler/rc_loop.h"
#include "pod/pod_mgr.h"
#include "runtime/rt.h"
#include "store/st.h"
#include "supervisor/sup.h"

#define TANKD_VERSION "0.1.0"
#define EXIT_PERMANENT 100
#define EXIT_TEMPORARY 111

/* Everything the daemon wires; lives on main's stack. */
typedef struct tankd {
	char data_dir[PATH_MAX];
	char socket_path[PATH_MAX];
	char log_dir[PATH_MAX + 8];
	char cg_root[64];
	bool has_group;
	gid_t group;
	uint64_t resync_ms;
	rt_t *rt;
	st_t *store;
	pod_mgr_t *pods;
	pod_cgroup_env_t cg;
	api_daemon_t api;
	api_method_t methods[API_NMETHODS];
	size_t nmethods;
	rt_pid_t root;
	bool stopping;
	ev_signal sigterm, sigint;
	ev_timer stop_deadline;
	int exit_code;
} tankd_t;

static void say(const char *level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say(const char *level, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "tankd: %s: ", level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* --- the store actor ------------------------------------------------------ */

static void flush_error(void *ctx, const tank_error_t *err)
{
	(void)ctx;
	say("warning", "unable to commit status: %s (kept, retrying)", err->msg);
}

static int store_init(rt_t *rt, void **state, void *arg)
{
	tankd_t *d = arg;
	int err = st_attach_loop(d->store, rt_loop(rt));
	*state = d;
	return err == -EBUSY ? 0 : err;
}

static void store_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)rt; (void)state; (void)m;
}

static void store_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	tankd_t *d = state;
	tank_error_t e;
	(void)rt; (void)reason;
	if (st_flush(d->store, &e) < 0)
		say("warning", "unable to commit status at stop: %s", e.msg);
	st_detach_loop(d->store);
}

static const rt_behaviour_t store_actor = { "store", store_init, store_handle, store_terminate };

static int start_store(rt_t *rt, void *arg, void *extra, rt_pid_t *out)
{
	(void)extra;
	return rt_spawn_link(rt, &store_actor, arg, out);
}

/* --- reconciler ------------------------------------------------------------- */

static int pack_event(msgpack_packer *pk, const pod_event_t *ev)
{
	int rc = msgpack_pack_map(pk, 8);
	rc |= api_pack_cstr(pk, "type");       rc |= api_pack_cstr(pk, "transition");
	rc |= api_pack_cstr(pk, "pod");        rc |= api_pack_cstr(pk, ev->pod);
	rc |= api_pack_cstr(pk, "container");
	rc |= ev->container ? api_pack_cstr(pk, ev->container) : msgpack_pack_nil(pk);
	rc |= api_pack_cstr(pk, "from");       rc |= api_pack_cstr(pk, ev->from);
	rc |= api_pack_cstr(pk, "to");         rc |= api_pack_cstr(pk, ev->to);
	rc |= api_pack_cstr(pk, "reason");     rc |= api_pack_cstr(pk, ev->reason);
	rc |= api_pack_cstr(pk, "at");         rc |= msgpack_pack_int64(pk, ev->at);
	rc |= api_pack_cstr(pk, "generation"); rc |= msgpack_pack_uint64(pk, ev->generation);
	return rc;
}

static void on_event(void *ctx, const pod_event_t *ev)
{
	tankd_t *d = ctx;
	rt_pid_t api = rt_whereis(d->rt, "api");
	msgpack_sbuffer sb;
	msgpack_packer pk;

	if (!api)
		return;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (pack_event(&pk, ev) == 0)
		api_server_publish(d->rt, api, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

static int start_reconciler(rt_t *rt, void *arg, void *extra, rt_pid_t *out)
{
	tankd_t *d = arg;
	rc_loop_opts_t o = {
		.resync_ms = d->resync_ms,
		.managers = { &pod_manager, &pod_ctr_manager },
		.ctx = { d->pods, d->pods },
		.nkinds = 2,
		.record = pod_mgr_record,
		.record_ctx = d->pods,
		.name = API_RECONCILER_NAME,
	};
	(void)extra;
	return rc_loop_start(rt, &o, out);
}

/* --- api ---------------------------------------------------------------------- */

static int start_api(rt_t *rt, void *arg, void *extra, rt_pid_t *out)
{
	tankd_t *d = arg;
	tank_error_t e;
	api_server_opts_t o = {
		.socket_path = d->socket_path,
		.has_group = d->has_group,
		.group = d->group,
		.methods = d->methods,
		.nmethods = d->nmethods,
	};
	int err;

	(void)extra;
	tank_error_clear(&e);
	if ((err = api_server_start(rt, &o, out, &e)) < 0) {
		say("fatal", "unable to serve %s: %s", d->socket_path,
		    e.msg[0] ? e.msg : tank_strerror(err));
		return err;
	}
	return rt_register(rt, "api", *out);
}

/* --- stopping ------------------------------------------------------------------- */

static void root_exited(rt_t *rt, rt_pid_t sup, rt_reason_t reason, void *ctx)
{
	tankd_t *d = ctx;
	(void)sup;
	if (!d->stopping) {
		say("fatal", "supervision tree gave up (%s)", rt_reason_name(reason));
		d->exit_code = EXIT_TEMPORARY;
	}
	rt_stop(rt);
}

static void stop_tree(tankd_t *d)
{
	if (d->root && rt_alive(d->rt, d->root))
		sup_stop(d->rt, d->root);
	else
		rt_stop(d->rt);
}

static void drained(void *ctx)
{
	stop_tree(ctx);
}

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	tankd_t *d = w->data;
	(void)loop; (void)revents;
	say("warning", "containers still stopping at the deadline: stopping anyway");
	stop_tree(d);
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	tankd_t *d = w->data;
	rt_pid_t rc = rt_whereis(d->rt, API_RECONCILER_NAME);

	(void)revents;
	if (d->stopping) {        /* a second signal: stop now */
		stop_tree(d);
		return;
	}
	d->stopping = true;
	say("info", "stopping: stopping containers");
	/* Bounded: the longest grace any pod may ask for is not known here,
	 * so leave the pods a minute, then stop regardless. */
	ev_timer_init(&d->stop_deadline, deadline_cb, 60., 0.);
	d->stop_deadline.data = d;
	ev_timer_start(loop, &d->stop_deadline);
	/* The pod manager calls drained() when no container is left. */
	if (!rc || rt_send(d->rt, rc, POD_MGR_SHUTDOWN, NULL, 0) < 0)
		stop_tree(d);
}

/* --- flags -------------------------------------------------------------------------- */

static void usage(FILE *fp)
{
	fprintf(fp,
		"usage: tankd [--data-dir DIR] [--socket PATH] [--socket-group GROUP]\n"
		"             [--resync DURATION_MS]\n"
		"Runs the tank daemon in the foreground.\n"
		"  --data-dir DIR      state, logs and socket (env TANK_DATA_DIR; default\n"
		"                      /var/lib/tank for root, else $XDG_STATE_HOME/tank)\n"
		"  --socket PATH       RPC socket (env TANK_SOCKET; default DIR/tank.sock)\n"
		"  --socket-group G    socket mode 0660 and group G, whose members may call\n"
		"  --resync MS         full reconcile pass period (default 5000)\n"
		"  --version, --help\n");
}

static int default_data_dir(char *buf, size_t cap)
{
	const char *env = getenv("TANK_DATA_DIR"), *xdg, *home;
	int n;

	if (env && *env)
		n = snprintf(buf, cap, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, cap, "/var/lib/tank");
	else if ((xdg = getenv("XDG_STATE_HOME")) && *xdg)
		n = snprintf(buf, cap, "%s/tank", xdg);
	else if ((home = getenv("HOME")) && *home)
		n = snprintf(buf, cap, "%s/.local/state/tank", home);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int parse_flags(tankd_t *d, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data-dir", required_argument, NULL, 'd' },
		{ "socket", required_argument, NULL, 's' },
		{ "socket-group", required_argument, NULL, 'g' },
		{ "resync", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = getenv("TANK_SOCKET");
	int c;

	if (default_data_dir(d->data_dir, sizeof d->data_dir) < 0)
		d->data_dir[0] = '\0';
	d->resync_ms = 5000;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			snprintf(d->data_dir, sizeof d->data_dir, "%s", optarg);
			break;
		case 's':
			sock = optarg;
			break;
		case 'g': {
			struct group *g = getgrnam(optarg);
			char *end;
			unsigned long gid = strtoul(optarg, &end, 10);
			if (g)
				d->group = g->gr_gid;
			else if (*optarg && !*end)
				d->group = (gid_t)gid;
			else {
				say("fatal", "unknown group %s", optarg);
				return -1;
			}
			d->has_group = true;
			break;
		}
		case 'r': {
			char *end;
			unsigned long long ms = strtoull(optarg, &end, 10);
			if (!*optarg || *end || ms == 0) {
				say("fatal", "--resync: expected milliseconds > 0, got %s", optarg);
				return -1;
			}
			d->resync_ms = ms;
			break;
		}
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("tankd %s\n", TANKD_VERSION);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	if (!d->data_dir[0]) {
		say("fatal", "no data dir: set --data-dir, TANK_DATA_DIR or HOME");
		return -1;
	}
	if (sock && *sock)
		snprintf(d->socket_path, sizeof d->socket_path, "%s", sock);
	else if (snprintf(d->socket_path, sizeof d->socket_path, "%s/tank.sock",
			  d->data_dir) >= (int)sizeof d->socket_path)
		return -1;
	snprintf(d->log_dir, sizeof d->log_dir, "%s/logs", d->data_dir);
	/* One cgroup root per data dir, so two daemons never share groups. */
	snprintf(d->cg_root, sizeof d->cg_root, "tank-%08llx",
		 (unsigned long long)(tank_hash64(d->data_dir, strlen(d->data_dir)) & 0xffffffffu));
	return 0;
}

int main(int argc, char **argv)
{
	static const sup_flags_t root_flags = { SUP_ONE_FOR_ONE, 3, 10000, SUP_AUTO_NEVER };
	tankd_t d;
	tank_error_t e;
	int err;

	memset(&d, 0, sizeof d);
	if (parse_flags(&d, argc, argv) < 0)
		return EXIT_PERMANENT;
	/* Containers' orphaned descendants are re-parented to us and reaped
	 * by the runtime, not by init, so a pod's leftovers stay ours. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* Each container holds a few fds (pipes, log, cgroup): take every fd
	 * the hard limit allows, as s6-svscan and systemd do. */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	signal(SIGPIPE, SIG_IGN);

	/* The launcher's slot fds are taken first, so they sit low in the fd
	 * table and a spawn copies only those (docs/launcher.md). */
	if ((err = pod_launch_reserve()) < 0)
		say("warning", "unable to reserve launcher fds: %s (spawns copy the fd table)",
		    tank_strerror(err));
	tank_error_clear(&e);
	if ((err = st_open(d.data_dir, &(st_options_t){ .on_flush_error = flush_error }, &d.store, &e)) < 0) {
		say("fatal", "unable to open the store in %s: %s", d.data_dir,
		    e.msg[0] ? e.msg : tank_strerror(err));
		return err == TANK_ELOCKED ? EXIT_TEMPORARY : EXIT_PERMANENT;
	}
	if (pod_cgroup_probe(&d.cg, NULL, d.cg_root, &e) < 0)
		d.cg.mode = POD_CGROUP_NONE;
	pod_mgr_opts_t po = {
		.store = d.store, .log_dir = d.log_dir, .cgroups = &d.cg,
		.on_event = on_event, .event_ctx = &d,
		.on_drained = drained, .drained_ctx = &d,
	};
	if (!(d.rt = rt_new()) || pod_mgr_new(&po, &d.pods) < 0) {
		say("fatal", "unable to start the runtime: out of memory");
		st_close(d.store, NULL);
		return EXIT_TEMPORARY;
	}
	d.api = (api_daemon_t){ .rt = d.rt, .store = d.store, .log_dir = d.log_dir,
				.version = TANKD_VERSION, .pods = d.pods };
	d.nmethods = api_methods_table(&d.api, d.methods);

	const sup_spec_t children[] = {
		{ .id = "store", .start = start_store, .arg = &d,
		  .restart = SUP_PERMANENT, .shutdown = 5000 },
		{ .id = "reconciler", .start = start_reconciler, .arg = &d,
		  .restart = SUP_PERMANENT, .shutdown = 5000 },
		{ .id = "api", .start = start_api, .arg = &d,
		  .restart = SUP_PERMANENT, .shutdown = 5000 },
	};
	d.exit_code = 0;
	if ((err = sup_start_root(d.rt, &root_flags, children, 3, root_exited, &d, &d.root)) < 0) {
		say("fatal", "unable to start: %s", tank_strerror(err));
		d.exit_code = err == -EADDRINUSE ? EXIT_TEMPORARY : EXIT_PERMANENT;
	} else {
		ev_signal_init(&d.sigterm, signal_cb, SIGTERM);
		ev_signal_init(&d.sigint, signal_cb, SIGINT);
		d.sigterm.data = d.sigint.data = &d;
		ev_signal_start(rt_loop(d.rt), &d.sigterm);
		ev_signal_start(rt_loop(d.rt), &d.sigint);
		say("info", "serving %s (data dir %s, cgroups %s)", d.socket_path, d.data_dir,
		    d.cg.mode == POD_CGROUP_V2 ? "v2" : d.cg.mode == POD_CGROUP_V1 ? "v1" : "none");
		rt_run(d.rt);
		ev_signal_stop(rt_loop(d.rt), &d.sigterm);
		ev_signal_stop(rt_loop(d.rt), &d.sigint);
		if (ev_is_active(&d.stop_deadline))
			ev_timer_stop(rt_loop(d.rt), &d.stop_deadline);
	}
	rt_free(d.rt);
	pod_mgr_free(d.pods);
	if (d.cg.mode != POD_CGROUP_NONE)
		pod_cgroup_env_cleanup(&d.cg);
	if (st_close(d.store, &e) < 0)
		say("warning", "unable to close the store: %s", e.msg);
	if (!d.exit_code)
		say("info", "stopped");
	return d.exit_code;
}
