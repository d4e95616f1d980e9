#include "pod/pod_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/tank_dl.h"
#include "pod/pod_launch.h"

/* Tags, per role r (0..2). */
#define TAG_TICK(r)     (POD_PROBE_TAG_MIN + 0 + (r))   /* user: a run is due */
#define TAG_TIMEOUT(r)  (POD_PROBE_TAG_MIN + 10 + (r))  /* user: a run took too long */
#define TAG_CHILD(r)    (POD_PROBE_TAG_MIN + 20 + (r))  /* child: an exec probe ended */
#define TAG_TCP(r)      (POD_PROBE_TAG_MIN + 30 + (r))  /* fd: a tcp connect is done */
#define TAG_CURL_FD     (POD_PROBE_TAG_MIN + 40)        /* fd: a libcurl socket */
#define TAG_CURL_TIMER  (POD_PROBE_TAG_MIN + 41)        /* user: libcurl's timer */
#define TAG_GRANT(r)    (POD_PROBE_TAG_MIN + 45 + (r))  /* user: descriptors kept for a waiting run */

typedef struct probe_run probe_run_t;
struct probe_run {
	pod_probe_t spec;             /* copy; argv, host and path owned */
	struct pod_prober *owner;
	enum pod_probe_role role;
	bool active;                  /* scheduled (readiness, liveness: after startup) */
	bool phased;                  /* its runs are on their own phase (probe__phase_ms) */
	bool inflight;
	unsigned holds_fds;           /* counted in probe__fds */
	uint32_t tick_seq, run_seq;   /* a timer message must match to count */
	pid_t pid;                    /* exec */
	bool own_pgrp;
	rt_ref_t child_ref;
	int fd;                       /* tcp */
	rt_ref_t fd_ref;
	CURL *easy;                   /* http */
	rt_ref_t tick_timer, timeout_timer;
	uint64_t started_ns;          /* this run's start (kit_mono_ns) */
	uint32_t succ, fail;          /* in a row */
	int last;                     /* -1 none yet, 0 failed, 1 passed */
	/* The queue of runs waiting for descriptors (probe__wait_head). */
	bool waiting;
	probe_run_t *wait_prev, *wait_next;
	unsigned granted;             /* descriptors counted in probe__fds for
				       * it while its TAG_GRANT is on its way */
	uint32_t grant_seq;           /* the TAG_GRANT that counts */
};

struct pod_prober {
	rt_t *rt;
	rt_pid_t self;                /* the runner: where TAG_GRANT goes */
	probe_run_t run[POD_PROBE_ROLES];
	char **envp;
	char *cwd, *user;
	const pod_cgroup_t *cgroup;
	const pod_sandbox_t *sandbox;
	const char *key;              /* borrowed from the runner */
	int netns_fd;                 /* the pod's network namespace, or -1 */
	bool started;                 /* startup passed, or there is none */
	bool ready;
	const tank_curl_t *cu;        /* libcurl, from the first http run on */
	CURLM *multi;
	uint32_t curl_timer_seq;
	rt_ref_t curl_timer;
	bool curl_timer_set;
	bool in_curl_done;            /* probe__curl_done's loop reads multi */
};

/* Every run's result and duration (pod_probe.h says why process-wide). */
static pod_probe_stats_t probe__stats;

/* Descriptors the tcp and http runs in flight hold: at most
 * POD_PROBE_FDS_MAX (pod_probe.h says why).  Process-wide for the same
 * reason as the counters; one thread. */
static size_t probe__fds;

/* The runs that were due while the descriptors were all taken, oldest
 * first.  Without it a freed descriptor went to whichever run came due
 * next, and a run whose timeout is a whole number of its periods came due
 * at the very moment its own run freed one: with timeout ≥ period and
 * more such probes than descriptors, the same 48 runs kept them and the
 * others never ran (125 pods with tcp probes at a target that never
 * answers, period 200 ms, timeout 1 s: a pod's probe never ran in 30 s).
 * Now a run due while others wait joins the queue's end, and each freed
 * descriptor is kept for the queue's head and sent to its runner
 * (TAG_GRANT): every waiting run starts within about (queue length ×
 * timeout / POD_PROBE_FDS_MAX).  One thread, like the counters. */
static probe_run_t *probe__wait_head, *probe__wait_tail;
static uint32_t probe__grant_seq;

