/* obs_http — the web side on the daemon's loop (contract in obs_http.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/tank_dl.h"
#include "obs/obs_http.h"
#include "obs/obs_json.h"
#include "obs/obs_page.h"
#include "reconciler/rc_loop.h"

#define OBS_RECENT 32             /* events replayed to a page at connect */
/* At most one snapshot per this: a snapshot is every object of every
 * kind, so under a storm of thousands of pods a faster pace costs the
 * loop more than a person watching the page can read. */
#define OBS_SNAPSHOT_MS 1000
/* ... and at most this share of the loop's time: a snapshot is one turn
 * (125 ms at 9,700 pods, seconds at 100,000 stored), so the pace after a
 * change is ten times the last build when that is longer than a second:
 * at a second's pace a page open through the delete of 100,000 pods
 * would have kept the loop building snapshots. */
#define OBS_SNAPSHOT_SHARE 10
#define OBS_HEARTBEAT_S 15.
/* A connection gets this long to send a whole request, from its accept
 * (or from the end of its last answer, were it kept alive: none is,
 * on_completed): 64 connections that sent half a request, or a byte every
 * few seconds, held every slot of the web side (OBS_HTTP_MAX_CONNS) for
 * MHD's inactivity timeout, and one byte reset it. */
#define OBS_HTTP_ASK_S 10.
/* ... and an answer must move at least once in this long (MHD's
 * inactivity timeout): a client that asked for /state and reads nothing
 * held its slot for 60 s.  A page's stream is suspended while it has
 * nothing to send, which MHD does not time out, and its heartbeat every
 * 15 s is read by a live page. */
#define OBS_HTTP_IDLE_S 10u
#define OBS_HTTP_SNDBUF (128 << 10) /* the kernel doubles it */

/* libmicrohttpd's functions (common/tank_dl.h): loaded by the first
 * obs_http_open, the same for every server after. */
static const tank_mhd_t *mhd_fn;

typedef struct sse sse_t;
typedef struct sse_snap sse_snap_t;
typedef struct obs_conn obs_conn_t;
typedef struct obs_wait obs_wait_t;

/* ---- answers built over several turns -------------------------------------------
 *
 * /metrics and /state read every object of every kind.  Built in one
 * turn, that was most of a second at 100,000 stored pods, and every RPC
 * and reconcile waited behind it.  A job builds one of them in slices of
 * OBS_SLICE_NS (obs_walk_t, obs/obs_metrics.h), and the requests that
 * ask while it runs are suspended until it ends, then all answered with
 * the same bytes.  The snapshots of the live page are /state's build too. */
#define OBS_SLICE_NS (5u * 1000u * 1000u)

enum { JOB_STATE, JOB_METRICS, JOB_N };

/* A job's answer, shared by the requests it ends: each queues r in its
 * handler's next call (after its resume); the last reference dropped
 * (done_unref) drops r. */
typedef struct obs_done {
	struct MHD_Response *r;        /* NULL: the build ran out of memory */
	size_t refs;
} obs_done_t;

/* A request waiting for a job (its con_cls), from its suspension to the
 * end of the request (on_completed frees it). */
struct obs_wait {
	obs_done_t *done;              /* its answer, once the job ended */
	bool cut;                      /* no answer: out of memory, or closing */
	obs_wait_t *next, **pprev;     /* in its job's list while it waits */
	struct MHD_Connection *c;
};

typedef struct snap_kind {
	const kind_t *k;
	obs_buf_t *b;
	uint64_t now;
	size_t n, nkinds;
} snap_kind_t;

typedef struct obs_job {
	bool running;
	bool again;                    /* pages asked for a newer snapshot meanwhile */
	obs_wait_t *waiters;
	double cost;                   /* seconds its slices took */
	obs_buf_t b;                   /* JOB_STATE: SNAP_HEAD, the document so far */
	snap_kind_t sk;
	obs_walk_t w;
	obs_metrics_build_t *mb;       /* JOB_METRICS */
} obs_job_t;

/* A connection, from its accept to its close (MHD's socket context). */
struct obs_conn {
	struct MHD_Connection *c;
	double since;                  /* waiting for a request since (conn_now); 0: in one */
	obs_conn_t *next, **pprev;
};

struct obs_http {
	obs_http_opts_t o;
	char addr[80];
	int listen_fd;                 /* MHD's (MHD_OPTION_LISTEN_SOCKET) */
	struct MHD_Daemon *mhd;
	struct ev_loop *loop;
	ev_io io;
	ev_timer timer;                /* MHD's timeout, and kicks */
	ev_timer snap;                 /* the next snapshot (armed when dirty) */
	ev_timer beat;                 /* heartbeat comments */
	sse_t *clients;
	obs_conn_t *conns;             /* every open connection */
	size_t nsnap;                  /* clients that want snapshots */
	bool closing;
	obs_counts_t counts;
	obs_buf_t recent[OBS_RECENT];  /* `data: …\n\n` of the last events */
	size_t recent_next;
	double snap_cost;              /* seconds the last snapshot's slices took */
	/* What the requests of one MHD_run share.  Every handler runs on the
	 * loop's thread, so nothing changes between two requests of one run:
	 * 64 pages opened at once at 9,700 pods built /state 64 times in one
	 * callback (a loop frozen for seconds) where one build answers all.
	 * Dropped when the run ends (share_drop); MHD keeps a response it
	 * still sends (its own reference). */
	bool in_run;
	obs_done_t *ran[JOB_N];        /* an answer built in this run */
	sse_snap_t *snap_run;          /* the snapshot message of this run */
	obs_job_t job[JOB_N];
	ev_timer slice;                /* the next slice of the jobs running */
};

