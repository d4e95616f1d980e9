/* manifest/: documents of several kinds in one file, each handed to its
 * kind's validator through the registry. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/tank_err.h"
#include "manifest/mf.h"
#include "pod/pod_manifest.h"

/* A test kind: {name: str, size: int}; nothing else. */
typedef struct widget { char name[32]; int64_t size; } widget_t;

static int widget_validate(const msgpack_object *o, void **obj, const char **name,
			   kit_errors_t *errs)
{
	widget_t *w;
	if (o->type != MSGPACK_OBJECT_MAP) {
		kit_errors_add(errs, "must be a map");
		return TANK_EINVALID;
	}
	if (!(w = calloc(1, sizeof *w)))
		return -ENOMEM;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key, *v = &o->via.map.ptr[i].val;
		if (k->via.str.size == 4 && !memcmp(k->via.str.ptr, "name", 4) &&
		    v->type == MSGPACK_OBJECT_STR && v->via.str.size < sizeof w->name)
			memcpy(w->name, v->via.str.ptr, v->via.str.size);
		else if (k->via.str.size == 4 && !memcmp(k->via.str.ptr, "size", 4) &&
			 v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			w->size = (int64_t)v->via.u64;
		else
			kit_errors_add(errs, "%.*s: unknown key", (int)k->via.str.size, k->via.str.ptr);
	}
	if (!w->name[0])
		kit_errors_add(errs, "name: required");
	if (errs->count) {
		free(w);
		return TANK_EINVALID;
	}
	*obj = w;
	*name = w->name;
	return 0;
}

static const mf_kind_t widget_kind = {
	.name = "Widget", .validate = widget_validate, .free_obj = free,
};

static void registry(mf_registry_t *r)
{
	memset(r, 0, sizeof *r);
	cr_assert_eq(mf_register(r, &pod_mf_kind), 0);
	cr_assert_eq(mf_register(r, &widget_kind), 0);
	cr_assert_eq(mf_register(r, &widget_kind), -EEXIST);
}

Test(manifest, a_file_mixes_kinds_and_kind_defaults_to_pod)
{
	static const char text[] =
		"name: web\ncontainers: [{name: c, command: [/bin/true]}]\n"
		"---\n"
		"kind: Widget\nname: web\nsize: 3\n"          /* same name, other kind */
		"---\n"
		"kind: Pod\nname: db\ncontainers: [{name: c, command: [/bin/true]}]\n";
	mf_registry_t r;
	mf_manifest_t *m = NULL;
	kit_errors_t errs;

	registry(&r);
	kit_errors_init(&errs);
	cr_assert_eq(mf_parse(&r, text, sizeof text - 1, "mix.yaml", &m, &errs), 0,
		     "%s", errs.stored ? errs.msgs[0] : "?");
	cr_assert_eq(m->count, 3);
	cr_assert_eq(m->objs[0].kind, &pod_mf_kind);
	cr_assert_str_eq(m->objs[0].name, "web");
	cr_assert_eq(m->objs[1].kind, &widget_kind);
	cr_assert_eq(((widget_t *)m->objs[1].obj)->size, 3);
	cr_assert_eq(m->objs[2].kind, &pod_mf_kind);
	cr_assert_str_eq(m->objs[2].name, "db");
	mf_free(m);
	kit_errors_free(&errs);
}

