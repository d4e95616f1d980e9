/*
 * The frame scanner (common/kit_frame.h) on its own: every header kind, frames
 * fed a byte at a time, depth accounting, declared sizes against the cap,
 * and agreement with msgpack-c's own decoder on random objects and random
 * bytes.  The server's use of it is tested in test_server.c.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/kit_frame.h"

#define MB (16u << 20)

static kit_frame_status_t scan_all(const void *b, size_t n, size_t max_frame,
				   size_t *flen, kit_frame_scan_t *s)
{
	kit_frame_scan_init(s, max_frame, KIT_FRAME_MAX_DEPTH);
	return kit_frame_scan(s, b, n, flen);
}

/* Feeds b one byte more at a time: MORE until the last byte, then DONE
 * with the whole length (the resumed walk must match the one-shot one). */
static void scan_bytewise(const void *b, size_t n)
{
	kit_frame_scan_t *s = malloc(sizeof *s);
	size_t flen = 0;

	kit_frame_scan_init(s, MB, KIT_FRAME_MAX_DEPTH);
	for (size_t i = 0; i < n; i++) {
		kit_frame_status_t st = kit_frame_scan(s, b, i, &flen);
		cr_assert_eq(st, KIT_FRAME_MORE, "prefix of %zu/%zu bytes: %d", i, n, st);
	}
	cr_assert_eq(kit_frame_scan(s, b, n, &flen), KIT_FRAME_DONE);
	cr_assert_eq(flen, n);
	free(s);
}

static void pack_every_kind(msgpack_packer *pk)
{
	static char blob[70000];
	msgpack_pack_array(pk, 24);
	msgpack_pack_nil(pk);
	msgpack_pack_true(pk);
	msgpack_pack_false(pk);
	msgpack_pack_uint8(pk, 200);
	msgpack_pack_uint16(pk, 60000);
	msgpack_pack_uint32(pk, 4000000000u);
	msgpack_pack_uint64(pk, UINT64_MAX);
	msgpack_pack_int8(pk, -100);
	msgpack_pack_int16(pk, -30000);
	msgpack_pack_int32(pk, -2000000000);
	msgpack_pack_int64(pk, INT64_MIN);
	msgpack_pack_float(pk, 1.5f);
	msgpack_pack_double(pk, 2.5);
	msgpack_pack_str_with_body(pk, blob, 31);        /* fixstr */
	msgpack_pack_str_with_body(pk, blob, 200);       /* str8 */
	msgpack_pack_str_with_body(pk, blob, 1000);      /* str16 */
	msgpack_pack_str_with_body(pk, blob, 70000);     /* str32 */
	msgpack_pack_bin_with_body(pk, blob, 10);        /* bin8 */
	msgpack_pack_bin_with_body(pk, blob, 300);       /* bin16 */
	msgpack_pack_bin_with_body(pk, blob, 70000);     /* bin32 */
	/* fixext 1..16, ext8/16/32 */
	msgpack_pack_array(pk, 8);
	size_t ext[8] = { 1, 2, 4, 8, 16, 3, 300, 70000 };
	for (int i = 0; i < 8; i++)
		msgpack_pack_ext_with_body(pk, blob, ext[i], 7);
	msgpack_pack_map(pk, 20);                        /* map16 */
	for (int i = 0; i < 20; i++) {
		msgpack_pack_int(pk, -i);
		msgpack_pack_array(pk, 0);
	}
	msgpack_pack_array(pk, 70000);                   /* array32 */
	for (int i = 0; i < 70000; i++)
		msgpack_pack_fix_uint8(pk, (uint8_t)i);
	msgpack_pack_map(pk, 0);
}

Test(kit_frame, every_kind_whole_and_bytewise)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	kit_frame_scan_t s;
	size_t flen = 0;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pack_every_kind(&pk);
	size_t one = sb.size;
	cr_assert_eq(scan_all(sb.data, one, MB, &flen, &s), KIT_FRAME_DONE);
	cr_assert_eq(flen, one);
	cr_assert_eq(s.depth, 3);    /* root > map > [] */
	cr_assert_not(s.too_deep);
	scan_bytewise(sb.data, one);
	/* A second frame behind the first: only the first is measured. */
	msgpack_pack_array(&pk, 1);
	msgpack_pack_nil(&pk);
	cr_assert_eq(scan_all(sb.data, sb.size, MB, &flen, &s), KIT_FRAME_DONE);
	cr_assert_eq(flen, one);
	cr_assert_eq(scan_all(sb.data + one, sb.size - one, MB, &flen, &s), KIT_FRAME_DONE);
	cr_assert_eq(flen, 2);
	msgpack_sbuffer_destroy(&sb);
}

