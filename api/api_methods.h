/*
 * api_methods — the daemon's RPC methods (DESIGN.md §6), wired onto the
 * transport of api_server.
 *
 * The methods hold no state: desired state and status are read from and
 * written to the store, and the few questions only the reconciler can
 * answer (running, restart, nudge, sync) go to the reconciler actor found
 * by its registered name, so a reconciler restarted by its supervisor is
 * picked up without rewiring.
 *
 * Everything runs on the runtime's thread.  apply and delete block for the
 * store's fsync (the durability contract: acknowledged means durable);
 * every other method answers from memory-mapped reads.
 */
#ifndef TANK_API_METHODS_H
#define TANK_API_METHODS_H

#include <stddef.h>

#include "api/api_server.h"
#include "kinds/kind.h"
#include "store/st.h"

#define API_RECONCILER_NAME "reconciler"

struct api_daemon_status;

typedef struct api_daemon {
	rt_t *rt;
	st_t *store;            /* borrowed */
	const char *log_dir;    /* borrowed */
	const char *version;    /* borrowed, e.g. "0.1.0" */
	/* The process layer every kind runs in (kind_env_t.pods), handed to
	 * the kinds' methods; borrowed, may be NULL (no pods run). */
	struct pod_mgr *pods;
	/* The kinds (kinds/kind.h) with their instances; borrowed.  NULL:
	 * api_methods_table fills own_kinds with the shipped list and no
	 * instances. */
	kind_env_t *kinds;
	kind_env_t own_kinds;
	/* The serving process, for `version` and `daemon.status`; NULL: the
	 * methods report this process's pid and nothing else. */
	void (*daemon_status)(void *ctx, struct api_daemon_status *out);
	/* `daemon.reexec`: re-executes the daemon in place, after the reply
	 * is out (0, or a negative errno: not possible now).  NULL: the
	 * method answers unsupported. */
	int (*reexec)(void *ctx);
	void *daemon_ctx;
	/* The applies waiting for their turn to check and commit, oldest
	 * first (api_methods.c "apply"): one at a time, the first's commit
	 * perhaps in flight on the store's thread.  Zero-initialised; owned
	 * by the methods. */
	struct apply_job *apply_head, *apply_tail;
} api_daemon_t;

/* What the daemon tells of itself (generic: nothing of a kind). */
typedef struct api_daemon_status {
	pid_t pid;               /* the process serving the socket */
	pid_t keeper_pid;        /* its keeper (docs/operations.md), 0: none */
	int64_t started_at;      /* ms since the epoch: the first start of this
				  * pid (a reexec keeps it) */
	uint32_t reexecs;        /* reexecs of this pid */
	uint64_t adopted;        /* processes adopted since started_at (a reexec's
				  * or a predecessor's, killed -9) */
	uint32_t lives;          /* tankd processes before this one that the
				  * keeper restarted (0 without a keeper) */
	/* What the keeper holds: processes whose pipes it keeps (tags) and
	 * exits it reaped that tankd has not acked yet; -1: unknown (no
	 * keeper, or it did not answer).  Asked of the keeper (a round trip)
	 * only when ask_keeper is set (in: daemon.status sets it, version
	 * does not). */
	bool ask_keeper;
	int64_t keeper_tags, keeper_exits;
} api_daemon_status_t;

/* Fills `table` (caller storage) with the methods, each bound to d, which
 * must outlive the server: the contract's, then each kind's verbs (a
 * method per verb); returns the number of entries. */
#define API_NMETHODS 96
size_t api_methods_table(api_daemon_t *d, api_method_t table[API_NMETHODS]);

/* Checks params of `method` the way its handler does before it acts
 * (shape, and for apply every object's validation), without acting:
 * 0, or an error in e.  For the fuzzer (tests/fuzz) and tests. */
int api_methods_decode(const char *method, const msgpack_object *params, tank_error_t *e);

/* Answers an error about the object `name` of kind `noun` (a kind's
 * name): TANK_ENOTFOUND as `<noun> "<name>" not found`, anything else
 * with e's message (e may be NULL). */
void api_reply_object_error(const api_call_t *call, int err, const char *noun,
			    const char *name, const tank_error_t *e);

/* Packs a stored object as `get` answers it: its canonical spec map with
 * `kind` first (when not NULL), `generation` and `uid` added, then the
 * nextra key/value pairs that extra (may be NULL) packs.  TANK_ECORRUPT
 * when the spec is not a map, -ENOMEM. */
int api_pack_record(msgpack_packer *pk, const st_pod_t *p, const char *kind,
		    size_t nextra, api_pack_fn extra, void *arg);

/* Packs transitions as `history` answers them: [{at, from, to, reason}]. */
int api_pack_history(msgpack_packer *pk, const st_transition_t *t, size_t n);

#endif
