/*
 * What `status` adds to every kind's map (kinds/kind.h, KIND_STATUS_META),
 * packed by the kind's own packer in one walk: a pod's `created_at` and
 * `labels` last, in that order, on every path of the Pod kind (every
 * status, one status, a stored record), also for pods the reconciler has
 * not reached (pending) and never for one being deleted (a status, no
 * stored pod); nothing without the flag.  And kind_meta_pack_raw on a
 * map a kind stored packed: its own keys kept, its header grown.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kinds/kind.h"
#include "pod/pod_kind.h"
#include "store/st.h"
#include "tests/store/store_util.h"

static char g_dir[256];

static void setup(void)
{
	stu_tmpdir(g_dir, sizeof g_dir);
}

static void teardown(void)
{
	stu_rmrf(g_dir);
}

/* A stored spec: {name, labels?} (the Pod kind's status reads only the
 * labels of it). */
static void spec_of(msgpack_sbuffer *sb, const char *name, const char *app)
{
	msgpack_packer pk;
	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, app ? 2 : 1);
	msgpack_pack_str_with_body(&pk, "name", 4);
	msgpack_pack_str_with_body(&pk, name, strlen(name));
	if (app) {
		msgpack_pack_str_with_body(&pk, "labels", 6);
		msgpack_pack_map(&pk, 1);
		msgpack_pack_str_with_body(&pk, "app", 3);
		msgpack_pack_str_with_body(&pk, app, strlen(app));
	}
}

static bool key_is(const msgpack_object *k, const char *s)
{
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
	       !memcmp(k->via.str.ptr, s, k->via.str.size);
}

static const msgpack_object *get(const msgpack_object *m, const char *key)
{
	for (uint32_t i = 0; i < m->via.map.size; i++)
		if (key_is(&m->via.map.ptr[i].key, key))
			return &m->via.map.ptr[i].val;
	return NULL;
}

/* One status map against what is stored of its pod (created_at; app:
 * its label, NULL none; stored false: a pod being deleted). */
static void check_map(const msgpack_object *m, const char *name, bool stored,
		      int64_t created_at, const char *app)
{
	cr_assert_eq(m->type, MSGPACK_OBJECT_MAP);
	const msgpack_object *n = get(m, "name");
	cr_assert(n && n->via.str.size == strlen(name) && !memcmp(n->via.str.ptr, name, strlen(name)),
		  "%s: named so", name);
	uint32_t sz = m->via.map.size;
	const msgpack_object *at = get(m, "created_at"), *l = get(m, "labels");
	if (!stored) {
		cr_assert(!at && !l, "%s: a pod being deleted gets neither", name);
		return;
	}
	cr_assert(at && at->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
		  (int64_t)at->via.u64 == created_at, "%s: the stored created_at", name);
	if (!app) {
		cr_assert_null(l, "%s: no labels: no key", name);
		cr_assert(key_is(&m->via.map.ptr[sz - 1].key, "created_at"), "%s: last", name);
		return;
	}
	cr_assert(key_is(&m->via.map.ptr[sz - 2].key, "created_at") &&
		  key_is(&m->via.map.ptr[sz - 1].key, "labels"), "%s: created_at, labels, last", name);
	cr_assert(l->type == MSGPACK_OBJECT_MAP && l->via.map.size == 1);
	const msgpack_object *v = get(l, "app");
	cr_assert(v && v->via.str.size == strlen(app) && !memcmp(v->via.str.ptr, app, strlen(app)));
}

/* The one object packed into sb, unpacked into u: its size whole. */
static void unpack_all(msgpack_unpacked *u, const msgpack_sbuffer *sb)
{
	size_t off = 0;
	cr_assert_eq(msgpack_unpack_next(u, sb->data, sb->size, &off), MSGPACK_UNPACK_SUCCESS);
	cr_assert_eq(off, sb->size, "one object, its header counting every key");
}

