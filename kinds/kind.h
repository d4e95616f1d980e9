/*
 * kind — what a kind of object is above the loop (DESIGN.md §7, "One door
 * above the loop"): one descriptor per kind, declared in the kind's own
 * folder (pod/pod_kind.c, stack/stack_kind.c), listed once in
 * kinds/kinds.h (TANK_KIND_LIST, one line per kind; kinds.c makes it the
 * array tank_kinds).  api/, daemon/ and cmd/ walk that list and name no
 * kind.
 *
 * A descriptor says:
 *   - its names: `name` (singular, the RPC's `kind` option and the word
 *     tankctl prints: "stack"), `plural` ("stacks") and `short_name`
 *     ("st"), as kubectl's api-resources; the manifest's `kind:` is
 *     mf->name ("Stack");
 *   - how a manifest object is validated (mf, the manifest/ registry
 *     entry) and encoded canonically (encode: the bytes stored);
 *   - where it is stored: coll, its st_coll declaration (NULL: the
 *     store's own pods collection, st_apply/st_pod_get/st_history);
 *   - what an object brings inline (a stack's pods: applied in the same
 *     transaction), and the checks of a whole batch (check: problems in
 *     errs; admit: a refusal that is not the input's fault);
 *   - how its status is packed (pack_status, and status_all for a kind
 *     with a faster path to every status);
 *   - what its deletion takes with it (cascade);
 *   - how `apply --wait` and its verbs' --wait observe an object (observe,
 *     from the status map);
 *   - its table for `tankctl get/ps` (cols) and any verbs of its own;
 *   - RPC methods of its own (methods: told the caller's credentials) and
 *     tankctl commands of its own (cmds: their own words, through
 *     tankctl's services, kind_cli_t);
 *   - in the daemon: its managers on the loop, its instance (open/close),
 *     and its record hook for the transitions of its managers;
 *   - metrics of its own for /metrics (a pod's probes' results), beside
 *     what every kind gets from its status maps (obs/obs_metrics.h).
 *
 * Every callback runs on the runtime's thread; those given an env may
 * read the store (memory-mapped) and the kinds' instances.  Only what the
 * api commits blocks (one fsync).
 */
#ifndef TANK_KIND_H
#define TANK_KIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "common/kit_errors.h"
#include "common/kit_hist.h"
#include "common/tank_err.h"
#include "manifest/mf.h"
#include "reconciler/rc_converge.h"
#include "reconciler/rc_loop.h"
#include "runtime/rt.h"
#include "store/st_coll.h"

#define KIND_MAX 16             /* kinds on one list */
#define KIND_MANAGERS_MAX 2     /* managers of one kind on the loop */
#define KIND_COLS_MAX 10

struct pod_mgr;
typedef struct kind kind_t;

/* What the kinds' callbacks may use; built by the daemon (the api gets a
 * pointer).  Borrowed everything. */
typedef struct kind_env {
	rt_t *rt;
	st_t *store;
	const char *log_dir;
	const char *loop_name;       /* the reconciler's registered name */
	/* Every kind runs its processes in pods: the pod manager, which the
	 * daemon owns (it drains it at stop).  May be NULL. */
	struct pod_mgr *pods;
	/* Live re-adoption (pod/pod_adopt.h): a kind whose processes
	 * (an action's step, a workflow's job) outlive a kill -9 of tankd
	 * learns how they ended with pod_adopt_watch (pid and start time,
	 * stored in its own status), and once it has committed what that
	 * exit means, says so with pod_adopt_ack (the keeper keeps the exit
	 * until then).  May be NULL. */
	struct pod_adopt *adopt;
	const kind_t *const *kinds;  /* the list, NULL-terminated */
	void *inst[KIND_MAX];        /* each kind's instance, by list position */
	/* Publishes an event on `tankctl events` (pack writes one map). */
	void (*publish)(void *ctx, int (*pack)(msgpack_packer *pk, const void *arg),
			const void *arg);
	void *publish_ctx;
} kind_env_t;