Test(manifest, unknown_kind_and_duplicates_refuse_the_whole_file)
{
	static const char text[] =
		"kind: Widget\nname: a\n"
		"---\n"
		"kind: Stak\nname: b\n"
		"---\n"
		"- {kind: Widget, name: a}\n"
		"- {kind: 7, name: c}\n";
	mf_registry_t r;
	mf_manifest_t *m = NULL;
	kit_errors_t errs;

	registry(&r);
	kit_errors_init(&errs);
	cr_assert_eq(mf_parse(&r, text, sizeof text - 1, "bad.yaml", &m, &errs), TANK_EINVALID);
	cr_assert_null(m);
	cr_assert_eq(errs.stored, 3);
	cr_assert_str_eq(errs.msgs[0],
			 "bad.yaml: document 2: unknown kind \"Stak\" (known: Pod, Widget)");
	cr_assert_str_eq(errs.msgs[1],
			 "bad.yaml: document 3, item 1: a: duplicate widget name (first in document 1)");
	cr_assert_str_eq(errs.msgs[2], "bad.yaml: document 3, item 2: kind: must be a string");
	kit_errors_free(&errs);

	/* The pods-only reader refuses another kind the same way. */
	pod_manifest_t *pm = NULL;
	static const char w[] = "kind: Widget\nname: a\n";
	kit_errors_init(&errs);
	cr_assert_eq(pod_manifest_parse(w, sizeof w - 1, "w.yaml", &pm, &errs), TANK_EINVALID);
	cr_assert_str_eq(errs.msgs[0], "w.yaml: document 1: unknown kind \"Widget\" (known: Pod)");
	kit_errors_free(&errs);

	/* A kind in another case is named, not just unknown. */
	static const char lc[] = "kind: widget\nname: a\n";
	kit_errors_init(&errs);
	cr_assert_eq(mf_parse(&r, lc, sizeof lc - 1, "lc.yaml", &m, &errs), TANK_EINVALID);
	cr_assert_str_eq(errs.msgs[0], "lc.yaml: document 1: unknown kind \"widget\": did you mean "
			 "\"Widget\"? (kinds are case-sensitive)");
	kit_errors_free(&errs);
}

/* A manifest is UTF-8 text: malformed bytes are refused naming the line,
 * before the YAML parser sees them (libfyaml looped forever on some of
 * them in a directive line; found by make fuzz). */
Test(manifest, bytes_that_are_not_utf8_are_refused_with_the_line)
{
	static const char *const bad[] = {
		"%-- \xe6\xe6 x\n",              /* the input that hung tankctl */
		"name: a\ncommand: [\xc0\xaf]\n", /* overlong '/' */
		"name: \xed\xa0\x80\n",          /* a UTF-16 surrogate */
		"name: \xf4\x90\x80\x80\n",      /* past U+10FFFF */
		"name: a\xe2\x82",               /* cut at the end */
	};
	static const unsigned line[] = { 1, 2, 1, 1, 1 };
	mf_registry_t r;
	registry(&r);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		mf_manifest_t *m = NULL;
		kit_errors_t errs;
		char want[64];
		kit_errors_init(&errs);
		cr_assert_eq(mf_parse(&r, bad[i], strlen(bad[i]), "u.yaml", &m, &errs), TANK_EINVALID,
			     "input %zu", i);
		cr_assert_null(m);
		snprintf(want, sizeof want, "u.yaml:%u: not UTF-8 text", line[i]);
		cr_assert(errs.stored && strncmp(errs.msgs[0], want, strlen(want)) == 0,
			  "input %zu: %s", i, errs.stored ? errs.msgs[0] : "");
		kit_errors_free(&errs);
	}
	/* Well-formed multi-byte text is fine. */
	static const char good[] = "name: caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80\n";
	mf_manifest_t *m = NULL;
	kit_errors_t errs;
	kit_errors_init(&errs);
	(void)mf_parse(&r, good, sizeof good - 1, "g.yaml", &m, &errs);
	for (size_t k = 0; k < errs.stored; k++)
		cr_assert_null(strstr(errs.msgs[k], "UTF-8"), "%s", errs.msgs[k]);
	mf_free(m);
	kit_errors_free(&errs);
}

/* An alias names a plain anchor: libfyaml reads one with a '/' as a path
 * and parses it past its end (found by make fuzz: an alias "*" "/2"). */
Test(manifest, an_alias_with_a_path_in_its_name_is_refused)
{
	static const char text[] = ":\n- E: */2\n";
	mf_registry_t r;
	mf_manifest_t *m = NULL;
	kit_errors_t errs;
	registry(&r);
	kit_errors_init(&errs);
	cr_assert_eq(mf_parse(&r, text, sizeof text - 1, "a.yaml", &m, &errs), TANK_EINVALID);
	cr_assert_null(m);
	cr_assert(errs.stored && strstr(errs.msgs[0], "a.yaml:2:") &&
		  strstr(errs.msgs[0], "an alias names an anchor"), "%s",
		  errs.stored ? errs.msgs[0] : "");
	kit_errors_free(&errs);
}
