/*
 * api_methods.c — one handler per method of the contract.
 *
 * Handlers answer synchronously except `sync`, which waits for a full
 * reconciler pass: a tiny waiter actor asks the reconciler and replies on
 * the call's token when the pass is done (or with an error if the
 * reconciler dies first).  The connection may be gone by then; the token
 * makes that reply a harmless no-op.
 */
#include "api/api_methods.h"

#include <errno.h>
#include <malloc.h>
#include <pwd.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kit_errors.h"
#include "reconciler/rc_loop.h"
#include "manifest/mf.h"
#include "manifest/mf_labels.h"
#include "kinds/kind.h"

static int pk_key(msgpack_packer *pk, const char *k)
{
	return api_pack_cstr(pk, k);
}

static void reply_check_error(const api_call_t *call, const tank_error_t *e)
{
	api_reply_error(call->rt, call->token, API_BAD_REQUEST, e->msg, NULL, NULL);
}

/* Answers a failed lookup of pod `name`: not_found names the pod; any
 * other error carries the store's message. */
void api_reply_object_error(const api_call_t *call, int err, const char *noun,
			    const char *name, const tank_error_t *e)
{
	char msg[ST_NAME_MAX + 32];

	if (err == TANK_ENOTFOUND) {
		snprintf(msg, sizeof msg, "%s \"%s\" not found", noun, name);
		api_reply_err(call->rt, call->token, err, msg);
	} else {
		api_reply_err(call->rt, call->token, err, e && e->msg[0] ? e->msg : NULL);
	}
}

static void nudge(api_daemon_t *d)
{
	rt_pid_t pid = rt_whereis(d->rt, API_RECONCILER_NAME);
	if (pid)
		rc_nudge(d->rt, pid);
}

/* --- ping, version --------------------------------------------------------- */

static int pack_pong(msgpack_packer *pk, void *arg)
{
	(void)arg;
	return api_pack_cstr(pk, "pong");
}

static void m_ping(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	tank_error_t e;
	(void)ctx;
	if (api_params_check(params, "", &e) < 0)
		return reply_check_error(call, &e);
	api_reply(call->rt, call->token, pack_pong, NULL);
}

static void daemon_status(api_daemon_t *d, api_daemon_status_t *ds, bool ask_keeper)
{
	memset(ds, 0, sizeof *ds);
	ds->pid = getpid();
	ds->ask_keeper = ask_keeper;
	if (d->daemon_status)
		d->daemon_status(d->daemon_ctx, ds);
}

static int pack_version(msgpack_packer *pk, void *arg)
{
	api_daemon_t *d = arg;
	api_daemon_status_t ds;
	st_usage_t u;
	bool has_u = d->store && st_usage(d->store, &u) == 0;
	int rc = msgpack_pack_map(pk, 5 + has_u);

	daemon_status(d, &ds, false);
	rc |= pk_key(pk, "version");
	rc |= api_pack_cstr(pk, d->version);
	/* Which process serves: operators and tests tell a reexec (same
	 * pid) from a restart (a new one) by it. */
	rc |= pk_key(pk, "pid");
	rc |= msgpack_pack_int64(pk, ds.pid);
	rc |= pk_key(pk, "keeper_pid");
	rc |= msgpack_pack_int64(pk, ds.keeper_pid);
	rc |= pk_key(pk, "schema");
	rc |= msgpack_pack_uint32(pk, ST_SCHEMA_VERSION);
	rc |= pk_key(pk, "protocol");
	rc |= api_pack_cstr(pk, "msgpack-rpc");
	if (has_u) {
		/* How full the store is, and whether its writes fail. */
		kit_hist_t dur, fl;
		st_commit_stats(d->store, &dur, &fl);
		rc |= pk_key(pk, "store");
		rc |= msgpack_pack_map(pk, 13);
		rc |= pk_key(pk, "used");            rc |= msgpack_pack_uint64(pk, u.used);
		rc |= pk_key(pk, "total");           rc |= msgpack_pack_uint64(pk, u.total);
		rc |= pk_key(pk, "file");            rc |= msgpack_pack_uint64(pk, u.high_water);
		rc |= pk_key(pk, "reserve");         rc |= msgpack_pack_uint64(pk, u.reserve);
		rc |= pk_key(pk, "flush_failures");  rc |= msgpack_pack_uint64(pk, u.flush_failures);
		rc |= pk_key(pk, "history_dropped"); rc |= msgpack_pack_uint64(pk, u.history_dropped);
		rc |= pk_key(pk, "history_trimmed"); rc |= msgpack_pack_uint64(pk, u.history_trimmed);
		/* The durable commits (applies, deletes) so far and their
		 * time, begin to commit; and how often and how long a write
		 * on the loop waited for an apply's commit on the store's
		 * thread (docs/store.md "Threads"). */
		rc |= pk_key(pk, "durable_commits");   rc |= msgpack_pack_uint64(pk, dur.count);
		rc |= pk_key(pk, "durable_commit_ms");
		rc |= msgpack_pack_double(pk, (double)dur.sum_ns / 1e6);
		rc |= pk_key(pk, "commit_waits");      rc |= msgpack_pack_uint64(pk, u.commit_waits);
		rc |= pk_key(pk, "commit_wait_ms");
		rc |= msgpack_pack_double(pk, (double)u.commit_wait_ns / 1e6);
		/* What the quiet store gave back (docs/store.md "The map's
		 * pages"): map trims, environment reopens. */
		rc |= pk_key(pk, "map_trims");         rc |= msgpack_pack_uint64(pk, u.map_trims);
		rc |= pk_key(pk, "env_reopens");       rc |= msgpack_pack_uint64(pk, u.env_reopens);
	}
	return rc ? -ENOMEM : 0;
}

static void m_version(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	tank_error_t e;
	if (api_params_check(params, "", &e) < 0)
		return reply_check_error(call, &e);
	api_reply(call->rt, call->token, pack_version, ctx);
}

/* --- daemon.status, daemon.reexec ---------------------------------------------------- */

static int pack_daemon_status(msgpack_packer *pk, void *arg)
{
	api_daemon_t *d = arg;
	api_daemon_status_t ds;
	struct timespec now;
	int64_t now_ms;
	int rc;

	daemon_status(d, &ds, true);
	clock_gettime(CLOCK_REALTIME, &now);
	now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	bool kept = ds.keeper_pid && ds.keeper_tags >= 0;
	rc = msgpack_pack_map(pk, 8 + (kept ? 2 : 0));
	rc |= pk_key(pk, "version");     rc |= api_pack_cstr(pk, d->version);
	rc |= pk_key(pk, "pid");         rc |= msgpack_pack_int64(pk, ds.pid);
	rc |= pk_key(pk, "keeper_pid");  rc |= msgpack_pack_int64(pk, ds.keeper_pid);
	rc |= pk_key(pk, "started_at");  rc |= msgpack_pack_int64(pk, ds.started_at);
	rc |= pk_key(pk, "uptime_ms");
	rc |= msgpack_pack_int64(pk, ds.started_at && now_ms > ds.started_at
				      ? now_ms - ds.started_at : 0);
	rc |= pk_key(pk, "reexecs");     rc |= msgpack_pack_uint32(pk, ds.reexecs);
	rc |= pk_key(pk, "restarts");    rc |= msgpack_pack_uint32(pk, ds.lives);
	rc |= pk_key(pk, "adopted");     rc |= msgpack_pack_uint64(pk, ds.adopted);
	if (kept) {
		rc |= pk_key(pk, "keeper_held");
		rc |= msgpack_pack_uint64(pk, (uint64_t)ds.keeper_tags);
		rc |= pk_key(pk, "keeper_exits");
		rc |= msgpack_pack_uint64(pk, (uint64_t)ds.keeper_exits);
	}
	return rc ? -ENOMEM : 0;
}

static void m_daemon_status(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	tank_error_t e;
	if (api_params_check(params, "", &e) < 0)
		return reply_check_error(call, &e);
	api_reply(call->rt, call->token, pack_daemon_status, ctx);
}

static int pack_ok(msgpack_packer *pk, void *arg)
{
	(void)arg;
	return api_pack_cstr(pk, "ok");
}

static void m_daemon_reexec(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	tank_error_t e;
	int err;

	if (api_params_check(params, "", &e) < 0)
		return reply_check_error(call, &e);
	if (!d->reexec) {
		tank_error_set(&e, TANK_EUNSUPPORTED, "this daemon cannot reexec");
		return reply_check_error(call, &e);
	}
	/* The reply first: the exec comes after it is out (the hook defers
	 * it), and closes this connection. */
	if ((err = d->reexec(d->daemon_ctx)) < 0) {
		tank_error_set(&e, err, "cannot reexec now: %s", tank_strerror(err));
		return reply_check_error(call, &e);
	}
	api_reply(call->rt, call->token, pack_ok, NULL);
}

/* --- kinds ------------------------------------------------------------------------ */

static const kind_t *const *kinds_of(const api_daemon_t *d)
{
	return d && d->kinds && d->kinds->kinds ? d->kinds->kinds : tank_kinds;
}

/* The kind named by the options map at params[at] (`kind`: a kind's name,
 * plural or short name; absent, nil, or no map: the first of the list).
 * -EPROTO with a message naming the value otherwise. */
static int kind_of_params(const kind_t *const *kinds, const msgpack_object *params, size_t at,
			  const kind_t **kind, tank_error_t *e)
{
	const msgpack_object *o;
	char buf[32], names[256];

	*kind = kinds[0];
	if (params->via.array.size <= at || params->via.array.ptr[at].type != MSGPACK_OBJECT_MAP)
		return 0;
	o = api_map_get(&params->via.array.ptr[at], "kind");
	if (!o || o->type == MSGPACK_OBJECT_NIL)
		return 0;
	kind_names_list(kinds, names, sizeof names);
	if (!api_obj_strcpy(o, buf, sizeof buf))
		return tank_error_set(e, -EPROTO, "params[%zu].kind: expected one of %s", at, names);
	if (!(*kind = kind_find(kinds, buf, strlen(buf))))
		return tank_error_set(e, -EPROTO, "params[%zu].kind: unknown kind \"%s\": "
				      "expected one of %s", at, buf, names);
	return 0;
}