/* One object of an apply: given in the request (at = its index), or
 * brought inline by another (at = the bringer's index). */
typedef struct kind_item {
	const kind_t *kind;
	void *obj;                   /* validated; freed with the batch unless inline */
	const char *name;            /* borrowed from obj */
	size_t at;
	bool is_inline;
	/* Inline: the object that brought it (its kind, borrowed object)
	 * and its index among that object's inline ones (kind_t.inline_at);
	 * by NULL for an object given.  kind_item_where names it with them. */
	const kind_t *by;
	const void *by_obj;
	size_t by_i;
	char *buf;                   /* canonical encoding (owned), its labels
				      * included (kind_encode) */
	size_t len;
	msgpack_object labels;       /* checked `labels` (nil: none), borrowed
				      * from the request (manifest/mf_labels.h) */
} kind_item_t;

typedef struct kind_batch {
	kind_item_t *items;
	size_t n;
} kind_batch_t;

/* Names of objects, with their kinds (a deletion's cascade). */
typedef struct kind_names {
	const kind_t **kind;
	char **name;
	size_t n, cap;
} kind_names_t;

/* How an object is observed for a wait (reconciler/rc_converge.h's
 * generic rule): from its status map (a `status` answer), the object as
 * applied (obj, the manifest entry's; NULL when the wait has none: a
 * verb's), and what the wait is for (want NULL: `apply --wait`; else the
 * verb's name, `up`).  0, or -EINVAL when status is not a map. */
typedef int (*kind_observe_fn)(const void *obj, const msgpack_object *status,
			       const char *want, rc_observed_t *out);

/* One column of tankctl's table of a kind: a cell of the status map s
 * (now: ms since the epoch, for ages), written into out (cap bytes); or,
 * when cell is NULL, the status map's value under `key` as kind_cell
 * shows it ("-" when absent). */
typedef struct kind_col {
	const char *header;
	void (*cell)(const msgpack_object *s, uint64_t now_ms, char *out, size_t cap);
	const char *key;
} kind_col_t;

/* A verb of a kind's own: an RPC method `name` taking params of `types`
 * (api_params_check's letters; the first is a string, the object's name
 * or id), and a tankctl verb.  fn packs the result (one object) or
 * returns an error with e's message.  By its flags:
 *   0                  `<words> NAME [--wait [--timeout D]]` (Stack's
 *                      up/down): prints "KIND NAME ACTION" (the result's
 *                      `action`), --wait waits for the object as
 *                      `apply --wait` does;
 *   KIND_VERB_DOC      `<words> NAME [-o yaml|json]`: prints the result,
 *                      as the table `cols` when it is an array of maps
 *                      and no -o is given, else as a YAML (default) or
 *                      JSON document;
 *   KIND_VERB_FOLLOW   `<words> NAME [-f]`: the result is a map {text,
 *                      next, done}: text is printed as it is; with -f the
 *                      method is called again with params [NAME,
 *                      {offset: next}] until done (a log that grows).
 * `words` is the verb on tankctl's command line: one word, or two
 * ("workflow status"): verbs of the same first word are one tankctl verb
 * whose second word picks among them.  NULL: the method's name. */
#define KIND_VERB_DOC    1u
#define KIND_VERB_FOLLOW 2u
/* With KIND_VERB_DOC: NAME may be left out (`top`: every object); the
 * params are then [] (types "?s"). */
#define KIND_VERB_ANY    4u
/* `<words> [KIND] NAME | KIND/NAME [--wait [--timeout D]]` (stop, start):
 * a verb several kinds may have under one name.  Its RPC method is one
 * (`stop`), its params [NAME, {kind?}] (types "s?m"): the api calls the
 * verb of the kind named (none: the first kind of the list that has the
 * verb) and answers a kind without it with an error naming the kind and
 * those that have it.  Otherwise as flags 0.  Each kind's verb of that
 * name must have this flag.  tankctl also takes `<words> [KIND] -l
 * SELECTOR` and several names (`[KIND] NAME…`, `KIND/NAME…`): the verb
 * once for each object of KIND whose labels match, or each named. */
