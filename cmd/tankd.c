/*
 * tankd — the tank daemon's main: flags and environment into a dmn_opts_t,
 * then daemon/dmn.h does the rest (the supervision tree, signals, drain).
 * Nothing here decides anything a test would need to reach.
 *
 * `tankd --keeper [FLAGS]` is the keeper instead (keeper/kp_keeper.h):
 * it starts `tankd FLAGS` (this binary, from its path) and keeps what a
 * tankd killed -9 would lose.  It is what a service manager should run
 * (docs/operations.md).
 *
 * Diagnostics: "tankd: fatal: unable to X: reason" on stderr; exit 111 for
 * a temporary failure (data dir in use, socket in use), 100 for a
 * permanent one (bad flags, unknown schema), as s6 does.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/cl_node.h"
#include "daemon/dmn.h"
#include "common/kit_units.h"
#include "keeper/kp_keeper.h"
#include "obs/obs_notify.h"

/* What the flags set; paths point into argv or the environment. */
typedef struct flags {
	char data_dir[PATH_MAX];
	dmn_opts_t o;
	/* --cluster: the node agent (cluster/cl_node.h); url NULL: none. */
	cl_node_opts_t cl;
} flags_t;

static void usage(FILE *fp)
{
	fprintf(fp,
		"usage: tankd [--keeper] [--data-dir DIR] [--socket PATH] [--socket-group GROUP]\n"
		"             [--resync DURATION] [--drain-timeout DURATION]\n"
		"             [--http ADDR [--http-allow-remote]]\n"
		"             [--cgroup-delegate auto|yes|no] [--ready-fd N]\n"
		"             [--cluster URL --node NAME [--labels K=V,...]]\n"
		"Runs the tank daemon in the foreground.\n"
		"  --keeper            run a keeper that starts tankd with the other flags,\n"
		"                      restarts it when it dies and keeps its pods' output\n"
		"                      and exits meanwhile, so they are adopted, not restarted\n"
		"  --data-dir DIR      state, logs and socket (env TANK_DATA_DIR; default\n"
		"                      /var/lib/tank for root, else $XDG_STATE_HOME/tank)\n"
		"  --socket PATH       RPC socket (env TANK_SOCKET; default DIR/tank.sock)\n"
		"  --socket-group G    socket mode 0660 and group G, whose members may call\n"
		"  --resync D          full reconcile pass period (500ms, 5s, 1m; a bare\n"
		"                      number is milliseconds; default 5s)\n"
		"  --drain-timeout D   at SIGTERM, how long containers may take to stop\n"
		"                      before they are killed (250ms, 10s, 5m; default 60s)\n"
		"  --http ADDR         serve /metrics, /healthz, /events and a live page on\n"
		"                      HOST:PORT (e.g. 127.0.0.1:9180; default: off)\n"
		"  --http-allow-remote allow an --http address that is not loopback\n"
		"  --cgroup-delegate M place the pods' cgroups below tankd's own (v2): auto\n"
		"                      when its group is marked delegated (systemd's\n"
		"                      Delegate=yes; the default), yes, or no (the root)\n"
		"  --ready-fd N        write a newline to fd N once ready (s6's\n"
		"                      notification-fd); NOTIFY_SOCKET gets sd_notify\n"
		"  --cluster URL       join the cluster whose etcd answers at URL\n"
		"                      (http://HOST:2379): run the pods etcd assigns to\n"
		"                      this node and write their status back\n"
		"                      (docs/cluster.md)\n"
		"  --node NAME         this node's name in the cluster\n"
		"  --labels K=V,...    this node's labels, for pods' node_selector\n"
		"  --version, --help\n");
}