/* The kind asked for by the options map at params[at]; false when the
 * call was answered (a bad kind). */
static bool kind_param(const api_call_t *call, api_daemon_t *d, const msgpack_object *params,
		       size_t at, const kind_t **kind)
{
	tank_error_t e;
	tank_error_clear(&e);
	if (kind_of_params(kinds_of(d), params, at, kind, &e) < 0) {
		api_reply_error(call->rt, call->token, API_BAD_REQUEST, e.msg, NULL, NULL);
		return false;
	}
	return true;
}

/* Answers a packed result: fn packs into a buffer first, so an error
 * found while packing is answered as an error, not as half a result. */
typedef int (*pack_into_fn)(void *arg, msgpack_packer *pk, tank_error_t *e);

/* Answers a request that sent the loop a message (a verb's, a restart):
 * once the loop has handled it, so that what the client was told was
 * taken is stored (rc_loop.h, RC_TAG_ECHO).  result: packed, len 0 nil. */
static void reply_after_loop(const api_call_t *call, api_daemon_t *d, const void *result,
			     size_t len)
{
	rt_pid_t loop = rt_whereis(d->rt, API_RECONCILER_NAME);

	if (!loop || api_reply_after(call->rt, call->token, loop, RC_TAG_ECHO, result, len) < 0)
		api_reply_raw(call->rt, call->token, result, len);
}

/* fn's result as the answer — once the loop has handled what fn sent it
 * when after_loop is given (reply_after_loop), else at once; an error at
 * once, naming the object when name is given. */
/* 0 when the answer is fn's result, -1 when it is an error. */
static int reply_packed_to(const api_call_t *call, const kind_t *k, const char *name,
			   pack_into_fn fn, void *arg, api_daemon_t *after_loop)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	tank_error_t e;
	int err;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	tank_error_clear(&e);
	if ((err = fn(arg, &pk, &e)) < 0 && name && name[0])
		api_reply_object_error(call, err, k ? k->name : "object", name, &e);
	else if (err < 0)
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
	else if (after_loop)
		reply_after_loop(call, after_loop, sb.data, sb.size);
	else
		api_reply(call->rt, call->token, kind_pack_sbuffer, &sb);
	msgpack_sbuffer_destroy(&sb);
	return err < 0 ? -1 : 0;
}

static void reply_packed(const api_call_t *call, const kind_t *k, const char *name,
			 pack_into_fn fn, void *arg)
{
	(void)reply_packed_to(call, k, name, fn, arg, NULL);
}

/* --- apply, delete ----------------------------------------------------------- */

/* A write of desired state other than an apply reads stored objects
 * before it writes (a delete's cascade, a verb's checks): an apply's
 * commit still on the store's thread ends first (st_settle: the loop
 * waits for the rest of it), so that it reads what was applied and
 * comes after it, as when the commit ran in the apply's turn. */
static void settle(api_daemon_t *d)
{
	if (d->store && st_commit_busy(d->store))
		st_settle(d->store);
}

static const char *const apply_actions[] = { "unchanged", "created", "configured" };

typedef struct apply_out {
	const kind_item_t *items;
	const st_apply_result_t *res;
	size_t n;
	/* A dry run's diff: each object's stored spec (cur[i].spec, NULL when
	 * none) and the canonical one it would get (in[i]). */
	const st_pod_t *cur;
	const st_pod_in_t *in;
} apply_out_t;

/* Packs canonical spec bytes as the object they are (nil when none). */
static int pack_spec_bytes(msgpack_packer *pk, const void *spec, size_t len)
{
	msgpack_unpacked u;
	size_t off = 0;
	int rc;

	if (!spec || !len)
		return msgpack_pack_nil(pk);
	msgpack_unpacked_init(&u);
	rc = msgpack_unpack_next(&u, spec, len, &off) == MSGPACK_UNPACK_SUCCESS
	     ? msgpack_pack_object(pk, u.data) : msgpack_pack_nil(pk);
	msgpack_unpacked_destroy(&u);
	return rc;
}

static int pack_apply(msgpack_packer *pk, void *arg)
{
	apply_out_t *o = arg;
	int rc = msgpack_pack_array(pk, o->n);
	for (size_t i = 0; i < o->n; i++) {
		rc |= msgpack_pack_map(pk, o->cur ? 7 : 5);
		if (o->cur) {
			rc |= pk_key(pk, "current");
			rc |= pack_spec_bytes(pk, o->cur[i].spec, o->cur[i].spec_len);
			rc |= pk_key(pk, "proposed");
			rc |= pack_spec_bytes(pk, o->in[i].spec, o->in[i].spec_len);
		}
		rc |= pk_key(pk, "kind");
		rc |= api_pack_cstr(pk, o->items[i].kind->name);
		rc |= pk_key(pk, "name");
		rc |= api_pack_cstr(pk, o->items[i].name);
		rc |= pk_key(pk, "uid");
		rc |= api_pack_cstr(pk, o->res[i].uid);
		rc |= pk_key(pk, "action");
		rc |= api_pack_cstr(pk, apply_actions[o->res[i].action]);
		rc |= pk_key(pk, "generation");
		rc |= msgpack_pack_uint64(pk, o->res[i].generation);
	}
	return rc ? -ENOMEM : 0;
}

static int pack_errors(msgpack_packer *pk, void *arg)
{
	const kit_errors_t *errs = arg;
	int rc = msgpack_pack_array(pk, errs->stored);
	for (size_t i = 0; i < errs->stored; i++)
		rc |= api_pack_cstr(pk, errs->msgs[i]);
	return rc ? -ENOMEM : 0;
}

/* An apply: every object validated first (a rejected batch applies
 * nothing), then one transaction.  Up to API_APPLY_CHUNK objects it all
 * happens in the call; a bigger batch is copied and validated by a worker
 * actor, API_APPLY_CHUNK objects per turn, with the socket served in
 * between (10,000 pods validated in one go held every client for tens of
 * milliseconds), and then committed in one transaction as before, on the
 * store's thread (st_coll_commit_async: 31-37 ms of CPU for 9,744 pods,
 * which held every client when it ran on the loop); the worker waits
 * for it in a state of its own and answers once it is durable.
 *
 * The kinds' checks of the whole batch (membership, depends_on, the
 * host's room) read the stored objects, so no other apply may commit
 * between an apply's checks and its commit: applies check and commit one
 * at a time, in the order their validation ended (d->apply_head: a
 * queue of jobs; the head's commit may be in flight).  A small apply
 * goes in the call only when nobody is queued; else it queues as a
 * worker.  The other writes of desired state (delete, the kinds' verbs
 * and methods) settle a commit in flight first (st_settle: the loop
 * waits for the rest of it; rare, and measured in docs/bench.md). */
#define API_APPLY_CHUNK 1000

enum { APPLY_TAG_STEP = 1, APPLY_TAG_GO = 2, APPLY_TAG_COMMITTED = 3 };

typedef struct apply_job {
	api_daemon_t *d;
	const kind_t *const *kinds;
	mf_registry_t reg;            /* the kinds' manifest entries */
	api_token_t token;
	const msgpack_object *arr;    /* the objects: the call's, or copy's */
	msgpack_unpacked copy;        /* a worker's own copy of them; its strings */
	msgpack_sbuffer copy_buf;     /* point into this buffer */
	bool copied;
	bool finished;                /* answered: the worker's next turn frees it */
	size_t n, at;
	kind_item_t *items;           /* [i]: object i (kind NULL while invalid) */
	kit_errors_t errs;
	kit_errors_t host;            /* the kinds' check_item, said only when
				       * every object is valid (as check's) */
	msgpack_zone *zone;
	int err;                      /* a failure that is not the input's */
	bool dry_run;                 /* check everything, say what would be, write nothing */
	bool diff;                    /* and answer both specs (tankctl diff) */
	/* A worker's: its place in d's queue, and its commit on the store's
	 * thread.  all holds the batch (its res filled by the store) until
	 * the commit's callback; a worker that dies meanwhile (tankd
	 * stopping) leaves the job to that callback (orphan). */
	rt_t *rt;
	rt_pid_t pid;
	struct apply_job *qnext;
	bool queued, committing, orphan;
	bool has_all;
	struct apply_all {
		kind_batch_t b;
		st_pod_in_t *in;
		st_apply_result_t *res;
	} all;
	int commit_rc;
	char commit_msg[TANK_ERROR_MSG];
} apply_job_t;

typedef struct apply_all apply_all_t;
static void apply_all_free(apply_all_t *a);

static void apply_job_free(apply_job_t *j)
{
	if (j->has_all)
		apply_all_free(&j->all);
	for (size_t i = 0; j->items && i < j->n; i++) {
		if (j->items[i].kind && j->items[i].obj)
			j->items[i].kind->mf->free_obj(j->items[i].obj);
		free(j->items[i].buf);
	}
	free(j->items);
	if (j->zone)
		msgpack_zone_free(j->zone);
	if (j->copied) {
		msgpack_unpacked_destroy(&j->copy);
		msgpack_sbuffer_destroy(&j->copy_buf);
	}
	kit_errors_free(&j->errs);
	kit_errors_free(&j->host);
}

static int apply_job_init(apply_job_t *j, api_daemon_t *d, api_token_t token, size_t n)
{
	memset(j, 0, sizeof *j);
	j->d = d;
	j->kinds = kinds_of(d);
	kind_registry(j->kinds, &j->reg);
	j->token = token;
	j->n = n;
	kit_errors_init(&j->errs);
	kit_errors_init(&j->host);
	if (!(j->items = calloc(n + 1, sizeof *j->items)) || !(j->zone = msgpack_zone_new(1024)))
		return -ENOMEM;
	return 0;
}

