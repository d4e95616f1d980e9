/* dmn_events — the store's state as an events-stream map. */
#include <errno.h>

#include "api/api_rpc.h"
#include "daemon/dmn_events.h"

/* nil rather than "" for an absent string: a subscriber can tell "no
 * container" (a pod transition) from a container named "". */
static int pack_str_or_nil(msgpack_packer *pk, const char *s)
{
	return s ? api_pack_cstr(pk, s) : msgpack_pack_nil(pk);
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
