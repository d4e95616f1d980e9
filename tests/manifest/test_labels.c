/*
 * mf_labels' rules (Kubernetes') at their boundaries, the canonical
 * append (sorted, last, none when empty), the drop a kind's decoder does;
 * and cli_select's parse and match of every form.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/lib/cli_select.c"   /* cmd/lib is not in libtank (as tests/api/test_cli.c) */
#include "common/tank_err.h"
#include "manifest/mf_labels.h"

static bool key_ok(const char *s) { return mf_label_key_ok(s, strlen(s)); }
static bool val_ok(const char *s) { return mf_label_value_ok(s, strlen(s)); }

Test(manifest, label_keys_and_values_follow_kubernetes_rules)
{
	char n63[64], n64[65], p254[256];
	memset(n63, 'a', 63);
	n63[63] = '\0';
	memset(n64, 'b', 64);
	n64[64] = '\0';
	cr_assert(key_ok("app") && key_ok("a") && key_ok("A.b-c_9") && key_ok(n63));
	cr_assert(!key_ok("") && !key_ok(n64) && !key_ok("-a") && !key_ok("a-") &&
		  !key_ok("a b") && !key_ok("a/b/c") && !key_ok("é"));
	cr_assert(key_ok("example.com/owner") && key_ok("a-1.b/x"));
	cr_assert(!key_ok("Example.com/x") && !key_ok("/x") && !key_ok("x/") &&
		  !key_ok("a..b/x") && !key_ok("-a.com/x") && !key_ok("a_b.com/x"));
	memset(p254, 'p', 254);
	p254[254] = '\0';
	memcpy(p254 + 60, ".", 1);
	memcpy(p254 + 120, ".", 1);
	memcpy(p254 + 180, ".", 1);
	memcpy(p254 + 240, ".", 1);
	char k[300];
	snprintf(k, sizeof k, "%s/x", p254);
	cr_assert(!key_ok(k), "a prefix of 254 characters");
	snprintf(k, sizeof k, "%s/x", p254 + 1);
	cr_assert(key_ok(k), "a prefix of 253 characters");
	cr_assert(val_ok("") && val_ok("v1.2_3-x") && val_ok(n63));
	cr_assert(!val_ok(n64) && !val_ok("-v") && !val_ok("v/1") && !val_ok("a b"));
}

static void unpack(msgpack_unpacked *u, const char *buf, size_t len)
{
	size_t off = 0;
	msgpack_unpacked_init(u);
	cr_assert_eq(msgpack_unpack_next(u, buf, len, &off), MSGPACK_UNPACK_SUCCESS);
}

Test(manifest, labels_are_taken_appended_sorted_and_dropped)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked u, v;
	msgpack_zone *z = msgpack_zone_new(1024);
	kit_errors_t errs;
	msgpack_object lbl;
	char *out;
	size_t len;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "name", 4);
	msgpack_pack_str_with_body(&pk, "w", 1);
	msgpack_pack_str_with_body(&pk, "labels", 6);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str_with_body(&pk, "z", 1);
	msgpack_pack_str_with_body(&pk, "1", 1);
	msgpack_pack_str_with_body(&pk, "a", 1);
	msgpack_pack_str_with_body(&pk, "", 0);
	msgpack_pack_str_with_body(&pk, "x", 1);
	msgpack_pack_int(&pk, 1);
	unpack(&u, sb.data, sb.size);
	msgpack_object m = u.data;
	kit_errors_init(&errs);
	cr_assert_eq(mf_labels_take(&m, z, &lbl, "p: ", &errs), 0);
	cr_assert_eq(errs.count, 0);
	cr_assert_eq(m.via.map.size, 2, "labels taken out");
	cr_assert_eq(u.data.via.map.size, 3, "the object as written is untouched");
	cr_assert(u.data.via.map.ptr[1].key.via.str.size == 6 &&
		  u.data.via.map.ptr[2].key.via.str.ptr[0] == 'x', "its entries too");
	cr_assert_eq(lbl.type, MSGPACK_OBJECT_MAP);

	/* Appended last, sorted by key. */
	msgpack_sbuffer base;
	msgpack_packer bpk;
	msgpack_sbuffer_init(&base);
	msgpack_packer_init(&bpk, &base, msgpack_sbuffer_write);
	msgpack_pack_object(&bpk, m);
	cr_assert_eq(mf_labels_append(base.data, base.size, &lbl, &out, &len), 0);
	unpack(&v, out, len);
	cr_assert_eq(v.data.via.map.size, 3);
	const msgpack_object *l = mf_labels_of(&v.data);
	cr_assert_not_null(l);
	cr_assert_eq(l->via.map.ptr[0].key.via.str.ptr[0], 'a');
	cr_assert_eq(l->via.map.ptr[1].key.via.str.ptr[0], 'z');
	/* Read from the bytes: the same map, packed as it is stored. */
	const void *raw;
	size_t rawlen;
	msgpack_sbuffer lb;
	msgpack_packer lpk;
	msgpack_sbuffer_init(&lb);
	msgpack_packer_init(&lpk, &lb, msgpack_sbuffer_write);
	msgpack_pack_object(&lpk, *l);
	cr_assert(mf_labels_raw(out, len, &raw, &rawlen));
	cr_assert(rawlen == lb.size && !memcmp(raw, lb.data, rawlen));
	cr_assert(raw > (const void *)out && (const char *)raw + rawlen == out + len,
		  "borrowed from the spec, its last key");
	msgpack_sbuffer_destroy(&lb);
	cr_assert_not(mf_labels_raw(base.data, base.size, &raw, &rawlen), "none: false");
	mf_labels_drop(&v.data);
	cr_assert_eq(v.data.via.map.size, 2);
	cr_assert_null(mf_labels_of(&v.data));
	msgpack_unpacked_destroy(&v);
	free(out);
	/* None: the same bytes. */
	msgpack_object nil = { .type = MSGPACK_OBJECT_NIL };
	cr_assert_eq(mf_labels_append(base.data, base.size, &nil, &out, &len), 0);
	cr_assert(len == base.size && !memcmp(out, base.data, len));
	free(out);
	msgpack_sbuffer_destroy(&base);

	/* A bad value names the field. */
	msgpack_sbuffer_clear(&sb);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str_with_body(&pk, "labels", 6);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str_with_body(&pk, "k", 1);
	msgpack_pack_int(&pk, 3);
	msgpack_unpacked_destroy(&u);
	unpack(&u, sb.data, sb.size);
	m = u.data;
	cr_assert_eq(mf_labels_take(&m, z, &lbl, "pods[0]: ", &errs), TANK_EINVALID);
	cr_assert_eq(errs.count, 1);
	cr_assert(strstr(errs.msgs[0], "pods[0]: labels[\"k\"]: the value must be a string"),
		  "%s", errs.msgs[0]);
	kit_errors_free(&errs);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
	msgpack_zone_free(z);
}