static const kind_t *kind_of_mf(const kind_t *const *kinds, const mf_kind_t *mf)
{
	for (size_t i = 0; kinds[i]; i++)
		if (kinds[i]->mf == mf)
			return kinds[i];
	return NULL;
}

/* The kinds' checks of one object against the host (kind_t's
 * check_item), for it and what it brings inline, as it is validated. */
static void apply_item_host(apply_job_t *j, const kind_item_t *it)
{
	const kind_env_t *env;
	size_t ni;

	/* No daemon (api_methods_decode: the shapes only): no host. */
	if (!j->d || !it->kind)
		return;
	env = j->d->kinds;
	ni = it->kind->ninline ? it->kind->ninline(it->obj) : 0;
	if (it->kind->check_item)
		it->kind->check_item(env, it, &j->host);
	for (size_t c = 0; c < ni; c++) {
		const kind_t *ck = NULL;
		void *obj = it->kind->inline_at(it->obj, c, &ck);
		if (!obj || !ck || !ck->check_item)
			continue;
		kind_item_t in = { .kind = ck, .obj = obj, .at = it->at, .is_inline = true,
				   .name = ck->name_of(obj), .by = it->kind, .by_obj = it->obj,
				   .by_i = c };
		ck->check_item(env, &in, &j->host);
	}
}

/* Validates up to `max` more objects.  Each object may say its `kind`
 * (absent: the list's first), as in a manifest; a kind not on the list is
 * refused naming the item. */
static void apply_job_validate(apply_job_t *j, size_t max)
{
	for (size_t end = j->at + max < j->n ? j->at + max : j->n; j->at < end; j->at++) {
		size_t i = j->at;
		kit_errors_t one;
		msgpack_object rest;
		const mf_kind_t *mk;
		char prefix[KIND_WHERE_MAX];
		void *obj = NULL;
		const char *name = NULL;
		/* Named in the user's terms: its kind's plural and its index
		 * in the request (`stacks[1]: `), as kind_item_where names it
		 * later; `objects[N]` while its kind is not known. */
		snprintf(prefix, sizeof prefix, "objects[%zu]: ", i);
		if (!(mk = mf_kind_of(&j->reg, &j->arr->via.array.ptr[i], j->zone, &rest, prefix,
				      &j->errs)))
			continue;
		const kind_t *kind = kind_of_mf(j->kinds, mk);
		kind_item_t where = { .kind = kind, .at = i };
		kind_item_where(&where, prefix, sizeof prefix);
		/* Every kind's labels, taken out and checked once here
		 * (manifest/mf_labels.h); the kind validates the rest. */
		msgpack_object labels;
		if (mf_labels_take(&rest, j->zone, &labels, prefix, &j->errs) == -ENOMEM)
			j->err = -ENOMEM;
		kit_errors_init(&one);
		int err = mk->validate(&rest, &obj, &name, &one);
		if (err == -ENOMEM)
			j->err = -ENOMEM;
		kit_errors_move(&j->errs, &one, prefix);
		kit_errors_free(&one);
		if (err < 0 || !obj)
			continue;
		kind_item_t *it = &j->items[i];
		*it = (kind_item_t){ .kind = kind, .obj = obj, .name = name,
				     .at = i, .labels = labels };
		if (!j->errs.count)     /* else never said: skip the syscalls */
			apply_item_host(j, it);
		/* Encoded now, so the commit is only the transaction. */
		if (!j->errs.count && !j->err &&
		    (err = kind_encode(it->kind, obj, &it->labels, &it->buf, &it->len)) < 0)
			j->err = err;
	}
}

/* The whole batch (apply_job_t.all), flattened kind by kind in the
 * list's order: the objects given, then those brought inline; with
 * their results. */
static void apply_all_free(apply_all_t *a)
{
	for (size_t i = 0; i < a->b.n; i++)
		if (a->b.items[i].is_inline)
			free(a->b.items[i].buf);      /* the given ones are the job's */
	free(a->b.items);
	free(a->in);
	free(a->res);
}

static int apply_all_build(apply_job_t *j, apply_all_t *a)
{
	size_t n = 0;
	int err;

	memset(a, 0, sizeof *a);
	for (size_t i = 0; i < j->n; i++)
		if (j->items[i].kind)
			n += 1 + (j->items[i].kind->ninline
				  ? j->items[i].kind->ninline(j->items[i].obj) : 0);
	if (!(a->b.items = calloc(n + 1, sizeof *a->b.items)) ||
	    !(a->in = calloc(n + 1, sizeof *a->in)) || !(a->res = calloc(n + 1, sizeof *a->res)))
		return -ENOMEM;
	for (size_t k = 0; j->kinds[k]; k++) {
		const kind_t *kind = j->kinds[k];
		for (size_t i = 0; i < j->n; i++)
			if (j->items[i].kind == kind) {
				kind_item_t *it = &j->items[i];
				if (!it->buf && (err = kind_encode(kind, it->obj, &it->labels,
								   &it->buf, &it->len)) < 0)
					return err;
				a->b.items[a->b.n++] = *it;
			}
		for (size_t i = 0; i < j->n; i++) {
			const kind_item_t *p = &j->items[i];
			size_t ni = p->kind && p->kind->ninline ? p->kind->ninline(p->obj) : 0;
			for (size_t c = 0; c < ni; c++) {
				const kind_t *ck = NULL;
				void *obj = p->kind->inline_at(p->obj, c, &ck);
				if (!obj || ck != kind)
					continue;
				kind_item_t *it = &a->b.items[a->b.n++];
				*it = (kind_item_t){ .kind = ck, .obj = obj, .at = p->at,
						     .is_inline = true, .by = p->kind,
						     .by_obj = p->obj, .by_i = c };
				if ((err = ck->encode(obj, &it->buf, &it->len)) < 0)
					return err;
				it->name = ck->name_of(obj);
				if (!it->name)
					return TANK_ECORRUPT;
			}
		}
	}
	for (size_t i = 0; i < a->b.n; i++)
		a->in[i] = (st_pod_in_t){ a->b.items[i].name, a->b.items[i].buf, a->b.items[i].len };
	return 0;
}

static void apply_committed(void *ctx, int rc, const tank_error_t *err);

/* Answers: the errors, or the commit of every object in one transaction.
 * async (a worker's): the commit goes to the store's thread, and true is
 * returned: the answer comes with apply_committed. */
static bool apply_job_finish(rt_t *rt, apply_job_t *j, bool async)
{
	const kind_env_t *env = j->d->kinds;
	apply_all_t *ap = &j->all;
	tank_error_t e;
	int err;

	memset(ap, 0, sizeof *ap);
	j->has_all = true;
	tank_error_clear(&e);
	if (!j->err && !j->errs.count && (err = apply_all_build(j, ap)) < 0)
		j->err = err;
	/* Each kind's checks of the whole batch (membership rules, pods'
	 * depends_on) right before the commit, so no other apply comes
	 * between (applies check and commit one at a time: the queue).  What the host said of the objects (check_item,
	 * gathered as they were validated) counts as their kind's check and
	 * comes before it: a kind whose checks found something ends the
	 * checks, as when the host's were part of them.  Only for a batch
	 * whose objects are all valid. */
	kit_errors_t chk;
	kit_errors_init(&chk);
	for (size_t k = 0; j->kinds[k] && !j->err && !j->errs.count && !chk.count; k++) {
		if (j->kinds[k]->check_item)
			kit_errors_move(&chk, &j->host, "");
		if (!j->kinds[k]->check)
			continue;
		if ((err = j->kinds[k]->check(env, &ap->b, &chk, &e)) < 0) {
			api_reply_err(rt, j->token, err, e.msg[0] ? e.msg : NULL);
			kit_errors_free(&chk);
			goto out;
		}
	}
	if (!j->err && !j->errs.count) {
		if (!chk.count)
			kit_errors_move(&chk, &j->host, "");
		kit_errors_move(&j->errs, &chk, "");
	}
	kit_errors_free(&chk);
	if (j->errs.count) {
		char msg[TANK_ERROR_MSG];
		snprintf(msg, sizeof msg, "%zu error%s: %s", j->errs.count,
			 j->errs.count == 1 ? "" : "s",
			 j->errs.stored ? j->errs.msgs[0] : "out of memory");
		api_reply_error(rt, j->token, API_INVALID, msg, pack_errors, &j->errs);
		goto out;
	}
	if (j->err) {
		api_reply_err(rt, j->token, j->err, NULL);
		goto out;
	}
	for (size_t k = 0; j->kinds[k]; k++)
		if (j->kinds[k]->admit && (err = j->kinds[k]->admit(env, &ap->b, &e)) < 0) {
			api_reply_err(rt, j->token, err, e.msg[0] ? e.msg : NULL);
			goto out;
		}
	/* One op per kind that has objects here, in the list's order (the
	 * batch is flattened in that order). */
	st_coll_op_t ops[KIND_MAX];
	size_t nops = 0, at = 0;
	for (size_t k = 0; j->kinds[k] && nops < KIND_MAX; k++) {
		size_t first = at;
		while (at < ap->b.n && ap->b.items[at].kind == j->kinds[k])
			at++;
		if (at == first)
			continue;
		st_coll_t *c = NULL;
		if ((err = kind_coll(env, j->kinds[k], &c, &e)) < 0) {
			api_reply_err(rt, j->token, err, e.msg[0] ? e.msg : NULL);
			goto out;
		}
		ops[nops++] = (st_coll_op_t){ .c = c, .put = ap->in + first, .nput = at - first,
					      .res = ap->res + first };
	}
	if (j->dry_run) {
		/* What the commit would say, from the stored records: the same
		 * bytes are unchanged, other bytes configured, no record
		 * created (st_coll_put's rule). */
		st_pod_t *cur = calloc(ap->b.n + 1, sizeof *cur);
		err = 0;
		if (!cur) {
			api_reply_err(rt, j->token, -ENOMEM, NULL);
			goto out;
		}
		for (size_t i = 0; i < ap->b.n && err >= 0; i++) {
			err = kind_get(env, ap->b.items[i].kind, ap->b.items[i].name, &cur[i], NULL);
			if (err == TANK_ENOTFOUND) {
				ap->res[i] = (st_apply_result_t){ .action = ST_CREATED, .generation = 1 };
				err = 0;
				continue;
			}
			if (err < 0)
				break;
			bool same = cur[i].spec_len == ap->in[i].spec_len &&
				    !memcmp(cur[i].spec, ap->in[i].spec, cur[i].spec_len);
			ap->res[i] = (st_apply_result_t){
				.action = same ? ST_UNCHANGED : ST_CONFIGURED,
				.generation = cur[i].generation + !same };
			snprintf(ap->res[i].uid, sizeof ap->res[i].uid, "%s", cur[i].uid);
		}
		if (err < 0) {
			api_reply_err(rt, j->token, err, NULL);
		} else {
			apply_out_t o = { ap->b.items, ap->res, ap->b.n, j->diff ? cur : NULL, ap->in };
			api_reply(rt, j->token, pack_apply, &o);
		}
		for (size_t i = 0; i < ap->b.n; i++)
			st_pod_clear(&cur[i]);
		free(cur);
	} else if (!nops) {
		apply_out_t o = { NULL, NULL, 0, NULL, NULL };
		api_reply(rt, j->token, pack_apply, &o);
	} else if (async) {
		/* The store's thread commits; apply_committed answers. */
		j->committing = true;
		if ((err = st_coll_commit_async(j->d->store, ops, nops, apply_committed, j,
						&e)) == 0)
			return true;
		j->committing = false;
		api_reply_err(rt, j->token, err, e.msg[0] ? e.msg : NULL);
	} else if ((err = st_coll_commit(j->d->store, ops, nops, &e)) < 0) {
		api_reply_err(rt, j->token, err, e.msg[0] ? e.msg : NULL);
	} else {
		apply_out_t o = { ap->b.items, ap->res, ap->b.n, NULL, NULL };
		api_reply(rt, j->token, pack_apply, &o);
		nudge(j->d);
	}
out:
	apply_all_free(ap);
	j->has_all = false;
	return false;
}