void pod_probe_stats(pod_probe_stats_t *out)
{
	*out = probe__stats;
}

const char *pod_probe_kind_word(enum pod_probe_kind k)
{
	switch (k) {
	case POD_PROBE_EXEC: return "exec";
	case POD_PROBE_TCP: return "tcp";
	case POD_PROBE_HTTP: return "http";
	default: return "none";
	}
}

const char *pod_probe_result_word(enum pod_probe_result r)
{
	switch (r) {
	case POD_PROBE_PASSED: return "success";
	case POD_PROBE_FAILED: return "failure";
	default: return "timeout";
	}
}

/* A libcurl socket's watch (curl_multi_assign). */
typedef struct curl_watch {
	rt_ref_t ref;
	int events;
} curl_watch_t;

static char *probe__strdup(const char *s, bool *oom)
{
	char *d;
	if (!s)
		return NULL;
	if (!(d = strdup(s)))
		*oom = true;
	return d;
}

/* How long after its first run a probe runs the second time: a fraction
 * of its period, different for each probe started, so that runs spread
 * over the period instead of firing together every period.  Probes start
 * when their containers do, and those start in bursts (an apply of 10,000
 * pods takes a few seconds; a mass restart less): left on their start's
 * phase, all their runs would come in the same burst every period, each
 * burst a stall of the loop and a wave of connects at the targets.
 *
 * The n-th probe activated since tankd started takes the fraction
 * frac(n / φ) of the period (Fibonacci hashing, 2^32 / φ = 2654435769):
 * any run of consecutive n is spread evenly over the period (the
 * three-gap theorem: k of them leave gaps of at most about 2.6 / k of
 * it), whatever the order or the names.  Shorter than the period, never
 * longer: no failure is seen later than the spec's period says.  The
 * first run keeps initial_delay (readiness as soon as asked). */
static uint32_t probe__nth;

static uint64_t probe__phase_ms(uint64_t period_ms)
{
	uint32_t f = ++probe__nth * 2654435769u;
	uint64_t ms = ((uint64_t)f * period_ms) >> 32;
	return ms ? ms : period_ms;
}

static void probe__schedule(pod_prober_t *p, probe_run_t *r, uint64_t ms)
{
	uint32_t seq = ++r->tick_seq;
	(void)rt_send_after(p->rt, rt_self(p->rt), ms, TAG_TICK(r->role), &seq, sizeof seq,
			    &r->tick_timer);
}

static void probe__wait_leave(probe_run_t *r)
{
	if (!r->waiting)
		return;
	if (r->wait_prev)
		r->wait_prev->wait_next = r->wait_next;
	else
		probe__wait_head = r->wait_next;
	if (r->wait_next)
		r->wait_next->wait_prev = r->wait_prev;
	else
		probe__wait_tail = r->wait_prev;
	r->wait_prev = r->wait_next = NULL;
	r->waiting = false;
}

static void probe__wait_join(probe_run_t *r)
{
	if (r->waiting)
		return;
	r->waiting = true;
	r->wait_next = NULL;
	r->wait_prev = probe__wait_tail;
	if (probe__wait_tail)
		probe__wait_tail->wait_next = r;
	else
		probe__wait_head = r;
	probe__wait_tail = r;
}

static unsigned probe__fds_of(const probe_run_t *r)
{
	return r->spec.kind == POD_PROBE_TCP ? POD_PROBE_FDS_TCP
	       : r->spec.kind == POD_PROBE_HTTP ? POD_PROBE_FDS_HTTP : 0;
}

/* Gives back n descriptors, and keeps what is free for the waiting runs,
 * oldest first, each told by a TAG_GRANT to its runner. */
static void probe__fds_put(size_t n)
{
	probe__fds -= n;
	while (probe__wait_head &&
	       probe__fds + probe__fds_of(probe__wait_head) <= POD_PROBE_FDS_MAX) {
		probe_run_t *w = probe__wait_head;
		pod_prober_t *o = w->owner;
		uint32_t seq = ++probe__grant_seq;

		probe__wait_leave(w);
		if (rt_send(o->rt, o->self, TAG_GRANT(w->role), &seq, sizeof seq) < 0)
			continue;       /* its runner is gone: the next one */
		w->granted = probe__fds_of(w);
		w->grant_seq = seq;
		probe__fds += w->granted;
	}
}

