/*
 * kp_proto — what tankd and its keeper say to each other, and tankd's side
 * of it (the keeper's is kp_keeper.h).
 *
 * The keeper is the process the user or the service manager starts
 * (`tankd --keeper …`): a child subreaper that starts tankd, restarts it
 * when it dies, reaps whatever becomes its child (the containers of a
 * tankd killed -9 are re-parented to it) and keeps their exit status, and
 * holds copies of the containers' log pipes (an fd store, as systemd's
 * FDSTORE), so that a tankd killed -9 loses neither its children's exits
 * nor a line of their output.  docs/operations.md, "Upgrades and crashes".
 *
 * Transport: one SOCK_SEQPACKET socketpair per life of tankd, tankd's end
 * passed as the number in TANK_KEEPER_FD (and the keeper's pid in
 * TANK_KEEPER_PID).  Every message is one kp_msg_t, fds as SCM_RIGHTS.
 *
 *   tankd -> keeper
 *     KP_PUT   tag + 0..2 fds: keep them under tag (replacing the tag's)
 *     KP_DEL   tag: close and forget them
 *     KP_HELLO a new tankd: send me every tag and every exit kept
 *     KP_ACK   pid + start: that exit is recorded, forget it (sent only
 *              once the status recording it is committed: until then a
 *              new tankd gets it again at its HELLO; pod_adopt_ack)
 *     KP_STAT  how much do you hold? (`tankctl daemon status`)
 *   keeper -> tankd
 *     KP_ENTRY tag + its fds (answers HELLO)
 *     KP_EXIT  pid, start, wait status, time: a process the keeper reaped
 *              (pushed as it happens, and in answer to HELLO)
 *     KP_END   end of the answer to HELLO
 *     KP_STAT  the answer to KP_STAT: `start` the tags held (a process's
 *              pipes each), `at_ms` the exits kept, not acked yet
 *
 * The keeper never interprets a tag.  A process is named by its pid and
 * its start time (/proc/PID/stat field 22), never by its pid alone.
 *
 * tankd's side blocks only in kp_client_hello (bounded by a timeout) and
 * in sends to the keeper, which always reads at once.  Not thread-safe.
 */
#ifndef TANK_KP_PROTO_H
#define TANK_KP_PROTO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/tank_err.h"

#define KP_ENV_FD "TANK_KEEPER_FD"
#define KP_ENV_PID "TANK_KEEPER_PID"
/* How many times the keeper started tankd (1 the first time). */
#define KP_ENV_STARTS "TANK_KEEPER_STARTS"
#define KP_TAG_MAX 240
#define KP_MAX_FDS 2

enum kp_op {
	KP_PUT = 1, KP_DEL, KP_HELLO, KP_ACK,
	KP_ENTRY, KP_EXIT, KP_END,
	KP_STAT,
};

typedef struct kp_msg {
	uint32_t op;             /* enum kp_op */
	int32_t pid;
	int32_t status;          /* KP_EXIT: the wait status */
	uint32_t nfds;           /* fds that came with it (filled on receive) */
	uint64_t start;          /* the process's start time (clock ticks) */
	int64_t at_ms;           /* KP_EXIT: when it was reaped, ms since the epoch */
	char tag[KP_TAG_MAX];    /* NUL-terminated */
} kp_msg_t;

/* Sends m with n fds (borrowed, not closed).  Blocking unless dontwait.
 * 0 or negative errno. */
int kp_send(int sock, const kp_msg_t *m, const int *fds, unsigned n, bool dontwait);
/* Receives one message; fds[] gets the fds that came with it (at most
 * KP_MAX_FDS, the rest closed), m->nfds says how many.  1 got one, 0 the
 * peer is gone, negative errno (-EAGAIN on a non-blocking socket). */
int kp_recv(int sock, kp_msg_t *m, int *fds);

/* tankd's end. */
typedef struct kp_client {
	int fd;                  /* -1: no keeper (any more) */
	pid_t pid;               /* the keeper's, 0 when none */
} kp_client_t;

/* From the environment: fills c (fd -1 when there is no keeper, which is
 * not an error).  The fd is made close-on-exec (a reexec clears that on
 * purpose) and removed from nothing: the variables stay for a reexec.
 * TANK_EINVALID when the variable does not name a socket. */
int kp_client_from_env(kp_client_t *c, tank_error_t *err);
/* Asks for everything kept: entry(ctx, tag, fds, n) takes the fds (it
 * must close what it does not keep), exit(ctx, …) for each kept exit.
 * Waits at most timeout_ms for the answer.  0 or negative errno. */
int kp_client_hello(kp_client_t *c, int timeout_ms,
		    void (*entry)(void *ctx, const char *tag, const int *fds, unsigned n),
		    void (*exit)(void *ctx, pid_t pid, uint64_t start, int status,
				 int64_t at_ms),
		    void *ctx);
/* What the keeper holds now: *tags (processes whose pipes it keeps) and
 * *exits (reaped, not acked yet).  exit() for each KP_EXIT that comes
 * first (as kp_client_read).  Waits at most timeout_ms.  0 or negative
 * errno (-EPIPE: the keeper is gone; the client is then closed). */
int kp_client_stat(kp_client_t *c, int timeout_ms,
		   void (*exit)(void *ctx, pid_t pid, uint64_t start, int status,
				int64_t at_ms),
		   void *ctx, uint64_t *tags, uint64_t *exits);
/* Keeps fds under tag, forgets a tag, acks an exit.  No keeper: 0, nothing
 * done.  Each blocks until the keeper takes it, 2 s at most; a failure
 * (the keeper gone or stuck) shuts the link down, which the next
 * kp_client_read reports (-EPIPE) and closes.  Returns 0 or negative
 * errno. */
int kp_client_put(kp_client_t *c, const char *tag, const int *fds, unsigned n);
int kp_client_del(kp_client_t *c, const char *tag);
int kp_client_ack(kp_client_t *c, pid_t pid, uint64_t start);
/* Reads what the keeper pushed (non-blocking): exit() for each KP_EXIT.
 * 0 when nothing more is to be read now, -EPIPE when the keeper is gone
 * (the client is then closed). */
int kp_client_read(kp_client_t *c,
		   void (*exit)(void *ctx, pid_t pid, uint64_t start, int status,
				int64_t at_ms),
		   void *ctx);
void kp_client_close(kp_client_t *c);

#endif