/* One build of the state document, as the snapshot message the pages
 * are sent (SNAP_HEAD, the document, a blank line); the /state answer of
 * that build is the document and a newline in the same bytes.  Shared
 * by the pages and the answers, freed with its last reference: each page
 * held a copy of its own, 64 pages at 100,000 stored pods 64 copies of
 * 63 MB (4 GB in tankd), and each build copied the document once more. */
#define SNAP_HEAD "event: snapshot\ndata: "
struct sse_snap {
	obs_http_t *h;                 /* its counts (tank_http_snapshot_bytes) */
	size_t refs;
	size_t len;
	char *p;                       /* malloc'ed, owned */
};

/* A page's stream: q, then the snapshot it reads (if any), then after.
 * At most one snapshot at a time: one due while it reads one is owed
 * (snap_owed) and sent, as the state of that moment, once it is read. */
struct sse {
	obs_http_t *h;
	struct MHD_Connection *c;
	obs_buf_t q;                   /* events before snap (all, without one) */
	/* Bytes of q already sent: MHD takes 16 KiB a call, and dropping
	 * them at each call moved the rest of q every call (a gigabyte of
	 * memmove a page at 10,000 pods when the snapshot was in q).  They
	 * go once they are half of q, so q holds up to twice what is
	 * unread (the bound below is on the unread bytes). */
	size_t sent;
	sse_snap_t *snap;              /* a reference; NULL: none to send */
	size_t snap_sent;              /* its bytes sent */
	obs_buf_t after;               /* events that came while it reads snap */
	bool suspended, snapshot, cut;
	bool snap_owed;                /* a snapshot skipped while it read one */
	bool snap_wait;                /* waits for the state job's snapshot */
	sse_t *next, **pprev;
};

/* ---- running MHD on the loop ------------------------------------------------ */

/* The clock of the request deadlines: monotonic.  ev_now is the wall
 * clock (libev's timers alone are monotonic): stepped back an hour, a
 * dripping connection was not closed for that hour; stepped forward, a
 * connection a second old was cut in the middle of its request. */
static double conn_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + 1.;   /* > 0: 0 is "in one" */
}

/* Connections that took OBS_HTTP_ASK_S without sending a whole request
 * are shut down (MHD reads their end and closes them in its next run);
 * returns the seconds until the next one is due, or -1 with none. */
static double ask_check(obs_http_t *h)
{
	double now = conn_now();
	double next = -1;

	for (obs_conn_t *k = h->conns; k; k = k->next) {
		if (k->since <= 0)
			continue;
		if (now - k->since >= OBS_HTTP_ASK_S) {
			const union MHD_ConnectionInfo *ci =
				mhd_fn->get_connection_info(k->c, MHD_CONNECTION_INFO_CONNECTION_FD);
			if (ci)
				(void)shutdown(ci->connect_fd, SHUT_RDWR);
			k->since = 0;
			h->counts.slow_closed++;
			continue;
		}
		double left = k->since + OBS_HTTP_ASK_S - now;
		if (next < 0 || left < next)
			next = left;
	}
	return next;
}

static void rearm(obs_http_t *h)
{
	MHD_UNSIGNED_LONG_LONG ms;
	double at = ask_check(h);

	ev_timer_stop(h->loop, &h->timer);
	if (mhd_fn->get_timeout(h->mhd, &ms) == MHD_YES && (at < 0 || (double)ms / 1000. < at))
		at = (double)ms / 1000.;
	if (at >= 0) {
		ev_timer_set(&h->timer, at, 0.);
		ev_timer_start(h->loop, &h->timer);
	}
}

static void snap_unref(sse_snap_t *m)
{
	if (m && --m->refs == 0) {
		m->h->counts.snap_bytes -= m->len;
		free(m->p);
		free(m);
	}
}

static void done_unref(obs_done_t *d)
{
	if (d && --d->refs == 0) {
		if (d->r)
			mhd_fn->destroy_response(d->r);
		free(d);
	}
}

static void share_drop(obs_http_t *h)
{
	for (int j = 0; j < JOB_N; j++) {
		done_unref(h->ran[j]);
		h->ran[j] = NULL;
	}
	snap_unref(h->snap_run);
	h->snap_run = NULL;
}

/* One MHD_run: every ready connection is served, the answers that cost a
 * walk of every object built once for all of them.  (Connections it
 * accepts are served in the next run.) */
static void run_once(obs_http_t *h)
{
	h->in_run = true;
	mhd_fn->run(h->mhd);
	h->in_run = false;
	share_drop(h);
}

static void run(obs_http_t *h)
{
	run_once(h);
	rearm(h);
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop; (void)revents;
	run(w->data);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)revents;
	run(w->data);
}

/* MHD must run after a resume (microhttpd.h): soon, from the loop. */
static void kick(obs_http_t *h)
{
	ev_timer_stop(h->loop, &h->timer);
	ev_timer_set(&h->timer, 0., 0.);
	ev_timer_start(h->loop, &h->timer);
}

/* ---- server-sent events ------------------------------------------------------ */

/* The events it has not read; the snapshot is not counted: one of
 * 10,000 pods (5.7 MB) is bigger than the bound, a client that reads gets
 * it whole, and the events behind it are bounded.  (Counting the
 * snapshot cut every page of thousands of pods at the first event while
 * it read.) */
static bool sse_over(const sse_t *s)
{
	return s->q.len - s->sent + s->after.len > OBS_SSE_MAX_QUEUE || s->q.oom || s->after.oom;
}