/* A labels map of k=v pairs ("k=v,k2=v2"), in zone z. */
static msgpack_object labels_of(msgpack_zone *z, const char *text)
{
	msgpack_object o = { .type = MSGPACK_OBJECT_MAP };
	msgpack_object_kv *kv = msgpack_zone_malloc(z, 8 * sizeof *kv);
	char *copy = msgpack_zone_malloc(z, strlen(text) + 1), *save = NULL;
	strcpy(copy, text);
	o.via.map.ptr = kv;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		*eq = '\0';
		kv[o.via.map.size].key = (msgpack_object){ .type = MSGPACK_OBJECT_STR,
			.via.str = { (uint32_t)strlen(t), t } };
		kv[o.via.map.size++].val = (msgpack_object){ .type = MSGPACK_OBJECT_STR,
			.via.str = { (uint32_t)strlen(eq + 1), eq + 1 } };
	}
	return o;
}

static bool sel(const char *s, const msgpack_object *l)
{
	cli_sel_t q;
	char why[256];
	cr_assert_eq(cli_sel_parse(s, &q, why, sizeof why), 0, "%s: %s", s, why);
	bool m = cli_sel_match(&q, l);
	cli_sel_free(&q);
	return m;
}

/* A bad selector's why names what is wrong once, and which term of
 * several; a set-based term says it is unsupported, not "not a label key". */
Test(api, a_bad_selector_says_what_is_wrong_once)
{
	static const struct { const char *text, *why; } cases[] = {
		{ "tier in (front)", "set-based terms (k in (…), k notin (…)) are not supported: "
				     "use k=v, k!=v, k or !k, joined by ','" },
		{ "tier notin (a,b)", "set-based terms (k in (…), k notin (…)) are not supported: "
				      "use k=v, k!=v, k or !k, joined by ','" },
		{ "a b", "\"a b\" is not a label key (a name of at most 63 letters, digits, "
			 "'-', '_', '.', optionally prefix/)" },
		{ "app=web,a b=c", "term 2 \"a b=c\": \"a b\" is not a label key (a name of at "
				   "most 63 letters, digits, '-', '_', '.', optionally prefix/)" },
		{ "app=-x", "\"-x\" is not a label value (at most 63 letters, digits, '-', '_', "
			    "'.', beginning and ending with a letter or digit, or empty)" },
		{ "a,", "term 2 \"\": an empty term" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cli_sel_t q;
		char why[256] = "";
		cr_assert_eq(cli_sel_parse(cases[i].text, &q, why, sizeof why), -EINVAL, "'%s'",
			     cases[i].text);
		cr_assert_str_eq(why, cases[i].why, "'%s'", cases[i].text);
	}
}

Test(api, selectors_parse_and_match_every_form)
{
	msgpack_zone *z = msgpack_zone_new(1024);
	msgpack_object l = labels_of(z, "app=web,tier=front,empty=");

	cr_assert(sel("app=web", &l) && sel("app==web", &l) && !sel("app=db", &l));
	cr_assert(sel("app!=db", &l) && !sel("app!=web", &l) && sel("nope!=x", &l));
	cr_assert(sel("tier", &l) && !sel("nope", &l) && sel("!nope", &l) && !sel("!app", &l));
	cr_assert(sel("app=web,tier=front", &l) && !sel("app=web,tier=back", &l));
	cr_assert(sel(" app = web , tier ", &l));
	cr_assert(sel("empty=", &l) && sel("empty", &l) && !sel("app=", &l));
	cr_assert(!sel("app", NULL) && sel("!app", NULL) && sel("app!=web", NULL));

	static const char *const bad[] = { "", "a,", ",a", "a b=c", "a=b=c", "a=-x",
					   "a in (b)", "!a=b", "x/=1" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cli_sel_t q;
		char why[256] = "";
		cr_assert_eq(cli_sel_parse(bad[i], &q, why, sizeof why), -EINVAL, "'%s'", bad[i]);
		cr_assert(why[0], "'%s' says why", bad[i]);
	}
	msgpack_zone_free(z);
}