static void fatal(const char *fmt, const char *arg)
{
	fprintf(stderr, "tankd: fatal: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
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

/* 0, 1 for --help/--version (done, exit 0), -1 for bad usage (said). */
static int parse_flags(flags_t *f, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data-dir", required_argument, NULL, 'd' },
		{ "socket", required_argument, NULL, 's' },
		{ "socket-group", required_argument, NULL, 'g' },
		{ "resync", required_argument, NULL, 'r' },
		{ "drain-timeout", required_argument, NULL, 'D' },
		{ "http", required_argument, NULL, 'H' },
		{ "http-allow-remote", no_argument, NULL, 'R' },
		{ "cgroup-delegate", required_argument, NULL, 'C' },
		{ "ready-fd", required_argument, NULL, 'F' },
		{ "cluster", required_argument, NULL, 'U' },
		{ "node", required_argument, NULL, 'N' },
		{ "labels", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	if (default_data_dir(f->data_dir, sizeof f->data_dir) < 0)
		f->data_dir[0] = '\0';
	f->o.data_dir = f->data_dir;
	f->o.socket_path = getenv("TANK_SOCKET");
	/* Under a service manager that listens (systemd's Type=notify). */
	f->o.notify = obs_notify_wanted();
	opterr = 0;                /* said below, once, naming the option */
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			f->o.data_dir = optarg;
			break;
		case 'U':
			f->cl.url = optarg;
			break;
		case 'N':
			f->cl.node = optarg;
			break;
		case 'L':
			f->cl.labels = optarg;
			break;
		case 's':
			f->o.socket_path = optarg;
			break;
		case 'g': {
			struct group *g = getgrnam(optarg);
			char *end;
			unsigned long gid = strtoul(optarg, &end, 10);
			if (g)
				f->o.socket_group = g->gr_gid;
			else if (*optarg && !*end)
				f->o.socket_group = (gid_t)gid;
			else {
				fatal("unknown group %s", optarg);
				return -1;
			}
			f->o.has_socket_group = true;
			break;
		}
		case 'r':
			/* A duration as every other one; a bare number stays
			 * milliseconds, as it was before. */
			if (kit_parse_duration(optarg, strlen(optarg), &f->o.resync_ms) < 0 ||
			    f->o.resync_ms == 0) {
				fatal("--resync: expected a duration > 0 (500ms, 5s, 1m), got %s",
				      optarg);
				return -1;
			}
			break;
		case 'D':
			if (kit_parse_duration(optarg, strlen(optarg), &f->o.drain_ms) < 0 ||
			    f->o.drain_ms == 0) {
				fatal("--drain-timeout: expected a duration > 0 (250ms, 10s, 5m), got %s",
				      optarg);
				return -1;
			}
			break;
		case 'H':
			f->o.http_addr = optarg;
			break;
		case 'R':
			f->o.http_allow_remote = true;
			break;
		case 'F': {
			char *end;
			long fd = strtol(optarg, &end, 10);
			if (!*optarg || *end || fd < 1 || fd > 65535) {
				fatal("--ready-fd: expected a file descriptor > 0, got %s", optarg);
				return -1;
			}
			f->o.ready_fd = (int)fd;
			break;
		}
		case 'C':
			if (!strcmp(optarg, "auto"))
				f->o.cgroup_delegate = DMN_DELEGATE_AUTO;
			else if (!strcmp(optarg, "yes"))
				f->o.cgroup_delegate = DMN_DELEGATE_YES;
			else if (!strcmp(optarg, "no"))
				f->o.cgroup_delegate = DMN_DELEGATE_NO;
			else {
				fatal("--cgroup-delegate: expected auto, yes or no, got %s", optarg);
				return -1;
			}
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("tankd %s\n", DMN_VERSION);
			return 1;
		case ':':
			fprintf(stderr, "tankd: option '%s' needs a value\n"
				"run 'tankd --help' for the options\n", argv[optind - 1]);
			return -1;
		default:
			fprintf(stderr, "tankd: unknown option '%s'\nrun 'tankd --help' for the options\n",
				argv[optind - 1]);
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "tankd: unexpected argument '%s' (tankd takes options only)\n"
			"run 'tankd --help' for the options\n", argv[optind]);
		return -1;
	}
	if (!f->o.data_dir[0]) {
		fatal("no data dir: set --data-dir, TANK_DATA_DIR or HOME%s", "");
		return -1;
	}
	if ((f->cl.node || f->cl.labels) && !f->cl.url) {
		fatal("--node and --labels go with --cluster URL%s", "");
		return -1;
	}
	if (f->cl.url) {
		tank_error_t e;

		tank_error_clear(&e);
		/* The socket is known once the daemon is open: checked then. */
		f->cl.socket = "-";
		if (cl_node_check(&f->cl, &e) != 0) {
			fatal("%s", e.msg);
			return -1;
		}
	}
	return 0;
}

/* `tankd --keeper FLAGS`: the keeper, which runs `tankd FLAGS`.  The
 * flags are checked first (a typo is said once, not at every restart). */
static int keeper_main(int argc, char **argv)
{
	static flags_t f;
	char exe[PATH_MAX];
	char **targv = calloc((size_t)argc + 1, sizeof *targv);
	int n = 0, rc;
	ssize_t len;

	if (!targv)
		return DMN_EXIT_TEMPORARY;
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--keeper") != 0)
			targv[n++] = argv[i];
	if ((rc = parse_flags(&f, n, targv)) != 0) {
		free(targv);
		return rc > 0 ? 0 : DMN_EXIT_PERMANENT;
	}
	if ((len = readlink("/proc/self/exe", exe, sizeof exe - 1)) <= 0) {
		fatal("unable to find my own binary: %s", strerror(errno));
		free(targv);
		return DMN_EXIT_PERMANENT;
	}
	exe[len] = '\0';
	kp_keeper_opts_t ko = { .exe = exe, .argv = targv, .journal = obs_journal_stderr() };
	rc = kp_keeper_run(&ko);
	free(targv);
	return rc;
}

int main(int argc, char **argv)
{
	static flags_t f;
	tank_error_t e;
	dmn_t *d;
	int rc;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--keeper") == 0)
			return keeper_main(argc, argv);
	f.o.argv = argv;
	if ((rc = parse_flags(&f, argc, argv)) != 0)
		return rc > 0 ? 0 : DMN_EXIT_PERMANENT;
	/* The readiness fd is the supervisor's: no container inherits it. */
	if (f.o.ready_fd > 0 && fcntl(f.o.ready_fd, F_SETFD, FD_CLOEXEC) < 0) {
		fatal("--ready-fd: %s", strerror(errno));
		return DMN_EXIT_PERMANENT;
	}
	dmn_process_setup(&f.o);
	tank_error_clear(&e);
	if ((rc = dmn_open(&f.o, &d, &e)) < 0) {
		fatal("%s", e.msg[0] ? e.msg : tank_strerror(rc));
		return dmn_exit_status(rc);
	}
	/* The node agent runs beside the daemon, on threads of its own, and
	 * talks to it through its socket as any client (cluster/cl_node.h). */
	cl_node_t *node = NULL;
	if (f.cl.url) {
		f.cl.socket = dmn_socket_path(d);
		if ((rc = cl_node_start(&f.cl, &node, &e)) != 0) {
			fatal("%s", e.msg);
			dmn_close(d);
			return DMN_EXIT_TEMPORARY;
		}
	}
	rc = dmn_run(d);
	/* Stopped: its pods are stopped too, so the lease goes at once and
	 * the other nodes take them without waiting for the TTL. */
	cl_node_stop(node, true);
	dmn_close(d);
	return rc;
}
