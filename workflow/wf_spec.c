/*
 * wf_spec.c — Task, Stage and Workflow specs.  See wf_spec.h.
 */
#include "workflow/wf_spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kit.h"
#include "common/kit_frame.h"
#include "workflow/wf_tmpl.h"
#include "manifest/mf_labels.h"

static const char *const what_names[] = { "task", "stage", "workflow" };

const char *wf_env_name(wf_env_t env)
{
	return env == WF_ENV_STOPPED ? "stopped" : "running";
}

bool wf_env_parse(const char *s, wf_env_t *env)
{
	if (!strcmp(s, "running"))
		*env = WF_ENV_RUNNING;
	else if (!strcmp(s, "stopped"))
		*env = WF_ENV_STOPPED;
	else
		return false;
	return true;
}

void wf_spec_free(wf_spec_t *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->ntmpl; i++) {
		free(s->tmpl[i].name);
		free(s->tmpl[i].contents);
		free(s->tmpl[i].path);
	}
	free(s->tmpl);
	for (size_t i = 0; i < s->nrefs; i++)
		free(s->refs[i]);
	free(s->refs);
	free(s);
}

static bool key_is(const msgpack_object *k, const char *s)
{
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
	       !memcmp(k->via.str.ptr, s, k->via.str.size);
}

static const msgpack_object *get(const msgpack_object *m, const char *key)
{
	for (uint32_t i = 0; m && m->type == MSGPACK_OBJECT_MAP && i < m->via.map.size; i++)
		if (key_is(&m->via.map.ptr[i].key, key))
			return &m->via.map.ptr[i].val;
	return NULL;
}

static char *dup_str(const msgpack_object *o)
{
	char *s = malloc(o->via.str.size + 1);
	if (s) {
		memcpy(s, o->via.str.ptr, o->via.str.size);
		s[o->via.str.size] = '\0';
	}
	return s;
}

/* Every key of m is one of known (NULL-terminated), else an error each. */
static void known_keys(const msgpack_object *m, const char *const *known, const char *who,
		       const char *where, kit_errors_t *errs)
{
	char q[96];
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key;
		bool ok = false;
		for (size_t j = 0; known[j]; j++)
			ok |= key_is(k, known[j]);
		if (!ok)
			kit_errors_add(errs, "%s: %sunknown field %s", who, where,
				       k->type == MSGPACK_OBJECT_STR
				       ? kit_quote(k->via.str.ptr, k->via.str.size, q) : "(not a string)");
	}
}

static void v_templates(const msgpack_object *a, wf_spec_t *s, kit_errors_t *errs, bool *oom)
{
	static const char *const known[] = { "name", "contents", "path", NULL };
	char where[64];

	if (a->type != MSGPACK_OBJECT_ARRAY || !a->via.array.size ||
	    a->via.array.size > WF_TEMPLATES_MAX) {
		kit_errors_add(errs, "%s: templates: must be a list of 1 to %d templates "
			       "({name, contents, path?})", s->name, WF_TEMPLATES_MAX);
		return;
	}
	if (!(s->tmpl = calloc(a->via.array.size, sizeof *s->tmpl))) {
		*oom = true;
		return;
	}
	for (uint32_t i = 0; i < a->via.array.size; i++) {
		const msgpack_object *t = &a->via.array.ptr[i], *o;
		wf_template_t *w = &s->tmpl[s->ntmpl++];
		tank_error_t e;

		snprintf(where, sizeof where, "templates[%u]: ", i);
		if (t->type != MSGPACK_OBJECT_MAP) {
			kit_errors_add(errs, "%s: %smust be a map ({name, contents, path?})",
				       s->name, where);
			continue;
		}
		known_keys(t, known, s->name, where, errs);
		o = get(t, "name");
		if (!o || o->type != MSGPACK_OBJECT_STR || !o->via.str.size ||
		    o->via.str.size > POD_NAME_MAX) {
			kit_errors_add(errs, "%s: %sname: required, a string of 1 to %d bytes",
				       s->name, where, POD_NAME_MAX);
		} else if (!(w->name = dup_str(o))) {
			*oom = true;
			return;
		} else {
			for (size_t j = 0; j + 1 < s->ntmpl; j++)
				if (s->tmpl[j].name && !strcmp(s->tmpl[j].name, w->name))
					kit_errors_add(errs, "%s: %sname: \"%s\" is given twice",
						       s->name, where, w->name);
		}
		o = get(t, "contents");
		if (!o || o->type != MSGPACK_OBJECT_STR || o->via.str.size > WF_CONTENTS_MAX ||
		    memchr(o->via.str.ptr, '\0', o->via.str.size)) {
			kit_errors_add(errs, "%s: %scontents: required, a string (at most %u bytes, "
				       "no NUL)", s->name, where, WF_CONTENTS_MAX);
		} else if (!(w->contents = dup_str(o))) {
			*oom = true;
			return;
		} else if (wf_tmpl_check(w->contents, strlen(w->contents), &e) < 0) {
			kit_errors_add(errs, "%s: %scontents: %s", s->name, where, e.msg);
		}
		if ((o = get(t, "path")) && o->type != MSGPACK_OBJECT_NIL) {
			if (o->type != MSGPACK_OBJECT_STR || !o->via.str.size ||
			    o->via.str.size > 255 || memchr(o->via.str.ptr, '\0', o->via.str.size) ||
			    memchr(o->via.str.ptr, '\n', o->via.str.size)) {
				kit_errors_add(errs, "%s: %spath: a string of 1 to 255 bytes on "
					       "one line", s->name, where);
			} else if (!(w->path = dup_str(o))) {
				*oom = true;
				return;
			} else if (wf_tmpl_check(w->path, strlen(w->path), &e) < 0) {
				kit_errors_add(errs, "%s: %spath: %s", s->name, where, e.msg);
			} else if (w->path[0] != '/' && w->path[0] != '{') {
				kit_errors_add(errs, "%s: %spath: must be absolute (inside the pod)",
					       s->name, where);
			}
		}
	}
}

