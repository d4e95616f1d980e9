/*
 * api_client.c — blocking msgpack-RPC client (see api_client.h).
 */
#include "api/api_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define API__CLIENT_CHUNK (64u << 10)

typedef struct api_qnode {
	struct api_qnode *next;
	api_incoming_t in;
} api_qnode_t;

struct api_client {
	int fd;
	uint32_t next_id;
	msgpack_unpacker unp;
	api_qnode_t *qhead, *qtail;   /* messages read while waiting for another */
	char path[108];
};

void api_incoming_free(api_incoming_t *in)
{
	if (!in)
		return;
	msgpack_unpacked_destroy(&in->up);
	memset(in, 0, sizeof *in);
}

int api_client_fd(const api_client_t *c)
{
	return c->fd;
}

int api_client_connect(const char *path, api_client_t **out, tank_error_t *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	api_client_t *c;
	int fd, r;

	*out = NULL;
	if (strlen(path) >= sizeof sa.sun_path)
		return tank_error_set(err, -ENAMETOOLONG, "socket path %s is too long", path);
	strcpy(sa.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return tank_error_set(err, -errno, "socket: %s", tank_strerror(-errno));
	do
		r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		r = -errno;
		close(fd);
		return tank_error_set(err, r, "cannot connect to %s: %s (is tankd running?)",
				      path, tank_strerror(r));
	}
	/* Non-blocking from here on: every wait goes through poll with a
	 * timeout, so a stuck daemon cannot hang tankctl forever. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    !(c = calloc(1, sizeof *c))) {
		close(fd);
		return tank_error_set(err, -ENOMEM, "out of memory");
	}
	if (!msgpack_unpacker_init(&c->unp, API__CLIENT_CHUNK)) {
		free(c);
		close(fd);
		return tank_error_set(err, -ENOMEM, "out of memory");
	}
	c->fd = fd;
	c->next_id = 1;
	snprintf(c->path, sizeof c->path, "%s", path);
	*out = c;
	return 0;
}

void api_client_close(api_client_t *c)
{
	if (!c)
		return;
	while (c->qhead) {
		api_qnode_t *n = c->qhead;
		c->qhead = n->next;
		api_incoming_free(&n->in);
		free(n);
	}
	msgpack_unpacker_destroy(&c->unp);
	close(c->fd);
	free(c);
}

static int64_t api__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left until deadline (-1: none), for poll. */
static int api__left(int64_t deadline)
{
	if (deadline < 0)
		return -1;
	int64_t l = deadline - api__now_ms();
	return l < 0 ? 0 : (int)(l > 1000000 ? 1000000 : l);
}

static int api__wait_fd(api_client_t *c, short ev, int64_t deadline, tank_error_t *err)
{
	struct pollfd p = { .fd = c->fd, .events = ev };
	int r;

	for (;;) {
		r = poll(&p, 1, api__left(deadline));
		if (r > 0)
			return 0;
		if (r == 0)
			return tank_error_set(err, -ETIMEDOUT,
					      "no answer from tankd on %s in time", c->path);
		if (errno != EINTR)
			return tank_error_set(err, -errno, "poll: %s", tank_strerror(-errno));
	}
}

int api_client_send_raw(api_client_t *c, const void *buf, size_t len,
			int timeout_ms, tank_error_t *err)
{
	int64_t deadline = timeout_ms < 0 ? -1 : api__now_ms() + timeout_ms;
	const char *p = buf;
	int r;

	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if ((r = api__wait_fd(c, POLLOUT, deadline, err)) < 0)
					return r;
				continue;
			}
			if (errno == EPIPE || errno == ECONNRESET)
				return tank_error_set(err, -ECONNRESET,
						      "tankd closed the connection on %s", c->path);
			return tank_error_set(err, -errno, "send: %s", tank_strerror(-errno));
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

typedef struct api__req {
	uint32_t id;
	const char *method;
	api_pack_fn fn;
	void *arg;
} api__req_t;

int api_client_send(api_client_t *c, const char *method, api_pack_fn params,
		    void *arg, int timeout_ms, uint32_t *msgid, tank_error_t *err)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	uint32_t id = c->next_id++;
	int r;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if ((r = api_pack_request(&pk, id, method, params, arg)) < 0) {
		msgpack_sbuffer_destroy(&sb);
		return tank_error_set(err, r, "cannot encode %s request: %s", method,
				      tank_strerror(r));
	}
	if (msgid)
		*msgid = id;
	r = api_client_send_raw(c, sb.data, sb.size, timeout_ms, err);
	msgpack_sbuffer_destroy(&sb);
	return r;
}