/* [0, 1, "m", params] with params nested `levels` deep (params counted). */
static size_t deep_request(unsigned char *b, size_t levels, bool tail)
{
	size_t n = 0;
	memcpy(b, "\x94\x00\x01\xa1m", 5);
	n = 5;
	for (size_t i = 1; i < levels; i++)
		b[n++] = tail ? 0x91 : 0x92;      /* [x] or [x, 0] */
	b[n++] = 0x90;
	if (!tail)
		for (size_t i = 1; i < levels; i++)
			b[n++] = 0x00;
	return n;
}

Test(kit_frame, depth_counted_and_flagged_past_the_limit)
{
	unsigned char b[2048];
	kit_frame_scan_t s;
	size_t flen, n;

	/* At the limit: message depth KIT_FRAME_MAX_DEPTH (params one less). */
	n = deep_request(b, KIT_FRAME_MAX_DEPTH - 1, true);
	cr_assert_eq(scan_all(b, n, MB, &flen, &s), KIT_FRAME_DONE);
	cr_assert_eq(flen, n);
	cr_assert_eq(s.depth, KIT_FRAME_MAX_DEPTH);
	cr_assert_not(s.too_deep);
	/* msgpack-c (as built, not just as its header says) decodes exactly
	 * that much: the limit is its own. */
	msgpack_unpacked up;
	size_t off = 0;
	msgpack_unpacked_init(&up);
	cr_assert_eq(msgpack_unpack_next(&up, (const char *)b, n, &off),
		     MSGPACK_UNPACK_SUCCESS);
	n = deep_request(b, KIT_FRAME_MAX_DEPTH, true);
	off = 0;
	cr_assert_lt(msgpack_unpack_next(&up, (const char *)b, n, &off), 0);
	msgpack_unpacked_destroy(&up);
	/* One more: flagged, in element 3 (params), and still measured. */
	n = deep_request(b, KIT_FRAME_MAX_DEPTH, true);
	cr_assert_eq(scan_all(b, n, MB, &flen, &s), KIT_FRAME_DONE);
	cr_assert_eq(flen, n);
	cr_assert(s.too_deep);
	cr_assert_eq(s.deep_elem, 3);
	/* 400 levels of [[…]] need one stack slot: found to the end. */
	n = deep_request(b, 400, true);
	cr_assert_eq(scan_all(b, n, MB, &flen, &s), KIT_FRAME_DONE);
	cr_assert_eq(flen, n);
	cr_assert_eq(s.depth, 401);
	cr_assert(s.too_deep);
	scan_bytewise(b, n);
	/* Not in the tail: each level keeps a slot; up to the stack it is
	 * still measured, past it the scanner gives up. */
	n = deep_request(b, KIT_FRAME_STACK - 2, false);
	cr_assert_eq(scan_all(b, n, MB, &flen, &s), KIT_FRAME_DONE);
	cr_assert_eq(flen, n);
	cr_assert(s.too_deep);
	n = deep_request(b, KIT_FRAME_STACK + 10, false);
	cr_assert_eq(scan_all(b, n, MB, &flen, &s), KIT_FRAME_TOO_NESTED);
	cr_assert(s.too_deep);
	/* The root itself past a limit of 0; a deep method (element 2). */
	kit_frame_scan_init(&s, MB, 0);
	cr_assert_eq(kit_frame_scan(&s, "\x90", 1, &flen), KIT_FRAME_DONE);
	cr_assert(s.too_deep);
	cr_assert_eq(s.deep_elem, UINT64_MAX);
	kit_frame_scan_init(&s, MB, 2);
	cr_assert_eq(kit_frame_scan(&s, "\x94\x00\x01\x91\x91\x90\x90", 7, &flen),
		     KIT_FRAME_DONE);
	cr_assert(s.too_deep);
	cr_assert_eq(s.deep_elem, 2);
}