/* A run no longer waits: out of the queue, and what was kept for it goes
 * to the next.  When it was the queue's head, the runs behind it are
 * looked at too, with nothing given back: the head may have waited for
 * more than is free (an http run for 3 where a tcp run needs 1), and
 * otherwise nobody looks before a run in flight ends — at a target that
 * never answers, its whole timeout later, while descriptors lie free. */
static void probe__wait_drop(probe_run_t *r)
{
	unsigned g = r->granted;
	bool head = r->waiting && r == probe__wait_head;

	probe__wait_leave(r);
	r->granted = 0;
	r->grant_seq = 0;
	if (g || head)
		probe__fds_put(g);
}

/* A probe's socket closes with a reset (SO_LINGER 0), not the orderly
 * close: the prober is the side that closes first and so would keep each
 * connection 60 s in TIME_WAIT — at 10,000 probes every 10 s, 60,000
 * sockets, more local ports than the ephemeral range has (28,232 by
 * default).  The reset is also less work for the kernel than the FIN
 * exchange.  For tcp and http (libcurl's sockets are made by
 * probe__socket too). */
static void probe__linger0(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

/* A socket for tcp and http, made inside the pod's network namespace when
 * it has one.  -errno. */
static int probe__socket(const pod_prober_t *p, int family)
{
	int self = -1, fd, err;

	if (p->netns_fd >= 0) {
		if ((self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
			return -errno;
		if (setns(p->netns_fd, CLONE_NEWNET) < 0) {
			err = -errno;
			close(self);
			return err;
		}
	}
	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	err = fd < 0 ? -errno : 0;
	if (fd >= 0)
		probe__linger0(fd);
	if (self >= 0) {
		/* Back home: tankd's own socket and its clients live here. */
		(void)setns(self, CLONE_NEWNET);
		close(self);
	}
	return fd < 0 ? err : fd;
}

/* The multi handle exists only while an http run is in flight: libcurl
 * gives each one a socketpair (its wakeup), two descriptors for as long
 * as it lives.  Kept for the container's life, that was 2 more
 * descriptors for every container with an http probe, outside the 2 its
 * pipes are counted for (at 9,000 such pods, 18,000).  Released once no
 * run of this prober uses it; made again by the next run (a socketpair
 * and its close: nothing next to a probe's connect). */
static void probe__curl_release_idle(pod_prober_t *p)
{
	if (!p->multi || p->in_curl_done)
		return;
	for (unsigned i = 0; i < POD_PROBE_ROLES; i++)
		if (p->run[i].easy)
			return;
	if (p->curl_timer_set)
		(void)rt_cancel_timer(p->rt, p->curl_timer);
	p->curl_timer_set = false;
	p->curl_timer_seq++;
	p->cu->multi_cleanup(p->multi);
	p->multi = NULL;
}

/* Ends whatever the run has in flight, without a result. */
static void probe__abandon(pod_prober_t *p, probe_run_t *r)
{
	if (r->pid > 0) {
		/* The runtime reaps it as an unclaimed child. */
		(void)rt_unwatch_child(p->rt, r->child_ref);
		kill(r->own_pgrp ? -r->pid : r->pid, SIGKILL);
		r->pid = 0;
	}
	if (r->fd >= 0) {
		(void)rt_unwatch_fd(p->rt, r->fd_ref);
		close(r->fd);
		r->fd = -1;
	}
	if (r->easy) {
		p->cu->multi_remove_handle(p->multi, r->easy);
		p->cu->easy_cleanup(r->easy);
		r->easy = NULL;
		probe__curl_release_idle(p);
	}
	if (r->inflight)
		(void)rt_cancel_timer(p->rt, r->timeout_timer);
	r->inflight = false;
	if (r->holds_fds)
		probe__fds_put(r->holds_fds);
	r->holds_fds = 0;
}

static void probe__activate(pod_prober_t *p, enum pod_probe_role role)
{
	probe_run_t *r = &p->run[role];
	if (r->spec.kind == POD_PROBE_NONE || r->active)
		return;
	r->active = true;
	r->phased = false;
	probe__schedule(p, r, r->spec.initial_delay_ms);
}

/* A run ended: counts, thresholds, and what the owner should hear. */
static void probe__finish(pod_prober_t *p, probe_run_t *r, enum pod_probe_result res,
			  const char *why, pod_probe_report_t *rep, bool *has)
{
	const char *role = pod_probe_role_name(r->role);
	bool was_ready = p->ready, unhealthy = false, ok = res == POD_PROBE_PASSED;
	int prev = r->last;
	unsigned k = (unsigned)r->spec.kind < POD_PROBE_KINDS ? (unsigned)r->spec.kind : 0;

	probe__stats.runs[k][res]++;
	kit_hist_observe_ns(&probe__stats.seconds[k], kit_mono_ns() - r->started_ns);
	probe__abandon(p, r);
	r->last = ok;
	if (ok) {
		r->succ++;
		r->fail = 0;
	} else {
		r->fail++;
		r->succ = 0;
	}
	switch (r->role) {
	case POD_PROBE_STARTUP:
		if (ok && !p->started) {
			p->started = true;
			r->active = false;      /* done for this run of the container */
			(void)rt_cancel_timer(p->rt, r->tick_timer);
			r->tick_seq++;
			probe__activate(p, POD_PROBE_READINESS);
			probe__activate(p, POD_PROBE_LIVENESS);
			if (p->run[POD_PROBE_READINESS].spec.kind == POD_PROBE_NONE)
				p->ready = true;
		} else if (!ok && r->fail >= r->spec.failure_threshold) {
			unhealthy = true;
		}
		break;
	case POD_PROBE_READINESS:
		if (ok && r->succ >= r->spec.success_threshold)
			p->ready = true;
		else if (!ok && r->fail >= r->spec.failure_threshold)
			p->ready = false;
		break;
	case POD_PROBE_LIVENESS:
		if (!ok && r->fail >= r->spec.failure_threshold)
			unhealthy = true;
		break;
	default:
		break;
	}
	if (unhealthy) {
		/* Once: the runner stops the container now. */
		for (unsigned i = 0; i < POD_PROBE_ROLES; i++) {
			probe__abandon(p, &p->run[i]);
			p->run[i].active = false;
			p->run[i].tick_seq++;
		}
		p->ready = false;
	}
	if (prev == (int)ok && was_ready == p->ready && !unhealthy)
		return;
	memset(rep, 0, sizeof *rep);
	rep->role = r->role;
	rep->ok = ok;
	rep->ready = p->ready;
	rep->unhealthy = unhealthy;
	if (ok)
		snprintf(rep->text, sizeof rep->text, "%s: ok", role);
	else
		snprintf(rep->text, sizeof rep->text, "%s: failed: %s", role, why ? why : "?");
	*has = true;
}

static int probe__exec(pod_prober_t *p, probe_run_t *r, char *why, size_t cap)
{
	pod_launch_opts_t lo = {
		.file = r->spec.argv[0], .argv = r->spec.argv, .envp = p->envp,
		.cwd = p->cwd, .user = p->user,
		.stdout_mode = POD_STDIO_NULL, .stderr_mode = POD_STDIO_NULL,
		.cgroup = p->cgroup, .sandbox = p->sandbox,
	};
	pod_proc_t proc;
	tank_error_t err;
	int rc;

	tank_error_clear(&err);
	if ((rc = pod_launch(&lo, &proc, &err)) < 0) {
		snprintf(why, cap, "%.80s", err.msg[0] ? err.msg : tank_strerror(rc));
		return rc;
	}
	pod_proc_close_fds(&proc);
	r->pid = proc.pid;
	r->own_pgrp = proc.own_pgrp;
	if ((rc = rt_watch_child(p->rt, rt_self(p->rt), proc.pid, TAG_CHILD(r->role),
				 &r->child_ref)) < 0) {
		kill(proc.pid, SIGKILL);
		r->pid = 0;
		snprintf(why, cap, "watch: %s", tank_strerror(rc));
		return rc;
	}
	return 0;
}

static int probe__addr(const pod_probe_t *s, struct sockaddr_storage *ss, socklen_t *len)
{
	const char *host = s->host ? s->host : "127.0.0.1";
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof *ss);
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(s->port);
		*len = sizeof *in;
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(s->port);
		*len = sizeof *in6;
		return 0;
	}
	return -EINVAL;
}

/* 1: connected at once, 0: in progress, < 0: failed (why says). */
static int probe__tcp(pod_prober_t *p, probe_run_t *r, char *why, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, rc;

	if (probe__addr(&r->spec, &ss, &len) < 0) {
		snprintf(why, cap, "bad address");
		return -EINVAL;
	}
	if ((fd = probe__socket(p, ss.ss_family)) < 0) {
		snprintf(why, cap, "socket: %s", strerror(-fd));
		return fd;
	}
	if (connect(fd, (struct sockaddr *)&ss, len) == 0) {
		close(fd);
		return 1;
	}
	if (errno != EINPROGRESS) {
		rc = -errno;
		snprintf(why, cap, "connect: %s", strerror(errno));
		close(fd);
		return rc;
	}
	if ((rc = rt_watch_fd(p->rt, rt_self(p->rt), fd, EV_WRITE, TAG_TCP(r->role),
			      &r->fd_ref)) < 0) {
		close(fd);
		snprintf(why, cap, "watch: %s", tank_strerror(rc));
		return rc;
	}
	r->fd = fd;
	return 0;
}

/* --- http: libcurl's multi interface on the runner's watches -------------- */

static int probe__curl_socket(CURL *easy, curl_socket_t s, int what, void *userp,
			      void *socketp)
{
	pod_prober_t *p = userp;
	curl_watch_t *w = socketp;
	int events = (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (w) {
			(void)rt_unwatch_fd(p->rt, w->ref);
			free(w);
			p->cu->multi_assign(p->multi, s, NULL);
		}
		return 0;
	}
	if (w && w->events == events)
		return 0;
	if (w)
		(void)rt_unwatch_fd(p->rt, w->ref);
	else if (!(w = calloc(1, sizeof *w)))
		return -1;
	w->events = events;
	if (rt_watch_fd(p->rt, rt_self(p->rt), s, events, TAG_CURL_FD, &w->ref) < 0) {
		free(w);
		p->cu->multi_assign(p->multi, s, NULL);
		return -1;
	}
	p->cu->multi_assign(p->multi, s, w);
	return 0;
}

static int probe__curl_timer(CURLM *multi, long ms, void *userp)
{
	pod_prober_t *p = userp;

	(void)multi;
	if (p->curl_timer_set)
		(void)rt_cancel_timer(p->rt, p->curl_timer);
	p->curl_timer_set = false;
	p->curl_timer_seq++;
	if (ms < 0)
		return 0;
	p->curl_timer_set = rt_send_after(p->rt, rt_self(p->rt), (uint64_t)ms, TAG_CURL_TIMER,
					  &p->curl_timer_seq, sizeof p->curl_timer_seq,
					  &p->curl_timer) == 0;
	return 0;
}

static curl_socket_t probe__curl_open(void *clientp, curlsocktype purpose,
				      struct curl_sockaddr *addr)
{
	int fd;
	(void)purpose;
	fd = probe__socket(clientp, addr->family);
	return fd < 0 ? CURL_SOCKET_BAD : fd;
}

static size_t probe__curl_discard(char *ptr, size_t size, size_t n, void *ud)
{
	(void)ptr; (void)ud;
	return size * n;
}

/* libcurl for this prober, loaded by the first http run of any
 * (common/tank_dl.h; a tankd without http probes never loads it).  When
 * it cannot be loaded, every http run fails saying so in the container's
 * probe result ("readiness: failed: cannot load libcurl.so.4"), and
 * tankd's log says why once, in full. */
static int probe__curl_load(pod_prober_t *p, char *why, size_t cap)
{
	static bool said;
	const char *msg;
	int rc;

	if ((rc = tank_curl_load(&p->cu, &msg)) == 0)
		return 0;
	if (!said) {
		said = true;
		fprintf(stderr, "tankd: error: http probe of %s: %s (every http probe "
			"fails until tankd is started with it)\n", p->key ? p->key : "?", msg);
	}
	/* The status keeps 63 characters: "cannot load NAME", tank_dl's
	 * message up to its detail. */
	const char *detail = strncmp(msg, "cannot load ", 12) == 0 ? strchr(msg + 12, ':') : NULL;
	snprintf(why, cap, "%.*s", detail ? (int)(detail - msg) : (int)strlen(msg), msg);
	return rc;
}

static int probe__http(pod_prober_t *p, probe_run_t *r, char *why, size_t cap)
{
	char url[512];
	const char *host = r->spec.host ? r->spec.host : "127.0.0.1";

	if (!p->cu && probe__curl_load(p, why, cap) < 0)
		return -ELIBACC;
	if (!p->multi) {
		if (!(p->multi = p->cu->multi_init())) {
			snprintf(why, cap, "out of memory");
			return -ENOMEM;
		}
		p->cu->multi_setopt(p->multi, CURLMOPT_SOCKETFUNCTION, probe__curl_socket);
		p->cu->multi_setopt(p->multi, CURLMOPT_SOCKETDATA, p);
		p->cu->multi_setopt(p->multi, CURLMOPT_TIMERFUNCTION, probe__curl_timer);
		p->cu->multi_setopt(p->multi, CURLMOPT_TIMERDATA, p);
	}
	snprintf(url, sizeof url, strchr(host, ':') ? "http://[%s]:%u%s" : "http://%s:%u%s",
		 host, (unsigned)r->spec.port, r->spec.path ? r->spec.path : "/");
	if (!(r->easy = p->cu->easy_init())) {
		probe__curl_release_idle(p);
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	p->cu->easy_setopt(r->easy, CURLOPT_URL, url);
	p->cu->easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
	p->cu->easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)r->spec.timeout_ms);
	p->cu->easy_setopt(r->easy, CURLOPT_FOLLOWLOCATION, 0L);
	p->cu->easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http");
	p->cu->easy_setopt(r->easy, CURLOPT_USERAGENT, "tank-probe/1");
	p->cu->easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, probe__curl_discard);
	p->cu->easy_setopt(r->easy, CURLOPT_PRIVATE, r);
	p->cu->easy_setopt(r->easy, CURLOPT_FORBID_REUSE, 1L);
	p->cu->easy_setopt(r->easy, CURLOPT_OPENSOCKETFUNCTION, probe__curl_open);
	p->cu->easy_setopt(r->easy, CURLOPT_OPENSOCKETDATA, p);
	if (p->cu->multi_add_handle(p->multi, r->easy) != CURLM_OK) {
		p->cu->easy_cleanup(r->easy);
		r->easy = NULL;
		probe__curl_release_idle(p);
		snprintf(why, cap, "curl: cannot add the request");
		return -ENOMEM;
	}
	return 0;
}

