/*
 * stack_spec — validation and canonical encoding of Stack objects.  See
 * stack_spec.h for the contract.
 */
#include "stack/stack_spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/kit.h"
#include "common/kit_frame.h"
#include "manifest/mf_labels.h"

static const char *const desired_names[] = { [STACK_UP] = "up", [STACK_DOWN] = "down" };
static const char *const on_failure_names[] = {
	[STACK_CONTINUE] = "continue", [STACK_ABORT] = "abort",
};

const char *stack_desired_name(stack_desired_t d)
{
	return (unsigned)d < 2 ? desired_names[d] : "?";
}

const char *stack_on_failure_name(stack_on_failure_t f)
{
	return (unsigned)f < 2 ? on_failure_names[f] : "?";
}

/* ---- times ----------------------------------------------------------------- */

/* n decimal digits at p, as a number; -1 when one is not a digit. */
static int digits(const char *p, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

int stack_time_parse(const char *s, size_t len, int64_t *ms)
{
	struct tm tm;
	size_t i = 19;
	int64_t frac = 0, off = 0;

	/* YYYY-MM-DDTHH:MM:SS at the least. */
	if (len < 20 || s[4] != '-' || s[7] != '-' ||
	    (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':')
		return -EINVAL;
	memset(&tm, 0, sizeof tm);
	int y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2);
	int h = digits(s + 11, 2), mi = digits(s + 14, 2), se = digits(s + 17, 2);
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 ||
	    mi < 0 || mi > 59 || se < 0 || se > 60)
		return -EINVAL;
	if (s[i] == '.') {
		int64_t scale = 100;
		size_t start = ++i;
		for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
			frac += (s[i] - '0') * scale;
			scale /= 10;
		}
		if (i == start)
			return -EINVAL;
	}
	if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
		i++;
	} else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
		int oh = digits(s + i + 1, 2), om = digits(s + i + 4, 2);
		if (oh < 0 || oh > 23 || om < 0 || om > 59)
			return -EINVAL;
		off = (oh * 60 + om) * 60 * 1000;
		if (s[i] == '-')
			off = -off;
		i += 6;
	} else {
		return -EINVAL;
	}
	if (i != len)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se == 60 ? 59 : se;
	time_t t = timegm(&tm);
	if (t == (time_t)-1 || tm.tm_mday != d)    /* 2026-02-30 normalises away */
		return -EINVAL;
	*ms = (int64_t)t * 1000 + frac - off;
	return *ms > 0 ? 0 : -EINVAL;
}

const char *stack_time_format(int64_t ms, char buf[STACK_TIME_MAX])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm)) {
		snprintf(buf, STACK_TIME_MAX, "?");
		return buf;
	}
	size_t n = strftime(buf, STACK_TIME_MAX, "%Y-%m-%dT%H:%M:%S", &tm);
	if (ms % 1000)
		snprintf(buf + n, STACK_TIME_MAX - n, ".%03dZ", (int)(ms % 1000));
	else
		snprintf(buf + n, STACK_TIME_MAX - n, "Z");
	return buf;
}

/* ---- validation -------------------------------------------------------------- */

#define FIELD KIT_FIELD

void stack_spec_free(stack_spec_t *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->npods; i++)
		pod_spec_free(s->pods[i].inline_spec);
	free(s->pods);
	free(s);
}

static void v_choice(kit_t *v, const msgpack_object *o, const char *const *names,
		     size_t n, int *out)
{
	char b[96];

	if (!kit_expect(v, o, MSGPACK_OBJECT_STR, "a string"))
		return;
	for (size_t i = 0; i < n; i++)
		if (kit_str_eq(o, names[i])) {
			*out = (int)i;
			return;
		}
	kit_err(v, "invalid value %s: must be one of %s, %s",
		kit_quote(o->via.str.ptr, o->via.str.size, b), names[0], names[1]);
}

static void v_time(kit_t *v, const msgpack_object *o, int64_t *out)
{
	char b[96];

	if (!kit_expect(v, o, MSGPACK_OBJECT_STR, "an RFC 3339 time"))
		return;
	if (stack_time_parse(o->via.str.ptr, o->via.str.size, out) < 0)
		kit_err(v, "invalid time %s: must be RFC 3339, e.g. 2026-11-25T18:00:00Z",
			kit_quote(o->via.str.ptr, o->via.str.size, b));
}