/* It does not read: cut rather than hold the daemon's memory. */
static void sse_cut(sse_t *s)
{
	s->cut = true;
	s->h->counts.sse_dropped++;
	obs_buf_free(&s->q);
	obs_buf_free(&s->after);
	snap_unref(s->snap);
	s->snap = NULL;
	s->sent = s->snap_sent = 0;
}

static void sse_wake(sse_t *s)
{
	if (s->suspended) {
		s->suspended = false;
		mhd_fn->resume_connection(s->c);
		kick(s->h);
	}
}

/* Queues an event (the backlog before it counts, not the event). */
static void sse_push(sse_t *s, const char *data, size_t n)
{
	if (s->cut)
		return;
	if (sse_over(s))
		sse_cut(s);
	else
		obs_buf_put(s->snap ? &s->after : &s->q, data, n);
	sse_wake(s);
}

/* Sends it m (a reference of its own); one already being read makes
 * this one owed instead (send_snapshot sends none then: defensive). */
static void sse_push_snap(sse_t *s, sse_snap_t *m)
{
	if (s->cut)
		return;
	if (s->snap) {
		s->snap_owed = true;
		return;
	}
	if (sse_over(s)) {
		sse_cut(s);
	} else {
		s->snap = m;
		s->snap_sent = 0;
		m->refs++;
	}
	sse_wake(s);
}

static void send_snapshot(obs_http_t *h, sse_t *only);

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	sse_t *s = cls;
	size_t n;

	(void)pos;
	if (s->cut)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (s->sent == s->q.len && !s->snap && s->snap_owed) {
		/* It has read what it had: the state now, once. */
		s->snap_owed = false;
		send_snapshot(s->h, s);
	}
	if (s->sent < s->q.len) {
		n = s->q.len - s->sent < max ? s->q.len - s->sent : max;
		memcpy(buf, s->q.p + s->sent, n);
		s->sent += n;
		/* Dropped once all is sent, or once it is most of the queue. */
		if (s->sent == s->q.len || s->sent > s->q.len / 2) {
			obs_buf_consume(&s->q, s->sent);
			s->sent = 0;
		}
		return (ssize_t)n;
	}
	if (s->snap) {
		n = s->snap->len - s->snap_sent < max ? s->snap->len - s->snap_sent : max;
		memcpy(buf, s->snap->p + s->snap_sent, n);
		s->snap_sent += n;
		if (s->snap_sent == s->snap->len) {
			/* Read: what came meanwhile is next. */
			snap_unref(s->snap);
			s->snap = NULL;
			obs_buf_free(&s->q);
			s->q = s->after;
			s->after = (obs_buf_t){ 0 };
			s->sent = 0;
		}
		return (ssize_t)n;
	}
	if (s->h->closing)
		return MHD_CONTENT_READER_END_OF_STREAM;
	/* Nothing to say: off MHD's loop until obs_http_publish. */
	s->suspended = true;
	mhd_fn->suspend_connection(s->c);
	return 0;
}

static void sse_free(void *cls)
{
	sse_t *s = cls;

	if (s->next)
		s->next->pprev = s->pprev;
	*s->pprev = s->next;
	s->h->counts.sse_clients--;
	s->h->nsnap -= s->snapshot;
	obs_buf_free(&s->q);
	obs_buf_free(&s->after);
	snap_unref(s->snap);
	free(s);
}

/* ---- requests ------------------------------------------------------------------ */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned code, const char *type,
			      const char *body, size_t len)
{
	struct MHD_Response *r =
		mhd_fn->create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	mhd_fn->add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	mhd_fn->add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = mhd_fn->queue_response(c, code, r);
	mhd_fn->destroy_response(r);
	return ret;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned code, const char *s)
{
	return answer(c, code, "text/plain; charset=utf-8", s, strlen(s));
}

/* /metrics sent from its parts as they are (obs_metrics_finish_parts):
 * MHD asks by offset, so one response serves every request of a job. */
typedef struct parts_body {
	obs_buf_t p[OBS_METRICS_PARTS];
	uint64_t at[OBS_METRICS_PARTS + 1];   /* where each part begins; the total last */
} parts_body_t;

static ssize_t parts_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	parts_body_t *pb = cls;
	size_t n = 0;

	if (pos >= pb->at[OBS_METRICS_PARTS])
		return MHD_CONTENT_READER_END_OF_STREAM;
	for (size_t i = 0; i < OBS_METRICS_PARTS && n < max; i++) {
		if (pos + n >= pb->at[i + 1])
			continue;
		size_t off = (size_t)(pos + n - pb->at[i]);
		size_t k = pb->p[i].len - off < max - n ? pb->p[i].len - off : max - n;
		memcpy(buf + n, pb->p[i].p + off, k);
		n += k;
	}
	return (ssize_t)n;
}

static void parts_free(void *cls)
{
	parts_body_t *pb = cls;

	for (size_t i = 0; i < OBS_METRICS_PARTS; i++)
		obs_buf_free(&pb->p[i]);
	free(pb);
}

/* The response of a finished metrics build (mb freed), NULL when out of
 * memory. */
static struct MHD_Response *metrics_response(obs_http_t *h, obs_metrics_build_t *mb)
{
	parts_body_t *pb = calloc(1, sizeof *pb);
	struct MHD_Response *r = NULL;
	obs_buf_t tmp[OBS_METRICS_PARTS];
	obs_buf_t *p = pb ? pb->p : tmp;