#define KIND_VERB_KINDED 8u

/* Packs a result (one msgpack object) into pk; 0 or a negative errno. */
typedef int (*kind_pack_fn)(msgpack_packer *pk, void *arg);

/* How a verb that answers later (kind_verb_t.later) answers: the call's
 * connection and request, copied by value into whatever actor answers.
 * answer packs the result with pack(pk, arg); fail answers with the error
 * of err (a TANK_E* or negative errno) and message (NULL: the error's
 * text).  One of them, once, from any actor; -ESRCH when the client is
 * gone (nothing to do then). */
typedef struct kind_reply {
	rt_pid_t conn;
	uint32_t msgid;
	int (*answer)(rt_t *rt, const struct kind_reply *r, kind_pack_fn pack, void *arg);
	int (*fail)(rt_t *rt, const struct kind_reply *r, int err, const char *message);
} kind_reply_t;

typedef struct kind_verb {
	const char *name;
	const char *types;
	int (*fn)(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		  tank_error_t *e);
	const char *usage, *help;    /* tankctl's help (usage after the words) */
	const char *words;
	unsigned flags;
	const kind_col_t *cols;      /* KIND_VERB_DOC: an array result's table */
	size_t ncols;
	/* The kind whose object NAME names, when it is not the verb's own
	 * (`jobs POD`: "pod"); NULL: the verb's kind.  tankctl's hint after
	 * a failed verb ("x is a stack; … acts on pods") asks of this kind. */
	const char *of;
	/* A verb whose answer takes many turns of the loop (`top` of every
	 * pod: a read of two files a container): when set, the api calls it
	 * instead of fn.  It returns 1 to have fn answer now after all (`top
	 * POD`), 0 when it took the request (answered through r, copied,
	 * exactly once), or an error, answered now.  NULL: fn answers. */
	int (*later)(const kind_env_t *env, const msgpack_object *params, const kind_reply_t *r,
		     tank_error_t *e);
} kind_verb_t;

/* Who called a kind's method: the socket peer's credentials (SO_PEERCRED,
 * taken at accept) and the uid's user name (the number when it has none).
 * The api fills it for every call; a kind records it (an action's
 * requester) and decides with it (four-eyes approval). */
typedef struct kind_caller {
	uint32_t uid, gid;
	int32_t pid;
	char user[64];
} kind_caller_t;

/* An RPC method of a kind's own, richer than a verb (Action's
 * action_submit, action_list {pod?, state?}): params of `types`
 * (api_params_check's letters), fn told who calls.  after_loop: the
 * answer waits until the loop has handled every message fn sent it
 * (RC_TAG_ECHO), so what the client is told was taken is stored. */
/* Where a method's answer may be followed by notifications
 * ([2, event, params]; `logs` with follow): the call's connection, copied
 * by value into the actor that sends them.  conn is the connection's
 * actor: rt_monitor it, RT_MSG_DOWN says the client went.  notify packs
 * the params with pack(pk, arg); -ESRCH once the connection is gone. */
typedef struct kind_stream {
	rt_pid_t conn;
	uint32_t msgid;
	int (*notify)(rt_t *rt, const struct kind_stream *s, const char *event,
		      kind_pack_fn pack, void *arg);
} kind_stream_t;

