#include "pod/pod_spec.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tank_err.h"
#include "pod/pod_req.h"
#include "common/kit.h"
#include "common/kit_frame.h"
#include "common/kit_units.h"
#include "manifest/mf_labels.h"

/* ---- names ------------------------------------------------------------ */

bool pod_name_valid(const char *name, size_t len)
{
	size_t i;

	if (!name || len == 0 || len > POD_NAME_MAX)
		return false;
	for (i = 0; i < len; i++) {
		char c = name[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || (c != '-' && c != '_' && c != '.')))
			return false;
	}
	return true;
}

static const char *const restart_names[] = {
	[POD_RESTART_ALWAYS] = "always",
	[POD_RESTART_ON_FAILURE] = "on_failure",
	[POD_RESTART_NEVER] = "never",
};

const char *pod_restart_name(enum pod_restart r)
{
	if ((unsigned)r < sizeof restart_names / sizeof *restart_names)
		return restart_names[r];
	return NULL;
}

static const char *const probe_role_names[] = {
	[POD_PROBE_STARTUP] = "startup",
	[POD_PROBE_READINESS] = "readiness",
	[POD_PROBE_LIVENESS] = "liveness",
};

const char *pod_probe_role_name(enum pod_probe_role r)
{
	if ((unsigned)r < POD_PROBE_ROLES)
		return probe_role_names[r];
	return NULL;
}

int pod_probe_role_of(const char *name)
{
	for (int r = 0; name && r < POD_PROBE_ROLES; r++)
		if (strcmp(name, probe_role_names[r]) == 0)
			return r;
	return -1;
}

bool pod_container_has_probes(const pod_container_t *c)
{
	return c->probes != NULL;
}

const pod_probe_t *pod_container_probe(const pod_container_t *c, enum pod_probe_role r)
{
	static const pod_probe_t none;   /* kind NONE */

	return c->probes && r < POD_PROBE_ROLES ? &c->probes[r] : &none;
}

static const char *const dep_condition_names[] = {
	[POD_DEP_STARTED] = "started",
	[POD_DEP_READY] = "ready",
	[POD_DEP_COMPLETED] = "completed",
};

const char *pod_dep_condition_name(enum pod_dep_condition c)
{
	if ((unsigned)c < sizeof dep_condition_names / sizeof *dep_condition_names)
		return dep_condition_names[c];
	return NULL;
}

/* In the order the canonical encoding lists them. */
static const char *const ns_names[] = { "pid", "mount", "uts", "ipc", "net" };
#define NS_COUNT (sizeof ns_names / sizeof *ns_names)

const char *pod_ns_name(unsigned bit)
{
	size_t i;

	for (i = 0; i < NS_COUNT; i++)
		if (bit == 1u << i)
			return ns_names[i];
	return NULL;
}

/* ---- freeing ---------------------------------------------------------- */

static void argv_free(char **argv, size_t argc)
{
	for (size_t i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
}

void pod_probe_clear(pod_probe_t *p)
{
	argv_free(p->argv, p->argc);
	free(p->host);
	free(p->path);
	memset(p, 0, sizeof *p);
}

int pod_probe_copy(pod_probe_t *dst, const pod_probe_t *src)
{
	*dst = *src;
	dst->argv = NULL;
	dst->argc = 0;
	dst->host = src->host ? strdup(src->host) : NULL;
	dst->path = src->path ? strdup(src->path) : NULL;
	if (src->argc && (dst->argv = calloc(src->argc + 1, sizeof *dst->argv))) {
		dst->argc = src->argc;
		for (size_t i = 0; i < src->argc; i++)
			if (!(dst->argv[i] = strdup(src->argv[i])))
				goto oom;
	}
	if ((src->host && !dst->host) || (src->path && !dst->path) || (src->argc && !dst->argv))
		goto oom;
	return 0;
oom:
	pod_probe_clear(dst);
	return -ENOMEM;
}

static void container_free(pod_container_t *c)
{
	size_t i;

	free(c->name);
	argv_free(c->argv, c->argc);
	for (i = 0; i < c->env_count; i++) {
		free(c->env[i].key);
		free(c->env[i].value);
	}
	free(c->env);
	free(c->working_dir);
	free(c->user);
	for (i = 0; i < c->mount_count; i++) {
		free(c->mounts[i].volume);
		free(c->mounts[i].path);
	}
	free(c->mounts);
	for (unsigned r = 0; c->probes && r < POD_PROBE_ROLES; r++)
		pod_probe_clear(&c->probes[r]);
	free(c->probes);
}

void pod_spec_free(pod_spec_t *s)
{
	size_t i;

	if (!s)
		return;
	free(s->name);
	free(s->isolation.hostname);
	free(s->isolation.rootfs);
	for (i = 0; i < s->volume_count; i++) {
		free(s->volumes[i].name);
		free(s->volumes[i].host_path);
	}
	free(s->volumes);
	for (i = 0; i < s->container_count; i++)
		container_free(&s->containers[i]);
	free(s->containers);
	for (i = 0; i < s->dep_count; i++)
		free(s->deps[i].pod);
	free(s->deps);
	free(s->workflow);
	for (i = 0; i < s->param_count; i++) {
		free(s->params[i].key);
		free(s->params[i].value);
	}
	free(s->params);
	for (i = 0; i < s->action_count; i++) {
		pod_action_decl_t *a = &s->actions[i];
		free(a->name);
		for (size_t j = 0; j < a->argc; j++)
			free(a->argv[j]);
		free(a->argv);
		free(a->container);
	}
	free(s->actions);
	free(s);
}

static const char *const approval_names[] = { "none", "required", "other" };

const char *pod_approval_name(enum pod_approval a)
{
	return (unsigned)a < 3 ? approval_names[a] : "?";
}

const pod_action_decl_t *pod_spec_action(const pod_spec_t *s, const char *name)
{
	for (size_t i = 0; s && i < s->action_count; i++)
		if (s->actions[i].name && !strcmp(s->actions[i].name, name))
			return &s->actions[i];
	return NULL;
}

#define FIELD KIT_FIELD

/* ---- sections ---------------------------------------------------------- */

static void v_restart(kit_t *v, const msgpack_object *o, pod_spec_t *s)
{
	size_t i;
	char b[96];

	if (!kit_expect(v, o, MSGPACK_OBJECT_STR, "a string"))
		return;
	for (i = 0; i < sizeof restart_names / sizeof *restart_names; i++) {
		if (kit_str_eq(o, restart_names[i])) {
			s->restart = (enum pod_restart)i;
			return;
		}
	}
	kit_err(v, "invalid value %s: must be one of always, on_failure, never",
	     kit_quote(o->via.str.ptr, o->via.str.size, b));
}

static void v_backoff(kit_t *v, const msgpack_object *m, pod_spec_t *s)
{
	static const char *const keys[] = { "base", "cap", "stable_window", "max_retries", NULL };
	bool base_ok = true, cap_ok = true;

	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map"))
		return;
	kit_check_keys(v, m, keys);
	FIELD(v, m, "base", base_ok = kit_get_duration(v, o, &s->backoff.base_ms));
	FIELD(v, m, "cap", cap_ok = kit_get_duration(v, o, &s->backoff.cap_ms));
	FIELD(v, m, "stable_window",
	      kit_get_duration(v, o, &s->backoff.stable_window_ms));
	FIELD(v, m, "max_retries",
	      if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 >= 1 &&
		  o->via.u64 <= POD_MAX_RETRIES_LIMIT)
		      s->backoff.max_retries = (uint32_t)o->via.u64;
	      else
		      kit_err(v, "must be an integer from 1 to %u (leave it out: unlimited)",
			      POD_MAX_RETRIES_LIMIT));
	if (base_ok && cap_ok && s->backoff.cap_ms < s->backoff.base_ms) {
		size_t sv = kit_push_key(v, "cap");
		kit_err(v, "must be >= base");
		kit_pop(v, sv);
	}
}