/* Turns an unpacked object into *out (taking the zone).  -EPROTO for a
 * message a client cannot receive. */
static int api__incoming(api_client_t *c, msgpack_unpacked *up, api_incoming_t *out,
			 tank_error_t *err)
{
	api_msg_t m;
	tank_error_t e;

	memset(out, 0, sizeof *out);
	if (api_rpc_parse(&up->data, &m, &e) < 0 || m.type == API_REQUEST) {
		msgpack_unpacked_destroy(up);
		return tank_error_set(err, -EPROTO, "bad message from tankd on %s: %s",
				      c->path, m.type == API_REQUEST ? "a request" : e.msg);
	}
	out->up = *up;   /* zone moves; data's pointers stay valid */
	msgpack_unpacked_init(up);
	out->type = m.type;
	/* Recompute the pointers against out->up.data: m's point into *up. */
	const msgpack_object *a = out->up.data.via.array.ptr;
	if (m.type == API_RESPONSE) {
		out->msgid = m.msgid;
		out->result = &a[3];
		if (a[2].type == MSGPACK_OBJECT_NIL) {
			out->code = API_OK;
		} else {
			api_error_read(&a[2], &out->code, out->message, sizeof out->message,
				       &out->details);
			if (out->code == API_OK)
				out->code = API_INTERNAL;
		}
	} else {
		api_obj_strcpy(&a[1], out->method, sizeof out->method);
		out->params = &a[2];
	}
	return 0;
}

/* Reads one message from the socket. */
static int api__read_one(api_client_t *c, int64_t deadline, api_incoming_t *out,
			 tank_error_t *err)
{
	msgpack_unpacked up;
	int r;

	msgpack_unpacked_init(&up);
	for (;;) {
		msgpack_unpack_return ur = msgpack_unpacker_next(&c->unp, &up);
		if (ur == MSGPACK_UNPACK_SUCCESS || ur == MSGPACK_UNPACK_EXTRA_BYTES)
			return api__incoming(c, &up, out, err);
		if (ur != MSGPACK_UNPACK_CONTINUE) {
			msgpack_unpacked_destroy(&up);
			return tank_error_set(err, -EPROTO, "malformed data from tankd on %s",
					      c->path);
		}
		if (msgpack_unpacker_message_size(&c->unp) > API_CLIENT_MAX_FRAME)
			return tank_error_set(err, -EPROTO, "answer from tankd too large");
		if (!msgpack_unpacker_reserve_buffer(&c->unp, API__CLIENT_CHUNK))
			return tank_error_set(err, -ENOMEM, "out of memory");
		ssize_t n = recv(c->fd, msgpack_unpacker_buffer(&c->unp),
				 msgpack_unpacker_buffer_capacity(&c->unp), 0);
		if (n > 0) {
			msgpack_unpacker_buffer_consumed(&c->unp, (size_t)n);
			continue;
		}
		if (n == 0 || errno == ECONNRESET)
			return tank_error_set(err, -ECONNRESET,
					      "tankd closed the connection on %s", c->path);
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return tank_error_set(err, -errno, "recv: %s", tank_strerror(-errno));
		if ((r = api__wait_fd(c, POLLIN, deadline, err)) < 0)
			return r;
	}
}

