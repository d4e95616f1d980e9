/* The Stack kind's spec: every field checked and named, RFC 3339 times,
 * and the canonical encoding read back as it was. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/mf.h"
#include "pod/pod_manifest.h"
#include "stack/stack_spec.h"

static const mf_registry_t kinds = { .kinds = { &pod_mf_kind, &stack_mf_kind }, .n = 2 };

/* Parses one YAML manifest; returns the errors joined (or "") and the
 * stack in *out when it is valid. */
static char *parse(const char *yaml, mf_manifest_t **out)
{
	kit_errors_t e;
	kit_errors_init(&e);
	*out = NULL;
	int rc = mf_parse(&kinds, yaml, strlen(yaml), "t.yaml", out, &e);
	char *all = rc == 0 ? strdup("") : kit_errors_join(&e);
	kit_errors_free(&e);
	return all;
}

Test(stack, rfc3339_times)
{
	int64_t ms;
	char buf[STACK_TIME_MAX];

	cr_assert_eq(stack_time_parse("2026-11-25T18:00:00Z", 20, &ms), 0);
	cr_assert_eq(ms, 1795629600000LL);
	cr_assert_str_eq(stack_time_format(ms, buf), "2026-11-25T18:00:00Z");
	const char *off = "2026-11-25T19:30:00.250+01:30";
	cr_assert_eq(stack_time_parse(off, strlen(off), &ms), 0);
	cr_assert_eq(ms, 1795629600250LL);
	cr_assert_str_eq(stack_time_format(ms, buf), "2026-11-25T18:00:00.250Z");
	const char *bad[] = { "2026-11-25", "2026-11-25T18:00:00", "2026-02-30T00:00:00Z",
			      "2026-13-01T00:00:00Z", "2026-11-25T18:00:00+1", "tomorrow",
			      "2026-11-25T18:00:00Zjunk", "1969-12-31T23:59:59Z",
			      "2026-11-25T18:00:00.Z" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(stack_time_parse(bad[i], strlen(bad[i]), &ms), -EINVAL, "%s", bad[i]);
}

Test(stack, a_valid_stack_round_trips)
{
	mf_manifest_t *m;
	char *errs = parse("kind: Stack\nname: shop\non_failure: abort\ndesired: down\n"
			   "start_at: 2026-11-25T18:00:00Z\nstop_at: 2026-11-25T20:00:00+00:00\n"
			   "pods:\n  - name: db\n    containers: [{name: c, command: [sleep, '1']}]\n"
			   "  - web\nowns: [web]\n", &m);
	cr_assert_str_eq(errs, "");
	free(errs);
	const stack_spec_t *s = m->objs[0].obj;
	cr_assert_eq(s->npods, 2);
	cr_assert(s->pods[0].owned && s->pods[0].inline_spec);
	cr_assert(s->pods[1].owned && !s->pods[1].inline_spec);
	cr_assert_eq(s->desired, STACK_DOWN);
	cr_assert_eq(s->on_failure, STACK_ABORT);

	char *buf;
	size_t len;
	stack_spec_t *back;
	tank_error_t e;
	cr_assert_eq(stack_spec_encode(s, &buf, &len), 0);
	cr_assert_eq(stack_spec_decode(buf, len, &back, &e), 0, "%s", e.msg);
	cr_assert_str_eq(back->name, "shop");
	cr_assert_eq(back->npods, 2);
	cr_assert_str_eq(back->pods[0].name, "db");
	cr_assert(back->pods[0].owned && back->pods[1].owned, "ownership is stored");
	cr_assert_null(back->pods[0].inline_spec, "the store keeps names");
	cr_assert_eq(back->start_at, s->start_at);
	cr_assert_eq(back->stop_at, s->stop_at);
	cr_assert_eq(back->desired, STACK_DOWN);
	char *buf2;
	size_t len2;
	cr_assert_eq(stack_spec_encode(back, &buf2, &len2), 0);
	cr_assert(len == len2 && !memcmp(buf, buf2, len), "canonical");
	free(buf);
	free(buf2);
	stack_spec_free(back);
	mf_free(m);
	cr_assert_eq(stack_spec_decode("\xc1", 1, &back, &e), TANK_ECORRUPT);
}

Test(stack, every_problem_is_named)
{
	static const struct { const char *yaml, *want; } cases[] = {
		{ "kind: Stack\nname: s\n", "s: pods: required" },
		{ "kind: Stack\nname: s\npods: []\n", "s: pods: must list at least one pod" },
		{ "kind: Stack\nname: s\npods: [a, a]\n", "s: pods[1]: pod \"a\" is listed twice" },
		{ "kind: Stack\nname: s\npods: [a, 7]\n",
		  "s: pods[1]: must be a pod name or a pod spec (a map), not an integer" },
		{ "kind: Stack\nname: s\npods: [Bad]\n", "s: pods[0]: invalid pod name \"Bad\"" },
		{ "kind: Stack\nname: s\npods: [a]\nowns: [b]\n", "s: owns[0]: \"b\" is not in pods" },
		{ "kind: Stack\nname: s\npods: [a]\ndesired: sideways\n",
		  "s: desired: invalid value \"sideways\": must be one of up, down" },
		{ "kind: Stack\nname: s\npods: [a]\non_failure: retry\n",
		  "s: on_failure: invalid value \"retry\": must be one of continue, abort" },
		{ "kind: Stack\nname: s\npods: [a]\nstart_at: 2026-11-25T18:00:00Z\n"
		  "stop_at: 2026-11-25T17:00:00Z\n", "s: stop_at: must be after start_at" },
		{ "kind: Stack\nname: s\npods: [a]\ndeadline: 5m\n",
		  "s: deadline: invalid time \"5m\": must be RFC 3339" },
		{ "kind: Stack\nname: s\npods: [a]\nreplicas: 3\n", "s: unknown key \"replicas\"" },
		{ "kind: Stack\npods: [a]\n", "spec: name: required" },
		{ "kind: Stack\nname: s\npods:\n  - {name: x}\n", "s: pods[0]: x: containers: required" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		mf_manifest_t *m;
		char *errs = parse(cases[i].yaml, &m);
		cr_assert_null(m, "case %zu is refused", i);
		cr_assert(strstr(errs, cases[i].want), "case %zu: want \"%s\" in: %s", i,
			  cases[i].want, errs);
		free(errs);
	}
}