static void v_signal(kit_t *v, const msgpack_object *o, pod_spec_t *s)
{
	char b[96];

	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (o->via.u64 >= 1 && o->via.u64 <= (uint64_t)SIGRTMAX) {
			s->stop.signal = (int)o->via.u64;
			return;
		}
		kit_err(v, "unknown signal %llu", (unsigned long long)o->via.u64);
		return;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		kit_err(v, "unknown signal %lld", (long long)o->via.i64);
		return;
	}
	if (!kit_expect(v, o, MSGPACK_OBJECT_STR, "a signal name or number"))
		return;
	if (kit_parse_signal(o->via.str.ptr, o->via.str.size, &s->stop.signal) < 0)
		kit_err(v, "unknown signal %s", kit_quote(o->via.str.ptr, o->via.str.size, b));
}

static void v_stop(kit_t *v, const msgpack_object *m, pod_spec_t *s)
{
	static const char *const keys[] = { "signal", "grace", NULL };

	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map"))
		return;
	kit_check_keys(v, m, keys);
	FIELD(v, m, "signal", v_signal(v, o, s));
	FIELD(v, m, "grace", kit_get_duration(v, o, &s->stop.grace_ms));
}

static bool hostname_valid(const char *h)
{
	size_t i, len = strlen(h);

	if (len == 0 || len > 64 || h[0] == '-' || h[0] == '.')
		return false;
	for (i = 0; i < len; i++) {
		char c = h[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '.'))
			return false;
	}
	return true;
}

static void v_isolation(kit_t *v, const msgpack_object *m, pod_spec_t *s)
{
	static const char *const keys[] = { "namespaces", "hostname", "rootfs", NULL };
	const msgpack_object *ns;
	char b[96];

	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map"))
		return;
	kit_check_keys(v, m, keys);
	ns = kit_lookup(m, "namespaces");
	if (ns) {
		size_t sv = kit_push_key(v, "namespaces");
		if (kit_expect(v, ns, MSGPACK_OBJECT_ARRAY, "a list")) {
			uint32_t i;
			for (i = 0; i < ns->via.array.size; i++) {
				const msgpack_object *e = &ns->via.array.ptr[i];
				size_t sv2 = kit_push_index(v, i), k;
				bool found = false;
				if (kit_expect(v, e, MSGPACK_OBJECT_STR, "a string")) {
					for (k = 0; k < NS_COUNT; k++) {
						if (!kit_str_eq(e, ns_names[k]))
							continue;
						found = true;
						if (s->isolation.namespaces & (1u << k))
							kit_err(v, "duplicate %s",
							     kit_quote(e->via.str.ptr, e->via.str.size, b));
						s->isolation.namespaces |= 1u << k;
					}
					if (!found)
						kit_err(v, "unknown namespace %s: must be one of pid, mount, uts, ipc, net",
						     kit_quote(e->via.str.ptr, e->via.str.size, b));
				}
				kit_pop(v, sv2);
			}
		}
		kit_pop(v, sv);
	}
	FIELD(v, m, "hostname", {
		if (kit_get_str(v, o, &s->isolation.hostname, false)) {
			if (!hostname_valid(s->isolation.hostname)) {
				kit_err(v, "invalid hostname %s",
				     kit_quote(o->via.str.ptr, o->via.str.size, b));
			} else if (!(s->isolation.namespaces & POD_NS_UTS)) {
				/* Without its own uts namespace the pod would
				 * rename the host. */
				kit_err(v, "requires the uts namespace");
			}
		}
	});
	FIELD(v, m, "rootfs", {
		if (kit_get_abspath(v, o, &s->isolation.rootfs) &&
		    !(s->isolation.namespaces & POD_NS_MOUNT))
			kit_err(v, "requires the mount namespace");
	});
}

static void v_volumes(kit_t *v, const msgpack_object *a, pod_spec_t *s)
{
	static const char *const keys[] = { "name", "host_path", NULL };
	uint32_t i, j;
	char b[96];

	if (!kit_expect(v, a, MSGPACK_OBJECT_ARRAY, "a list"))
		return;
	if (a->via.array.size == 0 ||
	    !kit_within(v, a->via.array.size, POD_VOLUMES_MAX, "volumes"))
		return;
	s->volumes = calloc(a->via.array.size, sizeof *s->volumes);
	if (!s->volumes) {
		v->oom = true;
		return;
	}
	s->volume_count = a->via.array.size;
	for (i = 0; i < a->via.array.size; i++) {
		const msgpack_object *m = &a->via.array.ptr[i];
		pod_volume_t *vol = &s->volumes[i];
		size_t sv = kit_push_index(v, i);

		if (kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map")) {
			kit_check_keys(v, m, keys);
			if (!kit_lookup(m, "name")) {
				size_t sv2 = kit_push_key(v, "name");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, m, "name", {
				if (kit_get_str(v, o, &vol->name, false)) {
					if (!pod_name_valid(vol->name, strlen(vol->name))) {
						kit_err(v, "invalid name %s: must match [a-z0-9][a-z0-9-_.]{0,62}",
						     kit_quote(o->via.str.ptr, o->via.str.size, b));
					} else {
						for (j = 0; j < i; j++) {
							if (s->volumes[j].name &&
							    !strcmp(s->volumes[j].name, vol->name)) {
								kit_err(v, "duplicate %s",
								     kit_quote(o->via.str.ptr, o->via.str.size, b));
								break;
							}
						}
					}
				}
			});
			if (!kit_lookup(m, "host_path")) {
				size_t sv2 = kit_push_key(v, "host_path");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, m, "host_path", kit_get_abspath(v, o, &vol->host_path));
		}
		kit_pop(v, sv);
	}
}

/* A command list (`command`, a probe's `exec`): argv NULL-terminated. */
static void v_command(kit_t *v, const msgpack_object *a, char ***argv, size_t *argc)
{
	uint32_t i;

	if (!kit_expect(v, a, MSGPACK_OBJECT_ARRAY, "a list of strings"))
		return;
	if (a->via.array.size == 0) {
		kit_err(v, "must not be empty");
		return;
	}
	if (!kit_within(v, a->via.array.size, POD_ARGS_MAX, "arguments"))
		return;
	*argv = calloc((size_t)a->via.array.size + 1, sizeof **argv);
	if (!*argv) {
		v->oom = true;
		return;
	}
	*argc = a->via.array.size;
	for (i = 0; i < a->via.array.size; i++) {
		size_t sv = kit_push_index(v, i);
		kit_get_str(v, &a->via.array.ptr[i], &(*argv)[i], i == 0);
		kit_pop(v, sv);
	}
}

static void v_env(kit_t *v, const msgpack_object *m, pod_container_t *c)
{
	uint32_t i;
	size_t j;
	char b[96];

	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map of strings"))
		return;
	if (m->via.map.size == 0 ||
	    !kit_within(v, m->via.map.size, POD_ENV_MAX, "entries"))
		return;
	c->env = calloc(m->via.map.size, sizeof *c->env);
	if (!c->env) {
		v->oom = true;
		return;
	}
	for (i = 0; i < m->via.map.size; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key;
		const msgpack_object *val = &m->via.map.ptr[i].val;
		pod_kv_t *kv = &c->env[c->env_count];
		size_t sv;

		if (k->type != MSGPACK_OBJECT_STR) {
			kit_err(v, "keys must be strings, not %s", kit_type_name(k->type));
			continue;
		}
		if (k->via.str.size == 0 || memchr(k->via.str.ptr, '=', k->via.str.size) ||
		    memchr(k->via.str.ptr, '\0', k->via.str.size)) {
			kit_err(v, "invalid variable name %s",
			     kit_quote(k->via.str.ptr, k->via.str.size, b));
			continue;
		}
		sv = kit_push_keyn(v, k->via.str.ptr, k->via.str.size);
		if (val->type != MSGPACK_OBJECT_STR) {
			/* No silent coercion: `PORT: 8080` and `PORT: 08080`
			 * would otherwise differ in surprising ways. */
			kit_err(v, "must be a string, not %s (quote it)", kit_type_name(val->type));
		} else if (memchr(val->via.str.ptr, '\0', val->via.str.size)) {
			kit_err(v, "must not contain NUL bytes");
		} else {
			bool dup = false;
			for (j = 0; j < c->env_count; j++) {
				if (strlen(c->env[j].key) == k->via.str.size &&
				    !memcmp(c->env[j].key, k->via.str.ptr, k->via.str.size))
					dup = true;
			}
			if (dup) {
				kit_err(v, "duplicate %s", kit_quote(k->via.str.ptr, k->via.str.size, b));
			} else {
				kv->key = kit_strdup(v, k->via.str.ptr, k->via.str.size);
				kv->value = kit_strdup(v, val->via.str.ptr, val->via.str.size);
				if (kv->key && kv->value) {
					c->env_count++;
				} else {
					free(kv->key);
					free(kv->value);
					kv->key = kv->value = NULL;
				}
			}
		}
		kit_pop(v, sv);
	}
}

