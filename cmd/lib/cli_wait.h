/*
 * cli_wait — the `apply --wait` batch loop (idem's reconciliation loop,
 * DESIGN.md §4), as pure decisions the tests can drive.
 *
 * The caller applies, then repeatedly: fetches the applied pods' status,
 * hands it to cli_batch_observe, and either stops (converged, or stuck:
 * no progress in CLI_BATCH_PATIENCE consecutive passes) or sleeps
 * cli_batch_wait_ms and counts a re-run.  No I/O here, nothing blocks.
 */
#ifndef TANK_CLI_WAIT_H
#define TANK_CLI_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "common/tank_map.h"
#include "reconciler/rc_converge.h"

#define CLI_WAIT_MAX_MS (24ull * 3600 * 1000)   /* exponential waits stop here */

/*
 * One wait of a pod's reconcile_wait before re-run number `run` (0 for the
 * first wait): static → wait; random → min + rnd % (max - min + 1), ms
 * resolution, both ends included; exponential → wait · multiplier^run,
 * capped at CLI_WAIT_MAX_MS.  NULL w means the default, static 3 s.
 * `rnd` is a random value supplied by the caller (tests pass fixed ones).
 */
uint64_t cli_reconcile_wait_ms(const rc_wait_t *w, unsigned run,
			       uint64_t rnd);

struct kind;

/*
 * Objects a wait looks at without judging them (a dependency outside the
 * batch, the children of an object a verb waits for): what each was at its last
 * look, to tell whether it moved since (rc_conv_moved's rule).
 */
typedef struct cli_watch {
	size_t n, cap;
	struct cli_watched {
		const struct kind *kind;
		char *name;                  /* owned */
		rc_conv_obj_t o;
		unsigned pass;               /* the look `moved` is of */
		bool moved, looped;
	} *v;
	tank_map_t at;                       /* cli__key(kind, name) -> 1 + index */
} cli_watch_t;

/* Whether object (k, name), observed as ob at look number `pass`, moved
 * since its previous look (a first sighting moves; asked twice at one
 * look, the same answer); *looped when it restarted back to the same
 * outcome.  -ENOMEM reads as moved. */
bool cli_watch_moved(cli_watch_t *w, const struct kind *k, const char *name, unsigned pass,
		     const rc_observed_t *ob, bool *looped);
void cli_watch_free(cli_watch_t *w);

/*
 * The batch: the applied objects, observed at each pass through their
 * kind's observation (kinds/kind.h: the status map and the object as
 * applied) and judged by the generic rule (reconciler/rc_converge.h:
 * converged, failed, or pending; progress; 3 passes without progress end
 * the wait).
 */
typedef struct cli_batch {
	size_t n;
	const char *const *names;            /* borrowed, n */
	const struct kind *const *kinds;     /* borrowed, n; NULL: the default kind */
	const void *const *objs;             /* borrowed, n; NULL: none */
	const rc_wait_t *const *waits; /* borrowed, n; NULL entries
						 * (or NULL array) = default */
	const long *owner;                   /* borrowed, n; the index of the
					      * object that applied it inline
					      * (kind_t.inline_at), -1: none;
					      * NULL: no owners */
	rc_conv_t conv;                      /* verdicts, progress, re_runs */
	rc_observed_t *obs;                  /* owned, n: the last pass */
	const rc_observed_t **have;          /* owned, n: obs[i] or NULL */
	cli_watch_t deps;                    /* dependencies outside the batch */
	/* Lookups by name, so that a pass over 10,000 objects is not
	 * 10,000 scans of 10,000 statuses: `at` (cli__key(kind, name) ->
	 * 1 + index in the batch) is built at the first pass; `seen` (name
	 * -> its status map in the list a see was given) at each see.  When
	 * building one fails for want of memory, the lookups scan. */
	tank_map_t at, seen;
	bool at_built, at_ok, seen_ok;
} cli_batch_t;

/* 0 or -ENOMEM.  names/waits must outlive b. */
int cli_batch_init(cli_batch_t *b, size_t n, const char *const *names,
		   const rc_wait_t *const *waits);
void cli_batch_free(cli_batch_t *b);

/* Objects of several kinds: kinds[i], and objs[i] the applied object
 * its kind's observation reads (either may be NULL: the default kind, no
 * object).  Borrowed; call after init. */
void cli_batch_kinds(cli_batch_t *b, const struct kind *const *kinds,
		     const void *const *objs);
/* owner[i]: the index of the object whose inline part object i is, or
 * -1.  A pending owner is blocked (truly stuck) while one of its parts
 * is stuck or failed: an owner whose part crash-loops waited for the
 * whole --timeout.  Borrowed; call after init. */
void cli_batch_owners(cli_batch_t *b, const long *owner);
/* One kind's part of a pass: `statuses` is that kind's list of status
 * maps (extra objects are ignored; an applied one missing from it is
 * pending).  What a pending object waits on (waits_on) is resolved here:
 * in the batch or in statuses, a dependency whose observation moved
 * (it became ready, or progresses) makes it moving; one failed or
 * missing, blocked. */
void cli_batch_see(cli_batch_t *b, const struct kind *k, const msgpack_object *statuses);
/* Ends a pass (every kind seen): the rc_conv verdict. */
rc_conv_verdict_t cli_batch_pass(cli_batch_t *b);
/* A pass of a batch of the default kind only: see, then pass. */
rc_conv_verdict_t cli_batch_observe(cli_batch_t *b, const msgpack_object *statuses);

/* True while object i is pending (neither converged nor failed). */
bool cli_batch_pending(const cli_batch_t *b, size_t i);

/* The longest wait among the pending pods for the next re-run
 * (run = the re-runs so far). */
uint64_t cli_batch_wait_ms(const cli_batch_t *b, uint64_t rnd);

#endif
