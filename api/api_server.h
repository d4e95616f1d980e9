/*
 * api_server — msgpack-RPC over a Unix socket, as actors on the runtime.
 *
 * One listener actor owns the socket; every accepted connection is an
 * actor of its own (socket, input buffer and frame scanner, output
 * buffer).  The server holds no state beyond its connections: methods
 * come from a table the caller provides (the daemon wires api_methods.c,
 * tests wire their own).
 *
 * Everything here runs on the runtime's thread and never blocks: sockets
 * are non-blocking, output is buffered and flushed on EV_WRITE readiness.
 *
 * Memory bounds (docs/rpc.md, "Limits"): a frame larger than max_frame
 * (by its bytes or by the sizes its headers declare) is answered with an
 * error and the connection closed; a frame nested deeper than
 * KIT_FRAME_MAX_DEPTH (kit_frame.h) is answered with an error and skipped, the
 * connection going on; a connection whose
 * unsent output passes max_outbuf stops being read, and the requests it
 * sent already wait unserved, until it drains; a connection's turn serves
 * its requests for 5 ms at most (one at least), the rest in later turns,
 * so one client's pipelined flood does not keep the others waiting; a
 * subscriber that lets its output pass max_outbuf is disconnected; past
 * max_unsent bytes unsent across all connections, those whose output has
 * not moved for a second and whose socket is full are closed, the
 * longest unmoved first.
 *
 * Access: each connection's peer credentials (SO_PEERCRED) are taken at
 * accept.  Root, the daemon's effective uid and, when a socket group is
 * set, members of that group may call; every request of anybody else is
 * answered with an `unauthorized` error.
 */
#ifndef TANK_API_SERVER_H
#define TANK_API_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "api/api_rpc.h"
#include "common/tank_err.h"
#include "runtime/rt.h"

#define API_MAX_FRAME_DEFAULT (16u << 20)    /* 16 MiB */
#define API_MAX_OUTBUF_DEFAULT (4u << 20)    /* 4 MiB per connection */
#define API_MAX_UNSENT_DEFAULT (64u << 20)   /* 64 MiB across connections */
#define API_MAX_CONNS_DEFAULT 1024u
#define API_ROOM_FROM 8u                   /* conn_room asked from this many */
#define API_STALL_MS_DEFAULT 10000u         /* see api_server_opts_t.stall_ms */
#define API_RECENT_EVENTS_DEFAULT 1000u     /* the last events, for replay */
#define API_RECENT_BYTES_MAX (1u << 20)     /* and at most this many bytes */

/*
 * A reply token: which request of which connection.  A plain value, safe to
 * copy and keep after the handler returned and after the connection died:
 * `conn` is a generational pid, so a reply to a dead connection is
 * dropped (api_reply returns -ESRCH).  conn == RT_NOPID marks a client
 * notification, which takes no reply.
 */
typedef struct api_token {
	rt_pid_t conn;
	uint32_t msgid;
} api_token_t;

/* What a handler learns about the call.  Borrowed for the handler's
 * duration; copy `token` to reply later. */
typedef struct api_call {
	rt_t *rt;
	rt_pid_t server;          /* the listener actor */
	api_token_t token;
	const char *method;       /* NUL-terminated */
	uid_t uid;                /* peer credentials at accept */
	gid_t gid;
	pid_t pid;
} api_call_t;

/*
 * A method.  Runs inside the connection's actor.  `params` (an array) and
 * everything it points to are borrowed for the call only: a handler that
 * answers later copies what it needs.  The handler must answer each
 * request exactly once, now or later, with api_reply* (a request never
 * answered leaves its client waiting: that is the handler's bug).
 */
typedef void (*api_handler_fn)(const api_call_t *call,
			       const msgpack_object *params, void *ctx);

typedef struct api_method {
	const char *name;
	api_handler_fn fn;
	void *ctx;                /* borrowed; passed to fn */
} api_method_t;

typedef struct api_server_opts {
	const char *socket_path;  /* required; copied */
	bool has_group;           /* socket mode 0660 and chgrp to `group`, */
	gid_t group;              /* whose members may then call; else 0600 */
	size_t max_frame;         /* 0: API_MAX_FRAME_DEFAULT */
	size_t max_outbuf;        /* 0: API_MAX_OUTBUF_DEFAULT */
	size_t max_unsent;        /* answers and events queued unsent across
				   * all connections, past which the ones not
				   * read for a second are closed;
				   * 0: API_MAX_UNSENT_DEFAULT */
	size_t max_conns;         /* 0: API_MAX_CONNS_DEFAULT; more are closed
				   * at accept */
	/* The connections the process's descriptors leave room for now, or
	 * NULL (max_conns alone).  Asked at an accept once API_ROOM_FROM
	 * connections are open (so a quiet daemon never pays for it); the
	 * cap is then the smaller of the two.  The daemon's counts what its
	 * containers were promised (pod_host_conn_room): clients must not
	 * take the descriptors a crashed container needs to start again
	 * (docs/rpc.md "Limits"). */
	size_t (*conn_room)(void *ctx);
	void *conn_room_ctx;
	/* A connection that holds half a frame or unsent output and has
	 * moved no byte either way for this long is "stalled": at the cap it
	 * may be closed for a new client, after the idle ones.  0:
	 * API_STALL_MS_DEFAULT. */
	uint64_t stall_ms;
	size_t recent_events;     /* events kept for `subscribe {since}`;
				   * 0: API_RECENT_EVENTS_DEFAULT */
	/* The method table, copied (names included).  `subscribe` is built
	 * in; a table entry of that name overrides it. */
	const api_method_t *methods;
	size_t nmethods;
	/* inherit: listen_fd is a socket already bound to socket_path and
	 * listening (kept across a reexec of the daemon): served as it is,
	 * with no probe, bind or chmod; connections queued on it while the
	 * daemon exec'd are accepted as any other.  Taken by the start,
	 * also when it fails (closed). */
	bool inherit;
	int listen_fd;
} api_server_opts_t;