static bool user_part(const char *s, size_t len, bool *numeric, uint32_t *id)
{
	size_t i;
	uint64_t n = 0;

	if (len == 0 || len > 32)
		return false;
	*numeric = true;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			*numeric = false;
			break;
		}
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	if (*numeric) {
		/* (uid_t)-1 means "unchanged" to setresuid: refuse it. */
		if (n >= UINT32_MAX)
			return false;
		*id = (uint32_t)n;
		return true;
	}
	for (i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      (c == '-' && i > 0) || (c == '$' && i == len - 1)))
			return false;
	}
	return true;
}

static void v_user(kit_t *v, const msgpack_object *o, pod_container_t *c)
{
	char buf[64], b[96];
	const char *s, *colon;
	size_t len;
	bool num;
	uint32_t id;

	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		snprintf(buf, sizeof buf, "%llu", (unsigned long long)o->via.u64);
		s = buf;
		len = strlen(buf);
	} else if (o->type == MSGPACK_OBJECT_STR) {
		s = o->via.str.ptr;
		len = o->via.str.size;
	} else {
		kit_err(v, "must be a string (\"uid[:gid]\" or \"name[:group]\"), not %s",
		     kit_type_name(o->type));
		return;
	}
	colon = memchr(s, ':', len);
	if (!user_part(s, colon ? (size_t)(colon - s) : len, &num, &id))
		goto bad;
	if (num) {
		c->has_uid = true;
		c->uid = id;
	}
	if (colon) {
		size_t glen = len - (size_t)(colon - s) - 1;
		if (!user_part(colon + 1, glen, &num, &id))
			goto bad;
		if (num) {
			c->has_gid = true;
			c->gid = id;
		}
	}
	c->user = kit_strdup(v, s, len);
	return;
bad:
	c->has_uid = c->has_gid = false;
	kit_err(v, "invalid user %s: must be \"uid[:gid]\" or \"name[:group]\"",
	     kit_quote(s, len, b));
}

static void v_cpu(kit_t *v, const msgpack_object *o, pod_limits_t *l)
{
	double x;
	char b[96];

	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (o->via.u64 == 0 || o->via.u64 > UINT32_MAX / 1000) {
			kit_err(v, "must be between 0.001 and %u", UINT32_MAX / 1000);
			return;
		}
		l->cpu_millis = (uint32_t)o->via.u64 * 1000;
		return;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		x = o->via.f64 * 1000.0;
		if (!isfinite(x) || x < 0.5 || x > (double)UINT32_MAX) {
			kit_err(v, "must be between 0.001 and %u", UINT32_MAX / 1000);
			return;
		}
		/* Millicores are the unit the kernel sees in the end; a finer
		 * value would not survive the canonical round trip. */
		if (fabs(x - round(x)) > 1e-6) {
			kit_err(v, "invalid cpu %g: at most 3 decimals", o->via.f64);
			return;
		}
		l->cpu_millis = (uint32_t)llround(x);
		return;
	case MSGPACK_OBJECT_STR: {
		/* Kubernetes' millicore spelling, "500m". */
		uint64_t m = 0;
		size_t i, n = o->via.str.size;
		const char *p = o->via.str.ptr;
		if (n >= 2 && p[n - 1] == 'm' && n <= 11) {
			for (i = 0; i < n - 1 && p[i] >= '0' && p[i] <= '9'; i++)
				m = m * 10 + (uint64_t)(p[i] - '0');
			if (i == n - 1 && m > 0 && m <= UINT32_MAX) {
				l->cpu_millis = (uint32_t)m;
				return;
			}
		}
		kit_err(v, "invalid cpu %s: use a number of CPUs (0.5) or millicores (\"500m\")",
		     kit_quote(p, n, b));
		return;
	}
	default:
		kit_err(v, "must be a number of CPUs, not %s", kit_type_name(o->type));
	}
}

static void v_limits(kit_t *v, const msgpack_object *m, pod_container_t *c)
{
	static const char *const keys[] = { "memory", "pids", "cpu", NULL };

	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map"))
		return;
	kit_check_keys(v, m, keys);
	FIELD(v, m, "memory", {
		uint64_t sz;
		if (kit_get_size(v, o, &sz)) {
			if (sz == 0)
				kit_err(v, "must be > 0 (omit it for no limit)");
			else
				c->limits.memory_bytes = sz;
		}
	});
	FIELD(v, m, "pids", {
		if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 > POD_PIDS_MAX)
			kit_err(v, "must be at most %u (the kernel's pids.max)", POD_PIDS_MAX);
		else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 > 0)
			c->limits.pids = o->via.u64;
		else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
			 o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
			kit_err(v, "must be > 0 (omit it for no limit)");
		else
			kit_err(v, "must be an integer, not %s", kit_type_name(o->type));
	});
	FIELD(v, m, "cpu", v_cpu(v, o, &c->limits));
}

static void v_mounts(kit_t *v, const msgpack_object *a, pod_container_t *c,
		     const pod_spec_t *s)
{
	static const char *const keys[] = { "volume", "path", "read_only", NULL };
	uint32_t i, j;
	char b[96];

	if (!kit_expect(v, a, MSGPACK_OBJECT_ARRAY, "a list"))
		return;
	if (a->via.array.size == 0 ||
	    !kit_within(v, a->via.array.size, POD_MOUNTS_MAX, "mounts"))
		return;
	if (!(s->isolation.namespaces & POD_NS_MOUNT))
		/* Bind mounts outside a private mount namespace would
		 * change the host's mount table. */
		kit_err(v, "requires the mount namespace (isolation.namespaces)");
	c->mounts = calloc(a->via.array.size, sizeof *c->mounts);
	if (!c->mounts) {
		v->oom = true;
		return;
	}
	c->mount_count = a->via.array.size;
	for (i = 0; i < a->via.array.size; i++) {
		const msgpack_object *m = &a->via.array.ptr[i];
		pod_mount_t *mt = &c->mounts[i];
		size_t sv = kit_push_index(v, i);

		if (kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map")) {
			kit_check_keys(v, m, keys);
			if (!kit_lookup(m, "volume")) {
				size_t sv2 = kit_push_key(v, "volume");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, m, "volume", {
				if (kit_get_str(v, o, &mt->volume, false)) {
					bool found = false;
					for (j = 0; j < s->volume_count; j++) {
						if (s->volumes[j].name &&
						    !strcmp(s->volumes[j].name, mt->volume)) {
							mt->volume_index = j;
							found = true;
							break;
						}
					}
					if (!found)
						kit_err(v, "unknown volume %s",
						     kit_quote(o->via.str.ptr, o->via.str.size, b));
				}
			});
			if (!kit_lookup(m, "path")) {
				size_t sv2 = kit_push_key(v, "path");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, m, "path", {
				if (kit_get_abspath(v, o, &mt->path)) {
					for (j = 0; j < i; j++) {
						if (c->mounts[j].path &&
						    !strcmp(c->mounts[j].path, mt->path)) {
							kit_err(v, "duplicate %s",
							     kit_quote(o->via.str.ptr, o->via.str.size, b));
							break;
						}
					}
				}
			});
			FIELD(v, m, "read_only", kit_get_bool(v, o, &mt->read_only));
		}
		kit_pop(v, sv);
	}
}

