/*
 * api_server.c — the listener and connection actors (see api_server.h).
 *
 * Why connections are actors rather than one big select loop inside the
 * listener: a connection's lifetime then follows the runtime's rules (a
 * generational pid makes late replies safe, death is deferred to a safe
 * point, the runtime's fairness keeps one busy client from starving the
 * others), and the daemon's handlers reply from wherever they are by pid.
 *
 * Replies and events are appended straight into the connection's output
 * buffer (found with rt_state_of) instead of being mailed to it: one copy
 * less, and the bound on buffered output is checked at the moment the
 * bytes are added, so a slow subscriber is cut off before memory grows.
 */
#include "api/api_server.h"

#include "common/kit.h"
#include "common/kit_frame.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define API__READ_CHUNK (64u << 10)
#define API__TURN_MS 5u             /* a connection's requests served a turn */
#define API__MAX_PENDING 4096u      /* unanswered requests before we stop
				     * reading a connection */
#define API__LINGER_MS 5000u        /* flush time granted before a close */
#define API__EOF_LINGER_MS 30000u   /* wait for replies after the peer's EOF */
#define API__ACCEPT_BATCH 64
#define API__ACCEPT_PAUSE_MS 100u   /* after EMFILE: retry later, not spin */
#define API__METHOD_MAX 128
#define API__EV_BUF_KEEP (64u << 10) /* publish's buffer kept up to this size */
#define API__SHED_STALL_MS 1000u    /* past max_unsent, output unmoved this
				     * long is shed (api__server_shed) */

enum {
	API__TAG_ACCEPT = 1,
	API__TAG_RESUME,
	API__TAG_READ,
	API__TAG_WRITE,
	API__TAG_LINGER,
	API__TAG_ECHOED,        /* a barrier's echo: answer now (api_reply_after) */
	API__TAG_FIRST_READ,    /* a new connection reads before its fd is polled */
	API__TAG_MORE,          /* requests held in its buffer: serve more */
};

/* --- byte buffer ------------------------------------------------------- */

typedef struct api_buf {
	char *p;
	size_t head;   /* unsent data starts at p + head */
	size_t len;    /* unsent bytes */
	size_t cap;
} api_buf_t;

static int api__buf_reserve(api_buf_t *b, size_t more)
{
	if (b->head && b->head + b->len + more > b->cap) {
		memmove(b->p, b->p + b->head, b->len);
		b->head = 0;
	}
	if (b->len + more <= b->cap)
		return 0;
	size_t ncap = b->cap ? b->cap : 4096;
	while (ncap < b->len + more)
		ncap *= 2;
	char *np = realloc(b->p, ncap);
	if (!np)
		return -ENOMEM;
	b->p = np;
	b->cap = ncap;
	return 0;
}

/* msgpack_packer write callback. */
static int api__buf_write(void *data, const char *buf, size_t len)
{
	api_buf_t *b = data;

	if (api__buf_reserve(b, len) < 0)
		return -ENOMEM;
	memcpy(b->p + b->head + b->len, buf, len);
	b->len += len;
	return 0;
}

/* Gives back the slack of a big buffer grown by doubling (up to half of
 * it): an answer may wait long for its reader, and 400 of them, each the
 * status of 9,700 pods, held twice their size.  A failed realloc keeps
 * the buffer as it is. */
static void api__buf_fit(api_buf_t *b)
{
	size_t used = b->head + b->len;

	if (b->cap - used <= b->len / 4)
		return;
	char *np = realloc(b->p, used);
	if (np) {
		b->p = np;
		b->cap = used;
	}
}

static void api__buf_consume(api_buf_t *b, size_t n)
{
	b->head += n;
	b->len -= n;
	if (!b->len) {
		b->head = 0;
		/* Give back the memory of a burst (a big `list` result). */
		if (b->cap > 256u << 10) {
			free(b->p);
			b->p = NULL;
			b->cap = 0;
		}
	}
}

/* --- state ------------------------------------------------------------- */

typedef struct api_server {
	rt_pid_t self;
	int fd;
	rt_ref_t aref;              /* accept watch, 0 while paused */
	char *path;
	dev_t dev;                  /* the socket file we made: removed on */
	ino_t ino;                  /* stop only if it is still ours */
	api_method_t *methods;      /* owned, names owned */
	size_t nmethods;
	size_t max_frame, max_outbuf, max_conns;
	size_t max_unsent;          /* bound on `unsent` (api__server_shed) */
	size_t unsent;              /* output queued unsent, all connections */
	uint64_t shed;              /* connections closed for it */
	size_t (*conn_room)(void *ctx);
	void *conn_room_ctx;
	uint64_t stall_ms;
	bool has_group;
	gid_t group;
	uid_t uid;
	rt_pid_t *conns;
	size_t nconns, capconns;
	/* The last events, framed, for `subscribe {since}`: a ring of
	 * nrecent entries from recent_head, bounded by count and bytes. */
	struct api__recent { int64_t at_ms; char *frame; size_t len; } *recent;
	size_t recent_cap, recent_head, nrecent, recent_bytes;
	/* api_server_publish's framing buffer, kept from one event to the
	 * next (a fresh one was an 8 KiB malloc per event, see there). */
	msgpack_sbuffer ev;
} api_server_t;

typedef struct api_conn {
	rt_pid_t self, server;
	int fd;
	rt_ref_t rref, wref;        /* read / write watches, 0 when off */
	api_buf_t in;               /* received bytes; a frame starts at
				     * in.head */
	kit_frame_scan_t scan;      /* how far in the frame at in.head */
	api_buf_t out;
	size_t counted;             /* out.len as the server's `unsent` has it */
	size_t max_frame, max_outbuf;
	size_t pending;             /* requests dispatched, not yet answered */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	bool authorized;
	bool subscribed;
	uint64_t last_active_ms;    /* last request or answer (rt_now_ms): the
				     * longest idle goes first at the cap */
	uint64_t out_moved_ms;      /* output queued to an empty buffer, or
				     * bytes of it sent (api__server_shed:
				     * input does not count, or a client
				     * sending a byte a second would keep
				     * answers it never reads) */
	uint64_t last_io_ms;        /* last byte received or sent: a stalled
				     * one goes next (api__server_evict) */
	bool unread;                /* accepted, not read yet: its request may
				     * wait in its socket, so it is neither
				     * idle nor stalled (api__server_evict) */
	bool closing;               /* no more input; die once flushed */
	bool dead;                  /* exit requested: ignore everything */
	/* Requests received and not served yet, held in `in` (its output is
	 * past max_outbuf, or its turn's API__TURN_MS were used): nothing
	 * more is read until they are served.  more_queued: an
	 * API__TAG_MORE is on its way to serve them. */
	bool held, more_queued;
} api_conn_t;

static const rt_behaviour_t api__server_b;
static const rt_behaviour_t api__conn_b;

/* --- connection -------------------------------------------------------- */

static void api__conn_account(rt_t *rt, api_conn_t *c, size_t now_len);

/* Its output stops counting toward max_unsent at once: it is not waited
 * for, and a shed must not close more than it takes. */