	if (obs_metrics_finish_parts(mb, &h->counts, p) == 0 && pb) {
		for (size_t i = 0; i < OBS_METRICS_PARTS; i++)
			pb->at[i + 1] = pb->at[i] + pb->p[i].len;
		r = mhd_fn->create_response_from_callback(pb->at[OBS_METRICS_PARTS], 64 << 10,
							  parts_read, pb, parts_free);
	}
	if (!r) {
		for (size_t i = 0; i < OBS_METRICS_PARTS; i++)
			obs_buf_free(&p[i]);
		free(pb);
		return NULL;
	}
	mhd_fn->add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				    "text/plain; version=0.0.4; charset=utf-8");
	mhd_fn->add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	return r;
}

/* A big answer's socket gets a fixed send buffer: what one run of MHD
 * copies into it is bounded by that, not by the kernel's autotuning
 * (megabytes on loopback).  64 clients reading /state of 9,700 pods had
 * the loop copy 326 MB in a handful of runs, and a ping waited 1.1 s.
 * A client reads at the loop's pace either way.  Not for /events: there
 * the kernel's buffer is what lets a page that looks away for a moment
 * hold its events without tankd holding them (a keep-alive connection
 * that asked for /state first keeps the small buffer). */
static void narrow_sndbuf(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		mhd_fn->get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	if (ci)
		(void)setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF,
				 &(int){ OBS_HTTP_SNDBUF }, sizeof(int));
}

/* ---- the snapshot, and the jobs ------------------------------------------------- */

static void snap_kind_begin(void *ctx, const kind_t *k)
{
	snap_kind_t *sk = ctx;
	obs_buf_t *b = sk->b;

	sk->k = k;
	sk->n = 0;
	obs_buf_puts(b, sk->nkinds++ ? ",{\"name\":" : "{\"name\":");
	obs_json_str(b, k->name, strlen(k->name));
	obs_buf_puts(b, ",\"plural\":");
	obs_json_str(b, k->plural, strlen(k->plural));
	obs_buf_puts(b, ",\"kind\":");
	obs_json_str(b, k->mf->name, strlen(k->mf->name));
	obs_buf_puts(b, ",\"cols\":[");
	for (size_t c = 0; c < k->ncols; c++) {
		if (c)
			obs_buf_puts(b, ",");
		obs_json_str(b, k->cols[c].header, strlen(k->cols[c].header));
	}
	obs_buf_puts(b, "],\"items\":[");
}

static void snapshot_one(void *ctx, const msgpack_object *st)
{
	snap_kind_t *sk = ctx;
	obs_buf_t *b = sk->b;

	obs_buf_puts(b, sk->n++ ? ",{\"cells\":[" : "{\"cells\":[");
	for (size_t c = 0; c < sk->k->ncols; c++) {
		char cell[256];
		cell[0] = '\0';
		sk->k->cols[c].cell(st, sk->now, cell, sizeof cell);
		if (c)
			obs_buf_puts(b, ",");
		obs_json_str(b, cell, strlen(cell));
	}
	obs_buf_puts(b, "],\"status\":");
	obs_json_write(b, st);
	obs_buf_puts(b, "}");
}

static void snap_kind_end(void *ctx, const kind_t *k)
{
	(void)k;
	obs_buf_puts(((snap_kind_t *)ctx)->b, "]}");
}

static void slice_arm(obs_http_t *h)
{
	if (!ev_is_active(&h->slice)) {
		ev_timer_set(&h->slice, 0., 0.);
		ev_timer_start(h->loop, &h->slice);
	}
}

static void job_start(obs_http_t *h, int j)
{
	static const obs_walk_fns_t fns = { snap_kind_begin, snapshot_one, snap_kind_end };
	obs_job_t *job = &h->job[j];

	job->running = true;
	job->again = false;
	job->cost = 0;
	if (j == JOB_METRICS) {
		job->mb = obs_metrics_start(&h->o.src);
		return;
	}
	job->b = (obs_buf_t){ 0 };
	job->sk = (snap_kind_t){ .b = &job->b, .now = rc_wall_ms() };
	obs_buf_printf(&job->b, SNAP_HEAD "{\"at\":%llu,\"kinds\":[",
		       (unsigned long long)job->sk.now);
	obs_walk_init(&job->w, h->o.src.kinds, &fns, &job->sk);
}

/* One slice of job j: true once it has walked every object. */
static bool job_slice(obs_http_t *h, int j)
{
	obs_job_t *job = &h->job[j];
	double t0 = ev_time();
	bool done;

	if (j == JOB_METRICS)
		done = !job->mb || obs_metrics_step(job->mb, h->o.src.slice_objects, OBS_SLICE_NS);
	else
		done = obs_walk_step(&job->w, h->o.src.slice_objects, OBS_SLICE_NS);
	job->cost += ev_time() - t0;
	h->counts.build_slices++;
	return done;
}

/* The next periodic snapshot, paced by what the last one cost. */
static void snap_arm(obs_http_t *h)
{
	if (h->nsnap && !ev_is_active(&h->snap)) {
		double pace = OBS_SNAPSHOT_SHARE * h->snap_cost;
		ev_timer_set(&h->snap, pace > OBS_SNAPSHOT_MS / 1000. ? pace : OBS_SNAPSHOT_MS / 1000.,
			     0.);
		ev_timer_start(h->loop, &h->snap);
	}
}

/* The pages that wait for a snapshot get m (they share it). */
static void pages_snapshot(obs_http_t *h, sse_snap_t *m)
{
	for (sse_t *s = h->clients; s; s = s->next) {
		if (!s->snap_wait)
			continue;
		s->snap_wait = false;
		if (m)
			sse_push_snap(s, m);
	}
	if (m && h->in_run && !h->snap_run) {
		h->snap_run = m;       /* for the pages that connect in this run */
		m->refs++;
	}
}