/* An IP literal: resolving a name could block the loop. */
static void v_probe_host(kit_t *v, const msgpack_object *o, pod_probe_t *p)
{
	unsigned char buf[16];
	char b[96];

	if (!kit_get_str(v, o, &p->host, true))
		return;
	if (inet_pton(AF_INET, p->host, buf) != 1 && inet_pton(AF_INET6, p->host, buf) != 1)
		kit_err(v, "invalid address %s: must be an IP address (names are not resolved)",
			kit_quote(o->via.str.ptr, o->via.str.size, b));
}

static void v_probe_port(kit_t *v, const msgpack_object *o, pod_probe_t *p)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 >= 1 && o->via.u64 <= 65535)
		p->port = (uint16_t)o->via.u64;
	else
		kit_err(v, "must be a port number from 1 to 65535");
}

static void v_probe_path(kit_t *v, const msgpack_object *o, pod_probe_t *p)
{
	if (!kit_get_str(v, o, &p->path, true))
		return;
	for (const char *c = p->path; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f) {
			kit_err(v, "must not contain spaces or control characters");
			return;
		}
	if (p->path[0] != '/')
		kit_err(v, "must start with '/'");
}

/* tcp: {port, host} and http: {port, host, path} */
static void v_probe_net(kit_t *v, const msgpack_object *m, pod_probe_t *p, bool http)
{
	static const char *const tkeys[] = { "port", "host", NULL };
	static const char *const hkeys[] = { "port", "host", "path", NULL };

	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map"))
		return;
	kit_check_keys(v, m, http ? hkeys : tkeys);
	if (!kit_lookup(m, "port")) {
		size_t sv = kit_push_key(v, "port");
		kit_err(v, "required");
		kit_pop(v, sv);
	}
	FIELD(v, m, "port", v_probe_port(v, o, p));
	FIELD(v, m, "host", v_probe_host(v, o, p));
	if (http)
		FIELD(v, m, "path", v_probe_path(v, o, p));
}

static void v_threshold(kit_t *v, const msgpack_object *o, uint32_t *dst)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 >= 1 &&
	    o->via.u64 <= POD_PROBE_THRESHOLD_MAX)
		*dst = (uint32_t)o->via.u64;
	else
		kit_err(v, "must be an integer from 1 to %u", POD_PROBE_THRESHOLD_MAX);
}

static void v_probe_min(kit_t *v, const msgpack_object *o, uint64_t *dst, uint64_t min)
{
	if (kit_get_duration(v, o, dst) && *dst < min)
		kit_err(v, "must be at least %llums", (unsigned long long)min);
}

static void v_probe(kit_t *v, const msgpack_object *m, pod_probe_t *p, enum pod_probe_role role)
{
	static const char *const keys[] = { "exec", "tcp", "http", "initial_delay", "period",
					    "timeout", "success_threshold",
					    "failure_threshold", NULL };
	unsigned kinds = 0;

	p->period_ms = POD_PROBE_DEFAULT_PERIOD_MS;
	p->timeout_ms = POD_PROBE_DEFAULT_TIMEOUT_MS;
	p->success_threshold = 1;
	p->failure_threshold = POD_PROBE_DEFAULT_FAILURES;
	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map"))
		return;
	kit_check_keys(v, m, keys);
	for (unsigned i = 0; i < 3; i++)
		kinds += kit_lookup(m, keys[i]) != NULL;
	if (kinds != 1) {
		kit_err(v, "must have exactly one of exec, tcp, http");
		return;
	}
	FIELD(v, m, "exec", p->kind = POD_PROBE_EXEC; v_command(v, o, &p->argv, &p->argc));
	FIELD(v, m, "tcp", p->kind = POD_PROBE_TCP; v_probe_net(v, o, p, false));
	FIELD(v, m, "http", p->kind = POD_PROBE_HTTP; v_probe_net(v, o, p, true));
	FIELD(v, m, "initial_delay", kit_get_duration(v, o, &p->initial_delay_ms));
	FIELD(v, m, "period", v_probe_min(v, o, &p->period_ms, POD_PROBE_MIN_PERIOD_MS));
	FIELD(v, m, "timeout", v_probe_min(v, o, &p->timeout_ms, 1));
	FIELD(v, m, "success_threshold", {
		v_threshold(v, o, &p->success_threshold);
		if (role != POD_PROBE_READINESS && p->success_threshold != 1)
			kit_err(v, "must be 1 for a %s probe", probe_role_names[role]);
	});
	FIELD(v, m, "failure_threshold", v_threshold(v, o, &p->failure_threshold));
}

/* startup, readiness, liveness: the array only for a container that has
 * one (pod_container_t.probes). */
static void v_probes(kit_t *v, const msgpack_object *m, pod_container_t *c)
{
	bool any = false;

	for (unsigned r = 0; r < POD_PROBE_ROLES; r++)
		any |= kit_lookup(m, probe_role_names[r]) != NULL;
	if (!any)
		return;
	c->probes = calloc(POD_PROBE_ROLES, sizeof *c->probes);
	if (!c->probes) {
		v->oom = true;
		return;
	}
	for (unsigned r = 0; r < POD_PROBE_ROLES; r++)
		FIELD(v, m, probe_role_names[r],
		      v_probe(v, o, &c->probes[r], (enum pod_probe_role)r));
	/* A probe given as a wrong type keeps kind NONE (an error is
	 * reported): the spec is refused, but keep the invariant anyway. */
	any = false;
	for (unsigned r = 0; r < POD_PROBE_ROLES; r++)
		any |= c->probes[r].kind != POD_PROBE_NONE;
	if (!any) {
		for (unsigned r = 0; r < POD_PROBE_ROLES; r++)
			pod_probe_clear(&c->probes[r]);
		free(c->probes);
		c->probes = NULL;
	}
}

static void v_containers(kit_t *v, const msgpack_object *a, pod_spec_t *s)
{
	static const char *const keys[] = { "name", "command", "env", "working_dir",
					    "user", "limits", "mounts", "startup",
					    "readiness", "liveness", NULL };
	uint32_t i, j;
	char b[96];

	if (!kit_expect(v, a, MSGPACK_OBJECT_ARRAY, "a list"))
		return;
	if (a->via.array.size == 0) {
		kit_err(v, "must not be empty");
		return;
	}
	if (!kit_within(v, a->via.array.size, POD_CONTAINERS_MAX, "items"))
		return;
	s->containers = calloc(a->via.array.size, sizeof *s->containers);
	if (!s->containers) {
		v->oom = true;
		return;
	}
	s->container_count = a->via.array.size;
	for (i = 0; i < a->via.array.size; i++) {
		const msgpack_object *m = &a->via.array.ptr[i];
		pod_container_t *c = &s->containers[i];
		size_t sv = kit_push_index(v, i);

		if (kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map")) {
			kit_check_keys(v, m, keys);
			if (!kit_lookup(m, "name")) {
				size_t sv2 = kit_push_key(v, "name");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, m, "name", {
				if (kit_get_str(v, o, &c->name, false)) {
					if (!pod_name_valid(c->name, strlen(c->name))) {
						kit_err(v, "invalid name %s: must match [a-z0-9][a-z0-9-_.]{0,62}",
						     kit_quote(o->via.str.ptr, o->via.str.size, b));
					} else {
						for (j = 0; j < i; j++) {
							if (s->containers[j].name &&
							    !strcmp(s->containers[j].name, c->name)) {
								kit_err(v, "duplicate %s",
								     kit_quote(o->via.str.ptr, o->via.str.size, b));
								break;
							}
						}
					}
				}
			});
			if (!kit_lookup(m, "command")) {
				size_t sv2 = kit_push_key(v, "command");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, m, "command", v_command(v, o, &c->argv, &c->argc));
			FIELD(v, m, "env", v_env(v, o, c));
			FIELD(v, m, "working_dir", kit_get_abspath(v, o, &c->working_dir));
			FIELD(v, m, "user", v_user(v, o, c));
			FIELD(v, m, "limits", v_limits(v, o, c));
			FIELD(v, m, "mounts", v_mounts(v, o, c, s));
			v_probes(v, m, c);
		}
		kit_pop(v, sv);
	}
}