Test(kit_frame, declared_sizes_checked_against_the_cap)
{
	kit_frame_scan_t s;
	size_t flen;

	/* array32 of 2^31 elements, no data: too big from its 5-byte header */
	cr_assert_eq(scan_all("\x94\x00\x01\xa1m\xdd\x80\x00\x00\x00", 10, MB, &flen, &s),
		     KIT_FRAME_TOO_BIG);
	/* str32 of 4 GiB - 1, bin32, ext32, map32 (2^32 - 1 pairs) */
	cr_assert_eq(scan_all("\x91\xdb\xff\xff\xff\xff", 6, MB, &flen, &s), KIT_FRAME_TOO_BIG);
	cr_assert_eq(scan_all("\xc6\xff\xff\xff\xff", 5, MB, &flen, &s), KIT_FRAME_TOO_BIG);
	cr_assert_eq(scan_all("\xc9\xff\xff\xff\xff\x01", 6, MB, &flen, &s), KIT_FRAME_TOO_BIG);
	cr_assert_eq(scan_all("\xdf\xff\xff\xff\xff", 5, MB, &flen, &s), KIT_FRAME_TOO_BIG);
	/* Pending elements add up: [[_, _, _], _] takes at least 6 bytes. */
	cr_assert_eq(scan_all("\x92\x93", 2, 4, &flen, &s), KIT_FRAME_TOO_BIG);
	/* Exactly the cap is fine, one byte over is not. */
	cr_assert_eq(scan_all("\x92\xa2xy\x00", 5, 5, &flen, &s), KIT_FRAME_DONE);
	cr_assert_eq(flen, 5);
	cr_assert_eq(scan_all("\x92\xa3xyz\x00", 5, 5, &flen, &s), KIT_FRAME_TOO_BIG);
	/* Small declared sizes wait for their bytes. */
	cr_assert_eq(scan_all("\x91\xdb\x00\x00\x10\x00xx", 8, MB, &flen, &s), KIT_FRAME_MORE);
}

Test(kit_frame, never_msgpack_byte_is_invalid)
{
	kit_frame_scan_t s;
	size_t flen;

	cr_assert_eq(scan_all("\xc1", 1, MB, &flen, &s), KIT_FRAME_INVALID);
	cr_assert_eq(scan_all("\x93\x00\xc1", 3, MB, &flen, &s), KIT_FRAME_INVALID);
	/* A scalar is a complete frame (the server then refuses its shape). */
	cr_assert_eq(scan_all("GET /", 5, MB, &flen, &s), KIT_FRAME_DONE);
	cr_assert_eq(flen, 1);
}

/* --- agreement with msgpack-c ------------------------------------------- */

static uint32_t rnd(uint32_t *st)
{
	*st ^= *st << 13;
	*st ^= *st >> 17;
	*st ^= *st << 5;
	return *st;
}

static void pack_random(msgpack_packer *pk, uint32_t *st, int depth)
{
	static const char blob[300];
	uint32_t k = rnd(st) % (depth < 12 ? 12 : 9);

	switch (k) {
	case 0: msgpack_pack_nil(pk); break;
	case 1: msgpack_pack_int64(pk, (int64_t)rnd(st) << (rnd(st) % 32) | rnd(st)); break;
	case 2: msgpack_pack_int64(pk, -(int64_t)(rnd(st) >> (rnd(st) % 32))); break;
	case 3: msgpack_pack_double(pk, 0.5); break;
	case 4: msgpack_pack_str_with_body(pk, blob, rnd(st) % 300); break;
	case 5: msgpack_pack_bin_with_body(pk, blob, rnd(st) % 300); break;
	case 6: msgpack_pack_ext_with_body(pk, blob, rnd(st) % 20, 1); break;
	case 7: msgpack_pack_float(pk, 0.25f); break;
	case 8: msgpack_pack_true(pk); break;
	case 9: case 10: {
		uint32_t n = rnd(st) % 5;
		msgpack_pack_array(pk, n);
		for (uint32_t i = 0; i < n; i++)
			pack_random(pk, st, depth + 1);
		break;
	}
	default: {
		uint32_t n = rnd(st) % 4;
		msgpack_pack_map(pk, n);
		for (uint32_t i = 0; i < 2 * n; i++)
			pack_random(pk, st, depth + 1);
		break;
	}
	}
}

Test(kit_frame, agrees_with_msgpack_c_on_random_objects)
{
	uint32_t st = 12345;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	kit_frame_scan_t *s = malloc(sizeof *s);
	size_t flen;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	for (int i = 0; i < 300; i++) {
		sb.size = 0;
		pack_random(&pk, &st, 0);
		kit_frame_scan_init(s, MB, KIT_FRAME_MAX_DEPTH);
		cr_assert_eq(kit_frame_scan(s, sb.data, sb.size, &flen), KIT_FRAME_DONE);
		cr_assert_eq(flen, sb.size);
		if (i < 40)
			scan_bytewise(sb.data, sb.size);
	}
	msgpack_sbuffer_destroy(&sb);
	free(s);
}

/* Random bytes, biased towards headers: whenever msgpack-c decodes an
 * object from them, the scanner measures the same length; whenever the
 * scanner says DONE within the depth limit, msgpack-c decodes it. */