typedef struct kind_method {
	const char *name;
	const char *types;
	int (*fn)(const kind_env_t *env, const kind_caller_t *who,
		  const msgpack_object *params, msgpack_packer *pk, tank_error_t *e);
	bool after_loop;
	/* Checks of params beyond their types (an option map's values), run
	 * before fn and by api_methods_decode: TANK_EINVALID or -EPROTO with
	 * the message the client gets (bad_request).  NULL: none. */
	int (*check)(const msgpack_object *params, tank_error_t *e);
	/* Once fn's answer is queued: may start what notifies on s (copy
	 * it); not with after_loop (a notification could overtake the
	 * answer waiting on the loop).  NULL: none.  A failure is not reported: the client's stream ends
	 * (it sees the end it asked for, or the connection's). */
	void (*follow)(const kind_env_t *env, const kind_stream_t *s,
		       const msgpack_object *params);
	/* In a cluster (docs/cluster.md "Verbs on a cluster"): the pod whose
	 * node serves this call, from its params, into pod (cap bytes):
	 * true.  false (or NULL): the params name no pod (an object's id),
	 * and the call is asked of every live node in turn, the first
	 * answer other than not_found being the answer. */
	bool (*route)(const msgpack_object *params, char *pod, size_t cap);
} kind_method_t;

/* tankctl's services to a kind's own command (below): given by tankctl,
 * so a kind's command code (in the kind's folder) needs no client. */
typedef struct kind_cli kind_cli_t;
typedef int (*kind_got_fn)(void *arg, const msgpack_object *result);
struct kind_cli {
	void *ctx;                   /* tankctl's */
	const char *verb;            /* the command's word */
	/* Calls method (params packed by pack(arg), one array); got(garg,
	 * result) sees the result while it is valid (may be NULL).  0, or
	 * tankctl's exit code with the error printed (tankd's or got's: a
	 * negative return of got is printed as tank_strerror). */
	int (*call)(const kind_cli_t *cli, const char *method, kind_pack_fn pack, void *arg,
		    int timeout_ms, kind_got_fn got, void *garg);
	/* Prints o as `format` ("yaml" or "json"; times as RFC 3339): 0 or 1. */
	int (*emit)(const kind_cli_t *cli, const msgpack_object *o, const char *format);
	/* "tankctl: VERB: …" on stderr; returns 1 (fail) or 2 (usage). */
	int (*fail)(const kind_cli_t *cli, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));
	int (*usage)(const kind_cli_t *cli, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));
	/* After getopt_long returned o, no option of the command (':' for a
	 * missing value, '?' for an unknown one): prints tankctl's usage
	 * error naming the option, as tankctl's own verbs do.  Returns 2. */
	int (*bad_option)(const kind_cli_t *cli, int o, char **argv);
	/* Runs one of tankctl's own verbs with argv (argv[0] the verb):
	 * `playbook apply -f F` is `apply -f F`.  Its exit code. */
	int (*verb_run)(const kind_cli_t *cli, int argc, char **argv);
	/* The names of k's objects whose labels match selector (`-l`'s
	 * syntax, docs/cli.md), sorted, in a NULL-terminated array; it and
	 * each name are malloc'd, the caller's (free each, then it).  0, or
	 * the exit code with the error printed (a malformed selector: 2). */
	int (*selected)(const kind_cli_t *cli, const kind_t *k, const char *selector,
			char ***names);
	/* After a call whose answer a method follows with notifications
	 * (kind_method_t.follow): reads them, calling note(arg, event,
	 * params) for each, until note returns 1 (the end), the connection
	 * closes (0), or tankd says why it closes it (printed; 1).  A
	 * negative note return is printed as tank_strerror (1). */
	int (*follow)(const kind_cli_t *cli,
		      int (*note)(void *arg, const char *event, const msgpack_object *params),
		      void *arg);
};

/* A tankctl command of a kind's own, with its own words (`action run POD
 * KIND ARG…`, `exec POD -- CMD…`): run gets the words after tankctl's
 * global options (argv[0] = name) and returns the exit code. */
typedef struct kind_cmd {
	const char *name;
	int (*run)(const kind_cli_t *cli, int argc, char **argv);
	const char *usage, *help;
} kind_cmd_t;

/* Where a kind writes metrics of its own (kind_t.metrics): the
 * Prometheus text format's families, written by obs/ (obs_prom.h).
 * family() once per family, before its samples; type "counter", "gauge"
 * or "histogram"; labels NULL-terminated name, value pairs (NULL: none).
 * Names and label names are the kind's constants, tank_-prefixed. */