/*
 * Binds the socket and spawns the listener, linked to the caller when
 * called from an actor (so it fits a supervisor's start function).
 * An existing socket file that answers makes the start fail with
 * -EADDRINUSE ("socket PATH is in use"); a stale one is unlinked; a
 * non-socket file at the path is left alone (-EEXIST).  Other failures:
 * -ENAMETOOLONG, bind/listen/chown errno, -ENOMEM; err says which.
 * On success *out (may be NULL) gets the listener's pid.
 */
int api_server_start(rt_t *rt, const api_server_opts_t *opts, rt_pid_t *out,
		     tank_error_t *err);

/* Stops the listener and every connection (pending replies are dropped)
 * and removes the socket file.  -ESRCH if it was not running. */
int api_server_stop(rt_t *rt, rt_pid_t server);

/* The listening socket of server (for a reexec's handover), or -1. */
int api_server_listen_fd(rt_t *rt, rt_pid_t server);

/* Number of open connections, and of subscribed ones (for tests and
 * metrics); 0 when server is not a running api server. */
size_t api_server_conns(rt_t *rt, rt_pid_t server);
size_t api_server_subscribers(rt_t *rt, rt_pid_t server);
/* Bytes of output queued unsent across its connections, and (*shed, when
 * not NULL) how many connections were closed for passing max_unsent. */
size_t api_server_unsent(rt_t *rt, rt_pid_t server, uint64_t *shed);
/* Requests taken and not answered yet across its connections (a verb
 * answered later, one waiting for the loop's echo): what a reexec waits
 * for, since they go with their connections at the exec. */
size_t api_server_pending(rt_t *rt, rt_pid_t server);

/*
 * Answers a request: [1, msgid, nil, result] with result packed by fn
 * (NULL: nil).  fn runs before api_reply returns, so arg may point to the
 * caller's frame.  Callable from any actor or from outside.
 * Returns 0, -ESRCH when the connection is gone or the token is a
 * notification's (the reply is dropped: not an error for the caller to
 * handle), -ENOMEM, or fn's error (then an `internal` error is sent
 * instead, so the client is not left waiting).
 */
int api_reply(rt_t *rt, api_token_t token, api_pack_fn fn, void *arg);
/* Same with a result already packed (one msgpack object; len 0: nil). */
int api_reply_raw(rt_t *rt, api_token_t token, const void *result, size_t len);
/* Answers with an error {code, message, details?}: code is an enum
 * api_code, details packed by fn (NULL: none). */
int api_reply_error(rt_t *rt, api_token_t token, int code, const char *message,
		    api_pack_fn details, void *arg);
/* Answers with the error for tank error value `err` (api_code_from_err)
 * and message `message` (NULL: tank_strerror(err)). */
int api_reply_err(rt_t *rt, api_token_t token, int err, const char *message);

/*
 * Answers with `result` (one packed msgpack object, copied; len 0: nil)
 * once the actor `barrier` has handled every message the calling actor
 * sent it before this call: a request sent to a manager is then stored
 * before the client hears it was taken.  Call it from the request's own
 * connection actor (a method's handler); the barrier must echo a message
 * of tag `echo_tag` back to its sender with the tag in the payload's first
 * 4 bytes (the reconcile loop's RC_TAG_ECHO).  When the barrier is gone
 * the answer is sent at once.  0, -ENOMEM, -EINVAL (not the connection's
 * actor), -ESRCH.
 */
int api_reply_after(rt_t *rt, api_token_t token, rt_pid_t barrier, uint32_t echo_tag,
		    const void *result, size_t len);

/*
 * Sends the notification [2, method, params] to one connection (the
 * connection of `token`; its msgid is ignored), e.g. for `logs` follow.
 * Subject to the same bound as events: a connection that lets its output
 * pass max_outbuf is disconnected.  Monitor token.conn with rt_monitor to
 * learn when it closes.  0, -ESRCH, -ENOMEM.
 */
int api_notify(rt_t *rt, api_token_t token, const char *method,
	       api_pack_fn params, void *arg);

/*
 * Fans an event out to every subscribed connection as
 * [2, "event", [event]].  `event` is one packed msgpack map, copied.
 * The server keeps the last recent_events of them (and at most
 * API_RECENT_BYTES_MAX bytes), with the wall-clock time they were
 * published: `subscribe [{since: MS}]` first replays those of the last MS
 * milliseconds, oldest first, then the live ones (`tankctl events
 * --since 10m`).
 * Subscribers whose unsent output would pass max_outbuf are disconnected.
 * Returns the number of subscribers it was queued for, or -ESRCH (not a
 * running server), -ENOMEM.
 */
int api_server_publish(rt_t *rt, rt_pid_t server, const void *event, size_t len);

#endif