/* tasks: [NAME…] of a stage, stages: [NAME…] of a workflow */
static void v_refs(const msgpack_object *a, const char *field, wf_spec_t *s,
		   kit_errors_t *errs, bool *oom)
{
	char q[96];
	bool empty_ok = s->what == WF_STAGE;   /* a stage may only switch env */

	if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size > WF_REFS_MAX ||
	    (!empty_ok && !a->via.array.size)) {
		kit_errors_add(errs, "%s: %s: must be a list of %d to %d names", s->name, field,
			       empty_ok ? 0 : 1, WF_REFS_MAX);
		return;
	}
	if (a->via.array.size && !(s->refs = calloc(a->via.array.size, sizeof *s->refs))) {
		*oom = true;
		return;
	}
	for (uint32_t i = 0; i < a->via.array.size; i++) {
		const msgpack_object *o = &a->via.array.ptr[i];
		if (o->type != MSGPACK_OBJECT_STR || !pod_name_valid(o->via.str.ptr, o->via.str.size)) {
			kit_errors_add(errs, "%s: %s[%u]: invalid name %s: must match "
				       "[a-z0-9][a-z0-9-_.]{0,62}", s->name, field, i,
				       o->type == MSGPACK_OBJECT_STR
				       ? kit_quote(o->via.str.ptr, o->via.str.size, q) : "(not a string)");
			continue;
		}
		if (!(s->refs[s->nrefs++] = dup_str(o))) {
			*oom = true;
			return;
		}
	}
}