static void v_multiplier(kit_t *v, const msgpack_object *o, double *dst)
{
	double x;

	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		x = (double)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		x = (double)o->via.i64;
	else if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64)
		x = o->via.f64;
	else {
		kit_err(v, "must be a number, not %s", kit_type_name(o->type));
		return;
	}
	if (!isfinite(x) || x < 1.0 || x > 1e6) {
		kit_err(v, "must be between 1 and 1000000");
		return;
	}
	*dst = x;
}

static void v_reconcile_wait(kit_t *v, const msgpack_object *m, pod_spec_t *s)
{
	static const char *const keys[] = { "static", "random", "exponential", NULL };
	static const char *const rkeys[] = { "min", "max", NULL };
	static const char *const ekeys[] = { "wait", "multiplier", NULL };
	rc_wait_t *w = &s->reconcile_wait;
	unsigned kinds = 0;
	uint32_t i;

	/* `reconcile_wait: 5s` is shorthand for {static: 5s}. */
	if (m->type == MSGPACK_OBJECT_STR || m->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
	    m->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		kit_get_duration(v, m, &w->wait_ms);
		return;
	}
	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map"))
		return;
	kit_check_keys(v, m, keys);
	for (i = 0; i < 3; i++)
		if (kit_lookup(m, keys[i]))
			kinds++;
	if (kinds != 1) {
		kit_err(v, "must have exactly one of static, random, exponential");
		return;
	}
	FIELD(v, m, "static", {
		w->kind = RC_WAIT_STATIC;
		kit_get_duration(v, o, &w->wait_ms);
	});
	FIELD(v, m, "random", {
		w->kind = RC_WAIT_RANDOM;
		w->wait_ms = 0;
		if (kit_expect(v, o, MSGPACK_OBJECT_MAP, "a map")) {
			bool min_ok = false, max_ok = false;
			kit_check_keys(v, o, rkeys);
			if (!kit_lookup(o, "min") || !kit_lookup(o, "max")) {
				size_t sv2 = kit_push_key(v, kit_lookup(o, "min") ? "max" : "min");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, o, "min", min_ok = kit_get_duration(v, o, &w->min_ms));
			FIELD(v, o, "max", max_ok = kit_get_duration(v, o, &w->max_ms));
			if (min_ok && max_ok && w->max_ms < w->min_ms) {
				size_t sv2 = kit_push_key(v, "max");
				kit_err(v, "must be >= min");
				kit_pop(v, sv2);
			}
		}
	});
	FIELD(v, m, "exponential", {
		w->kind = RC_WAIT_EXPONENTIAL;
		if (kit_expect(v, o, MSGPACK_OBJECT_MAP, "a map")) {
			kit_check_keys(v, o, ekeys);
			if (!kit_lookup(o, "wait")) {
				size_t sv2 = kit_push_key(v, "wait");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, o, "wait", kit_get_duration(v, o, &w->wait_ms));
			FIELD(v, o, "multiplier", v_multiplier(v, o, &w->multiplier));
		}
	});
}

static void v_dep_pod(kit_t *v, const msgpack_object *o, pod_spec_t *s, uint32_t i)
{
	pod_dep_t *d = &s->deps[i];
	char b[96];

	if (!kit_get_str(v, o, &d->pod, false))
		return;
	if (!pod_name_valid(d->pod, strlen(d->pod))) {
		kit_err(v, "invalid name %s: must match [a-z0-9][a-z0-9-_.]{0,62}",
			kit_quote(o->via.str.ptr, o->via.str.size, b));
		return;
	}
	if (s->name && strcmp(d->pod, s->name) == 0) {
		kit_err(v, "a pod cannot depend on itself");
		return;
	}
	for (uint32_t j = 0; j < i; j++)
		if (s->deps[j].pod && strcmp(s->deps[j].pod, d->pod) == 0) {
			kit_err(v, "duplicate %s", kit_quote(o->via.str.ptr, o->via.str.size, b));
			return;
		}
}

static void v_dep_condition(kit_t *v, const msgpack_object *o, pod_dep_t *d)
{
	char b[96];

	if (!kit_expect(v, o, MSGPACK_OBJECT_STR, "a string"))
		return;
	for (unsigned k = 0; k < sizeof dep_condition_names / sizeof *dep_condition_names; k++)
		if (kit_str_eq(o, dep_condition_names[k])) {
			d->condition = (enum pod_dep_condition)k;
			return;
		}
	kit_err(v, "invalid value %s: must be one of started, ready, completed",
		kit_quote(o->via.str.ptr, o->via.str.size, b));
}

/* depends_on: [{pod: NAME, condition: started|ready|completed}] */
static void v_depends_on(kit_t *v, const msgpack_object *a, pod_spec_t *s)
{
	static const char *const keys[] = { "pod", "condition", NULL };

	if (!kit_expect(v, a, MSGPACK_OBJECT_ARRAY, "a list"))
		return;
	if (a->via.array.size == 0 ||
	    !kit_within(v, a->via.array.size, POD_DEPS_MAX, "items"))
		return;
	if (!(s->deps = calloc(a->via.array.size, sizeof *s->deps))) {
		v->oom = true;
		return;
	}
	s->dep_count = a->via.array.size;
	for (uint32_t i = 0; i < a->via.array.size; i++) {
		const msgpack_object *m = &a->via.array.ptr[i];
		size_t sv = kit_push_index(v, i);

		if (kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map")) {
			kit_check_keys(v, m, keys);
			if (!kit_lookup(m, "pod")) {
				size_t sv2 = kit_push_key(v, "pod");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, m, "pod", v_dep_pod(v, o, s, i));
			FIELD(v, m, "condition", v_dep_condition(v, o, &s->deps[i]));
		}
		kit_pop(v, sv);
	}
}

/* workflow: NAME (a workflow's name, as a pod's) */
static void v_workflow(kit_t *v, const msgpack_object *o, pod_spec_t *s)
{
	char b[96];

	if (!kit_expect(v, o, MSGPACK_OBJECT_STR, "a string"))
		return;
	if (!pod_name_valid(o->via.str.ptr, o->via.str.size)) {
		kit_err(v, "invalid name %s: must match [a-z0-9][a-z0-9-_.]{0,62}",
			kit_quote(o->via.str.ptr, o->via.str.size, b));
		return;
	}
	s->workflow = kit_strdup(v, o->via.str.ptr, o->via.str.size);
}