/* /state's body, read from the build's bytes (a reference of its own). */
static ssize_t state_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	sse_snap_t *m = cls;
	size_t body = m->len - (sizeof SNAP_HEAD - 1) - 1, n;

	if (pos >= body)
		return MHD_CONTENT_READER_END_OF_STREAM;
	n = body - (size_t)pos < max ? body - (size_t)pos : max;
	memcpy(buf, m->p + (sizeof SNAP_HEAD - 1) + pos, n);
	return (ssize_t)n;
}

static void state_free(void *cls)
{
	snap_unref(cls);
}

/* The state job's end: its buffer (SNAP_HEAD and the document) becomes
 * one sse_snap_t for the pages and the /state answer; returns that
 * answer, NULL when out of memory (the pages that wait then wait for
 * the next build's). */
static struct MHD_Response *state_end(obs_http_t *h, obs_buf_t *b)
{
	sse_snap_t *m = NULL;
	struct MHD_Response *r = NULL;

	obs_buf_puts(b, "]}\n\n");
	if (!b->oom && (m = malloc(sizeof *m))) {
		*m = (sse_snap_t){ .h = h, .refs = 1, .len = b->len, .p = b->p };
		*b = (obs_buf_t){ 0 };
		h->counts.snap_bytes += m->len;
	}
	obs_buf_free(b);
	pages_snapshot(h, m);
	if (m) {
		r = mhd_fn->create_response_from_callback(m->len - (sizeof SNAP_HEAD - 1) - 1,
							  64 << 10, state_read, m, state_free);
		if (r) {
			m->refs++;
			mhd_fn->add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
						    "application/json");
			mhd_fn->add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
		}
	}
	snap_unref(m);
	return r;
}

/* Ends job j.  Its answer goes to every request that waited (each is
 * resumed and queues it in its handler's next call) and, for the state,
 * the snapshot to every page that waits.  Returns the answer with one
 * reference for the caller (done_unref), NULL when out of memory. */
static obs_done_t *job_end(obs_http_t *h, int j)
{
	obs_job_t *job = &h->job[j];
	struct MHD_Response *r = NULL;
	obs_done_t *d = calloc(1, sizeof *d);

	job->running = false;
	if (j == JOB_METRICS) {
		if (job->mb)
			r = metrics_response(h, job->mb);
		job->mb = NULL;
	} else {
		h->snap_cost = job->cost;
		r = state_end(h, &job->b);
		if (job->again)
			snap_arm(h);
		job->again = false;
	}
	if (d) {
		d->r = r;
		d->refs = 1;
	} else if (r) {
		mhd_fn->destroy_response(r);
	}
	for (obs_wait_t *w; (w = job->waiters); ) {
		if ((*w->pprev = w->next))
			w->next->pprev = w->pprev;
		w->pprev = NULL;
		if (d) {
			w->done = d;
			d->refs++;
		} else {
			w->cut = true;
		}
		mhd_fn->resume_connection(w->c);
		kick(h);
	}
	return d;
}

static void slice_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	obs_http_t *h = t->data;
	bool more = false;

	(void)loop; (void)revents;
	for (int j = 0; j < JOB_N; j++) {
		if (!h->job[j].running)
			continue;
		if (job_slice(h, j))
			done_unref(job_end(h, j));
		else
			more = true;
	}
	if (more)
		slice_arm(h);
}

/* Pages want the state: the state job's next end brings it.  One
 * running already began before this ask: a periodic snapshot (only NULL)
 * is built again after it, a new page takes its bytes. */
static void state_want(obs_http_t *h, bool periodic)
{
	obs_job_t *job = &h->job[JOB_STATE];

	if (h->closing)
		return;                /* every stream ends (obs_http_close) */
	if (job->running) {
		job->again |= periodic;
		return;
	}
	job_start(h, JOB_STATE);
	if (job_slice(h, JOB_STATE)) {
		obs_done_t *d = job_end(h, JOB_STATE);
		if (h->in_run && !h->ran[JOB_STATE])
			h->ran[JOB_STATE] = d;
		else
			done_unref(d);
		return;
	}
	slice_arm(h);
}

static void send_snapshot(obs_http_t *h, sse_t *only)
{
	for (sse_t *s = h->clients; s; s = s->next) {
		if (!s->snapshot || (only && s != only))
			continue;
		if (!only && s->snap) {
			/* Still reading the last one: this one would only
			 * queue behind it; it gets the state when done. */
			s->snap_owed = true;
			continue;
		}
		/* Pages connecting in one run are sent the same bytes. */
		if (h->in_run && h->snap_run)
			sse_push_snap(s, h->snap_run);
		else
			s->snap_wait = true;
	}
	for (sse_t *s = h->clients; s; s = s->next)
		if (s->snap_wait) {
			state_want(h, !only);
			return;
		}
}

static void snap_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)revents;
	send_snapshot(w->data, NULL);
}

static void beat_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	obs_http_t *h = w->data;

	(void)loop; (void)revents;
	for (sse_t *s = h->clients; s; s = s->next)
		sse_push(s, ": ping\n\n", 8);
}

static enum MHD_Result queue_done(struct MHD_Connection *c, obs_done_t *d)
{
	if (!d || !d->r)
		return text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	narrow_sndbuf(c);
	return mhd_fn->queue_response(c, MHD_HTTP_OK, d->r);
}

/* /metrics or /state (job j): answered now when its build takes one
 * slice, or by the build that runs (one starts): the request is
 * suspended until it ends, and every request of a build gets the same
 * bytes.  Called again after the resume, with *con_cls its obs_wait_t. */
