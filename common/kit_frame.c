/*
 * kit_frame.c — the frame scanner (see kit_frame.h).
 */
#include "common/kit_frame.h"

#include <errno.h>

#include <string.h>

/* Frames are capped well below where pos + pending + a declared size
 * could overflow 64 bits (sizes are < 2^34 each). */
#define API__FRAME_CAP_MAX ((uint64_t)1 << 62)

void kit_frame_scan_init(kit_frame_scan_t *s, size_t max_frame, unsigned max_depth)
{
	/* Only the header fields: the stack is written before it is read. */
	memset(s, 0, offsetof(kit_frame_scan_t, stack));
	s->max_frame = (uint64_t)max_frame < API__FRAME_CAP_MAX ?
		       (uint64_t)max_frame : API__FRAME_CAP_MAX;
	s->max_depth = max_depth;
	s->deep_elem = UINT64_MAX;
}

static uint64_t kit_frame__be(const unsigned char *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* One header: its size in bytes (0: the byte is not msgpack), and either
 * the payload skipped after it or the elements of the container it opens. */
typedef struct kit_frame__hdr {
	size_t size;
	uint64_t payload;
	uint64_t elems;
	bool container;
} kit_frame__hdr_t;

/* Size of the header starting with byte b, without reading further. */
static size_t kit_frame__hdr_size(unsigned char b)
{
	if (b <= 0xbf || b >= 0xe0)
		return 1;           /* fixint, fixmap, fixarray, fixstr, negfixint */
	switch (b) {
	case 0xc0: case 0xc2: case 0xc3: return 1;
	case 0xc4: case 0xd9: return 2;              /* bin8, str8: len8 */
	case 0xc5: case 0xda: case 0xdc: case 0xde: return 3;
	case 0xc6: case 0xdb: case 0xdd: case 0xdf: return 5;
	case 0xc7: return 3;                          /* ext8: len8 type */
	case 0xc8: return 4;
	case 0xc9: return 6;
	case 0xca: case 0xce: case 0xd2: return 5;    /* 4-byte scalars */
	case 0xcb: case 0xcf: case 0xd3: return 9;
	case 0xcc: case 0xd0: return 2;
	case 0xcd: case 0xd1: return 3;
	case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
		return 2;                             /* fixext: type */
	default:
		return 0;                             /* 0xc1 */
	}
}

/* Decodes the header at p (all h->size bytes present). */
static void kit_frame__hdr_read(const unsigned char *p, kit_frame__hdr_t *h)
{
	unsigned char b = p[0];

	h->payload = h->elems = 0;
	h->container = false;
	if (b >= 0x80 && b <= 0x8f) {
		h->container = true;
		h->elems = 2u * (b & 0x0f);
	} else if (b >= 0x90 && b <= 0x9f) {
		h->container = true;
		h->elems = b & 0x0f;
	} else if (b >= 0xa0 && b <= 0xbf) {
		h->payload = b & 0x1f;
	} else switch (b) {
	case 0xc4: case 0xc5: case 0xc6:              /* bin */
	case 0xd9: case 0xda: case 0xdb:              /* str */
		h->payload = kit_frame__be(p + 1, h->size - 1);
		break;
	case 0xc7: case 0xc8: case 0xc9:              /* ext: len, then type */
		h->payload = kit_frame__be(p + 1, h->size - 2);
		break;
	case 0xd4: h->payload = 1; break;
	case 0xd5: h->payload = 2; break;
	case 0xd6: h->payload = 4; break;
	case 0xd7: h->payload = 8; break;
	case 0xd8: h->payload = 16; break;
	case 0xdc: case 0xdd:
		h->container = true;
		h->elems = kit_frame__be(p + 1, h->size - 1);
		break;
	case 0xde: case 0xdf:
		h->container = true;
		h->elems = 2 * kit_frame__be(p + 1, h->size - 1);
		break;
	default:
		break;                                /* fixed-size scalar */
	}
}

kit_frame_status_t kit_frame_scan(kit_frame_scan_t *s, const void *buf,
				  size_t len, size_t *frame_len)
{
	const unsigned char *p = buf;

	for (;;) {
		if (s->started && !s->nstack) {
			/* The root is complete once its last payload is in. */
			if (s->pos > len)
				return KIT_FRAME_MORE;
			*frame_len = (size_t)s->pos;
			return KIT_FRAME_DONE;
		}
		if (s->pos >= len)
			return KIT_FRAME_MORE;
		kit_frame__hdr_t h = { .size = kit_frame__hdr_size(p[s->pos]) };
		if (!h.size)
			return KIT_FRAME_INVALID;
		/* Nothing changes until the whole header is here, so the next
		 * call starts over at the same header. */
		if (len - s->pos < h.size)
			return KIT_FRAME_MORE;
		kit_frame__hdr_read(p + s->pos, &h);

		/* This value is the next element of the innermost open
		 * container.  A container is closed as its last element starts
		 * (nothing follows it there), which keeps [[[…]]] in one slot. */
		uint64_t level = 0;   /* containers around this value */
		if (!s->started) {
			s->started = true;
		} else {
			size_t t = s->nstack - 1;
			level = s->stack[t].level;
			if (level == 1)
				s->top_elem = s->top_count - s->stack[t].left;
			s->pending--;
			if (!--s->stack[t].left)
				s->nstack--;
		}
		/* Every pending element takes at least one more byte, so the
		 * declared sizes alone can prove the frame too big: nothing is
		 * buffered, let alone allocated, for an array32 of 2^31. */
		if (s->pos + h.size + h.payload + s->pending + h.elems > s->max_frame)
			return KIT_FRAME_TOO_BIG;
		s->pos += h.size + h.payload;
		if (!h.container)
			continue;
		if (level + 1 > s->depth)
			s->depth = level + 1;
		if (level + 1 > s->max_depth && !s->too_deep) {
			s->too_deep = true;
			s->deep_elem = level ? s->top_elem : UINT64_MAX;
		}
		if (!h.elems)
			continue;
		if (s->nstack == KIT_FRAME_STACK)
			return KIT_FRAME_TOO_NESTED;
		s->stack[s->nstack].left = h.elems;
		s->stack[s->nstack].level = level + 1;
		s->nstack++;
		s->pending += h.elems;
		if (!level)
			s->top_count = h.elems;
	}
}

int kit_frame_check(const void *buf, size_t len)
{
	kit_frame_scan_t s;
	size_t flen = 0;

	kit_frame_scan_init(&s, len, KIT_FRAME_MAX_DEPTH);
	if (kit_frame_scan(&s, buf, len, &flen) != KIT_FRAME_DONE || s.too_deep || flen != len)
		return -EPROTO;
	return 0;
}

int kit_frame_unpack(const void *buf, size_t len, msgpack_unpacked *u)
{
	size_t off = 0;

	msgpack_unpacked_init(u);
	if (kit_frame_check(buf, len) < 0 ||
	    msgpack_unpack_next(u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS)
		return -EPROTO;
	return 0;
}

/* ---- a map's entries, walked ------------------------------------------------------ */

/* The size of the one object at p[0..len), or 0 when it is not whole. */
static size_t kit_frame__obj_len(const unsigned char *p, size_t len)
{
	kit_frame__hdr_t h;
	kit_frame_scan_t s;
	size_t n = 0;

	if (!len || !(h.size = kit_frame__hdr_size(p[0])) || h.size > len)
		return 0;
	kit_frame__hdr_read(p, &h);
	/* A scalar or a string is its header and payload: the scanner's
	 * state only for a container. */
	if (!h.container)
		return h.payload <= len - h.size ? h.size + (size_t)h.payload : 0;
	kit_frame_scan_init(&s, len, KIT_FRAME_STACK);
	return kit_frame_scan(&s, p, len, &n) == KIT_FRAME_DONE ? n : 0;
}

bool kit_frame_map_init(kit_frame_map_t *w, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	kit_frame__hdr_t h;

	memset(w, 0, sizeof *w);
	w->p = p;
	w->len = len;
	if (!len || !((p[0] >= 0x80 && p[0] <= 0x8f) || p[0] == 0xde || p[0] == 0xdf))
		return false;
	if ((h.size = kit_frame__hdr_size(p[0])) > len)
		return false;
	kit_frame__hdr_read(p, &h);
	w->body = w->off = h.size;
	w->n = w->left = h.elems / 2;
	return true;
}

bool kit_frame_map_next(kit_frame_map_t *w, const char **key, size_t *klen, const void **val,
			size_t *vlen)
{
	if (!w->left || w->bad)
		return false;
	const unsigned char *k = w->p + w->off;
	size_t rest = w->len - w->off;
	size_t kn = kit_frame__obj_len(k, rest);
	size_t vn = kn ? kit_frame__obj_len(k + kn, rest - kn) : 0;
	if (!vn) {
		w->bad = true;
		return false;
	}
	*key = NULL;
	*klen = 0;
	if ((k[0] >= 0xa0 && k[0] <= 0xbf) || k[0] == 0xd9 || k[0] == 0xda || k[0] == 0xdb) {
		size_t hs = kit_frame__hdr_size(k[0]);
		*key = (const char *)k + hs;
		*klen = kn - hs;
	}
	*val = k + kn;
	*vlen = vn;
	w->off += kn + vn;
	w->left--;
	return true;
}