static void api__conn_die(rt_t *rt, api_conn_t *c)
{
	if (c->dead)
		return;
	c->dead = true;
	api__conn_account(rt, c, 0);
	if (rt_self(rt) == c->self)
		rt_exit_self(rt, RT_R_SHUTDOWN);
	else
		rt_exit(rt, c->self, RT_R_SHUTDOWN);
}

static void api__conn_watch_write(rt_t *rt, api_conn_t *c)
{
	if (!c->wref && rt_watch_fd(rt, c->self, c->fd, EV_WRITE, API__TAG_WRITE,
				    &c->wref) < 0) {
		c->wref = 0;
		api__conn_die(rt, c);
	}
}

static void api__server_shed(rt_t *rt, api_server_t *s);

/* Brings the server's count of unsent output up to date with c's (after
 * its output grew or drained, or with 0 when it dies); past max_unsent,
 * sheds what is not being read.  The server is gone only at shutdown. */
static void api__conn_account(rt_t *rt, api_conn_t *c, size_t now_len)
{
	api_server_t *s = rt_state_of(rt, c->server, &api__server_b);
	size_t was = c->counted;

	if (c->dead)
		now_len = 0;    /* going: its output is not waited for */
	/* Recorded before the shed, which may pick c itself and zero it. */
	c->counted = now_len;
	if (s) {
		s->unsent = s->unsent - was + now_len;
		if (now_len > was && s->unsent > s->max_unsent)
			api__server_shed(rt, s);
	}
}

/* Room for more of this client's requests: its output below its bound and
 * not too many in flight (backpressure on a client that does not read). */
static bool api__conn_room(const api_conn_t *c)
{
	return c->out.len <= c->max_outbuf && c->pending < API__MAX_PENDING;
}

/* Reads while there is room and no request it sent waits to be served;
 * serves the held ones again (in a turn of their own) once there is room. */
static void api__conn_update_read(rt_t *rt, api_conn_t *c)
{
	bool want = !c->closing && !c->dead && api__conn_room(c) && !c->held;

	if (c->held && !c->more_queued && !c->closing && !c->dead && api__conn_room(c)) {
		if (rt_send(rt, c->self, API__TAG_MORE, NULL, 0) < 0) {
			api__conn_die(rt, c);
			return;
		}
		c->more_queued = true;
	}
	if (want && !c->rref) {
		if (rt_watch_fd(rt, c->self, c->fd, EV_READ, API__TAG_READ, &c->rref) < 0) {
			c->rref = 0;
			api__conn_die(rt, c);
		}
	} else if (!want && c->rref) {
		rt_unwatch_fd(rt, c->rref);
		c->rref = 0;
	}
}

static void api__conn_maybe_finish(rt_t *rt, api_conn_t *c)
{
	if (c->closing && !c->out.len && !c->pending)
		api__conn_die(rt, c);
}

static void api__conn_flush(rt_t *rt, api_conn_t *c)
{
	while (c->out.len && !c->dead) {
		ssize_t n = send(c->fd, c->out.p + c->out.head, c->out.len,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			api__conn_die(rt, c);   /* EPIPE, ECONNRESET: peer gone */
			return;
		}
		api__buf_consume(&c->out, (size_t)n);
		c->last_io_ms = c->out_moved_ms = rt_now_ms(rt);
	}
	api__conn_account(rt, c, c->out.len);
	if (c->dead)
		return;
	if (c->out.len) {
		api__conn_watch_write(rt, c);
	} else if (c->wref) {
		rt_unwatch_fd(rt, c->wref);
		c->wref = 0;
	}
	api__conn_update_read(rt, c);
	api__conn_maybe_finish(rt, c);
}

/* Stops reading and closes once the output is flushed (or after a grace
 * period: a peer that never reads does not keep us). */
static void api__conn_close(rt_t *rt, api_conn_t *c, uint64_t linger_ms)
{
	if (c->closing)
		return;
	c->closing = true;
	api__conn_update_read(rt, c);
	if (rt_send_after(rt, c->self, linger_ms, API__TAG_LINGER, NULL, 0, NULL) < 0)
		api__conn_die(rt, c);
}

static void api__conn_farewell(rt_t *rt, api_conn_t *c, int code, const char *msg);

/* Appends one packed message to c's output.  On a packing error the partial
 * bytes are removed.  `bounded`: an unsolicited message (event) — if it
 * would push the output past max_outbuf, the subscriber is dropped: it
 * gets what was queued before, a final notice saying why, then EOF. */
static int api__conn_append(rt_t *rt, api_conn_t *c, bool bounded,
			    int (*pack)(msgpack_packer *, void *), void *arg)
{
	size_t before = c->out.len;
	msgpack_packer pk;
	int r;

	msgpack_packer_init(&pk, &c->out, api__buf_write);
	if ((r = pack(&pk, arg)) != 0) {
		c->out.len = before;
		return r < 0 ? r : -ENOMEM;
	}
	/* Output queued now is not stalled: its stall is counted from
	 * here (or the last byte sent), not from the request it answers,
	 * which may have taken longer than stall_ms. */
	if (before == 0)
		c->last_io_ms = c->out_moved_ms = rt_now_ms(rt);
	if (bounded && c->out.len > c->max_outbuf) {
		char msg[160];
		c->out.len = before;
		c->subscribed = false;
		snprintf(msg, sizeof msg, "subscription dropped: events went unread "
			 "past %zu bytes (the client reads too slowly); subscribe again",
			 c->max_outbuf);
		api__conn_farewell(rt, c, API_RESOURCE_LIMIT, msg);
		return -ENOBUFS;
	}
	if (c->out.len - before >= (256u << 10))
		api__buf_fit(&c->out);  /* a big answer, not a stream of events */
	api__conn_account(rt, c, c->out.len);
	if (c->dead)
		return 0;       /* shed itself: what it was not reading */
	/* Inside the connection's own turn the read path flushes at its end;
	 * from elsewhere, let EV_WRITE readiness batch the bytes. */
	if (rt_self(rt) != c->self)
		api__conn_watch_write(rt, c);
	return 0;
}

static api_conn_t *api__conn_get(rt_t *rt, rt_pid_t pid)
{
	api_conn_t *c = pid ? rt_state_of(rt, pid, &api__conn_b) : NULL;
	return c && !c->dead ? c : NULL;
}

/* Packing closures for the reply kinds. */
typedef struct api__reply {
	uint32_t msgid;
	int code;
	const char *message;
	api_pack_fn fn;
	void *arg;
	const void *raw;
	size_t len;
	const char *method;
} api__reply_t;

static int api__pack_result_cb(msgpack_packer *pk, void *a)
{
	api__reply_t *r = a;
	return api_pack_result(pk, r->msgid, r->fn, r->arg);
}

static int api__pack_result_raw_cb(msgpack_packer *pk, void *a)
{
	api__reply_t *r = a;
	return api_pack_result_raw(pk, r->msgid, r->raw, r->len);
}

static int api__pack_error_cb(msgpack_packer *pk, void *a)
{
	api__reply_t *r = a;
	return api_pack_error(pk, r->msgid, r->code, r->message, r->fn, r->arg);
}

static int api__pack_notify_cb(msgpack_packer *pk, void *a)
{
	api__reply_t *r = a;
	return api_pack_notification(pk, r->method, r->fn, r->arg);
}