static enum MHD_Result answer_job(obs_http_t *h, struct MHD_Connection *c, int j,
				  void **con_cls)
{
	obs_job_t *job = &h->job[j];
	obs_wait_t *w = *con_cls;
	enum MHD_Result ret;

	if (w) {
		if (w->cut)
			return text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
				    h->closing ? "tankd is stopping\n" : "out of memory\n");
		if (!w->done)
			return MHD_YES;        /* still waiting */
		ret = queue_done(c, w->done);
		done_unref(w->done);
		w->done = NULL;
		return ret;
	}
	if (h->in_run && h->ran[j])
		return queue_done(c, h->ran[j]);
	/* Closing (obs_http_close's last runs): none waits, as MHD must not
	 * be stopped with a suspended connection (it aborts the process). */
	if (h->closing)
		return text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "tankd is stopping\n");
	if (!job->running) {
		job_start(h, j);
		if (job_slice(h, j)) {
			obs_done_t *d = job_end(h, j);
			ret = queue_done(c, d);
			if (h->in_run && !h->ran[j])
				h->ran[j] = d;
			else
				done_unref(d);
			return ret;
		}
	}
	if (!(w = calloc(1, sizeof *w)))
		return text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	w->c = c;
	if ((w->next = job->waiters))
		w->next->pprev = &w->next;
	w->pprev = &job->waiters;
	job->waiters = w;
	*con_cls = w;
	mhd_fn->suspend_connection(c);
	slice_arm(h);
	return MHD_YES;
}

static enum MHD_Result events(obs_http_t *h, struct MHD_Connection *c)
{
	const char *snap = mhd_fn->lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "snapshot");
	struct MHD_Response *r;
	enum MHD_Result ret;
	sse_t *s = calloc(1, sizeof *s);

	if (!s)
		return text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	s->h = h;
	s->c = c;
	s->snapshot = snap && strcmp(snap, "0") != 0;
	r = mhd_fn->create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, s, sse_free);
	if (!r) {
		free(s);
		return MHD_NO;
	}
	s->next = h->clients;
	if (s->next)
		s->next->pprev = &s->next;
	s->pprev = &h->clients;
	h->clients = s;
	h->counts.sse_clients++;
	h->nsnap += s->snapshot;
	/* The browser reconnects by itself after a cut; 2 s is its pace. */
	obs_buf_puts(&s->q, "retry: 2000\n\n");
	if (s->snapshot) {
		for (size_t i = 0; i < OBS_RECENT; i++) {
			obs_buf_t *e = &h->recent[(h->recent_next + i) % OBS_RECENT];
			if (e->len)
				obs_buf_put(&s->q, e->p, e->len);
		}
		send_snapshot(h, s);
	}
	mhd_fn->add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	mhd_fn->add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = mhd_fn->queue_response(c, MHD_HTTP_OK, r);
	mhd_fn->destroy_response(r);
	return ret;
}

/* A request is done (its answer freed now, or with the connection: the
 * next request's trim gets it then).  An exposition of thousands of pods is a few hundred KiB built and
 * freed at each scrape; glibc keeps such freed heap in the process, so a
 * scraped tankd sat on it between scrapes (+8 % PSS per pod at 1,000 pods,
 * docs/bench.md).  Giving it back costs a walk of the free lists, once
 * per request: nothing beside a scrape a second. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	const union MHD_ConnectionInfo *ci =
		mhd_fn->get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	obs_conn_t *k = ci ? ci->socket_context : NULL;
	obs_wait_t *w = *con_cls;

	(void)cls; (void)toe;
	if (w) {
		/* Closed while it waited (the web side closing): out of its job. */
		if (w->pprev && (*w->pprev = w->next))
			w->next->pprev = w->pprev;
		done_unref(w->done);
		free(w);
		*con_cls = NULL;
	}
	/* Kept alive: the next request is due within OBS_HTTP_ASK_S.  (None
	 * is today: on_request queues every answer in the handler's first
	 * call, and libmicrohttpd, 0.9.75 to 1.0.1, then closes the
	 * connection after it — "Connection: close".) */
	if (k)
		k->since = conn_now();
	malloc_trim(0);
}

/* Every connection is followed from its accept (the time it has to ask)
 * to its close. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	obs_http_t *h = cls;
	obs_conn_t *k = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		/* Not followed when out of memory: MHD's inactivity timeout
		 * still ends it. */
		if (!(k = calloc(1, sizeof *k)))
			return;
		k->c = c;
		k->since = conn_now();
		if ((k->next = h->conns))
			h->conns->pprev = &k->next;
		k->pprev = &h->conns;
		h->conns = k;
		*socket_context = k;
		return;
	}
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED && k) {
		if (k->next)
			k->next->pprev = k->pprev;
		*k->pprev = k->next;
		free(k);
		*socket_context = NULL;
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_size, void **con_cls)
{
	obs_http_t *h = cls;

	(void)version; (void)upload;
	/* Called again after a resume: the answer it waited for. */
	if (*con_cls)
		return answer_job(h, c, !strcmp(url, "/metrics") ? JOB_METRICS : JOB_STATE,
				  con_cls);
	/* A whole request came: its answer is under MHD's inactivity timeout
	 * now (a page's stream for as long as it reads). */
	const union MHD_ConnectionInfo *ci =
		mhd_fn->get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (ci && ci->socket_context)
		((obs_conn_t *)ci->socket_context)->since = 0;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "read-only: GET and HEAD only\n");
	if (*upload_size)
		return text(c, MHD_HTTP_BAD_REQUEST, "no body expected\n");
	h->counts.requests++;
	if (!strcmp(url, "/metrics"))
		return answer_job(h, c, JOB_METRICS, con_cls);
	if (!strcmp(url, "/healthz")) {
		bool ok = rt_whereis(h->o.src.rt, h->o.src.loop_name) != RT_NOPID &&
			  (!h->o.healthy || h->o.healthy(h->o.healthy_ctx));
		return ok ? text(c, MHD_HTTP_OK, "ok\n")
			  : text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "reconcile loop not running\n");
	}
	if (!strcmp(url, "/events"))
		return events(h, c);
	if (!strcmp(url, "/state"))
		return answer_job(h, c, JOB_STATE, con_cls);
	if (!strcmp(url, "/"))
		return answer(c, MHD_HTTP_OK, "text/html; charset=utf-8", obs_page_html,
			      obs_page_html_len);
	return text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* ---- publishing ---------------------------------------------------------------- */