/* params: {key: "value", …}: strings, as env's (no silent coercion). */
static void v_params(kit_t *v, const msgpack_object *m, pod_spec_t *s)
{
	char b[96];

	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map of strings"))
		return;
	if (m->via.map.size == 0 || !kit_within(v, m->via.map.size, POD_PARAMS_MAX, "entries"))
		return;
	if (!(s->params = calloc(m->via.map.size, sizeof *s->params))) {
		v->oom = true;
		return;
	}
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key;
		const msgpack_object *val = &m->via.map.ptr[i].val;
		bool dup = false;
		size_t sv;

		if (k->type != MSGPACK_OBJECT_STR || !k->via.str.size ||
		    memchr(k->via.str.ptr, '\0', k->via.str.size) ||
		    memchr(k->via.str.ptr, '"', k->via.str.size)) {
			kit_err(v, "keys must be non-empty strings without NUL or '\"'");
			continue;
		}
		sv = kit_push_keyn(v, k->via.str.ptr, k->via.str.size);
		for (size_t j = 0; j < s->param_count; j++)
			dup |= strlen(s->params[j].key) == k->via.str.size &&
			       !memcmp(s->params[j].key, k->via.str.ptr, k->via.str.size);
		if (val->type != MSGPACK_OBJECT_STR) {
			kit_err(v, "must be a string, not %s (quote it)", kit_type_name(val->type));
		} else if (memchr(val->via.str.ptr, '\0', val->via.str.size)) {
			kit_err(v, "must not contain NUL bytes");
		} else if (dup) {
			kit_err(v, "duplicate %s", kit_quote(k->via.str.ptr, k->via.str.size, b));
		} else {
			pod_kv_t *kv = &s->params[s->param_count];
			kv->key = kit_strdup(v, k->via.str.ptr, k->via.str.size);
			kv->value = kit_strdup(v, val->via.str.ptr, val->via.str.size);
			if (kv->key && kv->value) {
				s->param_count++;
			} else {
				free(kv->key);
				free(kv->value);
				kv->key = kv->value = NULL;
			}
		}
		kit_pop(v, sv);
	}
}

/* The action kinds every pod has (action/action_spec.c runs them): a
 * custom action may not take their names. */
static const char *const builtin_actions[] = { "restart", "signal", "exec", "stop", "start",
					       NULL };

static void v_approval(kit_t *v, const msgpack_object *o, enum pod_approval *a)
{
	char b[96];

	if (!kit_expect(v, o, MSGPACK_OBJECT_STR, "a string"))
		return;
	for (unsigned k = 0; k < 3; k++)
		if (kit_str_eq(o, approval_names[k])) {
			*a = (enum pod_approval)k;
			return;
		}
	kit_err(v, "invalid value %s: must be one of none, required, other",
		kit_quote(o->via.str.ptr, o->via.str.size, b));
}

/* actions: {NAME: {command: [...], approval: none|required|other,
 * timeout: DURATION, container: NAME}} */
static void v_actions(kit_t *v, const msgpack_object *m, pod_spec_t *s)
{
	static const char *const keys[] = { "command", "approval", "timeout", "container", NULL };
	char b[96];

	if (!kit_expect(v, m, MSGPACK_OBJECT_MAP, "a map"))
		return;
	if (m->via.map.size == 0 || !kit_within(v, m->via.map.size, POD_ACTIONS_MAX, "actions"))
		return;
	if (!(s->actions = calloc(m->via.map.size, sizeof *s->actions))) {
		v->oom = true;
		return;
	}
	s->action_count = m->via.map.size;
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key, *d = &m->via.map.ptr[i].val;
		pod_action_decl_t *a = &s->actions[i];
		if (k->type != MSGPACK_OBJECT_STR) {
			kit_err(v, "action names are strings, not %s", kit_type_name(k->type));
			continue;
		}
		size_t sv = kit_push_keyn(v, k->via.str.ptr, k->via.str.size);
		bool builtin = false;
		for (size_t j = 0; builtin_actions[j]; j++)
			builtin |= kit_str_eq(k, builtin_actions[j]);
		if (!pod_name_valid(k->via.str.ptr, k->via.str.size) ||
		    memchr(k->via.str.ptr, '.', k->via.str.size))
			kit_err(v, "invalid action name %s: must match [a-z0-9][a-z0-9-_]{0,62}",
				kit_quote(k->via.str.ptr, k->via.str.size, b));
		else if (builtin)
			kit_err(v, "%s is a built-in action kind (restart, signal, exec, stop, start)",
				kit_quote(k->via.str.ptr, k->via.str.size, b));
		else
			a->name = kit_strdup(v, k->via.str.ptr, k->via.str.size);
		if (kit_expect(v, d, MSGPACK_OBJECT_MAP, "a map")) {
			kit_check_keys(v, d, keys);
			if (!kit_lookup(d, "command")) {
				size_t sv2 = kit_push_key(v, "command");
				kit_err(v, "required");
				kit_pop(v, sv2);
			}
			FIELD(v, d, "command", v_command(v, o, &a->argv, &a->argc));
			size_t n = 0;
			for (size_t w = 0; a->argv && w < a->argc; w++)
				n += a->argv[w] ? strlen(a->argv[w]) + 1 : 0;
			if (n > POD_REQ_ARGV_MAX) {
				/* An exec request's bound (pod_req.h): it would
				 * never run, each submit refused. */
				size_t sv2 = kit_push_key(v, "command");
				kit_err(v, "%zu bytes, at most %u (each word and a byte more)", n,
					(unsigned)POD_REQ_ARGV_MAX);
				kit_pop(v, sv2);
			}
			FIELD(v, d, "approval", v_approval(v, o, &a->approval));
			FIELD(v, d, "timeout", kit_get_duration(v, o, &a->timeout_ms));
			FIELD(v, d, "container", kit_get_str(v, o, &a->container, true));
		}
		kit_pop(v, sv);
	}
}

/* After containers: an action's container must be one of them. */
static void v_actions_containers(kit_t *v, pod_spec_t *s)
{
	for (size_t i = 0; i < s->action_count; i++) {
		const pod_action_decl_t *a = &s->actions[i];
		bool found = !a->container;
		for (size_t c = 0; !found && c < s->container_count; c++)
			found = s->containers[c].name && !strcmp(s->containers[c].name, a->container);
		if (!found && a->name)
			kit_err(v, "actions: %s: container: no container \"%s\" in this pod", a->name,
				a->container);
	}
}

static void set_defaults(pod_spec_t *s)
{
	s->restart = POD_RESTART_ALWAYS;
	s->backoff.base_ms = POD_DEFAULT_BACKOFF_BASE_MS;
	s->backoff.cap_ms = POD_DEFAULT_BACKOFF_CAP_MS;
	s->backoff.stable_window_ms = POD_DEFAULT_STABLE_WINDOW_MS;
	s->stop.signal = SIGTERM;
	s->stop.grace_ms = POD_DEFAULT_STOP_GRACE_MS;
	s->reconcile_wait.kind = RC_WAIT_STATIC;
	s->reconcile_wait.wait_ms = RC_WAIT_DEFAULT_MS;
	s->reconcile_wait.multiplier = 2.0;
}

int pod_spec_from_msgpack(const msgpack_object *map, pod_spec_t **out,
			  kit_errors_t *errs)
{
	/* `generation` and `uid` are what `get` adds: accepted and ignored,
	 * so that `tankctl get NAME -o yaml | tankctl apply -f -` round-trips
	 * (the store, not the manifest, owns generations and identities). */
	static const char *const keys[] = { "name", "restart", "backoff", "stop",
					    "isolation", "volumes", "containers",
					    "reconcile_wait", "depends_on",
					    "workflow", "params", "actions",
					    "generation", "uid", "created_at", NULL };
	kit_t v = { .pod = "spec" };
	kit_errors_t local;
	const msgpack_object *name;
	pod_spec_t *s;
	char b[96];

	*out = NULL;
	kit_errors_init(&local);
	v.errs = &local;
	if (!map || map->type != MSGPACK_OBJECT_MAP) {
		kit_err(&v, "must be a map, not %s",
		     map ? kit_type_name(map->type) : "nothing");
		goto fail;
	}
	s = calloc(1, sizeof *s);
	if (!s) {
		v.oom = true;
		goto fail;
	}
	set_defaults(s);

	name = kit_lookup(map, "name");
	if (!name) {
		kit_err(&v, "name: required");
	} else if (name->type != MSGPACK_OBJECT_STR) {
		kit_err(&v, "name: must be a string, not %s", kit_type_name(name->type));
	} else if (!pod_name_valid(name->via.str.ptr, name->via.str.size)) {
		kit_err(&v, "name: invalid name %s: must match [a-z0-9][a-z0-9-_.]{0,62}",
		     kit_quote(name->via.str.ptr, name->via.str.size, b));
	} else {
		s->name = kit_strdup(&v, name->via.str.ptr, name->via.str.size);
		if (s->name)
			v.pod = s->name;
	}

	kit_check_keys(&v, map, keys);
	FIELD(&v, map, "restart", v_restart(&v, o, s));
	FIELD(&v, map, "backoff", v_backoff(&v, o, s));
	FIELD(&v, map, "stop", v_stop(&v, o, s));
	/* isolation and volumes before containers: mounts refer to both. */
	FIELD(&v, map, "isolation", v_isolation(&v, o, s));
	FIELD(&v, map, "volumes", v_volumes(&v, o, s));
	if (!kit_lookup(map, "containers"))
		kit_err(&v, "containers: required");
	FIELD(&v, map, "containers", v_containers(&v, o, s));
	FIELD(&v, map, "reconcile_wait", v_reconcile_wait(&v, o, s));
	FIELD(&v, map, "depends_on", v_depends_on(&v, o, s));
	FIELD(&v, map, "workflow", v_workflow(&v, o, s));
	FIELD(&v, map, "params", v_params(&v, o, s));
	FIELD(&v, map, "actions", v_actions(&v, o, s));
	if (local.count == 0)
		v_actions_containers(&v, s);

	if (local.count == 0 && !v.oom) {
		*out = s;
		kit_errors_free(&local);
		return 0;
	}
	if (local.oom)
		v.oom = true;
	if (errs)
		kit_errors_move(errs, &local, NULL);
	kit_errors_free(&local);
	pod_spec_free(s);
	return v.oom ? -ENOMEM : TANK_EINVALID;
fail:
	if (local.oom)
		v.oom = true;
	if (errs)
		kit_errors_move(errs, &local, NULL);
	kit_errors_free(&local);
	return v.oom ? -ENOMEM : TANK_EINVALID;
}