/* ---- the apply queue (api_daemon_t.apply_head) ---- */

static void apply_q_push(apply_job_t *j)
{
	api_daemon_t *d = j->d;
	j->qnext = NULL;
	j->queued = true;
	if (d->apply_tail)
		d->apply_tail->qnext = j;
	else
		d->apply_head = j;
	d->apply_tail = j;
}

static void apply_q_remove(apply_job_t *j)
{
	api_daemon_t *d = j->d;
	apply_job_t **pp = &d->apply_head, *prev = NULL;
	while (*pp && *pp != j) {
		prev = *pp;
		pp = &(*pp)->qnext;
	}
	if (*pp) {
		*pp = j->qnext;
		if (d->apply_tail == j)
			d->apply_tail = prev;
	}
	j->queued = false;
	j->qnext = NULL;
}

/* The queue's head may go on (its validation is over, it waits). */
static void apply_q_wake(api_daemon_t *d)
{
	if (d->apply_head)
		(void)rt_send(d->apply_head->rt, d->apply_head->pid, APPLY_TAG_GO, NULL, 0);
}

/* The store's callback of a worker's commit: on the loop, outside the
 * worker's turns (maybe in another method's st_settle, or at tankd's
 * stop after the worker died). */
static void apply_committed(void *ctx, int rc, const tank_error_t *err)
{
	apply_job_t *j = ctx;
	api_daemon_t *d = j->d;

	j->committing = false;
	apply_q_remove(j);
	if (j->orphan) {
		apply_job_free(j);
		free(j);
	} else {
		j->commit_rc = rc;
		snprintf(j->commit_msg, sizeof j->commit_msg, "%s",
			 rc && err && err->msg[0] ? err->msg : "");
		if (rt_send(j->rt, j->pid, APPLY_TAG_COMMITTED, NULL, 0) < 0)
			api_reply_err(j->rt, j->token, rc ? rc : -ENOMEM,
				      rc ? (j->commit_msg[0] ? j->commit_msg : NULL)
					 : "applied, but the answer could not be sent");
	}
	apply_q_wake(d);
}

static int apply_worker_init(rt_t *rt, void **state, void *arg)
{
	apply_job_t *j = arg;
	*state = arg;
	j->rt = rt;
	j->pid = rt_self(rt);
	return rt_send(rt, rt_self(rt), APPLY_TAG_STEP, NULL, 0);
}

/* The job is done with (answered): freed in a turn of its own. */
static void apply_worker_done(rt_t *rt, apply_job_t *j)
{
	j->finished = true;
	rt_slice_used(rt);
	if (rt_send(rt, rt_self(rt), APPLY_TAG_STEP, NULL, 0) < 0)
		rt_exit_self(rt, RT_R_NORMAL);
}

static void apply_worker_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	apply_job_t *j = state;

	if (j->finished) {
		rt_exit_self(rt, RT_R_NORMAL);  /* the free, in a turn of its own */
		return;
	}
	if (m->tag == APPLY_TAG_COMMITTED) {
		/* Durable (or failed, nothing applied): the answer. */
		if (j->commit_rc < 0) {
			api_reply_err(rt, j->token, j->commit_rc,
				      j->commit_msg[0] ? j->commit_msg : NULL);
		} else {
			apply_out_t o = { j->all.b.items, j->all.res, j->all.b.n, NULL, NULL };
			api_reply(rt, j->token, pack_apply, &o);
			nudge(j->d);
		}
		apply_worker_done(rt, j);
		return;
	}
	if (j->committing)
		return;
	if (j->at < j->n) {
		apply_job_validate(j, API_APPLY_CHUNK);
		if (j->at < j->n) {
			rt_slice_used(rt);
			if (rt_send(rt, rt_self(rt), APPLY_TAG_STEP, NULL, 0) == 0)
				return;
			api_reply_err(rt, j->token, -ENOMEM, "out of memory");
			rt_exit_self(rt, RT_R_NORMAL);
			return;
		}
	}
	if (!j->queued) {
		/* Validated: its turn to check and commit comes behind the
		 * applies before it (the queue's head goes on), in a turn
		 * of its own. */
		apply_q_push(j);
		rt_slice_used(rt);
		if (j->d->apply_head == j)
			apply_q_wake(j->d);
		return;
	}
	if (j->d->apply_head != j)
		return;                 /* woken (APPLY_TAG_GO) when it is first */
	/* The checks of the batch and the hand-over of its commit; the
	 * free of its objects and the trim (4-5 ms) wait for a later turn. */
	if (apply_job_finish(rt, j, true))
		return;                 /* APPLY_TAG_COMMITTED comes */
	apply_q_remove(j);
	apply_q_wake(j->d);
	apply_worker_done(rt, j);
}

static void apply_worker_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	apply_job_t *j = state;

	(void)rt; (void)reason;
	if (j->committing) {
		/* The store still fills j->all: its callback frees the job. */
		j->orphan = true;
		return;
	}
	if (j->queued) {
		bool first = j->d->apply_head == j;
		apply_q_remove(j);
		if (first)
			apply_q_wake(j->d);
	}
	apply_job_free(j);
	free(j);
	/* The job's copy of the batch and its decoded objects (megabytes for
	 * 10,000) are free now, scattered among what stays: give their whole
	 * pages back, or tankd's PSS keeps the peak of its biggest apply
	 * (docs/bench.md, issue 38).  Once per bulk job, a few ms. */
	malloc_trim(0);
}

static const rt_behaviour_t apply_worker_b = {
	"api_apply", apply_worker_init, apply_worker_handle, apply_worker_terminate,
};

static void m_apply(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	const msgpack_object *arr;
	tank_error_t e;
	apply_job_t *j;
	int err;

	if (api_params_check(params, "a?m", &e) < 0)
		return reply_check_error(call, &e);
	arr = &params->via.array.ptr[0];
	/* {dry_run: true}: everything checked, nothing written; diff: with
	 * each object's stored and proposed spec. */
	bool dry_run = false, diff = false;
	if (params->via.array.size > 1) {
		static const char *const known[] = { "dry_run", "diff", NULL };
		const msgpack_object *o = &params->via.array.ptr[1];
		if (kind_opts_check(o, 1, known, &e) < 0)
			return reply_check_error(call, &e);
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];
			bool dr = api_obj_streq(&kv->key, "dry_run");
			if (kv->val.type != MSGPACK_OBJECT_BOOLEAN) {
				api_reply_error(call->rt, call->token, API_BAD_REQUEST,
						dr ? "params[1].dry_run: expected a boolean"
						   : "params[1].diff: expected a boolean", NULL, NULL);
				return;
			}
			*(dr ? &dry_run : &diff) = kv->val.via.boolean;
		}
		dry_run |= diff;    /* a diff writes nothing either */
	}
	/* In the call when nobody is queued (nor committing): else behind
	 * them, as a worker. */
	if (arr->via.array.size <= API_APPLY_CHUNK && !d->apply_head &&
	    !(d->store && st_commit_busy(d->store))) {
		apply_job_t job;
		if ((err = apply_job_init(&job, d, call->token, arr->via.array.size)) == 0) {
			job.arr = arr;
			job.dry_run = dry_run;
			job.diff = diff;
			apply_job_validate(&job, job.n);
			(void)apply_job_finish(call->rt, &job, false);
		} else {
			api_reply_err(call->rt, call->token, err, NULL);
		}
		apply_job_free(&job);
		return;
	}
	/* The params are the call's: the worker gets its own copy (packed
	 * again; the unpacked strings point into that buffer). */
	msgpack_packer pk;
	size_t off = 0;
	if (!(j = malloc(sizeof *j))) {
		api_reply_err(call->rt, call->token, -ENOMEM, NULL);
		return;
	}
	if ((err = apply_job_init(j, d, call->token, arr->via.array.size)) < 0)
		goto fail;
	j->dry_run = dry_run;
	j->diff = diff;
	msgpack_sbuffer_init(&j->copy_buf);
	msgpack_unpacked_init(&j->copy);
	j->copied = true;
	msgpack_packer_init(&pk, &j->copy_buf, msgpack_sbuffer_write);
	if (msgpack_pack_object(&pk, *arr) != 0 ||
	    msgpack_unpack_next(&j->copy, j->copy_buf.data, j->copy_buf.size, &off) !=
	    MSGPACK_UNPACK_SUCCESS) {
		err = -ENOMEM;
		goto fail;
	}
	j->arr = &j->copy.data;
	if ((err = rt_spawn(call->rt, &apply_worker_b, j, NULL)) < 0)
		goto fail;
	/* This turn read and copied the whole batch (about 10 ms for 9,744
	 * pods): the worker's first slice waits for the next iteration,
	 * after the loop has polled (they made one 16 ms iteration). */
	rt_slice_used(call->rt);
	return;
