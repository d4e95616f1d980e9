#include "tests/fuzz/fuzz_targets.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "common/kit_frame.h"
#include "api/api_methods.h"
#include "api/api_rpc.h"
#include "common/kit_errors.h"
#include "manifest/mf.h"
#include "pod/pod_manifest.h"
#include "stack/stack_spec.h"
#include "store/st_codec.h"
#include "workflow/wf_spec.h"
#include "workflow/wf_tmpl.h"

static const char *const tf_methods[] = {
	"ping", "version", "apply", "delete", "get", "list", "status", "running",
	"restart", "nudge", "sync", "logs", "history", "up", "down",
	"workflow_status", "workflow_retry", "job_list", "job_log",
};
#define TF_NMETHODS (sizeof tf_methods / sizeof tf_methods[0])

int tf_frame(const uint8_t *data, size_t len)
{
	kit_frame_scan_t sc;
	size_t flen = 0, half = len / 2;
	kit_frame_status_t st;

	/* The server feeds what arrived; a frame often comes in pieces. */
	kit_frame_scan_init(&sc, 1 << 20, 32);
	st = kit_frame_scan(&sc, data, half, &flen);
	if (st != KIT_FRAME_DONE)
		st = kit_frame_scan(&sc, data, len, &flen);
	if (st != KIT_FRAME_DONE || sc.too_deep)
		return 0;
	msgpack_unpacked u;
	size_t off = 0;
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, (const char *)data, flen, &off) == MSGPACK_UNPACK_SUCCESS) {
		api_msg_t m;
		tank_error_t e;
		if (api_rpc_parse(&u.data, &m, &e) == 0 && m.type == API_REQUEST && m.params) {
			char name[32];
			if (m.method_len && m.method_len < sizeof name) {
				memcpy(name, m.method, m.method_len);
				name[m.method_len] = '\0';
				(void)api_methods_decode(name, m.params, &e);
			}
		}
	}
	msgpack_unpacked_destroy(&u);
	return 0;
}

int tf_params(const uint8_t *data, size_t len)
{
	if (len < 1)
		return 0;
	const char *method = tf_methods[data[0] % TF_NMETHODS];
	msgpack_unpacked u;
	size_t off = 0, flen = 0;
	kit_frame_scan_t sc;
	/* As the server: declared sizes and depth are checked before
	 * msgpack-c allocates for them (a declared array of 2^32 elements
	 * is refused, not allocated). */
	kit_frame_scan_init(&sc, 1 << 20, 32);
	if (kit_frame_scan(&sc, data + 1, len - 1, &flen) != KIT_FRAME_DONE || sc.too_deep)
		return 0;
	msgpack_unpacked_init(&u);
	/* What the server hands a method is an array (api_rpc_parse checks
	 * it); anything else is refused before. */
	if (msgpack_unpack_next(&u, (const char *)data + 1, flen, &off) ==
	    MSGPACK_UNPACK_SUCCESS && u.data.type == MSGPACK_OBJECT_ARRAY) {
		tank_error_t e;
		(void)api_methods_decode(method, &u.data, &e);
	}
	msgpack_unpacked_destroy(&u);
	return 0;
}

int tf_manifest(const uint8_t *data, size_t len)
{
	static const mf_registry_t reg = { .kinds = { &pod_mf_kind, &stack_mf_kind, &wf_task_mf,
						      &wf_stage_mf, &wf_workflow_mf }, .n = 5 };
	if (len < 1)
		return 0;
	const char *source = data[0] & 1 ? "fuzz.json" : "fuzz.yaml";
	mf_manifest_t *m = NULL;
	kit_errors_t errs;
	kit_errors_init(&errs);
	if (mf_parse(&reg, (const char *)data + 1, len - 1, source, &m, &errs) == 0)
		mf_free(m);
	kit_errors_free(&errs);
	return 0;
}

int tf_record(const uint8_t *data, size_t len)
{
	if (len < 1)
		return 0;
	const void *v = data + 1;
	size_t vl = len - 1;
	tank_error_t e;
	switch (data[0] % 5) {
	case 0: {
		st_pod_t p;
		memset(&p, 0, sizeof p);
		if (st__dec_pod(v, vl, "web", 3, &p, &e) == 0)
			st_pod_clear(&p);
		break;
	}
	case 1: {
		st_status_t s;
		memset(&s, 0, sizeof s);
		(void)st__dec_status(v, vl, "web", 3, &s, &e);
		st_status_clear(&s);
		break;
	}
	case 2: {
		st_transition_t t;
		(void)st__dec_transition(v, vl, "web", 3, &t, &e);
		break;
	}
	case 3: {
		uint64_t u;
		(void)st__dec_uint(v, vl, &u);
		break;
	}
	default: {
		stack_spec_t *s = NULL;
		if (stack_spec_decode(v, vl, &s, &e) == 0)
			stack_spec_free(s);
		break;
	}
	}
	return 0;
}

int tf_tmpl(const uint8_t *data, size_t len)
{
	static const char *const keys[] = { "k", "db", "" };
	static const char *const vals[] = { "v", "", "x" };
	wf_tmpl_ctx_t c = { "web", "migrate", "backup", keys, vals, 3 };
	tank_error_t e;
	char *out = NULL;
	size_t n;

	if (wf_tmpl_expand((const char *)data, len, &c, &out, &n, &e) == 0 &&
	    (strlen(out) > n || n > WF_TMPL_OUT_MAX))
		abort();                /* the length said is the length made */
	free(out);
	(void)wf_tmpl_check((const char *)data, len, &e);
	return 0;
}

const tf_target_t tf_targets[TF_NTARGETS] = {
	{ "frame", tf_frame },
	{ "params", tf_params },
	{ "manifest", tf_manifest },
	{ "record", tf_record },
	{ "tmpl", tf_tmpl },
};