typedef struct kind_metrics {
	void *ctx;
	void (*family)(void *ctx, const char *name, const char *type, const char *help);
	void (*sample)(void *ctx, const char *name, const char *const *labels, double v);
	void (*hist)(void *ctx, const char *name, const char *const *labels,
		     const kit_hist_t *h);
} kind_metrics_t;

#define KIND_PLACE_UNIT  0u
#define KIND_PLACE_EVERY 1u
#define KIND_PLACE_NONE  2u

struct kind {
	uint32_t id;                 /* tank_kinds.h */
	const char *name, *plural, *short_name;
	const mf_kind_t *mf;
	const st_coll_decl_t *coll;
	int (*encode)(const void *obj, char **buf, size_t *len);
	const char *(*name_of)(const void *obj);     /* borrowed from obj */

	/* Inline objects of obj: how many, and the i-th (its kind in *k).
	 * NULL: none. */
	size_t (*ninline)(const void *obj);
	void *(*inline_at)(const void *obj, size_t i, const kind_t **k);
	/* Where the i-th inline object sits in obj, as a field path
	 * ("pods[2]": its index in the list it came in, which counts the
	 * named entries too), for messages (kind_item_where).  NULL: the
	 * inline kind's plural and i. */
	void (*inline_where)(const void *obj, size_t i, char *buf, size_t cap);
	/* The whole batch against itself and the store: problems appended to
	 * errs, each after its item's kind_item_where (`stacks[<at>]: …`).
	 * A failure that is not the input's: negative, in e.  May be NULL.
	 * Runs in the commit's turn (no other apply comes between): keep
	 * per-object work out of it. */
	int (*check)(const kind_env_t *env, const kind_batch_t *b, kit_errors_t *errs,
		     tank_error_t *e);
	/* One object against the host (a command that must exist, a user),
	 * nothing of the batch or the store: problems appended to errs as
	 * check's.  Run as each object is validated, objects brought inline
	 * by another kind's included (it->at: the given object's index), so
	 * in the slices a big apply is validated in, not in the commit's
	 * turn (a stat an object was 24 ms of one turn at 9,744 pods).  May
	 * be NULL. */
	void (*check_item)(const kind_env_t *env, const kind_item_t *it, kit_errors_t *errs);
	/* After every check passed: a refusal (TANK_ELIMIT …) in e.  May be NULL. */
	int (*admit)(const kind_env_t *env, const kind_batch_t *b, tank_error_t *e);

	/* `get` adds `kind: <mf->name>` and `status` to the stored spec. */
	bool get_with_status;
	/* Its objects are records its manager writes, with no spec of their
	 * own (a workflow's jobs): `get` and `list` answer their status maps
	 * (status_one / status_all), as `status` does. */
	bool status_is_object;
	/* The status map of a stored object (pending when not reconciled).
	 * flags: KIND_STATUS_META (below) or 0. */
	int (*pack_status)(const kind_env_t *env, const st_pod_t *rec, msgpack_packer *pk,
			   unsigned flags);
	/* The status map of name, by a path of the kind's own (NULL:
	 * pack_status of the stored object).  TANK_ENOTFOUND when none. */
	int (*status_one)(const kind_env_t *env, const char *name, msgpack_packer *pk,
			  unsigned flags, tank_error_t *e);
	/* Every status map, as an array; NULL: each stored object's. */
	int (*status_all)(const kind_env_t *env, msgpack_packer *pk, unsigned flags,
			  tank_error_t *e);
	/* What deleting rec takes with it (kind_names_add).  May be NULL. */
	int (*cascade)(const kind_env_t *env, const st_pod_t *rec, kind_names_t *out);