static int api__pack_rawmsg_cb(msgpack_packer *pk, void *a)
{
	api__reply_t *r = a;
	return api_pack_raw(pk, r->raw, r->len);
}

static int api__answer(rt_t *rt, api_token_t t,
		       int (*pack)(msgpack_packer *, void *), api__reply_t *r)
{
	api_conn_t *c = api__conn_get(rt, t.conn);
	int err;

	if (!c)
		return -ESRCH;
	r->msgid = t.msgid;
	err = api__conn_append(rt, c, false, pack, r);
	if (err < 0 && pack != api__pack_error_cb) {
		/* Never leave the client waiting: a result that could not be
		 * packed becomes an internal error. */
		api__reply_t e = { .msgid = t.msgid, .code = API_INTERNAL,
				   .message = "could not encode the result" };
		if (api__conn_append(rt, c, false, api__pack_error_cb, &e) < 0)
			api__conn_die(rt, c);
	}
	if (c->pending)
		c->pending--;
	c->last_active_ms = rt_now_ms(rt);
	if (rt_self(rt) != c->self) {
		api__conn_update_read(rt, c);
		api__conn_maybe_finish(rt, c);
	}
	return err;
}

int api_reply(rt_t *rt, api_token_t token, api_pack_fn fn, void *arg)
{
	api__reply_t r = { .fn = fn, .arg = arg };
	return api__answer(rt, token, api__pack_result_cb, &r);
}

int api_reply_raw(rt_t *rt, api_token_t token, const void *result, size_t len)
{
	api__reply_t r = { .raw = result, .len = len };
	return api__answer(rt, token, api__pack_result_raw_cb, &r);
}

/* The echo's payload: our tag (first, as the barrier reads it), the
 * request's msgid, then the packed result. */
typedef struct api__echo {
	uint32_t tag;
	uint32_t msgid;
} api__echo_t;

int api_reply_after(rt_t *rt, api_token_t token, rt_pid_t barrier, uint32_t echo_tag,
		    const void *result, size_t len)
{
	api__echo_t h = { .tag = API__TAG_ECHOED, .msgid = token.msgid };
	unsigned char *buf;
	int rc;

	if (token.conn == RT_NOPID)
		return -ESRCH;
	if (rt_self(rt) != token.conn)
		return -EINVAL;
	if (!(buf = malloc(sizeof h + len)))
		return -ENOMEM;
	memcpy(buf, &h, sizeof h);
	if (len)
		memcpy(buf + sizeof h, result, len);
	rc = rt_send(rt, barrier, echo_tag, buf, sizeof h + len);
	free(buf);
	if (rc == -ESRCH)      /* no barrier to wait for */
		return api_reply_raw(rt, token, result, len);
	return rc;
}

static void api__conn_echoed(rt_t *rt, api_conn_t *c, const rt_msg_t *m)
{
	api__echo_t h;

	if (m->len < sizeof h)
		return;
	memcpy(&h, m->data, sizeof h);
	(void)api_reply_raw(rt, (api_token_t){ c->self, h.msgid },
			    (const char *)m->data + sizeof h, m->len - sizeof h);
	/* Answered from our own actor: the writes and the read watch are
	 * ours to move on (api__answer leaves them to us). */
	api__conn_flush(rt, c);
	api__conn_update_read(rt, c);
	api__conn_maybe_finish(rt, c);
}

int api_reply_error(rt_t *rt, api_token_t token, int code, const char *message,
		    api_pack_fn details, void *arg)
{
	api__reply_t r = { .code = code, .message = message, .fn = details, .arg = arg };
	return api__answer(rt, token, api__pack_error_cb, &r);
}

int api_reply_err(rt_t *rt, api_token_t token, int err, const char *message)
{
	int code = api_code_from_err(err);
	return api_reply_error(rt, token, code ? code : API_INTERNAL,
			       message ? message : tank_strerror(err), NULL, NULL);
}

int api_notify(rt_t *rt, api_token_t token, const char *method,
	       api_pack_fn params, void *arg)
{
	api_conn_t *c = api__conn_get(rt, token.conn);
	api__reply_t r = { .method = method, .fn = params, .arg = arg };

	if (!c)
		return -ESRCH;
	return api__conn_append(rt, c, true, api__pack_notify_cb, &r);
}

static int64_t api__wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Keeps one framed event for replay, dropping the oldest past the
 * bounds.  A copy that cannot be made is simply not kept. */
static void api__recent_add(api_server_t *s, const char *frame, size_t len)
{
	if (!s->recent_cap || len > API_RECENT_BYTES_MAX)
		return;
	while (s->nrecent && (s->nrecent == s->recent_cap ||
			      s->recent_bytes + len > API_RECENT_BYTES_MAX)) {
		struct api__recent *old = &s->recent[s->recent_head];
		s->recent_bytes -= old->len;
		free(old->frame);
		old->frame = NULL;
		s->recent_head = (s->recent_head + 1) % s->recent_cap;
		s->nrecent--;
	}
	char *copy = malloc(len);
	if (!copy)
		return;
	memcpy(copy, frame, len);
	s->recent[(s->recent_head + s->nrecent) % s->recent_cap] =
		(struct api__recent){ api__wall_ms(), copy, len };
	s->nrecent++;
	s->recent_bytes += len;
}

/* Built-in `subscribe`. */
static void api__subscribe(const api_call_t *call, const msgpack_object *params,
			   void *ctx)
{
	api_conn_t *c = api__conn_get(call->rt, call->token.conn);
	tank_error_t e;

	(void)ctx;
	if (api_params_check(params, "?m", &e) < 0) {
		api_reply_error(call->rt, call->token, API_BAD_REQUEST, e.msg, NULL, NULL);
		return;
	}
	int64_t since = -1;
	if (params->via.array.size) {
		const msgpack_object *m = &params->via.array.ptr[0];
		for (uint32_t i = 0; i < m->via.map.size; i++) {
			const msgpack_object *k = &m->via.map.ptr[i].key, *v = &m->via.map.ptr[i].val;
			char msg[160], key[96];
			if (!(k->type == MSGPACK_OBJECT_STR && k->via.str.size == 5 &&
			      !memcmp(k->via.str.ptr, "since", 5))) {
				if (k->type == MSGPACK_OBJECT_STR)
					kit_quote(k->via.str.ptr, k->via.str.size, key);
				else
					snprintf(key, sizeof key, "(a key that is not a string)");
				snprintf(msg, sizeof msg, "params[0]: unknown option %s (the option "
					 "is since)", key);
				api_reply_error(call->rt, call->token, API_BAD_REQUEST, msg, NULL,
						NULL);
				return;
			}
			if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 >= (1ull << 53)) {
				api_reply_error(call->rt, call->token, API_BAD_REQUEST,
						"params[0].since: expected milliseconds (a non-negative "
						"integer)", NULL, NULL);
				return;
			}
			since = (int64_t)v->via.u64;
		}
	}
	if (c)
		c->subscribed = true;
	api_reply(call->rt, call->token, NULL, NULL);
	api_server_t *s = rt_state_of(call->rt, call->server, &api__server_b);
	if (!c || !s || since < 0)
		return;
	/* The replay comes after the answer and before any live event: the
	 * connection's output is in order, and we are on the one thread. */
	int64_t from = api__wall_ms() - since;
	for (size_t i = 0; i < s->nrecent && c->subscribed; i++) {
		const struct api__recent *r = &s->recent[(s->recent_head + i) % s->recent_cap];
		api__reply_t rr = { .raw = r->frame, .len = r->len };
		if (r->at_ms >= from)
			(void)api__conn_append(call->rt, c, true, api__pack_rawmsg_cb, &rr);
	}
}