fail:
	api_reply_err(call->rt, call->token, err, NULL);
	apply_job_free(j);
	free(j);
}

/* [{kind, name, deleted}]: the names asked for, then what their deletion
 * took with it (the descriptors' cascade). */
typedef struct delete_out {
	const kind_t *kind;
	const char *const *names;
	const bool *deleted;
	size_t n;
	const kind_names_t *more;
	const bool *more_deleted;
} delete_out_t;

static int pack_delete(msgpack_packer *pk, void *arg)
{
	delete_out_t *o = arg;
	size_t nm = o->more ? o->more->n : 0;
	int rc = msgpack_pack_array(pk, o->n + nm);
	for (size_t i = 0; i < o->n + nm; i++) {
		bool mine = i < o->n;
		rc |= msgpack_pack_map(pk, 3);
		rc |= pk_key(pk, "kind");
		rc |= api_pack_cstr(pk, mine ? o->kind->name : o->more->kind[i - o->n]->name);
		rc |= pk_key(pk, "name");
		rc |= api_pack_cstr(pk, mine ? o->names[i] : o->more->name[i - o->n]);
		rc |= pk_key(pk, "deleted");
		rc |= (mine ? o->deleted[i] : o->more_deleted[i - o->n]) ? msgpack_pack_true(pk)
									 : msgpack_pack_false(pk);
	}
	return rc ? -ENOMEM : 0;
}

/* Deletes names of kind k and their cascade in one transaction (one op
 * per kind: the kind's own names first).  Answers the call. */
static int delete_batch(const kind_env_t *env, const kind_t *k, char **names, size_t n,
			bool *deleted, delete_out_t *o, kind_names_t *more, bool **more_deleted,
			tank_error_t *e)
{
	const kind_t *const *kinds = env->kinds;
	st_coll_op_t ops[KIND_MAX];
	const char **dels[KIND_MAX];
	bool *dd[KIND_MAX];
	size_t nops = 0;
	int err = 0;

	memset(dels, 0, sizeof dels);
	memset(dd, 0, sizeof dd);
	for (size_t i = 0; k->cascade && i < n && !err; i++) {
		st_pod_t p;
		if (kind_get(env, k, names[i], &p, NULL) < 0)
			continue;
		err = k->cascade(env, &p, more);
		st_pod_clear(&p);
	}
	if (err || !(*more_deleted = calloc(more->n + 1, sizeof **more_deleted)))
		return err ? err : -ENOMEM;
	st_coll_t *c;
	if ((err = kind_coll(env, k, &c, e)) < 0)
		return err;
	ops[nops++] = (st_coll_op_t){ .c = c, .del = (const char *const *)names, .ndel = n,
				      .deleted = deleted };
	/* The cascade, grouped by kind: its names and flags in their own
	 * arrays (the answer lists them in cascade order). */
	for (size_t m = 0; m < more->n && !err; m++) {
		int ki = kind_index(kinds, more->kind[m]);
		if (ki < 0 || ki >= KIND_MAX) {
			err = -EINVAL;
			break;
		}
		if (!dels[ki]) {
			if (!(dels[ki] = calloc(more->n + 1, sizeof *dels[ki])) ||
			    !(dd[ki] = calloc(more->n + 1, sizeof *dd[ki]))) {
				err = -ENOMEM;
				break;
			}
		}
	}
	size_t cnt[KIND_MAX] = { 0 };
	for (size_t m = 0; m < more->n && !err; m++) {
		int ki = kind_index(kinds, more->kind[m]);
		dels[ki][cnt[ki]++] = more->name[m];
	}
	for (int ki = 0; ki < KIND_MAX && kinds[ki] && !err; ki++) {
		if (!cnt[ki])
			continue;
		if ((err = kind_coll(env, kinds[ki], &c, e)) < 0)
			break;
		ops[nops++] = (st_coll_op_t){ .c = c, .del = dels[ki], .ndel = cnt[ki],
					      .deleted = dd[ki] };
	}
	if (!err)
		err = st_coll_commit(env->store, ops, nops, e);
	if (!err) {
		size_t seen[KIND_MAX] = { 0 };
		for (size_t m = 0; m < more->n; m++) {
			int ki = kind_index(kinds, more->kind[m]);
			(*more_deleted)[m] = dd[ki][seen[ki]++];
		}
		*o = (delete_out_t){ k, (const char *const *)names, deleted, n, more,
				     *more_deleted };
	}
	for (int ki = 0; ki < KIND_MAX; ki++) {
		free(dels[ki]);
		free(dd[ki]);
	}
	return err;
}

/* A delete of names of a kind without cascade goes in transactions of
 * API_DELETE_CHUNK names, one per turn of a worker actor, with the socket
 * served in between: 100,000 names in one transaction held every client
 * for half a second.  The chunks commit without an fsync on the loop
 * (st_coll_commit_nosync: an fsync a chunk made 40-70 ms turns); once the
 * last is committed the worker asks the store for one fsync covering
 * them all (st_durable, on the store's sync thread) and answers only when
 * it is done: a client told "deleted" finds the names deleted whatever
 * happens next, an OS crash included.  Each chunk is atomic; the whole
 * is not (a crash in the middle leaves the names of some chunks deleted,
 * and the caller, who got no answer, deletes again).  An error part way
 * is answered likewise after the fsync of the chunks before it.  500
 * names a chunk: a chunk's commit and its watchers' work took 3-5 ms of
 * a turn at 1,000. */
#define API_DELETE_CHUNK 500

enum { BULK_TAG_CHUNK = 1, BULK_TAG_DURABLE = 2 };

typedef struct bulk_delete {
	api_daemon_t *d;
	const kind_t *kind;
	api_token_t token;
	char **names;
	bool *deleted;
	size_t n, at;
	int err;                        /* a chunk failed: answered once durable */
	char msg[TANK_ERROR_MSG];
	/* The answer, packed a chunk at a time as the chunks commit (the
	 * whole of it for 100,000 names at the end took 26 ms of a turn):
	 * the array's header, then each name's {kind, name, deleted}. */
	msgpack_sbuffer out;
	msgpack_packer pk;
	int pack_err;
} bulk_delete_t;

/* What the store's durable callback needs to reach the worker: it runs
 * outside any turn, maybe after the worker died. */
typedef struct bulk_wake {
	rt_t *rt;
	rt_pid_t pid;
} bulk_wake_t;

static void bulk_delete_free(bulk_delete_t *b)
{
	for (size_t i = 0; b->names && i < b->n; i++)
		free(b->names[i]);
	free(b->names);
	free(b->deleted);
	msgpack_sbuffer_destroy(&b->out);
	free(b);
}

/* The answer's entries of names [from, from + k): as pack_delete's. */
static void bulk_delete_pack(bulk_delete_t *b, size_t from, size_t k)
{
	msgpack_packer *pk = &b->pk;
	int rc = 0;

	for (size_t i = from; i < from + k; i++) {
		rc |= msgpack_pack_map(pk, 3);
		rc |= pk_key(pk, "kind");
		rc |= api_pack_cstr(pk, b->kind->name);
		rc |= pk_key(pk, "name");
		rc |= api_pack_cstr(pk, b->names[i]);
		rc |= pk_key(pk, "deleted");
		rc |= b->deleted[i] ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	}
	b->pack_err |= rc;
}

/* Commits the next chunk (nosync) and packs its part of the answer; a
 * failure is kept in b->err, to be answered once what went before is
 * durable. */
static void bulk_delete_chunk(bulk_delete_t *b)
{
	size_t k = b->n - b->at < API_DELETE_CHUNK ? b->n - b->at : API_DELETE_CHUNK;
	tank_error_t e;
	st_coll_t *c = NULL;
	int err;

	tank_error_clear(&e);
	if ((err = kind_coll(b->d->kinds, b->kind, &c, &e)) == 0) {
		st_coll_op_t op = { .c = c, .del = (const char *const *)b->names + b->at,
				    .ndel = k, .deleted = b->deleted + b->at };
		err = st_coll_commit_nosync(b->d->store, &op, 1, &e);
	}
	if (err < 0) {
		b->err = err;
		if (b->at)
			snprintf(b->msg, sizeof b->msg, "deleted the first %zu of %zu names, then: %.400s",
				 b->at, b->n, e.msg[0] ? e.msg : tank_strerror(err));
		else
			snprintf(b->msg, sizeof b->msg, "%s", e.msg[0] ? e.msg : tank_strerror(err));
	} else {
		bulk_delete_pack(b, b->at, k);
		b->at += k;
	}
	nudge(b->d);            /* the reconciler may start stopping them */
}

/* The first chunk (all of a delete of up to API_DELETE_CHUNK names) is
 * committed here, within the call, as before the worker: a request the
 * same client sent after it already reads it deleted.  The rest, and
 * the wait for the fsync, go in the worker's turns. */
static int bulk_delete_init(rt_t *rt, void **state, void *arg)
{
	bulk_delete_t *b = arg;

	*state = arg;
	msgpack_sbuffer_init(&b->out);
	msgpack_packer_init(&b->pk, &b->out, msgpack_sbuffer_write);
	b->pack_err = msgpack_pack_array(&b->pk, b->n);
	int err = rt_send(rt, rt_self(rt), BULK_TAG_CHUNK, NULL, 0);
	if (err < 0) {
		msgpack_sbuffer_destroy(&b->out);
		msgpack_sbuffer_init(&b->out);  /* the caller frees b, not this */
		return err;
	}
	bulk_delete_chunk(b);
	return 0;
}

