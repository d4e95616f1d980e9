/*
 * pod_probe — a container's health probes (DESIGN.md §8), run inside its
 * runner actor (pod_runner) so that they live exactly as long as the
 * process they watch and never outlive the cgroup and sandbox they borrow.
 *
 * Each probe is a small state machine on the runner's timers, fd and child
 * watches; nothing blocks the loop but the vfork window of an exec probe:
 *   exec  the command is started by pod_launch inside the container's
 *         sandbox (its namespaces, cgroup, user, root and environment),
 *         output discarded; exit 0 is a success;
 *   tcp   a non-blocking connect to host:port;
 *   http  a GET through libcurl's multi interface, its sockets and timer
 *         on the runner's watches; 2xx and 3xx are a success.  libcurl
 *         is loaded by the first http run (common/tank_dl.h); when it
 *         cannot be, every http run fails with "cannot load
 *         libcurl.so.4" and tankd's log says why once.
 * tcp and http sockets are made inside the pod's network namespace when
 * it has one (setns there and back around socket(): tankd is one thread).
 * A run still going at its timeout fails ("timeout after 1s"); an exec
 * probe's process is killed then.  Runs start every period, first after
 * initial_delay; a run still in flight when the next is due is skipped.
 * The second run comes a fraction of the period after the first, a
 * different one for each probe started (pod_probe.c, probe__phase_ms), so
 * probes whose containers started together do not run together every
 * period after.
 *
 * Semantics as Kubernetes: startup runs alone until it passes once, then
 * readiness and liveness start; readiness passing success_threshold times
 * in a row makes the container ready, failing failure_threshold times
 * makes it unready; liveness or startup failing failure_threshold times
 * in a row makes it unhealthy (the runner stops it, the manager restarts
 * it through its restart policy).
 *
 * Ownership: the prober copies the probes and the exec environment; the
 * cgroup and sandbox are borrowed from the runner (see pod_runner.h).
 * Messages for the prober carry tags POD_PROBE_TAG_MIN..POD_PROBE_TAG_MAX.
 */
#ifndef TANK_POD_PROBE_H
#define TANK_POD_PROBE_H

#include <stdbool.h>

#include "common/kit_hist.h"
#include "common/tank_err.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_sandbox.h"
#include "pod/pod_spec.h"
#include "runtime/rt.h"
#include "store/st.h"

#define POD_PROBE_TAG_MIN 100
#define POD_PROBE_TAG_MAX 149

typedef struct pod_prober pod_prober_t;

typedef struct pod_prober_opts {
	const pod_probe_t *probes;        /* [POD_PROBE_ROLES]; copied */
	char *const *envp;                /* exec probes' environment; copied */
	const char *cwd, *user;           /* copied; may be NULL */
	const pod_cgroup_t *cgroup;       /* borrowed; may be NULL */
	const pod_sandbox_t *sandbox;     /* borrowed; may be NULL */
	const char *key;                  /* "<pod>/<container>", for tankd's
					   * log; borrowed like the cgroup */
} pod_prober_opts_t;

/* What a probe run changed, for the runner to tell its owner. */
typedef struct pod_probe_report {
	enum pod_probe_role role;
	bool ok;                          /* this run passed */
	bool ready;                       /* the container is ready now */
	bool unhealthy;                   /* liveness or startup gave up: restart it */
	char text[ST_PROBE_MAX + 1];      /* "readiness: ok", "liveness: failed: …" */
} pod_probe_report_t;

/* Starts the probes of a container that has just started, on behalf of
 * the calling actor (rt_self: the runner).  NULL *out when it has none.
 * -ENOMEM. */
int pod_prober_new(rt_t *rt, const pod_prober_opts_t *o, pod_prober_t **out);

/* Whether the container counts as ready before any probe ran: it has
 * neither a startup nor a readiness probe. */
bool pod_prober_ready(const pod_prober_t *p);

/* Handles a message of the prober (false: not its message).  When a run
 * ended with news — its result differs from the previous run's, readiness
 * changed, or the container is unhealthy — *report is filled and
 * *has_report set. */
bool pod_prober_handle(rt_t *rt, pod_prober_t *p, const rt_msg_t *m,
		       pod_probe_report_t *report, bool *has_report);

/* Descriptors the tcp and http probe runs in flight hold at once, in the
 * whole process: a tcp run its socket (1), an http run its socket and
 * libcurl's wakeup socketpair (3; the multi handle lives only while a run
 * is in flight), until it connects or answers, or its timeout (1 s by
 * default) runs out.  They come from the 256 tankd keeps for itself
 * (pod_host.h), not from the two each container was promised: at 9,000
 * pods whose tcp probes met a listener that never accepted, 9,000
 * sockets were in flight, tankd sat at its limit of 20,000, 1,050
 * containers could not start and a killed one never came back
 * (docs/bench.md, issue 38 round 11).  A run due while it would pass
 * the bound, or while other runs wait, is skipped (no result) and
 * counted (pod_probe_stats_t.skipped, tank_probe_skipped_total), and
 * waits its turn: the runs that wait get the freed descriptors oldest
 * first (a message to their runner), so none waits forever however the
 * periods and timeouts fall.
 * Against targets that answer, a run holds them for well under a
 * millisecond: 48 is tens of thousands of runs a second. */
#define POD_PROBE_FDS_MAX 48
#define POD_PROBE_FDS_TCP 1
#define POD_PROBE_FDS_HTTP 3

/* What every probe run came to, since tankd started, by probe kind
 * (enum pod_probe_kind: exec, tcp, http; index 0, none, stays empty) —
 * for /metrics (tank_probe_total, tank_probe_duration_seconds, through
 * the Pod kind's metrics hook).  A run counts once it ends: passed,
 * failed, or timed out (its timeout ran out, or libcurl's did); a run
 * abandoned because its container stopped does not count.  Its duration
 * is from its start to that end.
 *
 * Process-wide counters, not the prober's or the pod manager's: the
 * probers live in the runners' actors and die with each container and
 * each life of the loop, and a counter must not go back while tankd
 * runs.  tankd is one thread (the runtime's), so plain counters. */
enum pod_probe_result {
	POD_PROBE_PASSED = 0,
	POD_PROBE_FAILED,
	POD_PROBE_TIMED_OUT,
	POD_PROBE_RESULTS
};
#define POD_PROBE_KINDS 4        /* enum pod_probe_kind, NONE included */
typedef struct pod_probe_stats {
	uint64_t runs[POD_PROBE_KINDS][POD_PROBE_RESULTS];
	kit_hist_t seconds[POD_PROBE_KINDS];
	/* Runs not started: the descriptors for runs in flight were all
	 * taken (POD_PROBE_FDS_MAX) when they were due. */
	uint64_t skipped[POD_PROBE_KINDS];
} pod_probe_stats_t;

/* A copy of the counters. */
void pod_probe_stats(pod_probe_stats_t *out);
/* "exec", "tcp", "http" ("none" for 0); "success", "failure", "timeout". */
const char *pod_probe_kind_word(enum pod_probe_kind k);
const char *pod_probe_result_word(enum pod_probe_result r);

/* Stops every probe: runs in flight are abandoned (an exec probe's
 * process is killed), timers and watches go.  NULL is fine. */
void pod_prober_free(rt_t *rt, pod_prober_t *p);

#endif