	kind_observe_fn observe;     /* NULL: done once stored */
	/* How long `apply --wait` waits between passes for obj (a validated
	 * object of this kind; borrowed from it).  NULL, or NULL returned:
	 * RC_WAIT_DEFAULT_MS. */
	const rc_wait_t *(*reconcile_wait)(const void *obj);
	/* The objects this one is the parent of, named in a child's status
	 * map under this kind's name (`ps` groups them): NULL when none. */
	const kind_t *children;
	/* The object of this kind a child (named) is in, or NULL. */
	const char *(*owner_of)(void *inst, const char *child);
	kind_col_t cols[KIND_COLS_MAX];
	size_t ncols;
	const kind_verb_t *verbs;
	size_t nverbs;
	/* A column this kind adds to another kind's table (adds_to: `ps`
	 * shows a pod's workflow position): each status map of that kind
	 * gets a key named as this kind (`name`) whose value is adds_value's
	 * text (nil when it returns false), and its table shows the column
	 * adds_header when some row has such a value.  NULL: none. */
	const kind_t *adds_to;
	const char *adds_header;
	bool (*adds_value)(const kind_env_t *env, const char *name, char *out, size_t cap);
	/* RPC methods and tankctl commands of its own (above); api/ and
	 * cmd/ walk them by name.  NULL/0: none. */
	const kind_method_t *methods;
	size_t nmethods;
	const kind_cmd_t *cmds;
	size_t ncmds;

	/* In a cluster (docs/cluster.md "Every kind on a cluster"): how an
	 * object of this kind applied with `tankctl --cluster` is placed.
	 * KIND_PLACE_UNIT (0, the default): on one node, as a unit with what
	 * it brings inline (a stack's pods go with their stack: its order
	 * and probes are local).  KIND_PLACE_EVERY: a definition others
	 * refer to by name (a workflow, its stages and tasks, a playbook):
	 * on every node, never scheduled.  KIND_PLACE_NONE: not applied to
	 * a cluster (records its manager writes, objects that are
	 * submitted).  cluster/ reads only this, never a kind's name. */
	unsigned cluster_place;
	/* Metrics of its own, written at each scrape on the runtime's thread
	 * (read, never change, what it reads; copy counters as rc_loop_stats
	 * does).  NULL: none. */
	void (*metrics)(const kind_env_t *env, const kind_metrics_t *w);

	/* Daemon: the instance (inst; NULL open: none), after the pods' and
	 * the kinds' before it in the list. */
	int (*open)(kind_env_t *env, void **inst, tank_error_t *e);
	void (*close)(void *inst);
	const rc_manager_t *managers[KIND_MANAGERS_MAX];
	/* The loop's record hook for the transitions of its managers. */
	void (*record)(void *inst, const rc_transition_t *t);
	/* The same for every other kind's managers' transitions (a kind
	 * waiting for another kind's objects to move: a workflow's agent
	 * waiting for its pod's containers).  May be NULL. */
	void (*record_other)(void *inst, const rc_transition_t *t);
};

/* ---- what `status` adds to every kind's map -------------------------------- */

/* The flag `status` (the RPC) gives the status packers above: each map
 * of a stored object ends with that object's `created_at` (ms; the store
 * keeps it for every kind: set when created, kept across a re-apply of a
 * changed spec, new when deleted and applied again), so that `ps` shows
 * its age, and its `labels` (the stored spec's, manifest/mf_labels.h),
 * so that tankctl's `-l` filters any kind's statuses.  A kind adds them
 * with kind_meta_of and kind_meta_pack (kind_meta_pack_raw for a map it
 * stored packed), counted in its map's header: each map is packed once,
 * with its final size.  A map that has a `created_at` or `labels` of its
 * own keeps it (an action's, a job's: records with no stored spec, never
 * labelled, add nothing).  Without the flag (get's nested status,
 * /metrics, the dashboard) the map is the kind's alone, as it was when
 * api/ added the keys by unpacking and packing every answer again (75 to
 * 150 ms of the loop for `status` of 9,700 pods; docs/bench.md, "Issue
 * 38, round 13"). */
#define KIND_STATUS_META 1u

typedef struct kind_meta {
	int64_t created_at;          /* > 0: added as `created_at` */
	const void *labels;          /* the labels map, packed; NULL: none */
	size_t labels_len;
} kind_meta_t;