static void bulk_durable(void *ctx, int rc)
{
	bulk_wake_t *w = ctx;
	if (rc != -ECANCELED)
		(void)rt_send(w->rt, w->pid, BULK_TAG_DURABLE, &rc, sizeof rc);
	free(w);
}

/* Every chunk is committed (or one failed): one fsync for them all. */
static void bulk_delete_sync(rt_t *rt, bulk_delete_t *b)
{
	bulk_wake_t *w = malloc(sizeof *w);
	if (w) {
		*w = (bulk_wake_t){ rt, rt_self(rt) };
		if (st_durable(b->d->store, bulk_durable, w) == 0)
			return;
		free(w);
	}
	api_reply_err(rt, b->token, -ENOMEM, "out of memory");
	rt_exit_self(rt, RT_R_NORMAL);
}

static void bulk_delete_answer(rt_t *rt, bulk_delete_t *b, int rc)
{
	if (b->err) {
		api_reply_err(rt, b->token, b->err, b->msg);
	} else if (rc < 0) {
		char msg[TANK_ERROR_MSG];
		snprintf(msg, sizeof msg, "deleted %zu names, but the store's fsync failed: %s",
			 b->n, strerror(-rc));
		api_reply_err(rt, b->token, rc, msg);
	} else if (b->pack_err) {
		api_reply_err(rt, b->token, -ENOMEM, "deleted, but the answer could not be encoded");
	} else {
		api_reply_raw(rt, b->token, b->out.data, b->out.size);
	}
	rt_exit_self(rt, RT_R_NORMAL);
}

static void bulk_delete_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	bulk_delete_t *b = state;

	if (m->tag == BULK_TAG_DURABLE) {
		int rc = 0;
		if (m->len == sizeof rc)
			memcpy(&rc, m->data, sizeof rc);
		bulk_delete_answer(rt, b, rc);
		return;
	}
	/* The first chunk went in init; this turn takes the next. */
	if (!b->err && b->at < b->n && b->at) {
		bulk_delete_chunk(b);
		rt_slice_used(rt);
	}
	if (b->err || b->at == b->n) {
		bulk_delete_sync(rt, b);
		return;
	}
	if (rt_send(rt, rt_self(rt), BULK_TAG_CHUNK, NULL, 0) < 0) {
		api_reply_err(rt, b->token, -ENOMEM, "out of memory");
		rt_exit_self(rt, RT_R_NORMAL);
	}
}

static void bulk_delete_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	bulk_delete_t *b = state;
	bool big = b->n > API_DELETE_CHUNK;

	(void)rt; (void)reason;
	bulk_delete_free(b);
	if (big)
		malloc_trim(0);         /* as after a bulk apply */
}

static const rt_behaviour_t bulk_delete_b = {
	"api_delete", bulk_delete_init, bulk_delete_handle, bulk_delete_terminate,
};

static void m_delete(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	const msgpack_object *arr;
	char **names = NULL;
	bool *deleted = NULL;
	tank_error_t e;
	size_t n;
	int err = 0;

	settle(d);
	const kind_t *kind;
	if (api_params_check(params, "a?m", &e) < 0)
		return reply_check_error(call, &e);
	if (!kind_param(call, d, params, 1, &kind))
		return;
	arr = &params->via.array.ptr[0];
	n = arr->via.array.size;
	if (!(names = calloc(n + 1, sizeof *names)) || !(deleted = calloc(n + 1, sizeof *deleted))) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const msgpack_object *o = &arr->via.array.ptr[i];
		if (o->type != MSGPACK_OBJECT_STR) {
			char msg[64];
			snprintf(msg, sizeof msg, "params[0][%zu]: expected string", i);
			api_reply_error(call->rt, call->token, API_BAD_REQUEST, msg, NULL, NULL);
			goto out;
		}
		if (!(names[i] = strndup(o->via.str.ptr, o->via.str.size))) {
			err = -ENOMEM;
			goto out;
		}
	}
	if (!kind->cascade) {
		/* Also a small one: its answer waits for the fsync on the
		 * store's thread, not on the loop. */
		bulk_delete_t *b = calloc(1, sizeof *b);
		if (!b) {
			err = -ENOMEM;
			goto out;
		}
		*b = (bulk_delete_t){ .d = d, .kind = kind, .token = call->token, .names = names,
				      .deleted = deleted, .n = n };
		if ((err = rt_spawn(call->rt, &bulk_delete_b, b, NULL)) < 0) {
			free(b);
			goto out;
		}
		return;         /* the worker owns names and deleted now */
	}
	kind_names_t more = { 0 };
	bool *more_deleted = NULL;
	delete_out_t o;
	tank_error_clear(&e);
	if ((err = delete_batch(d->kinds, kind, names, n, deleted, &o, &more, &more_deleted,
				&e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
		err = 0;
	} else {
		api_reply(call->rt, call->token, pack_delete, &o);
		nudge(d);
	}
	kind_names_free(&more);
	free(more_deleted);
out:
	if (err)
		api_reply_err(call->rt, call->token, err, NULL);
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
	free(deleted);
}

/* --- get, list --------------------------------------------------------------- */

int api_pack_record(msgpack_packer *pk, const st_pod_t *p, const char *kind,
		    size_t nextra, api_pack_fn extra, void *arg)
{
	msgpack_unpacked u;
	size_t off = 0;
	int rc = 0;

	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, p->spec, p->spec_len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    u.data.type != MSGPACK_OBJECT_MAP) {
		msgpack_unpacked_destroy(&u);
		return TANK_ECORRUPT;
	}
	const msgpack_object_map *m = &u.data.via.map;
	rc |= msgpack_pack_map(pk, m->size + 3 + (kind ? 1 : 0) + nextra);
	if (kind) {
		rc |= pk_key(pk, "kind");
		rc |= api_pack_cstr(pk, kind);
	}
	for (uint32_t i = 0; i < m->size; i++) {
		rc |= msgpack_pack_object(pk, m->ptr[i].key);
		rc |= msgpack_pack_object(pk, m->ptr[i].val);
	}
	rc |= pk_key(pk, "generation");
	rc |= msgpack_pack_uint64(pk, p->generation);
	rc |= pk_key(pk, "uid");
	rc |= api_pack_cstr(pk, p->uid);
	rc |= pk_key(pk, "created_at");
	rc |= msgpack_pack_int64(pk, p->created_at);
	if (!rc && extra)
		rc = extra(pk, arg);
	msgpack_unpacked_destroy(&u);
	return rc ? -ENOMEM : 0;
}

typedef struct rec_ctx {
	const kind_env_t *env;
	const kind_t *kind;
	const st_pod_t *p;
} rec_ctx_t;

static int pack_status_kv(msgpack_packer *pk, void *arg)
{
	rec_ctx_t *r = arg;
	int rc = pk_key(pk, "status");
	return rc ? -ENOMEM : r->kind->pack_status(r->env, r->p, pk, 0);
}

/* The stored canonical spec map with `generation` and `uid` added (and
 * for a kind that says so, `kind` and its `status`). */
static int pack_object(const kind_env_t *env, const kind_t *k, const st_pod_t *p,
		       msgpack_packer *pk)
{
	rec_ctx_t r = { env, k, p };
	if (k->get_with_status && k->pack_status)
		return api_pack_record(pk, p, k->mf->name, 1, pack_status_kv, &r);
	return api_pack_record(pk, p, NULL, 0, NULL, NULL);
}

static int name_param(const api_call_t *call, const msgpack_object *params,
		      const char *types, char *name, size_t cap)
{
	tank_error_t e;
	if (api_params_check(params, types, &e) < 0) {
		reply_check_error(call, &e);
		return -1;
	}
	api_obj_strcpy(&params->via.array.ptr[0], name, cap);
	return 0;
}

typedef struct one_req {
	const kind_env_t *env;
	const kind_t *kind;
	const char *name;
	bool status;
	unsigned flags;              /* the status packer's */
} one_req_t;

static int pack_one(void *arg, msgpack_packer *pk, tank_error_t *e)
{
	one_req_t *q = arg;
	st_pod_t p;
	int err;

	if ((err = kind_get(q->env, q->kind, q->name, &p, e)) < 0)
		return err;
	err = q->status ? q->kind->pack_status(q->env, &p, pk, q->flags)
			: pack_object(q->env, q->kind, &p, pk);
	st_pod_clear(&p);
	return err;
}

typedef struct status_req {
	const kind_env_t *env;
	const kind_t *kind;
	const char *name;
	unsigned flags;
} status_req_t;

static int pack_status_one(void *arg, msgpack_packer *pk, tank_error_t *e)
{
	status_req_t *q = arg;
	return q->kind->status_one(q->env, q->name, pk, q->flags, e);
}

static void m_get(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	char name[ST_NAME_MAX + 1];
	const kind_t *kind;

	if (name_param(call, params, "s?m", name, sizeof name) < 0 ||
	    !kind_param(call, d, params, 1, &kind))
		return;
	if (kind->status_is_object && kind->status_one) {
		status_req_t sq = { d->kinds, kind, name, 0 };
		reply_packed(call, kind, name, pack_status_one, &sq);
		return;
	}
	one_req_t q = { d->kinds, kind, name, kind->status_is_object, 0 };
	reply_packed(call, kind, name, pack_one, &q);
}

/* Every object of a kind, each packed while scanning (the scan borrows
 * each record for its callback only). */
typedef struct all_req {
	const kind_env_t *env;
	const kind_t *kind;
	bool status;
	unsigned flags;              /* the status packers' */
	msgpack_sbuffer sb;
	msgpack_packer pk;
	size_t n;
} all_req_t;

static int all_one(void *ctx, const st_pod_t *p)
{
	all_req_t *a = ctx;
	int rc = a->status ? a->kind->pack_status(a->env, p, &a->pk, a->flags)
			   : pack_object(a->env, a->kind, p, &a->pk);
	a->n += rc == 0;
	return rc;
}