int wf_spec_from_msgpack(wf_what_t what, const msgpack_object *o, wf_spec_t **out,
			 kit_errors_t *errs)
{
	static const char *const known[3][8] = {
		{ "name", "templates", "generation", "uid", "created_at", "status", NULL },
		{ "name", "tasks", "environment", "generation", "uid", "created_at", "status", NULL },
		{ "name", "stages", "generation", "uid", "created_at", "status", NULL },
	};
	size_t before = errs ? errs->count : 0;
	kit_errors_t local;
	wf_spec_t *s;
	bool oom = false;
	char q[96];

	*out = NULL;
	kit_errors_init(&local);
	if (!errs)
		errs = &local;
	if (!o || o->type != MSGPACK_OBJECT_MAP) {
		kit_errors_add(errs, "a %s is a map", what_names[what]);
		kit_errors_free(&local);
		return TANK_EINVALID;
	}
	if (!(s = calloc(1, sizeof *s))) {
		kit_errors_free(&local);
		return -ENOMEM;
	}
	s->what = what;
	const msgpack_object *n = get(o, "name");
	if (!n || n->type != MSGPACK_OBJECT_STR || !pod_name_valid(n->via.str.ptr, n->via.str.size)) {
		kit_errors_add(errs, "name: required, a name matching [a-z0-9][a-z0-9-_.]{0,62}%s%s",
			       n && n->type == MSGPACK_OBJECT_STR ? ", not " : "",
			       n && n->type == MSGPACK_OBJECT_STR
			       ? kit_quote(n->via.str.ptr, n->via.str.size, q) : "");
		snprintf(s->name, sizeof s->name, "?");
	} else {
		memcpy(s->name, n->via.str.ptr, n->via.str.size);
		s->name[n->via.str.size] = '\0';
	}
	known_keys(o, known[what], s->name, "", errs);
	const msgpack_object *f;
	switch (what) {
	case WF_TASK:
		if (!(f = get(o, "templates")))
			kit_errors_add(errs, "%s: templates: required", s->name);
		else
			v_templates(f, s, errs, &oom);
		break;
	case WF_STAGE:
		if (!(f = get(o, "tasks")))
			kit_errors_add(errs, "%s: tasks: required (a list of task names, may be "
				       "empty)", s->name);
		else
			v_refs(f, "tasks", s, errs, &oom);
		if ((f = get(o, "environment")) && f->type != MSGPACK_OBJECT_NIL) {
			char env[16] = "";
			if (f->type == MSGPACK_OBJECT_STR && f->via.str.size < sizeof env)
				memcpy(env, f->via.str.ptr, f->via.str.size);
			if (!wf_env_parse(env, &s->env))
				kit_errors_add(errs, "%s: environment: must be running or stopped",
					       s->name);
		}
		break;
	case WF_WORKFLOW:
		if (!(f = get(o, "stages")))
			kit_errors_add(errs, "%s: stages: required", s->name);
		else
			v_refs(f, "stages", s, errs, &oom);
		break;
	}
	int rc = oom ? -ENOMEM : errs->count > before ? TANK_EINVALID : 0;
	kit_errors_free(&local);
	if (rc < 0) {
		wf_spec_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static int pk_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

int wf_spec_encode(const wf_spec_t *s, char **buf, size_t *len)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	rc = msgpack_pack_map(&pk, s->what == WF_STAGE ? 3 : 2);
	rc |= pk_str(&pk, "name");
	rc |= pk_str(&pk, s->name);
	if (s->what == WF_TASK) {
		rc |= pk_str(&pk, "templates");
		rc |= msgpack_pack_array(&pk, s->ntmpl);
		for (size_t i = 0; i < s->ntmpl; i++) {
			const wf_template_t *t = &s->tmpl[i];
			rc |= msgpack_pack_map(&pk, 2 + (t->path != NULL));
			rc |= pk_str(&pk, "name");     rc |= pk_str(&pk, t->name);
			rc |= pk_str(&pk, "contents"); rc |= pk_str(&pk, t->contents);
			if (t->path) {
				rc |= pk_str(&pk, "path");
				rc |= pk_str(&pk, t->path);
			}
		}
	} else {
		rc |= pk_str(&pk, s->what == WF_STAGE ? "tasks" : "stages");
		rc |= msgpack_pack_array(&pk, s->nrefs);
		for (size_t i = 0; i < s->nrefs; i++)
			rc |= pk_str(&pk, s->refs[i]);
		if (s->what == WF_STAGE) {
			rc |= pk_str(&pk, "environment");
			rc |= pk_str(&pk, wf_env_name(s->env));
		}
	}
	if (rc || !sb.data) {
		msgpack_sbuffer_destroy(&sb);
		return -ENOMEM;
	}
	*len = sb.size;
	*buf = msgpack_sbuffer_release(&sb);
	return 0;
}

int wf_spec_decode(wf_what_t what, const void *buf, size_t len, wf_spec_t **out,
		   tank_error_t *e)
{
	msgpack_unpacked u;
	int rc;

	*out = NULL;
	if (kit_frame_unpack(buf, len, &u) < 0) {
		msgpack_unpacked_destroy(&u);
		return tank_error_set(e, TANK_ECORRUPT, "stored %s: corrupt msgpack",
				      what_names[what]);
	}
	kit_errors_t errs;
	kit_errors_init(&errs);
	/* The labels every kind stores are not the kind's to read. */
	mf_labels_drop(&u.data);
	rc = wf_spec_from_msgpack(what, &u.data, out, &errs);
	if (rc < 0)
		tank_error_set(e, rc == TANK_EINVALID ? TANK_ECORRUPT : rc, "stored %s: %s",
			       what_names[what], errs.count && errs.stored ? errs.msgs[0]
			       : tank_strerror(rc));
	kit_errors_free(&errs);
	msgpack_unpacked_destroy(&u);
	return rc < 0 ? (rc == TANK_EINVALID ? TANK_ECORRUPT : rc) : 0;
}

/* ---- the manifest's entries ------------------------------------------------ */

static int validate(wf_what_t what, const msgpack_object *o, void **obj, const char **name,
		    kit_errors_t *errs)
{
	wf_spec_t *s;
	int rc = wf_spec_from_msgpack(what, o, &s, errs);
	if (rc < 0)
		return rc;
	*obj = s;
	*name = s->name;
	return 0;
}

static int v_task(const msgpack_object *o, void **obj, const char **name, kit_errors_t *errs)
{
	return validate(WF_TASK, o, obj, name, errs);
}

static int v_stage(const msgpack_object *o, void **obj, const char **name, kit_errors_t *errs)
{
	return validate(WF_STAGE, o, obj, name, errs);
}

static int v_workflow(const msgpack_object *o, void **obj, const char **name,
		      kit_errors_t *errs)
{
	return validate(WF_WORKFLOW, o, obj, name, errs);
}

static void free_obj(void *obj)
{
	wf_spec_free(obj);
}

const mf_kind_t wf_task_mf = { .name = "Task", .validate = v_task, .free_obj = free_obj };
const mf_kind_t wf_stage_mf = { .name = "Stage", .validate = v_stage, .free_obj = free_obj };
const mf_kind_t wf_workflow_mf = { .name = "Workflow", .validate = v_workflow,
				   .free_obj = free_obj };