/* *m for rec (NULL: nothing to add), when flags has KIND_STATUS_META
 * (else nothing); labels borrowed from rec->spec, so m lives no longer
 * than rec.  Returns kind_meta_n(m). */
size_t kind_meta_of(const st_pod_t *rec, unsigned flags, kind_meta_t *m);
/* How many keys kind_meta_pack adds (0, 1 or 2; m NULL: 0): a map's
 * header counts them. */
size_t kind_meta_n(const kind_meta_t *m);
/* Packs m's keys (m NULL: none): `created_at`, then `labels`, the order
 * `status` has always had them in, last in the map.  0 or -ENOMEM. */
int kind_meta_pack(msgpack_packer *pk, const kind_meta_t *m);
/* The packed object buf[0..len) (a status a kind stored in its answer's
 * shape) with m's keys added when it is a map, each only when the map
 * has no such key of its own; anything else as it is.  0 or -ENOMEM. */
int kind_meta_pack_raw(msgpack_packer *pk, const void *buf, size_t len, const kind_meta_t *m);

/* ---- the list ------------------------------------------------------------ */

/* The kinds tank ships (kinds/kinds.h's list, made an array by kinds.c;
 * a test build links its own), NULL-terminated; the first is the default
 * of a request that names none (Pod). */
extern const kind_t *const tank_kinds[];

/* The kind called `word` (name, plural, short name or manifest kind, any
 * case; len bytes), or NULL. */
const kind_t *kind_find(const kind_t *const *kinds, const char *word, size_t len);

/* The object name in `word` for a verb of kind k: word itself when it
 * has no '/' (an applied object's name never has one), the part after
 * the '/' of kubectl's KIND/NAME when KIND is one of k's words
 * (kind_find's), else NULL (it names another kind, or nothing after the
 * '/').  A kind whose objects are records named with a path
 * (status_is_object: a job is POD/N) takes word as its id unless a KIND/
 * of its own comes before such a path (`job/web/2`).  Borrowed: points
 * into word. */
const char *kind_ref_name(const kind_t *k, const char *word);

/* Where an apply's messages about item it point, in the user's terms
 * (the apply RPC's error paths, docs/rpc.md): an object given is
 * "<plural>[<at>]: " ("stacks[1]: "; its kind's messages go on with its
 * name), one brought inline is its bringer's place, name and field
 * ("stacks[1]: shop: pods[2]: ").  Truncated to cap (KIND_WHERE_MAX
 * holds any); never fails. */
#define KIND_WHERE_MAX 192
void kind_item_where(const kind_item_t *it, char *buf, size_t cap);
/* The kind with id, or NULL. */
const kind_t *kind_by_id(const kind_t *const *kinds, uint32_t id);
/* The kind whose manager is called `manager` (a transition's kind). */
const kind_t *kind_of_manager(const kind_t *const *kinds, const char *manager);
/* Position of k in the list (for env->inst), or -1. */
int kind_index(const kind_t *const *kinds, const kind_t *k);
void *kind_inst(const kind_env_t *env, const kind_t *k);
/* A manifest registry of every kind of the list. */
void kind_registry(const kind_t *const *kinds, mf_registry_t *r);
/* "pod", "stack" …: the names, quoted and comma-separated, into buf. */
const char *kind_names_list(const kind_t *const *kinds, char *buf, size_t cap);

/* The canonical bytes of obj (k->encode) with the object's labels (nil:
 * none) added as every kind's stored metadata (mf_labels_append). */
int kind_encode(const kind_t *k, const void *obj, const msgpack_object *labels, char **buf,
		size_t *len);

/* ---- the store, for any kind ---------------------------------------------- */

/* The kind's collection (NULL for the store's pods); 0 or the store's error. */
int kind_coll(const kind_env_t *env, const kind_t *k, st_coll_t **c, tank_error_t *e);
int kind_get(const kind_env_t *env, const kind_t *k, const char *name, st_pod_t *out,
	     tank_error_t *e);