/* Collects the requests libcurl finished. */
static void probe__curl_done(pod_prober_t *p, pod_probe_report_t *rep, bool *has)
{
	CURLMsg *msg;
	int left;

	p->in_curl_done = true;
	while ((msg = p->cu->multi_info_read(p->multi, &left))) {
		probe_run_t *r = NULL;
		long code = 0;
		char why[96];
		if (msg->msg != CURLMSG_DONE)
			continue;
		p->cu->easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		if (!r || r->easy != msg->easy_handle)
			continue;
		CURLcode res = msg->data.result;
		p->cu->easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
		if (res != CURLE_OK)
			snprintf(why, sizeof why, "%s", res == CURLE_OPERATION_TIMEDOUT
				 ? "timeout" : p->cu->easy_strerror(res));
		else
			snprintf(why, sizeof why, "HTTP %ld", code);
		probe__finish(p, r, res == CURLE_OK && code >= 200 && code < 400 ? POD_PROBE_PASSED
				  : res == CURLE_OPERATION_TIMEDOUT ? POD_PROBE_TIMED_OUT
				  : POD_PROBE_FAILED, why, rep, has);
	}
	p->in_curl_done = false;
	probe__curl_release_idle(p);
}

/* --- runs ------------------------------------------------------------------ */