Test(api, status_maps_carry_created_at_and_labels_on_every_pod_path, .init = setup,
     .fini = teardown)
{
	/* a, c: a status; b, e: stored only (pending); d: a status only
	 * (being deleted).  a and e are labelled. */
	static const struct { const char *name, *app; bool stored, status; } pods[] = {
		{ "a", "one", true, true }, { "b", NULL, true, false }, { "c", NULL, true, true },
		{ "d", NULL, false, true }, { "e", "five", true, false },
	};
	enum { N = sizeof pods / sizeof pods[0] };
	int64_t created[N] = { 0 };
	st_t *st;
	tank_error_t e;

	cr_assert_eq(st_open(g_dir, NULL, &st, &e), 0, "%s", e.msg);
	for (size_t i = 0; i < N; i++) {
		/* d stored first, then deleted: its status stays queued. */
		msgpack_sbuffer sb;
		spec_of(&sb, pods[i].name, pods[i].app);
		st_pod_in_t in = { pods[i].name, sb.data, sb.size };
		st_apply_result_t r;
		cr_assert_eq(st_apply(st, &in, 1, &r, &e), 0, "%s", e.msg);
		msgpack_sbuffer_destroy(&sb);
		st_pod_t p;
		cr_assert_eq(st_pod_get(st, pods[i].name, &p, &e), 0);
		created[i] = p.created_at;
		cr_assert_gt(created[i], 0);
		st_pod_clear(&p);
	}
	const char *gone = "d";
	cr_assert_eq(st_delete(st, &gone, 1, NULL, &e), 0, "%s", e.msg);
	for (size_t i = 0; i < N; i++) {
		if (!pods[i].status)
			continue;
		st_status_t s = { 0 };
		snprintf(s.name, sizeof s.name, "%s", pods[i].name);
		snprintf(s.phase, sizeof s.phase, "running");
		cr_assert_eq(st_status_put(st, &s), 0);
	}

	kind_env_t env = { .store = st, .kinds = tank_kinds };
	msgpack_sbuffer sb, one;
	msgpack_packer pk, opk;
	msgpack_unpacked u, uo;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_sbuffer_init(&one);
	msgpack_packer_init(&opk, &one, msgpack_sbuffer_write);
	msgpack_unpacked_init(&u);
	msgpack_unpacked_init(&uo);

	/* Every status, in name order, pending ones at their place. */
	cr_assert_eq(pod_kind.status_all(&env, &pk, KIND_STATUS_META, &e), 0, "%s", e.msg);
	unpack_all(&u, &sb);
	cr_assert_eq(u.data.type, MSGPACK_OBJECT_ARRAY);
	cr_assert_eq(u.data.via.array.size, N);
	for (size_t i = 0; i < N; i++) {
		const msgpack_object *m = &u.data.via.array.ptr[i];
		check_map(m, pods[i].name, pods[i].stored, created[i], pods[i].app);
		/* One status: the same map. */
		one.size = 0;
		cr_assert_eq(pod_kind.status_one(&env, pods[i].name, &opk, KIND_STATUS_META, &e), 0,
			     "%s", e.msg);
		unpack_all(&uo, &one);
		cr_assert(msgpack_object_equal(uo.data, *m), "%s: status one as in all",
			  pods[i].name);
		/* A stored record's (`status NAME` of a kind with no
		 * status_one, `status` through a scan): the same map. */
		if (!pods[i].stored)
			continue;
		st_pod_t p;
		cr_assert_eq(st_pod_get(st, pods[i].name, &p, &e), 0);
		one.size = 0;
		cr_assert_eq(pod_kind.pack_status(&env, &p, &opk, KIND_STATUS_META), 0);
		st_pod_clear(&p);
		unpack_all(&uo, &one);
		cr_assert(msgpack_object_equal(uo.data, *m), "%s: pack_status as in all",
			  pods[i].name);
	}

	/* Without the flag (get's nested status, /metrics): neither key. */
	sb.size = 0;
	cr_assert_eq(pod_kind.status_all(&env, &pk, 0, &e), 0, "%s", e.msg);
	unpack_all(&u, &sb);
	cr_assert_eq(u.data.via.array.size, N);
	for (size_t i = 0; i < N; i++) {
		const msgpack_object *m = &u.data.via.array.ptr[i];
		cr_assert(!get(m, "created_at") && !get(m, "labels"), "%s", pods[i].name);
	}
	one.size = 0;
	cr_assert_eq(pod_kind.status_one(&env, "a", &opk, 0, &e), 0, "%s", e.msg);
	unpack_all(&uo, &one);
	cr_assert(!get(&uo.data, "created_at") && !get(&uo.data, "labels"));

	msgpack_unpacked_destroy(&uo);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&one);
	msgpack_sbuffer_destroy(&sb);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
}