/* One entry of `pods`: a name, or an inline pod spec. */
static void v_member(kit_t *v, const msgpack_object *o, stack_member_t *m,
		     kit_errors_t *errs, const char *stack)
{
	char b[96];

	if (o->type == MSGPACK_OBJECT_STR) {
		if (!pod_name_valid(o->via.str.ptr, o->via.str.size)) {
			kit_err(v, "invalid pod name %s: must match [a-z0-9][a-z0-9-_.]{0,62}",
				kit_quote(o->via.str.ptr, o->via.str.size, b));
			return;
		}
		memcpy(m->name, o->via.str.ptr, o->via.str.size);
		m->name[o->via.str.size] = '\0';
		return;
	}
	if (o->type != MSGPACK_OBJECT_MAP) {
		kit_err(v, "must be a pod name or a pod spec (a map), not %s",
			kit_type_name(o->type));
		return;
	}
	kit_errors_t one;
	char prefix[POD_NAME_MAX + 600];
	kit_errors_init(&one);
	if (pod_spec_from_msgpack(o, &m->inline_spec, &one) == -ENOMEM)
		v->oom = true;
	snprintf(prefix, sizeof prefix, "%s: %.*s: ", stack, (int)v->plen, v->path);
	kit_errors_move(errs, &one, prefix);
	kit_errors_free(&one);
	if (m->inline_spec) {
		snprintf(m->name, sizeof m->name, "%s", m->inline_spec->name);
		m->owned = true;
	}
}

static void v_pods(kit_t *v, const msgpack_object *a, stack_spec_t *s, kit_errors_t *errs)
{
	char b[96];

	if (!kit_expect(v, a, MSGPACK_OBJECT_ARRAY, "a list"))
		return;
	if (a->via.array.size == 0) {
		kit_err(v, "must list at least one pod");
		return;
	}
	if (!kit_within(v, a->via.array.size, STACK_PODS_MAX, "pods"))
		return;
	if (!(s->pods = calloc(a->via.array.size, sizeof *s->pods))) {
		v->oom = true;
		return;
	}
	s->npods = a->via.array.size;
	for (size_t i = 0; i < s->npods; i++) {
		size_t sv = kit_push_index(v, i);
		v_member(v, &a->via.array.ptr[i], &s->pods[i], errs, s->name[0] ? s->name : "spec");
		for (size_t k = 0; k < i && s->pods[i].name[0]; k++)
			if (strcmp(s->pods[k].name, s->pods[i].name) == 0) {
				kit_err(v, "pod %s is listed twice",
					kit_quote(s->pods[i].name, strlen(s->pods[i].name), b));
				break;
			}
		kit_pop(v, sv);
	}
}

static void v_owns(kit_t *v, const msgpack_object *a, stack_spec_t *s)
{
	char b[96];

	if (!kit_expect(v, a, MSGPACK_OBJECT_ARRAY, "a list"))
		return;
	for (uint32_t i = 0; i < a->via.array.size; i++) {
		const msgpack_object *e = &a->via.array.ptr[i];
		size_t sv = kit_push_index(v, i);
		bool found = false;
		if (kit_expect(v, e, MSGPACK_OBJECT_STR, "a pod name")) {
			for (size_t k = 0; k < s->npods; k++)
				if (e->via.str.size == strlen(s->pods[k].name) &&
				    memcmp(e->via.str.ptr, s->pods[k].name, e->via.str.size) == 0) {
					s->pods[k].owned = true;
					found = true;
				}
			if (!found)
				kit_err(v, "%s is not in pods",
					kit_quote(e->via.str.ptr, e->via.str.size, b));
		}
		kit_pop(v, sv);
	}
}

int stack_spec_from_msgpack(const msgpack_object *map, stack_spec_t **out,
			    kit_errors_t *errs)
{
	static const char *const keys[] = { "name", "pods", "owns", "desired", "on_failure",
					    "start_at", "stop_at", "deadline",
					    "generation", "uid", "created_at", "status", NULL };
	kit_t v = { .pod = "spec" };
	kit_errors_t local;
	stack_spec_t *s = NULL;
	const msgpack_object *name;
	char b[96];
	int d = STACK_UP, f = STACK_CONTINUE;

	*out = NULL;
	kit_errors_init(&local);
	v.errs = &local;
	if (!map || map->type != MSGPACK_OBJECT_MAP) {
		kit_err(&v, "must be a map, not %s", map ? kit_type_name(map->type) : "nothing");
		goto done;
	}
	if (!(s = calloc(1, sizeof *s))) {
		v.oom = true;
		goto done;
	}
	name = kit_lookup(map, "name");
	if (!name)
		kit_err(&v, "name: required");
	else if (name->type != MSGPACK_OBJECT_STR)
		kit_err(&v, "name: must be a string, not %s", kit_type_name(name->type));
	else if (!pod_name_valid(name->via.str.ptr, name->via.str.size))
		kit_err(&v, "name: invalid name %s: must match [a-z0-9][a-z0-9-_.]{0,62}",
			kit_quote(name->via.str.ptr, name->via.str.size, b));
	else {
		memcpy(s->name, name->via.str.ptr, name->via.str.size);
		s->name[name->via.str.size] = '\0';
		v.pod = s->name;
	}
	kit_check_keys(&v, map, keys);
	if (!kit_lookup(map, "pods"))
		kit_err(&v, "pods: required");
	FIELD(&v, map, "pods", v_pods(&v, o, s, &local));
	FIELD(&v, map, "owns", v_owns(&v, o, s));
	FIELD(&v, map, "desired", v_choice(&v, o, desired_names, 2, &d));
	FIELD(&v, map, "on_failure", v_choice(&v, o, on_failure_names, 2, &f));
	FIELD(&v, map, "start_at", v_time(&v, o, &s->start_at));
	FIELD(&v, map, "stop_at", v_time(&v, o, &s->stop_at));
	FIELD(&v, map, "deadline", v_time(&v, o, &s->deadline));
	s->desired = (stack_desired_t)d;
	s->on_failure = (stack_on_failure_t)f;
	if (s->start_at && s->stop_at && s->stop_at <= s->start_at)
		kit_err(&v, "stop_at: must be after start_at");
	if (s->start_at && s->deadline && s->deadline <= s->start_at)
		kit_err(&v, "deadline: must be after start_at");
done:
	if (!local.count && !v.oom) {
		*out = s;
		kit_errors_free(&local);
		return 0;
	}
	stack_spec_free(s);
	if (errs)
		kit_errors_move(errs, &local, NULL);
	kit_errors_free(&local);
	return v.oom ? -ENOMEM : TANK_EINVALID;
}

