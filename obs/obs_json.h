/*
 * obs_json — msgpack to JSON, for the web side of tankd (the events on
 * /events, the page's snapshots).  The mapping is the obvious one: nil
 * null, booleans, integers, floats (a NaN or an infinity is null: JSON
 * has neither), strings and bin as strings (escaped: quote, backslash
 * and every control character; bytes >= 0x80 pass as they are, the
 * daemon's strings are UTF-8), arrays, maps (a key that is not a string
 * is written as a string of its JSON).  ext is null.  Pure.
 */
#ifndef TANK_OBS_JSON_H
#define TANK_OBS_JSON_H

#include <msgpack.h>

#include "obs/obs_buf.h"

void obs_json_write(obs_buf_t *b, const msgpack_object *o);
/* A JSON string of s (n bytes), quotes included. */
void obs_json_str(obs_buf_t *b, const char *s, size_t n);
/* The packed msgpack object in data (len bytes) as JSON: 0, or -EINVAL
 * when it does not unpack. */
int obs_json_from_msgpack(obs_buf_t *b, const char *data, size_t len);

#endif