/* ---- canonical encoding ----------------------------------------------- */

/* msgpack_pack_* return the write callback's result (0 or -1); the only
 * failure an sbuffer has is ENOMEM.  Errors are OR-ed into `r` so the
 * encoder reads as a straight list of fields. */
struct enc {
	msgpack_packer *pk;
	int r;
};

static void e_str(struct enc *e, const char *s)
{
	size_t l = strlen(s);
	e->r |= msgpack_pack_str(e->pk, l);
	e->r |= msgpack_pack_str_body(e->pk, s, l);
}

static void e_map(struct enc *e, size_t n)
{
	e->r |= msgpack_pack_map(e->pk, n);
}

static void e_arr(struct enc *e, size_t n)
{
	e->r |= msgpack_pack_array(e->pk, n);
}

static void e_duration(struct enc *e, const char *key, uint64_t ms)
{
	char b[KIT_UNIT_BUF];
	e_str(e, key);
	e_str(e, kit_format_duration(ms, b));
}

/* Whole numbers as integers so that `multiplier: 10` or `cpu: 2` read
 * back as written; everything else as float64 (exact for what the
 * validator accepts). */
static void e_number(struct enc *e, double x)
{
	if (x == floor(x) && fabs(x) < 9007199254740992.0)
		e->r |= msgpack_pack_int64(e->pk, (int64_t)x);
	else
		e->r |= msgpack_pack_double(e->pk, x);
}

/* Every field written out; host and path only when set. */
static void e_probe(struct enc *e, const char *role, const pod_probe_t *p)
{
	e_str(e, role);
	e_map(e, 6);
	switch (p->kind) {
	case POD_PROBE_EXEC:
		e_str(e, "exec");
		e_arr(e, p->argc);
		for (size_t i = 0; i < p->argc; i++)
			e_str(e, p->argv[i]);
		break;
	default:
		e_str(e, p->kind == POD_PROBE_TCP ? "tcp" : "http");
		e_map(e, 1 + (p->host != NULL) + (p->kind == POD_PROBE_HTTP && p->path));
		e_str(e, "port");
		e->r |= msgpack_pack_uint16(e->pk, p->port);
		if (p->host) {
			e_str(e, "host");
			e_str(e, p->host);
		}
		if (p->kind == POD_PROBE_HTTP && p->path) {
			e_str(e, "path");
			e_str(e, p->path);
		}
		break;
	}
	e_duration(e, "initial_delay", p->initial_delay_ms);
	e_duration(e, "period", p->period_ms);
	e_duration(e, "timeout", p->timeout_ms);
	e_str(e, "success_threshold");
	e->r |= msgpack_pack_uint32(e->pk, p->success_threshold);
	e_str(e, "failure_threshold");
	e->r |= msgpack_pack_uint32(e->pk, p->failure_threshold);
}

static void e_container(struct enc *e, const pod_container_t *c)
{
	char b[KIT_UNIT_BUF];
	size_t i, n = 2, nl = 0;

	n += c->env_count > 0;
	n += c->working_dir != NULL;
	n += c->user != NULL;
	nl = (c->limits.memory_bytes > 0) + (c->limits.pids > 0) +
	     (c->limits.cpu_millis > 0);
	n += nl > 0;
	n += c->mount_count > 0;
	for (unsigned r = 0; c->probes && r < POD_PROBE_ROLES; r++)
		n += c->probes[r].kind != POD_PROBE_NONE;
	e_map(e, n);
	e_str(e, "name");
	e_str(e, c->name);
	e_str(e, "command");
	e_arr(e, c->argc);
	for (i = 0; i < c->argc; i++)
		e_str(e, c->argv[i]);
	if (c->env_count) {
		e_str(e, "env");
		e_map(e, c->env_count);
		for (i = 0; i < c->env_count; i++) {
			e_str(e, c->env[i].key);
			e_str(e, c->env[i].value);
		}
	}
	if (c->working_dir) {
		e_str(e, "working_dir");
		e_str(e, c->working_dir);
	}
	if (c->user) {
		e_str(e, "user");
		e_str(e, c->user);
	}
	if (nl) {
		e_str(e, "limits");
		e_map(e, nl);
		if (c->limits.memory_bytes) {
			e_str(e, "memory");
			e_str(e, kit_format_size(c->limits.memory_bytes, b));
		}
		if (c->limits.pids) {
			e_str(e, "pids");
			e->r |= msgpack_pack_uint64(e->pk, c->limits.pids);
		}
		if (c->limits.cpu_millis) {
			e_str(e, "cpu");
			e_number(e, c->limits.cpu_millis / 1000.0);
		}
	}
	if (c->mount_count) {
		e_str(e, "mounts");
		e_arr(e, c->mount_count);
		for (i = 0; i < c->mount_count; i++) {
			e_map(e, 3);
			e_str(e, "volume");
			e_str(e, c->mounts[i].volume);
			e_str(e, "path");
			e_str(e, c->mounts[i].path);
			e_str(e, "read_only");
			e->r |= c->mounts[i].read_only ? msgpack_pack_true(e->pk) :
							 msgpack_pack_false(e->pk);
		}
	}
	for (unsigned r = 0; c->probes && r < POD_PROBE_ROLES; r++)
		if (c->probes[r].kind != POD_PROBE_NONE)
			e_probe(e, probe_role_names[r], &c->probes[r]);
}