static void api__conn_bad(rt_t *rt, api_conn_t *c, uint32_t msgid, int code,
			  const char *msg)
{
	api__reply_t r = { .msgid = msgid, .code = code, .message = msg };
	if (api__conn_append(rt, c, false, api__pack_error_cb, &r) < 0)
		api__conn_die(rt, c);
}

static void api__conn_dispatch(rt_t *rt, api_conn_t *c, const msgpack_object *o)
{
	api_server_t *s = rt_state_of(rt, c->server, &api__server_b);
	char method[API__METHOD_MAX + 1];
	tank_error_t e;
	api_msg_t m;

	if (api_rpc_parse(o, &m, &e) < 0) {
		if (m.type == API_REQUEST && m.has_msgid)
			api__conn_bad(rt, c, m.msgid, API_BAD_REQUEST, e.msg);
		else
			api__conn_close(rt, c, API__LINGER_MS);
		return;
	}
	if (m.type == API_RESPONSE) {
		/* We never call the client: a response is a confused peer. */
		api__conn_close(rt, c, API__LINGER_MS);
		return;
	}
	if (!s) {   /* the server is going away */
		api__conn_close(rt, c, API__LINGER_MS);
		return;
	}
	api_call_t call = {
		.rt = rt, .server = c->server,
		.token = { m.type == API_REQUEST ? c->self : RT_NOPID,
			   m.type == API_REQUEST ? m.msgid : 0 },
		.method = method, .uid = c->uid, .gid = c->gid, .pid = c->pid,
	};
	size_t n = m.method_len < API__METHOD_MAX ? m.method_len : API__METHOD_MAX;
	memcpy(method, m.method, n);
	method[n] = '\0';
	if (!c->authorized) {
		if (m.type == API_REQUEST) {
			char msg[96];
			snprintf(msg, sizeof msg, "uid %u may not use this socket",
				 (unsigned)c->uid);
			api__conn_bad(rt, c, m.msgid, API_UNAUTHORIZED, msg);
		}
		return;
	}
	api_handler_fn fn = NULL;
	void *ctx = NULL;
	if (m.method_len <= API__METHOD_MAX && strlen(method) == m.method_len) {
		for (size_t i = 0; i < s->nmethods; i++)
			if (strcmp(s->methods[i].name, method) == 0) {
				fn = s->methods[i].fn;
				ctx = s->methods[i].ctx;
				break;
			}
		if (!fn && strcmp(method, "subscribe") == 0)
			fn = api__subscribe;
	}
	if (!fn) {
		if (m.type == API_REQUEST) {
			char msg[API__METHOD_MAX + 32];
			snprintf(msg, sizeof msg, "unknown method \"%.*s\"",
				 (int)(n > 64 ? 64 : n), method);
			api__conn_bad(rt, c, m.msgid, API_BAD_REQUEST, msg);
		}
		return;
	}
	if (m.type == API_REQUEST)
		c->pending++;
	c->last_active_ms = rt_now_ms(rt);
	fn(&call, m.params, ctx);
}

/* The first bytes of a frame, decoded far enough to find the msgid of a
 * request: [0, msgid, … (fixarray 4, 0, uint).  Works on a frame that is
 * too big or too deep to decode, since the msgid precedes the params. */
static bool api__peek_msgid(const unsigned char *p, size_t n, uint32_t *id)
{
	if (n < 3 || p[0] != 0x94 || p[1] != 0x00)
		return false;
	if (p[2] <= 0x7f) { *id = p[2]; return true; }
	if (p[2] == 0xcc && n >= 4) { *id = p[3]; return true; }
	if (p[2] == 0xcd && n >= 5) { *id = (uint32_t)p[3] << 8 | p[4]; return true; }
	if (p[2] == 0xce && n >= 7) {
		*id = (uint32_t)p[3] << 24 | (uint32_t)p[4] << 16 |
		      (uint32_t)p[5] << 8 | p[6];
		return true;
	}
	return false;
}

/* [2, … (fixarray 3, 2): a client notification, which takes no reply. */
static bool api__is_notification(const unsigned char *p, size_t n)
{
	return n >= 2 && p[0] == 0x93 && p[1] == 0x02;
}

/* [error] of an "error" notification; code 0 reads as bad_request. */
static int api__pack_frame_error(msgpack_packer *pk, void *a)
{
	api__reply_t *r = a;
	int err = msgpack_pack_array(pk, 1);
	return err ? -ENOMEM : api_pack_error_map(pk, r->code ? r->code : API_BAD_REQUEST,
						  r->message, NULL, NULL);
}

/* Says goodbye in an "error" notification (nothing to answer by) and
 * closes once it is flushed.  The notice goes past max_outbuf: it is the
 * one message a client that is being dropped must still get, and it is
 * small. */
static void api__conn_farewell(rt_t *rt, api_conn_t *c, int code, const char *msg)
{
	api__reply_t r = { .method = "error", .fn = api__pack_frame_error,
			   .code = code, .message = msg };
	r.arg = &r;
	if (api__conn_append(rt, c, false, api__pack_notify_cb, &r) < 0) {
		api__conn_die(rt, c);
		return;
	}
	api__conn_close(rt, c, API__LINGER_MS);
}

/* Says why the frame starting at p is not run: by its msgid when it is a
 * request; else there is no msgid to answer by, so in a notification
 * [2, "error", [error]], which any msgpack-RPC client can read.  Returns
 * whether it was a request. */
static bool api__conn_refuse(rt_t *rt, api_conn_t *c, const unsigned char *p,
			     size_t n, const char *msg)
{
	uint32_t id;

	if (api__peek_msgid(p, n, &id)) {
		api__conn_bad(rt, c, id, API_BAD_REQUEST, msg);
		return true;
	}
	api__reply_t r = { .method = "error", .fn = api__pack_frame_error,
			   .message = msg };
	r.arg = &r;
	if (api__conn_append(rt, c, false, api__pack_notify_cb, &r) < 0)
		api__conn_die(rt, c);
	return false;
}

/* The frame at in.head would pass max_frame (its declared sizes say so,
 * or its bytes did): answered, then the connection is closed — skipping it
 * would mean reading (up to 4 GiB per string) only to throw it away. */
static void api__conn_too_big(rt_t *rt, api_conn_t *c)
{
	char msg[96];

	snprintf(msg, sizeof msg, "frame larger than %zu bytes", c->max_frame);
	api__conn_refuse(rt, c, (const unsigned char *)c->in.p + c->in.head,
			 c->in.len, msg);
	api__conn_close(rt, c, API__LINGER_MS);
}

