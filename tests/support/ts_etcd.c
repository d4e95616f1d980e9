/* ts_etcd — see ts_etcd.h. */
#include "tests/support/ts_etcd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cl_etcd.h"
#include "tests/support/tsupport.h"

const char *ts_etcd_bin(void)
{
	const char *b = getenv("TANK_ETCD");

	return b && *b ? b : "/usr/bin/etcd";
}

bool ts_etcd_available(void)
{
	return access(ts_etcd_bin(), X_OK) == 0;
}

/* A port the kernel had free a moment ago: etcd binds it next, and a
 * start that loses the race is retried with other ports. */
static int free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int spawn(ts_etcd_t *e)
{
	char data[PATH_MAX + 8], log[PATH_MAX + 16], client[64], peer[64], cluster[96];
	cl_etcd_t *c;
	cl_kvs_t r;
	pid_t pid;
	int st;

	snprintf(data, sizeof data, "%s/data", e->dir);
	snprintf(log, sizeof log, "%s/etcd.log", e->dir);
	snprintf(client, sizeof client, "http://127.0.0.1:%d", e->client_port);
	snprintf(peer, sizeof peer, "http://127.0.0.1:%d", e->peer_port);
	snprintf(cluster, sizeof cluster, "default=%s", peer);
	snprintf(e->url, sizeof e->url, "%s", client);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(ts_etcd_bin(), "etcd", "--name", "default", "--data-dir", data,
		      "--listen-client-urls", client, "--advertise-client-urls", client,
		      "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		      "--initial-cluster", cluster, (char *)NULL);
		_exit(127);
	}
	ts_own_pid(pid);
	e->pid = pid;
	if (cl_etcd_open(e->url, &c) != 0)
		return -ENOMEM;
	cl_etcd_set_timeout(c, 1000);
	for (double end = now_s() + 20; now_s() < end;) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			e->pid = 0;
			cl_etcd_close(c);
			return -EADDRINUSE;
		}
		if (cl_etcd_get(c, "/ts-etcd-ready", &r) == 0) {
			cl_kvs_free(&r);
			cl_etcd_close(c);
			return 0;
		}
		usleep(50 * 1000);
	}
	cl_etcd_close(c);
	ts_etcd_stop(e, true);
	return -ETIMEDOUT;
}

int ts_etcd_start(ts_etcd_t *e)
{
	int rc = -EADDRINUSE;

	memset(e, 0, sizeof *e);
	if (!ts_mkdtemp(e->dir, sizeof e->dir, "tank-etcd"))
		return -errno;
	for (int i = 0; i < 5 && rc == -EADDRINUSE; i++) {
		e->client_port = free_port();
		e->peer_port = free_port();
		if (e->client_port <= 0 || e->peer_port <= 0 || e->client_port == e->peer_port)
			continue;
		rc = spawn(e);
	}
	return rc;
}

void ts_etcd_stop(ts_etcd_t *e, bool hard)
{
	int st;

	if (e->pid <= 0)
		return;
	kill(e->pid, hard ? SIGKILL : SIGTERM);
	while (waitpid(e->pid, &st, 0) < 0 && errno == EINTR)
		;
	e->pid = 0;
}

int ts_etcd_restart(ts_etcd_t *e)
{
	int rc = -EADDRINUSE;

	ts_etcd_stop(e, false);
	/* The ports were just ours; a few tries ride out a TIME_WAIT. */
	for (int i = 0; i < 50 && rc == -EADDRINUSE; i++) {
		if ((rc = spawn(e)) == -EADDRINUSE)
			usleep(100 * 1000);
	}
	return rc;
}
