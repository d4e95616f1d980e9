/*
 * The pure parts of obs/: the Prometheus text writer's escaping and
 * histograms, msgpack to JSON, the growable buffer.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <msgpack.h>
#include <string.h>

#include "obs/obs_buf.h"
#include "obs/obs_json.h"
#include "obs/obs_prom.h"
#include "tests/obs/obs_t.h"

Test(obs_units, prom_escapes_help_and_label_values)
{
	obs_buf_t b = { 0 };

	obs_prom_head(&b, "x_total", "counter", "a \\ back\nslash");
	obs_prom_sample(&b, "x_total", (const char *const[]){ "name", "q\"uo\\te\nnl", "k", "v", NULL }, 3);
	obs_prom_sample(&b, "x_total", NULL, 0.25);
	obs_prom_sample(&b, "x_total", NULL, INFINITY);
	cr_assert_str_eq(b.p,
			 "# HELP x_total a \\\\ back\\nslash\n"
			 "# TYPE x_total counter\n"
			 "x_total{name=\"q\\\"uo\\\\te\\nnl\",k=\"v\"} 3\n"
			 "x_total 0.25\n"
			 "x_total +Inf\n");
	prom_t p;
	cr_assert(prom_parse(b.p, &p), "%s", p.err);
	cr_assert_eq(p.n, 3);
	cr_assert_eq(prom_get(&p, "x_total", (const char *const[]){ "k", "v", NULL }), 3);
	prom_free(&p);
	obs_buf_free(&b);
}

Test(obs_units, prom_histogram_is_cumulative)
{
	obs_buf_t b = { 0 };
	kit_hist_t h = { 0 };
	prom_t p;

	kit_hist_observe_ns(&h, 50000);         /* 50 µs */
	kit_hist_observe_ns(&h, 3000000);       /* 3 ms */
	kit_hist_observe_ns(&h, 20000000000u);  /* 20 s: +Inf */
	obs_prom_head(&b, "lat_seconds", "histogram", "h");
	obs_prom_hist(&b, "lat_seconds", (const char *const[]){ "type", "x", NULL }, &h);
	cr_assert(prom_parse(b.p, &p), "%s", p.err);
	cr_assert_eq(prom_get(&p, "lat_seconds_bucket", (const char *const[]){ "le", "0.0001", NULL }), 1);
	cr_assert_eq(prom_get(&p, "lat_seconds_bucket", (const char *const[]){ "le", "0.005", NULL }), 2);
	cr_assert_eq(prom_get(&p, "lat_seconds_bucket", (const char *const[]){ "le", "10", NULL }), 2);
	cr_assert_eq(prom_get(&p, "lat_seconds_bucket", (const char *const[]){ "le", "+Inf", NULL }), 3);
	cr_assert_eq(prom_get(&p, "lat_seconds_count", NULL), 3);
	cr_assert_float_eq(prom_get(&p, "lat_seconds_sum", NULL), 20.00305, 1e-9);
	prom_free(&p);
	obs_buf_free(&b);
}

Test(obs_units, the_parser_refuses_what_is_not_the_format)
{
	prom_t p;
	cr_assert_not(prom_parse("x 1\n", &p));                       /* no TYPE */
	cr_assert_not(prom_parse("# HELP x h\n# TYPE x gauge\nx{a=\"b} 1\n", &p));
	cr_assert_not(prom_parse("# HELP x h\n# TYPE x gauge\nx{a=\"\\q\"} 1\n", &p));
	cr_assert_not(prom_parse("# HELP x h\n# TYPE x gauge\nx one\n", &p));
	cr_assert_not(prom_parse("# HELP x h\n# TYPE x gauge\n# TYPE x gauge\n", &p));
	cr_assert(prom_parse("# HELP x h\n# TYPE x gauge\nx{a=\"\\\"\"} 1\n", &p), "%s", p.err);
	prom_free(&p);
}