int pod_spec_to_msgpack(const pod_spec_t *s, msgpack_packer *pk)
{
	struct enc e = { .pk = pk };
	char b[KIT_UNIT_BUF];
	size_t i, n = 6, ni;
	bool iso;

	iso = s->isolation.namespaces || s->isolation.hostname || s->isolation.rootfs;
	n += iso;
	n += s->volume_count > 0;
	n += s->dep_count > 0;     /* only when set: older pods' bytes stay */
	n += s->workflow != NULL;
	n += s->param_count > 0;
	n += s->action_count > 0;
	e_map(&e, n);
	e_str(&e, "name");
	e_str(&e, s->name);
	e_str(&e, "restart");
	e_str(&e, pod_restart_name(s->restart));
	e_str(&e, "backoff");
	/* max_retries only when set: the canonical bytes of every pod that
	 * does not use it stay what they were (no generation bump, no
	 * restart, on upgrade). */
	e_map(&e, 3 + (s->backoff.max_retries != 0));
	e_duration(&e, "base", s->backoff.base_ms);
	e_duration(&e, "cap", s->backoff.cap_ms);
	e_duration(&e, "stable_window", s->backoff.stable_window_ms);
	if (s->backoff.max_retries) {
		e_str(&e, "max_retries");
		e.r |= msgpack_pack_uint32(e.pk, s->backoff.max_retries);
	}
	e_str(&e, "stop");
	e_map(&e, 2);
	e_str(&e, "signal");
	e_str(&e, kit_format_signal(s->stop.signal, b));
	e_duration(&e, "grace", s->stop.grace_ms);
	if (iso) {
		e_str(&e, "isolation");
		e_map(&e, 1 + (s->isolation.hostname != NULL) +
			  (s->isolation.rootfs != NULL));
		e_str(&e, "namespaces");
		ni = (size_t)__builtin_popcount(s->isolation.namespaces & POD_NS_ALL);
		e_arr(&e, ni);
		for (i = 0; i < NS_COUNT; i++)
			if (s->isolation.namespaces & (1u << i))
				e_str(&e, ns_names[i]);
		if (s->isolation.hostname) {
			e_str(&e, "hostname");
			e_str(&e, s->isolation.hostname);
		}
		if (s->isolation.rootfs) {
			e_str(&e, "rootfs");
			e_str(&e, s->isolation.rootfs);
		}
	}
	if (s->volume_count) {
		e_str(&e, "volumes");
		e_arr(&e, s->volume_count);
		for (i = 0; i < s->volume_count; i++) {
			e_map(&e, 2);
			e_str(&e, "name");
			e_str(&e, s->volumes[i].name);
			e_str(&e, "host_path");
			e_str(&e, s->volumes[i].host_path);
		}
	}
	e_str(&e, "containers");
	e_arr(&e, s->container_count);
	for (i = 0; i < s->container_count; i++)
		e_container(&e, &s->containers[i]);
	e_str(&e, "reconcile_wait");
	e_map(&e, 1);
	switch (s->reconcile_wait.kind) {
	case RC_WAIT_RANDOM:
		e_str(&e, "random");
		e_map(&e, 2);
		e_duration(&e, "min", s->reconcile_wait.min_ms);
		e_duration(&e, "max", s->reconcile_wait.max_ms);
		break;
	case RC_WAIT_EXPONENTIAL:
		e_str(&e, "exponential");
		e_map(&e, 2);
		e_duration(&e, "wait", s->reconcile_wait.wait_ms);
		e_str(&e, "multiplier");
		e_number(&e, s->reconcile_wait.multiplier);
		break;
	default:
		e_duration(&e, "static", s->reconcile_wait.wait_ms);
		break;
	}
	if (s->dep_count) {
		e_str(&e, "depends_on");
		e_arr(&e, s->dep_count);
		for (i = 0; i < s->dep_count; i++) {
			e_map(&e, 2);
			e_str(&e, "pod");
			e_str(&e, s->deps[i].pod);
			e_str(&e, "condition");
			e_str(&e, pod_dep_condition_name(s->deps[i].condition));
		}
	}
	if (s->workflow) {
		e_str(&e, "workflow");
		e_str(&e, s->workflow);
	}
	if (s->param_count) {
		e_str(&e, "params");
		e_map(&e, s->param_count);
		for (i = 0; i < s->param_count; i++) {
			e_str(&e, s->params[i].key);
			e_str(&e, s->params[i].value);
		}
	}
	if (s->action_count) {
		/* By name: the same actions in another order are the same spec. */
		size_t ord[POD_ACTIONS_MAX];
		for (i = 0; i < s->action_count; i++) {
			size_t j = i;
			for (; j > 0 && strcmp(s->actions[ord[j - 1]].name, s->actions[i].name) > 0; j--)
				ord[j] = ord[j - 1];
			ord[j] = i;
		}
		e_str(&e, "actions");
		e_map(&e, s->action_count);
		for (i = 0; i < s->action_count; i++) {
			const pod_action_decl_t *a = &s->actions[ord[i]];
			e_str(&e, a->name);
			e_map(&e, 2 + (a->timeout_ms != 0) + (a->container != NULL));
			e_str(&e, "command");
			e_arr(&e, a->argc);
			for (size_t j = 0; j < a->argc; j++)
				e_str(&e, a->argv[j]);
			e_str(&e, "approval");
			e_str(&e, pod_approval_name(a->approval));
			if (a->timeout_ms)
				e_duration(&e, "timeout", a->timeout_ms);
			if (a->container) {
				e_str(&e, "container");
				e_str(&e, a->container);
			}
		}
	}
	return e.r ? -ENOMEM : 0;
}

int pod_spec_encode(const pod_spec_t *spec, char **buf, size_t *len)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (pod_spec_to_msgpack(spec, &pk) < 0) {
		msgpack_sbuffer_destroy(&sb);
		return -ENOMEM;
	}
	*len = sb.size;
	*buf = msgpack_sbuffer_release(&sb);
	if (!*buf) {
		/* An empty sbuffer has no data pointer; the encoding is never
		 * empty, so this is only reached on a failed write. */
		return -ENOMEM;
	}
	/* The sbuffer starts at 8 KiB and a spec is a few hundred bytes: an
	 * apply of 10,000 pods held 80 MB of slack until its commit, and the
	 * heap kept the holes (issue 38 item 2).  Shrinking never fails
	 * worse than keeping the buffer. */
	char *fit = realloc(*buf, *len);
	if (fit)
		*buf = fit;
	return 0;
}

int pod_spec_decode(const void *buf, size_t len, pod_spec_t **out, tank_error_t *err)
{
	msgpack_unpacked u;
	int rc;

	*out = NULL;
	/* Stored bytes: their declared sizes are checked before msgpack-c
	 * allocates for them. */
	if (kit_frame_unpack(buf, len, &u) < 0) {
		msgpack_unpacked_destroy(&u);
		return tank_error_set(err, TANK_ECORRUPT, "corrupt msgpack");
	}
	/* The labels every kind stores are not the kind's to read. */
	mf_labels_drop(&u.data);
	rc = pod_spec_from_msgpack(&u.data, out, NULL);
	if (rc < 0)
		tank_error_set(err, rc, "%s", tank_strerror(rc));
	msgpack_unpacked_destroy(&u);
	return rc;
}

bool pod_spec_same_run(const pod_spec_t *a, const pod_spec_t *b)
{
	/* b with a's client-side fields, compared in canonical bytes: every
	 * other field, including one added later, counts as what runs. */
	pod_spec_t x = *b;
	char *ea = NULL, *eb = NULL;
	size_t la, lb;
	bool same;

	x.reconcile_wait = a->reconcile_wait;
	/* The workflow and its params are read by the workflow's agent,
	 * not by what runs: changing them restarts nothing. */
	x.workflow = a->workflow;
	x.params = a->params;
	x.param_count = a->param_count;
	x.actions = a->actions;
	x.action_count = a->action_count;
	if (pod_spec_encode(a, &ea, &la) < 0 || pod_spec_encode(&x, &eb, &lb) < 0) {
		free(ea);
		return false;
	}
	same = la == lb && memcmp(ea, eb, la) == 0;
	free(ea);
	free(eb);
	return same;
}

pod_spec_t *pod_spec_dup(const pod_spec_t *spec)
{
	msgpack_unpacked u;
	pod_spec_t *copy = NULL;
	char *buf;
	size_t len;

	/* Through the canonical bytes: one code path to keep correct
	 * instead of a second, hand-written deep copy. */
	if (pod_spec_encode(spec, &buf, &len) < 0)
		return NULL;
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, buf, len, NULL) == MSGPACK_UNPACK_SUCCESS)
		pod_spec_from_msgpack(&u.data, &copy, NULL);
	msgpack_unpacked_destroy(&u);
	free(buf);
	return copy;
}
