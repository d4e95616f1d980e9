/* store codec: hostile and damaged bytes never crash the decoders, and
 * every value survives a round trip, extremes included. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "store/st_codec.h"

static void sample_status(st_status_t *s, st_container_status_t *c)
{
	memset(s, 0, sizeof *s);
	memset(c, 0, 2 * sizeof *c);
	strcpy(s->name, "web");
	strcpy(s->phase, "terminal");
	strcpy(s->reason, "failed");
	s->retries = UINT32_MAX;
	s->restarts = 70000;
	s->generation = UINT64_MAX;
	s->since = -5;           /* a clock before the epoch still round-trips */
	s->next_restart_at = INT64_MAX;
	s->last_exit = (st_exit_t){ true, -129, 15 };
	strcpy(c[0].name, "app");
	c[0].pid = INT32_MAX;
	c[0].pid_start_time = (1ULL << 63) + 5;
	c[0].started_at = INT64_MIN;
	strcpy(c[1].name, "b");
	c[1].last_exit = (st_exit_t){ true, 255, 0 };
	c[1].outcome = 2;
	c[1].probe_until = INT64_MAX - 1;
	s->outcome = 3;
	s->restart = true;
	s->held = true;
	s->containers = c;
	s->n_containers = 2;
}

Test(store, codec_status_extremes_roundtrip)
{
	st_status_t s, g;
	st_container_status_t c[2];
	msgpack_sbuffer b;
	sample_status(&s, c);
	msgpack_sbuffer_init(&b);
	cr_assert_eq(st__enc_status(&b, &s), 0);
	tank_error_t e;
	cr_assert_eq(st__dec_status(b.data, b.size, "web", 3, &g, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(g.retries, UINT32_MAX);
	cr_assert_eq(g.generation, UINT64_MAX);
	cr_assert_eq(g.since, -5);
	cr_assert_eq(g.next_restart_at, INT64_MAX);
	cr_assert_eq(g.last_exit.code, -129);
	cr_assert_eq(g.last_exit.signal, 15);
	cr_assert_eq(g.n_containers, 2);
	cr_assert_eq(g.containers[0].pid, INT32_MAX);
	cr_assert_eq(g.containers[0].pid_start_time, (1ULL << 63) + 5);
	cr_assert_eq(g.containers[0].started_at, INT64_MIN);
	cr_assert(!g.containers[0].last_exit.present);
	cr_assert_eq(g.containers[1].last_exit.code, 255);
	/* The outcome and a stored restart request (0/false: not written). */
	cr_assert_eq(g.outcome, 3);
	cr_assert(g.restart);
	cr_assert_eq(g.containers[0].outcome, 0);
	cr_assert_eq(g.containers[1].outcome, 2);
	/* held and a probe window (0/false: not written) */
	cr_assert(g.held);
	cr_assert_eq(g.containers[0].probe_until, 0);
	cr_assert_eq(g.containers[1].probe_until, INT64_MAX - 1);
	st_status_clear(&g);
	msgpack_sbuffer_destroy(&b);
}

Test(store, codec_pod_and_transition_roundtrip)
{
	msgpack_sbuffer b;
	msgpack_sbuffer_init(&b);
	st_pod_t p = { .spec = "\x81\xa1x\x01", .spec_len = 4, .generation = 9,
		       .hash = 0xdeadbeefcafef00dULL, .created_at = 1,
		       .updated_at = 2 };
	strcpy(p.name, "api");
	cr_assert_eq(st__enc_pod(&b, &p), 0);
	st_pod_t g;
	cr_assert_eq(st__dec_pod(b.data, b.size, "api", 3, &g, NULL), 0);
	cr_assert_eq(g.spec_len, 4);
	cr_assert_eq(memcmp(g.spec, p.spec, 4), 0);
	cr_assert_eq(g.hash, p.hash);
	cr_assert_eq(g.generation, 9);
	cr_assert_eq(g.updated_at, 2);
	st_pod_clear(&g);

	st_transition_t t = { .at = 123 }, u;
	strcpy(t.from, "running");
	strcpy(t.to, "backing_off");
	strcpy(t.reason, "exit code 1");
	strcpy(t.kind, "container");
	strcpy(t.key, "web/httpd");
	strcpy(t.uid, "0b3c1d2e-1111-4222-8333-444455556666");
	b.size = 0;
	cr_assert_eq(st__enc_transition(&b, &t, "web", 3), 0);
	cr_assert_eq(st__dec_transition(b.data, b.size, "k", 1, &u, NULL), 0);
	cr_assert_eq(memcmp(&t, &u, sizeof t), 0);
	/* A key equal to the history's is not stored (the reader fills it),
	 * nor is seq (the record's LMDB key). */
	strcpy(t.key, "web");
	t.seq = 7;
	b.size = 0;
	cr_assert_eq(st__enc_transition(&b, &t, "web", 3), 0);
	cr_assert_eq(st__dec_transition(b.data, b.size, "k", 1, &u, NULL), 0);
	cr_assert_str_eq(u.key, "");
	cr_assert_eq(u.seq, 0);
	cr_assert_str_eq(u.kind, "container");
	cr_assert_str_eq(u.uid, t.uid);
	msgpack_sbuffer_destroy(&b);
}

/* Decodes buf with every decoder: each must succeed or say corrupt. */
static int decode_all(const void *buf, size_t len)
{
	st_status_t s;
	st_pod_t p;
	st_transition_t t;
	tank_error_t e;
	int bad = 0, rc;
	rc = st__dec_status(buf, len, "k", 1, &s, &e);
	cr_assert(rc == 0 || rc == TANK_ECORRUPT, "status rc %d", rc);
	if (rc == 0) {
		cr_assert(s.n_containers <= len);
		st_status_clear(&s);
	} else {
		cr_assert(strstr(e.msg, "status record \"k\""), "%s", e.msg);
		bad++;
	}
	rc = st__dec_pod(buf, len, "k", 1, &p, &e);
	cr_assert(rc == 0 || rc == TANK_ECORRUPT, "pod rc %d", rc);
	if (rc == 0) {
		cr_assert(p.spec_len <= len);
		st_pod_clear(&p);
	} else {
		bad++;
	}
	rc = st__dec_transition(buf, len, "k", 1, &t, &e);
	cr_assert(rc == 0 || rc == TANK_ECORRUPT, "transition rc %d", rc);
	bad += rc != 0;
	return bad;
}

Test(store, codec_truncated_records_are_corrupt)
{
	st_status_t s;
	st_container_status_t c[2];
	msgpack_sbuffer b;
	sample_status(&s, c);
	msgpack_sbuffer_init(&b);
	cr_assert_eq(st__enc_status(&b, &s), 0);
	for (size_t n = 0; n < b.size; n++) {
		/* Copy so that the sanitizer sees reads past n. */
		char *cut = malloc(n + 1);
		memcpy(cut, b.data, n);
		cr_assert_eq(decode_all(cut, n), 3, "prefix of %zu bytes decoded", n);
		free(cut);
	}
	/* Trailing bytes are damage too. */
	msgpack_sbuffer_write(&b, "\x00", 1);
	st_status_t g;
	tank_error_t e;
	cr_assert_eq(st__dec_status(b.data, b.size, "web", 3, &g, &e),
		     TANK_ECORRUPT);
	cr_assert(strstr(e.msg, "trailing"), "%s", e.msg);
	msgpack_sbuffer_destroy(&b);
}

Test(store, codec_random_damage_never_crashes)
{
	st_status_t s;
	st_container_status_t c[2];
	msgpack_sbuffer b;
	sample_status(&s, c);
	msgpack_sbuffer_init(&b);
	cr_assert_eq(st__enc_status(&b, &s), 0);
	unsigned seed = 12345;
	unsigned char *buf = malloc(b.size);
	for (int round = 0; round < 20000; round++) {
		memcpy(buf, b.data, b.size);
		int flips = 1 + rand_r(&seed) % 4;
		for (int i = 0; i < flips; i++)
			buf[rand_r(&seed) % b.size] = (unsigned char)rand_r(&seed);
		decode_all(buf, b.size);
	}
	for (int round = 0; round < 5000; round++) {
		size_t n = (size_t)(rand_r(&seed) % 64);
		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)rand_r(&seed);
		decode_all(buf, n);
	}
	free(buf);
	msgpack_sbuffer_destroy(&b);
}

Test(store, codec_hostile_shapes_are_refused)
{
	/* {"x": [[[[...]]]]} nested far deeper than any record. */
	unsigned char deep[300];
	size_t n = 0;
	deep[n++] = 0x81;
	deep[n++] = 0xa1;
	deep[n++] = 'x';
	while (n < sizeof deep - 1)
		deep[n++] = 0x91;
	deep[n++] = 0xc0;
	cr_assert_eq(decode_all(deep, n), 3);

	/* containers claims 4 billion entries in a 20-byte record. */
	unsigned char big[] = { 0x81, 0xaa, 'c', 'o', 'n', 't', 'a', 'i', 'n', 'e',
				'r', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 0x80 };
	st_status_t s;
	tank_error_t e;
	cr_assert_eq(st__dec_status(big, sizeof big, "k", 1, &s, &e),
		     TANK_ECORRUPT);
	cr_assert(strstr(e.msg, "corrupt msgpack"), "%s", e.msg);

	/* Every other msgpack type as an unknown key's value is skipped. */
	unsigned char mix[] = {
		0x87,
		0xa1, 'a', 0xcb, 0, 0, 0, 0, 0, 0, 0, 0,          /* float64 */
		0xa1, 'b', 0xc4, 2, 1, 2,                           /* bin8 */
		0xa1, 'c', 0xd6, 1, 0, 0, 0, 0,                     /* fixext4 */
		0xa1, 'd', 0xc7, 1, 5, 9,                           /* ext8 */
		0xa1, 'e', 0xc3,                                    /* true */
		0x01, 0x02,                                         /* int key */
		0xa5, 'p', 'h', 'a', 's', 'e', 0xa7, 'r', 'u', 'n', 'n', 'i', 'n', 'g',
	};
	cr_assert_eq(st__dec_status(mix, sizeof mix, "k", 1, &s, &e), 0, "%s",
		     e.msg);
	cr_assert_str_eq(s.phase, "running");
	st_status_clear(&s);

	/* A known key of the wrong type names the field. */
	unsigned char wrong[] = { 0x81, 0xa8, 'r', 'e', 's', 't', 'a', 'r', 't', 's',
				  0xa1, 'x' };
	cr_assert_eq(st__dec_status(wrong, sizeof wrong, "web", 3, &s, &e),
		     TANK_ECORRUPT);
	cr_assert_str_eq(e.msg,
			 "status record \"web\": field restarts: missing or wrong type");
	/* A negative count is not a count. */
	unsigned char neg[] = { 0x81, 0xa7, 'r', 'e', 't', 'r', 'i', 'e', 's', 0xff };
	cr_assert_eq(st__dec_status(neg, sizeof neg, "web", 3, &s, &e),
		     TANK_ECORRUPT);
}