static void probe__start(pod_prober_t *p, probe_run_t *r, pod_probe_report_t *rep, bool *has)
{
	char why[96] = "";
	int rc;

	/* A run that would hold more descriptors than tankd keeps for probes,
	 * or that others wait for before it, is skipped, as one still in
	 * flight at its next period is: no result.  It waits in the queue
	 * (probe__wait_head) and starts when its turn comes (TAG_GRANT) or
	 * at a period of its own that finds the descriptors kept for it
	 * (targets that do not answer hold a socket each for their whole
	 * timeout). */
	unsigned fds = probe__fds_of(r);
	if (fds && r->granted) {
		r->granted = 0;         /* kept for it, counted already */
		r->grant_seq = 0;
	} else if (fds) {
		if (probe__wait_head || probe__fds + fds > POD_PROBE_FDS_MAX) {
			probe__stats.skipped[r->spec.kind]++;
			probe__wait_join(r);
			return;
		}
		probe__fds += fds;
	}
	r->holds_fds = fds;
	r->inflight = true;
	r->run_seq++;
	r->started_ns = kit_mono_ns();
	switch (r->spec.kind) {
	case POD_PROBE_EXEC:
		rc = probe__exec(p, r, why, sizeof why);
		break;
	case POD_PROBE_TCP:
		rc = probe__tcp(p, r, why, sizeof why);
		break;
	default:
		rc = probe__http(p, r, why, sizeof why);
		break;
	}
	if (rc != 0) {
		probe__finish(p, r, rc > 0 ? POD_PROBE_PASSED : POD_PROBE_FAILED, why, rep, has);
		return;
	}
	(void)rt_send_after(p->rt, rt_self(p->rt), r->spec.timeout_ms, TAG_TIMEOUT(r->role),
			    &r->run_seq, sizeof r->run_seq, &r->timeout_timer);
	if (r->easy) {
		int running;
		p->cu->multi_socket_action(p->multi, CURL_SOCKET_TIMEOUT, 0, &running);
		probe__curl_done(p, rep, has);
	}
}