/* The frame at in.head nests deeper than KIT_FRAME_MAX_DEPTH.  It is answered
 * but never decoded (msgpack-c could not).  Returns whether the stream
 * can go on: a request or notification was a well-formed message the
 * client may follow with others; anything else has the wrong shape and,
 * as for any such frame, closes the connection. */
static bool api__conn_too_deep(rt_t *rt, api_conn_t *c, size_t n)
{
	const unsigned char *p = (const unsigned char *)c->in.p + c->in.head;
	const kit_frame_scan_t *sc = &c->scan;
	char msg[96];

	/* Name the part the client wrote: it built params, not the frame. */
	if ((p[0] == 0x94 && sc->deep_elem == 3) ||
	    (p[0] == 0x93 && sc->deep_elem == 2))
		snprintf(msg, sizeof msg, "params nested deeper than %u levels",
			 (unsigned)KIT_FRAME_MAX_DEPTH - 1);
	else
		snprintf(msg, sizeof msg, "message nested deeper than %u levels",
			 (unsigned)KIT_FRAME_MAX_DEPTH);
	return api__conn_refuse(rt, c, p, n, msg) || api__is_notification(p, n);
}

static uint64_t api__mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Decodes and dispatches the complete frames buffered in c->in.  Each is
 * first walked by the frame scanner, so msgpack-c only ever sees one whole
 * frame that it can decode, and a frame refused for its depth is dropped
 * by its exact length, leaving the stream in step.
 *
 * A turn serves requests for API__TURN_MS at most (one at least), and
 * none while there is no room (api__conn_room): the rest are held, and
 * served in later turns.  Before, one write of 5,000 `status` requests
 * from a client that never read was served in one turn: tankd answered
 * nobody else for 42 s (500 pods) and held 870 MB of answers. */
static void api__conn_frames(rt_t *rt, api_conn_t *c)
{
	msgpack_unpacked up;
	uint64_t t0 = 0;
	bool served = false;

	c->held = false;
	msgpack_unpacked_init(&up);
	while (!c->closing && !c->dead && c->in.len) {
		const char *f = c->in.p + c->in.head;
		size_t flen = 0;

		if (!api__conn_room(c) ||
		    (served && api__mono_us() - t0 >= API__TURN_MS * 1000u)) {
			c->held = true;
			break;
		}
		kit_frame_status_t st = kit_frame_scan(&c->scan, f, c->in.len, &flen);

		if (st == KIT_FRAME_MORE)
			break;
		if (!served) {
			t0 = api__mono_us();
			served = true;
		}
		if (st == KIT_FRAME_TOO_BIG) {
			api__conn_too_big(rt, c);
			break;
		}
		if (st == KIT_FRAME_TOO_NESTED) {
			/* Its end cannot be found with bounded memory. */
			api__conn_too_deep(rt, c, c->in.len);
			api__conn_close(rt, c, API__LINGER_MS);
			break;
		}
		if (st == KIT_FRAME_INVALID) {
			/* Not msgpack: the stream cannot be resynchronised. */
			api__conn_close(rt, c, API__LINGER_MS);
			break;
		}
		if (c->scan.too_deep) {
			if (!api__conn_too_deep(rt, c, flen))
				api__conn_close(rt, c, API__LINGER_MS);
		} else {
			size_t off = 0;
			msgpack_unpack_return r = msgpack_unpack_next(&up, f, flen, &off);
			if (r == MSGPACK_UNPACK_SUCCESS && off == flen) {
				/* Strings in up borrow from c->in: the handler
				 * runs before the frame's bytes are dropped. */
				api__conn_dispatch(rt, c, &up.data);
			} else if (!api__conn_refuse(rt, c, (const unsigned char *)f, flen,
						    r == MSGPACK_UNPACK_NOMEM_ERROR ?
						    "out of memory decoding the message" :
						    "message cannot be decoded")) {
				api__conn_close(rt, c, API__LINGER_MS);
			}
			msgpack_unpacked_destroy(&up);
		}
		api__buf_consume(&c->in, flen);
		kit_frame_scan_init(&c->scan, c->max_frame, KIT_FRAME_MAX_DEPTH);
	}
	msgpack_unpacked_destroy(&up);
}

static void api__conn_read(rt_t *rt, api_conn_t *c)
{
	ssize_t n;

	c->unread = false;
	if (api__buf_reserve(&c->in, API__READ_CHUNK) < 0) {
		api__conn_die(rt, c);
		return;
	}
	do
		n = recv(c->fd, c->in.p + c->in.head + c->in.len,
			 c->in.cap - c->in.head - c->in.len, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			api__conn_die(rt, c);
		return;
	}
	if (n == 0) {
		/* The peer will send nothing more.  After shutdown(SHUT_WR) it
		 * may still read the answers to what it sent; after close()
		 * (POLLHUP: both directions shut) nobody will.  A partial
		 * frame left in c->in is freed with the connection. */
		struct pollfd p = { .fd = c->fd, .events = POLLOUT };
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLHUP)) {
			api__conn_die(rt, c);
			return;
		}
		api__conn_close(rt, c, API__EOF_LINGER_MS);
		api__conn_flush(rt, c);
		return;
	}
	c->in.len += (size_t)n;
	c->last_io_ms = rt_now_ms(rt);
	api__conn_frames(rt, c);
	api__conn_flush(rt, c);
}

static void api__conn_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	api_conn_t *c = state;

	if (c->dead)
		return;
	if (m->type == RT_MSG_FD && m->tag == API__TAG_READ && c->rref == m->u.fd.ref)
		api__conn_read(rt, c);
	else if (m->type == RT_MSG_FD && m->tag == API__TAG_WRITE)
		api__conn_flush(rt, c);
	else if (m->type == RT_MSG_USER && m->tag == API__TAG_LINGER)
		api__conn_die(rt, c);
	else if (m->type == RT_MSG_USER && m->tag == API__TAG_ECHOED)
		api__conn_echoed(rt, c, m);
	else if (m->type == RT_MSG_USER && m->tag == API__TAG_FIRST_READ && !c->closing)
		api__conn_read(rt, c);
	else if (m->type == RT_MSG_USER && m->tag == API__TAG_MORE) {
		c->more_queued = false;
		api__conn_frames(rt, c);
		api__conn_flush(rt, c);
	}
}

typedef struct api__conn_arg {
	int fd;
	rt_pid_t server;
	struct ucred cred;
	bool authorized;
	size_t max_frame, max_outbuf;
} api__conn_arg_t;