static void count_type(obs_counts_t *c, const msgpack_object *ev)
{
	char type[sizeof c->type[0]];

	if (!kind_str(kind_map_get(ev, "type"), type, sizeof type))
		snprintf(type, sizeof type, "unknown");
	for (size_t i = 0; i < c->ntypes; i++)
		if (!strcmp(c->type[i], type)) {
			c->events[i]++;
			return;
		}
	if (c->ntypes == OBS_EVENT_TYPES) {
		c->events_other++;
		return;
	}
	memcpy(c->type[c->ntypes], type, sizeof type);
	c->events[c->ntypes++] = 1;
}

void obs_http_publish(obs_http_t *h, const char *event, size_t len)
{
	msgpack_unpacked u;
	size_t off = 0;
	obs_buf_t *line;

	if (!h || h->closing)
		return;
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, event, len, &off) != MSGPACK_UNPACK_SUCCESS) {
		msgpack_unpacked_destroy(&u);
		return;
	}
	count_type(&h->counts, &u.data);
	/* Nobody listens: counted, nothing else (the recent events are for
	 * a page, and cost a JSON conversion each). */
	if (!h->clients) {
		msgpack_unpacked_destroy(&u);
		return;
	}
	line = &h->recent[h->recent_next];
	h->recent_next = (h->recent_next + 1) % OBS_RECENT;
	line->len = 0;
	line->oom = false;
	obs_buf_puts(line, "data: ");
	obs_json_write(line, &u.data);
	obs_buf_puts(line, "\n\n");
	msgpack_unpacked_destroy(&u);
	if (line->oom) {
		obs_buf_free(line);
		return;
	}
	for (sse_t *s = h->clients; s; s = s->next)
		sse_push(s, line->p, line->len);
	snap_arm(h);
}

/* ---- open, close ------------------------------------------------------------------- */

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return true;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
			return in6->sin6_addr.s6_addr[12] == 127;
	}
	return false;
}

/* Splits "HOST:PORT" / "[V6]:PORT" and binds a listening socket. */
/* True when fd is a listening stream socket bound to ai's address (its
 * port any when ai's is 0). */
static bool listen_same(int fd, const struct addrinfo *ai)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss, al;
	int acc = 0;

	al = sizeof acc;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 || ss.ss_family != ai->ai_family)
		return false;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)&ss, *b = (const void *)ai->ai_addr;
		return a->sin_addr.s_addr == b->sin_addr.s_addr &&
		       (!b->sin_port || a->sin_port == b->sin_port);
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)&ss, *b = (const void *)ai->ai_addr;
		return !memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) &&
		       (!b->sin6_port || a->sin6_port == b->sin6_port);
	}
	return false;
}

static int listen_bind(const char *addr, bool allow_remote, int *inherit, char *bound, size_t cap,
		       tank_error_t *err);

/* Binds addr, or takes inherit (>= 0: a previous image's socket, see
 * obs_http_opts_t) when it is bound there; inherit is closed otherwise,
 * on every path. */
static int listen_on(const char *addr, bool allow_remote, int inherit, char *bound, size_t cap,
		     tank_error_t *err)
{
	int r = listen_bind(addr, allow_remote, &inherit, bound, cap, err);

	if (inherit >= 0)
		close(inherit);
	return r;
}

/* listen_on's work: *inherit set to -1 once taken. */
static int listen_bind(const char *addr, bool allow_remote, int *inherit, char *bound, size_t cap,
		       tank_error_t *err)
{
	char host[256];
	const char *port, *colon = strrchr(addr, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
	size_t hl;
	int fd, rc, one = 1;

	if (!colon || !colon[1])
		return tank_error_set(err, TANK_EINVALID,
				      "--http %s: expected HOST:PORT (127.0.0.1:9180)", addr);
	port = colon + 1;
	hl = (size_t)(colon - addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
		addr++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof host)
		return tank_error_set(err, TANK_EINVALID,
				      "--http %s: expected HOST:PORT (127.0.0.1:9180)", addr);
	memcpy(host, addr, hl);
	host[hl] = '\0';
	if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0)
		return tank_error_set(err, TANK_EINVALID, "--http %s:%s: %s", host, port,
				      gai_strerror(rc));
	if (!allow_remote && !is_loopback(ai->ai_addr)) {
		freeaddrinfo(ai);
		return tank_error_set(err, TANK_EINVALID,
				      "--http %s:%s: not a loopback address (the page and the "
				      "metrics name every object; add --http-allow-remote to "
				      "serve them beyond this machine)", host, port);
	}
	if (*inherit >= 0 && listen_same(*inherit, ai)) {
		/* The handover cleared close-on-exec for the exec. */
		fd = *inherit;
		*inherit = -1;
		if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
		    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
			rc = -errno;
			close(fd);
			freeaddrinfo(ai);
			return tank_error_set(err, rc, "--http: the inherited socket: %s",
					      strerror(-rc));
		}
		freeaddrinfo(ai);
		goto bound;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		freeaddrinfo(ai);
		return tank_error_set(err, rc, "--http: socket: %s", strerror(-rc));
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
		rc = -errno;
		close(fd);
		freeaddrinfo(ai);
		return tank_error_set(err, rc, "unable to serve http on %s:%s: %s", host, port,
				      strerror(-rc));
	}
	freeaddrinfo(ai);