int pod_prober_new(rt_t *rt, const pod_prober_opts_t *o, pod_prober_t **out)
{
	pod_prober_t *p;
	bool any = false, oom = false;
	size_t n = 0;

	*out = NULL;
	for (unsigned i = 0; i < POD_PROBE_ROLES; i++)
		any |= o->probes[i].kind != POD_PROBE_NONE;
	if (!any)
		return 0;
	if (!(p = calloc(1, sizeof *p)))
		return -ENOMEM;
	p->rt = rt;
	p->self = rt_self(rt);
	p->netns_fd = -1;
	p->cgroup = o->cgroup;
	p->sandbox = o->sandbox;
	p->key = o->key;
	for (unsigned i = 0; i < POD_PROBE_ROLES; i++) {
		p->run[i].role = (enum pod_probe_role)i;
		p->run[i].owner = p;
		p->run[i].fd = -1;
		p->run[i].last = -1;
		if (pod_probe_copy(&p->run[i].spec, &o->probes[i]) < 0)
			oom = true;
	}
	while (o->envp && o->envp[n])
		n++;
	if ((p->envp = calloc(n + 1, sizeof *p->envp)))
		for (size_t i = 0; i < n; i++)
			p->envp[i] = probe__strdup(o->envp[i], &oom);
	else
		oom = true;
	p->cwd = probe__strdup(o->cwd, &oom);
	p->user = probe__strdup(o->user, &oom);
	if (o->sandbox && (o->sandbox->ns & POD_NS_NET) && o->sandbox->ns_fd[POD_SBX_NET] >= 0 &&
	    (p->netns_fd = fcntl(o->sandbox->ns_fd[POD_SBX_NET], F_DUPFD_CLOEXEC, 0)) < 0)
		oom = true;
	if (oom) {
		pod_prober_free(rt, p);
		return -ENOMEM;
	}
	p->started = p->run[POD_PROBE_STARTUP].spec.kind == POD_PROBE_NONE;
	p->ready = p->started && p->run[POD_PROBE_READINESS].spec.kind == POD_PROBE_NONE;
	if (!p->started) {
		probe__activate(p, POD_PROBE_STARTUP);
	} else {
		probe__activate(p, POD_PROBE_READINESS);
		probe__activate(p, POD_PROBE_LIVENESS);
	}
	*out = p;
	return 0;
}