static int api__conn_init(rt_t *rt, void **state, void *arg)
{
	api__conn_arg_t *a = arg;
	api_conn_t *c = calloc(1, sizeof *c);

	if (!c)
		return -ENOMEM;
	c->self = rt_self(rt);
	/* Short turns, and the one thing a user waits on: served ahead of a
	 * restart storm's slow turns (hardening issue, item 8). */
	(void)rt_set_priority(rt, RT_PRIO_HIGH);
	c->last_active_ms = c->last_io_ms = rt_now_ms(rt);
	c->unread = true;
	c->server = a->server;
	c->fd = a->fd;
	c->uid = a->cred.uid;
	c->gid = a->cred.gid;
	c->pid = a->cred.pid;
	c->authorized = a->authorized;
	c->max_frame = a->max_frame;
	c->max_outbuf = a->max_outbuf;
	kit_frame_scan_init(&c->scan, c->max_frame, KIT_FRAME_MAX_DEPTH);
	if (rt_watch_fd(rt, c->self, c->fd, EV_READ, API__TAG_READ, &c->rref) < 0) {
		free(c);
		return -ENOMEM;
	}
	/* A client sends its request as soon as it is connected, so it is
	 * usually there already: read it in this drain (the connection is
	 * a high-priority actor, it runs right after the accept), not after
	 * the loop's next poll.  An fd seen readable by a poll is handled in
	 * the next iteration's drain, behind that iteration's slices (the
	 * store's cache load, a pass): the accept and then the read each
	 * waited one whole iteration, 7 ms apiece in a tankd starting on
	 * 100,000 pods.  Nothing there yet: EAGAIN, and the watch reads it. */
	if (rt_send(rt, c->self, API__TAG_FIRST_READ, NULL, 0) < 0)
		c->unread = false;      /* the watch reads it; evictable meanwhile */
	*state = c;
	return 0;
}

static void api__conn_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	api_conn_t *c = state;

	(void)reason;
	api__conn_account(rt, c, 0);
	/* The runtime stops our fd watches right after terminate, before the
	 * loop polls again; rt_unwatch_fd cannot be used here (our pid is
	 * already invalid, see docs/rpc.md "Notes for the runtime"). */
	close(c->fd);
	free(c->in.p);
	free(c->out.p);
	free(c);
}

static const rt_behaviour_t api__conn_b = {
	"api_conn", api__conn_init, api__conn_handle, api__conn_terminate,
};

/* --- listener ------------------------------------------------------------ */

static bool api__in_group(int fd, gid_t group)
{
#ifdef SO_PEERGROUPS
	gid_t groups[256];
	socklen_t len = sizeof groups;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
		for (size_t i = 0; i < len / sizeof(gid_t); i++)
			if (groups[i] == group)
				return true;
#else
	(void)fd; (void)group;
#endif
	return false;
}

/* At the connection cap, or out of descriptors: makes room by closing
 * one connection.  First the one idle the longest (no request in flight,
 * nothing buffered either way, not a subscriber), which is told why.
 * Else the one stalled the longest: no request in flight, not a
 * subscriber, but half a frame in or unsent output, and no byte moved
 * either way for stall_ms (a client that sent part of a request and
 * stopped, or asked and never reads the answer).  One stalled on its
 * output does not read: it is closed at once; one stalled on its input
 * gets the notice.  Thousands of idle or stuck connections thus cannot
 * lock out a new client, while busy ones are never cut.  Nor is one
 * accepted earlier in the same batch and not read yet: its request may
 * be waiting in its socket, and a burst of clients at the cap would
 * otherwise close each other in turn (the newest is refused instead).
 * An evicted connection still counts until its actor is gone, so the
 * cap can be passed by the connections being closed; each of those is
 * bounded by its linger.  O(connections), only at the cap.  min_idle_ms:
 * how long an idle one must have been (0 at the cap; out of descriptors,
 * stall_ms: a client accepted a moment ago has not sent its request yet,
 * and closing it would only trade it for the next).  Returns whether one
 * was closed. */
static bool api__server_evict(rt_t *rt, api_server_t *s, size_t cap, uint64_t min_idle_ms)
{
	api_conn_t *idle = NULL, *stalled = NULL;
	uint64_t now = rt_now_ms(rt);

	for (size_t i = 0; i < s->nconns; i++) {
		api_conn_t *c = api__conn_get(rt, s->conns[i]);
		if (!c || c->closing || c->subscribed || c->pending || c->unread)
			continue;
		if (!c->in.len && !c->out.len) {
			if (now - c->last_active_ms >= min_idle_ms &&
			    (!idle || c->last_active_ms < idle->last_active_ms))
				idle = c;
		} else if (now - c->last_io_ms >= s->stall_ms &&
			   (!stalled || c->last_io_ms < stalled->last_io_ms)) {
			stalled = c;
		}
	}
	char msg[200];
	if (idle) {
		snprintf(msg, sizeof msg, "connection closed: tankd serves at most %zu "
			 "connections now and this one was the longest idle", cap);
		api__conn_farewell(rt, idle, API_RESOURCE_LIMIT, msg);
		return true;
	}
	if (!stalled)
		return false;
	if (stalled->out.len) {
		api__conn_die(rt, stalled);
		return true;
	}
	snprintf(msg, sizeof msg, "connection closed: tankd serves at most %zu "
		 "connections now and this one sent part of a request and stopped",
		 cap);
	api__conn_farewell(rt, stalled, API_RESOURCE_LIMIT, msg);
	return true;
}

/* Past max_unsent bytes queued unsent across all connections, closes the
 * connections whose output has not moved for API__SHED_STALL_MS, the
 * longest unmoved first, until the total is under the bound again (as
 * Redis's client-output-buffer-limit; seen: 400 clients that each asked
 * the status of 9,700 pods and never read held 1.2 GB).  A client that
 * reads moves bytes and keeps its connection however big its answer; one
 * that does not read had its answer's first bytes and gets EOF; one
 * that sends without reading does not escape it (out_moved_ms), and one
 * whose bytes were not offered for a while is offered them first.  A closed
 * one stops counting at once (api__conn_die).  O(connections) per one
 * closed, only past the bound. */
static void api__server_shed(rt_t *rt, api_server_t *s)
{
	uint64_t now = rt_now_ms(rt);

	while (s->unsent > s->max_unsent) {
		api_conn_t *worst = NULL;
		for (size_t i = 0; i < s->nconns; i++) {
			api_conn_t *c = api__conn_get(rt, s->conns[i]);
			if (c && c->out.len && now - c->out_moved_ms >= API__SHED_STALL_MS &&
			    (!worst || c->out_moved_ms < worst->out_moved_ms))
				worst = c;
		}
		if (!worst)
			return;
		/* Unmoved may mean not offered: its turn to write can wait
		 * behind heavy ones (a subscriber's events, queued while 400
		 * answers of 9,700 statuses were built, were shed unsent).
		 * A send says whether it reads: bytes taken move it, a full
		 * socket sheds it, a gone peer closes it. */
		size_t had = worst->out.len;
		api__conn_flush(rt, worst);
		if (worst->dead || worst->out.len < had)
			continue;
		api__conn_die(rt, worst);       /* and takes it off `unsent` */
		s->shed++;
	}
}

/* The cap now: max_conns, or less when the descriptors say so. */
static size_t api__server_cap(api_server_t *s)
{
	if (!s->conn_room || s->nconns < API_ROOM_FROM)
		return s->max_conns;
	size_t room = s->conn_room(s->conn_room_ctx);
	return room < s->max_conns ? room : s->max_conns;
}

/* Past the cap with nothing idle to close: the new client is told why in
 * an "error" notification, written without waiting (a fresh socket's
 * buffer takes it whole, or the client gets the bare close). */
