/*
 * kit_frame — finds where one msgpack object ends in a byte stream, before
 * anything is decoded.
 *
 * msgpack-RPC has no length prefix: a frame is one msgpack object.  The
 * server used to hand the raw stream to msgpack-c's unpacker, which
 *   - stops with a parse error at its fixed nesting limit
 *     (MSGPACK_EMBED_STACK_SIZE), so a deep but valid request closed the
 *     connection without a word (the stream cannot be resynchronised once
 *     the unpacker gave up);
 *   - trusts declared sizes: an array32 header of 2^31 elements makes it
 *     allocate 2^31 objects before a single element arrived.
 * This scanner walks the headers only (payloads are skipped by length),
 * iteratively, with a fixed-size stack and no allocation.  It yields the
 * frame's exact length and its nesting depth, and checks every declared
 * size against the frame cap as soon as the header arrives (each pending
 * element takes at least one byte).  The server then answers a frame that
 * is too deep by its msgid and drops exactly its bytes, and gives msgpack-c
 * only complete frames it can decode.
 *
 * Resumable: feed it the growing buffer that starts at the frame (the same
 * bytes again plus what arrived); work already done is not repeated, so a
 * big frame arriving in small pieces costs linear time.
 */
#ifndef TANK_KIT_FRAME_H
#define TANK_KIT_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>
/* MSGPACK_EMBED_STACK_SIZE: not pulled in by msgpack.h */
#include <msgpack/unpack_define.h>

/*
 * Deepest message tank decodes, counted in containers: [] is 1, a
 * request [0, id, "m", []] is 2.  It is msgpack-c's own limit (the C
 * unpacker keeps a fixed stack of MSGPACK_EMBED_STACK_SIZE open
 * containers and fails past it), so every frame that passes the scanner
 * decodes, and the client decodes everything the server may send back.
 * A request's params may therefore nest KIT_FRAME_MAX_DEPTH - 1 levels.
 */
#define KIT_FRAME_MAX_DEPTH MSGPACK_EMBED_STACK_SIZE

/* Containers the scanner can keep open.  A container whose last element is
 * being read needs no slot (nothing follows it), so [[[[…]]]] of any depth
 * costs one; only containers with elements still to come after a nested
 * one do.  128 is far past KIT_FRAME_MAX_DEPTH, so a too-deep frame can still be
 * skipped to its end and the connection kept in all but hostile cases. */
#define KIT_FRAME_STACK 128

typedef enum kit_frame_status {
	KIT_FRAME_MORE = 0,   /* incomplete: call again with more bytes */
	KIT_FRAME_DONE,       /* complete: *frame_len bytes (depth in the scan) */
	KIT_FRAME_TOO_BIG,    /* declared or actual size passes max_frame */
	KIT_FRAME_INVALID,    /* byte 0xc1: not msgpack, no way to resync */
	KIT_FRAME_TOO_NESTED, /* more open containers than KIT_FRAME_STACK: the
			       * end cannot be found with bounded memory */
} kit_frame_status_t;

typedef struct kit_frame_scan {
	uint64_t max_frame;
	uint64_t pos;         /* bytes of the frame walked; may pass what has
			       * arrived while a payload is skipped */
	uint64_t pending;     /* elements declared, not started (>= 1 byte each) */
	uint64_t depth;       /* deepest container level seen */
	uint64_t top_count;   /* elements of the root container */
	uint64_t top_elem;    /* index of the root's element being read */
	uint64_t deep_elem;   /* root element in which depth first passed
			       * max_depth (UINT64_MAX: the root itself) */
	unsigned max_depth;
	bool started;
	bool too_deep;        /* depth > max_depth */
	size_t nstack;
	struct {
		uint64_t left;    /* elements not started yet */
		uint64_t level;   /* container level of those elements' parent */
	} stack[KIT_FRAME_STACK];
} kit_frame_scan_t;

/* Starts a frame.  max_frame: the cap on its size in bytes; max_depth:
 * the depth past which too_deep is set (the walk goes on to the end). */
void kit_frame_scan_init(kit_frame_scan_t *s, size_t max_frame, unsigned max_depth);

/*
 * Walks buf[0..len), the frame's bytes so far (len never shrinks between
 * calls for one frame).  On KIT_FRAME_DONE *frame_len is the frame's size
 * (<= len); the scan must then be re-initialised for the next frame.
 * TOO_BIG, INVALID and TOO_NESTED are final for the stream.
 */
kit_frame_status_t kit_frame_scan(kit_frame_scan_t *s, const void *buf,
				  size_t len, size_t *frame_len);

/* Whether buf[0..len) is exactly one msgpack object that msgpack-c can
 * decode without trusting a declared size: no deeper than
 * KIT_FRAME_MAX_DEPTH, no declared count or length past len.  For bytes
 * read back from disk (a corrupt record must be an error, not a 2^31
 * element allocation).  0, or -EPROTO. */
int kit_frame_check(const void *buf, size_t len);

/* kit_frame_check, then msgpack-c's unpack of the one object into u,
 * which is initialised either way (the caller destroys it).  0, or
 * -EPROTO. */
int kit_frame_unpack(const void *buf, size_t len, msgpack_unpacked *u);

/* A walk of one packed map's entries without decoding them (stored
 * bytes read often: a spec's `labels`, a status stored in its answer's
 * shape), so that a caller copies the bytes it wants as they are.
 * Borrows buf for the walk. */
typedef struct kit_frame_map {
	const unsigned char *p;
	size_t len;
	size_t body;          /* where the entries start (after the header) */
	size_t off;           /* where the next entry starts */
	uint64_t n;           /* entries declared */
	uint64_t left;        /* entries not walked yet */
	bool bad;             /* an entry was not whole within len */
} kit_frame_map_t;

/* Starts a walk of the map at the start of buf[0..len): false when buf
 * does not start with a map header. */
bool kit_frame_map_init(kit_frame_map_t *w, const void *buf, size_t len);

/* The next entry: its key's string bytes in *key and *klen (*key NULL
 * for a key that is not a string) and its value's packed bytes in *val
 * and *vlen, all borrowed from buf.  false at the end, or when an entry
 * is not whole within len (w->bad set; nested past KIT_FRAME_STACK
 * counts as not whole).  After the last entry, w->off is the map's
 * size. */
bool kit_frame_map_next(kit_frame_map_t *w, const char **key, size_t *klen, const void **val,
			size_t *vlen);

#endif
