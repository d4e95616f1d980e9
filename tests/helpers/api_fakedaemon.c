/*
 * api_fakedaemon SOCKET — a stand-in for tankd that speaks the method
 * contract of DESIGN.md §6 over the real api_server, so tankctl can be
 * tested end to end before the real daemon exists.
 *
 * Pods live in memory.  Their status is fixed by their name: "fail*" is
 * terminal/failed (never converges), "done*" terminal/completed, "slow*"
 * starting for its first two status calls then running, anything else
 * running.  It exits on SIGTERM/SIGINT or the `quit` method.
 */
#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_server.h"

#define MAXPODS 64

typedef struct pod {
	char name[64];
	char *spec;          /* packed map as applied */
	size_t spec_len;
	unsigned generation;
	unsigned status_calls;
} pod_t;

typedef struct fake {
	pod_t pods[MAXPODS];
	size_t n;
	rt_pid_t server;
	rt_t *rt;
} fake_t;

static pod_t *find(fake_t *f, const char *name, size_t len)
{
	for (size_t i = 0; i < f->n; i++)
		if (strlen(f->pods[i].name) == len && memcmp(f->pods[i].name, name, len) == 0)
			return &f->pods[i];
	return NULL;
}

static void bad(const api_call_t *c, const char *msg)
{
	api_reply_error(c->rt, c->token, API_BAD_REQUEST, msg, NULL, NULL);
}

static int pack_pong(msgpack_packer *pk, void *a) { (void)a; return api_pack_cstr(pk, "pong"); }

static void m_ping(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	(void)p; (void)ctx;
	api_reply(c->rt, c->token, pack_pong, NULL);
}

static int pack_version(msgpack_packer *pk, void *a)
{
	(void)a;
	msgpack_pack_map(pk, 1);
	api_pack_cstr(pk, "version");
	return api_pack_cstr(pk, "fake-1");
}

static void m_version(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	(void)p; (void)ctx;
	api_reply(c->rt, c->token, pack_version, NULL);
}

static void m_nil(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	(void)p; (void)ctx;
	api_reply(c->rt, c->token, NULL, NULL);
}

typedef struct applied { const char *name[MAXPODS]; const char *action[MAXPODS];
			 unsigned gen[MAXPODS]; size_t n; } applied_t;

static int pack_applied(msgpack_packer *pk, void *a)
{
	applied_t *r = a;
	msgpack_pack_array(pk, r->n);
	for (size_t i = 0; i < r->n; i++) {
		msgpack_pack_map(pk, 3);
		api_pack_cstr(pk, "name"); api_pack_cstr(pk, r->name[i]);
		api_pack_cstr(pk, "action"); api_pack_cstr(pk, r->action[i]);
		api_pack_cstr(pk, "generation"); msgpack_pack_uint32(pk, r->gen[i]);
	}
	return 0;
}

static int pack_errs(msgpack_packer *pk, void *a)
{
	msgpack_pack_array(pk, 1);
	return api_pack_cstr(pk, a);
}

static void m_apply(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	fake_t *f = ctx;
	tank_error_t e;
	applied_t r = { .n = 0 };

	if (api_params_check(p, "a", &e) < 0)
		return bad(c, e.msg);
	const msgpack_object *pods = &p->via.array.ptr[0];
	for (uint32_t i = 0; i < pods->via.array.size && r.n < MAXPODS; i++) {
		const msgpack_object *nm = api_map_get(&pods->via.array.ptr[i], "name");
		if (!nm || nm->type != MSGPACK_OBJECT_STR || nm->via.str.size >= 64) {
			api_reply_error(c->rt, c->token, API_INVALID, "invalid pods",
					pack_errs, "spec: name: required");
			return;
		}
		msgpack_sbuffer sb;
		msgpack_packer pk;
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_object(&pk, pods->via.array.ptr[i]);
		pod_t *pod = find(f, nm->via.str.ptr, nm->via.str.size);
		if (!pod && f->n < MAXPODS) {
			pod = &f->pods[f->n++];
			memcpy(pod->name, nm->via.str.ptr, nm->via.str.size);
			pod->name[nm->via.str.size] = '\0';
			r.action[r.n] = "created";
		} else if (pod && pod->spec_len == sb.size && !memcmp(pod->spec, sb.data, sb.size)) {
			r.action[r.n] = "unchanged";
		} else {
			r.action[r.n] = "configured";
		}
		if (strcmp(r.action[r.n], "unchanged") != 0) {
			free(pod->spec);
			pod->spec = sb.data;   /* take the sbuffer's bytes */
			pod->spec_len = sb.size;
			pod->generation++;
		} else {
			msgpack_sbuffer_destroy(&sb);
		}
		r.name[r.n] = pod->name;
		r.gen[r.n] = pod->generation;
		r.n++;
	}
	api_reply(c->rt, c->token, pack_applied, &r);
}