static void api__refuse_fd(int fd, size_t max_conns)
{
	char msg[200];
	msgpack_sbuffer sb;
	msgpack_packer pk;

	snprintf(msg, sizeof msg, "too many connections: tankd serves at most %zu "
		 "at once (fewer when its descriptors are short), all busy; try "
		 "again later", max_conns);
	api__reply_t r = { .method = "error", .fn = api__pack_frame_error,
			   .code = API_RESOURCE_LIMIT, .message = msg };
	r.arg = &r;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (api__pack_notify_cb(&pk, &r) == 0) {
		ssize_t n;
		do
			n = send(fd, sb.data, sb.size, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
	}
	msgpack_sbuffer_destroy(&sb);
}

static void api__server_accept(rt_t *rt, api_server_t *s)
{
	/* Asked once a batch, from when it counts (API_ROOM_FROM). */
	size_t cap = s->max_conns;
	bool asked = false;

	for (int i = 0; i < API__ACCEPT_BATCH; i++) {
		if (!asked && s->nconns >= API_ROOM_FROM) {
			cap = api__server_cap(s);
			asked = true;
		}
		int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* The pending connection stays queued; level-
				 * triggered readiness would spin, so pause.
				 * Meanwhile an idle or stalled connection gives
				 * its descriptor back: a client waiting in the
				 * backlog gets in (docs/rpc.md "Limits"). */
				(void)api__server_evict(rt, s, s->nconns, s->stall_ms);
				rt_unwatch_fd(rt, s->aref);
				s->aref = 0;
				rt_send_after(rt, s->self, API__ACCEPT_PAUSE_MS,
					      API__TAG_RESUME, NULL, 0, NULL);
			}
			return;
		}
		api__conn_arg_t a = { .fd = fd, .server = s->self,
				      .max_frame = s->max_frame,
				      .max_outbuf = s->max_outbuf };
		socklen_t len = sizeof a.cred;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &a.cred, &len) < 0) {
			close(fd);
			continue;
		}
		if (s->nconns >= cap && !api__server_evict(rt, s, cap, 0)) {
			api__refuse_fd(fd, cap);
			close(fd);
			continue;
		}
		a.authorized = a.cred.uid == 0 || a.cred.uid == s->uid ||
			(s->has_group && (a.cred.gid == s->group ||
					  api__in_group(fd, s->group)));
		if (s->nconns == s->capconns) {
			size_t ncap = s->capconns ? s->capconns * 2 : 16;
			rt_pid_t *np = realloc(s->conns, ncap * sizeof *np);
			if (!np) {
				close(fd);
				continue;
			}
			s->conns = np;
			s->capconns = ncap;
		}
		rt_pid_t pid;
		rt_ref_t mref;
		if (rt_spawn(rt, &api__conn_b, &a, &pid) < 0) {
			close(fd);
			continue;
		}
		/* The monitor tells us when to forget the connection. */
		if (rt_monitor(rt, pid, &mref) < 0) {
			rt_exit(rt, pid, RT_R_KILL);
			continue;
		}
		s->conns[s->nconns++] = pid;
	}
}

static void api__server_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	api_server_t *s = state;

	if (m->type == RT_MSG_FD && m->tag == API__TAG_ACCEPT) {
		api__server_accept(rt, s);
	} else if (m->type == RT_MSG_DOWN) {
		for (size_t i = 0; i < s->nconns; i++)
			if (s->conns[i] == m->u.down.pid) {
				s->conns[i] = s->conns[--s->nconns];
				break;
			}
	} else if (m->type == RT_MSG_USER && m->tag == API__TAG_RESUME && !s->aref) {
		if (rt_watch_fd(rt, s->self, s->fd, EV_READ, API__TAG_ACCEPT, &s->aref) < 0) {
			s->aref = 0;
			rt_send_after(rt, s->self, API__ACCEPT_PAUSE_MS,
				      API__TAG_RESUME, NULL, 0, NULL);
		}
	}
}

static void api__server_free(api_server_t *s)
{
	for (size_t i = 0; i < s->nrecent; i++)
		free(s->recent[(s->recent_head + i) % s->recent_cap].frame);
	free(s->recent);
	msgpack_sbuffer_destroy(&s->ev);
	for (size_t i = 0; i < s->nmethods; i++)
		free((char *)s->methods[i].name);
	free(s->methods);
	free(s->conns);
	free(s->path);
	free(s);
}

/* Removes the socket file if it is still the one we bound: a second
 * daemon that replaced a (believed) stale socket keeps its own. */
static void api__unlink_ours(const char *path, dev_t dev, ino_t ino)
{
	struct stat st;

	if (lstat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
		unlink(path);
}

typedef struct api__server_arg {
	const api_server_opts_t *opts;
	int fd;
	dev_t dev;
	ino_t ino;
} api__server_arg_t;

static int api__server_init(rt_t *rt, void **state, void *arg)
{
	api__server_arg_t *a = arg;
	const api_server_opts_t *o = a->opts;
	api_server_t *s = calloc(1, sizeof *s);

	if (!s)
		return -ENOMEM;
	s->self = rt_self(rt);
	(void)rt_set_priority(rt, RT_PRIO_HIGH);   /* accepts are short; see api__conn_init */
	s->fd = a->fd;
	s->dev = a->dev;
	s->ino = a->ino;
	s->max_frame = o->max_frame ? o->max_frame : API_MAX_FRAME_DEFAULT;
	s->max_outbuf = o->max_outbuf ? o->max_outbuf : API_MAX_OUTBUF_DEFAULT;
	s->max_conns = o->max_conns ? o->max_conns : API_MAX_CONNS_DEFAULT;
	s->conn_room = o->conn_room;
	s->conn_room_ctx = o->conn_room_ctx;
	s->stall_ms = o->stall_ms ? o->stall_ms : API_STALL_MS_DEFAULT;
	s->max_unsent = o->max_unsent ? o->max_unsent : API_MAX_UNSENT_DEFAULT;
	s->recent_cap = o->recent_events ? o->recent_events : API_RECENT_EVENTS_DEFAULT;
	if (!(s->recent = calloc(s->recent_cap, sizeof *s->recent)))
		goto nomem;
	s->has_group = o->has_group;
	s->group = o->group;
	s->uid = geteuid();
	if (!(s->path = strdup(o->socket_path)))
		goto nomem;
	if (o->nmethods) {
		if (!(s->methods = calloc(o->nmethods, sizeof *s->methods)))
			goto nomem;
		for (size_t i = 0; i < o->nmethods; i++) {
			s->methods[i] = o->methods[i];
			s->methods[i].name = NULL;
			s->nmethods = i + 1;
			if (!(s->methods[i].name = strdup(o->methods[i].name)))
				goto nomem;
		}
	}
	if (rt_watch_fd(rt, s->self, s->fd, EV_READ, API__TAG_ACCEPT, &s->aref) < 0)
		goto nomem;
	*state = s;
	return 0;
nomem:
	/* The fd stays the caller's on failure. */
	api__server_free(s);
	return -ENOMEM;
}

static void api__server_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	api_server_t *s = state;

	(void)reason;
	for (size_t i = 0; i < s->nconns; i++)
		rt_exit(rt, s->conns[i], RT_R_KILL);
	close(s->fd);   /* watch stopped by the runtime, as for connections */
	api__unlink_ours(s->path, s->dev, s->ino);
	api__server_free(s);
}