Test(kit_frame, agrees_with_msgpack_c_on_random_bytes)
{
	static const unsigned char pool[] = {
		0x00, 0x7f, 0x80, 0x81, 0x82, 0x90, 0x91, 0x92, 0x93, 0xa0, 0xa1,
		0xa3, 0xc0, 0xc2, 0xc4, 0xc5, 0xc7, 0xca, 0xcb, 0xcc, 0xcd, 0xce,
		0xcf, 0xd0, 0xd4, 0xd5, 0xd8, 0xd9, 0xdc, 0xde, 0xe0, 0xff, 0x01,
		0x02, 0x03,
	};
	uint32_t st = 777;
	unsigned char b[64];
	kit_frame_scan_t *s = malloc(sizeof *s);
	msgpack_unpacked up;
	int done = 0;

	msgpack_unpacked_init(&up);
	for (int i = 0; i < 20000; i++) {
		size_t n = 1 + rnd(&st) % sizeof b, flen = 0, off = 0;
		for (size_t j = 0; j < n; j++)
			b[j] = pool[rnd(&st) % sizeof pool];
		kit_frame_scan_init(s, MB, KIT_FRAME_MAX_DEPTH);
		kit_frame_status_t fs = kit_frame_scan(s, b, n, &flen);
		msgpack_unpack_return r = msgpack_unpack_next(&up, (const char *)b, n, &off);
		bool ok = r == MSGPACK_UNPACK_SUCCESS || r == MSGPACK_UNPACK_EXTRA_BYTES;
		if (ok) {
			cr_assert_eq(fs, KIT_FRAME_DONE, "bytes %d: scanner %d", i, fs);
			cr_assert_eq(flen, off, "bytes %d: %zu vs %zu", i, flen, off);
		}
		if (fs == KIT_FRAME_DONE && !s->too_deep) {
			cr_assert(ok, "bytes %d: msgpack-c says %d", i, r);
			done++;
		}
	}
	cr_assert_gt(done, 1000);
	msgpack_unpacked_destroy(&up);
	free(s);
}

/* The map walk gives each entry's key and value bytes exactly as
 * msgpack-c decodes them (each value unpacked again from its bytes), the
 * map's size after the last entry, and stops on bytes cut short. */
Test(kit_frame, map_walk_gives_each_entry_as_packed)
{
	uint32_t st = 4242;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked u, v;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_unpacked_init(&u);
	msgpack_unpacked_init(&v);
	for (int i = 0; i < 200; i++) {
		uint32_t n = i < 10 ? (uint32_t)i * 7 : rnd(&st) % 20;
		sb.size = 0;
		msgpack_pack_map(&pk, n);
		for (uint32_t j = 0; j < n; j++) {
			if (j % 5 == 4)
				msgpack_pack_int(&pk, (int)j);      /* a key that is no string */
			else {
				char k[40];
				int kl = snprintf(k, sizeof k, "key-%u-%s", j, j % 3 ? "" :
						  "long enough to need a str8 header");
				msgpack_pack_str_with_body(&pk, k, (size_t)kl);
			}
			pack_random(&pk, &st, 1);
		}
		size_t off = 0;
		cr_assert_eq(msgpack_unpack_next(&u, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
		kit_frame_map_t w;
		cr_assert(kit_frame_map_init(&w, sb.data, sb.size));
		cr_assert_eq(w.n, n);
		const char *key;
		const void *val;
		size_t klen, vlen;
		uint32_t j = 0;
		while (kit_frame_map_next(&w, &key, &klen, &val, &vlen)) {
			const msgpack_object_kv *kv = &u.data.via.map.ptr[j++];
			if (kv->key.type == MSGPACK_OBJECT_STR) {
				cr_assert(key && klen == kv->key.via.str.size &&
					  !memcmp(key, kv->key.via.str.ptr, klen));
			} else {
				cr_assert_null(key);
			}
			size_t voff = 0;
			cr_assert_eq(msgpack_unpack_next(&v, val, vlen, &voff), MSGPACK_UNPACK_SUCCESS);
			cr_assert_eq(voff, vlen);
			cr_assert(msgpack_object_equal(v.data, kv->val));
		}
		cr_assert_eq(j, n);
		cr_assert(!w.bad);
		cr_assert_eq(w.off, sb.size);
		if (n) {
			cr_assert(kit_frame_map_init(&w, sb.data, sb.size - 1));
			while (kit_frame_map_next(&w, &key, &klen, &val, &vlen))
				;
			cr_assert(w.bad, "a map cut short must not be walked to its end");
		}
	}
	cr_assert_not(kit_frame_map_init(&(kit_frame_map_t){ 0 }, "\x91\x80", 2));
	msgpack_unpacked_destroy(&v);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
}