static int pack_spec(msgpack_packer *pk, void *a)
{
	pod_t *pod = a;
	msgpack_unpacked up;
	msgpack_unpacked_init(&up);
	msgpack_unpack_next(&up, pod->spec, pod->spec_len, NULL);
	const msgpack_object *m = &up.data;
	msgpack_pack_map(pk, m->via.map.size + 1);
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		msgpack_pack_object(pk, m->via.map.ptr[i].key);
		msgpack_pack_object(pk, m->via.map.ptr[i].val);
	}
	api_pack_cstr(pk, "generation");
	msgpack_pack_uint32(pk, pod->generation);
	msgpack_unpacked_destroy(&up);
	return 0;
}

static pod_t *named(fake_t *f, const api_call_t *c, const msgpack_object *p, const char *types)
{
	tank_error_t e;
	if (api_params_check(p, types, &e) < 0) {
		bad(c, e.msg);
		return NULL;
	}
	const msgpack_object *n = &p->via.array.ptr[0];
	pod_t *pod = find(f, n->via.str.ptr, n->via.str.size);
	if (!pod) {
		char msg[128];
		snprintf(msg, sizeof msg, "pod \"%.*s\" not found", (int)n->via.str.size, n->via.str.ptr);
		api_reply_error(c->rt, c->token, API_NOT_FOUND, msg, NULL, NULL);
	}
	return pod;
}

static void m_get(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	pod_t *pod = named(ctx, c, p, "s");
	if (pod)
		api_reply(c->rt, c->token, pack_spec, pod);
}

static void pack_one_status(msgpack_packer *pk, pod_t *pod)
{
	const char *phase = "running", *reason = NULL;
	pod->status_calls++;
	if (!strncmp(pod->name, "fail", 4))
		phase = "terminal", reason = "failed";
	else if (!strncmp(pod->name, "done", 4))
		phase = "terminal", reason = "completed";
	else if (!strncmp(pod->name, "slow", 4) && pod->status_calls <= 2)
		phase = "starting";
	bool run = !strcmp(phase, "running");
	msgpack_pack_map(pk, 11);
	api_pack_cstr(pk, "name"); api_pack_cstr(pk, pod->name);
	api_pack_cstr(pk, "phase"); api_pack_cstr(pk, phase);
	/* What a wait decides on (the reason is only shown). */
	api_pack_cstr(pk, "outcome");
	if (reason) api_pack_cstr(pk, reason); else msgpack_pack_nil(pk);
	api_pack_cstr(pk, "reason");
	if (reason) api_pack_cstr(pk, reason); else msgpack_pack_nil(pk);
	api_pack_cstr(pk, "retries"); msgpack_pack_int(pk, 0);
	api_pack_cstr(pk, "restarts"); msgpack_pack_int(pk, reason && !strcmp(reason, "failed") ? 3 : 0);
	api_pack_cstr(pk, "generation"); msgpack_pack_uint32(pk, pod->generation);
	api_pack_cstr(pk, "since"); msgpack_pack_uint64(pk, 1000);
	api_pack_cstr(pk, "next_restart_at"); msgpack_pack_nil(pk);
	api_pack_cstr(pk, "last_exit"); msgpack_pack_nil(pk);
	api_pack_cstr(pk, "containers");
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 5);
	api_pack_cstr(pk, "name"); api_pack_cstr(pk, "main");
	api_pack_cstr(pk, "phase"); api_pack_cstr(pk, phase);
	api_pack_cstr(pk, "pid");
	if (run) msgpack_pack_int(pk, 4242); else msgpack_pack_nil(pk);
	api_pack_cstr(pk, "restarts"); msgpack_pack_int(pk, 0);
	api_pack_cstr(pk, "last_exit"); msgpack_pack_nil(pk);
}

