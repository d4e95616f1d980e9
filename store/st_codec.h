/*
 * st_codec — msgpack encoding of the store's records (internal to store/).
 *
 * Every record is a msgpack map with string keys.  Decoders ignore keys
 * they do not know and leave missing fields at their zero default; a value
 * that is not msgpack, not a map, or has a known key of the wrong type is
 * rejected with TANK_ECORRUPT and a message naming the record:
 * `status record "web": corrupt msgpack`.  Encoding uses msgpack-c's
 * packer; decoding a small pull reader of the wire format (st_codec.c says
 * why).
 *
 * Encoders append to a caller-owned msgpack_sbuffer (reset it between
 * records by setting size to 0) and return 0 or -ENOMEM.  Decoders
 * allocate only what the output owns and never keep pointers into the
 * input.  None of them blocks.
 */
#ifndef TANK_ST_CODEC_H
#define TANK_ST_CODEC_H

#include <msgpack.h>

#include "store/st.h"

int st__enc_pod(msgpack_sbuffer *b, const st_pod_t *p);
/* out->spec is malloc'ed on success. */
int st__dec_pod(const void *buf, size_t len, const char *key, size_t keylen,
		st_pod_t *out, tank_error_t *err);
/* The same, with borrow: out->spec then points into buf (no copy, nothing
 * to free) and is valid only as long as buf is. */
int st__dec_pod_ex(const void *buf, size_t len, const char *key, size_t keylen,
		   st_pod_t *out, bool borrow, tank_error_t *err);

int st__enc_status(msgpack_sbuffer *b, const st_status_t *s);
/* out must be zeroed or cleared; out->containers is malloc'ed. */
int st__dec_status(const void *buf, size_t len, const char *key,
		   size_t keylen, st_status_t *out,
		   tank_error_t *err);

/* hkey: the key of the history the entry is written into (its key field
 * is left out when the same).  The decoder leaves seq, and key when left
 * out, to the reader (st_coll_history fills them from the LMDB key). */
int st__enc_transition(msgpack_sbuffer *b, const st_transition_t *t,
		       const char *hkey, size_t hkeylen);
int st__dec_transition(const void *buf, size_t len, const char *key,
		       size_t keylen, st_transition_t *out,
		       tank_error_t *err);

int st__enc_uint(msgpack_sbuffer *b, uint64_t v);
int st__dec_uint(const void *buf, size_t len, uint64_t *v);

/* Copies src (length n) into dst of size cap, truncating; NUL-terminates. */
void st__strlcpy(char *dst, size_t cap, const char *src, size_t n);
/* Writes a printable rendering of a key (non-printables as \xNN, cut to a
 * sane length) into dst for error messages. */
void st__key_repr(char *dst, size_t cap, const void *key, size_t keylen);

#endif