int api_client_next(api_client_t *c, int timeout_ms, api_incoming_t *out,
		    tank_error_t *err)
{
	if (c->qhead) {
		api_qnode_t *n = c->qhead;
		if (!(c->qhead = n->next))
			c->qtail = NULL;
		*out = n->in;
		free(n);
		return 0;
	}
	return api__read_one(c, timeout_ms < 0 ? -1 : api__now_ms() + timeout_ms,
			     out, err);
}

/* A server that closes a connection it will not serve says why first, in
 * an "error" notification (at its connection cap: docs/rpc.md "Limits").
 * Its message is added to err's "closed the connection", so the user sees
 * the reason.  api__why: whether in is that notification. */
static bool api__why(const api_client_t *c, const api_incoming_t *in, tank_error_t *err)
{
	const msgpack_object *p = in->params, *m;

	if (in->type != API_NOTIFICATION || strcmp(in->method, "error") ||
	    !p || p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size < 1 ||
	    !(m = api_map_get(&p->via.array.ptr[0], "message")) ||
	    m->type != MSGPACK_OBJECT_STR)
		return false;
	tank_error_set(err, -ECONNRESET, "tankd closed the connection on %s: %.*s",
		       c->path, (int)m->via.str.size, m->via.str.ptr);
	return true;
}

/* Closed while waiting: the notification was queued. */
static void api__closed_why(api_client_t *c, tank_error_t *err)
{
	for (api_qnode_t *n = c->qhead; n; n = n->next)
		if (api__why(c, &n->in, err))
			return;
}

/* Closed before the request was sent (refused at accept): the
 * notification waits in the socket, read within a short bound. */
static void api__refused_why(api_client_t *c, tank_error_t *err)
{
	int64_t deadline = api__now_ms() + 200;
	api_incoming_t in;
	tank_error_t e;

	api__closed_why(c, err);
	for (int i = 0; i < 16; i++) {
		memset(&in, 0, sizeof in);
		if (api__read_one(c, deadline, &in, &e) < 0)
			return;
		bool found = api__why(c, &in, err);
		api_incoming_free(&in);
		if (found)
			return;
	}
}

int api_client_wait(api_client_t *c, uint32_t msgid, int timeout_ms,
		    api_incoming_t *out, tank_error_t *err)
{
	int64_t deadline = timeout_ms < 0 ? -1 : api__now_ms() + timeout_ms;
	int r;

	for (api_qnode_t **pp = &c->qhead; *pp; pp = &(*pp)->next) {
		api_qnode_t *n = *pp;
		if (n->in.type == API_RESPONSE && n->in.msgid == msgid) {
			*pp = n->next;
			if (c->qtail == n) {
				c->qtail = NULL;
				for (api_qnode_t *t = c->qhead; t; t = t->next)
					c->qtail = t;
			}
			*out = n->in;
			free(n);
			return 0;
		}
	}
	for (;;) {
		if ((r = api__read_one(c, deadline, out, err)) < 0) {
			if (r == -ECONNRESET)
				api__closed_why(c, err);
			return r;
		}
		if (out->type == API_RESPONSE && out->msgid == msgid)
			return 0;
		api_qnode_t *n = malloc(sizeof *n);
		if (!n) {
			api_incoming_free(out);
			return tank_error_set(err, -ENOMEM, "out of memory");
		}
		n->in = *out;
		n->next = NULL;
		memset(out, 0, sizeof *out);
		if (c->qtail)
			c->qtail->next = n;
		else
			c->qhead = n;
		c->qtail = n;
	}
}

int api_client_call(api_client_t *c, const char *method, api_pack_fn params,
		    void *arg, int timeout_ms, api_incoming_t *out,
		    tank_error_t *err)
{
	uint32_t id;
	int r;

	memset(out, 0, sizeof *out);
	if ((r = api_client_send(c, method, params, arg, timeout_ms, &id, err)) < 0) {
		if (r == -ECONNRESET)
			api__refused_why(c, err);
		return r;
	}
	return api_client_wait(c, id, timeout_ms, out, err);
}
