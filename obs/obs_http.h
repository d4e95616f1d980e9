/*
 * obs_http — tankd's read-only web side (DESIGN.md §12): libmicrohttpd
 * serving, on the daemon's own libev loop,
 *
 *   /metrics   the Prometheus text format, 0.0.4 (obs_metrics.h)
 *   /healthz   200 "ok" while the reconcile loop runs, 503 while it is
 *              gone (between two of its lives) or the daemon stops
 *   /events    server-sent events: one `data:` line per event of the
 *              events stream (`tankctl events`), as a JSON object;
 *              `/events?snapshot=1` adds `event: snapshot` messages
 *              (every kind's objects, see /state) at connect and at
 *              most every second after a change (ten times the last
 *              build when that is longer), and replays the last
 *              32 events first: what the page uses
 *   /state     the snapshot as one JSON document: {at, kinds: [{name,
 *              plural, kind, cols, items: [{cells, status}]}]} — the
 *              table tankctl prints (each kind's columns) and the
 *              status map it comes from
 *   /          the live page (obs/page.html, compiled in: no external
 *              asset)
 *
 * Only GET and HEAD; every change goes through the RPC socket and its
 * peer-credential check.
 *
 * One thread.  libmicrohttpd runs in its "external" mode with epoll:
 * its epoll fd is one ev_io on the loop, its timeout one ev_timer, and
 * MHD_run is called from them; every handler therefore runs on the
 * runtime's thread, between two actors' turns, and reads the daemon's
 * state (the store's mapped pages, the kinds' instances, the loop's
 * counters) directly, as any actor does.  No snapshot, no lock, no copy
 * when nobody asks, and nothing at all when --http is off (the daemon
 * then never calls obs_http_open).  What walks every object (/metrics,
 * /state, the snapshots) is built in slices of 5 ms, the loop's other
 * work between them (obs_walk_t); a request that asks meanwhile is
 * suspended until the build ends, and all of one build's requests get
 * the same bytes.
 *
 * SSE clients are suspended connections (MHD_suspend_connection) while
 * they have nothing to send and are resumed by obs_http_publish; one
 * whose unread backlog of events passes OBS_SSE_MAX_QUEUE bytes when a
 * message comes (a client that does not read) is cut; a snapshot is not
 * counted in it (one of 10,000 pods is 5.7 MB: sent whole to a client
 * that reads), and a client still reading one is sent no other until it
 * has read it, then the state of that moment: its memory is bounded by
 * the bound, and the pages reading one build's snapshot share one copy
 * of its bytes (a reference each).  A comment line
 * every 15 s keeps proxies from closing an idle stream and lets a gone
 * client be noticed.
 */
#ifndef TANK_OBS_HTTP_H
#define TANK_OBS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "common/tank_err.h"
#include "obs/obs_metrics.h"

#define OBS_SSE_MAX_QUEUE (1u << 20)
#define OBS_HTTP_MAX_CONNS 64

typedef struct obs_http obs_http_t;

typedef struct obs_http_opts {
	/* "HOST:PORT" ("127.0.0.1:9180", "[::1]:9180", "localhost:9180");
	 * port 0 takes a free one (obs_http_addr says which).  Copied. */
	const char *addr;
	/* Without it an address that is not loopback is refused: the
	 * metrics and the page show names, commands' arguments are not in
	 * them but pod names and events are. */
	bool allow_remote;
	obs_src_t src;                 /* borrowed pointers, see obs_metrics.h */
	/* False while the daemon should answer /healthz with 503 (stopping). */
	bool (*healthy)(void *ctx);
	void *healthy_ctx;
	/* inherit: listen_fd is a listening socket a previous image of the
	 * daemon served (a reexec's handover, obs_http_listen_fd): served as
	 * it is when it is bound where addr says (any port when addr's is 0),
	 * so that clients connecting during the exec wait in its backlog
	 * instead of being refused; else closed and addr bound anew.  Taken
	 * by the call, whatever it returns. */
	bool inherit;
	int listen_fd;
} obs_http_opts_t;

/*
 * Binds addr and starts serving on rt's loop.  The first call loads
 * libmicrohttpd (common/tank_dl.h: tankd without --http never does).
 * Errors, with err naming the address: TANK_EINVALID (not HOST:PORT, or
 * not loopback without allow_remote), -EADDRINUSE and other bind errors,
 * -ENOMEM; -ELIBACC when libmicrohttpd cannot be loaded ("--http: cannot
 * load libmicrohttpd.so.12: …", before anything is bound).  Call on the
 * daemon's thread.
 */
int obs_http_open(const obs_http_opts_t *o, obs_http_t **out, tank_error_t *err);

/* The address actually bound ("127.0.0.1:40211"); borrowed. */
const char *obs_http_addr(const obs_http_t *h);

/* The listening socket (close-on-exec, as every fd of the daemon): a
 * reexec hands it over (opts.inherit) so that the new image serves the
 * connections queued meanwhile.  Still h's. */
int obs_http_listen_fd(const obs_http_t *h);

/* An event of the events stream (one packed msgpack map, borrowed for
 * the call): counted by type, and sent to every /events client. */
void obs_http_publish(obs_http_t *h, const char *event, size_t len);

/* Closes every client (their streams end) and the socket.  NULL: no-op. */
void obs_http_close(obs_http_t *h);

#endif