Test(obs_units, msgpack_becomes_json)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	obs_buf_t b = { 0 };

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 6);
	msgpack_pack_str_with_body(&pk, "s", 1);
	msgpack_pack_str_with_body(&pk, "a\"b\\c\n\x01", 7);
	msgpack_pack_str_with_body(&pk, "n", 1);
	msgpack_pack_nil(&pk);
	msgpack_pack_str_with_body(&pk, "i", 1);
	msgpack_pack_int64(&pk, -42);
	msgpack_pack_str_with_body(&pk, "f", 1);
	msgpack_pack_double(&pk, NAN);
	msgpack_pack_str_with_body(&pk, "a", 1);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_true(&pk);
	msgpack_pack_uint64(&pk, 18446744073709551615u);
	msgpack_pack_int(&pk, 7);                 /* a key that is not a string */
	msgpack_pack_false(&pk);
	cr_assert_eq(obs_json_from_msgpack(&b, sb.data, sb.size), 0);
	cr_assert_str_eq(b.p, "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"n\":null,\"i\":-42,\"f\":null,"
			      "\"a\":[true,18446744073709551615],\"7\":false}");
	obs_buf_free(&b);
	cr_assert_eq(obs_json_from_msgpack(&b, "\xc1", 1), -EINVAL);
	obs_buf_free(&b);
	msgpack_sbuffer_destroy(&sb);
}

/* An emptied buffer gives a burst's memory back (an /events client's
 * queue after a storm of transitions) and keeps a small one. */
Test(obs_units, an_emptied_buffer_gives_a_bursts_memory_back)
{
	obs_buf_t b = { 0 };
	static char big[65536];

	memset(big, 'x', sizeof big);
	obs_buf_put(&b, big, sizeof big);
	cr_assert_geq(b.cap, sizeof big);
	obs_buf_consume(&b, 1000);
	cr_assert_eq(b.len, sizeof big - 1000);
	cr_assert_eq(b.p[0], 'x');
	obs_buf_consume(&b, b.len);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(b.cap, 0, "a 64 KiB buffer was kept empty");
	cr_assert_null(b.p);
	obs_buf_puts(&b, "data: {}\n\n");
	obs_buf_consume(&b, 4);
	cr_assert_str_eq(b.p, ": {}\n\n");
	obs_buf_consume(&b, 100);
	cr_assert_eq(b.len, 0);
	cr_assert_not_null(b.p, "a small buffer is kept for the next message");
	cr_assert_eq(b.p[0], '\0');
	obs_buf_free(&b);
}

/* The JSON writer's own number and string paths (no printf, a table of
 * what to escape): zero, the extremes, every control character, a quote
 * at either end, bytes above 0x7e copied as they are. */
Test(obs_units, json_numbers_and_escapes_at_the_edges)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	obs_buf_t b = { 0 };
	char ctl[32], want[32 * 6 + 64];
	size_t w = 0;

	for (int i = 0; i < 32; i++)
		ctl[i] = (char)i;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 6);
	msgpack_pack_uint64(&pk, 0);
	msgpack_pack_int64(&pk, INT64_MIN);
	msgpack_pack_int64(&pk, -1);
	msgpack_pack_str_with_body(&pk, ctl, sizeof ctl);
	msgpack_pack_str_with_body(&pk, "\"x\x7f\xc3\xa9\"", 6);
	msgpack_pack_str_with_body(&pk, "", 0);
	cr_assert_eq(obs_json_from_msgpack(&b, sb.data, sb.size), 0);
	w += (size_t)snprintf(want + w, sizeof want - w, "[0,-9223372036854775808,-1,\"");
	for (int i = 0; i < 32; i++) {
		const char *e = i == '\n' ? "\\n" : i == '\r' ? "\\r" : i == '\t' ? "\\t" : NULL;
		w += e ? (size_t)snprintf(want + w, sizeof want - w, "%s", e)
		       : (size_t)snprintf(want + w, sizeof want - w, "\\u%04x", i);
	}
	snprintf(want + w, sizeof want - w, "\",\"\\\"x\x7f\xc3\xa9\\\"\",\"\"]");
	cr_assert_str_eq(b.p, want);
	obs_buf_free(&b);
	msgpack_sbuffer_destroy(&sb);
}
