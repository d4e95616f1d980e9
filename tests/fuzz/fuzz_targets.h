/*
 * fuzz_targets — the input surfaces of tankd, one function each, shared by
 * the libFuzzer programs (tests/fuzz/driver, `make fuzz`) and the replay of
 * the corpus and every input that once failed (tests/fuzz/test_fuzz_replay.c,
 * part of `make test`).
 *
 * Each takes any bytes, must return (never crash, never leak, never trip
 * a sanitizer) and returns 0.  Nothing here touches the disk or the
 * network.
 */
#ifndef TANK_TESTS_FUZZ_TARGETS_H
#define TANK_TESTS_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

/* An RPC frame as read from the socket: the scanner fed the bytes in two
 * pieces, then msgpack-c, the request parser, and the method's param
 * decoder when it is a request. */
int tf_frame(const uint8_t *data, size_t len);
/* One method's params: byte 0 picks the method, the rest is msgpack. */
int tf_params(const uint8_t *data, size_t len);
/* A manifest file: byte 0 picks YAML or JSON, the rest is the text. */
int tf_manifest(const uint8_t *data, size_t len);
/* A stored record: byte 0 picks the decoder (pod, status, transition,
 * schema number), the rest is the value. */
int tf_record(const uint8_t *data, size_t len);

/* A task's template: expanded for a fixed context, then checked. */
int tf_tmpl(const uint8_t *data, size_t len);

typedef struct tf_target {
	const char *name;
	int (*fn)(const uint8_t *data, size_t len);
} tf_target_t;

#define TF_NTARGETS 5
extern const tf_target_t tf_targets[TF_NTARGETS];

#endif