static const rt_behaviour_t api__server_b = {
	"api_server", api__server_init, api__server_handle, api__server_terminate,
};

/* --- public ---------------------------------------------------------------- */

/* Is somebody listening on path?  1 yes, 0 no (stale), or a negative errno
 * when that cannot be told. */
static int api__probe(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int r;

	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0)
		r = 1;
	else if (errno == ECONNREFUSED || errno == ENOENT)
		r = 0;
	else if (errno == EAGAIN || errno == EINPROGRESS)
		r = 1;   /* a listener with a full backlog is still a listener */
	else
		r = -errno;
	close(fd);
	return r;
}

int api_server_start(rt_t *rt, const api_server_opts_t *opts, rt_pid_t *out,
		     tank_error_t *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = opts ? opts->socket_path : NULL;
	api__server_arg_t a = { .opts = opts };
	struct stat st;
	int fd, r;

	if (!path || !*path)
		return tank_error_set(err, -EINVAL, "no socket path");
	if (strlen(path) >= sizeof sa.sun_path)
		return tank_error_set(err, -ENAMETOOLONG,
				      "socket path %s is longer than %zu bytes",
				      path, sizeof sa.sun_path - 1);
	strcpy(sa.sun_path, path);
	if (opts->inherit) {
		errno = 0;
		if (fstat(opts->listen_fd, &st) < 0 || !S_ISSOCK(st.st_mode) ||
		    lstat(path, &st) < 0) {
			r = errno ? -errno : -ENOTSOCK;
			close(opts->listen_fd);
			return tank_error_set(err, r, "cannot serve %s from fd %d: %s", path,
					      opts->listen_fd, tank_strerror(r));
		}
		(void)fcntl(opts->listen_fd, F_SETFD, FD_CLOEXEC);
		(void)fcntl(opts->listen_fd, F_SETFL,
			    fcntl(opts->listen_fd, F_GETFL) | O_NONBLOCK);
		a.fd = opts->listen_fd;
		a.dev = st.st_dev;
		a.ino = st.st_ino;
		if ((r = rt_spawn_link(rt, &api__server_b, &a, out)) < 0) {
			close(a.fd);
			return tank_error_set(err, r, "cannot start the api server: %s",
					      tank_strerror(r));
		}
		return 0;
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return tank_error_set(err, -EEXIST,
					      "%s exists and is not a socket", path);
		r = api__probe(&sa);
		if (r > 0)
			return tank_error_set(err, -EADDRINUSE,
					      "socket %s is in use (is another tankd running?)",
					      path);
		if (r < 0)
			return tank_error_set(err, r, "cannot probe socket %s: %s",
					      path, tank_strerror(r));
		if (unlink(path) < 0 && errno != ENOENT)
			return tank_error_set(err, -errno, "cannot remove stale socket %s: %s",
					      path, tank_strerror(-errno));
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return tank_error_set(err, -errno, "socket: %s", tank_strerror(-errno));
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		r = -errno;
		close(fd);
		return tank_error_set(err, r, "cannot bind %s: %s", path, tank_strerror(r));
	}
	/* Nobody can connect before listen(): setting the mode here leaves no
	 * window in which the umask's mode would let others in. */
	if ((opts->has_group && chown(path, (uid_t)-1, opts->group) < 0) ||
	    chmod(path, opts->has_group ? 0660 : 0600) < 0 ||
	    lstat(path, &st) < 0 || listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		close(fd);
		unlink(path);
		return tank_error_set(err, r, "cannot set up socket %s: %s", path,
				      tank_strerror(r));
	}
	a.fd = fd;
	a.dev = st.st_dev;
	a.ino = st.st_ino;
	if ((r = rt_spawn_link(rt, &api__server_b, &a, out)) < 0) {
		close(fd);
		unlink(path);
		return tank_error_set(err, r, "cannot start the api server: %s",
				      tank_strerror(r));
	}
	return 0;
}

int api_server_stop(rt_t *rt, rt_pid_t server)
{
	if (!rt_state_of(rt, server, &api__server_b))
		return -ESRCH;
	return rt_exit(rt, server, RT_R_SHUTDOWN);
}

int api_server_listen_fd(rt_t *rt, rt_pid_t server)
{
	api_server_t *s = rt_state_of(rt, server, &api__server_b);
	return s ? s->fd : -1;
}

size_t api_server_conns(rt_t *rt, rt_pid_t server)
{
	api_server_t *s = rt_state_of(rt, server, &api__server_b);
	return s ? s->nconns : 0;
}

size_t api_server_subscribers(rt_t *rt, rt_pid_t server)
{
	api_server_t *s = rt_state_of(rt, server, &api__server_b);
	size_t n = 0;

	if (s)
		for (size_t i = 0; i < s->nconns; i++) {
			api_conn_t *c = api__conn_get(rt, s->conns[i]);
			n += c && c->subscribed;
		}
	return n;
}

size_t api_server_unsent(rt_t *rt, rt_pid_t server, uint64_t *shed)
{
	api_server_t *s = rt_state_of(rt, server, &api__server_b);

	if (shed)
		*shed = s ? s->shed : 0;
	return s ? s->unsent : 0;
}

size_t api_server_pending(rt_t *rt, rt_pid_t server)
{
	api_server_t *s = rt_state_of(rt, server, &api__server_b);
	size_t n = 0;

	for (size_t i = 0; s && i < s->nconns; i++) {
		api_conn_t *c = api__conn_get(rt, s->conns[i]);
		if (c && !c->dead)
			n += c->pending;
	}
	return n;
}

int api_server_publish(rt_t *rt, rt_pid_t server, const void *event, size_t len)
{
	api_server_t *s = rt_state_of(rt, server, &api__server_b);
	msgpack_sbuffer *sb;
	msgpack_packer pk;
	int n = 0;

	if (!s)
		return -ESRCH;
	/* Frame once, copy the bytes into each subscriber.  The buffer is
	 * the server's, reused: msgpack's sbuffer starts at 8 KiB, an
	 * allocation per event for a few hundred bytes (and, with glibc's
	 * fast bins on, one that consolidated them first: tankd turns them
	 * off, daemon/dmn.c dmn_process_setup). */
	sb = &s->ev;
	sb->size = 0;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	if (api_pack_event(&pk, event, len) < 0)
		return -ENOMEM;
	api__reply_t r = { .raw = sb->data, .len = sb->size };
	api__recent_add(s, sb->data, sb->size);
	for (size_t i = 0; i < s->nconns; i++) {
		api_conn_t *c = api__conn_get(rt, s->conns[i]);
		if (c && c->subscribed &&
		    api__conn_append(rt, c, true, api__pack_rawmsg_cb, &r) == 0 && !c->dead)
			n++;    /* not one the event's bytes had it shed */
	}
	/* An event is a few hundred bytes; one that grew the buffer past
	 * this is not kept for the next. */
	if (sb->alloc > API__EV_BUF_KEEP) {
		msgpack_sbuffer_destroy(sb);
		msgpack_sbuffer_init(sb);
	}
	return n;
}