typedef struct st_arg { fake_t *f; pod_t *one; } st_arg_t;

static int pack_status(msgpack_packer *pk, void *a)
{
	st_arg_t *s = a;
	if (s->one) {
		pack_one_status(pk, s->one);
		return 0;
	}
	msgpack_pack_array(pk, s->f->n);
	for (size_t i = 0; i < s->f->n; i++)
		pack_one_status(pk, &s->f->pods[i]);
	return 0;
}

static int pack_empty(msgpack_packer *pk, void *a)
{
	(void)a;
	return msgpack_pack_array(pk, 0);
}

static void m_status(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	st_arg_t s = { ctx, NULL };
	/* It knows no stacks: [nil, {kind: stack}] lists none. */
	if (p->via.array.size == 2 && p->via.array.ptr[0].type == MSGPACK_OBJECT_NIL &&
	    api_obj_streq(api_map_get(&p->via.array.ptr[1], "kind"), "stack")) {
		api_reply(c->rt, c->token, pack_empty, NULL);
		return;
	}
	if (p->via.array.size && !(s.one = named(ctx, c, p, "s")))
		return;
	api_reply(c->rt, c->token, pack_status, &s);
}

typedef struct del { char names[MAXPODS][64]; bool ok[MAXPODS]; size_t n; } del_t;

static int pack_del(msgpack_packer *pk, void *a)
{
	del_t *d = a;
	msgpack_pack_array(pk, d->n);
	for (size_t i = 0; i < d->n; i++) {
		msgpack_pack_map(pk, 2);
		api_pack_cstr(pk, "name"); api_pack_cstr(pk, d->names[i]);
		api_pack_cstr(pk, "deleted");
		if (d->ok[i]) msgpack_pack_true(pk); else msgpack_pack_false(pk);
	}
	return 0;
}

static void m_delete(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	fake_t *f = ctx;
	tank_error_t e;
	static del_t d;
	if (api_params_check(p, "a", &e) < 0)
		return bad(c, e.msg);
	const msgpack_object *l = &p->via.array.ptr[0];
	d.n = 0;
	for (uint32_t i = 0; i < l->via.array.size && d.n < MAXPODS; i++) {
		const msgpack_object *n = &l->via.array.ptr[i];
		if (n->type != MSGPACK_OBJECT_STR || n->via.str.size >= 64)
			return bad(c, "params[0]: expected a list of names");
		memcpy(d.names[d.n], n->via.str.ptr, n->via.str.size);
		d.names[d.n][n->via.str.size] = '\0';
		pod_t *pod = find(f, n->via.str.ptr, n->via.str.size);
		d.ok[d.n++] = pod != NULL;
		if (pod) {
			free(pod->spec);
			pod->spec = NULL;
			*pod = f->pods[--f->n];
		}
	}
	api_reply(c->rt, c->token, pack_del, &d);
}

static void m_restart(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	if (named(ctx, c, p, "s"))
		api_reply(c->rt, c->token, NULL, NULL);
}

static int pack_lines(msgpack_packer *pk, void *a)
{
	(void)a;
	msgpack_pack_array(pk, 2);
	api_pack_cstr(pk, "line one");
	return api_pack_cstr(pk, "line two");
}

