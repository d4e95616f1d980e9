/*
 * api_client — a small blocking msgpack-RPC client for tankctl and tests.
 *
 * One connection, used from one thread.  Every call blocks in poll(2) for
 * at most its timeout (milliseconds; -1 waits forever).  Requests may be
 * pipelined: api_client_send several, then api_client_wait for each msgid
 * in any order; messages that arrive while waiting for another one are
 * queued in arrival order and returned by later waits / api_client_next.
 *
 * Return values: 0, or a negative errno for transport trouble, with a
 * message in err:
 *   -ECONNREFUSED / -ENOENT  nobody listens on the socket (connect)
 *   -ETIMEDOUT               the timeout passed
 *   -ECONNRESET              the daemon closed the connection
 *   -EPROTO                  the daemon sent something that is not msgpack-RPC
 *   -ENOMEM
 * An error *reported by the daemon* is not a transport error: the call
 * returns 0 and the message's `code` is not API_OK.
 */
#ifndef TANK_API_CLIENT_H
#define TANK_API_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "api/api_rpc.h"
#include "common/tank_err.h"

typedef struct api_client api_client_t;

/* Largest frame the client accepts from the daemon. */
#define API_CLIENT_MAX_FRAME (256u << 20)

/* One message from the daemon.  Everything it points to lives in `up`:
 * release with api_incoming_free (safe on a zeroed or freed value). */
typedef struct api_incoming {
	int type;                        /* API_RESPONSE or API_NOTIFICATION */
	uint32_t msgid;                  /* responses */
	int code;                        /* responses: API_OK or the error */
	char message[TANK_ERROR_MSG];    /* the error's message, or "" */
	const msgpack_object *result;    /* responses: the result (nil on error) */
	const msgpack_object *details;   /* the error's details, or NULL */
	char method[64];                 /* notifications, NUL-terminated,
					  * truncated */
	const msgpack_object *params;    /* notifications: an array */
	msgpack_unpacked up;             /* owns the objects above */
} api_incoming_t;

void api_incoming_free(api_incoming_t *in);

/*
 * Connects to the Unix socket at path (blocking, close-on-exec).  When
 * nobody answers, err reads "cannot connect to PATH: REASON (is tankd
 * running?)".  *out is owned by the caller: api_client_close.
 */
int api_client_connect(const char *path, api_client_t **out, tank_error_t *err);
/* Closes and frees (NULL is fine); queued messages are dropped. */
void api_client_close(api_client_t *c);
/* The socket, for poll() by callers that wait on other fds too. */
int api_client_fd(const api_client_t *c);

/* Sends [0, msgid, method, params] with params packed by fn (NULL: []);
 * *msgid (may be NULL) gets the id chosen, even when the send failed part
 * way: the daemon may still have answered what it read (an oversized
 * frame's error, say). */
int api_client_send(api_client_t *c, const char *method, api_pack_fn params,
		    void *arg, int timeout_ms, uint32_t *msgid, tank_error_t *err);
/* Sends bytes as they are (tests use it for malformed frames). */
int api_client_send_raw(api_client_t *c, const void *buf, size_t len,
			int timeout_ms, tank_error_t *err);
/* Waits for the response to msgid; *out is the caller's to free. */
int api_client_wait(api_client_t *c, uint32_t msgid, int timeout_ms,
		    api_incoming_t *out, tank_error_t *err);
/* The next message of any kind, queued ones first. */
int api_client_next(api_client_t *c, int timeout_ms, api_incoming_t *out,
		    tank_error_t *err);
/* send + wait. */
int api_client_call(api_client_t *c, const char *method, api_pack_fn params,
		    void *arg, int timeout_ms, api_incoming_t *out,
		    tank_error_t *err);

#endif