/* ---- encoding ------------------------------------------------------------------ */

static int pk_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	int rc = msgpack_pack_str(pk, n);
	return rc ? rc : msgpack_pack_str_body(pk, s, n);
}

int stack_spec_to_msgpack(const stack_spec_t *s, msgpack_packer *pk)
{
	const int64_t *times[3] = { &s->start_at, &s->stop_at, &s->deadline };
	static const char *const tnames[3] = { "start_at", "stop_at", "deadline" };
	size_t nkeys = 5, nowned = 0;
	char buf[STACK_TIME_MAX];
	int rc;

	for (int i = 0; i < 3; i++)
		nkeys += *times[i] != 0;
	for (size_t i = 0; i < s->npods; i++)
		nowned += s->pods[i].owned;
	if ((rc = msgpack_pack_map(pk, nkeys)) || (rc = pk_str(pk, "name")) ||
	    (rc = pk_str(pk, s->name)) || (rc = pk_str(pk, "pods")) ||
	    (rc = msgpack_pack_array(pk, s->npods)))
		return rc;
	for (size_t i = 0; i < s->npods; i++)
		if ((rc = pk_str(pk, s->pods[i].name)))
			return rc;
	if ((rc = pk_str(pk, "owns")) || (rc = msgpack_pack_array(pk, nowned)))
		return rc;
	for (size_t i = 0; i < s->npods; i++)
		if (s->pods[i].owned && (rc = pk_str(pk, s->pods[i].name)))
			return rc;
	if ((rc = pk_str(pk, "desired")) || (rc = pk_str(pk, stack_desired_name(s->desired))) ||
	    (rc = pk_str(pk, "on_failure")) ||
	    (rc = pk_str(pk, stack_on_failure_name(s->on_failure))))
		return rc;
	for (int i = 0; i < 3; i++)
		if (*times[i] && ((rc = pk_str(pk, tnames[i])) ||
				  (rc = pk_str(pk, stack_time_format(*times[i], buf)))))
			return rc;
	return 0;
}

int stack_spec_encode(const stack_spec_t *s, char **buf, size_t *len)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (stack_spec_to_msgpack(s, &pk) != 0) {
		msgpack_sbuffer_destroy(&sb);
		return -ENOMEM;
	}
	*len = sb.size;
	*buf = msgpack_sbuffer_release(&sb);
	return *buf ? 0 : -ENOMEM;
}

int stack_spec_decode(const void *buf, size_t len, stack_spec_t **out, tank_error_t *err)
{
	msgpack_unpacked u;
	kit_errors_t errs;
	int rc;

	*out = NULL;
	/* Stored bytes: their declared sizes are checked before msgpack-c
	 * allocates for them. */
	if (kit_frame_unpack(buf, len, &u) < 0) {
		msgpack_unpacked_destroy(&u);
		return tank_error_set(err, TANK_ECORRUPT, "corrupt msgpack");
	}
	kit_errors_init(&errs);
	/* The labels every kind stores are not the kind's to read. */
	mf_labels_drop(&u.data);
	rc = stack_spec_from_msgpack(&u.data, out, &errs);
	if (rc < 0)
		tank_error_set(err, rc, "%s", errs.count && errs.stored ? errs.msgs[0]
						: tank_strerror(rc));
	kit_errors_free(&errs);
	msgpack_unpacked_destroy(&u);
	return rc;
}

/* ---- the manifest kind ------------------------------------------------------------ */

static int stack__mf_validate(const msgpack_object *o, void **obj, const char **name,
			      kit_errors_t *errs)
{
	stack_spec_t *s;
	int rc = stack_spec_from_msgpack(o, &s, errs);

	if (rc < 0)
		return rc;
	*obj = s;
	*name = s->name;
	return 0;
}

static void stack__mf_free(void *obj)
{
	stack_spec_free(obj);
}

const mf_kind_t stack_mf_kind = {
	.name = "Stack", .validate = stack__mf_validate, .free_obj = stack__mf_free,
};