/* A map of n keys k0… (own: also created_at = 7 and labels = {}). */
static void raw_map(msgpack_sbuffer *sb, uint32_t n, bool own)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, n + (own ? 2 : 0));
	for (uint32_t i = 0; i < n; i++) {
		char k[16];
		int kl = snprintf(k, sizeof k, "k%u", i);
		msgpack_pack_str_with_body(&pk, k, (size_t)kl);
		msgpack_pack_uint32(&pk, i);
	}
	if (own) {
		msgpack_pack_str_with_body(&pk, "created_at", 10);
		msgpack_pack_int64(&pk, 7);
		msgpack_pack_str_with_body(&pk, "labels", 6);
		msgpack_pack_map(&pk, 0);
	}
}

Test(api, meta_added_to_a_stored_map_keeps_its_own_keys_and_grows_its_header)
{
	msgpack_sbuffer in, out;
	msgpack_packer pk;
	msgpack_unpacked u;
	static const char lbl[] = "\x81\xa3" "app" "\xa1x";      /* {app: x} */
	kind_meta_t m = { .created_at = 1234, .labels = lbl, .labels_len = sizeof lbl - 1 };

	msgpack_sbuffer_init(&in);
	msgpack_sbuffer_init(&out);
	msgpack_packer_init(&pk, &out, msgpack_sbuffer_write);
	msgpack_unpacked_init(&u);
	/* 14 and 15 keys: a fixmap that becomes a map16 with two more. */
	for (uint32_t n = 0; n < 20; n++) {
		in.size = out.size = 0;
		raw_map(&in, n, false);
		cr_assert_eq(kind_meta_pack_raw(&pk, in.data, in.size, &m), 0);
		unpack_all(&u, &out);
		cr_assert_eq(u.data.via.map.size, n + 2);
		for (uint32_t i = 0; i < n; i++) {
			char k[16];
			snprintf(k, sizeof k, "k%u", i);
			const msgpack_object *v = get(&u.data, k);
			cr_assert(v && v->via.u64 == i && key_is(&u.data.via.map.ptr[i].key, k),
				  "its entries as they were, in their order");
		}
		const msgpack_object *at = get(&u.data, "created_at"), *l = get(&u.data, "labels");
		cr_assert(at && at->via.u64 == 1234 && key_is(&u.data.via.map.ptr[n].key, "created_at"));
		cr_assert(l && l->type == MSGPACK_OBJECT_MAP && l->via.map.size == 1 &&
			  key_is(&u.data.via.map.ptr[n + 1].key, "labels"));
	}
	/* Its own win: nothing added, the same bytes. */
	in.size = out.size = 0;
	raw_map(&in, 3, true);
	cr_assert_eq(kind_meta_pack_raw(&pk, in.data, in.size, &m), 0);
	cr_assert(out.size == in.size && !memcmp(out.data, in.data, in.size));
	/* Not a map, or nothing to add: as it is. */
	out.size = 0;
	cr_assert_eq(kind_meta_pack_raw(&pk, "\x92\x01\x02", 3, &m), 0);
	cr_assert(out.size == 3 && !memcmp(out.data, "\x92\x01\x02", 3));
	out.size = 0;
	cr_assert_eq(kind_meta_pack_raw(&pk, "\x80", 1, NULL), 0);
	cr_assert(out.size == 1 && out.data[0] == (char)0x80);
	cr_assert_eq(kind_meta_n(NULL), 0);
	cr_assert_eq(kind_meta_n(&(kind_meta_t){ .created_at = 0, .labels = lbl }), 1);

	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&out);
	msgpack_sbuffer_destroy(&in);
}
