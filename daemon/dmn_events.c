/* dmn_events — a reconciler transition, a probe's news or the store's
 * state as an events-stream map. */
#include <errno.h>

#include "api/api_rpc.h"
#include "daemon/dmn_events.h"

/* nil rather than "" for an absent string: a subscriber can tell "no
 * container" (a pod transition) from a container named "". */
static int pack_str_or_nil(msgpack_packer *pk, const char *s)
{
	return s ? api_pack_cstr(pk, s) : msgpack_pack_nil(pk);
}

/* What every pod event starts with (type, pod, container) and ends with
 * (at, generation, uid). */
static int pack_head(msgpack_packer *pk, size_t keys, const char *type, const pod_event_t *ev)
{
	int rc = msgpack_pack_map(pk, keys);
	rc |= api_pack_cstr(pk, "type");
	rc |= api_pack_cstr(pk, type);
	rc |= api_pack_cstr(pk, "pod");
	rc |= pack_str_or_nil(pk, ev->pod);
	rc |= api_pack_cstr(pk, "container");
	rc |= pack_str_or_nil(pk, ev->container);
	return rc;
}

static int pack_tail(msgpack_packer *pk, const pod_event_t *ev)
{
	int rc = api_pack_cstr(pk, "at");
	rc |= msgpack_pack_int64(pk, ev->at);
	rc |= api_pack_cstr(pk, "generation");
	rc |= msgpack_pack_uint64(pk, ev->generation);
	rc |= api_pack_cstr(pk, "uid");
	rc |= pack_str_or_nil(pk, ev->uid && ev->uid[0] ? ev->uid : NULL);
	return rc;
}

/* from, to, reason: what every transition of any kind carries. */
static int pack_change(msgpack_packer *pk, const char *from, const char *to, const char *reason)
{
	int rc = api_pack_cstr(pk, "from");
	rc |= pack_str_or_nil(pk, from);
	rc |= api_pack_cstr(pk, "to");
	rc |= pack_str_or_nil(pk, to);
	rc |= api_pack_cstr(pk, "reason");
	rc |= pack_str_or_nil(pk, reason);
	return rc;
}

int dmn_event_pack(msgpack_packer *pk, const pod_event_t *ev)
{
	int rc;

	if (ev->probe) {
		/* {type: "probe", pod, container, result, ready, at, generation, uid} */
		rc = pack_head(pk, 8, "probe", ev);
		rc |= api_pack_cstr(pk, "result");
		rc |= api_pack_cstr(pk, ev->probe);
		rc |= api_pack_cstr(pk, "ready");
		rc |= ev->ready ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	} else {
		rc = pack_head(pk, DMN_EVENT_TRANSITION_KEYS, "transition", ev);
		rc |= pack_change(pk, ev->from, ev->to, ev->reason);
	}
	rc |= pack_tail(pk, ev);
	/* msgpack-c's packers fail only when the write callback does, and
	 * the sbuffer's only failure is a failed realloc. */
	return rc ? -ENOMEM : 0;
}

int dmn_event_pack_store(msgpack_packer *pk, bool failing, const char *reason,
			 uint64_t failures, int64_t at)
{
	int rc = msgpack_pack_map(pk, 5);

	rc |= api_pack_cstr(pk, "type");
	rc |= api_pack_cstr(pk, "store");
	rc |= api_pack_cstr(pk, "state");
	rc |= api_pack_cstr(pk, failing ? "failing" : "ok");
	rc |= api_pack_cstr(pk, "reason");
	rc |= pack_str_or_nil(pk, reason);
	rc |= api_pack_cstr(pk, "failures");
	rc |= msgpack_pack_uint64(pk, failures);
	rc |= api_pack_cstr(pk, "at");
	rc |= msgpack_pack_int64(pk, at);
	return rc ? -ENOMEM : 0;
}
