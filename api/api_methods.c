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
#include <fcntl.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kit_errors.h"
#include "pod/pod_deps.h"
#include "pod/pod_log.h"
#include "pod/pod_spec.h"
#include "reconciler/rc_loop.h"
#include "manifest/mf.h"
#include "pod/pod_manifest.h"
#include "pod/pod_mgr.h"
#include "stack/stack_mgr.h"
#include "api/api_stacks.h"
#include "stack/stack_spec.h"
#include "common/tank_map.h"

#define API_LOG_TAIL_DEFAULT 100
#define API_LOG_TAIL_MAX 100000

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

static void reply_pod_error(const api_call_t *call, int err, const char *name,
			    const tank_error_t *e)
{
	api_reply_object_error(call, err, "pod", name, e);
}

static void nudge(api_daemon_t *d)
{
	rt_pid_t pid = rt_whereis(d->rt, API_RECONCILER_NAME);
	if (pid)
		rc_nudge(d->rt, pid);
}

/* The kind asked for by the options map at params[at]; false when the
 * call was answered (a bad kind). */
static bool kind_param(const api_call_t *call, const msgpack_object *params, size_t at,
		       api_kind_t *kind)
{
	tank_error_t e;
	tank_error_clear(&e);
	if (api_kind_of(params, at, kind, &e) < 0) {
		api_reply_error(call->rt, call->token, API_BAD_REQUEST, e.msg, NULL, NULL);
		return false;
	}
	return true;
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

static int pack_version(msgpack_packer *pk, void *arg)
{
	api_daemon_t *d = arg;
	st_usage_t u;
	bool has_u = d->store && st_usage(d->store, &u) == 0;
	int rc = msgpack_pack_map(pk, 3 + has_u);
	rc |= pk_key(pk, "version");
	rc |= api_pack_cstr(pk, d->version);
	rc |= pk_key(pk, "schema");
	rc |= msgpack_pack_uint32(pk, ST_SCHEMA_VERSION);
	rc |= pk_key(pk, "protocol");
	rc |= api_pack_cstr(pk, "msgpack-rpc");
	if (has_u) {
		/* How full the store is, and whether its writes fail. */
		rc |= pk_key(pk, "store");
		rc |= msgpack_pack_map(pk, 6);
		rc |= pk_key(pk, "used");            rc |= msgpack_pack_uint64(pk, u.used);
		rc |= pk_key(pk, "total");           rc |= msgpack_pack_uint64(pk, u.total);
		rc |= pk_key(pk, "file");            rc |= msgpack_pack_uint64(pk, u.high_water);
		rc |= pk_key(pk, "reserve");         rc |= msgpack_pack_uint64(pk, u.reserve);
		rc |= pk_key(pk, "flush_failures");  rc |= msgpack_pack_uint64(pk, u.flush_failures);
		rc |= pk_key(pk, "history_dropped"); rc |= msgpack_pack_uint64(pk, u.history_dropped);
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

/* --- apply, delete ----------------------------------------------------------- */

typedef struct apply_out {
	const st_pod_in_t *in;
	const st_apply_result_t *res;
	size_t n;
	size_t npods;                 /* the first npods are pods, the rest stacks */
} apply_out_t;

static int pack_apply(msgpack_packer *pk, void *arg)
{
	static const char *const actions[] = { "unchanged", "created", "configured" };
	apply_out_t *o = arg;
	int rc = msgpack_pack_array(pk, o->n);
	for (size_t i = 0; i < o->n; i++) {
		rc |= msgpack_pack_map(pk, 5);
		rc |= pk_key(pk, "kind");
		rc |= api_pack_cstr(pk, i < o->npods ? "pod" : "stack");
		rc |= pk_key(pk, "name");
		rc |= api_pack_cstr(pk, o->in[i].name);
		rc |= pk_key(pk, "uid");
		rc |= api_pack_cstr(pk, o->res[i].uid);
		rc |= pk_key(pk, "action");
		rc |= api_pack_cstr(pk, actions[o->res[i].action]);
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

/* Descriptors tankd keeps for itself: store, socket, clients, signals. */
#define API_FD_RESERVE 256

/* Running out of descriptors is tankd's problem, not its containers': an
 * apply whose pods would need more than RLIMIT_NOFILE allows is refused
 * with both figures, instead of accepted and then failing starts with
 * EMFILE.  Counted against the pods tracked now (a pod the batch
 * replaces counts once, with its new containers). */
static int apply_fits(rt_t *rt, api_token_t token, api_daemon_t *d, pod_spec_t **specs,
		      size_t n)
{
	struct rlimit rl;
	size_t ctrs;
	char msg[TANK_ERROR_MSG];

	if (!d->pods || getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	size_t replaced = 0;
	ctrs = pod_mgr_ncontainers(d->pods, NULL);
	for (size_t i = 0; i < n; i++) {
		ctrs += specs[i]->container_count;
		replaced += pod_mgr_ncontainers(d->pods, specs[i]->name);
	}
	/* A name twice in the batch (refused later) must not wrap around. */
	ctrs = replaced < ctrs ? ctrs - replaced : 0;
	size_t need = API_FD_RESERVE + POD_FDS_PER_CONTAINER * ctrs;
	if (need <= rl.rlim_cur)
		return 0;
	snprintf(msg, sizeof msg,
		 "%zu containers would need %zu descriptors in tankd, its limit is %llu "
		 "(RLIMIT_NOFILE: %d per container and %d for tankd; raise the limit, "
		 "e.g. LimitNOFILE= under systemd)",
		 ctrs, need, (unsigned long long)rl.rlim_cur, POD_FDS_PER_CONTAINER,
		 API_FD_RESERVE);
	api_reply_error(rt, token, API_RESOURCE_LIMIT, msg, NULL, NULL);
	return TANK_ELIMIT;
}

/* An apply: every object validated first (a rejected batch applies
 * nothing), then one transaction.  Up to API_APPLY_CHUNK objects it all
 * happens in the call; a bigger batch is copied and validated by a worker
 * actor, API_APPLY_CHUNK objects per turn, with the socket served in
 * between (10,000 pods validated in one go held every client for tens of
 * milliseconds), and then committed in one transaction as before. */
#define API_APPLY_CHUNK 1000

typedef struct apply_job {
	api_daemon_t *d;
	api_token_t token;
	const msgpack_object *arr;    /* the objects: the call's, or copy's */
	msgpack_unpacked copy;        /* a worker's own copy of them; its strings */
	msgpack_sbuffer copy_buf;     /* point into this buffer */
	bool copied;
	size_t n, at;
	pod_spec_t **specs;           /* [i]: object i when it is a pod */
	stack_spec_t **stacks;        /* [i]: object i when it is a stack */
	char **bufs;                  /* each spec encoded as it is validated */
	st_pod_in_t *in;
	kit_errors_t errs;
	msgpack_zone *zone;
	int err;                      /* a failure that is not the input's */
} apply_job_t;

static void apply_job_free(apply_job_t *j)
{
	for (size_t i = 0; j->specs && i < j->n; i++)
		pod_spec_free(j->specs[i]);
	for (size_t i = 0; j->stacks && i < j->n; i++)
		stack_spec_free(j->stacks[i]);
	free(j->stacks);
	for (size_t i = 0; j->bufs && i < j->n; i++)
		free(j->bufs[i]);
	free(j->specs);
	free(j->bufs);
	free(j->in);
	if (j->zone)
		msgpack_zone_free(j->zone);
	if (j->copied) {
		msgpack_unpacked_destroy(&j->copy);
		msgpack_sbuffer_destroy(&j->copy_buf);
	}
	kit_errors_free(&j->errs);
}

static int apply_job_init(apply_job_t *j, api_daemon_t *d, api_token_t token, size_t n)
{
	memset(j, 0, sizeof *j);
	j->d = d;
	j->token = token;
	j->n = n;
	kit_errors_init(&j->errs);
	if (!(j->specs = calloc(n + 1, sizeof *j->specs)) ||
	    !(j->stacks = calloc(n + 1, sizeof *j->stacks)) ||
	    !(j->bufs = calloc(n + 1, sizeof *j->bufs)) ||
	    !(j->in = calloc(n + 1, sizeof *j->in)) || !(j->zone = msgpack_zone_new(1024)))
		return -ENOMEM;
	return 0;
}

/* Validates up to `max` more objects.  Each object may say its `kind`
 * (absent = Pod), as in a manifest: pods and stacks are applied; another
 * kind is refused naming the item. */
static void apply_job_validate(apply_job_t *j, size_t max)
{
	static const mf_registry_t kinds = { .kinds = { &pod_mf_kind, &stack_mf_kind }, .n = 2 };

	for (size_t end = j->at + max < j->n ? j->at + max : j->n; j->at < end; j->at++) {
		size_t i = j->at;
		kit_errors_t one;
		msgpack_object rest;
		const mf_kind_t *k;
		char prefix[32];
		snprintf(prefix, sizeof prefix, "pods[%zu]: ", i);
		if (!(k = mf_kind_of(&kinds, &j->arr->via.array.ptr[i], j->zone, &rest, prefix,
				     &j->errs)))
			continue;
		kit_errors_init(&one);
		if (k == &stack_mf_kind) {
			if (stack_spec_from_msgpack(&rest, &j->stacks[i], &one) == -ENOMEM)
				j->err = -ENOMEM;
			kit_errors_move(&j->errs, &one, prefix);
			kit_errors_free(&one);
			continue;
		}
		if (pod_spec_from_msgpack(&rest, &j->specs[i], &one) < 0)
			kit_errors_move(&j->errs, &one, prefix);
		kit_errors_free(&one);
		/* Encoded now, so the commit is only the transaction. */
		size_t len;
		int err;
		if (j->specs[i] && !j->errs.count && !j->err) {
			if ((err = pod_spec_encode(j->specs[i], &j->bufs[i], &len)) < 0) {
				j->err = err;
				continue;
			}
			j->in[i] = (st_pod_in_t){ j->specs[i]->name, j->bufs[i], len };
		}
	}
}

/* The whole batch, flattened: every pod (those given and those inline in
 * stacks) and every stack, encoded, with their results. */
typedef struct apply_all {
	pod_spec_t **pods;            /* borrowed from the job */
	st_pod_in_t *in;              /* pods, then stacks */
	char **own;                   /* encodings made here (inline pods, stacks) */
	st_apply_result_t *res;
	size_t npods, nstacks, nown;
} apply_all_t;

static void apply_all_free(apply_all_t *a)
{
	for (size_t i = 0; i < a->nown; i++)
		free(a->own[i]);
	free(a->own);
	free(a->pods);
	free(a->in);
	free(a->res);
}

static int apply_all_build(apply_job_t *j, apply_all_t *a)
{
	size_t np = 0, ns = 0, len;
	int err;

	memset(a, 0, sizeof *a);
	for (size_t i = 0; i < j->n; i++) {
		np += j->specs[i] != NULL;
		if (j->stacks[i]) {
			ns++;
			for (size_t k = 0; k < j->stacks[i]->npods; k++)
				np += j->stacks[i]->pods[k].inline_spec != NULL;
		}
	}
	if (!(a->pods = calloc(np + 1, sizeof *a->pods)) ||
	    !(a->in = calloc(np + ns + 1, sizeof *a->in)) ||
	    !(a->own = calloc(np + ns + 1, sizeof *a->own)) ||
	    !(a->res = calloc(np + ns + 1, sizeof *a->res)))
		return -ENOMEM;
	for (size_t i = 0; i < j->n; i++)
		if (j->specs[i]) {
			a->pods[a->npods] = j->specs[i];
			a->in[a->npods++] = j->in[i];
		}
	for (size_t i = 0; i < j->n; i++)
		for (size_t k = 0; j->stacks[i] && k < j->stacks[i]->npods; k++) {
			pod_spec_t *ps = j->stacks[i]->pods[k].inline_spec;
			if (!ps)
				continue;
			if ((err = pod_spec_encode(ps, &a->own[a->nown], &len)) < 0)
				return err;
			a->pods[a->npods] = ps;
			a->in[a->npods++] = (st_pod_in_t){ ps->name, a->own[a->nown++], len };
		}
	for (size_t i = 0; i < j->n; i++)
		if (j->stacks[i]) {
			if ((err = stack_spec_encode(j->stacks[i], &a->own[a->nown], &len)) < 0)
				return err;
			a->in[a->npods + a->nstacks++] =
				(st_pod_in_t){ j->stacks[i]->name, a->own[a->nown++], len };
		}
	return 0;
}

/* Stacks against the batch and the store: a pod given twice (once inline),
 * a stack given twice, a named member that exists nowhere, a pod in two
 * stacks.  Problems go to j->errs. */
static int apply_stacks_check(apply_job_t *j, const apply_all_t *a)
{
	tank_map_t pods, owner, stacks;
	char b[96];
	int rc = 0;

	if (!a->nstacks)
		return 0;               /* a pods-only batch: the store refuses doubles */
	tank_map_init(&pods);
	tank_map_init(&owner);
	tank_map_init(&stacks);
	for (size_t i = 0; i < a->npods && !rc; i++) {
		if (tank_map_get(&pods, a->pods[i]->name))
			kit_errors_add(&j->errs, "pod %s is given twice in this apply "
				       "(inline in a stack counts)",
				       kit_quote(a->pods[i]->name, strlen(a->pods[i]->name), b));
		else
			rc = tank_map_put(&pods, a->pods[i]->name, a->pods[i], NULL);
	}
	for (size_t i = 0; i < j->n && !rc; i++) {
		const stack_spec_t *s = j->stacks[i];
		if (!s)
			continue;
		if (tank_map_get(&stacks, s->name)) {
			kit_errors_add(&j->errs, "pods[%zu]: stack %s is given twice", i,
				       kit_quote(s->name, strlen(s->name), b));
			continue;
		}
		if ((rc = tank_map_put(&stacks, s->name, (void *)s, NULL)) < 0)
			break;
		for (size_t k = 0; k < s->npods && !rc; k++) {
			const char *pod = s->pods[k].name;
			const stack_spec_t *other = tank_map_get(&owner, pod);
			if (other) {
				kit_errors_add(&j->errs, "pods[%zu]: %s: pods[%zu]: pod %s is also "
					       "in stack %s of this apply", i, s->name, k,
					       kit_quote(pod, strlen(pod), b), other->name);
				continue;
			}
			if ((rc = tank_map_put(&owner, pod, (void *)s, NULL)) < 0)
				break;
			if (!s->pods[k].inline_spec && !tank_map_get(&pods, pod)) {
				st_pod_t sp;
				if (st_pod_get(j->d->store, pod, &sp, NULL) == 0)
					st_pod_clear(&sp);
				else
					kit_errors_add(&j->errs, "pods[%zu]: %s: pods[%zu]: no pod "
						       "named %s in this apply or stored", i,
						       s->name, k, kit_quote(pod, strlen(pod), b));
			}
		}
	}
	/* Stored stacks not re-applied here keep their pods. */
	for (size_t i = 0; i < j->n && !rc && j->d->stacks; i++) {
		const stack_spec_t *s = j->stacks[i];
		for (size_t k = 0; s && k < s->npods; k++) {
			const char *held = stack_mgr_stack_of(j->d->stacks, s->pods[k].name);
			if (held && strcmp(held, s->name) != 0 && !tank_map_get(&stacks, held))
				kit_errors_add(&j->errs, "pods[%zu]: %s: pods[%zu]: pod %s is "
					       "already in stack %s", i, s->name, k,
					       kit_quote(s->pods[k].name, strlen(s->pods[k].name), b),
					       held);
		}
	}
	tank_map_destroy(&pods);
	tank_map_destroy(&owner);
	tank_map_destroy(&stacks);
	return rc;
}

/* Answers: the errors, or the commit of every object in one transaction. */
static void apply_job_finish(rt_t *rt, apply_job_t *j)
{
	apply_all_t a;
	tank_error_t e;
	int err;

	if (j->err || j->errs.count) {
		memset(&a, 0, sizeof a);
	} else if ((err = apply_all_build(j, &a)) < 0 || (err = apply_stacks_check(j, &a)) < 0) {
		j->err = err;
	}
	/* depends_on needs the whole batch and the store: checked here, in
	 * the same turn as the commit, so no other apply comes between. */
	tank_error_clear(&e);
	if (!j->errs.count && !j->err &&
	    (err = pod_deps_check(a.pods, a.npods, j->d->store, &j->errs, &e)) < 0) {
		api_reply_err(rt, j->token, err, e.msg[0] ? e.msg : NULL);
		goto out;
	}
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
	if (apply_fits(rt, j->token, j->d, a.pods, a.npods) < 0)
		goto out;
	st_coll_t *sc = NULL;
	tank_error_clear(&e);
	if (a.nstacks && (err = st_coll_open(j->d->store, &stack_coll_decl, &sc, &e)) < 0) {
		api_reply_err(rt, j->token, err, e.msg[0] ? e.msg : NULL);
		goto out;
	}
	st_coll_op_t ops[2] = {
		{ .c = NULL, .put = a.in, .nput = a.npods, .res = a.res },
		{ .c = sc, .put = a.in + a.npods, .nput = a.nstacks, .res = a.res + a.npods },
	};
	if ((err = st_coll_commit(j->d->store, ops, a.nstacks ? 2 : 1, &e)) < 0) {
		api_reply_err(rt, j->token, err, e.msg[0] ? e.msg : NULL);
	} else {
		apply_out_t o = { a.in, a.res, a.npods + a.nstacks, a.npods };
		api_reply(rt, j->token, pack_apply, &o);
		nudge(j->d);
	}
out:
	apply_all_free(&a);
}

static int apply_worker_init(rt_t *rt, void **state, void *arg)
{
	*state = arg;
	return rt_send(rt, rt_self(rt), 1, NULL, 0);
}

static void apply_worker_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	apply_job_t *j = state;

	(void)m;
	apply_job_validate(j, API_APPLY_CHUNK);
	if (j->at < j->n) {
		rt_slice_used(rt);
		if (rt_send(rt, rt_self(rt), 1, NULL, 0) == 0)
			return;
		api_reply_err(rt, j->token, -ENOMEM, "out of memory");
	} else {
		apply_job_finish(rt, j);
	}
	rt_exit_self(rt, RT_R_NORMAL);
}

static void apply_worker_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	(void)rt; (void)reason;
	apply_job_free(state);
	free(state);
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

	if (api_params_check(params, "a", &e) < 0)
		return reply_check_error(call, &e);
	arr = &params->via.array.ptr[0];
	if (arr->via.array.size <= API_APPLY_CHUNK) {
		apply_job_t job;
		if ((err = apply_job_init(&job, d, call->token, arr->via.array.size)) == 0) {
			job.arr = arr;
			apply_job_validate(&job, job.n);
			apply_job_finish(call->rt, &job);
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
	return;
fail:
	api_reply_err(call->rt, call->token, err, NULL);
	apply_job_free(j);
	free(j);
}

typedef struct delete_out {
	const char *const *names;
	const bool *deleted;
	size_t n;
} delete_out_t;

static int pack_delete(msgpack_packer *pk, void *arg)
{
	delete_out_t *o = arg;
	int rc = msgpack_pack_array(pk, o->n);
	for (size_t i = 0; i < o->n; i++) {
		rc |= msgpack_pack_map(pk, 2);
		rc |= pk_key(pk, "name");
		rc |= api_pack_cstr(pk, o->names[i]);
		rc |= pk_key(pk, "deleted");
		rc |= o->deleted[i] ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	}
	return rc ? -ENOMEM : 0;
}

/* A delete of more than API_DELETE_CHUNK names goes in transactions of
 * that many, one per turn of a worker actor, with the socket served in
 * between: 100,000 names in one transaction held every client for half
 * a second.  Each chunk is atomic; the whole is not (a crash in the
 * middle leaves the names of the chunks done deleted, and the caller,
 * who got no answer, deletes again).  The reply is the same either way. */
#define API_DELETE_CHUNK 1000

typedef struct bulk_delete {
	api_daemon_t *d;
	api_token_t token;
	char **names;
	bool *deleted;
	size_t n, at;
} bulk_delete_t;

static void bulk_delete_free(bulk_delete_t *b)
{
	for (size_t i = 0; b->names && i < b->n; i++)
		free(b->names[i]);
	free(b->names);
	free(b->deleted);
	free(b);
}

static int bulk_delete_init(rt_t *rt, void **state, void *arg)
{
	*state = arg;
	return rt_send(rt, rt_self(rt), 1, NULL, 0);
}

static void bulk_delete_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	bulk_delete_t *b = state;
	size_t k = b->n - b->at < API_DELETE_CHUNK ? b->n - b->at : API_DELETE_CHUNK;
	tank_error_t e;
	int err;

	(void)m;
	tank_error_clear(&e);
	if ((err = st_delete(b->d->store, (const char *const *)b->names + b->at, k,
			     b->deleted + b->at, &e)) < 0) {
		char msg[TANK_ERROR_MSG];
		snprintf(msg, sizeof msg, "deleted the first %zu of %zu names, then: %.400s", b->at,
			 b->n, e.msg[0] ? e.msg : tank_strerror(err));
		api_reply_err(rt, b->token, err, msg);
		nudge(b->d);
		rt_exit_self(rt, RT_R_NORMAL);
		return;
	}
	b->at += k;
	nudge(b->d);            /* the reconciler may start stopping them */
	rt_slice_used(rt);
	if (b->at < b->n) {
		if (rt_send(rt, rt_self(rt), 1, NULL, 0) < 0) {
			api_reply_err(rt, b->token, -ENOMEM, "out of memory");
			rt_exit_self(rt, RT_R_NORMAL);
		}
		return;
	}
	delete_out_t o = { (const char *const *)b->names, b->deleted, b->n };
	api_reply(rt, b->token, pack_delete, &o);
	rt_exit_self(rt, RT_R_NORMAL);
}

static void bulk_delete_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	(void)rt; (void)reason;
	bulk_delete_free(state);
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

	api_kind_t kind;
	if (api_params_check(params, "a?m", &e) < 0)
		return reply_check_error(call, &e);
	if (!kind_param(call, params, 1, &kind))
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
	if (kind == API_KIND_STACK) {
		api_stacks_delete(call, d, names, n);
		goto out;
	}
	if (n > API_DELETE_CHUNK) {
		bulk_delete_t *b = calloc(1, sizeof *b);
		if (!b) {
			err = -ENOMEM;
			goto out;
		}
		*b = (bulk_delete_t){ d, call->token, names, deleted, n, 0 };
		if ((err = rt_spawn(call->rt, &bulk_delete_b, b, NULL)) < 0) {
			free(b);
			goto out;
		}
		return;         /* the worker owns names and deleted now */
	}
	tank_error_clear(&e);
	if ((err = st_delete(d->store, (const char *const *)names, n, deleted, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg[0] ? e.msg : NULL);
		err = 0;
		goto out;
	}
	delete_out_t o = { (const char *const *)names, deleted, n };
	api_reply(call->rt, call->token, pack_delete, &o);
	nudge(d);
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
	rc |= msgpack_pack_map(pk, m->size + 2 + (kind ? 1 : 0) + nextra);
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
	if (!rc && extra)
		rc = extra(pk, arg);
	msgpack_unpacked_destroy(&u);
	return rc ? -ENOMEM : 0;
}

/* The stored canonical spec map with `generation` and `uid` added. */
static int pack_pod(msgpack_packer *pk, const st_pod_t *p)
{
	return api_pack_record(pk, p, NULL, 0, NULL, NULL);
}

static int pack_pod_cb(msgpack_packer *pk, void *arg)
{
	return pack_pod(pk, arg);
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

static void m_get(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	char name[ST_NAME_MAX + 1];
	st_pod_t p;
	tank_error_t e;
	int err;

	api_kind_t kind;
	if (name_param(call, params, "s?m", name, sizeof name) < 0 ||
	    !kind_param(call, params, 1, &kind))
		return;
	if (kind == API_KIND_STACK)
		return api_stacks_get(call, d, name);
	tank_error_clear(&e);
	memset(&p, 0, sizeof p);
	if ((err = st_pod_get(d->store, name, &p, &e)) < 0) {
		reply_pod_error(call, err, name, &e);
		return;
	}
	api_reply(call->rt, call->token, pack_pod_cb, &p);
	st_pod_clear(&p);
}

typedef struct pods_out { st_pod_t *pods; size_t n; } pods_out_t;

static int pack_pods(msgpack_packer *pk, void *arg)
{
	pods_out_t *o = arg;
	int rc = msgpack_pack_array(pk, o->n);
	for (size_t i = 0; i < o->n && !rc; i++)
		rc = pack_pod(pk, &o->pods[i]);
	return rc;
}

static void m_list(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	pods_out_t o = { NULL, 0 };
	tank_error_t e;
	int err;

	api_kind_t kind;
	if (api_params_check(params, "?m", &e) < 0)
		return reply_check_error(call, &e);
	if (!kind_param(call, params, 0, &kind))
		return;
	if (kind == API_KIND_STACK)
		return api_stacks_list(call, d);
	tank_error_clear(&e);
	if ((err = st_pod_list(d->store, &o.pods, &o.n, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg);
		return;
	}
	api_reply(call->rt, call->token, pack_pods, &o);
	st_pod_list_free(o.pods, o.n);
}

/* --- status ------------------------------------------------------------------- */

static int pack_exit(msgpack_packer *pk, const st_exit_t *x)
{
	int rc;
	if (!x->present)
		return msgpack_pack_nil(pk);
	rc = msgpack_pack_map(pk, 2);
	rc |= pk_key(pk, "code");
	rc |= msgpack_pack_int32(pk, x->code);
	rc |= pk_key(pk, "signal");
	rc |= msgpack_pack_int32(pk, x->signal);
	return rc;
}

static int pack_opt_ms(msgpack_packer *pk, int64_t v)
{
	return v ? msgpack_pack_int64(pk, v) : msgpack_pack_nil(pk);
}

int api_pack_status(msgpack_packer *pk, const st_status_t *s, const char *stack)
{
	int rc = msgpack_pack_map(pk, 14);
	rc |= pk_key(pk, "name");            rc |= api_pack_cstr(pk, s->name);
	rc |= pk_key(pk, "outcome");
	rc |= s->outcome ? api_pack_cstr(pk, pod_outcome_name(s->outcome)) : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "stack");
	rc |= stack ? api_pack_cstr(pk, stack) : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "ready");           rc |= s->ready ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	rc |= pk_key(pk, "uid");             rc |= api_pack_cstr(pk, s->uid);
	rc |= pk_key(pk, "phase");           rc |= api_pack_cstr(pk, s->phase);
	rc |= pk_key(pk, "reason");          rc |= api_pack_cstr(pk, s->reason);
	rc |= pk_key(pk, "retries");         rc |= msgpack_pack_uint32(pk, s->retries);
	rc |= pk_key(pk, "restarts");        rc |= msgpack_pack_uint32(pk, s->restarts);
	rc |= pk_key(pk, "generation");      rc |= msgpack_pack_uint64(pk, s->generation);
	rc |= pk_key(pk, "since");           rc |= pack_opt_ms(pk, s->since);
	rc |= pk_key(pk, "next_restart_at"); rc |= pack_opt_ms(pk, s->next_restart_at);
	rc |= pk_key(pk, "last_exit");       rc |= pack_exit(pk, &s->last_exit);
	rc |= pk_key(pk, "containers");
	rc |= msgpack_pack_array(pk, s->n_containers);
	for (size_t i = 0; i < s->n_containers; i++) {
		const st_container_status_t *c = &s->containers[i];
		rc |= msgpack_pack_map(pk, 11);
		rc |= pk_key(pk, "name");       rc |= api_pack_cstr(pk, c->name);
		rc |= pk_key(pk, "ready");      rc |= c->ready ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
		rc |= pk_key(pk, "probe");
		rc |= c->probe[0] ? api_pack_cstr(pk, c->probe) : msgpack_pack_nil(pk);
		rc |= pk_key(pk, "phase");      rc |= api_pack_cstr(pk, c->phase);
		rc |= pk_key(pk, "reason");     rc |= api_pack_cstr(pk, c->reason);
		rc |= pk_key(pk, "pid");
		rc |= c->pid > 0 ? msgpack_pack_int32(pk, c->pid) : msgpack_pack_nil(pk);
		rc |= pk_key(pk, "restarts");   rc |= msgpack_pack_uint32(pk, c->restarts);
		rc |= pk_key(pk, "retries");    rc |= msgpack_pack_uint32(pk, c->retries);
		rc |= pk_key(pk, "last_exit");  rc |= pack_exit(pk, &c->last_exit);
		rc |= pk_key(pk, "started_at"); rc |= pack_opt_ms(pk, c->started_at);
		rc |= pk_key(pk, "log_dropped"); rc |= msgpack_pack_uint64(pk, c->log_dropped);
	}
	return rc ? -ENOMEM : 0;
}

typedef struct statuses {
	st_status_t *s;
	size_t n;
	const stack_mgr_t *stacks;    /* which stack each pod is in; may be NULL */
} statuses_t;

static const char *stack_of(const statuses_t *o, const char *pod)
{
	return o->stacks ? stack_mgr_stack_of(o->stacks, pod) : NULL;
}

static int pack_status_cb(msgpack_packer *pk, void *arg)
{
	statuses_t *o = arg;
	return api_pack_status(pk, o->s, stack_of(o, o->s->name));
}

static int pack_statuses(msgpack_packer *pk, void *arg)
{
	statuses_t *o = arg;
	int rc = msgpack_pack_array(pk, o->n);
	for (size_t i = 0; i < o->n && !rc; i++)
		rc = api_pack_status(pk, &o->s[i], stack_of(o, o->s[i].name));
	return rc;
}

/* The status of a pod that is stored but has none yet. */
static void pending_status(st_status_t *s, const st_pod_t *p)
{
	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", p->name);
	snprintf(s->uid, sizeof s->uid, "%s", p->uid);
	snprintf(s->phase, sizeof s->phase, "pending");
	snprintf(s->reason, sizeof s->reason, "not reconciled yet");
	s->generation = p->generation;
	s->since = p->updated_at;
}

/* Merges the status list (sorted by name) with the stored pods (walked in
 * name order): out gets every pod, pending for those without a status.
 * Entries are shallow copies (containers borrowed from the list). */
typedef struct merge {
	const statuses_t *have;
	st_status_t *out;
	size_t n, cap, at;
} merge_t;

static int merge_push(merge_t *m, const st_status_t *st)
{
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : m->have->n + 64;
		st_status_t *no = realloc(m->out, nc * sizeof *no);
		if (!no)
			return -ENOMEM;
		m->out = no;
		m->cap = nc;
	}
	m->out[m->n++] = *st;
	return 0;
}

static int merge_pending(void *ctx, const st_pod_t *p)
{
	merge_t *m = ctx;
	const statuses_t *h = m->have;
	st_status_t pend;

	/* Statuses of names before p without a pod: pods being deleted. */
	while (m->at < h->n && strcmp(h->s[m->at].name, p->name) < 0)
		if (merge_push(m, &h->s[m->at++]) < 0)
			return -ENOMEM;
	if (m->at < h->n && strcmp(h->s[m->at].name, p->name) == 0)
		return merge_push(m, &h->s[m->at++]);
	pending_status(&pend, p);
	return merge_push(m, &pend);
}

static void m_status(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	tank_error_t e;
	int err;

	api_kind_t kind;
	if (api_params_check(params, "?sm", &e) < 0)
		return reply_check_error(call, &e);
	if (!kind_param(call, params, 1, &kind))
		return;
	tank_error_clear(&e);
	if (kind == API_KIND_STACK) {
		char sname[ST_NAME_MAX + 1];
		bool one = params->via.array.size && params->via.array.ptr[0].type == MSGPACK_OBJECT_STR;
		if (one)
			api_obj_strcpy(&params->via.array.ptr[0], sname, sizeof sname);
		return api_stacks_status(call, d, one ? sname : NULL);
	}
	if (params->via.array.size && params->via.array.ptr[0].type == MSGPACK_OBJECT_STR) {
		char name[ST_NAME_MAX + 1];
		st_status_t s;
		api_obj_strcpy(&params->via.array.ptr[0], name, sizeof name);
		memset(&s, 0, sizeof s);
		if ((err = st_status_get(d->store, name, &s, &e)) == TANK_ENOTFOUND) {
			/* Stored but not reconciled yet: known, and pending. */
			st_pod_t p;
			if ((err = st_pod_get(d->store, name, &p, &e)) == 0) {
				pending_status(&s, &p);
				st_pod_clear(&p);
			}
		}
		if (err < 0) {
			reply_pod_error(call, err, name, &e);
			return;
		}
		statuses_t one = { &s, 1, d->stacks };
		api_reply(call->rt, call->token, pack_status_cb, &one);
		st_status_clear(&s);
		return;
	}
	statuses_t o = { NULL, 0, d->stacks };
	if ((err = st_status_list(d->store, &o.s, &o.n, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg);
		return;
	}
	/* Every stored pod is listed: those the reconciler has not reached
	 * yet (right after an apply) as pending. */
	merge_t mg = { &o, NULL, 0, 0, 0 };
	int mr = st_pod_foreach(d->store, merge_pending, &mg, NULL);
	while (mr == 0 && mg.at < o.n)
		mr = merge_push(&mg, &o.s[mg.at++]);
	if (mr == 0 && mg.n) {
		statuses_t all = { mg.out, mg.n, d->stacks };
		api_reply(call->rt, call->token, pack_statuses, &all);
	} else {
		api_reply(call->rt, call->token, pack_statuses, &o);
	}
	free(mg.out);
	st_status_list_free(o.s, o.n);
}

/* --- running, restart, nudge, sync ---------------------------------------------- */

typedef struct running_acc { msgpack_packer *pk; size_t n; int rc; } running_acc_t;

static void count_running(void *ctx, const char *name, pid_t pid)
{
	(void)name; (void)pid;
	((running_acc_t *)ctx)->n++;
}

static void pack_one_running(void *ctx, const char *name, pid_t pid)
{
	running_acc_t *a = ctx;
	a->rc |= api_pack_cstr(a->pk, name);
	a->rc |= msgpack_pack_int32(a->pk, pid);
}

static int pack_running(msgpack_packer *pk, void *arg)
{
	pod_mgr_t *pods = arg;
	running_acc_t a = { pk, 0, 0 };
	if (pods)
		pod_mgr_running(pods, count_running, &a);
	a.rc |= msgpack_pack_map(pk, a.n);
	if (pods)
		pod_mgr_running(pods, pack_one_running, &a);
	return a.rc ? -ENOMEM : 0;
}

static void m_running(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	tank_error_t e;
	if (api_params_check(params, "", &e) < 0)
		return reply_check_error(call, &e);
	api_reply(call->rt, call->token, pack_running, d->pods);
}

static void m_restart(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	rt_pid_t loop = rt_whereis(d->rt, API_RECONCILER_NAME);
	char name[ST_NAME_MAX + 1];
	int err;

	if (name_param(call, params, "s", name, sizeof name) < 0)
		return;
	if (!loop || !d->pods) {
		api_reply_error(call->rt, call->token, API_INTERNAL, "reconciler is not running", NULL, NULL);
		return;
	}
	if ((err = pod_mgr_restart(d->pods, d->rt, loop, name)) < 0) {
		reply_pod_error(call, err, name, NULL);
		return;
	}
	api_reply(call->rt, call->token, NULL, NULL);
}

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

/* --- logs, history ----------------------------------------------------------------- */

typedef struct lines { char **l; size_t n; } lines_t;

static int pack_lines(msgpack_packer *pk, void *arg)
{
	lines_t *o = arg;
	int rc = msgpack_pack_array(pk, o->n);
	for (size_t i = 0; i < o->n; i++)
		rc |= api_pack_cstr(pk, o->l[i]);
	return rc ? -ENOMEM : 0;
}

/* `logs` with follow: an actor that polls the container's log file and
 * sends new lines to the connection as [2, "log", [{container, line}…]]
 * notifications until the connection goes away.  Polling (every 250 ms)
 * rather than inotify keeps it to one small file read per tick, and it
 * notices rotation by the file shrinking or changing inode. */
#define API_FOLLOW_MS 250
#define API_FOLLOW_CHUNK (64u << 10)

typedef struct follow {
	api_token_t token;
	char path[PATH_MAX];
	char container[ST_NAME_MAX + 1];
	off_t off;
	ino_t ino;
	char part[4096];          /* a partial last line, kept for the next tick */
	size_t npart;
} follow_t;

typedef struct follow_batch {
	const follow_t *f;
	char *lines[256];
	size_t n;
} follow_batch_t;

static int pack_follow(msgpack_packer *pk, void *arg)
{
	follow_batch_t *b = arg;
	int rc = msgpack_pack_array(pk, b->n);
	for (size_t i = 0; i < b->n; i++) {
		rc |= msgpack_pack_map(pk, 2);
		rc |= pk_key(pk, "container");
		rc |= api_pack_cstr(pk, b->f->container);
		rc |= pk_key(pk, "line");
		rc |= api_pack_cstr(pk, b->lines[i]);
	}
	return rc ? -ENOMEM : 0;
}

static int follow_tick(rt_t *rt, follow_t *f)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd, err = 0;

	if (stat(f->path, &st) < 0)
		return 0;                 /* not yet created, or mid-rotation */
	if (st.st_ino != f->ino || st.st_size < f->off) {
		f->ino = st.st_ino;       /* rotated: the new file from its start */
		f->off = 0;
		f->npart = 0;
	}
	if (st.st_size == f->off)
		return 0;
	if ((fd = open(f->path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	if (!(buf = malloc(API_FOLLOW_CHUNK + sizeof f->part + 1))) {
		close(fd);
		return 0;
	}
	memcpy(buf, f->part, f->npart);
	n = pread(fd, buf + f->npart, API_FOLLOW_CHUNK, f->off);
	close(fd);
	if (n > 0) {
		follow_batch_t b = { .f = f, .n = 0 };
		size_t len = f->npart + (size_t)n, start = 0;
		f->off += n;
		for (size_t i = 0; i < len; i++) {
			if (buf[i] != '\n')
				continue;
			buf[i] = '\0';
			b.lines[b.n++] = buf + start;
			start = i + 1;
			if (b.n == 256) {
				err = api_notify(rt, f->token, "log", pack_follow, &b);
				b.n = 0;
				if (err == -ESRCH)
					break;
			}
		}
		if (b.n && err != -ESRCH)
			err = api_notify(rt, f->token, "log", pack_follow, &b);
		f->npart = len - start < sizeof f->part ? len - start : 0;
		memmove(f->part, buf + start, f->npart);
	}
	free(buf);
	return err == -ESRCH ? -ESRCH : 0;
}

static int follow_init(rt_t *rt, void **state, void *arg)
{
	follow_t *f = malloc(sizeof *f);
	struct stat st;
	int err;

	if (!f)
		return -ENOMEM;
	*f = *(follow_t *)arg;
	if (stat(f->path, &st) == 0) {
		f->off = st.st_size;
		f->ino = st.st_ino;
	}
	if ((err = rt_monitor(rt, f->token.conn, NULL)) < 0 ||
	    (err = rt_send_after(rt, rt_self(rt), API_FOLLOW_MS, 1, NULL, 0, NULL)) < 0) {
		free(f);
		return err;
	}
	*state = f;
	return 0;
}

static void follow_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	follow_t *f = state;
	if (m->type == RT_MSG_DOWN || follow_tick(rt, f) < 0 ||
	    rt_send_after(rt, rt_self(rt), API_FOLLOW_MS, 1, NULL, 0, NULL) < 0)
		rt_exit_self(rt, RT_R_NORMAL);
}

static void follow_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	(void)rt; (void)reason;
	free(state);
}

static const rt_behaviour_t log_follower = { "api_follow", follow_init, follow_handle, follow_terminate };

/* The options of logs [name, {container?, tail?, follow?}], checked. */
static int logs_opts(const msgpack_object *params, char *ctr, size_t cap, int64_t *tail,
		     bool *follow, tank_error_t *e)
{
	if (params->via.array.size < 2 || params->via.array.ptr[1].type != MSGPACK_OBJECT_MAP)
		return 0;
	const msgpack_object *opts = &params->via.array.ptr[1], *o;
	if ((o = api_map_get(opts, "container")) && o->type != MSGPACK_OBJECT_NIL &&
	    !api_obj_strcpy(o, ctr, cap))
		return tank_error_set(e, -EPROTO, "params[1].container: expected string");
	if ((o = api_map_get(opts, "follow")) && o->type == MSGPACK_OBJECT_BOOLEAN)
		*follow = o->via.boolean;
	if ((o = api_map_get(opts, "tail")) && o->type != MSGPACK_OBJECT_NIL &&
	    (!api_obj_int(o, tail) || *tail < 0 || *tail > API_LOG_TAIL_MAX))
		return tank_error_set(e, -EPROTO,
				      "params[1].tail: expected an integer from 0 to 100000");
	return 0;
}

static void m_logs(const api_call_t *call, const msgpack_object *params, void *ctx)
{
	api_daemon_t *d = ctx;
	char name[ST_NAME_MAX + 1], ctr[ST_NAME_MAX + 1] = "", msg[2 * ST_NAME_MAX + 48];
	int64_t tail = API_LOG_TAIL_DEFAULT;
	bool follow = false;
	st_status_t s;
	tank_error_t e;
	int err;

	if (name_param(call, params, "s?m", name, sizeof name) < 0)
		return;
	tank_error_clear(&e);
	if (logs_opts(params, ctr, sizeof ctr, &tail, &follow, &e) < 0) {
		api_reply_error(call->rt, call->token, API_BAD_REQUEST, e.msg, NULL, NULL);
		return;
	}
	memset(&s, 0, sizeof s);
	tank_error_clear(&e);
	if ((err = st_status_get(d->store, name, &s, &e)) < 0) {
		reply_pod_error(call, err, name, &e);
		return;
	}
	bool found = !ctr[0] && s.n_containers;
	for (size_t i = 0; i < s.n_containers && ctr[0]; i++)
		found |= strcmp(s.containers[i].name, ctr) == 0;
	if (!ctr[0] && s.n_containers)
		snprintf(ctr, sizeof ctr, "%s", s.containers[0].name);
	st_status_clear(&s);
	if (!found) {
		snprintf(msg, sizeof msg, "pod \"%s\" has no container \"%s\"", name, ctr);
		api_reply_error(call->rt, call->token, API_NOT_FOUND, msg, NULL, NULL);
		return;
	}
	lines_t o = { NULL, 0 };
	if ((err = pod_log_tail(d->log_dir, name, ctr, (size_t)tail, &o.l, &o.n, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg);
		return;
	}
	api_reply(call->rt, call->token, pack_lines, &o);
	pod_log_lines_free(o.l, o.n);
	if (follow) {
		follow_t f = { .token = call->token };
		snprintf(f.path, sizeof f.path, "%s/%s/%s.log", d->log_dir, name, ctr);
		snprintf(f.container, sizeof f.container, "%s", ctr);
		/* Without memory the follow just ends: the client sees EOF. */
		(void)rt_spawn(d->rt, &log_follower, &f, NULL);
	}
}

typedef struct hist { st_transition_t *t; size_t n; } hist_t;

int api_pack_history(msgpack_packer *pk, const st_transition_t *t, size_t n)
{
	int rc = msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++) {
		rc |= msgpack_pack_map(pk, 4);
		rc |= pk_key(pk, "at");     rc |= msgpack_pack_int64(pk, t[i].at);
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
	if (params->via.array.size < 2 || params->via.array.ptr[1].type != MSGPACK_OBJECT_MAP)
		return 0;
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
	api_kind_t kind;
	if (!kind_param(call, params, 1, &kind))
		return;
	if (kind == API_KIND_STACK)
		return api_stacks_history(call, d, name, (size_t)limit);
	memset(&p, 0, sizeof p);
	tank_error_clear(&e);
	if ((err = st_pod_get(d->store, name, &p, &e)) < 0) {
		reply_pod_error(call, err, name, &e);
		return;
	}
	st_pod_clear(&p);
	if ((err = st_history(d->store, name, (size_t)limit, &h.t, &h.n, &e)) < 0) {
		api_reply_err(call->rt, call->token, err, e.msg);
		return;
	}
	api_reply(call->rt, call->token, pack_history, &h);
	free(h.t);
}

size_t api_methods_table(api_daemon_t *d, api_method_t table[API_NMETHODS])
{
	static const struct { const char *name; api_handler_fn fn; } m[] = {
		{ "ping", m_ping },       { "version", m_version },
		{ "apply", m_apply },     { "delete", m_delete },
		{ "get", m_get },         { "list", m_list },
		{ "status", m_status },   { "running", m_running },
		{ "restart", m_restart }, { "nudge", m_nudge },
		{ "sync", m_sync },       { "logs", m_logs },
		{ "history", m_history },
		{ "up", api_stacks_up },  { "down", api_stacks_down },
	};
	size_t n = sizeof m / sizeof m[0];

	for (size_t i = 0; i < n; i++) {
		table[i].name = m[i].name;
		table[i].fn = m[i].fn;
		table[i].ctx = d;
	}
	return n;
}

/* What each method checks of its params before it acts (the handlers
 * above run the same functions). */
int api_methods_decode(const char *method, const msgpack_object *params, tank_error_t *e)
{
	static const struct { const char *name, *types; } sig[] = {
		{ "ping", "" },   { "version", "" }, { "apply", "a" }, { "delete", "a?m" },
		{ "get", "s?m" }, { "list", "?m" },  { "status", "?sm" }, { "running", "" },
		{ "restart", "s" }, { "nudge", "" }, { "sync", "" },   { "logs", "s?m" },
		{ "history", "s?m" }, { "up", "s" }, { "down", "s" },
	};
	const char *types = NULL;
	int err;

	for (size_t i = 0; i < sizeof sig / sizeof sig[0]; i++)
		if (strcmp(sig[i].name, method) == 0)
			types = sig[i].types;
	if (!types)
		return tank_error_set(e, -ENOSYS, "no method %s", method);
	if ((err = api_params_check(params, types, e)) < 0)
		return err;
	api_kind_t kind;
	size_t kat = strcmp(method, "list") == 0 ? 0 : 1;
	if (strchr(types, 'm') && strcmp(method, "logs") != 0 &&
	    (err = api_kind_of(params, kat, &kind, e)) < 0)
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
	if (strcmp(method, "logs") == 0) {
		char ctr[ST_NAME_MAX + 1] = "";
		int64_t tail = 0;
		bool follow = false;
		return logs_opts(params, ctr, sizeof ctr, &tail, &follow, e);
	}
	if (strcmp(method, "history") == 0) {
		int64_t limit = 0;
		return history_opts(params, &limit, e);
	}
	return 0;
}