static int pack_all(void *arg, msgpack_packer *pk, tank_error_t *e)
{
	all_req_t *a = arg;
	int err;

	if (a->status && a->kind->status_all)
		return a->kind->status_all(a->env, pk, a->flags, e);
	msgpack_sbuffer_init(&a->sb);
	msgpack_packer_init(&a->pk, &a->sb, msgpack_sbuffer_write);
	if ((err = kind_scan(a->env, a->kind, all_one, a, e)) == 0)
		err = msgpack_pack_array(pk, a->n) ? -ENOMEM : api_pack_raw(pk, a->sb.data, a->sb.size);
	msgpack_sbuffer_destroy(&a->sb);
	return err;
}

static void m_list(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	const kind_t *kind;
	tank_error_t e;

	if (api_params_check(params, "?m", &e) < 0)
		return reply_check_error(call, &e);
	if (!kind_param(call, d, params, 0, &kind))
		return;
	all_req_t a = { .env = d->kinds, .kind = kind, .status = kind->status_is_object };
	reply_packed(call, kind, "", pack_all, &a);
}

/* --- status ------------------------------------------------------------------- */

/* Every kind's status map carries the object's `created_at` and `labels`:
 * the kind's packer adds them (KIND_STATUS_META, kinds/kind.h), so the
 * answer is packed once from one walk of the store. */
static void m_status(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	const kind_t *kind;
	tank_error_t e;

	if (api_params_check(params, "?sm", &e) < 0)
		return reply_check_error(call, &e);
	/* An option it does not know is refused, naming it (as logs and
	 * history do): a misspelt `kind` read the pods. */
	if (params->via.array.size > 1 &&
	    kind_opts_check(&params->via.array.ptr[1], 1, (const char *const[]){ "kind", NULL },
			    &e) < 0) {
		api_reply_error(call->rt, call->token, API_BAD_REQUEST, e.msg, NULL, NULL);
		return;
	}
	if (!kind_param(call, d, params, 1, &kind))
		return;
	if (!kind->pack_status) {
		api_reply_error(call->rt, call->token, API_BAD_REQUEST, "this kind has no status",
				NULL, NULL);
		return;
	}
	if (params->via.array.size && params->via.array.ptr[0].type == MSGPACK_OBJECT_STR) {
		char name[ST_NAME_MAX + 1];
		api_obj_strcpy(&params->via.array.ptr[0], name, sizeof name);
		if (kind->status_one) {
			status_req_t sq = { d->kinds, kind, name, KIND_STATUS_META };
			reply_packed(call, kind, name, pack_status_one, &sq);
			return;
		}
		one_req_t q = { d->kinds, kind, name, true, KIND_STATUS_META };
		reply_packed(call, kind, name, pack_one, &q);
		return;
	}
	all_req_t a = { .env = d->kinds, .kind = kind, .status = true, .flags = KIND_STATUS_META };
	reply_packed(call, kind, "", pack_all, &a);
}

/* --- nudge, sync ---------------------------------------------- */

static void m_nudge(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	tank_error_t e;
	if (api_params_check(params, "", &e) < 0)
		return reply_check_error(call, &e);
	nudge(ctx);
	api_reply(call->rt, call->token, NULL, NULL);
}

/* The sync waiter: asks for a pass, replies when it is done. */
typedef struct sync_wait { api_token_t token; rt_pid_t rc; } sync_wait_t;

static int sync_init(rt_t *rt, void **state, void *arg)
{
	sync_wait_t *w = malloc(sizeof *w);
	int err;
	if (!w)
		return -ENOMEM;
	*w = *(sync_wait_t *)arg;
	if ((err = rt_monitor(rt, w->rc, NULL)) < 0 ||
	    (err = rc_sync(rt, w->rc, rt_self(rt), 0)) < 0) {
		free(w);
		return err;
	}
	*state = w;
	return 0;
}

static void sync_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	sync_wait_t *w = state;
	if (m->type == RT_MSG_DOWN)
		api_reply_error(rt, w->token, API_INTERNAL, "reconciler exited during sync", NULL, NULL);
	else if (m->type == RT_MSG_USER && m->tag == RC_TAG_SYNC_DONE)
		api_reply(rt, w->token, NULL, NULL);
	else
		return;
	rt_exit_self(rt, RT_R_NORMAL);
}

static void sync_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	(void)rt; (void)reason;
	free(state);
}

static const rt_behaviour_t sync_waiter = { "api_sync", sync_init, sync_handle, sync_terminate };

static void m_sync(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	sync_wait_t w = { call->token, rt_whereis(d->rt, API_RECONCILER_NAME) };
	tank_error_t e;
	int err;

	if (api_params_check(params, "", &e) < 0)
		return reply_check_error(call, &e);
	if (!w.rc || (err = rt_spawn(d->rt, &sync_waiter, &w, NULL)) < 0)
		api_reply_error(call->rt, call->token, API_INTERNAL,
				"reconciler is not running", NULL, NULL);
}

/* --- history ----------------------------------------------------------------- */

typedef struct hist { st_transition_t *t; size_t n; } hist_t;

int api_pack_history(msgpack_packer *pk, const st_transition_t *t, size_t n)
{
	int rc = msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++) {
		/* {seq, at, kind, key, uid, from, to, reason} (DESIGN.md §7);
		 * legacy only on entries written before store schema 3. */
		rc |= msgpack_pack_map(pk, 8 + t[i].legacy);
		rc |= pk_key(pk, "seq");    rc |= msgpack_pack_uint64(pk, t[i].seq);
		rc |= pk_key(pk, "at");     rc |= msgpack_pack_int64(pk, t[i].at);
		rc |= pk_key(pk, "kind");   rc |= api_pack_cstr(pk, t[i].kind);
		rc |= pk_key(pk, "key");    rc |= api_pack_cstr(pk, t[i].key);
		rc |= pk_key(pk, "uid");    rc |= api_pack_cstr(pk, t[i].uid);
		if (t[i].legacy) {
			rc |= pk_key(pk, "legacy");
			rc |= msgpack_pack_true(pk);
		}
		rc |= pk_key(pk, "from");   rc |= api_pack_cstr(pk, t[i].from);
		rc |= pk_key(pk, "to");     rc |= api_pack_cstr(pk, t[i].to);
		rc |= pk_key(pk, "reason"); rc |= api_pack_cstr(pk, t[i].reason);
	}
	return rc ? -ENOMEM : 0;
}

static int pack_history(msgpack_packer *pk, void *arg)
{
	hist_t *h = arg;
	return api_pack_history(pk, h->t, h->n);
}

/* The options of history [name, {limit?}], checked. */
static int history_opts(const msgpack_object *params, int64_t *limit, tank_error_t *e)
{
	static const char *const known[] = { "kind", "limit", NULL };
	int err;

	if (params->via.array.size < 2 || params->via.array.ptr[1].type != MSGPACK_OBJECT_MAP)
		return 0;
	if ((err = kind_opts_check(&params->via.array.ptr[1], 1, known, e)) < 0)
		return err;
	const msgpack_object *o = api_map_get(&params->via.array.ptr[1], "limit");
	if (o && o->type != MSGPACK_OBJECT_NIL && (!api_obj_int(o, limit) || *limit < 0))
		return tank_error_set(e, -EPROTO, "params[1].limit: expected a non-negative integer");
	return 0;
}