int kind_scan(const kind_env_t *env, const kind_t *k, st_pod_fn fn, void *ctx,
	      tank_error_t *e);
/* The same from the first name after `after` (NULL or "": from the
 * start), for walks in slices (st_pod_foreach_from). */
int kind_scan_from(const kind_env_t *env, const kind_t *k, const char *after, st_pod_fn fn,
		   void *ctx, tank_error_t *e);
int kind_history(const kind_env_t *env, const kind_t *k, const char *name, size_t limit,
		 st_transition_t **out, size_t *n, tank_error_t *e);

int kind_names_add(kind_names_t *l, const kind_t *k, const char *name);
void kind_names_free(kind_names_t *l);

/* ---- msgpack helpers the kinds' callbacks share -------------------------- */

const msgpack_object *kind_map_get(const msgpack_object *map, const char *key);
/* An options map params[at] has only the keys of known (NULL-ended):
 * 0, or -EPROTO (bad_request) naming the first other key and the
 * options, `params[1]: unknown option "folow" (the options are
 * container, tail, since, until, follow)`.  A typo is refused, not ignored: a
 * `folow: true` would answer at once as if nothing was asked.  opts
 * not a map: 0 (the method's own check says). */
int kind_opts_check(const msgpack_object *opts, size_t at, const char *const *known,
		    tank_error_t *e);
/* Copies a string value into buf (cap bytes, NUL-terminated): true, or
 * false (buf "") when o is not a string. */
bool kind_str(const msgpack_object *o, char *buf, size_t cap);
bool kind_int(const msgpack_object *o, int64_t *v);
int kind_pack_str(msgpack_packer *pk, const char *s);
/* A kind_pack_fn writing what an msgpack_sbuffer (arg) holds as it is:
 * an object packed once, then answered many times or later. */
int kind_pack_sbuffer(msgpack_packer *pk, void *sbuffer);
/* A table cell: the value under key in status map s — a string as is
 * (when not empty), an integer in decimal, else dflt — into out. */
void kind_cell(const msgpack_object *s, const char *key, char *out, size_t cap,
	       const char *dflt);
/* The columns every kind's table has, as kind_col_t cells: the status
 * map's name and phase ("-" when absent), and the object's age: of its
 * `created_at` (every status answer has it), else of its `since`. */
void kind_col_name(const msgpack_object *s, uint64_t now_ms, char *out, size_t cap);
void kind_col_phase(const msgpack_object *s, uint64_t now_ms, char *out, size_t cap);
void kind_col_age(const msgpack_object *s, uint64_t now_ms, char *out, size_t cap);
/* The columns of k's table for the status maps `statuses` (an array):
 * its own, then those other kinds add to it (adds_to) when some row has
 * a value for them.  The number written to out (at most KIND_COLS_MAX). */
size_t kind_table_cols(const kind_t *const *kinds, const kind_t *k,
		       const msgpack_object *statuses, kind_col_t *out);
/* One cell of a column (its cell function, or its key). */
void kind_col_cell(const kind_col_t *c, const msgpack_object *s, uint64_t now_ms, char *out,
		   size_t cap);
/* The first word of a verb's tankctl words (its name when none), into buf. */
const char *kind_verb_word(const kind_verb_t *v, char *buf, size_t cap);
/* The second word ("" when it has one word). */
const char *kind_verb_subword(const kind_verb_t *v);

/* kind_method_t.route for a method whose first param is the pod's name
 * (`logs NAME`), and for one whose first param is a map with a `pod`
 * (`action_submit {pod, kind}`; a map without one routes nowhere). */
bool kind_route_first(const msgpack_object *params, char *pod, size_t cap);
bool kind_route_pod_key(const msgpack_object *params, char *pod, size_t cap);

/* A short age ("5s", "3m", "2h", "4d") of since_ms at now_ms. */
void kind_age(int64_t since_ms, uint64_t now_ms, char *out, size_t cap);

#endif