bound:;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char h[INET6_ADDRSTRLEN] = "?";
	unsigned p = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *in = (void *)&ss;
			inet_ntop(AF_INET, &in->sin_addr, h, sizeof h);
			p = ntohs(in->sin_port);
			snprintf(bound, cap, "%s:%u", h, p);
		} else {
			struct sockaddr_in6 *in6 = (void *)&ss;
			inet_ntop(AF_INET6, &in6->sin6_addr, h, sizeof h);
			p = ntohs(in6->sin6_port);
			snprintf(bound, cap, "[%s]:%u", h, p);
		}
	}
	return fd;
}

int obs_http_listen_fd(const obs_http_t *h)
{
	return h->listen_fd;
}

int obs_http_open(const obs_http_opts_t *o, obs_http_t **out, tank_error_t *err)
{
	obs_http_t *h;
	const union MHD_DaemonInfo *info;
	int fd;

	const char *why;
	int rc;

	*out = NULL;
	if (!o->addr || !o->addr[0])
		rc = tank_error_set(err, TANK_EINVALID, "--http: an address is required");
	else if (!mhd_fn && (rc = tank_mhd_load(&mhd_fn, &why)) < 0)
		rc = tank_error_set(err, rc, "--http: %s", why);
	else if (!(h = calloc(1, sizeof *h)))
		rc = tank_error_set(err, -ENOMEM, "out of memory");
	else
		rc = 0;
	if (rc < 0) {
		if (o->inherit && o->listen_fd >= 0)
			close(o->listen_fd);      /* taken, whatever the call returns */
		return rc;
	}
	h->o = *o;
	h->o.addr = NULL;
	h->loop = rt_loop(o->src.rt);
	if ((fd = listen_on(o->addr, o->allow_remote, o->inherit ? o->listen_fd : -1, h->addr,
			    sizeof h->addr, err)) < 0) {
		free(h);
		return fd;
	}
	h->listen_fd = fd;
	h->mhd = mhd_fn->start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL,
				  on_request, h,
				  MHD_OPTION_LISTEN_SOCKET, fd,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned)OBS_HTTP_MAX_CONNS,
				  MHD_OPTION_CONNECTION_TIMEOUT, OBS_HTTP_IDLE_S,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, (void *)NULL,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
				  MHD_OPTION_END);
	if (!h->mhd || !(info = mhd_fn->get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD))) {
		if (h->mhd)
			mhd_fn->stop_daemon(h->mhd);
		close(fd);
		free(h);
		return tank_error_set(err, -ENOMEM, "unable to serve http on %s: libmicrohttpd "
				      "did not start", o->addr);
	}
	ev_io_init(&h->io, io_cb, info->epoll_fd, EV_READ);
	h->io.data = h;
	ev_io_start(h->loop, &h->io);
	ev_init(&h->timer, timer_cb);
	h->timer.data = h;
	ev_init(&h->snap, snap_cb);
	h->snap.data = h;
	ev_init(&h->slice, slice_cb);
	h->slice.data = h;
	ev_timer_init(&h->beat, beat_cb, OBS_HEARTBEAT_S, OBS_HEARTBEAT_S);
	h->beat.data = h;
	ev_timer_start(h->loop, &h->beat);
	/* The heartbeat must not keep a loop alive that has nothing else. */
	ev_unref(h->loop);
	ev_unref(h->loop);
	rearm(h);
	*out = h;
	return 0;
}

const char *obs_http_addr(const obs_http_t *h)
{
	return h->addr;
}

void obs_http_close(obs_http_t *h)
{
	if (!h)
		return;
	/* Every stream ends: resumed, its reader says end of stream at the
	 * next MHD_run.  MHD must not be stopped with a suspended
	 * connection (microhttpd.h). */
	h->closing = true;
	for (sse_t *s = h->clients; s; s = s->next)
		if (s->suspended) {
			s->suspended = false;
			mhd_fn->resume_connection(s->c);
		}
	/* The requests that wait for a build are told tankd stops. */
	for (int j = 0; j < JOB_N; j++)
		for (obs_wait_t *w; (w = h->job[j].waiters); ) {
			if ((h->job[j].waiters = w->next))
				w->next->pprev = &h->job[j].waiters;
			w->pprev = NULL;
			w->cut = true;
			mhd_fn->resume_connection(w->c);
		}
	for (int i = 0; i < 3; i++)
		run_once(h);
	ev_ref(h->loop);
	ev_ref(h->loop);
	ev_io_stop(h->loop, &h->io);
	ev_timer_stop(h->loop, &h->timer);
	ev_timer_stop(h->loop, &h->snap);
	ev_timer_stop(h->loop, &h->beat);
	ev_timer_stop(h->loop, &h->slice);
	mhd_fn->stop_daemon(h->mhd);
	obs_metrics_free(h->job[JOB_METRICS].mb);
	obs_buf_free(&h->job[JOB_STATE].b);
	for (size_t i = 0; i < OBS_RECENT; i++)
		obs_buf_free(&h->recent[i]);
	free(h);
}
