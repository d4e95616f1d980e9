/*
 * kp_proto.c — the keeper's messages and tankd's end (contract in
 * kp_proto.h).
 */
#include "keeper/kp_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

int kp_send(int sock, const kp_msg_t *m, const int *fds, unsigned n, bool dontwait)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KP_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)m, sizeof *m };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;

	if (n > KP_MAX_FDS)
		return -EINVAL;
	if (n) {
		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
	}
	do
		r = sendmsg(sock, &mh, MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0));
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r == (ssize_t)sizeof *m ? 0 : -EIO;
}

int kp_recv(int sock, kp_msg_t *m, int *fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { m, sizeof *m };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.buf, .msg_controllen = sizeof u.buf };
	ssize_t r;

	do
		r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return 0;
	m->nfds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int got[8];
		memcpy(got, CMSG_DATA(cm), sizeof(int) * (k < 8 ? k : 8));
		for (size_t i = 0; i < k && i < 8; i++) {
			if (m->nfds < KP_MAX_FDS)
				fds[m->nfds++] = got[i];
			else
				close(got[i]);
		}
	}
	if (r != (ssize_t)sizeof *m) {
		for (unsigned i = 0; i < m->nfds; i++)
			close(fds[i]);
		m->nfds = 0;
		return -EPROTO;
	}
	m->tag[KP_TAG_MAX - 1] = '\0';
	return 1;
}

int kp_client_from_env(kp_client_t *c, tank_error_t *err)
{
	const char *fs = getenv(KP_ENV_FD), *ps = getenv(KP_ENV_PID);
	struct stat st;
	char *end;
	long fd;

	c->fd = -1;
	c->pid = 0;
	if (!fs || !*fs)
		return 0;
	fd = strtol(fs, &end, 10);
	if (*end || fd < 3 || fd > 1 << 24 || fstat((int)fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return tank_error_set(err, TANK_EINVALID, "%s=%s: not a socket", KP_ENV_FD, fs);
	(void)fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	/* Sends block while the keeper reads (it always does at once: a
	 * socketpair queues only a few messages); one that cannot go out in
	 * 2 s means the keeper is stuck, and is the end of it. */
	struct timeval tv = { 2, 0 };
	(void)setsockopt((int)fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	c->fd = (int)fd;
	c->pid = ps ? (pid_t)strtol(ps, NULL, 10) : getppid();
	return 0;
}

void kp_client_close(kp_client_t *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->pid = 0;
}

static int kp__client_send(kp_client_t *c, const kp_msg_t *m, const int *fds, unsigned n)
{
	int r;

	if (c->fd < 0)
		return 0;
	/* A failure ends the link: shut down, so that the reader (the
	 * daemon's watch on fd, kp_client_read) sees the end and closes it;
	 * closing here would pull the fd from under that watch. */
	if ((r = kp_send(c->fd, m, fds, n, false)) < 0)
		(void)shutdown(c->fd, SHUT_RDWR);
	return r;
}

static void kp__tag(kp_msg_t *m, const char *tag)
{
	size_t l = strlen(tag);
	if (l >= sizeof m->tag)
		l = sizeof m->tag - 1;
	memcpy(m->tag, tag, l);
	m->tag[l] = '\0';
}

int kp_client_put(kp_client_t *c, const char *tag, const int *fds, unsigned n)
{
	kp_msg_t m = { .op = KP_PUT };
	kp__tag(&m, tag);
	return kp__client_send(c, &m, fds, n);
}

int kp_client_del(kp_client_t *c, const char *tag)
{
	kp_msg_t m = { .op = KP_DEL };
	kp__tag(&m, tag);
	return kp__client_send(c, &m, NULL, 0);
}

int kp_client_ack(kp_client_t *c, pid_t pid, uint64_t start)
{
	kp_msg_t m = { .op = KP_ACK, .pid = pid, .start = start };
	return kp__client_send(c, &m, NULL, 0);
}

/* The next message of an answer, waiting for it up to timeout_ms each
 * time the socket is empty.  > 0: m and fds are filled.  A wait that
 * failed: -ETIMEDOUT or the poll's error, the connection kept.  The
 * connection's end (kp_recv's 0 or error): it is closed here (c->fd < 0)
 * and that value returned. */
static int kp__client_next(kp_client_t *c, int timeout_ms, kp_msg_t *m, int *fds)
{
	for (;;) {
		struct pollfd pf = { c->fd, POLLIN, 0 };
		int r = kp_recv(c->fd, m, fds);
		if (r != -EAGAIN) {
			if (r <= 0)
				kp_client_close(c);
			return r;
		}
		if ((r = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ETIMEDOUT;
	}
}

int kp_client_hello(kp_client_t *c, int timeout_ms,
		    void (*entry)(void *ctx, const char *tag, const int *fds, unsigned n),
		    void (*exit)(void *ctx, pid_t pid, uint64_t start, int status,
				 int64_t at_ms),
		    void *ctx)
{
	kp_msg_t m = { .op = KP_HELLO };
	int fds[KP_MAX_FDS], r;

	if (c->fd < 0)
		return 0;
	if ((r = kp__client_send(c, &m, NULL, 0)) < 0)
		return r;
	for (;;) {
		if ((r = kp__client_next(c, timeout_ms, &m, fds)) <= 0)
			return c->fd >= 0 || r < 0 ? r : -EPIPE;
		if (m.op == KP_END)
			return 0;
		if (m.op == KP_ENTRY)
			entry(ctx, m.tag, fds, m.nfds);
		else {
			for (unsigned i = 0; i < m.nfds; i++)
				close(fds[i]);
			if (m.op == KP_EXIT)
				exit(ctx, m.pid, m.start, m.status, m.at_ms);
		}
	}
}

int kp_client_stat(kp_client_t *c, int timeout_ms,
		   void (*exit)(void *ctx, pid_t pid, uint64_t start, int status,
				int64_t at_ms),
		   void *ctx, uint64_t *tags, uint64_t *exits)
{
	kp_msg_t m = { .op = KP_STAT };
	int fds[KP_MAX_FDS], r;

	if (c->fd < 0)
		return -EPIPE;
	if ((r = kp__client_send(c, &m, NULL, 0)) < 0)
		return r;
	for (;;) {
		if ((r = kp__client_next(c, timeout_ms, &m, fds)) <= 0)
			return c->fd >= 0 ? r : -EPIPE;
		for (unsigned i = 0; i < m.nfds; i++)
			close(fds[i]);
		if (m.op == KP_EXIT)
			exit(ctx, m.pid, m.start, m.status, m.at_ms);
		else if (m.op == KP_STAT) {
			*tags = m.start;
			*exits = (uint64_t)m.at_ms;
			return 0;
		}
	}
}

int kp_client_read(kp_client_t *c,
		   void (*exit)(void *ctx, pid_t pid, uint64_t start, int status,
				int64_t at_ms),
		   void *ctx)
{
	kp_msg_t m;
	int fds[KP_MAX_FDS], r;

	while (c->fd >= 0) {
		r = kp_recv(c->fd, &m, fds);
		if (r == -EAGAIN)
			return 0;
		if (r <= 0) {
			kp_client_close(c);
			return -EPIPE;
		}
		for (unsigned i = 0; i < m.nfds; i++)
			close(fds[i]);
		if (m.op == KP_EXIT)
			exit(ctx, m.pid, m.start, m.status, m.at_ms);
	}
	return -EPIPE;
}