static void m_history(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	char name[ST_NAME_MAX + 1];
	int64_t limit = 0;
	hist_t h = { NULL, 0 };
	const kind_t *kind;
	st_pod_t p;
	tank_error_t e;
	int err;

	if (name_param(call, params, "s?m", name, sizeof name) < 0)
		return;
	tank_error_clear(&e);
	if (history_opts(params, &limit, &e) < 0) {
		api_reply_error(call->rt, call->token, API_BAD_REQUEST, e.msg, NULL, NULL);
		return;
	}
	if (!kind_param(call, d, params, 1, &kind))
		return;
	tank_error_clear(&e);
	if ((err = kind_get(d->kinds, kind, name, &p, &e)) == TANK_ENOTFOUND &&
	    kind->status_one) {
		/* A kind whose objects are not applied (jobs) exists by its
		 * status. */
		msgpack_sbuffer sb;
		msgpack_packer spk;
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&spk, &sb, msgpack_sbuffer_write);
		tank_error_clear(&e);
		err = kind->status_one(d->kinds, name, &spk, 0, &e);
		msgpack_sbuffer_destroy(&sb);
		if (err < 0) {
			api_reply_object_error(call, err, kind->name, name, &e);
			return;
		}
	} else if (err < 0) {
		api_reply_object_error(call, err, kind->name, name, &e);
		return;
	} else {
		st_pod_clear(&p);
	}
	if ((err = kind_history(d->kinds, kind, name, (size_t)limit, &h.t, &h.n, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
		return;
	}
	api_reply(call->rt, call->token, pack_history, &h);
	free(h.t);
}

/* --- the kinds' own verbs ---------------------------------------------------------- */

typedef struct verb_req {
	const kind_env_t *env;
	const kind_verb_t *verb;
	const msgpack_object *params;
} verb_req_t;

static int pack_verb(void *arg, msgpack_packer *pk, tank_error_t *e)
{
	verb_req_t *q = arg;
	return q->verb->fn(q->env, q->params, pk, e);
}

/* A verb's method: its params checked by its types, then its function.
 * The verb is found by the method's name (each kind's verbs are on the
 * list once). */
static const kind_verb_t *verb_named(const kind_t *const *kinds, const char *name,
				     const kind_t **kind)
{
	for (size_t k = 0; kinds[k]; k++)
		for (size_t v = 0; v < kinds[k]->nverbs; v++)
			if (!strcmp(kinds[k]->verbs[v].name, name)) {
				*kind = kinds[k];
				return &kinds[k]->verbs[v];
			}
	return NULL;
}

/* kind_reply_t's: the api's, on the call's token. */
static int later_answer(rt_t *rt, const kind_reply_t *r, kind_pack_fn pack, void *arg)
{
	return api_reply(rt, (api_token_t){ r->conn, r->msgid }, pack, arg);
}

static int later_fail(rt_t *rt, const kind_reply_t *r, int err, const char *message)
{
	return api_reply_err(rt, (api_token_t){ r->conn, r->msgid }, err, message);
}

static void m_verb(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	const kind_t *kind = NULL;
	const kind_verb_t *v = verb_named(kinds_of(d), call->method, &kind);
	tank_error_t e;

	if (!v) {
		api_reply_error(call->rt, call->token, API_INTERNAL, "no such verb", NULL, NULL);
		return;
	}
	if (api_params_check(params, v->types, &e) < 0)
		return reply_check_error(call, &e);
	settle(d);
	if ((v->flags & KIND_VERB_KINDED) && params->via.array.size > 1 &&
	    params->via.array.ptr[1].type == MSGPACK_OBJECT_MAP &&
	    api_map_get(&params->via.array.ptr[1], "kind")) {
		/* A verb several kinds have: the one of the kind named. */
		const kind_t *const *kinds = kinds_of(d);
		const kind_t *want;
		char have[128] = "";
		if (!kind_param(call, d, params, 1, &want))
			return;
		v = NULL;
		for (size_t k = 0; kinds[k]; k++)
			for (size_t i = 0; i < kinds[k]->nverbs; i++) {
				if (strcmp(kinds[k]->verbs[i].name, call->method) != 0)
					continue;
				size_t n = strlen(have);
				snprintf(have + n, sizeof have - n, "%s%s", n ? ", " : "", kinds[k]->name);
				if (kinds[k] == want) {
					v = &kinds[k]->verbs[i];
					kind = want;
				}
			}
		if (!v) {
			char msg[256];
			snprintf(msg, sizeof msg, "%s: the %s kind has no %s (it is for: %s)",
				 call->method, want->name, call->method, have);
			api_reply_error(call->rt, call->token, API_BAD_REQUEST, msg, NULL, NULL);
			return;
		}
	}
	if (v->later) {
		kind_reply_t r = { call->token.conn, call->token.msgid, later_answer, later_fail };
		tank_error_clear(&e);
		int rc = v->later(d->kinds, params, &r, &e);
		if (rc < 0)
			api_reply_err(call->rt, call->token, rc, e.msg[0] ? e.msg : NULL);
		if (rc <= 0)
			return;
	}
	verb_req_t q = { d->kinds, v, params };
	/* A verb may send the loop a request (Stack's up lifts an abort):
	 * the client hears of it once it is stored. */
	(void)reply_packed_to(call, kind, "", pack_verb, &q, d);
}

/* --- the kinds' own methods --------------------------------------------------------- */

static const kind_method_t *method_named(const kind_t *const *kinds, const char *name)
{
	for (size_t k = 0; kinds[k]; k++)
		for (size_t m = 0; m < kinds[k]->nmethods; m++)
			if (!strcmp(kinds[k]->methods[m].name, name))
				return &kinds[k]->methods[m];
	return NULL;
}

typedef struct kmethod_req {
	const kind_env_t *env;
	const kind_method_t *m;
	const kind_caller_t *who;
	const msgpack_object *params;
} kmethod_req_t;

static int pack_kmethod(void *arg, msgpack_packer *pk, tank_error_t *e)
{
	kmethod_req_t *q = arg;
	return q->m->fn(q->env, q->who, q->params, pk, e);
}

/* The caller as a kind sees it: the peer's credentials and user name. */
static void caller_of(const api_call_t *call, kind_caller_t *who)
{
	struct passwd pw, *res = NULL;
	char buf[1024];

	*who = (kind_caller_t){ .uid = (uint32_t)call->uid, .gid = (uint32_t)call->gid,
				.pid = (int32_t)call->pid };
	if (getpwuid_r(call->uid, &pw, buf, sizeof buf, &res) == 0 && res && pw.pw_name)
		snprintf(who->user, sizeof who->user, "%s", pw.pw_name);
	else
		snprintf(who->user, sizeof who->user, "%u", (unsigned)call->uid);
}

/* kind_stream_t's notify: the api's, on the call's token. */
static int stream_notify(rt_t *rt, const kind_stream_t *s, const char *event, kind_pack_fn pack,
			 void *arg)
{
	return api_notify(rt, (api_token_t){ s->conn, s->msgid }, event, pack, arg);
}

static void m_kind_method(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	const kind_method_t *m = method_named(kinds_of(d), call->method);
	kind_caller_t who;
	tank_error_t e;

	if (!m) {
		api_reply_error(call->rt, call->token, API_INTERNAL, "no such method", NULL, NULL);
		return;
	}
	if (api_params_check(params, m->types, &e) < 0 || (m->check && m->check(params, &e) < 0))
		return reply_check_error(call, &e);
	settle(d);
	caller_of(call, &who);
	kmethod_req_t q = { d->kinds, m, &who, params };
	if (reply_packed_to(call, NULL, NULL, pack_kmethod, &q, m->after_loop ? d : NULL) == 0 &&
	    m->follow) {
		kind_stream_t st = { call->token.conn, call->token.msgid, stream_notify };
		m->follow(d->kinds, &st, params);
	}
}

size_t api_methods_table(api_daemon_t *d, api_method_t table[API_NMETHODS])
{
	static const struct { const char *name; api_handler_fn fn; } m[] = {
		{ "ping", m_ping },       { "version", m_version },
		{ "apply", m_apply },     { "delete", m_delete },
		{ "get", m_get },         { "list", m_list },
		{ "status", m_status },   { "nudge", m_nudge },
		{ "sync", m_sync },
		{ "history", m_history },
		{ "daemon.status", m_daemon_status }, { "daemon.reexec", m_daemon_reexec },
	};
	size_t n = sizeof m / sizeof m[0];

	if (!d->kinds) {
		/* A daemon that did not build its kinds (benches, tests): the
		 * list's, with no instances. */
		d->own_kinds = (kind_env_t){ .rt = d->rt, .store = d->store,
					     .log_dir = d->log_dir,
					     .loop_name = API_RECONCILER_NAME,
					     .pods = d->pods, .kinds = tank_kinds };
		d->kinds = &d->own_kinds;
	}
	for (size_t i = 0; i < n; i++) {
		table[i].name = m[i].name;
		table[i].fn = m[i].fn;
		table[i].ctx = d;
	}
	const kind_t *const *kinds = kinds_of(d);
	for (size_t k = 0; kinds[k]; k++)
		for (size_t v = 0; v < kinds[k]->nverbs && n < API_NMETHODS; v++) {
			/* A verb of several kinds (KIND_VERB_KINDED) is one method. */
			const kind_t *first = NULL;
			if (verb_named(kinds, kinds[k]->verbs[v].name, &first) &&
			    first != kinds[k])
				continue;
			table[n++] = (api_method_t){ kinds[k]->verbs[v].name, m_verb, d };
		}
	for (size_t k = 0; kinds[k]; k++)
		for (size_t m = 0; m < kinds[k]->nmethods && n < API_NMETHODS; m++)
			table[n++] = (api_method_t){ kinds[k]->methods[m].name, m_kind_method, d };
	return n;
}

/* What each method checks of its params before it acts (the handlers
 * above run the same functions). */
int api_methods_decode(const char *method, const msgpack_object *params, tank_error_t *e)
{
	static const struct { const char *name, *types; } sig[] = {
		{ "ping", "" },   { "version", "" }, { "apply", "a?m" }, { "delete", "a?m" },
		{ "get", "s?m" }, { "list", "?m" },  { "status", "?sm" },
		{ "nudge", "" }, { "sync", "" },
		{ "history", "s?m" }, { "daemon.status", "" }, { "daemon.reexec", "" },
	};
	const char *types = NULL;
	const kind_t *vk;
	int err;

	for (size_t i = 0; i < sizeof sig / sizeof sig[0]; i++)
		if (strcmp(sig[i].name, method) == 0)
			types = sig[i].types;
	const kind_verb_t *verb = types ? NULL : verb_named(tank_kinds, method, &vk);
	if (verb)
		types = verb->types;
	const kind_method_t *km = types ? NULL : method_named(tank_kinds, method);
	if (km)
		return (err = api_params_check(params, km->types, e)) < 0 ? err
		       : km->check ? km->check(params, e) : 0;
	if (!types)
		return tank_error_set(e, -ENOSYS, "no method %s", method);
	if ((err = api_params_check(params, types, e)) < 0)
		return err;
	const kind_t *kind;
	size_t kat = strcmp(method, "list") == 0 ? 0 : 1;
	/* A kind's verb reads its own options (kind.h); the others' map is
	 * {kind?}. */
	if (!verb && strchr(types, 'm') &&
	    (err = kind_of_params(tank_kinds, params, kat, &kind, e)) < 0)
		return err;
	if (strcmp(method, "apply") == 0) {
		apply_job_t j;
		const msgpack_object *arr = &params->via.array.ptr[0];
		if ((err = apply_job_init(&j, NULL, (api_token_t){ 0 }, arr->via.array.size)) == 0) {
			j.arr = arr;
			apply_job_validate(&j, j.n);
			err = j.errs.count ? tank_error_set(e, TANK_EINVALID, "%s",
							    j.errs.stored ? j.errs.msgs[0] : "invalid")
					   : j.err;
		}
		apply_job_free(&j);
		return err;
	}
	if (strcmp(method, "delete") == 0) {
		const msgpack_object *arr = &params->via.array.ptr[0];
		for (uint32_t i = 0; i < arr->via.array.size; i++)
			if (arr->via.array.ptr[i].type != MSGPACK_OBJECT_STR)
				return tank_error_set(e, -EPROTO, "params[0][%u]: expected string", i);
		return 0;
	}
	if (strcmp(method, "history") == 0) {
		int64_t limit = 0;
		return history_opts(params, &limit, e);
	}
	return 0;
}