bool pod_prober_ready(const pod_prober_t *p)
{
	return !p || p->ready;
}

bool pod_prober_handle(rt_t *rt, pod_prober_t *p, const rt_msg_t *m,
		       pod_probe_report_t *rep, bool *has)
{
	uint32_t tag = m->tag, seq = 0;

	*has = false;
	if (!p || tag < POD_PROBE_TAG_MIN || tag > POD_PROBE_TAG_MAX)
		return false;
	(void)rt;
	if (m->type == RT_MSG_USER && m->len == sizeof seq)
		memcpy(&seq, m->data, sizeof seq);
	if (tag == TAG_CURL_TIMER && m->type == RT_MSG_USER) {
		int running;
		if (seq != p->curl_timer_seq || !p->multi)
			return true;
		p->curl_timer_set = false;
		p->cu->multi_socket_action(p->multi, CURL_SOCKET_TIMEOUT, 0, &running);
		probe__curl_done(p, rep, has);
		return true;
	}
	if (tag == TAG_CURL_FD && m->type == RT_MSG_FD) {
		int running, ev = (m->u.fd.revents & EV_READ ? CURL_CSELECT_IN : 0) |
				  (m->u.fd.revents & EV_WRITE ? CURL_CSELECT_OUT : 0);
		if (p->multi) {
			p->cu->multi_socket_action(p->multi, m->u.fd.fd, ev, &running);
			probe__curl_done(p, rep, has);
		}
		return true;
	}
	if (tag >= TAG_GRANT(0) && tag < TAG_GRANT(POD_PROBE_ROLES)) {
		probe_run_t *r = &p->run[tag - TAG_GRANT(0)];
		if (m->type != RT_MSG_USER || !r->granted || seq != r->grant_seq)
			return true;    /* started at its own period meanwhile */
		if (r->active && !r->inflight)
			probe__start(p, r, rep, has);
		else
			probe__wait_drop(r);
		return true;
	}
	unsigned role = (tag - POD_PROBE_TAG_MIN) % 10;
	if (role >= POD_PROBE_ROLES)
		return true;
	probe_run_t *r = &p->run[role];
	switch ((tag - POD_PROBE_TAG_MIN) / 10) {
	case 0:         /* due */
		if (m->type != RT_MSG_USER || seq != r->tick_seq || !r->active)
			return true;
		probe__schedule(p, r, r->phased ? r->spec.period_ms
					     : probe__phase_ms(r->spec.period_ms));
		r->phased = true;
		if (!r->inflight)
			probe__start(p, r, rep, has);
		return true;
	case 1: {       /* timeout */
		char why[64];
		if (m->type != RT_MSG_USER || seq != r->run_seq || !r->inflight)
			return true;
		snprintf(why, sizeof why, "timeout after %llums",
			 (unsigned long long)r->spec.timeout_ms);
		probe__finish(p, r, POD_PROBE_TIMED_OUT, why, rep, has);
		return true;
	}
	case 2: {       /* exec probe ended */
		char why[64];
		if (m->type != RT_MSG_CHILD || m->u.child.pid != r->pid)
			return true;
		r->pid = 0;     /* reaped by the runtime */
		if (m->u.child.signal)
			snprintf(why, sizeof why, "killed by signal %d", m->u.child.signal);
		else
			snprintf(why, sizeof why, "exit code %d", m->u.child.code);
		probe__finish(p, r, m->u.child.signal == 0 && m->u.child.code == 0
				  ? POD_PROBE_PASSED : POD_PROBE_FAILED, why, rep, has);
		return true;
	}
	case 3: {       /* tcp connect done */
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		char why[96];
		if (m->type != RT_MSG_FD || r->fd < 0)
			return true;
		if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		snprintf(why, sizeof why, "connect: %s", strerror(soerr));
		probe__finish(p, r, soerr == 0 ? POD_PROBE_PASSED : POD_PROBE_FAILED, why, rep, has);
		return true;
	}
	default:
		return true;
	}
}

void pod_prober_free(rt_t *rt, pod_prober_t *p)
{
	(void)rt;
	if (!p)
		return;
	for (unsigned i = 0; i < POD_PROBE_ROLES; i++) {
		probe__abandon(p, &p->run[i]);
		probe__wait_drop(&p->run[i]);
		(void)rt_cancel_timer(p->rt, p->run[i].tick_timer);
		pod_probe_clear(&p->run[i].spec);
	}
	if (p->multi) {
		if (p->curl_timer_set)
			(void)rt_cancel_timer(p->rt, p->curl_timer);
		p->cu->multi_cleanup(p->multi);
	}
	for (size_t i = 0; p->envp && p->envp[i]; i++)
		free(p->envp[i]);
	free(p->envp);
	free(p->cwd);
	free(p->user);
	if (p->netns_fd >= 0)
		close(p->netns_fd);
	free(p);
}