static void m_logs(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	if (named(ctx, c, p, "s?m"))
		api_reply(c->rt, c->token, pack_lines, NULL);
}

static int pack_hist(msgpack_packer *pk, void *a)
{
	(void)a;
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 8);
	api_pack_cstr(pk, "seq"); msgpack_pack_uint64(pk, 1);
	api_pack_cstr(pk, "at"); msgpack_pack_uint64(pk, 1000);
	api_pack_cstr(pk, "kind"); api_pack_cstr(pk, "pod");
	api_pack_cstr(pk, "key"); api_pack_cstr(pk, "web");
	api_pack_cstr(pk, "uid"); api_pack_cstr(pk, "u");
	api_pack_cstr(pk, "from"); api_pack_cstr(pk, "starting");
	api_pack_cstr(pk, "to"); api_pack_cstr(pk, "running");
	api_pack_cstr(pk, "reason"); api_pack_cstr(pk, "started");
	return 0;
}

static void m_history(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	if (named(ctx, c, p, "s?m"))
		api_reply(c->rt, c->token, pack_hist, NULL);
}

/* emit [n]: publishes n events {at, pod, to}. */
static void m_emit(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	tank_error_t e;
	(void)ctx;
	if (api_params_check(p, "u", &e) < 0)
		return bad(c, e.msg);
	for (uint64_t i = 0; i < p->via.array.ptr[0].via.u64; i++) {
		msgpack_sbuffer sb;
		msgpack_packer pk;
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 3);
		api_pack_cstr(&pk, "at"); msgpack_pack_uint64(&pk, 1000);
		api_pack_cstr(&pk, "pod"); api_pack_cstr(&pk, "web");
		api_pack_cstr(&pk, "seq"); msgpack_pack_uint64(&pk, i);
		api_server_publish(c->rt, c->server, sb.data, sb.size);
		msgpack_sbuffer_destroy(&sb);
	}
	api_reply(c->rt, c->token, NULL, NULL);
}

static void m_quit(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	(void)p; (void)ctx;
	api_reply(c->rt, c->token, NULL, NULL);
	rt_stop(c->rt);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop; (void)revents;
	rt_stop(w->data);
}

int main(int argc, char **argv)
{
	static fake_t f;
	tank_error_t e;

	if (argc != 2) {
		fprintf(stderr, "usage: api_fakedaemon SOCKET\n");
		return 2;
	}
	const api_method_t methods[] = {
		{ "ping", m_ping, &f }, { "version", m_version, &f },
		{ "apply", m_apply, &f }, { "get", m_get, &f },
		{ "status", m_status, &f }, { "delete", m_delete, &f },
		{ "restart", m_restart, &f }, { "logs", m_logs, &f },
		{ "history", m_history, &f }, { "sync", m_nil, &f },
		{ "nudge", m_nil, &f }, { "emit", m_emit, &f }, { "quit", m_quit, &f },
	};
	api_server_opts_t o = { .socket_path = argv[1], .methods = methods,
				.nmethods = sizeof methods / sizeof methods[0] };
	if (!(f.rt = rt_new()))
		return 1;
	if (api_server_start(f.rt, &o, &f.server, &e) < 0) {
		fprintf(stderr, "api_fakedaemon: %s\n", e.msg);
		rt_free(f.rt);
		return 1;
	}
	ev_signal st, si;
	ev_signal_init(&st, on_signal, SIGTERM);
	ev_signal_init(&si, on_signal, SIGINT);
	st.data = si.data = f.rt;
	ev_signal_start(rt_loop(f.rt), &st);
	ev_signal_start(rt_loop(f.rt), &si);
	rt_run(f.rt);
	ev_signal_stop(rt_loop(f.rt), &st);
	ev_signal_stop(rt_loop(f.rt), &si);
	rt_free(f.rt);
	for (size_t i = 0; i < f.n; i++)
		free(f.pods[i].spec);
	return 0;
}
